"""Property test: on random small workloads and fleets (FIFO, fair share, quota management; every
head-of-line mode; spot, failures, capacity errors, preemption; batchpilot on or off), the
simulation keeps its invariants (recomputed from the trace) and its figures stay consistent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from batchpilot_local.simulate.checks import capacity_violations, job_violations, quota_violations
from batchpilot_local.simulate.run import simulate
from batchpilot_local.simulate.scenario import parse_scenario
from batchpilot_local.simulate.workload import build_jobs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

KIND = "ml.p4d.24xlarge"
SHARES = ("S0", "S1", "S2")


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    scheduling = draw(st.sampled_from(["FIFO", "FAIR_SHARE", "QUOTA_MANAGEMENT"]))
    capacity = draw(st.integers(2, 8))
    queue: dict[str, Any] = {
        "name": "q",
        "service_environment": "env",
        "scheduling": scheduling,
        "head_of_line": draw(st.sampled_from(["QUEUE", "SHARE", "NONE"])),
    }
    if scheduling == "FAIR_SHARE":
        queue["fair_share"] = {
            "share_decay_seconds": draw(st.sampled_from([0, 600, 3600])),
            "compute_reservation": draw(st.sampled_from([0, 25, 50])),
            "share_distribution": [
                {"share_identifier": s, "weight_factor": draw(st.sampled_from([0.125, 1.0, 5.0]))}
                for s in SHARES
            ],
        }
    largest = capacity
    if scheduling == "QUOTA_MANAGEMENT":
        quota = []
        for share in SHARES:
            limit = draw(st.integers(1, capacity))
            strategy = draw(st.sampled_from(["RESERVE", "LEND", "LEND_AND_BORROW"]))
            entry: dict[str, Any] = {
                "name": share,
                "capacity_limits": {KIND: limit},
                "strategy": strategy,
                "in_share_preemption": draw(st.booleans()),
            }
            if strategy == "LEND_AND_BORROW":
                entry["borrow_limit"] = draw(st.sampled_from([-1, 0, 100, 200]))
            quota.append(entry)
        queue["quota"] = {"quota_shares": quota}
        largest = min(q["capacity_limits"][KIND] for q in quota)  # every share can hold every job
    unit = KIND if scheduling == "QUOTA_MANAGEMENT" else "NUM_INSTANCES"
    jobs = [
        {
            "name": f"j{i}",
            "share": draw(st.sampled_from(SHARES)),
            "submit_s": draw(st.floats(0, 6 * 3600)),
            "instance_type": KIND,
            "instance_count": draw(st.integers(1, largest)),
            "duration_s": draw(st.floats(60, 4 * 3600)),
            "priority": draw(st.integers(0, 9)),
            "checkpoint_interval_s": draw(st.sampled_from([None, 300.0, 1800.0])),
            "spot": draw(st.booleans()),
            "retry_attempts": draw(st.integers(1, 3)),
            "preemption_retries": draw(st.sampled_from([None, 0, 1])),
        }
        for i in range(draw(st.integers(1, 14)))
    ]
    data: dict[str, Any] = {
        "name": "prop",
        "seed": draw(st.integers(0, 1000)),
        "horizon_hours": 10,
        "instance_types": {
            KIND: {
                "spot_interruptions_per_hour": draw(st.sampled_from([0.0, 0.5])),
                "failures_per_hour": draw(st.sampled_from([0.0, 0.2])),
                "capacity_errors": {
                    "probability": draw(st.sampled_from([0.0, 0.3])),
                    "time_to_capacity_s": 600,
                },
            }
        },
        "service_environments": [{"name": "env", "capacity_limits": {unit: capacity}}],
        "job_queues": [queue],
        "workload": {"jobs": jobs},
    }
    if draw(st.booleans()):
        # elastic demand beside the explicit jobs: a stream that keeps 1-3 jobs waiting
        data["workload"]["generator"] = {
            "streams": [
                {
                    "share": draw(st.sampled_from(SHARES)),
                    "keep_runnable": draw(st.integers(1, 3)),
                    "from_hour": draw(st.sampled_from([0.0, 2.0])),
                    "until_hour": draw(st.sampled_from([4.0, 10.0])),
                    "instance_type": KIND,
                    "instance_count": draw(st.integers(1, largest)),
                    "duration_s": {"kind": "UNIFORM", "low": 300, "high": 3 * 3600},
                    "checkpoint_interval_s": 900,
                }
            ]
        }
    batchpilot: dict[str, Any] = {}
    if draw(st.booleans()):
        batchpilot["recovery"] = {}
    if draw(st.booleans()):
        bounds: dict[str, Any] = (
            {"units": {KIND: {"min": 1, "max": capacity + 4}}}
            if unit == KIND
            else {"min": 1, "max": capacity + 4}
        )
        batchpilot["capacity"] = {
            "policy": {"service_environments": {"env": {"job_queues": ["q"], **bounds}}}
        }
    data["batchpilot"] = batchpilot
    return data


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_random_workloads_keep_every_invariant(data: dict[str, Any]) -> None:
    scenario = parse_scenario(data)
    run = simulate(scenario, build_jobs(scenario, scenario.seed, Path(".")), scenario.seed)
    trace = run.simulation.trace
    assert capacity_violations(scenario, trace) == []
    assert job_violations(trace) == []
    assert quota_violations(scenario, trace) == []
    result = run.result
    assert 0.0 <= result.allocation <= result.peak_hour_allocation + 1e-9 <= 1.0 + 2e-9
    assert result.throughput_jobs <= result.jobs_submitted
    assert result.max_submits_in_one_second <= 5
    assert (
        abs(
            sum(s.share_of_usage for s in result.shares.values())
            - (1.0 if result.in_use_instance_hours else 0.0)
        )
        < 1e-6
    )
    in_use = sum(a.instances * (a.end - a.start) for a in trace.attempts) / 3600.0
    assert abs(in_use - result.in_use_instance_hours) < 1e-6
