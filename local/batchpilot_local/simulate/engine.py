"""The discrete-event simulation of service environments, job queues and SageMaker training jobs.

Built on SimPy: the clock, the event queue and the periodic processes (the capacity function's
schedule, chart sampling, the recovery function's workers) are SimPy's; job lifecycles are SimPy
timeouts whose callbacks move a job on (a stale callback, after a preemption, is ignored by its
generation number). Time is seconds from the scenario's start; counts are instances.

What is modelled, and where it comes from (AWS pages named in the code at each rule):

- service environments with capacity limits (``maxCapacity`` per capacity unit);
- job queues: FIFO, fair share (``weightFactor``, ``shareDecaySeconds``, ``computeReservation``,
  ``schedulingPriority`` within a share), quota management (quota shares with capacity limits,
  RESERVE / LEND / LEND_AND_BORROW with ``borrowLimit``, cross-share preemption of borrowed
  capacity, opt-in in-share preemption, ``preemptionRetriesBeforeTermination``);
- SageMaker training jobs: instance type and count, startup, duration, checkpoints, managed spot
  interruptions and ``MaxWaitTimeInSeconds``, internal failures, ``CapacityError`` with a time
  until capacity appears; Batch's retry rules (capacity errors use no attempt);
- batchpilot in the loop (``batchpilot_local.simulate.policies``): the capacity policy every
  ``interval_s`` with its cooldowns, and the recovery decision table with budgets, backoff and the
  SubmitServiceJob token bucket.

Where AWS does not publish its algorithm the engine uses an approximation, listed in
:data:`APPROXIMATIONS` and printed with every result.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any

import simpy

from batchpilot_local.simulate.policies import (
    CapacityController,
    Pacer,
    QueueDemand,
    RecoveryDecider,
    RecoveryOutcome,
    RecoveryStep,
    lost_hours,
    parse_capacity_policy,
    recovery_settings,
)
from batchpilot_local.simulate.scenario import (
    NUM_INSTANCES,
    HeadOfLine,
    InstanceTypeSpec,
    JobQueueSpec,
    QuotaShareSpec,
    Scenario,
    SchedulingKind,
    ServiceEnvironmentSpec,
    SharingStrategy,
)
from batchpilot_local.simulate.workload import ElasticStream, JobSpec

__all__ = [
    "APPROXIMATIONS",
    "AttemptOutcome",
    "AttemptTrace",
    "BorrowTrace",
    "JobState",
    "JobTrace",
    "PresentJob",
    "Samples",
    "Simulation",
    "Trace",
    "reserved_fraction",
]

BACKFILL_SCAN = 100
"""With ``head_of_line: NONE`` a line's first 100 RUNNABLE jobs are tried (the size of
``GetJobQueueSnapshot.frontOfQueue``); AWS does not say how far its scheduler looks."""

ACCOUNT_ARN = "arn:aws:batch:us-east-1:111122223333"

APPROXIMATIONS: dict[str, str] = {
    "head_of_line": (
        "AWS documents that a RUNNABLE service job blocked for capacity or a limit blocks the front of "
        "its queue (AWS Batch User Guide, Jobs stuck in a RUNNABLE status), but not what happens to the "
        "jobs behind one that waits for running jobs to end, nor per share. "
        "head_of_line QUEUE: the first job of the queue (in fair-share order) waits and nothing behind it "
        "starts; SHARE (default): each line waits for its own first job (the whole queue for FIFO, each "
        "share for fair share and quota management) while the other lines go on, except that a fair "
        "share below its weight's part of the capacity holds what frees up until its first job fits (so "
        "small jobs cannot starve a large one); NONE: any of a line's first 100 RUNNABLE jobs that fits "
        "starts."
    ),
    "fair_share_order": (
        "AWS publishes the inputs of fair share (weightFactor, shareDecaySeconds) but not its formula. "
        "The next job comes from the active share with the lowest weightFactor x usage, usage being "
        "instances in use now (shareDecaySeconds 0) or their exponential moving average with time "
        "constant shareDecaySeconds, plus what the share started earlier in the same scheduling pass; "
        "within a share, higher schedulingPriority first, then submission order."
    ),
    "compute_reservation": (
        "computeReservation holds back floor-rounded (computeReservation/100)^active shares of the "
        "environment's capacity from the queue's active shares (the user guide's formula; the rounding "
        "to whole instances is the simulator's)."
    ),
    "quota_management": (
        "Quota shares are served round-robin; a share's own quota comes first, then idle capacity lent "
        "by LEND and LEND_AND_BORROW shares (and capacity no quota share owns) is assigned to "
        "borrowers in submission order. AWS's preemption heuristic is not published: cross-share "
        "preemption takes back borrowed jobs lowest schedulingPriority first, then the most recently "
        "started; in-share preemption the same among the share's lower-priority jobs."
    ),
    "preemption_grace": (
        "Preemption frees capacity at once; the 120 s SIGTERM grace is not modelled, and a preempted "
        "job keeps only the progress of its last periodic checkpoint."
    ),
    "sagemaker": (
        "SageMaker incidents are random: spot interruptions and internal failures are Poisson per "
        "instance-hour, a CapacityError on dispatch makes the instance type unavailable for a drawn "
        "time; a spot interruption keeps the instances (Batch still counts the job as in use)."
    ),
    "capacity_updates": (
        "An UpdateServiceEnvironment by batchpilot takes effect at once (AWS goes through UPDATING first)."
    ),
}
"""Every approximation, by name; results list the ones the scenario uses."""


_ELASTIC_IDS = 10**9
_ELASTIC_PER_STREAM = 10**7
"""Elastic jobs' ids: 10^9 + stream index x 10^7 + k (``Stream.max_jobs`` bounds k; 500 streams)."""


def reserved_fraction(compute_reservation: int, active_shares: int) -> float:
    """Fraction of capacity a fair-share queue holds back for shares that are not active.

    AWS Batch User Guide, "Fair share scheduling policies" (and FairsharePolicy.computeReservation
    in the API Reference): ``(computeReservation/100)^ActiveFairShares``; e.g. 50 holds back 50 %,
    25 % and 12.5 % with 1, 2 and 3 active share identifiers. Nothing is held back while no share
    is active.
    """
    if compute_reservation <= 0 or active_shares <= 0:
        return 0.0
    return float((compute_reservation / 100.0) ** active_shares)


class JobState(StrEnum):
    """A service job's status (AWS Batch API Reference: DescribeServiceJob ``status``)."""

    RUNNABLE = "RUNNABLE"
    STARTING = "STARTING"  # dispatched to SageMaker: provisioning (SCHEDULED + STARTING)
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class AttemptOutcome(StrEnum):
    """How one dispatch (one SageMaker training job) ended."""

    SUCCEEDED = "SUCCEEDED"
    PREEMPTED = "PREEMPTED"
    CAPACITY_ERROR = "CAPACITY_ERROR"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    MAX_WAIT_EXCEEDED = "MAX_WAIT_EXCEEDED"
    RUNNING_AT_END = "RUNNING_AT_END"


class _QuotaTry(StrEnum):
    STARTED = "STARTED"
    BORROW = "BORROW"  # over its own limit, and allowed to borrow: try in the borrowing round
    WAIT = "WAIT"


class _Incident(StrEnum):
    DONE = "DONE"
    SPOT = "SPOT"
    FAILURE = "FAILURE"
    MAX_WAIT = "MAX_WAIT"


# Reason texts as AWS writes them (batchpilot classifies them: see events/service-job/).
REASON_PREEMPTION = "PREEMPTION: Job was preempted and its preemption retries are exhausted"
REASON_INTERNAL = (
    "Received status from SageMaker: InternalServerError: We encountered an internal error. Please try again."
)
REASON_MAX_WAIT = (
    "Received status from SageMaker: MaxWaitTimeExceeded: the spot job ran out of MaxWaitTimeInSeconds"
)
REASON_CAPACITY_LIMIT = (
    "Terminated by JobStateTimeLimit action due to reason: CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
)


