"""The job ledger's work: apply an SQS batch of job events; on schedule, reconcile queues and
publish gauges.

Orchestrates through :mod:`batchpilot.ledger.ports` only (no boto3, no Powertools, no
``os.environ``, no wall clock: a :data:`~batchpilot.shared.clock.Clock` is injected).

Per SQS batch (:meth:`LedgerService.records`): one BatchGetItem of the records of every job the
batch names (strongly consistent; keys DynamoDB leaves unprocessed are read with GetItem); per job,
its records applied in order in memory (:func:`~batchpilot.ledger.model.transition` per record, so
each record's metrics are what it alone would make) and at most one describe (only for a job the
ledger never saw, or one whose earlier describe failed); then one TransactWriteItems per job the
batch changed (none for a job whose records are all duplicates or late), holding its final record
and the aggregate deltas from its first to its final state. A write that lost a race is read
(GetItem) and folded again (at most :data:`WRITE_ATTEMPTS` times; then the job's records fail
and SQS delivers them again; the batch's other jobs are unaffected). A preemption or
interruption that lost an attempt of a job with a checkpoint location (``CheckpointConfig.S3Uri``)
also lists that location once (ListObjectsV2, through the S3 adapter recovery uses):
``LostInstanceHours`` is then the work since the newest checkpoint written during the attempt
(``Basis=checkpoint``), else the whole attempt (``Basis=attempt``). A listing that fails falls
back to the whole attempt: the metric is never lost, the failure is said once per bucket in the
log and named in the record's log line.

Per scheduled run (:meth:`LedgerService.run`): DescribeJobQueues, one BatchGetItem of every
queue's reconciliation marker, one Query of aggregates per queue, one ``Limit=1`` Query of the RUNNABLE
index per (queue, share) with RUNNABLE jobs (the per-minute ``OldestRunnableAge``,
:mod:`batchpilot.ledger.runnable`), one DescribeServiceEnvironments, one DescribeSchedulingPolicies
per fair-share policy at most every :data:`POLICY_TTL` per Lambda instance; and, for at most
``ceil(queues / interval minutes)`` queues (unfinished listings first, then those whose interval
has passed, the longest-waiting first), their listing (ListServiceJobs / ListJobs per active
status, one page at a time) compared with the ledger's index of the queue: drift in both
directions is corrected through the same transitions as events, and counted in ``LedgerDrift``.
The listings of a run request at most ``list_pages_per_run`` pages and none with less than
:data:`RECONCILE_RESERVE` seconds left; a listing that stops keeps its cursor (``nextToken``) in
the queue's marker and the next run resumes it; ``ReconcilePending`` counts the queues still due
or unfinished. A pass that spans runs records the ARNs each run listed (one PutItem per run,
:meth:`~batchpilot.ledger.ports.LedgerStore.save_seen`); at its end the jobs the ledger holds as
active that no run of the pass listed are asked about (DescribeServiceJob per job, DescribeJobs per
100, within the same request budget, resumed next run) and closed with what AWS Batch says
(``FAILED`` when it no longer knows them).

Starvation (:mod:`batchpilot.ledger.starvation`): a transition that counts the job's ``N``-th
preemption (or a later one), and, on every scheduled run, the oldest RUNNABLE job of each (queue,
share), are checked; a job that is starving is claimed with one conditional PutItem per reason,
published as ``Job Starving`` and the claim confirmed with one UpdateItem (a claim whose event could
not be published is given back; one never confirmed, its invocation killed, is taken over after its
lease, so the event is published at least once and the alerts function sends one message).
Per run: at most one PutItem per (queue, share) past its threshold and below its entitlement
(none for a job this Lambda instance already claimed), plus one GetItem, one PutEvents and one
UpdateItem per newly starving job.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from batchpilot.ledger.fleet import FleetInputs, effect_points, fleet_points
from batchpilot.ledger.idle import idle_points
from batchpilot.ledger.model import (
    ACTIVE,
    Effects,
    JobDetails,
    JobStatus,
    LedgerJob,
    Observation,
    PreemptionPhase,
    Source,
    Transition,
    aggregate_deltas,
    transition,
    with_checkpoint,
    with_details,
)
from batchpilot.ledger.observe import observe
from batchpilot.ledger.ports import (
    DESCRIBE_JOBS_MAX,
    ActiveEntry,
    Aggregate,
    BatchReader,
    CheckpointReader,
    CursorExpired,
    DescribeError,
    EventPublisher,
    LedgerStore,
    ListedJob,
    MetricSink,
    QueueInfo,
    QuotaShareLimit,
    ReconcileCursor,
    ReconcileState,
)
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.ledger.starvation import ShareStanding, StarvationRules, share_standing, starving_event
from batchpilot.shared.checkpoints import CheckpointListError, parse_s3_uri
from batchpilot.shared.classification import Category, JobKind
from batchpilot.shared.clock import Clock
from batchpilot.shared.correlation import for_record
from batchpilot.shared.deadline import DEADLINE
from batchpilot.shared.errors import is_permanent
from batchpilot.shared.events import JobEvent
from batchpilot.shared.metrics import MetricPoint, dimensions, metric_timestamp
from batchpilot.shared.own_events import PublishError, StarvationReason
from batchpilot.shared.records import Outcome, Rejected, decode, permanently_refused

__all__ = ["WRITE_ATTEMPTS", "Drift", "LedgerService", "RecordResult", "RunSummary", "WriteConflict"]

WRITE_ATTEMPTS = 5
"""Read-modify-write attempts per observation before giving up (the record is retried by SQS)."""
POLICY_TTL = timedelta(minutes=15)
"""How long a Lambda instance reuses a scheduling policy's weights (DescribeSchedulingPolicies)."""
RECONCILE_RESERVE = 15.0
"""Seconds of the invocation (``batchpilot.shared.deadline.DEADLINE``; LedgerFunction's timeout is
30 s) a reconciliation leaves for the rest of the run: no listing page is requested with less
left. It covers one more request's worst case (``batchpilot.io.deadline`` refuses an attempt whose
connect plus read timeout and margin do not fit, 13 s) and the aggregates, gauges and starvation
reads after the listings."""
_CLAIMS_KEPT = 10_000
"""Starvation claims a Lambda instance remembers (so a job still starving is not claimed again
every minute)."""


