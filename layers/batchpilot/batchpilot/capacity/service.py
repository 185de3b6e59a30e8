"""One capacity run: sample each managed service environment's queues, decide, act, tell.

:class:`CapacityService` wires the pure parts (:mod:`~batchpilot.capacity.sampling`,
:mod:`~batchpilot.capacity.policy`) to the ports of :mod:`batchpilot.capacity.ports` (AWS Batch,
the state store, the event publisher, the gauge sink). It never imports boto3 or Powertools, reads
no environment, never logs and never calls ``datetime.now`` (the wall clock is an injected
:data:`~batchpilot.shared.clock.Clock`): it returns a :class:`RunReport` that the handler
(:mod:`batchpilot.capacity.handler`) logs and counts.

A run is triggered by the schedule (:meth:`CapacityService.run_schedule`: every managed
environment, at the scheduled time) or by a ``Batch Service Job Queue Blocked`` event
(:func:`blocked_run` says whether it is one to act on; :meth:`CapacityService.run_blocked`: its
queue's environment, at the event's time). "Now" always comes from the triggering event, so
replaying the same clock gives the same decisions.

Per run and per environment: one Query of the job ledger's aggregates per job queue (per instance
type for a quota-management environment), whatever its job count; only for a queue the ledger
holds nothing for yet (or without the ledger), ``ListServiceJobs`` (RUNNABLE, every page),
``GetJobQueueSnapshot`` and the payload demand of jobs not seen before (memory of this Lambda
instance, then the DynamoDB cache, then ``DescribeServiceJob`` within a per-run budget); one state
read and one or two conditional state writes; ``UpdateServiceEnvironment`` only when the decision
differs from the limit that is set; ``PutEvents`` for each change and each new refusal; the gauges
to the sink. An error in one environment is caught, reported, and never stops the others.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from batchpilot.capacity.model import (
    MAX_RESOURCE_REASON,
    NUM_INSTANCES,
    JobDemand,
    RunnableJob,
    ServiceEnvironment,
)
from batchpilot.capacity.policy import EnvironmentDecision, EnvironmentState, decide, notices
from batchpilot.capacity.ports import BatchCapacityApi, EventPublisher, GaugeSink, LedgerDemand, StateStore
from batchpilot.capacity.sampling import (
    QueueSample,
    gauge,
    sample_queue,
    unit_demands,
)
from batchpilot.capacity.settings import CapacityPolicyConfig, CapacitySettings
from batchpilot.shared.arns import resource_name
from batchpilot.shared.clock import Clock, utc_now
from batchpilot.shared.deadline import DEADLINE
from batchpilot.shared.errors import MAX_EXCERPT, is_permanent
from batchpilot.shared.events import BatchServiceJobQueueBlocked, JobEvent, to_datetime
from batchpilot.shared.metrics import MetricPoint, dimensions, metric_timestamp
from batchpilot.shared.own_events import CapacityAdjusted, CapacityLimited, OwnEvent, PublishError
from batchpilot.shared.records import Outcome, Rejected, decode

__all__ = [
    "BlockedBatch",
    "BlockedResult",
    "BlockedRun",
    "BlockedSkip",
    "CapacityService",
    "DemandMemory",
    "EnvironmentOutcome",
    "RunReport",
    "Trigger",
    "blocked_run",
    "scheduled_time",
]

_CHANGE_CALLS = 3
"""AWS calls of a capacity change: the claim (PutItem), UpdateServiceEnvironment, the state's
second write (PutItem: the notices, or the claim undone when the update failed)."""


class Trigger(StrEnum):
    """What started a run (the ``trigger`` of its log lines)."""

    SCHEDULE = "schedule"
    """EventBridge Scheduler (``CapacitySchedule``), every minute: every managed environment."""
    QUEUE_BLOCKED = "queue-blocked"
    """A ``Batch Service Job Queue Blocked`` event (``CapacityQueue``): its queue's environment."""


