"""Pydantic models of the EventBridge events batchpilot reacts to, dispatched on ``detail-type``.

One model per detail-type (AWS Batch User Guide, "AWS Batch events" and "Service job events";
SageMaker Developer Guide, "Events that Amazon SageMaker AI sends to Amazon EventBridge"). Every
model ignores unknown fields (AWS adds fields at any time) and makes optional every field that real
events can omit. Timestamps in any of the shapes AWS sends (epoch milliseconds as a number or a
numeric string, ISO-8601 strings) become timezone-aware UTC ``datetime`` objects.

Fields that can carry secrets (``container.environment``, ``container.command``,
``HyperParameters``) are deliberately not modelled: they are dropped at parse time, so no later
code can log them.

Entry point: :func:`parse_event`. It raises only :class:`InvalidEventError` (and its subclass
:class:`UnsupportedEventError`) whatever it is given.

CloudWatch alarm state changes (``CloudWatch Alarm State Change`` from ``aws.cloudwatch``: Amazon
CloudWatch User Guide, "Alarm events and EventBridge") have their own model,
:class:`CloudWatchAlarmStateChange`, and entry point, :func:`parse_alarm_event`: they are not job
events (:data:`JobEvent`), and only the alerts function receives them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)
from pydantic_core import from_json

__all__ = [
    "ALARM_DETAIL_TYPE",
    "ALARM_SOURCE",
    "DETAIL_TYPES",
    "AlarmConfiguration",
    "AlarmDetail",
    "AlarmMetric",
    "AlarmState",
    "AlarmStateValue",
    "BatchAttempt",
    "BatchJobDetail",
    "BatchJobQueueBlocked",
    "BatchJobStateChange",
    "BatchServiceJobPreemptionCompleted",
    "BatchServiceJobPreemptionStarted",
    "BatchServiceJobQueueBlocked",
    "BatchServiceJobStateChange",
    "CloudWatchAlarmStateChange",
    "EcsProperties",
    "EksAttempt",
    "EksAttemptContainer",
    "InvalidEventError",
    "JobEvent",
    "NodeDetails",
    "NodeProperties",
    "PreemptionDetail",
    "SageMakerTrainingJobStateChange",
    "ServiceJobDetail",
    "TaskContainerDetail",
    "TaskProperties",
    "Timestamp",
    "TrainingJobDetail",
    "UnsupportedEventError",
    "parse_alarm_event",
    "parse_event",
    "parse_event_json",
    "to_datetime",
    "to_datetime_or_none",
    "unreadable",
]


class InvalidEventError(ValueError):
    """An event that batchpilot cannot use: not an object, a missing or mistyped field.

    The message names the offending fields and never repeats their values (events can carry
    secrets). ``event_id`` and ``detail_type`` are set when the envelope had them.
    """

    def __init__(self, message: str, *, event_id: str | None = None, detail_type: str | None = None):
        super().__init__(message)
        self.event_id = event_id
        self.detail_type = detail_type


class UnsupportedEventError(InvalidEventError):
    """A well-formed envelope whose ``detail-type``/``source`` pair batchpilot does not handle."""


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


Timestamp = Annotated[datetime, AfterValidator(_aware)]
"""A timezone-aware UTC datetime, parsed by pydantic-core from what AWS sends: epoch milliseconds as
a number or a numeric string (pydantic reads numbers above 2e10 as milliseconds, below as seconds:
every real epoch-ms value since 1970-08 is above), or an ISO-8601 string (no offset means UTC)."""

_TIMESTAMP: TypeAdapter[datetime] = TypeAdapter(Timestamp)


def to_datetime(value: Any) -> datetime:
    """Normalise one AWS timestamp (see :data:`Timestamp`) to a timezone-aware UTC datetime.

    Raises:
        ValueError: for booleans, non-finite or out-of-range numbers, and unparseable strings.
    """
    try:
        return _TIMESTAMP.validate_python(value)
    except ValidationError as exc:
        raise ValueError(exc.errors(include_input=False, include_url=False)[0]["msg"]) from None


def to_datetime_or_none(value: Any) -> datetime | None:
    """:func:`to_datetime`, or None for a missing (None) or unparseable timestamp."""
    if value is None:
        return None
    try:
        return to_datetime(value)
    except ValueError:
        return None


def _tags(value: Any) -> Any:
    """SageMaker ``Tags`` arrive as an object or as a list of ``{Key, Value}``: both become a dict."""
    if value is None:
        return {}
    if isinstance(value, list):
        out: dict[str, Any] = {}
        for item in value:
            if not isinstance(item, Mapping) or "Key" not in item:
                raise ValueError("tag list items must be objects with Key and Value")
            out[str(item["Key"])] = "" if item.get("Value") is None else item.get("Value")
        return out
    return value


TagMap = Annotated[dict[str, str], BeforeValidator(_tags)]


class _Model(BaseModel):
    # defer_build: a model's validator is built when it first validates, so a cold start pays only
    # for the detail-types its first events have, not for all seven.
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True, defer_build=True)


# --------------------------------------------------------------------------- Batch container jobs
class ContainerAttemptDetail(_Model):
    """``attempts[].container`` of a Batch job: every field may be missing (a spot
    reclaim has no ``exitCode``; a job that failed before starting has no log stream)."""

    exitCode: int | None = None
    reason: str | None = None
    logStreamName: str | None = None
    taskArn: str | None = None
    containerInstanceArn: str | None = None


class TaskContainerDetail(_Model):
    """One container of an ECS-properties job or attempt: ``taskProperties[].containers[]`` of
    DescribeJobs (``AttemptTaskContainerDetails`` in an attempt, ``TaskContainerDetails`` on the job).
    Only non-secret fields are kept (no environment, no command)."""

    name: str | None = None
    exitCode: int | None = None
    reason: str | None = None
    logStreamName: str | None = None
    essential: bool | None = None


class TaskProperties(_Model):
    """One ``taskProperties[]`` entry (an ECS task) of an ECS-properties job or attempt."""

    containers: list[TaskContainerDetail] = Field(default_factory=list)


class BatchAttempt(_Model):
    """One attempt of a Batch container job (DescribeJobs ``AttemptDetail``); times in UTC.

    A job with ``containerProperties`` reports its container under ``container``; a job with
    ``ecsProperties`` (and the nodes of a multi-node parallel job defined that way) under
    ``taskProperties[].containers[]`` (AWS Batch API Reference, ``AttemptDetail``).
    """

    container: ContainerAttemptDetail | None = None
    taskProperties: list[TaskProperties] = Field(default_factory=list)
    startedAt: Timestamp | None = None
    stoppedAt: Timestamp | None = None
    statusReason: str | None = None


class EksAttemptContainer(_Model):
    """``eksAttempts[].containers[]`` of a job on Amazon EKS (``EksAttemptContainerDetail``)."""

    name: str | None = None
    exitCode: int | None = None
    reason: str | None = None


class EksAttempt(_Model):
    """One attempt of a Batch job on Amazon EKS (DescribeJobs ``EksAttemptDetail``); times in UTC."""

    containers: list[EksAttemptContainer] = Field(default_factory=list)
    initContainers: list[EksAttemptContainer] = Field(default_factory=list)
    podName: str | None = None
    nodeName: str | None = None
    startedAt: Timestamp | None = None
    stoppedAt: Timestamp | None = None
    statusReason: str | None = None


class EcsProperties(_Model):
    """``ecsProperties`` of a job (DescribeJobs ``EcsPropertiesDetail``): its tasks' containers."""

    taskProperties: list[TaskProperties] = Field(default_factory=list)


