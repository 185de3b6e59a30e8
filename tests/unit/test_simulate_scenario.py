"""Scenario files: validation (one line naming the field or record, exit 2), distributions,
generated workloads and recorded histories."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from batchpilot_local.simulate.instances import ACCELERATORS, accelerators
from batchpilot_local.simulate.scenario import Distribution, ScenarioError, load_scenario, parse_scenario
from batchpilot_local.simulate.workload import build_jobs
from batchpilot_local.testing.simulate import simulate_cli as cli

GPU = "ml.g5.xlarge"


def base() -> dict[str, Any]:
    return {
        "name": "t",
        "horizon_hours": 10,
        "service_environments": [{"name": "env", "capacity_limits": {"NUM_INSTANCES": 8}}],
        "job_queues": [
            {
                "name": "q",
                "service_environment": "env",
                "scheduling": "FAIR_SHARE",
                "fair_share": {"share_distribution": [{"share_identifier": "A", "weight_factor": 1}]},
            }
        ],
        "workload": {
            "generator": {
                "streams": [
                    {"share": "A", "arrivals_per_hour": 2, "instance_type": GPU, "duration_s": 600},
                ]
            }
        },
    }


def write(tmp_path: Path, data: dict[str, Any], name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def mutate(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    target: Any = data
    parts = path.split(".")
    for part in parts[:-1]:
        target = target[int(part)] if part.isdigit() else target[part]
    last = parts[-1]
    if last.isdigit():
        target[int(last)] = value
    else:
        target[last] = value
    return data


BAD: list[tuple[str, Any, str]] = [
    ("colour", "blue", "colour: Extra inputs are not permitted"),
    ("job_queues.0.fair_share.share_distribution.0.weight_factor", 1000, "weight_factor"),
    ("job_queues.0.fair_share.share_distribution.0.weight_factor", 0.00001, "weight_factor"),
    ("workload.generator.streams.0.duration_s", -5, "workload.generator.streams[0].duration_s"),
    ("workload.generator.streams.0.instance_count", 9, "larger than every service environment"),
    ("workload.generator.streams.0.instance_type", "ml.x9.huge", "not in the accelerator table"),
    ("workload.generator.streams.0.queue", "nope", "workload.generator.streams[0].queue: no job queue nope"),
    (
        "job_queues.0.service_environment",
        "other",
        "job_queues[0].service_environment: no service environment",
    ),
    ("job_queues.0.fair_share.compute_reservation", 100, "compute_reservation"),
    ("horizon_hours", 0, "horizon_hours"),
    ("workload.generator.streams.0.spot_fraction", 2, "spot_fraction"),
    (
        "workload.generator.streams.0.keep_runnable",
        4,
        "workload.generator.streams[0]: give arrivals_per_hour (Poisson arrivals) or keep_runnable",
    ),
    ("workload.generator.streams.0.keep_runnable", 0, "keep_runnable"),
]


@pytest.mark.parametrize(("path", "value", "expected"), BAD)
def test_bad_field_is_one_line_naming_it_and_exit_2(
    tmp_path: Path, path: str, value: Any, expected: str
) -> None:
    scenario = write(tmp_path, mutate(base(), path, value))
    code, out, err = cli("simulate", str(scenario))
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"batchpilot simulate: {scenario}: ")
    assert expected in err


def test_a_duration_distribution_that_can_draw_negative_values_is_refused() -> None:
    data = mutate(
        base(), "workload.generator.streams.0.duration_s", {"kind": "UNIFORM", "low": -10, "high": 600}
    )
    with pytest.raises(ScenarioError, match=r"streams\[0\]\.duration_s: can draw -10"):
        parse_scenario(data)


def test_a_job_larger_than_every_environment_is_refused_even_as_a_rare_draw() -> None:
    data = mutate(
        base(), "workload.generator.streams.0.instance_count", {"kind": "CHOICE", "values": [1, 2, 64]}
    )
    with pytest.raises(
        ScenarioError, match=r"a job of 64 ml\.g5\.xlarge instances is larger than every service environment"
    ):
        parse_scenario(data)


def test_the_capacity_policy_is_validated_by_batchpilots_own_model() -> None:
    data = base()
    data["batchpilot"] = {
        "capacity": {"policy": {"service_environments": {"env": {"job_queues": ["q"], "min": 9, "max": 4}}}}
    }
    with pytest.raises(
        ScenarioError,
        match=r"batchpilot\.capacity\.policy\.service_environments\.env.*min \(9\) is greater than max \(4\)",
    ):
        parse_scenario(data)
    data["batchpilot"] = {
        "capacity": {"policy": {"service_environments": {"gone": {"job_queues": ["q"], "max": 4}}}}
    }
    with pytest.raises(ScenarioError, match="no service environment gone"):
        parse_scenario(data)


def test_recovery_settings_are_validated_by_batchpilots_own_model(tmp_path: Path) -> None:
    data = base()
    data["batchpilot"] = {"recovery": {"submits_per_second": 9}}
    code, _, err = cli("simulate", str(write(tmp_path, data)))
    assert code == 2
    assert "batchpilot.recovery.submits_per_second" in err
    assert err.count("\n") == 1


def test_unreadable_files_are_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    code, _, err = cli("simulate", str(broken))
    assert code == 2 and "invalid YAML" in err and err.count("\n") == 1
    code, _, err = cli("simulate", str(tmp_path / "missing.yaml"))
    assert code == 2 and "cannot read" in err and err.count("\n") == 1


def test_unreadable_history_names_the_record(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    good = {
        "version": "0",
        "id": "1",
        "detail-type": "Batch Service Job State Change",
        "source": "aws.batch",
        "time": "2026-11-02T00:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {"jobArn": "arn:aws:batch:us-east-1:111122223333:service-job/a", "status": "RUNNABLE"},
    }
    bad = dict(good, detail={"status": "FAILED"})  # no jobArn
    events.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    data = base()
    data["workload"] = {"history": {"paths": ["events.jsonl"], "default_instance_type": GPU}}
    code, _, err = cli("simulate", str(write(tmp_path, data)))
    assert code == 2
    assert err.count("\n") == 1
    assert "events.jsonl:2" in err
    events.write_text("{not json\n")
    code, _, err = cli("simulate", str(write(tmp_path, data)))
    assert code == 2 and "events.jsonl: line 1: invalid JSON" in err


def test_usage_errors(tmp_path: Path) -> None:
    code, _, err = cli("simulate")
    assert code == 2 and "give one SCENARIO, or --compare A B" in err
    path = write(tmp_path, base())
    code, _, err = cli("simulate", str(path), "--compare", str(path), str(path))
    assert code == 2


# ------------------------------------------------------------------------------ distributions


@pytest.mark.parametrize(
    ("spec", "low", "high"),
    [
        ({"kind": "CONSTANT", "value": 3}, 3, 3),
        ({"kind": "UNIFORM", "low": 2, "high": 5}, 2, 5),
        ({"kind": "CHOICE", "values": [1, 4, 8], "weights": [1, 0, 1]}, 1, 8),
        ({"kind": "LOGNORMAL", "median": 100, "sigma": 1, "max": 400}, 0, 400),
        ({"kind": "EXPONENTIAL", "mean": 50, "min": 10}, 10, float("inf")),
    ],
)
def test_distribution_draws_stay_within_their_bounds(spec: dict[str, Any], low: float, high: float) -> None:
    dist = Distribution.model_validate(spec)
    lo, hi = dist.bounds()
    assert lo >= low and hi == high
    rng = random.Random(4)
    draws = [dist.sample(rng) for _ in range(2000)]
    assert all(lo <= d <= hi for d in draws)
    if spec["kind"] == "CHOICE":
        assert 4 not in draws  # weight 0


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "UNIFORM", "low": 5},
        {"kind": "UNIFORM", "low": 5, "high": 1},
        {"kind": "CHOICE", "values": [1, 2], "weights": [1]},
        {"kind": "CONSTANT", "value": 1, "mean": 3},
        {"kind": "LOGNORMAL", "median": -1, "sigma": 1},
    ],
)
def test_bad_distributions_are_refused(spec: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Distribution.model_validate(spec)


def test_generated_workload_is_deterministic_and_streams_are_independent() -> None:
    data = base()
    data["workload"]["generator"]["streams"].append(
        {
            "share": "B",
            "arrivals_per_hour": 3,
            "instance_type": GPU,
            "duration_s": {"kind": "EXPONENTIAL", "mean": 900},
        }
    )
    scenario = parse_scenario(data)
    first = build_jobs(scenario, 5, Path(".")).jobs
    assert first == build_jobs(scenario, 5, Path(".")).jobs
    assert first != build_jobs(scenario, 6, Path(".")).jobs
    only_a = parse_scenario(base())
    a_jobs = [j for j in first if j.share == "A"]
    assert a_jobs == build_jobs(only_a, 5, Path(".")).jobs  # adding stream B left A's jobs alone
    assert all(0 <= j.submit_s < 36000 for j in first)


def test_accelerator_table() -> None:
    assert accelerators("ml.p5.48xlarge") == 8
    assert accelerators("ml.g5.12xlarge") == 4
    assert accelerators("ml.trn1.32xlarge") == 16
    assert accelerators("ml.new.type") is None
    assert accelerators("ml.new.type", {"ml.new.type": 2}) == 2
    for family in ("p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "g5", "g6", "g6e", "trn1", "trn2"):
        assert any(name.startswith(f"ml.{family}.") for name in ACCELERATORS), family


def test_history_rebuilds_jobs_from_the_sample_events(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    data = base()
    data["job_queues"] = [{"name": "q", "service_environment": "env"}]
    data["horizon_hours"] = 24 * 365
    data["service_environments"][0]["capacity_limits"] = {"NUM_INSTANCES": 64}
    data["workload"] = {
        "history": {
            "paths": [str(repo / "events" / "service-job"), str(repo / "events" / "sagemaker")],
            "default_instance_type": GPU,
            "default_duration_s": 600,
        }
    }
    scenario = parse_scenario(data)
    built = build_jobs(scenario, 1, tmp_path)
    assert built.history is not None
    assert built.history.service_jobs == len(built.jobs) > 5
    assert built.history.ignored > 0  # standalone training job events
    assert built.jobs[0].submit_s == 0.0
    assert all(j.queue == "q" and j.duration_s > 0 for j in built.jobs)


def test_replay_scenarios_give_sizes_from_payloads(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    data = base()
    data["job_queues"] = [{"name": "q", "service_environment": "env"}]
    data["service_environments"][0]["capacity_limits"] = {"NUM_INSTANCES": 256}
    data["horizon_hours"] = 24 * 365
    data["workload"] = {
        "history": {
            "paths": [str(repo / "events" / "scenarios" / "recovery")],
            "default_instance_type": GPU,
            "default_duration_s": 600,
        }
    }
    scenario = parse_scenario(data)
    built = build_jobs(scenario, 1, tmp_path)
    assert built.history is not None
    assert built.history.sized_from_payload > 0
    assert any(j.instance_type != GPU for j in built.jobs)


def test_load_scenario_reads_json_too(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(base()))
    assert load_scenario(path).name == "t"
