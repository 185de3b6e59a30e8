"""A scenario's ``world``: its schema, how it is set up in the embedded AWS, and the API journal.

A world is a JSON object with any of the keys in :data:`WORLD_KEYS` (all lists)::

    service_environments  [{name, state, status, capacityLimits: [{maxCapacity, capacityUnit}], type, tags}]
    job_queues            [{name, kind: service|container, scheduling: FIFO|FAIR_SHARE|QUOTA_MANAGEMENT,
                            serviceEnvironment, computeEnvironments, priority, state, schedulingPolicyArn,
                            tags, jobStateTimeLimitActions}]
    service_jobs          [DescribeServiceJob responses]
    job_definitions       [RegisterJobDefinition requests, plus an optional "revision"]
    jobs                  [DescribeJobs "jobs" entries (container jobs)]
    training_jobs         [DescribeTrainingJob responses, plus "Tags"]
    checkpoints           [{uri: "s3://bucket/prefix/", objects: [{key, last_modified, size}]}]
    scheduling_policies   [CreateSchedulingPolicy requests: {name, fairsharePolicy}] (a queue's
                            schedulingPolicyArn is arn:aws:batch:REGION:ACCOUNT:scheduling-policy/NAME)
    quota_shares          [CreateQuotaShare requests: {quotaShareName, jobQueue, capacityLimits,
                            resourceSharingConfiguration, preemptionConfiguration, state}] on a
                            QUOTA_MANAGEMENT job queue of the world (ListQuotaShares answers them);
                            sharing defaults to RESERVE, in-share preemption to DISABLED
    gpu_metrics           [{host, metric, from, to, value}]: one datapoint a minute of ``value``
                            (percent) from ``from`` (inclusive) to ``to`` (exclusive) for the
                            training job host ``host`` (``<training job>/algo-<n>``) in SageMaker's
                            namespace /aws/sagemaker/TrainingJobs (PutMetricData to the embedded
                            CloudWatch, which GetMetricData then answers); ``metric`` defaults to
                            GPUUtilization

The first two are checked by pydantic models; the API-shaped ones member by member against
botocore's own shapes (unknown members, wrong types and bad enum values are errors). Every error is
a :class:`WorldError` naming the field, e.g. ``world.service_jobs[2].attempts[0].startedAt: ...``.
Batch times (members ending in ``At``) accept epoch milliseconds or ISO-8601; SageMaker times
(``CreationTime``, ...) accept ISO-8601 or epoch milliseconds (numbers or numeric strings).

:func:`seed` adds a world to an open :class:`~batchpilot_local.embedded_aws.EmbeddedAws`;
``seed(..., replace=True)`` (what ``EmbeddedAws.set_world`` does between clock ticks) makes each
job list the world gives the whole job set of its kind and updates the environments and queues it
names. :class:`ApiJournal` records the API calls the code under test makes.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from batchpilot.shared.correlation import current_record
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from batchpilot_local.emulator.shapes import service_model

if TYPE_CHECKING:
    from batchpilot_local.emulator import EmbeddedBatch, EmbeddedTraining

__all__ = [
    "WORLD_KEYS",
    "ApiJournal",
    "CheckpointSpec",
    "JobQueueSpec",
    "JournalEntry",
    "SeedTarget",
    "ServiceEnvironmentSpec",
    "World",
    "WorldError",
    "check_world",
    "json_type",
    "parse_time",
    "parse_world",
    "seed",
]

WORLD_KEYS: frozenset[str] = frozenset(
    {
        "service_environments",
        "job_queues",
        "service_jobs",
        "job_definitions",
        "jobs",
        "training_jobs",
        "checkpoints",
        "scheduling_policies",
        "quota_shares",
        "gpu_metrics",
    }
)
"""Keys a scenario's ``world`` may have."""

_MAX_BODY = 1024 * 1024  # checkpoint objects up to this size get a real body


class WorldError(ValueError):
    """A scenario's ``world`` cannot be set up (an unknown key, a malformed value)."""


