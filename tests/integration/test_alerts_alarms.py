"""The stack's CloudWatch alarms end to end (docs/alerts.md, "Alarms"): the real alerts service and
handler with their adapters against the embedded AWS (SNS, DynamoDB, Secrets Manager) and the local
Slack and Teams endpoints, configured as template.yaml configures the function; the pager advice of
docs/alerts.md, "The on-call topic", replayed through SNS subscriptions; and `batchpilot replay`.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from batchpilot.alerts.policy import RoutingPolicy, Severity
from batchpilot.alerts.registry import ChannelRegistry
from batchpilot.alerts.service import BatchResult
from batchpilot.alerts.severity import decide
from batchpilot.shared.observability import metrics as shared_metrics
from batchpilot.shared.records import Outcome
from batchpilot_local.chat_endpoint import LocalChatEndpoint, adaptive_card_problem, block_kit_problem
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.notifications import LocalAlerts
from batchpilot_local.replay import Replayer
from batchpilot_local.template import resolved_resources
from batchpilot_local.testing.alerts import (
    ENV,
    SLACK_PARAMETERS,
    TEAMS_PARAMETER_VALUE,
    Rig,
    fact_of,
    open_rig,
)
from batchpilot_local.testing.harness import load_app, metric_values, printed, sqs_event, template_environment
from batchpilot_local.testing.paths import ROOT, TEMPLATE_PATH
from batchpilot_local.testing.samples import sample, sample_event_paths

FIRES = "cloudwatch-alarm/job-failure-rate-alarm"
COPY = "cloudwatch-alarm/job-failure-rate-copy"
RESOLVES = "cloudwatch-alarm/job-failure-rate-ok"
ALERTS_PATH = "cloudwatch-alarm/alerts-errors-alarm"
WARNING = "cloudwatch-alarm/lost-instance-hours-alarm"
ALARM_TITLE = "alarm batchpilot/batchpilot/JobQueueFailureRateAlarm is in ALARM"


def deployed_environment(**extra: str) -> dict[str, str]:
    """The alerts function's environment as template.yaml sets it (alarm prefix, the alarms that
    notify a topic themselves), with the rig's table and topic."""
    return {**template_environment("alerts"), **ENV, **extra}


@pytest.fixture
def rig() -> Iterator[Rig]:
    yield from open_rig(teams=True, environment=deployed_environment())


@pytest.fixture
def bot_rig() -> Iterator[Rig]:
    yield from open_rig(bot=True, environment=deployed_environment())


def refire(name: str, timestamp: str, value: str, previous: str, previous_timestamp: str) -> dict[str, Any]:
    """The sample ``name`` as a later state change of the same alarm."""
    event = sample(name)
    event["id"] = f"9e9e9e9e-0000-4000-8000-{abs(hash(timestamp)) % 10**12:012d}"
    event["detail"]["state"] |= {"value": value, "timestamp": timestamp}
    event["detail"]["previousState"] |= {"value": previous, "timestamp": previous_timestamp}
    return event


# ------------------------------------------------------------------------------- SNS, Slack, Teams
def test_a_critical_alarm_reaches_the_on_call_topic_slack_and_teams_once(rig: Rig) -> None:
    result = rig.run(sample(FIRES))
    assert [(r.outcome, r.severity) for r in result.records] == [(Outcome.PROCESSED, Severity.CRITICAL)]
    assert sorted(result.records[0].channels) == ["slack", "sns", "teams"]
    [page] = rig.sns()
    assert page["Subject"] == f"[CRITICAL] {ALARM_TITLE}"
    attributes = {k: v["Value"] for k, v in page["MessageAttributes"].items()}
    assert attributes == {
        "severity": "critical",
        "event_kind": "alarm-state-change",
        "alarm_name": "batchpilot/batchpilot/JobQueueFailureRateAlarm",
    }
    assert "Alarm:        batchpilot/batchpilot/JobQueueFailureRateAlarm" in page["Message"]
    assert "more than 25% of the jobs of one job queue that ended failed" in page["Message"]
    [slack] = rig.slack_delivered()
    assert slack["text"].startswith(f"Critical: {ALARM_TITLE}") and block_kit_problem(slack) is None
    [teams] = rig.teams.delivered()
    assert adaptive_card_problem(teams.payload) is None and ALARM_TITLE in json.dumps(teams.card)
    # The same state change under another envelope id: nothing more, anywhere.
    again = rig.run(sample(COPY))
    assert again.records[0].outcome is Outcome.DUPLICATE
    assert rig.sns() == [] and len(rig.slack_delivered()) == 1 and len(rig.teams.delivered()) == 1


