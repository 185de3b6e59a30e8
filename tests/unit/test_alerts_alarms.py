"""The stack's CloudWatch alarms as alert facts (alerts/alarms.py, facts.py, severity.py, render.py):
the severity marker, the alarm routing, the event model and its bad input, the facts' keys and
threads, the default severities and what each channel shows."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from typing import Any

import pytest
from batchpilot.alerts.alarms import (
    ALL_ALARMS,
    DEFAULT_ALARM_SEVERITY,
    AlarmRouting,
    alarm_severity,
    name_prefix,
    without_marker,
)
from batchpilot.alerts.channels.slack import slack_digest, slack_message
from batchpilot.alerts.channels.teams import teams_digest, teams_message
from batchpilot.alerts.facts import AlertFact, FactKind, fact_from_alarm_event
from batchpilot.alerts.grouping import burst_key
from batchpilot.alerts.oncall import sns_digest, sns_message
from batchpilot.alerts.policy import Channel, RoutingPolicy, Severity, load_policy
from batchpilot.alerts.render import OnCallFormat, console_links, facts_table, title
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.alerts.severity import decide
from batchpilot.shared.events import (
    AlarmStateValue,
    CloudWatchAlarmStateChange,
    InvalidEventError,
    UnsupportedEventError,
    parse_alarm_event,
)
from batchpilot.shared.records import Outcome, Rejected, decode_any
from batchpilot.shared.settings import ConfigError
from batchpilot_local.chat_endpoint import block_kit_problem
from batchpilot_local.testing.samples import sample

ROUTING = AlarmRouting.of(name_prefix("batchpilot"), "batchpilot/batchpilot/AlertsErrorsAlarm")
FIRES = "cloudwatch-alarm/job-failure-rate-alarm"
RESOLVES = "cloudwatch-alarm/job-failure-rate-ok"
DIRECT = "cloudwatch-alarm/alerts-errors-alarm"


def event(name: str = FIRES, **detail: Any) -> CloudWatchAlarmStateChange:
    raw = sample(name)
    raw["detail"].update(detail)
    return parse_alarm_event(raw)


def fact(name: str = FIRES, routing: AlarmRouting = ROUTING, **detail: Any) -> AlertFact:
    return fact_from_alarm_event(event(name, **detail), routing)


def described(description: str | None) -> AlertFact:
    raw = sample(FIRES)
    raw["detail"]["configuration"]["description"] = description
    return fact_from_alarm_event(parse_alarm_event(raw), ROUTING)


# ------------------------------------------------------------------------------ severity marker
@pytest.mark.parametrize(
    ("description", "severity"),
    [
        ("Queue is stuck. Severity: critical.", Severity.CRITICAL),
        ("Queue is stuck. Severity: warning.", Severity.WARNING),
        ("severity: INFO", Severity.INFO),
        ("Severity:silent", Severity.SILENT),
        ("Severity: info. Later: Severity: warning.", Severity.WARNING),  # the last marker wins
    ],
)
def test_the_description_names_the_severity(description: str, severity: Severity) -> None:
    assert alarm_severity(description).severity is severity
    assert alarm_severity(description).problem is None


@pytest.mark.parametrize(
    ("description", "problem"),
    [
        (None, 'no "Severity: ..." marker'),
        ("", 'no "Severity: ..." marker'),
        ("The queue is stuck.", 'no "Severity: ..." marker'),
        ("Severity: urgent.", 'unknown severity "urgent"'),
        ("Severity: p1", 'unknown severity "p1"'),
    ],
)
def test_no_or_an_unknown_severity_gets_the_default_and_says_why(
    description: str | None, problem: str
) -> None:
    stated = alarm_severity(description)
    assert stated.severity is DEFAULT_ALARM_SEVERITY is Severity.CRITICAL
    assert stated.problem is not None and stated.problem.startswith(problem)


def test_the_marker_is_not_shown_to_people() -> None:
    assert without_marker("Redrive the messages.  Severity: warning.") == "Redrive the messages."
    assert without_marker(None) == ""


# --------------------------------------------------------------------------------- the routing
def test_alarm_routing_reads_the_settings_text() -> None:
    assert ROUTING.prefix == "batchpilot/batchpilot/"
    assert ROUTING.ours("batchpilot/batchpilot/LedgerErrorsAlarm")
    assert not ROUTING.ours("batchpilot/batchpilot-prod/LedgerErrorsAlarm")
    assert ROUTING.short_name("batchpilot/batchpilot/LedgerErrorsAlarm") == "LedgerErrorsAlarm"
    assert ROUTING.short_name("other") == "other"
    assert ROUTING.is_notified_directly("batchpilot/batchpilot/AlertsErrorsAlarm")
    assert not ROUTING.is_notified_directly("batchpilot/batchpilot/LedgerErrorsAlarm")
    every = AlarmRouting.of("", f" {ALL_ALARMS} ")
    assert every.ours("anything") and every.is_notified_directly("anything")
    assert AlarmRouting.of(None, None) == AlarmRouting()
    assert AlarmRouting.of("p/", "a, ,b,") == AlarmRouting("p/", frozenset({"a", "b"}))


# ---------------------------------------------------------------------------- the event model
def test_the_sample_parses_with_cloudwatchs_timestamps() -> None:
    parsed = event()
    assert parsed.detail.state.value is AlarmStateValue.ALARM
    assert parsed.detail.state.timestamp.isoformat() == "2026-11-22T20:05:12.391000+00:00"
    assert parsed.detail.configuration.metrics[0].expression is not None


def body(raw: Any) -> str:
    return json.dumps(raw)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda e: e["detail"].pop("alarmName"), "detail.alarmName"),
        (lambda e: e["detail"].update(alarmName=""), "detail.alarmName"),
        (lambda e: e["detail"]["state"].update(value="PENDING"), "detail.state.value"),
        (lambda e: e["detail"]["state"].pop("timestamp"), "detail.state.timestamp"),
        (lambda e: e["detail"]["state"].update(timestamp="yesterday"), "detail.state.timestamp"),
        (lambda e: e["detail"].pop("state"), "detail.state"),
        (lambda e: e.update(detail="not an object"), "detail"),
        (lambda e: e["detail"]["configuration"].update(metrics={"id": "x"}), "detail.configuration.metrics"),
    ],
)
def test_an_unparseable_alarm_event_is_invalid_naming_the_field(change: Any, field: str) -> None:
    raw = sample(FIRES)
    change(raw)
    with pytest.raises(InvalidEventError) as error:
        parse_alarm_event(raw)
    assert error.value.event_id == raw["id"] and field in str(error.value)
    decoded = decode_any(body(raw))
    assert isinstance(decoded, Rejected) and decoded.outcome is Outcome.INVALID
    assert field in decoded.error and "Threshold" not in decoded.error  # fields, never values


def test_other_cloudwatch_events_are_ignored_and_junk_is_invalid() -> None:
    raw = sample(FIRES) | {"detail-type": "CloudWatch Alarm Configuration Change"}
    with pytest.raises(UnsupportedEventError):
        parse_alarm_event(raw)
    ignored = decode_any(body(raw))
    assert isinstance(ignored, Rejected) and ignored.outcome is Outcome.IGNORED
    for junk in ([sample(FIRES)], {"source": "aws.cloudwatch"}, "just text"):
        decoded = decode_any(body(junk))
        assert isinstance(decoded, Rejected) and decoded.outcome is Outcome.INVALID, junk


# ------------------------------------------------------------------------------------ the fact
def test_the_fact_is_keyed_on_the_alarm_and_when_it_entered_the_state() -> None:
    fired = fact()
    raw = sample(FIRES)
    assert fired.subject == raw["resources"][0]
    assert fired.fact_id == "ALARM#1795377912391"
    assert fired.event_kind is FactKind.ALARM_STATE_CHANGE and fired.is_alarm and not fired.is_job_event
    assert fired.status == "ALARM" and fired.starts_thread and fired.thread_subject == fired.subject
    assert fired.alarm is not None and fired.alarm.short_name == "JobQueueFailureRateAlarm"
    assert fired.alarm.metrics == ("failure rate per job queue (percent of the jobs that ended, 5 minutes)",)
    resolved = fact(RESOLVES)
    assert resolved.subject == fired.subject and resolved.fact_id != fired.fact_id
    assert not resolved.starts_thread and resolved.thread_subject == fired.thread_subject
    assert (resolved.progress or "") > (fired.progress or "")  # a later state change is newer


def test_without_resources_the_subject_is_built_from_the_envelope() -> None:
    raw = sample(FIRES)
    raw["resources"] = []
    built = fact_from_alarm_event(parse_alarm_event(raw), ROUTING)
    assert (
        built.subject
        == "arn:aws:cloudwatch:us-east-1:111122223333:alarm:batchpilot/batchpilot/JobQueueFailureRateAlarm"
    )


def test_only_the_configured_alarms_are_notified_directly() -> None:
    assert fact(DIRECT).notified_directly
    assert not fact(FIRES).notified_directly
    assert fact(FIRES, AlarmRouting.of("", ALL_ALARMS)).notified_directly


# -------------------------------------------------------------------------------- the severity
def test_default_severities_of_alarm_state_changes() -> None:
    policy = RoutingPolicy()
    fired = decide(fact(), policy)
    assert fired.severity is Severity.CRITICAL and fired.channels == (Channel.SNS, Channel.SLACK)
    assert "its description says critical" in fired.why
    resolved = decide(fact(RESOLVES), policy)
    assert resolved.severity is Severity.INFO and resolved.channels == (Channel.SLACK,)
    assert "resolved" in resolved.why
    assert decide(fact("cloudwatch-alarm/lost-instance-hours-alarm"), policy).severity is Severity.WARNING
    deployed = decide(fact("cloudwatch-alarm/idle-while-queued-ok-after-insufficient-data"), policy)
    assert deployed.severity is Severity.SILENT and not deployed.notify  # a new alarm's first OK
    no_data = fact(state={"value": "INSUFFICIENT_DATA", "timestamp": "2026-11-22T20:10:00.000+0000"})
    assert decide(no_data, policy).severity is Severity.SILENT


def test_an_alarm_without_a_known_severity_pages_and_says_why() -> None:
    decision = decide(described("The queue is stuck. Severity: urgent."), RoutingPolicy())
    assert decision.severity is Severity.CRITICAL
    assert 'unknown severity "urgent" in its description: the default' in decision.why


def test_the_routing_policy_can_match_alarms_by_name_and_state() -> None:
    policy = load_policy(
        json.dumps(
            {
                "rules": [
                    {"match": {"alarm_name": ["*/JobQueueFailureRateAlarm"]}, "severity": "warning"},
                    {"match": {"status": ["INSUFFICIENT_DATA"]}, "severity": "info"},
                ]
            }
        )
    )
    assert decide(fact(), policy).severity is Severity.WARNING
    assert decide(fact(DIRECT), policy).severity is Severity.CRITICAL
    no_data = fact(DIRECT, state={"value": "INSUFFICIENT_DATA", "timestamp": "2026-11-22T20:10:00.000+0000"})
    assert decide(no_data, policy).severity is Severity.INFO
    # Selectors of job queues and shares never select an alarm.
    marked = load_policy(json.dumps({"never_page": {"job_queues": ["*"], "share_identifiers": ["*"]}}))
    assert decide(fact(), marked).severity is Severity.CRITICAL


# ------------------------------------------------------------------------------ what is shown
def test_title_table_and_link_of_an_alarm() -> None:
    fired, resolved = fact(), fact(RESOLVES)
    assert title(fired) == "alarm batchpilot/batchpilot/JobQueueFailureRateAlarm is in ALARM"
    assert title(resolved) == "resolved: alarm batchpilot/batchpilot/JobQueueFailureRateAlarm is OK again"
    rows = dict(facts_table(resolved))
    assert rows["State"] == "OK (was ALARM)" and rows["In ALARM for"] == "1h 15m 00s"
    assert rows["Alarm"] == "batchpilot/batchpilot/JobQueueFailureRateAlarm"
    assert "Alarm action" not in rows and dict(facts_table(fact(DIRECT)))["Alarm action"]
    assert console_links(fired) == [
        (
            "Alarm",
            "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1"
            "#alarmsV2:alarm/batchpilot%2Fbatchpilot%2FJobQueueFailureRateAlarm",
        )
    ]
    assert fired.reason is not None and fired.reason.startswith("batchpilot: more than 25% of the jobs")
    assert "Severity:" not in fired.reason and "CloudWatch: Threshold Crossed: 2 out of" in fired.reason


def test_the_page_carries_the_attributes_every_fact_carries() -> None:
    fired = fact()
    decision = decide(fired, RoutingPolicy())
    message = sns_message(fired, decision.severity, decision.why)
    assert message.subject == "[CRITICAL] alarm batchpilot/batchpilot/JobQueueFailureRateAlarm is in ALARM"
    assert message.attributes == {
        "severity": "critical",
        "event_kind": "alarm-state-change",
        "alarm_name": "batchpilot/batchpilot/JobQueueFailureRateAlarm",
    }
    assert "Why critical: the alarm JobQueueFailureRateAlarm is in ALARM" in message.body
    assert "Event: CloudWatch Alarm State Change at 2026-11-22T20:05:12+00:00" in message.body


def test_slack_and_teams_show_the_alarm_within_their_limits() -> None:
    fired = fact()
    decision = decide(fired, RoutingPolicy())
    slack = slack_message(fired, decision.severity, decision.why)
    assert block_kit_problem(slack.payload()) is None
    assert slack.text.startswith("Critical: alarm batchpilot/batchpilot/JobQueueFailureRateAlarm is in ALARM")
    teams = teams_message(fired, decision.severity, decision.why)
    assert teams.card["actions"][0]["title"] == "Alarm"
    assert "JobQueueFailureRateAlarm" in json.dumps(teams.card)


def many_alarms(count: int) -> list[AlertFact]:
    facts = []
    for index in range(count):
        raw = copy.deepcopy(sample(FIRES))
        name = f"batchpilot/batchpilot/Alarm{index}"
        raw["detail"]["alarmName"] = name
        raw["resources"] = [f"arn:aws:cloudwatch:us-east-1:111122223333:alarm:{name}"]
        facts.append(fact_from_alarm_event(parse_alarm_event(raw), ROUTING))
    return facts


def test_a_burst_of_alarms_is_one_digest_naming_each_alarm() -> None:
    facts = many_alarms(7)
    assert len({burst_key(f, Severity.CRITICAL) for f in facts}) == 1
    digest = sns_digest(facts, Severity.CRITICAL, "the alarms are in ALARM")
    assert digest.subject == "[CRITICAL] 7 alarms: ALARM" and digest.attributes["group_size"] == "7"
    slack = slack_digest(facts, Severity.CRITICAL, "why", max_items=5)
    assert block_kit_problem(slack.payload()) is None
    text = json.dumps(slack.blocks)
    assert "7* alarms went to *ALARM*" in text and "|Alarm0>" in text and "and 2 more" in text
    teams = teams_digest(facts, Severity.CRITICAL, "why")
    assert "7 alarms went to ALARM in one batch of events" in json.dumps(teams.card)


def test_durations_are_from_the_alarm_state_times() -> None:
    resolved = fact(RESOLVES)
    assert resolved.alarm is not None and resolved.alarm.previous_changed_at is not None
    assert resolved.alarm.changed_at - resolved.alarm.previous_changed_at == timedelta(
        minutes=75, microseconds=15_000
    )


# ------------------------------------------------------------------------------------ settings
BASE_ENV = {
    "BATCHPILOT_STATE_TABLE": "StateTable",
    "BATCHPILOT_ONCALL_TOPIC_ARN": "arn:aws:sns:us-east-1:111122223333:batchpilot-oncall",
}


def test_the_settings_give_the_alarm_routing_and_the_on_call_format() -> None:
    settings = AlertsSettings.from_environ(
        {
            **BASE_ENV,
            "BATCHPILOT_ALARM_NAME_PREFIX": "batchpilot/prod/",
            "BATCHPILOT_ALARMS_NOTIFIED_DIRECTLY": "batchpilot/prod/AlertsErrorsAlarm,batchpilot/prod/X",
            "BATCHPILOT_ONCALL_MESSAGE_FORMAT": "amazon-q",
            "BATCHPILOT_QUEUE_VISIBILITY_TIMEOUT": "720",
        },
        function="alerts",
    )
    assert settings.service_args == {
        "alarms": AlarmRouting(
            "batchpilot/prod/", frozenset({"batchpilot/prod/AlertsErrorsAlarm", "batchpilot/prod/X"})
        ),
        "oncall_format": OnCallFormat.AMAZON_Q,
        "visibility_timeout": 720.0,
        "reserves": True,
        "owner_tag_key": "",
    }
    defaults = AlertsSettings.from_environ(BASE_ENV, function="alerts")
    assert defaults.service_args == {
        "alarms": AlarmRouting(),
        "oncall_format": OnCallFormat.TEXT,
        "visibility_timeout": 360.0,  # AlertsQueue's VisibilityTimeout in template.yaml
        "reserves": True,
        "owner_tag_key": "",  # owners off
    }


@pytest.mark.parametrize(
    ("variable", "value"),
    [("BATCHPILOT_ONCALL_MESSAGE_FORMAT", "html"), ("BATCHPILOT_ALARM_NAME_PREFIX", "batchpilot/\x07/")],
)
def test_a_bad_alarm_setting_fails_the_cold_start_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError) as error:
        AlertsSettings.from_environ({**BASE_ENV, variable: value}, function="alerts")
    assert variable in str(error.value)