def scheduled_time(event: Any) -> datetime:
    """The run's "now": the schedule event's ``time`` (the scheduled time), aware UTC.

    Args:
        event: the invocation's event; a ``dict`` with an ISO-8601 ``time`` string is expected
            (EventBridge Scheduler fills ``<aws.scheduler.scheduled-time>`` into the target input).

    Raises:
        ValueError: no usable ``time`` (the message says what the event must carry).
    """
    raw = event.get("time") if isinstance(event, dict) else None
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError(
            "capacity: the event has no 'time': invoke with the schedule's event (ISO-8601 time)"
        )
    try:
        return to_datetime(raw)
    except ValueError as exc:
        raise ValueError(f"capacity: the event's 'time' is not an ISO-8601 time: {exc}") from None


@dataclass(frozen=True, slots=True)
class BlockedRun:
    """A ``Batch Service Job Queue Blocked`` event the capacity function acts on.

    Attributes:
        event_id: the event's ``id``.
        time: the event's ``time`` (aware UTC): the run's "now".
        environment: the managed service environment the job's queue feeds.
        queue: the job queue's name.
        job_arn: the blocked service job's ``jobArn``.
    """

    event_id: str
    time: datetime
    environment: str
    queue: str
    job_arn: str


def blocked_run(event: JobEvent, policy: CapacityPolicyConfig) -> BlockedRun | Rejected:
    """Whether ``event`` calls for a run, and of which environment. Pure.

    Returns:
        A :class:`BlockedRun` for a ``Batch Service Job Queue Blocked`` event whose
        ``statusReason`` starts with ``MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE`` and
        whose job queue feeds a managed environment; otherwise a ``Rejected`` (ignored: another
        detail-type or reason, or a queue that is not managed).
    """
    if not isinstance(event, BatchServiceJobQueueBlocked) or not (
        (event.detail.statusReason or "").strip().startswith(MAX_RESOURCE_REASON)
    ):
        return Rejected(
            Outcome.IGNORED,
            event.id,
            event.detail_type,
            f"not a service job blocked by {MAX_RESOURCE_REASON}",
        )
    queue = resource_name(event.detail.jobQueue)
    environment = policy.environment_of(queue) if queue else None
    if queue is None or environment is None:
        return Rejected(
            Outcome.IGNORED, event.id, event.detail_type, "detail.jobQueue is not a managed job queue"
        )
    return BlockedRun(event.id, event.time, environment, queue, event.detail.jobArn)


class BlockedSkip(StrEnum):
    """Why a relevant ``Queue Blocked`` record caused no run of its own (the log line's message)."""

    RAN_IN_BATCH = "service environment already run in this batch"
    """The batch's run of this environment listed every RUNNABLE job, this one included."""
    WOKEN_THIS_MINUTE = "service environment already woken this minute"
    """Another invocation woke the environment this minute (:meth:`CapacityService.run_blocked`)."""


@dataclass(frozen=True, slots=True)
class BlockedResult:
    """What one ``CapacityQueue`` record came to (:meth:`BlockedBatch.record`), for the handler to
    log and count.

    Attributes:
        rejected: the record is not one to act on (malformed, another detail-type or reason, an
            unmanaged queue), or its run failed only with errors AWS would repeat
            (:mod:`batchpilot.shared.errors`; ``permanent``: reported, not retried); None otherwise.
        job_queue: the job queue the event names (its name), when a decoded event names one.
        blocked: the run it calls for, when relevant.
        skipped: why a relevant record caused no run of its own, if so.
        report: the run it caused, if any (its ``errors`` make the record fail).
    """

    rejected: Rejected | None = None
    job_queue: str | None = None
    blocked: BlockedRun | None = None
    skipped: BlockedSkip | None = None
    report: RunReport | None = None


