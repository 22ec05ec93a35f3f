"""What runs one attempt of a task: the `Executor` seam (base.py) and its implementations."""
