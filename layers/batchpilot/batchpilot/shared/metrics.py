"""The metrics batchpilot derives from one job event: pure domain code, no I/O.

:func:`metric_points` turns :class:`~batchpilot.shared.classification.JobFacts` into
:class:`MetricPoint` values; an adapter (:mod:`batchpilot.io.emf`) writes them as CloudWatch
Embedded Metric Format. docs/metrics.md (the metric catalog) documents every name produced here.

Dimensions come only from :data:`DIMENSIONS`, a fixed allow-list of low-cardinality keys (never job
names, tags, parameters or free-text reasons); every value is a non-empty string of at most 1024
characters; every metric value is finite and non-negative.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Literal

from batchpilot.shared.classification import EventKind, JobFacts, JobKind

__all__ = [
    "DIMENSIONS",
    "MAX_AHEAD",
    "MAX_BEHIND",
    "MetricPoint",
    "MetricsDetail",
    "dimension_value",
    "dimensions",
    "metric_points",
    "metric_timestamp",
]

Unit = Literal["Count", "Seconds", "Percent"]

DIMENSIONS: frozenset[str] = frozenset(
    {
        # job metrics (metrics function)
        "JobKind",
        "JobQueue",
        "ShareIdentifier",
        "QuotaShare",
        "InstanceType",
        "Status",
        "FailureCategory",
        "BlockedCategory",
        # recovery outcomes: a closed enum of a dozen values
        "SkipReason",
        # the alerts function's delivery counters: closed enums
        "Channel",
        "Severity",
        # capacity gauges and decisions
        "ServiceEnvironment",
        "CapacityUnit",
        "Decision",
        "Reason",
        # job ledger and fleet metrics: closed enums and share names
        "Basis",
        "Drift",
        "PreemptingShare",
    }
)
"""The only dimension keys batchpilot ever emits (plus Powertools' ``service``), for every function:
names of queues, shares, environments and instance types, and closed enums; never job names, ARNs,
tags, parameters or free-text reasons. Every point is built by :func:`dimensions`, which enforces it."""

MAX_BEHIND = timedelta(days=14) - timedelta(minutes=1)
"""CloudWatch rejects EMF timestamps older than 14 days; one minute of margin because the EMF
adapter truncates timestamps to the minute."""
MAX_AHEAD = timedelta(hours=2)
"""CloudWatch rejects EMF timestamps further in the future than this."""

_MAX_DIMENSION_VALUE = 1024


class MetricsDetail(StrEnum):
    """Which dimension sets batchpilot publishes (template parameter ``MetricsDetail``, env
    ``BATCHPILOT_METRICS_DETAIL``). CloudWatch bills each custom metric (name + dimension set)
    for every hour it is published, so the sets are chosen per question a dashboard or alarm asks.

    ``BASIC`` (the default): the sets the dashboards and alarms read (per job queue, per service
    environment, per share for the fairness gauges), each gauge only while there is something to
    measure. ``DETAILED``: also the finer sets (per share identifier / quota share for job
    outcomes, times and blocks; every fleet gauge per share; state transitions by status).
    """

    BASIC = "basic"
    DETAILED = "detailed"


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One metric value.

    Attributes:
        name: metric name from the catalog in docs/metrics.md.
        unit: CloudWatch unit, ``Count``, ``Seconds`` or ``Percent`` (instance-hours are ``Count``).
        value: finite, non-negative.
        dimensions: sorted ``(key, value)`` pairs; keys from :data:`DIMENSIONS`.
        timestamp: UTC datetime the value belongs to.
    """

    name: str
    unit: Unit
    value: float
    dimensions: tuple[tuple[str, str], ...]
    timestamp: datetime


def metric_timestamp(event_time: datetime, now: datetime) -> datetime:
    """The event's own time when CloudWatch accepts it (14 days back less a minute, 2 hours ahead),
    else ``now``."""
    if now - MAX_BEHIND < event_time < now + MAX_AHEAD:
        return event_time
    return now


def dimension_value(value: str) -> str:
    """``value`` as CloudWatch accepts a dimension value: printable ASCII (anything else becomes
    ``?``), surrounding space stripped, at most 1,024 characters; may be empty (then dropped)."""
    text = value.strip()
    if not text.isascii() or not text.isprintable():
        text = "".join(c if " " <= c <= "~" else "?" for c in text)
    return text[:_MAX_DIMENSION_VALUE]


def dimensions(**values: str | None) -> tuple[tuple[str, str], ...]:
    """Sorted ``(key, value)`` pairs for a :class:`MetricPoint`; ``None`` and empty values dropped,
    values passed through :func:`dimension_value`.

    Raises:
        ValueError: a key outside :data:`DIMENSIONS` (a bug, never event data).
    """
    return _dimensions(tuple(values.items()))


@functools.lru_cache(maxsize=4096)
def _dimensions(items: tuple[tuple[str, str | None], ...]) -> tuple[tuple[str, str], ...]:
    # Cached: the same few queues, shares and statuses come back in every event, three or more
    # dimension sets each; the result is an immutable tuple, safe to share.
    out = []
    for key, value in items:
        if key not in DIMENSIONS:
            raise ValueError(f"dimension {key} is not in DIMENSIONS")
        if value is None:
            continue
        text = dimension_value(value)
        if text:
            out.append((key, text))
    return tuple(sorted(out))


_dims = dimensions


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return (end - start).total_seconds()


def metric_points(
    facts: JobFacts, event_time: datetime, now: datetime, detail: MetricsDetail = MetricsDetail.BASIC
) -> list[MetricPoint]:
    """Derive the metric values of one classified job event.

    Args:
        facts: the classification of the event.
        event_time: the envelope ``time`` of the event (UTC).
        now: the current time (UTC), injected so the result is reproducible.
        detail: ``BASIC``: Batch jobs' points carry ``JobKind`` + ``JobQueue`` (the share is per-job
            detail: in the EMF blob's properties and the logs, not a dimension) and no
            ``JobStateTransitions``; ``DETAILED``: each point also once more with the share
            (``ShareIdentifier`` or ``QuotaShare``) when the job has one, and
            ``JobStateTransitions``.

    Returns:
        The points, in a stable order. Values that would be negative or non-finite (clock skew,
        events that lack a timestamp) are left out, never clamped.

    The catalog (units; dimensions beyond ``JobKind`` + ``JobQueue`` (+ the share, detailed) for
    Batch jobs, or ``JobKind`` + ``InstanceType`` for training jobs):
    ``JobStateTransitions`` (Count; + ``Status``; detailed only), ``JobsSucceeded`` (Count), ``JobsFailed``
    (Count; + ``FailureCategory``), ``QueueWaitTime`` and ``RunTime`` (Seconds, on terminal
    events), ``InstanceHours`` (Count; terminal training jobs), ``QueueBlocked`` (Count;
    + ``BlockedCategory``), ``SpotInterruptions``
    (Count; a spot reclaim Batch is retrying, or a SageMaker managed-spot interruption),
    ``JobFailureRate`` (Percent; ``JobQueue`` only; one sample per Batch job that ended: 100 when
    it failed, 0 when it succeeded).
    """
    ts = metric_timestamp(event_time, now)
    detailed = detail is MetricsDetail.DETAILED
    bases: list[dict[str, str | None]]
    if facts.kind is JobKind.TRAINING_JOB:
        bases = [{"JobKind": facts.kind.value, "InstanceType": facts.instance_type}]
    else:
        bases = [{"JobKind": facts.kind.value, "JobQueue": facts.queue}]
        share = {"ShareIdentifier": facts.share_identifier, "QuotaShare": facts.quota_share}
        if detailed and any(share.values()):
            bases.append({**bases[0], **share})
    points: list[MetricPoint] = []

    def add(name: str, unit: Unit, value: float | None, **extra: str | None) -> None:
        if value is None or not math.isfinite(value) or value < 0:
            return
        for base in bases:
            points.append(MetricPoint(name, unit, float(value), _dims(**base, **extra), ts))

    category = facts.category.value if facts.category else None
    if facts.event_kind is EventKind.QUEUE_BLOCKED:
        add("QueueBlocked", "Count", 1, BlockedCategory=category)
        return points
    if facts.event_kind in (EventKind.PREEMPTION_STARTED, EventKind.PREEMPTION_COMPLETED):
        # The job ledger's Preemptions (per preempted attempt, with the job's queue and share,
        # which a Preemption Started event does not carry) is the one series of this fact.
        return points

    if detailed:
        add("JobStateTransitions", "Count", 1, Status=facts.status)
    if facts.terminal:
        if facts.succeeded:
            add("JobsSucceeded", "Count", 1)
        else:
            add("JobsFailed", "Count", 1, FailureCategory=category or "UNKNOWN")
        if facts.kind is not JobKind.TRAINING_JOB and facts.queue:
            # One sample per job that ended, so CloudWatch's Average (Sum / SampleCount) over any
            # period is the queue's failure rate in percent and its SampleCount the jobs that ended.
            # A Metrics Insights alarm has one query and one function ("GetMetricData": one query
            # per operation; "Metrics Insights query components and syntax": AVG, COUNT, MAX, MIN,
            # SUM), so failed / (failed + succeeded) per queue must come from one metric's AVG.
            # JobQueue alone: every share of the queue in one time series per queue.
            rate = 0.0 if facts.succeeded else 100.0
            points.append(MetricPoint("JobFailureRate", "Percent", rate, _dims(JobQueue=facts.queue), ts))
        add("QueueWaitTime", "Seconds", _seconds(facts.created_at, facts.first_started_at))
        add("RunTime", "Seconds", _seconds(facts.started_at, facts.stopped_at))
        if facts.kind is JobKind.TRAINING_JOB and facts.instance_count:
            run = _seconds(facts.started_at, facts.stopped_at)
            add("InstanceHours", "Count", None if run is None else facts.instance_count * run / 3600)
    elif facts.category is not None and facts.category.value == "SPOT_INTERRUPTION":
        add("SpotInterruptions", "Count", 1)
    return points