class BlockedBatch:
    """One SQS batch of ``CapacityQueue``: each environment run at most once in it (the first run
    lists every RUNNABLE job, the later records' jobs included). Made by
    :meth:`CapacityService.blocked_batch` at the start of each batch."""

    def __init__(self, service: CapacityService) -> None:
        self._service = service
        self._ran: set[str] = set()

    def record(self, body: str) -> BlockedResult:
        """One record's body: decoded (:func:`batchpilot.shared.records.decode`), screened
        (:func:`blocked_run`), then a run of its environment unless this batch already ran it.

        Raises:
            botocore.exceptions.ClientError: the wake-up claim could not be written
                (:meth:`CapacityService.run_blocked`).
        """
        event = decode(body)
        if isinstance(event, Rejected):
            return BlockedResult(rejected=event)
        blocked = blocked_run(event, self._service.settings.policy)
        if isinstance(blocked, Rejected):
            return BlockedResult(
                rejected=blocked, job_queue=resource_name(getattr(event.detail, "jobQueue", None))
            )
        if blocked.environment in self._ran:
            return BlockedResult(blocked=blocked, skipped=BlockedSkip.RAN_IN_BATCH)
        self._ran.add(blocked.environment)
        report = self._service.run_blocked(blocked)
        if report is None:
            return BlockedResult(blocked=blocked, skipped=BlockedSkip.WOKEN_THIS_MINUTE)
        if report.errors and report.only_permanent_errors:
            # AWS would refuse the same requests again: reported and counted, not retried.
            refused = Rejected(
                Outcome.INVALID, blocked.event_id, event.detail_type, report.errors[0], permanent=True
            )
            return BlockedResult(rejected=refused, job_queue=blocked.queue, blocked=blocked, report=report)
        return BlockedResult(blocked=blocked, report=report)


class DemandMemory:
    """Job ARN → demand, kept by one Lambda instance between runs (payloads never change).

    Bounded: past ``capacity`` entries the oldest are dropped (they are still in DynamoDB).
    """

    def __init__(self, capacity: int = 50_000) -> None:
        self._items: OrderedDict[str, dict[str, int]] = OrderedDict()
        self._capacity = capacity

    def __contains__(self, job_arn: object) -> bool:
        return job_arn in self._items

    def __len__(self) -> int:
        return len(self._items)

    def get(self, job_arn: str) -> dict[str, int] | None:
        """The remembered demand, or None."""
        return self._items.get(job_arn)

    def update(self, demands: Mapping[str, Mapping[str, int]]) -> None:
        """Remember these demands (the oldest entries go when full)."""
        for arn, demand in demands.items():
            self._items[arn] = dict(demand)
            self._items.move_to_end(arn)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)


@dataclass
class EnvironmentOutcome:
    """What one run did with one service environment.

    Attributes:
        name: the service environment.
        decision: the policy's decision (None when the run failed before deciding).
        updated: ``UpdateServiceEnvironment`` was called and succeeded.
        events: the own events published (or that failed to publish: see ``error``).
        error: one line (``<what>: <ExceptionType>: <message>``) when something failed.
        conflict: another run saved this environment's state first; nothing was done.
        permanent: ``error`` is one AWS would answer again to every retry
            (:func:`batchpilot.shared.errors.is_permanent`: a ``ValidationException``, an
            ``AccessDeniedException`` of UpdateServiceEnvironment, ...).
    """

    name: str
    decision: EnvironmentDecision | None = None
    updated: bool = False
    events: list[OwnEvent] = field(default_factory=list)
    error: str | None = None
    conflict: bool = False
    permanent: bool = False