@dataclass(frozen=True, slots=True)
class AttemptTrace:
    """One dispatch of a job, for checks and charts.

    Attributes:
        job: the job's id; lineage: its original job's id.
        environment / queue / share / unit / instance_type / instances: where and what it held.
        start / end: seconds (end = the horizon for jobs still dispatched then).
        outcome: see :class:`AttemptOutcome`.
        borrowed: instances above its quota share's own limit when it started (quota management).
    """

    job: int
    lineage: int
    environment: str
    queue: str
    share: str
    unit: str
    instance_type: str
    instances: int
    start: float
    end: float
    outcome: AttemptOutcome
    borrowed: int = 0


@dataclass(frozen=True, slots=True)
class JobTrace:
    """One submitted job (a resubmission is a job of its own, in the same lineage).

    Attributes:
        submit: when it was submitted; first_start: its first dispatch (None: never); end: when it
        reached SUCCEEDED or FAILED (None: not by the horizon); priority: its schedulingPriority.
    """

    job: int
    name: str
    lineage: int
    resubmission: int
    queue: str
    share: str
    instance_type: str
    instances: int
    duration_s: float
    submit: float
    first_start: float | None
    end: float | None
    state: JobState
    preemptions: int
    reason: str | None
    priority: int = 0


@dataclass(frozen=True, slots=True)
class PresentJob:
    """A job as it stands at the present, for a run that starts from it (a start-time forecast)
    instead of from an empty fleet.

    Attributes:
        spec: the job; ``spec.submit_s`` is ignored, ``spec.duration_s`` is the training seconds
            still to run (a running job) or needed (a waiting one).
        since_s: seconds before the present (0 or negative) when it became RUNNABLE (its place
            in its line: Batch orders a share's jobs by priority, then by when they were queued)
            or, running, when its current attempt started.
        running: it holds its instances now (SCHEDULED, STARTING or RUNNING); else RUNNABLE.
    """

    spec: JobSpec
    since_s: float
    running: bool = False


@dataclass(frozen=True, slots=True)
class BorrowTrace:
    """A quota-share dispatch above the share's own limit.

    Attributes:
        time / queue / share / instance_type: when and what.
        used_after: the share's instances of that type after the start; limit: its own limit;
        cap: the most it may borrow; borrowed_total: instances all shares held above their own
        limits after the start; lendable_idle: idle instances lenders (and unowned capacity) had.
    """

    time: float
    queue: str
    share: str
    instance_type: str
    used_after: int
    limit: int
    cap: float
    borrowed_total: int
    lendable_idle: int


@dataclass
class Samples:
    """Charts' series, one value per sample time.

    Attributes:
        times: seconds.
        in_use / limits: environment → instances in use / capacity limit (all units summed).
        shares: share → instances in use.
        runnable: job queue → RUNNABLE jobs.
    """

    times: list[float] = field(default_factory=list)
    in_use: dict[str, list[int]] = field(default_factory=dict)
    limits: dict[str, list[int]] = field(default_factory=dict)
    shares: dict[str, list[int]] = field(default_factory=dict)
    runnable: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class Trace:
    """Everything a run recorded (see :class:`Simulation`)."""

    attempts: list[AttemptTrace] = field(default_factory=list)
    jobs: list[JobTrace] = field(default_factory=list)
    limit_changes: list[tuple[float, str, str, int]] = field(default_factory=list)
    borrows: list[BorrowTrace] = field(default_factory=list)
    submits: list[float] = field(default_factory=list)  # resubmissions' SubmitServiceJob times
    recovery: Counter[str] = field(default_factory=Counter)  # outcome / skip reason → count
    capacity_messages: list[tuple[float, str]] = field(default_factory=list)
    samples: Samples = field(default_factory=Samples)


@dataclass(eq=False, slots=True)
class _Job:
    """A submitted service job while it lives: times are simulated seconds, ``saved_s`` training
    seconds already checkpointed, ``token`` the generation that makes stale timeouts harmless."""

    id: int
    spec: JobSpec
    queue: _Queue
    share: str
    lineage: int
    resubmission: int
    submit: float
    key: tuple[int, float, int]
    saved_s: float = 0.0  # checkpointed training seconds (in S3: survives every restart)
    checkpoint_at: float | None = None  # simulated time of the newest checkpoint
    state: JobState = JobState.RUNNABLE
    token: int = 0
    attempts_failed: int = 0
    preemptions: int = 0
    first_start: float | None = None
    end: float | None = None
    reason: str | None = None
    dispatched_at: float = 0.0
    train_start: float | None = None
    borrowed: int = 0
    capacity_wait_since: float | None = None
    rng: random.Random | None = None

    @property
    def instances(self) -> int:
        return self.spec.instance_count

    @property
    def arn(self) -> str:
        return f"{ACCOUNT_ARN}:service-job/sim-{self.id:07d}"


class _Line:
    """RUNNABLE jobs of one line in dispatch order (a sorted list: inserts and removals are rare
    next to scans)."""

    __slots__ = ("entries", "jobs")

    def __init__(self) -> None:
        self.entries: list[tuple[tuple[int, float, int], int]] = []
        self.jobs: dict[int, _Job] = {}

    def add(self, job: _Job) -> None:
        bisect.insort(self.entries, (job.key, job.id))
        self.jobs[job.id] = job

    def remove(self, job: _Job) -> None:
        index = bisect.bisect_left(self.entries, (job.key, job.id))
        del self.entries[index]
        del self.jobs[job.id]

    def head(self) -> _Job | None:
        return self.jobs[self.entries[0][1]] if self.entries else None

    def first(self, limit: int) -> list[_Job]:
        return [self.jobs[job_id] for _, job_id in self.entries[:limit]]

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(eq=False)
class _Environment:
    """A service environment: its current capacity limits and instances in use, per capacity unit."""

    spec: ServiceEnvironmentSpec
    limits: dict[str, int]
    in_use: Counter[str] = field(default_factory=Counter)
    queues: list[_Queue] = field(default_factory=list)
    t: float = 0.0  # its totals are integrated up to this simulated time (see Simulation._touch)

    @property
    def name(self) -> str:
        return self.spec.name

    def unit(self, instance_type: str) -> str:
        return instance_type if self.spec.quota_management else NUM_INSTANCES

    def free(self, unit: str) -> int:
        return self.limits.get(unit, 0) - self.in_use[unit]

    @property
    def in_use_total(self) -> int:
        return sum(self.in_use.values())

    @property
    def limit_total(self) -> int:
        return sum(self.limits.values())


@dataclass(eq=False)
class _Queue:
    """A job queue: its lines of RUNNABLE jobs, what they ask for and what its dispatched jobs hold
    (per instance type, per share, per quota share), and the fair-share usage clocks."""

    spec: JobQueueSpec
    env: _Environment
    lines: dict[str, _Line] = field(default_factory=dict)
    runnable: int = 0
    runnable_instances: Counter[str] = field(default_factory=Counter)
    runnable_sizes: dict[tuple[str, int], dict[int, None]] = field(default_factory=dict)
    in_use: Counter[str] = field(default_factory=Counter)  # instance type → instances
    running: dict[int, _Job] = field(default_factory=dict)  # dispatched jobs
    # fair share
    share_in_use: Counter[str] = field(default_factory=Counter)
    share_jobs: Counter[str] = field(default_factory=Counter)  # RUNNABLE + dispatched jobs
    share_idle_since: dict[str, float] = field(default_factory=dict)
    ema: dict[str, float] = field(default_factory=dict)
    ema_t: dict[str, float] = field(default_factory=dict)
    # quota management
    quota: dict[str, QuotaShareSpec] = field(default_factory=dict)
    quota_used: dict[str, Counter[str]] = field(default_factory=dict)
    rotation: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def kind(self) -> SchedulingKind:
        return self.spec.scheduling

    def line_of(self, job: _Job) -> _Line:
        # FIFO: one line (jobs ordered by submission). Fair share and quota management: one line
        # per share identifier / quota share ("virtual queues", AWS Batch User Guide: Creating
        # quota shares).
        key = "" if self.kind is SchedulingKind.FIFO else job.share
        line = self.lines.get(key)
        if line is None:
            line = self.lines[key] = _Line()
        return line

    def in_use_total(self) -> int:
        return sum(self.in_use.values())