class NodeDetails(_Model):
    """``nodeDetails`` of one node of a multi-node parallel job (its ``jobId`` is ``UUID#N``)."""

    nodeIndex: int | None = None
    isMainNode: bool | None = None


class NodeProperties(_Model):
    """``nodeProperties`` of a multi-node parallel job's parent: how many nodes, which is main."""

    numNodes: int | None = None
    mainNode: int | None = None


class RetryStrategy(_Model):
    """``retryStrategy``: ``attempts`` counts the first try (1 to 10)."""

    attempts: int | None = None


class ArrayProperties(_Model):
    """``arrayProperties``: ``index`` is set on an array child, ``size`` on the parent."""

    index: int | None = None
    size: int | None = None


class ContainerDetail(_Model):
    """``container`` of a Batch job. Only non-secret fields are kept (no environment, no command)."""

    image: str | None = None
    exitCode: int | None = None
    reason: str | None = None
    logStreamName: str | None = None


class BatchJobDetail(_Model):
    """``detail`` of ``Batch Job State Change`` / ``Batch Job Queue Blocked`` (resembles DescribeJobs).

    ``jobId`` of an array child is ``UUID:INDEX``, of a multi-node parallel node ``UUID#N``; both are
    kept intact. Timestamps come as epoch ms. The failed container and its exit code can be under
    ``container``, ``attempts[].container``, ``attempts[].taskProperties[].containers[]``,
    ``ecsProperties.taskProperties[].containers[]`` or ``eksAttempts[].containers[]``, depending on
    how the job was defined (AWS Batch API Reference, ``JobDetail``); ``jobArn`` is missing from
    events older than that field (the job's ARN is then the envelope's ``resources[0]``).
    """

    jobArn: str | None = None
    jobName: str
    jobId: str
    jobQueue: str
    status: str
    statusReason: str | None = None
    attempts: list[BatchAttempt] = Field(default_factory=list)
    createdAt: Timestamp | None = None
    startedAt: Timestamp | None = None
    stoppedAt: Timestamp | None = None
    retryStrategy: RetryStrategy | None = None
    jobDefinition: str | None = None
    parameters: dict[str, str] = Field(default_factory=dict)
    container: ContainerDetail | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    shareIdentifier: str | None = None
    schedulingPriority: int | None = None
    arrayProperties: ArrayProperties | None = None
    isCancelled: bool | None = None
    isTerminated: bool | None = None
    ecsProperties: EcsProperties | None = None
    eksAttempts: list[EksAttempt] = Field(default_factory=list)
    nodeDetails: NodeDetails | None = None
    nodeProperties: NodeProperties | None = None


