"""``batchpilot simulate`` end to end: the shipped scenarios in text, JSON and HTML, ``--compare``,
``--seed``, and the invariants of every shipped run."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from batchpilot_local.simulate.checks import capacity_violations, job_violations, quota_violations
from batchpilot_local.simulate.run import run_scenario
from batchpilot_local.testing.simulate import simulate_cli as cli

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "events" / "simulate").glob("*.yaml"))
SHARE_KEYS = {
    "instance_hours",
    "share_of_usage",
    "entitlement",
    "wait_p50_s",
    "wait_p95_s",
    "preemptions",
    "jobs_completed",
}
TOP_KEYS = {
    "utilisation",
    "throughput_jobs",
    "instance_hours_completed",
    "gpu_hours_completed",
    "lost_instance_hours",
    "preemptions",
    "shares",
}


def test_batchpilot_cli_runs_simulate() -> None:
    from batchpilot_local.cli import main  # the wiring: `batchpilot simulate` reaches the sub-command

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(
            ["simulate", str(ROOT / "events/simulate/history-sample-events.yaml"), "--format", "json"]
        )
    assert code == 0, err.getvalue()
    assert json.loads(out.getvalue())["scenario"] == "history-sample-events"
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["simulate"]) == 2


def test_scenarios_are_shipped() -> None:
    names = {p.stem for p in SCENARIOS}
    assert {"article-fifo", "article-fair-share", "quota-lend-and-borrow", "capacity-follows-demand"} <= names


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_shipped_scenario_runs_and_keeps_its_invariants(path: Path) -> None:
    run = run_scenario(path)
    trace = run.simulation.trace
    assert capacity_violations(run.scenario, trace) == []
    assert job_violations(trace) == []
    assert quota_violations(run.scenario, trace) == []
    assert run.result.throughput_jobs > 0


def test_json_output_has_every_documented_figure() -> None:
    code, out, err = cli(
        "simulate", str(ROOT / "events/simulate/quota-lend-and-borrow.yaml"), "--format", "json"
    )
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    assert set(data) >= TOP_KEYS
    assert 0 < data["utilisation"] <= 1
    assert set(data["shares"]) == {"QS1", "QS2"}
    for share in data["shares"].values():
        assert set(share) >= SHARE_KEYS
    assert data["preemptions"] > 0  # QS2's bursts take back what QS1 borrowed
    assert sum(s["share_of_usage"] for s in data["shares"].values()) == pytest.approx(1.0, abs=1e-3)
    assert "quota_management" in data["approximations"]


def test_text_output_names_the_approximations() -> None:
    code, out, _ = cli("simulate", str(ROOT / "events/simulate/capacity-follows-demand.yaml"))
    assert code == 0
    assert "utilisation" in out and "vision" in out and "speech" in out
    assert "approximations (AWS does not publish these algorithms):" in out
    assert "head_of_line" in out and "capacity_updates" in out


def test_seed_makes_runs_repeatable() -> None:
    path = str(ROOT / "events/simulate/capacity-follows-demand.yaml")
    first = cli("simulate", path, "--format", "json", "--seed", "5")[1]
    assert cli("simulate", path, "--format", "json", "--seed", "5")[1] == first
    assert cli("simulate", path, "--format", "json", "--seed", "6")[1] != first
    assert json.loads(first)["seed"] == 5


def test_the_article_pair_shares_one_workload_and_fleet() -> None:
    fifo = yaml.safe_load((ROOT / "events/simulate/article-fifo.yaml").read_text())
    fair = yaml.safe_load((ROOT / "events/simulate/article-fair-share.yaml").read_text())
    assert fifo["workload"] == fair["workload"]
    assert fifo["service_environments"] == fair["service_environments"]
    assert fifo["instance_types"] == fair["instance_types"]
    assert fifo["seed"] == fair["seed"] and fifo["horizon_hours"] == fair["horizon_hours"]
    weights = {
        w["share_identifier"]: w["weight_factor"]
        for w in fair["job_queues"][0]["fair_share"]["share_distribution"]
    }
    assert weights == {"HIGHPRI": 1, "MIDPRI": 3, "LOWPRI": 5}


def test_compare_runs_both_on_the_same_jobs(tmp_path: Path) -> None:
    a, b = ROOT / "events/simulate/article-fifo.yaml", ROOT / "events/simulate/article-fair-share.yaml"
    report = tmp_path / "compare.html"
    code, out, err = cli("simulate", "--compare", str(a), str(b), "--format", "json", "--report", str(report))
    assert code == 0, err
    data = json.loads(out)
    assert data["a"]["scenario"] == "article-fifo" and data["b"]["scenario"] == "article-fair-share"
    # the same submissions: the fair-share run adds only batchpilot's resubmissions
    assert data["b"]["jobs_submitted"] - data["b"]["resubmissions"] == data["a"]["jobs_submitted"]
    assert data["a"]["resubmissions"] == 0 and data["b"]["lineages_failed"] <= data["a"]["lineages_failed"]
    html = report.read_text()
    assert html.count("<svg") == 6  # three charts per scenario
    code, text, _ = cli("simulate", "--compare", str(a), str(b))
    assert code == 0 and "B / A" in text and "HIGHPRI" in text


def test_compare_refuses_a_workload_b_cannot_run(tmp_path: Path) -> None:
    quota = ROOT / "events/simulate/quota-lend-and-borrow.yaml"
    article = ROOT / "events/simulate/article-fifo.yaml"
    code, _, err = cli("simulate", "--compare", str(article), str(quota))
    assert code == 2
    assert err.count("\n") == 1 and str(quota) in err


def test_report_is_self_contained(tmp_path: Path) -> None:
    report = tmp_path / "r.html"
    code, _, err = cli(
        "simulate", str(ROOT / "events/simulate/quota-lend-and-borrow.yaml"), "--report", str(report)
    )
    assert code == 0, err
    html = report.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert html.count("<svg") == 3
    assert "<script" not in html and "<img" not in html and "<link" not in html
    # the only URLs are the SVG namespace declarations
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", html))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}
