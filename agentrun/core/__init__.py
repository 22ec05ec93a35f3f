"""The bottom of the package graph: the vocabulary every room shares.

Statuses (`status`), how work ended (`results`), tokens and their cost (`usage`), the limits of
a worker (`limits`), errors and exit codes (`errors`), secrets (`secrets`), the one way state
files are written (`fsutil`) and every event of a run (`events`). Nothing here imports another
part of agentrun, so any module may import it without making a cycle (docs/ARCHITECTURE.md).
"""