def test_the_resolution_is_info_in_chat_and_never_pages(rig: Rig) -> None:
    rig.run(sample(FIRES))
    rig.sns()
    result = rig.run(sample(RESOLVES))
    assert result.records[0].severity is Severity.INFO
    assert rig.sns() == []  # chat works: info stays out of the on-call topic
    texts = [p["text"] for p in rig.slack_delivered()]
    assert texts[-1].startswith("Info: resolved: alarm batchpilot/batchpilot/JobQueueFailureRateAlarm is OK")
    card = json.dumps(rig.teams.delivered()[-1].card)
    assert "In ALARM for: " in card and "1h 15m 00s" in card


def test_an_older_state_change_after_a_newer_one_sends_nothing(rig: Rig) -> None:
    rig.run(sample(RESOLVES))
    late = rig.run(sample(FIRES))
    assert late.records[0].suppressed == "stale" and late.records[0].outcome is Outcome.PROCESSED
    assert rig.sns() == [] and len(rig.slack_delivered()) == 1  # the resolution only


def test_in_bot_mode_each_time_an_alarm_fires_opens_a_thread_its_resolution_replies_in(bot_rig: Rig) -> None:
    bot_rig.run(sample(FIRES))
    bot_rig.run(sample(RESOLVES))
    # The same alarm fires again the next day, and resolves.
    bot_rig.run(refire(FIRES, "2026-11-23T10:00:12.100+0000", "ALARM", "OK", "2026-11-22T21:20:12.406+0000"))
    bot_rig.run(
        refire(RESOLVES, "2026-11-23T10:30:12.200+0000", "OK", "ALARM", "2026-11-23T10:00:12.100+0000")
    )
    posts = bot_rig.slack.delivered()
    assert [p.kind for p in posts] == ["chat.postMessage"] * 4
    threads = [p.payload.get("thread_ts") for p in posts]
    assert threads == [None, posts[0].ts, None, posts[2].ts] and posts[0].ts != posts[2].ts


# --------------------------------------------------------------------------- the alerts path
def test_the_alerts_paths_alarms_go_to_chat_only_even_when_chat_fails(rig: Rig) -> None:
    result = rig.run(sample(ALERTS_PATH))
    assert result.records[0].severity is Severity.CRITICAL
    assert sorted(result.records[0].channels) == ["slack", "teams"]
    assert rig.sns() == []  # CloudWatch notified AlertsWatchdogTopic itself: no second page
    rig.slack.fail_always("no_service")
    rig.teams.fail_always("server_error")
    second = refire(
        ALERTS_PATH, "2026-11-23T03:00:41.000+0000", "ALARM", "OK", "2026-11-22T23:00:00.000+0000"
    )
    failed = rig.run(second)
    record = failed.records[0]
    assert not record.failed and record.outcome is Outcome.PROCESSED  # not retried, not lost
    assert record.error is not None and "the alarm notified its topic" in record.error
    assert sorted(failed.failed) == [("slack", "no_service"), ("teams", "http_500")]  # still counted
    assert rig.sns() == []  # and no chat fallback to the on-call topic either


def test_with_no_chat_configured_the_alerts_paths_alarms_send_nothing_more(rig: Rig) -> None:
    result = rig.run(sample(ALERTS_PATH), channels=ChannelRegistry([]))
    assert [(r.outcome, r.channels, r.failed) for r in result.records] == [(Outcome.PROCESSED, [], False)]
    assert rig.sns() == []


def test_with_alarm_action_topic_every_alarm_goes_to_chat_only() -> None:
    # AlarmActionTopicArn set: every alarm notifies that topic itself (template: "*").
    for rig in open_rig(environment=deployed_environment(BATCHPILOT_ALARMS_NOTIFIED_DIRECTLY="*")):
        result = rig.run(sample(FIRES))
        assert result.records[0].channels == ["slack"] and rig.sns() == []


def test_another_stacks_alarm_is_ignored(rig: Rig) -> None:
    event = sample(FIRES)
    event["detail"]["alarmName"] = "batchpilot/batchpilot-prod/JobQueueFailureRateAlarm"
    result = rig.run(event)
    record = result.records[0]
    assert record.outcome is Outcome.IGNORED and record.rejected is not None
    assert "batchpilot/batchpilot/" in record.rejected.error
    assert rig.sns() == [] and rig.slack.requests == []


# ---------------------------------------------------------------------------------- bad input
def unknown_severity(timestamp: str) -> dict[str, Any]:
    event = refire(WARNING, timestamp, "ALARM", "OK", "2026-11-22T22:00:37.659+0000")
    description = event["detail"]["configuration"]["description"]
    event["detail"]["configuration"]["description"] = description.replace(
        "Severity: warning.", "Severity: p2."
    )
    return event


