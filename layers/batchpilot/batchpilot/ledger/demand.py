"""The job ledger's aggregates as the capacity function's queue sample: pure, no I/O.

With the ledger, a capacity run reads one Query of a queue's aggregates instead of listing every
RUNNABLE job, reading payloads and taking the queue's snapshot, so its cost does not grow with the
number of jobs; instances in use are the ledger's too (SCHEDULED, STARTING, RUNNING jobs). Jobs of
unknown size count at the queue's observed mean (:func:`batchpilot.ledger.fleet.queue_mean`),
rounded up, not at 1. For a quota-management service environment, whose capacity units are
instance types, the sample is per instance type (the aggregates' per-type counters), and jobs of
unknown size count at the queue's observed mean of each type. The one per-job fact the aggregates
do not hold is the oldest job's age (the ledger function publishes ``OldestRunnableAge`` itself).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from batchpilot.capacity.model import NUM_INSTANCES, JobDemand
from batchpilot.capacity.sampling import BlockedJob, QueueSample, Tally
from batchpilot.ledger.fleet import queue_mean
from batchpilot.ledger.model import IN_USE, Delta, JobStatus
from batchpilot.ledger.ports import Aggregate

__all__ = ["ledger_sample"]


def _units(total: Delta, by_type: bool) -> dict[str, int]:
    """Sized instances of an aggregate per capacity unit: everything under ``NUM_INSTANCES``, or
    per instance type with the instances of no known type under ``NUM_INSTANCES``."""
    if not by_type:
        return {NUM_INSTANCES: total.instances}
    # A counter below zero is drift the reconciliation has not repaired yet: it asks for nothing.
    out = {unit: max(0, count) for unit, count in total.types}
    rest = total.instances - sum(out.values())
    if rest:
        out[NUM_INSTANCES] = rest
    return out


def _means(aggregates: Sequence[Aggregate], by_type: bool) -> dict[str, float]:
    """Capacity unit → the queue's mean instances per sized job (``NUM_INSTANCES``: 1.0 when none
    is sized, as :func:`~batchpilot.ledger.fleet.queue_mean`; an unsized job's type is unknown)."""
    if not by_type:
        return {NUM_INSTANCES: queue_mean(aggregates)}
    sized = sum(agg.total.sized for agg in aggregates)
    if not sized:
        return {NUM_INSTANCES: 1.0}
    totals: dict[str, int] = {}
    for agg in aggregates:
        for unit, count in _units(agg.total, by_type).items():
            totals[unit] = totals.get(unit, 0) + count
    return {unit: count / sized for unit, count in totals.items()}


@dataclass
class _Runnable:
    """RUNNABLE jobs of a queue or share: count, sized instances per unit, jobs of unknown size."""

    jobs: int = 0
    sized: dict[str, int] = field(default_factory=dict)
    unsized: int = 0
    quota: bool = False

    def add(self, total: Delta, units: Mapping[str, int], quota: bool) -> None:
        self.jobs += total.jobs
        self.unsized += total.jobs - total.sized
        self.quota = self.quota or quota
        for unit, count in units.items():
            self.sized[unit] = self.sized.get(unit, 0) + count

    def tally(self, means: Mapping[str, float]) -> Tally:
        units = set(self.sized) | (set(means) if self.unsized else set())
        counts = {u: self.sized.get(u, 0) + math.ceil(self.unsized * means.get(u, 0.0)) for u in units}
        return Tally(jobs=self.jobs, instances={u: n for u, n in counts.items() if n})


def ledger_sample(
    queue: str,
    environment: str,
    aggregates: Sequence[Aggregate],
    blocked: Mapping[str, JobDemand | None],
    *,
    by_type: bool = False,
) -> QueueSample:
    """One queue's :class:`~batchpilot.capacity.sampling.QueueSample` from its ledger aggregates.

    Args:
        queue, environment: names.
        aggregates: the queue's aggregates (RUNNABLE ones are demand; SCHEDULED, STARTING and
            RUNNING ones are in use; all give the queue's mean job size).
        blocked: ARN → demand (capacity unit → instances, ``None`` when unknown) of the jobs a
            ``Queue Blocked`` event reported as blocked by the environment's ``maxCapacity``.
        by_type: count per instance type (a quota-management environment's capacity units),
            instances of no known type under ``NUM_INSTANCES``; else every instance under
            ``NUM_INSTANCES``.
    """
    means = _means(aggregates, by_type)
    sample = QueueSample(queue=queue, environment=environment)
    in_use: dict[str, float] = {} if by_type else {NUM_INSTANCES: 0.0}
    share_use: dict[str, dict[str, float]] = {}
    quota_use: dict[str, dict[str, float]] = {}
    # A share can have several RUNNABLE aggregates (jobs whose environment is not known yet sit
    # under an empty environment).
    shares: dict[str, _Runnable] = {}
    runnable = _Runnable()
    for agg in aggregates:
        t = agg.total
        if not t.jobs:
            continue
        units = _units(t, by_type)
        if agg.key.status in IN_USE:
            unsized = t.jobs - t.sized
            used = {
                u: units.get(u, 0) + unsized * means.get(u, 0.0)
                for u in set(units) | (set(means) if unsized else set())
            }
            targets = [in_use]
            if agg.key.share:
                targets.append((quota_use if agg.quota else share_use).setdefault(agg.key.share, {}))
            for target in targets:
                for unit, value in used.items():
                    target[unit] = target.get(unit, 0.0) + value
        if agg.key.status is not JobStatus.RUNNABLE:
            continue
        runnable.add(t, units, agg.quota)
        if agg.key.share:
            shares.setdefault(agg.key.share, _Runnable()).add(t, units, agg.quota)
    for share, tally in shares.items():
        (sample.by_quota_share if tally.quota else sample.by_share)[share] = tally.tally(means)
    sample.runnable = runnable.tally(means)
    sample.in_use = in_use
    sample.share_in_use = share_use
    sample.quota_share_in_use = quota_use
    sample.blocked = [BlockedJob(arn, demand) for arn, demand in blocked.items()]
    return sample
