"""The pure incident rules (alerts/incidents.py): which incident a fact belongs to, the summary
timer's body and delay, and the summary's count in every channel's digest."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from batchpilot.alerts.channels.slack import slack_digest
from batchpilot.alerts.channels.teams import teams_digest
from batchpilot.alerts.facts import AlertFact
from batchpilot.alerts.incidents import (
    MAX_DELAY_SECONDS,
    IncidentKey,
    Scope,
    incident_id,
    incident_key,
    parse_timer,
    summary_delay,
    takes_members,
    timer_body,
)
from batchpilot.alerts.oncall import sns_digest
from batchpilot.alerts.policy import Severity
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.alerts.severity import default_severity
from batchpilot.shared.own_events import CapacityLimited, CapacityLimitReason, GpuIdleReason, JobGpuIdle
from batchpilot.shared.settings import ConfigError
from batchpilot_local.testing.alerts import fact_of, failed_fleet, own_envelope
from batchpilot_local.testing.samples import sample

REASON = "CannotPullContainerError: pull access denied"
OPENED = datetime(2026, 12, 2, 10, tzinfo=UTC)
WINDOW = timedelta(minutes=10)


def test_facts_of_one_kind_queue_and_severity_share_an_incident() -> None:
    first, second = (fact_of(e) for e in failed_fleet(2, REASON, series="4141"))
    key = incident_key(first, Severity.CRITICAL)
    assert key is not None and key == incident_key(second, Severity.CRITICAL)
    assert key.scope is Scope.JOB_QUEUE and key.name == first.job_queue
    # Another severity, another category: other incidents.
    assert incident_key(first, Severity.WARNING) != key
    [oom] = (fact_of(e) for e in failed_fleet(1, "OutOfMemoryError: Container killed", series="4142"))
    assert incident_key(oom, Severity.CRITICAL) != key


def test_alarms_and_silent_facts_are_not_incidents() -> None:
    alarm = fact_of(sample("cloudwatch-alarm/alerts-errors-alarm"))
    assert incident_key(alarm, Severity.CRITICAL) is None
    [fact] = (fact_of(e) for e in failed_fleet(1, REASON, series="4143"))
    assert incident_key(fact, Severity.SILENT) is None


def test_an_own_event_without_a_queue_is_an_incident_of_its_share_or_none() -> None:
    [fact] = (fact_of(e) for e in failed_fleet(1, REASON, series="4144"))
    assert incident_key(fact, Severity.CRITICAL) is not None
    capacity = fact_of(own_envelope(_capacity_limited()))
    assert capacity.job_queue is None and capacity.share_identifier is None
    assert incident_key(capacity, Severity.CRITICAL) is None


def _capacity_limited() -> CapacityLimited:
    return CapacityLimited(
        time=OPENED,
        service_environment="sm-training",
        capacity_unit="ml.p4d.24xlarge",
        current_max=64,
        desired=96,
        configured_max=64,
        limit_reason=CapacityLimitReason.AT_MAX,
        message="at its maximum",
    )


def test_the_timer_body_round_trips_and_an_event_is_no_timer() -> None:
    key = IncidentKey(
        Scope.JOB_QUEUE, "ml-training-highpri", "state-change:MISCONFIGURATION", Severity.CRITICAL
    )
    incident = incident_id(OPENED, "arn:aws:batch:...:job/1#FAILED#1")
    timer = parse_timer(timer_body(key, incident))
    assert timer is not None and (timer.key, timer.incident) == (key, incident)
    assert parse_timer(json.dumps(sample("batch-job/failed-spot-reclaim"))) is None
    assert parse_timer('{"batchpilot-incident-summary": 1, "key": {"scope": "nope"}}') is None
    assert parse_timer(b"\xff not json batchpilot-incident-summary") is None


def test_the_summary_is_due_at_the_window_end_within_sqs_delay_limit() -> None:
    assert summary_delay(OPENED, WINDOW, OPENED + timedelta(seconds=59.5)) == 541
    assert summary_delay(OPENED, WINDOW, OPENED + timedelta(minutes=11)) == 0
    assert summary_delay(OPENED, timedelta(hours=1), OPENED) == MAX_DELAY_SECONDS


def test_an_incident_takes_facts_until_closed_or_its_window_and_grace_passed() -> None:
    assert takes_members(OPENED, WINDOW, OPENED + timedelta(minutes=12), closed=False)
    assert not takes_members(OPENED, WINDOW, OPENED + timedelta(minutes=1), closed=True)
    assert not takes_members(OPENED, WINDOW, OPENED + timedelta(minutes=26), closed=False)


def test_a_summary_counts_the_whole_incident_in_every_channel() -> None:
    [first] = (fact_of(e) for e in failed_fleet(1, REASON, series="4145"))
    sns = sns_digest([first], Severity.CRITICAL, "incident summary: ...", total=1000)
    assert sns.subject.startswith("[CRITICAL] 1000 container jobs") and "... and 999 more" in sns.body
    assert sns.attributes["group_size"] == "1000"
    slack = slack_digest([first], Severity.CRITICAL, "incident summary: ...", total=1000)
    assert "1000 container jobs" in slack.text and "…and 999 more" in json.dumps(
        slack.blocks, ensure_ascii=False
    )
    teams = teams_digest([first], Severity.CRITICAL, "incident summary: ...", total=1000)
    assert "1000 container jobs" in teams.text and "…and 999 more" in json.dumps(
        teams.card, ensure_ascii=False
    )


ENV = {
    "BATCHPILOT_STATE_TABLE": "StateTable",
    "BATCHPILOT_ONCALL_TOPIC_ARN": "arn:aws:sns:us-east-1:111122223333:batchpilot-oncall",
    "BATCHPILOT_ALERTS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/111122223333/AlertsQueue",
}


def test_the_window_is_validated_at_cold_start_and_needs_the_queue() -> None:
    assert AlertsSettings.from_environ(ENV, function="alerts").service_args["incident_window"] == 600.0
    five = {**ENV, "BATCHPILOT_INCIDENT_WINDOW_MINUTES": "5"}
    assert AlertsSettings.from_environ(five, function="alerts").service_args["incident_window"] == 300.0
    off = {**ENV, "BATCHPILOT_INCIDENT_WINDOW_MINUTES": "0"}
    assert AlertsSettings.from_environ(off, function="alerts").service_args["incident_window"] == 0.0
    no_queue = {k: v for k, v in ENV.items() if k != "BATCHPILOT_ALERTS_QUEUE_URL"}
    assert AlertsSettings.from_environ(no_queue, function="alerts").service_args["incident_window"] == 0.0
    # Longer than SQS's 900 s DelaySeconds: refused, naming the variable.
    with pytest.raises(ConfigError, match="BATCHPILOT_INCIDENT_WINDOW_MINUTES"):
        AlertsSettings.from_environ({**ENV, "BATCHPILOT_INCIDENT_WINDOW_MINUTES": "16"}, function="alerts")


def test_a_gpu_resolution_is_never_an_incident_its_idle_fact_is() -> None:
    # A resolution (Job GPU Idle ACTIVE, info) replies in its own job's thread: never a digest
    # of other jobs' resolutions on the same job queue.
    def gpu(reason: GpuIdleReason, job: str) -> AlertFact:
        event = JobGpuIdle(
            time=OPENED,
            job_arn=f"arn:aws:batch:us-east-1:111122223333:service-job/{job}",
            job_kind="service-job",
            job_queue="research-q",
            reason=reason,
            idle_since=OPENED - timedelta(hours=1),
            message="m",
        )
        return fact_of(own_envelope(event))

    idle, back = gpu(GpuIdleReason.IDLE, "a"), gpu(GpuIdleReason.ACTIVE, "a")
    severity, _ = default_severity(back)
    assert severity is Severity.INFO and back.is_resolution and not idle.is_resolution
    assert default_severity(idle)[0] is Severity.WARNING
    assert incident_key(idle, Severity.WARNING) is not None
    assert (
        incident_key(back, severity) is None
        and incident_key(gpu(GpuIdleReason.ACTIVE, "b"), severity) is None
    )
    assert back.thread_subject == idle.thread_subject and back.key != idle.key
