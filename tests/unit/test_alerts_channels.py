"""Chat channels as plug-ins: what the alerts modules import, the settings that configure a channel,
and the Teams renderer within Teams' limits (checked with the local endpoint's card rules)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest
from batchpilot.alerts.channels.teams import MAX_PAYLOAD_BYTES, card_text, teams_digest, teams_message
from batchpilot.alerts.policy import Channel, RoutingPolicy, Severity
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.shared.settings import ConfigError
from batchpilot_local.chat_endpoint import WebhookRequest, adaptive_card_problem
from batchpilot_local.notifications import notification_from_webhook
from batchpilot_local.testing.alerts import StaticSecrets, fact_of
from batchpilot_local.testing.paths import ROOT
from batchpilot_local.testing.samples import batch_job, sample

BASE_ENV = {
    "BATCHPILOT_STATE_TABLE": "StateTable",
    "BATCHPILOT_ONCALL_TOPIC_ARN": "arn:aws:sns:us-east-1:111122223333:batchpilot-oncall",
}
TEAMS_ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot/teams-webhook-QwErTy"
SLACK_ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot/slack-webhook-AbCdEf"


def test_alerts_modules_import_no_chat_library_http_client_or_boto3() -> None:
    # Cold start: slack_sdk and urllib3 are imported when their channel first posts, boto3 by the
    # adapters that make clients; importing the feature itself loads none of them.
    modules = [
        "batchpilot.alerts.handler",
        "batchpilot.alerts.service",
        "batchpilot.alerts.settings",
        "batchpilot.alerts.channels.slack",
        "batchpilot.alerts.channels.teams",
        "batchpilot.alerts.channels.webhook",
        "batchpilot.alerts.registry",
        "batchpilot.io.webhook",
        "batchpilot.io.secrets",
        "batchpilot.io.sns",
    ]
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + "batchpilot.alerts.channels.registered()\n"  # discovery imports every channel module
        + "loaded = {k.split('.')[0] for k in sys.modules}\n"
        + "print(sorted(loaded & {'slack_sdk', 'urllib3', 'boto3'}))"
    )
    layer = ROOT / "layers" / "batchpilot"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=layer, capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stderr


def test_teams_is_configured_by_its_secret_and_joins_the_default_routes() -> None:
    settings = AlertsSettings.from_environ({**BASE_ENV, "BATCHPILOT_TEAMS_WEBHOOK_SECRET": TEAMS_ARN})
    assert settings.teams_webhook_secret == TEAMS_ARN and settings.chat_channels == (Channel.TEAMS,)
    assert settings.policy.channels_for(Severity.CRITICAL) == (Channel.SNS, Channel.TEAMS)
    both = AlertsSettings.from_environ(
        {
            **BASE_ENV,
            "BATCHPILOT_TEAMS_WEBHOOK_SECRET": TEAMS_ARN,
            "BATCHPILOT_SLACK_WEBHOOK_SECRET": SLACK_ARN,
        }
    )
    assert both.chat_channels == (Channel.SLACK, Channel.TEAMS)
    assert both.policy.channels_for(Severity.INFO) == (Channel.SLACK, Channel.TEAMS)
    none = AlertsSettings.from_environ(BASE_ENV)
    assert none.chat_channels == () and none.policy == RoutingPolicy()


def test_a_webhook_url_in_place_of_the_secret_fails_the_cold_start() -> None:
    url = "https://prod-01.westus.logic.azure.com:443/workflows/0123/triggers/manual/paths/invoke?sig=abc"
    with pytest.raises(ConfigError, match="BATCHPILOT_TEAMS_WEBHOOK_SECRET"):
        AlertsSettings.from_environ({**BASE_ENV, "BATCHPILOT_TEAMS_WEBHOOK_SECRET": url})


def test_card_text_breaks_card_functions_and_drops_control_characters() -> None:
    assert card_text("a {{DATE(2017-02-14T06:08:39Z)}} b") == "a {\u200b{DATE(2017-02-14T06:08:39Z)}\u200b} b"
    assert card_text("bell\x07 tab\tline\nend") == "bell  tab line\nend"  # line breaks stay


def test_a_card_for_a_huge_reason_stays_within_teams_limits() -> None:
    reason = "CannotPullContainerError: " + "é" * 60_000  # two bytes each in UTF-8
    fact = fact_of(batch_job("FAILED", jobName="n" * 200, attempts=[{"container": {"reason": reason}}]))
    message = teams_message(fact, Severity.CRITICAL, "a terminal failure")
    assert len(message.body()) <= MAX_PAYLOAD_BYTES and adaptive_card_problem(message.payload()) is None
    assert message.text.startswith("Critical: container job nnnn")
    assert message.card["fallbackText"] == message.text and message.card["version"] == "1.4"


def test_a_digest_of_many_long_facts_stays_within_teams_limits() -> None:
    facts = [
        fact_of(
            batch_job(
                "FAILED",
                jobArn=f"arn:aws:batch:us-east-1:111122223333:job/{i:08d}-0000-4000-8000-000000000000",
                jobId=f"{i:08d}-0000-4000-8000-000000000000",
                jobName=f"sweep-{i:03d}-" + "n" * 180,
                attempts=[
                    {"container": {}, "statusReason": "Host EC2 (instance i-0abc) terminated. " + "x" * 900}
                ],
            )
        )
        for i in range(200)
    ]
    message = teams_digest(facts, Severity.INFO, "spot interruptions", max_items=40)
    assert len(message.body()) <= MAX_PAYLOAD_BYTES and adaptive_card_problem(message.payload()) is None
    hidden = [b for b in message.card["body"] if "more (list truncated)" in json.dumps(b, ensure_ascii=False)]
    assert len(hidden) == 1


def test_a_teams_card_has_the_facts_reason_links_and_why() -> None:
    fact = fact_of(sample("service-job/failed-sagemaker-capacity"))
    message = teams_message(fact, Severity.INFO, "a CAPACITY failure the recovery function resubmits")
    body = message.card["body"]
    assert body[0] == {
        "type": "TextBlock",
        "text": "🔵 INFO",
        "weight": "Bolder",
        "color": "Accent",
        "wrap": True,
    }
    labels = {
        b["inlines"][0]["text"] for b in body if b["type"] == "RichTextBlock" and len(b["inlines"]) == 2
    }
    assert {"Job: ", "Job queue: ", "Status: ", "Category: ", "Wait time: ", "Run time: "} <= labels
    assert [a["title"] for a in message.card["actions"]] == ["Batch job", "Training job", "Logs"]
    assert "Why info" in body[-1]["inlines"][0]["text"]


def test_every_chat_channel_is_configured_by_its_own_webhook_variable() -> None:
    chat = [c for c in Channel if c is not Channel.SNS]
    assert chat  # Slack and Teams at least
    env = {**BASE_ENV, **{AlertsSettings.webhook_variable(c): f"batchpilot/{c.value}-webhook" for c in chat}}
    settings = AlertsSettings.from_environ(env)
    assert settings.chat_channels == tuple(chat)
    assert settings.webhook_secrets == {c: f"batchpilot/{c.value}-webhook" for c in chat}
    assert AlertsSettings.webhook_variable(Channel.TEAMS) == "BATCHPILOT_TEAMS_WEBHOOK_SECRET"
    with pytest.raises(ConfigError, match="BATCHPILOT_SLACK_WEBHOOK_SECRET"):
        AlertsSettings.from_environ(
            {**BASE_ENV, "BATCHPILOT_SLACK_WEBHOOK_SECRET": "https://hooks.slack.com/x"}
        )


def test_the_registry_builds_exactly_the_configured_channels() -> None:
    from batchpilot.alerts.registry import ChannelRegistry

    secrets = StaticSecrets({})
    teams_only = AlertsSettings.from_environ({**BASE_ENV, "BATCHPILOT_TEAMS_WEBHOOK_SECRET": TEAMS_ARN})
    assert list(ChannelRegistry.configured(teams_only, secrets)) == [Channel.TEAMS]
    assert len(ChannelRegistry.configured(AlertsSettings.from_environ(BASE_ENV), secrets)) == 0
    both = AlertsSettings.from_environ(
        {
            **BASE_ENV,
            "BATCHPILOT_TEAMS_WEBHOOK_SECRET": TEAMS_ARN,
            "BATCHPILOT_SLACK_WEBHOOK_SECRET": SLACK_ARN,
        }
    )
    assert list(ChannelRegistry.configured(both, secrets)) == [Channel.SLACK, Channel.TEAMS]
    assert len(ChannelRegistry.configured(both, None)) == 0  # no secret reader: no chat channel


def test_the_alerts_app_names_no_channel() -> None:
    # Channels register themselves: adding one changes no wiring (functions/alerts/app.py).
    source = (ROOT / "functions" / "alerts" / "app.py").read_text(encoding="utf-8")
    imported = [
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module is not None
    ]
    assert "batchpilot.alerts.registry" in imported
    assert [m for m in imported if m.startswith("batchpilot.alerts.channels")] == []
    assert not any(c.value in source.lower() for c in Channel if c is not Channel.SNS)


def test_a_generic_webhooks_notification_is_its_summary_as_shown() -> None:
    payload = {"embeds": [{"title": "x"}], "content": "Critical: container job \\[dry run\\] a\\_b FAILED"}
    request = WebhookRequest("discord", "/hooks/discord", payload, 204, "", delivered=True)
    assert notification_from_webhook(request) == {
        "channel": "discord",
        "severity": "critical",
        "title": "container job [dry run] a_b FAILED",
    }
    empty = WebhookRequest("discord", "/hooks/discord", {"content": "no severity"}, 204, "")
    assert notification_from_webhook(empty)["severity"] is None
