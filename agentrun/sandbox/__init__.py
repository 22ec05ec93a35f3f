"""Where commands run: the `Sandbox` seam (base.py) and its implementations."""
