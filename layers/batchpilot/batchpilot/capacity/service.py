"""One capacity run: sample each managed service environment's queues, decide, act, tell.

:class:`CapacityService` wires the pure parts (:mod:`~batchpilot.capacity.sampling`,
:mod:`~batchpilot.capacity.policy`) to three injected collaborators described by protocols (the
real ones are :mod:`batchpilot.io.batch`, :mod:`~batchpilot.io.dynamodb.capacity`
and :mod:`~batchpilot.io.eventbridge`). It never imports boto3, reads no environment and
never logs: it returns a :class:`RunReport` that the handler logs and publishes.

Per run and per environment: ``ListServiceJobs`` (RUNNABLE, every page) and ``GetJobQueueSnapshot``
per job queue; the payload demand of jobs not seen before (memory of this Lambda instance, then
the DynamoDB cache, then ``DescribeServiceJob`` within a per-run budget); one state read and one or
two conditional state writes; ``UpdateServiceEnvironment`` only when the decision differs from the
limit that is set; ``PutEvents`` for each change and each new refusal. An error in one environment
is caught, reported, and never stops the others.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

from batchpilot.capacity.model import CapacityLimit, JobDemand, QueueSnapshot, RunnableJob, ServiceEnvironment
from batchpilot.capacity.policy import EnvironmentDecision, EnvironmentState, decide, notices
from batchpilot.capacity.sampling import (
    QueueSample,
    environment_gauges,
    gauge,
    queue_gauges,
    sample_queue,
    unit_demands,
)
from batchpilot.capacity.settings import CapacitySettings
from batchpilot.shared.metrics import MetricPoint, dimensions
from batchpilot.shared.own_events import CapacityAdjusted, CapacityLimited, OwnEvent, PublishError

__all__ = [
    "BatchApi",
    "CapacityService",
    "DemandMemory",
    "EnvironmentOutcome",
    "EventApi",
    "RunReport",
    "StateApi",
]


class BatchApi(Protocol):
    """AWS Batch as the capacity function uses it (see ``BatchCapacityClient``)."""

    def describe_environments(self, names: Sequence[str]) -> dict[str, ServiceEnvironment]: ...
    def runnable_jobs(self, queue: str) -> list[RunnableJob]: ...
    def snapshot(self, queue: str) -> QueueSnapshot: ...
    def job_demand(self, job_arn: str, job_id: str | None = None) -> dict[str, int] | None: ...
    def update_capacity(self, environment: str, limits: Sequence[CapacityLimit]) -> None: ...


class StateApi(Protocol):
    """Capacity state and the payload-demand cache (see ``CapacityStateStore``)."""

    def load(self, environment: str) -> EnvironmentState: ...
    def save(self, environment: str, state: EnvironmentState, now: datetime) -> int | None: ...
    def cached_demands(self, queue: str, job_arns: Sequence[str]) -> dict[str, dict[str, int]]: ...
    def remember_demands(
        self, queue: str, demands: Mapping[str, Mapping[str, int]], now: datetime
    ) -> None: ...


class EventApi(Protocol):
    """Own-event publishing (:class:`batchpilot.io.eventbridge.EventBridgePublisher`)."""

    def publish(self, events: Sequence[OwnEvent], resources: Sequence[str] | None = None) -> None:
        """Put ``events`` on the bus. Raises :class:`PublishError`."""


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
    """

    name: str
    decision: EnvironmentDecision | None = None
    updated: bool = False
    events: list[OwnEvent] = field(default_factory=list)
    error: str | None = None
    conflict: bool = False


