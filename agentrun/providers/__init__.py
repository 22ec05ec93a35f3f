"""Model providers. Importing this package imports no model SDK."""
