"""AWS Batch reads and the one write of the capacity function, through an injected boto3 ``batch`` client.

Paginated operations use botocore's paginators (``DescribeServiceEnvironments``, ``ListServiceJobs``);
throttling and transient errors are retried by botocore's standard retry mode (the client comes from
:func:`batchpilot.io.clients.client`). Errors other than "this job no longer exists" propagate as
``botocore.exceptions.ClientError``: the caller isolates them per service environment.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batchpilot.capacity.model import (
    CapacityLimit,
    QueueSnapshot,
    RunnableJob,
    ServiceEnvironment,
)
from batchpilot.recovery.ports import SubmitError
from batchpilot.recovery.requests import Operation, RebuiltRequest, Shape
from batchpilot.recovery.settings import CheckpointSource
from batchpilot.recovery.snapshot import JobSnapshot, container_job_snapshot, service_job_snapshot
from batchpilot.shared.arns import resource_name
from batchpilot.shared.classification import JobFacts, JobKind
from batchpilot.shared.events import JobEvent, to_datetime_or_none
from batchpilot.shared.resources import instances_from_payload

__all__ = ["BatchCapacityClient", "BatchJobs"]

_PAGE = 100  # the API maximum of DescribeServiceEnvironments and ListServiceJobs


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _usage(entries: Any) -> dict[str, float]:
    """``[{capacityUnit, quantity}]`` → unit → summed quantity (malformed entries skipped)."""
    out: dict[str, float] = {}
    for entry in entries or []:
        if not isinstance(entry, Mapping):
            continue
        unit, quantity = entry.get("capacityUnit"), entry.get("quantity")
        if isinstance(unit, str) and isinstance(quantity, int | float) and not isinstance(quantity, bool):
            out[unit] = out.get(unit, 0.0) + float(quantity)
    return out


def _by_name(entries: Any, key: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for entry in entries or []:
        if isinstance(entry, Mapping) and isinstance(entry.get(key), str):
            out[entry[key]] = _usage(entry.get("capacityUsage"))
    return out


class BatchCapacityClient:
    """What the capacity function asks of AWS Batch (implements
    :class:`batchpilot.capacity.ports.BatchCapacityApi`).

    Args:
        client: a boto3 ``batch`` client (``batchpilot.io.clients.client("batch")``).
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def describe_environments(self, names: Sequence[str]) -> dict[str, ServiceEnvironment]:
        """``DescribeServiceEnvironments`` for ``names`` (100 per request, every page).

        Returns:
            Name → environment, for the environments that exist (a missing name is absent).
        """
        out: dict[str, ServiceEnvironment] = {}
        paginator = self._client.get_paginator("describe_service_environments")
        for chunk in _chunks(list(names), _PAGE):
            pages = paginator.paginate(serviceEnvironments=list(chunk), PaginationConfig={"PageSize": _PAGE})
            for page in pages:
                for item in page.get("serviceEnvironments", []):
                    limits = tuple(
                        CapacityLimit(str(limit["capacityUnit"]), int(limit.get("maxCapacity", 0)))
                        for limit in item.get("capacityLimits", [])
                        if isinstance(limit, Mapping) and limit.get("capacityUnit")
                    )
                    env = ServiceEnvironment(
                        name=str(item["serviceEnvironmentName"]),
                        arn=item.get("serviceEnvironmentArn"),
                        state=item.get("state"),
                        status=item.get("status"),
                        limits=limits,
                    )
                    out[env.name] = env
        return out

    def runnable_jobs(self, queue: str) -> list[RunnableJob]:
        """Every RUNNABLE service job of ``queue`` (``ListServiceJobs``, 100 per page, every page)."""
        paginator = self._client.get_paginator("list_service_jobs")
        pages = paginator.paginate(jobQueue=queue, jobStatus="RUNNABLE", PaginationConfig={"PageSize": _PAGE})
        jobs: list[RunnableJob] = []
        for page in pages:
            for item in page.get("jobSummaryList", []):
                if item.get("status", "RUNNABLE") != "RUNNABLE" or not item.get("jobArn"):
                    continue
                jobs.append(
                    RunnableJob(
                        arn=str(item["jobArn"]),
                        created_at=to_datetime_or_none(item.get("createdAt")),
                        share_identifier=item.get("shareIdentifier") or None,
                        quota_share=item.get("quotaShareName") or None,
                        status_reason=item.get("statusReason") or None,
                        job_id=item.get("jobId") or None,
                    )
                )
        return jobs

    def snapshot(self, queue: str) -> QueueSnapshot:
        """Capacity in use by ``queue`` (``GetJobQueueSnapshot.queueUtilization``)."""
        response = self._client.get_job_queue_snapshot(jobQueue=queue)
        utilization = response.get("queueUtilization") or {}
        fair = utilization.get("fairshareUtilization") or {}
        quota = utilization.get("quotaShareUtilization") or {}
        return QueueSnapshot(
            total=_usage(utilization.get("totalCapacityUsage")),
            by_share=_by_name(fair.get("topCapacityUtilization"), "shareIdentifier"),
            by_quota_share=_by_name(quota.get("topCapacityUtilization"), "quotaShareName"),
        )

    def job_demand(self, job_arn: str, job_id: str | None = None) -> dict[str, int] | None:
        """Instances one service job asks for, from ``DescribeServiceJob``'s ``serviceRequestPayload``.

        Args:
            job_arn: the job's ARN.
            job_id: its ``jobId`` from ``ListServiceJobs`` (default: the id at the end of the ARN).

        Returns:
            Instance type → instances; an empty dict when the job is gone or its payload has no
            usable ``ResourceConfig`` (cached as "read, unknown" so it is not read again).

        Raises:
            botocore.exceptions.ClientError: any other error (throttling already retried).
        """
        try:
            response = self._client.describe_service_job(jobId=job_id or resource_name(job_arn) or job_arn)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("ClientException", "ResourceNotFoundException"):
                return {}
            raise
        return instances_from_payload(response.get("serviceRequestPayload")) or {}

    def update_capacity(self, environment: str, limits: Sequence[CapacityLimit]) -> None:
        """``UpdateServiceEnvironment`` with the full ``capacityLimits`` (every unit, changed or not).

        Raises:
            botocore.exceptions.ClientError: the update was refused.
        """
        self._client.update_service_environment(
            serviceEnvironment=environment,
            capacityLimits=[
                {"maxCapacity": limit.max_capacity, "capacityUnit": limit.unit} for limit in limits
            ],
        )


