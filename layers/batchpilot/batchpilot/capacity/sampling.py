"""Sampling: RUNNABLE jobs, their payload demand and queue snapshots → per-queue, per-share and
per-environment figures and the EMF gauges the capacity function emits every run. Pure (no I/O).

Sources (read by :mod:`batchpilot.io.batch`): ``ListServiceJobs`` (RUNNABLE, every
page) for job counts, shares, ages and blocked reasons; each job's payload ``ResourceConfig`` (read
once with ``DescribeServiceJob`` and cached) for its instance demand; ``GetJobQueueSnapshot`` for
instances in use per queue, per share identifier (top 20) and per quota share;
``DescribeServiceEnvironments`` for capacity limits.

Gauges (namespace ``BatchPilot``, every one also carries ``service``):

=========================  =======  ==============================================================
name                       unit     dimensions
=========================  =======  ==============================================================
RunnableJobs               Count    JobQueue [+ ShareIdentifier | QuotaShare]
RunnableInstanceDemand     Count    JobQueue [+ ShareIdentifier | QuotaShare]
OldestRunnableJobAge       Seconds  JobQueue [+ ShareIdentifier | QuotaShare]
InstancesInUse             Count    JobQueue [+ ShareIdentifier | QuotaShare], or ServiceEnvironment
                                    + CapacityUnit
CapacityLimit              Count    ServiceEnvironment + CapacityUnit
CapacityUtilization        Percent  ServiceEnvironment + CapacityUnit
=========================  =======  ==============================================================
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from batchpilot.capacity.model import (
    NUM_INSTANCES,
    JobDemand,
    QueueSnapshot,
    RunnableJob,
    ServiceEnvironment,
    instances,
)
from batchpilot.shared.metrics import MetricPoint, Unit, dimensions

__all__ = [
    "BlockedJob",
    "QueueSample",
    "Tally",
    "UnitDemand",
    "environment_gauges",
    "gauge",
    "queue_gauges",
    "sample_queue",
    "unit_demands",
]


@dataclass
class Tally:
    """RUNNABLE jobs of one queue, share identifier or quota share.

    Attributes:
        jobs: how many.
        instances: instance type → instances asked for, from the jobs whose payload is known.
        unknown: jobs whose payload is not read yet; each counts as 1 instance in
            :attr:`total_instances` (every training job needs at least one).
        oldest: the earliest ``createdAt`` among them.
    """

    jobs: int = 0
    instances: dict[str, int] = field(default_factory=dict)
    unknown: int = 0
    oldest: datetime | None = None

    def add(self, job: RunnableJob, demand: JobDemand | None) -> None:
        """Count one job with its demand (None or empty when unknown)."""
        self.jobs += 1
        if not demand:
            self.unknown += 1
        else:
            for kind, count in demand.items():
                self.instances[kind] = self.instances.get(kind, 0) + count
        if job.created_at is not None and (self.oldest is None or job.created_at < self.oldest):
            self.oldest = job.created_at

    @property
    def total_instances(self) -> int:
        """All instances asked for, unknown jobs counted as 1."""
        return sum(self.instances.values()) + self.unknown

    def age_seconds(self, now: datetime) -> float:
        """Seconds the oldest job has waited at ``now`` (0 with no jobs; never negative)."""
        if self.oldest is None:
            return 0.0
        return max(0.0, (now - self.oldest).total_seconds())


@dataclass(frozen=True, slots=True)
class BlockedJob:
    """A RUNNABLE job blocked by ``MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE``.

    Attributes:
        arn: its ``jobArn``.
        demand: instance type → instances it needs, or None when its payload is unknown.
    """

    arn: str
    demand: JobDemand | None


@dataclass
class QueueSample:
    """What one run saw of one job queue.

    Attributes:
        queue: the job queue name.
        environment: the service environment it feeds.
        runnable: every RUNNABLE job of the queue.
        by_share / by_quota_share: the same jobs by share identifier / quota share.
        in_use: unit → quantity in use (snapshot ``totalCapacityUsage``).
        share_in_use / quota_share_in_use: share → unit → quantity (snapshot, top shares only).
        blocked: the RUNNABLE jobs blocked by the environment's ``maxCapacity``.
    """

    queue: str
    environment: str
    runnable: Tally = field(default_factory=Tally)
    by_share: dict[str, Tally] = field(default_factory=dict)
    by_quota_share: dict[str, Tally] = field(default_factory=dict)
    in_use: Mapping[str, float] = field(default_factory=dict)
    share_in_use: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    quota_share_in_use: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    blocked: list[BlockedJob] = field(default_factory=list)

    @property
    def instances_in_use(self) -> int:
        """All instances in use by the queue's dispatched jobs, whatever their unit."""
        return _whole(self.in_use)


