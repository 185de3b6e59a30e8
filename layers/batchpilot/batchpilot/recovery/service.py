"""One SQS record in, one recovery decision out: the recovery function's domain flow.

:class:`Recoverer` runs the decision table (:mod:`batchpilot.recovery.policy`) against the job as
AWS describes it, keeps the lineage exactly-once (:mod:`batchpilot.recovery.lineage`), paces and
sends the submit, publishes batchpilot's own events and returns the metrics to write. It talks to
AWS only through the ports below; :mod:`batchpilot.adapters.recovery_aws` implements them with
boto3, and the same code runs in Lambda, in ``batchpilot replay`` and in the tests.

Order of side effects for one resubmission::

    describe (Describe*, ListTags)  →  list the checkpoint prefix (ListObjectsV2)
    →  reserve attempt n in the lineage (conditional PutItem)          ← exactly-once point
    →  pace (token bucket)  →  submit (clientToken / deterministic name: safe to repeat)
    →  PutEvents "Job Resubmitted"  →  mark SUBMITTED + pointer JOB#<new arn> (TransactWriteItems)

A crash anywhere after the reservation is repaired by the next delivery of the same record
(RESUME: the submit is repeated idempotently; PUBLISH: only the event is sent).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from batchpilot.metrics.service import decode_record
from batchpilot.recovery import policy
from batchpilot.recovery.checkpoint import CheckpointLocation, CheckpointState, lost_instance_hours
from batchpilot.recovery.lineage import (
    AttemptRecord,
    AttemptState,
    Lineage,
    LineageRef,
    Plan,
    Step,
    base_name,
    plan,
)
from batchpilot.recovery.naming import ATTEMPT_TAG, LINEAGE_TAG, lineage_id_for
from batchpilot.recovery.pacing import NotInTime
from batchpilot.recovery.requests import (
    OP_CREATE_TRAINING_JOB,
    OP_SUBMIT_JOB,
    OP_SUBMIT_SERVICE_JOB,
    RebuiltRequest,
    rebuild_create_training_job,
    rebuild_submit_job,
    rebuild_submit_service_job,
)
from batchpilot.recovery.settings import RecoverySettings
from batchpilot.recovery.snapshot import JobSnapshot
from batchpilot.shared.classification import Category, JobFacts, JobKind, classify
from batchpilot.shared.events import InvalidEventError, JobEvent, UnsupportedEventError
from batchpilot.shared.metrics import MetricPoint, dimensions, metric_timestamp
from batchpilot.shared.own_events import (
    JobResubmitted,
    OwnEvent,
    PublishError,
    RecoveryFailed,
    RecoverySkipped,
    SkipReason,
)

__all__ = [
    "Action",
    "CheckpointInspector",
    "EventSink",
    "JobGateway",
    "LineageStore",
    "Pacer",
    "PublishError",
    "Recoverer",
    "RecoveryResult",
    "RetryLater",
    "SubmitError",
]

_REASON_MAX = 500
_SUBMIT_MARGIN_S = 8.0  # time kept back for the submit call and the writes after it


# ------------------------------------------------------------------------------------ ports
class SubmitError(Exception):
    """A submit call failed after botocore's retries.

    Attributes:
        code: AWS's error code (``ThrottlingException``, ``ResourceLimitExceeded``, ...).
        transient: True when delivering the record again may succeed (throttling, 5xx, network).
    """

    def __init__(self, code: str, message: str, *, transient: bool) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.transient = transient


class JobGateway(Protocol):
    """Describe and submit jobs (Batch and SageMaker)."""

    def describe(self, event: JobEvent, facts: JobFacts) -> JobSnapshot | None:
        """The job as AWS describes it now, or None when AWS no longer knows it."""
        ...

    def input_shape(self, operation: str) -> Any:
        """botocore's input shape of ``operation`` (``batch:SubmitServiceJob`` ...)."""
        ...

    def submit(self, request: RebuiltRequest, *, resume: bool) -> str:
        """Send the request; returns the new job's ARN. ``resume``: a previous call may have
        succeeded, so look for the job first. Raises :class:`SubmitError`."""
        ...


class CheckpointInspector(Protocol):
    """Lists a checkpoint location."""

    def inspect(self, location: CheckpointLocation | None) -> CheckpointState:
        """The newest object under the location (never raises for S3 errors)."""
        ...


