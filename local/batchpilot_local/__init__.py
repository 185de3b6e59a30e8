"""Local tooling for batchpilot (never shipped in the Lambda layer): the replay runner, the embedded
AWS it runs against, and test helpers."""
