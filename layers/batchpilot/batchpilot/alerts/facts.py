"""Alert facts: what one event says that a person may need to hear, with its de-duplication key.

Pure: builds :class:`AlertFact` from a parsed job event (:mod:`batchpilot.shared.events`, classified by
:func:`batchpilot.shared.classification.classify`; the fact keeps that :class:`JobFacts` as
:attr:`AlertFact.job`), from one of batchpilot's own events (:mod:`batchpilot.shared.own_events`;
kept as :attr:`AlertFact.own`, an :class:`OwnFacts`) or from a state change of one of the stack's
CloudWatch alarms (:class:`~batchpilot.shared.events.CloudWatchAlarmStateChange`; kept as
:attr:`AlertFact.alarm`, an :class:`AlarmFacts`). No I/O.

Exactly once per fact: a fact is identified by ``(subject, fact_id)``: the job ARN (or service
environment, or alarm ARN) and, for job events, the status and attempt (``FAILED#3``); for own
events their natural key (lineage and attempt, or service environment and decision time); for an
alarm its new state and the time it entered it (``ALARM#1795503900123``, epoch ms). Never the
envelope ``id``: EventBridge redelivers and SageMaker repeats events under new ids.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from batchpilot.alerts.alarms import AlarmRouting, alarm_severity, without_marker
from batchpilot.alerts.policy import Severity
from batchpilot.shared.arns import resource_name
from batchpilot.shared.classification import RECOVERABLE, Category, EventKind, JobFacts, JobKind, classify
from batchpilot.shared.clock import epoch_ms
from batchpilot.shared.events import (
    AlarmStateValue,
    BatchJobQueueBlocked,
    BatchJobStateChange,
    BatchServiceJobPreemptionCompleted,
    BatchServiceJobQueueBlocked,
    BatchServiceJobStateChange,
    CloudWatchAlarmStateChange,
    JobEvent,
    SageMakerTrainingJobStateChange,
)
from batchpilot.shared.own_events import (
    CapacityAdjusted,
    CapacityLimited,
    CapacityLimitReason,
    GpuIdleReason,
    JobGpuIdle,
    JobResubmitted,
    JobStarving,
    OwnEvent,
    RecoveryFailed,
    RecoverySkipped,
    SkipReason,
    StarvationReason,
)

__all__ = [
    "BATCH_LOG_GROUP",
    "RESTARTS_FROM_STEP_ZERO",
    "TRAINING_LOG_GROUP",
    "AlarmFacts",
    "AlertFact",
    "FactKind",
    "JobContext",
    "OwnFacts",
    "Owner",
    "ReasonCode",
    "fact_from_alarm_event",
    "fact_from_event",
    "fact_from_job_event",
    "fact_from_own_event",
    "recovery_will_handle",
    "with_context",
]

BATCH_LOG_GROUP = "/aws/batch/job"
"""Default CloudWatch Logs group of Batch container jobs (``awslogs`` driver without a group)."""
TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"
"""CloudWatch Logs group of SageMaker training jobs; streams are ``<training job name>/...``."""
E = TypeVar("E", bound=StrEnum)

RESTARTS_FROM_STEP_ZERO = "RESTARTS_FROM_STEP_ZERO"
"""The reason code a routing policy matches for a ``Job Resubmitted`` without a checkpoint."""


class FactKind(StrEnum):
    """What a fact is about: the four kinds of AWS job events (the values of
    :class:`batchpilot.shared.classification.EventKind`), the six own events and a CloudWatch
    alarm's state change."""

    STATE_CHANGE = "state-change"
    QUEUE_BLOCKED = "queue-blocked"
    PREEMPTION_STARTED = "preemption-started"
    PREEMPTION_COMPLETED = "preemption-completed"
    JOB_RESUBMITTED = "job-resubmitted"
    RECOVERY_SKIPPED = "recovery-skipped"
    RECOVERY_FAILED = "recovery-failed"
    CAPACITY_ADJUSTED = "capacity-adjusted"
    CAPACITY_LIMITED = "capacity-limited"
    JOB_STARVING = "job-starving"
    JOB_GPU_IDLE = "job-gpu-idle"
    ALARM_STATE_CHANGE = "alarm-state-change"

    @classmethod
    def of(cls, kind: EventKind) -> FactKind:
        """The fact kind of a job event kind."""
        return cls(kind.value)


ReasonCode = SkipReason | CapacityLimitReason | StarvationReason | GpuIdleReason | str
"""An own event's code: the ``skip_reason`` of Recovery Skipped, the ``limit_reason`` of Capacity
Limited, the ``reason`` of Job Starving or Job GPU Idle, or the AWS ``error_code`` of Recovery
Failed (an AWS error code, e.g. ``ResourceLimitExceeded``: open-ended, so a string)."""


