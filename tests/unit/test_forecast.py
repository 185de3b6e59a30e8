"""Start-time forecasts: the simulator seeded with the present (running and waiting jobs), run
times learned from finished jobs with their fallbacks, arrivals drawn from recent submissions, and
the accuracy harness's small version against simulated histories (behaviour, not timing)."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from batchpilot_local.forecast import (
    FALLBACK_RUN_S,
    MIN_HISTORY,
    FinishedRun,
    Fleet,
    ForecastJob,
    QueueModel,
    RunTimes,
    Submission,
    fleet_scenario,
    forecast,
)
from batchpilot_local.forecast_accuracy import evaluate, summarise
from batchpilot_local.simulate.engine import JobState, PresentJob, Simulation
from batchpilot_local.simulate.scenario import (
    FairSharePolicy,
    QuotaPolicy,
    QuotaShareSpec,
    SchedulingKind,
    ShareWeight,
    SharingStrategy,
)
from batchpilot_local.simulate.workload import JobSpec

NOW = datetime(2026, 11, 20, 22, tzinfo=UTC)
P5 = "ml.p5.48xlarge"
SIMULATE = Path(__file__).resolve().parents[2] / "events" / "simulate"


def job(
    arn: str,
    *,
    running: bool,
    n: int,
    ago_min: float,
    queue: str = "q",
    share: str | None = None,
    priority: int = 0,
    kind: str = P5,
) -> ForecastJob:
    return ForecastJob(arn, queue, share, kind, n, priority, NOW - timedelta(minutes=ago_min), running)


def fixed(seconds: float, queue: str = "q", share: str | None = None, kind: str = P5) -> RunTimes:
    """History where every run took ``seconds`` (enough of them for the narrowest group)."""
    return RunTimes([FinishedRun(queue, share, kind, seconds)] * MIN_HISTORY)


def test_fifo_waiting_jobs_start_as_running_ones_end() -> None:
    fleet = Fleet({"env": {"NUM_INSTANCES": 8}}, [QueueModel("q", "env")])
    jobs = [
        job("r1", running=True, n=4, ago_min=30),
        job("r2", running=True, n=4, ago_min=10),
        job("w1", running=False, n=4, ago_min=5),
        job("w2", running=False, n=8, ago_min=4),
    ]
    found = forecast(fleet, jobs, fixed(3600), NOW, samples=3)
    assert set(found) == {"w1", "w2"}
    # r1 has 30 of its 60 minutes left: w1 takes its place; w2 needs the whole environment, free
    # once r2 (50 minutes left) and w1 (60 minutes from 30) have ended.
    assert (found["w1"].median_s, found["w1"].high_s) == (1800.0, 1800.0)
    assert (found["w2"].low_s, found["w2"].median_s) == (5400.0, 5400.0)
    assert found["w1"].at(NOW, found["w1"].median_s) == NOW + timedelta(minutes=30)
    assert found["w1"].basis == f"share and instance type (n={MIN_HISTORY})"


def test_a_lower_weight_share_goes_first_in_fair_share() -> None:
    policy = FairSharePolicy(
        share_distribution=(
            ShareWeight(share_identifier="HIGH", weight_factor=1),
            ShareWeight(share_identifier="LOW", weight_factor=5),
        )
    )
    fleet = Fleet(
        {"env": {"NUM_INSTANCES": 4}},
        [QueueModel("q", "env", scheduling=SchedulingKind.FAIR_SHARE, fair_share=policy)],
    )
    jobs = [
        job("r-high", running=True, n=2, ago_min=50, share="HIGH"),
        job("r-low", running=True, n=2, ago_min=20, share="LOW"),
        job("w-low", running=False, n=2, ago_min=60, share="LOW"),  # waiting longer
        job("w-high", running=False, n=2, ago_min=1, share="HIGH"),
    ]
    runs = RunTimes([FinishedRun("q", s, P5, 3600) for s in ("HIGH", "LOW") for _ in range(MIN_HISTORY)])
    found = forecast(fleet, jobs, runs, NOW, samples=2)
    # r-high ends first (10 minutes left): HIGH (weight 1) takes the instances, though LOW's job
    # waited longer; LOW's starts when r-low ends.
    assert found["w-high"].median_s == 600.0
    assert found["w-low"].median_s == 2400.0


def test_a_quota_share_within_its_own_limit_starts_while_another_waits() -> None:
    quota = QuotaPolicy(
        quota_shares=(
            QuotaShareSpec(name="a", capacity_limits={P5: 4}, strategy=SharingStrategy.RESERVE),
            QuotaShareSpec(name="b", capacity_limits={P5: 4}, strategy=SharingStrategy.RESERVE),
        )
    )
    fleet = Fleet(
        {"env": {P5: 8}}, [QueueModel("q", "env", scheduling=SchedulingKind.QUOTA_MANAGEMENT, quota=quota)]
    )
    jobs = [
        job("r-a", running=True, n=4, ago_min=10, share="a"),
        job("w-a", running=False, n=2, ago_min=30, share="a"),
        job("w-b", running=False, n=2, ago_min=5, share="b"),
    ]
    runs = RunTimes([FinishedRun("q", s, P5, 3600) for s in ("a", "b") for _ in range(MIN_HISTORY)])
    found = forecast(fleet, jobs, runs, NOW, samples=2)
    assert found["w-b"].median_s == 0.0  # b's own quota is idle
    assert found["w-a"].median_s == 3000.0  # a's is full until r-a ends


def test_later_arrivals_of_higher_priority_go_first() -> None:
    policy = FairSharePolicy(share_distribution=(ShareWeight(share_identifier="s", weight_factor=1),))
    fleet = Fleet(
        {"env": {"NUM_INSTANCES": 1}},
        [QueueModel("q", "env", scheduling=SchedulingKind.FAIR_SHARE, fair_share=policy)],
    )
    jobs = [
        job("r", running=True, n=1, ago_min=0, share="s"),
        job("w", running=False, n=1, ago_min=1, share="s"),
    ]
    busy = [Submission("q", "s", P5, 1, 99, NOW - timedelta(minutes=m)) for m in range(0, 1440, 10)]
    alone = forecast(fleet, jobs, fixed(1800, share="s"), NOW, samples=5)
    crowded = forecast(fleet, jobs, fixed(1800, share="s"), NOW, samples=5, submissions=busy)
    assert alone["w"].median_s == 1800.0
    # A job of priority 99 arrives every 10 minutes: each goes before w (priority 0).
    assert crowded["w"].median_s > 4 * 3600


def test_run_times_widen_to_the_fleet_then_fall_back() -> None:
    few = RunTimes(
        [FinishedRun("q", "s", P5, 100.0)] * (MIN_HISTORY - 1) + [FinishedRun("q", "t", P5, 300.0)]
    )
    values, basis = few.basis("q", "s", P5)
    assert basis == f"job queue (n={MIN_HISTORY})"
    assert sorted(values) == [100.0] * (MIN_HISTORY - 1) + [300.0]
    values, basis = few.basis("other", None, P5)
    assert basis == f"whole fleet (n={MIN_HISTORY})"
    values, basis = RunTimes().basis("q", "s", P5)
    assert values == ()
    assert basis == f"no finished jobs: assumed median {FALLBACK_RUN_S / 3600:g} h"


def test_a_running_job_has_left_what_runs_longer_than_it_has_run() -> None:
    rng = random.Random(0)
    values = (600.0, 1200.0, 3600.0)
    drawn = {RunTimes.draw(values, rng, elapsed=1000.0) for _ in range(50)}
    assert drawn == {200.0, 2600.0}
    past = RunTimes.draw(values, rng, elapsed=7200.0)
    assert 60.0 <= past <= 7200.0  # past every finished run: up to as long again
    assert RunTimes.draw((), rng, elapsed=0.0) > 0


def test_a_queue_the_fleet_lacks_gets_no_forecast() -> None:
    fleet = Fleet({"env": {"NUM_INSTANCES": 2}}, [QueueModel("q", "env")])
    jobs = [job("w", running=False, n=1, ago_min=1), job("x", running=False, n=1, ago_min=1, queue="unread")]
    found = forecast(fleet, jobs, fixed(60), NOW, samples=1)
    assert set(found) == {"w"}


def test_a_job_that_cannot_start_within_the_horizon_is_beyond_it() -> None:
    fleet = Fleet({"env": {"NUM_INSTANCES": 2}}, [QueueModel("q", "env")])
    found = forecast(
        fleet, [job("big", running=False, n=4, ago_min=1)], fixed(60), NOW, samples=2, horizon_s=3600
    )
    assert math.isinf(found["big"].median_s)
    assert found["big"].at(NOW, found["big"].median_s) is None


def test_the_engine_seeded_with_the_present_keeps_places_and_capacity() -> None:
    scenario = fleet_scenario(Fleet({"env": {"NUM_INSTANCES": 2}}, [QueueModel("q", "env")]), 86_400.0, NOW)
    spec = {"queue": "q", "share": None, "submit_s": 0.0, "instance_type": P5, "instance_count": 2}
    present = [
        PresentJob(JobSpec(name="late", duration_s=100.0, **spec), since_s=-60.0),
        PresentJob(JobSpec(name="early", duration_s=100.0, **spec), since_s=-600.0),
        PresentJob(JobSpec(name="running", duration_s=50.0, **spec), since_s=-3000.0, running=True),
    ]
    sim = Simulation(scenario, (), 0, present=present)
    sim.run()
    traces = {t.name: t for t in sim.trace.jobs}
    assert traces["running"].first_start == -3000.0
    assert (traces["early"].first_start, traces["late"].first_start) == (50.0, 150.0)
    assert {t.state for t in traces.values()} == {JobState.SUCCEEDED}


def test_forecasts_against_simulated_histories_hold_most_starts_in_range() -> None:
    """The accuracy benchmark's small version (benchmarks/bench_forecast.py): a FIFO history."""
    scored, unscored = evaluate(SIMULATE / "article-fifo.yaml", moments=4, samples=10, horizon_hours=72)
    score = summarise(scored, unscored)
    assert score.forecasts >= 20
    assert score.scenarios == ["article-fifo"]
    # FIFO: later arrivals go behind, so the present decides; the forecast is close and its range
    # holds most actual starts (the full benchmark: RESULTS.md).
    assert score.ratio < 0.5
    assert score.coverage >= 0.5
