"""batchpilot.io.dynamodb."""