class LineageStore(Protocol):
    """Lineage records and decision markers (DynamoDB)."""

    def find_job(self, job_arn: str) -> LineageRef | None:
        """The lineage and attempt of a job batchpilot submitted, by its ARN."""
        ...

    def load(self, lineage_id: str) -> Lineage | None:
        """The lineage record, or None."""
        ...

    def reserve(self, lineage: Lineage, previous: Lineage | None) -> bool:
        """Write ``lineage`` if the stored record is still ``previous``; False when it is not."""
        ...

    def update_attempt(self, lineage_id: str, record: AttemptRecord) -> None:
        """Store the new state of one attempt (and the pointer for its new job ARN, when set)."""
        ...

    def claim_decision(self, job_arn: str, status: str, reason: str) -> bool:
        """Remember that a skip of this job in this status was published; False if it already was."""
        ...

    def release_decision(self, job_arn: str, status: str) -> None:
        """Forget a claimed decision (its event could not be published)."""
        ...


class EventSink(Protocol):
    """Publishes batchpilot's own events."""

    def publish(self, events: Sequence[OwnEvent]) -> None:
        """Put the events on the bus. Raises :class:`PublishError`."""
        ...


class Pacer(Protocol):
    """The client-side submit rate limit (:class:`~batchpilot.recovery.pacing.SubmitPacer`)."""

    def acquire(self, budget: float = float("inf")) -> float:
        """Wait for a submit slot; raises :class:`~batchpilot.recovery.pacing.NotInTime`."""
        ...


# ------------------------------------------------------------------------------------ results
class Action(StrEnum):
    """What recovery did with one record."""

    RESUBMITTED = "resubmitted"
    DRY_RUN = "dry-run"
    SKIPPED = "skipped"
    DUPLICATE = "duplicate"  # already answered: no event, no metric
    FAILED = "failed"  # the submit was refused for good: Recovery Failed published
    IGNORED = "ignored"  # a detail-type recovery does not handle
    INVALID = "invalid"  # malformed: reported, not retried