class WriteConflict(RuntimeError):
    """Other writers kept changing the job's record: transient, the record is delivered again."""


class Drift(StrEnum):
    """What a reconciliation corrected (``Drift`` dimension of ``LedgerDrift``)."""

    MISSING = "missing"
    """AWS Batch lists the job as active; the ledger did not have it (a missed event, or a job
    submitted before the deploy: AWS Batch sends no event for SUBMITTED)."""
    STALE = "stale"
    """The ledger had another status than AWS Batch lists."""
    GONE = "gone"
    """The ledger held the job as active; a whole pass of AWS Batch's listings did not list it
    (its end was missed). It is closed with the status DescribeJobs / DescribeServiceJob gives, or
    as FAILED when AWS Batch no longer knows it (ended and aged out)."""


@dataclass(frozen=True, slots=True)
class RecordResult:
    """One record's outcome and the log fields that go with it."""

    outcome: Outcome | Rejected
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Step:
    """What one observation did within a fold: its transition (``None``: it changed nothing) and
    the job's record after it (``None``: still unknown)."""

    change: Transition | None
    job: LedgerJob | None


@dataclass
class RunSummary:
    """What one scheduled run did (returned to the scheduler, logged).

    Attributes:
        queues: queues with gauges; ``reconciled``: queues listed this run.
        drift: drift kind → jobs corrected; ``describes``: describes made; ``points``: gauges.
        starving: ``Job Starving`` events published; ``starving_unpublished``: those whose
            PutEvents failed (their claim given back: the next run tries again).
        pages: ListJobs / ListServiceJobs pages requested; ``resumed``: queues whose listing
            continued from a cursor; ``unfinished``: queues whose listing stopped (page budget or
            time) with its cursor kept; ``pending``: queues due or unfinished after the run
            (``ReconcilePending``); ``restarted``: queues whose kept ``nextToken`` AWS Batch
            refused (their listing started over); ``checks``: DescribeJobs / DescribeServiceJob
            requests asking about active jobs a whole pass did not list.
    """

    queues: int = 0
    reconciled: list[str] = field(default_factory=list)
    drift: Counter[str] = field(default_factory=Counter)
    describes: int = 0
    points: int = 0
    starving: int = 0
    starving_unpublished: int = 0
    pages: int = 0
    resumed: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    pending: int = 0
    restarted: list[str] = field(default_factory=list)
    checks: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "queues": self.queues,
            "reconciled": self.reconciled,
            "drift": dict(self.drift),
            "describes": self.describes,
            "points": self.points,
            "starving": self.starving,
            "starving_unpublished": self.starving_unpublished,
            "pages": self.pages,
            "resumed": self.resumed,
            "unfinished": self.unfinished,
            "pending": self.pending,
            "restarted": self.restarted,
            "checks": self.checks,
        }


