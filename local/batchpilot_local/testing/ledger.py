"""In-memory ports of the job ledger (:mod:`batchpilot.ledger.ports`) for unit tests, and the
recount every aggregate must equal.

:class:`MemoryLedgerStore` keeps records, aggregates and the per-queue index exactly as the
DynamoDB store does (one all-or-nothing write per transition, conditioned on the version);
:func:`recount` rebuilds the aggregates from records alone.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from batchpilot.io.dynamodb.ledger import STARVING_LEASE
from batchpilot.ledger.model import (
    AggregateKey,
    Delta,
    JobDetails,
    JobStatus,
    LedgerJob,
    Transition,
    contribution,
)
from batchpilot.ledger.ports import (
    ActiveEntry,
    Aggregate,
    DescribeError,
    ListedJob,
    ListedPage,
    QueueInfo,
    QuotaShareLimit,
    ReconcileCursor,
    ReconcileState,
)
from batchpilot.ledger.runnable import RunnableEntry, runnable_changes, runnable_entry
from batchpilot.shared.checkpoints import CheckpointListError, CheckpointLocation, CheckpointState
from batchpilot.shared.classification import JobKind
from batchpilot.shared.metrics import MetricPoint
from batchpilot.shared.own_events import OwnEvent, PublishError, StarvationReason

__all__ = [
    "FakeBatch",
    "ListPublisher",
    "ListSink",
    "MemoryCheckpoints",
    "MemoryLedgerStore",
    "preemption_bodies",
    "recount",
    "recount_runnable",
    "seed_aggregates",
    "stored_and_recounted",
]


def recount(jobs: Iterable[LedgerJob]) -> dict[AggregateKey, Delta]:
    """The aggregates the records imply (zero aggregates dropped)."""
    out: dict[AggregateKey, Delta] = defaultdict(Delta)
    for job in jobs:
        for k, d in contribution(job).items():
            out[k] = out[k] + d
    return {k: d for k, d in out.items() if not d.zero}


def stored_and_recounted(
    dynamodb: Any, table: str
) -> tuple[dict[AggregateKey, Delta], dict[AggregateKey, Delta]]:
    """(the aggregates stored in ``table``, zero ones dropped; the aggregates :func:`recount`
    gives from the job records stored there), read with a Scan through ``dynamodb`` (a boto3
    client of the embedded AWS)."""
    from batchpilot.io.dynamodb.codec import decode
    from batchpilot.io.dynamodb.ledger import aggregate_from_item, job_from_item

    jobs, stored = [], {}
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        for raw in page.get("Items", []):
            item = decode(raw)
            if item["pk"].startswith("ledger#job#"):
                jobs.append(job_from_item(item))
            elif item["pk"].startswith("ledger#agg#"):
                agg = aggregate_from_item(item)
                if not agg.total.zero:
                    stored[agg.key] = agg.total
    return stored, recount(jobs)


def recount_runnable(jobs: Iterable[LedgerJob]) -> set[RunnableEntry]:
    """The RUNNABLE index the records imply."""
    return {entry for job in jobs if (entry := runnable_entry(job)) is not None}


class MemoryLedgerStore:
    """A :class:`~batchpilot.ledger.ports.LedgerStore` in memory. ``lose_next`` makes the next
    ``n`` writes lose their race (nothing written), as a concurrent writer would."""

    def __init__(self) -> None:
        self.jobs: dict[str, LedgerJob] = {}
        self.aggs: dict[AggregateKey, Delta] = defaultdict(Delta)
        self.quota: dict[AggregateKey, bool] = {}
        self.marks: dict[str, datetime] = {}
        self.cursors: dict[str, ReconcileCursor] = {}
        self.seen_parts: dict[tuple[str, datetime, str], frozenset[str]] = {}
        self.registry: dict[str, str] = {}
        self.lose_next = 0
        self.writes = 0
        self.reads = 0
        self.batch_reads = 0
        self.starving: dict[tuple[str, StarvationReason], datetime] = {}
        self.published: set[tuple[str, StarvationReason]] = set()  # claims confirmed published
        self.runnable: set[RunnableEntry] = set()
        self.claims: list[str] = []

    def get(self, arn: str) -> LedgerJob | None:
        self.reads += 1
        return self.jobs.get(arn)

    def get_many(self, arns: Sequence[str]) -> dict[str, LedgerJob | None]:
        self.batch_reads += 1
        return {arn: self.jobs.get(arn) for arn in arns}

    def write(self, change: Transition, now: datetime) -> bool:
        if self.lose_next:
            self.lose_next -= 1
            return False
        current = self.jobs.get(change.new.arn)
        if (current.version if current else 0) != (change.old.version if change.old else 0):
            return False
        self.writes += 1
        self.jobs[change.new.arn] = dataclasses.replace(
            change.new, version=(current.version if current else 0) + 1
        )
        for k, d in change.deltas.items():
            self.aggs[k] = self.aggs[k] + d
            self.quota[k] = bool(change.new.details.quota_share)
        if change.new.details.queue:
            self.registry.setdefault(change.new.details.queue, change.new.details.environment)
        gone, added = runnable_changes(change)
        if gone is not None:
            self.runnable.discard(gone)
        if added is not None:
            self.runnable.add(added)
        return True

    def oldest_runnable(self, queue: str, share: str) -> RunnableEntry | None:
        entries = [e for e in self.runnable if e.queue == queue and e.share == share]
        return min(entries, key=lambda e: (e.since, e.arn)) if entries else None

    def aggregate_map(self) -> dict[AggregateKey, Delta]:
        """Non-zero aggregates."""
        return {k: d for k, d in self.aggs.items() if not d.zero}

    def aggregates(self, queue: str) -> list[Aggregate]:
        return [Aggregate(k, d, self.quota.get(k, False)) for k, d in self.aggs.items() if k.queue == queue]

    def queues(self) -> dict[str, str]:
        return dict(self.registry)

    def active(self, queue: str) -> list[ActiveEntry]:
        return [
            ActiveEntry(j.arn, j.kind, j.status, j.details.sized, j.runnable_since, j.share)
            for j in self.jobs.values()
            if j.details.queue == queue and not j.terminal
        ]

    def reconcile_state(self, queue: str) -> ReconcileState:
        return ReconcileState(self.marks.get(queue), self.cursors.get(queue))

    def reconcile_states(self, queues: Sequence[str]) -> dict[str, ReconcileState]:
        self.batch_reads += 1
        return {queue: self.reconcile_state(queue) for queue in queues}

    def seen(self, queue: str, started: datetime) -> set[str]:
        return {
            arn for (q, s, _), arns in self.seen_parts.items() if (q, s) == (queue, started) for arn in arns
        }

    def save_seen(self, queue: str, started: datetime, part: str, arns: Sequence[str]) -> None:
        self.seen_parts[(queue, started, part)] = frozenset(arns)

    def mark_reconciled(self, queue: str, at: datetime) -> None:
        self.marks[queue] = at
        self.cursors.pop(queue, None)

    def save_cursor(self, queue: str, at: datetime | None, cursor: ReconcileCursor) -> None:
        if at is not None:
            self.marks[queue] = at
        self.cursors[queue] = cursor

    def claim_starvation(self, arn: str, reason: StarvationReason, at: datetime) -> bool:
        self.claims.append(arn)  # every conditional put tried (one PutItem each in DynamoDB)
        claimed = self.starving.get((arn, reason))
        if claimed is not None and ((arn, reason) in self.published or at - claimed < STARVING_LEASE):
            return False
        self.starving[(arn, reason)] = at
        return True

    def confirm_starvation(self, arn: str, reason: StarvationReason) -> None:
        self.published.add((arn, reason))

    def release_starvation(self, arn: str, reason: StarvationReason) -> None:
        self.starving.pop((arn, reason), None)
        self.published.discard((arn, reason))


class FakeBatch:
    """A :class:`~batchpilot.ledger.ports.BatchReader` over given details and listings.

    Args:
        details: job ARN → what a describe returns (missing: ``None``, AWS no longer knows it).
        failing: ARNs whose describe raises :class:`DescribeError`.
        queues: the job queues; ``listed``: queue → its active jobs; ``limits``: environments'
            capacity limits; ``weights``: policy ARN → share weights (missing: unreadable);
            ``quotas``: queue → quota share limits (missing: unreadable); ``statuses``: job ARN →
            its status now (what ``job_statuses`` returns; missing: ``None``).
    """

    def __init__(
        self,
        details: Mapping[str, JobDetails] | None = None,
        *,
        failing: Iterable[str] = (),
        queues: Sequence[QueueInfo] = (),
        listed: Mapping[str, Sequence[ListedJob]] | None = None,
        limits: Mapping[str, int] | None = None,
        weights: Mapping[str, Mapping[str, float]] | None = None,
        quotas: Mapping[str, Mapping[str, int]] | None = None,
        reserve: Iterable[str] = (),
        statuses: Mapping[str, JobStatus] | None = None,
    ) -> None:
        self.details = dict(details or {})
        self.statuses = dict(statuses or {})
        self.failing = set(failing)
        self.queues = list(queues)
        self.listed = dict(listed or {})
        self.limits = dict(limits or {})
        self.weights = dict(weights or {})
        self.quotas = dict(quotas or {})
        self.reserve = set(reserve)
        self.calls: list[tuple[str, Any]] = []

    def job_statuses(self, kind: JobKind, arns: Sequence[str]) -> dict[str, JobStatus | None]:
        """``statuses``' entry per ARN (missing: ``None``, AWS no longer knows the job)."""
        self.calls.append(("job_statuses", tuple(arns)))
        if self.failing.intersection(arns):
            raise DescribeError("describe failed: ThrottlingException")
        return {arn: self.statuses.get(arn) for arn in arns}

    def describe(self, arn: str, kind: JobKind) -> JobDetails | None:
        self.calls.append(("describe", arn))
        if arn in self.failing:
            raise DescribeError("describe failed: ThrottlingException")
        return self.details.get(arn)

    def job_queues(self) -> list[QueueInfo]:
        self.calls.append(("job_queues", None))
        return list(self.queues)

    def list_active(self, queue: QueueInfo) -> list[ListedJob]:
        self.calls.append(("list_active", queue.name))
        return list(self.listed.get(queue.name, []))

    def list_page(self, queue: QueueInfo, status: int, token: str | None) -> ListedPage:
        """The whole listing as one page of one status (``list_active`` recorded as the call: a
        listing of the queue)."""
        self.calls.append(("list_active", queue.name))
        return ListedPage(list(self.listed.get(queue.name, [])), None, 1)

    def capacity_limits(self, environments: Sequence[str]) -> dict[str, int]:
        self.calls.append(("capacity_limits", tuple(environments)))
        return {e: self.limits[e] for e in environments if e in self.limits}

    def quota_shares(self, queue: str) -> dict[str, QuotaShareLimit] | None:
        """``quotas``' limits, each lending unless named in ``reserve``."""
        self.calls.append(("quota_shares", queue))
        found = self.quotas.get(queue)
        if found is None:
            return None
        return {name: QuotaShareLimit(limit, name not in self.reserve) for name, limit in found.items()}

    def share_weights(self, policy_arn: str) -> dict[str, float] | None:
        self.calls.append(("share_weights", policy_arn))
        found = self.weights.get(policy_arn)
        return dict(found) if found is not None else None