# ---------------------------------------------------------------------------------------- times
def parse_time(value: Any) -> datetime:
    """ISO-8601 (``Z`` or an offset; naive means UTC), epoch milliseconds (a number or a numeric
    string) or a ``datetime`` → an aware UTC ``datetime``. Raises ``ValueError``."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, bool):
        raise ValueError("expected a time, got a boolean")
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value / 1000, UTC)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d+(\.\d+)?", text):
            return datetime.fromtimestamp(float(text) / 1000, UTC)
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise ValueError(f"{value!r} is neither ISO-8601 nor epoch milliseconds") from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise ValueError(f"expected a time (ISO-8601 or epoch milliseconds), got {type(value).__name__}")


def _epoch_ms(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return round(parse_time(value).timestamp() * 1000)


# ---------------------------------------------------------------------------------------- schema
_NAME = r"^[A-Za-z0-9_-]{1,128}$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CapacityLimitSpec(_Model):
    maxCapacity: int = Field(ge=0)
    capacityUnit: str = Field(min_length=1)


class ServiceEnvironmentSpec(_Model):
    """A service environment (``type`` is always SAGEMAKER_TRAINING today)."""

    name: str = Field(pattern=_NAME)
    state: Literal["ENABLED", "DISABLED"] = "ENABLED"
    status: Literal["CREATING", "UPDATING", "DELETING", "DELETED", "VALID", "INVALID"] = "VALID"
    capacityLimits: list[CapacityLimitSpec] = Field(min_length=1)
    type: Literal["SAGEMAKER_TRAINING"] = "SAGEMAKER_TRAINING"
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("capacityLimits")
    @classmethod
    def _distinct_units(cls, limits: list[CapacityLimitSpec]) -> list[CapacityLimitSpec]:
        units = [limit.capacityUnit for limit in limits]
        if len(set(units)) != len(units):
            raise ValueError("the same capacityUnit appears twice")
        return limits


class JobQueueSpec(_Model):
    """A job queue. ``kind`` defaults to ``service`` when ``serviceEnvironment`` is given."""

    name: str = Field(pattern=_NAME)
    kind: Literal["service", "container"] | None = None
    scheduling: Literal["FIFO", "FAIR_SHARE", "QUOTA_MANAGEMENT"] = "FIFO"
    serviceEnvironment: str | None = None
    computeEnvironments: list[str] = Field(default_factory=list)
    priority: int = Field(1, ge=0, le=1000)
    state: Literal["ENABLED", "DISABLED"] = "ENABLED"
    schedulingPolicyArn: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    jobStateTimeLimitActions: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _kind(self) -> JobQueueSpec:
        if self.kind is None:
            self.kind = "service" if self.serviceEnvironment else "container"
        if self.kind == "service" and not self.serviceEnvironment:
            raise ValueError("a service job queue needs serviceEnvironment")
        if self.kind == "container" and self.serviceEnvironment:
            raise ValueError("serviceEnvironment is only for kind 'service'")
        if self.kind == "service" and self.computeEnvironments:
            raise ValueError("computeEnvironments is only for kind 'container'")
        if self.scheduling == "FIFO" and self.schedulingPolicyArn:
            raise ValueError("a FIFO queue has no schedulingPolicyArn")
        return self


class CheckpointObjectSpec(_Model):
    key: str = Field(min_length=1)
    last_modified: Any
    size: int = Field(0, ge=0)

    @field_validator("last_modified")
    @classmethod
    def _time(cls, value: Any) -> datetime:
        return parse_time(value)


class CheckpointSpec(_Model):
    """Objects under one checkpoint prefix; keys are relative to it (a key that already starts
    with the prefix is used as is)."""

    uri: str = Field(pattern=r"^s3://[^/]+(/.*)?$")
    objects: list[CheckpointObjectSpec] = Field(default_factory=list)

    @property
    def bucket(self) -> str:
        return self.uri[len("s3://") :].split("/", 1)[0]

    @property
    def prefix(self) -> str:
        rest = self.uri[len("s3://") :].split("/", 1)
        return rest[1] if len(rest) > 1 else ""

    def full_key(self, key: str) -> str:
        if self.prefix and key.startswith(self.prefix):
            return key
        if self.prefix and not self.prefix.endswith("/"):
            return f"{self.prefix}/{key}"
        return f"{self.prefix}{key}"


class GpuSeriesSpec(_Model):
    """One run of GPU datapoints (``world.gpu_metrics[]``), one a minute in ``[from, to)``."""

    host: str = Field(min_length=1, max_length=255)
    metric: Literal["GPUUtilization", "GPUMemoryUtilization"] = "GPUUtilization"
    start: datetime = Field(alias="from")
    end: datetime = Field(alias="to")
    value: float = Field(ge=0)

    @field_validator("start", "end", mode="before")
    @classmethod
    def _time(cls, value: Any) -> datetime:
        return parse_time(value)

    @model_validator(mode="after")
    def _ordered(self) -> GpuSeriesSpec:
        if self.end <= self.start:
            raise ValueError("to must be after from")
        return self


class _WorldModel(_Model):
    service_environments: list[ServiceEnvironmentSpec] = Field(default_factory=list)
    job_queues: list[JobQueueSpec] = Field(default_factory=list)
    service_jobs: list[dict[str, Any]] = Field(default_factory=list)
    job_definitions: list[dict[str, Any]] = Field(default_factory=list)
    jobs: list[dict[str, Any]] = Field(default_factory=list)
    training_jobs: list[dict[str, Any]] = Field(default_factory=list)
    checkpoints: list[CheckpointSpec] = Field(default_factory=list)
    scheduling_policies: list[dict[str, Any]] = Field(default_factory=list)
    quota_shares: list[dict[str, Any]] = Field(default_factory=list)
    gpu_metrics: list[GpuSeriesSpec] = Field(default_factory=list)


@dataclass
class TrainingJobSeed:
    detail: dict[str, Any]
    tags: list[dict[str, str]]


@dataclass
class JobDefinitionSeed:
    request: dict[str, Any]
    revision: int | None


@dataclass
class World:
    """A validated world; ``keys`` are the keys the scenario gave (for ``replace``)."""

    keys: frozenset[str]
    service_environments: list[ServiceEnvironmentSpec] = field(default_factory=list)
    job_queues: list[JobQueueSpec] = field(default_factory=list)
    service_jobs: list[dict[str, Any]] = field(default_factory=list)
    job_definitions: list[JobDefinitionSeed] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    training_jobs: list[TrainingJobSeed] = field(default_factory=list)
    checkpoints: list[CheckpointSpec] = field(default_factory=list)
    scheduling_policies: list[dict[str, Any]] = field(default_factory=list)
    quota_shares: list[dict[str, Any]] = field(default_factory=list)
    gpu_metrics: list[GpuSeriesSpec] = field(default_factory=list)


def _loc(parts: Sequence[Any]) -> str:
    out = "world"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def check_world(world: object) -> None:
    """Validate a scenario's ``world`` without creating anything. Raises :class:`WorldError`."""
    parse_world(world)


