"""AWS Batch reads and the one write of the capacity function, through an injected boto3 ``batch`` client.

Paginated operations use botocore's paginators (``DescribeServiceEnvironments``, ``ListServiceJobs``),
except the ledger's listing, requested one page at a time from a ``nextToken`` its caller keeps;
throttling and transient errors are retried by botocore's standard retry mode (the client comes from
:func:`batchpilot.io.clients.client`). Errors other than "this job no longer exists" propagate as
``botocore.exceptions.ClientError``: the caller isolates them per service environment.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from batchpilot.shared.arns import resource_name
from batchpilot.shared.checkpoints import sagemaker_checkpoint
from batchpilot.shared.classification import JobFacts, JobKind
from batchpilot.shared.events import JobEvent, to_datetime_or_none
from batchpilot.shared.resources import UNTYPED, instances_from_payload

# Each feature's types are imported where its adapter uses them, not here: a function loads only
# its own feature (the alerts function, which uses BatchJobDirectory alone, no longer imports the
# recovery, ledger and capacity modules at cold start: about 30 ms of python3.13 CPU).
if TYPE_CHECKING:
    from batchpilot.alerts.ports import JobContext
    from batchpilot.capacity.model import CapacityLimit, QueueSnapshot, RunnableJob, ServiceEnvironment
    from batchpilot.ledger.model import JobDetails
    from batchpilot.ledger.model import JobStatus as LedgerStatus
    from batchpilot.ledger.ports import ListedJob, ListedPage, QueueInfo, QuotaShareLimit
    from batchpilot.recovery.ports import SubmitError
    from batchpilot.recovery.requests import Operation, RebuiltRequest, Shape
    from batchpilot.recovery.settings import CheckpointSource
    from batchpilot.recovery.snapshot import JobSnapshot

__all__ = [
    "BatchCapacityClient",
    "BatchJobDirectory",
    "BatchJobs",
    "BatchLedgerClient",
    "ContainerJobPlacements",
    "ServiceJobAttempts",
]

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
        from batchpilot.capacity.model import CapacityLimit, ServiceEnvironment

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
        from batchpilot.capacity.model import RunnableJob

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
        from batchpilot.capacity.model import QueueSnapshot

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


# ---------------------------------------------------------------------------------------- ledger
_LEDGER_SERVICE_STATUSES = ("SUBMITTED", "PENDING", "RUNNABLE", "SCHEDULED", "STARTING", "RUNNING")
_LEDGER_CONTAINER_STATUSES = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING")
_NOT_FOUND = ("ClientException", "ResourceNotFoundException")
_REFUSED_REQUEST = "ClientException"  # Batch's error code for a request it refuses (a bad nextToken too)


def _statuses(queue: QueueInfo) -> tuple[str, ...]:
    """The active statuses a reconciliation lists, in order (ListServiceJobs has SCHEDULED)."""
    return _LEDGER_SERVICE_STATUSES if queue.service else _LEDGER_CONTAINER_STATUSES


def _ledger_status(value: Any) -> LedgerStatus | None:
    """A describe's ``status`` as the ledger's status; ``None`` for one it does not know."""
    from batchpilot.ledger.model import JobStatus

    try:
        return JobStatus(str(value))
    except ValueError:
        return None


def _requirements(entries: Any) -> tuple[float, int]:
    """``resourceRequirements`` (``[{type: VCPU|GPU|MEMORY, value}]``) → (vCPUs, GPUs)."""
    vcpus, gpus = 0.0, 0
    for entry in entries or []:
        if not isinstance(entry, Mapping):
            continue
        try:
            value = float(entry.get("value", 0))
        except (TypeError, ValueError):
            continue
        if entry.get("type") == "VCPU":
            vcpus += value
        elif entry.get("type") == "GPU":
            gpus += int(value)
    return vcpus, gpus


def _container_size(job: Mapping[str, Any]) -> tuple[float, int]:
    """A DescribeJobs job → (vCPUs, GPUs) over its containers and nodes (ECS, Fargate, EKS)."""
    vcpus, gpus = 0.0, 0
    container = job.get("container") or {}
    v, g = _requirements(container.get("resourceRequirements"))
    vcpus += v or float(container.get("vcpus") or 0)
    gpus += g
    for task in (job.get("ecsProperties") or {}).get("taskProperties") or []:
        for c in task.get("containers") or []:
            v, g = _requirements(c.get("resourceRequirements"))
            vcpus, gpus = vcpus + v, gpus + g
    for c in ((job.get("eksProperties") or {}).get("podProperties") or {}).get("containers") or []:
        limits = (c.get("resources") or {}).get("limits") or {}
        try:
            vcpus += float(limits.get("cpu", 0))
            gpus += int(limits.get("nvidia.com/gpu", 0))
        except (TypeError, ValueError):
            pass
    nodes = (job.get("nodeProperties") or {}).get("numNodes")
    factor = int(nodes) if isinstance(nodes, int) and nodes > 1 else 1
    return vcpus * factor, gpus * factor


class BatchLedgerClient:
    """What the job ledger asks of AWS Batch (implements :class:`batchpilot.ledger.ports.BatchReader`).

    Args:
        client: a boto3 ``batch`` client (``batchpilot.io.clients.client("batch")``).

    Job queue → service environment is read with DescribeJobQueues once per queue and kept for
    the life of the adapter (a queue's environments rarely change; a cold start reads them again).
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._queue_environment: dict[str, str] = {}

    def describe(self, arn: str, kind: JobKind) -> JobDetails | None:
        """One DescribeServiceJob (service jobs) or DescribeJobs (container jobs).

        Returns:
            Queue, environment, share, priority, size and (service jobs) the payload's
            ``CheckpointConfig.S3Uri``; ``None`` when AWS Batch no longer knows the job
            (``ClientException``).

        Raises:
            DescribeError: any other error (throttling already retried by botocore).
        """
        from batchpilot.ledger.model import JobDetails, type_counts
        from batchpilot.ledger.ports import DescribeError
        from batchpilot.recovery.requests import payload_of

        try:
            if kind is JobKind.SERVICE_JOB:
                job = self._client.describe_service_job(jobId=(resource_name(arn) or arn))
            else:
                jobs = self._client.describe_jobs(jobs=[(resource_name(arn) or arn)]).get("jobs") or []
                if not jobs:
                    return None
                job = jobs[0]
            queue = resource_name(job.get("jobQueue")) or ""
            environment = self._environment(queue) if kind is JobKind.SERVICE_JOB else ""
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _NOT_FOUND:
                return None
            raise DescribeError(f"describe failed: {exc.response.get('Error', {}).get('Code')}") from exc
        if kind is JobKind.SERVICE_JOB:
            by_type = instances_from_payload(job.get("serviceRequestPayload"))
            types = [t for t in (by_type or {}) if t != UNTYPED]
            checkpoint = sagemaker_checkpoint(payload_of(job))  # CheckpointConfig.S3Uri
            return JobDetails(
                queue=queue,
                environment=environment,
                share_identifier=job.get("shareIdentifier") or None,
                quota_share=job.get("quotaShareName") or None,
                priority=job.get("schedulingPriority"),
                instance_type=types[0] if len(types) == 1 else None,
                instances=sum(by_type.values()) if by_type else None,
                checkpoint=checkpoint.uri if checkpoint else None,
                sized=True,
                by_type=type_counts({t: n for t, n in (by_type or {}).items() if t != UNTYPED}),
            )
        vcpus, gpus = _container_size(job)
        return JobDetails(
            queue=queue,
            share_identifier=job.get("shareIdentifier") or None,
            priority=job.get("schedulingPriority"),
            vcpus=vcpus or None,
            gpus=gpus or None,
            sized=True,
        )

    def job_statuses(self, kind: JobKind, arns: Sequence[str]) -> dict[str, LedgerStatus | None]:
        """Each job's status now: one DescribeServiceJob per service job, one DescribeJobs per 100
        container jobs (the API's maximum). ``None``: AWS Batch no longer knows the job
        (DescribeServiceJob's ``ClientException``, or absent from DescribeJobs' ``jobs``).

        Raises:
            DescribeError: any other error (throttling already retried by botocore).
        """
        from batchpilot.ledger.ports import DESCRIBE_JOBS_MAX, DescribeError

        found: dict[str, LedgerStatus | None] = dict.fromkeys(arns)
        try:
            if kind is JobKind.SERVICE_JOB:
                for arn in arns:
                    try:
                        job = self._client.describe_service_job(jobId=(resource_name(arn) or arn))
                    except ClientError as exc:
                        if exc.response.get("Error", {}).get("Code") not in _NOT_FOUND:
                            raise
                        continue
                    found[arn] = _ledger_status(job.get("status"))
                return found
            for chunk in _chunks(list(arns), DESCRIBE_JOBS_MAX):
                by_id = {(resource_name(arn) or arn): arn for arn in chunk}
                response = self._client.describe_jobs(jobs=list(by_id))
                for job in response.get("jobs") or []:
                    known = by_id.get(str(job.get("jobId")))
                    if known is None and str(job.get("jobArn")) in found:
                        known = str(job.get("jobArn"))
                    if known is not None:
                        found[known] = _ledger_status(job.get("status"))
        except ClientError as exc:
            raise DescribeError(f"describe failed: {exc.response.get('Error', {}).get('Code')}") from exc
        return found

    def _environment(self, queue: str) -> str:
        if queue and queue not in self._queue_environment:
            for info in self._describe_queues([queue]):
                self._queue_environment[info.name] = info.environment
        return self._queue_environment.get(queue, "")

    def _describe_queues(self, names: Sequence[str] | None) -> list[QueueInfo]:
        from batchpilot.ledger.ports import QueueInfo

        paginator = self._client.get_paginator("describe_job_queues")
        kwargs: dict[str, Any] = {"PaginationConfig": {"PageSize": _PAGE}}
        if names:
            kwargs["jobQueues"] = list(names)
        out = []
        for page in paginator.paginate(**kwargs):
            for item in page.get("jobQueues", []):
                order = sorted(item.get("serviceEnvironmentOrder") or [], key=lambda e: e.get("order", 0))
                environment = resource_name(order[0].get("serviceEnvironment")) if order else None
                out.append(
                    QueueInfo(
                        name=str(item["jobQueueName"]),
                        service=bool(order) or item.get("jobQueueType") == "SAGEMAKER_TRAINING",
                        environment=environment or "",
                        scheduling_policy_arn=item.get("schedulingPolicyArn") or None,
                    )
                )
        return out

    def job_queues(self) -> list[QueueInfo]:
        """DescribeJobQueues, every page (and refreshes the queue → environment map)."""
        queues = self._describe_queues(None)
        self._queue_environment.update({q.name: q.environment for q in queues})
        return queues

    def list_active(self, queue: QueueInfo) -> list[ListedJob]:
        """ListServiceJobs / ListJobs per active status, every page (100 per page)."""
        out: list[ListedJob] = []
        for status in range(len(_statuses(queue))):
            token: str | None = None
            while True:
                page = self.list_page(queue, status, token)
                out.extend(page.jobs)
                if page.next_token is None:
                    break
                token = page.next_token
        return out

    def list_page(self, queue: QueueInfo, status: int, token: str | None) -> ListedPage:
        """One ListServiceJobs / ListJobs page (``maxResults=100``) of the queue's ``status``-th
        active status from ``nextToken`` ``token``: the one request a reconciliation cursor resumes
        (AWS Batch API Reference, ListJobs / ListServiceJobs ``nextToken``).

        Raises:
            IndexError: ``status`` is not an index of the queue's active statuses.
            CursorExpired: AWS Batch refused ``token`` (``ClientException``: expired or invalid).
            botocore.exceptions.ClientError: the request failed otherwise.
        """
        from batchpilot.ledger.model import JobStatus as LedgerStatus
        from batchpilot.ledger.ports import CursorExpired, ListedJob, ListedPage

        statuses = _statuses(queue)
        name = statuses[status]
        kind = JobKind.SERVICE_JOB if queue.service else JobKind.CONTAINER_JOB
        request: dict[str, Any] = {"jobQueue": queue.name, "jobStatus": name, "maxResults": _PAGE}
        if token:
            request["nextToken"] = token
        try:
            if queue.service:
                response = self._client.list_service_jobs(**request)
            else:
                response = self._client.list_jobs(**request)
        except ClientError as exc:
            if token and exc.response.get("Error", {}).get("Code") == _REFUSED_REQUEST:
                raise CursorExpired(f"{name} listing of {queue.name}: nextToken refused") from exc
            raise
        jobs: list[ListedJob] = []
        for item in response.get("jobSummaryList", []):
            arn = item.get("jobArn") or item.get("jobId")
            if not arn:
                continue
            jobs.append(
                ListedJob(
                    arn=str(arn),
                    job_id=str(item.get("jobId") or (resource_name(str(arn)) or str(arn))),
                    kind=kind,
                    status=LedgerStatus(str(item.get("status") or name)),
                    share_identifier=item.get("shareIdentifier") or None,
                    quota_share=item.get("quotaShareName") or None,
                    created_at=to_datetime_or_none(item.get("createdAt")),
                    started_at=to_datetime_or_none(item.get("startedAt")),
                )
            )
        next_token = response.get("nextToken") or None
        return ListedPage(jobs, str(next_token) if next_token else None, len(statuses))

    def capacity_limits(self, environments: Sequence[str]) -> dict[str, int]:
        """DescribeServiceEnvironments (:meth:`BatchCapacityClient.describe_environments`) →
        environment → summed ``maxCapacity``."""
        if not environments:
            return {}
        described = BatchCapacityClient(self._client).describe_environments(environments)
        return {name: sum(limit.max_capacity for limit in env.limits) for name, env in described.items()}

    def quota_shares(self, queue: str) -> dict[str, QuotaShareLimit] | None:
        """ListQuotaShares (every page) → quota share → its summed ``maxCapacity`` and whether its
        ``resourceSharingConfiguration.strategy`` lends (``LEND``, ``LEND_AND_BORROW``; a share
        without one is taken as lending); ``None`` when the quota shares cannot be read (any
        error)."""
        from batchpilot.ledger.ports import QuotaShareLimit

        out: dict[str, QuotaShareLimit] = {}
        try:
            for page in self._client.get_paginator("list_quota_shares").paginate(jobQueue=queue):
                for share in page.get("quotaShares", []):
                    if isinstance(share, Mapping) and share.get("quotaShareName"):
                        limit = sum(
                            int(limit.get("maxCapacity", 0))
                            for limit in share.get("capacityLimits") or []
                            if isinstance(limit, Mapping)
                        )
                        sharing = share.get("resourceSharingConfiguration")
                        strategy = sharing.get("strategy") if isinstance(sharing, Mapping) else None
                        out[str(share["quotaShareName"])] = QuotaShareLimit(limit, strategy != "RESERVE")
        except (ClientError, BotoCoreError):
            return None
        return out

    def share_weights(self, policy_arn: str) -> dict[str, float] | None:
        """DescribeSchedulingPolicies → share identifier → ``weightFactor``; ``None`` when the
        policy cannot be read (any error, or no such policy)."""
        try:
            response = self._client.describe_scheduling_policies(arns=[policy_arn])
        except ClientError:
            return None
        policies = response.get("schedulingPolicies") or []
        if not policies:
            return None
        distribution = (policies[0].get("fairsharePolicy") or {}).get("shareDistribution") or []
        return {
            str(entry["shareIdentifier"]): float(entry.get("weightFactor", 1.0))
            for entry in distribution
            if isinstance(entry, Mapping) and entry.get("shareIdentifier")
        }


# ------------------------------------------------------------------------------------ recovery
_UNKNOWN_JOB = "ClientException"  # Batch's error code for a job id it does not know


class BatchJobDirectory:
    """The alerts function's :class:`batchpilot.alerts.ports.JobDirectory`: one
    DescribeServiceJob per preemption fact (the preemption events name only the job's ARN; AWS
    Batch User Guide, "Service job preemption events").

    Args:
        client: a boto3 ``batch`` client.
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def lookup(self, job_arn: str) -> JobContext | None:
        """Name, job queue name, share identifier, quota share, scheduling priority and tags of
        the service job ``job_arn``; None when Batch does not describe it or the call fails."""
        from batchpilot.alerts.ports import JobContext

        try:
            job = self._client.describe_service_job(jobId=resource_name(job_arn))
        except (ClientError, BotoCoreError):
            return None
        priority = job.get("schedulingPriority")
        return JobContext(
            name=job.get("jobName"),
            queue=resource_name(job.get("jobQueue")),
            share_identifier=job.get("shareIdentifier") or None,
            quota_share=job.get("quotaShareName") or None,
            priority=priority if isinstance(priority, int) else None,
            tags=_string_tags(job.get("tags")),
        )


def _string_tags(value: Any) -> dict[str, str]:
    """DescribeServiceJob ``tags`` (a map of strings); anything else is no tags."""
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def _submit_error(exc: ClientError) -> SubmitError:
    """A Batch API error as the recovery port's :class:`SubmitError` (AWS's code and message)."""
    from batchpilot.recovery.ports import SubmitError

    info = exc.response.get("Error", {})
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return SubmitError(str(info.get("Code") or "Unknown"), str(info.get("Message") or ""), http_status=status)


SUBMIT_JOB_SENDS = 3
"""Times one delivery sends ``SubmitJob`` at most (the first send included): resends only after a
throttling answer (the job was not made), each after a ``ListJobs`` look-up of the job's
deterministic name found nothing. A server error or a timeout (the job may exist) ends the
delivery: the look-up runs in a later one, once ``ListJobs`` had time to list the job."""
SUBMIT_JOB_BACKOFF_SECONDS = 0.5
"""Wait before the first resend of ``SubmitJob`` (doubled before the next)."""


class BatchJobs:
    """What the recovery function asks of AWS Batch: the
    :class:`batchpilot.recovery.ports.JobGateway` of service jobs and container jobs.

    - ``describe``: DescribeServiceJob (payload and tags included) or DescribeJobs.
    - ``submit``: SubmitServiceJob (its ``clientToken`` makes a repeat return the same job) or
      SubmitJob, which has no client token: it is sent through ``submit_client``, a client without
      botocore's automatic retries, and before any resend (after a throttle in this delivery, or
      in a later delivery of the record) ``ListJobs`` with a ``JOB_NAME`` filter on the job queue
      looks the deterministic name (the idempotency marker: lineage and attempt) up; a job found is
      the answer, never a second job. A lost answer (5xx, timeout) is never resent in the same
      delivery: the recovery service resumes the attempt only after
      :data:`batchpilot.recovery.service.LISTING_SETTLE_SECONDS`.

    Args:
        client: a boto3 ``batch`` client (``batchpilot.io.clients.client("batch")``).
        checkpoint_sources: where container jobs keep their checkpoint URI (settings).
        submit_client: the ``batch`` client for ``SubmitJob``, with botocore's retries off
            (``batchpilot.io.clients.client("batch", max_attempts=1)``).
        sleep: how to wait between ``SubmitJob`` sends (``time.sleep``; tests inject a fake).
    """

    kinds = frozenset({JobKind.SERVICE_JOB, JobKind.CONTAINER_JOB})

    def __init__(
        self,
        client: Any,
        checkpoint_sources: tuple[tuple[CheckpointSource, str], ...],
        *,
        submit_client: Any,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self._checkpoint_sources = checkpoint_sources
        self._submit_client = submit_client
        self._sleep = sleep

    def describe(self, event: JobEvent, facts: JobFacts) -> JobSnapshot | None:
        """The failed job as Batch describes it: ``DescribeServiceJob`` or one ``DescribeJobs``
        item; None when Batch no longer knows the job.

        Raises:
            botocore.exceptions.ClientError: anything but "not found" (e.g. AccessDenied).
        """
        from batchpilot.recovery.snapshot import container_job_snapshot, service_job_snapshot

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
        """``SubmitServiceJob`` or ``SubmitJob``; returns the new job's ARN. For ``SubmitJob``, a job
        already submitted under the request's name is returned instead of sending again (looked up
        first with ``resume``, and before every resend).

        Raises:
            SubmitError: Batch refused it (``transient`` for throttling, server errors and
                timeouts: the record comes back and the look-up runs first then).
            ValueError: not a Batch operation.
        """
        from batchpilot.recovery.ports import SubmitError
        from batchpilot.recovery.requests import Operation

        try:
            if request.operation is Operation.SUBMIT_SERVICE_JOB:
                return str(self._client.submit_service_job(**request.request)["jobArn"])
            if request.operation is Operation.SUBMIT_JOB:
                return self._submit_job(request, look_up_first=resume)
        except ClientError as exc:
            raise _submit_error(exc) from None
        except BotoCoreError as exc:  # connection errors, timeouts after botocore's retries
            raise SubmitError(type(exc).__name__, str(exc), transient=True) from None
        raise ValueError(f"not a Batch operation: {request.operation}")

    def _submit_job(self, request: RebuiltRequest, *, look_up_first: bool) -> str:
        """Send ``SubmitJob`` at most :data:`SUBMIT_JOB_SENDS` times, each resend after a look-up.

        A 5xx or a timeout does not say whether Batch made the job, so botocore must not resend on
        its own (``submit_client`` has its retries off): only a look-up that finds nothing allows it.

        Raises:
            SubmitError: the last send's error (a refusal at once: it is not transient).
            botocore.exceptions.ClientError: the look-up (``ListJobs``) failed after its retries.
        """
        from batchpilot.recovery.ports import SubmitError

        queue, name = request.request["jobQueue"], request.new_job_name
        error: SubmitError | None = None
        for send in range(SUBMIT_JOB_SENDS):
            if send or look_up_first:
                if send:
                    self._sleep(SUBMIT_JOB_BACKOFF_SECONDS * 2 ** (send - 1))
                if existing := self._job_named(queue, name):
                    return existing
            try:
                return str(self._submit_client.submit_job(**request.request)["jobArn"])
            except ClientError as exc:
                error = _submit_error(exc)
                made = error.http_status >= 500  # the job may exist
            except BotoCoreError as exc:  # a read timeout: the job may exist
                error = SubmitError(type(exc).__name__, str(exc), transient=True)
                made = True
            if not error.transient or made:
                # A refusal, or an answer lost: a look-up now could miss a job ListJobs does not
                # list yet, so the resend waits for a later delivery (Recoverer: the reserved
                # attempt resumes LISTING_SETTLE_SECONDS after it was decided, looking up first).
                raise error
        assert error is not None
        raise error

    def tag_successor(self, failed_job_arn: str, tags: Mapping[str, str]) -> None:
        """TagResource on the failed job's or service job's ARN (AWS Batch API Reference,
        ``TagResource``: jobs and service jobs can be tagged).

        Raises:
            TagError: Batch refused it, or could not be reached after botocore's retries.
        """
        from batchpilot.recovery.ports import TagError

        try:
            self._client.tag_resource(resourceArn=failed_job_arn, tags=dict(tags))
        except ClientError as exc:
            raise TagError(str(exc.response.get("Error", {}).get("Code") or "Unknown")) from None
        except BotoCoreError as exc:
            raise TagError(type(exc).__name__) from None

    def _job_named(self, queue: str, name: str) -> str | None:
        """The ARN of the job named ``name`` in ``queue`` (``ListJobs`` with a ``JOB_NAME`` filter)."""
        response = self._client.list_jobs(jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [name]}])
        for summary in response.get("jobSummaryList") or []:
            if summary.get("jobName") == name and summary.get("jobArn"):
                return str(summary["jobArn"])
        return None


class ServiceJobAttempts:
    """A service job's training job, for the GPU activity check (implements
    :class:`batchpilot.gpu.ports.TrainingJobNames`).

    Args:
        client: a boto3 ``batch`` client (``batchpilot.io.clients.client("batch")``).
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def training_job(self, arn: str) -> str | None:
        """DescribeServiceJob: the ``TrainingJobName`` in the latest attempt's
        ``serviceResourceId`` (``latestAttempt``, else the last of ``attempts[]``; its ``value`` is
        the training job's ARN, AWS Batch User Guide, "Service job events"); ``None`` when none is
        named yet or AWS Batch no longer knows the job (``ClientException``).

        Raises:
            TrainingJobUnreadable: any other error (throttling already retried, access denied,
                no time left), its operation and code in the message.
        """
        from batchpilot.gpu.ports import TrainingJobUnreadable
        from batchpilot.shared.deadline import DeadlineExceeded
        from batchpilot.shared.errors import describe as describe_error

        try:
            job = self._client.describe_service_job(jobId=(resource_name(arn) or arn))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _NOT_FOUND:
                return None
            raise TrainingJobUnreadable(describe_error(exc, "DescribeServiceJob")) from None
        except (BotoCoreError, DeadlineExceeded) as exc:
            raise TrainingJobUnreadable(describe_error(exc, "DescribeServiceJob")) from None
        for attempt in (job.get("latestAttempt"), *reversed(job.get("attempts") or [])):
            resource = (attempt or {}).get("serviceResourceId") or {}
            name = resource_name(resource.get("value"))
            if name:
                return name
        return None


