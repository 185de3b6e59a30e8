"""What moto lacks, answered at the HTTP level: AWS Batch service jobs and SageMaker training jobs.

moto 5.2 answers "Not yet implemented" for the Batch service-job and service-environment APIs,
keeps no share identifier, scheduling priority or retry strategy on container jobs, and marks
every SageMaker training job ``Completed`` the moment it is created. This module answers those
calls itself, in process, behind the same boto3 calls the Lambda code makes:

- :class:`EmbeddedBatch` (one per account and region) holds service environments, job queues
  (service and container), service jobs and container jobs. Compute environments, job
  definitions and scheduling policies stay in moto; :class:`EmbeddedBatch` reads them there.
- :class:`EmbeddedTraining` holds SageMaker training jobs; every other SageMaker call goes to moto.
- :class:`Overlay` plugs both into moto's request handling: moto answers every botocore request
  (its ``before-send`` hook) through one stubber object; :meth:`Overlay.install` shadows that
  object's ``process_request`` so the overlay sees each request first and passes on what it does
  not answer, and :meth:`Overlay.uninstall` removes the shadow. Requests are serialised and
  validated by botocore as usual; responses are raw HTTP (status, headers, JSON body) parsed by
  botocore's own parser, errors included (``x-amzn-ErrorType`` for Batch, ``__type`` for SageMaker).

Errors look like AWS's: Batch answers ``ClientException`` (HTTP 400) with a ``message``;
SubmitServiceJob over its rate limit answers ``TooManyRequestsException`` (HTTP 429), which
botocore's ``standard`` retry mode treats as throttling. A bug in this module is not turned into
a 500: it surfaces as the Python exception it is.

:func:`shape_problems` checks a value against a botocore shape (keys, types, enums); tests use it
to check every response shape, and :mod:`batchpilot_local.world` to validate scenario worlds.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import os
import re
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import Any, ClassVar, cast
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = [
    "SERVICE_JOB_STATUSES",
    "SUBMIT_SERVICE_JOB_RATE",
    "ApiError",
    "EmbeddedBatch",
    "EmbeddedTraining",
    "Overlay",
    "Throttle",
    "service_model",
    "shape_problems",
]

Response = tuple[int, dict[str, str], str]
"""What a moto URL handler returns: status, headers, body."""
Clock = Callable[[], float]
"""Seconds since the epoch (``time.time``-like)."""

SUBMIT_SERVICE_JOB_RATE = 5
"""SubmitServiceJob calls allowed per second per account (AWS: 5, not adjustable)."""

SERVICE_JOB_STATUSES = (
    "SUBMITTED",
    "PENDING",
    "RUNNABLE",
    "SCHEDULED",
    "STARTING",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
)
JOB_STATUSES = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED", "FAILED")
_TERMINAL = frozenset({"SUCCEEDED", "FAILED"})
_DISPATCHED = frozenset({"SCHEDULED", "STARTING", "RUNNING"})
_NOT_STARTED = frozenset({"SUBMITTED", "PENDING", "RUNNABLE"})
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
_TRAINING_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_PAYLOAD_LIMIT = 10 * 1024
_MAX_TAGS = 50
_BATCH_ERROR_NAMESPACE = "http://internal.amazon.com/coral/com.amazonaws.batch.v20160810/"


class ApiError(Exception):
    """An AWS error response: ``code`` (the error type), ``message`` and HTTP ``status``."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


def _client_error(message: str) -> ApiError:
    return ApiError("ClientException", message, 400)


def _sm_validation(message: str) -> ApiError:
    return ApiError("ValidationException", message, 400)


# ---------------------------------------------------------------------------------------- shapes
@cache
def service_model(service: str) -> Any:
    """botocore's service model for ``service`` (e.g. ``"batch"``), loaded once."""
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


def shape_problems(
    shape: Any, value: Any, path: str = "", *, check_required: bool = False, timestamps: str = "number"
) -> list[str]:
    """What is wrong with ``value`` as an instance of the botocore ``shape``.

    Unknown keys, wrong types and values outside an enum are reported as ``"<path>: <problem>"``.
    ``timestamps`` says how ``timestamp`` members are written: ``"number"`` (the JSON wire format:
    epoch seconds) or ``"parsed"`` (a ``datetime``, as boto3 returns them). Required members are
    checked only with ``check_required``.
    """
    problems: list[str] = []
    _walk(shape, value, path or shape.name, problems, check_required, timestamps)
    return problems


def _walk(shape: Any, value: Any, path: str, out: list[str], required: bool, timestamps: str) -> None:
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, Mapping):
            out.append(f"{path}: expected an object, got {type(value).__name__}")
            return
        for key, item in value.items():
            member = shape.members.get(key)
            if member is None:
                out.append(f"{path}.{key}: not a member of {shape.name}")
            else:
                _walk(member, item, f"{path}.{key}", out, required, timestamps)
        if required:
            out.extend(f"{path}.{key}: required" for key in shape.required_members if key not in value)
    elif kind == "list":
        if not isinstance(value, list):
            out.append(f"{path}: expected a list, got {type(value).__name__}")
            return
        for index, item in enumerate(value):
            _walk(shape.member, item, f"{path}[{index}]", out, required, timestamps)
    elif kind == "map":
        if not isinstance(value, Mapping):
            out.append(f"{path}: expected an object, got {type(value).__name__}")
            return
        for key, item in value.items():
            if not isinstance(key, str):
                out.append(f"{path}: key {key!r} is not a string")
            _walk(shape.value, item, f"{path}.{key}", out, required, timestamps)
    elif kind == "string":
        if not isinstance(value, str):
            out.append(f"{path}: expected a string, got {type(value).__name__}")
        elif shape.enum and value not in shape.enum:
            out.append(f"{path}: {value!r} is not one of {', '.join(shape.enum)}")
    elif kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            out.append(f"{path}: expected an integer, got {type(value).__name__}")
    elif kind in ("double", "float"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            out.append(f"{path}: expected a number, got {type(value).__name__}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            out.append(f"{path}: expected a boolean, got {type(value).__name__}")
    elif kind == "timestamp":
        ok = isinstance(value, datetime) if timestamps == "parsed" else isinstance(value, int | float)
        if not ok or isinstance(value, bool):
            out.append(f"{path}: expected a timestamp, got {type(value).__name__}")
    elif kind == "blob" and not isinstance(value, bytes | str):
        out.append(f"{path}: expected bytes, got {type(value).__name__}")


# ---------------------------------------------------------------------------------------- helpers
def _now_ms(clock: Clock) -> int:
    return int(clock() * 1000)


def _deep(value: Any) -> Any:
    return copy.deepcopy(value)


def _token(data: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, sort_keys=True).encode()).decode()


def _untoken(token: str) -> dict[str, Any]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, binascii.Error):
        raise _client_error("Invalid nextToken") from None
    if not isinstance(data, dict):
        raise _client_error("Invalid nextToken")
    return data


def _fingerprint(params: Mapping[str, Any], *drop: str) -> str:
    return json.dumps({k: v for k, v in params.items() if k not in drop}, sort_keys=True, default=str)


def _max_results(params: Mapping[str, Any], limit: int) -> int:
    value = params.get("maxResults")
    if value is None:
        return limit
    if not 1 <= int(value) <= limit:
        raise _client_error(f"maxResults must be between 1 and {limit}")
    return int(value)


def _check_tags(tags: Any) -> dict[str, str]:
    if tags is None:
        return {}
    if len(tags) > _MAX_TAGS:
        raise _client_error(f"Too many tags: {len(tags)} (at most {_MAX_TAGS})")
    for key, value in tags.items():
        if not 1 <= len(key) <= 128 or len(value) > 256:
            raise _client_error(f"Invalid tag {key!r}: keys are 1-128 characters, values at most 256")
        if key.lower().startswith("aws:"):
            raise _client_error(f"Invalid tag {key!r}: the aws: prefix is reserved")
    return dict(tags)


