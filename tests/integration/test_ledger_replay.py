"""The ledger's sample scenario (events/scenarios/ledger/) replayed as `make run` does: utilisation
against reserved capacity, each share's usage beside its entitlement, a requeue's restarted age."""

from __future__ import annotations

import pytest
from batchpilot_local.report import EventReport
from batchpilot_local.testing.harness import replay_file, report_gauge
from batchpilot_local.testing.paths import EVENTS_DIR

SCENARIO = EVENTS_DIR / "scenarios" / "ledger" / "fair-share-fleet.json"


@pytest.fixture(scope="module")
def ticks() -> list[EventReport]:
    return replay_file(SCENARIO)


def gauge(report: EventReport, name: str, **dims: str) -> float:
    return report_gauge(report, name, ("service", "Function"), **dims)


def test_ticks_run_the_ledger_without_errors(ticks: list[EventReport]) -> None:
    assert len(ticks) == 3
    for report in ticks:
        assert report.errors == [] and report.functions == ["ledger"]


def test_utilisation_is_against_reserved_capacity_and_idle_capacity_is_shown(
    ticks: list[EventReport],
) -> None:
    first = ticks[0]
    env = {"ServiceEnvironment": "article-env"}
    assert gauge(first, "CapacityLimit", **env) == 16
    assert gauge(first, "ReservedInstances", **env) == 24
    assert gauge(first, "InstancesInUse", **env) == 12
    assert gauge(first, "Utilization", **env) == 50
    assert gauge(first, "IdleWhileQueued", **env) == 8  # 12 reserved free while 8 instances wait
    assert gauge(first, "GpusInUse", **env) == 4 * 8 + 2 * 8 + 6 * 8
    assert gauge(first, "LedgerDrift", JobQueue="article-q", Drift="missing") == 6


def test_each_share_usage_beside_its_entitlement(ticks: list[EventReport]) -> None:
    first = ticks[0]
    share = {"JobQueue": "article-q"}
    assert gauge(first, "ShareOfUsage", **share, ShareIdentifier="LOWPRI") == 50
    assert (
        round(gauge(first, "Entitlement", **share, ShareIdentifier="LOWPRI"), 1) == 13.0
    )  # 1/5 of 1/1+1/3+1/5
    assert round(gauge(first, "Entitlement", **share, ShareIdentifier="HIGHPRI"), 1) == 65.2
    assert gauge(ticks[1], "ShareOfUsage", **share, ShareIdentifier="HIGHPRI") == 80


def test_a_requeued_jobs_age_restarts_and_its_attempt_is_lost(ticks: list[EventReport]) -> None:
    low = {"JobQueue": "article-q", "ShareIdentifier": "LOWPRI"}
    assert gauge(ticks[1], "OldestRunnableAge", **low) == 0
    assert gauge(ticks[2], "OldestRunnableAge", **low) == 300  # not 2 h since it was created
    assert gauge(ticks[1], "LostInstanceHours", **low, Basis="attempt") == 6 * 95 / 60
    # The queue wait is the metrics function's QueueWaitTime (one series per concept), not the ledger's.
    assert not [m for t in ticks for m in t.metrics if m.name == "QueueWaitTime"]


def test_the_first_screen_shows_utilisation_against_reserved_capacity_and_shares(
    ticks: list[EventReport],
) -> None:
    from batchpilot_local.replay_summary import render_overview, render_timelines, summarise

    overview = render_overview(summarise(ticks))
    fleet = overview.splitlines()
    start = fleet.index("Fleet: utilisation against reserved capacity (the job ledger's last gauges)")
    header, row = fleet[start + 1].split(), fleet[start + 2].split()
    assert header[:3] == ["service", "environment", "reserved"]
    # The last tick: 10 of 24 reserved instances in use, 16 the limit, 8 instances of work waiting.
    assert row[:5] == ["article-env", "24", "10", "16", "41.7"] and row[6:8] == ["8", "80"]  # idle, GPUs
    assert "Shares (3)" in overview and "entitlement" in overview
    assert render_timelines(summarise(ticks)) == ""  # the ledger scenario runs no capacity decision
