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
    "allocation",
    "peak_hour_allocation",
    "peak_hour",
    "allocation_while_jobs_wait",
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
    assert {
        "article-before-per-team",
        "article-after-shared",
        "article-after-quota",
        "article-fifo",
        "quota-lend-and-borrow",
        "capacity-follows-demand",
    } <= names


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
    assert 0 < data["allocation"] <= data["peak_hour_allocation"] <= 1
    assert set(data["shares"]) == {"QS1", "QS2"}
    for share in data["shares"].values():
        assert set(share) >= SHARE_KEYS
    assert data["preemptions"] > 0  # QS2's bursts take back what QS1 borrowed
    assert sum(s["share_of_usage"] for s in data["shares"].values()) == pytest.approx(1.0, abs=1e-3)
    assert "quota_management" in data["approximations"]


def test_text_output_names_the_approximations() -> None:
    code, out, _ = cli("simulate", str(ROOT / "events/simulate/capacity-follows-demand.yaml"))
    assert code == 0
    assert "allocation" in out and "utilisation" not in out and "vision" in out
    assert "peak-hour allocation (busiest hour)" in out and "GPU activity" in out and "speech" in out
    assert "approximations (AWS does not publish these algorithms):" in out
    assert "head_of_line" in out and "capacity_updates" in out


def test_seed_makes_runs_repeatable() -> None:
    path = str(ROOT / "events/simulate/capacity-follows-demand.yaml")
    first = cli("simulate", path, "--format", "json", "--seed", "5")[1]
    assert cli("simulate", path, "--format", "json", "--seed", "5")[1] == first
    assert cli("simulate", path, "--format", "json", "--seed", "6")[1] != first
    assert json.loads(first)["seed"] == 5


ARTICLE = [
    ROOT / "events/simulate/article-before-per-team.yaml",
    ROOT / "events/simulate/article-after-shared.yaml",
    ROOT / "events/simulate/article-after-quota.yaml",
    ROOT / "events/simulate/article-fifo.yaml",
]


def _without_queues(workload: dict[str, Any]) -> dict[str, Any]:
    streams = [
        {k: v for k, v in stream.items() if k != "queue"} for stream in workload["generator"]["streams"]
    ]
    return {"generator": {"streams": streams}}


def test_the_article_scenarios_share_one_workload_and_fleet() -> None:
    before, shared, quota, fifo = (yaml.safe_load(path.read_text()) for path in ARTICLE)
    # the same jobs, the same incidents, the same 32 instances: only the pooling differs
    for other in (shared, quota, fifo):
        assert _without_queues(other["workload"]) == _without_queues(before["workload"])
        assert other["instance_types"] == before["instance_types"]
        assert other["seed"] == before["seed"] and other["horizon_hours"] == before["horizon_hours"]
        assert "batchpilot" not in other
    assert "batchpilot" not in before

    def instances(data: dict[str, Any]) -> int:
        return sum(sum(env["capacity_limits"].values()) for env in data["service_environments"])

    assert instances(before) == instances(shared) == instances(quota) == instances(fifo) == 32
    # before: one environment and one queue per team, nothing shared
    assert len(before["service_environments"]) == len(before["job_queues"]) == 3
    assert len({q["service_environment"] for q in before["job_queues"]}) == 3
    teams = {s["queue"]: s["share"] for s in before["workload"]["generator"]["streams"]}
    assert teams == {"production": "PROD", "research": "RESEARCH", "sweeps": "SWEEPS"}
    weights = {
        w["share_identifier"]: w["weight_factor"]
        for w in shared["job_queues"][0]["fair_share"]["share_distribution"]
    }
    assert weights == {"PROD": 1, "RESEARCH": 3, "SWEEPS": 5}
    # the quota shares are the per-team reserves, lent and borrowed
    limits = {
        s["name"]: s["capacity_limits"]["ml.p5.48xlarge"]
        for s in quota["job_queues"][0]["quota"]["quota_shares"]
    }
    assert limits == {"PROD": 16, "RESEARCH": 8, "SWEEPS": 8}
    assert fifo["job_queues"][0]["scheduling"] == "FIFO" and fifo["job_queues"][0]["head_of_line"] == "QUEUE"