# ------------------------------------------------------------------------------ Batch service jobs
class ServiceResourceId(_Model):
    """``serviceResourceId``: ``name`` is ``TrainingJobArn``, ``value`` the SageMaker ARN."""

    name: str | None = None
    value: str | None = None


class ServiceJobAttempt(_Model):
    """One attempt (one SageMaker training job) of a service job."""

    serviceResourceId: ServiceResourceId | None = None
    startedAt: Timestamp | None = None
    stoppedAt: Timestamp | None = None
    statusReason: str | None = None


class PreemptionSummary(_Model):
    """``preemptionSummary``: how often Batch preempted (and requeued) the job."""

    preemptedAttemptCount: int = 0
    recentPreemptedAttempts: list[ServiceJobAttempt] = Field(default_factory=list)


class CapacityUsage(_Model):
    """``capacityUsage[]``: ``quantity`` of ``capacityUnit`` (NUM_INSTANCES or an instance type)."""

    capacityUnit: str | None = None
    quantity: float | None = None


class ServiceJobDetail(_Model):
    """``detail`` of ``Batch Service Job State Change`` / ``... Queue Blocked``.

    Resembles DescribeServiceJob **without** ``tags`` and ``serviceRequestPayload``; share, quota
    and preemption fields are optional (UNCONFIRMED in events). Key jobs on ``jobArn``.
    """

    jobArn: str
    jobName: str | None = None
    jobId: str | None = None
    jobQueue: str | None = None
    status: str
    statusReason: str | None = None
    attempts: list[ServiceJobAttempt] = Field(default_factory=list)
    latestAttempt: ServiceJobAttempt | None = None
    createdAt: Timestamp | None = None
    scheduledAt: Timestamp | None = None
    startedAt: Timestamp | None = None
    stoppedAt: Timestamp | None = None
    serviceJobType: str | None = None
    shareIdentifier: str | None = None
    schedulingPriority: int | None = None
    quotaShareName: str | None = None
    isTerminated: bool | None = None
    retryStrategy: RetryStrategy | None = None
    preemptionSummary: PreemptionSummary | None = None
    capacityUsage: list[CapacityUsage] = Field(default_factory=list)


class PreemptionDetail(_Model):
    """``detail`` of ``Batch Service Job Preemption Started`` / ``... Completed``.

    Started: ``status`` RUNNING, ``statusReason`` ``PREEMPTION_IN_PROGRESS: ...``.
    Completed: ``status`` RUNNABLE (Batch requeued the job) and a ``preemptionSummary``.
    """

    preemptedJobArn: str
    status: str | None = None
    statusReason: str | None = None
    preemptionSummary: PreemptionSummary | None = None


