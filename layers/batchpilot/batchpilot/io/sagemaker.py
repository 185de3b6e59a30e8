"""Amazon SageMaker, through an injected boto3 ``sagemaker`` client: standalone training jobs for the
recovery function (:class:`TrainingJobs`, its :class:`batchpilot.recovery.ports.JobGateway`
of training jobs that AWS Batch did not create).

- ``describe``: DescribeTrainingJob + ListTags (paginated); a job SageMaker no longer knows is None.
- ``submit``: CreateTrainingJob; on a repeat, or when the name is taken, DescribeTrainingJob of that
  name (names are deterministic, so a taken name is the job an earlier call created).

Throttling and transient errors are retried by botocore's standard retry mode (the client comes
from :func:`batchpilot.io.clients.client`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batchpilot.recovery.ports import SubmitError, TagError
from batchpilot.recovery.requests import Operation, RebuiltRequest, Shape
from batchpilot.recovery.snapshot import JobSnapshot, training_job_snapshot
from batchpilot.shared.arns import resource_name
from batchpilot.shared.classification import JobFacts, JobKind
from batchpilot.shared.events import JobEvent

__all__ = ["TrainingJobs"]

_NOT_FOUND_CODES = ("ValidationException", "ResourceNotFound")
"""What DescribeTrainingJob answers for a name it does not know (with "not found" in the message)."""
_NAME_TAKEN_CODES = ("ValidationException", "ResourceInUse")
"""What CreateTrainingJob answers for a name already taken (with "unique" in the message)."""


def _error(exc: ClientError) -> tuple[str, str, int]:
    """AWS's error code, message and HTTP status of a SageMaker API error."""
    info = exc.response.get("Error", {})
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return str(info.get("Code") or "Unknown"), str(info.get("Message") or ""), status


class TrainingJobs:
    """What the recovery function asks of SageMaker.

    Args:
        client: a boto3 ``sagemaker`` client (``batchpilot.io.clients.client("sagemaker")``).
    """

    kinds = frozenset({JobKind.TRAINING_JOB})

    def __init__(self, client: Any) -> None:
        self._client = client

    def describe(self, event: JobEvent, facts: JobFacts) -> JobSnapshot | None:
        """The training job as SageMaker describes it (DescribeTrainingJob) with its tags
        (ListTags, every page); None when SageMaker no longer knows it.

        Raises:
            botocore.exceptions.ClientError: anything but "not found" (e.g. AccessDenied).
        """
        name = facts.name or resource_name(facts.arn) or facts.arn
        try:
            described = self._client.describe_training_job(TrainingJobName=name)
        except ClientError as exc:
            code, message, _ = _error(exc)
            if code in _NOT_FOUND_CODES and "not found" in message.lower():
                return None
            raise
        described = {k: v for k, v in described.items() if k != "ResponseMetadata"}
        arn = described.get("TrainingJobArn") or facts.arn
        tags: list[dict[str, Any]] = []
        for page in self._client.get_paginator("list_tags").paginate(ResourceArn=arn):
            tags.extend(page.get("Tags") or [])
        return training_job_snapshot(event, described, tags)

    def input_shape(self, operation: Operation) -> Shape:
        """botocore's input shape of ``sagemaker:CreateTrainingJob``."""
        shape: Shape = self._client.meta.service_model.operation_model(operation.name_in_api).input_shape
        return shape

    def submit(self, request: RebuiltRequest, *, resume: bool) -> str:
        """``CreateTrainingJob``; returns the new training job's ARN (the existing one when
        ``resume`` finds it, or when the name is already taken).

        Raises:
            SubmitError: SageMaker refused it (``transient`` for throttling and server errors).
            ValueError: not ``sagemaker:CreateTrainingJob``.
        """
        if request.operation is not Operation.CREATE_TRAINING_JOB:
            raise ValueError(f"not a SageMaker operation: {request.operation}")
        try:
            existing = self._training_job_named(request.new_job_name) if resume else None
            if existing:
                return existing
            try:
                return str(self._client.create_training_job(**request.request)["TrainingJobArn"])
            except ClientError as exc:
                code, message, _ = _error(exc)
                if code in _NAME_TAKEN_CODES and "unique" in message.lower():
                    existing = self._training_job_named(request.new_job_name)
                    if existing:
                        return existing
                raise
        except ClientError as exc:
            code, message, status = _error(exc)
            raise SubmitError(code, message, http_status=status) from None
        except BotoCoreError as exc:  # connection errors, timeouts after botocore's retries
            raise SubmitError(type(exc).__name__, str(exc), transient=True) from None

    def tag_successor(self, failed_job_arn: str, tags: Mapping[str, str]) -> None:
        """AddTags on the failed training job's ARN (SageMaker API Reference, ``AddTags``).

        Raises:
            TagError: SageMaker refused it, or could not be reached after botocore's retries.
        """
        try:
            self._client.add_tags(
                ResourceArn=failed_job_arn, Tags=[{"Key": k, "Value": v} for k, v in tags.items()]
            )
        except ClientError as exc:
            raise TagError(_error(exc)[0]) from None
        except BotoCoreError as exc:
            raise TagError(type(exc).__name__) from None

    def _training_job_named(self, name: str) -> str | None:
        """The ARN of the training job ``name`` (DescribeTrainingJob), or None when there is none."""
        try:
            described = self._client.describe_training_job(TrainingJobName=name)
        except ClientError as exc:
            if _error(exc)[0] in _NOT_FOUND_CODES:
                return None
            raise
        return str(described["TrainingJobArn"])
