"""Describe and submit jobs for the recovery function (AWS Batch and SageMaker, injected clients).

Implements :class:`batchpilot.recovery.service.JobGateway`:

- ``describe``: DescribeServiceJob (service jobs), DescribeJobs (container jobs), DescribeTrainingJob
  + ListTags (standalone training jobs); a job AWS no longer knows is None.
- ``submit``: SubmitServiceJob (its ``clientToken`` makes a repeat return the same job), SubmitJob
  (on a repeat, ListJobs by the deterministic name first), CreateTrainingJob (on a repeat, or when
  the name is taken, DescribeTrainingJob of that name). Errors become
  :class:`~batchpilot.recovery.service.SubmitError`, transient or not.

Clients come from :func:`batchpilot.io.clients.client` (standard retry mode: throttling is
retried by botocore before an error reaches this module).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batchpilot.recovery.requests import (
    OP_CREATE_TRAINING_JOB,
    OP_SUBMIT_JOB,
    OP_SUBMIT_SERVICE_JOB,
    RebuiltRequest,
)
from batchpilot.recovery.service import SubmitError
from batchpilot.recovery.settings import CheckpointSource
from batchpilot.recovery.snapshot import (
    JobSnapshot,
    container_job_snapshot,
    service_job_snapshot,
    training_job_snapshot,
)
from batchpilot.shared.classification import JobFacts, JobKind
from batchpilot.shared.events import JobEvent

__all__ = ["TRANSIENT_CODES", "RecoveryJobs", "is_transient", "job_id_of"]

TRANSIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "LimitExceededException",
        "SlowDown",
        "InternalFailure",
        "InternalServerError",
        "InternalServerException",
        "ServerException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
    }
)
"""Error codes worth another delivery (botocore already retried them in-call)."""


def is_transient(error: ClientError) -> bool:
    """True for throttling and server-side errors."""
    code = str(error.response.get("Error", {}).get("Code", ""))
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return code in TRANSIENT_CODES or status >= 500


def _code(error: ClientError) -> tuple[str, str]:
    info = error.response.get("Error", {})
    return str(info.get("Code") or "Unknown"), str(info.get("Message") or "")


def job_id_of(arn: str) -> str:
    """``arn:aws:batch:...:job/UUID[:INDEX]`` / ``.../service-job/UUID`` → the job id after the slash."""
    return arn.rsplit("/", 1)[-1]


def _plain(response: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


class RecoveryJobs:
    """The recovery function's view of Batch and SageMaker.

    Args:
        batch: a boto3 ``batch`` client.
        sagemaker: a boto3 ``sagemaker`` client.
        checkpoint_sources: where container jobs keep their checkpoint URI (settings).
    """

    def __init__(
        self, batch: Any, sagemaker: Any, checkpoint_sources: tuple[tuple[CheckpointSource, str], ...]
    ) -> None:
        self.batch = batch
        self.sagemaker = sagemaker
        self.checkpoint_sources = checkpoint_sources

    # ------------------------------------------------------------------ describe
    def describe(self, event: JobEvent, facts: JobFacts) -> JobSnapshot | None:
        """The failed job as AWS describes it (see module doc); None when AWS no longer knows it.

        Raises:
            botocore.exceptions.ClientError: anything but "not found" (e.g. AccessDenied).
        """
        if facts.kind is JobKind.SERVICE_JOB:
            try:
                described = self.batch.describe_service_job(jobId=job_id_of(facts.arn))
            except ClientError as exc:
                if _code(exc)[0] == "ClientException":  # Batch's answer for an unknown job id
                    return None
                raise
            return service_job_snapshot(event, _plain(described))
        if facts.kind is JobKind.CONTAINER_JOB:
            jobs = self.batch.describe_jobs(jobs=[job_id_of(facts.arn)]).get("jobs") or []
            if not jobs:
                return None
            return container_job_snapshot(event, jobs[0], self.checkpoint_sources)
        name = facts.name or job_id_of(facts.arn)
        try:
            described = _plain(self.sagemaker.describe_training_job(TrainingJobName=name))
        except ClientError as exc:
            code, message = _code(exc)
            if code in ("ValidationException", "ResourceNotFound") and "not found" in message.lower():
                return None
            raise
        arn = described.get("TrainingJobArn") or facts.arn
        tags: list[dict[str, Any]] = []
        for page in self.sagemaker.get_paginator("list_tags").paginate(ResourceArn=arn):
            tags.extend(page.get("Tags") or [])
        return training_job_snapshot(event, described, tags)

    def input_shape(self, operation: str) -> Any:
        """botocore's input shape of ``batch:SubmitServiceJob`` / ``batch:SubmitJob`` /
        ``sagemaker:CreateTrainingJob``, from the clients' own service models."""
        service, _, name = operation.partition(":")
        client = self.batch if service == "batch" else self.sagemaker
        return client.meta.service_model.operation_model(name).input_shape

    # ------------------------------------------------------------------ submit
    def submit(self, request: RebuiltRequest, *, resume: bool) -> str:
        """Send the request; returns the new job's ARN.

        Raises:
            SubmitError: AWS refused it (``transient`` for throttling and server errors).
        """
        try:
            if request.operation == OP_SUBMIT_SERVICE_JOB:
                return str(self.batch.submit_service_job(**request.request)["jobArn"])
            if request.operation == OP_SUBMIT_JOB:
                if resume:
                    existing = self._job_named(request.request["jobQueue"], request.new_job_name)
                    if existing:
                        return existing
                return str(self.batch.submit_job(**request.request)["jobArn"])
            if request.operation == OP_CREATE_TRAINING_JOB:
                if resume:
                    existing = self._training_job_named(request.new_job_name)
                    if existing:
                        return existing
                try:
                    return str(self.sagemaker.create_training_job(**request.request)["TrainingJobArn"])
                except ClientError as exc:
                    # The name is taken: an earlier call created it (the names are deterministic).
                    code, message = _code(exc)
                    if code in ("ValidationException", "ResourceInUse") and "unique" in message.lower():
                        existing = self._training_job_named(request.new_job_name)
                        if existing:
                            return existing
                    raise
        except ClientError as exc:
            code, message = _code(exc)
            raise SubmitError(code, message, transient=is_transient(exc)) from None
        except BotoCoreError as exc:  # connection errors, timeouts after botocore's retries
            raise SubmitError(type(exc).__name__, str(exc), transient=True) from None
        raise ValueError(f"unknown operation {request.operation}")

    def _job_named(self, queue: str, name: str) -> str | None:
        response = self.batch.list_jobs(jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [name]}])
        for summary in response.get("jobSummaryList") or []:
            if summary.get("jobName") == name and summary.get("jobArn"):
                return str(summary["jobArn"])
        return None

    def _training_job_named(self, name: str) -> str | None:
        try:
            described = self.sagemaker.describe_training_job(TrainingJobName=name)
        except ClientError as exc:
            if _code(exc)[0] in ("ValidationException", "ResourceNotFound"):
                return None
            raise
        return str(described["TrainingJobArn"])
