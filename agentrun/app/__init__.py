"""The use cases below the CLI: what `run`, `fix`, `worker` and `aggregate` do, given a typed
request (`requests.py`), independent of how their arguments were parsed or their results shown.

`agentrun/cli/` parses arguments into a request's flags, calls one use case here, and renders
what it returns (docs/ARCHITECTURE.md, "The packages and their seams"). Importing this package
is cheap: the modules import the heavy parts of agentrun inside their functions.
"""
