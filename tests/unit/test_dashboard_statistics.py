"""The replay report draws the template's dashboard widgets as CloudWatch computes them: each line's
statistic over its period from the EMF samples (an EMF value array is one sample per member), SEARCH
expressions with the statistic inside the SEARCH, and the metric math the template's widgets use
(local/batchpilot_local/dashboards.py). Values are chosen so that Sum and Average differ."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from batchpilot_local.dashboards import (
    MetricIndex,
    UnsupportedWidget,
    dashboard_bodies,
    period_start,
    statistic,
    widget_lines,
    widget_series,
)
from batchpilot_local.replay_html import short_labels
from batchpilot_local.report import MetricRecord
from batchpilot_local.testing.paths import repo_root

TEMPLATE = repo_root() / "template.yaml"
NS = "BatchPilot"
SAMPLES = [100.0, 0.0, 0.0, 0.0, 100.0, 0.0, 0.0, 0.0]  # 2 of 8 jobs failed: Average 25, Sum 200


def at(minute: int, second: int = 0, hour: int = 10) -> str:
    return f"2026-11-24T{hour:02d}:{minute:02d}:{second:02d}.000Z"


def utc(minute: int, hour: int = 10) -> datetime:
    return datetime(2026, 11, 24, hour, minute, tzinfo=UTC)


def rate(value: float | list[float], timestamp: str | None, queue: str = "q1") -> MetricRecord:
    return MetricRecord(
        "JobFailureRate", "Percent", value, {"JobQueue": queue, "service": "metrics"}, timestamp
    )


def failure_rates() -> list[MetricRecord]:
    """Eight job ends of q1 in 10:00-10:05 (two EMF blobs hold value arrays), one at 10:07."""
    return [
        rate(100.0, at(0, 5)),
        rate([0.0, 0.0], at(1)),  # one EMF blob, two samples
        rate(0.0, at(2)),
        rate([100.0, 0.0, 0.0], at(3, 30)),
        rate(0.0, at(4, 59)),
        rate(100.0, at(7)),  # the next 5-minute period
    ]


def search_widget(stat: str, period: int = 300, **extra: Any) -> dict[str, Any]:
    query = f"SEARCH('{{{NS},JobQueue,service}} MetricName=\"JobFailureRate\"', '{stat}', {period})"
    # The widget's own stat and period differ: the SEARCH's win, as in CloudWatch.
    return {"stat": "Sum", "period": 60, "metrics": [[{"expression": query, "id": "e1"}]], **extra}


@pytest.mark.parametrize(
    ("stat", "expected"),
    [
        ("Sum", 200.0),
        ("Average", 25.0),
        ("Minimum", 0.0),
        ("Maximum", 100.0),
        ("SampleCount", 8.0),
        ("p50", 0.0),
        ("p75", 0.0),
        ("p80", 100.0),
        ("p99", 100.0),
        ("p12.5", 0.0),
    ],
)
def test_each_statistic_of_one_periods_samples(stat: str, expected: float) -> None:
    assert statistic(SAMPLES, stat) == expected


def test_percentiles_are_nearest_rank_samples() -> None:
    waits = [30.0, 60.0, 90.0, 120.0, 600.0]
    assert statistic(waits, "p50") == 90.0
    assert statistic(waits, "p90") == 600.0
    assert statistic(waits, "p20") == 30.0
    assert statistic(waits, "p20.01") == 60.0
    assert statistic(list(range(1, 101)), "p99") == 99.0
    assert statistic(list(range(1, 101)), "p99.5") == 100.0
    assert statistic(waits, "Average") == 180.0 and statistic(waits, "Sum") == 900.0


@pytest.mark.parametrize("stat", ["tm90", "IQM", "PR(:300)", "p101", "Mean", "sum"])
def test_a_statistic_not_computed_locally_is_said(stat: str) -> None:
    with pytest.raises(UnsupportedWidget, match="not computed locally"):
        statistic([1.0], stat)
    with pytest.raises(UnsupportedWidget):
        widget_lines(search_widget(stat), [], NS)  # even when the replay has no such metric


def test_no_samples_has_no_statistic() -> None:
    with pytest.raises(ValueError):
        statistic([], "Average")


def test_periods_are_aligned_to_multiples_of_the_period() -> None:
    moment = datetime(2026, 11, 24, 10, 7, 59, 999000, tzinfo=UTC)
    assert period_start(moment, 60) == utc(7)
    assert period_start(moment, 300) == utc(5)
    assert period_start(moment, 3600) == utc(0)


@pytest.mark.parametrize(
    ("stat", "first", "second"),
    [
        ("Average", 25.0, 100.0),
        ("Sum", 200.0, 100.0),
        ("SampleCount", 8.0, 1.0),
        ("Minimum", 0.0, 100.0),
        ("Maximum", 100.0, 100.0),
        ("p50", 0.0, 100.0),
        ("p99", 100.0, 100.0),
    ],
)
def test_a_search_draws_its_own_statistic_per_period(stat: str, first: float, second: float) -> None:
    [line] = widget_lines(search_widget(stat), failure_rates(), NS)
    assert line.label == "JobFailureRate JobQueue=q1"
    assert (line.stat, line.period) == (stat, 300)
    assert line.points == [(utc(0), first), (utc(5), second)]


def test_the_period_groups_the_samples() -> None:
    [hourly] = widget_lines(search_widget("Average", 3600), failure_rates(), NS)
    assert hourly.points == [(utc(0), 300.0 / 9)]  # 3 of the 9 jobs of the hour failed
    [minutely] = widget_lines(search_widget("Sum", 60), failure_rates(), NS)
    assert minutely.points == [
        (utc(0), 100.0),
        (utc(1), 0.0),
        (utc(2), 0.0),
        (utc(3), 100.0),
        (utc(4), 0.0),
        (utc(7), 100.0),
    ]


def test_one_line_per_dimension_set_and_only_the_schemas_dimension_names() -> None:
    metrics = [
        *failure_rates(),
        rate([100.0, 0.0], at(1), queue="q2"),
        MetricRecord(  # another dimension set: not in the {JobQueue,service} schema
            "JobFailureRate", "Percent", 100.0, {"JobQueue": "q1", "Extra": "x", "service": "m"}, at(1)
        ),
        rate(100.0, None, queue="q3"),  # no timestamp: no datapoint
    ]
    lines = widget_lines(search_widget("Average"), metrics, NS)
    assert [(line.label, line.points[0][1]) for line in lines] == [
        ("JobFailureRate JobQueue=q1", 25.0),
        ("JobFailureRate JobQueue=q2", 50.0),
    ]
    assert widget_lines(search_widget("Average"), metrics, "OtherNamespace") == []


def test_search_terms_filter_dimension_values() -> None:
    metrics = [*failure_rates(), rate(0.0, at(1), queue="q2")]
    query = (
        f"SEARCH('{{{NS},JobQueue,service}} MetricName=\"JobFailureRate\" JobQueue=\"q2\"', 'Average', 300)"
    )
    lines = widget_lines({"metrics": [[{"expression": query}]]}, metrics, NS)
    assert [line.label for line in lines] == ["JobFailureRate JobQueue=q2"]


def test_plain_metric_entries_use_their_options_then_the_widgets_stat_and_period() -> None:
    entry = [NS, "JobFailureRate", "JobQueue", "q1", "service", "metrics"]
    widget = {"stat": "Average", "period": 300, "metrics": [entry]}
    assert widget_series(widget, failure_rates(), NS) == {
        "JobFailureRate JobQueue=q1": [(utc(0), 25.0), (utc(5), 100.0)]
    }
    widget = {"stat": "Average", "period": 300, "metrics": [[*entry, {"stat": "Sum", "label": "failed %"}]]}
    assert widget_series(widget, failure_rates(), NS) == {"failed %": [(utc(0), 200.0), (utc(5), 100.0)]}
    # Without a stat or period anywhere: CloudWatch's defaults, Average over 5 minutes.
    assert widget_series({"metrics": [entry]}, failure_rates(), NS) == {
        "JobFailureRate JobQueue=q1": [(utc(0), 25.0), (utc(5), 100.0)]
    }


def test_lines_of_one_metric_with_two_statistics_are_told_apart() -> None:
    average = search_widget("Average")["metrics"][0]
    count = search_widget("SampleCount")["metrics"][0]
    count = [{**count[0], "id": "e2", "yAxis": "right"}]
    lines = widget_lines({"metrics": [average, count]}, failure_rates(), NS)
    assert [(line.label, line.y_axis, line.points[0][1]) for line in lines] == [
        ("JobFailureRate Average JobQueue=q1", "left", 25.0),
        ("JobFailureRate SampleCount JobQueue=q1", "right", 8.0),
    ]
    shortened, shared = short_labels([line.label for line in lines])
    assert list(shortened.values()) == ["JobFailureRate Average", "JobFailureRate SampleCount"]
    assert shared == ["JobQueue=q1"]


def failures_widget(title: str, overrides: dict[str, str] | None = None) -> dict[str, Any]:
    bodies = dict(dashboard_bodies(TEMPLATE, overrides))
    [widget] = [w for w in bodies["FailuresDashboard"]["widgets"] if w["properties"].get("title") == title]
    properties: dict[str, Any] = widget["properties"]
    return properties


RATE_TITLE = (
    "Failure rate per job queue, % of the jobs that ended (JobQueueFailureRateAlarm's query), and jobs ended"
)


def template_default(parameter: str) -> float:
    from cfnlint.decode.cfn_yaml import loads

    data = loads(TEMPLATE.read_text(encoding="utf-8"), str(TEMPLATE))
    return float(data["Parameters"][parameter]["Default"])


def test_the_failures_dashboards_rate_widget_draws_the_failure_rate_and_the_jobs_ended() -> None:
    lines = widget_lines(failures_widget(RATE_TITLE), failure_rates(), NS)
    assert [(line.label, line.stat, line.y_axis, line.points) for line in lines] == [
        ("JobFailureRate Average JobQueue=q1", "Average", "left", [(utc(0), 25.0), (utc(5), 100.0)]),
        ("JobFailureRate SampleCount JobQueue=q1", "SampleCount", "right", [(utc(0), 8.0), (utc(5), 1.0)]),
    ]


def test_the_rate_widgets_threshold_is_the_alarms_parameter() -> None:
    [default] = failures_widget(RATE_TITLE)["annotations"]["horizontal"]
    assert default["value"] == template_default("JobFailureRateAlarmPercent")
    [overridden] = failures_widget(RATE_TITLE, {"JobFailureRateAlarmPercent": "10"})["annotations"][
        "horizontal"
    ]
    assert overridden["value"] == 10


def jobs(name: str, value: float, timestamp: str, **dimensions: str) -> MetricRecord:
    return MetricRecord(name, "Count", value, {**dimensions, "service": "metrics"}, timestamp)


def test_the_template_failure_rate_math_over_searches() -> None:
    share = {"JobKind": "container-job", "JobQueue": "q1"}  # per job queue (MetricsDetail=basic)
    train = {"JobKind": "training-job", "InstanceType": "ml.p4d.24xlarge"}
    metrics = [
        jobs("JobsFailed", 1, at(5), FailureCategory="SPOT_INTERRUPTION", **share),
        jobs("JobsFailed", 1, at(50), FailureCategory="APPLICATION_ERROR", **share),
        jobs("JobsFailed", 1, at(20), FailureCategory="APPLICATION_ERROR", **train),
        jobs("JobsSucceeded", 1, at(30), **share),
        jobs("JobsSucceeded", 1, at(10, hour=11), **train),  # an hour with successes only
    ]
    lines = widget_lines(failures_widget("Failure rate, all jobs that ended (metric math)"), metrics, NS)
    by_label = {line.label: line.points for line in lines}
    assert set(by_label) == {"failed", "succeeded", "failure rate %"}  # the SEARCHes are not visible
    assert by_label["failed"] == [(utc(0), 3.0), (utc(0, hour=11), 0.0)]  # FILL(..., 0) where none failed
    assert by_label["succeeded"] == [(utc(0), 1.0), (utc(0, hour=11), 1.0)]
    assert by_label["failure rate %"] == [(utc(0), 75.0), (utc(0, hour=11), 0.0)]
    assert all(line.stat is None and line.period == 3600 for line in lines)


def capacity(name: str, value: float, timestamp: str, environment: str) -> MetricRecord:
    dimensions = {"ServiceEnvironment": environment, "service": "batchpilot"}  # the job ledger's gauges
    return MetricRecord(name, "Count", value, dimensions, timestamp)


def test_the_fleet_totals_math_sums_each_environments_maximum() -> None:
    bodies = dict(dashboard_bodies(TEMPLATE))
    [widget] = [
        w["properties"]
        for w in bodies["FleetDashboard"]["widgets"]
        if str(w["properties"].get("title", "")).startswith("Fleet totals")
    ]
    metrics = [
        capacity("CapacityLimit", 8, at(0, 10), "a"),
        capacity("CapacityLimit", 24, at(0, 40), "a"),  # same minute: the Maximum, 24, not the Sum
        capacity("CapacityLimit", 16, at(0, 20), "b"),
        capacity("InstancesInUse", 6, at(0, 10), "a"),
        capacity("InstancesInUse", 10, at(0, 20), "b"),
        capacity("CapacityLimit", 16, at(1, 20), "b"),  # no InstancesInUse in this minute
    ]
    assert widget_series(widget, metrics, NS) == {
        "capacity limit, all environments": [(utc(0), 40.0), (utc(1), 16.0)],
        "in use, all environments": [(utc(0), 16.0)],
        "headroom (limit - in use)": [(utc(0), 24.0)],  # a binary operation keeps common periods
    }


def test_metric_math_functions_on_a_search() -> None:
    search = "SEARCH('{BatchPilot,JobQueue,service} MetricName=\"JobFailureRate\"', 'Average', 300)"
    metrics = [*failure_rates(), rate(50.0, at(1), queue="q2")]

    def drawn(*entries: Sequence[Any]) -> dict[str, list[tuple[datetime, float]]]:
        return widget_series(
            {"metrics": [[{"expression": search, "id": "r", "visible": False}], *entries]}, metrics, NS
        )

    assert drawn([{"expression": "AVG(r)", "id": "a"}]) == {"a": [(utc(0), 37.5), (utc(5), 100.0)]}
    assert drawn([{"expression": "MAX(r) - MIN(r)", "id": "d", "label": "spread"}]) == {
        "spread": [(utc(0), 25.0), (utc(5), 0.0)]
    }
    assert drawn([{"expression": "r / 100", "id": "f"}]) == {  # an array keeps its members' labels
        "JobFailureRate JobQueue=q1": [(utc(0), 0.25), (utc(5), 1.0)],
        "JobFailureRate JobQueue=q2": [(utc(0), 0.5)],
    }
    assert drawn([{"expression": "IF(SUM(r) > 70, 1, 0)", "id": "x"}]) == {
        "x": [(utc(0), 1.0), (utc(5), 1.0)]
    }
    assert drawn([{"expression": "IF(SUM(r) > 80, 1)", "id": "x"}]) == {"x": [(utc(5), 1.0)]}


@pytest.mark.parametrize(
    "expression",
    ["ANOMALY_DETECTION_BAND(r)", "r AND r", "FILL(r, REPEAT)", "r + r", "missing * 2", "METRICS()"],
)
def test_metric_math_not_evaluated_locally_is_said(expression: str) -> None:
    search = "SEARCH('{BatchPilot,JobQueue,service} MetricName=\"JobFailureRate\"', 'Average', 300)"
    widget = {"metrics": [[{"expression": search, "id": "r"}], [{"expression": expression, "id": "m"}]]}
    with pytest.raises(UnsupportedWidget):
        widget_lines(widget, failure_rates(), NS)


def test_every_widget_of_the_template_is_computed_locally() -> None:
    index = MetricIndex(failure_rates())
    for _, body in dashboard_bodies(TEMPLATE):
        for widget in body["widgets"]:
            if widget["type"] == "metric":
                widget_lines(widget["properties"], index, NS)  # raises UnsupportedWidget otherwise


def test_labels_of_metric_math_stay_whole_in_legends() -> None:
    labels = ["capacity limit, all environments", "in use, all environments", "headroom (limit - in use)"]
    shortened, shared = short_labels(labels)
    assert list(shortened.values()) == labels and shared == []