class MemoryCheckpoints:
    """A :class:`~batchpilot.ledger.ports.CheckpointReader` over given newest-object times per URI;
    ``failing``: URIs whose listing raises :class:`CheckpointListError` (``AccessDenied``)."""

    def __init__(self, newest: Mapping[str, datetime] | None = None, failing: Iterable[str] = ()) -> None:
        self.newest = dict(newest or {})
        self.failing = set(failing)
        self.listed: list[str] = []

    def inspect(
        self, location: CheckpointLocation | None, written_by: datetime | None = None
    ) -> CheckpointState:
        if location is None:
            return CheckpointState(None)
        self.listed.append(location.uri)
        if location.uri in self.failing:
            raise CheckpointListError("AccessDenied")
        newest = self.newest.get(location.uri)
        if newest is not None and written_by is not None and newest > written_by:
            newest = None
        return CheckpointState(location, newest, 1 if newest else 0)


class ListPublisher:
    """A :class:`~batchpilot.ledger.ports.EventPublisher` that keeps every event; ``fail_next``
    makes the next ``n`` calls raise :class:`PublishError`."""

    def __init__(self) -> None:
        self.events: list[OwnEvent] = []
        self.fail_next = 0

    def publish(self, events: Sequence[OwnEvent], resources: Sequence[str] | None = None) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise PublishError("PutEvents failed: test")
        self.events.extend(events)