def test_an_alarm_with_an_unknown_severity_pages_with_the_default_and_says_so_once(rig: Rig) -> None:
    service = rig.service()  # one function instance, two invocations

    def run(event: dict[str, Any]) -> BatchResult:
        return service.process([("m-0", json.dumps(event))], time_left=lambda: 60.0)

    first = run(unknown_severity("2026-11-22T23:00:37.815+0000"))
    later = run(unknown_severity("2026-11-23T05:00:37.815+0000"))
    assert [r.severity for r in (*first.records, *later.records)] == [Severity.CRITICAL] * 2
    warning = first.records[0].warning
    assert warning is not None
    assert warning == (
        'alarm batchpilot/batchpilot/LostInstanceHoursAlarm: unknown severity "p2" in its description; '
        "it gets the default severity, critical"
    )
    assert later.records[0].warning is None  # once per alarm
    pages = rig.sns()
    assert len(pages) == 2 and 'unknown severity "p2" in its description: the default' in pages[0]["Message"]


class Deployed:
    def __init__(self, aws: EmbeddedAws, local: LocalAlerts, handler: ModuleType) -> None:
        self.aws, self.local, self.handler = aws, local, handler


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    shared_metrics.clear_metrics()
    with EmbeddedAws() as aws, LocalChatEndpoint() as chat:
        local = LocalAlerts(aws, environment=template_environment("alerts"), chat=chat).open()
        yield Deployed(aws, local, load_app("alerts", local.environment, monkeypatch=monkeypatch))
    shared_metrics.clear_metrics()


