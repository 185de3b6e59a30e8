"""Classification of job events: kind, terminal or not, success, and a failure category.

Pure domain code (no I/O). Reasons (AWS Batch User Guide, "Job states" and "EventBridge events for
AWS Batch"; SageMaker API reference, ``FailureReason`` and ``SecondaryStatus``) are matched by
**prefix**, never as whole sentences, and the outcome comes only from the status: a missing exit
code is never success, SageMaker ``Stopped`` is never success. """

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from batchpilot.shared.arns import resource_name
from batchpilot.shared.events import (
    BatchJobDetail,
    BatchJobQueueBlocked,
    BatchJobStateChange,
    BatchServiceJobPreemptionCompleted,
    BatchServiceJobPreemptionStarted,
    BatchServiceJobQueueBlocked,
    BatchServiceJobStateChange,
    JobEvent,
    SageMakerTrainingJobStateChange,
    ServiceJobDetail,
    TrainingJobDetail,
)
from batchpilot.shared.resources import UNTYPED, instances_by_type

__all__ = [
    "Category",
    "EventKind",
    "JobFacts",
    "JobKind",
    "category_of_reason",
    "classify",
    "queue_name",
]


class JobKind(StrEnum):
    """What ran: a Batch container job, a Batch service job, or a SageMaker training job."""

    CONTAINER_JOB = "container-job"
    SERVICE_JOB = "service-job"
    TRAINING_JOB = "training-job"


class EventKind(StrEnum):
    """What the event says about the job."""

    STATE_CHANGE = "state-change"
    QUEUE_BLOCKED = "queue-blocked"
    PREEMPTION_STARTED = "preemption-started"
    PREEMPTION_COMPLETED = "preemption-completed"