@dataclass
class RunReport:
    """What one capacity run did.

    Attributes:
        now: the run's time (from the triggering event).
        outcomes: one per managed environment in the run, in configuration order.
        gauges: the EMF points to publish (sampling gauges and decision counts).
        samples: the per-queue figures.
        described: ``DescribeServiceJob`` calls made for uncached payloads.
        unknown_demand: RUNNABLE jobs whose payload is not known yet (counted as 1 instance).
    """

    now: datetime
    outcomes: list[EnvironmentOutcome] = field(default_factory=list)
    gauges: list[MetricPoint] = field(default_factory=list)
    samples: list[QueueSample] = field(default_factory=list)
    described: int = 0
    unknown_demand: int = 0

    @property
    def errors(self) -> list[str]:
        """``"<environment>: <error>"`` per failed environment."""
        return [f"{o.name}: {o.error}" for o in self.outcomes if o.error]


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class CapacityService:
    """Runs the capacity policy for the managed service environments.

    Args:
        settings: validated at cold start.
        batch, store, events: the adapters (injected).
        memory: the Lambda instance's demand memory (a new one when not given).
    """

    def __init__(
        self,
        settings: CapacitySettings,
        batch: BatchApi,
        store: StateApi,
        events: EventApi,
        memory: DemandMemory | None = None,
    ) -> None:
        self.settings = settings
        self.batch = batch
        self.store = store
        self.events = events
        self.memory = memory if memory is not None else DemandMemory()

    def run(
        self,
        now: datetime,
        *,
        environments: Collection[str] | None = None,
        blocked: Mapping[str, Collection[str]] | None = None,
        timestamp: datetime | None = None,
    ) -> RunReport:
        """One run at ``now``.

        Args:
            now: the run's time (aware UTC): the scheduled time, or a blocked event's time.
            environments: only these managed environments (default: all of them).
            blocked: job queue name → ARNs of jobs a ``Batch Service Job Queue Blocked`` event
                reported as blocked by ``SERVICE_ENVIRONMENT_MAX_RESOURCE``.
            timestamp: the time the gauges carry (default ``now``).

        Returns:
            The :class:`RunReport`. Never raises for an AWS error: each environment's failure is
            in its outcome.
        """
        report = RunReport(now=now)
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
            report.outcomes = [EnvironmentOutcome(name, error=error) for name in names]
            return report
        budget = [self.settings.describe_budget]
        for name in names:
            outcome = EnvironmentOutcome(name)
            report.outcomes.append(outcome)
            environment = described.get(name)
            if environment is None:
                outcome.error = "DescribeServiceEnvironments: no such service environment"
                continue
            try:
                self._run_environment(
                    environment, now, timestamp or now, blocked or {}, budget, report, outcome
                )
            except Exception as exc:  # isolate: one environment's error never stops the others
                outcome.error = _describe(exc)
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
    ) -> None:
        settings = self.settings
        config = settings.environment(environment.name)
        samples: list[QueueSample] = []
        for queue in config.job_queues:
            jobs = self.batch.runnable_jobs(queue)
            snapshot = self.batch.snapshot(queue)
            demands = self._demands(queue, jobs, budget, now, report)
            sample = sample_queue(queue, environment.name, jobs, demands, snapshot, blocked.get(queue, ()))
            samples.append(sample)
            report.samples.append(sample)
            report.gauges.extend(queue_gauges(sample, now, ts, settings.max_share_gauges))
        by_unit = unit_demands(environment, samples)
        report.gauges.extend(environment_gauges(environment, by_unit, ts))

        bounds = config.bounds()
        policy = config.policy(settings.policy.defaults)
        state = self.store.load(environment.name)
        floors = {unit: config.floor(unit, now) for unit in bounds}
        decision = decide(environment, by_unit, bounds, floors, policy, state, now)
        outcome.decision = decision
        report.gauges.extend(self._decision_points(decision, ts))

        next_state = decision.state
        failed = False
        if decision.changes and not settings.dry_run:
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


def published(outcomes: Sequence[EnvironmentOutcome]) -> tuple[int, int]:
    """``(Capacity Adjusted, Capacity Limited)`` events published across ``outcomes``."""
    adjusted = sum(isinstance(e, CapacityAdjusted) for o in outcomes for e in o.events)
    limited = sum(isinstance(e, CapacityLimited) for o in outcomes for e in o.events)
    return adjusted, limited
