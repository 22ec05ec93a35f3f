"""Spec audits: static checks (no model) and the auditor agent."""
