"""The starving-share sample (events/scenarios/ledger/starving-share.json) replayed as `make run`
does: OldestRunnableAge on every run though the queue is listed every 15 minutes, Job Starving on
the first run past the queue's threshold (delivered to the alerts function as a warning), and a
requeued job's LostInstanceHours measured from its newest checkpoint in S3."""

from __future__ import annotations

import pytest
from batchpilot_local.report import EventReport
from batchpilot_local.testing.harness import replay_file, report_gauge
from batchpilot_local.testing.paths import EVENTS_DIR

SCENARIO = EVENTS_DIR / "scenarios" / "ledger" / "starving-share.json"
TEAMB = {"JobQueue": "research-q", "ShareIdentifier": "TEAMB"}


@pytest.fixture(scope="module")
def ticks() -> list[EventReport]:
    return replay_file(SCENARIO)


def gauge(report: EventReport, name: str, **dims: str) -> float:
    return report_gauge(report, name, ("service", "Function"), **dims)


def test_the_ticks_run_without_errors(ticks: list[EventReport]) -> None:
    assert len(ticks) == 4
    assert all(report.errors == [] for report in ticks)


def test_oldest_runnable_age_every_run_not_only_when_the_queue_is_listed(ticks: list[EventReport]) -> None:
    # finetune-b1 became RUNNABLE at 21:40; the queue is listed at 22:00 and 22:15 only.
    ages = [gauge(report, "OldestRunnableAge", **TEAMB) for report in ticks]
    assert ages == [20 * 60, 25 * 60, 31 * 60, 35 * 60]
    listed = [gauge(r, "LedgerDrift", JobQueue="research-q", Drift="missing") for r in (ticks[0],)]
    assert listed == [3]
    assert not [m for m in ticks[1].metrics if m.name == "LedgerDrift"]  # 22:05 listed nothing


def test_a_starving_job_is_alerted_once_at_the_first_run_past_its_threshold(ticks: list[EventReport]) -> None:
    assert gauge(ticks[2], "ShareOfUsage", **TEAMB) == 0 and gauge(ticks[2], "Entitlement", **TEAMB) == 50
    starving = [[e for e in r.own_events if e.get("detail_type") == "Job Starving"] for r in ticks]
    assert [len(found) for found in starving] == [0, 0, 1, 0]  # at 22:11, a run that listed nothing
    detail = starving[2][0]["detail"]
    assert detail["job_name"] == "finetune-b1" and detail["share_identifier"] == "TEAMB"
    assert detail["reason"] == "WAITING_BELOW_ENTITLEMENT" and detail["waiting_seconds"] == 31 * 60
    assert detail["scheduling_priority"] == 40 and detail["threshold"] == 30 * 60
    (notice,) = [n for n in ticks[2].notifications if "finetune-b1" in n["title"]]
    assert notice["severity"] == "warning"


def test_a_requeued_jobs_lost_work_is_measured_from_its_checkpoint(ticks: list[EventReport]) -> None:
    teama = {"JobQueue": "research-q", "ShareIdentifier": "TEAMA"}
    # 4 instances x 3 minutes since the 22:12 checkpoint, not the 45-minute attempt from 21:30.
    assert gauge(ticks[3], "LostInstanceHours", **teama, Basis="checkpoint") == pytest.approx(4 * 3 / 60)
    assert not [
        m
        for m in ticks[3].metrics
        if m.name == "LostInstanceHours" and m.dimensions.get("Basis") == "attempt"
    ]
