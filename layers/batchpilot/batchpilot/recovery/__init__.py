"""Recovery: resubmit jobs that AWS Batch (or SageMaker) gave up on, so they resume from their
checkpoint, once per failure, within budgets.

Modules (all pure; only :mod:`batchpilot.adapters` talks to AWS):

- :mod:`~batchpilot.recovery.settings`: configuration (``BATCHPILOT_*`` variables).
- :mod:`~batchpilot.recovery.policy`: the decision table.
- :mod:`~batchpilot.recovery.snapshot`: a failed job as AWS describes it.
- :mod:`~batchpilot.recovery.requests`: Describe* response → Submit*/Create* request.
- :mod:`~batchpilot.recovery.naming`: lineage ids, deterministic names, client tokens, tags.
- :mod:`~batchpilot.recovery.checkpoint`: checkpoint location, freshness, lost instance-hours.
- :mod:`~batchpilot.recovery.lineage`: lineage records and the exactly-once plan.
- :mod:`~batchpilot.recovery.pacing`: backoff and the submit rate limit.
- :mod:`~batchpilot.recovery.service`: the flow for one SQS record (:class:`Recoverer`).
"""
