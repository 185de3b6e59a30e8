"""batchpilot.metrics."""
