"""Bursts: facts of one batch that share a job queue, category and severity. Pure.

A fleet-wide spot reclaim fails tens of jobs of one queue within a minute. The alerts queue's
batching window gathers them into few Lambda batches; within a batch, a group of more than
``digest_threshold`` facts goes to each chat channel as one digest (and, when the policy says
``sns_grouping: group``, to the on-call topic as one message).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from batchpilot.alerts.facts import AlertFact
from batchpilot.alerts.policy import Severity

__all__ = ["burst_key", "split_bursts"]

T = TypeVar("T")


def burst_key(fact: AlertFact, severity: Severity) -> tuple[str, str, str]:
    """``(job queue, category, severity)``: what facts of one burst share. Facts without a job
    queue (standalone training jobs, capacity events) group by job kind / event kind instead."""
    kind = fact.job_kind
    queue = fact.job_queue or f"<{kind.value if kind else fact.event_kind.value}>"
    category = fact.category.value if fact.category else (fact.status or fact.event_kind.value)
    return (queue, category, severity.value)


def split_bursts(
    items: Sequence[T], key: Callable[[T], Hashable], threshold: int
) -> tuple[list[list[T]], list[T]]:
    """Split ``items`` into bursts (groups of more than ``threshold`` items with the same key) and
    the remaining single items. Order is kept: bursts in order of their first item, items in input
    order within each list.

    Raises:
        ValueError: ``threshold`` < 1.
    """
    if threshold < 1:
        raise ValueError("threshold must be at least 1")
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    bursts = [group for group in groups.values() if len(group) > threshold]
    in_burst = {id(item) for group in bursts for item in group}
    singles = [item for item in items if id(item) not in in_burst]
    return bursts, singles