# ----------------------------------------------------------------------------------- SageMaker
class TrainingInstanceGroup(_Model):
    """One ``InstanceGroups`` entry of a heterogeneous cluster."""

    InstanceGroupName: str | None = None
    InstanceType: str | None = None
    InstanceCount: int | None = None


class TrainingResourceConfig(_Model):
    """``ResourceConfig``: instance type and count of a training job, or ``InstanceGroups`` (a
    heterogeneous cluster) instead; :mod:`batchpilot.shared.resources` reads either."""

    InstanceType: str | None = None
    InstanceCount: int | None = None
    InstanceGroups: list[TrainingInstanceGroup] | None = None
    VolumeSizeInGB: int | None = None


class TrainingStoppingCondition(_Model):
    """``StoppingCondition`` in seconds."""

    MaxRuntimeInSeconds: int | None = None
    MaxWaitTimeInSeconds: int | None = None


class TrainingCheckpointConfig(_Model):
    """``CheckpointConfig`` (not in the documented event; DescribeTrainingJob has it)."""

    S3Uri: str | None = None
    LocalPath: str | None = None


class TrainingJobDetail(_Model):
    """``detail`` of ``SageMaker Training Job State Change`` (resembles DescribeTrainingJob).

    Timestamps arrive as epoch-ms strings or numbers; ``Tags`` as an object or a Key/Value list.
    ``HyperParameters`` are not kept.
    """

    TrainingJobName: str
    TrainingJobArn: str | None = None
    TrainingJobStatus: str
    SecondaryStatus: str | None = None
    FailureReason: str | None = None
    ResourceConfig: TrainingResourceConfig | None = None
    StoppingCondition: TrainingStoppingCondition | None = None
    RoleArn: str | None = None
    CheckpointConfig: TrainingCheckpointConfig | None = None
    EnableManagedSpotTraining: bool | None = None
    CreationTime: Timestamp | None = None
    TrainingStartTime: Timestamp | None = None
    TrainingEndTime: Timestamp | None = None
    LastModifiedTime: Timestamp | None = None
    BillableTimeInSeconds: int | None = None
    Tags: TagMap = Field(default_factory=dict)


# ------------------------------------------------------------------------------------ envelopes
class _Envelope(_Model):
    """The EventBridge envelope shared by every event (``replay-name`` only on replayed events)."""

    version: str | None = None
    id: str
    detail_type: str = Field(alias="detail-type")
    source: str
    account: str | None = None
    time: Timestamp
    region: str | None = None
    resources: list[str] = Field(default_factory=list)
    replay_name: str | None = Field(default=None, alias="replay-name")


class BatchJobStateChange(_Envelope):
    """``Batch Job State Change`` from ``aws.batch``: a container job changed status."""

    source: Literal["aws.batch"]
    detail_type: Literal["Batch Job State Change"] = Field(alias="detail-type")
    detail: BatchJobDetail


class BatchJobQueueBlocked(_Envelope):
    """``Batch Job Queue Blocked`` from ``aws.batch``: a container job is stuck in RUNNABLE."""

    source: Literal["aws.batch"]
    detail_type: Literal["Batch Job Queue Blocked"] = Field(alias="detail-type")
    detail: BatchJobDetail


class BatchServiceJobStateChange(_Envelope):
    """``Batch Service Job State Change`` from ``aws.batch``: a service job changed status."""

    source: Literal["aws.batch"]
    detail_type: Literal["Batch Service Job State Change"] = Field(alias="detail-type")
    detail: ServiceJobDetail


class BatchServiceJobQueueBlocked(_Envelope):
    """``Batch Service Job Queue Blocked`` from ``aws.batch``: a service job is stuck in RUNNABLE."""

    source: Literal["aws.batch"]
    detail_type: Literal["Batch Service Job Queue Blocked"] = Field(alias="detail-type")
    detail: ServiceJobDetail


class BatchServiceJobPreemptionStarted(_Envelope):
    """``Batch Service Job Preemption Started`` (quota-management queues only)."""

    source: Literal["aws.batch"]
    detail_type: Literal["Batch Service Job Preemption Started"] = Field(alias="detail-type")
    detail: PreemptionDetail


