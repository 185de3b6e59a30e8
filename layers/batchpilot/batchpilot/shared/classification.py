"""Classification of job events: kind, terminal or not, success, and a failure category.

Pure domain code (no I/O). Reasons (AWS Batch User Guide, "Job states" and "EventBridge events for
AWS Batch"; SageMaker API reference, ``FailureReason`` and ``SecondaryStatus``) are matched by
**prefix**, never as whole sentences, and the outcome comes only from the status: a missing exit
code is never success, SageMaker ``Stopped`` is never success.

Out-of-memory texts are the one exception to prefix matching: SageMaker and CUDA put them inside an
``AlgorithmError``/``ClientError`` sentence, so :data:`_OUT_OF_MEMORY_MARKERS` are looked for anywhere
in a reason whose prefix says the job's own code or input failed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from batchpilot.shared.arns import resource_name
from batchpilot.shared.events import (
    BatchAttempt,
    BatchJobDetail,
    BatchJobQueueBlocked,
    BatchJobStateChange,
    BatchServiceJobPreemptionCompleted,
    BatchServiceJobPreemptionStarted,
    BatchServiceJobQueueBlocked,
    BatchServiceJobStateChange,
    JobEvent,
    PreemptionSummary,
    SageMakerTrainingJobStateChange,
    ServiceJobDetail,
    TrainingJobDetail,
)
from batchpilot.shared.resources import UNTYPED, instances_by_type

__all__ = [
    "RECOVERABLE",
    "Category",
    "EventKind",
    "JobFacts",
    "JobKind",
    "NodeRole",
    "category_of_reason",
    "classify",
    "preempting_share_of_reason",
    "queue_name",
    "quota_of_reason",
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
    OUT_OF_MEMORY = "OUT_OF_MEMORY"  # the container or training job ran out of memory
    QUOTA = "QUOTA"  # an account service quota (SageMaker ResourceLimitExceeded, EC2 vCPU limits)
    INTERNAL_ERROR = "INTERNAL_ERROR"
    UNKNOWN = "UNKNOWN"


class NodeRole(StrEnum):
    """Where a Batch job sits in a multi-node parallel job (AWS Batch User Guide, "Multi-node
    parallel jobs"): the parent (``nodeProperties``, one event per status change), the main node or
    another node (``nodeDetails``, ``jobId`` ``UUID#N``). The parent's events speak for the job: a
    node's failure fails the parent, which is the job a person resubmits and the one that pages."""

    PARENT = "parent"
    MAIN_NODE = "main-node"
    NODE = "node"


RECOVERABLE: dict[JobKind, frozenset[Category]] = {
    JobKind.SERVICE_JOB: frozenset(
        {Category.PREEMPTION, Category.SPOT_INTERRUPTION, Category.CAPACITY, Category.INTERNAL_ERROR}
    ),
    JobKind.CONTAINER_JOB: frozenset({Category.SPOT_INTERRUPTION}),
    JobKind.TRAINING_JOB: frozenset({Category.CAPACITY, Category.INTERNAL_ERROR, Category.SPOT_INTERRUPTION}),
}
"""The categories each kind of job is resubmitted for when AWS Batch or SageMaker gave up on it
(row 5 of the recovery decision table, :mod:`batchpilot.recovery.policy`); here, beside the
categories, so the alerts function agrees with recovery without importing it."""


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
        created_at, started_at, stopped_at: UTC datetimes from the event's detail, when present
            (``startedAt`` of a retried job is its latest attempt's start).
        first_started_at: the first attempt's start: the earliest ``attempts[].startedAt`` (or
            ``eksAttempts[]``) and ``startedAt``; the end of the job's queue wait. For SageMaker
            and service jobs, which list no earlier starts, the same as ``started_at``.
        instance_type, instance_count: SageMaker ``ResourceConfig`` (training jobs only).
        created_by_batch: a job AWS Batch created for another job, whose events speak for it: a
            training job created for a service job (name starts ``AWSBatch``) or a node of a
            multi-node parallel job (its parent decides and pages).
        attempts: number of attempts the event lists.
        exit_code: the failed container's exit code (container jobs), from whichever shape the
            event uses (``container``, ``taskProperties[].containers[]``, ``eksAttempts[]``).
        log_stream: that container's CloudWatch Logs stream, when the event names one.
        node_role, node_index: the job's place in a multi-node parallel job, else None.
        array_index: ``arrayProperties.index`` of an array child, else None.
        scheduling_priority: Batch ``schedulingPriority`` (0-9999, higher first within a share).
        quota: the account service quota a QUOTA failure names (``'ml.p4d.24xlarge for training
            job usage'``), else None.
        time_limit_action: the job was ended by its job queue's ``jobStateTimeLimitActions``
            (``Canceled``/``Terminated by JobStateTimeLimit action``): an administrator's limit.
        preempting_share: the quota share whose job preempted this one, when a preemption's
            reason names it (:func:`preempting_share_of_reason`); None otherwise (the usual case:
            AWS's documented reason names no share).
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
    first_started_at: datetime | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    created_by_batch: bool = False
    attempts: int = 0
    exit_code: int | None = None
    log_stream: str | None = None
    node_role: NodeRole | None = None
    node_index: int | None = None
    array_index: int | None = None
    scheduling_priority: int | None = None
    quota: str | None = None
    time_limit_action: bool = False
    preempting_share: str | None = None


BATCH_TERMINAL = frozenset({"SUCCEEDED", "FAILED"})
SAGEMAKER_TERMINAL = frozenset({"Completed", "Failed", "Stopped"})

# Service jobs are "Terminated by ...", container jobs (ECS queues) "Canceled by ...".
_JOB_STATE_TIME_LIMIT = (
    "Terminated by JobStateTimeLimit action due to reason:",
    "Canceled by JobStateTimeLimit action due to reason:",
)
_FROM_SAGEMAKER = "Received status from SageMaker:"

# Prefix → category, checked in order (first match wins). Case-sensitive, as AWS writes them.
# Sources: AWS Batch User Guide, "Job states", "Jobs stuck in a RUNNABLE status" and "Automatic
# remediation with jobStateTimeLimitActions"; Amazon ECS Developer Guide, "Amazon ECS stopped task
# error messages" (CannotPullContainerError, OutOfMemoryError, ResourceInitializationError, ...);
# Kubernetes "Pod Lifecycle" container state reason ``OOMKilled`` (AWS Batch on Amazon EKS reports
# it in ``eksAttempts[].containers[].reason``); SageMaker API Reference, ``DescribeTrainingJob``
# ``FailureReason`` and "Common Errors" (ResourceLimitExceeded, ValidationException, ...);
# Amazon EC2 API Reference, "Error codes" (VcpuLimitExceeded, InstanceLimitExceeded,
# MaxSpotInstanceCountExceeded: account service quotas a Batch compute environment can hit).
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
    ("OutOfMemoryError", Category.OUT_OF_MEMORY),  # ECS: "Container killed due to memory usage"
    ("OOMKilled", Category.OUT_OF_MEMORY),  # EKS container state reason
    ("Job attempt duration exceeded timeout", Category.TIMEOUT),
    ("UNDETERMINED", Category.UNKNOWN),
    # Account service quotas: never capacity that comes back by itself.
    ("ResourceLimitExceeded", Category.QUOTA),
    ("VcpuLimitExceeded", Category.QUOTA),
    ("InstanceLimitExceeded", Category.QUOTA),
    ("MaxSpotInstanceCountExceeded", Category.QUOTA),
    # SageMaker FailureReason prefixes (also behind "Received status from SageMaker: ").
    ("CapacityError", Category.CAPACITY),
    ("EC2InsufficientCapacityError", Category.CAPACITY),
    ("InsufficientInstanceCapacity", Category.CAPACITY),
    ("InternalServerError", Category.INTERNAL_ERROR),
    ("InternalFailure", Category.INTERNAL_ERROR),
    ("AlgorithmError", Category.APPLICATION_ERROR),
    ("ValidationException", Category.MISCONFIGURATION),
    ("ClientError", Category.MISCONFIGURATION),
    ("AccessDenied", Category.MISCONFIGURATION),
    ("MaxRuntimeExceeded", Category.TIMEOUT),
    ("MaxWaitTimeExceeded", Category.SPOT_INTERRUPTION),
)

# SageMaker reports a training container that ran out of memory as an AlgorithmError or ClientError
# whose text says so (SageMaker Developer Guide, "Troubleshoot Amazon SageMaker Training": "Please
# use an instance type with more memory"; PyTorch's "CUDA out of memory"); lower-cased markers.
_OUT_OF_MEMORY_MARKERS = ("out of memory", "outofmemory", "instance type with more memory", "oomkilled")
_OUT_OF_MEMORY_HOSTS = frozenset({Category.APPLICATION_ERROR, Category.MISCONFIGURATION})

# The quota a ResourceLimitExceeded message names: "The account-level service limit '<quota>' is ..."
_QUOTA_NAME = re.compile(r"'([^']{1,200})'")


def _unwrap(reason: str) -> str:
    """The reason inside the JobStateTimeLimit and ``Received status from SageMaker:`` wrappers."""
    text = reason.strip()
    for wrapper in (*_JOB_STATE_TIME_LIMIT, _FROM_SAGEMAKER):
        if text.startswith(wrapper):
            return _unwrap(text[len(wrapper) :])
    return text


def category_of_reason(reason: str | None) -> Category | None:
    """Map a Batch or SageMaker reason text to a category by its prefix; None when no rule knows it.

    Unwraps ``Terminated by JobStateTimeLimit action due to reason: <R>`` (``Canceled by ...`` for
    container jobs) and ``Received status from SageMaker: <R>`` and classifies ``<R>``. An
    ``AlgorithmError``/``ClientError`` that says the job ran out of memory is OUT_OF_MEMORY.
    """
    if not reason:
        return None
    text = _unwrap(reason)
    for prefix, category in _REASON_PREFIXES:
        if text.startswith(prefix):
            if category in _OUT_OF_MEMORY_HOSTS:
                lowered = text.lower()
                if any(marker in lowered for marker in _OUT_OF_MEMORY_MARKERS):
                    return Category.OUT_OF_MEMORY
            return category
    return None


def quota_of_reason(reason: str | None) -> str | None:
    """The service quota a QUOTA reason names, e.g. ``ml.p4d.24xlarge for training job usage`` from
    SageMaker's ``ResourceLimitExceeded: The account-level service limit 'ml.p4d.24xlarge for
    training job usage' is 0 Instances, ...``; else the error code itself (``VcpuLimitExceeded``).
    None when the reason is not a quota error."""
    if category_of_reason(reason) is not Category.QUOTA or not reason:
        return None
    text = _unwrap(reason)
    found = _QUOTA_NAME.search(text)
    if found:
        return found.group(1)
    return text.split(":", 1)[0].split(" ", 1)[0]


# The AWS Batch User Guide ("Service job preemption events") documents a Started event whose
# statusReason names no share ("PREEMPTION_IN_PROGRESS: Cross-share preemption triggered to reclaim
# borrowed capacity"); a reason that names the preempting job's quota share ("... from quota share
# NAME", as in events/service-job-preemption/) is read, anything else gives None. Matched loosely
# ("share" or "quota share") and never guessed: a dimension value must be a real share's name.
_PREEMPTING_SHARE = re.compile(r"\bfrom (?:quota )?share ([A-Za-z0-9_.:-]{1,255})")


def preempting_share_of_reason(*reasons: str | None) -> str | None:
    """The quota share a preemption reason says the preempting job came from, from the first of
    ``reasons`` (Batch ``statusReason`` texts: the event's, then its attempts') that names one.

    Returns:
        The share's name (at most 255 characters of letters, digits and ``_.:-``), or None when
        no reason names a share (then callers omit the ``PreemptingShare`` dimension).
    """
    for reason in reasons:
        found = _PREEMPTING_SHARE.search(reason or "")
        if found:
            return found.group(1)
    return None


def _time_limit_action(reason: str | None) -> bool:
    """True for ``Canceled``/``Terminated by JobStateTimeLimit action due to reason: ...``."""
    return bool(reason and reason.strip().startswith(_JOB_STATE_TIME_LIMIT))


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


@dataclass(frozen=True, slots=True)
class _Container:
    """One container's outcome, whichever shape of the event it came from."""

    exit_code: int | None
    reason: str | None
    log_stream: str | None


def _attempt_containers(attempt: BatchAttempt) -> list[_Container]:
    out = []
    if attempt.container is not None:
        c = attempt.container
        out.append(_Container(c.exitCode, c.reason, c.logStreamName))
    for task in attempt.taskProperties:
        out += [_Container(c.exitCode, c.reason, c.logStreamName) for c in task.containers]
    return out


def _containers(detail: BatchJobDetail) -> list[_Container]:
    """The containers of the job's latest attempt in every documented shape (AWS Batch API
    Reference, ``JobDetail``: ``attempts[].container``, ``attempts[].taskProperties[].containers[]``,
    ``eksAttempts[].containers[]``), then the job-level ``container`` and
    ``ecsProperties.taskProperties[].containers[]``."""
    out: list[_Container] = []
    if detail.attempts:
        out += _attempt_containers(detail.attempts[-1])
    if detail.eksAttempts:
        eks = detail.eksAttempts[-1]
        out += [_Container(c.exitCode, c.reason, None) for c in (*eks.containers, *eks.initContainers)]
    if detail.container is not None:
        c = detail.container
        out.append(_Container(c.exitCode, c.reason, c.logStreamName))
    if detail.ecsProperties is not None:
        for task in detail.ecsProperties.taskProperties:
            out += [_Container(c.exitCode, c.reason, c.logStreamName) for c in task.containers]
    return out


def _failed_container(containers: list[_Container]) -> _Container | None:
    """The container that explains the failure: the first with a non-zero exit code, else the first
    with a reason, else the first."""
    for test in (
        lambda c: c.exit_code is not None and c.exit_code != 0,
        lambda c: bool(c.reason),
        lambda c: True,
    ):
        for container in containers:
            if test(container):
                return container
    return None


def _node_role(detail: BatchJobDetail) -> tuple[NodeRole | None, int | None]:
    if detail.nodeDetails is not None:
        index = detail.nodeDetails.nodeIndex
        if index is None and "#" in detail.jobId:
            tail = detail.jobId.rsplit("#", 1)[1]
            index = int(tail) if tail.isdigit() else None
        return (NodeRole.MAIN_NODE if detail.nodeDetails.isMainNode else NodeRole.NODE), index
    if "#" in detail.jobId:  # a node event without nodeDetails: jobId "UUID#N"
        tail = detail.jobId.rsplit("#", 1)[1]
        return NodeRole.NODE, int(tail) if tail.isdigit() else None
    if detail.nodeProperties is not None:
        return NodeRole.PARENT, None
    return None, None


def _job_arn(detail: BatchJobDetail, resources: list[str]) -> str:
    """``jobArn``; for events older than that field, the envelope's resource that names the job
    (``resources[0]`` in the AWS Batch User Guide's event samples); the bare ``jobId`` at worst."""
    if detail.jobArn:
        return detail.jobArn
    for resource in resources:
        if resource.startswith("arn:") and resource_name(resource) == detail.jobId:
            return resource
    for resource in resources:
        if resource.startswith("arn:") and ":job/" in resource:
            return resource
    return detail.jobId


def _container_job(detail: BatchJobDetail, event_kind: EventKind, resources: list[str]) -> JobFacts:
    last = detail.attempts[-1] if detail.attempts else None
    last_eks = detail.eksAttempts[-1] if detail.eksAttempts else None
    container = _failed_container(_containers(detail))
    # Most specific first: the container's own reason, then the attempt's, then the job's.
    reasons = [
        container.reason if container else None,
        last.statusReason if last else None,
        last_eks.statusReason if last_eks else None,
        detail.container.reason if detail.container else None,
        detail.statusReason,
    ]
    reason = _first(*reasons)
    status = detail.status
    terminal = status in BATCH_TERMINAL
    exit_code = container.exit_code if container else None
    category: Category | None = None
    if event_kind is EventKind.QUEUE_BLOCKED:
        category = category_of_reason(detail.statusReason) or Category.UNKNOWN
    elif status == "FAILED":
        category = _first_category(reasons)
        if category is None and (detail.isTerminated or detail.isCancelled):
            category = Category.USER_STOPPED
        if category is None:
            has_nonzero_exit = exit_code is not None and exit_code != 0
            category = Category.APPLICATION_ERROR if has_nonzero_exit else Category.UNKNOWN
    elif status == "RUNNABLE" and (last is not None or last_eks is not None):
        # Batch is retrying after a lost attempt: note the disruption (spot reclaim), no failure.
        category = _first_category(reasons)
    attempt_starts = [a.startedAt for a in detail.attempts if a.startedAt]
    attempt_starts += [a.startedAt for a in detail.eksAttempts if a.startedAt]
    started = detail.startedAt or min(attempt_starts, default=None)
    # The queue wait ends at the first start: a retried job's startedAt is its latest attempt's.
    first_started = min([*attempt_starts, *([detail.startedAt] if detail.startedAt else [])], default=None)
    attempt_stops = [a.stoppedAt for a in detail.attempts if a.stoppedAt]
    attempt_stops += [a.stoppedAt for a in detail.eksAttempts if a.stoppedAt]
    stopped = detail.stoppedAt or (max(attempt_stops, default=None) if terminal else None)
    role, node_index = _node_role(detail)
    time_limit = any(_time_limit_action(r) for r in (detail.statusReason, reasons[1]))
    return JobFacts(
        kind=JobKind.CONTAINER_JOB,
        event_kind=event_kind,
        arn=_job_arn(detail, resources),
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
        stopped_at=stopped,
        first_started_at=first_started,
        created_by_batch=role in (NodeRole.MAIN_NODE, NodeRole.NODE),
        attempts=max(len(detail.attempts), len(detail.eksAttempts)),
        exit_code=exit_code,
        log_stream=container.log_stream if container else None,
        node_role=role,
        node_index=node_index,
        array_index=detail.arrayProperties.index if detail.arrayProperties else None,
        scheduling_priority=detail.schedulingPriority,
        quota=_first_quota(reasons) if category is Category.QUOTA else None,
        time_limit_action=time_limit,
    )


def _first_quota(reasons: list[str | None]) -> str | None:
    for reason in reasons:
        quota = quota_of_reason(reason)
        if quota is not None:
            return quota
    return None


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
    time_limit = any(_time_limit_action(r) for r in reasons)
    category: Category | None = None
    if event_kind is EventKind.QUEUE_BLOCKED:
        category = category_of_reason(detail.statusReason) or Category.UNKNOWN
    elif status == "FAILED":
        category = _first_category(reasons)
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
        first_started_at=detail.startedAt,
        stopped_at=detail.stoppedAt
        or (
            max((a.stoppedAt for a in detail.attempts if a.stoppedAt), default=None)
            if status in BATCH_TERMINAL
            else None
        ),
        attempts=len(detail.attempts),
        scheduling_priority=detail.schedulingPriority,
        quota=_first_quota(reasons) if category is Category.QUOTA else None,
        time_limit_action=time_limit,
        preempting_share=(
            preempting_share_of_reason(*reasons, *_recent_preemption_reasons(detail.preemptionSummary))
            if category is Category.PREEMPTION
            else None
        ),
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
        first_started_at=detail.TrainingStartTime,
        stopped_at=detail.TrainingEndTime,
        instance_type=_single_type(by_type),
        instance_count=sum(by_type.values()) if by_type else None,
        created_by_batch=detail.TrainingJobName.startswith("AWSBatch"),
        quota=quota_of_reason(detail.FailureReason) if category is Category.QUOTA else None,
    )


def _recent_preemption_reasons(summary: PreemptionSummary | None) -> list[str | None]:
    """``preemptionSummary.recentPreemptedAttempts[].statusReason``, latest attempt first."""
    return [a.statusReason for a in reversed(summary.recentPreemptedAttempts)] if summary else []


def _preemption(
    arn: str, status: str | None, reason: str | None, kind: EventKind, summary: PreemptionSummary | None
) -> JobFacts:
    return JobFacts(
        preempting_share=preempting_share_of_reason(reason, *_recent_preemption_reasons(summary)),
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
            return _container_job(event.detail, EventKind.STATE_CHANGE, event.resources)
        case BatchJobQueueBlocked():
            return _container_job(event.detail, EventKind.QUEUE_BLOCKED, event.resources)
        case BatchServiceJobStateChange():
            return _service_job(event.detail, EventKind.STATE_CHANGE)
        case BatchServiceJobQueueBlocked():
            return _service_job(event.detail, EventKind.QUEUE_BLOCKED)
        case BatchServiceJobPreemptionStarted():
            d = event.detail
            return _preemption(
                d.preemptedJobArn, d.status, d.statusReason, EventKind.PREEMPTION_STARTED, d.preemptionSummary
            )
        case BatchServiceJobPreemptionCompleted():
            d = event.detail
            return _preemption(
                d.preemptedJobArn,
                d.status,
                d.statusReason,
                EventKind.PREEMPTION_COMPLETED,
                d.preemptionSummary,
            )
        case SageMakerTrainingJobStateChange():
            return _training_job(event.detail)
    raise TypeError(f"not a job event: {type(event).__name__}")  # pragma: no cover - exhaustive