def test_the_handler_logs_an_unknown_severity_once_and_counts_a_broken_alarm_event_as_invalid(
    deployed: Deployed,
    lambda_context: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = sample(FIRES)
    del broken["detail"]["state"]["timestamp"]
    batches = [
        [unknown_severity("2026-11-22T23:00:37.815+0000"), broken],
        [unknown_severity("2026-11-23T05:00:37.815+0000")],
    ]
    for batch in batches:
        response = deployed.handler.lambda_handler(
            sqs_event([json.dumps(e) for e in batch], "AlertsQueue"), lambda_context
        )
        assert response == {"batchItemFailures": []}  # neither is retried
    blobs, _, _ = printed(capsys)
    said = [r for r in caplog.records if r.getMessage() == "alarm severity not stated"]
    assert len(said) == 1 and said[0].levelname == "WARNING"
    assert "LostInstanceHoursAlarm" in said[0].__dict__["warning"]
    assert metric_values(blobs, "InvalidEvents") == [(1.0, {"Function": "alerts", "service": "batchpilot"})]
    invalid = [r for r in caplog.records if getattr(r, "outcome", None) == "invalid"]
    assert len(invalid) == 1 and "detail.state.timestamp" in invalid[0].__dict__["error"]
    assert invalid[0].__dict__["detail_type"] == "CloudWatch Alarm State Change"
    pages = [d for _, d in metric_values(blobs, "NotificationsSent") if d["Channel"] == "sns"]
    assert [d["Severity"] for d in pages] == ["critical", "critical"]


# ------------------------------------------------------------------- the pager advice of the docs
def pager_commands() -> dict[str, dict[str, Any]]:
    """docs/alerts.md's pager subscriptions: topic output key → the subscription's attributes."""
    text = (ROOT / "docs" / "alerts.md").read_text(encoding="utf-8")
    block = text.split("<!-- pager-subscriptions -->", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    joined = block.replace("\\\n", " ")
    outputs = dict(re.findall(r"(\w+)=\$\(aws cloudformation describe-stacks .*?OutputKey=='(\w+)'", joined))
    found: dict[str, dict[str, Any]] = {}
    for line in joined.splitlines():
        words = shlex.split(line)
        if words[:3] != ["aws", "sns", "subscribe"]:
            continue
        options = dict(zip(words[3::2], words[4::2], strict=True))
        variable = options["--topic-arn"].removeprefix("$")
        attributes = json.loads(options.get("--attributes", "{}"))
        found[outputs[variable]] = attributes
    return found


def test_the_docs_subscribe_the_pager_to_both_topics() -> None:
    commands = pager_commands()
    assert commands == {
        "AlertsOnCallTopicArn": {"FilterPolicy": json.dumps({"severity": ["critical"]})},
        "AlertsWatchdogTopicArn": {},
    }
    outputs = {name: o["Value"]["Ref"] for name, o in _template_outputs().items() if "Ref" in o["Value"]}
    assert {outputs[key] for key in commands} == {"AlertsOnCallTopic", "AlertsWatchdogTopic"}


def _template_outputs() -> dict[str, Any]:
    from batchpilot_local.template import parse_file

    return dict(parse_file(TEMPLATE_PATH)["Outputs"])


def notifying_samples() -> list[str]:
    names = []
    for path in sample_event_paths():
        name = f"{path.parent.name}/{path.stem}"
        if path.parent.name != "ignored" and decide(fact_of(sample(name)), RoutingPolicy()).notify:
            names.append(name)
    return names


def test_the_docs_pager_gets_every_critical_fact_alarms_included_and_nothing_else(rig: Rig) -> None:
    """Every sample replayed on its own through the deployed configuration, with chat failing (so
    warning and info facts reach the on-call topic too), and the pager subscribed as the docs say."""
    sns, sqs = rig.aws.client("sns"), rig.aws.client("sqs")
    # The watchdog topic as the template names the alerts path's alarm actions.
    [watchdog_arn] = {
        arn
        for p in resolved_resources(TEMPLATE_PATH, "AWS::CloudWatch::Alarm").values()
        for arn in p.get("AlarmActions", [])
    }
    watchdog = sns.create_topic(Name=watchdog_arn.rsplit(":", 1)[1])["TopicArn"]
    assert watchdog == watchdog_arn
    topics = {"AlertsOnCallTopicArn": rig.local.topic_arn, "AlertsWatchdogTopicArn": watchdog}
    pager = sqs.create_queue(QueueName="pager")["QueueUrl"]
    for output, attributes in pager_commands().items():
        sns.subscribe(
            TopicArn=topics[output],
            Protocol="sqs",
            Endpoint=rig.aws.queue_arn("pager"),
            Attributes=attributes,
        )
    rig.slack.fail_always("no_service")
    rig.teams.fail_always("server_error")

    names = notifying_samples()
    assert any(n.startswith("cloudwatch-alarm/") for n in names) and len(names) >= 30
    published: list[dict[str, Any]] = []
    expected_pages = 0
    for name in names:
        event = sample(name)
        result = rig.run(event)
        [record] = result.records
        if record.suppressed is None and record.severity is Severity.CRITICAL and name != ALERTS_PATH:
            expected_pages += 1
        published += rig.sns()
    critical = [m for m in published if m["MessageAttributes"]["severity"]["Value"] == "critical"]
    others = [m for m in published if m["MessageAttributes"]["severity"]["Value"] != "critical"]
    assert len(critical) == expected_pages and others  # warning and info fell back to the topic
    assert f"[CRITICAL] {ALARM_TITLE}" in {m["Subject"] for m in critical}

    # CloudWatch's own notification for the alerts path's alarm (no message attributes), as its
    # AlarmActions publish it: the function was down, say.
    sns.publish(
        TopicArn=watchdog,
        Subject='ALARM: "batchpilot/batchpilot/AlertsErrorsAlarm" in US East (N. Virginia)',
        Message=json.dumps(
            {"AlarmName": "batchpilot/batchpilot/AlertsErrorsAlarm", "NewStateValue": "ALARM"}
        ),
    )
    paged: list[dict[str, Any]] = []
    while batch := sqs.receive_message(QueueUrl=pager, MaxNumberOfMessages=10).get("Messages", []):
        paged += [json.loads(m["Body"]) for m in batch]
        sqs.delete_message_batch(
            QueueUrl=pager,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
        )
    from_oncall = sorted(m["Subject"] for m in paged if m["TopicArn"] == rig.local.topic_arn)
    assert from_oncall == sorted(m["Subject"] for m in critical)  # every critical fact, nothing else
    assert [m["Subject"] for m in paged if m["TopicArn"] == watchdog] == [
        'ALARM: "batchpilot/batchpilot/AlertsErrorsAlarm" in US East (N. Virginia)'
    ]


# -------------------------------------------------------------------------------------- replay
def test_replay_of_the_alarm_samples_reaches_sns_slack_and_teams() -> None:
    paths = sorted((ROOT / "events" / "cloudwatch-alarm").glob("*.json"))
    assert len(paths) >= 5
    events = [json.loads(Path(p).read_text()) for p in paths]
    reports = Replayer(
        ROOT / "template.yaml",
        parameters={"TeamsWebhookSecretArn": TEAMS_PARAMETER_VALUE, **SLACK_PARAMETERS},
    ).run(events)
    assert [r.errors for r in reports] == [[]] * len(paths)
    assert all(r.functions == ["alerts"] for r in reports)
    shown = {
        p.stem: [(n["channel"], n["severity"]) for n in r.notifications]
        for p, r in zip(paths, reports, strict=True)
    }
    assert shown == {
        "alerts-errors-alarm": [("slack", "critical"), ("teams", "critical")],  # its own action pages
        "idle-while-queued-ok-after-insufficient-data": [],  # a new alarm's first OK
        "job-failure-rate-alarm": [("sns", "critical"), ("slack", "critical"), ("teams", "critical")],
        "job-failure-rate-copy": [],  # the same state change again
        "job-failure-rate-ok": [("slack", "info"), ("teams", "info")],
        "lost-instance-hours-alarm": [("slack", "warning"), ("teams", "warning")],
    }
    titles = {n["title"] for r in reports for n in r.notifications}
    assert ALARM_TITLE in titles
