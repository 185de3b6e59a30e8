"""From a finished :class:`~batchpilot_local.simulate.engine.Simulation` to the figures people read.

Definitions (every figure is over the horizon; instance counts are summed over capacity units):

- ``allocation``: instance-time in use / reserved instance-time, where *in use* is what
  ``GetJobQueueSnapshot`` reports as capacity usage (dispatched jobs: SCHEDULED, STARTING, RUNNING,
  spot jobs waiting to resume included) and *reserved* is the service environments' capacity
  limits (``maxCapacity``) integrated over time: in use / the capacity limit (``InstancesInUse``
  over ``CapacityLimit``), as a time-weighted fraction. It is *allocation* (instances given to
  jobs), not GPU activity: what a training job does with its GPUs is not simulated.
- ``peak_hour_allocation``: the same over the busiest clock hour of the run (hour 0 starts at the
  scenario's start; ``peak_hour`` is that hour's index), the fleet's environments summed.
- ``allocation_while_jobs_wait``: the same as ``allocation``, each environment counted only over
  the time a job of its queues was RUNNABLE: capacity left idle while work waited for it.
- ``throughput_jobs``: jobs that SUCCEEDED; ``instance_hours_completed`` / ``gpu_hours_completed``:
  their training time x instances (x accelerators per instance).
- ``lost_instance_hours``: batchpilot's ``LostInstanceHours`` summed over every interruption,
  preemption and failure: instances x (stop - max(newest checkpoint, attempt start)) / 3600.
- per share: ``instance_hours`` in use, ``share_of_usage`` (its part of all in-use instance-time),
  ``entitlement`` (fair share: 1/weightFactor over the sum of the active shares' 1/weightFactor,
  averaged over the time the share was active; quota management: the share's own limits over the
  environment's; FIFO: none), queue wait percentiles (submission to first dispatch; jobs never
  dispatched count with the time they had waited at the horizon, a lower bound), preemptions,
  jobs completed.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from batchpilot_local.simulate.engine import APPROXIMATIONS, JobState, Simulation
from batchpilot_local.simulate.workload import HistoryNotes

__all__ = ["EnvironmentResult", "ShareResult", "SimulationResult", "percentile", "summarise"]


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) with linear interpolation between ranks; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class ShareResult:
    """One share identifier, quota share or (FIFO) team label.

    Attributes:
        instance_hours: instance-hours in use by its jobs.
        share_of_usage: its fraction of all in-use instance-hours (0-1).
        entitlement: the fraction it is entitled to (0-1), None on a FIFO queue.
        wait_p50_s / wait_p95_s: queue wait percentiles (seconds), None without jobs.
        preemptions: times its jobs were preempted.
        jobs_completed / jobs_submitted / jobs_failed: counts (resubmissions are jobs of their own).
    """

    instance_hours: float
    share_of_usage: float
    entitlement: float | None
    wait_p50_s: float | None
    wait_p95_s: float | None
    preemptions: int
    jobs_completed: int
    jobs_submitted: int
    jobs_failed: int


@dataclass(frozen=True)
class EnvironmentResult:
    """One service environment.

    Attributes:
        allocation: in use / capacity limit, time-weighted (0-1).
        reserved_instance_hours / in_use_instance_hours: the two integrals.
        final_limits: capacity unit → ``maxCapacity`` at the horizon.
        limit_changes: how many times batchpilot changed a limit.
    """

    allocation: float
    reserved_instance_hours: float
    in_use_instance_hours: float
    final_limits: dict[str, int]
    limit_changes: int


@dataclass(frozen=True)
class SimulationResult:
    """Everything ``batchpilot simulate`` prints (see the module docstring for the definitions).

    ``to_json`` is the ``--format json`` document; the other attributes are its keys.
    """

    scenario: str
    seed: int
    horizon_hours: float
    start: str
    allocation: float
    peak_hour_allocation: float
    peak_hour: int | None
    allocation_while_jobs_wait: float | None
    throughput_jobs: int
    jobs_submitted: int
    jobs_failed: int
    lineages_failed: int
    instance_hours_completed: float
    gpu_hours_completed: float
    lost_instance_hours: float
    preemptions: int
    capacity_errors: int
    spot_interruptions: int
    internal_errors: int
    batch_retries: int
    resubmissions: int
    max_submits_in_one_second: int
    capacity_changes: int
    reserved_instance_hours: float
    in_use_instance_hours: float
    head_of_line: dict[str, str]
    shares: dict[str, ShareResult]
    environments: dict[str, EnvironmentResult]
    recovery: dict[str, int]
    approximations: dict[str, str]
    history: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON data (floats rounded to 4 decimals)."""
        data: dict[str, Any] = _round(asdict(self))
        return data


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_round(v) for v in value]
    return value


def _max_per_second(times: list[float]) -> int:
    """The most submits in any window of one second (two pointers over the sorted times)."""
    ordered = sorted(times)
    best = 0
    low = 0
    for high, t in enumerate(ordered):
        while t - ordered[low] >= 1.0:
            low += 1
        best = max(best, high - low + 1)
    return best


def _entitlements(sim: Simulation) -> dict[str, float]:
    out: dict[str, float] = {}
    for share, seconds in sim.fair_share_seconds.items():
        if share.startswith("queue:") or seconds <= 0:
            continue
        out[share] = sim.entitled_seconds[share] / seconds
    for queue in sim.scenario.job_queues:
        if queue.quota is None:
            continue
        env = sim.scenario.environment(queue.service_environment)
        capacity = sum(env.capacity_limits.values())
        for quota_share in queue.quota.quota_shares:
            if capacity > 0:
                out[quota_share.name] = sum(quota_share.capacity_limits.values()) / capacity
    return out


