"""Idle capacity across teams: pure, no I/O.

Two gauges of the ledger's scheduled run (docs/metrics.md, "Fleet metrics"), from the same
aggregates as :mod:`batchpilot.ledger.fleet`:

- ``IdleWhileQueuedElsewhere`` (:func:`idle_elsewhere`): reserved instances free in one service
  environment while RUNNABLE service jobs that would fit them (the same instance type) wait in
  another. With one service environment per team, ``IdleWhileQueued`` (per environment) sees each
  team's idle capacity only against its own queue; this is the fleet's number: capacity one team
  holds idle while another team's jobs wait for that instance type. Published per minute in
  instances, so its Sum over an hour / 60 is idle instance-hours (one name per concept: the
  dashboards draw the hours with metric math).
- ``LentInstances`` (:func:`lent_instances`): per quota share, the part of its own capacity limit
  that it does not use and that other quota shares of its job queue use, beside its
  ``BorrowedInstances`` (AWS Batch User Guide, "Quota shares": a ``LEND`` or ``LEND_AND_BORROW``
  share lends its idle capacity to a share in need, a ``RESERVE`` share keeps it).

What an environment's reserved instances are: ``ReservedInstances`` (``LedgerReservedInstances``,
else the capacity policy's ``max``, else the capacity limit) of the instance types given with
them (``LedgerReservedInstances`` by instance type), else of the types of its jobs in use
(SCHEDULED, STARTING, RUNNING), else of its RUNNABLE jobs (the aggregates' per-type counters,
from each job's ``ResourceConfig``). An environment with none of these counts none of its
instances here (the type of its free capacity is unknown: never counted as fitting). A RUNNABLE
job counts as waiting only for the instances its environment's own free reserved capacity cannot
take (those are ``IdleWhileQueued``), and only when its instance type is known; jobs of unknown
size count nowhere here.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from batchpilot.ledger.fleet import FleetInputs, queue_mean
from batchpilot.ledger.model import IN_USE, JobStatus
from batchpilot.ledger.ports import Aggregate
from batchpilot.shared.metrics import MetricPoint, MetricsDetail, dimensions

__all__ = [
    "EnvironmentUse",
    "IdleElsewhere",
    "environment_uses",
    "idle_elsewhere",
    "idle_points",
    "lent_instances",
]

_EPSILON = 1e-9  # below this an amount of instances is none (float sums of queue means)


@dataclass(frozen=True, slots=True)
class EnvironmentUse:
    """One service environment at one run.

    Attributes:
        reserved: reserved instances (``ReservedInstances``).
        in_use: instances in use (SCHEDULED, STARTING, RUNNING; jobs of unknown size at their
            queue's mean).
        types: the instance types its reserved instances are (empty: unknown).
        runnable: instance type → instances its RUNNABLE jobs of that type ask for.
    """

    reserved: float
    in_use: float
    types: frozenset[str] = frozenset()
    runnable: Mapping[str, float] = field(default_factory=dict)

    @property
    def free(self) -> float:
        """Reserved instances not in use (never below zero)."""
        return max(self.reserved - self.in_use, 0.0)


@dataclass(frozen=True, slots=True)
class IdleElsewhere:
    """The result of :func:`idle_elsewhere`.

    Attributes:
        total: reserved instances idle while jobs that would fit them wait in another environment.
        by_environment: idle environment → its part of ``total`` (only environments above zero).
        waiting: waiting environment → the instances of its jobs those idle instances would take.
    """

    total: float = 0.0
    by_environment: dict[str, float] = field(default_factory=dict)
    waiting: dict[str, float] = field(default_factory=dict)


def environment_uses(
    aggregates: Mapping[str, Sequence[Aggregate]],
    reserved: Mapping[str, int],
    reserved_types: Mapping[str, Iterable[str]] | None = None,
) -> dict[str, EnvironmentUse]:
    """Each service environment's :class:`EnvironmentUse` from one run's aggregates (queue name →
    its aggregates), reserved instances (environment → instances) and, where the reservation was
    given by instance type (``LedgerReservedInstances``), its types (environment → instance
    types: they take precedence over the types of its jobs). Every environment of ``reserved`` is
    present (one with no jobs: nothing in use, types unknown unless given); aggregates whose
    environment is not known yet (``""``) are left out."""
    in_use: dict[str, float] = defaultdict(float)
    used_types: dict[str, set[str]] = defaultdict(set)
    waiting_types: dict[str, set[str]] = defaultdict(set)
    runnable: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for queue_aggregates in aggregates.values():
        mean = queue_mean(queue_aggregates)
        for agg in queue_aggregates:
            env = agg.key.environment
            if not env:
                continue
            by_type = agg.total.by_type
            if agg.key.status in IN_USE:
                in_use[env] += agg.total.instances + (agg.total.jobs - agg.total.sized) * mean
                used_types[env].update(t for t, n in by_type.items() if n > 0)
            elif agg.key.status is JobStatus.RUNNABLE:
                waiting_types[env].update(t for t, n in by_type.items() if n > 0)
                for kind, count in by_type.items():
                    if count > 0:
                        runnable[env][kind] += count
    names = set(reserved) | set(in_use) | set(runnable)
    configured = {env: tuple(types) for env, types in (reserved_types or {}).items()}
    return {
        env: EnvironmentUse(
            reserved=float(reserved.get(env, 0)),
            in_use=in_use.get(env, 0.0),
            types=frozenset(configured.get(env) or used_types.get(env) or waiting_types.get(env) or ()),
            runnable=dict(runnable.get(env, {})),
        )
        for env in sorted(names)
    }


def idle_elsewhere(environments: Mapping[str, EnvironmentUse]) -> IdleElsewhere:
    """Reserved instances idle in one environment while jobs that would fit them wait in another.

    First each environment's own free reserved instances take its own RUNNABLE demand of its
    types (that part is ``IdleWhileQueued``, not this); then the largest amount of the remaining
    free instances of each environment that the remaining demand of *other* environments of the
    same instance types could take (a maximum flow from idle environments to (environment,
    instance type) demands, Edmonds-Karp: each environment's free instances go to demands of its
    types only, never to its own).

    Returns:
        Never more than the sum of ``reserved - in use`` of the environments (per environment:
        its own), nor than the demand of the others; zero when no job elsewhere would fit.
    """
    free: dict[str, float] = {}
    demand: dict[tuple[str, str], float] = {}
    for env, use in sorted(environments.items()):
        left = use.free
        for kind, count in sorted(use.runnable.items()):
            want = max(float(count), 0.0)
            if kind in use.types and left > _EPSILON:
                taken = min(left, want)
                left -= taken
                want -= taken
            if want > _EPSILON:
                demand[(env, kind)] = want
        if left > _EPSILON and use.types:
            free[env] = left
    flows = _max_flow(free, demand, {env: environments[env].types for env in free})
    by_environment: dict[str, float] = defaultdict(float)
    waiting: dict[str, float] = defaultdict(float)
    for (source, (target, _kind)), amount in flows.items():
        by_environment[source] += amount
        waiting[target] += amount
    kept = {env: v for env, v in sorted(by_environment.items()) if v > _EPSILON}
    return IdleElsewhere(
        total=sum(kept.values()),
        by_environment=kept,
        waiting={env: v for env, v in sorted(waiting.items()) if v > _EPSILON},
    )


def _max_flow(
    free: Mapping[str, float],
    demand: Mapping[tuple[str, str], float],
    types: Mapping[str, frozenset[str]],
) -> dict[tuple[str, tuple[str, str]], float]:
    """Edmonds-Karp on source → environment (its free instances) → (another environment, one of
    the first's instance types) → sink (that demand); returns the flow of each environment →
    demand edge above zero. Shortest augmenting paths (breadth-first), so it ends after at most
    nodes x edges augmentations whatever the (float) capacities."""
    envs = sorted(free)
    wants = sorted(demand)
    source, sink = 0, 1 + len(envs) + len(wants)
    env_node = {env: 1 + i for i, env in enumerate(envs)}
    want_node = {d: 1 + len(envs) + i for i, d in enumerate(wants)}
    residual: dict[int, dict[int, float]] = defaultdict(dict)

    def link(a: int, b: int, capacity: float) -> None:
        residual[a][b] = residual[a].get(b, 0.0) + capacity
        residual[b].setdefault(a, 0.0)

    for env in envs:
        link(source, env_node[env], free[env])
        for d in wants:
            if d[0] != env and d[1] in types[env]:
                link(env_node[env], want_node[d], math.inf)
    for d in wants:
        link(want_node[d], sink, demand[d])
    while True:
        parent = {source: source}
        queue = deque([source])
        while queue and sink not in parent:
            node = queue.popleft()
            for nxt, capacity in residual[node].items():
                if nxt not in parent and capacity > _EPSILON:
                    parent[nxt] = node
                    queue.append(nxt)
        if sink not in parent:
            break
        path = [sink]
        while path[-1] != source:
            path.append(parent[path[-1]])
        pairs = list(zip(path[1:], path[:-1], strict=True))
        amount = min(residual[a][b] for a, b in pairs)
        for a, b in pairs:
            residual[a][b] -= amount
            residual[b][a] += amount
    out: dict[tuple[str, tuple[str, str]], float] = {}
    for env in envs:
        for d in wants:
            # The flow on a forward edge is what its reverse edge holds.
            sent = residual[want_node[d]].get(env_node[env], 0.0) if d[0] != env else 0.0
            if sent > _EPSILON and d[1] in types[env]:
                out[(env, d)] = sent
    return out


def lent_instances(
    in_use: Mapping[str, float], limits: Mapping[str, int], lenders: Iterable[str] | None = None
) -> dict[str, float]:
    """Quota share → instances of its own capacity limit lent to the other quota shares of its
    job queue (only shares above zero).

    Args:
        in_use: quota share → instances in use (absent: none).
        limits: quota share → its capacity limit (ListQuotaShares ``capacityLimits``, summed),
            every quota share of the queue, with jobs or not.
        lenders: the quota shares whose strategy lends (``LEND``, ``LEND_AND_BORROW``); a
            ``RESERVE`` share's unused limit is lent to nobody. ``None``: every share lends.

    What the borrowers use above their own limits (``BorrowedInstances``) comes from the quota
    shares below theirs; AWS Batch does not say from which, so it is spread over them in
    proportion to their unused limits: a share lends at most its unused limit, and the shares lend
    no more together than the others borrow.
    """
    borrowed = sum(max(in_use.get(s, 0.0) - limit, 0.0) for s, limit in limits.items())
    lending = set(limits) if lenders is None else set(lenders)
    unused = {s: max(limit - in_use.get(s, 0.0), 0.0) for s, limit in limits.items() if s in lending}
    spare = sum(unused.values())
    if borrowed <= _EPSILON or spare <= _EPSILON:
        return {}
    ratio = min(1.0, borrowed / spare)
    return {s: v * ratio for s, v in sorted(unused.items()) if v * ratio > _EPSILON}


def idle_points(
    inputs: FleetInputs,
    now: datetime,
    detail: MetricsDetail = MetricsDetail.BASIC,
    reserved_types: Mapping[str, Iterable[str]] | None = None,
    lenders: Mapping[str, Iterable[str]] | None = None,
) -> list[MetricPoint]:
    """The run's ``IdleWhileQueuedElsewhere`` (fleet-wide; per idle ``ServiceEnvironment`` with
    ``MetricsDetail=detailed``) and ``LentInstances`` (``JobQueue`` + ``QuotaShare``), each only
    while above zero (CloudWatch bills a series for every hour it is published).
    ``reserved_types``: environment → the instance types of its reservation, where given;
    ``lenders``: job queue → its quota shares that lend (absent: every share lends)."""
    out: list[MetricPoint] = []
    idle = idle_elsewhere(environment_uses(inputs.aggregates, inputs.reserved, reserved_types))
    if idle.total > _EPSILON:
        out.append(MetricPoint("IdleWhileQueuedElsewhere", "Count", idle.total, dimensions(), now))
        if detail is MetricsDetail.DETAILED:
            for env, value in idle.by_environment.items():
                dims = dimensions(ServiceEnvironment=env)
                out.append(MetricPoint("IdleWhileQueuedElsewhere", "Count", value, dims, now))
    for queue, aggregates in sorted(inputs.aggregates.items()):
        limits = inputs.quota_limits.get(queue)
        if not limits:
            continue
        mean = queue_mean(aggregates)
        used: dict[str, float] = defaultdict(float)
        for agg in aggregates:
            if agg.quota and agg.key.share and agg.key.status in IN_USE:
                used[agg.key.share] += agg.total.instances + (agg.total.jobs - agg.total.sized) * mean
        for share, lent in lent_instances(used, limits, (lenders or {}).get(queue)).items():
            dims = dimensions(JobQueue=queue or None, QuotaShare=share)
            out.append(MetricPoint("LentInstances", "Count", lent, dims, now))
    return out
