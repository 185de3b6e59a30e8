"""batchpilot.io."""