@dataclass(frozen=True, slots=True)
class OwnFacts:
    """What one of batchpilot's own events says, typed (the event models carry plain strings).

    Attributes:
        job_kind: the job's kind, or None (capacity events, or a kind this version does not know).
        job_name, job_queue, share_identifier, quota_share: the job's, when the event names them.
        category: the failure category, or None (capacity events; an unknown category).
        reason: the sentence for people (``message``, ``reason``, ``<error_code>: <message>``).
        reason_code: see :data:`ReasonCode`.
        attempt: the resubmission number (Job Resubmitted, Recovery Failed).
        critical: the producer flagged the fact critical (``Recovery Skipped`` with
            ``critical: true``, e.g. a budget exhausted).
        will_retry: a ``Recovery Failed`` the recovery function retries by itself.
        restarts_from_step_zero: a ``Job Resubmitted`` without a checkpoint.
        dry_run: a ``Job Resubmitted`` or ``Recovery Skipped`` decided in dry-run (nothing was or
            would have been submitted).
        priority: the job's ``schedulingPriority`` (Job Starving), when known.
    """

    job_kind: JobKind | None = None
    job_name: str | None = None
    job_queue: str | None = None
    share_identifier: str | None = None
    quota_share: str | None = None
    category: Category | None = None
    reason: str | None = None
    reason_code: ReasonCode | None = None
    attempt: int | None = None
    critical: bool = False
    will_retry: bool = False
    restarts_from_step_zero: bool = False
    dry_run: bool = False
    priority: int | None = None


@dataclass(frozen=True, slots=True)
class AlarmFacts:
    """What a ``CloudWatch Alarm State Change`` says, with what the deployment knows of the alarm.

    Attributes:
        name: ``alarmName`` (``batchpilot/<stack>/AlertsErrorsAlarm``).
        short_name: the name without the stack's prefix (``AlertsErrorsAlarm``).
        state: the new state; ``changed_at`` when the alarm entered it (``state.timestamp``).
        previous_state: the state it left (None when the event has no ``previousState``);
            ``previous_changed_at`` when it had entered that one.
        reason: CloudWatch's reason for the new state (``Threshold Crossed: ...``).
        description: the alarm's description without its severity marker (what to do).
        severity: the severity the description names (:func:`batchpilot.alerts.alarms.alarm_severity`);
            ``severity_problem`` says why the default was used instead, else None.
        metrics: the alarm's metrics for people (``AWS/Lambda Errors``, an expression's label).
        notified_directly: the alarm's own action notifies an SNS topic (chat only here).
    """

    name: str
    short_name: str
    state: AlarmStateValue
    changed_at: datetime
    previous_state: AlarmStateValue | None = None
    previous_changed_at: datetime | None = None
    reason: str | None = None
    description: str = ""
    severity: Severity = Severity.CRITICAL
    severity_problem: str | None = None
    metrics: tuple[str, ...] = ()
    notified_directly: bool = False

    @property
    def resolved(self) -> bool:
        """OK after ALARM: the alarm's resolution."""
        return self.state is AlarmStateValue.OK and self.previous_state is AlarmStateValue.ALARM


@dataclass(frozen=True, slots=True)
class Owner:
    """The person a job belongs to, from a tag on the job or training job
    (:func:`batchpilot.alerts.owners.owner_from_tags`).

    Attributes:
        value: the tag's value as shown to people (at most 256 characters, AWS's tag value limit;
            a SageMaker Studio ``sagemaker:user-profile-arn`` tag: the user profile's name).
        email: ``value`` when it is an e-mail address (what Slack ``users.lookupByEmail`` and a
            Teams mention take), else None.
        mention: the routing policy says this fact notifies its owner
            (:func:`batchpilot.alerts.owners.mentions_owner`): chat channels mention them.
    """

    value: str
    email: str | None = None
    mention: bool = False


