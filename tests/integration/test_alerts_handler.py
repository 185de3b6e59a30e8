"""The real alerts handler (functions/alerts/app.py): cold-start validation, partial batch responses,
metrics and logs, against moto and the local Slack endpoint; and the replay's notifications."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from batchpilot.shared.observability import metrics as shared_metrics
from batchpilot.shared.settings import ConfigError
from batchpilot_local.chat_endpoint import LocalChatEndpoint, LocalSlack
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.notifications import LocalAlerts
from batchpilot_local.replay import Replayer
from batchpilot_local.testing.alerts import SLACK_PARAMETERS, TEAMS_PARAMETER_VALUE
from batchpilot_local.testing.harness import load_app, metric_values, printed, sqs_event, template_environment
from batchpilot_local.testing.paths import ROOT
from batchpilot_local.testing.samples import sample

QUEUE = "AlertsQueue"


class Env:
    def __init__(self, aws: EmbeddedAws, slack: LocalSlack, local: LocalAlerts, handler: ModuleType):
        self.aws, self.slack, self.local, self.handler = aws, slack, local, handler


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    shared_metrics.clear_metrics()
    with EmbeddedAws() as aws, LocalChatEndpoint() as chat:
        local = LocalAlerts(aws, environment=template_environment("alerts"), chat=chat, slack=True).open()
        handler = load_app("alerts", local.environment, monkeypatch=monkeypatch)
        yield Env(aws, chat.slack, local, handler)
    shared_metrics.clear_metrics()


def test_invalid_policy_fails_the_cold_start_naming_variable_and_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = {
        "BATCHPILOT_STATE_TABLE": "StateTable",
        "BATCHPILOT_ONCALL_TOPIC_ARN": "arn:aws:sns:us-east-1:111122223333:oncall",
        "BATCHPILOT_ALERT_POLICY": json.dumps(
            {"channels": {"critical": ["pagerduty"], "warning": [], "info": []}}
        ),
    }
    with pytest.raises(ConfigError) as error:
        load_app("alerts", env, monkeypatch=monkeypatch)
    assert "BATCHPILOT_ALERT_POLICY" in str(error.value) and "channels.critical.0" in str(error.value)


def test_batch_with_good_bad_and_secret_carrying_events(
    deployed: Env, lambda_context: Any, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    secretive = sample("batch-job/failed-spot-reclaim")  # its container environment holds a fake secret
    assert "not-a-real-secret" in json.dumps(secretive)
    bodies = ["{not json", json.dumps(sample("service-job/failed-validation")), json.dumps(secretive)]
    response = deployed.handler.lambda_handler(sqs_event(bodies, QUEUE), lambda_context)
    assert response == {"batchItemFailures": []}
    blobs, _, out = printed(capsys)
    logged = out + "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert "not-a-real-secret" not in logged
    assert deployed.slack.webhook_path not in logged
    assert sorted(
        d["Severity"] for _, d in metric_values(blobs, "NotificationsSent") if d["Channel"] == "slack"
    ) == [
        "critical",
        "info",
    ]
    assert [(v, d) for v, d in metric_values(blobs, "NotificationsSent") if d["Channel"] == "sns"] == [
        (1.0, {"Channel": "sns", "Severity": "critical", "Function": "alerts", "service": "batchpilot"})
    ]
    assert metric_values(blobs, "InvalidEvents") == [(1.0, {"Function": "alerts", "service": "batchpilot"})]
    # One count per record (count_outcome): two processed events.
    assert sum(value for value, _ in metric_values(blobs, "EventsProcessed")) == 2.0
    invalid = [r for r in caplog.records if getattr(r, "outcome", None) == "invalid"]
    assert len(invalid) == 1 and invalid[0].levelname == "WARNING"


def test_undeliverable_records_are_reported_and_counted(
    deployed: Env, lambda_context: Any, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    deployed.aws.client("sns").delete_topic(TopicArn=deployed.local.topic_arn)
    deployed.slack.fail_always("channel_is_archived")
    bodies = [json.dumps(sample("service-job/failed-validation")), json.dumps(sample("batch-job/succeeded"))]
    response = deployed.handler.lambda_handler(sqs_event(bodies, QUEUE), lambda_context)
    assert response == {"batchItemFailures": [{"itemIdentifier": "msg-0"}]}
    blobs, _, _ = printed(capsys)
    failed = {(d["Channel"], d.get("Reason")): v for v, d in metric_values(blobs, "NotificationsFailed")}
    assert failed == {
        ("sns", "NotFound"): 1.0,
        ("slack", "channel_is_archived"): 1.0,
        ("sns", None): 1.0,
        ("slack", None): 1.0,
    }
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert [r.getMessage() for r in errors] == ["notification not delivered; the event will be retried"]
    assert metric_values(blobs, "EventsFailed")[0][0] == 1.0


def test_duplicate_and_stale_events_are_counted(
    deployed: Env, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    event = sample("service-job/failed-validation")
    deployed.handler.lambda_handler(sqs_event([json.dumps(event)], QUEUE), lambda_context)
    copy = {**event, "id": "another-envelope-id"}
    stale = sample("service-job/running") | {
        "detail": {**sample("service-job/running")["detail"], "jobArn": event["detail"]["jobArn"]}
    }
    capsys.readouterr()
    blocked = sample("service-job-queue-blocked/capacity-insufficient-instance-capacity")
    blocked["detail"]["jobArn"] = event["detail"]["jobArn"]  # a blocked event after the job failed
    deployed.handler.lambda_handler(
        sqs_event([json.dumps(copy), json.dumps(stale), json.dumps(blocked)], QUEUE), lambda_context
    )
    blobs, _, _ = printed(capsys)
    assert metric_values(blobs, "DuplicateAlertsSuppressed")[0][0] == 1.0
    assert metric_values(blobs, "StaleAlertsSuppressed")[0][0] == 1.0
    assert len(deployed.slack.delivered()) == 1


# ---------------------------------------------------------------------------------------- replay
def test_replay_reports_who_would_be_told() -> None:
    events = [
        sample("service-job/failed-validation"),
        sample("batch-job/failed-attempt-timeout"),
        sample("batch-job/succeeded"),
        {**sample("service-job/failed-validation"), "id": "a-duplicate-with-another-id"},
    ]
    reports = Replayer(ROOT / "template.yaml", SLACK_PARAMETERS).run(events)
    assert all("alerts" in r.functions for r in reports)
    assert [r.errors for r in reports] == [[], [], [], []]
    title = "service job llama-spot-run47 FAILED (MISCONFIGURATION) on sm-training-highpri"
    assert reports[0].notifications == [
        {"channel": "sns", "severity": "critical", "title": title},
        {"channel": "slack", "severity": "critical", "title": title},
    ]
    assert reports[1].notifications == [
        {
            "channel": "slack",
            "severity": "warning",
            "title": "container job resnet50-imagenet-ablation-3 FAILED (TIMEOUT) on ml-training-research",
        }
    ]
    assert reports[2].notifications == []
    assert reports[3].notifications == []  # exactly once, whatever the envelope id
    assert json.loads(reports[0].to_json())["notifications"][0]["channel"] == "sns"


def test_exactly_once_scenario_replays_as_described() -> None:
    scenario = json.loads((ROOT / "events" / "scenarios" / "alerts" / "exactly-once.json").read_text())
    reports = Replayer(ROOT / "template.yaml", SLACK_PARAMETERS).run(
        scenario["events"], worlds=[scenario["world"]]
    )
    assert [r.errors for r in reports] == [[]] * 5
    assert [[(n["channel"], n["severity"]) for n in r.notifications] for r in reports] == [
        [("sns", "critical"), ("slack", "critical")],
        [],  # the same fact under another envelope id
        [],  # an older RUNNING after the terminal FAILED
        [("sns", "critical"), ("slack", "critical")],  # budget exhausted
        [],
    ]


# ----------------------------------------------------------------------------------------- Teams
def test_the_handler_posts_to_teams_when_its_secret_is_set(
    monkeypatch: pytest.MonkeyPatch, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    shared_metrics.clear_metrics()
    with EmbeddedAws() as aws, LocalChatEndpoint() as chat:
        local = LocalAlerts(
            aws, environment=template_environment("alerts"), chat=chat, slack=True, teams=True
        ).open()
        handler = load_app("alerts", local.environment, monkeypatch=monkeypatch)
        chat.teams.fail_next("server_error")  # the first event's card: Slack got it, nobody paged
        for name in ("batch-job/failed-spot-reclaim", "batch-job/failed-attempt-timeout"):
            response = handler.lambda_handler(sqs_event([json.dumps(sample(name))], QUEUE), lambda_context)
            assert response == {"batchItemFailures": []}
        blobs, _, _ = printed(capsys)
        assert [r.status for r in chat.teams.requests] == [500, 202]
        sent = sorted((d["Channel"], d["Severity"]) for _, d in metric_values(blobs, "NotificationsSent"))
        assert sent == [("slack", "info"), ("slack", "warning"), ("teams", "warning")]
        assert local.sns_messages() == []
        failed = {(d["Channel"], d.get("Reason")) for _, d in metric_values(blobs, "NotificationsFailed")}
        assert failed == {("teams", "http_500"), ("teams", None)}
    shared_metrics.clear_metrics()


def test_replay_shows_teams_beside_slack_when_the_parameter_is_set() -> None:
    # As `batchpilot replay --parameter-overrides 'TeamsWebhookSecretArn=... SlackWebhookSecretArn=...'`.
    parameters = {"TeamsWebhookSecretArn": TEAMS_PARAMETER_VALUE, **SLACK_PARAMETERS}
    reports = Replayer(ROOT / "template.yaml", parameters=parameters).run(
        [sample("service-job/failed-validation"), sample("batch-job/failed-attempt-timeout")]
    )
    assert [r.errors for r in reports] == [[], []]
    title = "service job llama-spot-run47 FAILED (MISCONFIGURATION) on sm-training-highpri"
    assert reports[0].notifications == [
        {"channel": "sns", "severity": "critical", "title": title},
        {"channel": "slack", "severity": "critical", "title": title},
        {"channel": "teams", "severity": "critical", "title": title},
    ]
    assert [(n["channel"], n["severity"]) for n in reports[1].notifications] == [
        ("slack", "warning"),
        ("teams", "warning"),
    ]
