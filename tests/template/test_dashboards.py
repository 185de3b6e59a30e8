"""The dashboards and job-health alarms of template.yaml refer only to what batchpilot emits.

The replay of ``events/`` (``batchpilot replay --format json``, the real handlers against the
embedded AWS) gives every metric name and dimension set the functions emit; each one a dashboard
widget or an alarm refers to must be emitted there and listed in the table "Metrics the
dashboards and alarms use". A dashboard that refers to a metric nobody emits stays empty in front of
its users; this makes that a failing test.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from typing import Any

import pytest
from batchpilot_local.cli import main
from batchpilot_local.dashboards import MetricRef, dashboard_bodies, is_emitted, metric_references
from batchpilot_local.testing.paths import repo_root
from batchpilot_local.testing.templates import ROUTED_ALARM_ACTIONS, parse_template

ROOT = repo_root()
TEMPLATE = ROOT / "template.yaml"
DASHBOARDS_DOC = ROOT / "docs" / "dashboards.md"
# Emitted only when a chat channel or the on-call topic fails; the replay of events/ delivers every
# message (tests/integration/test_alerts_handler.py makes deliveries fail and reads this metric).
ONLY_ON_FAILURE = {"NotificationsFailed"}
DASHBOARDS = {
    "FleetDashboard": "fleet",
    "SharesDashboard": "shares",
    "FailuresDashboard": "failures",
    "HealthDashboard": "health",
    "CapacityDashboard": "capacity",  # deployed with the capacity function (CapacityConfigured)
}
JOB_HEALTH_ALARMS = {
    "JobQueueOldestRunnableAlarm": ("OldestRunnableAlarmSeconds", "JobQueue"),
    "IdleWhileQueuedAlarm": ("IdleWhileQueuedAlarmMinutes", "ServiceEnvironment"),
    "IdleWhileQueuedElsewhereAlarm": ("IdleWhileQueuedAlarmMinutes", None),  # fleet-wide: one series
    "JobQueueFailureRateAlarm": ("JobFailureRateAlarmPercent", "JobQueue"),
    "LostInstanceHoursAlarm": ("LostInstanceHoursAlarmThreshold", None),
    "JobQueueMisconfiguredAlarm": (None, "JobQueue"),
}


@pytest.fixture(scope="module")
def emitted() -> set[tuple[str, frozenset[str]]]:
    """``(name, dimension names)`` of every metric in the JSON report of ``replay events/`` (each
    event's own and its batches')."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["replay", "--format", "json", "--template", str(TEMPLATE), str(ROOT / "events")])
    assert code == 0
    return {
        (metric["name"], frozenset(metric["dimensions"]))
        for line in out.getvalue().splitlines()
        for outputs in [json.loads(line), *json.loads(line)["batches"]]
        for metric in outputs["metrics"]
    }


def catalog() -> list[MetricRef]:
    """The rows of the table "Metrics the dashboards and alarms use"."""
    text = DASHBOARDS_DOC.read_text(encoding="utf-8")
    section = text.split("## Metrics the dashboards and alarms use", 1)[1].split("\n# ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([^`]+)`", cells[1])
        exact = "any others" not in cells[1]
        dims = {n for n in names if not n.startswith("FROM")}
        rows.append(MetricRef(cells[0].strip("`"), frozenset(dims | {"service"} if exact else dims), exact))
    return rows


@pytest.fixture(scope="module")
def references() -> list[tuple[str, MetricRef]]:
    return metric_references(TEMPLATE)


def test_every_metric_a_widget_or_alarm_uses_is_in_the_catalog(
    references: list[tuple[str, MetricRef]],
) -> None:
    rows = catalog()
    assert len(rows) > 40
    missing = sorted(f"{owner}: {ref}" for owner, ref in references if ref not in rows)
    assert missing == [], "add these to docs/dashboards.md's 'Metrics the dashboards and alarms use'"


def test_every_metric_a_widget_or_alarm_uses_is_emitted_by_the_replay_of_events(
    references: list[tuple[str, MetricRef]], emitted: set[tuple[str, frozenset[str]]]
) -> None:
    assert len(references) > 60
    not_emitted = {(owner, str(ref)) for owner, ref in references if not is_emitted(ref, emitted)}
    assert {ref.split("{")[0] for _, ref in not_emitted} == ONLY_ON_FAILURE, sorted(not_emitted)
    assert {owner for owner, _ in not_emitted} == {"AlertsNotificationFailuresAlarm"}


def test_a_reference_to_a_metric_that_is_not_emitted_is_caught(
    emitted: set[tuple[str, frozenset[str]]],
) -> None:
    # aws-samples/aws-batch-runtime-monitoring's dashboards stayed empty for this reason: a schema
    # without the `service` dimension, a renamed metric, a dimension the code never sets.
    assert is_emitted(MetricRef("OldestRunnableAge", frozenset({"JobQueue", "service"})), emitted)
    assert not is_emitted(MetricRef("OldestRunnableAge", frozenset({"JobQueue"})), emitted)
    assert not is_emitted(MetricRef("OldestRunnableJobAge", frozenset({"JobQueue", "service"})), emitted)
    assert not is_emitted(MetricRef("JobsFailed", frozenset({"JobQueue", "Team"}), exact=False), emitted)


