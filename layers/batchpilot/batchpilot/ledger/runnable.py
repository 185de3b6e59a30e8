"""The ledger's index of RUNNABLE jobs per (job queue, share), oldest first: pure, no I/O.

``OldestRunnableAge`` is a per-minute gauge of every queue and share, and the starvation check
looks at the job behind it every minute: both need the oldest RUNNABLE job of a share without
paging through the queue's jobs. The index holds one entry per RUNNABLE job, keyed by when the job
last *became* RUNNABLE (a requeue restarts it); the store writes an entry's put and delete in the
same transaction as the job's record (:func:`runnable_changes`), so the index always holds exactly
the RUNNABLE records, and reads the oldest entry of a share with one ``Limit=1`` Query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from batchpilot.ledger.model import JobStatus, LedgerJob, Transition

__all__ = ["RunnableEntry", "runnable_changes", "runnable_entry"]


@dataclass(frozen=True, slots=True, order=True)
class RunnableEntry:
    """A RUNNABLE job's entry: its job queue and share (quota share, else share identifier, else
    ``""``), when it last became RUNNABLE (aware UTC) and its ARN."""

    queue: str
    share: str
    since: datetime
    arn: str


def runnable_entry(job: LedgerJob | None) -> RunnableEntry | None:
    """The entry ``job``'s record implies: one while it is RUNNABLE, none otherwise."""
    if job is None or job.status is not JobStatus.RUNNABLE or job.runnable_since is None:
        return None
    return RunnableEntry(job.details.queue, job.share, job.runnable_since, job.arn)


def runnable_changes(change: Transition) -> tuple[RunnableEntry | None, RunnableEntry | None]:
    """``(entry to delete, entry to put)`` of a transition; ``(None, None)`` when its entry stays
    the same (most transitions: only those into or out of RUNNABLE, or a RUNNABLE job's share
    or queue becoming known, touch the index)."""
    old, new = runnable_entry(change.old), runnable_entry(change.new)
    if old == new:
        return None, None
    return old, new