class Category(StrEnum):
    """The closed set of causes for a failed, stopped, blocked or disrupted job."""

    SPOT_INTERRUPTION = "SPOT_INTERRUPTION"
    PREEMPTION = "PREEMPTION"
    CAPACITY = "CAPACITY"
    MISCONFIGURATION = "MISCONFIGURATION"
    TIMEOUT = "TIMEOUT"
    USER_STOPPED = "USER_STOPPED"
    APPLICATION_ERROR = "APPLICATION_ERROR"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What batchpilot knows about a job from one event.

    Attributes:
        kind: container job, service job or training job.
        event_kind: state change, queue blocked, preemption started or completed.
        arn: ``jobArn`` (Batch; ``preemptedJobArn`` for preemption events) or ``TrainingJobArn``.
        name: ``jobName`` / ``TrainingJobName``; None for preemption events.
        queue_arn: the job queue ARN (Batch jobs only).
        queue: the job queue *name* (last part of the ARN), or None.
        status: Batch status (SUCCEEDED, FAILED, ...) or SageMaker ``TrainingJobStatus``.
        secondary_status: SageMaker ``SecondaryStatus``, else None.
        terminal: the job will not change status again.
        succeeded: True only for SUCCEEDED / Completed.
        category: set for failures, stops, blocked jobs and disruptions (spot interruption,
            preemption); None otherwise.
        reason: the most specific reason text found (latest attempt first); free text, never a
            metric dimension.
        share_identifier, quota_share: fair-share identifier / quota share name when present.
        created_at, started_at, stopped_at: UTC datetimes from the event's detail, when present.
        instance_type, instance_count: SageMaker ``ResourceConfig`` (training jobs only).
        created_by_batch: a training job that AWS Batch created for a service job (name starts
            ``AWSBatch``): its service job owns decisions about it.
        attempts: number of attempts the event lists.
    """

    kind: JobKind
    event_kind: EventKind
    arn: str
    name: str | None
    queue_arn: str | None
    queue: str | None
    status: str
    secondary_status: str | None
    terminal: bool
    succeeded: bool
    category: Category | None
    reason: str | None
    share_identifier: str | None = None
    quota_share: str | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    stopped_at: datetime | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    created_by_batch: bool = False
    attempts: int = 0


BATCH_TERMINAL = frozenset({"SUCCEEDED", "FAILED"})
SAGEMAKER_TERMINAL = frozenset({"Completed", "Failed", "Stopped"})

# Service jobs are "Terminated by ...", container jobs (ECS queues) "Canceled by ...".
_JOB_STATE_TIME_LIMIT = (
    "Terminated by JobStateTimeLimit action due to reason:",
    "Canceled by JobStateTimeLimit action due to reason:",
)
_FROM_SAGEMAKER = "Received status from SageMaker:"

# Prefix → category, checked in order (first match wins). Case-sensitive, as AWS writes them.
_REASON_PREFIXES: tuple[tuple[str, Category], ...] = (
    ("Host EC2 (instance", Category.SPOT_INTERRUPTION),
    ("PREEMPTION", Category.PREEMPTION),
    ("CAPACITY:", Category.CAPACITY),
    ("MISCONFIGURATION:", Category.MISCONFIGURATION),
    ("CannotPullContainerError", Category.MISCONFIGURATION),
    ("CannotStartContainerError", Category.MISCONFIGURATION),
    ("CannotInspectContainerError", Category.MISCONFIGURATION),
    ("CannotCreateVolumeError", Category.MISCONFIGURATION),
    ("ResourceInitializationError", Category.MISCONFIGURATION),
    ("Job attempt duration exceeded timeout", Category.TIMEOUT),
    ("UNDETERMINED", Category.UNKNOWN),
    # SageMaker FailureReason prefixes (also behind "Received status from SageMaker: ").
    ("CapacityError", Category.CAPACITY),
    ("EC2InsufficientCapacityError", Category.CAPACITY),
    ("InsufficientInstanceCapacity", Category.CAPACITY),
    ("ResourceLimitExceeded", Category.CAPACITY),
    ("InternalServerError", Category.INTERNAL_ERROR),
    ("InternalFailure", Category.INTERNAL_ERROR),
    ("AlgorithmError", Category.APPLICATION_ERROR),
    ("OutOfMemoryError", Category.APPLICATION_ERROR),
    ("ValidationException", Category.MISCONFIGURATION),
    ("ClientError", Category.MISCONFIGURATION),
    ("AccessDenied", Category.MISCONFIGURATION),
    ("MaxRuntimeExceeded", Category.TIMEOUT),
    ("MaxWaitTimeExceeded", Category.SPOT_INTERRUPTION),
)


def category_of_reason(reason: str | None) -> Category | None:
    """Map a Batch or SageMaker reason text to a category by its prefix; None when no rule knows it.

    Unwraps ``Terminated by JobStateTimeLimit action due to reason: <R>`` (``Canceled by ...`` for
    container jobs) and
    ``Received status from SageMaker: <R>`` and classifies ``<R>``.
    """
    if not reason:
        return None
    text = reason.strip()
    for wrapper in (*_JOB_STATE_TIME_LIMIT, _FROM_SAGEMAKER):
        if text.startswith(wrapper):
            return category_of_reason(text[len(wrapper) :])
    for prefix, category in _REASON_PREFIXES:
        if text.startswith(prefix):
            return category
    return None


def queue_name(queue_arn: str | None) -> str | None:
    """``arn:aws:batch:REGION:ACCT:job-queue/NAME`` → ``NAME`` (a bare name is returned as is)."""
    return resource_name(queue_arn)


def _single_type(by_type: dict[str, int] | None) -> str | None:
    """The instance type when the job uses exactly one (``NUM_INSTANCES`` means none was named)."""
    if not by_type or len(by_type) != 1:
        return None
    (kind,) = by_type
    return None if kind == UNTYPED else kind


def _first(*values: str | None) -> str | None:
    for value in values:
        if value and value.strip():
            return value
    return None


def _container_job(detail: BatchJobDetail, event_kind: EventKind) -> JobFacts:
    last = detail.attempts[-1] if detail.attempts else None
    container = last.container if last else None
    # Most specific first: the container's own reason, then the attempt's, then the job's.
    reasons = [
        container.reason if container else None,
        last.statusReason if last else None,
        detail.container.reason if detail.container else None,
        detail.statusReason,
    ]
    reason = _first(*reasons)
    status = detail.status
    terminal = status in BATCH_TERMINAL
    category: Category | None = None
    if event_kind is EventKind.QUEUE_BLOCKED:
        category = category_of_reason(detail.statusReason) or Category.UNKNOWN
    elif status == "FAILED":
        category = _first_category(reasons)
        if category is None and (detail.isTerminated or detail.isCancelled):
            category = Category.USER_STOPPED
        if category is None:
            exit_code = container.exitCode if container else None
            has_nonzero_exit = exit_code is not None and exit_code != 0
            category = Category.APPLICATION_ERROR if has_nonzero_exit else Category.UNKNOWN
    elif status == "RUNNABLE" and last is not None:
        # Batch is retrying after a lost attempt: note the disruption (spot reclaim), no failure.
        category = _first_category(reasons)
    started = detail.startedAt or min((a.startedAt for a in detail.attempts if a.startedAt), default=None)
    return JobFacts(
        kind=JobKind.CONTAINER_JOB,
        event_kind=event_kind,
        arn=detail.jobArn or detail.jobId,
        name=detail.jobName,
        queue_arn=detail.jobQueue,
        queue=queue_name(detail.jobQueue),
        status=status,
        secondary_status=None,
        terminal=terminal,
        succeeded=status == "SUCCEEDED",
        category=category,
        reason=reason,
        share_identifier=detail.shareIdentifier or None,
        created_at=detail.createdAt,
        started_at=started,
        stopped_at=detail.stoppedAt,
        attempts=len(detail.attempts),
    )


def _first_category(reasons: list[str | None]) -> Category | None:
    for reason in reasons:
        category = category_of_reason(reason)
        if category is not None:
            return category
    return None


def _service_job(detail: ServiceJobDetail, event_kind: EventKind) -> JobFacts:
    # latestAttempt often carries only serviceResourceId: read both it and the last attempt.
    reasons = [
        detail.statusReason,
        detail.latestAttempt.statusReason if detail.latestAttempt else None,
        detail.attempts[-1].statusReason if detail.attempts else None,
    ]
    reason = _first(*reasons)
    status = detail.status
    category: Category | None = None
    if event_kind is EventKind.QUEUE_BLOCKED:
        category = category_of_reason(detail.statusReason) or Category.UNKNOWN
    elif status == "FAILED":
        category = _first_category(reasons)
        time_limit = bool(reason and reason.startswith(_JOB_STATE_TIME_LIMIT))
        if category is None and detail.isTerminated and not time_limit:
            category = Category.USER_STOPPED
        if category is None and detail.preemptionSummary and detail.preemptionSummary.preemptedAttemptCount:
            category = Category.PREEMPTION
        if category is None:
            category = Category.UNKNOWN
    return JobFacts(
        kind=JobKind.SERVICE_JOB,
        event_kind=event_kind,
        arn=detail.jobArn,
        name=detail.jobName,
        queue_arn=detail.jobQueue,
        queue=queue_name(detail.jobQueue),
        status=status,
        secondary_status=None,
        terminal=status in BATCH_TERMINAL,
        succeeded=status == "SUCCEEDED",
        category=category,
        reason=reason,
        share_identifier=detail.shareIdentifier or None,
        quota_share=detail.quotaShareName or None,
        created_at=detail.createdAt,
        started_at=detail.startedAt,
        stopped_at=detail.stoppedAt,
        attempts=len(detail.attempts),
    )


def _training_job(detail: TrainingJobDetail) -> JobFacts:
    status = detail.TrainingJobStatus
    secondary = detail.SecondaryStatus
    category: Category | None = None
    if status == "Failed":
        category = category_of_reason(detail.FailureReason) or category_of_reason(secondary)
        category = category or Category.UNKNOWN
    elif status in {"Stopped", "Stopping"}:
        # MaxWaitTimeExceeded: spot starvation; MaxRuntimeExceeded: timeout; else a person stopped it.
        category = category_of_reason(secondary) or Category.USER_STOPPED
    elif secondary == "Interrupted":
        category = Category.SPOT_INTERRUPTION
    resources = detail.ResourceConfig
    by_type = instances_by_type(resources.model_dump(exclude_none=True)) if resources else None
    return JobFacts(
        kind=JobKind.TRAINING_JOB,
        event_kind=EventKind.STATE_CHANGE,
        arn=detail.TrainingJobArn or detail.TrainingJobName,
        name=detail.TrainingJobName,
        queue_arn=None,
        queue=None,
        status=status,
        secondary_status=secondary,
        terminal=status in SAGEMAKER_TERMINAL,
        succeeded=status == "Completed",
        category=category,
        reason=detail.FailureReason,
        created_at=detail.CreationTime,
        started_at=detail.TrainingStartTime,
        stopped_at=detail.TrainingEndTime,
        instance_type=_single_type(by_type),
        instance_count=sum(by_type.values()) if by_type else None,
        created_by_batch=detail.TrainingJobName.startswith("AWSBatch"),
    )


def _preemption(arn: str, status: str | None, reason: str | None, kind: EventKind) -> JobFacts:
    return JobFacts(
        kind=JobKind.SERVICE_JOB,
        event_kind=kind,
        arn=arn,
        name=None,
        queue_arn=None,
        queue=None,
        status=status or ("RUNNING" if kind is EventKind.PREEMPTION_STARTED else "RUNNABLE"),
        secondary_status=None,
        terminal=False,
        succeeded=False,
        category=Category.PREEMPTION,
        reason=reason,
    )


def classify(event: JobEvent) -> JobFacts:
    """Classify one parsed job event (see :mod:`batchpilot.shared.events`) into :class:`JobFacts`.

    Pure and total: every model of :data:`batchpilot.shared.events.DETAIL_TYPES` yields facts.
    """
    match event:
        case BatchJobStateChange():
            return _container_job(event.detail, EventKind.STATE_CHANGE)
        case BatchJobQueueBlocked():
            return _container_job(event.detail, EventKind.QUEUE_BLOCKED)
        case BatchServiceJobStateChange():
            return _service_job(event.detail, EventKind.STATE_CHANGE)
        case BatchServiceJobQueueBlocked():
            return _service_job(event.detail, EventKind.QUEUE_BLOCKED)
        case BatchServiceJobPreemptionStarted():
            d = event.detail
            return _preemption(d.preemptedJobArn, d.status, d.statusReason, EventKind.PREEMPTION_STARTED)
        case BatchServiceJobPreemptionCompleted():
            d = event.detail
            return _preemption(d.preemptedJobArn, d.status, d.statusReason, EventKind.PREEMPTION_COMPLETED)
        case SageMakerTrainingJobStateChange():
            return _training_job(event.detail)
    raise TypeError(f"not a job event: {type(event).__name__}")  # pragma: no cover - exhaustive