def test_one_dashboard_per_concern_with_its_console_url_in_the_outputs() -> None:
    template = parse_template(TEMPLATE.read_text(encoding="utf-8"))
    for logical_id, suffix in DASHBOARDS.items():
        resource = template["Resources"][logical_id]
        assert resource["Type"] == "AWS::CloudWatch::Dashboard"
        assert resource["Properties"]["DashboardName"] == {"Fn::Sub": f"${{AWS::StackName}}-{suffix}"}
        url = template["Outputs"][f"{logical_id}Url"]["Value"]["Fn::Sub"]
        assert url == (
            "https://${AWS::Region}.console.aws.amazon.com/cloudwatch/home?region=${AWS::Region}"
            f"#dashboards/dashboard/${{{logical_id}}}"
        )
    bodies = dict(dashboard_bodies(TEMPLATE))
    assert set(bodies) == set(DASHBOARDS)


def _own_entries(body: dict[str, Any]) -> list[list[Any]]:
    entries = []
    for widget in body["widgets"]:
        for entry in widget.get("properties", {}).get("metrics", []):
            if not (isinstance(entry[0], str) and entry[0].startswith("AWS/")):
                entries.append(entry)
    return entries


def test_widgets_find_queues_and_shares_with_search_never_fixed_dimension_values() -> None:
    bodies = list(dashboard_bodies(TEMPLATE))
    assert bodies
    for logical_id, body in bodies:
        entries = _own_entries(body)
        assert entries, logical_id
        for entry in entries:
            assert len(entry) == 1 and isinstance(entry[0], dict), (logical_id, entry)
            expression = entry[0]["expression"]
            if "SEARCH(" in expression:
                assert re.search(r"SEARCH\('\{BatchPilot,[^}]*service\} MetricName=\"\w+\"'", expression)
            else:  # metric math over other lines of the widget
                ids = {e[0]["id"] for e in entries if isinstance(e[0], dict)}
                assert set(re.findall(r"\b[a-z][a-z0-9]*\b", expression)) - {"fill", "sum", "if"} <= ids


def test_job_health_alarms_use_metrics_insights_with_thresholds_as_parameters() -> None:
    template = parse_template(TEMPLATE.read_text(encoding="utf-8"))
    readme = DASHBOARDS_DOC.read_text(encoding="utf-8")
    for name, (parameter, group) in JOB_HEALTH_ALARMS.items():
        props = template["Resources"][name]["Properties"]
        [query] = props["Metrics"]
        text = query["Expression"]["Fn::Sub"]
        assert text.startswith("SELECT ") and "SEARCH" not in text
        if group is not None:
            assert f"GROUP BY {group}" in text  # one contributor per queue / environment
        if parameter is not None:
            assert parameter in str(props["Threshold"]) + str(props.get("EvaluationPeriods"))
            default = template["Parameters"][parameter]["Default"]
            assert f"| `{parameter}` | `{default}` |" in readme  # the docs give the default
        # People hear of it through the alerts function (AlertsAlarmsRule), not a direct action.
        assert props["AlarmActions"] == ROUTED_ALARM_ACTIONS


def test_failure_rate_alarm_averages_the_per_job_samples_over_periods_a_parameter_requires() -> None:
    # AVG of JobFailureRate (100 per failed job, 0 per succeeded one) is failed / (failed +
    # succeeded); DatapointsToAlarm out of three periods keeps one lone failure from paging.
    template = parse_template(TEMPLATE.read_text(encoding="utf-8"))
    props = template["Resources"]["JobQueueFailureRateAlarm"]["Properties"]
    [query] = props["Metrics"]
    assert " ".join(query["Expression"]["Fn::Sub"].split()) == (
        'SELECT AVG(JobFailureRate) FROM SCHEMA("${MetricsNamespace}", JobQueue, service) '
        "GROUP BY JobQueue ORDER BY AVG() DESC"
    )
    assert (query["Period"], props["EvaluationPeriods"]) == (300, 3)
    assert props["DatapointsToAlarm"] == {"Ref": "JobFailureRateAlarmPeriods"}
    periods = template["Parameters"]["JobFailureRateAlarmPeriods"]
    assert (periods["MinValue"], periods["MaxValue"]) == (1, props["EvaluationPeriods"])
    percent = template["Parameters"]["JobFailureRateAlarmPercent"]
    assert (percent["MinValue"], percent["MaxValue"]) == (0, 100)
    readme = DASHBOARDS_DOC.read_text(encoding="utf-8")
    assert f"`JobFailureRateAlarmPeriods` (default `{periods['Default']}`)" in readme


def test_no_alarm_uses_search() -> None:
    template = parse_template(TEMPLATE.read_text(encoding="utf-8"))
    alarms = {name: r for name, r in template["Resources"].items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    assert alarms
    for name, resource in alarms.items():
        assert "SEARCH(" not in json.dumps(resource), name


def test_the_lost_work_alarm_counts_each_lost_attempt_once(emitted: set[tuple[str, frozenset[str]]]) -> None:
    # The ledger's LostInstanceHours (with Basis) covers every lost attempt; recovery's (with
    # FailureCategory, per resubmission) measures the same work again. The alarm sums only the
    # series with Basis, so the two must stay apart.
    template = parse_template(TEMPLATE.read_text(encoding="utf-8"))
    [query] = template["Resources"]["LostInstanceHoursAlarm"]["Properties"]["Metrics"]
    assert " ".join(query["Expression"]["Fn::Sub"].split()) == (
        'SELECT SUM(LostInstanceHours) FROM "${MetricsNamespace}" '
        "WHERE Basis = 'checkpoint' OR Basis = 'attempt'"
    )
    lost = [dims for name, dims in emitted if name == "LostInstanceHours"]
    ledger = [dims for dims in lost if "Basis" in dims]
    recovery = [dims for dims in lost if "FailureCategory" in dims]
    assert ledger and recovery
    assert not [dims for dims in ledger if "FailureCategory" in dims]
    assert len(ledger) + len(recovery) == len(lost)
