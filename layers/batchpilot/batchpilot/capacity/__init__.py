"""Service-environment capacity that follows demand: settings, sampling, policy, runs.

- :mod:`~batchpilot.capacity.settings`: the configuration (bounds per environment, floors).
- :mod:`~batchpilot.capacity.model`: what is read from AWS Batch (plain data, pure).
- :mod:`~batchpilot.capacity.sampling`: queue and environment figures and their EMF gauges (pure).
- :mod:`~batchpilot.capacity.policy`: the pure decision (stabilisation window, cooldown, step).
- :mod:`~batchpilot.capacity.ports`: the Protocols the AWS adapters implement.
- :mod:`~batchpilot.capacity.service`: one run over the managed environments, through the ports.
- :mod:`~batchpilot.capacity.handler`: the Lambda entry work (schedule, SQS batches): logs, counts.
"""
