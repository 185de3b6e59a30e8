"""One failed-job event in, one recovery outcome out: the recovery function's flow.

:class:`Recoverer` gathers what the decision table needs (:func:`batchpilot.recovery.policy.decide`
says which input next: the lineage, the job as AWS describes it, its checkpoint) and acts on the
decision: publishes a skip, hands the record back until the backoff is over, or reserves the
attempt, paces and sends the submit, publishes ``Job Resubmitted`` and returns the metrics to
write. It reaches AWS only through the ports of :mod:`batchpilot.recovery.ports` (adapters in
:mod:`batchpilot.io`), so the same code runs in Lambda, in ``batchpilot replay`` and in the tests.

Order of side effects for one resubmission::

    read the lineage (GetItem)  →  describe (Describe*, ListTags)  →  list the checkpoint prefix
    (ListObjectsV2)  →  reserve attempt n in the lineage (conditional PutItem)  ← exactly-once point
    →  pace (token bucket)  →  submit (clientToken / deterministic name: safe to repeat)
    →  PutEvents "Job Resubmitted"  →  mark SUBMITTED + pointer to the new job (TransactWriteItems)

A crash anywhere after the reservation is repaired by the next delivery of the same record
(row 12: the submit is repeated idempotently; row 13: only the event is sent).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from batchpilot.recovery.checkpoint import (
    CheckpointListError,
    CheckpointState,
    counted,
    for_array_index,
    lost_instance_hours,
)
from batchpilot.recovery.lineage import (
    AttemptRecord,
    AttemptState,
    Lineage,
    LineageView,
    base_name,
    ref_from_tags,
)
from batchpilot.recovery.naming import SUCCESSOR_ARN_TAG, SUCCESSOR_NAME_TAG
from batchpilot.recovery.pacing import NotInTime
from batchpilot.recovery.policy import UNKNOWN, Case, Decision, Need, Row, Step, decide
from batchpilot.recovery.ports import (
    CheckpointStore,
    DeferError,
    Deferrer,
    EventPublisher,
    JobGateway,
    LineageStore,
    MetricSink,
    Pacer,
    SubmitError,
    TagError,
)
from batchpilot.recovery.requests import (
    Operation,
    RebuiltRequest,
    rebuild_create_training_job,
    rebuild_submit_job,
    rebuild_submit_service_job,
)
from batchpilot.recovery.settings import RecoverySettings
from batchpilot.recovery.snapshot import JobSnapshot
from batchpilot.shared.arns import resource_name
from batchpilot.shared.classification import Category, JobFacts, JobKind, classify
from batchpilot.shared.clock import Clock, utc_now
from batchpilot.shared.events import JobEvent
from batchpilot.shared.metrics import MetricPoint, MetricsDetail, dimensions, metric_timestamp
from batchpilot.shared.own_events import (
    JobResubmitted,
    OwnEvent,
    PublishError,
    RecoveryFailed,
    RecoverySkipped,
    SkipReason,
)
from batchpilot.shared.records import Outcome, Rejected, decode

__all__ = ["Action", "Recoverer", "RecoveryResult", "RetryLater", "RetryReason"]

_REASON_MAX = 500
_SUBMIT_MARGIN_S = 8.0  # time kept back for the submit call and the writes after it
LISTING_SETTLE_SECONDS = 60.0
"""Seconds a reserved ``SubmitJob`` attempt waits before it is sent again: ``SubmitJob`` has no
client token, so a resend is safe only once ``ListJobs`` (the look-up of the attempt's
deterministic job name, :class:`batchpilot.io.batch.BatchJobs`) lists a job the lost send made.
Until then the record is handed back (``listing-settling``), its reservation kept; a listing that
lags by more than this is the one case left uncovered (docs/reliability.md)."""


class Action(StrEnum):
    """What recovery did about one failure."""

    RESUBMITTED = "resubmitted"
    DRY_RUN = "dry-run"
    SKIPPED = "skipped"  # Recovery Skipped published (or, for a status that is not a failure, not)
    DUPLICATE = "duplicate"  # already answered: no event, no metric
    FAILED = "failed"  # the submit was refused for good: Recovery Failed published


class RetryReason(StrEnum):
    """Why a record is handed back to SQS."""

    BACKOFF = "backoff"  # row 15: the lineage's backoff is not over
    NO_SUBMIT_SLOT = "no-submit-slot"  # the pacer has no slot before the invocation's timeout
    SUBMIT_FAILED = "submit-failed"  # throttling or a server error after botocore's retries
    NOT_PUBLISHED = "not-published"  # PutEvents failed
    LINEAGE_CHANGED = "lineage-changed"  # a concurrent writer changed the lineage while deciding
    CHECKPOINT_UNREADABLE = "checkpoint-unreadable"  # ListObjectsV2 failed: never "no checkpoint"
    LISTING_SETTLING = "listing-settling"  # a SubmitJob resend waits for ListJobs to list it


class RetryLater(Exception):
    """Hand the record back to SQS.

    Attributes:
        why: the reason, as an enum.
        reason: one line saying why (AWS error codes, never request values).
        delay_seconds: when the record should come back (None: after the queue's visibility
            timeout).
        deferred: the record's visibility was set to ``delay_seconds`` (see
            :meth:`Recoverer.handle_record`).
        defer_error: SQS's error code when setting it failed.
    """

    def __init__(self, why: RetryReason, reason: str, delay_seconds: float | None = None) -> None:
        super().__init__(reason)
        self.why = why
        self.reason = reason
        self.delay_seconds = delay_seconds
        self.deferred = False
        self.defer_error: str | None = None


@dataclass
class RecoveryResult:
    """The outcome of one failure event (what the handler logs and counts; never event contents).

    Attributes:
        action: what recovery did.
        row: the decision-table row that decided.
        metrics: the job metric points written for it (``Resubmissions``, ``LostInstanceHours``,
            ``RecoverySkipped``, ``RecoveryFailed``).
        dropped_tags: tag keys of the failed job left off to stay within 50 tags.
        tag_error: AWS's error code when tagging the failed job with its successor failed.
        The other attributes name the event, the job, the lineage and the new job.
    """

    action: Action
    row: Row
    event_id: str
    detail_type: str
    job_arn: str
    job_kind: JobKind
    category: Category | None = None
    message: str | None = None
    lineage_id: str | None = None
    attempt: int | None = None
    operation: Operation | None = None
    new_job_name: str | None = None
    new_job_arn: str | None = None
    error: str | None = None
    tag_error: str | None = None
    dropped_tags: list[str] = field(default_factory=list)
    metrics: list[MetricPoint] = field(default_factory=list)

    @property
    def skip_reason(self) -> SkipReason | None:
        """The decision row's ``skip_reason``, for skips and duplicates; else None."""
        return self.row.skip_reason if self.action in (Action.SKIPPED, Action.DUPLICATE) else None

    @property
    def outcome(self) -> Outcome:
        """The record's outcome: DUPLICATE for a failure already answered, else PROCESSED."""
        return Outcome.DUPLICATE if self.action is Action.DUPLICATE else Outcome.PROCESSED

    def log_fields(self) -> dict[str, Any]:
        """Ids, names, enums and numbers for the record's log line (no event contents)."""
        return {
            "action": self.action,
            "row": self.row.number,
            "event_id": self.event_id,
            "detail_type": self.detail_type,
            "job_arn": self.job_arn,
            "job_kind": self.job_kind,
            "category": self.category,
            "skip_reason": self.skip_reason,
            "decision": self.message,
            "lineage_id": self.lineage_id,
            "attempt": self.attempt,
            "operation": self.operation,
            "new_job_name": self.new_job_name,
            "new_job_arn": self.new_job_arn,
            "error": self.error,
            "successor_tag_error": self.tag_error,  # the resubmission stands; counted as SuccessorTagFailed
            "dropped_tags": self.dropped_tags or None,  # keys only: over the 50-tag limit
        }


