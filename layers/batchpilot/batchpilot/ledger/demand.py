"""The job ledger's aggregates as the capacity function's queue sample: pure, no I/O.

With the ledger, a capacity run reads one Query of a queue's aggregates instead of listing every
RUNNABLE job, reading payloads and taking the queue's snapshot, so its cost does not grow with the
number of jobs; instances in use are the ledger's too (SCHEDULED, STARTING, RUNNING jobs). Jobs of
unknown size count at the queue's observed mean (:func:`batchpilot.ledger.fleet.queue_mean`),
rounded up, not at 1. Per-job facts the aggregates do not hold: the oldest job's age (the ledger
function publishes ``OldestRunnableAge`` itself) and per-instance-type demand (so only
``NUM_INSTANCES`` service environments are sized from the ledger; quota-management environments
keep listing their queues).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from batchpilot.capacity.model import NUM_INSTANCES, JobDemand
from batchpilot.capacity.sampling import BlockedJob, QueueSample, Tally
from batchpilot.ledger.fleet import queue_mean
from batchpilot.ledger.model import IN_USE, JobStatus
from batchpilot.ledger.ports import Aggregate

__all__ = ["ledger_sample"]


def _tally(jobs: int, instances: int, unsized: int, mean: float) -> Tally:
    total = instances + math.ceil(unsized * mean)
    return Tally(jobs=jobs, instances={NUM_INSTANCES: total} if total else {})


def ledger_sample(
    queue: str,
    environment: str,
    aggregates: Sequence[Aggregate],
    blocked: Mapping[str, JobDemand | None],
) -> QueueSample:
    """One queue's :class:`~batchpilot.capacity.sampling.QueueSample` from its ledger aggregates.

    Args:
        queue, environment: names.
        aggregates: the queue's aggregates (RUNNABLE ones are demand; SCHEDULED, STARTING and
            RUNNING ones are in use; all give the queue's mean job size).
        blocked: ARN → demand (instances, ``None`` when unknown) of the jobs a ``Queue Blocked``
            event reported as blocked by the environment's ``maxCapacity``.
    """
    mean = queue_mean(aggregates)
    sample = QueueSample(queue=queue, environment=environment)
    in_use = 0.0
    share_use: dict[str, float] = {}
    quota_use: dict[str, float] = {}
    # share → (quota, jobs, instances, unsized): a share can have several RUNNABLE aggregates
    # (jobs whose environment is not known yet sit under an empty environment).
    shares: dict[str, tuple[bool, int, int, int]] = {}
    jobs = instances = unsized = 0
    for agg in aggregates:
        t = agg.total
        if agg.key.status in IN_USE and t.jobs:
            used = t.instances + (t.jobs - t.sized) * mean
            in_use += used
            if agg.key.share:
                target = quota_use if agg.quota else share_use
                target[agg.key.share] = target.get(agg.key.share, 0.0) + used
        if agg.key.status is not JobStatus.RUNNABLE or not t.jobs:
            continue
        jobs, instances, unsized = jobs + t.jobs, instances + t.instances, unsized + t.jobs - t.sized
        if agg.key.share:
            quota, j, i, u = shares.get(agg.key.share, (agg.quota, 0, 0, 0))
            shares[agg.key.share] = (quota or agg.quota, j + t.jobs, i + t.instances, u + t.jobs - t.sized)
    for share, (quota, j, i, u) in shares.items():
        (sample.by_quota_share if quota else sample.by_share)[share] = _tally(j, i, u, mean)
    sample.runnable = _tally(jobs, instances, unsized, mean)
    sample.in_use = {NUM_INSTANCES: in_use}
    sample.share_in_use = {share: {NUM_INSTANCES: used} for share, used in share_use.items()}
    sample.quota_share_in_use = {share: {NUM_INSTANCES: used} for share, used in quota_use.items()}
    sample.blocked = [BlockedJob(arn, demand) for arn, demand in blocked.items()]
    return sample
