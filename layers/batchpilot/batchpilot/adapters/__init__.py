"""Adapters: the only modules that write to the outside world (stdout EMF, AWS, Slack)."""
