"""Starvation: which jobs the ledger reports as not getting to run. Pure, no I/O.

Two rules, each reported once per job (the ledger service keeps a conditional marker per job and
reason, :meth:`batchpilot.ledger.ports.LedgerStore.claim_starvation`):

- :attr:`~StarvationReason.PREEMPTED_REPEATEDLY`: the job, still active, has been preempted at
  least ``N`` times (default 3; AWS Batch ``preemptionSummary.preemptedAttemptCount`` or the
  preemptions the ledger counted, :class:`batchpilot.ledger.model.LedgerJob`). Checked on the
  transition that counts a preemption.
- :attr:`~StarvationReason.WAITING_BELOW_ENTITLEMENT`: the job has been RUNNABLE (since it last
  *became* RUNNABLE: a requeue restarts the clock) longer than its queue's threshold (default one
  hour) while its share's ``ShareOfUsage`` is below its ``Entitlement`` (both from
  :func:`batchpilot.ledger.fleet.fleet_points`; a share with nothing in use has a usage of 0 %;
  a share without a known entitlement is never called starving). Checked on every scheduled run
  (each minute), for the oldest RUNNABLE job of each (job queue, share), read from the ledger's
  RUNNABLE index (:mod:`batchpilot.ledger.runnable`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from batchpilot.ledger.model import JobStatus, LedgerJob
from batchpilot.shared.arns import resource_name
from batchpilot.shared.metrics import MetricPoint
from batchpilot.shared.own_events import JobStarving, StarvationReason

__all__ = [
    "DEFAULT_PREEMPTIONS",
    "DEFAULT_WAITING",
    "ShareStanding",
    "StarvationRules",
    "share_standing",
    "starving_event",
]

DEFAULT_PREEMPTIONS = 3
"""Preemptions after which a job is reported (``BATCHPILOT_LEDGER_STARVING_PREEMPTIONS``)."""
DEFAULT_WAITING = timedelta(hours=1)
"""RUNNABLE time after which a job of a share below its entitlement is reported."""


@dataclass(frozen=True, slots=True)
class ShareStanding:
    """A share's ``ShareOfUsage`` and ``Entitlement`` (percent) in one job queue; ``None``: unknown."""

    usage: float | None = None
    entitlement: float | None = None

    @property
    def below_entitlement(self) -> bool:
        """The share uses less of its queue than it is entitled to (no usage counts as 0 %)."""
        return self.entitlement is not None and (self.usage or 0.0) < self.entitlement


@dataclass(frozen=True, slots=True)
class StarvationRules:
    """The thresholds.

    Attributes:
        preemptions: preemptions at which a job is reported (``N``, at least 1).
        waiting: RUNNABLE time after which a job of a share below its entitlement is reported.
        queue_waiting: job queue name → its own ``waiting`` threshold.
    """

    preemptions: int = DEFAULT_PREEMPTIONS
    waiting: timedelta = DEFAULT_WAITING
    queue_waiting: Mapping[str, timedelta] = field(default_factory=dict)

    def waiting_for(self, queue: str) -> timedelta:
        """The RUNNABLE threshold of ``queue``."""
        return self.queue_waiting.get(queue, self.waiting)

    def preempted_repeatedly(self, job: LedgerJob) -> bool:
        """``job`` is active and was preempted at least :attr:`preemptions` times."""
        return not job.terminal and job.preemptions >= self.preemptions

    def waiting_below_entitlement(self, job: LedgerJob, standing: ShareStanding, now: datetime) -> bool:
        """``job`` is RUNNABLE for longer than its queue's threshold while its share is below its
        entitlement."""
        if job.status is not JobStatus.RUNNABLE or job.runnable_since is None:
            return False
        waited = now - job.runnable_since
        return waited > self.waiting_for(job.details.queue) and standing.below_entitlement


def share_standing(points: Iterable[MetricPoint]) -> dict[tuple[str, str], ShareStanding]:
    """(job queue, share) → its standing, from one run's ``ShareOfUsage`` and ``Entitlement`` points."""
    usage: dict[tuple[str, str], float] = {}
    entitled: dict[tuple[str, str], float] = {}
    for point in points:
        if point.name not in ("ShareOfUsage", "Entitlement"):
            continue
        dims = dict(point.dimensions)
        queue = dims.get("JobQueue", "")
        share = dims.get("QuotaShare") or dims.get("ShareIdentifier") or ""
        (usage if point.name == "ShareOfUsage" else entitled)[(queue, share)] = point.value
    return {k: ShareStanding(usage.get(k), entitled.get(k)) for k in usage.keys() | entitled.keys()}


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"


def starving_event(
    job: LedgerJob,
    reason: StarvationReason,
    now: datetime,
    rules: StarvationRules,
    standing: ShareStanding | None = None,
    as_of: datetime | None = None,
) -> JobStarving:
    """The ``Job Starving`` event of ``job`` (its record) for ``reason`` at ``now``.

    ``waiting_seconds`` is the time since the job last became RUNNABLE (``None`` when it is not
    RUNNABLE) up to ``as_of``: the time of the event that made it starving (its ``time``; the
    record's ``status_at``), so a late, redelivered or replayed event says how long the job had
    waited then, not how long ago that was; ``None``: ``now`` (the scheduled check, which runs on
    the clock). ``threshold`` is ``N`` preemptions or the queue's threshold in seconds.
    """
    d = job.details
    name = d.name or resource_name(job.arn) or job.arn
    share = job.share or "no share"
    priority = "unknown" if d.priority is None else str(d.priority)
    waiting = (
        max(((as_of or now) - job.runnable_since).total_seconds(), 0.0)
        if job.status is JobStatus.RUNNABLE and job.runnable_since is not None
        else None
    )
    how_long = f"RUNNABLE for {_duration(waiting)}" if waiting is not None else f"{job.status.value}"
    if reason is StarvationReason.PREEMPTED_REPEATEDLY:
        threshold = float(rules.preemptions)
        why = f"preempted {job.preemptions} times"
    else:
        threshold = rules.waiting_for(d.queue).total_seconds()
        usage = f"{(standing.usage or 0.0) if standing else 0.0:.0f}%"
        entitled = f"{standing.entitlement:.0f}%" if standing and standing.entitlement is not None else "?"
        why = f"waiting while share {share} uses {usage} of the queue against an entitlement of {entitled}"
    message = (
        f"job {name} (share {share}, priority {priority}) is starving: {why}; {how_long}"
        f" on {d.queue or 'an unknown queue'}"
    )
    return JobStarving(
        time=now,
        job_arn=job.arn,
        job_kind=job.kind.value,
        job_name=name,
        job_queue=d.queue or None,
        share_identifier=d.share_identifier,
        quota_share=d.quota_share,
        scheduling_priority=d.priority,
        reason=reason,
        preemptions=job.preemptions,
        waiting_seconds=waiting,
        threshold=threshold,
        share_usage_percent=standing.usage if standing else None,
        entitlement_percent=standing.entitlement if standing else None,
        message=message,
    )