def _whole(usage: Mapping[str, float]) -> int:
    return sum(instances(q) for q in usage.values())


def sample_queue(
    queue: str,
    environment: str,
    jobs: Iterable[RunnableJob],
    demands: Mapping[str, JobDemand],
    snapshot: QueueSnapshot,
    blocked_arns: Collection[str] = (),
) -> QueueSample:
    """Aggregate one queue's RUNNABLE jobs and snapshot.

    Args:
        queue, environment: names.
        jobs: the RUNNABLE jobs (``ListServiceJobs``).
        demands: job ARN → demand, for the jobs whose payload is known.
        snapshot: the queue's ``GetJobQueueSnapshot`` utilisation.
        blocked_arns: jobs a ``Batch Service Job Queue Blocked`` event reported as blocked by
            ``SERVICE_ENVIRONMENT_MAX_RESOURCE`` (added to those whose listed reason says so).
    """
    sample = QueueSample(
        queue=queue,
        environment=environment,
        in_use=dict(snapshot.total),
        share_in_use=dict(snapshot.by_share),
        quota_share_in_use=dict(snapshot.by_quota_share),
    )
    extra = set(blocked_arns)
    for job in jobs:
        demand = demands.get(job.arn)
        sample.runnable.add(job, demand)
        if job.share_identifier:
            sample.by_share.setdefault(job.share_identifier, Tally()).add(job, demand)
        if job.quota_share:
            sample.by_quota_share.setdefault(job.quota_share, Tally()).add(job, demand)
        if job.blocked_by_max_resource or job.arn in extra:
            sample.blocked.append(BlockedJob(job.arn, demand))
    return sample


@dataclass(frozen=True, slots=True)
class UnitDemand:
    """Demand on one capacity unit of a service environment (instances), the policy's input.

    Attributes:
        unit: ``NUM_INSTANCES`` or an instance type.
        in_use: instances in use by the environment's queues.
        runnable: instances asked for by their RUNNABLE jobs.
        blocked_need: the most instances one blocked job needs (0 when none is blocked).
        blocked_job: that job's ARN.
        unknown: RUNNABLE jobs of the environment whose payload is not read yet (their demand
            may be higher than counted, so the policy never lowers the limit while any remain).
    """

    unit: str
    in_use: int
    runnable: int
    blocked_need: int = 0
    blocked_job: str | None = None
    unknown: int = 0


def unit_demands(environment: ServiceEnvironment, samples: Sequence[QueueSample]) -> dict[str, UnitDemand]:
    """Per capacity unit of ``environment``: in use, RUNNABLE demand and the largest blocked job.

    A ``NUM_INSTANCES`` environment counts every instance of every type. A quota-management
    environment counts each instance type against its own unit; jobs whose payload is unknown
    (and instances of types it has no limit for) cannot be attributed and are left out.
    """
    out: dict[str, UnitDemand] = {}
    unknown = sum(s.runnable.unknown for s in samples)
    for limit in environment.limits:
        unit = limit.unit
        if unit == NUM_INSTANCES:
            in_use = sum(s.instances_in_use for s in samples)
            runnable = sum(s.runnable.total_instances for s in samples)
            needs = [(_total(b.demand), b.arn) for s in samples for b in s.blocked]
        else:
            in_use = sum(instances(s.in_use.get(unit, 0.0)) for s in samples)
            runnable = sum(s.runnable.instances.get(unit, 0) for s in samples)
            needs = [((b.demand or {}).get(unit, 0), b.arn) for s in samples for b in s.blocked]
        need, job = max(needs, default=(0, None), key=lambda pair: pair[0])
        out[unit] = UnitDemand(unit, in_use, runnable, need, job if need > 0 else None, unknown)
    return out


