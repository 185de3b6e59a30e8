"""batchpilot simulate: 10,000 jobs over 7 simulated days, goal at most 10 s on one core.

The workload: three fair-share teams (weights 1 / 3 / 5, decay 3600 s, priorities within shares)
on a service environment batchpilot sizes between 32 and 128 instances (about 80 instances of
offered load), with spot interruptions, internal
failures and capacity errors, batchpilot's capacity policy every simulated minute (10,080 runs)
and its recovery function resubmitting what Batch gave up on. Each repetition builds the workload,
simulates it and computes the result (what ``batchpilot simulate`` does, minus reading the file
and printing). The median of ``--runs`` repetitions is reported, never asserted.

    .venv/bin/python benchmarks/bench_simulate.py [--runs 3] [--jobs 10000] [--results]

The last line printed is one JSON object with the numbers; ``--results`` also writes the
``simulate`` section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import ROOT, machine, machine_markdown, now, pin_to_one_core, write_section

sys.path[0:0] = [str(ROOT / "layers" / "batchpilot"), str(ROOT / "local")]

from batchpilot_local.simulate.results import summarise  # noqa: E402
from batchpilot_local.simulate.run import simulate  # noqa: E402
from batchpilot_local.simulate.scenario import parse_scenario  # noqa: E402
from batchpilot_local.simulate.workload import build_jobs  # noqa: E402

GOAL_S = 10.0
KIND = "ml.p5.48xlarge"


def scenario(jobs: int) -> dict[str, Any]:
    """The benchmark scenario: ``jobs`` jobs over 168 h (split 50 / 30 / 20 % between teams)."""
    hours = 168
    split = {"HIGHPRI": 0.2, "MIDPRI": 0.3, "LOWPRI": 0.5}
    sizes = {"HIGHPRI": [2, 4], "MIDPRI": [1, 2, 4], "LOWPRI": [1, 2]}
    durations = {"HIGHPRI": 3600, "MIDPRI": 1800, "LOWPRI": 900}
    streams = []
    for share, part in split.items():
        count = round(jobs * part)
        streams.append(
            {
                "share": share,
                # 5 % more arrivals than needed, capped at the count: the horizon always holds them
                "arrivals_per_hour": count * 1.05 / hours,
                "max_jobs": count,
                "instance_type": KIND,
                "instance_count": {"kind": "CHOICE", "values": sizes[share]},
                "duration_s": {"kind": "LOGNORMAL", "median": durations[share], "sigma": 0.6, "max": 86400},
                "priority": {"kind": "UNIFORM", "low": 0, "high": 99},
                "checkpoint_interval_s": 900,
                "spot_fraction": 0.3 if share == "LOWPRI" else 0.0,
            }
        )
    return {
        "name": "bench-simulate",
        "seed": 1,
        "horizon_hours": hours,
        "start": "2026-11-02T00:00:00Z",
        "instance_types": {
            KIND: {
                "startup_s": 180,
                "failures_per_hour": 0.002,
                "spot_interruptions_per_hour": 0.05,
                "capacity_errors": {
                    "probability": 0.01,
                    "time_to_capacity_s": {"kind": "EXPONENTIAL", "mean": 900},
                },
            }
        },
        "service_environments": [{"name": "fleet", "capacity_limits": {"NUM_INSTANCES": 96}}],
        "job_queues": [
            {
                "name": "training",
                "service_environment": "fleet",
                "scheduling": "FAIR_SHARE",
                "fair_share": {
                    "share_decay_seconds": 3600,
                    "share_distribution": [
                        {"share_identifier": "HIGHPRI", "weight_factor": 1},
                        {"share_identifier": "MIDPRI", "weight_factor": 3},
                        {"share_identifier": "LOWPRI", "weight_factor": 5},
                    ],
                },
            }
        ],
        "workload": {"generator": {"streams": streams}},
        "batchpilot": {
            "capacity": {
                "policy": {
                    "service_environments": {"fleet": {"job_queues": ["training"], "min": 32, "max": 128}}
                }
            },
            "recovery": {},
        },
    }


def once(data: dict[str, Any]) -> dict[str, float]:
    """One repetition: seconds per phase and the figures that show the run was real."""
    t0 = time.perf_counter()
    parsed = parse_scenario(data)
    workload = build_jobs(parsed, parsed.seed, Path("."))
    t1 = time.perf_counter()
    run = simulate(parsed, workload, parsed.seed)
    t2 = time.perf_counter()
    result = summarise(run.simulation)
    t3 = time.perf_counter()
    return {
        "workload_s": t1 - t0,
        "simulate_s": t2 - t1,
        "summarise_s": t3 - t2,
        "total_s": t3 - t0,
        "jobs": float(len(workload.jobs)),
        "jobs_submitted": float(result.jobs_submitted),
        "throughput_jobs": float(result.throughput_jobs),
        "dispatches": float(run.simulation.counts["dispatches"]),
        "capacity_changes": float(result.capacity_changes),
        "resubmissions": float(result.resubmissions),
        "allocation": result.allocation,
        "timeouts": float(run.simulation.counts["timeouts"]),  # SimPy timeouts the engine scheduled
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--results", action="store_true", help="write the section of benchmarks/RESULTS.md")
    args = parser.parse_args()
    pinned = pin_to_one_core()
    info = machine()
    data = scenario(args.jobs)
    samples = [once(data) for _ in range(args.runs)]
    median = {key: statistics.median(s[key] for s in samples) for key in samples[0]}
    summary = {
        "benchmark": "simulate",
        "jobs": int(median["jobs"]),
        "simulated_days": 7,
        "runs": args.runs,
        "median_total_s": round(median["total_s"], 3),
        "median_simulate_s": round(median["simulate_s"], 3),
        "median_workload_s": round(median["workload_s"], 3),
        "median_summarise_s": round(median["summarise_s"], 3),
        "all_total_s": [round(s["total_s"], 3) for s in samples],
        "goal_s": GOAL_S,
        "goal_met": median["total_s"] <= GOAL_S,
        "jobs_submitted_incl_resubmissions": int(median["jobs_submitted"]),
        "throughput_jobs": int(median["throughput_jobs"]),
        "dispatches": int(median["dispatches"]),
        "capacity_policy_runs": 7 * 24 * 60,
        "capacity_changes": int(median["capacity_changes"]),
        "resubmissions": int(median["resubmissions"]),
        "allocation": round(median["allocation"], 4),
        "engine_timeouts": int(median["timeouts"]),
        "cpu": info["cpu"],
        "python": info["python"].split(" (")[0],
        "pinned": pinned,
    }
    if args.results:
        body = "\n".join(
            [
                "## batchpilot simulate: 10,000 jobs over 7 simulated days",
                "",
                f"Run {now()}, `benchmarks/bench_simulate.py --runs {args.runs}`, {pinned}.",
                "",
                f"- median total: **{summary['median_total_s']} s** (goal: at most {GOAL_S:g} s on one core; "
                f"{'met' if summary['goal_met'] else 'NOT met'}); all runs: {summary['all_total_s']}",
                f"- phases (median): workload {summary['median_workload_s']} s, simulation "
                f"{summary['median_simulate_s']} s, figures {summary['median_summarise_s']} s",
                f"- {summary['jobs']:,} jobs ({summary['jobs_submitted_incl_resubmissions']:,} with "
                f"resubmissions), {summary['dispatches']:,} dispatches, "
                f"{summary['capacity_policy_runs']:,} capacity-policy runs "
                f"({summary['capacity_changes']} changes), {summary['resubmissions']} resubmissions, "
                f"{summary['engine_timeouts']:,} SimPy timeouts scheduled by the engine",
                "",
                machine_markdown(info),
            ]
        )
        write_section("simulate", body)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
