"""batchpilot.alerts.channels."""
