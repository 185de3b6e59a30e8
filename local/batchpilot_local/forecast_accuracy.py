"""How good the start-time forecasts are: replay a simulated history, ask for a forecast at many
moments, compare with the start the history actually had.

A history is one run of a scenario (``batchpilot simulate``'s engine, every incident it models:
arrivals after the moment, startup times, failures, preemptions, elastic demand). At each moment
``t`` the present is rebuilt from the run's trace as the ledger would hold it: the jobs dispatched
at ``t`` (running, with how long they have run), the jobs submitted and not yet dispatched
(waiting, in their places), the capacity limits in force and the finished attempts' run times
(the history the forecast learns from). :func:`batchpilot_local.forecast.forecast` then forecasts
every waiting job, and each forecast is scored against the job's next dispatch after ``t`` in the
run: absolute error of the median, and whether the start fell within the forecast's range
[p10, p90]. Waiting jobs the run never dispatched again are counted, not scored.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from batchpilot_local.forecast import (
    FinishedRun,
    Fleet,
    ForecastJob,
    QueueModel,
    RunTimes,
    Submission,
    forecast,
)
from batchpilot_local.simulate.run import simulate
from batchpilot_local.simulate.scenario import load_scenario
from batchpilot_local.simulate.workload import build_jobs

__all__ = ["Score", "Scored", "evaluate", "summarise"]


@dataclass(frozen=True, slots=True)
class Scored:
    """One waiting job's forecast at one moment against what happened (seconds from the moment).

    Attributes:
        scenario, mode: the scenario's name and its job queue's scheduling (FIFO, ...).
        share: the job's share (``""``: none).
        actual_s: its next dispatch; median_s, low_s, high_s: the forecast.
    """

    scenario: str
    mode: str
    actual_s: float
    median_s: float
    low_s: float
    high_s: float
    share: str = ""

    @property
    def error_s(self) -> float:
        """|median - actual| (``inf`` when the forecast saw no start within its horizon)."""
        return abs(self.median_s - self.actual_s)

    @property
    def inside(self) -> bool:
        """The actual start fell within [p10, p90]."""
        return self.low_s <= self.actual_s <= self.high_s


@dataclass
class Score:
    """The scores of one scheduling mode (or of one scenario).

    Attributes:
        forecasts: scored forecasts; unscored: waiting jobs never dispatched again in the run.
        median_error_s, p90_error_s: of the absolute errors (seconds).
        median_wait_s: of the actual waits (seconds); ratio: median_error_s / median_wait_s.
        coverage: share of actual starts within the forecast's range.
    """

    forecasts: int = 0
    unscored: int = 0
    median_error_s: float = math.nan
    p90_error_s: float = math.nan
    median_wait_s: float = math.nan
    ratio: float = math.nan
    coverage: float = math.nan
    scenarios: list[str] = field(default_factory=list)


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def summarise(scored: Sequence[Scored], unscored: int = 0) -> Score:
    """The :class:`Score` of ``scored`` (NaNs when there is none)."""
    score = Score(forecasts=len(scored), unscored=unscored, scenarios=sorted({s.scenario for s in scored}))
    if not scored:
        return score
    errors = [s.error_s for s in scored]
    waits = [s.actual_s for s in scored]
    score.median_error_s = _quantile(errors, 0.5)
    score.p90_error_s = _quantile(errors, 0.9)
    score.median_wait_s = statistics.median(waits)
    score.ratio = score.median_error_s / score.median_wait_s if score.median_wait_s > 0 else math.inf
    score.coverage = sum(1 for s in scored if s.inside) / len(scored)
    return score


def evaluate(
    path: str | Path,
    *,
    moments: int = 12,
    samples: int = 20,
    max_waiting: int | None = None,
    horizon_hours: float | None = None,
) -> tuple[list[Scored], int]:
    """Score forecasts over one run of the scenario at ``path``.

    Args:
        moments: forecast moments, evenly spaced over the run's middle (from 10 % to 90 % of the
            horizon: the fleet has history and work still arrives).
        samples: forecast runs per moment.
        max_waiting: score at most this many waiting jobs per moment (the oldest), all when None.
        horizon_hours: shorten the scenario's horizon (its own when None).

    Returns:
        The scored forecasts and the number of waiting jobs left unscored.

    Raises:
        batchpilot_local.simulate.scenario.ScenarioError: the scenario cannot be simulated.
    """
    scenario = load_scenario(path)
    if horizon_hours is not None:
        scenario = scenario.model_copy(update={"horizon_hours": horizon_hours})
    run = simulate(scenario, build_jobs(scenario, scenario.seed, Path(path).resolve().parent), scenario.seed)
    sim = run.simulation
    trace = sim.trace
    queues = [
        QueueModel(
            q.name,
            q.service_environment,
            q.priority,
            q.scheduling,
            q.fair_share,
            q.quota,
            q.head_of_line,
        )
        for q in scenario.job_queues
    ]
    modes = {q.name: q.scheduling.value for q in scenario.job_queues}
    attempts = defaultdict(list)
    for attempt in trace.attempts:
        attempts[attempt.job].append(attempt)
    jobs = {job.job: job for job in trace.jobs}
    horizon = scenario.horizon_s
    scored: list[Scored] = []
    unscored = 0
    for k in range(moments):
        t = horizon * (0.1 + 0.8 * k / max(1, moments - 1))
        limits: dict[str, dict[str, int]] = {
            e.name: dict(e.capacity_limits) for e in scenario.service_environments
        }
        for at, env, unit, limit in trace.limit_changes:
            if at <= t:
                limits[env][unit] = limit
        history = [
            FinishedRun(a.queue, None if a.share == "-" else a.share, a.instance_type, a.end - a.start)
            for a in trace.attempts
            if a.end <= t
        ]
        submissions = [
            Submission(
                job.queue,
                None if job.share == "-" else job.share,
                job.instance_type,
                job.instances,
                job.priority,
                scenario.start + timedelta(seconds=job.submit),
            )
            for job in jobs.values()
            if job.submit <= t
        ]
        present: list[ForecastJob] = []
        actual: dict[str, float] = {}
        now = scenario.start + timedelta(seconds=t)
        for job in jobs.values():
            if job.submit > t or (job.end is not None and job.end <= t):
                continue
            mine = attempts.get(job.job, [])
            running = next((a for a in mine if a.start <= t < a.end), None)
            arn = f"job-{job.job}"
            since = running.start if running is not None else job.submit
            present.append(
                ForecastJob(
                    arn=arn,
                    queue=job.queue,
                    share=None if job.share == "-" else job.share,
                    instance_type=job.instance_type,
                    instances=job.instances,
                    priority=job.priority,
                    since=scenario.start + timedelta(seconds=since),
                    running=running is not None,
                )
            )
            if running is None:
                later = [a.start for a in mine if a.start > t]
                if later:
                    actual[arn] = min(later) - t
                else:
                    unscored += 1
        if max_waiting is not None:
            waiting = sorted((j for j in present if not j.running and j.arn in actual), key=lambda j: j.since)
            keep = {j.arn for j in waiting[:max_waiting]}
            actual = {arn: value for arn, value in actual.items() if arn in keep}
        found = forecast(
            Fleet(limits, queues),
            present,
            RunTimes(history),
            now,
            samples=samples,
            seed=k,
            submissions=submissions,
        )
        by_arn = {j.arn: j for j in present}
        for arn, value in actual.items():
            f = found.get(arn)
            if f is None:
                continue
            queued = by_arn[arn]
            scored.append(
                Scored(
                    scenario.name,
                    modes[queued.queue],
                    value,
                    f.median_s,
                    f.low_s,
                    f.high_s,
                    queued.share or "",
                )
            )
    return scored, unscored
