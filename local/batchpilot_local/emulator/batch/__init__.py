"""Emulated AWS Batch: service environments, job queues, service jobs and container jobs
(:mod:`.models`), their REST-JSON wire format (:mod:`.responses`), errors (:mod:`.exceptions`)
and pure helpers (:mod:`.utils`)."""
