"""Fleet metrics from the ledger's aggregates and transitions: pure, no I/O.

:func:`fleet_points` turns one run's aggregates (one Query per job queue) into the per service
environment and per job queue and share gauges of docs/metrics.md's catalog;
:func:`effect_points` turns one applied transition into its event metrics (preemptions,
lost instance-hours; the queue wait is the metrics function's ``QueueWaitTime``). Every point goes through
:func:`batchpilot.shared.metrics.dimensions`.

Sizes: a job whose size is unknown (its describe failed or has not happened yet) counts at its
queue's observed mean (instances of the sized jobs over their number; 1 when none is sized).
Entitlement of a fair-share share (AWS Batch User Guide, "Fair-share scheduling policies"): the
share's ``1 / weightFactor`` over the sum of ``1 / weightFactor`` of the *active* shares (with
RUNNABLE or running jobs); a share the policy does not list has weight 1 (the default
``weightFactor``). Of a quota share (AWS Batch API Reference, ``ListQuotaShares``
``capacityLimits``): its own limit over its service environment's capacity limit
(``DescribeServiceEnvironments`` ``capacityLimits``), and its ``ShareOfUsage`` its instances in
use over that same limit, both published while it has jobs, alone or not: a quota is its own,
not a share of whoever else is active. Above its own limit a quota share is borrowing
(``BorrowedInstances``; its usage then exceeds its entitlement). When the environment's limit
is unknown, the entitlement is its limit over the active quota shares' limits, as fair shares.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from batchpilot.ledger.model import IN_USE, Basis, Effects, JobStatus, LedgerJob
from batchpilot.ledger.ports import Aggregate, QueueInfo
from batchpilot.shared.metrics import MetricPoint, MetricsDetail, Unit, dimensions

__all__ = ["FleetInputs", "effect_points", "fleet_points", "queue_mean"]


@dataclass(frozen=True, slots=True)
class FleetInputs:
    """What one scheduled run read.

    Attributes:
        queues: the job queues, by name.
        aggregates: queue name → its aggregates.
        limits: service environment → capacity limit (instances).
        reserved: service environment → reserved instances (configured or defaulted).
        weights: queue name → share identifier → ``weightFactor`` (``None``: unreadable or not a
            fair-share queue).
        oldest: (queue, share) → when its oldest RUNNABLE job became RUNNABLE (every run, from
            the ledger's RUNNABLE index, :mod:`batchpilot.ledger.runnable`).
        quota_limits: queue name → quota share → its capacity limit in instances (``None``:
            unreadable; absent: the queue has no quota shares in the ledger).
    """

    queues: Mapping[str, QueueInfo]
    aggregates: Mapping[str, Sequence[Aggregate]]
    limits: Mapping[str, int]
    reserved: Mapping[str, int]
    weights: Mapping[str, Mapping[str, float] | None]
    oldest: Mapping[tuple[str, str], datetime]
    quota_limits: Mapping[str, Mapping[str, int] | None] = dataclasses.field(default_factory=dict)


def queue_mean(aggregates: Iterable[Aggregate]) -> float:
    """Mean instances of a queue's sized jobs (1.0 when none is sized)."""
    sized = instances = 0
    for agg in aggregates:
        sized += agg.total.sized
        instances += agg.total.instances
    return instances / sized if sized else 1.0


def _share_dims(queue: str, share: str, quota: bool) -> dict[str, str | None]:
    return {"JobQueue": queue or None, "QuotaShare" if quota else "ShareIdentifier": share or None}


class _Points:
    def __init__(self, now: datetime) -> None:
        self.now = now
        self.out: list[MetricPoint] = []

    def add(self, name: str, unit: Unit, value: float, **dims: str | None) -> None:
        self.out.append(MetricPoint(name, unit, max(0.0, float(value)), dimensions(**dims), self.now))


@dataclass
class _Tally:
    runnable_jobs: int = 0
    runnable_instances: float = 0.0
    in_use: float = 0.0
    gpus: int = 0
    runnable_vcpus: float = 0.0
    runnable_gpus: int = 0
    vcpus_in_use: float = 0.0
    quota: bool = False

    @property
    def active(self) -> bool:
        """Jobs RUNNABLE or in use."""
        return bool(self.runnable_jobs or self.in_use or self.vcpus_in_use)


def fleet_points(
    inputs: FleetInputs, now: datetime, detail: MetricsDetail = MetricsDetail.BASIC
) -> list[MetricPoint]:
    """Every gauge of one run (see docs/metrics.md, "Fleet metrics (ledger function)").

    A gauge is published only while there is something to measure (CloudWatch bills a custom
    metric for every hour it is published): a service environment's while it has jobs RUNNABLE or
    in use, a job queue's and a share's while they have jobs, a RUNNABLE gauge while jobs wait.
    ``BASIC``: per environment, per job queue, and per share the fairness gauges (in use, oldest
    RUNNABLE, borrowed, GPUs; share of usage and entitlement while two or more shares of the
    queue have jobs); ``DETAILED`` adds every other gauge per
    share (RUNNABLE jobs, instances, vCPUs and GPUs).
    """
    p = _Points(now)
    detailed = detail is MetricsDetail.DETAILED
    env_in_use: dict[str, float] = defaultdict(float)
    env_gpus: dict[str, int] = defaultdict(int)
    env_runnable: dict[str, float] = defaultdict(float)
    for queue_name, aggregates in sorted(inputs.aggregates.items()):
        info = inputs.queues.get(queue_name)
        service = info.service if info else any(a.key.environment for a in aggregates)
        mean = queue_mean(aggregates)
        shares: dict[str, _Tally] = defaultdict(_Tally)
        for agg in aggregates:
            t = shares[agg.key.share]
            t.quota = t.quota or agg.quota
            unsized = agg.total.jobs - agg.total.sized
            instances = agg.total.instances + unsized * mean
            if agg.key.status is JobStatus.RUNNABLE:
                t.runnable_jobs += agg.total.jobs
                t.runnable_instances += instances
                t.runnable_vcpus += agg.total.vcpus
                t.runnable_gpus += agg.total.gpus
                env_runnable[agg.key.environment] += instances
            elif agg.key.status in IN_USE:
                t.in_use += instances
                t.gpus += agg.total.gpus
                t.vcpus_in_use += agg.total.vcpus
                env_in_use[agg.key.environment] += instances
                env_gpus[agg.key.environment] += agg.total.gpus
        queue_in_use = (
            sum(t.in_use for t in shares.values())
            if service
            else sum(t.vcpus_in_use for t in shares.values())
        )
        _queue_points(p, queue_name, shares, service, inputs.oldest)
        weights = inputs.weights.get(queue_name)
        active = [s for s, t in shares.items() if s and t.active]
        inverse = {s: 1 / max(weights.get(s, 1.0), 1e-6) for s in active} if weights is not None else {}
        limits = inputs.quota_limits.get(queue_name) or {}
        environment = info.environment if info else next((a.key.environment for a in aggregates), "")
        env_limit = inputs.limits.get(environment) if environment else None
        # Quota management: a share is entitled to its own limit among the active shares' limits.
        quota_active = {s: limits[s] for s in active if shares[s].quota and s in limits}
        for share in sorted(active):  # a queue without shares: its queue gauges say it all
            t = shares[share]
            dims = _share_dims(queue_name, share, t.quota)
            used = t.in_use if service else t.vcpus_in_use
            p.add("InstancesInUse" if service else "VcpusInUse", "Count", used, **dims)
            if t.gpus:
                p.add("GpusInUse", "Count", t.gpus, **dims)
            # Fairness is a question only while shares compete: one active share has 100 % of both.
            competing = len(active) > 1
            own_quota = t.quota and share in limits and bool(env_limit)
            if own_quota and env_limit:
                # A quota against the environment: alone or not (AWS Batch, quota shares).
                p.add("ShareOfUsage", "Percent", 100 * t.in_use / env_limit, **dims)
                p.add("Entitlement", "Percent", 100 * min(limits[share], env_limit) / env_limit, **dims)
            elif competing and queue_in_use > 0:
                p.add("ShareOfUsage", "Percent", 100 * used / queue_in_use, **dims)
            if competing and share in inverse and not t.quota:
                p.add("Entitlement", "Percent", 100 * inverse[share] / sum(inverse.values()), **dims)
            if competing and not own_quota and share in quota_active and sum(quota_active.values()) > 0:
                entitled = 100 * quota_active[share] / sum(quota_active.values())
                p.add("Entitlement", "Percent", entitled, **dims)
            if t.quota and share in limits and t.in_use > limits[share]:
                p.add("BorrowedInstances", "Count", t.in_use - limits[share], **dims)
            oldest = inputs.oldest.get((queue_name, share))
            if oldest is not None and t.runnable_jobs:
                p.add("OldestRunnableAge", "Seconds", (now - oldest).total_seconds(), **dims)
            if detailed and t.runnable_jobs:
                p.add("RunnableJobs", "Count", t.runnable_jobs, **dims)
                if service:
                    p.add("RunnableInstances", "Count", t.runnable_instances, **dims)
                else:
                    p.add("RunnableVcpus", "Count", t.runnable_vcpus, **dims)
                    p.add("RunnableGpus", "Count", t.runnable_gpus, **dims)
    environments = sorted(e for e in {*env_in_use, *env_runnable} if e)
    for env in environments:
        in_use = env_in_use.get(env, 0.0)
        runnable = env_runnable.get(env, 0.0)
        if not (in_use or runnable):
            continue
        limit = inputs.limits.get(env)
        reserved = inputs.reserved.get(env, limit)
        if limit is not None:
            p.add("CapacityLimit", "Count", limit, ServiceEnvironment=env)
        p.add("InstancesInUse", "Count", in_use, ServiceEnvironment=env)
        if env_gpus.get(env):
            p.add("GpusInUse", "Count", env_gpus[env], ServiceEnvironment=env)
        if reserved:
            p.add("ReservedInstances", "Count", reserved, ServiceEnvironment=env)
            p.add("Utilization", "Percent", 100 * in_use / reserved, ServiceEnvironment=env)
            if runnable:
                # Free reserved instances while work waits (at most as many as the waiting work needs).
                idle = min(max(reserved - in_use, 0.0), runnable)
                p.add("IdleWhileQueued", "Count", idle, ServiceEnvironment=env)
    return p.out


def _queue_points(
    p: _Points,
    queue: str,
    shares: Mapping[str, _Tally],
    service: bool,
    oldest: Mapping[tuple[str, str], datetime],
) -> None:
    """A job queue's own gauges (``JobQueue`` alone), while it has jobs RUNNABLE or in use."""
    if not queue or not any(t.active for t in shares.values()):
        return
    runnable_jobs = sum(t.runnable_jobs for t in shares.values())
    if service:
        p.add("InstancesInUse", "Count", sum(t.in_use for t in shares.values()), JobQueue=queue)
    else:
        p.add("VcpusInUse", "Count", sum(t.vcpus_in_use for t in shares.values()), JobQueue=queue)
    if not runnable_jobs:
        return
    p.add("RunnableJobs", "Count", runnable_jobs, JobQueue=queue)
    if service:
        demand = sum(t.runnable_instances for t in shares.values())
        p.add("RunnableInstances", "Count", demand, JobQueue=queue)
    else:
        p.add("RunnableVcpus", "Count", sum(t.runnable_vcpus for t in shares.values()), JobQueue=queue)
    since = [oldest[(queue, s)] for s, t in shares.items() if t.runnable_jobs and (queue, s) in oldest]
    if since:
        p.add("OldestRunnableAge", "Seconds", (p.now - min(since)).total_seconds(), JobQueue=queue)


def effect_points(job: LedgerJob, effects: Effects, now: datetime) -> list[MetricPoint]:
    """The event metrics of one applied transition of ``job`` (its new record)."""
    p = _Points(now)
    d = job.details
    dims = _share_dims(d.queue, job.share, bool(d.quota_share))
    # One Preemptions per preempted attempt: at Preemption Started, or at the requeue when no
    # Started event was seen for that attempt.
    if effects.preemption_started or (effects.preempted and job.preempting_attempt != job.preempted_attempt):
        # PreemptingShare only when the event's reason named it: omitted, never a placeholder.
        p.add("Preemptions", "Count", 1, **dims, PreemptingShare=effects.preempting_share)
    if effects.preemption_completed:
        p.add("PreemptionsCompleted", "Count", 1, **dims)
    if effects.lost_instance_hours is not None:
        basis = (effects.basis or Basis.ATTEMPT).value
        p.add("LostInstanceHours", "Count", effects.lost_instance_hours, **dims, Basis=basis)
    return p.out