class BatchServiceJobPreemptionCompleted(_Envelope):
    """``Batch Service Job Preemption Completed``: Batch requeued the preempted job as RUNNABLE."""

    source: Literal["aws.batch"]
    detail_type: Literal["Batch Service Job Preemption Completed"] = Field(alias="detail-type")
    detail: PreemptionDetail


class SageMakerTrainingJobStateChange(_Envelope):
    """``SageMaker Training Job State Change`` from ``aws.sagemaker``."""

    source: Literal["aws.sagemaker"]
    detail_type: Literal["SageMaker Training Job State Change"] = Field(alias="detail-type")
    detail: TrainingJobDetail


# ---------------------------------------------------------------------------- CloudWatch alarms
ALARM_SOURCE = "aws.cloudwatch"
"""``source`` of CloudWatch's alarm events."""
ALARM_DETAIL_TYPE = "CloudWatch Alarm State Change"
"""``detail-type`` of an alarm's state change (one event per change, on the default bus)."""


class AlarmStateValue(StrEnum):
    """An alarm's state (CloudWatch API Reference, ``MetricAlarm.StateValue``)."""

    OK = "OK"
    ALARM = "ALARM"
    INSUFFICIENT_DATA = "INSUFFICIENT_DATA"


class AlarmState(_Model):
    """``detail.state`` / ``detail.previousState``: the value, CloudWatch's reason (a sentence such
    as ``Threshold Crossed: 1 out of the last 1 datapoints [...]``) and when the alarm entered it.
    ``reasonData`` (JSON text with the evaluated data points) is not kept."""

    value: AlarmStateValue
    reason: str | None = None
    timestamp: Timestamp


class AlarmMetricId(_Model):
    """``metricStat.metric`` of an alarm metric: its namespace and name (dimensions not kept)."""

    namespace: str | None = None
    name: str | None = None


class AlarmMetricStat(_Model):
    """``metricStat`` of an alarm metric."""

    metric: AlarmMetricId | None = None
    stat: str | None = None
    period: int | None = None


class AlarmMetric(_Model):
    """One ``detail.configuration.metrics[]`` entry: a metric (``metricStat``) or a metric math /
    Metrics Insights ``expression``, with its ``label``."""

    id: str | None = None
    metricStat: AlarmMetricStat | None = None
    expression: str | None = None
    label: str | None = None
    returnData: bool | None = None


class AlarmConfiguration(_Model):
    """``detail.configuration``: the alarm's ``description`` (``AlarmDescription``, at most 1,024
    characters) and its metrics; a composite alarm has an ``alarmRule`` instead of metrics."""

    description: str | None = None
    metrics: list[AlarmMetric] = Field(default_factory=list)
    alarmRule: str | None = None


class AlarmDetail(_Model):
    """``detail`` of ``CloudWatch Alarm State Change``."""

    alarmName: str = Field(min_length=1)
    state: AlarmState
    previousState: AlarmState | None = None
    configuration: AlarmConfiguration = Field(default_factory=AlarmConfiguration)


class CloudWatchAlarmStateChange(_Envelope):
    """``CloudWatch Alarm State Change`` from ``aws.cloudwatch``: an alarm changed state. The
    alarm's ARN is ``resources[0]``."""

    source: Literal["aws.cloudwatch"]
    detail_type: Literal["CloudWatch Alarm State Change"] = Field(alias="detail-type")
    detail: AlarmDetail


JobEvent = (
    BatchJobStateChange
    | BatchJobQueueBlocked
    | BatchServiceJobStateChange
    | BatchServiceJobQueueBlocked
    | BatchServiceJobPreemptionStarted
    | BatchServiceJobPreemptionCompleted
    | SageMakerTrainingJobStateChange
)

DETAIL_TYPES: dict[str, type[JobEvent]] = {
    "Batch Job State Change": BatchJobStateChange,
    "Batch Job Queue Blocked": BatchJobQueueBlocked,
    "Batch Service Job State Change": BatchServiceJobStateChange,
    "Batch Service Job Queue Blocked": BatchServiceJobQueueBlocked,
    "Batch Service Job Preemption Started": BatchServiceJobPreemptionStarted,
    "Batch Service Job Preemption Completed": BatchServiceJobPreemptionCompleted,
    "SageMaker Training Job State Change": SageMakerTrainingJobStateChange,
}
"""``detail-type`` → model. The ``source`` each model accepts is fixed by the model."""