@dataclass
class RunReport:
    """What one capacity run did.

    Attributes:
        now: the run's time (from the triggering event).
        trigger: what started it.
        outcomes: one per managed environment in the run, in configuration order.
        gauges: the EMF points to publish (sampling gauges and decision counts).
        samples: the per-queue figures.
        described: ``DescribeServiceJob`` calls made for uncached payloads.
        unknown_demand: RUNNABLE jobs whose payload is not known yet (counted as 1 instance).
    """

    now: datetime
    trigger: Trigger = Trigger.SCHEDULE
    outcomes: list[EnvironmentOutcome] = field(default_factory=list)
    gauges: list[MetricPoint] = field(default_factory=list)
    samples: list[QueueSample] = field(default_factory=list)
    described: int = 0
    unknown_demand: int = 0

    @property
    def errors(self) -> list[str]:
        """``"<environment>: <error>"`` per failed environment."""
        return [f"{o.name}: {o.error}" for o in self.outcomes if o.error]

    @property
    def only_permanent_errors(self) -> bool:
        """Some environment failed, and every failure is permanent (a retry of the record that
        started the run would fail the same way)."""
        failed = [o for o in self.outcomes if o.error]
        return bool(failed) and all(o.permanent for o in failed)

    @property
    def published(self) -> tuple[int, int]:
        """``(Capacity Adjusted, Capacity Limited)`` events published across the outcomes."""
        events = [e for o in self.outcomes for e in o.events]
        return sum(isinstance(e, CapacityAdjusted) for e in events), sum(
            isinstance(e, CapacityLimited) for e in events
        )

    def summary(self) -> dict[str, Any]:
        """What a scheduled invocation returns: ``{"time": ISO-8601 str, "service_environments":
        int, "updated": [names], "errors": ["<environment>: <error>"]}``."""
        return {
            "time": self.now.isoformat(),
            "service_environments": len(self.outcomes),
            "updated": [o.name for o in self.outcomes if o.updated],
            "errors": self.errors,
        }


def _describe(exc: BaseException) -> str:
    """``<ExceptionType>: <first line of the message>``, the line at most :data:`MAX_EXCERPT`
    characters (an AWS message can quote request values)."""
    text = str(exc).strip().splitlines()
    if not text:
        return type(exc).__name__
    line = text[0] if len(text[0]) <= MAX_EXCERPT else text[0][: MAX_EXCERPT - 1] + "…"
    return f"{type(exc).__name__}: {line}"