def test_the_article_experiment_has_the_articles_shape(tmp_path: Path) -> None:
    # What `make simulate` runs. Shape, not exact numbers: per-team reserves leave much of the
    # fleet idle while research waits; one shared pool (fair share or quota shares) fills it and
    # runs about twice the GPU-hours; a shared FIFO queue fills it too but production waits
    # behind the research backlog.
    report = tmp_path / "article.html"
    code, out, err = cli(
        "simulate", "--compare", *map(str, ARTICLE), "--format", "json", "--report", str(report)
    )
    assert code == 0, err
    data = json.loads(out)
    assert list(data) == ["a", "b", "c", "d"]
    before, shared, quota, fifo = data["a"], data["b"], data["c"], data["d"]
    assert [r["scenario"] for r in data.values()] == [p.stem for p in ARTICLE]
    # elastic research: more of it is submitted where capacity frees up; the rest is one workload
    assert shared["jobs_submitted"] > 1.2 * before["jobs_submitted"]
    for result in data.values():
        assert result["resubmissions"] == 0
        assert result["shares"]["SWEEPS"]["jobs_submitted"] == before["shares"]["SWEEPS"]["jobs_submitted"]
        assert result["shares"]["PROD"]["jobs_submitted"] == before["shares"]["PROD"]["jobs_submitted"]
    assert before["allocation"] < 0.6
    for after in (shared, quota, fifo):
        assert after["allocation"] > 0.85
        assert after["allocation"] > 1.5 * before["allocation"]
        assert after["gpu_hours_completed"] >= 1.8 * before["gpu_hours_completed"]
        assert after["peak_hour_allocation"] > 0.95
    for result in data.values():
        assert result["peak_hour"] is not None
        assert result["allocation"] <= result["peak_hour_allocation"] <= 1
    # the research backlog waited while production's reserve sat idle
    assert before["allocation_while_jobs_wait"] < 0.9
    assert before["shares"]["RESEARCH"]["jobs_completed"] * 2 < shared["shares"]["RESEARCH"]["jobs_completed"]
    prod = {name: r["shares"]["PROD"]["wait_p95_s"] for name, r in data.items()}
    # one FIFO queue: production waits behind research; fair share and quota shares keep its wait
    # near what its own reserve gave it (quota shares take the reserve back by preemption)
    assert prod["d"] > 1.5 * max(prod["a"], prod["b"], prod["c"])
    assert prod["b"] <= 1.5 * prod["a"] and prod["c"] <= 1.5 * prod["a"]
    assert quota["preemptions"] > 0 and before["preemptions"] == shared["preemptions"] == 0
    assert report.read_text().count("<svg") == 12  # three charts per scenario
    code, text, _ = cli("simulate", "--compare", *map(str, ARTICLE))
    assert code == 0
    assert "D / A" in text and "peak-hour allocation (busiest hour)" in text and "GPU activity" in text


def test_compare_needs_two_scenarios() -> None:
    code, _, err = cli("simulate", "--compare", str(ARTICLE[0]))
    assert code == 2 and err.count("\n") == 1 and "two or more" in err


def test_compare_refuses_a_workload_b_cannot_run(tmp_path: Path) -> None:
    quota = ROOT / "events/simulate/quota-lend-and-borrow.yaml"
    article = ROOT / "events/simulate/article-fifo.yaml"
    code, _, err = cli("simulate", "--compare", str(article), str(quota))
    assert code == 2
    assert err.count("\n") == 1 and str(quota) in err
    # a third scenario that cannot run A's jobs is named too, even after one that can
    code, _, err = cli("simulate", "--compare", str(article), str(ARTICLE[1]), str(quota))
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


def test_docs_article_table_is_what_the_run_renders() -> None:
    from batchpilot_local.testing import article

    assert [path.resolve() for path in article.SCENARIOS] == [path.resolve() for path in ARTICLE]
    assert article.generated_section() == article.render(article.run_article()), (
        "docs/simulate.md's article table has drifted from the simulation: "
        "run .venv/bin/python -m batchpilot_local.testing.article"
    )
