"""Alert facts: what one event says that a person may need to hear, with its de-duplication key.

Pure: builds :class:`AlertFact` from a parsed job event (:mod:`batchpilot.shared.events`, classified by
:func:`batchpilot.shared.classification.classify`) or from one of batchpilot's own events
(:mod:`batchpilot.shared.own_events`). No I/O.

Exactly once per fact: a fact is identified by ``(subject, fact_id)``: the job ARN (or service
environment) and, for job events, the status and attempt (``FAILED#3``); for own events their
natural key (lineage and attempt, or service environment and decision time). Never the envelope
``id``: EventBridge redelivers and SageMaker repeats events under new ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from batchpilot.recovery.policy import RECOVERABLE
from batchpilot.shared.classification import Category, EventKind, JobFacts, JobKind, classify
from batchpilot.shared.events import (
    BatchJobQueueBlocked,
    BatchJobStateChange,
    BatchServiceJobPreemptionCompleted,
    BatchServiceJobQueueBlocked,
    BatchServiceJobStateChange,
    JobEvent,
    SageMakerTrainingJobStateChange,
)
from batchpilot.shared.own_events import (
    CapacityAdjusted,
    CapacityLimited,
    JobResubmitted,
    OwnEvent,
    RecoveryFailed,
    RecoverySkipped,
)

__all__ = [
    "BATCH_LOG_GROUP",
    "RECOVERABLE_CATEGORIES",
    "TRAINING_LOG_GROUP",
    "AlertFact",
    "fact_from_job_event",
    "fact_from_own_event",
    "recovery_will_handle",
]

BATCH_LOG_GROUP = "/aws/batch/job"
"""Default CloudWatch Logs group of Batch container jobs (``awslogs`` driver without a group)."""
TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"
"""CloudWatch Logs group of SageMaker training jobs; streams are ``<training job name>/...``."""

RECOVERABLE_CATEGORIES: dict[JobKind, frozenset[Category]] = RECOVERABLE
"""Terminal failures the recovery function resubmits, by job kind: the recovery policy's own table
(:data:`batchpilot.recovery.policy.RECOVERABLE`, decision-table row 5), shared so both functions
always agree."""


@dataclass(frozen=True, slots=True)
class AlertFact:
    """One notifiable fact. Times are timezone-aware UTC datetimes; durations are derived later.

    Attributes:
        subject: what the fact is about and the key of its state: the job ARN (Batch ``jobArn``,
            ``TrainingJobArn``) or ``service-environment/<name>`` for capacity events.
        fact_id: unique per fact within ``subject`` (``FAILED#3``, ``resubmitted#<lineage>#2``).
        detail_type: the event's ``detail-type``.
        event_kind: ``state-change``, ``queue-blocked``, ``preemption-started``,
            ``preemption-completed``, ``job-resubmitted``, ``recovery-skipped``,
            ``recovery-failed``, ``capacity-adjusted`` or ``capacity-limited``.
        event_time: the envelope ``time`` (used for display and as the own events' decision time).
        region, account: from the envelope (console links).
        job_kind: ``container-job``, ``service-job``, ``training-job`` or None (capacity events).
        job_name, job_id: Batch ``jobName``/``jobId`` or ``TrainingJobName``.
        job_queue: job queue *name*; share_identifier / quota_share when known.
        status, secondary_status: Batch status or SageMaker ``TrainingJobStatus``/``SecondaryStatus``.
        category: failure/blocked/disruption category (``CAPACITY``...), None when none applies.
        reason: the most specific reason text (free text, may be long; truncated when rendered).
        reason_code: ``skip_reason``/``limit_reason``/``error_code`` of own events.
        attempts: attempts the event lists (Batch) or the resubmission number (own events).
        terminal, succeeded: the job will not change again / it succeeded.
        created_at, started_at, stopped_at: job times from the event ``detail``.
        instance_type, instance_count: SageMaker ``ResourceConfig`` (instances).
        training_job_arn, training_job_name: the SageMaker training job (standalone, or the
            latest attempt of a service job).
        log_group, log_stream: CloudWatch Logs of the job when the event names them (a stream
            *prefix* for training jobs).
        created_by_batch: an ``AWSBatch*`` training job: its service job's events speak for it.
        progress: ordering key of a state-change event (terminal first, then attempts, then the
            latest detail timestamp in epoch ms), compared as a string; None for events that are
            only checked against a terminal state (queue blocked, preemption, own events).
        thread_subject: the subject whose Slack thread this message belongs in.
        related_subjects: other subjects that continue this thread (the new job of a resubmission).
        extra: further labelled values for the message (budget, checkpoint, capacity numbers).
        producer_critical: the publishing function flagged the fact critical (``Recovery
            Skipped`` with ``critical: true``, e.g. a budget exhausted).
        will_retry: a ``Recovery Failed`` that the recovery function retries by itself.
    """

    subject: str
    fact_id: str
    detail_type: str
    event_kind: str
    event_time: datetime
    region: str | None = None
    account: str | None = None
    job_kind: str | None = None
    job_name: str | None = None
    job_id: str | None = None
    job_queue: str | None = None
    share_identifier: str | None = None
    quota_share: str | None = None
    status: str | None = None
    secondary_status: str | None = None
    category: str | None = None
    reason: str | None = None
    reason_code: str | None = None
    attempts: int | None = None
    terminal: bool = False
    succeeded: bool = False
    created_at: datetime | None = None
    started_at: datetime | None = None
    stopped_at: datetime | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    training_job_arn: str | None = None
    training_job_name: str | None = None
    log_group: str | None = None
    log_stream: str | None = None
    created_by_batch: bool = False
    progress: str | None = None
    thread_subject: str = ""
    related_subjects: tuple[str, ...] = ()
    extra: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    producer_critical: bool = False
    will_retry: bool = False

    @property
    def key(self) -> tuple[str, str]:
        """``(subject, fact_id)``: the identity used for exactly-once delivery."""
        return (self.subject, self.fact_id)

    def match_values(self) -> dict[str, str | None]:
        """The values a routing :class:`~batchpilot.alerts.policy.Match` is checked against."""
        return {
            "detail_type": self.detail_type,
            "job_kind": self.job_kind,
            "status": self.status,
            "category": self.category,
            "job_queue": self.job_queue,
            "share_identifier": self.share_identifier,
            "quota_share": self.quota_share,
            "reason_code": self.reason_code,
        }


def recovery_will_handle(
    job_kind: str | None, category: str | None, *, created_by_batch: bool = False
) -> bool:
    """True when the recovery function resubmits a *terminal failure* of this kind and category.

    The conservative rule of issue 4 ("When to act"): a FAILED service job lost to PREEMPTION,
    SPOT_INTERRUPTION, CAPACITY or INTERNAL_ERROR; a FAILED container job lost to a spot reclaim
    (FAILED means Batch's retries are spent); a standalone SageMaker training job Failed with a
    capacity or internal error, or Stopped with MaxWaitTimeExceeded (SPOT_INTERRUPTION). Training
    jobs that Batch created are decided by their service job. The recovery function's outcome
    event (``Job Resubmitted``, ``Recovery Skipped``, ``Recovery Failed``) then decides what people
    hear.
    """
    if created_by_batch or job_kind is None or category is None:
        return False
    try:
        kind = JobKind(job_kind)
        cat = Category(category)
    except ValueError:
        return False
    return cat in RECOVERABLE_CATEGORIES.get(kind, frozenset())


def _ms(moment: datetime | None) -> int:
    return int(moment.timestamp() * 1000) if moment is not None else 0


def _progress(terminal: bool, attempts: int, *moments: datetime | None) -> str:
    latest = max((_ms(m) for m in moments), default=0)
    return f"{int(terminal)}|{attempts:04d}|{max(latest, 0):016d}"


def _tail(arn: str | None) -> str | None:
    if not arn:
        return None
    return arn.rsplit("/", 1)[-1] or None


def _envelope(raw: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    if not raw:
        return None, None
    region, account = raw.get("region"), raw.get("account")
    return (region if isinstance(region, str) else None, account if isinstance(account, str) else None)


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
    attempts = facts.attempts
    modified: datetime | None = None
    match event:
        case BatchJobStateChange() | BatchJobQueueBlocked():
            detail = event.detail
            job_id = detail.jobId
            last = detail.attempts[-1] if detail.attempts else None
            stream = (last.container.logStreamName if last and last.container else None) or (
                detail.container.logStreamName if detail.container else None
            )
            if stream:
                log_group, log_stream = BATCH_LOG_GROUP, stream
            times += [t for a in detail.attempts for t in (a.startedAt, a.stoppedAt)]
        case BatchServiceJobStateChange() | BatchServiceJobQueueBlocked():
            detail_s = event.detail
            job_id = _tail(detail_s.jobArn)
            for attempt in (detail_s.latestAttempt, *reversed(detail_s.attempts)):
                resource = attempt.serviceResourceId if attempt else None
                if resource is not None and resource.value:
                    training_arn = resource.value
                    break
            times += [t for a in detail_s.attempts for t in (a.startedAt, a.stoppedAt)]
            times.append(detail_s.scheduledAt)
        case BatchServiceJobPreemptionCompleted():
            summary = event.detail.preemptionSummary
            attempts = summary.preemptedAttemptCount if summary else 0
        case SageMakerTrainingJobStateChange():
            training_arn = facts.arn if facts.arn.startswith("arn:") else None
            modified = event.detail.LastModifiedTime
            times.append(modified)
        case _:
            pass
    training_name = _tail(training_arn) if training_arn else None
    if facts.kind is JobKind.TRAINING_JOB:
        training_name = facts.name
        log_group, log_stream = TRAINING_LOG_GROUP, f"{facts.name}/"
    elif training_name:
        log_group, log_stream = TRAINING_LOG_GROUP, f"{training_name}/"

    category = facts.category.value if facts.category else None
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
        case _:
            fact_id = f"preemption-completed#{attempts}"
    return AlertFact(
        subject=facts.arn,
        fact_id=fact_id,
        detail_type=event.detail_type,
        event_kind=facts.event_kind.value,
        event_time=event.time,
        region=event.region,
        account=event.account,
        job_kind=facts.kind.value,
        job_name=facts.name,
        job_id=job_id,
        job_queue=facts.queue,
        share_identifier=facts.share_identifier,
        quota_share=facts.quota_share,
        status=facts.status,
        secondary_status=facts.secondary_status,
        category=category,
        reason=facts.reason,
        attempts=attempts,
        terminal=facts.terminal,
        succeeded=facts.succeeded,
        created_at=facts.created_at,
        started_at=facts.started_at,
        stopped_at=facts.stopped_at,
        instance_type=facts.instance_type,
        instance_count=facts.instance_count,
        training_job_arn=training_arn,
        training_job_name=training_name,
        log_group=log_group,
        log_stream=log_stream,
        created_by_batch=facts.created_by_batch,
        progress=progress,
        thread_subject=facts.arn,
    )


def _number(value: int | None) -> str | None:
    return None if value is None else str(value)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def fact_from_own_event(event: OwnEvent, raw: Mapping[str, Any] | None = None) -> AlertFact:
    """The fact one of batchpilot's own events states (``source: batchpilot``).

    Args:
        event: from :func:`batchpilot.shared.own_events.parse_own_event`.
        raw: the delivered EventBridge event (for ``region`` and ``account``), optional.
    """
    region, account = _envelope(raw)
    common: dict[str, Any] = {
        "detail_type": event.detail_type,
        "event_time": event.time,
        "region": region,
        "account": account,
    }
    match event:
        case JobResubmitted():
            extra = [
                ("Lineage", event.lineage_id),
                ("Resubmission", f"{event.attempt}"),
                ("New job", event.new_job_name),
                ("Operation", event.operation),
                ("Budget", f"{event.budget_used}/{event.budget_limit}" if event.budget_limit else None),
                ("Checkpoint", event.checkpoint_uri or "none: restarts from step 0"),
                ("Checkpoint time", _iso(event.checkpoint_time) if event.checkpoint_time else None),
                (
                    "Lost instance-hours",
                    f"{event.lost_instance_hours:.1f}" if event.lost_instance_hours is not None else None,
                ),
                ("Dry run", "yes: nothing was submitted" if event.dry_run else None),
            ]
            return AlertFact(
                subject=event.failed_job_arn,
                fact_id=f"resubmitted#{event.lineage_id}#{event.attempt}",
                event_kind="job-resubmitted",
                job_kind=event.job_kind,
                job_name=event.job_name or _tail(event.failed_job_arn),
                job_queue=event.job_queue,
                share_identifier=event.share_identifier,
                quota_share=event.quota_share,
                category=event.category,
                reason=event.reason,
                reason_code="RESTARTS_FROM_STEP_ZERO" if event.restarts_from_step_zero else None,
                attempts=event.attempt,
                thread_subject=event.failed_job_arn,
                related_subjects=(event.new_job_arn,) if event.new_job_arn else (),
                extra=tuple((k, v) for k, v in extra if v),
                **common,
            )
        case RecoverySkipped():
            budget = (
                f"{event.budget_used}/{event.budget_limit}"
                if event.budget_used is not None and event.budget_limit is not None
                else None
            )
            extra = [("Lineage", event.lineage_id), ("Budget used", budget)]
            return AlertFact(
                subject=event.job_arn,
                fact_id=f"recovery-skipped#{event.skip_reason.value}",
                event_kind="recovery-skipped",
                job_kind=event.job_kind,
                job_name=event.job_name,
                job_queue=event.job_queue,
                share_identifier=event.share_identifier,
                quota_share=event.quota_share,
                category=event.category,
                reason=event.message,
                reason_code=event.skip_reason.value,
                producer_critical=event.critical,
                thread_subject=event.job_arn,
                extra=tuple((k, v) for k, v in extra if v),
                **common,
            )
        case RecoveryFailed():
            extra = [("Lineage", event.lineage_id), ("Operation", event.operation)]
            return AlertFact(
                subject=event.job_arn,
                fact_id=f"recovery-failed#{event.lineage_id}#{event.attempt}",
                event_kind="recovery-failed",
                job_kind=event.job_kind,
                job_name=event.job_name,
                job_queue=event.job_queue,
                category=event.category,
                reason=f"{event.error_code}: {event.error_message}",
                reason_code=event.error_code,
                attempts=event.attempt,
                will_retry=event.will_retry,
                thread_subject=event.job_arn,
                extra=tuple((k, v) for k, v in extra if v),
                **common,
            )
        case CapacityAdjusted():
            subject = f"service-environment/{event.service_environment}"
            extra = [
                ("Service environment", event.service_environment),
                ("Capacity limit", f"{event.previous_max} -> {event.new_max} {event.capacity_unit}"),
                ("In use", str(event.in_use)),
                ("Runnable demand", str(event.runnable_demand)),
                ("Desired", _number(event.desired)),
                ("Blocked job", event.job_arn),
                ("Dry run", "yes: nothing was changed" if event.dry_run else None),
            ]
            return AlertFact(
                subject=subject,
                fact_id=f"capacity-adjusted#{_iso(event.time)}",
                event_kind="capacity-adjusted",
                reason=event.message or event.reason,
                reason_code=event.reason,
                thread_subject=subject,
                extra=tuple((k, v) for k, v in extra if v),
                **common,
            )
        case CapacityLimited():
            subject = f"service-environment/{event.service_environment}"
            extra = [
                ("Service environment", event.service_environment),
                ("Capacity unit", event.capacity_unit),
                ("Current max", str(event.current_max)),
                ("Desired", str(event.desired)),
                ("Configured max", str(event.configured_max)),
                ("In use", str(event.in_use) if event.in_use is not None else None),
                (
                    "Runnable demand",
                    str(event.runnable_demand) if event.runnable_demand is not None else None,
                ),
                ("Blocked job", event.job_arn),
            ]
            return AlertFact(
                subject=subject,
                fact_id=f"capacity-limited#{event.limit_reason.value}#{_iso(event.time)}",
                event_kind="capacity-limited",
                category="CAPACITY",
                reason=event.message,
                reason_code=event.limit_reason.value,
                thread_subject=subject,
                extra=tuple((k, v) for k, v in extra if v),
                **common,
            )
    raise TypeError(f"not an own event: {type(event).__name__}")  # pragma: no cover - exhaustive
