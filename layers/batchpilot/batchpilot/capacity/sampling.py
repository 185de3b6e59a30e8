"""Sampling: RUNNABLE jobs, their payload demand and queue snapshots → per-queue, per-share and
per-environment figures the capacity policy decides on. Pure (no I/O).

Sources (read by :mod:`batchpilot.io.batch`): ``ListServiceJobs`` (RUNNABLE, every
page) for job counts, shares, ages and blocked reasons; each job's payload ``ResourceConfig`` (read
once with ``DescribeServiceJob`` and cached) for its instance demand; ``GetJobQueueSnapshot`` for
instances in use per queue, per share identifier (top 20) and per quota share;
``DescribeServiceEnvironments`` for capacity limits.

The capacity function publishes none of these figures as gauges: the job ledger (on by default)
publishes the fleet's gauges under one name each (docs/metrics.md); the capacity function
publishes only its own decisions (``CapacityTarget``, ``CapacityDecisions``).
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
from batchpilot.shared.metrics import MetricPoint, Unit

__all__ = [
    "BlockedJob",
    "QueueSample",
    "Tally",
    "UnitDemand",
    "gauge",
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
