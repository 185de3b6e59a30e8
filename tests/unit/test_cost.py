"""The cost benchmark's model (``batchpilot_local.testing.cost``, run by ``benchmarks/bench_cost.py``):
docs/cost.md's generated section is what the committed ``benchmarks/cost.json`` renders to, and the
counting is right on a fleet small enough to check by hand (one queue, two shares). The full run
(tens of thousands of events) is not a test: ``.venv/bin/python benchmarks/bench_cost.py``."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from batchpilot_local.clock import ClockScenario
from batchpilot_local.template import load_template
from batchpilot_local.testing import cost
from batchpilot_local.testing.paths import TEMPLATE_PATH

TINY = cost.Fleet("tiny", queues=1, shares=2, environments=1, jobs=48)  # a job every 30 minutes
START = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)


def test_docs_cost_section_is_what_cost_json_renders() -> None:
    results = json.loads(cost.RESULTS_JSON.read_text(encoding="utf-8"))
    assert cost.generated_section() == cost.render(results), (
        "docs/cost.md's generated section has drifted from benchmarks/cost.json: "
        "run .venv/bin/python benchmarks/bench_cost.py --render (or the whole benchmark)"
    )


def test_cost_json_prices_are_the_models() -> None:
    results = json.loads(cost.RESULTS_JSON.read_text(encoding="utf-8"))
    assert results["prices"] == cost.PRICES
    assert results["prices_date"] == cost.PRICES_DATE
    for fleet in results["fleets"].values():
        assert set(fleet["lines"]) == set(cost.PRICES)
        assert fleet["total"] == pytest.approx(
            sum(line["dollars"] for line in fleet["lines"].values()), abs=0.011
        )


def test_item_size_follows_dynamodbs_rules() -> None:
    assert cost.item_size({"pk": {"S": "job#1"}}) == 2 + 5
    assert cost.item_size({"n": {"N": "12345"}}) == 1 + 3  # 5 digits: 5 // 2 + 1
    assert cost.item_size({"ok": {"BOOL": True}, "x": {"NULL": True}}) == 3 + 2
    assert cost.item_size({"m": {"M": {"a": {"S": "bc"}}}}) == 1 + 3 + (1 + 1 + 2)
    assert cost.item_size({"l": {"L": [{"S": "ab"}, {"N": "1"}]}}) == 1 + 3 + (1 + 2) + (1 + 1)


def test_series_table_counts_series_and_the_hours_they_are_published() -> None:
    tally = cost.Tally()
    queue_a = ("RunTime", (("JobQueue", "a"), ("service", "batchpilot")))
    queue_b = ("RunTime", (("JobQueue", "b"), ("service", "batchpilot")))
    gauge = ("Entitlement", (("JobQueue", "a"), ("ShareIdentifier", "s"), ("service", "batchpilot")))
    cold = ("ColdStart", (("function_name", "batchpilot-metrics"), ("service", "batchpilot")))
    tally.series_hours[queue_a] |= {0, 1, 2}
    tally.series_hours[queue_b] |= {5}
    tally.series_hours[cold] |= {0}
    tally.tick_series[gauge] |= set(range(24))
    table = cost.series_table(tally)
    assert table[("RunTime", ("JobQueue", "service"))] == {"series": 2, "metric_months": 4 / 24, "gauge": 0}
    assert table[("Entitlement", ("JobQueue", "ShareIdentifier", "service"))] == {
        "series": 1,
        "metric_months": 1.0,
        "gauge": 1,
    }
    assert table[("ColdStart", ("function_name", "service"))]["metric_months"] == 1.0  # every hour


def test_series_ratios_scale_by_the_windows_or_by_the_fleet() -> None:
    day: dict[cost.Schema, dict[str, float]] = {
        ("A", ("JobQueue",)): {},
        ("B", ("Function",)): {},
        ("C", ("ShareIdentifier",)): {},
    }
    small: dict[cost.Schema, dict[str, float]] = {
        ("A", ("JobQueue",)): {"series": 4},
        ("B", ("Function",)): {"series": 3},
    }
    big: dict[cost.Schema, dict[str, float]] = {
        ("A", ("JobQueue",)): {"series": 36},
        ("B", ("Function",)): {"series": 3},
    }
    assert cost.series_ratios(day, small, big) == {
        ("A", ("JobQueue",)): 9.0,
        ("B", ("Function",)): 1.0,
        ("C", ("ShareIdentifier",)): 10.0,  # in neither window: grows with the fleet
    }


def test_the_tiny_fleet_walks_whole_lifecycles_with_an_hourly_tick() -> None:
    items = list(cost.replay_items(TINY, START, 0, 3600))
    events = [item for item in items if isinstance(item, dict)]
    ticks = [item for item in items if isinstance(item, ClockScenario)]
    assert len(events) == 2 * 6  # jobs 0 and 1: SUBMITTED, PENDING, RUNNABLE, STARTING, RUNNING, SUCCEEDED
    assert [e["detail"]["status"] for e in events if e["detail"]["jobName"] == "cost-job-000000"] == [
        "SUBMITTED",
        "PENDING",
        "RUNNABLE",
        "STARTING",
        "RUNNING",
        "SUCCEEDED",
    ]
    assert {e["detail"]["shareIdentifier"] for e in events} == {"team-000", "team-001"}
    assert {e["detail"]["jobQueue"].rsplit("/", 1)[1] for e in events} == {"sm-queue-000"}
    assert len(ticks) == 1
    assert ticks[0].schedule == "LedgerSchedule"
    assert ticks[0].ticks[0].at == START + timedelta(minutes=30)
    assert [job["jobName"] for job in ticks[0].ticks[0].world["service_jobs"]] == ["cost-job-000001"]


def test_a_day_of_the_reference_fleet_is_about_twelve_thousand_events() -> None:
    jobs = cost._jobs(cost.REFERENCE, 0, 86_400)
    assert len(jobs) == 2_000
    assert sum(1 for job in jobs if job.failure) == 100
    assert sum(len(job.steps) for job in jobs) == 12_160  # 80 jobs preempted or retried once
    assert len({(job.queue, job.share) for job in jobs}) == 60


@pytest.fixture(scope="module")
def tiny() -> tuple[cost.Tally, list[Any]]:
    # The ledger runs at minute 3, while job 0 runs (on share team-000) and before job 1 exists.
    reports: list[Any] = []
    return cost.replay(TINY, START, 0, 3600, progress=False, reports=reports, tick_minute=3), reports


def test_the_tiny_fleets_series_are_its_queue_and_two_shares(tiny: tuple[cost.Tally, list[Any]]) -> None:
    tally, reports = tiny
    keys = set(tally.series_hours) | set(tally.tick_series)
    from_reports = {
        (metric.name, tuple(sorted(metric.dimensions.items())))
        for report in reports
        for output in report.outputs()
        for metric in output.metrics
    }
    assert keys and keys == from_reports
    assert tally.tick_series, "the ledger's run published no gauge"
    values: dict[str, set[str]] = defaultdict(set)
    for _, dims in keys:
        for key, value in dims:
            if key in cost.FLEET_KEYS:
                values[key].add(value)
    assert values["JobQueue"] == {"sm-queue-000"}
    assert values["ShareIdentifier"] <= {"team-000", "team-001"}
    assert values["ServiceEnvironment"] <= {"sm-env-000"}
    assert set(values) <= {"JobQueue", "ShareIdentifier", "ServiceEnvironment"}
    tick_shares = {v for _, dims in tally.tick_series for k, v in dims if k == "ShareIdentifier"}
    assert tick_shares <= {"team-000"}  # team-001 has no job yet when the ledger runs
    hours = set().union(*tally.series_hours.values(), *tally.tick_series.values())
    assert hours == {0, 1}  # job 1 ends in the second hour


def test_the_tiny_fleets_lambda_and_api_counts(tiny: tuple[cost.Tally, list[Any]]) -> None:
    tally, _ = tiny
    assert tally.events == 12
    assert tally.errors == {}
    assert tally.records["metrics"] == 12 and tally.records["ledger"] == 12  # every event, once each
    assert 1 <= tally.invocations["metrics"] <= 12
    assert tally.ticks == 1 and tally.tick_seconds > 0
    assert tally.memory_mb["ledger"] == load_template(TEMPLATE_PATH).functions["ledger"].memory_size
    assert tally.usage.calls["dynamodb:TransactWriteItems"] >= 2  # each job written
    assert tally.usage.wru >= 2 * tally.usage.calls["dynamodb:TransactWriteItems"]  # transactional: 2 x
    assert tally.tick_usage.calls["dynamodb:Query"] >= 1  # the tick read the queue's aggregates
    month = cost.month(tally, load_template(TEMPLATE_PATH))
    for key, line in month["lines"].items():
        price = cost.PRICES[key]
        free = price.get("free", 0) + price.get("free_millions", 0)
        assert line["dollars"] == pytest.approx(max(0, line["quantity"] - free) * price["price"], abs=0.01), (
            key
        )
    assert month["lines"]["lambda_requests"]["quantity"] >= cost.TICKS_PER_MONTH / 1e6
    assert month["lines"]["cloudwatch_dashboards"]["quantity"] >= 1
    assert month["lines"]["cloudwatch_alarms"]["quantity"] >= month["details"]["alarms"]


def test_measure_and_render_a_small_pair_of_fleets() -> None:
    small = cost.Fleet("small", queues=1, shares=2, environments=1, jobs=24)  # a job an hour
    big = cost.Fleet("big", queues=4, shares=8, environments=2, jobs=96)
    results = cost.measure(10, fleets=(small, big), progress=False)
    results = json.loads(json.dumps(results))  # what cost.json holds
    assert results["replayed"]["reference_day_events"] == 24 * 6 + 1 * 2  # job 22 preempted once
    assert results["replayed"]["ticks"] == {"reference_day": 24, "ten_x_window": 1}
    assert results["replayed"]["errors"] == {}
    ref, ten = results["fleets"]["reference"], results["fleets"]["10x"]
    assert ten["scale"]["events"] == pytest.approx(4, rel=0.3)
    for row in ten["metrics"]:
        if row["scales_with_fleet"]:
            assert row["series"] >= next(
                r["series"]
                for r in ref["metrics"]
                if (r["metric"], r["dimensions"]) == (row["metric"], row["dimensions"])
            ), row
    assert ten["total"] >= ref["total"]
    section = cost.render(results)
    assert section.count("\n| **total** |") == 2
    assert all(cost.LABELS[key] in section for key in cost.PRICES)


def test_failures_and_preemptions_reach_every_queue_share_and_reason() -> None:
    jobs = cost._jobs(cost.REFERENCE, 0, 86_400)
    failed = [job for job in jobs if job.failure]
    preempted = [job for job in jobs if len(job.steps) > 6]
    assert {job.queue for job in failed} == {cost.REFERENCE.queue(q) for q in range(20)}
    assert len({(job.queue, job.share) for job in failed}) >= 40
    assert {job.failure for job in failed} == {f for each in cost.FAILURES.values() for f in each}
    assert len({job.queue for job in preempted}) == 20


def test_a_variants_totals_are_rendered_under_the_default() -> None:
    results = json.loads(cost.RESULTS_JSON.read_text(encoding="utf-8"))
    results["variants"] = {"MetricsDetail=detailed": cost.variant_summary(results)}
    section = cost.render(results)
    ref = results["fleets"]["reference"]
    assert f"| `MetricsDetail=detailed` | {ref['lines']['cloudwatch_metrics']['quantity']:,.1f} |" in section
    assert section.startswith(cost.render({k: v for k, v in results.items() if k != "variants"}))
