"""Start-time forecasts: when each waiting service job should start, from the simulator's
scheduling model run forward from the present.

One engine: :class:`~batchpilot_local.simulate.engine.Simulation`, the code ``batchpilot simulate``
runs, seeded with the present (:class:`~batchpilot_local.simulate.engine.PresentJob`: the jobs
running and waiting now) instead of a workload. What the run needs and where it comes from:

- the fleet (:class:`Fleet`): each service environment's capacity limits (DescribeServiceEnvironments
  ``capacityLimits``), each job queue's service environment, priority and scheduling policy (FIFO,
  fair share from DescribeSchedulingPolicies ``fairsharePolicy``, quota management from
  ListQuotaShares);
- the jobs (:class:`ForecastJob`): the ledger's running and waiting jobs, with their share,
  scheduling priority, instance type and count, and when they became RUNNABLE or started;
- run times (:class:`RunTimes`): learned from the ledger's finished jobs, per (job queue, share,
  instance type), widening to (job queue, share), the job queue, then the whole fleet when a group
  has fewer than :data:`MIN_HISTORY` finished jobs, and :data:`FALLBACK_RUN_S` (lognormal, stated as
  the basis) when there is no history at all. A running job's remaining time is drawn from the runs
  longer than it has run so far.

Each of ``samples`` runs draws every job's run time anew (its own seed); a waiting job's forecast is
the median and the :data:`PESSIMISTIC` quantile of its start over the runs, with the range
[:data:`OPTIMISTIC`, :data:`PESSIMISTIC`]. What the forecast does not know: jobs submitted after the
present (a later job of higher priority or of a share below its weight can go first), capacity
limits batchpilot's capacity function changes, failures, preemptions of running jobs and SageMaker
capacity errors; a job that has not started within the horizon in a run counts as starting after it.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from batchpilot_local.simulate.engine import PresentJob, Simulation
from batchpilot_local.simulate.scenario import (
    NUM_INSTANCES,
    FairSharePolicy,
    HeadOfLine,
    JobQueueSpec,
    QuotaPolicy,
    Scenario,
    SchedulingKind,
    ServiceEnvironmentSpec,
    Workload,
)
from batchpilot_local.simulate.workload import JobSpec

__all__ = [
    "FALLBACK_RUN_S",
    "MIN_HISTORY",
    "OPTIMISTIC",
    "PESSIMISTIC",
    "FinishedRun",
    "Fleet",
    "ForecastJob",
    "JobForecast",
    "QueueModel",
    "RunTimes",
    "Submission",
    "fleet_scenario",
    "forecast",
]

MIN_HISTORY = 5
"""Finished jobs a group needs before its own run times are used (else the next wider group)."""
FALLBACK_RUN_S = 3600.0
"""Median run time (seconds) assumed when the ledger has no finished job at all (lognormal,
sigma :data:`_FALLBACK_SIGMA`): stated as the forecast's basis."""
_FALLBACK_SIGMA = 1.0
OPTIMISTIC = 0.10
PESSIMISTIC = 0.90
"""Quantiles of the simulated starts that bound the forecast's range (the pessimistic one is shown
beside the median)."""
DEFAULT_SAMPLES = 20
DEFAULT_HORIZON_S = 7 * 86_400.0
ARRIVAL_WINDOW_S = 24 * 3600.0
"""Submissions of the last 24 h set each share's arrival rate and the jobs its arrivals copy."""
UNKNOWN_TYPE = "unknown"
"""Instance type of a job whose ``ResourceConfig`` the ledger has not read."""


@dataclass(frozen=True, slots=True)
class QueueModel:
    """One job queue as the forecast runs it.

    Attributes:
        name: ``jobQueueName``; environment: the service environment it feeds.
        priority: job queue priority (higher served first by a shared environment).
        scheduling: FIFO, FAIR_SHARE (``fair_share`` set) or QUOTA_MANAGEMENT (``quota`` set).
        head_of_line: what a first job that does not fit does to the jobs behind it (the
            simulator's approximation, :class:`~batchpilot_local.simulate.scenario.HeadOfLine`;
            AWS does not publish it: SHARE unless a caller knows better).
    """

    name: str
    environment: str
    priority: int = 1
    scheduling: SchedulingKind = SchedulingKind.FIFO
    fair_share: FairSharePolicy | None = None
    quota: QuotaPolicy | None = None
    head_of_line: HeadOfLine = HeadOfLine.SHARE


