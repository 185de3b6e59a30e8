"""Service-environment capacity that follows demand: settings, sampling, policy and one run.

- :mod:`~batchpilot.capacity.settings`: the configuration (bounds per environment, floors).
- :mod:`~batchpilot.capacity.model`: what is read from AWS Batch; payload demand parsing.
- :mod:`~batchpilot.capacity.sampling`: queue and environment figures and their EMF gauges.
- :mod:`~batchpilot.capacity.policy`: the pure decision (stabilisation window, cooldown, step).
- :mod:`~batchpilot.capacity.service`: one run over the managed environments, adapters injected.
"""