class ListSink:
    """A :class:`~batchpilot.ledger.ports.MetricSink` that keeps every flushed point."""

    def __init__(self) -> None:
        self.pending: list[MetricPoint] = []
        self.points: list[MetricPoint] = []

    def add(self, points: Iterable[MetricPoint]) -> None:
        self.pending.extend(points)

    def flush(self) -> int:
        self.points.extend(self.pending)
        count = len(self.pending)
        self.pending = []
        return count

    def values(self, name: str, **dims: str) -> list[float]:
        """Values of ``name`` (flushed or pending) whose dimensions include ``dims``."""
        return [
            p.value
            for p in (*self.points, *self.pending)
            if p.name == name and all(dict(p.dimensions).get(k) == v for k, v in dims.items())
        ]


def seed_aggregates(
    dynamodb: Any, table: str, aggregates: Mapping[AggregateKey, Delta], quota: bool = False
) -> None:
    """Write ledger aggregate items directly (as many events would have left them), for tests and
    benchmarks of readers at a scale moto's TransactWriteItems cannot reach."""
    from batchpilot.io.dynamodb.ledger import LedgerStateStore

    store = LedgerStateStore(dynamodb, table)
    for agg_key, delta in aggregates.items():
        dynamodb.update_item(**store._aggregate_update(agg_key, delta, quota))


def preemption_bodies(arn: str, times: int, start: datetime) -> list[dict[str, Any]]:
    """Job events of service job ``arn`` (queue ``q``, priority 10, ``train-7b``): RUNNABLE, then
    ``times`` x (RUNNING, ``Batch Service Job Preemption Completed`` back to RUNNABLE), one a minute
    from ``start``."""
    from batchpilot_local.testing.samples import envelope, service_job

    bodies = [service_job("RUNNABLE", jobArn=arn, jobQueue="q", schedulingPriority=10, jobName="train-7b")]
    for _ in range(times):
        bodies.append(service_job("RUNNING", jobArn=arn, jobQueue="q"))
        bodies.append(
            envelope("Batch Service Job Preemption Completed", {"preemptedJobArn": arn, "status": "RUNNABLE"})
        )
    for minute, body in enumerate(bodies):
        body["time"] = (start + timedelta(minutes=minute)).isoformat()
    return bodies