class RetryLater(Exception):
    """Hand the record back to SQS. ``delay_seconds``: when it should come back (None: after the
    queue's visibility timeout)."""

    def __init__(self, reason: str, delay_seconds: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay_seconds = delay_seconds


@dataclass
class RecoveryResult:
    """The outcome of one record (what the handler logs and counts; never event contents)."""

    action: Action
    event_id: str | None = None
    detail_type: str | None = None
    job_arn: str | None = None
    job_kind: str | None = None
    category: str | None = None
    skip_reason: SkipReason | None = None
    message: str | None = None
    lineage_id: str | None = None
    attempt: int | None = None
    operation: str | None = None
    new_job_name: str | None = None
    new_job_arn: str | None = None
    error: str | None = None
    dropped_tags: list[str] = field(default_factory=list)  # tag keys left off to stay within 50
    metrics: list[MetricPoint] = field(default_factory=list)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _queue_name(queue: str | None) -> str | None:
    return queue.rsplit("/", 1)[-1] if queue else None


def _truncate(text: str | None, limit: int = _REASON_MAX) -> str | None:
    if text is None:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


_OPERATION = {
    JobKind.SERVICE_JOB: OP_SUBMIT_SERVICE_JOB,
    JobKind.CONTAINER_JOB: OP_SUBMIT_JOB,
    JobKind.TRAINING_JOB: OP_CREATE_TRAINING_JOB,
}


class Recoverer:
    """Decides and acts on one failed-job event at a time.

    Args:
        settings: validated :class:`RecoverySettings`.
        jobs, checkpoints, lineage, events, pacer: the ports (adapters in Lambda).
        now: UTC wall clock (lineage times, backoff, event times); tests inject a fake.
    """

    def __init__(
        self,
        settings: RecoverySettings,
        *,
        jobs: JobGateway,
        checkpoints: CheckpointInspector,
        lineage: LineageStore,
        events: EventSink,
        pacer: Pacer,
        now: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.settings = settings
        self.jobs = jobs
        self.checkpoints = checkpoints
        self.lineage = lineage
        self.events = events
        self.pacer = pacer
        self.now = now

    # ------------------------------------------------------------------ entry point
    def handle(self, body: str, time_left: Callable[[], float] = lambda: float("inf")) -> RecoveryResult:
        """Handle one SQS message body (an EventBridge event as JSON text).

        Args:
            body: the message body.
            time_left: seconds the invocation has left (Lambda context).

        Returns:
            A :class:`RecoveryResult`: malformed events, skips and refused submits are results.

        Raises:
            RetryLater: the record must come back (backoff not over, no submit slot in time,
                throttling after botocore's retries, PutEvents failed, a concurrent writer).
            Exception: anything unexpected (a bug or an AWS outage): the batch processor reports
                the record as failed and SQS redelivers it.
        """
        try:
            event = decode_record(body)
        except UnsupportedEventError as exc:
            return RecoveryResult(Action.IGNORED, exc.event_id, exc.detail_type, error=str(exc))
        except InvalidEventError as exc:
            return RecoveryResult(Action.INVALID, exc.event_id, exc.detail_type, error=str(exc))
        facts = classify(event)
        skip = policy.screen(facts, with_category=facts.kind is not JobKind.SERVICE_JOB)
        if skip is not None:
            return self._skip(event, facts, skip)
        if facts.kind is not JobKind.TRAINING_JOB and not self.settings.manages_queue(facts.queue_arn):
            queue = _queue_name(facts.queue_arn) or "?"
            return self._skip(
                event,
                facts,
                policy.Skip(
                    SkipReason.QUEUE_NOT_MANAGED,
                    f"job queue {queue} is not in BATCHPILOT_RECOVERY_JOB_QUEUES",
                ),
            )

        # Duplicates are found before any Describe call: a pointer for jobs batchpilot submitted,
        # else the lineage this job would start.
        ref = self.lineage.find_job(facts.arn)
        tentative = ref or LineageRef(lineage_id_for(facts.arn), 0)
        record = self.lineage.load(tentative.lineage_id)
        if record is not None and self._already_answered(record, facts.arn):
            return self._duplicate(event, facts, tentative, "this failure was already answered")

        snapshot = self.jobs.describe(event, facts)
        if snapshot is None:
            return self._skip(
                event,
                facts,
                policy.Skip(SkipReason.NOT_FOUND, "AWS no longer describes this job; nothing to rebuild"),
            )
        facts = snapshot.facts
        skip = policy.screen(facts) or policy.check_scope(snapshot, self.settings)
        if skip is not None:
            return self._skip(event, facts, skip, snapshot)

        if ref is None:
            ref = self._ref_from_tags(snapshot) or tentative
            if ref != tentative:
                record = self.lineage.load(ref.lineage_id)
        category = facts.category or Category.UNKNOWN
        decided = self._plan(record, snapshot, ref, category)
        return self._act(event, snapshot, ref, record, decided, time_left)

    # ------------------------------------------------------------------ lineage steps
    def _plan(
        self, record: Lineage | None, snapshot: JobSnapshot, ref: LineageRef, category: Category
    ) -> Plan:
        return plan(
            record,
            failed_job_arn=snapshot.arn,
            failed_attempt=ref.attempt,
            category=category,
            budgets=self.settings.budgets,
            backoff_base=self.settings.backoff_base_seconds,
            backoff_max=self.settings.backoff_max_seconds,
            now=self.now(),
        )

    def _act(
        self,
        event: JobEvent,
        snapshot: JobSnapshot,
        ref: LineageRef,
        record: Lineage | None,
        decided: Plan,
        time_left: Callable[[], float],
    ) -> RecoveryResult:
        facts = snapshot.facts
        if decided.step is Step.DUPLICATE:
            return self._duplicate(event, facts, ref, decided.message)
        if decided.step is Step.BUDGET_EXHAUSTED:
            return self._skip(
                event,
                facts,
                policy.Skip(SkipReason.BUDGET_EXHAUSTED, decided.message, critical=True),
                snapshot,
                lineage_id=ref.lineage_id,
                budget=(decided.used, decided.limit),
            )
        if decided.step is Step.DEFER:
            raise RetryLater(decided.message, delay_seconds=decided.defer_seconds)
        lineage_id = ref.lineage_id
        original_arn = record.original_job_arn if record else snapshot.arn
        if decided.step is Step.PUBLISH:
            assert decided.record is not None
            return self._publish_resubmitted(
                event, snapshot, lineage_id, original_arn, decided.record, decided
            )

        stem = base_name(record.original_job_name if record else snapshot.name)
        request = self._rebuild(snapshot, lineage_id, decided.attempt, stem)
        if decided.step is Step.NEW:
            checkpoint = self.checkpoints.inspect(snapshot.checkpoint)
            skip = policy.check_checkpoint(checkpoint, self.settings)
            if skip is not None:
                return self._skip(event, facts, skip, snapshot, lineage_id=lineage_id)
            attempt = self._new_attempt(snapshot, decided, request, checkpoint)
            reserved = self._reserve(record, snapshot, ref, attempt)
            if not reserved:
                # Someone else wrote the lineage meanwhile: decide again on what is stored now.
                again = self.lineage.load(lineage_id)
                redo = self._plan(again, snapshot, ref, facts.category or Category.UNKNOWN)
                if redo.step in (Step.DUPLICATE, Step.PUBLISH, Step.RESUME):
                    return self._duplicate(event, facts, ref, "a concurrent delivery answered this failure")
                raise RetryLater("the lineage record changed while deciding")
        else:
            assert decided.record is not None
            attempt = decided.record

        if attempt.state is AttemptState.DRY_RUN:
            return self._publish_resubmitted(event, snapshot, lineage_id, original_arn, attempt, decided)

        try:
            self.pacer.acquire(max(0.0, time_left() - _SUBMIT_MARGIN_S))
        except NotInTime as exc:
            raise RetryLater(f"no submit slot in time: {exc}") from None
        try:
            new_arn = self.jobs.submit(request, resume=decided.step is Step.RESUME)
        except SubmitError as exc:
            return self._submit_failed(event, snapshot, lineage_id, attempt, exc)
        attempt = replace(attempt, state=AttemptState.SUBMITTED, new_job_arn=new_arn)
        result = self._publish_resubmitted(event, snapshot, lineage_id, original_arn, attempt, decided)
        result.dropped_tags = list(request.dropped_tags)
        return result

    @staticmethod
    def _already_answered(record: Lineage, job_arn: str) -> bool:
        return any(
            a.failed_job_arn == job_arn
            and (a.state in (AttemptState.SUBMITTED, AttemptState.DRY_RUN, AttemptState.FAILED))
            and a.published
            for a in record.attempts.values()
        )

    @staticmethod
    def _ref_from_tags(snapshot: JobSnapshot) -> LineageRef | None:
        lineage_id = snapshot.tags.get(LINEAGE_TAG)
        attempt = snapshot.tags.get(ATTEMPT_TAG, "")
        if lineage_id and attempt.isdigit():
            return LineageRef(lineage_id, int(attempt))
        return None

    def _rebuild(self, snapshot: JobSnapshot, lineage_id: str, attempt: int, stem: str) -> RebuiltRequest:
        operation = _OPERATION[snapshot.kind]
        shape = self.jobs.input_shape(operation)
        if snapshot.kind is JobKind.SERVICE_JOB:
            return rebuild_submit_service_job(
                snapshot.described, input_shape=shape, lineage_id=lineage_id, attempt=attempt, base_name=stem
            )
        if snapshot.kind is JobKind.CONTAINER_JOB:
            return rebuild_submit_job(
                snapshot.described, input_shape=shape, lineage_id=lineage_id, attempt=attempt, base_name=stem
            )
        return rebuild_create_training_job(
            snapshot.described,
            snapshot.tags,
            input_shape=shape,
            lineage_id=lineage_id,
            attempt=attempt,
            base_name=stem,
        )

    def _new_attempt(
        self, snapshot: JobSnapshot, decided: Plan, request: RebuiltRequest, checkpoint: CheckpointState
    ) -> AttemptRecord:
        facts = snapshot.facts
        return AttemptRecord(
            attempt=decided.attempt,
            failed_job_arn=snapshot.arn,
            category=(facts.category or Category.UNKNOWN).value,
            reason=_truncate(facts.reason),
            decided_at=self.now(),
            operation=request.operation,
            new_job_name=request.new_job_name,
            state=AttemptState.DRY_RUN if self.settings.dry_run else AttemptState.SUBMITTING,
            client_token=request.client_token,
            checkpoint_uri=checkpoint.uri,
            checkpoint_time=checkpoint.newest,
            restarts_from_step_zero=checkpoint.restarts_from_step_zero,
            lost_instance_hours=lost_instance_hours(
                snapshot.instances, snapshot.attempt_started_at, snapshot.stopped_at, checkpoint.newest
            ),
        )

    def _reserve(
        self, record: Lineage | None, snapshot: JobSnapshot, ref: LineageRef, attempt: AttemptRecord
    ) -> bool:
        base = record
        if base is None:
            # A job tagged as resubmission n whose record is gone counts n against this budget
            # (see lineage.plan): the rebuilt record says so.
            base = Lineage(
                lineage_id=ref.lineage_id,
                job_kind=snapshot.kind.value,
                original_job_arn=snapshot.arn,
                original_job_name=base_name(snapshot.name),
                job_queue=snapshot.job_queue,
                created_at=self.now(),
                last_attempt=ref.attempt,
                used={attempt.category: ref.attempt} if ref.attempt else {},
            )
        return self.lineage.reserve(base.with_attempt(attempt), previous=record)

    # ------------------------------------------------------------------ outcomes
    def _publish_resubmitted(
        self,
        event: JobEvent,
        snapshot: JobSnapshot,
        lineage_id: str,
        original_arn: str,
        attempt: AttemptRecord,
        decided: Plan,
    ) -> RecoveryResult:
        facts = snapshot.facts
        dry_run = attempt.state is AttemptState.DRY_RUN
        own = JobResubmitted(
            time=self.now(),
            lineage_id=lineage_id,
            attempt=attempt.attempt,
            job_kind=snapshot.kind.value,
            job_name=snapshot.name,
            original_job_arn=original_arn,
            failed_job_arn=snapshot.arn,
            new_job_arn=attempt.new_job_arn,
            new_job_name=attempt.new_job_name,
            job_queue=_queue_name(snapshot.job_queue),
            share_identifier=facts.share_identifier,
            quota_share=facts.quota_share,
            category=attempt.category,
            reason=attempt.reason,
            operation=attempt.operation,
            checkpoint_uri=attempt.checkpoint_uri,
            checkpoint_time=attempt.checkpoint_time,
            restarts_from_step_zero=attempt.restarts_from_step_zero,
            lost_instance_hours=round(attempt.lost_instance_hours, 4),
            budget_used=decided.used + (1 if decided.step is Step.NEW else 0),
            budget_limit=decided.limit,
            dry_run=dry_run,
        )
        self._publish_attempt(lineage_id, attempt, own)
        points = [self._point("Resubmissions", 1.0, event, facts)]
        points.append(self._point("LostInstanceHours", attempt.lost_instance_hours, event, facts))
        return self._attempt_result(
            Action.DRY_RUN if dry_run else Action.RESUBMITTED,
            event,
            snapshot,
            lineage_id,
            attempt,
            new_job_arn=attempt.new_job_arn,
            message="restarts from step 0 (no checkpoint)" if attempt.restarts_from_step_zero else None,
            metrics=points,
        )

    def _submit_failed(
        self,
        event: JobEvent,
        snapshot: JobSnapshot,
        lineage_id: str,
        attempt: AttemptRecord,
        exc: SubmitError,
    ) -> RecoveryResult:
        facts = snapshot.facts
        failed = RecoveryFailed(
            time=self.now(),
            job_arn=snapshot.arn,
            job_kind=snapshot.kind.value,
            job_name=snapshot.name,
            job_queue=_queue_name(snapshot.job_queue),
            category=attempt.category,
            lineage_id=lineage_id,
            attempt=attempt.attempt,
            operation=attempt.operation,
            error_code=exc.code,
            error_message=_truncate(exc.message) or exc.code,
            will_retry=exc.transient,
        )
        if exc.transient:
            # One alert per attempt, then SQS redelivers the record until the submit goes through.
            if not attempt.failure_published:
                try:
                    self.events.publish([failed])
                except PublishError:
                    pass  # the record is retried anyway; the alert goes out next time
                else:
                    self.lineage.update_attempt(lineage_id, replace(attempt, failure_published=True))
            raise RetryLater(f"{attempt.operation} failed, will retry: {exc.code}")
        self._publish_attempt(
            lineage_id, replace(attempt, state=AttemptState.FAILED, error_code=exc.code), failed
        )
        return self._attempt_result(
            Action.FAILED,
            event,
            snapshot,
            lineage_id,
            attempt,
            error=f"{exc.code}: {_truncate(exc.message, 200)}",
            metrics=[self._point("RecoveryFailed", 1.0, event, facts)],
        )

    def _publish_attempt(self, lineage_id: str, attempt: AttemptRecord, own: OwnEvent) -> None:
        """Publish the attempt's outcome and store ``attempt`` with whether that worked.

        Raises:
            RetryLater: not published (the record comes back and publishes it then).
        """
        try:
            self.events.publish([own])
        except PublishError as exc:
            self.lineage.update_attempt(lineage_id, replace(attempt, published=False))
            raise RetryLater(f"{own.detail_type} not published: {exc}") from None
        self.lineage.update_attempt(lineage_id, replace(attempt, published=True))

    @staticmethod
    def _attempt_result(
        action: Action,
        event: JobEvent,
        snapshot: JobSnapshot,
        lineage_id: str,
        attempt: AttemptRecord,
        *,
        metrics: list[MetricPoint],
        new_job_arn: str | None = None,
        message: str | None = None,
        error: str | None = None,
    ) -> RecoveryResult:
        """The result of a record that made (or tried to make) ``attempt``."""
        return RecoveryResult(
            action,
            event.id,
            event.detail_type,
            job_arn=snapshot.arn,
            job_kind=snapshot.kind.value,
            category=attempt.category,
            lineage_id=lineage_id,
            attempt=attempt.attempt,
            operation=attempt.operation,
            new_job_name=attempt.new_job_name,
            new_job_arn=new_job_arn,
            message=message,
            error=error,
            metrics=metrics,
        )

    def _skip(
        self,
        event: JobEvent,
        facts: JobFacts,
        skip: policy.Skip,
        snapshot: JobSnapshot | None = None,
        *,
        lineage_id: str | None = None,
        budget: tuple[int, int] | None = None,
    ) -> RecoveryResult:
        result = RecoveryResult(
            Action.SKIPPED,
            event.id,
            event.detail_type,
            job_arn=facts.arn,
            job_kind=facts.kind.value,
            category=facts.category.value if facts.category else None,
            skip_reason=skip.reason,
            message=skip.message,
            lineage_id=lineage_id,
        )
        # Only terminal failures are worth a notification; the same decision is published once.
        if not facts.terminal or facts.succeeded:
            return result
        if not self.lineage.claim_decision(facts.arn, facts.status, skip.reason.value):
            result.action = Action.DUPLICATE
            return result
        own = RecoverySkipped(
            time=self.now(),
            job_arn=facts.arn,
            job_kind=facts.kind.value,
            job_name=facts.name,
            job_queue=facts.queue,
            share_identifier=facts.share_identifier,
            quota_share=facts.quota_share,
            category=facts.category.value if facts.category else None,
            skip_reason=skip.reason,
            message=skip.message,
            lineage_id=lineage_id,
            budget_used=budget[0] if budget else None,
            budget_limit=budget[1] if budget else None,
            critical=skip.critical,
        )
        try:
            self.events.publish([own])
        except PublishError as exc:
            self.lineage.release_decision(facts.arn, facts.status)
            raise RetryLater(f"Recovery Skipped not published: {exc}") from None
        result.metrics = [self._point("RecoverySkipped", 1.0, event, facts, skip_reason=skip.reason)]
        return result

    def _duplicate(self, event: JobEvent, facts: JobFacts, ref: LineageRef, message: str) -> RecoveryResult:
        return RecoveryResult(
            Action.DUPLICATE,
            event.id,
            event.detail_type,
            job_arn=facts.arn,
            job_kind=facts.kind.value,
            category=facts.category.value if facts.category else None,
            skip_reason=SkipReason.ALREADY_HANDLED,
            message=message,
            lineage_id=ref.lineage_id,
        )

    def _point(
        self,
        name: str,
        value: float,
        event: JobEvent,
        facts: JobFacts,
        skip_reason: SkipReason | None = None,
    ) -> MetricPoint:
        return MetricPoint(
            name=name,
            unit="Count",
            value=max(0.0, float(value)),
            dimensions=dimensions(
                JobKind=facts.kind.value,
                JobQueue=facts.queue,
                FailureCategory=facts.category.value if facts.category is not None else None,
                SkipReason=skip_reason.value if skip_reason is not None else None,
            ),
            timestamp=metric_timestamp(event.time, self.now()),
        )
