"""Invariants of a finished simulation, recomputed from its trace alone (not from the engine's
bookkeeping), so that tests, property tests and ``--check`` style uses can trust a run.

Each function returns a list of violations (one sentence each); an empty list means the run kept
the invariant.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable

from batchpilot_local.simulate.engine import AttemptOutcome, AttemptTrace, JobState, Trace
from batchpilot_local.simulate.scenario import Scenario, SharingStrategy

__all__ = ["capacity_violations", "job_violations", "quota_violations"]

_EPS = 1e-9


def _groups(events: Iterable[tuple[float, int, str, int]]) -> list[list[tuple[float, int, str, int]]]:
    ordered = sorted(events)
    out: list[list[tuple[float, int, str, int]]] = []
    for event in ordered:
        if out and abs(out[-1][0][0] - event[0]) <= _EPS:
            out[-1].append(event)
        else:
            out.append([event])
    return out


def capacity_violations(scenario: Scenario, trace: Trace) -> list[str]:
    """Instances in use never exceed a service environment's capacity limit (per capacity unit,
    limits as changed over time), nor an instance type's ``available`` count.

    At one instant, releases are counted before limit changes and starts (what one scheduling pass
    sees).
    """
    problems: list[str] = []
    # (time, order, key, value): order 0 = release, 1 = limit change, 2 = start
    by_unit: dict[tuple[str, str], list[tuple[float, int, str, int]]] = defaultdict(list)
    by_type: dict[str, list[tuple[float, int, str, int]]] = defaultdict(list)
    for attempt in trace.attempts:
        key = (attempt.environment, attempt.unit)
        by_unit[key].append((attempt.start, 2, "start", attempt.instances))
        by_unit[key].append((attempt.end, 0, "end", -attempt.instances))
        by_type[attempt.instance_type].append((attempt.start, 2, "start", attempt.instances))
        by_type[attempt.instance_type].append((attempt.end, 0, "end", -attempt.instances))
    for time, env, unit, limit in trace.limit_changes:
        by_unit[(env, unit)].append((time, 1, "limit", limit))
    for (env, unit), events in by_unit.items():
        in_use = 0
        limit = 0
        for group in _groups(events):
            for _, order, _, value in group:
                if order == 1:
                    limit = value
                else:
                    in_use += value
            if in_use > limit:
                problems.append(
                    f"{env} {unit}: {in_use} instances in use at t={group[0][0]:.1f} s, limit {limit}"
                )
            if in_use < 0:
                problems.append(f"{env} {unit}: negative use at t={group[0][0]:.1f} s")
    for kind, events in by_type.items():
        spec = scenario.instance_types.get(kind)
        if spec is None or spec.available is None:
            continue
        in_use = 0
        for group in _groups(events):
            in_use += sum(value for _, _, _, value in group)
            if in_use > spec.available:
                problems.append(
                    f"{kind}: {in_use} in use at t={group[0][0]:.1f} s, {spec.available} available"
                )
    return problems


def job_violations(trace: Trace) -> list[str]:
    """No job starts before it is submitted, runs twice at once, or ends twice; a SUCCEEDED job
    has exactly one successful attempt, ending when the job ends."""
    problems: list[str] = []
    attempts: dict[int, list[AttemptTrace]] = defaultdict(list)
    for attempt in trace.attempts:
        attempts[attempt.job].append(attempt)
    seen: set[int] = set()
    for job in trace.jobs:
        if job.job in seen:
            problems.append(f"job {job.job} is reported twice")
        seen.add(job.job)
        own = sorted(attempts.get(job.job, []), key=lambda a: (a.start, a.end))
        for attempt in own:
            if attempt.start + _EPS < job.submit:
                problems.append(
                    f"job {job.job} started at {attempt.start:.1f} s, before its submission {job.submit:.1f}"
                )
            if attempt.end + _EPS < attempt.start:
                problems.append(f"job {job.job} has an attempt that ends before it starts")
        for previous, current in itertools.pairwise(own):
            if current.start + _EPS < previous.end:
                problems.append(
                    f"job {job.job} runs twice at once ({previous.start:.1f}-{previous.end:.1f} s and "
                    f"{current.start:.1f} s)"
                )
        successes = [a for a in own if a.outcome is AttemptOutcome.SUCCEEDED]
        if len(successes) > 1:
            problems.append(f"job {job.job} succeeded {len(successes)} times")
        terminal = job.state in (JobState.SUCCEEDED, JobState.FAILED)
        if terminal != (job.end is not None):
            problems.append(f"job {job.job} is {job.state.value} with end {job.end}")
        if job.state is JobState.SUCCEEDED:
            if len(successes) != 1 or job.end is None or abs(successes[0].end - job.end) > _EPS:
                problems.append(f"job {job.job} SUCCEEDED without exactly one successful attempt ending then")
        elif successes:
            problems.append(f"job {job.job} is {job.state.value} but has a successful attempt")
        if job.end is not None and own and own[-1].end > job.end + _EPS:
            problems.append(f"job {job.job} has an attempt after it ended")
        if own and job.first_start is not None and abs(own[0].start - job.first_start) > _EPS:
            problems.append(f"job {job.job}: first start {job.first_start} is not its first attempt's")
    return problems


def quota_violations(scenario: Scenario, trace: Trace) -> list[str]:
    """A quota share never holds more than its own limit of an instance type unless it is
    LEND_AND_BORROW, stays within its ``borrowLimit``, and everything every share borrows fits in
    idle lendable capacity (LEND and LEND_AND_BORROW shares' unused limits and capacity no quota
    share owns; a RESERVE share's idle capacity is never lent). Checked at every dispatch."""
    problems: list[str] = []
    for queue in scenario.job_queues:
        if queue.quota is None:
            continue
        env = scenario.environment(queue.service_environment)
        shares = {s.name: s for s in queue.quota.quota_shares}
        own_attempts = [a for a in trace.attempts if a.queue == queue.name]
        kinds = {a.instance_type for a in own_attempts}
        for kind in kinds:
            events = []
            for a in own_attempts:
                if a.instance_type == kind:
                    events.append((a.start, 2, a.share, a.instances))
                    events.append((a.end, 0, a.share, -a.instances))
            used: dict[str, int] = defaultdict(int)
            limit_env = env.capacity_limits.get(kind, 0)
            limit_changes = sorted(
                (t, v) for t, e, u, v in trace.limit_changes if e == env.name and u == kind
            )
            for group in _groups(events):
                t = group[0][0]
                for time, value in limit_changes:
                    if time <= t + _EPS:
                        limit_env = value
                started = set()
                for _, order, share, value in group:
                    used[share] += value
                    if order == 2:
                        started.add(share)
                owned = sum(s.capacity_limits.get(kind, 0) for s in shares.values())
                idle = max(0, limit_env - owned) + sum(
                    max(0, s.capacity_limits.get(kind, 0) - used[name])
                    for name, s in shares.items()
                    if s.strategy is not SharingStrategy.RESERVE
                )
                borrowed = sum(
                    max(0, used[name] - s.capacity_limits.get(kind, 0)) for name, s in shares.items()
                )
                for share in started:
                    spec = shares[share]
                    excess = used[share] - spec.capacity_limits.get(kind, 0)
                    if excess <= 0:
                        continue
                    if spec.strategy is not SharingStrategy.LEND_AND_BORROW:
                        problems.append(
                            f"{queue.name}/{share} ({spec.strategy.value}) holds {used[share]} {kind} at "
                            f"t={t:.1f} s, over its limit"
                        )
                    elif excess > spec.borrow_cap(kind) + _EPS and not math.isinf(spec.borrow_cap(kind)):
                        problems.append(
                            f"{queue.name}/{share} borrows {excess} {kind} at t={t:.1f} s, over its "
                            "borrowLimit"
                        )
                    if borrowed > idle:
                        problems.append(
                            f"{queue.name}: shares borrow {borrowed} {kind} at t={t:.1f} s but only "
                            f"{idle} is idle and lendable"
                        )
    return problems