# ------------------------------------------------------------------------------------ recovery
_UNKNOWN_JOB = "ClientException"  # Batch's error code for a job id it does not know


def _submit_error(exc: ClientError) -> SubmitError:
    """A Batch API error as the recovery port's :class:`SubmitError` (AWS's code and message)."""
    info = exc.response.get("Error", {})
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return SubmitError(str(info.get("Code") or "Unknown"), str(info.get("Message") or ""), http_status=status)


class BatchJobs:
    """What the recovery function asks of AWS Batch: the
    :class:`batchpilot.recovery.ports.JobGateway` of service jobs and container jobs.

    - ``describe``: DescribeServiceJob (payload and tags included) or DescribeJobs.
    - ``submit``: SubmitServiceJob (its ``clientToken`` makes a repeat return the same job) or
      SubmitJob (on a repeat, ListJobs by the deterministic name first).

    Args:
        client: a boto3 ``batch`` client (``batchpilot.io.clients.client("batch")``).
        checkpoint_sources: where container jobs keep their checkpoint URI (settings).
    """

    kinds = frozenset({JobKind.SERVICE_JOB, JobKind.CONTAINER_JOB})

    def __init__(self, client: Any, checkpoint_sources: tuple[tuple[CheckpointSource, str], ...]) -> None:
        self._client = client
        self._checkpoint_sources = checkpoint_sources

    def describe(self, event: JobEvent, facts: JobFacts) -> JobSnapshot | None:
        """The failed job as Batch describes it: ``DescribeServiceJob`` or one ``DescribeJobs``
        item; None when Batch no longer knows the job.

        Raises:
            botocore.exceptions.ClientError: anything but "not found" (e.g. AccessDenied).
        """
        job_id = resource_name(facts.arn) or facts.arn
        if facts.kind is JobKind.SERVICE_JOB:
            try:
                described = self._client.describe_service_job(jobId=job_id)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == _UNKNOWN_JOB:
                    return None
                raise
            plain = {k: v for k, v in described.items() if k != "ResponseMetadata"}
            return service_job_snapshot(event, plain)
        jobs = self._client.describe_jobs(jobs=[job_id]).get("jobs") or []
        return container_job_snapshot(event, jobs[0], self._checkpoint_sources) if jobs else None

    def input_shape(self, operation: Operation) -> Shape:
        """botocore's input shape of ``batch:SubmitServiceJob`` / ``batch:SubmitJob``."""
        shape: Shape = self._client.meta.service_model.operation_model(operation.name_in_api).input_shape
        return shape

    def submit(self, request: RebuiltRequest, *, resume: bool) -> str:
        """``SubmitServiceJob`` or ``SubmitJob``; returns the new job's ARN. With ``resume``, a
        container job already submitted under the request's name (``ListJobs``) is returned instead.

        Raises:
            SubmitError: Batch refused it (``transient`` for throttling and server errors).
            ValueError: not a Batch operation.
        """
        try:
            if request.operation is Operation.SUBMIT_SERVICE_JOB:
                return str(self._client.submit_service_job(**request.request)["jobArn"])
            if request.operation is Operation.SUBMIT_JOB:
                queue = request.request["jobQueue"]
                if resume and (existing := self._job_named(queue, request.new_job_name)):
                    return existing
                return str(self._client.submit_job(**request.request)["jobArn"])
        except ClientError as exc:
            raise _submit_error(exc) from None
        except BotoCoreError as exc:  # connection errors, timeouts after botocore's retries
            raise SubmitError(type(exc).__name__, str(exc), transient=True) from None
        raise ValueError(f"not a Batch operation: {request.operation}")

    def _job_named(self, queue: str, name: str) -> str | None:
        """The ARN of the job named ``name`` in ``queue`` (``ListJobs`` with a ``JOB_NAME`` filter)."""
        response = self._client.list_jobs(jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [name]}])
        for summary in response.get("jobSummaryList") or []:
            if summary.get("jobName") == name and summary.get("jobArn"):
                return str(summary["jobArn"])
        return None
