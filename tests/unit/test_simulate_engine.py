"""The simulation engine: AWS's published rules (computeReservation, weight factors, quota shares,
preemption, retries), conservation, determinism, and batchpilot's policies in the loop."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local.simulate.checks import capacity_violations, job_violations, quota_violations
from batchpilot_local.simulate.engine import AttemptOutcome, JobState, reserved_fraction
from batchpilot_local.simulate.policies import Category, category_of_reason
from batchpilot_local.simulate.run import Run, simulate
from batchpilot_local.simulate.scenario import parse_scenario
from batchpilot_local.simulate.workload import build_jobs

GPU = "ml.g5.xlarge"
P4D = "ml.p4d.24xlarge"


def fair_share(
    shares: dict[str, float], capacity: int, *, decay: int = 0, reservation: int = 0, **queue: Any
) -> dict[str, Any]:
    return {
        "name": "q",
        "service_environment": "env",
        "scheduling": "FAIR_SHARE",
        "fair_share": {
            "share_decay_seconds": decay,
            "compute_reservation": reservation,
            "share_distribution": [{"share_identifier": s, "weight_factor": w} for s, w in shares.items()],
        },
        **queue,
    }


def scenario(
    queues: list[dict[str, Any]],
    workload: dict[str, Any],
    *,
    capacity: dict[str, int] | None = None,
    hours: float = 24,
    seed: int = 1,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "name": "test",
        "seed": seed,
        "horizon_hours": hours,
        "service_environments": [{"name": "env", "capacity_limits": capacity or {"NUM_INSTANCES": 16}}],
        "job_queues": queues,
        "workload": workload,
        **extra,
    }


def run(data: dict[str, Any], seed: int | None = None) -> Run:
    parsed = parse_scenario(data)
    used = parsed.seed if seed is None else seed
    result = simulate(parsed, build_jobs(parsed, used, Path(".")), used)
    trace = result.simulation.trace
    assert capacity_violations(parsed, trace) == []
    assert job_violations(trace) == []
    assert quota_violations(parsed, trace) == []
    return result


def saturating(share: str, per_hour: float = 60, mean_s: float = 1800, **extra: Any) -> dict[str, Any]:
    return {
        "share": share,
        "arrivals_per_hour": per_hour,
        "instance_type": GPU,
        "duration_s": {"kind": "EXPONENTIAL", "mean": mean_s},
        **extra,
    }


# ------------------------------------------------------------------------------ fair share


@pytest.mark.parametrize(("active", "held_back"), [(0, 0.0), (1, 0.5), (2, 0.25), (3, 0.125)])
def test_compute_reservation_50_holds_back_the_user_guide_fractions(active: int, held_back: float) -> None:
    assert reserved_fraction(50, active) == pytest.approx(held_back)
    assert reserved_fraction(0, active) == 0.0


@pytest.mark.parametrize(("shares", "most_in_use"), [(["A"], 8), (["A", "B"], 12), (["A", "B", "C"], 14)])
def test_compute_reservation_keeps_capacity_idle_for_inactive_shares(
    shares: list[str], most_in_use: int
) -> None:
    # 16 instances, computeReservation 50: 1 active share may use 8, 2 use 12, 3 use 14 (16 x 7/8).
    weights = {s: 1.0 for s in ["A", "B", "C", "D"]}
    data = scenario(
        [fair_share(weights, 16, reservation=50)],
        {"generator": {"streams": [saturating(s) for s in shares]}},
        hours=12,
    )
    result = run(data)
    samples = result.simulation.trace.samples
    busy = samples.in_use["env"][60:]  # after the first hour: every stream has jobs waiting
    assert max(busy) == most_in_use
    assert min(busy) >= most_in_use - 1  # and the shares keep it full (a job ends, the next starts)


def test_weight_factors_1_and_0_125_converge_to_usage_1_to_8() -> None:
    # Two saturating shares, no decay, a long run: a weightFactor of 0.125 gets 8 times the
    # compute of weightFactor 1 (AWS Batch User Guide, Fair share scheduling policies).
    data = scenario(
        [fair_share({"A": 1.0, "B": 0.125}, 36)],
        {"generator": {"streams": [saturating("A", 45, 1800), saturating("B", 80, 1800)]}},
        capacity={"NUM_INSTANCES": 36},
        hours=300,
    )
    result = run(data).result
    a, b = result.shares["A"], result.shares["B"]
    assert a.entitlement == pytest.approx(1 / 9, rel=1e-3)
    assert b.entitlement == pytest.approx(8 / 9, rel=1e-3)  # alone for its first seconds
    assert b.instance_hours / a.instance_hours == pytest.approx(8.0, rel=0.05)
    assert result.allocation > 0.98


def test_share_decay_remembers_past_usage() -> None:
    # OLD has used the whole fleet for 6 hours when NEW arrives; both then saturate. Without decay
    # the two split the fleet as jobs end; with a 2-hour decay OLD's past usage counts against it
    # and NEW gets more than half for a while.
    def new_share_in_first_hour(decay: int) -> float:
        data = scenario(
            [fair_share({"OLD": 1.0, "NEW": 1.0}, 8, decay=decay)],
            {
                "generator": {
                    "streams": [saturating("OLD", 30, 900), {**saturating("NEW", 30, 900), "from_hour": 6}]
                }
            },
            capacity={"NUM_INSTANCES": 8},
            hours=8,
        )
        samples = run(data).simulation.trace.samples
        window = [i for i, t in enumerate(samples.times) if 6.25 * 3600 <= t < 7 * 3600]
        return sum(samples.shares["NEW"][i] for i in window) / (8 * len(window))

    assert new_share_in_first_hour(0) == pytest.approx(0.5, abs=0.08)
    assert new_share_in_first_hour(7200) > 0.65


def test_scheduling_priority_orders_jobs_within_a_share() -> None:
    # One instance, three jobs submitted together: the highest schedulingPriority runs first.
    jobs = [
        {
            "name": f"p{p}",
            "share": "A",
            "instance_type": GPU,
            "duration_s": 600,
            "priority": p,
            "submit_s": 10,
        }
        for p in (5, 90, 40)
    ]
    data = scenario([fair_share({"A": 1.0}, 1)], {"jobs": jobs}, capacity={"NUM_INSTANCES": 1}, hours=2)
    trace = run(data).simulation.trace
    started = sorted(trace.jobs, key=lambda j: j.first_start or 0)
    assert [j.name for j in started] == ["p90", "p40", "p5"]
    assert [round(j.first_start or 0) for j in started] == [10, 610, 1210]


def test_fifo_queue_ignores_priority() -> None:
    jobs = [
        {"name": f"p{p}", "instance_type": GPU, "duration_s": 600, "priority": p, "submit_s": 10 + i}
        for i, p in enumerate((5, 90))
    ]
    data = scenario(
        [{"name": "q", "service_environment": "env"}], {"jobs": jobs}, capacity={"NUM_INSTANCES": 1}, hours=1
    )
    trace = run(data).simulation.trace
    first = min(trace.jobs, key=lambda j: j.first_start or 0)
    assert first.job == 0  # submitted first, lower priority


@pytest.mark.parametrize(("mode", "small_waits"), [("QUEUE", True), ("SHARE", True), ("NONE", False)])
def test_head_of_line_modes(mode: str, small_waits: bool) -> None:
    # 4 instances, 3 busy until t=3600; a 4-instance job at the head, a 1-instance job behind it.
    jobs = [
        {"name": "busy", "instance_type": GPU, "instance_count": 3, "duration_s": 3600, "submit_s": 0},
        {"name": "big", "instance_type": GPU, "instance_count": 4, "duration_s": 600, "submit_s": 10},
        {"name": "small", "instance_type": GPU, "instance_count": 1, "duration_s": 600, "submit_s": 20},
    ]
    data = scenario(
        [{"name": "q", "service_environment": "env", "head_of_line": mode}],
        {"jobs": jobs},
        capacity={"NUM_INSTANCES": 4},
        hours=3,
    )
    trace = run(data).simulation.trace
    small = trace.jobs[2]
    assert small.first_start is not None
    assert (small.first_start >= 3600) is small_waits


# ------------------------------------------------------------------------ quota management


def quota_queue(shares: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "name": "q",
        "service_environment": "env",
        "scheduling": "QUOTA_MANAGEMENT",
        "quota": {"quota_shares": shares},
        **extra,
    }


def test_borrowing_uses_only_idle_lendable_capacity_and_is_taken_back() -> None:
    shares = [
        {"name": "BORROWER", "capacity_limits": {P4D: 2}, "strategy": "LEND_AND_BORROW", "borrow_limit": 200},
        {"name": "LENDER", "capacity_limits": {P4D: 4}, "strategy": "LEND"},
        {"name": "KEEPER", "capacity_limits": {P4D: 4}, "strategy": "RESERVE"},
    ]
    jobs = [
        *[
            {
                "name": f"b{i}",
                "share": "BORROWER",
                "instance_type": P4D,
                "duration_s": 7200,
                "checkpoint_interval_s": 600,
            }
            for i in range(8)
        ],
        {
            "name": "lender",
            "share": "LENDER",
            "instance_type": P4D,
            "instance_count": 3,
            "duration_s": 600,
            "submit_s": 1800,
        },
    ]
    data = scenario([quota_queue(shares)], {"jobs": jobs}, capacity={P4D: 10}, hours=6)
    result = run(data)
    trace = result.simulation.trace
    borrowed_at_start = [a.borrowed for a in trace.attempts if a.share == "BORROWER"]
    # 2 own + up to 4 borrowed (200 % of 2): the RESERVE share's idle 4 are never lent.
    assert max(borrowed_at_start) == 4
    assert trace.borrows and all(b.borrowed_total <= b.lendable_idle for b in trace.borrows)
    lender = next(j for j in trace.jobs if j.share == "LENDER")
    assert lender.first_start == pytest.approx(1800)  # reclaimed at once by cross-share preemption
    preempted = [a for a in trace.attempts if a.outcome is AttemptOutcome.PREEMPTED]
    assert len(preempted) == 3 and {a.share for a in preempted} == {"BORROWER"}
    # preempted jobs are requeued (no preemptionRetriesBeforeTermination) and all finish
    assert all(j.state is JobState.SUCCEEDED for j in trace.jobs)
    assert result.result.lost_instance_hours == pytest.approx(0.0)  # preempted right at a checkpoint


def test_reserve_and_lend_shares_never_exceed_their_limit() -> None:
    shares = [
        {"name": "R", "capacity_limits": {P4D: 3}, "strategy": "RESERVE"},
        {"name": "L", "capacity_limits": {P4D: 3}, "strategy": "LEND"},
    ]
    streams = [
        {
            "share": name,
            "arrivals_per_hour": 10,
            "instance_type": P4D,
            "duration_s": {"kind": "EXPONENTIAL", "mean": 3600},
        }
        for name in ("R", "L")
    ]
    result = run(
        scenario([quota_queue(shares)], {"generator": {"streams": streams}}, capacity={P4D: 8}, hours=24)
    )
    # no share borrows, so 2 of the 8 instances nobody owns stay idle
    assert max(result.simulation.trace.samples.in_use["env"]) == 6
    assert result.simulation.trace.borrows == []


def test_in_share_preemption_and_preemption_retries() -> None:
    shares = [{"name": "S", "capacity_limits": {P4D: 2}, "strategy": "RESERVE", "in_share_preemption": True}]
    jobs = [
        {
            "name": "low1",
            "share": "S",
            "instance_type": P4D,
            "duration_s": 7200,
            "priority": 1,
            "preemption_retries": 0,
        },
        {
            "name": "low2",
            "share": "S",
            "instance_type": P4D,
            "duration_s": 7200,
            "priority": 1,
            "submit_s": 1,
        },
        {
            "name": "high",
            "share": "S",
            "instance_type": P4D,
            "duration_s": 600,
            "priority": 9,
            "submit_s": 600,
        },
    ]
    trace = run(scenario([quota_queue(shares)], {"jobs": jobs}, capacity={P4D: 2}, hours=4)).simulation.trace
    by_name = {j.job: j for j in trace.jobs}
    high = by_name[2]
    assert high.first_start == pytest.approx(600)
    # the most recently started lower-priority job was preempted and requeued (no retry limit)
    assert by_name[1].preemptions == 1 and by_name[1].state is JobState.SUCCEEDED
    assert by_name[0].preemptions == 0


def test_preemption_retries_spent_fails_the_job_as_preemption() -> None:
    shares = [{"name": "S", "capacity_limits": {P4D: 1}, "strategy": "RESERVE", "in_share_preemption": True}]
    jobs = [
        {
            "name": "low",
            "share": "S",
            "instance_type": P4D,
            "duration_s": 7200,
            "priority": 1,
            "preemption_retries": 0,
        },
        {
            "name": "high",
            "share": "S",
            "instance_type": P4D,
            "duration_s": 600,
            "priority": 9,
            "submit_s": 600,
        },
    ]
    trace = run(scenario([quota_queue(shares)], {"jobs": jobs}, capacity={P4D: 1}, hours=4)).simulation.trace
    low = trace.jobs[0]
    assert low.state is JobState.FAILED
    assert category_of_reason(low.reason) is Category.PREEMPTION


# ------------------------------------------------------------------------- SageMaker jobs


def test_capacity_errors_use_no_retry_attempt() -> None:
    types = {
        GPU: {
            "capacity_errors": {
                "probability": 0.6,
                "time_to_capacity_s": {"kind": "UNIFORM", "low": 300, "high": 900},
            },
        }
    }
    jobs = [
        {"name": f"j{i}", "instance_type": GPU, "duration_s": 1200, "submit_s": i * 60, "retry_attempts": 1}
        for i in range(30)
    ]
    data = scenario(
        [{"name": "q", "service_environment": "env"}], {"jobs": jobs}, hours=48, instance_types=types
    )
    result = run(data)
    assert result.result.capacity_errors > 5
    assert result.result.throughput_jobs == 30  # every job ran, although each had one attempt
    outcomes = Counter(a.outcome for a in result.simulation.trace.attempts)
    assert outcomes[AttemptOutcome.CAPACITY_ERROR] == result.result.capacity_errors


def test_internal_errors_use_attempts_then_fail() -> None:
    types = {GPU: {"failures_per_hour": 2.0}}
    jobs = [
        {"name": f"j{i}", "instance_type": GPU, "duration_s": 7200, "retry_attempts": 2} for i in range(20)
    ]
    data = scenario(
        [{"name": "q", "service_environment": "env"}], {"jobs": jobs}, hours=48, instance_types=types
    )
    result = run(data)
    failed = [j for j in result.simulation.trace.jobs if j.state is JobState.FAILED]
    assert failed, "with 2 failures per hour most 2-hour jobs fail twice"
    for job in failed:
        assert category_of_reason(job.reason) is Category.INTERNAL_ERROR
        attempts = [a for a in result.simulation.trace.attempts if a.job == job.job]
        assert [a.outcome for a in attempts] == [AttemptOutcome.INTERNAL_ERROR] * 2
    assert result.result.batch_retries > 0


def test_spot_interruptions_lose_work_since_the_checkpoint_only() -> None:
    types = {GPU: {"spot_interruptions_per_hour": 1.0, "spot_restart_s": 60}}
    base = {"instance_type": GPU, "duration_s": 4 * 3600, "spot": True, "max_wait_s": 20 * 3600}
    with_ckpt = [{**base, "name": f"c{i}", "checkpoint_interval_s": 300} for i in range(10)]
    without = [{**base, "name": f"n{i}"} for i in range(10)]

    def lost(jobs: list[dict[str, Any]]) -> float:
        data = scenario(
            [{"name": "q", "service_environment": "env"}], {"jobs": jobs}, hours=30, instance_types=types
        )
        result = run(data).result
        assert result.spot_interruptions > 0
        return result.lost_instance_hours

    assert lost(with_ckpt) < lost(without) / 3


# --------------------------------------------------------------------- batchpilot in the loop


def test_capacity_policy_raises_to_demand_and_lowers_after_the_window() -> None:
    policy = {
        "defaults": {"cooldown_minutes": 3, "stabilisation_window_minutes": 10},
        "service_environments": {"env": {"job_queues": ["q"], "min": 2, "max": 24}},
    }
    jobs = [{"name": f"j{i}", "instance_type": GPU, "duration_s": 3600, "submit_s": 600} for i in range(20)]
    data = scenario(
        [{"name": "q", "service_environment": "env"}],
        {"jobs": jobs},
        capacity={"NUM_INSTANCES": 4},
        hours=4,
        batchpilot={"capacity": {"policy": policy}},
    )
    result = run(data)
    changes = [(t, v) for t, _, _, v in result.simulation.trace.limit_changes if t > 0]
    # raised at the run that sees the burst (4 + max_step 16 = 20), then lowered to min once the
    # jobs are done and the stabilisation window has passed
    assert changes[0] == (600, 20)
    assert all(b[0] - a[0] >= 180 for a, b in itertools.pairwise(changes))  # cooldown
    assert changes[-1][1] == 2  # back to min once the jobs are done and the window passed
    raise_done = next(t for t, v in changes if v == 20)
    jobs_started = [j.first_start for j in result.simulation.trace.jobs]
    assert jobs_started and all(s is not None and s <= raise_done + 1 for s in jobs_started)
    assert result.result.capacity_changes == len(changes)


def test_capacity_policy_raises_for_a_job_larger_than_the_limit() -> None:
    policy = {"service_environments": {"env": {"job_queues": ["q"], "max": 32}}}
    jobs = [{"name": "big", "instance_type": GPU, "instance_count": 24, "duration_s": 600, "submit_s": 30}]
    data = scenario(
        [{"name": "q", "service_environment": "env"}],
        {"jobs": jobs},
        capacity={"NUM_INSTANCES": 8},
        hours=1,
        batchpilot={"capacity": {"policy": policy}},
    )
    trace = run(data).simulation.trace
    assert trace.jobs[0].state is JobState.SUCCEEDED
    assert trace.jobs[0].first_start == pytest.approx(60)


def test_recovery_resubmits_from_the_checkpoint_within_budget_and_pacing() -> None:
    # 200 spot jobs run out of MaxWaitTimeInSeconds at the same moment: recovery resubmits each
    # (SPOT_INTERRUPTION budget 5), paced under the SubmitServiceJob quota of 5 per second.
    jobs = [
        {
            "name": f"s{i}",
            "instance_type": GPU,
            "duration_s": 7200,
            "spot": True,
            "max_wait_s": 3600,
            "checkpoint_interval_s": 600,
        }
        for i in range(200)
    ]
    data = scenario(
        [{"name": "q", "service_environment": "env"}],
        {"jobs": jobs},
        capacity={"NUM_INSTANCES": 200},
        hours=6,
        batchpilot={"recovery": {"budgets": {"SPOT_INTERRUPTION": 1}}},
    )
    result = run(data)
    trace = result.simulation.trace
    assert result.result.resubmissions == 200
    assert result.result.max_submits_in_one_second <= 5
    assert max(trace.submits) - min(trace.submits) >= 200 / 5 - 1
    resubmitted = [j for j in trace.jobs if j.resubmission == 1]
    assert len(resubmitted) == 200
    # resumed from the checkpoint at 3600 s: 3600 s of work left, done before the next MaxWait
    assert all(j.state is JobState.SUCCEEDED for j in resubmitted)
    assert result.result.lineages_failed == 0


def test_recovery_budget_is_respected() -> None:
    jobs = [{"name": "s", "instance_type": GPU, "duration_s": 7200, "spot": True, "max_wait_s": 1800}]
    data = scenario(
        [{"name": "q", "service_environment": "env"}],
        {"jobs": jobs},
        hours=12,
        batchpilot={"recovery": {"budgets": {"SPOT_INTERRUPTION": 2}, "backoff_base_seconds": 60}},
    )
    result = run(data)
    assert result.result.resubmissions == 2
    assert result.result.recovery.get("SKIP:BUDGET_EXHAUSTED") == 1
    assert result.result.lineages_failed == 1


def test_without_recovery_failures_stay_failed() -> None:
    jobs = [{"name": "s", "instance_type": GPU, "duration_s": 7200, "spot": True, "max_wait_s": 1800}]
    result = run(scenario([{"name": "q", "service_environment": "env"}], {"jobs": jobs}, hours=12))
    assert result.result.resubmissions == 0
    assert result.result.lineages_failed == 1


# ------------------------------------------------------------------------------ determinism


def test_same_seed_same_result_other_seed_other_result() -> None:
    data = scenario(
        [fair_share({"A": 1.0, "B": 3.0}, 16)],
        {"generator": {"streams": [saturating("A", 10), saturating("B", 10, spot_fraction=0.5)]}},
        hours=24,
        instance_types={GPU: {"spot_interruptions_per_hour": 0.2, "failures_per_hour": 0.05}},
    )
    first = json.dumps(run(data).result.to_json())
    assert json.dumps(run(data).result.to_json()) == first
    assert json.dumps(run(data, seed=2).result.to_json()) != first


def test_peak_hour_allocation_is_the_busiest_clock_hour() -> None:
    # 4 instances for 3 hours; one job holds all 4 from 1:30 to 2:30, another 2 of them from 0:00
    # to 0:30. Hours 1 and 2 are each half full, hour 0 a quarter: the busiest hour is hour 1 (the
    # first of the tie) at 50 %; the average is (1 + 4) instance-hours over 4 x 3.
    jobs = [
        {"name": "big", "submit_s": 5400, "instance_type": GPU, "instance_count": 4, "duration_s": 3600},
        {"name": "small", "submit_s": 0, "instance_type": GPU, "instance_count": 2, "duration_s": 1800},
    ]
    data = scenario(
        [{"name": "q", "service_environment": "env", "scheduling": "FIFO"}],
        {"jobs": jobs},
        capacity={"NUM_INSTANCES": 4},
        hours=3,
    )
    result = run(data).result
    assert result.allocation == pytest.approx(5 / 12)
    assert result.peak_hour == 1
    assert result.peak_hour_allocation == pytest.approx(0.5)
    hourly = run(data).simulation.hourly
    assert sorted(hourly) == [0, 1, 2]
    assert [hourly[h][0] / 3600 for h in (0, 1, 2)] == pytest.approx([1.0, 2.0, 2.0])


def elastic(share: str, keep: int, duration_s: float | dict[str, Any] = 3600, **extra: Any) -> dict[str, Any]:
    return {
        "share": share,
        "keep_runnable": keep,
        "instance_type": GPU,
        "instance_count": 1,
        "duration_s": duration_s,
        **extra,
    }


def test_elastic_demand_keeps_its_jobs_waiting_and_takes_what_frees_up() -> None:
    # 4 instances, jobs of one instance for an hour, 3 kept waiting: 4 start at once (and 4 more
    # are submitted as they do), then every hour 4 end, 4 start and 4 more are submitted.
    fifo = {"name": "q", "service_environment": "env", "scheduling": "FIFO"}
    data = scenario(
        [fifo], {"generator": {"streams": [elastic("R", 3)]}}, capacity={"NUM_INSTANCES": 4}, hours=3
    )
    result = run(data)
    samples = result.simulation.trace.samples
    # every sample between the hour marks (at a mark, jobs end and start at one instant)
    between = [i for i, t in enumerate(samples.times) if t % 3600]
    assert len(between) > 10
    assert {samples.runnable["q"][i] for i in between} == {3}
    assert {samples.in_use["env"][i] for i in between} == {4}
    assert result.result.allocation == pytest.approx(1.0)
    jobs = result.simulation.trace.jobs
    assert len(jobs) == 3 + 4 * 3  # 3 waiting + 4 started in each of the 3 hours
    assert result.result.jobs_submitted == len(jobs)


def test_elastic_jobs_are_the_same_in_runs_of_different_capacity() -> None:
    # The k-th elastic job is drawn from the seed, the stream and k: a bigger fleet runs more of
    # the same jobs; the Poisson stream beside it keeps its jobs and their ids.
    streams = [
        elastic("R", 2, {"kind": "LOGNORMAL", "median": 1800, "sigma": 0.5}, until_hour=4),
        saturating("P", 2, 1800),
    ]
    fifo = {"name": "q", "service_environment": "env", "scheduling": "FIFO", "head_of_line": "NONE"}

    def jobs(capacity: int) -> dict[str, tuple[float, int]]:
        data = scenario(
            [fifo], {"generator": {"streams": streams}}, capacity={"NUM_INSTANCES": capacity}, hours=6
        )
        traced = run(data).simulation.trace.jobs
        return {j.name: (j.duration_s, j.instances) for j in traced}

    small, large = jobs(2), jobs(8)
    elastic_small = {n for n in small if n.startswith("R-")}
    elastic_large = {n for n in large if n.startswith("R-")}
    assert elastic_small and elastic_small < elastic_large  # more of them where capacity frees up
    assert {n: small[n] for n in elastic_small} == {n: large[n] for n in elastic_small}
    poisson = {n for n in small if n.startswith("P-")}
    assert poisson and poisson == {n for n in large if n.startswith("P-")}
    assert {n: small[n] for n in poisson} == {n: large[n] for n in poisson}