@dataclass(frozen=True, slots=True)
class Fleet:
    """Service environments (name → capacity unit → ``maxCapacity``, instances) and job queues."""

    environments: Mapping[str, Mapping[str, int]]
    queues: Sequence[QueueModel]


@dataclass(frozen=True, slots=True)
class ForecastJob:
    """A job of the present (from the ledger).

    Attributes:
        arn: the job's ARN; queue: its job queue; share: quota share or share identifier (None).
        instance_type, instances: ``ResourceConfig`` (``UNKNOWN_TYPE`` / 1 when not read).
        priority: ``schedulingPriority``.
        since: when it became RUNNABLE (waiting) or its attempt started (running), aware UTC.
        running: SCHEDULED, STARTING or RUNNING (holds capacity); else waiting.
    """

    arn: str
    queue: str
    share: str | None
    instance_type: str
    instances: int
    priority: int
    since: datetime
    running: bool


@dataclass(frozen=True, slots=True)
class Submission:
    """A job submitted in the recent past (the ledger's ``createdAt``): what future arrivals are
    drawn from. ``at`` aware UTC; the other fields as :class:`ForecastJob`'s."""

    queue: str
    share: str | None
    instance_type: str
    instances: int
    priority: int
    at: datetime


@dataclass(frozen=True, slots=True)
class FinishedRun:
    """A finished job's run: its group and how long its last attempt ran (seconds)."""

    queue: str
    share: str | None
    instance_type: str
    run_s: float