@dataclass(frozen=True, slots=True)
class AlertFact:
    """One notifiable fact. Times are timezone-aware UTC datetimes; durations are derived later.

    A job event's fact keeps the event's classification (:attr:`job`); an own event's fact keeps
    what that event says (:attr:`own`); an alarm's fact its :class:`AlarmFacts` (:attr:`alarm`).
    The properties below read whichever the fact has.

    Attributes:
        subject: what the fact is about and the key of its state: the job ARN (Batch ``jobArn``,
            ``TrainingJobArn``), ``service-environment/<name>`` for capacity events, or the alarm's
            ARN.
        fact_id: unique per fact within ``subject`` (``FAILED#3``, ``resubmitted#<lineage>#2``).
        detail_type: the event's ``detail-type``.
        event_kind: see :class:`FactKind`.
        event_time: the envelope ``time`` (used for display and as the own events' decision time).
        region, account: from the envelope (console links).
        job: the classification of a job event (None for own events); for ``Preemption
            Completed`` its ``attempts`` is the preempted attempt count.
        own: what an own event says (None for job events).
        alarm: what an alarm's state change says (None for other facts).
        job_id: Batch ``jobId`` (the last part of a service job's ARN).
        training_job_arn, training_job_name: the SageMaker training job (standalone, or the
            latest attempt of a service job).
        log_group, log_stream: CloudWatch Logs of the job when the event names them (a stream
            *prefix* for training jobs).
        progress: ordering key of a state-change event (terminal first, then attempts, then the
            latest detail timestamp in epoch ms), compared as a string; None for events that are
            only checked against a terminal state (queue blocked, preemption, own events).
        thread_subject: the subject whose chat thread this message belongs in.
        related_subjects: other subjects that continue this thread (the new job of a resubmission).
        starts_thread: the message opens a new thread for ``thread_subject`` even when one was
            recorded (an alarm entering ALARM: each time it fires is a thread of its own, which
            its resolution then replies in).
        extra: further labelled values for the message (budget, checkpoint, capacity numbers).
        owner: the job's owner, when the deployment names an owner tag and the job carries it
            (set by the alerts service: :mod:`batchpilot.alerts.owners`).
    """

    subject: str
    fact_id: str
    detail_type: str
    event_kind: FactKind
    event_time: datetime
    region: str | None = None
    account: str | None = None
    job: JobFacts | None = None
    own: OwnFacts | None = None
    alarm: AlarmFacts | None = None
    job_id: str | None = None
    training_job_arn: str | None = None
    training_job_name: str | None = None
    log_group: str | None = None
    log_stream: str | None = None
    progress: str | None = None
    thread_subject: str = ""
    related_subjects: tuple[str, ...] = ()
    starts_thread: bool = False
    extra: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    owner: Owner | None = None

    # ------------------------------------------------------------------ views of job / own
    @property
    def key(self) -> tuple[str, str]:
        """``(subject, fact_id)``: the identity used for exactly-once delivery."""
        return (self.subject, self.fact_id)

    @property
    def is_job_event(self) -> bool:
        """True for an AWS job event (state change, queue blocked, preemption)."""
        return self.job is not None

    @property
    def is_alarm(self) -> bool:
        """True for a CloudWatch alarm's state change."""
        return self.alarm is not None

    @property
    def is_resolution(self) -> bool:
        """True for an own fact saying a reported condition ended (``Job GPU Idle`` ACTIVE)."""
        return self.event_kind is FactKind.JOB_GPU_IDLE and self.reason_code is GpuIdleReason.ACTIVE

    @property
    def notified_directly(self) -> bool:
        """An alarm whose own action notifies an SNS topic: chat only, never the on-call topic."""
        return bool(self.alarm and self.alarm.notified_directly)

    @property
    def job_kind(self) -> JobKind | None:
        """Container job, service job, training job; None for capacity events."""
        return self.job.kind if self.job else (self.own.job_kind if self.own else None)

    @property
    def job_name(self) -> str | None:
        """Batch ``jobName`` / ``TrainingJobName`` (None for preemption events and capacity)."""
        return self.job.name if self.job else (self.own.job_name if self.own else None)

    @property
    def job_queue(self) -> str | None:
        """The job queue *name*."""
        return self.job.queue if self.job else (self.own.job_queue if self.own else None)

    @property
    def share_identifier(self) -> str | None:
        """The fair-share identifier, when known."""
        return self.job.share_identifier if self.job else (self.own.share_identifier if self.own else None)

    @property
    def quota_share(self) -> str | None:
        """The quota share name, when known."""
        return self.job.quota_share if self.job else (self.own.quota_share if self.own else None)

    @property
    def status(self) -> str | None:
        """Batch status or SageMaker ``TrainingJobStatus`` (job events), or an alarm's new state
        (``ALARM``, ``OK``, ``INSUFFICIENT_DATA``)."""
        if self.alarm:
            return self.alarm.state.value
        return self.job.status if self.job else None

    @property
    def secondary_status(self) -> str | None:
        """SageMaker ``SecondaryStatus`` (training jobs only)."""
        return self.job.secondary_status if self.job else None

    @property
    def category(self) -> Category | None:
        """Failure/blocked/disruption category, None when none applies."""
        if self.job:
            return self.job.category
        if self.own:
            return self.own.category
        return None

    @property
    def reason(self) -> str | None:
        """The most specific reason text (free text, may be long; truncated when rendered); for an
        alarm its description (what to do) and then CloudWatch's reason for the state."""
        if self.alarm:
            parts = [self.alarm.description, f"CloudWatch: {self.alarm.reason}" if self.alarm.reason else ""]
            return "\n\n".join(p for p in parts if p) or None
        return self.job.reason if self.job else (self.own.reason if self.own else None)

    @property
    def reason_code(self) -> ReasonCode | None:
        """An own event's code (see :data:`ReasonCode`); None for job events."""
        return self.own.reason_code if self.own else None

    @property
    def attempts(self) -> int | None:
        """Attempts the event lists (Batch) or the resubmission number (own events)."""
        return self.job.attempts if self.job else (self.own.attempt if self.own else None)

    @property
    def terminal(self) -> bool:
        """The job will not change status again."""
        return bool(self.job and self.job.terminal)

    @property
    def succeeded(self) -> bool:
        """The job succeeded (SUCCEEDED / Completed)."""
        return bool(self.job and self.job.succeeded)

    @property
    def created_by_batch(self) -> bool:
        """An ``AWSBatch*`` training job: its service job's events speak for it."""
        return bool(self.job and self.job.created_by_batch)

    @property
    def created_at(self) -> datetime | None:
        """When the job was created (job events)."""
        return self.job.created_at if self.job else None

    @property
    def started_at(self) -> datetime | None:
        """When the job started running (job events; a retried job: its latest attempt)."""
        return self.job.started_at if self.job else None

    @property
    def first_started_at(self) -> datetime | None:
        """When the job's first attempt started (job events): the end of its wait in the queue."""
        return self.job.first_started_at if self.job else None

    @property
    def stopped_at(self) -> datetime | None:
        """When the job stopped (job events)."""
        return self.job.stopped_at if self.job else None

    @property
    def priority(self) -> int | None:
        """Batch ``schedulingPriority`` (0-9999, higher runs first within its share), when known."""
        return self.job.scheduling_priority if self.job else (self.own.priority if self.own else None)

    @property
    def preempting_share(self) -> str | None:
        """The share whose job preempted this one (preemption facts), when the event names it."""
        return self.job.preempting_share if self.job else None

    @property
    def quota(self) -> str | None:
        """The account service quota a QUOTA failure names (job events), else None."""
        return self.job.quota if self.job else None

    @property
    def instance_type(self) -> str | None:
        """SageMaker ``ResourceConfig`` instance type (training jobs)."""
        return self.job.instance_type if self.job else None

    @property
    def instance_count(self) -> int | None:
        """SageMaker ``ResourceConfig`` instances (training jobs)."""
        return self.job.instance_count if self.job else None

    @property
    def producer_critical(self) -> bool:
        """The publishing function flagged the fact critical."""
        return bool(self.own and self.own.critical)

    @property
    def will_retry(self) -> bool:
        """A ``Recovery Failed`` that the recovery function retries by itself."""
        return bool(self.own and self.own.will_retry)

    @property
    def dry_run(self) -> bool:
        """A recovery outcome decided in dry-run: nothing was submitted."""
        return bool(self.own and self.own.dry_run)

    @property
    def restarts_from_step_zero(self) -> bool:
        """A ``Job Resubmitted`` that restarts from step 0 (no checkpoint)."""
        return bool(self.own and self.own.restarts_from_step_zero)

    def match_values(self) -> dict[str, str | None]:
        """The values a routing :class:`~batchpilot.alerts.policy.Match` is checked against
        (enum values as their names in the policy document)."""
        code = self.reason_code
        if code is None and self.restarts_from_step_zero:
            code = RESTARTS_FROM_STEP_ZERO
        kind, category = self.job_kind, self.category
        return {
            "detail_type": self.detail_type,
            "job_kind": kind.value if kind else None,
            "status": self.status,
            "category": category.value if category else None,
            "job_queue": self.job_queue,
            "share_identifier": self.share_identifier,
            "quota_share": self.quota_share,
            "reason_code": str(code) if code is not None else None,
            "alarm_name": self.alarm.name if self.alarm else None,
        }


