"""batchpilot's own EventBridge events (``source: batchpilot``): the facts one function tells another.

The recovery function publishes ``Job Resubmitted``, ``Recovery Skipped`` and ``Recovery Failed``;
the capacity function ``Capacity Adjusted`` and ``Capacity Limited``; the ledger function ``Job
Starving`` and ``Job GPU Idle``. The alerts function routes all of them. Producers build a model and call
:func:`put_events_entry`; consumers parse with :func:`parse_own_event`. Unknown fields are
ignored so producers can add fields without breaking older consumers.

Detail field names are snake_case; times are ISO-8601 UTC strings on the wire and aware
``datetime`` objects in Python; instance counts are instances (or capacity units for quota
management), durations seconds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from batchpilot.shared.events import InvalidEventError, Timestamp, UnsupportedEventError

__all__ = [
    "OWN_DETAIL_TYPES",
    "SOURCE",
    "CapacityAdjusted",
    "CapacityLimitReason",
    "CapacityLimited",
    "GpuIdleReason",
    "JobGpuIdle",
    "JobResubmitted",
    "JobStarving",
    "OwnEvent",
    "PublishError",
    "RecoveryFailed",
    "RecoverySkipped",
    "SkipReason",
    "StarvationReason",
    "parse_own_event",
    "put_events_entry",
]

SOURCE = "batchpilot"
"""``source`` of every event batchpilot publishes."""


class SkipReason(StrEnum):
    """Why the recovery function did not resubmit a job (the ``Recovery Skipped`` reason)."""

    NOT_TERMINAL = "NOT_TERMINAL"  # Batch is still retrying or requeued it (RUNNABLE, preempted)
    SUCCEEDED = "SUCCEEDED"
    CREATED_BY_BATCH = "CREATED_BY_BATCH"  # an AWSBatch* training job: its service job decides
    NOT_RECOVERABLE = "NOT_RECOVERABLE"  # MISCONFIGURATION, USER_STOPPED, APPLICATION_ERROR, TIMEOUT...
    RETRIES_LEFT = "RETRIES_LEFT"  # a container job with Batch retries left
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"  # critical: the lineage used its budget for this category
    NO_CHECKPOINT = "NO_CHECKPOINT"  # configured to refuse a restart from step 0
    ALREADY_HANDLED = "ALREADY_HANDLED"  # a duplicate or older event for an attempt already decided
    QUEUE_NOT_MANAGED = "QUEUE_NOT_MANAGED"  # the job queue is not in the recovery configuration
    DRY_RUN = "DRY_RUN"
    ROLE_NOT_ALLOWED = "ROLE_NOT_ALLOWED"  # the SageMaker execution role is not in the configuration
    NOT_FOUND = "NOT_FOUND"  # Describe* no longer knows the job (nothing to rebuild the request from)
    TIME_LIMIT_ACTION = "TIME_LIMIT_ACTION"  # the job queue's jobStateTimeLimitActions ended it
    PREEMPTION_RETRIES_SPENT = "PREEMPTION_RETRIES_SPENT"  # its preemptionRetriesBeforeTermination ran out


class CapacityLimitReason(StrEnum):
    """Why the capacity function did not (fully) give a service environment what demand asks."""

    AT_MAX = "AT_MAX"  # desired capacity is above the configured maximum
    BLOCKED_JOB_EXCEEDS_MAX = "BLOCKED_JOB_EXCEEDS_MAX"  # critical: a job needs more than max allows
    NOT_VALID = "NOT_VALID"  # DISABLED, not VALID, or mid-update: left alone
    COOLDOWN = "COOLDOWN"
    UPDATE_FAILED = "UPDATE_FAILED"


class StarvationReason(StrEnum):
    """Why the ledger function calls a job starving (the ``Job Starving`` reason)."""

    PREEMPTED_REPEATEDLY = "PREEMPTED_REPEATEDLY"  # preempted at least N times (default 3)
    WAITING_BELOW_ENTITLEMENT = "WAITING_BELOW_ENTITLEMENT"  # RUNNABLE too long, share below entitlement


class GpuIdleReason(StrEnum):
    """Why the ledger function calls a RUNNING job's GPUs idle (the ``Job GPU Idle`` reason)."""

    IDLE = "IDLE"  # below the threshold (default 10 %) for the window (default 30 min) after warm-up
    STALLED = "STALLED"  # fell from working to about zero and stayed there: the hang signature
    ACTIVE = "ACTIVE"  # the resolution: a reported IDLE or STALLED episode's GPUs work again