class LedgerService:
    """The ledger's use cases.

    Args:
        settings: validated settings.
        store: the ledger's items.
        batch: AWS Batch reads.
        sink: where metric points go.
        clock: "now" (aware UTC).
        warn: called as ``warn(subject, consequence)`` once per unreadable scheduling policy
            (its ARN), queue's quota shares or checkpoint bucket (the handler logs it).
        publisher: where ``Job Starving`` goes; ``None``: starvation is not checked.
        checkpoints: checkpoint listings; ``None``: ``LostInstanceHours`` is always the whole
            attempt.
    """

    def __init__(
        self,
        settings: LedgerSettings,
        store: LedgerStore,
        batch: BatchReader,
        sink: MetricSink,
        clock: Clock,
        *,
        warn: Any = None,
        publisher: EventPublisher | None = None,
        checkpoints: CheckpointReader | None = None,
    ) -> None:
        self.settings = settings
        self.publisher = publisher
        self.checkpoints = checkpoints
        waiting, queue_waiting = settings.starving_waiting
        self.starvation = StarvationRules(settings.starving_preemptions, waiting, queue_waiting)
        self.store = store
        self.batch = batch
        self.sink = sink
        self.clock = clock
        self._warn = warn
        # Policies, quota shares and checkpoint buckets already reported as unreadable: the log
        # says so once per Lambda instance, not every minute.
        self._unreadable: set[str] = set()
        # Jobs whose Job Starving (per reason) this instance already claimed: not claimed again.
        self._claimed: set[tuple[str, StarvationReason]] = set()
        # Fair-share weights per scheduling policy ARN, read at most every POLICY_TTL per Lambda
        # instance (policies rarely change; a change shows in Entitlement within the TTL).
        self._policies: dict[str, tuple[datetime, dict[str, float] | None]] = {}

    # ------------------------------------------------------------------ events
    def records(
        self, bodies: Sequence[str | bytes], record_ids: Sequence[str | None] | None = None
    ) -> list[RecordResult | Exception]:
        """One SQS batch of bodies (job events) → the ledger updated and the event metrics
        buffered; one result per body, in order.

        ``record_ids`` (the records' SQS ``messageId`` s, same order) mark each record's metric
        points and ``Job Starving`` as its own (:func:`batchpilot.shared.correlation.for_record`);
        without them they are the batch's.

        The records of every job the batch names are read with one BatchGetItem; the
        observations of each job are applied in batch order in memory (:func:`transition` per
        observation, so each record's effects and metrics are what it alone would make) and
        written with one TransactWriteItems per job (:meth:`_fold`); a job the ledger lacks the
        details of is described at most once per batch. Points are buffered in record order.

        Returns:
            Per body a :class:`RecordResult` (PROCESSED: the record changed the job; DUPLICATE: a
            duplicate or late event, nothing changed; IGNORED: not a job the ledger tracks; or a
            :class:`Rejected`: malformed, or ``permanent`` when DynamoDB, AWS Batch or EventBridge
            refused its request for good, :func:`batchpilot.shared.errors.is_permanent`, e.g. a
            ``ValidationException`` of TransactWriteItems), or the exception that record must be
            retried for:
            ``WriteConflict`` or ``botocore.exceptions.ClientError`` for every record of a job
            whose read or write failed (SQS delivers them again; status rank and event time keep
            the order); ``PublishError`` (or the claim's ``ClientError``) for a record whose
            ``Job Starving`` could not be published (its claim given back; the redelivery, a
            duplicate, checks the job again).
        """
        ids = list(record_ids) if record_ids is not None else [None] * len(bodies)
        results: dict[int, RecordResult | Exception] = {}
        by_job: dict[str, list[tuple[int, JobEvent, Observation]]] = {}
        for index, body in enumerate(bodies):
            event = decode(body)
            if isinstance(event, Rejected):
                results[index] = RecordResult(event)
                continue
            obs = observe(event)
            if obs is None:
                fields = {"event_id": event.id, "detail_type": event.detail_type}
                results[index] = RecordResult(Outcome.IGNORED, fields)
                continue
            by_job.setdefault(obs.arn, []).append((index, event, obs))
        points: dict[int, list[MetricPoint]] = {}
        try:
            known = self.store.get_many(list(by_job)) if by_job else {}
        except Exception as exc:  # DynamoDB failed: every job record is delivered again
            known, by_job = {}, self._fail(by_job, exc, results)
        for arn, deliveries in by_job.items():
            try:
                steps = self._fold(arn, known.get(arn), [obs for _, _, obs in deliveries])
            except Exception as exc:  # its read or write failed: each of its records is retried
                self._fail({arn: deliveries}, exc, results)
                continue
            for (index, event, obs), step in zip(deliveries, steps, strict=True):
                try:
                    with for_record(ids[index]):
                        results[index] = self._settle(event, obs, step, points.setdefault(index, []))
                except Exception as exc:  # its Job Starving claim or PutEvents failed: retried alone
                    results[index] = _permanent(exc, event, arn) if is_permanent(exc) else exc
        for index in sorted(points):
            with for_record(ids[index]):
                self.sink.add(points[index])
        return [results[index] for index in range(len(bodies))]

    def record(self, body: str | bytes) -> RecordResult:
        """One SQS body alone (:meth:`records` of a batch of one).

        Raises:
            WriteConflict, botocore.exceptions.ClientError, PublishError: as :meth:`records`
                returns them.
        """
        (result,) = self.records([body])
        if isinstance(result, Exception):
            raise result
        return result

    @staticmethod
    def _fail(
        by_job: dict[str, list[tuple[int, JobEvent, Observation]]],
        exc: Exception,
        results: dict[int, RecordResult | Exception],
    ) -> dict[str, list[tuple[int, JobEvent, Observation]]]:
        """Every record of ``by_job`` fails with ``exc`` (retried), or, for an error no retry can
        fix (:func:`batchpilot.shared.errors.is_permanent`), is reported ``invalid`` and
        ``permanent`` (not retried); returns no jobs left to apply."""
        for arn, deliveries in by_job.items():
            for index, event, _ in deliveries:
                results[index] = _permanent(exc, event, arn) if is_permanent(exc) else exc
        return {}

    def _settle(
        self, event: JobEvent, obs: Observation, step: _Step, points: list[MetricPoint]
    ) -> RecordResult:
        """One record after its job's write: its metric points into ``points``, its starvation
        check, its result."""
        fields: dict[str, Any] = {"event_id": event.id, "job_arn": obs.arn, "status": obs.status.value}
        change = step.change
        if change is None:
            # A redelivery of a preemption whose Job Starving was not published: check again.
            if self.publisher is not None and (
                obs.preemption is PreemptionPhase.COMPLETED or obs.category is Category.PREEMPTION
            ):
                job = step.job
                if job is not None and self.starvation.preempted_repeatedly(job):
                    self._publish_once(
                        job, StarvationReason.PREEMPTED_REPEATEDLY, self.clock(), as_of=job.status_at
                    )
            return RecordResult(Outcome.DUPLICATE, fields)
        now = self.clock()
        effects, unreadable = self._lost_from_checkpoint(change)
        if effects.basis is not None:
            fields["basis"] = effects.basis.value
        if unreadable is not None:
            fields["checkpoint_unreadable"] = unreadable
        points.extend(effect_points(change.new, effects, metric_timestamp(event.time, now)))
        reason = StarvationReason.PREEMPTED_REPEATEDLY
        repeated = change.effects.preempted and self.starvation.preempted_repeatedly(change.new)
        if repeated and self._publish_once(change.new, reason, now, as_of=change.new.status_at):
            fields["starving"] = reason.value
        return RecordResult(Outcome.PROCESSED, fields)

    def _lost_from_checkpoint(self, change: Transition) -> tuple[Effects, str | None]:
        """``change``'s effects, ``LostInstanceHours`` measured from the job's newest checkpoint
        when it has a location and one was written during the lost attempt
        (:func:`~batchpilot.ledger.model.with_checkpoint`); and the S3 error code when the
        location could not be listed (the effects then keep the whole attempt). Only objects
        written by the attempt's stop count: the listing may run after the next attempt wrote
        its own (a late or redelivered event, reconciliation, a replay)."""
        effects = change.effects
        location = parse_s3_uri(change.new.details.checkpoint, "CheckpointConfig.S3Uri")
        if effects.lost_instance_hours is None or location is None or self.checkpoints is None:
            return effects, None
        try:
            state = self.checkpoints.inspect(location, written_by=change.new.status_at)
        except CheckpointListError as exc:
            subject = f"checkpoint bucket {location.bucket}"
            if subject not in self._unreadable:
                self._unreadable.add(subject)
                if self._warn is not None:
                    self._warn(subject, f"{exc.code}: LostInstanceHours measured from the whole attempt")
            return effects, exc.code
        return with_checkpoint(change, state.newest), None

    def _publish_once(
        self,
        job: LedgerJob,
        reason: StarvationReason,
        now: datetime,
        standing: ShareStanding | None = None,
        *,
        as_of: datetime | None = None,
    ) -> bool:
        """Claim, publish and confirm ``job``'s ``Job Starving`` for ``reason``; ``False`` when it
        was already claimed (or there is no publisher). ``now`` (the clock) dates the claim and
        the event; ``as_of`` (event time) ends its durations (:func:`starving_event`; ``None``:
        ``now``, the scheduled check). Killed between the claim and the confirm,
        the claim is taken over after its lease and published again: at least once, and the alerts
        function keeps one message per (job, reason).

        Raises:
            PublishError: PutEvents failed (the claim is given back first).
        """
        if self.publisher is None or not self.store.claim_starvation(job.arn, reason, now):
            return False
        event = starving_event(job, reason, now, self.starvation, standing, as_of)
        try:
            self.publisher.publish([event])
        except PublishError:
            self.store.release_starvation(job.arn, reason)
            raise
        self.store.confirm_starvation(job.arn, reason)
        return True

    def apply(self, obs: Observation, *, describe: bool = True) -> Transition | None:
        """Apply one observation (GetItem of the job's record; a describe first when the ledger
        lacks its details and ``describe`` allows it).

        Returns:
            The transition written, or ``None`` when it changed nothing.

        Raises:
            WriteConflict: :data:`WRITE_ATTEMPTS` writes lost their race.
        """
        (step,) = self._fold(obs.arn, self.store.get(obs.arn), [obs], describe=describe)
        return step.change

    def _fold(
        self,
        arn: str,
        current: LedgerJob | None,
        observations: Sequence[Observation],
        *,
        describe: bool = True,
    ) -> list[_Step]:
        """Apply ``observations`` of job ``arn``, in order, to ``current`` (its record as read) in
        memory, and write the final record once: one TransactWriteItems whose aggregate deltas are
        ``contribution(final) - contribution(current)`` (the sum of every step's) and whose index
        changes go from ``current`` to the final record; nothing when no observation changed it.
        A write that lost its race reads the record (GetItem) and folds again. The job is described
        at most once (the first observation that needs it; the outcome is reused).

        Returns:
            One :class:`_Step` per observation, in order.

        Raises:
            WriteConflict: :data:`WRITE_ATTEMPTS` writes lost their race.
        """
        asked: tuple[JobDetails | None, bool] | None = None  # (described, failed) once asked
        for _ in range(WRITE_ATTEMPTS):
            job, steps = current, []
            for obs in observations:
                described, failed = None, False
                # A finished job is not worth a describe: it no longer counts in any aggregate.
                needs = (job is None or not (job.details.sized or job.terminal)) and obs.status in ACTIVE
                if describe and needs and not obs.details.sized and obs.kind is not JobKind.TRAINING_JOB:
                    if asked is None:
                        asked = self._describe(obs)
                    described, failed = asked
                change = self._change(job, obs, described, failed)
                if change is not None:
                    job = change.new
                steps.append(_Step(change, job))
            if job is current or job is None:
                return steps  # nothing changed: nothing to write
            if self.store.write(
                Transition(current, job, aggregate_deltas(current, job), Effects()), self.clock()
            ):
                return steps
            current = self.store.get(arn)  # lost a race: read what the other writer wrote
        raise WriteConflict(f"job record kept changing after {WRITE_ATTEMPTS} attempts")

    def _describe(self, obs: Observation) -> tuple[JobDetails | None, bool]:
        """``(details, failed)`` of the job's describe; ``failed``: it raised :class:`DescribeError`
        (counted at the queue's mean size; the next batch's observation reads again)."""
        try:
            return self.batch.describe(obs.arn, obs.kind), False
        except DescribeError:
            return None, True

    @staticmethod
    def _change(
        current: LedgerJob | None, obs: Observation, described: JobDetails | None, failed: bool
    ) -> Transition | None:
        if described is not None:
            obs = dataclasses.replace(obs, details=_prefer(described, obs.details))
        change = transition(current, obs)
        if change is None and current is not None and described is not None and not current.terminal:
            change = with_details(current, described)
        if change is not None and failed:
            new = dataclasses.replace(change.new, describe_failures=change.new.describe_failures + 1)
            change = dataclasses.replace(change, new=new)
        return change

    # ------------------------------------------------------------------ schedule
    def run(self, now: datetime) -> RunSummary:
        """One scheduled run: reconcile the queues whose interval has passed, publish gauges.

        Raises:
            botocore.exceptions.ClientError: AWS Batch or DynamoDB failed (the run fails; the next
                minute's run starts over).
        """
        summary = RunSummary()
        wanted = set(self.settings.job_queues)
        queues = {q.name: q for q in self.batch.job_queues() if not wanted or q.name in wanted}
        interval = timedelta(minutes=self.settings.reconcile_minutes)
        states = self.store.reconcile_states(sorted(queues)) if queues else {}
        unfinished = sorted(
            (q for q in queues.values() if states[q.name].cursor is not None),
            key=lambda q: (_started(states[q.name]), q.name),
        )
        due = sorted(
            (
                q
                for q in queues.values()
                if states[q.name].cursor is None and _due(states[q.name], now, interval)
            ),
            key=lambda q: (states[q.name].at is not None, states[q.name].at or now, q.name),
        )
        # Unfinished listings first (oldest pass first), then the longest-waiting due queues: at
        # most ceil(queues / minutes) queues a run, so no run pages through every queue at once;
        # and at most list_pages_per_run pages, stopping RECONCILE_RESERVE seconds before the
        # timeout: a listing that does not fit keeps its cursor and resumes next run.
        chosen = (unfinished + due)[: math.ceil(len(queues) / self.settings.reconcile_minutes)]
        budget = self.settings.describes_per_run // len(chosen) if chosen else 0
        oldest: dict[tuple[str, str], datetime] = {}
        oldest_arn: dict[tuple[str, str], str] = {}
        pages = self.settings.list_pages_per_run
        for queue in chosen:
            state = states[queue.name]
            pages -= self._reconcile(queue, state, now, budget, pages, summary, oldest, oldest_arn)
        summary.pending = len(unfinished) + len(due) - len(summary.reconciled)
        known = self.store.queues()
        names = sorted(set(queues) | {q for q in known if not wanted or q in wanted})
        aggregates = {name: self.store.aggregates(name) for name in names}
        self._oldest_runnable(aggregates, oldest, oldest_arn)
        environments = sorted(
            {q.environment for q in queues.values() if q.environment} | {e for e in known.values() if e}
        )
        limits = self.batch.capacity_limits(environments)
        reserved = {
            env: self.settings.reserved.get(env, self.settings.policy_max.get(env, limits.get(env, 0)))
            for env in environments
        }
        weights: dict[str, dict[str, float] | None] = {}
        for name, info in queues.items():
            if info.scheduling_policy_arn:
                weights[name] = self._weights(info.scheduling_policy_arn, now)
        quota_limits: dict[str, dict[str, int] | None] = {}
        lenders: dict[str, frozenset[str]] = {}
        for name, aggs in aggregates.items():
            if any(agg.quota for agg in aggs):  # only queues with quota shares: one call each
                shares = self._quota_shares(name)
                quota_limits[name] = None if shares is None else {s: q.limit for s, q in shares.items()}
                if shares is not None:
                    lenders[name] = frozenset(s for s, q in shares.items() if q.lends)
        inputs = FleetInputs(queues, aggregates, limits, reserved, weights, oldest, quota_limits)
        points = fleet_points(inputs, now, self.settings.metrics_detail)
        # Reserved instances idle while jobs that fit wait in another environment; quota shares lending.
        points += idle_points(
            inputs, now, self.settings.metrics_detail, self.settings.reserved_types, lenders
        )
        for drift_queue in summary.reconciled + summary.unfinished:
            for kind in Drift:
                value = summary.drift.get(f"{drift_queue}:{kind.value}", 0)
                if not value:  # only drift found is a series (billed per hour published)
                    continue
                dims = dimensions(JobQueue=drift_queue, Drift=kind.value)
                points.append(MetricPoint("LedgerDrift", "Count", float(value), dims, now))
        points.append(MetricPoint("ReconcilePending", "Count", float(summary.pending), dimensions(), now))
        self.sink.add(points)
        summary.queues = len(aggregates)
        summary.points = len(points)
        self._check_waiting(now, points, oldest, oldest_arn, summary)
        return summary

    def _oldest_runnable(
        self,
        aggregates: dict[str, list[Aggregate]],
        oldest: dict[tuple[str, str], datetime],
        oldest_arn: dict[tuple[str, str], str],
    ) -> None:
        """Each (queue, share) with RUNNABLE jobs: its oldest from the RUNNABLE index (one read),
        unless a reconciliation this run found an older one (a job the index does not hold)."""
        for queue, aggs in aggregates.items():
            shares = {a.key.share for a in aggs if a.key.status is JobStatus.RUNNABLE and a.total.jobs > 0}
            for share in sorted(shares):
                entry = self.store.oldest_runnable(queue, share)
                share_key = (queue, share)
                if entry is not None and (share_key not in oldest or entry.since < oldest[share_key]):
                    oldest[share_key] = entry.since
                    oldest_arn[share_key] = entry.arn

    def _check_waiting(
        self,
        now: datetime,
        points: list[MetricPoint],
        oldest: dict[tuple[str, str], datetime],
        oldest_arn: dict[tuple[str, str], str],
        summary: RunSummary,
    ) -> None:
        """Each (queue, share)'s oldest RUNNABLE job: starving while its share is below its
        entitlement? Claimed before it is read, so a job already reported costs one PutItem (none
        when this Lambda instance claimed it already)."""
        publisher = self.publisher
        if publisher is None:
            return
        standings = share_standing(points)
        reason = StarvationReason.WAITING_BELOW_ENTITLEMENT
        for (queue, share), since in sorted(oldest.items()):
            standing = standings.get((queue, share), ShareStanding())
            if now - since <= self.starvation.waiting_for(queue) or not standing.below_entitlement:
                continue
            arn = oldest_arn[(queue, share)]
            if (arn, reason) in self._claimed:
                continue
            if not self.store.claim_starvation(arn, reason, now):
                self._remember_claim(arn, reason)
                continue
            job = self.store.get(arn)
            if job is None or not self.starvation.waiting_below_entitlement(job, standing, now):
                self.store.release_starvation(arn, reason)  # it started (or ended) meanwhile
                continue
            try:
                publisher.publish([starving_event(job, reason, now, self.starvation, standing)])
            except PublishError:
                self.store.release_starvation(arn, reason)
                summary.starving_unpublished += 1
                continue
            self.store.confirm_starvation(arn, reason)
            self._remember_claim(arn, reason)
            summary.starving += 1

    def _remember_claim(self, arn: str, reason: StarvationReason) -> None:
        if len(self._claimed) >= _CLAIMS_KEPT:
            self._claimed.clear()  # bounded: a forgotten claim costs one conditional PutItem again
        self._claimed.add((arn, reason))

    def _warn_once(self, subject: str, consequence: str) -> None:
        if subject not in self._unreadable:
            self._unreadable.add(subject)
            if self._warn is not None:
                self._warn(subject, consequence)

    def _quota_shares(self, queue: str) -> dict[str, QuotaShareLimit] | None:
        limits = self.batch.quota_shares(queue)
        if limits is None and f"quota:{queue}" not in self._unreadable:
            self._unreadable.add(f"quota:{queue}")
            if self._warn is not None:
                self._warn(
                    f"quota shares of job queue {queue}",
                    "Entitlement, BorrowedInstances and LentInstances omitted",
                )
        return limits

    def _weights(self, policy_arn: str, now: datetime) -> dict[str, float] | None:
        cached = self._policies.get(policy_arn)
        if cached is not None and now - cached[0] < POLICY_TTL:
            return cached[1]
        weights = self.batch.share_weights(policy_arn)
        self._policies[policy_arn] = (now, weights)
        if weights is None and policy_arn not in self._unreadable:
            self._unreadable.add(policy_arn)
            if self._warn is not None:
                self._warn(policy_arn, "Entitlement omitted")
        return weights

    def _reconcile(
        self,
        queue: QueueInfo,
        state: ReconcileState,
        now: datetime,
        budget: int,
        pages: int,
        summary: RunSummary,
        oldest: dict[tuple[str, str], datetime],
        oldest_arn: dict[tuple[str, str], str],
    ) -> int:
        """List ``queue`` from its cursor (or from the start) for at most ``pages`` requests, while
        more than :data:`RECONCILE_RESERVE` seconds are left, correcting each page's jobs the ledger
        lacks or holds with another status; then check the jobs the ledger holds as active that
        the pass did not list (:meth:`_check_unseen`) and close those AWS Batch says ended or no
        longer knows (``gone``). A pass that stops (listing or checking) records the ARNs this run
        listed (:meth:`LedgerStore.save_seen`, keyed by where the run began: a run killed and run
        again writes the same items), then keeps its cursor (one PutItem), and resumes next run;
        its pages already applied are applied again harmlessly (a transition to the status the
        ledger holds changes nothing), and a job closed before a kill is no longer active, so it is
        neither checked nor closed again.

        Returns:
            AWS Batch requests made (listing pages and checks), counted in ``pages``.
        """
        cursor = state.cursor
        fresh = cursor is None  # no earlier run of this pass: nothing seen is stored
        if cursor is None:
            cursor = ReconcileCursor(0, None, now)
        else:
            summary.resumed.append(queue.name)
        begun = cursor  # where this run began: names what it records as seen
        held = {entry.arn: entry for entry in self.store.active(queue.name)}
        listed: dict[str, ListedJob] = {}
        drift: Counter[Drift] = Counter()
        used = 0
        finished = cursor.checking
        while not finished:
            if used >= pages or DEADLINE.time_left() < RECONCILE_RESERVE:
                break
            try:
                page = self.batch.list_page(queue, cursor.status, cursor.token)
            except CursorExpired:
                used += 1  # the refused request counts in the budget
                cursor = begun = ReconcileCursor(0, None, now)  # the listing starts over: a new pass
                fresh = True
                summary.restarted.append(queue.name)
                continue
            used += 1
            listed.update((job.arn, job) for job in page.jobs)
            changed = [
                job for job in page.jobs if (e := held.get(job.arn)) is None or e.status is not job.status
            ]
            # One BatchGetItem per page (not one GetItem per job) reads the records to fold onto.
            records = self.store.get_many([job.arn for job in changed]) if changed else {}
            for job in changed:
                entry = held.get(job.arn)
                budget = self._take_in(queue, job, entry, records.get(job.arn), now, budget, summary, drift)
            if page.next_token is not None:
                cursor = dataclasses.replace(cursor, token=page.next_token)
            elif cursor.status + 1 < page.statuses:
                cursor = dataclasses.replace(cursor, status=cursor.status + 1, token=None)
            else:
                finished = True
        summary.pages += used
        if not finished:
            self._keep(queue.name, state.at, begun, cursor, list(listed))
            self._count_drift(queue.name, drift, summary)
            summary.unfinished.append(queue.name)
            return used
        if not begun.checking:
            for arn, entry in held.items():
                if arn in listed and not entry.sized and budget > 0:
                    # Known but never sized (its describe failed): read it now.
                    budget -= 1
                    summary.describes += 1
                    self._size(arn, entry.kind)
        seen = set(listed) if fresh else set(listed) | self.store.seen(queue.name, cursor.started)
        unseen = [entry for arn, entry in sorted(held.items()) if arn not in seen]
        requests, confirmed, left = self._check_unseen(queue.name, unseen, now, pages - used, summary, drift)
        used += requests
        self._count_drift(queue.name, drift, summary)
        if left:
            checking = dataclasses.replace(cursor, status=0, token=None, checking=True)
            self._keep(queue.name, state.at, begun, checking, list(listed), confirmed)
            summary.unfinished.append(queue.name)
            return used
        for entry in self.store.active(queue.name):
            if entry.status is JobStatus.RUNNABLE and entry.runnable_since is not None:
                share_key = (queue.name, entry.share)
                if share_key not in oldest or entry.runnable_since < oldest[share_key]:
                    oldest[share_key] = entry.runnable_since
                    oldest_arn[share_key] = entry.arn
        self.store.mark_reconciled(queue.name, now)
        summary.reconciled.append(queue.name)
        return used

    @staticmethod
    def _count_drift(queue: str, drift: Counter[Drift], summary: RunSummary) -> None:
        for kind, count in drift.items():
            summary.drift[f"{queue}:{kind.value}"] += count

    def _keep(
        self,
        queue: str,
        at: datetime | None,
        begun: ReconcileCursor,
        cursor: ReconcileCursor,
        listed: Sequence[str],
        confirmed: Sequence[str] = (),
    ) -> None:
        """Record what this run of an unfinished pass saw, then its cursor (in that order: killed
        between the two, the next run lists those pages again and records the same items)."""
        if listed:
            token = begun.token or "first"
            self.store.save_seen(queue, cursor.started, f"list#{begun.status}#{token}", listed)
        if confirmed:
            # The first ARN this run checked: the same after a kill (the candidates are sorted and
            # those checked before are seen or closed), another in every later run.
            self.store.save_seen(queue, cursor.started, f"check#{min(confirmed)}", confirmed)
        self.store.save_cursor(queue, at, cursor)

    def _check_unseen(
        self,
        queue: str,
        unseen: Sequence[ActiveEntry],
        now: datetime,
        requests: int,
        summary: RunSummary,
        drift: Counter[Drift],
    ) -> tuple[int, list[str], int]:
        """Ask AWS Batch about ``unseen`` (jobs the ledger holds as active that the whole pass did
        not list), in ARN order, for at most ``requests`` requests (DescribeServiceJob: one job;
        DescribeJobs: :data:`~batchpilot.ledger.ports.DESCRIBE_JOBS_MAX` jobs), none with less than
        :data:`RECONCILE_RESERVE` seconds left, stopping at a failed describe (this pass then ends
        without the jobs left: the next pass asks again). A job AWS Batch says ended is closed with
        that status, one it no longer knows as ``FAILED`` (both ``gone``); one still active takes
        the status AWS Batch gives (``stale`` when it differs) and is returned as seen.

        Returns:
            (requests made, ARNs found still active, jobs left unchecked).
        """
        made, confirmed = 0, list[str]()
        records: dict[str, LedgerJob | None] = {}
        kinds = sorted({entry.kind for entry in unseen})
        by_kind = {kind: [e.arn for e in unseen if e.kind is kind] for kind in kinds}
        left = len(unseen)
        for kind, arns in by_kind.items():
            size = 1 if kind is JobKind.SERVICE_JOB else DESCRIBE_JOBS_MAX
            for start in range(0, len(arns), size):
                if made >= requests or DEADLINE.time_left() < RECONCILE_RESERVE:
                    return made, confirmed, left
                chunk = arns[start : start + size]
                try:
                    statuses = self.batch.job_statuses(kind, chunk)
                except DescribeError as exc:
                    # Retried by botocore already: this pass ends without them (the next pass asks
                    # again), so a describe that keeps failing never holds the queue's listings.
                    summary.checks += 1
                    self._warn_once(f"checks of job queue {queue}", f"{exc}: unlisted jobs left active")
                    return made + 1, confirmed, 0
                made += 1
                summary.checks += 1
                if chunk[0] not in records:
                    # One BatchGetItem for the records of the jobs this run can still check (not
                    # one per DescribeServiceJob); a record changed meanwhile is read again by the
                    # fold's conditional write.
                    ahead = max(size, min(DESCRIBE_JOBS_MAX, requests - made + 1))
                    records = self.store.get_many(arns[start : start + ahead])
                for arn in chunk:
                    status = statuses.get(arn) or JobStatus.FAILED  # unknown to AWS Batch: gone
                    obs = Observation(arn=arn, kind=kind, status=status, at=now, source=Source.RECONCILE)
                    (step,) = self._fold(arn, records.get(arn), [obs], describe=False)
                    if status in ACTIVE:
                        confirmed.append(arn)
                        if step.change is not None:
                            drift[Drift.STALE] += 1
                    elif step.change is not None:
                        drift[Drift.GONE] += 1
                left -= len(chunk)
        return made, confirmed, left

    def _take_in(
        self,
        queue: QueueInfo,
        job: ListedJob,
        entry: ActiveEntry | None,
        record: LedgerJob | None,
        now: datetime,
        budget: int,
        summary: RunSummary,
        drift: Counter[Drift],
    ) -> int:
        """Apply one listed job the ledger lacks (``missing``) or holds with another status
        (``stale``) onto ``record`` (its record as read, ``None``: none); returns the describe
        budget left."""
        details = JobDetails(
            queue=queue.name,
            environment=queue.environment,
            share_identifier=job.share_identifier,
            quota_share=job.quota_share,
        )
        obs = Observation(
            arn=job.arn,
            kind=job.kind,
            status=job.status,
            at=now,
            source=Source.RECONCILE,
            details=details,
            created_at=job.created_at,
            started_at=job.started_at,
        )
        describe = budget > 0 and (entry is None or not entry.sized)
        (step,) = self._fold(job.arn, record, [obs], describe=describe)
        change = step.change
        if change is not None:
            drift[Drift.MISSING if entry is None else Drift.STALE] += 1
            # A missed requeue found here still costs its lost attempt (LostInstanceHours).
            self.sink.add(effect_points(change.new, self._lost_from_checkpoint(change)[0], now))
        if describe:
            budget -= 1
            summary.describes += 1
        return budget

    def _size(self, arn: str, kind: JobKind) -> None:
        try:
            described = self.batch.describe(arn, kind)
        except DescribeError:
            return
        if described is None:
            return
        for _ in range(WRITE_ATTEMPTS):
            current = self.store.get(arn)
            if current is None or current.terminal:
                return
            change = with_details(current, described)
            if change is None or self.store.write(change, self.clock()):
                return
        raise WriteConflict(f"job record kept changing after {WRITE_ATTEMPTS} attempts")

    def flush(self) -> int:
        """Write the buffered metric points (end of a batch or run)."""
        return self.sink.flush()


def _due(state: ReconcileState, now: datetime, interval: timedelta) -> bool:
    """No unfinished pass, and never reconciled or its last pass finished ``interval`` or more ago."""
    return state.cursor is None and (state.at is None or now - state.at >= interval)


def _started(state: ReconcileState) -> datetime:
    """When ``state``'s unfinished pass began (only called for one that has a cursor)."""
    assert state.cursor is not None
    return state.cursor.started


def _permanent(exc: BaseException, event: JobEvent, arn: str) -> RecordResult:
    """A record AWS refused for good: ``invalid`` and ``permanent`` (counted, logged with the
    operation and a bounded excerpt of the error, not retried), with its job's ARN for the log."""
    return RecordResult(permanently_refused(exc, event.id, event.detail_type), {"job_arn": arn})


def _prefer(described: JobDetails, seen: JobDetails) -> JobDetails:
    """The describe's details, with what the observation knows filling its gaps."""
    changes = {
        f.name: getattr(seen, f.name)
        for f in dataclasses.fields(JobDetails)
        if getattr(described, f.name) in (None, "") and getattr(seen, f.name) not in (None, "")
    }
    return dataclasses.replace(described, **changes)