def _check_priority(value: Any, name: str) -> None:
    if value is not None and not 0 <= int(value) <= 9999:
        raise _client_error(f"{name} must be between 0 and 9999")


def _arn_parts(arn: str) -> tuple[str, str] | None:
    """``arn:aws:batch:R:A:service-job/ID`` → ``("service-job", "ID")``; None if not a Batch ARN."""
    match = re.match(r"^arn:aws[a-z-]*:batch:[^:]*:[^:]*:([a-z-]+)/(.+)$", arn)
    return (match.group(1), match.group(2)) if match else None


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
        self._calls.clear()


# ---------------------------------------------------------------------------------------- records
@dataclass
class JobQueue:
    """A job queue: ``detail`` is its DescribeJobQueues entry; ``scheduling`` is FIFO, FAIR_SHARE
    or QUOTA_MANAGEMENT (AWS derives it from the scheduling policy)."""

    detail: dict[str, Any]
    scheduling: str = "FIFO"

    @property
    def name(self) -> str:
        return str(self.detail["jobQueueName"])

    @property
    def arn(self) -> str:
        return str(self.detail["jobQueueArn"])

    @property
    def kind(self) -> str:
        """``service`` (SAGEMAKER_TRAINING service jobs) or ``container``."""
        return "service" if self.detail.get("jobQueueType") == "SAGEMAKER_TRAINING" else "container"


@dataclass
class StoredJob:
    """A service job (``detail`` = DescribeServiceJob) or a container job (``detail`` = JobDetail)."""

    detail: dict[str, Any]
    seq: int
    client_token: str | None = None
    fingerprint: str | None = None
    array_parent: bool = False  # submitted here with arrayProperties.size: statusSummary is live

    @property
    def sort_key(self) -> tuple[int, int]:
        return (int(self.detail.get("createdAt") or 0), self.seq)


@dataclass
class _Position:
    index: int
    since: int