@dataclass
class RunTimes:
    """Run-time distributions learned from finished runs (see the module docstring).

    Args:
        runs: the ledger's finished jobs (:class:`FinishedRun`).
    """

    runs: Iterable[FinishedRun] = ()
    _groups: dict[tuple[str, ...], list[float]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        groups: defaultdict[tuple[str, ...], list[float]] = defaultdict(list)
        for run in self.runs:
            if run.run_s <= 0:
                continue
            share = run.share or "-"
            for group in (
                ("type", run.queue, share, run.instance_type),
                ("share", run.queue, share),
                ("queue", run.queue),
                ("fleet",),
            ):
                groups[group].append(run.run_s)
        self._groups = {key: sorted(values) for key, values in groups.items()}

    def basis(self, queue: str, share: str | None, instance_type: str) -> tuple[tuple[float, ...], str]:
        """The sorted run times (seconds) used for a job of this group and what they are:
        ``"share and instance type (n=12)"`` ... ``"fleet (n=3)"``, or ``()`` and the fallback."""
        share = share or "-"
        for key, label in (
            (("type", queue, share, instance_type), "share and instance type"),
            (("share", queue, share), "share"),
            (("queue", queue), "job queue"),
            (("fleet",), "whole fleet"),
        ):
            values = self._groups.get(key)
            if values and (len(values) >= MIN_HISTORY or key == ("fleet",)):
                return tuple(values), f"{label} (n={len(values)})"
        return (), f"no finished jobs: assumed median {FALLBACK_RUN_S / 3600:g} h"

    @staticmethod
    def draw(values: Sequence[float], rng: random.Random, elapsed: float = 0.0) -> float:
        """One run time (seconds) still to go after ``elapsed`` seconds of running: a finished run
        longer than ``elapsed`` (less ``elapsed``), drawn at random; past every finished run, up
        to as long again as it has run; no history: the lognormal fallback (conditioned alike)."""
        if not values:
            for _ in range(20):
                total = rng.lognormvariate(math.log(FALLBACK_RUN_S), _FALLBACK_SIGMA)
                if total > elapsed:
                    return total - elapsed
            return max(60.0, elapsed * rng.random())
        start = bisect.bisect_right(values, elapsed)
        if start >= len(values):
            return max(60.0, elapsed * rng.random())
        return values[rng.randrange(start, len(values))] - elapsed


@dataclass(frozen=True, slots=True)
class JobForecast:
    """A waiting job's expected start.

    Attributes:
        arn: the job.
        median_s, low_s, high_s: seconds from the present to its start: the median and the
            :data:`OPTIMISTIC` / :data:`PESSIMISTIC` quantiles of the runs (``math.inf``: not within
            the horizon in that share of the runs).
        basis: where its queue's run times came from (:meth:`RunTimes.basis` of its own group).
    """

    arn: str
    median_s: float
    low_s: float
    high_s: float
    basis: str

    def at(self, now: datetime, seconds: float) -> datetime | None:
        """``now`` + ``seconds`` (None for ``inf``)."""
        return None if math.isinf(seconds) else now + timedelta(seconds=seconds)


def _quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of ``values`` (sorted; nearest rank, so ``inf`` stays ``inf``)."""
    index = min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))
    return values[index]


def fleet_scenario(fleet: Fleet, horizon_s: float, now: datetime) -> Scenario:
    """The simulator's scenario of ``fleet``: its environments and queues, ``horizon_s`` seconds
    from ``now`` (t = 0), no workload (the present and the arrivals are given to the run)."""
    envs = [
        ServiceEnvironmentSpec(name=name, capacity_limits=dict(limits))
        for name, limits in fleet.environments.items()
    ]
    queues = [
        JobQueueSpec(
            name=q.name,
            service_environment=q.environment,
            priority=q.priority,
            scheduling=q.scheduling,
            fair_share=q.fair_share,
            quota=q.quota,
            head_of_line=q.head_of_line,
        )
        for q in fleet.queues
    ]
    # Built from validated parts; the workload is the present (Simulation(present=...)), which a
    # scenario file cannot state, so the whole is constructed rather than validated again.
    return Scenario.model_construct(
        name="forecast",
        horizon_hours=horizon_s / 3600.0,
        start=now,
        sample_interval_s=min(86_400.0, horizon_s),
        service_environments=tuple(envs),
        job_queues=tuple(queues),
        workload=Workload.model_construct(),
    )


def forecast(
    fleet: Fleet,
    jobs: Sequence[ForecastJob],
    run_times: RunTimes,
    now: datetime,
    *,
    samples: int = DEFAULT_SAMPLES,
    horizon_s: float = DEFAULT_HORIZON_S,
    seed: int = 0,
    submissions: Sequence[Submission] = (),
    window_s: float = ARRIVAL_WINDOW_S,
) -> dict[str, JobForecast]:
    """Forecast every waiting job of ``jobs`` whose job queue ``fleet`` holds.

    Args:
        fleet: the environments and queues (only those jobs' queues are simulated).
        jobs: running and waiting jobs now; a job whose queue is not in ``fleet`` is left out
            (its queue's policy could not be read: the caller says so).
        run_times: learned run times.
        now: the present (aware UTC): t = 0 of every run.
        samples: runs (each draws every run time anew); horizon_s: how far each run looks.
        seed: the first run's seed (run k uses ``seed + k``).
        submissions: jobs submitted before ``now``; those of the last ``window_s`` seconds give
            each (job queue, share) its arrival rate, and each run draws Poisson arrivals at that
            rate, each a copy of one of them (size, priority) with a run time drawn anew: later
            jobs of higher priority, or of a share below its weight, go first as they would.

    Returns:
        Waiting job ARN → its forecast.

    Raises:
        pydantic.ValidationError: the fleet is not a valid scenario (a name AWS would refuse).
    """
    queues = {q.name: q for q in fleet.queues}
    used = [job for job in jobs if job.queue in queues]
    if not any(not job.running for job in used):
        return {}
    scenario = fleet_scenario(fleet, horizon_s, now)
    bases = {job.arn: run_times.basis(job.queue, job.share, job.instance_type) for job in used}
    starts: dict[str, list[float]] = {job.arn: [] for job in used if not job.running}
    groups = _arrival_groups(fleet, submissions, queues, run_times, now, window_s)
    for k in range(samples):
        rng = random.Random(seed + k)  # noqa: S311 - a simulation's draws, not a secret
        present = []
        for job in used:
            values, _ = bases[job.arn]
            since = (job.since - now).total_seconds()
            elapsed = max(0.0, -since) if job.running else 0.0
            spec = JobSpec(
                name=job.arn,
                queue=job.queue,
                share=job.share,
                submit_s=0.0,
                instance_type=_unit_type(fleet, queues[job.queue], job.instance_type),
                instance_count=max(1, job.instances),
                duration_s=max(1.0, RunTimes.draw(values, rng, elapsed)),
                priority=job.priority,
            )
            present.append(PresentJob(spec, min(0.0, since), running=job.running))
        arrivals = _arrivals(groups, horizon_s, rng, k)
        simulation = Simulation(scenario, (), seed + k, present=present, stream=arrivals)
        simulation.run(until_started=starts)
        for trace in simulation.trace.jobs:
            if trace.name in starts:
                starts[trace.name].append(
                    math.inf if trace.first_start is None else max(0.0, trace.first_start)
                )
    out = {}
    for arn, drawn in starts.items():
        ordered = sorted(drawn)
        out[arn] = JobForecast(
            arn,
            _quantile(ordered, 0.5),
            _quantile(ordered, OPTIMISTIC),
            _quantile(ordered, PESSIMISTIC),
            bases[arn][1],
        )
    return out


@dataclass(frozen=True, slots=True)
class _ArrivalGroup:
    """One (job queue, share)'s arrivals: Poisson at ``rate`` (per second), each a copy of one of
    ``like`` (instance type as its environment counts it, instances, priority, run times)."""

    queue: str
    share: str | None
    rate: float
    like: tuple[tuple[str, int, int, tuple[float, ...]], ...]


def _arrival_groups(
    fleet: Fleet,
    submissions: Sequence[Submission],
    queues: Mapping[str, QueueModel],
    run_times: RunTimes,
    now: datetime,
    window_s: float,
) -> list[_ArrivalGroup]:
    """The submissions of the last ``window_s`` seconds, per (job queue, share) (see :func:`forecast`)."""
    groups: defaultdict[tuple[str, str], list[Submission]] = defaultdict(list)
    for sub in submissions:
        if sub.queue in queues and 0 <= (now - sub.at).total_seconds() <= window_s:
            groups[(sub.queue, sub.share or "")].append(sub)
    out = []
    for (queue, share), subs in sorted(groups.items()):
        like = tuple(
            (
                _unit_type(fleet, queues[queue], sub.instance_type),
                max(1, sub.instances),
                sub.priority,
                run_times.basis(queue, sub.share, sub.instance_type)[0],
            )
            for sub in subs
        )
        out.append(_ArrivalGroup(queue, share or None, len(subs) / window_s, like))
    return out


def _arrivals(
    groups: Sequence[_ArrivalGroup], horizon_s: float, rng: random.Random, run: int
) -> Iterator[JobSpec]:
    """One run's future arrivals in submission order (see :func:`forecast`), drawn as the run
    reaches them (the simulator takes them as a ``stream``)."""

    def group_times(group: _ArrivalGroup) -> Iterator[tuple[float, int]]:
        t = 0.0
        while True:
            t += rng.expovariate(group.rate)
            if t >= horizon_s:
                return
            yield t, id(group)

    by_id = {id(group): group for group in groups}
    for count, (t, key) in enumerate(heapq.merge(*(group_times(g) for g in groups))):
        group = by_id[key]
        kind, instances, priority, values = group.like[int(rng.random() * len(group.like))]
        yield JobSpec(
            name=f"arrival-{run}-{count}",
            queue=group.queue,
            share=group.share,
            submit_s=t,
            instance_type=kind,
            instance_count=instances,
            duration_s=max(1.0, RunTimes.draw(values, rng)),
            priority=priority,
        )


def _unit_type(fleet: Fleet, queue: QueueModel, instance_type: str) -> str:
    """The job's instance type as its environment counts it: any type for NUM_INSTANCES."""
    limits = fleet.environments.get(queue.environment, {})
    if NUM_INSTANCES in limits:
        return instance_type
    return instance_type if instance_type in limits else next(iter(limits), instance_type)