def summarise(sim: Simulation, history: HistoryNotes | None = None) -> SimulationResult:
    """The result of a finished simulation."""
    trace = sim.trace
    scenario = sim.scenario
    horizon = sim.horizon
    accel = {kind: scenario.accelerators(kind) or 0 for kind in {j.instance_type for j in trace.jobs}}
    completed = [j for j in trace.jobs if j.state is JobState.SUCCEEDED]
    by_share: dict[str, list[Any]] = defaultdict(list)
    for job in trace.jobs:
        by_share[job.share].append(job)
    total_share_s = sum(sim.share_seconds.values())
    entitlements = _entitlements(sim)
    shares: dict[str, ShareResult] = {}
    for share in sorted(set(by_share) | set(sim.share_seconds)):
        jobs = by_share.get(share, [])
        waits = [(j.first_start if j.first_start is not None else horizon) - j.submit for j in jobs]
        seconds = sim.share_seconds.get(share, 0.0)
        entitled = entitlements.get(share)  # None for FIFO labels: a FIFO queue entitles nobody
        shares[share] = ShareResult(
            instance_hours=seconds / 3600.0,
            share_of_usage=seconds / total_share_s if total_share_s > 0 else 0.0,
            entitlement=entitled,
            wait_p50_s=percentile(waits, 50),
            wait_p95_s=percentile(waits, 95),
            preemptions=sum(j.preemptions for j in jobs),
            jobs_completed=sum(1 for j in jobs if j.state is JobState.SUCCEEDED),
            jobs_submitted=len(jobs),
            jobs_failed=sum(1 for j in jobs if j.state is JobState.FAILED),
        )
    environments: dict[str, EnvironmentResult] = {}
    reserved = in_use = reserved_wait = in_use_wait = 0.0
    limit_changes = Counter(name for t, name, _, _ in trace.limit_changes if t > 0)
    for name, totals in sim.env_totals.items():  # instance-seconds
        reserved += totals["limit_s"]
        in_use += totals["in_use_s"]
        reserved_wait += totals["limit_waiting_s"]
        in_use_wait += totals["in_use_waiting_s"]
        final: dict[str, int] = {}
        for _, env_name, unit, value in trace.limit_changes:
            if env_name == name:
                final[unit] = value
        environments[name] = EnvironmentResult(
            allocation=totals["in_use_s"] / totals["limit_s"] if totals["limit_s"] > 0 else 0.0,
            reserved_instance_hours=totals["limit_s"] / 3600.0,
            in_use_instance_hours=totals["in_use_s"] / 3600.0,
            final_limits=final,
            limit_changes=limit_changes[name],
        )
    last_by_lineage: dict[int, Any] = {}
    for job in trace.jobs:
        if (
            job.lineage not in last_by_lineage
            or job.resubmission >= last_by_lineage[job.lineage].resubmission
        ):
            last_by_lineage[job.lineage] = job
    peak_hour, peak_value = _peak_hour(sim.hourly)
    used = sim.uses()
    notes = [
        "jobs still RUNNABLE at the horizon count in the wait percentiles with the time they had waited "
        "then (a lower bound)",
    ]
    return SimulationResult(
        scenario=scenario.name,
        seed=sim.seed,
        horizon_hours=scenario.horizon_hours,
        start=scenario.start.isoformat().replace("+00:00", "Z"),
        allocation=in_use / reserved if reserved > 0 else 0.0,
        peak_hour_allocation=peak_value,
        peak_hour=peak_hour,
        allocation_while_jobs_wait=in_use_wait / reserved_wait if reserved_wait > 0 else None,
        throughput_jobs=len(completed),
        jobs_submitted=len(trace.jobs),
        jobs_failed=sum(1 for j in trace.jobs if j.state is JobState.FAILED),
        lineages_failed=sum(1 for j in last_by_lineage.values() if j.state is JobState.FAILED),
        instance_hours_completed=sum(j.instances * j.duration_s for j in completed) / 3600.0,
        gpu_hours_completed=sum(j.instances * j.duration_s * accel[j.instance_type] for j in completed)
        / 3600.0,
        lost_instance_hours=sim.lost_instance_hours,
        preemptions=sim.counts["preemptions"],
        capacity_errors=sim.counts["capacity_errors"],
        spot_interruptions=sim.counts["spot_interruptions"],
        internal_errors=sim.counts["internal_errors"],
        batch_retries=sim.counts["batch_retries"],
        resubmissions=trace.recovery.get("RESUBMITTED", 0),
        max_submits_in_one_second=_max_per_second(trace.submits),
        capacity_changes=sim.counts["capacity_changes"],
        reserved_instance_hours=reserved / 3600.0,
        in_use_instance_hours=in_use / 3600.0,
        head_of_line={q.name: q.head_of_line.value for q in scenario.job_queues},
        shares=shares,
        environments=environments,
        recovery=dict(sorted(trace.recovery.items())),
        approximations={name: APPROXIMATIONS[name] for name in used},
        history=None if history is None else _history(history),
        notes=notes,
    )


def _peak_hour(hourly: dict[int, list[float]]) -> tuple[int | None, float]:
    """The busiest clock hour (index, in use / capacity limit over it); (None, 0.0) when no hour
    had any capacity. A ratio tie goes to the earliest hour."""
    best: tuple[int | None, float] = (None, 0.0)
    for hour in sorted(hourly):
        in_use_s, limit_s = hourly[hour]
        if limit_s <= 0:
            continue
        ratio = in_use_s / limit_s
        if best[0] is None or ratio > best[1]:
            best = (hour, ratio)
    return best


def _history(notes: HistoryNotes) -> dict[str, Any]:
    data = asdict(notes)
    data["start"] = notes.start.isoformat() if notes.start is not None else None
    return data