def _enum(kind: type[E], value: str | None) -> E | None:
    """``value`` as a member of ``kind``, or None when it is none of them (another version's value)."""
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        return None


def recovery_will_handle(
    job_kind: JobKind | str | None, category: Category | str | None, *, created_by_batch: bool = False
) -> bool:
    """True when the recovery function resubmits a *terminal failure* of this kind and category.

    The recovery policy's own table decides (:data:`batchpilot.shared.classification.RECOVERABLE`,
    decision-table row 5, shared so both functions always agree): a FAILED service job lost to
    PREEMPTION, SPOT_INTERRUPTION, CAPACITY or INTERNAL_ERROR; a FAILED container job lost to a
    spot reclaim (FAILED means Batch's retries are spent); a standalone SageMaker training job
    Failed with a capacity or internal error, or Stopped with MaxWaitTimeExceeded
    (SPOT_INTERRUPTION). Training jobs that Batch created are decided by their service job. The
    recovery function's outcome event (``Job Resubmitted``, ``Recovery Skipped``, ``Recovery
    Failed``) then decides what people hear. Values may be given as written in events
    (``"service-job"``, ``"CAPACITY"``); an unknown one is never recovered.
    """
    kind = _enum(JobKind, job_kind)
    cat = _enum(Category, category)
    if created_by_batch or kind is None or cat is None:
        return False
    return cat in RECOVERABLE.get(kind, frozenset())


