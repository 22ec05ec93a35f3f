"""agentrun: spec-driven, orchestrated execution of coding work by LLM agents."""

__version__ = "0.1.0"
