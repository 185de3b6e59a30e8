"""batchpilot.shared."""