class _OwnEvent(BaseModel):
    # defer_build: a model's validator and serializer are built at its first use, so each function
    # pays only for the events it publishes or receives (cold start: about 5 ms less at import).
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    detail_type: str = Field(exclude=True)
    time: Timestamp = Field(exclude=True)


class JobResubmitted(_OwnEvent):
    """``Job Resubmitted``: recovery submitted a new job that resumes from the checkpoint."""

    detail_type: Literal["Job Resubmitted"] = Field(default="Job Resubmitted", exclude=True)
    lineage_id: str
    attempt: int = Field(ge=1, description="resubmission number within the lineage (1 = first)")
    job_kind: str
    original_job_arn: str
    failed_job_arn: str
    new_job_arn: str | None = None  # None in dry-run mode
    new_job_name: str
    job_queue: str | None = None
    share_identifier: str | None = None
    quota_share: str | None = None
    category: str
    reason: str | None = None
    operation: str  # batch:SubmitServiceJob | batch:SubmitJob | sagemaker:CreateTrainingJob
    checkpoint_uri: str | None = None
    checkpoint_time: Timestamp | None = None
    checkpoint_object: str | None = None  # s3://bucket/key of the newest checkpoint object
    checkpoint_age_seconds: float | None = Field(default=None, ge=0)  # its age at the failure
    restarts_from_step_zero: bool = False
    lost_instance_hours: float | None = Field(default=None, ge=0)
    budget_used: int = Field(default=0, ge=0)
    budget_limit: int = Field(default=0, ge=0)
    dry_run: bool = False
    job_name: str | None = None  # the failed job's name (jobName / TrainingJobName)


class RecoverySkipped(_OwnEvent):
    """``Recovery Skipped``: recovery decided not to resubmit; ``skip_reason`` says why."""

    detail_type: Literal["Recovery Skipped"] = Field(default="Recovery Skipped", exclude=True)
    job_arn: str
    job_kind: str
    job_name: str | None = None
    job_queue: str | None = None
    share_identifier: str | None = None
    quota_share: str | None = None
    category: str | None = None
    skip_reason: SkipReason
    message: str
    lineage_id: str | None = None
    budget_used: int | None = None
    budget_limit: int | None = None
    critical: bool = False  # True for BUDGET_EXHAUSTED: a job nobody will restart
    dry_run: bool = False  # recovery runs dry (RecoveryDryRun=true, or no job queue named)


class RecoveryFailed(_OwnEvent):
    """``Recovery Failed``: the resubmission itself failed (e.g. ResourceLimitExceeded)."""

    detail_type: Literal["Recovery Failed"] = Field(default="Recovery Failed", exclude=True)
    job_arn: str
    job_kind: str
    job_name: str | None = None
    job_queue: str | None = None
    category: str | None = None
    lineage_id: str
    attempt: int = Field(ge=1)
    operation: str
    error_code: str
    error_message: str
    will_retry: bool = False  # a transient error (throttling): SQS delivers the failure again


class CapacityAdjusted(_OwnEvent):
    """``Capacity Adjusted``: the capacity function changed a service environment's capacity limit."""

    detail_type: Literal["Capacity Adjusted"] = Field(default="Capacity Adjusted", exclude=True)
    service_environment: str
    service_environment_arn: str | None = None
    capacity_unit: str
    previous_max: int = Field(ge=0)
    new_max: int = Field(ge=0)
    in_use: int = Field(ge=0)
    runnable_demand: int = Field(ge=0)
    reason: str
    dry_run: bool = False
    # Added by the capacity function: the sentence for people, what demand asked for (instances,
    # before max), and the blocked job that drove a raise (SERVICE_ENVIRONMENT_MAX_RESOURCE).
    message: str | None = None
    desired: int | None = Field(default=None, ge=0)
    job_arn: str | None = None


class CapacityLimited(_OwnEvent):
    """``Capacity Limited``: demand asks for more than the capacity function may give."""

    detail_type: Literal["Capacity Limited"] = Field(default="Capacity Limited", exclude=True)
    service_environment: str
    service_environment_arn: str | None = None
    capacity_unit: str
    current_max: int = Field(ge=0)
    desired: int = Field(ge=0)
    configured_max: int = Field(ge=0)
    limit_reason: CapacityLimitReason
    message: str
    job_arn: str | None = None
    # Added by the capacity function: the inputs of the refusal (instances).
    in_use: int | None = Field(default=None, ge=0)
    runnable_demand: int | None = Field(default=None, ge=0)