def _sort_key(spec: JobSpec, queue: JobQueueSpec, submit: float, seq: int) -> tuple[int, float, int]:
    # AWS Batch API Reference, SubmitServiceJob.schedulingPriority: "higher ... scheduled first";
    # it orders jobs within a fair share or quota share. A FIFO queue orders by submission only
    # (AWS Batch User Guide: Job queues).
    priority = 0 if queue.scheduling is SchedulingKind.FIFO else -spec.priority
    return (priority, submit, seq)


class Simulation:
    """One run of a scenario on a list of jobs.

    Args:
        scenario: the validated scenario.
        jobs: the workload (``workload.build_jobs``).
        elastic: streams with elastic demand (``WorkloadJobs.elastic``): each keeps its
            ``keep_runnable`` jobs waiting while it is open, a new one submitted as one is first
            dispatched.
        seed: the random seed (per-job incident draws are seeded from it and the job's lineage, so
            two scenarios run on the same workload draw the same incidents for the same jobs).
        present: jobs already running or waiting when the run starts (:class:`PresentJob`): the
            running ones hold their instances from t = 0 and finish after their ``duration_s``,
            the waiting ones are RUNNABLE in their lines at their places; ``jobs`` then are
            arrivals after the present. Their traces keep their names, so a forecast reads each
            waiting job's ``first_start``.
        stream: more arrivals, in submission order, drawn only as the run reaches them (a
            forecast's random arrivals: a run that stops early never draws the rest).

    After :meth:`run`, :attr:`trace` holds what happened, :attr:`env_totals`, :attr:`share_seconds`
    and :attr:`counts` the totals, :attr:`hourly` the fleet's instance-seconds in use and of capacity
    limit per clock hour (hour → [in use, limit]).
    """

    def __init__(
        self,
        scenario: Scenario,
        jobs: Iterable[JobSpec],
        seed: int,
        elastic: Sequence[ElasticStream] = (),
        present: Sequence[PresentJob] = (),
        stream: Iterable[JobSpec] = (),
    ) -> None:
        self.scenario = scenario
        self.seed = seed
        self._present = list(present)
        self._stream = stream
        self._watch: set[str] = set()
        self._stop: simpy.Event | None = None
        self._elastic = list(elastic)
        self._elastic_drawn = [0] * len(self._elastic)
        self.env = simpy.Environment()
        self.horizon = scenario.horizon_s
        self.trace = Trace()
        self._jobs_in = sorted(jobs, key=lambda j: (j.submit_s, j.name))
        self._types: dict[str, InstanceTypeSpec] = dict(scenario.instance_types)
        self._type_in_use: Counter[str] = Counter()
        self._outage_until: dict[str, float] = {}
        self._environments: dict[str, _Environment] = {}
        self._queues: dict[str, _Queue] = {}
        for env_spec in scenario.service_environments:
            env = _Environment(env_spec, dict(env_spec.capacity_limits))
            self._environments[env.name] = env
            for unit, limit in env.limits.items():
                self.trace.limit_changes.append((0.0, env.name, unit, limit))
        for queue_spec in sorted(scenario.job_queues, key=lambda q: -q.priority):
            env = self._environments[queue_spec.service_environment]
            queue = _Queue(queue_spec, env)
            if queue_spec.quota is not None:
                queue.quota = {s.name: s for s in queue_spec.quota.quota_shares}
                queue.quota_used = {s.name: Counter() for s in queue_spec.quota.quota_shares}
                for name in queue.quota:
                    queue.lines[name] = _Line()
            env.queues.append(queue)
            self._queues[queue.name] = queue
        self._next_id = 0
        self._dispatch_pending = False
        # Environments something changed in since the last scheduling pass: only those are
        # scheduled again (a pass over an unchanged environment starts nothing it did not start
        # before), so a pass costs what changed, not the fleet's size.
        self._dirty: dict[str, None] = {}
        self._fleet_in_use = 0
        self._fleet_limit = sum(env.limit_total for env in self._environments.values())
        self._share_t: dict[str, float] = {}
        self._limited_types = {kind for kind, spec in self._types.items() if spec.available is not None}
        self._live: dict[int, _Job] = {}
        self._all: list[_Job] = []
        # integrals (instance-seconds) and their clock
        self._t = 0.0
        self.env_totals: dict[str, defaultdict[str, float]] = {
            name: defaultdict(float) for name in self._environments
        }
        # fleet-wide instance-seconds [in use, capacity limit] per clock hour of the run (hour 0
        # starts at the scenario's start): the peak-hour allocation is the busiest hour's ratio
        self.hourly: defaultdict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])
        self.share_seconds: defaultdict[str, float] = defaultdict(float)
        self.entitled_seconds: defaultdict[str, float] = defaultdict(float)
        self.fair_share_seconds: defaultdict[str, float] = defaultdict(float)
        self._share_in_use: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()
        self.lost_instance_hours = 0.0
        self._capacity: list[CapacityController] = []
        self._recovery: RecoveryDecider | None = None
        self._recovery_store: simpy.Store | None = None
        self._setup_batchpilot()

    # ------------------------------------------------------------------------------- set-up

    def _setup_batchpilot(self) -> None:
        loop = self.scenario.batchpilot.capacity
        if loop is not None and loop.enabled:
            config = parse_capacity_policy(loop.policy)
            for name, env_config in config.service_environments.items():
                self._capacity.append(
                    CapacityController(name, env_config, config.defaults, dry_run=loop.dry_run)
                )
        recovery = self.scenario.batchpilot.recovery
        if recovery is not None and recovery.enabled:
            self._recovery = RecoveryDecider(recovery_settings(recovery.settings_values()))
            self._recovery_store = simpy.Store(self.env)

    def _at(self, delay: float, callback: Callable[..., None], *args: Any) -> None:
        """Call ``callback(*args)`` ``delay`` seconds from now (a SimPy timeout's callback)."""
        self.counts["timeouts"] += 1
        event = self.env.timeout(max(0.0, delay))
        event.callbacks.append(lambda _event: callback(*args))

    @property
    def now(self) -> float:
        """The simulated time (seconds)."""
        return float(self.env.now)

    # --------------------------------------------------------------------------- integrals

    def _advance(self) -> None:
        """Integrate the fleet's hourly instance-time totals from the last change to now (the
        fleet's counters, whatever its size); each environment's own totals are integrated when
        something in it changes (:meth:`_touch`)."""
        now = self.now
        if now <= self._t:
            return
        start, self._t = self._t, now
        fleet_in_use, fleet_limit = self._fleet_in_use, self._fleet_limit
        t = start
        while t < now:
            hour = int(t // 3600.0)
            end = min(now, (hour + 1) * 3600.0)
            bucket = self.hourly[hour]
            bucket[0] += fleet_in_use * (end - t)
            bucket[1] += fleet_limit * (end - t)
            t = end

    def _touch(self, env: _Environment) -> None:
        """Integrate ``env``'s totals (instance-seconds in use and of limit, waiting time, its fair
        shares' entitlement) from its last change to now: called before anything they depend on
        changes in ``env``, so each interval is integrated with the values that held during it."""
        self._advance()
        now = self.now
        dt = now - env.t
        if dt <= 0:
            return
        env.t = now
        totals = self.env_totals[env.name]
        in_use, limit = env.in_use_total, env.limit_total
        totals["in_use_s"] += in_use * dt
        totals["limit_s"] += limit * dt
        if any(q.runnable for q in env.queues):
            totals["in_use_waiting_s"] += in_use * dt
            totals["limit_waiting_s"] += limit * dt
            totals["waiting_s"] += dt
        for queue in env.queues:
            self._entitlement(queue, dt)

    def _touch_share(self, share: str) -> None:
        """Integrate ``share``'s instance-seconds in use up to now (before its count changes)."""
        now = self.now
        count = self._share_in_use[share]
        if count:
            self.share_seconds[share] += count * (now - self._share_t.get(share, now))
        self._share_t[share] = now

    def _entitlement(self, queue: _Queue, dt: float) -> None:
        if queue.kind is SchedulingKind.FAIR_SHARE:
            assert queue.spec.fair_share is not None
            # The shares active during the interval that ends now (one whose decay ends now counts).
            active = self._active_shares(queue, ending=True)
            if not active:
                return
            inverse = {share: 1.0 / queue.spec.fair_share.weight(share) for share in active}
            total = sum(inverse.values())
            for share, value in inverse.items():
                # AWS Batch User Guide, Fair share scheduling policies: a share's part of the
                # capacity is proportional to 1/weightFactor among the active shares.
                self.entitled_seconds[share] += value / total * dt
            for share in active:
                self.fair_share_seconds[share] += dt
            self.fair_share_seconds[f"queue:{queue.name}"] += dt

    # ----------------------------------------------------------------------------- running

    def run(self, *, until_started: Iterable[str] = ()) -> Trace:
        """Run the simulation to the horizon; returns :attr:`trace`.

        Args:
            until_started: job names (``JobSpec.name``); when given, the run stops as soon as each
                of them has been dispatched once (a forecast needs nothing after that), else at
                the horizon. The totals then cover the run up to that moment.
        """
        self._watch = set(until_started)
        self._stop = self.env.event() if self._watch else None
        self._seed_present()
        self.env.process(self._arrivals())
        for index, stream in enumerate(self._elastic):
            self.env.process(self._elastic_open(index, stream))
        self.env.process(self._sampler())
        if self._capacity:
            loop = self.scenario.batchpilot.capacity
            assert loop is not None
            self.env.process(self._capacity_loop(loop.interval_s))
        if self._recovery is not None:
            workers = self._recovery.settings.max_concurrency
            rate = self._recovery.settings.per_invocation_rate()
            for _ in range(workers):
                # docs/recovery.md, "Budgets, backoff and pacing": each invocation paces itself at
                # submits_per_second / max_concurrency, one burst token each.
                self.env.process(self._recovery_worker(Pacer(rate, 1.0, lambda: float(self.env.now))))
        if self._stop is not None and self._watch:
            self.env.run(until=simpy.AnyOf(self.env, [self._stop, self.env.timeout(self.horizon)]))
        elif self._stop is None:
            self.env.run(until=self.horizon)
        self._advance()
        for env in self._environments.values():
            self._touch(env)
        for share in list(self._share_in_use):
            self._touch_share(share)
        self._finish()
        return self.trace

    def _seed_present(self) -> None:
        """Put the present's jobs in place at t = 0: running ones first (they hold capacity), then
        the waiting ones in their lines; fair-share usage starts at what the shares hold now."""
        for item in sorted(self._present, key=lambda p: (not p.running, p.since_s, p.spec.name)):
            job = self._submit(
                item.spec, lineage=None, resubmission=0, saved_s=0.0, checkpoint_at=None, at=item.since_s
            )
            if item.running:
                self._start(job)
                job.first_start = job.dispatched_at = item.since_s
        for queue in self._queues.values():
            for share, count in queue.share_in_use.items():
                queue.ema[share] = float(count)
                queue.ema_t[share] = 0.0

    def _arrivals(self) -> Any:
        for spec in heapq.merge(self._jobs_in, self._stream, key=lambda j: j.submit_s):
            if spec.submit_s >= self.horizon:
                break
            if spec.submit_s > self.now:
                yield self.env.timeout(spec.submit_s - self.now)
            self._submit(spec, lineage=None, resubmission=0, saved_s=0.0, checkpoint_at=None)

    def _elastic_open(self, index: int, stream: ElasticStream) -> Any:
        if stream.open_s > self.now:
            yield self.env.timeout(stream.open_s - self.now)
        for _ in range(stream.stream.keep_runnable or 0):
            self._elastic_next(index)

    def _elastic_next(self, index: int) -> None:
        """Submit the next job of elastic stream ``index`` while it is open and below ``max_jobs``."""
        stream = self._elastic[index]
        drawn = self._elastic_drawn[index]
        if self.now >= stream.close_s(self.horizon):
            return
        if drawn >= min(stream.stream.max_jobs or _ELASTIC_PER_STREAM - 1, _ELASTIC_PER_STREAM - 1):
            return
        self._elastic_drawn[index] = drawn + 1
        spec = stream.job(drawn + 1, self.now, index)
        # Its own id space, a function of the stream and k: the other jobs keep the ids (and so the
        # incident draws) they have in every run of the workload, however many elastic jobs ran.
        job_id = _ELASTIC_IDS + index * _ELASTIC_PER_STREAM + drawn + 1
        self._submit(spec, lineage=None, resubmission=0, saved_s=0.0, checkpoint_at=None, job_id=job_id)

    def _sampler(self) -> Any:
        interval = self.scenario.sample_interval_s or max(60.0, self.horizon / 2000.0)
        samples = self.trace.samples
        shares = sorted(
            {spec.share or "-" for spec in self._jobs_in} | {e.stream.share for e in self._elastic}
        )
        for name in self._environments:
            samples.in_use[name] = []
            samples.limits[name] = []
        for share in shares:
            samples.shares[share] = []
        for name in self._queues:
            samples.runnable[name] = []
        while True:
            samples.times.append(self.now)
            for name, environment in self._environments.items():
                samples.in_use[name].append(environment.in_use_total)
                samples.limits[name].append(environment.limit_total)
            for share in shares:
                samples.shares[share].append(self._share_in_use[share])
            for name, job_queue in self._queues.items():
                samples.runnable[name].append(job_queue.runnable)
            yield self.env.timeout(interval)

    # ------------------------------------------------------------------------- submission

    def _submit(
        self,
        spec: JobSpec,
        *,
        lineage: int | None,
        resubmission: int,
        saved_s: float,
        checkpoint_at: float | None,
        job_id: int | None = None,
        at: float | None = None,
    ) -> _Job:
        """Submit ``spec`` now (``at``: as if at that earlier time, its place in its line)."""
        self._advance()
        queue = self._queues[spec.queue]
        if job_id is None:
            job_id = self._next_id
            self._next_id += 1
        share = spec.share or "-"
        job = _Job(
            id=job_id,
            spec=spec,
            queue=queue,
            share=share,
            lineage=job_id if lineage is None else lineage,
            resubmission=resubmission,
            submit=self.now if at is None else at,
            key=_sort_key(spec, queue.spec, self.now if at is None else at, job_id),
            saved_s=saved_s,
            checkpoint_at=checkpoint_at,
        )
        self._all.append(job)
        self._live[job.id] = job
        self.counts["jobs_submitted"] += 1
        self._touch(queue.env)
        queue.share_jobs[share] += 1
        queue.share_idle_since.pop(share, None)
        self._enqueue(job)
        return job

    def _enqueue(self, job: _Job) -> None:
        """Put ``job`` in its line as RUNNABLE (a new job, a retry or a requeued preempted job:
        Batch keeps its createdAt, so it keeps its place)."""
        queue = job.queue
        self._touch(queue.env)
        job.state = JobState.RUNNABLE
        queue.line_of(job).add(job)
        queue.runnable += 1
        queue.runnable_instances[job.spec.instance_type] += job.instances
        queue.runnable_sizes.setdefault((job.spec.instance_type, job.instances), {})[job.id] = None
        self._request_dispatch(queue.env)

    def _dequeue(self, job: _Job) -> None:
        queue = job.queue
        self._touch(queue.env)
        queue.line_of(job).remove(job)
        queue.runnable -= 1
        queue.runnable_instances[job.spec.instance_type] -= job.instances
        del queue.runnable_sizes[(job.spec.instance_type, job.instances)][job.id]

    def _request_dispatch(self, env: _Environment | None = None) -> None:
        """Schedule a pass over ``env`` (None: every environment, for a change they all see: an
        instance type's SageMaker capacity)."""
        if env is None:
            self._dirty.update(dict.fromkeys(self._environments))
        else:
            self._dirty[env.name] = None
        # Every change at one instant is followed by one scheduling pass (SimPy runs this
        # zero-delay timeout after the events already due now).
        if not self._dispatch_pending:
            self._dispatch_pending = True
            self._at(0.0, self._dispatch)

    # --------------------------------------------------------------------------- capacity

    def _fits(self, job: _Job) -> bool:
        """The environment's limit, SageMaker's capacity for the type, and no capacity outage."""
        env = job.queue.env
        kind = job.spec.instance_type
        n = job.instances
        if env.free(env.unit(kind)) < n:
            return False
        return self._type_fits(kind, n)

    def _type_fits(self, kind: str, n: int) -> bool:
        if self._outage_until.get(kind, 0.0) > self.now:
            return False
        spec = self._types.get(kind)
        return spec is None or spec.available is None or self._type_in_use[kind] + n <= spec.available

    # --------------------------------------------------------------------------- dispatch

    def _dispatch(self) -> None:
        self._dispatch_pending = False
        self._advance()
        dirty, self._dirty = self._dirty, {}
        for name in dirty:
            env = self._environments[name]
            # AWS Batch User Guide, Job queues: a service environment serves its job queues in
            # order of job queue priority, higher first.
            for queue in env.queues:
                if not queue.runnable:
                    continue
                if queue.kind is SchedulingKind.FIFO:
                    self._dispatch_fifo(queue)
                elif queue.kind is SchedulingKind.FAIR_SHARE:
                    self._dispatch_fair_share(queue)
                else:
                    self._dispatch_quota(queue)

    def _dispatch_fifo(self, queue: _Queue) -> None:
        line = queue.lines.get("")
        if line is None:
            return
        if queue.spec.head_of_line is HeadOfLine.NONE:
            for job in line.first(BACKFILL_SCAN):
                if self._fits(job):
                    self._start(job)
            return
        while line:
            head = line.head()
            assert head is not None
            if not self._fits(head):
                # The first job waits and the queue with it: AWS Batch User Guide, "Jobs stuck in a
                # RUNNABLE status" (a RUNNABLE job blocks the front of the queue until it runs or
                # jobStateTimeLimitActions terminates it).
                return
            self._start(head)

    def _active_shares(self, queue: _Queue, *, ending: bool = False) -> list[str]:
        # AWS Batch User Guide, Fair share scheduling policies: a share identifier is active while
        # it has jobs SUBMITTED to RUNNING, and for shareDecaySeconds after its last one.
        # ``ending``: during the interval that ends now (a decay that ends now still counts).
        assert queue.spec.fair_share is not None
        decay = queue.spec.fair_share.share_decay_seconds
        now = self.now
        active = [share for share, count in queue.share_jobs.items() if count > 0]
        for share, since in queue.share_idle_since.items():
            if (now <= since + decay if ending else now < since + decay) and queue.share_jobs[share] == 0:
                active.append(share)
        return active

    def _below_entitlement(self, queue: _Queue, share: str, usable: int) -> bool:
        """True when ``share`` holds fewer instances than its weight entitles it to: usable
        capacity x (1/weightFactor) / (sum of 1/weightFactor over the active shares)."""
        policy = queue.spec.fair_share
        assert policy is not None
        active = self._active_shares(queue)
        if share not in active:
            active.append(share)
        total = sum(1.0 / policy.weight(s) for s in active)
        entitled = usable * (1.0 / policy.weight(share)) / total
        return queue.share_in_use[share] < entitled

    def _usage(self, queue: _Queue, share: str) -> float:
        """The share's usage for fair share: instances in use now (no decay) or their moving
        average over ``shareDecaySeconds`` (see APPROXIMATIONS['fair_share_order'])."""
        assert queue.spec.fair_share is not None
        tau = queue.spec.fair_share.share_decay_seconds
        current = float(queue.share_in_use[share])
        if tau <= 0:
            return current
        ema = queue.ema.get(share, 0.0)
        dt = self.now - queue.ema_t.get(share, self.now)
        return current + (ema - current) * math.exp(-dt / tau)

    def _share_changes(self, queue: _Queue, share: str, delta: int) -> None:
        if queue.kind is SchedulingKind.FAIR_SHARE:
            assert queue.spec.fair_share is not None
            if queue.spec.fair_share.share_decay_seconds > 0:
                queue.ema[share] = self._usage(queue, share)
                queue.ema_t[share] = self.now
        queue.share_in_use[share] += delta

    def _dispatch_fair_share(self, queue: _Queue) -> None:
        policy = queue.spec.fair_share
        assert policy is not None
        env = queue.env
        mode = queue.spec.head_of_line
        candidates = {share for share, line in queue.lines.items() if line}
        started: Counter[str] = Counter()
        decay = policy.share_decay_seconds > 0
        while candidates:
            # computeReservation (AWS Batch User Guide, Fair share scheduling policies): the active
            # shares may use only 1 - (computeReservation/100)^active of the capacity.
            active = len(self._active_shares(queue))
            usable = math.floor(
                env.limits.get(NUM_INSTANCES, 0)
                * (1.0 - reserved_fraction(policy.compute_reservation, active))
                + 1e-9
            )
            # Lower weightFactor x usage goes first (weightFactor: "lower ... gets more").
            share = min(
                candidates,
                key=lambda s: (
                    policy.weight(s) * (self._usage(queue, s) + (started[s] if decay else 0)),
                    queue.lines[s].entries[0][0],
                    s,
                ),
            )
            line = queue.lines[share]
            chosen: _Job | None = None
            scan = line.first(BACKFILL_SCAN) if mode is HeadOfLine.NONE else line.first(1)
            for job in scan:
                if self._fits(job) and queue.in_use_total() + job.instances <= usable:
                    chosen = job
                    break
            if chosen is None:
                if mode is HeadOfLine.QUEUE:
                    return
                if mode is HeadOfLine.SHARE and self._below_entitlement(queue, share, usable):
                    # The share next in fair-share order is below its part of the capacity: what
                    # frees up is held for its first job, so that small jobs of other shares
                    # cannot starve a large one (see APPROXIMATIONS["head_of_line"]).
                    return
                candidates.discard(share)
                continue
            self._start(chosen)
            started[share] += chosen.instances
            if not line:
                candidates.discard(share)

    # ----------------------------------------------------------------- quota management

    def _excess(self, queue: _Queue, share: str, kind: str) -> int:
        spec = queue.quota[share]
        return max(0, queue.quota_used[share][kind] - spec.capacity_limits.get(kind, 0))

    def _lendable_idle(self, queue: _Queue, kind: str, borrower: str | None) -> int:
        """Idle instances of ``kind`` that borrowers may use: the idle part of every LEND and
        LEND_AND_BORROW share's own limit (but ``borrower``'s), and environment capacity no quota
        share owns."""
        env = queue.env
        owned = 0
        idle = 0
        for name, spec in queue.quota.items():
            own = spec.capacity_limits.get(kind, 0)
            owned += own
            if name != borrower and spec.strategy is not SharingStrategy.RESERVE:
                idle += max(0, own - queue.quota_used[name][kind])
        return idle + max(0, env.limits.get(kind, 0) - owned)

    def _borrowed_total(self, queue: _Queue, kind: str) -> int:
        return sum(self._excess(queue, name, kind) for name in queue.quota)

    def _dispatch_quota(self, queue: _Queue) -> None:
        names = list(queue.quota)
        mode = queue.spec.head_of_line
        # Each pass starts, preempts for, or lends to at least one job, so the loop ends; the
        # bound only guards against a scheduling bug looping for ever.
        for _ in range(len(self._live) + 2):
            progress = False
            halted = False
            borrowers: list[_Job] = []
            # AWS Batch User Guide, Creating quota shares: quota shares are virtual queues "that
            # the AWS Batch scheduler iterates between": served round-robin, from a rotating start.
            first = queue.rotation % len(names)
            queue.rotation += 1
            for name in names[first:] + names[:first]:
                line = queue.lines[name]
                scan = line.first(BACKFILL_SCAN) if mode is HeadOfLine.NONE else line.first(1)
                for job in scan:
                    outcome = self._try_quota_job(queue, name, job)
                    if outcome is _QuotaTry.STARTED:
                        progress = True
                        break
                    if outcome is _QuotaTry.BORROW:
                        borrowers.append(job)
                        break
                    if mode is HeadOfLine.QUEUE:
                        halted = True
                        break
                if halted:
                    break
            # Idle capacity goes to borrowers first come, first served (AWS Batch User Guide,
            # Quota management: idle capacity is assigned FIFO).
            for job in sorted(borrowers, key=lambda j: (j.submit, j.id)):
                if job.state is JobState.RUNNABLE and self._try_borrow(queue, job):
                    progress = True
            if not progress:
                return
        raise RuntimeError(f"quota scheduling of {queue.name} did not settle")  # pragma: no cover

    def _try_quota_job(self, queue: _Queue, share: str, job: _Job) -> _QuotaTry:
        spec = queue.quota[share]
        kind = job.spec.instance_type
        n = job.instances
        env = queue.env
        used = queue.quota_used[share][kind]
        own = spec.capacity_limits.get(kind, 0)
        if not self._type_fits(kind, n):
            return _QuotaTry.WAIT
        if used + n <= own:
            # Within its own limit. If borrowers hold capacity that is now needed, either because
            # the environment is full or because this start shrinks the idle capacity they borrow,
            # take it back first (AWS Batch User Guide, Quota shares, "Capacity restoration via
            # preemption": Batch preempts borrowing jobs when the lender's jobs arrive).
            need_env = n - env.free(kind)
            idle_after = self._lendable_idle(queue, kind, None) - (
                min(n, own - used) if spec.strategy is not SharingStrategy.RESERVE else 0
            )
            need_reclaim = self._borrowed_total(queue, kind) - idle_after
            if need_env <= 0 and need_reclaim <= 0:
                self._start(job)
                return _QuotaTry.STARTED
            victims = self._borrowing_victims(queue, share, kind, max(0, need_env), max(0, need_reclaim))
            if victims is None:
                return _QuotaTry.WAIT
            for victim in victims:
                self._preempt(victim, f"reclaimed by quota share {share}")
            self._start(job)
            return _QuotaTry.STARTED
        if spec.in_share_preemption:
            # AWS Batch User Guide, Creating quota shares: with in-share preemption a higher-priority
            # job preempts lower-priority SCHEDULED, STARTING or RUNNING jobs of the same share.
            victims = self._in_share_victims(queue, share, job, used + n - own)
            if victims is not None:
                for victim in victims:
                    self._preempt(victim, f"in-share preemption by a higher-priority job of {share}")
                if env.free(kind) >= n:
                    self._start(job)
                    return _QuotaTry.STARTED
        if spec.strategy is SharingStrategy.LEND_AND_BORROW:
            return _QuotaTry.BORROW
        return _QuotaTry.WAIT

    def _try_borrow(self, queue: _Queue, job: _Job) -> bool:
        share = job.share
        spec = queue.quota[share]
        kind = job.spec.instance_type
        n = job.instances
        if not self._fits(job):
            return False
        used = queue.quota_used[share][kind]
        own = spec.capacity_limits.get(kind, 0)
        excess_after = used + n - own
        # QuotaShareResourceSharingConfiguration.borrowLimit: percent of its own limit it may
        # borrow on top (AWS Batch API Reference); -1 is unlimited.
        if excess_after > spec.borrow_cap(kind):
            return False
        borrowed_after = self._borrowed_total(queue, kind) - self._excess(queue, share, kind) + excess_after
        idle = self._lendable_idle(queue, kind, share)
        if borrowed_after > idle:
            return False
        self._start(job)
        self.trace.borrows.append(
            BorrowTrace(
                self.now, queue.name, share, kind, used + n, own, spec.borrow_cap(kind), borrowed_after, idle
            )
        )
        return True

    def _borrowing_victims(
        self, queue: _Queue, share: str, kind: str, need_env: int, need_reclaim: int
    ) -> list[_Job] | None:
        """Jobs of other shares running on borrowed capacity whose preemption frees ``need_env``
        instances of ``kind`` and cuts borrowing by ``need_reclaim``; None when preempting every
        borrowed job would not be enough."""
        excess = {name: self._excess(queue, name, kind) for name in queue.quota if name != share}
        if sum(excess.values()) < max(need_env, need_reclaim):
            return None
        candidates = sorted(
            (
                j
                for j in queue.running.values()
                if j.share != share and j.spec.instance_type == kind and excess[j.share] > 0
            ),
            key=lambda j: (j.spec.priority, -j.dispatched_at, j.id),
        )
        chosen: list[_Job] = []
        freed = reclaimed = 0
        for job in candidates:
            if freed >= need_env and reclaimed >= need_reclaim:
                break
            if excess[job.share] <= 0:
                continue
            chosen.append(job)
            freed += job.instances
            reclaimed += min(job.instances, excess[job.share])
            excess[job.share] -= job.instances
        return chosen if freed >= need_env and reclaimed >= need_reclaim else None

    def _in_share_victims(self, queue: _Queue, share: str, job: _Job, need: int) -> list[_Job] | None:
        kind = job.spec.instance_type
        env_need = job.instances - queue.env.free(kind)
        candidates = sorted(
            (
                j
                for j in queue.running.values()
                if j.share == share and j.spec.instance_type == kind and j.spec.priority < job.spec.priority
            ),
            key=lambda j: (j.spec.priority, -j.dispatched_at, j.id),
        )
        chosen: list[_Job] = []
        freed = 0
        for victim in candidates:
            if freed >= need and freed >= env_need:
                break
            chosen.append(victim)
            freed += victim.instances
        return chosen if freed >= need and freed >= env_need else None

    # -------------------------------------------------------------------------- lifecycle

    def _hold(self, job: _Job, delta: int) -> None:
        """Add (or, negative, release) the job's instances everywhere they are counted."""
        queue = job.queue
        env = queue.env
        kind = job.spec.instance_type
        self._touch(env)
        self._touch_share(job.share)
        self._fleet_in_use += delta
        env.in_use[env.unit(kind)] += delta
        self._type_in_use[kind] += delta
        queue.in_use[kind] += delta
        self._share_changes(queue, job.share, delta)
        self._share_in_use[job.share] += delta
        if queue.quota:
            queue.quota_used[job.share][kind] += delta

    def _start(self, job: _Job) -> None:
        self._advance()
        self._dequeue(job)
        queue = job.queue
        kind = job.spec.instance_type
        if queue.quota:
            own = queue.quota[job.share].capacity_limits.get(kind, 0)
            job.borrowed = max(0, queue.quota_used[job.share][kind] + job.instances - own)
        self._hold(job, job.instances)
        queue.running[job.id] = job
        job.state = JobState.STARTING
        job.token += 1
        job.dispatched_at = self.now
        job.train_start = None
        if job.first_start is None:
            job.first_start = self.now
            if self._watch and job.spec.name in self._watch:
                self._watch.discard(job.spec.name)
                if not self._watch and self._stop is not None:
                    self._stop.succeed()
            if job.spec.elastic is not None and job.resubmission == 0:
                # Elastic demand: the job left the waiting line, its stream submits the next one
                # (after this scheduling pass, which it may then join).
                self._at(0.0, self._elastic_next, job.spec.elastic)
        if job.rng is None:
            job.rng = random.Random(f"{self.seed}:{job.spec.name}:{job.lineage}:{job.resubmission}")  # noqa: S311
        self.counts["dispatches"] += 1
        type_spec = self._types.get(kind)
        errors = type_spec.capacity_errors if type_spec is not None else None
        if errors is not None and errors.probability > 0 and job.rng.random() < errors.probability:
            self._at(errors.detected_after_s, self._capacity_error, job, job.token)
            return
        startup = type_spec.startup_s if type_spec is not None else 0.0
        self._at(startup, self._train, job, job.token)

    def _release(self, job: _Job, outcome: AttemptOutcome) -> None:
        self._advance()
        queue = job.queue
        self._hold(job, -job.instances)
        del queue.running[job.id]
        job.token += 1
        self.trace.attempts.append(
            AttemptTrace(
                job.id,
                job.lineage,
                queue.env.name,
                queue.name,
                job.share,
                queue.env.unit(job.spec.instance_type),
                job.spec.instance_type,
                job.instances,
                job.dispatched_at,
                self.now,
                outcome,
                job.borrowed,
            )
        )
        job.borrowed = 0
        # What it frees is its environment's, and SageMaker's for its type when that is limited.
        self._request_dispatch(None if job.spec.instance_type in self._limited_types else queue.env)

    def _capacity_error(self, job: _Job, token: int) -> None:
        if token != job.token:
            return
        # AWS Batch User Guide, Service job retry strategies: Batch retries a training job that
        # failed for insufficient capacity until capacity is available, without using an attempt.
        kind = job.spec.instance_type
        type_spec = self._types[kind]
        assert type_spec.capacity_errors is not None and job.rng is not None
        self.counts["capacity_errors"] += 1
        wait = type_spec.capacity_errors.time_to_capacity_s.sample(job.rng)
        until = self.now + wait
        if until > self._outage_until.get(kind, 0.0):
            self._outage_until[kind] = until
            self._at(wait, self._request_dispatch)
        self._release(job, AttemptOutcome.CAPACITY_ERROR)
        if job.capacity_wait_since is None:
            job.capacity_wait_since = self.now
            limit = job.queue.spec.job_state_time_limit_s
            if limit is not None:
                self._at(limit, self._capacity_time_limit, job, job.capacity_wait_since)
        self._enqueue(job)

    def _capacity_time_limit(self, job: _Job, since: float) -> None:
        # AWS Batch User Guide, "Automatic remediation with jobStateTimeLimitActions" (service
        # jobs): a job RUNNABLE for maxTimeSeconds with reason CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY
        # is terminated (FAILED, "Terminated by JobStateTimeLimit action due to reason: ..."), and
        # the next job advances to the head of the queue.
        if job.state is not JobState.RUNNABLE or job.capacity_wait_since != since:
            return
        if self._outage_until.get(job.spec.instance_type, 0.0) <= self.now:
            return
        self._dequeue(job)
        self._fail(job, REASON_CAPACITY_LIMIT)

    def _train(self, job: _Job, token: int) -> None:
        """Training starts (or resumes after a spot interruption) from the newest checkpoint."""
        if token != job.token:
            return
        job.state = JobState.RUNNING
        job.capacity_wait_since = None
        job.train_start = self.now
        rng = job.rng
        assert rng is not None
        spec = job.spec
        type_spec = self._types.get(spec.instance_type)
        remaining = max(0.0, spec.duration_s - job.saved_s)
        times: list[tuple[float, _Incident]] = [(remaining, _Incident.DONE)]
        n = job.instances
        if type_spec is not None and type_spec.failures_per_hour > 0:
            times.append((rng.expovariate(type_spec.failures_per_hour * n / 3600.0), _Incident.FAILURE))
        if spec.spot:
            if type_spec is not None and type_spec.spot_interruptions_per_hour > 0:
                rate = type_spec.spot_interruptions_per_hour * n / 3600.0
                times.append((rng.expovariate(rate), _Incident.SPOT))
            if spec.max_wait_s is not None:
                # SageMaker Developer Guide, Managed spot training: MaxWaitTimeInSeconds bounds the
                # whole job, waiting for spot capacity included.
                times.append((job.dispatched_at + spec.max_wait_s - self.now, _Incident.MAX_WAIT))
        delay, incident = min(times, key=lambda pair: pair[0])
        self._at(delay, self._incident, job, job.token, incident)

    def _checkpoint(self, job: _Job) -> None:
        """Move the job's saved progress to its newest periodic checkpoint (training seconds since
        ``train_start`` in whole checkpoint intervals) and count the work lost since."""
        assert job.train_start is not None
        ran = self.now - job.train_start
        interval = job.spec.checkpoint_interval_s
        if interval is not None and ran >= interval:
            steps = math.floor(ran / interval)
            job.saved_s = min(job.spec.duration_s, job.saved_s + steps * interval)
            job.checkpoint_at = job.train_start + steps * interval
        elif interval is None:
            job.saved_s = 0.0
            job.checkpoint_at = None
        self.lost_instance_hours += lost_hours(job.instances, job.train_start, self.now, job.checkpoint_at)
        job.train_start = None

    def _incident(self, job: _Job, token: int, incident: _Incident) -> None:
        if token != job.token:
            return
        if incident is _Incident.DONE:
            self._release(job, AttemptOutcome.SUCCEEDED)
            self._finish_job(job, JobState.SUCCEEDED, None)
            return
        if job.train_start is not None:  # not when MaxWait ends the wait after a spot interruption
            self._checkpoint(job)
        if incident is _Incident.SPOT:
            # SageMaker Developer Guide, Managed spot training: an interrupted job waits for spot
            # capacity and resumes from its checkpoint, as the same training job.
            self.counts["spot_interruptions"] += 1
            assert job.rng is not None
            type_spec = self._types[job.spec.instance_type]
            wait = type_spec.spot_restart_s.sample(job.rng)
            job.state = JobState.STARTING
            job.token += 1
            deadline = job.dispatched_at + (job.spec.max_wait_s or math.inf) - self.now
            if wait >= deadline:
                self._at(deadline, self._incident, job, job.token, _Incident.MAX_WAIT)
            else:
                self._at(wait, self._train, job, job.token)
            return
        if incident is _Incident.FAILURE:
            self.counts["internal_errors"] += 1
            self._release(job, AttemptOutcome.INTERNAL_ERROR)
            self._attempt_failed(job, REASON_INTERNAL)
            return
        self.counts["max_wait_exceeded"] += 1
        self._release(job, AttemptOutcome.MAX_WAIT_EXCEEDED)
        self._attempt_failed(job, REASON_MAX_WAIT)

    def _attempt_failed(self, job: _Job, reason: str) -> None:
        # AWS Batch User Guide, Service job retry strategies: retryStrategy.attempts counts every
        # time the job is put in RUNNABLE, the first included; a failed attempt with attempts left
        # goes back to RUNNABLE (a new SageMaker training job, same checkpoint location).
        job.attempts_failed += 1
        if job.attempts_failed < job.spec.retry_attempts:
            self.counts["batch_retries"] += 1
            self._enqueue(job)
        else:
            self._fail(job, reason)

    def _preempt(self, job: _Job, why: str) -> None:
        if job.train_start is not None:  # training (not provisioning, not waiting for spot)
            self._checkpoint(job)
        self.counts["preemptions"] += 1
        job.preemptions += 1
        self._release(job, AttemptOutcome.PREEMPTED)
        retries = job.spec.preemption_retries
        # AWS Batch User Guide, Preemption: a preempted job is requeued as RUNNABLE unless
        # preemptionConfiguration.preemptionRetriesBeforeTermination is spent (then FAILED).
        if retries is not None and job.preemptions > retries:
            self._fail(job, REASON_PREEMPTION)
        else:
            self._enqueue(job)

    def _finish_job(self, job: _Job, state: JobState, reason: str | None) -> None:
        job.state = state
        job.end = self.now
        job.reason = reason
        queue = job.queue
        self._touch(queue.env)
        queue.share_jobs[job.share] -= 1
        if queue.share_jobs[job.share] == 0:
            queue.share_idle_since[job.share] = self.now
            if queue.spec.fair_share is not None and queue.spec.fair_share.share_decay_seconds > 0:
                # The share stops being active after its decay period: capacity it held back
                # under computeReservation is released then.
                self._at(queue.spec.fair_share.share_decay_seconds, self._decay_over, queue.env)
        del self._live[job.id]
        if state is JobState.SUCCEEDED:
            self.counts["jobs_succeeded"] += 1
        else:
            self.counts["jobs_failed"] += 1

    def _decay_over(self, env: _Environment) -> None:
        self._touch(env)
        self._request_dispatch(env)

    def _fail(self, job: _Job, reason: str) -> None:
        self._finish_job(job, JobState.FAILED, reason)
        if self._recovery is not None:
            recovery = self.scenario.batchpilot.recovery
            assert recovery is not None
            self._at(recovery.event_delay_s, self._recover, job)

    # ---------------------------------------------------------------------------- batchpilot

    def _recover(self, job: _Job) -> None:
        decider = self._recovery
        assert decider is not None and self._recovery_store is not None
        start = self.scenario.start
        outcome = decider.decide(
            lineage_id=f"lineage-{job.lineage}",
            job_arn=job.arn,
            job_name=job.spec.name,
            queue=job.queue.name,
            reason=job.reason or "",
            failed_attempt=job.resubmission,
            instances=job.instances,
            has_checkpoint=job.checkpoint_at is not None,
            created_at=start + timedelta(seconds=job.submit),
            started_at=start + timedelta(seconds=job.dispatched_at) if job.first_start is not None else None,
            stopped_at=start + timedelta(seconds=job.end or self.now),
            now=start + timedelta(seconds=self.now),
        )
        if outcome.step is RecoveryStep.DEFER:
            self.trace.recovery["DEFER"] += 1
            self._at(outcome.defer_s, self._recover, job)
            return
        if outcome.step is RecoveryStep.SKIP:
            self.trace.recovery[f"SKIP:{outcome.skip_reason}"] += 1
            return
        if outcome.step is RecoveryStep.DRY_RUN:
            self.trace.recovery["DRY_RUN"] += 1
            self._record_recovery(job, outcome)
            return
        self._recovery_store.put((job, outcome))

    def _recovery_worker(self, pacer: Pacer) -> Any:
        store = self._recovery_store
        decider = self._recovery
        assert store is not None and decider is not None
        while True:
            item = yield store.get()
            job, outcome = item
            assert isinstance(job, _Job) and isinstance(outcome, RecoveryOutcome)
            wait = pacer.wait_time()
            if wait > 0:
                yield self.env.timeout(wait)
            pacer.take()
            self._resubmit(job, outcome)

    def _resubmit(self, job: _Job, outcome: RecoveryOutcome) -> None:
        # docs/recovery.md, "How a job is resubmitted": the same payload (so the same CheckpointConfig.S3Uri:
        # SageMaker restores the newest checkpoint), queue, share and priority.
        self.trace.submits.append(self.now)
        self.trace.recovery["RESUBMITTED"] += 1
        self._submit(
            job.spec,
            lineage=job.lineage,
            resubmission=outcome.attempt,
            saved_s=job.saved_s,
            checkpoint_at=job.checkpoint_at,
        )
        self._record_recovery(job, outcome)

    def _record_recovery(self, job: _Job, outcome: RecoveryOutcome) -> None:
        """Record ``outcome`` in the recovery decider's lineage of ``job``, at the simulated now."""
        decider = self._recovery
        assert decider is not None
        decider.record(
            lineage_id=f"lineage-{job.lineage}",
            failed_job_arn=job.arn,
            job_name=job.spec.name,
            queue=job.queue.name,
            outcome=outcome,
            now=self.scenario.start + timedelta(seconds=self.now),
        )

    def _capacity_loop(self, interval: int) -> Any:
        start = self.scenario.start
        while True:
            now = start + timedelta(seconds=self.now)
            for controller in self._capacity:
                env = self._environments[controller.name]
                demands = [self._queue_demand(queue) for queue in env.queues]
                tick = controller.tick(now, dict(env.limits), demands)
                for message in tick.messages:
                    self.trace.capacity_messages.append((self.now, message))
                if tick.changed:
                    self._touch(env)
                    self.counts["capacity_changes"] += 1
                    for unit, value in tick.limits.items():
                        if env.limits.get(unit) != value:
                            self._fleet_limit += value - env.limits.get(unit, 0)
                            env.limits[unit] = value
                            self.trace.limit_changes.append((self.now, env.name, unit, value))
                    self._request_dispatch(env)
            yield self.env.timeout(interval)

    def _queue_demand(self, queue: _Queue) -> QueueDemand:
        env = queue.env
        blocked: list[tuple[str, dict[str, int]]] = []
        for (kind, n), ids in queue.runnable_sizes.items():
            # MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE: the job needs more than maxCapacity.
            if ids and n > env.limits.get(env.unit(kind), 0):
                blocked.append((f"{ACCOUNT_ARN}:service-job/sim-{next(iter(ids)):07d}", {kind: n}))
        return QueueDemand(
            queue=queue.name,
            runnable_jobs=queue.runnable,
            runnable_instances={k: v for k, v in queue.runnable_instances.items() if v},
            in_use={k: v for k, v in queue.in_use.items() if v},
            blocked=blocked,
        )

    # ----------------------------------------------------------------------------- the end

    def _finish(self) -> None:
        for job in list(self._live.values()):
            if job.state in (JobState.STARTING, JobState.RUNNING):
                self.trace.attempts.append(
                    AttemptTrace(
                        job.id,
                        job.lineage,
                        job.queue.env.name,
                        job.queue.name,
                        job.share,
                        job.queue.env.unit(job.spec.instance_type),
                        job.spec.instance_type,
                        job.instances,
                        job.dispatched_at,
                        self.horizon,
                        AttemptOutcome.RUNNING_AT_END,
                        job.borrowed,
                    )
                )
        for job in self._all:
            self.trace.jobs.append(
                JobTrace(
                    job.id,
                    job.spec.name,
                    job.lineage,
                    job.resubmission,
                    job.queue.name,
                    job.share,
                    job.spec.instance_type,
                    job.instances,
                    job.spec.duration_s,
                    job.submit,
                    job.first_start,
                    job.end,
                    job.state,
                    job.preemptions,
                    job.reason,
                    job.spec.priority,
                )
            )

    def uses(self) -> list[str]:
        """The names of the approximations this scenario relies on (keys of APPROXIMATIONS)."""
        kinds = {q.scheduling for q in self.scenario.job_queues}
        used = ["head_of_line"]
        if SchedulingKind.FAIR_SHARE in kinds:
            used += ["fair_share_order", "compute_reservation"]
        if SchedulingKind.QUOTA_MANAGEMENT in kinds:
            used += ["quota_management", "preemption_grace"]
        if any(
            t.capacity_errors is not None or t.spot_interruptions_per_hour > 0 or t.failures_per_hour > 0
            for t in self._types.values()
        ):
            used.append("sagemaker")
        if self._capacity:
            used.append("capacity_updates")
        return used
