"""The emulated AWS Batch backend: what moto 5.2 lacks or drops, for one account and region.

:class:`EmbeddedBatch` holds service environments, job queues (service and container), service jobs
and container jobs, and implements the operations on them (CreateServiceEnvironment ...
GetJobQueueSnapshot, CreateJobQueue ... DeleteJobQueue, CreateQuotaShare, ListQuotaShares, SubmitJob
... CancelJob). Compute
environments, job definitions and scheduling policies stay in moto's Batch backend, which this
one reads (never writes) through moto's public backend registry.

Operation methods take the request's members as keyword arguments (snake_case) and return
API-shaped dicts or records; :mod:`.responses` turns HTTP requests into these calls. Errors are
:class:`~.exceptions.ClientException` (HTTP 400) and :class:`~.exceptions.TooManyRequestsException`
(HTTP 429), as Batch answers.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moto.utilities.paginator import paginate

from batchpilot_local.emulator.batch.exceptions import ClientException, TooManyRequestsException
from batchpilot_local.emulator.batch.utils import (
    CONTAINER_FILTERS,
    DISPATCHED,
    JOB_NAME_RE,
    JOB_STATUSES,
    LIST_JOBS_LIMIT,
    NAME_RE,
    NOT_STARTED,
    PAGE_LIMIT,
    PAYLOAD_LIMIT,
    SERVICE_FILTERS,
    SUBMIT_SERVICE_JOB_RATE,
    TERMINAL,
    apply_overrides,
    arn_parts,
    check_capacity_limits,
    check_max_results,
    check_priority,
    check_tags,
    fingerprint,
    is_array_parent,
    job_filter,
    share_usage,
    terminate,
    usage,
)
from batchpilot_local.emulator.core import Clock, deep

__all__ = ["PAGINATION_MODEL", "EmbeddedBatch", "JobQueue", "StoredJob", "Throttle"]

# moto's paginator (as moto's own backends use it) for the listings of few, long-lived resources.
# Its token names the first item of the next page and the query it belongs to; a token of another
# query, or naming an item that is gone, is refused (moto's InvalidToken, which .responses answers
# as Batch's "ClientException: Invalid nextToken").
PAGINATION_MODEL: dict[str, dict[str, Any]] = {
    "describe_service_environments": {
        "input_token": "next_token",
        "limit_key": "max_results",
        "limit_default": PAGE_LIMIT,
        "unique_attribute": "serviceEnvironmentArn",
    },
    "describe_job_queues": {
        "input_token": "next_token",
        "limit_key": "max_results",
        "limit_default": PAGE_LIMIT,
        "unique_attribute": "jobQueueArn",
    },
    "list_quota_shares": {
        "input_token": "next_token",
        "limit_key": "max_results",
        "limit_default": PAGE_LIMIT,
        "unique_attribute": "quotaShareArn",
    },
}
_MAX_QUOTA_SHARES = 20  # per job queue (AWS Batch User Guide, "Quota shares")
_MAX_QUOTA_LIMITS = 5  # capacity limits per quota share (same page)


class Throttle:
    """A sliding-window rate limit: at most ``limit`` accepted calls in any ``window`` seconds.

    ``limit=None`` disables it. Rejected calls do not count. ``clock`` is monotonic seconds.
    """

    def __init__(
        self, limit: int | None = SUBMIT_SERVICE_JOB_RATE, window: float = 1.0, clock: Clock = time.monotonic
    ) -> None:
        self.limit = limit
        self.window = window
        self.clock = clock
        self._calls: deque[float] = deque()

    def acquire(self) -> bool:
        """Count one call; False when it is over the limit (and then it is not counted)."""
        if self.limit is None:
            return True
        now = self.clock()
        while self._calls and now - self._calls[0] >= self.window:
            self._calls.popleft()
        if len(self._calls) >= self.limit:
            return False
        self._calls.append(now)
        return True

    def reset(self) -> None:
        """Forget the calls counted so far."""
        self._calls.clear()


@dataclass
class JobQueue:
    """A job queue: ``detail`` is its DescribeJobQueues entry; ``scheduling`` is FIFO, FAIR_SHARE
    or QUOTA_MANAGEMENT (AWS derives it from the scheduling policy)."""

    detail: dict[str, Any]
    scheduling: str = "FIFO"

    @property
    def name(self) -> str:
        """``jobQueueName``."""
        return str(self.detail["jobQueueName"])

    @property
    def arn(self) -> str:
        """``jobQueueArn``."""
        return str(self.detail["jobQueueArn"])

    @property
    def kind(self) -> str:
        """``service`` (SAGEMAKER_TRAINING service jobs) or ``container``."""
        return "service" if self.detail.get("jobQueueType") == "SAGEMAKER_TRAINING" else "container"


@dataclass
class StoredJob:
    """A service job (``detail`` = DescribeServiceJob) or a container job (``detail`` = JobDetail).

    ``seq`` orders jobs created in the same millisecond; ``client_token`` and ``fingerprint`` make
    SubmitServiceJob idempotent; ``array_parent`` marks an array job submitted here, whose
    ``statusSummary`` is computed from its children when described.
    """

    detail: dict[str, Any]
    seq: int
    client_token: str | None = None
    fingerprint: str | None = None
    array_parent: bool = False

    @property
    def sort_key(self) -> tuple[int, int]:
        """(``createdAt`` in epoch ms, ``seq``): the listing order, oldest first."""
        return (int(self.detail.get("createdAt") or 0), self.seq)


@dataclass
class _Position:
    index: int
    since: int


@dataclass
class EmbeddedBatch:
    """The Batch APIs moto lacks, for one account and region.

    ``clock`` (epoch seconds) stamps ``createdAt``, ``stoppedAt`` and snapshot times; ``throttle``
    limits SubmitServiceJob. Seeding methods (``put_*``, ``remove_*``) take already-normalised API
    shapes (see :mod:`batchpilot_local.world`) and skip the API's checks.
    """

    account_id: str
    region: str
    clock: Clock = time.time
    throttle: Throttle = field(default_factory=Throttle)
    service_environments: dict[str, dict[str, Any]] = field(default_factory=dict)
    queues: dict[str, JobQueue] = field(default_factory=dict)
    service_jobs: dict[str, StoredJob] = field(default_factory=dict)
    jobs: dict[str, StoredJob] = field(default_factory=dict)
    quota_shares: dict[str, dict[str, Any]] = field(default_factory=dict)
    _client_tokens: dict[str, str] = field(default_factory=dict)
    _positions: dict[str, dict[str, _Position]] = field(default_factory=dict)
    _seq: int = 0

    # ------------------------------------------------------------------ ids and look-ups
    def arn(self, resource: str, name: str) -> str:
        """``arn:aws:batch:<region>:<account>:<resource>/<name>``."""
        return f"arn:aws:batch:{self.region}:{self.account_id}:{resource}/{name}"

    def now_ms(self) -> int:
        """The clock in epoch milliseconds (Batch's timestamps)."""
        return int(self.clock() * 1000)

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def find_service_environment(self, ident: str) -> dict[str, Any] | None:
        """The service environment named ``ident`` or with that ARN; None when there is none."""
        if ident in self.service_environments:
            return self.service_environments[ident]
        return next(
            (e for e in self.service_environments.values() if e["serviceEnvironmentArn"] == ident), None
        )

    def find_queue(self, ident: str) -> JobQueue | None:
        """The job queue named ``ident`` or with that ARN; None when there is none."""
        if ident in self.queues:
            return self.queues[ident]
        return next((q for q in self.queues.values() if q.arn == ident), None)

    def _queue(self, ident: str) -> JobQueue:
        queue = self.find_queue(ident)
        if queue is None:
            raise ClientException(f"Job queue {ident} does not exist.")
        return queue

    def _service_environment(self, ident: str) -> dict[str, Any]:
        env = self.find_service_environment(ident)
        if env is None:
            raise ClientException(f"Service environment {ident} does not exist.")
        return env

    def _service_job(self, job_id: str) -> StoredJob:
        job = self.service_jobs.get(job_id) or next(
            (j for j in self.service_jobs.values() if j.detail.get("jobArn") == job_id), None
        )
        if job is None:
            raise ClientException(f"Service job {job_id} does not exist.")
        return job

    def _container_job(self, job_id: str) -> StoredJob:
        job = self.jobs.get(job_id) or next(
            (j for j in self.jobs.values() if j.detail.get("jobArn") == job_id), None
        )
        if job is None:
            raise ClientException(f"Job {job_id} does not exist.")
        return job

    # ------------------------------------------------------------------ moto's part of Batch
    def _moto(self) -> Any:
        # moto's public backend registry (read only): compute environments, job definitions and
        # scheduling policies live there.
        from moto.batch.models import batch_backends

        return batch_backends[self.account_id][self.region]

    def _job_definition(self, ident: str) -> dict[str, Any]:
        job_def = self._moto().get_job_definition(ident)
        if job_def is None or job_def.status != "ACTIVE":
            raise ClientException(f"Job definition {ident} does not exist or is not ACTIVE.")
        described: dict[str, Any] = deep(job_def.describe())
        return described

    def _scheduling_kind(self, policy_arn: str) -> str:
        """FAIR_SHARE for a scheduling policy moto holds (moto keeps only fair-share policies)."""
        if policy_arn in self._moto().list_scheduling_policies():
            return "FAIR_SHARE"
        raise ClientException(f"Scheduling policy {policy_arn} does not exist.")

    # ------------------------------------------------------------------ service environments
    def put_service_environment(self, detail: Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace a service environment from its DescribeServiceEnvironments entry
        (``serviceEnvironmentArn`` is derived from the name when missing)."""
        env = dict(deep(detail))
        name = str(env["serviceEnvironmentName"])
        env.setdefault("serviceEnvironmentArn", self.arn("service-environment", name))
        env.setdefault("serviceEnvironmentType", "SAGEMAKER_TRAINING")
        env.setdefault("state", "ENABLED")
        env.setdefault("status", "VALID")
        self.service_environments[name] = env
        return env

    def create_service_environment(
        self,
        *,
        name: str,
        environment_type: str,
        capacity_limits: Sequence[Mapping[str, Any]],
        state: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """CreateServiceEnvironment; returns the new environment's detail.

        Raises:
            ClientException: invalid name, name taken, 50 environments already, invalid limits or tags.
        """
        if not NAME_RE.match(name):
            raise ClientException(
                "serviceEnvironmentName must be 1-128 letters, numbers, hyphens (-) and underscores (_)"
            )
        if name in self.service_environments:
            raise ClientException(f"Service environment {name} already exists.")
        if len(self.service_environments) >= 50:
            raise ClientException("Service environment limit (50) reached.")
        limits = check_capacity_limits(capacity_limits)
        return self.put_service_environment(
            {
                "serviceEnvironmentName": name,
                "serviceEnvironmentType": environment_type,
                "state": state or "ENABLED",
                "status": "VALID",
                "capacityLimits": limits,
                "tags": check_tags(tags),
            }
        )

    @paginate(pagination_model=PAGINATION_MODEL)
    def describe_service_environments(self, service_environments: Sequence[str] = ()) -> list[dict[str, Any]]:
        """DescribeServiceEnvironments: copies of the environments named (name or ARN), all when
        none is, in creation order. Paginated by moto's paginator (``max_results``, ``next_token``
        keywords; returns ``(page, next_token)``).

        Raises:
            ClientException: more than 100 environments named.
            moto.core.exceptions.InvalidToken: a ``next_token`` of another query or a deleted item.
        """
        if len(service_environments) > 100:
            raise ClientException("At most 100 service environments can be described at once")
        return [
            deep(e)
            for e in self.service_environments.values()
            if not service_environments
            or e["serviceEnvironmentName"] in service_environments
            or e["serviceEnvironmentArn"] in service_environments
        ]

    def update_service_environment(
        self,
        service_environment: str,
        *,
        state: str | None = None,
        capacity_limits: Sequence[Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """UpdateServiceEnvironment (name or ARN): the given members change; returns the detail.

        Raises:
            ClientException: unknown environment or invalid limits.
        """
        env = self._service_environment(service_environment)
        if state is not None:
            env["state"] = state
        if capacity_limits is not None:
            env["capacityLimits"] = check_capacity_limits(capacity_limits)
        env["status"] = "VALID"
        return env

    def delete_service_environment(self, service_environment: str) -> None:
        """DeleteServiceEnvironment (name or ARN).

        Raises:
            ClientException: unknown, not DISABLED, or still used by a job queue.
        """
        env = self._service_environment(service_environment)
        if env.get("state") != "DISABLED":
            raise ClientException("A service environment must be DISABLED before it is deleted.")
        users = [
            q.name
            for q in self.queues.values()
            if any(
                o.get("serviceEnvironment") in (env["serviceEnvironmentName"], env["serviceEnvironmentArn"])
                for o in q.detail.get("serviceEnvironmentOrder", [])
            )
        ]
        if users:
            raise ClientException(f"Service environment is used by job queue(s): {', '.join(users)}")
        del self.service_environments[env["serviceEnvironmentName"]]

    # ------------------------------------------------------------------ job queues
    def put_job_queue(self, detail: Mapping[str, Any], scheduling: str = "FIFO") -> JobQueue:
        """Create or replace a job queue from its DescribeJobQueues entry (ARN derived when
        missing). ``scheduling``: FIFO, FAIR_SHARE or QUOTA_MANAGEMENT."""
        data = dict(deep(detail))
        name = str(data["jobQueueName"])
        data.setdefault("jobQueueArn", self.arn("job-queue", name))
        data.setdefault("state", "ENABLED")
        data.setdefault("status", "VALID")
        data.setdefault("statusReason", "JobQueue Healthy")
        data.setdefault("priority", 1)
        data.setdefault("computeEnvironmentOrder", [])
        if scheduling != "FIFO":
            data.setdefault("schedulingPolicyArn", self.arn("scheduling-policy", name))
        queue = JobQueue(data, scheduling)
        self.queues[name] = queue
        return queue

    def create_job_queue(
        self,
        *,
        name: str,
        priority: int,
        state: str | None = None,
        scheduling_policy_arn: str | None = None,
        compute_environment_order: Sequence[Mapping[str, Any]] = (),
        service_environment_order: Sequence[Mapping[str, Any]] = (),
        job_queue_type: str | None = None,
        job_state_time_limit_actions: Sequence[Mapping[str, Any]] = (),
        tags: Mapping[str, str] | None = None,
    ) -> JobQueue:
        """CreateJobQueue: a service queue (one service environment, type SAGEMAKER_TRAINING) or a
        container queue (1-3 compute environments moto holds). A queue with a scheduling policy is
        fair-share.

        Raises:
            ClientException: invalid name or priority (0-1000), name taken, both or neither of the
                environment orders, unknown environment or scheduling policy, invalid tags.
        """
        if not NAME_RE.match(name):
            raise ClientException(
                "jobQueueName must be 1-128 letters, numbers, hyphens (-) and underscores (_)"
            )
        if name in self.queues:
            raise ClientException(f"Job queue {name} already exists.")
        if not 0 <= int(priority) <= 1000:
            raise ClientException("priority must be between 0 and 1000")
        detail: dict[str, Any] = {
            "jobQueueName": name,
            "state": state or "ENABLED",
            "priority": priority,
            "tags": check_tags(tags),
            "jobStateTimeLimitActions": [dict(a) for a in job_state_time_limit_actions],
        }
        detail.update(
            self._queue_environments(
                compute_environment_order, service_environment_order, job_queue_type, creating=True
            )
        )
        scheduling = "FIFO"
        if scheduling_policy_arn:
            scheduling = self._scheduling_kind(scheduling_policy_arn)
            detail["schedulingPolicyArn"] = scheduling_policy_arn
        return self.put_job_queue(detail, scheduling)

    def _queue_environments(
        self,
        compute: Sequence[Mapping[str, Any]],
        service: Sequence[Mapping[str, Any]],
        queue_type: str | None,
        *,
        creating: bool,
    ) -> dict[str, Any]:
        if creating and bool(compute) == bool(service):
            raise ClientException("Specify either computeEnvironmentOrder or serviceEnvironmentOrder")
        out: dict[str, Any] = {}
        if service:
            if queue_type != "SAGEMAKER_TRAINING":
                raise ClientException(
                    "A job queue with serviceEnvironmentOrder must have jobQueueType SAGEMAKER_TRAINING"
                )
            if len(service) != 1:
                raise ClientException("A job queue can have exactly one service environment")
            env = self._service_environment(service[0]["serviceEnvironment"])
            out["serviceEnvironmentOrder"] = [
                {"order": service[0]["order"], "serviceEnvironment": env["serviceEnvironmentArn"]}
            ]
            out["jobQueueType"] = "SAGEMAKER_TRAINING"
            out["computeEnvironmentOrder"] = []
        if compute:
            if queue_type == "SAGEMAKER_TRAINING":
                raise ClientException("A SAGEMAKER_TRAINING job queue needs serviceEnvironmentOrder")
            if len(compute) > 3:
                raise ClientException("A job queue can have at most 3 compute environments")
            order = []
            for item in compute:
                env = self._moto().get_compute_environment(item["computeEnvironment"])
                if env is None:
                    raise ClientException(f"Compute environment {item['computeEnvironment']} does not exist.")
                order.append({"order": item["order"], "computeEnvironment": env.arn})
            out["computeEnvironmentOrder"] = order
            out["jobQueueType"] = queue_type or "ECS"
        return out

    @paginate(pagination_model=PAGINATION_MODEL)
    def describe_job_queues(self, job_queues: Sequence[str] = ()) -> list[dict[str, Any]]:
        """DescribeJobQueues: copies of the queues named (name or ARN), all when none is, in
        creation order. Paginated by moto's paginator, as :meth:`describe_service_environments`.

        Raises:
            ClientException: more than 100 queues named.
            moto.core.exceptions.InvalidToken: a ``next_token`` of another query or a deleted item.
        """
        if len(job_queues) > 100:
            raise ClientException("At most 100 job queues can be described at once")
        return [
            deep(q.detail)
            for q in self.queues.values()
            if not job_queues or q.name in job_queues or q.arn in job_queues
        ]

    def update_job_queue(
        self,
        job_queue: str,
        *,
        state: str | None = None,
        priority: int | None = None,
        scheduling_policy_arn: str | None = None,
        compute_environment_order: Sequence[Mapping[str, Any]] = (),
        service_environment_order: Sequence[Mapping[str, Any]] = (),
        job_state_time_limit_actions: Sequence[Mapping[str, Any]] | None = None,
    ) -> JobQueue:
        """UpdateJobQueue (name or ARN): the given members change.

        Raises:
            ClientException: unknown queue, priority outside 0-1000, a scheduling policy for a FIFO
                queue, environments that do not fit the queue's type.
        """
        queue = self._queue(job_queue)
        if state is not None:
            queue.detail["state"] = state
        if priority is not None:
            if not 0 <= int(priority) <= 1000:
                raise ClientException("priority must be between 0 and 1000")
            queue.detail["priority"] = priority
        if scheduling_policy_arn:
            if queue.scheduling == "FIFO":
                raise ClientException("A FIFO job queue cannot get a scheduling policy")
            queue.detail["schedulingPolicyArn"] = scheduling_policy_arn
        if job_state_time_limit_actions is not None:
            queue.detail["jobStateTimeLimitActions"] = [dict(a) for a in job_state_time_limit_actions]
        if compute_environment_order or service_environment_order:
            queue.detail.update(
                self._queue_environments(
                    compute_environment_order,
                    service_environment_order,
                    queue.detail.get("jobQueueType"),
                    creating=False,
                )
            )
        return queue

    # ------------------------------------------------------------------ quota shares
    def put_quota_share(self, detail: Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace a quota share from its ListQuotaShares entry, ``jobQueue`` (name or
        ARN) standing for ``jobQueueArn`` (ARN derived when missing; no checks: seeding)."""
        share = dict(deep(detail))
        queue = self._queue(str(share.pop("jobQueue", None) or share.get("jobQueueArn")))
        share["jobQueueArn"] = queue.arn
        name = str(share["quotaShareName"])
        share.setdefault("quotaShareArn", self.arn("quota-share", f"{queue.name}/{name}"))
        share.setdefault("state", "ENABLED")
        share.setdefault("status", "VALID")
        self.quota_shares[share["quotaShareArn"]] = share
        return share

    def create_quota_share(
        self,
        *,
        name: str,
        job_queue: str,
        capacity_limits: Sequence[Mapping[str, Any]],
        resource_sharing_configuration: Mapping[str, Any],
        preemption_configuration: Mapping[str, Any],
        state: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """CreateQuotaShare on a quota-management job queue (AWS Batch User Guide, "Quota
        shares": at most 20 per queue, 1-5 capacity limits in instances of a training instance
        type). The ARN format is the emulator's own (the API Reference gives none).

        Raises:
            ClientException: invalid name, unknown queue or not a quota-management one, the name
                taken in that queue, 20 shares already, no or more than 5 capacity limits (or one
                malformed: :func:`~.utils.check_capacity_limits`), invalid tags.
        """
        if not NAME_RE.match(name):
            raise ClientException(
                "quotaShareName must be 1-128 letters, numbers, hyphens (-) and underscores (_)"
            )
        queue = self._queue(job_queue)
        if queue.scheduling != "QUOTA_MANAGEMENT":
            raise ClientException(f"Job queue {queue.name} has no quota-management scheduling policy.")
        mine = [s for s in self.quota_shares.values() if s["jobQueueArn"] == queue.arn]
        if any(s["quotaShareName"] == name for s in mine):
            raise ClientException(f"Quota share {name} already exists in job queue {queue.name}.")
        if len(mine) >= _MAX_QUOTA_SHARES:
            raise ClientException(f"Job queue {queue.name} already has {_MAX_QUOTA_SHARES} quota shares.")
        limits = check_capacity_limits(capacity_limits)
        if len(limits) > _MAX_QUOTA_LIMITS:
            raise ClientException(f"A quota share has at most {_MAX_QUOTA_LIMITS} capacity limits.")
        return self.put_quota_share(
            {
                "quotaShareName": name,
                "jobQueue": queue.arn,
                "capacityLimits": limits,
                "resourceSharingConfiguration": dict(resource_sharing_configuration),
                "preemptionConfiguration": dict(preemption_configuration),
                "state": state or "ENABLED",
                "tags": check_tags(tags),
            }
        )

    @paginate(pagination_model=PAGINATION_MODEL)
    def list_quota_shares(self, job_queue: str) -> list[dict[str, Any]]:
        """ListQuotaShares: copies of the queue's quota shares (``QuotaShareDetail``, without
        ``tags``), in creation order; paginated by moto's paginator.

        Raises:
            ClientException: no such job queue.
            moto.core.exceptions.InvalidToken: a ``next_token`` of another query or a deleted item.
        """
        queue = self._queue(job_queue)
        return [
            {k: v for k, v in deep(s).items() if k != "tags"}
            for s in self.quota_shares.values()
            if s["jobQueueArn"] == queue.arn
        ]

    def delete_job_queue(self, job_queue: str) -> None:
        """DeleteJobQueue (name or ARN).

        Raises:
            ClientException: unknown queue, or not DISABLED.
        """
        queue = self._queue(job_queue)
        if queue.detail.get("state") != "DISABLED":
            raise ClientException("A job queue must be DISABLED before it is deleted.")
        del self.queues[queue.name]

    # ------------------------------------------------------------------ service jobs
    def put_service_job(self, detail: Mapping[str, Any]) -> StoredJob:
        """Add or replace a service job from its DescribeServiceJob shape. ``jobId``/``jobArn``
        are derived from each other or generated; ``createdAt`` defaults to now; ``jobQueue`` may
        be a name (made an ARN)."""
        data = dict(deep(detail))
        job_id, job_arn = data.get("jobId"), data.get("jobArn")
        if not job_id:
            job_id = str(job_arn).rsplit("/", 1)[-1] if job_arn else str(uuid.uuid4())
            data["jobId"] = job_id
        data.setdefault("jobArn", self.arn("service-job", str(job_id)))
        data.setdefault("serviceJobType", "SAGEMAKER_TRAINING")
        data.setdefault("createdAt", self.now_ms())
        data["jobQueue"] = self._queue_arn(str(data["jobQueue"]))
        old = self.service_jobs.get(str(job_id))
        job = StoredJob(data, old.seq if old else self._next_seq())
        self.service_jobs[str(job_id)] = job
        return job

    def remove_service_jobs(self) -> None:
        """Forget every service job (and client token)."""
        self.service_jobs.clear()
        self._client_tokens = {k: v for k, v in self._client_tokens.items() if not k.startswith("service:")}

    def _queue_arn(self, ident: str) -> str:
        queue = self.find_queue(ident)
        if queue is not None:
            return queue.arn
        return ident if ident.startswith("arn:") else self.arn("job-queue", ident)

    def submit_service_job(
        self,
        *,
        job_name: str,
        job_queue: str,
        service_job_type: str,
        service_request_payload: str,
        client_token: str | None = None,
        share_identifier: str | None = None,
        quota_share_name: str | None = None,
        scheduling_priority: int | None = None,
        retry_strategy: Mapping[str, Any] | None = None,
        timeout_config: Mapping[str, Any] | None = None,
        preemption_configuration: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> StoredJob:
        """SubmitServiceJob: a RUNNABLE job (nothing runs it) in a SAGEMAKER_TRAINING queue.

        The same ``client_token`` with the same request returns the job it created (the call still
        counts against the throttle).

        Raises:
            TooManyRequestsException: over the throttle (5 calls per second by default).
            ClientException: the client token was used with another request; invalid name, queue
                (unknown, not a service queue, another type, not ENABLED), payload (over 10 KiB,
                not a JSON object), share identifier or quota share (required on fair-share /
                quota-management queues, refused elsewhere), priority (0-9999), retry strategy
                (1-10 attempts, at most 5 evaluateOnExit), timeout, preemption config or tags.
        """
        # Every argument, before anything else is bound: the request's fingerprint, which tells a
        # retry (same clientToken, same request) from a clash (same clientToken, another request).
        request = {k: v for k, v in locals().items() if k != "self"}
        if not self.throttle.acquire():
            raise TooManyRequestsException()
        same = fingerprint(request, "client_token")
        if client_token is not None:
            if not 1 <= len(client_token) <= 64:
                raise ClientException("clientToken must be 1-64 characters")
            known = self._client_tokens.get(f"service:{client_token}")
            if known is not None and known in self.service_jobs:
                job = self.service_jobs[known]
                if job.fingerprint != same:
                    raise ClientException(
                        f"clientToken {client_token} was already used with different parameters."
                    )
                return job
        if not NAME_RE.match(job_name):
            raise ClientException("jobName must be 1-128 letters, numbers, hyphens (-) and underscores (_)")
        queue = self._queue(job_queue)
        if queue.kind != "service":
            raise ClientException(f"Job queue {queue.name} is not a SAGEMAKER_TRAINING job queue.")
        if service_job_type != queue.detail.get("jobQueueType"):
            raise ClientException(f"serviceJobType {service_job_type} does not match job queue {queue.name}.")
        if queue.detail.get("state") != "ENABLED":
            raise ClientException(f"Job queue {queue.name} is not ENABLED.")
        if len(service_request_payload.encode("utf-8")) > PAYLOAD_LIMIT:
            raise ClientException(f"serviceRequestPayload is larger than {PAYLOAD_LIMIT} bytes.")
        try:
            decoded = json.loads(service_request_payload)
        except ValueError:
            raise ClientException("serviceRequestPayload is not valid JSON.") from None
        if not isinstance(decoded, dict):
            raise ClientException("serviceRequestPayload must be a JSON object.")
        self._check_share(queue, share_identifier, quota_share_name)
        check_priority(scheduling_priority, "schedulingPriority")
        if retry_strategy is not None:
            if not 1 <= int(retry_strategy["attempts"]) <= 10:
                raise ClientException("retryStrategy.attempts must be between 1 and 10")
            if len(retry_strategy.get("evaluateOnExit") or []) > 5:
                raise ClientException("retryStrategy.evaluateOnExit allows at most 5 entries")
        duration = (timeout_config or {}).get("attemptDurationSeconds")
        if duration is not None and int(duration) < 1:
            raise ClientException("timeoutConfig.attemptDurationSeconds must be positive")
        if (
            preemption_configuration is not None
            and int(preemption_configuration.get("preemptionRetriesBeforeTermination", 0)) < 0
        ):
            raise ClientException("preemptionRetriesBeforeTermination must not be negative")
        checked_tags = check_tags(tags)
        detail: dict[str, Any] = {
            "jobName": job_name,
            "jobQueue": queue.arn,
            "serviceJobType": service_job_type,
            "serviceRequestPayload": service_request_payload,
            "status": "RUNNABLE",
            "createdAt": self.now_ms(),
            "attempts": [],
            "isTerminated": False,
        }
        optional = {
            "schedulingPriority": scheduling_priority,
            "shareIdentifier": share_identifier,
            "quotaShareName": quota_share_name,
            "retryStrategy": retry_strategy,
            "timeoutConfig": timeout_config,
            "preemptionConfiguration": preemption_configuration,
        }
        detail.update({key: deep(value) for key, value in optional.items() if value is not None})
        if tags is not None:
            detail["tags"] = checked_tags
        job = self.put_service_job(detail)
        job.fingerprint = same
        if client_token is not None:
            job.client_token = client_token
            self._client_tokens[f"service:{client_token}"] = str(job.detail["jobId"])
        return job

    @staticmethod
    def _check_share(queue: JobQueue, share: str | None, quota_share: str | None) -> None:
        if queue.scheduling == "FAIR_SHARE" and not share:
            raise ClientException(
                f"shareIdentifier is required: job queue {queue.name} has a fair-share policy."
            )
        if queue.scheduling != "FAIR_SHARE" and share is not None:
            raise ClientException(
                f"shareIdentifier is not allowed: job queue {queue.name} has no fair-share policy."
            )
        if queue.scheduling == "QUOTA_MANAGEMENT" and not quota_share:
            raise ClientException(f"quotaShareName is required: job queue {queue.name} has quota management.")
        if queue.scheduling != "QUOTA_MANAGEMENT" and quota_share is not None:
            raise ClientException(
                f"quotaShareName is not allowed: job queue {queue.name} has no quota management."
            )

    def describe_service_job(self, job_id: str) -> dict[str, Any]:
        """DescribeServiceJob (id or ARN): a copy of the job's detail.

        Raises:
            ClientException: unknown job.
        """
        detail: dict[str, Any] = deep(self._service_job(job_id).detail)
        return detail

    def list_service_jobs(
        self,
        *,
        job_queue: str | None = None,
        job_status: str | None = None,
        filters: Sequence[Mapping[str, Any]] = (),
        max_results: int | None = None,
        next_token: str | None = None,
    ) -> tuple[list[StoredJob], str | None]:
        """ListServiceJobs: one page of jobs, newest first, and the next page's token (None: last).

        As Batch: no status and no filter lists RUNNING jobs only; a filter other than
        SHARE_IDENTIFIER / QUOTA_SHARE_NAME ignores ``job_status``; at most one filter; pages of up
        to 100 (the default).

        Raises:
            ClientException: unknown queue, several filters, an invalid filter, ``max_results``
                outside 1-100, or a token of another query.
        """
        if len(filters) > 1:
            raise ClientException("Only one filter can be used at a time.")
        check_max_results(max_results, PAGE_LIMIT)
        queue_arn = self._queue(job_queue).arn if job_queue else None
        status = job_status
        match = job_filter(filters[0], SERVICE_FILTERS) if filters else None
        if filters and filters[0].get("name") not in ("SHARE_IDENTIFIER", "QUOTA_SHARE_NAME"):
            status = None  # "jobStatus is ignored and jobs with any status are returned"
        elif not filters and status is None:
            status = "RUNNING"
        jobs = [
            j
            for j in self.service_jobs.values()
            if (queue_arn is None or j.detail.get("jobQueue") == queue_arn)
            and (status is None or j.detail.get("status") == status)
            and (match is None or match(j.detail))
        ]
        query = ["service", queue_arn, status, [dict(f) for f in filters]]
        return _keyset_page(jobs, query, max_results or PAGE_LIMIT, next_token)

    def update_service_job(self, job_id: str, scheduling_priority: int) -> StoredJob:
        """UpdateServiceJob: a new scheduling priority (0-9999).

        Raises:
            ClientException: unknown job, priority out of range, or the job already finished.
        """
        job = self._service_job(job_id)
        check_priority(scheduling_priority, "schedulingPriority")
        if job.detail.get("status") in TERMINAL:
            raise ClientException(f"Service job {job_id} is in a terminal state.")
        job.detail["schedulingPriority"] = scheduling_priority
        return job

    def terminate_service_job(self, job_id: str, reason: str) -> None:
        """TerminateServiceJob: the job is FAILED at once (``isTerminated``); a finished job is
        left alone.

        Raises:
            ClientException: unknown job.
        """
        terminate(self._service_job(job_id).detail, reason, self.now_ms())

    def get_job_queue_snapshot(self, job_queue: str) -> dict[str, Any]:
        """GetJobQueueSnapshot: the GetJobQueueSnapshot response of a queue (name or ARN).

        The first 100 RUNNABLE jobs (array parents excluded) in scheduling order: ``createdAt``
        (FIFO) or highest ``schedulingPriority`` then ``createdAt`` (fair share, quota
        management; shares are not weighed). ``earliestTimeAtPosition`` is ``createdAt`` the first
        time a job is seen, then the time its position last changed. Usage sums ``capacityUsage``
        of SCHEDULED/STARTING/RUNNING jobs; fair-share and quota-management queues add per-share
        usage, quota-management queues the first RUNNABLE job of each quota share.

        Raises:
            ClientException: unknown queue.
        """
        queue = self._queue(job_queue)
        now = self.now_ms()
        pool = self.service_jobs if queue.kind == "service" else self.jobs
        in_queue = [j for j in pool.values() if j.detail.get("jobQueue") == queue.arn]
        runnable = [
            j for j in in_queue if j.detail.get("status") == "RUNNABLE" and not is_array_parent(j.detail)
        ]
        if queue.scheduling == "FIFO":
            runnable.sort(key=lambda j: j.sort_key)
        else:
            runnable.sort(key=lambda j: (-int(j.detail.get("schedulingPriority") or 0), *j.sort_key))
        positions = self._positions.setdefault(queue.arn, {})
        seen: dict[str, _Position] = {}
        for index, job in enumerate(runnable[:100]):
            arn = str(job.detail["jobArn"])
            previous = positions.get(arn)
            if previous is None:
                since = int(job.detail.get("createdAt") or now)
            elif previous.index != index:
                since = now
            else:
                since = previous.since
            seen[arn] = _Position(index, since)
        self._positions[queue.arn] = seen
        out: dict[str, Any] = {
            "frontOfQueue": {
                "jobs": [{"jobArn": arn, "earliestTimeAtPosition": pos.since} for arn, pos in seen.items()],
                "lastUpdatedAt": now,
            }
        }
        details = [j.detail for j in in_queue]
        dispatched = [d for d in details if d.get("status") in DISPATCHED]
        utilization: dict[str, Any] = {"totalCapacityUsage": usage(dispatched), "lastUpdatedAt": now}
        if queue.scheduling == "FAIR_SHARE":
            utilization["fairshareUtilization"] = share_usage(details, dispatched, "shareIdentifier")
        if queue.scheduling == "QUOTA_MANAGEMENT":
            utilization["quotaShareUtilization"] = {
                "topCapacityUtilization": share_usage(details, dispatched, "quotaShareName")[
                    "topCapacityUtilization"
                ]
            }
            first: dict[str, list[dict[str, Any]]] = {}
            for job in runnable:
                share = job.detail.get("quotaShareName")
                if share and share not in first:
                    arn = str(job.detail["jobArn"])
                    since = seen[arn].since if arn in seen else int(job.detail.get("createdAt") or now)
                    first[share] = [{"jobArn": arn, "earliestTimeAtPosition": since}]
            out["frontOfQuotaShares"] = {"quotaShares": first, "lastUpdatedAt": now}
        out["queueUtilization"] = utilization
        return out

    # ------------------------------------------------------------------ container jobs
    def put_job(self, detail: Mapping[str, Any]) -> StoredJob:
        """Add or replace a container job from its DescribeJobs shape (ids derived or generated,
        ``createdAt`` defaults to now, ``jobQueue`` may be a name)."""
        data = dict(deep(detail))
        job_id, job_arn = data.get("jobId"), data.get("jobArn")
        if not job_id:
            job_id = str(job_arn).rsplit("/", 1)[-1] if job_arn else str(uuid.uuid4())
            data["jobId"] = job_id
        data.setdefault("jobArn", self.arn("job", str(job_id)))
        data.setdefault("createdAt", self.now_ms())
        data["jobQueue"] = self._queue_arn(str(data["jobQueue"]))
        old = self.jobs.get(str(job_id))
        job = StoredJob(data, old.seq if old else self._next_seq())
        self.jobs[str(job_id)] = job
        return job

    def remove_jobs(self) -> None:
        """Forget every container job."""
        self.jobs.clear()

    def submit_job(
        self,
        *,
        job_name: str,
        job_queue: str,
        job_definition: str,
        share_identifier: str | None = None,
        scheduling_priority_override: int | None = None,
        array_properties: Mapping[str, Any] | None = None,
        depends_on: Sequence[Mapping[str, Any]] = (),
        parameters: Mapping[str, str] | None = None,
        container_overrides: Mapping[str, Any] | None = None,
        retry_strategy: Mapping[str, Any] | None = None,
        propagate_tags: bool | None = None,
        timeout: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> StoredJob:
        """SubmitJob to a container queue, keeping what moto drops: share identifier, scheduling
        priority, retry strategy, timeout, parameters merged over the job definition's, container
        overrides (environment merged by name, resource requirements by type), array children
        ``<id>:<n>`` with ``arrayProperties.index``. The job is RUNNABLE, or PENDING with
        unfinished ``depends_on`` (and an array parent). Returns the (parent) job.

        Raises:
            ClientException: invalid name, queue (unknown, a service queue, not ENABLED), job
                definition (unknown or not ACTIVE), share identifier, priority, retry attempts
                (1-10), timeout (< 60 s), array size (2-10,000), unknown dependency, tags; container
                overrides for a job definition without containerProperties.
        """
        if not JOB_NAME_RE.match(job_name):
            raise ClientException(
                "jobName must be 1-128 characters: letters, numbers, hyphens (-) and underscores (_),"
                " starting with a letter or number"
            )
        queue = self._queue(job_queue)
        if queue.kind != "container":
            raise ClientException(
                f"Job queue {queue.name} takes service jobs (SubmitServiceJob), not container jobs."
            )
        if queue.detail.get("state") != "ENABLED":
            raise ClientException(f"Job queue {queue.name} is not ENABLED.")
        job_def = self._job_definition(job_definition)
        self._check_share(queue, share_identifier, None)
        check_priority(scheduling_priority_override, "schedulingPriorityOverride")
        retry = retry_strategy or job_def.get("retryStrategy")
        if retry and retry.get("attempts") is not None and not 1 <= int(retry["attempts"]) <= 10:
            raise ClientException("retryStrategy.attempts must be between 1 and 10")
        limit = timeout or job_def.get("timeout")
        if limit and int(limit.get("attemptDurationSeconds", 60)) < 60:
            raise ClientException("timeout.attemptDurationSeconds must be at least 60")
        size = (array_properties or {}).get("size")
        if size is not None and not 2 <= int(size) <= 10000:
            raise ClientException("arrayProperties.size must be between 2 and 10000")
        depends = [dict(d) for d in depends_on]
        for dep in depends:
            if dep.get("jobId") not in self.jobs:
                raise ClientException(f"dependsOn job {dep.get('jobId')} does not exist.")
        checked_tags = check_tags(tags)
        pending = any(self.jobs[d["jobId"]].detail.get("status") not in TERMINAL for d in depends)
        detail: dict[str, Any] = {
            "jobName": job_name,
            "jobQueue": queue.arn,
            "status": "PENDING" if pending or size is not None else "RUNNABLE",
            "attempts": [],
            "createdAt": self.now_ms(),
            "dependsOn": depends,
            "jobDefinition": job_def["jobDefinitionArn"],
            "parameters": {**(job_def.get("parameters") or {}), **(parameters or {})},
        }
        if share_identifier is not None:
            detail["shareIdentifier"] = share_identifier
        priority = (
            scheduling_priority_override
            if scheduling_priority_override is not None
            else job_def.get("schedulingPriority")
        )
        if priority is not None:
            detail["schedulingPriority"] = priority
        if retry:
            detail["retryStrategy"] = deep(retry)
        if limit:
            detail["timeout"] = deep(limit)
        if "containerProperties" in job_def:
            detail["container"] = apply_overrides(job_def["containerProperties"], container_overrides)
        elif container_overrides:
            raise ClientException("containerOverrides given for a job definition without containerProperties")
        if job_def.get("nodeProperties"):
            detail["nodeProperties"] = job_def["nodeProperties"]
        if job_def.get("platformCapabilities"):
            detail["platformCapabilities"] = job_def["platformCapabilities"]
        propagate = propagate_tags if propagate_tags is not None else job_def.get("propagateTags")
        if propagate is not None:
            detail["propagateTags"] = propagate
        if tags is not None:
            detail["tags"] = checked_tags
        if size is not None:
            detail["arrayProperties"] = {"size": size, "statusSummary": {}}
        parent = self.put_job(detail)
        if size is not None:
            parent.array_parent = True
            parent_id = str(parent.detail["jobId"])
            for index in range(int(size)):
                child = deep(detail)
                child.update(
                    jobId=f"{parent_id}:{index}",
                    jobArn=f"{parent.detail['jobArn']}:{index}",
                    status="RUNNABLE" if not pending else "PENDING",
                    arrayProperties={"index": index},
                )
                self.put_job(child)
        return parent

    def job_view(self, job: StoredJob) -> dict[str, Any]:
        """A copy of a container job's detail as DescribeJobs answers it (an array parent's
        ``statusSummary`` counted from its children now)."""
        detail: dict[str, Any] = deep(job.detail)
        if job.array_parent:
            counts = dict.fromkeys(JOB_STATUSES, 0)
            for child in self._children(job):
                status = str(child.detail.get("status"))
                counts[status] = counts.get(status, 0) + 1
            detail["arrayProperties"]["statusSummary"] = counts
        return detail

    def describe_jobs(self, jobs: Sequence[str]) -> list[dict[str, Any]]:
        """DescribeJobs (ids or ARNs): the details of those that exist, in the order asked.

        Raises:
            ClientException: more than 100 jobs asked for.
        """
        if len(jobs) > 100:
            raise ClientException("At most 100 jobs can be described at once")
        found = []
        for ident in jobs:
            job = self.jobs.get(ident) or next(
                (j for j in self.jobs.values() if j.detail.get("jobArn") == ident), None
            )
            if job is not None:
                found.append(self.job_view(job))
        return found

    def list_jobs(
        self,
        *,
        job_queue: str | None = None,
        array_job_id: str | None = None,
        multi_node_job_id: str | None = None,
        job_status: str | None = None,
        filters: Sequence[Mapping[str, Any]] = (),
        max_results: int | None = None,
        next_token: str | None = None,
    ) -> tuple[list[StoredJob], str | None]:
        """ListJobs: one page of container jobs, newest first, and the next page's token.

        Jobs of a queue (array children excluded), the children of an array job, or the nodes of
        a multi-node job. Status and filter rules as :meth:`list_service_jobs` (the filter that
        keeps ``job_status`` is SHARE_IDENTIFIER); pages of up to 1,000 (100 with a filter).

        Raises:
            ClientException: not exactly one of queue / array job / multi-node job (a filter alone
                is allowed), several filters, an invalid filter or ``max_results``, unknown queue,
                or a token of another query.
        """
        sources = [s for s in (job_queue, array_job_id, multi_node_job_id) if s]
        if len(sources) > 1 or (not sources and not filters):
            raise ClientException("Specify exactly one of jobQueue, arrayJobId or multiNodeJobId")
        if len(filters) > 1:
            raise ClientException("Only one filter can be used at a time.")
        limit = PAGE_LIMIT if filters else LIST_JOBS_LIMIT
        check_max_results(max_results, limit)
        status = job_status
        match = job_filter(filters[0], CONTAINER_FILTERS) if filters else None
        if filters and filters[0].get("name") != "SHARE_IDENTIFIER":
            status = None
        elif not filters and status is None:
            status = "RUNNING"
        jobs: list[StoredJob]
        if array_job_id:
            jobs = [j for j in self.jobs.values() if str(j.detail["jobId"]).startswith(f"{array_job_id}:")]
        elif multi_node_job_id:
            prefix = f"{multi_node_job_id}#"
            jobs = [j for j in self.jobs.values() if str(j.detail["jobId"]).startswith(prefix)]
        else:
            queue_arn = self._queue(job_queue).arn if job_queue else None
            jobs = [
                j
                for j in self.jobs.values()
                if (queue_arn is None or j.detail.get("jobQueue") == queue_arn)
                and "index" not in (j.detail.get("arrayProperties") or {})
            ]
        selected = [
            j
            for j in jobs
            if (status is None or j.detail.get("status") == status) and (match is None or match(j.detail))
        ]
        query = ["container", job_queue, array_job_id, multi_node_job_id, status, [dict(f) for f in filters]]
        return _keyset_page(selected, query, max_results or limit, next_token)

    def terminate_job(self, job_id: str, reason: str) -> None:
        """TerminateJob: the job (and an array job's children) FAILED at once (``isTerminated``).

        Raises:
            ClientException: unknown job.
        """
        job = self._container_job(job_id)
        now = self.now_ms()
        for target in [job, *self._children(job)]:
            terminate(target.detail, reason, now)

    def cancel_job(self, job_id: str, reason: str) -> None:
        """CancelJob: the job (and an array job's children) FAILED at once (``isCancelled``) when
        it has not started; a started job is left alone.

        Raises:
            ClientException: unknown job.
        """
        job = self._container_job(job_id)
        now = self.now_ms()
        for target in [job, *self._children(job)]:
            if target.detail.get("status") in NOT_STARTED:
                terminate(target.detail, reason, now, key="isCancelled")

    def _children(self, job: StoredJob) -> list[StoredJob]:
        if not job.array_parent:
            return []
        prefix = f"{job.detail['jobId']}:"
        return [j for j in self.jobs.values() if str(j.detail["jobId"]).startswith(prefix)]

    # ------------------------------------------------------------------ tags
    def tags_of(self, arn: str, *, create: bool = True) -> dict[str, str] | None:
        """The live ``tags`` dict of the Batch resource ``arn`` when this backend owns that
        resource type (service job, job, job queue, service environment); None: moto's (a job
        definition, a compute environment, a scheduling policy). A resource without tags gets an
        empty ``tags`` dict only when ``create`` (a TagResource); otherwise a new empty dict is
        returned and the resource is left as it was (a read never changes a later Describe).

        Raises:
            ClientException: an owned type, but no such resource.
        """
        parts = arn_parts(arn)
        if parts is None or parts[0] not in ("service-job", "job", "job-queue", "service-environment"):
            return None
        target: dict[str, Any] | None
        if parts[0] == "service-job":
            target = next(
                (j.detail for j in self.service_jobs.values() if j.detail.get("jobArn") == arn), None
            )
        elif parts[0] == "job":
            target = next((j.detail for j in self.jobs.values() if j.detail.get("jobArn") == arn), None)
        elif parts[0] == "job-queue":
            queue = self.find_queue(arn)
            target = queue.detail if queue else None
        else:
            target = self.find_service_environment(arn)
        if target is None:
            raise ClientException(f"Resource {arn} does not exist.")
        if not create and "tags" not in target:
            return {}
        tags: dict[str, str] = target.setdefault("tags", {})
        return tags


# ---------------------------------------------------------------------------------------- keyset pages
# ListServiceJobs and ListJobs do not use moto's paginator. Its token names the first job of the
# next page and is refused ("Resource not found!") once that job has left the listing; but a
# listing filtered by status loses jobs between pages all the time (a RUNNABLE job starts while
# the capacity function pages through thousands), and Batch's tokens survive that. A keyset token
# (the sort key of the last job returned) never skips or repeats a job, whatever is added or
# removed between pages.
def _keyset_page(
    jobs: Sequence[StoredJob], query: Any, size: int, next_token: str | None
) -> tuple[list[StoredJob], str | None]:
    """Newest first (createdAt, then submission order); ``query`` (JSON-able) ties the token to
    the listing it was issued for.

    Raises:
        ClientException: ``next_token`` is not one of ours, or was issued for another ``query``.
    """
    query_id = fingerprint({"q": query})
    ordered = sorted(jobs, key=lambda j: j.sort_key, reverse=True)
    if next_token:
        data = _decode_token(next_token)
        after = data.get("k")
        if data.get("q") != query_id or not (isinstance(after, list) and len(after) == 2):
            raise ClientException("Invalid nextToken")
        last = (int(after[0]), int(after[1]))
        ordered = [j for j in ordered if j.sort_key < last]
    page = ordered[:size]
    token = _encode_token({"q": query_id, "k": list(page[-1].sort_key)}) if len(ordered) > size else None
    return page, token


def _encode_token(data: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, sort_keys=True).encode()).decode()


def _decode_token(token: str) -> dict[str, Any]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, binascii.Error):
        raise ClientException("Invalid nextToken") from None
    if not isinstance(data, dict):
        raise ClientException("Invalid nextToken")
    return data