def _ms(moment: datetime | None) -> int:
    return epoch_ms(moment) if moment is not None else 0


def _progress(terminal: bool, attempts: int, *moments: datetime | None) -> str:
    latest = max((_ms(m) for m in moments), default=0)
    return f"{int(terminal)}|{attempts:04d}|{max(latest, 0):016d}"


def fact_from_job_event(event: JobEvent, facts: JobFacts | None = None) -> AlertFact:
    """The fact an AWS job event states (any of the 7 detail-types of :mod:`batchpilot.shared.events`).

    Args:
        event: the parsed event.
        facts: ``classify(event)`` when the caller already has it.
    """
    facts = facts or classify(event)
    times: list[datetime | None] = [facts.created_at, facts.started_at, facts.stopped_at]
    job_id: str | None = None
    training_arn: str | None = None
    log_group: str | None = None
    log_stream: str | None = None
    modified: datetime | None = None
    match event:
        case BatchJobStateChange() | BatchJobQueueBlocked():
            detail = event.detail
            job_id = detail.jobId
            last = detail.attempts[-1] if detail.attempts else None
            # The failed container's stream, in whichever shape the event has it (classification).
            stream = (
                facts.log_stream
                or (last.container.logStreamName if last and last.container else None)
                or (detail.container.logStreamName if detail.container else None)
            )
            if stream:
                log_group, log_stream = BATCH_LOG_GROUP, stream
            times += [t for a in detail.attempts for t in (a.startedAt, a.stoppedAt)]
        case BatchServiceJobStateChange() | BatchServiceJobQueueBlocked():
            detail_s = event.detail
            job_id = resource_name(detail_s.jobArn)
            for attempt in (detail_s.latestAttempt, *reversed(detail_s.attempts)):
                resource = attempt.serviceResourceId if attempt else None
                if resource is not None and resource.value:
                    training_arn = resource.value
                    break
            times += [t for a in detail_s.attempts for t in (a.startedAt, a.stoppedAt)]
            times.append(detail_s.scheduledAt)
        case BatchServiceJobPreemptionCompleted():
            summary = event.detail.preemptionSummary
            facts = dataclasses.replace(facts, attempts=summary.preemptedAttemptCount if summary else 0)
        case SageMakerTrainingJobStateChange():
            training_arn = facts.arn if facts.arn.startswith("arn:") else None
            modified = event.detail.LastModifiedTime
            times.append(modified)
        case _:
            pass
    training_name = resource_name(training_arn) if training_arn else None
    if facts.kind is JobKind.TRAINING_JOB:
        training_name = facts.name
        log_group, log_stream = TRAINING_LOG_GROUP, f"{facts.name}/"
    elif training_name:
        log_group, log_stream = TRAINING_LOG_GROUP, f"{training_name}/"

    category = facts.category.value if facts.category else None
    attempts = facts.attempts
    progress: str | None = None
    match facts.event_kind:
        case EventKind.STATE_CHANGE:
            status = facts.status
            if facts.secondary_status and facts.kind is JobKind.TRAINING_JOB:
                status = f"{facts.status}/{facts.secondary_status}"
            fact_id = f"{status}#{attempts}"
            if facts.kind is JobKind.TRAINING_JOB and not facts.terminal:
                # One training job can be interrupted several times: tell them apart by time.
                fact_id += f"#{_ms(modified) or _ms(event.time)}"
            progress = _progress(facts.terminal, attempts, *times)
        case EventKind.QUEUE_BLOCKED:
            fact_id = f"blocked#{category}#{attempts}"
        case EventKind.PREEMPTION_STARTED:
            fact_id = f"preemption-started#{_ms(event.time)}"
        case EventKind.PREEMPTION_COMPLETED:
            fact_id = f"preemption-completed#{attempts}"
    return AlertFact(
        subject=facts.arn,
        fact_id=fact_id,
        detail_type=event.detail_type,
        event_kind=FactKind.of(facts.event_kind),
        event_time=event.time,
        region=event.region,
        account=event.account,
        job=facts,
        job_id=job_id,
        training_job_arn=training_arn,
        training_job_name=training_name,
        log_group=log_group,
        log_stream=log_stream,
        progress=progress,
        thread_subject=facts.arn,
    )