@dataclass
class EmbeddedBatch:
    """The Batch APIs moto lacks, for one account and region.

    Operation methods take the request body as botocore serialised it (a dict with the API's
    member names) and return the response body. Seeding methods (``put_*``, ``remove_*``) take
    already-normalised API shapes (see :mod:`batchpilot_local.world`).
    """

    account_id: str
    region: str
    clock: Clock = time.time
    throttle: Throttle = field(default_factory=Throttle)
    service_environments: dict[str, dict[str, Any]] = field(default_factory=dict)
    queues: dict[str, JobQueue] = field(default_factory=dict)
    service_jobs: dict[str, StoredJob] = field(default_factory=dict)
    jobs: dict[str, StoredJob] = field(default_factory=dict)
    _client_tokens: dict[str, str] = field(default_factory=dict)
    _positions: dict[str, dict[str, _Position]] = field(default_factory=dict)
    _seq: int = 0

    OPERATIONS: ClassVar[dict[str, str]] = {
        "createserviceenvironment": "create_service_environment",
        "describeserviceenvironments": "describe_service_environments",
        "updateserviceenvironment": "update_service_environment",
        "deleteserviceenvironment": "delete_service_environment",
        "submitservicejob": "submit_service_job",
        "describeservicejob": "describe_service_job",
        "listservicejobs": "list_service_jobs",
        "updateservicejob": "update_service_job",
        "terminateservicejob": "terminate_service_job",
        "getjobqueuesnapshot": "get_job_queue_snapshot",
        "createjobqueue": "create_job_queue",
        "describejobqueues": "describe_job_queues",
        "updatejobqueue": "update_job_queue",
        "deletejobqueue": "delete_job_queue",
        "submitjob": "submit_job",
        "describejobs": "describe_jobs",
        "listjobs": "list_jobs",
        "terminatejob": "terminate_job",
        "canceljob": "cancel_job",
    }
    """Last path segment of the REST URI (``/v1/<segment>``) → method."""

    def handle(self, segment: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Run the operation whose URI ends in ``segment``. Raises :class:`ApiError`."""
        method: Callable[[Mapping[str, Any]], dict[str, Any]] = getattr(self, self.OPERATIONS[segment])
        return method(params)

    # ------------------------------------------------------------------ ids
    def arn(self, resource: str, name: str) -> str:
        return f"arn:aws:batch:{self.region}:{self.account_id}:{resource}/{name}"

    def now_ms(self) -> int:
        return _now_ms(self.clock)

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def find_service_environment(self, ident: str) -> dict[str, Any] | None:
        if ident in self.service_environments:
            return self.service_environments[ident]
        return next(
            (e for e in self.service_environments.values() if e["serviceEnvironmentArn"] == ident), None
        )

    def find_queue(self, ident: str) -> JobQueue | None:
        if ident in self.queues:
            return self.queues[ident]
        return next((q for q in self.queues.values() if q.arn == ident), None)

    def _queue(self, ident: str) -> JobQueue:
        queue = self.find_queue(ident)
        if queue is None:
            raise _client_error(f"Job queue {ident} does not exist.")
        return queue

    def _service_environment(self, ident: str) -> dict[str, Any]:
        env = self.find_service_environment(ident)
        if env is None:
            raise _client_error(f"Service environment {ident} does not exist.")
        return env

    def _service_job(self, job_id: str) -> StoredJob:
        job = self.service_jobs.get(job_id) or next(
            (j for j in self.service_jobs.values() if j.detail.get("jobArn") == job_id), None
        )
        if job is None:
            raise _client_error(f"Service job {job_id} does not exist.")
        return job

    def _container_job(self, job_id: str) -> StoredJob:
        job = self.jobs.get(job_id) or next(
            (j for j in self.jobs.values() if j.detail.get("jobArn") == job_id), None
        )
        if job is None:
            raise _client_error(f"Job {job_id} does not exist.")
        return job

    # ------------------------------------------------------------------ moto's part of Batch
    def _moto(self) -> Any:
        from moto.batch.models import batch_backends

        return batch_backends[self.account_id][self.region]

    def _job_definition(self, ident: str) -> dict[str, Any]:
        job_def = self._moto().get_job_definition(ident)
        if job_def is None or job_def.status != "ACTIVE":
            raise _client_error(f"Job definition {ident} does not exist or is not ACTIVE.")
        return cast(dict[str, Any], _deep(job_def.describe()))

    # ------------------------------------------------------------------ service environments
    def put_service_environment(self, detail: Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace a service environment from its DescribeServiceEnvironments entry
        (``serviceEnvironmentArn`` is derived from the name when missing)."""
        env = dict(_deep(detail))
        name = str(env["serviceEnvironmentName"])
        env.setdefault("serviceEnvironmentArn", self.arn("service-environment", name))
        env.setdefault("serviceEnvironmentType", "SAGEMAKER_TRAINING")
        env.setdefault("state", "ENABLED")
        env.setdefault("status", "VALID")
        self.service_environments[name] = env
        return env

    def create_service_environment(self, p: Mapping[str, Any]) -> dict[str, Any]:
        name = p["serviceEnvironmentName"]
        if not _NAME_RE.match(name):
            raise _client_error(
                "serviceEnvironmentName must be 1-128 letters, numbers, hyphens (-) and underscores (_)"
            )
        if name in self.service_environments:
            raise _client_error(f"Service environment {name} already exists.")
        if len(self.service_environments) >= 50:
            raise _client_error("Service environment limit (50) reached.")
        limits = self._check_capacity_limits(p["capacityLimits"])
        env = self.put_service_environment(
            {
                "serviceEnvironmentName": name,
                "serviceEnvironmentType": p["serviceEnvironmentType"],
                "state": p.get("state") or "ENABLED",
                "status": "VALID",
                "capacityLimits": limits,
                "tags": _check_tags(p.get("tags")),
            }
        )
        return {"serviceEnvironmentName": name, "serviceEnvironmentArn": env["serviceEnvironmentArn"]}

    @staticmethod
    def _check_capacity_limits(limits: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        if not limits:
            raise _client_error("capacityLimits must contain at least one limit")
        units = [limit.get("capacityUnit") for limit in limits]
        for limit in limits:
            if limit.get("maxCapacity") is None or not limit.get("capacityUnit"):
                raise _client_error("Each capacity limit needs maxCapacity and capacityUnit")
            if int(limit["maxCapacity"]) < 0:
                raise _client_error("maxCapacity must not be negative")
        if len(set(units)) != len(units):
            raise _client_error("capacityLimits has the same capacityUnit twice")
        return [dict(limit) for limit in limits]

    def describe_service_environments(self, p: Mapping[str, Any]) -> dict[str, Any]:
        wanted = p.get("serviceEnvironments") or []
        if len(wanted) > 100:
            raise _client_error("At most 100 service environments can be described at once")
        envs = [
            e
            for e in self.service_environments.values()
            if not wanted or e["serviceEnvironmentName"] in wanted or e["serviceEnvironmentArn"] in wanted
        ]
        page, token = _offset_page(envs, p, 100, "describe_service_environments")
        out: dict[str, Any] = {"serviceEnvironments": _deep(page)}
        if token:
            out["nextToken"] = token
        return out

    def update_service_environment(self, p: Mapping[str, Any]) -> dict[str, Any]:
        env = self._service_environment(p["serviceEnvironment"])
        if p.get("state") is not None:
            env["state"] = p["state"]
        if p.get("capacityLimits") is not None:
            env["capacityLimits"] = self._check_capacity_limits(p["capacityLimits"])
        env["status"] = "VALID"
        return {
            "serviceEnvironmentName": env["serviceEnvironmentName"],
            "serviceEnvironmentArn": env["serviceEnvironmentArn"],
        }

    def delete_service_environment(self, p: Mapping[str, Any]) -> dict[str, Any]:
        env = self._service_environment(p["serviceEnvironment"])
        if env.get("state") != "DISABLED":
            raise _client_error("A service environment must be DISABLED before it is deleted.")
        users = [
            q.name
            for q in self.queues.values()
            if any(
                o.get("serviceEnvironment") in (env["serviceEnvironmentName"], env["serviceEnvironmentArn"])
                for o in q.detail.get("serviceEnvironmentOrder", [])
            )
        ]
        if users:
            raise _client_error(f"Service environment is used by job queue(s): {', '.join(users)}")
        del self.service_environments[env["serviceEnvironmentName"]]
        return {}

    # ------------------------------------------------------------------ job queues
    def put_job_queue(self, detail: Mapping[str, Any], scheduling: str = "FIFO") -> JobQueue:
        """Create or replace a job queue from its DescribeJobQueues entry (ARN derived when
        missing). ``scheduling``: FIFO, FAIR_SHARE or QUOTA_MANAGEMENT."""
        data = dict(_deep(detail))
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

    def create_job_queue(self, p: Mapping[str, Any]) -> dict[str, Any]:
        name = p["jobQueueName"]
        if not _NAME_RE.match(name):
            raise _client_error(
                "jobQueueName must be 1-128 letters, numbers, hyphens (-) and underscores (_)"
            )
        if name in self.queues:
            raise _client_error(f"Job queue {name} already exists.")
        if not 0 <= int(p["priority"]) <= 1000:
            raise _client_error("priority must be between 0 and 1000")
        detail: dict[str, Any] = {
            "jobQueueName": name,
            "state": p.get("state") or "ENABLED",
            "priority": p["priority"],
            "tags": _check_tags(p.get("tags")),
            "jobStateTimeLimitActions": list(p.get("jobStateTimeLimitActions") or []),
        }
        detail.update(self._queue_environments(p, creating=True))
        scheduling = "FIFO"
        if p.get("schedulingPolicyArn"):
            scheduling = self._scheduling_kind(p["schedulingPolicyArn"])
            detail["schedulingPolicyArn"] = p["schedulingPolicyArn"]
        queue = self.put_job_queue(detail, scheduling)
        return {"jobQueueName": name, "jobQueueArn": queue.arn}

    def _queue_environments(self, p: Mapping[str, Any], creating: bool) -> dict[str, Any]:
        compute = p.get("computeEnvironmentOrder") or []
        service = p.get("serviceEnvironmentOrder") or []
        if creating and bool(compute) == bool(service):
            raise _client_error("Specify either computeEnvironmentOrder or serviceEnvironmentOrder")
        out: dict[str, Any] = {}
        if service:
            queue_type = p.get("jobQueueType", "SAGEMAKER_TRAINING" if not creating else None)
            if queue_type != "SAGEMAKER_TRAINING":
                raise _client_error(
                    "A job queue with serviceEnvironmentOrder must have jobQueueType SAGEMAKER_TRAINING"
                )
            if len(service) != 1:
                raise _client_error("A job queue can have exactly one service environment")
            env = self._service_environment(service[0]["serviceEnvironment"])
            out["serviceEnvironmentOrder"] = [
                {"order": service[0]["order"], "serviceEnvironment": env["serviceEnvironmentArn"]}
            ]
            out["jobQueueType"] = "SAGEMAKER_TRAINING"
            out["computeEnvironmentOrder"] = []
        if compute:
            if p.get("jobQueueType") == "SAGEMAKER_TRAINING":
                raise _client_error("A SAGEMAKER_TRAINING job queue needs serviceEnvironmentOrder")
            if len(compute) > 3:
                raise _client_error("A job queue can have at most 3 compute environments")
            order = []
            for item in compute:
                env = self._moto().get_compute_environment(item["computeEnvironment"])
                if env is None:
                    raise _client_error(f"Compute environment {item['computeEnvironment']} does not exist.")
                order.append({"order": item["order"], "computeEnvironment": env.arn})
            out["computeEnvironmentOrder"] = order
            out["jobQueueType"] = p.get("jobQueueType") or "ECS"
        return out

    def _scheduling_kind(self, policy_arn: str) -> str:
        """FAIR_SHARE for a scheduling policy moto holds (moto keeps only fair-share policies)."""
        if policy_arn in getattr(self._moto(), "_scheduling_policies", {}):
            return "FAIR_SHARE"
        raise _client_error(f"Scheduling policy {policy_arn} does not exist.")

    def describe_job_queues(self, p: Mapping[str, Any]) -> dict[str, Any]:
        wanted = p.get("jobQueues") or []
        if len(wanted) > 100:
            raise _client_error("At most 100 job queues can be described at once")
        queues = [q.detail for q in self.queues.values() if not wanted or q.name in wanted or q.arn in wanted]
        page, token = _offset_page(queues, p, 100, "describe_job_queues")
        out: dict[str, Any] = {"jobQueues": _deep(page)}
        if token:
            out["nextToken"] = token
        return out

    def update_job_queue(self, p: Mapping[str, Any]) -> dict[str, Any]:
        queue = self._queue(p["jobQueue"])
        if p.get("state") is not None:
            queue.detail["state"] = p["state"]
        if p.get("priority") is not None:
            if not 0 <= int(p["priority"]) <= 1000:
                raise _client_error("priority must be between 0 and 1000")
            queue.detail["priority"] = p["priority"]
        if p.get("schedulingPolicyArn"):
            if queue.scheduling == "FIFO":
                raise _client_error("A FIFO job queue cannot get a scheduling policy")
            queue.detail["schedulingPolicyArn"] = p["schedulingPolicyArn"]
        if p.get("jobStateTimeLimitActions") is not None:
            queue.detail["jobStateTimeLimitActions"] = list(p["jobStateTimeLimitActions"])
        if p.get("computeEnvironmentOrder") or p.get("serviceEnvironmentOrder"):
            merged = dict(p)
            merged.setdefault("jobQueueType", queue.detail.get("jobQueueType"))
            queue.detail.update(self._queue_environments(merged, creating=False))
        return {"jobQueueName": queue.name, "jobQueueArn": queue.arn}

    def delete_job_queue(self, p: Mapping[str, Any]) -> dict[str, Any]:
        queue = self._queue(p["jobQueue"])
        if queue.detail.get("state") != "DISABLED":
            raise _client_error("A job queue must be DISABLED before it is deleted.")
        del self.queues[queue.name]
        return {}

    # ------------------------------------------------------------------ service jobs
    def put_service_job(self, detail: Mapping[str, Any]) -> StoredJob:
        """Add or replace a service job from its DescribeServiceJob shape. ``jobId``/``jobArn``
        are derived from each other or generated; ``createdAt`` defaults to now; ``jobQueue`` may
        be a name (made an ARN)."""
        data = dict(_deep(detail))
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

    def submit_service_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        if not self.throttle.acquire():
            raise ApiError("TooManyRequestsException", "Too Many Requests", 429)
        token = p.get("clientToken")
        fingerprint = _fingerprint(p, "clientToken")
        if token is not None:
            if not 1 <= len(token) <= 64:
                raise _client_error("clientToken must be 1-64 characters")
            known = self._client_tokens.get(f"service:{token}")
            if known is not None and known in self.service_jobs:
                job = self.service_jobs[known]
                if job.fingerprint != fingerprint:
                    raise _client_error(f"clientToken {token} was already used with different parameters.")
                return _ids(job.detail)
        name = p["jobName"]
        if not _NAME_RE.match(name):
            raise _client_error("jobName must be 1-128 letters, numbers, hyphens (-) and underscores (_)")
        queue = self._queue(p["jobQueue"])
        if queue.kind != "service":
            raise _client_error(f"Job queue {queue.name} is not a SAGEMAKER_TRAINING job queue.")
        if p["serviceJobType"] != queue.detail.get("jobQueueType"):
            raise _client_error(
                f"serviceJobType {p['serviceJobType']} does not match job queue {queue.name}."
            )
        if queue.detail.get("state") != "ENABLED":
            raise _client_error(f"Job queue {queue.name} is not ENABLED.")
        payload = p["serviceRequestPayload"]
        if len(payload.encode("utf-8")) > _PAYLOAD_LIMIT:
            raise _client_error(f"serviceRequestPayload is larger than {_PAYLOAD_LIMIT} bytes.")
        try:
            decoded = json.loads(payload)
        except ValueError:
            raise _client_error("serviceRequestPayload is not valid JSON.") from None
        if not isinstance(decoded, dict):
            raise _client_error("serviceRequestPayload must be a JSON object.")
        self._check_share(queue, p.get("shareIdentifier"), p.get("quotaShareName"))
        _check_priority(p.get("schedulingPriority"), "schedulingPriority")
        retry = p.get("retryStrategy")
        if retry is not None:
            if not 1 <= int(retry["attempts"]) <= 10:
                raise _client_error("retryStrategy.attempts must be between 1 and 10")
            if len(retry.get("evaluateOnExit") or []) > 5:
                raise _client_error("retryStrategy.evaluateOnExit allows at most 5 entries")
        timeout = p.get("timeoutConfig")
        duration = (timeout or {}).get("attemptDurationSeconds")
        if duration is not None and int(duration) < 1:
            raise _client_error("timeoutConfig.attemptDurationSeconds must be positive")
        preemption = p.get("preemptionConfiguration")
        if preemption is not None and int(preemption.get("preemptionRetriesBeforeTermination", 0)) < 0:
            raise _client_error("preemptionRetriesBeforeTermination must not be negative")
        tags = _check_tags(p.get("tags"))
        detail: dict[str, Any] = {
            "jobName": name,
            "jobQueue": queue.arn,
            "serviceJobType": p["serviceJobType"],
            "serviceRequestPayload": payload,
            "status": "RUNNABLE",
            "createdAt": self.now_ms(),
            "attempts": [],
            "isTerminated": False,
        }
        for key in (
            "schedulingPriority",
            "shareIdentifier",
            "quotaShareName",
            "retryStrategy",
            "timeoutConfig",
            "preemptionConfiguration",
        ):
            if p.get(key) is not None:
                detail[key] = _deep(p[key])
        if p.get("tags") is not None:
            detail["tags"] = tags
        job = self.put_service_job(detail)
        job.fingerprint = fingerprint
        if token is not None:
            job.client_token = token
            self._client_tokens[f"service:{token}"] = str(job.detail["jobId"])
        return _ids(job.detail)

    @staticmethod
    def _check_share(queue: JobQueue, share: Any, quota_share: Any) -> None:
        if queue.scheduling == "FAIR_SHARE" and not share:
            raise _client_error(
                f"shareIdentifier is required: job queue {queue.name} has a fair-share policy."
            )
        if queue.scheduling != "FAIR_SHARE" and share is not None:
            raise _client_error(
                f"shareIdentifier is not allowed: job queue {queue.name} has no fair-share policy."
            )
        if queue.scheduling == "QUOTA_MANAGEMENT" and not quota_share:
            raise _client_error(f"quotaShareName is required: job queue {queue.name} has quota management.")
        if queue.scheduling != "QUOTA_MANAGEMENT" and quota_share is not None:
            raise _client_error(
                f"quotaShareName is not allowed: job queue {queue.name} has no quota management."
            )

    def describe_service_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        return cast(dict[str, Any], _deep(self._service_job(p["jobId"]).detail))

    def list_service_jobs(self, p: Mapping[str, Any]) -> dict[str, Any]:
        filters = list(p.get("filters") or [])
        if len(filters) > 1:
            raise _client_error("Only one filter can be used at a time.")
        queue_arn = self._queue(p["jobQueue"]).arn if p.get("jobQueue") else None
        status = p.get("jobStatus")
        match = _job_filter(filters[0], _SERVICE_FILTERS) if filters else None
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
        page, token = _keyset_page(jobs, p, 100, ["service", queue_arn, status, filters])
        return _with_token({"jobSummaryList": [_service_summary(j.detail) for j in page]}, token)

    def update_service_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        job = self._service_job(p["jobId"])
        _check_priority(p["schedulingPriority"], "schedulingPriority")
        if job.detail.get("status") in _TERMINAL:
            raise _client_error(f"Service job {p['jobId']} is in a terminal state.")
        job.detail["schedulingPriority"] = p["schedulingPriority"]
        return _ids(job.detail)

    def terminate_service_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        job = self._service_job(p["jobId"])
        _terminate(job.detail, p["reason"], self.now_ms())
        return {}

    def get_job_queue_snapshot(self, p: Mapping[str, Any]) -> dict[str, Any]:
        queue = self._queue(p["jobQueue"])
        now = self.now_ms()
        pool = self.service_jobs if queue.kind == "service" else self.jobs
        in_queue = [j for j in pool.values() if j.detail.get("jobQueue") == queue.arn]
        runnable = [
            j for j in in_queue if j.detail.get("status") == "RUNNABLE" and not _is_array_parent(j.detail)
        ]
        if queue.scheduling == "FIFO":
            runnable.sort(key=lambda j: j.sort_key)
        else:
            runnable.sort(key=lambda j: (-int(j.detail.get("schedulingPriority") or 0), *j.sort_key))
        front = runnable[:100]
        positions = self._positions.setdefault(queue.arn, {})
        seen: dict[str, _Position] = {}
        for index, job in enumerate(front):
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
        dispatched = [j.detail for j in in_queue if j.detail.get("status") in _DISPATCHED]
        utilization: dict[str, Any] = {"totalCapacityUsage": _usage(dispatched), "lastUpdatedAt": now}
        if queue.scheduling == "FAIR_SHARE":
            utilization["fairshareUtilization"] = _share_usage(in_queue, dispatched, "shareIdentifier")
        if queue.scheduling == "QUOTA_MANAGEMENT":
            utilization["quotaShareUtilization"] = {
                "topCapacityUtilization": _share_usage(in_queue, dispatched, "quotaShareName")[
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
        data = dict(_deep(detail))
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

    def submit_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        name = p["jobName"]
        if not _JOB_NAME_RE.match(name):
            raise _client_error(
                "jobName must be 1-128 characters: letters, numbers, hyphens (-) and underscores (_),"
                " starting with a letter or number"
            )
        for unsupported in ("nodeOverrides", "eksPropertiesOverride", "ecsPropertiesOverride"):
            if p.get(unsupported):
                raise NotImplementedError(f"embedded Batch: SubmitJob {unsupported} is not supported")
        queue = self._queue(p["jobQueue"])
        if queue.kind != "container":
            raise _client_error(
                f"Job queue {queue.name} takes service jobs (SubmitServiceJob), not container jobs."
            )
        if queue.detail.get("state") != "ENABLED":
            raise _client_error(f"Job queue {queue.name} is not ENABLED.")
        job_def = self._job_definition(p["jobDefinition"])
        share = p.get("shareIdentifier")
        self._check_share(queue, share, None)
        _check_priority(p.get("schedulingPriorityOverride"), "schedulingPriorityOverride")
        retry = p.get("retryStrategy") or job_def.get("retryStrategy")
        if retry and retry.get("attempts") is not None and not 1 <= int(retry["attempts"]) <= 10:
            raise _client_error("retryStrategy.attempts must be between 1 and 10")
        timeout = p.get("timeout") or job_def.get("timeout")
        if timeout and int(timeout.get("attemptDurationSeconds", 60)) < 60:
            raise _client_error("timeout.attemptDurationSeconds must be at least 60")
        size = (p.get("arrayProperties") or {}).get("size")
        if size is not None and not 2 <= int(size) <= 10000:
            raise _client_error("arrayProperties.size must be between 2 and 10000")
        depends_on = list(p.get("dependsOn") or [])
        for dep in depends_on:
            if dep.get("jobId") not in self.jobs:
                raise _client_error(f"dependsOn job {dep.get('jobId')} does not exist.")
        tags = _check_tags(p.get("tags"))
        pending = any(self.jobs[d["jobId"]].detail.get("status") not in _TERMINAL for d in depends_on)
        detail: dict[str, Any] = {
            "jobName": name,
            "jobQueue": queue.arn,
            "status": "PENDING" if pending or size is not None else "RUNNABLE",
            "attempts": [],
            "createdAt": self.now_ms(),
            "dependsOn": depends_on,
            "jobDefinition": job_def["jobDefinitionArn"],
            "parameters": {**(job_def.get("parameters") or {}), **(p.get("parameters") or {})},
        }
        if share is not None:
            detail["shareIdentifier"] = share
        priority = p.get("schedulingPriorityOverride", job_def.get("schedulingPriority"))
        if priority is not None:
            detail["schedulingPriority"] = priority
        if retry:
            detail["retryStrategy"] = _deep(retry)
        if timeout:
            detail["timeout"] = _deep(timeout)
        if "containerProperties" in job_def:
            detail["container"] = _apply_overrides(
                job_def["containerProperties"], p.get("containerOverrides")
            )
        elif p.get("containerOverrides"):
            raise _client_error("containerOverrides given for a job definition without containerProperties")
        if job_def.get("nodeProperties"):
            detail["nodeProperties"] = job_def["nodeProperties"]
        if job_def.get("platformCapabilities"):
            detail["platformCapabilities"] = job_def["platformCapabilities"]
        propagate = p.get("propagateTags", job_def.get("propagateTags"))
        if propagate is not None:
            detail["propagateTags"] = propagate
        if p.get("tags") is not None:
            detail["tags"] = tags
        if size is not None:
            detail["arrayProperties"] = {"size": size, "statusSummary": {}}
        parent = self.put_job(detail)
        if size is not None:
            parent.array_parent = True
            parent_id = str(parent.detail["jobId"])
            for index in range(int(size)):
                child = _deep(detail)
                child.update(
                    jobId=f"{parent_id}:{index}",
                    jobArn=f"{parent.detail['jobArn']}:{index}",
                    status="RUNNABLE" if not pending else "PENDING",
                    arrayProperties={"index": index},
                )
                self.put_job(child)
        return _ids(parent.detail)

    def _job_view(self, job: StoredJob) -> dict[str, Any]:
        detail = cast(dict[str, Any], _deep(job.detail))
        if job.array_parent:
            prefix = f"{detail['jobId']}:"
            counts = dict.fromkeys(JOB_STATUSES, 0)
            for other in self.jobs.values():
                if str(other.detail["jobId"]).startswith(prefix):
                    status = str(other.detail.get("status"))
                    counts[status] = counts.get(status, 0) + 1
            detail["arrayProperties"]["statusSummary"] = counts
        return detail

    def describe_jobs(self, p: Mapping[str, Any]) -> dict[str, Any]:
        wanted = list(p["jobs"])
        if len(wanted) > 100:
            raise _client_error("At most 100 jobs can be described at once")
        found = []
        for ident in wanted:
            job = self.jobs.get(ident) or next(
                (j for j in self.jobs.values() if j.detail.get("jobArn") == ident), None
            )
            if job is not None:
                found.append(self._job_view(job))
        return {"jobs": found}

    def list_jobs(self, p: Mapping[str, Any]) -> dict[str, Any]:
        sources = [k for k in ("jobQueue", "arrayJobId", "multiNodeJobId") if p.get(k)]
        filters = list(p.get("filters") or [])
        if len(sources) > 1 or (not sources and not filters):
            raise _client_error("Specify exactly one of jobQueue, arrayJobId or multiNodeJobId")
        if len(filters) > 1:
            raise _client_error("Only one filter can be used at a time.")
        status = p.get("jobStatus")
        match = _job_filter(filters[0], _CONTAINER_FILTERS) if filters else None
        if filters and filters[0].get("name") != "SHARE_IDENTIFIER":
            status = None
        elif not filters and status is None:
            status = "RUNNING"
        jobs: Iterable[StoredJob]
        if p.get("arrayJobId"):
            prefix = f"{p['arrayJobId']}:"
            jobs = [j for j in self.jobs.values() if str(j.detail["jobId"]).startswith(prefix)]
        elif p.get("multiNodeJobId"):
            prefix = f"{p['multiNodeJobId']}#"
            jobs = [j for j in self.jobs.values() if str(j.detail["jobId"]).startswith(prefix)]
        else:
            queue_arn = self._queue(p["jobQueue"]).arn if p.get("jobQueue") else None
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
        limit = 100 if filters else 1000
        query = [
            "container",
            p.get("jobQueue"),
            p.get("arrayJobId"),
            p.get("multiNodeJobId"),
            status,
            filters,
        ]
        page, token = _keyset_page(selected, p, limit, query)
        return _with_token({"jobSummaryList": [_job_summary(self._job_view(j)) for j in page]}, token)

    def terminate_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        job = self._container_job(p["jobId"])
        now = self.now_ms()
        for target in [job, *self._children(job)]:
            _terminate(target.detail, p["reason"], now)
        return {}

    def cancel_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        job = self._container_job(p["jobId"])
        now = self.now_ms()
        for target in [job, *self._children(job)]:
            if target.detail.get("status") in _NOT_STARTED:
                _terminate(target.detail, p["reason"], now, key="isCancelled")
        return {}

    def _children(self, job: StoredJob) -> list[StoredJob]:
        if not job.array_parent:
            return []
        prefix = f"{job.detail['jobId']}:"
        return [j for j in self.jobs.values() if str(j.detail["jobId"]).startswith(prefix)]

    # ------------------------------------------------------------------ tags
    def tags_of(self, arn: str) -> dict[str, Any] | None:
        """The ``tags`` dict of the Batch resource ``arn`` when this backend owns that resource
        type (None: moto's). Raises ClientException for an owned type that does not exist."""
        parts = _arn_parts(arn)
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
            raise _client_error(f"Resource {arn} does not exist.")
        return cast(dict[str, Any], target.setdefault("tags", {}))


# ---------------------------------------------------------------------------------------- batch helpers
def _ids(detail: Mapping[str, Any]) -> dict[str, Any]:
    return {"jobArn": detail["jobArn"], "jobName": detail["jobName"], "jobId": detail["jobId"]}


def _with_token(out: dict[str, Any], token: str | None) -> dict[str, Any]:
    if token:
        out["nextToken"] = token
    return out


def _is_array_parent(detail: Mapping[str, Any]) -> bool:
    return "size" in (detail.get("arrayProperties") or {})


def _terminate(detail: dict[str, Any], reason: str, now: int, key: str = "isTerminated") -> None:
    if detail.get("status") in _TERMINAL:
        return
    detail["status"] = "FAILED"
    detail["statusReason"] = reason
    detail[key] = True
    detail["stoppedAt"] = now
    attempts = detail.get("attempts") or []
    if attempts and "stoppedAt" not in attempts[-1]:
        attempts[-1]["stoppedAt"] = now


def _offset_page(
    items: Sequence[Any], p: Mapping[str, Any], limit: int, scope: str
) -> tuple[list[Any], str | None]:
    size = _max_results(p, limit)
    start = 0
    if p.get("nextToken"):
        data = _untoken(p["nextToken"])
        if data.get("s") != scope or not isinstance(data.get("o"), int):
            raise _client_error("Invalid nextToken")
        start = data["o"]
    page = list(items[start : start + size])
    more = start + size < len(items)
    return page, (_token({"s": scope, "o": start + size}) if more else None)


def _keyset_page(
    jobs: Sequence[StoredJob], p: Mapping[str, Any], limit: int, query: Any
) -> tuple[list[StoredJob], str | None]:
    """Newest first (createdAt, then submission order); the token is the last key returned, so a
    job added or removed between pages never shifts the others."""
    size = _max_results(p, limit)
    query_id = _fingerprint({"q": query})
    ordered = sorted(jobs, key=lambda j: j.sort_key, reverse=True)
    if p.get("nextToken"):
        data = _untoken(p["nextToken"])
        after = data.get("k")
        if data.get("q") != query_id or not (isinstance(after, list) and len(after) == 2):
            raise _client_error("Invalid nextToken")
        last = (int(after[0]), int(after[1]))
        ordered = [j for j in ordered if j.sort_key < last]
    page = ordered[:size]
    token = _token({"q": query_id, "k": list(page[-1].sort_key)}) if len(ordered) > size else None
    return page, token


_SERVICE_FILTERS = frozenset(
    {"JOB_NAME", "BEFORE_CREATED_AT", "AFTER_CREATED_AT", "SHARE_IDENTIFIER", "QUOTA_SHARE_NAME"}
)
_CONTAINER_FILTERS = frozenset(
    {"JOB_NAME", "JOB_DEFINITION", "BEFORE_CREATED_AT", "AFTER_CREATED_AT", "SHARE_IDENTIFIER"}
)


def _job_filter(flt: Mapping[str, Any], allowed: frozenset[str]) -> Callable[[Mapping[str, Any]], bool]:
    """A ListJobs / ListServiceJobs filter as a predicate on a job's detail."""
    name = flt.get("name")
    if name not in allowed:
        raise _client_error(f"Unknown filter name {name}; valid names: {', '.join(sorted(allowed))}")
    values = list(flt.get("values") or [])
    if not values:
        raise _client_error(f"Filter {name} needs a value")
    value = str(values[0])
    if name == "JOB_NAME":
        wanted = value.lower()
        if wanted.endswith("*"):
            return lambda d: str(d.get("jobName", "")).lower().startswith(wanted[:-1])
        return lambda d: str(d.get("jobName", "")).lower() == wanted
    if name in ("BEFORE_CREATED_AT", "AFTER_CREATED_AT"):
        try:
            moment = int(value)
        except ValueError:
            raise _client_error(f"Filter {name} takes epoch milliseconds") from None
        if name == "BEFORE_CREATED_AT":
            return lambda d: int(d.get("createdAt") or 0) < moment
        return lambda d: int(d.get("createdAt") or 0) > moment
    if name == "SHARE_IDENTIFIER":
        return lambda d: d.get("shareIdentifier") == value
    if name == "QUOTA_SHARE_NAME":
        return lambda d: d.get("quotaShareName") == value

    def job_definition(d: Mapping[str, Any]) -> bool:  # JOB_DEFINITION: name, name:revision or ARN
        arn = str(d.get("jobDefinition", ""))
        name_revision = arn.split("job-definition/", 1)[-1]
        return value in (arn, name_revision, name_revision.split(":", 1)[0])

    return job_definition


_SERVICE_SUMMARY_KEYS = (
    "latestAttempt",
    "capacityUsage",
    "createdAt",
    "jobArn",
    "jobId",
    "jobName",
    "scheduledAt",
    "serviceJobType",
    "shareIdentifier",
    "quotaShareName",
    "status",
    "statusReason",
    "startedAt",
    "stoppedAt",
)


def _service_summary(detail: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep(detail[k]) for k in _SERVICE_SUMMARY_KEYS if k in detail}


def _job_summary(detail: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("jobArn", "jobId", "jobName", "createdAt", "shareIdentifier", "status", "statusReason")
    out: dict[str, Any] = {k: detail[k] for k in keys if k in detail}
    out.update({k: detail[k] for k in ("startedAt", "stoppedAt", "jobDefinition") if k in detail})
    container = detail.get("container") or {}
    summary = {k: container[k] for k in ("exitCode", "reason") if k in container}
    if container:
        out["container"] = summary
    array = detail.get("arrayProperties")
    if array:
        out["arrayProperties"] = {k: array[k] for k in ("size", "index") if k in array}
    return out


def _usage(details: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    totals: dict[str, float] = {}
    for detail in details:
        for item in detail.get("capacityUsage") or []:
            unit = str(item.get("capacityUnit"))
            totals[unit] = totals.get(unit, 0.0) + float(item.get("quantity") or 0)
    return [{"capacityUnit": unit, "quantity": quantity} for unit, quantity in totals.items()]


def _share_usage(
    in_queue: Sequence[StoredJob], dispatched: Sequence[Mapping[str, Any]], key: str
) -> dict[str, Any]:
    by_share: dict[str, list[Mapping[str, Any]]] = {}
    for detail in dispatched:
        if detail.get(key):
            by_share.setdefault(str(detail[key]), []).append(detail)
    ranked = sorted(
        ((share, _usage(details)) for share, details in by_share.items()),
        key=lambda item: -sum(u["quantity"] for u in item[1]),
    )[:20]
    active = {
        str(j.detail[key]) for j in in_queue if j.detail.get(key) and j.detail.get("status") not in _TERMINAL
    }
    label = "shareIdentifier" if key == "shareIdentifier" else "quotaShareName"
    return {
        "activeShareCount": len(active),
        "topCapacityUtilization": [{label: share, "capacityUsage": usage} for share, usage in ranked],
    }


def _apply_overrides(properties: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """A job definition's containerProperties with SubmitJob's containerOverrides applied: command
    and instanceType replace, environment merges by name, resourceRequirements replace by type."""
    container = cast(dict[str, Any], _deep(dict(properties)))
    if not overrides:
        return container
    for key in ("command", "instanceType", "vcpus", "memory"):
        if overrides.get(key) is not None:
            container[key] = _deep(overrides[key])
    if overrides.get("environment"):
        env = {e["name"]: dict(e) for e in container.get("environment") or []}
        for item in overrides["environment"]:
            env[item["name"]] = dict(item)
        container["environment"] = list(env.values())
    if overrides.get("resourceRequirements"):
        reqs = {r["type"]: dict(r) for r in container.get("resourceRequirements") or []}
        for item in overrides["resourceRequirements"]:
            reqs[item["type"]] = dict(item)
        container["resourceRequirements"] = list(reqs.values())
    return container


# ---------------------------------------------------------------------------------------- sagemaker
_TRAINING_TARGET_PREFIX = "SageMaker."


@dataclass
class TrainingRecord:
    """A training job: ``detail`` is its DescribeTrainingJob response (timestamps as aware
    datetimes), ``tags`` what ListTags returns."""

    detail: dict[str, Any]
    tags: list[dict[str, str]] = field(default_factory=list)


@dataclass
class EmbeddedTraining:
    """SageMaker training jobs for one account and region (CreateTrainingJob, DescribeTrainingJob,
    StopTrainingJob, ListTrainingJobs, and ListTags/AddTags/DeleteTags on training-job ARNs)."""

    account_id: str
    region: str
    clock: Clock = time.time
    jobs: dict[str, TrainingRecord] = field(default_factory=dict)

    OPERATIONS: ClassVar[dict[str, str]] = {
        "CreateTrainingJob": "create_training_job",
        "DescribeTrainingJob": "describe_training_job",
        "StopTrainingJob": "stop_training_job",
        "ListTrainingJobs": "list_training_jobs",
        "ListTags": "list_tags",
        "AddTags": "add_tags",
        "DeleteTags": "delete_tags",
    }

    def arn(self, name: str) -> str:
        return f"arn:aws:sagemaker:{self.region}:{self.account_id}:training-job/{name.lower()}"

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def handle(self, operation: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """Run ``operation``; None when it is not this backend's (tags of other resources)."""
        method: Callable[[Mapping[str, Any]], dict[str, Any] | None] = getattr(
            self, self.OPERATIONS[operation]
        )
        return method(params)

    def put_training_job(
        self, detail: Mapping[str, Any], tags: Sequence[Mapping[str, str]] = ()
    ) -> TrainingRecord:
        """Add or replace a training job from its DescribeTrainingJob shape (timestamps as
        datetimes; ``TrainingJobArn`` derived when missing)."""
        data = dict(_deep(detail))
        name = str(data["TrainingJobName"])
        data.setdefault("TrainingJobArn", self.arn(name))
        record = TrainingRecord(data, [dict(t) for t in tags])
        self.jobs[name] = record
        return record

    def _job(self, name: str) -> TrainingRecord:
        record = self.jobs.get(name)
        if record is None:
            raise _sm_validation("Requested resource not found.")
        return record

    def create_training_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        name = p["TrainingJobName"]
        if not _TRAINING_NAME_RE.match(name):
            raise _sm_validation(
                f"1 validation error detected: Value '{name}' at 'trainingJobName' failed to satisfy "
                "constraint: Member must satisfy regular expression pattern: "
                "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
            )
        if name in self.jobs:
            raise ApiError(
                "ResourceInUse",
                f"Training job names must be unique within an AWS account and region, and a training job "
                f"with this name already exists ({self.jobs[name].detail['TrainingJobArn']})",
            )
        stopping = dict(p.get("StoppingCondition") or {"MaxRuntimeInSeconds": 86400})
        if p.get("EnableManagedSpotTraining"):
            wait = stopping.get("MaxWaitTimeInSeconds")
            if wait is None or int(wait) < int(stopping.get("MaxRuntimeInSeconds", 86400)):
                raise _sm_validation(
                    "Invalid MaxWaitTimeInSeconds. It must be present and be greater than or equal to "
                    "MaxRuntimeInSeconds"
                )
        elif stopping.get("MaxWaitTimeInSeconds") is not None:
            raise _sm_validation("MaxWaitTimeInSeconds is only allowed with EnableManagedSpotTraining")
        checkpoint = p.get("CheckpointConfig")
        if checkpoint is not None and not re.match(
            r"^(https|s3)://([^/]+)/?(.*)$", str(checkpoint.get("S3Uri"))
        ):
            raise _sm_validation("CheckpointConfig.S3Uri must be an s3:// URI")
        output_members = (
            service_model("sagemaker").operation_model("DescribeTrainingJob").output_shape.members
        )
        detail: dict[str, Any] = {k: _deep(v) for k, v in p.items() if k in output_members}
        now = self.now()
        detail.update(
            TrainingJobName=name,
            TrainingJobArn=self.arn(name),
            TrainingJobStatus="InProgress",
            SecondaryStatus="Starting",
            StoppingCondition=stopping,
            CreationTime=now,
            LastModifiedTime=now,
            SecondaryStatusTransitions=[
                {"Status": "Starting", "StartTime": now, "StatusMessage": "Starting the training job"}
            ],
        )
        for flag in (
            "EnableNetworkIsolation",
            "EnableInterContainerTrafficEncryption",
            "EnableManagedSpotTraining",
        ):
            detail.setdefault(flag, False)
        record = self.put_training_job(detail, p.get("Tags") or [])
        return {"TrainingJobArn": record.detail["TrainingJobArn"]}

    def describe_training_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        return cast(dict[str, Any], _deep(self._job(p["TrainingJobName"]).detail))

    def stop_training_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        record = self._job(p["TrainingJobName"])
        detail = record.detail
        if detail.get("TrainingJobStatus") != "InProgress":
            status = detail.get("TrainingJobStatus")
            raise _sm_validation(f"The request was rejected because the training job is in status {status}.")
        now = self.now()
        detail.update(
            TrainingJobStatus="Stopped", SecondaryStatus="Stopped", LastModifiedTime=now, TrainingEndTime=now
        )
        transitions = detail.setdefault("SecondaryStatusTransitions", [])
        if transitions and "EndTime" not in transitions[-1]:
            transitions[-1]["EndTime"] = now
        transitions.append(
            {"Status": "Stopped", "StartTime": now, "EndTime": now, "StatusMessage": "Stopped"}
        )
        return {}

    def list_training_jobs(self, p: Mapping[str, Any]) -> dict[str, Any]:
        def when(key: str) -> datetime | None:
            value = p.get(key)
            return datetime.fromtimestamp(float(value), UTC) if value is not None else None

        after, before = when("CreationTimeAfter"), when("CreationTimeBefore")
        mod_after, mod_before = when("LastModifiedTimeAfter"), when("LastModifiedTimeBefore")
        contains = p.get("NameContains")
        status = p.get("StatusEquals")
        selected = []
        for record in self.jobs.values():
            d = record.detail
            created, modified = d.get("CreationTime"), d.get("LastModifiedTime") or d.get("CreationTime")
            if (
                (contains and contains.lower() not in str(d["TrainingJobName"]).lower())
                or (status and d.get("TrainingJobStatus") != status)
                or (after and (created is None or created <= after))
                or (before and (created is None or created >= before))
                or (mod_after and (modified is None or modified <= mod_after))
                or (mod_before and (modified is None or modified >= mod_before))
            ):
                continue
            selected.append(d)
        sort_by = p.get("SortBy") or "CreationTime"
        keys: dict[str, Callable[[dict[str, Any]], Any]] = {
            "Name": lambda d: str(d["TrainingJobName"]),
            "CreationTime": lambda d: d.get("CreationTime") or datetime.min.replace(tzinfo=UTC),
            "Status": lambda d: str(d.get("TrainingJobStatus")),
        }
        selected.sort(key=keys[sort_by], reverse=(p.get("SortOrder") or "Ascending") == "Descending")
        size = int(p.get("MaxResults") or 10)
        start = 0
        if p.get("NextToken"):
            data = _untoken(p["NextToken"])
            start = int(data.get("o", 0))
        page = selected[start : start + size]
        summary_keys = (
            "TrainingJobName",
            "TrainingJobArn",
            "CreationTime",
            "TrainingEndTime",
            "LastModifiedTime",
            "TrainingJobStatus",
            "SecondaryStatus",
            "WarmPoolStatus",
        )
        out: dict[str, Any] = {
            "TrainingJobSummaries": [{k: d[k] for k in summary_keys if k in d} for d in page]
        }
        if start + size < len(selected):
            out["NextToken"] = _token({"o": start + size})
        return out

    def _owned(self, arn: str) -> TrainingRecord | None:
        if ":training-job/" not in arn:
            return None
        record = next((r for r in self.jobs.values() if r.detail.get("TrainingJobArn") == arn), None)
        if record is None:
            raise _sm_validation("Requested resource not found.")
        return record

    def list_tags(self, p: Mapping[str, Any]) -> dict[str, Any] | None:
        record = self._owned(p["ResourceArn"])
        return None if record is None else {"Tags": _deep(record.tags)}

    def add_tags(self, p: Mapping[str, Any]) -> dict[str, Any] | None:
        record = self._owned(p["ResourceArn"])
        if record is None:
            return None
        tags = {t["Key"]: t for t in record.tags}
        tags.update({t["Key"]: dict(t) for t in p["Tags"]})
        record.tags = list(tags.values())
        return {"Tags": _deep(p["Tags"])}

    def delete_tags(self, p: Mapping[str, Any]) -> dict[str, Any] | None:
        record = self._owned(p["ResourceArn"])
        if record is None:
            return None
        record.tags = [t for t in record.tags if t["Key"] not in set(p["TagKeys"])]
        return {}


# ---------------------------------------------------------------------------------------- HTTP
def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.timestamp()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _body(request: Any) -> dict[str, Any]:
    raw = request.body
    if hasattr(raw, "read"):
        raw = raw.read()
    if not raw:
        return {}
    data = json.loads(raw)
    return data if isinstance(data, dict) else {}


def _request_identity(request: Any, full_url: str, service: str) -> tuple[str, str]:
    """(account id, region) of a request, the way moto works them out."""
    from moto.core.responses import BaseResponse

    probe = BaseResponse(service_name=service)
    probe.setup_class(request, full_url, request.headers)
    return str(probe.current_account), str(probe.region)


def _request_id() -> str:
    return str(uuid.uuid4())


class Overlay:
    """The HTTP handlers for :class:`EmbeddedBatch` and :class:`EmbeddedTraining`, and their
    installation in front of moto's (see the module docstring).

    Backends are created per (account, region) on first use; ``clock`` (epoch seconds) stamps
    every time they record. ``submit_rate`` is the SubmitServiceJob limit per second (None: off);
    change it later with :meth:`set_submit_rate`.
    """

    def __init__(self, clock: Clock = time.time, submit_rate: int | None = SUBMIT_SERVICE_JOB_RATE) -> None:
        self.clock = clock
        self.submit_rate = submit_rate
        self.batch_backends: dict[tuple[str, str], EmbeddedBatch] = {}
        self.training_backends: dict[tuple[str, str], EmbeddedTraining] = {}
        self._stubber: Any = None
        self._moto_process: Callable[[Any], Any] | None = None

    # ------------------------------------------------------------------ backends
    def _clock(self) -> float:
        return self.clock()

    def batch(self, account_id: str, region: str) -> EmbeddedBatch:
        key = (account_id, region)
        if key not in self.batch_backends:
            self.batch_backends[key] = EmbeddedBatch(
                account_id, region, clock=self._clock, throttle=Throttle(self.submit_rate)
            )
        return self.batch_backends[key]

    def training(self, account_id: str, region: str) -> EmbeddedTraining:
        key = (account_id, region)
        if key not in self.training_backends:
            self.training_backends[key] = EmbeddedTraining(account_id, region, clock=self._clock)
        return self.training_backends[key]

    def set_submit_rate(self, limit: int | None) -> None:
        """SubmitServiceJob calls allowed per second per account from now on (None: unlimited)."""
        self.submit_rate = limit
        for backend in self.batch_backends.values():
            backend.throttle.limit = limit
            backend.throttle.reset()

    # ------------------------------------------------------------------ installation
    def install(self) -> None:
        """Put the handlers in front of moto's (idempotent).

        moto answers every botocore request through one ``BotocoreStubber`` whose ``__call__``
        calls ``self.process_request(request)``; an instance attribute of that name shadows the
        method, so the overlay sees each request first and hands the rest to moto's own method.
        moto's Batch and SageMaker modules are imported only when a request needs them.
        """
        if self._stubber is not None:
            return
        from moto.core.models import botocore_stubber

        moto_process = botocore_stubber.process_request

        def process_request(request: Any) -> Any:
            response = self.route(request)
            return response if response is not None else moto_process(request)

        botocore_stubber.process_request = process_request  # type: ignore[method-assign]
        self._stubber = botocore_stubber
        self._moto_process = moto_process

    def uninstall(self) -> None:
        """Give moto its stubber back. Idempotent."""
        if self._stubber is not None:
            self._stubber.__dict__.pop("process_request", None)
        self._stubber = None

    def __enter__(self) -> Overlay:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    # ------------------------------------------------------------------ handlers
    def route(self, request: Any) -> Response | None:
        """The overlay's answer to a botocore request, or None when moto should answer it."""
        parts = urlsplit(request.url)
        host = parts.hostname or ""
        for header, value in list(request.headers.items()):
            if isinstance(value, bytes):
                request.headers[header] = value.decode("utf-8")
        if _BATCH_HOST.match(host):
            if parts.path.startswith("/v1/tags/"):
                return self.batch_tags_handler(request, request.url, request.headers)
            segment = parts.path.rstrip("/").rsplit("/", 1)[-1]
            if parts.path.rstrip("/") == f"/v1/{segment}" and segment in EmbeddedBatch.OPERATIONS:
                return self.batch_handler(request, request.url, request.headers)
        elif _SAGEMAKER_HOST.match(host):
            return self.sagemaker_handler(request, request.url, request.headers)
        return None

    def batch_handler(self, request: Any, full_url: str, headers: Any) -> Response:
        segment = urlsplit(full_url).path.rstrip("/").rsplit("/", 1)[-1]
        account, region = _request_identity(request, full_url, "batch")
        try:
            result = self.batch(account, region).handle(segment, _body(request))
        except ApiError as exc:
            return _batch_error(exc)
        return (
            200,
            {"Content-Type": "application/json", "x-amzn-RequestId": _request_id()},
            json.dumps(result),
        )

    def batch_tags_handler(self, request: Any, full_url: str, headers: Any) -> Response | None:
        """Tags of the overlay's resources; None (moto answers) for any other ARN."""
        path = urlsplit(full_url).path
        arn = unquote(path.split("/v1/tags/", 1)[-1])
        account, region = _request_identity(request, full_url, "batch")
        try:
            tags = self.batch(account, region).tags_of(arn)
        except ApiError as exc:
            return _batch_error(exc)
        if tags is None:
            return None
        method = request.method.upper()
        if method == "GET":
            result: dict[str, Any] = {"tags": dict(tags)}
        elif method == "POST":
            try:
                tags.update(_check_tags({**tags, **_body(request).get("tags", {})}))
            except ApiError as exc:
                return _batch_error(exc)
            result = {}
        else:  # DELETE ?tagKeys=a&tagKeys=b
            for key in parse_qs(urlsplit(full_url).query).get("tagKeys", []):
                tags.pop(key, None)
            result = {}
        return (
            200,
            {"Content-Type": "application/json", "x-amzn-RequestId": _request_id()},
            json.dumps(result),
        )

    def sagemaker_handler(self, request: Any, full_url: str, headers: Any) -> Response | None:
        """Training-job operations; None (moto answers) for every other SageMaker call."""
        target = str(request.headers.get("X-Amz-Target") or "")
        operation = (
            target.removeprefix(_TRAINING_TARGET_PREFIX) if target.startswith(_TRAINING_TARGET_PREFIX) else ""
        )
        if operation not in EmbeddedTraining.OPERATIONS:
            return None
        account, region = _request_identity(request, full_url, "sagemaker")
        json_headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": _request_id()}
        try:
            result = self.training(account, region).handle(operation, _body(request))
        except ApiError as exc:
            return exc.status, json_headers, json.dumps({"__type": exc.code, "Message": exc.message})
        if result is None:
            return None
        return 200, json_headers, json.dumps(result, default=_json_default)


_BATCH_HOST = re.compile(r"^batch\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$")
_SAGEMAKER_HOST = re.compile(r"^api\.sagemaker\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$")


def _batch_error(exc: ApiError) -> Response:
    headers = {
        "Content-Type": "application/json",
        "x-amzn-ErrorType": f"{exc.code}:{_BATCH_ERROR_NAMESPACE}",
        "x-amzn-RequestId": _request_id(),
    }
    return exc.status, headers, json.dumps({"message": exc.message})


def default_account() -> str:
    """The account moto answers for when nothing says otherwise (``MOTO_ACCOUNT_ID`` or moto's)."""
    from moto.core.models import DEFAULT_ACCOUNT_ID

    return os.environ.get("MOTO_ACCOUNT_ID") or DEFAULT_ACCOUNT_ID