class JobStarving(_OwnEvent):
    """``Job Starving``: the ledger function found a job that does not get to run (published once
    per job and reason)."""

    detail_type: Literal["Job Starving"] = Field(default="Job Starving", exclude=True)
    job_arn: str
    job_kind: str
    job_name: str | None = None
    job_queue: str | None = None
    share_identifier: str | None = None
    quota_share: str | None = None
    scheduling_priority: int | None = None
    reason: StarvationReason
    preemptions: int = Field(default=0, ge=0)
    waiting_seconds: float | None = Field(default=None, ge=0)  # since it last became RUNNABLE
    threshold: float = Field(default=0, ge=0)  # preemptions (N) or seconds, by reason
    share_usage_percent: float | None = Field(default=None, ge=0)  # ShareOfUsage when known
    entitlement_percent: float | None = Field(default=None, ge=0)  # Entitlement when known
    message: str


class JobGpuIdle(_OwnEvent):
    """``Job GPU Idle``: the ledger function found a RUNNING training job whose GPUs do no work
    (SageMaker's ``GPUUtilization`` per host; published once per job and episode,
    :mod:`batchpilot.gpu.policy`). Reason ``ACTIVE`` is the episode's resolution (once, when a
    reported episode's activity returns): ``idle_since`` and ``idle_seconds`` are the episode's."""

    detail_type: Literal["Job GPU Idle"] = Field(default="Job GPU Idle", exclude=True)
    job_arn: str
    job_kind: str
    job_name: str | None = None
    training_job_name: str | None = None
    job_queue: str | None = None
    share_identifier: str | None = None
    quota_share: str | None = None
    scheduling_priority: int | None = None
    reason: GpuIdleReason
    instance_type: str | None = None
    instances: int = Field(default=0, ge=0)
    gpus: int = Field(default=0, ge=0)  # GPUs of all its instances
    activity_percent: float = Field(default=0, ge=0)  # mean over its GPUs, the latest minute
    threshold_percent: float = Field(default=0, ge=0)
    idle_since: Timestamp
    idle_seconds: float = Field(default=0, ge=0)  # up to the run's time
    hourly_cost_usd: float | None = Field(default=None, ge=0)  # idle capacity at list price, when known
    message: str


OwnEvent = (
    JobResubmitted
    | RecoverySkipped
    | RecoveryFailed
    | CapacityAdjusted
    | CapacityLimited
    | JobStarving
    | JobGpuIdle
)

OWN_DETAIL_TYPES: dict[str, type[OwnEvent]] = {
    "Job Resubmitted": JobResubmitted,
    "Recovery Skipped": RecoverySkipped,
    "Recovery Failed": RecoveryFailed,
    "Capacity Adjusted": CapacityAdjusted,
    "Capacity Limited": CapacityLimited,
    "Job Starving": JobStarving,
    "Job GPU Idle": JobGpuIdle,
}


class PublishError(Exception):
    """batchpilot's own events could not be published (raised by the EventBridge adapter,
    :class:`batchpilot.io.eventbridge.EventBridgePublisher`). The message names detail-types and
    error codes only."""


def put_events_entry(event: OwnEvent, bus: str, resources: list[str] | None = None) -> dict[str, Any]:
    """The ``PutEvents`` entry for ``event`` on ``bus`` (EventBridge ``PutEventsRequestEntry``)."""
    return {
        "Source": SOURCE,
        "DetailType": event.detail_type,
        "Detail": event.model_dump_json(exclude_none=True),
        "EventBusName": bus,
        "Time": event.time,
        "Resources": list(resources or []),
    }


def parse_own_event(raw: Mapping[str, Any]) -> OwnEvent:
    """Parse a delivered EventBridge event whose ``source`` is ``batchpilot``.

    Raises:
        UnsupportedEventError: not a batchpilot detail-type.
        InvalidEventError: the detail does not match its model (fields named, values never shown).
    """
    detail_type = raw.get("detail-type")
    model = OWN_DETAIL_TYPES.get(detail_type) if isinstance(detail_type, str) else None
    if raw.get("source") != SOURCE or model is None:
        raise UnsupportedEventError(
            "not a batchpilot event", event_id=raw.get("id"), detail_type=str(detail_type)
        )
    detail = raw.get("detail")
    if isinstance(detail, str):  # tolerate a detail left as JSON text
        try:
            detail = json.loads(detail)
        except ValueError:
            raise InvalidEventError("detail is not JSON", event_id=raw.get("id")) from None
    if not isinstance(detail, Mapping):
        raise InvalidEventError("detail must be an object", event_id=raw.get("id"), detail_type=detail_type)
    try:
        return model.model_validate({**detail, "time": raw.get("time"), "detail_type": detail_type})
    except ValidationError as exc:
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_input=False)[:5]
        )
        raise InvalidEventError(fields, event_id=raw.get("id"), detail_type=detail_type) from None