def _unbounded() -> float:
    return math.inf


def _truncate(text: str | None, limit: int = _REASON_MAX) -> str | None:
    if text is None:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _step_zero_message(decision: Decision, new: bool) -> str:
    """Why a resubmission restarts from step 0: the decision's words (which say why no checkpoint
    counted) for a new one, else the short form."""
    if new and decision.message:
        return decision.message
    return "restarts from step 0 (no checkpoint)"


_CONCURRENT_ANSWERS = (Row.ALREADY_HANDLED, Row.SUBMIT_NOT_CONFIRMED, Row.NOT_PUBLISHED)
"""Rows that, found after a failed reservation, mean a concurrent delivery answered the failure."""


class Recoverer:
    """Decides and acts on one failed-job event at a time.

    Args:
        settings: validated :class:`RecoverySettings`.
        jobs: the job gateways; each serves the job kinds in its ``kinds``.
        checkpoints, lineage, events, metrics, deferrer, pacer: the other ports.
        clock: aware UTC wall clock (lineage times, backoff, event times); tests inject a fake.

    Raises:
        ValueError: a job kind no gateway serves.
    """

    def __init__(
        self,
        settings: RecoverySettings,
        *,
        jobs: Iterable[JobGateway],
        checkpoints: CheckpointStore,
        lineage: LineageStore,
        events: EventPublisher,
        metrics: MetricSink,
        deferrer: Deferrer,
        pacer: Pacer,
        clock: Clock = utc_now,
    ) -> None:
        self.settings = settings
        self.jobs: Mapping[JobKind, JobGateway] = {
            kind: gateway for gateway in jobs for kind in gateway.kinds
        }
        missing = set(JobKind) - set(self.jobs)
        if missing:
            raise ValueError(f"no job gateway for {', '.join(sorted(missing))}")
        self.checkpoints = checkpoints
        self.lineage = lineage
        self.events = events
        self.metrics = metrics
        self.deferrer = deferrer
        self.pacer = pacer
        self.clock = clock

    # ------------------------------------------------------------------ entry points
    def handle_record(
        self, body: str, receipt_handle: str, time_left: Callable[[], float] = _unbounded
    ) -> RecoveryResult | Rejected:
        """Handle one SQS record: decode its body (:func:`batchpilot.shared.records.decode`), decide
        and act (:meth:`handle`), write the job metrics; a record handed back is delayed until due.

        Args:
            body: the message body (an EventBridge event as JSON text).
            receipt_handle: the record's receipt handle (for ChangeMessageVisibility).
            time_left: seconds the invocation has left (from the Lambda context).

        Returns:
            The result, or the :class:`~batchpilot.shared.records.Rejected` record (ignored or
            invalid event: never retried).

        Raises:
            RetryLater: see :meth:`handle`; its visibility was set when it has a delay
                (``deferred``, or ``defer_error`` when SQS refused).
            Exception: see :meth:`handle`.
        """
        event = decode(body)
        if isinstance(event, Rejected):
            return event
        try:
            result = self.handle(event, time_left)
        except RetryLater as exc:
            if exc.delay_seconds is not None:
                try:
                    exc.deferred = self.deferrer.defer(receipt_handle, exc.delay_seconds)
                except DeferError as error:
                    exc.defer_error = error.code
            raise
        if result.metrics:
            self.metrics.publish(result.metrics)
        return result

    def handle(self, event: JobEvent, time_left: Callable[[], float] = _unbounded) -> RecoveryResult:
        """Decide and act on one failure event.

        Args:
            event: the job event (AWS Batch or SageMaker state change).
            time_left: seconds the invocation has left.

        Returns:
            A :class:`RecoveryResult`: skips, duplicates and refused submits are results.

        Raises:
            RetryLater: the record must come back (backoff not over, no submit slot in time,
                throttling after botocore's retries, PutEvents failed, a concurrent writer).
            Exception: anything unexpected (a bug or an AWS outage): the batch processor reports
                the record as failed and SQS redelivers it.
        """
        case = Case(classify(event))
        gathered: set[Need] = set()
        while not isinstance(decision := decide(case, self.settings, self.clock()), Decision):
            if decision in gathered:  # a bug in decide: never loop on AWS calls
                raise RuntimeError(f"decide asked twice for {decision.name}")
            gathered.add(decision)
            case = self._gather(event, case, decision)
        return self._act(event, case, decision, time_left)

    # ------------------------------------------------------------------ gathering
    def _gather(self, event: JobEvent, case: Case, need: Need) -> Case:
        if need is Need.LINEAGE:
            return replace(case, lineage=self._locate(case))
        if need is Need.DESCRIPTION:
            job = self.jobs[case.facts.kind].describe(event, case.facts)
            case = replace(case, job=job)
            if job is not None and case.lineage is not UNKNOWN and not case.lineage.pinned:
                case = replace(case, lineage=self._locate(case))  # its tags may name its lineage
            return case
        if not isinstance(case.job, JobSnapshot) or case.lineage is UNKNOWN:
            raise RuntimeError("the checkpoint is listed only for a described job and its lineage")
        return replace(case, checkpoint=self._checkpoint(case.job, case.lineage))

    def _checkpoint(self, job: JobSnapshot, lineage: LineageView) -> CheckpointState:
        """The checkpoint that counts for ``job`` (see :func:`~batchpilot.recovery.checkpoint.counted`):
        listed under the array child's own index, newer than the lineage's first attempt, and no
        older than ``checkpoint_max_age_seconds`` at the failure.

        Raises:
            RetryLater: the listing failed (hand the record back; never "no checkpoint").
        """
        location = job.checkpoint
        index = job.array_index
        if location is not None and index is not None:
            location = for_array_index(location, index)
        try:
            state = self.checkpoints.inspect(location)
        except CheckpointListError as exc:
            raise RetryLater(RetryReason.CHECKPOINT_UNREADABLE, str(exc)) from None
        if lineage.record is not None:
            not_before = lineage.record.first_started_at
        else:  # the original job (attempt 0) starts the lineage; a tagged resubmission does not
            not_before = job.first_started_at if lineage.ref.attempt == 0 else None
        failed_at = job.stopped_at or job.facts.stopped_at or self.clock()
        return counted(
            state,
            not_before=not_before,
            failed_at=failed_at,
            max_age_seconds=self.settings.checkpoint_max_age_seconds,
        )

    def _locate(self, case: Case) -> LineageView:
        """The failed job's lineage: by the pointer batchpilot wrote when it submitted the job, else
        by the job's tags (once described), else the lineage the job itself starts."""
        known = case.lineage
        if known is UNKNOWN:
            pointer = self.lineage.find_job(case.facts.arn)
            if pointer is not None:
                return LineageView(pointer, self.lineage.load(pointer.lineage_id), pinned=True)
        elif known.pinned:
            return known
        tags = case.job.tags if isinstance(case.job, JobSnapshot) else {}
        ref = ref_from_tags(case.facts.arn, tags)
        if known is not UNKNOWN and known.ref == ref:
            return known
        return LineageView(ref, self.lineage.load(ref.lineage_id))

    # ------------------------------------------------------------------ acting
    def _act(
        self, event: JobEvent, case: Case, decision: Decision, time_left: Callable[[], float]
    ) -> RecoveryResult:
        step = decision.step
        if step is Step.SKIP:
            return self._skip(event, case, decision)
        if step is Step.NOTHING:
            return self._duplicate(event, case, decision.row, decision.message)
        if step is Step.DEFER:
            raise RetryLater(RetryReason.BACKOFF, decision.message, decision.defer_seconds)
        job, lineage = case.job, case.lineage
        if not isinstance(job, JobSnapshot) or lineage is UNKNOWN:
            raise RuntimeError(f"row {decision.row.number} without a described job and its lineage")
        record = lineage.record
        lineage_id = lineage.ref.lineage_id
        original_arn = record.original_job_arn if record else job.arn
        if step is Step.PUBLISH:
            if decision.record is None:
                raise RuntimeError("row 13 without its attempt")
            return self._publish_resubmitted(event, job, decision, lineage_id, original_arn, decision.record)

        stem = base_name(record.original_job_name if record else job.name)
        request = self._rebuild(job, lineage_id, decision.attempt, stem)
        if step is Step.RESUME:
            if decision.record is None:
                raise RuntimeError("row 12 without its attempt")
            attempt = decision.record
        else:
            if not isinstance(case.checkpoint, CheckpointState):
                raise RuntimeError(f"row {decision.row.number} without the checkpoint listing")
            attempt = self._new_attempt(job, decision, request, case.checkpoint)
            if not self._reserve(record, job, lineage, attempt):
                # Someone else wrote the lineage meanwhile: decide again on what is stored now.
                again = replace(case, lineage=replace(lineage, record=self.lineage.load(lineage_id)))
                redo = decide(again, self.settings, self.clock())
                if isinstance(redo, Decision) and redo.row in _CONCURRENT_ANSWERS:
                    return self._duplicate(
                        event, again, Row.ALREADY_HANDLED, "a concurrent delivery answered this failure"
                    )
                raise RetryLater(RetryReason.LINEAGE_CHANGED, "the lineage record changed while deciding")

        if attempt.state is AttemptState.DRY_RUN:
            return self._publish_resubmitted(event, job, decision, lineage_id, original_arn, attempt)
        try:
            self.pacer.acquire(max(0.0, time_left() - _SUBMIT_MARGIN_S))
        except NotInTime as exc:
            raise RetryLater(RetryReason.NO_SUBMIT_SLOT, f"no submit slot in time: {exc}") from None
        if step is Step.RESUME and attempt.operation is Operation.SUBMIT_JOB:
            settled_in = LISTING_SETTLE_SECONDS - (self.clock() - attempt.decided_at).total_seconds()
            if settled_in > 0:
                raise RetryLater(
                    RetryReason.LISTING_SETTLING,
                    "SubmitJob is looked up by name before a resend: waiting for ListJobs to settle",
                    delay_seconds=math.ceil(settled_in),
                )
        try:
            new_arn = self.jobs[job.kind].submit(request, resume=step is Step.RESUME)
        except SubmitError as exc:
            return self._submit_failed(event, job, decision, lineage_id, attempt, exc)
        attempt = replace(attempt, state=AttemptState.SUBMITTED, new_job_arn=new_arn)
        result = self._publish_resubmitted(event, job, decision, lineage_id, original_arn, attempt)
        result.dropped_tags = list(request.dropped_tags)
        return result

    def _rebuild(self, job: JobSnapshot, lineage_id: str, attempt: int, stem: str) -> RebuiltRequest:
        gateway = self.jobs[job.kind]
        if job.kind is JobKind.SERVICE_JOB:
            shape = gateway.input_shape(Operation.SUBMIT_SERVICE_JOB)
            return rebuild_submit_service_job(
                job.described, input_shape=shape, lineage_id=lineage_id, attempt=attempt, base_name=stem
            )
        if job.kind is JobKind.CONTAINER_JOB:
            shape = gateway.input_shape(Operation.SUBMIT_JOB)
            return rebuild_submit_job(
                job.described, input_shape=shape, lineage_id=lineage_id, attempt=attempt, base_name=stem
            )
        return rebuild_create_training_job(
            job.described,
            job.tags,
            input_shape=gateway.input_shape(Operation.CREATE_TRAINING_JOB),
            lineage_id=lineage_id,
            attempt=attempt,
            base_name=stem,
        )

    def _new_attempt(
        self, job: JobSnapshot, decision: Decision, request: RebuiltRequest, checkpoint: CheckpointState
    ) -> AttemptRecord:
        return AttemptRecord(
            attempt=decision.attempt,
            failed_job_arn=job.arn,
            category=job.facts.category or Category.UNKNOWN,
            reason=_truncate(job.facts.reason),
            decided_at=self.clock(),
            operation=request.operation,
            new_job_name=request.new_job_name,
            state=AttemptState.DRY_RUN if decision.row is Row.DRY_RUN else AttemptState.SUBMITTING,
            client_token=request.client_token,
            # The location the new job is given (an array child's listing was under its index).
            checkpoint_uri=job.checkpoint.uri if job.checkpoint else checkpoint.uri,
            checkpoint_time=checkpoint.newest,
            checkpoint_object=checkpoint.object_uri if checkpoint.newest else None,
            checkpoint_age_seconds=checkpoint.age_seconds if checkpoint.newest else None,
            restarts_from_step_zero=checkpoint.restarts_from_step_zero,
            lost_instance_hours=lost_instance_hours(
                job.instances, job.attempt_started_at, job.stopped_at, checkpoint.newest
            ),
        )

    def _reserve(
        self, record: Lineage | None, job: JobSnapshot, lineage: LineageView, attempt: AttemptRecord
    ) -> bool:
        base = record
        if base is None:
            # A job tagged as resubmission n whose record is gone counts n against this budget
            # (decision row 14): the rebuilt record says so.
            base = Lineage(
                lineage_id=lineage.ref.lineage_id,
                job_kind=job.kind,
                original_job_arn=job.arn,
                original_job_name=base_name(job.name),
                job_queue=job.job_queue,
                created_at=self.clock(),
                last_attempt=lineage.ref.attempt,
                used={attempt.category: lineage.ref.attempt} if lineage.ref.attempt else {},
                first_started_at=job.first_started_at if lineage.ref.attempt == 0 else None,
            )
        return self.lineage.reserve(base.with_attempt(attempt), previous=record)

    # ------------------------------------------------------------------ outcomes
    def _publish_resubmitted(
        self,
        event: JobEvent,
        job: JobSnapshot,
        decision: Decision,
        lineage_id: str,
        original_arn: str,
        attempt: AttemptRecord,
    ) -> RecoveryResult:
        facts = job.facts
        dry_run = attempt.state is AttemptState.DRY_RUN
        new = decision.row in (Row.DRY_RUN, Row.RESUBMIT)
        own = JobResubmitted(
            time=self.clock(),
            lineage_id=lineage_id,
            attempt=attempt.attempt,
            job_kind=job.kind,
            job_name=job.name,
            original_job_arn=original_arn,
            failed_job_arn=job.arn,
            new_job_arn=attempt.new_job_arn,
            new_job_name=attempt.new_job_name,
            job_queue=resource_name(job.job_queue),
            share_identifier=facts.share_identifier,
            quota_share=facts.quota_share,
            category=attempt.category,
            reason=attempt.reason,
            operation=attempt.operation,
            checkpoint_uri=attempt.checkpoint_uri,
            checkpoint_time=attempt.checkpoint_time,
            checkpoint_object=attempt.checkpoint_object,
            checkpoint_age_seconds=attempt.checkpoint_age_seconds,
            restarts_from_step_zero=attempt.restarts_from_step_zero,
            lost_instance_hours=round(attempt.lost_instance_hours, 4),
            budget_used=decision.used + (1 if new else 0),
            budget_limit=decision.limit,
            dry_run=dry_run,
        )
        attempt, tag_error = self._tag_successor(job, attempt)
        self._publish_attempt(lineage_id, attempt, own)
        points = [
            self._point("Resubmissions", 1.0, event, facts),
            self._point("LostInstanceHours", attempt.lost_instance_hours, event, facts),
        ]
        if tag_error is not None:
            points.append(self._point("SuccessorTagFailed", 1.0, event, facts))
        result = self._attempt_result(
            Action.DRY_RUN if dry_run else Action.RESUBMITTED,
            event,
            job,
            decision.row,
            lineage_id,
            attempt,
            new_job_arn=attempt.new_job_arn,
            message=(
                _step_zero_message(decision, new)
                if attempt.restarts_from_step_zero
                else (decision.message if dry_run and new else None)
            ),
            metrics=points,
        )
        result.tag_error = tag_error
        return result

    def _tag_successor(self, job: JobSnapshot, attempt: AttemptRecord) -> tuple[AttemptRecord, str | None]:
        """Tag the failed job with its successor's ARN and name, once per attempt (the attempt
        record remembers it, so a redelivery after a failed publish does not tag again; a
        duplicate event never gets here: it is ALREADY_HANDLED).

        Returns:
            The attempt (``successor_tagged`` set when tagged) and the error code when tagging
            failed: the resubmission stands, the failure is counted (``SuccessorTagFailed``) and
            logged (``tag_error``), and the tag is not retried.
        """
        if attempt.state is not AttemptState.SUBMITTED or not attempt.new_job_arn or attempt.successor_tagged:
            return attempt, None
        tags = {SUCCESSOR_ARN_TAG: attempt.new_job_arn, SUCCESSOR_NAME_TAG: attempt.new_job_name}
        try:
            self.jobs[job.kind].tag_successor(job.arn, tags)
        except TagError as exc:
            return attempt, exc.code
        return replace(attempt, successor_tagged=True), None

    def _submit_failed(
        self,
        event: JobEvent,
        job: JobSnapshot,
        decision: Decision,
        lineage_id: str,
        attempt: AttemptRecord,
        exc: SubmitError,
    ) -> RecoveryResult:
        failed = RecoveryFailed(
            time=self.clock(),
            job_arn=job.arn,
            job_kind=job.kind,
            job_name=job.name,
            job_queue=resource_name(job.job_queue),
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
            raise RetryLater(RetryReason.SUBMIT_FAILED, f"{attempt.operation} failed, will retry: {exc.code}")
        self._publish_attempt(
            lineage_id, replace(attempt, state=AttemptState.FAILED, error_code=exc.code), failed
        )
        return self._attempt_result(
            Action.FAILED,
            event,
            job,
            decision.row,
            lineage_id,
            attempt,
            error=f"{exc.code}: {_truncate(exc.message, 200)}",
            metrics=[self._point("RecoveryFailed", 1.0, event, job.facts)],
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
            raise RetryLater(RetryReason.NOT_PUBLISHED, f"{own.detail_type} not published: {exc}") from None
        self.lineage.update_attempt(lineage_id, replace(attempt, published=True))

    @staticmethod
    def _attempt_result(
        action: Action,
        event: JobEvent,
        job: JobSnapshot,
        row: Row,
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
            row,
            event.id,
            event.detail_type,
            job_arn=job.arn,
            job_kind=job.kind,
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

    @staticmethod
    def _result(action: Action, event: JobEvent, case: Case, row: Row, message: str) -> RecoveryResult:
        """The result of a skip or a duplicate: the job's fullest facts; the lineage when the row
        was decided on it."""
        facts = case.current
        lineage = case.lineage
        return RecoveryResult(
            action,
            row,
            event.id,
            event.detail_type,
            job_arn=facts.arn,
            job_kind=facts.kind,
            category=facts.category,
            message=message,
            lineage_id=lineage.ref.lineage_id if row.on_lineage and lineage is not UNKNOWN else None,
        )

    def _skip(self, event: JobEvent, case: Case, decision: Decision) -> RecoveryResult:
        facts = case.current
        row = decision.row
        reason = row.skip_reason
        if reason is None:
            raise RuntimeError(f"row {row.number} is not a skip")
        result = self._result(Action.SKIPPED, event, case, row, decision.message)
        # Only terminal failures are worth a notification; the same decision is published once.
        if not facts.terminal or facts.succeeded:
            return result
        if not self.lineage.claim_decision(facts.arn, facts.status, reason):
            result.action = Action.DUPLICATE
            return result
        budget = row is Row.BUDGET_EXHAUSTED
        own = RecoverySkipped(
            time=self.clock(),
            job_arn=facts.arn,
            job_kind=facts.kind,
            job_name=facts.name,
            job_queue=facts.queue,
            share_identifier=facts.share_identifier,
            quota_share=facts.quota_share,
            category=facts.category,
            skip_reason=reason,
            message=decision.message,
            lineage_id=result.lineage_id,
            budget_used=decision.used if budget else None,
            budget_limit=decision.limit if budget else None,
            critical=row.critical,
            dry_run=self.settings.dry_run_reason is not None,
        )
        try:
            self.events.publish([own])
        except PublishError as exc:
            self.lineage.release_decision(facts.arn, facts.status)
            raise RetryLater(RetryReason.NOT_PUBLISHED, f"Recovery Skipped not published: {exc}") from None
        # The reason per category is the question; the queue is per-job detail (the Recovery
        # Skipped event and the log name the job), a dimension only with MetricsDetail=detailed.
        result.metrics = [self._point("RecoverySkipped", 1.0, event, facts, reason.value, by_queue=False)]
        if self.settings.metrics_detail is MetricsDetail.DETAILED and facts.queue:
            result.metrics.append(self._point("RecoverySkipped", 1.0, event, facts, reason.value))
        return result

    def _duplicate(self, event: JobEvent, case: Case, row: Row, message: str) -> RecoveryResult:
        return self._result(Action.DUPLICATE, event, case, row, message)

    def _point(
        self,
        name: str,
        value: float,
        event: JobEvent,
        facts: JobFacts,
        skip_reason: str | None = None,
        *,
        by_queue: bool = True,
    ) -> MetricPoint:
        return MetricPoint(
            name=name,
            unit="Count",
            value=max(0.0, float(value)),
            dimensions=dimensions(
                JobKind=facts.kind.value,
                JobQueue=facts.queue if by_queue else None,
                FailureCategory=facts.category.value if facts.category is not None else None,
                SkipReason=skip_reason,
            ),
            timestamp=metric_timestamp(event.time, self.clock()),
        )
