"""Recovery: resubmit jobs that AWS Batch (or SageMaker) gave up on, so they resume from their
checkpoint, once per failure, within budgets.

Modules (none imports boto3; AWS is reached through :mod:`~batchpilot.recovery.ports`, implemented
in :mod:`batchpilot.io`):

- :mod:`~batchpilot.recovery.handler`: the record handler (count and log one SQS record).
- :mod:`~batchpilot.recovery.service`: the flow for one failure (:class:`Recoverer`): gather, act.
- :mod:`~batchpilot.recovery.policy`: the decision table, one pure function (``decide``).
- :mod:`~batchpilot.recovery.ports`: the interfaces the adapters implement.
- :mod:`~batchpilot.recovery.settings`: configuration (``BATCHPILOT_*`` variables).
- :mod:`~batchpilot.recovery.snapshot`: a failed job as AWS describes it.
- :mod:`~batchpilot.recovery.requests`: Describe* response → Submit*/Create* request.
- :mod:`~batchpilot.recovery.naming`: lineage ids, deterministic names, client tokens, tags.
- :mod:`~batchpilot.recovery.checkpoint`: checkpoint location, freshness, lost instance-hours.
- :mod:`~batchpilot.recovery.lineage`: lineage records.
- :mod:`~batchpilot.recovery.pacing`: backoff and the submit rate limit.
"""
