"""Names from ARNs. AWS ARN format (AWS General Reference, "Amazon Resource Names"):
``arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE-TYPE/NAME``, e.g. a Batch job queue
``arn:aws:batch:us-east-1:111122223333:job-queue/NAME`` or a SageMaker training job
``arn:aws:sagemaker:us-east-1:111122223333:training-job/NAME``."""

from __future__ import annotations

__all__ = ["resource_name"]


def resource_name(arn: str | None) -> str | None:
    """The last path segment of an ARN (a job queue, service environment, job id or training-job
    name); a bare name is returned as it is; ``None`` or an empty name gives ``None``."""
    if not arn:
        return None
    return arn.rsplit("/", 1)[-1] or None