def _total(demand: JobDemand | None) -> int:
    return sum(demand.values()) if demand else 1


def gauge(
    name: str, unit: Unit, value: float, dims: tuple[tuple[str, str], ...], ts: datetime
) -> MetricPoint:
    """One point; ``unit`` is a CloudWatch unit (``Count``, ``Seconds``, ``Percent``)."""
    return MetricPoint(name, unit, float(value), dims, ts)


def _tally_points(
    tally: Tally, in_use: int | None, dims: tuple[tuple[str, str], ...], now: datetime, ts: datetime
) -> list[MetricPoint]:
    points = [
        gauge("RunnableJobs", "Count", tally.jobs, dims, ts),
        gauge("RunnableInstanceDemand", "Count", tally.total_instances, dims, ts),
    ]
    # Jobs whose creation time is unknown (a sample from the job ledger's aggregates, which keep no
    # per-job times: the ledger function publishes OldestRunnableAge) have no age to report.
    if tally.oldest is not None or not tally.jobs:
        points.append(gauge("OldestRunnableJobAge", "Seconds", tally.age_seconds(now), dims, ts))
    if in_use is not None:
        points.append(gauge("InstancesInUse", "Count", in_use, dims, ts))
    return points


def _busiest(
    tallies: Mapping[str, Tally], in_use: Mapping[str, Mapping[str, float]], limit: int
) -> list[str]:
    names = set(tallies) | set(in_use)

    def weight(name: str) -> tuple[int, str]:
        tally = tallies.get(name)
        return (-((tally.total_instances if tally else 0) + _whole(in_use.get(name, {}))), name)

    return sorted(names, key=weight)[:limit]


def queue_gauges(sample: QueueSample, now: datetime, ts: datetime, max_shares: int = 20) -> list[MetricPoint]:
    """The gauges of one queue and of its busiest ``max_shares`` share identifiers and quota shares.

    Args:
        sample: the queue's figures.
        now: the run's time (ages are measured to it).
        ts: the timestamp the points carry.
        max_shares: per kind (share identifier, quota share), at most this many, busiest first
            (RUNNABLE demand + in use); shares are billed metrics, the queue total is always there.
    """
    points = _tally_points(
        sample.runnable, sample.instances_in_use, dimensions(JobQueue=sample.queue), now, ts
    )
    for name in _busiest(sample.by_share, sample.share_in_use, max_shares):
        usage = sample.share_in_use.get(name)
        dims = dimensions(JobQueue=sample.queue, ShareIdentifier=name)
        points += _tally_points(
            sample.by_share.get(name, Tally()), _whole(usage) if usage is not None else None, dims, now, ts
        )
    for name in _busiest(sample.by_quota_share, sample.quota_share_in_use, max_shares):
        usage = sample.quota_share_in_use.get(name)
        dims = dimensions(JobQueue=sample.queue, QuotaShare=name)
        points += _tally_points(
            sample.by_quota_share.get(name, Tally()),
            _whole(usage) if usage is not None else None,
            dims,
            now,
            ts,
        )
    return points


def environment_gauges(
    environment: ServiceEnvironment, demands: Mapping[str, UnitDemand], ts: datetime
) -> list[MetricPoint]:
    """``CapacityLimit``, ``InstancesInUse`` and ``CapacityUtilization`` (percent of the limit in
    use; left out when the limit is 0) per capacity unit of ``environment``."""
    points: list[MetricPoint] = []
    for limit in environment.limits:
        dims = dimensions(ServiceEnvironment=environment.name, CapacityUnit=limit.unit)
        in_use = demands[limit.unit].in_use if limit.unit in demands else 0
        points.append(gauge("CapacityLimit", "Count", limit.max_capacity, dims, ts))
        points.append(gauge("InstancesInUse", "Count", in_use, dims, ts))
        if limit.max_capacity > 0:
            points.append(
                gauge("CapacityUtilization", "Percent", 100.0 * in_use / limit.max_capacity, dims, ts)
            )
    return points