def parse_world(world: object) -> World:
    """Validate and normalise a scenario's ``world``. Raises :class:`WorldError`."""
    if not isinstance(world, Mapping):
        raise WorldError(f"world must be a JSON object, got {type(world).__name__}")
    unknown = sorted(str(k) for k in world if k not in WORLD_KEYS)
    if unknown:
        known = ", ".join(sorted(WORLD_KEYS))
        raise WorldError(f"unknown world key(s): {', '.join(unknown)} (known keys: {known})")
    try:
        model = _WorldModel.model_validate(dict(world))
    except ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        message = str(first["msg"]).removeprefix("Value error, ")
        raise WorldError(f"{_loc(first['loc'])}: {message}{more}") from None
    parsed = World(
        keys=frozenset(str(k) for k in world),
        service_environments=model.service_environments,
        job_queues=model.job_queues,
        checkpoints=model.checkpoints,
        gpu_metrics=model.gpu_metrics,
    )
    batch = service_model("batch")
    service_job_shape = batch.operation_model("DescribeServiceJob").output_shape
    job_shape = batch.shape_for("JobDetail")
    register_shape = batch.operation_model("RegisterJobDefinition").input_shape
    training_shape = service_model("sagemaker").operation_model("DescribeTrainingJob").output_shape
    tag_shape = service_model("sagemaker").shape_for("Tag")

    for index, raw in enumerate(model.service_jobs):
        where = f"world.service_jobs[{index}]"
        item = dict(raw)
        if isinstance(item.get("serviceRequestPayload"), Mapping | list):
            item["serviceRequestPayload"] = json.dumps(item["serviceRequestPayload"])
        _require(item, where, "jobName", "jobQueue", "status")
        parsed.service_jobs.append(_coerce(service_job_shape, item, where))
    for index, raw in enumerate(model.jobs):
        where = f"world.jobs[{index}]"
        _require(raw, where, "jobName", "jobQueue", "status", "jobDefinition")
        parsed.jobs.append(_coerce(job_shape, dict(raw), where))
    for index, raw in enumerate(model.job_definitions):
        where = f"world.job_definitions[{index}]"
        item = dict(raw)
        revision = item.pop("revision", None)
        bad = isinstance(revision, bool) or not isinstance(revision, int) or revision < 1
        if revision is not None and bad:
            raise WorldError(f"{where}.revision: expected a positive integer")
        _require(item, where, "jobDefinitionName", "type")
        parsed.job_definitions.append(JobDefinitionSeed(_coerce(register_shape, item, where), revision))
    for index, raw in enumerate(model.training_jobs):
        where = f"world.training_jobs[{index}]"
        item = dict(raw)
        tags_raw = item.pop("Tags", [])
        _require(item, where, "TrainingJobName", "TrainingJobStatus")
        if isinstance(tags_raw, Mapping):
            tags_raw = [{"Key": str(k), "Value": str(v)} for k, v in tags_raw.items()]
        if not isinstance(tags_raw, list):
            raise WorldError(f"{where}.Tags: expected a list of {{Key, Value}} or an object")
        tags = [_coerce(tag_shape, t, f"{where}.Tags[{i}]") for i, t in enumerate(tags_raw)]
        detail = _coerce(training_shape, item, where)
        parsed.training_jobs.append(TrainingJobSeed(detail, tags))
    policy_shape = batch.operation_model("CreateSchedulingPolicy").input_shape
    for index, raw in enumerate(model.scheduling_policies):
        where = f"world.scheduling_policies[{index}]"
        _require(raw, where, "name")
        parsed.scheduling_policies.append(_coerce(policy_shape, dict(raw), where))
    quota_shape = batch.operation_model("CreateQuotaShare").input_shape
    for index, raw in enumerate(model.quota_shares):
        where = f"world.quota_shares[{index}]"
        item = {
            "resourceSharingConfiguration": {"strategy": "RESERVE"},
            "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
            **raw,
        }
        _require(item, where, "quotaShareName", "jobQueue", "capacityLimits")
        parsed.quota_shares.append(_coerce(quota_shape, item, where))
    return parsed