def _describe(error: ValidationError) -> str:
    """Name the failing fields and why, never their values (which may be secrets)."""
    parts = []
    for item in error.errors(include_input=False, include_url=False)[:5]:
        loc = ".".join(str(p) for p in item["loc"]) or "<event>"
        parts.append(f"{loc}: {item['msg']}")
    more = error.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def parse_event(raw: object) -> JobEvent:
    """Parse one EventBridge event (a decoded JSON object) into its detail-type's model.

    Args:
        raw: the event as delivered by EventBridge (envelope with ``detail``).

    Returns:
        One of the seven models of :data:`DETAIL_TYPES`.

    Raises:
        UnsupportedEventError: the ``detail-type`` is not one batchpilot handles.
        InvalidEventError: anything else is wrong (not an object, fields missing or mistyped,
            ``source`` not the one the detail-type comes from). Nothing else is ever raised.
    """
    if not isinstance(raw, Mapping):
        raise InvalidEventError(f"event must be a JSON object, got {type(raw).__name__}")
    event_id = raw.get("id") if isinstance(raw.get("id"), str) else None
    detail_type = raw.get("detail-type")
    if not isinstance(detail_type, str):
        raise InvalidEventError("detail-type: missing or not a string", event_id=event_id)
    model = DETAIL_TYPES.get(detail_type)
    if model is None:
        raise UnsupportedEventError(
            "detail-type is not handled by batchpilot", event_id=event_id, detail_type=detail_type
        )
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise InvalidEventError(_describe(exc), event_id=event_id, detail_type=detail_type) from None
    except (RecursionError, OverflowError, TypeError) as exc:  # pathological input
        raise InvalidEventError(
            f"unusable event: {type(exc).__name__}", event_id=event_id, detail_type=detail_type
        ) from None


def parse_alarm_event(raw: object) -> CloudWatchAlarmStateChange:
    """Parse one ``CloudWatch Alarm State Change`` event (a decoded JSON object).

    Raises:
        UnsupportedEventError: another ``aws.cloudwatch`` event (a configuration change, a
            contributor's state change).
        InvalidEventError: anything else is wrong (not an object, ``alarmName``, ``state.value``
            or ``state.timestamp`` missing or mistyped, a state CloudWatch does not have).
    """
    if not isinstance(raw, Mapping):
        raise InvalidEventError(f"event must be a JSON object, got {type(raw).__name__}")
    event_id = raw.get("id") if isinstance(raw.get("id"), str) else None
    detail_type = raw.get("detail-type")
    if not isinstance(detail_type, str):
        raise InvalidEventError("detail-type: missing or not a string", event_id=event_id)
    if detail_type != ALARM_DETAIL_TYPE:
        raise UnsupportedEventError(
            "detail-type is not handled by batchpilot", event_id=event_id, detail_type=detail_type
        )
    try:
        return CloudWatchAlarmStateChange.model_validate(raw)
    except ValidationError as exc:
        raise InvalidEventError(_describe(exc), event_id=event_id, detail_type=detail_type) from None
    except (RecursionError, OverflowError, TypeError) as exc:  # pathological input
        raise InvalidEventError(
            f"unusable event: {type(exc).__name__}", event_id=event_id, detail_type=detail_type
        ) from None


def parse_event_json(text: str | bytes) -> JobEvent:
    """Parse one EventBridge event from its JSON text (e.g. an SQS message body).

    Same result and errors as :func:`parse_event` on the decoded text; pydantic-core's JSON parser
    decodes it. Text that is not JSON raises :class:`InvalidEventError` too.
    """
    try:
        raw = from_json(text)
    except ValueError as exc:
        raise InvalidEventError(unreadable(exc)) from None
    return parse_event(raw)


def unreadable(exc: ValueError) -> str:
    """Why pydantic-core's ``from_json`` refused an event's text (``exc``, its error): valid JSON
    nested deeper than its reader goes (about 200 levels), or not JSON at all."""
    if "recursion limit exceeded" in str(exc):
        return "event is nested too deeply to read (more than about 200 levels)"
    return "event is not valid JSON"
