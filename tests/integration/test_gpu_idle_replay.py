"""events/scenarios/ledger/idle-gpus.json replayed as `make run` does: the ledger's schedule reads
the GPUs of its RUNNING service jobs (each attempt's training job from DescribeServiceJob's
``latestAttempt.serviceResourceId``, its hosts' ``GPUUtilization`` from the embedded CloudWatch's
GetMetricData), publishes GpuActivity, GpuActivityP10 and IdleGpuHours per share, and reports the
forgotten job (IDLE) and the hung one (STALLED) once each, as warnings."""

from __future__ import annotations

from typing import Any

import pytest
from batchpilot_local.report import EventReport
from batchpilot_local.testing.harness import replay_file, report_gauge
from batchpilot_local.testing.paths import EVENTS_DIR

SCENARIO = EVENTS_DIR / "scenarios" / "ledger" / "idle-gpus.json"
TEAMA = {"JobQueue": "research-q", "ShareIdentifier": "TEAMA"}
TEAMB = {"JobQueue": "research-q", "ShareIdentifier": "TEAMB"}


@pytest.fixture(scope="module")
def ticks() -> list[EventReport]:
    return replay_file(SCENARIO)


def gauge(report: EventReport, name: str, **dims: str) -> float:
    return report_gauge(report, name, ("service", "Function"), **dims)


def idle_events(report: EventReport) -> list[dict[str, Any]]:
    """The report's Job GPU Idle facts (IDLE, STALLED), resolutions left out."""
    return [
        e
        for e in report.own_events
        if e.get("detail_type") == "Job GPU Idle" and e["detail"]["reason"] != "ACTIVE"
    ]


def resolutions(report: EventReport) -> list[dict[str, Any]]:
    """The report's Job GPU Idle resolutions (reason ACTIVE)."""
    return [
        e
        for e in report.own_events
        if e.get("detail_type") == "Job GPU Idle" and e["detail"]["reason"] == "ACTIVE"
    ]


def test_the_ticks_run_without_errors(ticks: list[EventReport]) -> None:
    assert len(ticks) == 5
    assert [report.errors for report in ticks] == [[]] * 5


def test_gpu_activity_per_share_every_run(ticks: list[EventReport]) -> None:
    # TEAMB's 16 GPUs at 3 % (75 % again from 22:40); TEAMA's at 85 % until 22:00, then 0 %.
    assert [gauge(r, "GpuActivity", **TEAMB) for r in ticks] == pytest.approx([3, 3, 3, 3, 75])
    assert [gauge(r, "GpuActivity", **TEAMA) for r in ticks] == pytest.approx([85, 0, 0, 0, 0])
    assert gauge(ticks[0], "GpuActivityP10", **TEAMB) == pytest.approx(3)
    # One minute of 16 GPUs at 3 %: 16 x 0.97 / 60 GPU-hours.
    assert gauge(ticks[0], "IdleGpuHours", **TEAMB) == pytest.approx(16 * 0.97 / 60)
    prod = {"JobQueue": "prod-q", "QuotaShare": "prod"}  # a quota share's job at 90 %
    assert [gauge(r, "GpuActivity", **prod) for r in ticks] == pytest.approx([90] * 5)


def test_the_forgotten_job_and_the_hung_one_are_reported_once_each(ticks: list[EventReport]) -> None:
    found = [idle_events(report) for report in ticks]
    assert [len(events) for events in found] == [0, 0, 1, 1, 0]  # never eval-prod, at work
    idle, stalled = found[2][0]["detail"], found[3][0]["detail"]
    assert (idle["job_name"], idle["reason"], idle["share_identifier"]) == (
        "notebook-forgotten",
        "IDLE",
        "TEAMB",
    )
    assert idle["idle_seconds"] == 30 * 60 and idle["gpus"] == 16 and idle["scheduling_priority"] == 40
    assert idle["training_job_name"].startswith("AWSBatchnotebook-forgotten")
    assert idle["hourly_cost_usd"] == pytest.approx(2 * 37.69 * 0.97)
    assert (stalled["job_name"], stalled["reason"], stalled["idle_seconds"]) == (
        "pretrain-hang",
        "STALLED",
        1800,
    )
    (notice,) = [n for n in ticks[2].notifications if "notebook-forgotten" in n["title"]]
    assert notice["severity"] == "warning"
    (hung,) = [n for n in ticks[3].notifications if "pretrain-hang" in n["title"]]
    assert hung["severity"] == "warning" and "stalled" in hung["title"]


def test_ledger_gpu_activity_disabled_reads_no_gpu_series() -> None:
    # The template's LedgerGpuActivity=disabled: the same scenario, no GetMetricData, no GPU
    # gauge, no Job GPU Idle (the cost docs/cost.md states is then zero).
    from batchpilot_local.inputs import read_inputs
    from batchpilot_local.replay import Replayer

    replay_input = read_inputs([str(SCENARIO)])
    replayer = Replayer(parameters={"LedgerGpuActivity": "disabled"})
    reports = replayer.run(replay_input.events, origins=[item.origin for item in replay_input.items])
    assert len(reports) == 5
    assert [report.errors for report in reports] == [[]] * 5
    assert [len(idle_events(report)) for report in reports] == [0] * 5
    names = {metric.name for report in reports for metric in report.metrics}
    assert "OldestRunnableAge" in names or "InstancesInUse" in names  # the ledger still ran
    assert not names & {"GpuActivity", "GpuActivityP10", "IdleGpuHours"}


def test_teamb_returning_to_work_is_resolved_once_as_info(ticks: list[EventReport]) -> None:
    # notebook-forgotten, reported IDLE at 22:25 (idle since 21:55), is at 75 % from 22:40: the
    # 22:45 tick sees it and publishes its one resolution (idle 45 minutes, up to 22:40);
    # pretrain-hang (still stalled) gets none.
    found = [resolutions(report) for report in ticks]
    assert [len(events) for events in found] == [0, 0, 0, 0, 1]
    detail = found[4][0]["detail"]
    (idle,) = idle_events(ticks[2])
    assert (detail["job_name"], detail["share_identifier"]) == ("notebook-forgotten", "TEAMB")
    assert detail["idle_since"] == idle["detail"]["idle_since"]
    assert detail["idle_seconds"] == 45 * 60 and detail["activity_percent"] == pytest.approx(75)
    assert "after 45 min idle" in detail["message"]
    (notice,) = [n for n in ticks[4].notifications if "notebook-forgotten" in n["title"]]
    assert notice["severity"] == "info"
    assert "GPUs active again after 0.8 h idle" in notice["title"]