def _age(seconds: float | None) -> str | None:
    """``2.5 h old at the failure`` (seconds → hours), or None."""
    return None if seconds is None else f"{seconds / 3600:.1f} h old at the failure"


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a preemption alert needs and its event lacks (the event names only the job's ARN).

    Attributes:
        name, queue: ``jobName``, job queue *name*.
        share_identifier, quota_share: fair-share identifier / quota share name, when any.
        priority: ``schedulingPriority`` (higher runs first within its share), when set.
        tags: the job's tags (DescribeServiceJob ``tags``; the events carry none): where its
            owner is read (:func:`batchpilot.alerts.owners.owner_from_tags`).
    """

    name: str | None
    queue: str | None
    share_identifier: str | None = None
    quota_share: str | None = None
    priority: int | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


def with_context(fact: AlertFact, context: JobContext) -> AlertFact:
    """``fact`` (a preemption fact, whose event names only the job's ARN) with the job's name,
    queue, share and priority from ``context`` (DescribeServiceJob); values the fact has win."""
    job = fact.job
    if job is None:
        return fact
    job = dataclasses.replace(
        job,
        name=job.name or context.name,
        queue=job.queue or context.queue,
        share_identifier=job.share_identifier or context.share_identifier,
        quota_share=job.quota_share or context.quota_share,
        scheduling_priority=job.scheduling_priority
        if job.scheduling_priority is not None
        else context.priority,
    )
    return dataclasses.replace(fact, job=job)


def _number(value: int | None) -> str | None:
    return None if value is None else str(value)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def _labelled(rows: list[tuple[str, str | None]]) -> tuple[tuple[str, str], ...]:
    return tuple((label, value) for label, value in rows if value)


def _envelope(raw: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    if not raw:
        return None, None
    region, account = raw.get("region"), raw.get("account")
    return (region if isinstance(region, str) else None, account if isinstance(account, str) else None)


def fact_from_own_event(event: OwnEvent, envelope: Mapping[str, Any] | None = None) -> AlertFact:
    """The fact one of batchpilot's own events states (``source: batchpilot``).

    Args:
        event: from :func:`batchpilot.shared.own_events.parse_own_event` (or
            :func:`batchpilot.shared.records.decode_any`).
        envelope: the delivered EventBridge event (for ``region`` and ``account``), optional.
    """
    region, account = _envelope(envelope)
    common: dict[str, Any] = {
        "detail_type": event.detail_type,
        "event_time": event.time,
        "region": region,
        "account": account,
    }
    match event:
        case JobResubmitted():
            budget = f"{event.budget_used}/{event.budget_limit}" if event.budget_limit else None
            hours = event.lost_instance_hours
            return AlertFact(
                subject=event.failed_job_arn,
                fact_id=f"resubmitted#{event.lineage_id}#{event.attempt}",
                event_kind=FactKind.JOB_RESUBMITTED,
                own=OwnFacts(
                    job_kind=_enum(JobKind, event.job_kind),
                    job_name=event.job_name or resource_name(event.failed_job_arn),
                    job_queue=event.job_queue,
                    share_identifier=event.share_identifier,
                    quota_share=event.quota_share,
                    category=_enum(Category, event.category),
                    reason=event.reason,
                    attempt=event.attempt,
                    restarts_from_step_zero=event.restarts_from_step_zero,
                    dry_run=event.dry_run,
                ),
                thread_subject=event.failed_job_arn,
                related_subjects=(event.new_job_arn,) if event.new_job_arn else (),
                extra=_labelled(
                    [
                        ("Lineage", event.lineage_id),
                        ("Resubmission", f"{event.attempt}"),
                        ("New job", event.new_job_name),
                        ("Operation", event.operation),
                        ("Budget", budget),
                        ("Checkpoint", event.checkpoint_uri or "none: restarts from step 0"),
                        ("Checkpoint time", _iso(event.checkpoint_time) if event.checkpoint_time else None),
                        ("Checkpoint object", event.checkpoint_object),
                        ("Checkpoint age", _age(event.checkpoint_age_seconds)),
                        ("Lost instance-hours", f"{hours:.1f}" if hours is not None else None),
                        ("Dry run", "yes: nothing was submitted" if event.dry_run else None),
                    ]
                ),
                **common,
            )
        case RecoverySkipped():
            budget = (
                f"{event.budget_used}/{event.budget_limit}"
                if event.budget_used is not None and event.budget_limit is not None
                else None
            )
            return AlertFact(
                subject=event.job_arn,
                fact_id=f"recovery-skipped#{event.skip_reason.value}",
                event_kind=FactKind.RECOVERY_SKIPPED,
                own=OwnFacts(
                    job_kind=_enum(JobKind, event.job_kind),
                    job_name=event.job_name,
                    job_queue=event.job_queue,
                    share_identifier=event.share_identifier,
                    quota_share=event.quota_share,
                    category=_enum(Category, event.category),
                    reason=event.message,
                    reason_code=event.skip_reason,
                    critical=event.critical,
                    dry_run=event.dry_run,
                ),
                thread_subject=event.job_arn,
                extra=_labelled([("Lineage", event.lineage_id), ("Budget used", budget)]),
                **common,
            )
        case RecoveryFailed():
            return AlertFact(
                subject=event.job_arn,
                fact_id=f"recovery-failed#{event.lineage_id}#{event.attempt}",
                event_kind=FactKind.RECOVERY_FAILED,
                own=OwnFacts(
                    job_kind=_enum(JobKind, event.job_kind),
                    job_name=event.job_name,
                    job_queue=event.job_queue,
                    category=_enum(Category, event.category),
                    reason=f"{event.error_code}: {event.error_message}",
                    reason_code=event.error_code,
                    attempt=event.attempt,
                    will_retry=event.will_retry,
                ),
                thread_subject=event.job_arn,
                extra=_labelled([("Lineage", event.lineage_id), ("Operation", event.operation)]),
                **common,
            )
        case CapacityAdjusted():
            subject = f"service-environment/{event.service_environment}"
            return AlertFact(
                subject=subject,
                fact_id=f"capacity-adjusted#{_iso(event.time)}",
                event_kind=FactKind.CAPACITY_ADJUSTED,
                own=OwnFacts(reason=event.message or event.reason, reason_code=event.reason),
                thread_subject=subject,
                extra=_labelled(
                    [
                        ("Service environment", event.service_environment),
                        ("Capacity limit", f"{event.previous_max} -> {event.new_max} {event.capacity_unit}"),
                        ("In use", str(event.in_use)),
                        ("Runnable demand", str(event.runnable_demand)),
                        ("Desired", _number(event.desired)),
                        ("Blocked job", event.job_arn),
                        ("Dry run", "yes: nothing was changed" if event.dry_run else None),
                    ]
                ),
                **common,
            )
        case CapacityLimited():
            subject = f"service-environment/{event.service_environment}"
            return AlertFact(
                subject=subject,
                fact_id=f"capacity-limited#{event.limit_reason.value}#{_iso(event.time)}",
                event_kind=FactKind.CAPACITY_LIMITED,
                own=OwnFacts(
                    category=Category.CAPACITY, reason=event.message, reason_code=event.limit_reason
                ),
                thread_subject=subject,
                extra=_labelled(
                    [
                        ("Service environment", event.service_environment),
                        ("Capacity unit", event.capacity_unit),
                        ("Current max", str(event.current_max)),
                        ("Desired", str(event.desired)),
                        ("Configured max", str(event.configured_max)),
                        ("In use", _number(event.in_use)),
                        ("Runnable demand", _number(event.runnable_demand)),
                        ("Blocked job", event.job_arn),
                    ]
                ),
                **common,
            )
        case JobStarving():
            waited = event.waiting_seconds
            usage, entitled = event.share_usage_percent, event.entitlement_percent
            return AlertFact(
                subject=event.job_arn,
                fact_id=f"starving#{event.reason.value}",
                event_kind=FactKind.JOB_STARVING,
                own=_job_own_facts(event),
                thread_subject=event.job_arn,
                extra=_labelled(
                    [
                        ("Preemptions", str(event.preemptions)),
                        ("Waiting", f"{waited / 3600:.1f} h RUNNABLE" if waited is not None else None),
                        ("Share of usage", f"{usage:.0f}%" if usage is not None else None),
                        ("Entitlement", f"{entitled:.0f}%" if entitled is not None else None),
                    ]
                ),
                **common,
            )
        case JobGpuIdle():
            cost = event.hourly_cost_usd
            training = event.training_job_name
            return AlertFact(
                subject=event.job_arn,
                # One fact per episode: the episode's first idle minute names it.
                fact_id=f"gpu-idle#{event.reason.value}#{_ms(event.idle_since)}",
                event_kind=FactKind.JOB_GPU_IDLE,
                own=_job_own_facts(event),
                thread_subject=event.job_arn,
                job_id=resource_name(event.job_arn) if ":batch:" in event.job_arn else None,
                training_job_name=training,
                log_group=TRAINING_LOG_GROUP if training else None,
                log_stream=f"{training}/" if training else None,
                extra=_labelled(
                    [
                        ("Instances", f"{event.instances} x {event.instance_type or '?'}"),
                        ("GPUs", str(event.gpus)),
                        ("GPU activity", f"{event.activity_percent:.0f}%"),
                        ("Idle for", f"{event.idle_seconds / 3600:.1f} h"),
                        ("Idle since", _iso(event.idle_since)),
                        ("Idle capacity", f"${cost:,.2f}/h at list price" if cost is not None else None),
                    ]
                ),
                **common,
            )
    raise TypeError(f"not an own event: {type(event).__name__}")  # pragma: no cover - exhaustive


def _job_own_facts(event: JobStarving | JobGpuIdle) -> OwnFacts:
    """What the ledger's own job events (Job Starving, Job GPU Idle) say of their job: kind, name,
    job queue, share or quota share, scheduling priority, and the reason."""
    return OwnFacts(
        job_kind=_enum(JobKind, event.job_kind),
        job_name=event.job_name or resource_name(event.job_arn),
        job_queue=event.job_queue,
        share_identifier=event.share_identifier,
        quota_share=event.quota_share,
        reason=event.message,
        reason_code=event.reason,
        priority=event.scheduling_priority,
    )


def _alarm_metrics(event: CloudWatchAlarmStateChange) -> tuple[str, ...]:
    """``AWS/Lambda Errors`` per plain metric, the label (else the expression) per expression;
    the metrics an expression only reads (``returnData`` false) are left out."""
    shown: list[str] = []
    for metric in event.detail.configuration.metrics:
        if metric.returnData is False:
            continue
        stat = metric.metricStat.metric if metric.metricStat else None
        if stat and (stat.namespace or stat.name):
            shown.append(" ".join(x for x in (stat.namespace, stat.name) if x))
        elif metric.label or metric.expression:
            shown.append(metric.label or metric.expression or "")
    return tuple(shown)


def fact_from_alarm_event(
    event: CloudWatchAlarmStateChange, routing: AlarmRouting | None = None
) -> AlertFact:
    """The fact a ``CloudWatch Alarm State Change`` states.

    Args:
        event: the parsed event (:func:`batchpilot.shared.events.parse_alarm_event`).
        routing: the deployment's alarm wiring (prefix, alarms notified directly); None: no prefix,
            none notified directly.

    The subject is the alarm's ARN (``resources[0]``, else built from the envelope); the fact id
    the new state and when the alarm entered it, so a copy of the event is one message. An alarm
    entering ALARM opens a thread of its own (:attr:`AlertFact.starts_thread`) that its
    resolution replies in.
    """
    routing = routing or AlarmRouting()
    detail = event.detail
    name = detail.alarmName
    arn = next((r for r in event.resources if ":cloudwatch:" in r and ":alarm:" in r), None)
    subject = arn or f"arn:aws:cloudwatch:{event.region or ''}:{event.account or ''}:alarm:{name}"
    stated = alarm_severity(detail.configuration.description)
    previous = detail.previousState
    alarm = AlarmFacts(
        name=name,
        short_name=routing.short_name(name),
        state=detail.state.value,
        changed_at=detail.state.timestamp,
        previous_state=previous.value if previous else None,
        previous_changed_at=previous.timestamp if previous else None,
        reason=detail.state.reason,
        description=without_marker(detail.configuration.description),
        severity=stated.severity,
        severity_problem=stated.problem,
        metrics=_alarm_metrics(event),
        notified_directly=routing.is_notified_directly(name),
    )
    changed = _ms(detail.state.timestamp)
    return AlertFact(
        subject=subject,
        fact_id=f"{detail.state.value.value}#{changed}",
        detail_type=event.detail_type,
        event_kind=FactKind.ALARM_STATE_CHANGE,
        event_time=event.time,
        region=event.region,
        account=event.account,
        alarm=alarm,
        progress=_progress(False, 0, detail.state.timestamp),
        thread_subject=subject,
        starts_thread=detail.state.value is AlarmStateValue.ALARM,
    )


def fact_from_event(
    event: JobEvent | OwnEvent | CloudWatchAlarmStateChange,
    envelope: Mapping[str, Any] | None = None,
    routing: AlarmRouting | None = None,
) -> AlertFact:
    """The fact of a decoded event (:func:`batchpilot.shared.records.decode_any`): a job event's,
    an own event's (``envelope``: the delivered event, for an own event's region and account) or an
    alarm's (``routing``: the deployment's alarm wiring)."""
    if isinstance(event, CloudWatchAlarmStateChange):
        return fact_from_alarm_event(event, routing)
    if isinstance(
        event,
        JobResubmitted
        | RecoverySkipped
        | RecoveryFailed
        | CapacityAdjusted
        | CapacityLimited
        | JobStarving
        | JobGpuIdle,
    ):
        return fact_from_own_event(event, envelope)
    return fact_from_job_event(event)
