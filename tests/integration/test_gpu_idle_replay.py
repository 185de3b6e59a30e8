"""events/scenarios/ledger/idle-gpus.json replayed as `make run` does: the ledger's schedule reads
the GPUs of its RUNNING service jobs (each attempt's training job from DescribeServiceJob's
``latestAttempt.serviceResourceId``, its hosts' ``GPUUtilization`` from the embedded CloudWatch's
GetMetricData), publishes GpuActivity, GpuActivityP10 and IdleGpuHours per share, and reports the
forgotten job (IDLE) and the hung one (STALLED) once each, as warnings."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from batchpilot.shared.own_events import GpuIdleReason, JobGpuIdle
from batchpilot_local.replay_summary import render_overview, summarise
from batchpilot_local.report import EventReport
from batchpilot_local.testing.alerts import Rig, open_rig, own_envelope
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


@pytest.fixture
def bot_rig() -> Iterator[Rig]:
    yield from open_rig(bot=True)


def test_in_bot_mode_the_resolution_replies_in_the_idle_facts_thread_on_its_own(bot_rig: Rig) -> None:
    # The real alerts service and Slack adapter against the local chat endpoint: two jobs of one
    # job queue reported idle, then both resolved. Each resolution replies in its own job's
    # thread, as its own message (never a digest of the other job's).
    since = datetime(2026, 11, 20, 21, 55, tzinfo=UTC)

    def event(job: str, reason: GpuIdleReason, at: datetime) -> dict[str, Any]:
        return own_envelope(
            JobGpuIdle(
                time=at,
                job_arn=f"arn:aws:batch:us-east-1:111122223333:service-job/{job}",
                job_kind="service-job",
                job_name=job,
                job_queue="research-q",
                share_identifier="TEAMB",
                reason=reason,
                instance_type="ml.p4d.24xlarge",
                instances=2,
                gpus=16,
                idle_since=since,
                idle_seconds=(at - since).total_seconds(),
                message=f"job {job}",
            )
        )

    reported, back = since + timedelta(minutes=30), since + timedelta(minutes=45)
    rig = bot_rig
    rig.run(event("nb-1", GpuIdleReason.IDLE, reported), event("nb-2", GpuIdleReason.IDLE, reported))
    rig.run(event("nb-1", GpuIdleReason.ACTIVE, back))
    rig.run(event("nb-2", GpuIdleReason.ACTIVE, back))
    rig.run(event("nb-1", GpuIdleReason.ACTIVE, back))  # a copy (the ledger's retake): nothing more
    posts = [p for p in rig.slack.delivered() if p.kind == "chat.postMessage"]
    texts = [str(p.payload.get("text", "")) for p in posts]
    firsts = {
        job: posts[i]
        for i, t in enumerate(texts)
        for job in ("nb-1", "nb-2")
        if "GPUs idle" in t and job in t
    }
    replies = [(p, t) for p, t in zip(posts, texts, strict=True) if "GPUs active again" in t]
    assert sorted(firsts) == ["nb-1", "nb-2"] and len(replies) == 2
    for job, (post, text) in zip(("nb-1", "nb-2"), replies, strict=True):
        assert job in text and text.startswith("Info")
        assert post.payload.get("thread_ts") == firsts[job].ts


def test_the_first_screen_lists_the_idle_and_stalled_warnings(ticks: list[EventReport]) -> None:
    # `make run`'s summary: warnings are listed beside the pages, not only in the per-event part.
    screen = render_overview(summarise(ticks))
    start = screen.splitlines().index("Warnings to the on-call topic (2)")
    listed = screen.splitlines()[start + 1 : start + 3]
    assert [("notebook-forgotten" in line, "pretrain-hang" in line) for line in listed] == [
        (True, False),
        (False, True),
    ]
