"""`agentrun review`: an independent reviewer judges a run's result against its spec."""