def _put_scheduling_policy(client: Any, policy: Mapping[str, Any]) -> None:
    """CreateSchedulingPolicy, or UpdateSchedulingPolicy when one of that name exists (moto)."""
    listed = client.list_scheduling_policies().get("schedulingPolicies", [])
    arns = [p["arn"] for p in listed if str(p.get("arn", "")).endswith(f"/{policy['name']}")]
    if arns:
        client.update_scheduling_policy(arn=arns[0], fairsharePolicy=policy.get("fairsharePolicy", {}))
    else:
        client.create_scheduling_policy(**policy)


def _require(item: Mapping[str, Any], where: str, *keys: str) -> None:
    for key in keys:
        if item.get(key) in (None, ""):
            raise WorldError(f"{where}.{key}: required")


def _coerce(shape: Any, value: Any, path: str, member_name: str = "") -> Any:
    """``value`` checked against the botocore ``shape`` and normalised (Batch ``...At`` longs to
    epoch ms, SageMaker timestamps to aware datetimes). Raises :class:`WorldError`."""
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, Mapping):
            raise WorldError(f"{path}: expected an object, got {json_type(value)}")
        out: dict[str, Any] = {}
        for key, item in value.items():
            member = shape.members.get(key)
            if member is None:
                raise WorldError(f"{path}.{key}: not a field of {shape.name}")
            out[key] = _coerce(member, item, f"{path}.{key}", key)
        return out
    if kind == "list":
        if not isinstance(value, list):
            raise WorldError(f"{path}: expected a list, got {json_type(value)}")
        return [_coerce(shape.member, item, f"{path}[{i}]") for i, item in enumerate(value)]
    if kind == "map":
        if not isinstance(value, Mapping):
            raise WorldError(f"{path}: expected an object, got {json_type(value)}")
        return {str(k): _coerce(shape.value, v, f"{path}.{k}") for k, v in value.items()}
    if kind == "string":
        if not isinstance(value, str):
            raise WorldError(f"{path}: expected a string, got {json_type(value)}")
        if shape.enum and value not in shape.enum:
            raise WorldError(f"{path}: {value!r} is not one of {', '.join(shape.enum)}")
        return value
    if kind == "long" and member_name.endswith("At"):
        try:
            return _epoch_ms(value)
        except ValueError as exc:
            raise WorldError(f"{path}: {exc}") from None
    if kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise WorldError(f"{path}: expected an integer, got {json_type(value)}")
        return value
    if kind in ("double", "float"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise WorldError(f"{path}: expected a number, got {json_type(value)}")
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise WorldError(f"{path}: expected a boolean, got {json_type(value)}")
        return value
    if kind == "timestamp":
        try:
            return parse_time(value)
        except ValueError as exc:
            raise WorldError(f"{path}: {exc}") from None
    return value


def json_type(value: Any) -> str:
    """What ``value`` is (``null``, ``a string``, ``a list``, ...), for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


# ---------------------------------------------------------------------------------------- seeding
class SeedTarget(Protocol):
    """What :func:`seed` writes a world into: an open
    :class:`~batchpilot_local.embedded_aws.EmbeddedAws` (named here by what it offers, so this
    module does not import the one that imports it)."""

    account_id: str

    def client(self, service: str) -> Any:
        """A boto3 client bound to the embedded account."""
        ...

    @property
    def batch(self) -> EmbeddedBatch:
        """The embedded Batch (service environments, queues, quota shares, jobs)."""
        ...

    @property
    def training(self) -> EmbeddedTraining:
        """The embedded SageMaker training jobs."""
        ...


def seed(aws: SeedTarget, world: Mapping[str, Any], *, replace: bool = False) -> World:
    """Create what ``world`` describes in the open ``aws``; returns the parsed world.

    Without ``replace`` worlds add up (an item with the id of an existing one replaces it). With
    ``replace`` each of ``service_jobs``, ``jobs`` and ``training_jobs`` that the world gives
    becomes the whole set of its kind, and each checkpoint prefix it gives loses its other objects;
    environments, queues and job definitions are created or updated, never removed.

    Raises:
        WorldError: the world is malformed, or refers to what does not exist (a service queue's
            service environment).
    """
    parsed = parse_world(world)
    batch = aws.batch
    for env in parsed.service_environments:
        batch.put_service_environment(
            {
                "serviceEnvironmentName": env.name,
                "serviceEnvironmentType": env.type,
                "state": env.state,
                "status": env.status,
                "capacityLimits": [limit.model_dump() for limit in env.capacityLimits],
                "tags": dict(env.tags),
            }
        )
    for index, queue in enumerate(parsed.job_queues):
        detail: dict[str, Any] = {
            "jobQueueName": queue.name,
            "state": queue.state,
            "priority": queue.priority,
            "tags": dict(queue.tags),
            "jobStateTimeLimitActions": list(queue.jobStateTimeLimitActions),
        }
        if queue.kind == "service":
            env_detail = batch.find_service_environment(str(queue.serviceEnvironment))
            if env_detail is None:
                raise WorldError(
                    f"world.job_queues[{index}].serviceEnvironment: no service environment "
                    f"{queue.serviceEnvironment!r} (add it to world.service_environments)"
                )
            detail["jobQueueType"] = "SAGEMAKER_TRAINING"
            detail["serviceEnvironmentOrder"] = [
                {"order": 1, "serviceEnvironment": env_detail["serviceEnvironmentArn"]}
            ]
            detail["computeEnvironmentOrder"] = []
        else:
            detail["jobQueueType"] = "ECS"
            detail["computeEnvironmentOrder"] = [
                {
                    "order": order,
                    "computeEnvironment": ce
                    if ce.startswith("arn:")
                    else f"arn:aws:batch:{batch.region}:{batch.account_id}:compute-environment/{ce}",
                }
                for order, ce in enumerate(queue.computeEnvironments, start=1)
            ]
        if queue.schedulingPolicyArn:
            detail["schedulingPolicyArn"] = queue.schedulingPolicyArn
        batch.put_job_queue(detail, queue.scheduling)
    for index, share in enumerate(parsed.quota_shares):
        found = batch.find_queue(str(share["jobQueue"]))
        if found is None or found.scheduling != "QUOTA_MANAGEMENT":
            raise WorldError(
                f"world.quota_shares[{index}].jobQueue: no QUOTA_MANAGEMENT job queue "
                f"{share['jobQueue']!r} (add it to world.job_queues)"
            )
        batch.put_quota_share(share)
    client = aws.client("batch")
    for policy in parsed.scheduling_policies:
        _put_scheduling_policy(client, policy)
    for job_def in parsed.job_definitions:
        _register(client, job_def)
    if replace and "service_jobs" in parsed.keys:
        batch.remove_service_jobs()
    for job in parsed.service_jobs:
        batch.put_service_job(job)
    if replace and "jobs" in parsed.keys:
        batch.remove_jobs()
    for job in parsed.jobs:
        batch.put_job(job)
    training = aws.training
    if replace and "training_jobs" in parsed.keys:
        training.jobs.clear()
    for training_job in parsed.training_jobs:
        training.put_training_job(training_job.detail, training_job.tags)
    for checkpoint in parsed.checkpoints:
        _seed_checkpoint(aws, checkpoint, replace)
    if parsed.gpu_metrics:
        _seed_gpu_metrics(aws.client("cloudwatch"), parsed.gpu_metrics)
    return parsed


_PUT_DATUMS = 1000  # PutMetricData: at most 1,000 datums a request


def _seed_gpu_metrics(client: Any, series: Sequence[GpuSeriesSpec]) -> None:
    """PutMetricData of every minute of every series (namespace /aws/sagemaker/TrainingJobs).
    Datapoints are added, never removed (CloudWatch has no delete): a later tick's world adds the
    minutes it gives, replacing those of the same host, metric and minute."""
    datums: list[dict[str, Any]] = []
    for spec in series:
        at = spec.start
        while at < spec.end:
            datums.append(
                {
                    "MetricName": spec.metric,
                    "Dimensions": [{"Name": "Host", "Value": spec.host}],
                    "Timestamp": at,
                    "Value": spec.value,
                    "Unit": "Percent",
                }
            )
            at += timedelta(minutes=1)
    for first in range(0, len(datums), _PUT_DATUMS):
        chunk = datums[first : first + _PUT_DATUMS]
        client.put_metric_data(Namespace="/aws/sagemaker/TrainingJobs", MetricData=chunk)


def _register(client: Any, job_def: JobDefinitionSeed) -> None:
    name = job_def.request["jobDefinitionName"]
    existing = client.describe_job_definitions(jobDefinitionName=name)["jobDefinitions"]
    current = max((int(d["revision"]) for d in existing), default=0)
    target = job_def.revision or current + 1
    if target <= current:
        raise WorldError(f"job definition {name}: revision {target} is already registered")
    while current < target:
        current = int(client.register_job_definition(**job_def.request)["revision"])


def _seed_checkpoint(aws: SeedTarget, checkpoint: CheckpointSpec, replace: bool) -> None:
    from moto.s3.models import s3_backends

    s3 = aws.client("s3")
    bucket = checkpoint.bucket
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=bucket)
    backend = s3_backends[aws.account_id]["global"]
    if replace:
        wanted = {checkpoint.full_key(o.key) for o in checkpoint.objects}
        for name in list(backend.get_bucket(bucket).keys.keys()):
            if name.startswith(checkpoint.prefix) and name not in wanted:
                s3.delete_object(Bucket=bucket, Key=name)
    for obj in checkpoint.objects:
        key = checkpoint.full_key(obj.key)
        s3.put_object(Bucket=bucket, Key=key, Body=b"\0" * obj.size if obj.size <= _MAX_BODY else b"")
        stored = backend.get_object(bucket, key)
        assert stored is not None
        stored.last_modified = obj.last_modified.astimezone(UTC).replace(tzinfo=None)  # moto keeps naive UTC
        if obj.size > _MAX_BODY:
            stored.contentsize = obj.size  # listed with its size; its body is empty


# ---------------------------------------------------------------------------------------- journal
@dataclass
class JournalEntry:
    """One API call made by the code under test.

    ``params`` are the keyword arguments given to the boto3 method (copied); ``sent`` is False when
    botocore rejected the call before sending it (invalid parameters); ``succeeded`` is True for a
    2xx answer; ``error_code`` is the AWS error code (or the exception's name) otherwise;
    ``retries`` counts botocore's retries (throttling, 5xx) before that final answer. ``record`` is
    the SQS record (``messageId``) the caller was handling
    (:func:`batchpilot.shared.correlation.current_record`), None for batch-level work;
    ``event_ids`` are the ``EventId`` s a successful ``PutEvents`` answered, one per entry (None for
    a rejected entry; empty for other calls).
    """

    service: str
    operation: str
    params: dict[str, Any]
    sent: bool = False
    succeeded: bool = False
    http_status: int | None = None
    error_code: str | None = None
    retries: int = 0
    record: str | None = None
    event_ids: list[str | None] = field(default_factory=list)

    @property
    def action(self) -> str:
        """``"<service>:<Operation>"``, e.g. ``"batch:SubmitServiceJob"``."""
        return f"{self.service}:{self.operation}"


_CONTEXT_KEY = "batchpilot_journal_entry"


def _plain_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain_copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_copy(v) for v in value]
    return value  # scalars, bytes, and streams (kept as they are)


class ApiJournal:
    """Records API calls through botocore's event system.

    :meth:`install` registers handlers (``provide-client-params``, ``after-call``,
    ``after-call-error``) on the given event emitters, usually those of boto3 sessions. Each
    client copies its session's emitter when it is created, so clients created after
    :meth:`install` are recorded and clients created before are not.
    """

    def __init__(self) -> None:
        self.entries: list[JournalEntry] = []
        self._emitters: list[Any] = []
        self._ids = {
            name: f"batchpilot-journal-{name}-{id(self)}"
            for name in ("provide-client-params", "after-call", "after-call-error")
        }

    def install(self, emitters: Iterable[Any]) -> None:
        handlers = {
            "provide-client-params": self._before,
            "after-call": self._after,
            "after-call-error": self._after_error,
        }
        for emitter in emitters:
            if any(emitter is known for known in self._emitters):
                continue
            for event, handler in handlers.items():
                emitter.register(event, handler, unique_id=self._ids[event])
            self._emitters.append(emitter)

    def uninstall(self) -> None:
        for emitter in self._emitters:
            for event, unique_id in self._ids.items():
                emitter.unregister(event, unique_id=unique_id)
        self._emitters.clear()

    def drain(self) -> list[JournalEntry]:
        """The entries recorded so far, removed from the journal."""
        entries, self.entries = self.entries, []
        return entries

    def _before(self, params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        # provide-client-params: the arguments exactly as given, before botocore fills in defaults
        # such as an idempotency clientToken
        entry = JournalEntry(
            str(model.service_model.service_name),
            str(model.name),
            _plain_copy(params),
            record=current_record(),
        )
        self.entries.append(entry)
        context[_CONTEXT_KEY] = entry

    def _after(
        self, http_response: Any, parsed: Mapping[str, Any], context: dict[str, Any], **_: Any
    ) -> None:
        entry = context.get(_CONTEXT_KEY)
        if isinstance(entry, JournalEntry):
            entry.sent = True
            entry.http_status = int(http_response.status_code)
            entry.succeeded = entry.http_status < 300
            entry.retries = int((parsed.get("ResponseMetadata") or {}).get("RetryAttempts") or 0)
            if not entry.succeeded:
                entry.error_code = str((parsed.get("Error") or {}).get("Code") or entry.http_status)
            elif entry.operation == "PutEvents":
                entry.event_ids = [
                    result.get("EventId") if isinstance(result, Mapping) else None
                    for result in parsed.get("Entries") or []
                ]

    def _after_error(self, exception: BaseException, context: dict[str, Any], **_: Any) -> None:
        entry = context.get(_CONTEXT_KEY)
        if isinstance(entry, JournalEntry):
            entry.sent = True
            entry.succeeded = False
            entry.error_code = type(exception).__name__