class CapacityService:
    """Runs the capacity policy for the managed service environments.

    Args:
        settings: validated at cold start.
        batch, store, events, gauges: the ports (:mod:`batchpilot.capacity.ports`).
        clock: the wall clock (aware UTC), only to keep gauge timestamps inside the window
            CloudWatch accepts (:func:`batchpilot.shared.metrics.metric_timestamp`); a run's "now"
            comes from its trigger.
        memory: the Lambda instance's demand memory (a new one when not given).
        ledger: the job ledger's demand (optional): every environment's queues are then read
            from it instead of listed (per instance type for a quota-management environment), so
            a run costs the same whatever the job count.
    """

    def __init__(
        self,
        settings: CapacitySettings,
        batch: BatchCapacityApi,
        store: StateStore,
        events: EventPublisher,
        gauges: GaugeSink,
        *,
        clock: Clock = utc_now,
        memory: DemandMemory | None = None,
        ledger: LedgerDemand | None = None,
    ) -> None:
        self.settings = settings
        self.batch = batch
        self.store = store
        self.events = events
        self.gauges = gauges
        self.clock = clock
        self.memory = memory if memory is not None else DemandMemory()
        self.ledger = ledger

    def run_schedule(self, event: Any) -> RunReport:
        """A schedule event → a run of every managed environment at the event's ``time``.

        Raises:
            ValueError: the event has no usable ``time`` (see :func:`scheduled_time`).
        """
        return self.run(scheduled_time(event), Trigger.SCHEDULE)

    def blocked_batch(self) -> BlockedBatch:
        """A new SQS batch of ``Queue Blocked`` records: no environment run in it yet."""
        return BlockedBatch(self)

    def run_blocked(self, blocked: BlockedRun) -> RunReport | None:
        """A run of the blocked job's environment at the event's time, the job counted as blocked
        by ``SERVICE_ENVIRONMENT_MAX_RESOURCE`` whatever ``ListServiceJobs`` says of it; at most one
        per environment per wall-clock minute across invocations (the store's :meth:`claim_wake`:
        a burst of blocked events wakes the environment once, not once per batch).

        Returns:
            The report, or None when another invocation already woke the environment this minute
            (its run lists every RUNNABLE job, this one included; the schedule runs it again).
            A run with errors gives its claim back, so the retried record runs it.

        Raises:
            botocore.exceptions.ClientError: the wake-up claim could not be written.
        """
        minute = self.clock().replace(second=0, microsecond=0)
        if not self.store.claim_wake(blocked.environment, minute, self.clock()):
            return None
        report = self.run(
            blocked.time,
            Trigger.QUEUE_BLOCKED,
            environments=[blocked.environment],
            blocked={blocked.queue: [blocked.job_arn]},
        )
        if report.errors:
            self.store.release_wake(blocked.environment, minute, self.clock())
        return report

    def run(
        self,
        now: datetime,
        trigger: Trigger = Trigger.SCHEDULE,
        *,
        environments: Collection[str] | None = None,
        blocked: Mapping[str, Collection[str]] | None = None,
    ) -> RunReport:
        """One run at ``now``; its gauges are published to the sink before it returns.

        Args:
            now: the run's time (aware UTC): the scheduled time, or a blocked event's time.
            trigger: what started it (carried by the report).
            environments: only these managed environments (default: all of them).
            blocked: job queue name → ARNs of jobs a ``Batch Service Job Queue Blocked`` event
                reported as blocked by ``SERVICE_ENVIRONMENT_MAX_RESOURCE``.

        Returns:
            The :class:`RunReport`. Never raises for an AWS error: each environment's failure is
            in its outcome. Whatever the gauge sink raises (a bug) propagates.
        """
        report = self._run(now, trigger, environments, blocked or {}, metric_timestamp(now, self.clock()))
        self.gauges.publish(report.gauges)
        return report

    def _run(
        self,
        now: datetime,
        trigger: Trigger,
        environments: Collection[str] | None,
        blocked: Mapping[str, Collection[str]],
        timestamp: datetime,
    ) -> RunReport:
        report = RunReport(now=now, trigger=trigger)
        names = [
            name
            for name in self.settings.policy.service_environments
            if environments is None or name in environments
        ]
        if not names:
            return report
        try:
            described = self.batch.describe_environments(names)
        except Exception as exc:  # the one call all environments share
            error = f"DescribeServiceEnvironments: {_describe(exc)}"
            final = is_permanent(exc)
            report.outcomes = [EnvironmentOutcome(name, error=error, permanent=final) for name in names]
            return report
        budget = [self.settings.describe_budget]
        try:  # one read for every environment's state: a run's cost must not grow per environment
            states: dict[str, EnvironmentState] = self.store.load_many(names)
        except Exception:  # each environment then reads its own state, and reports its own error
            states = {}
        for name in names:
            outcome = EnvironmentOutcome(name)
            report.outcomes.append(outcome)
            environment = described.get(name)
            if environment is None:
                outcome.error = "DescribeServiceEnvironments: no such service environment"
                continue
            try:
                self._run_environment(
                    environment, now, timestamp, blocked, budget, report, outcome, states.get(name)
                )
            except Exception as exc:  # isolate: one environment's error never stops the others
                outcome.error, outcome.permanent = _describe(exc), is_permanent(exc)
        return report

    # ------------------------------------------------------------------ per environment
    def _run_environment(
        self,
        environment: ServiceEnvironment,
        now: datetime,
        ts: datetime,
        blocked: Mapping[str, Collection[str]],
        budget: list[int],
        report: RunReport,
        outcome: EnvironmentOutcome,
        state: EnvironmentState | None = None,
    ) -> None:
        settings = self.settings
        config = settings.environment(environment.name)
        samples: list[QueueSample] = []
        # A quota-management environment's capacity units are instance types: its sample is per type.
        by_type = any(limit.unit != NUM_INSTANCES for limit in environment.limits)
        for queue in config.job_queues:
            queue_blocked = list(blocked.get(queue, ()))
            sample = (
                self.ledger.sample(queue, environment.name, queue_blocked, by_type=by_type)
                if self.ledger
                else None
            )
            if sample is None:
                jobs = self.batch.runnable_jobs(queue)
                snapshot = self.batch.snapshot(queue)
                demands = self._demands(queue, jobs, budget, now, report)
                sample = sample_queue(queue, environment.name, jobs, demands, snapshot, queue_blocked)
            samples.append(sample)
            report.samples.append(sample)
        by_unit = unit_demands(environment, samples)

        bounds = config.bounds()
        policy = config.policy(settings.policy.defaults)
        if state is None:
            state = self.store.load(environment.name)
        floors = {unit: config.floor(unit, now) for unit in bounds}
        decision = decide(environment, by_unit, bounds, floors, policy, state, now)
        outcome.decision = decision
        report.gauges.extend(self._decision_points(decision, ts))

        next_state = decision.state
        failed = False
        if decision.changes and not settings.dry_run:
            # The claim restarts the cooldown: start only when the change and, should it fail,
            # the claim's undo fit too; else the cooldown would hold a change never made.
            DEADLINE.require_calls(_CHANGE_CALLS, f"capacity change of {environment.name}")
            claimed = self.store.save(environment.name, next_state, now)
            if claimed is None:
                outcome.conflict = True
                return
            next_state = replace(next_state, version=claimed)
            try:
                self.batch.update_capacity(environment.name, decision.capacity_limits)
                outcome.updated = True
            except Exception as exc:
                failed = True
                outcome.error = f"UpdateServiceEnvironment: {_describe(exc)}"
                outcome.permanent = is_permanent(exc)
                next_state = replace(next_state, last_change_at=state.last_change_at)
        elif decision.changes:  # dry run: nothing changed, so the cooldown clock does not restart
            next_state = replace(next_state, last_change_at=state.last_change_at)

        repeat = timedelta(minutes=policy.notice_repeat_minutes)
        events, memory = notices(decision, state.notices, repeat, dry_run=settings.dry_run, failed=failed)
        if self.store.save(environment.name, replace(next_state, notices=memory), now) is None:
            outcome.conflict = True
        outcome.events = list(events)
        if events:
            resources = [environment.arn] if environment.arn else []
            try:
                self.events.publish(events, resources)
            except PublishError as exc:
                outcome.error = f"{outcome.error}; {exc}" if outcome.error else str(exc)

    def _demands(
        self, queue: str, jobs: Sequence[RunnableJob], budget: list[int], now: datetime, report: RunReport
    ) -> dict[str, JobDemand]:
        """Demand of each job: this instance's memory, then DynamoDB, then ``DescribeServiceJob``
        (oldest job first, within the run's budget); jobs still unknown are left out."""
        known: dict[str, JobDemand] = {}
        missing: list[RunnableJob] = []
        for job in jobs:
            demand = self.memory.get(job.arn)
            if demand is None:
                missing.append(job)
            else:
                known[job.arn] = demand
        if not missing:
            return known
        cached = self.store.cached_demands(queue, [job.arn for job in missing])
        self.memory.update(cached)
        known.update(cached)
        unread = sorted(
            (job for job in missing if job.arn not in cached),
            key=lambda job: (job.created_at is None, job.created_at or now, job.arn),
        )
        read: dict[str, dict[str, int]] = {}
        for job in unread:
            if budget[0] <= 0:
                report.unknown_demand += 1
                continue
            budget[0] -= 1
            report.described += 1
            demand = self.batch.job_demand(job.arn, job.job_id)
            if demand is None:
                report.unknown_demand += 1
                continue
            read[job.arn] = demand
        if read:
            self.store.remember_demands(queue, read, now)
            self.memory.update(read)
            known.update(read)
        return known

    @staticmethod
    def _decision_points(decision: EnvironmentDecision, ts: datetime) -> list[MetricPoint]:
        points: list[MetricPoint] = []
        for unit in decision.units:
            where = {"ServiceEnvironment": decision.environment.name, "CapacityUnit": unit.unit}
            points.append(gauge("CapacityTarget", "Count", unit.target, dimensions(**where), ts))
            dims = dimensions(**where, Decision=str(unit.action), Reason=str(unit.reason))
            points.append(gauge("CapacityDecisions", "Count", 1, dims, ts))
        return points