class ContainerJobPlacements:
    """Where a RUNNING container job runs, for the GPU activity check (implements
    :class:`batchpilot.gpu.ports.ContainerPlacements`).

    Args:
        client: a boto3 ``batch`` client (``batchpilot.io.clients.client("batch")``).
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def container_instances(self, arn: str) -> list[str] | None:
        """DescribeJobs: the ``container.containerInstanceArn`` of the job's attempt (AWS Batch API
        Reference, ``ContainerDetail``); a multi-node parallel job's node jobs (``<jobId>#<n>``,
        ``nodeProperties.numNodes``, one more DescribeJobs of up to 100 nodes) give one each.
        ``None`` when none is named (not placed yet, Fargate) or AWS Batch no longer knows the job.

        Raises:
            HostsUnreadable: any other error (throttling already retried, access denied, no time
                left), its operation and code in the message.
        """
        job_id = resource_name(arn) or arn
        jobs = self._describe([job_id])
        if not jobs:
            return None
        job = jobs[0]
        nodes = (job.get("nodeProperties") or {}).get("numNodes")
        if isinstance(nodes, int) and nodes > 1 and "#" not in job_id:
            jobs = self._describe([f"{job_id}#{n}" for n in range(min(nodes, 100))])
        found = sorted(
            {str(placed) for j in jobs if (placed := (j.get("container") or {}).get("containerInstanceArn"))}
        )
        return found or None

    def _describe(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        from batchpilot.gpu.ports import HostsUnreadable
        from batchpilot.shared.deadline import DeadlineExceeded
        from batchpilot.shared.errors import describe as describe_error

        try:
            return list(self._client.describe_jobs(jobs=list(ids)).get("jobs") or [])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _NOT_FOUND:
                return []
            raise HostsUnreadable(describe_error(exc, "DescribeJobs")) from None
        except (BotoCoreError, DeadlineExceeded) as exc:
            raise HostsUnreadable(describe_error(exc, "DescribeJobs")) from None
