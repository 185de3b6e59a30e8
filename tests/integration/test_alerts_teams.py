"""Microsoft Teams (alerts/channels/teams.py) against the local chat endpoint's Workflows webhook (a
real HTTP server on 127.0.0.1), and the channel registry: digests, threads and the fallback to the
on-call topic are the service's policy for any registered channel, one the service never names
included."""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import urllib3
from batchpilot.alerts import service as service_module
from batchpilot.alerts.channels.teams import MAX_PAYLOAD_BYTES
from batchpilot.alerts.policy import Channel, RoutingPolicy, Severity, load_policy
from batchpilot.alerts.ports import Delivery, Notice, TimeLeft
from batchpilot.alerts.registry import ChannelRegistry
from batchpilot.alerts.service import CHAT_RESERVE_SECONDS
from batchpilot.shared.observability import metrics as shared_metrics
from batchpilot.shared.records import Outcome
from batchpilot_local.chat_endpoint import (
    TEAMS_MAX_MESSAGE_BYTES,
    LocalChatEndpoint,
    LocalTeams,
    adaptive_card_problem,
)
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.notifications import LocalAlerts, notification_from_teams
from batchpilot_local.testing.alerts import Rig, capacity_resubmission, failed_fleet, open_rig, own_envelope
from batchpilot_local.testing.harness import load_app, metric_values, printed, sqs_event, template_environment
from batchpilot_local.testing.samples import batch_job, sample

CRITICAL = "service-job/failed-validation"  # critical → on-call topic + chat
INFO = "batch-job/failed-spot-reclaim"  # info → chat
ADAPTIVE = "application/vnd.microsoft.card.adaptive"


@pytest.fixture
def rig() -> Iterator[Rig]:
    yield from open_rig(teams=True)


@pytest.fixture
def teams_only() -> Iterator[Rig]:
    """Teams the one chat channel: a Teams failure is then a fact no chat channel delivered."""
    yield from open_rig(teams=True, slack=False)


def cards(teams: LocalTeams) -> list[dict[str, Any]]:
    return [r.card for r in teams.delivered()]


def runs(card: dict[str, Any]) -> list[dict[str, Any]]:
    """Every TextRun of the card's body."""
    return [i for b in card["body"] if b["type"] == "RichTextBlock" for i in b["inlines"]]


# ------------------------------------------------------------------------------- the endpoint
def test_the_local_workflow_answers_like_teams() -> None:
    http = urllib3.PoolManager()
    with LocalChatEndpoint() as chat:
        teams = chat.teams
        assert teams.webhook_url.startswith("http://127.0.0.1:") and "sig=" in teams.webhook_url
        card = {"type": "AdaptiveCard", "version": "1.4", "body": [{"type": "TextBlock", "text": "x"}]}
        good = {"type": "message", "attachments": [{"contentType": ADAPTIVE, "content": card}]}
        assert http.request("POST", teams.webhook_url, json=good, retries=False).status == 202
        wrong_sig = teams.webhook_url.replace(teams.signature, "forged")
        assert http.request("POST", wrong_sig, json=good, retries=False).status == 401
        old_card = {"@type": "MessageCard", "text": "x"}  # Workflows take Adaptive Cards only
        assert http.request("POST", teams.webhook_url, json=old_card, retries=False).status == 400
        huge = {**card, "body": [{"type": "TextBlock", "text": "x" * TEAMS_MAX_MESSAGE_BYTES}]}
        too_big = {"type": "message", "attachments": [{"contentType": ADAPTIVE, "content": huge}]}
        assert http.request("POST", teams.webhook_url, json=too_big, retries=False).status == 400
        teams.fail_next("rate_limited", retry_after=7)
        limited = http.request("POST", teams.webhook_url, json=good, retries=False)
        assert (limited.status, limited.headers.get("Retry-After")) == (429, "7")
        for mode, status in (("server_error", 500), ("not_found", 404), ("unauthorized", 401)):
            teams.fail_next(mode)
            assert http.request("POST", teams.webhook_url, json=good, retries=False).status == status
        assert [r.status for r in teams.requests] == [202, 401, 400, 400, 429, 500, 404, 401]
        assert [r.delivered for r in teams.requests] == [True] + [False] * 7
        assert chat.slack.requests == []  # one server, two services, separate logs
        with pytest.raises(ValueError, match="unknown failure mode"):
            teams.fail_next("invalid_blocks")  # a Slack mode


# ----------------------------------------------------------------------------------- delivery
def test_a_fact_is_posted_once_as_an_adaptive_card(rig: Rig) -> None:
    result = rig.run(sample(CRITICAL))
    assert result.records[0].channels == ["sns", "slack", "teams"]
    assert sorted(result.sent) == [("slack", "critical"), ("sns", "critical"), ("teams", "critical")]
    [request] = rig.teams.delivered()
    assert request.status == 202 and adaptive_card_problem(request.payload) is None
    assert request.size <= MAX_PAYLOAD_BYTES
    [attachment] = request.payload["attachments"]
    assert attachment["contentType"] == ADAPTIVE and attachment["content"]["version"] == "1.4"
    title = "service job llama-spot-run47 FAILED (MISCONFIGURATION) on sm-training-highpri"
    assert notification_from_teams(request) == {"channel": "teams", "severity": "critical", "title": title}
    texts = [r["text"] for r in runs(request.card)]
    assert "ValidationException" in " ".join(texts)
    # The card's title says what happened and to which job; the whole title is the fallback text.
    assert "FAILED (MISCONFIGURATION): service job llama-spot-run47 on sm-training-highpri" in texts
    assert request.card["fallbackText"] == f"Critical: {title}"
    assert [a["title"] for a in request.card["actions"]][:1] == ["Batch job"]
    again = rig.run({**sample(CRITICAL), "id": "another-envelope-id"})  # exactly once
    assert again.records[0].outcome is Outcome.DUPLICATE and len(rig.teams.requests) == 1
    assert len(rig.sns()) == 1 and len(rig.slack.delivered()) == 1


def test_429_with_retry_after_is_waited_out_within_the_time_left(rig: Rig) -> None:
    rig.teams.fail_next("rate_limited", retry_after=1)
    result = rig.run(sample(INFO), real_sleep=True)
    assert [r.status for r in rig.teams.requests] == [429, 202]
    assert ("teams", "info") in result.sent and result.failed == [] and rig.sns() == []


def test_429_beyond_the_time_left_falls_back_without_waiting(teams_only: Rig) -> None:
    rig = teams_only
    rig.teams.fail_next("rate_limited", retry_after=30)
    rig.remaining = 20.0  # less than Retry-After + the reserve for the fallback
    result = rig.run(sample(INFO))
    assert rig.sleeps == [] and len(rig.teams.requests) == 1
    assert result.failed == [("teams", "rate_limited")]
    [message] = rig.sns()
    assert "Teams delivery failed: rate_limited" in message["Message"]


def test_429_retries_are_bounded(teams_only: Rig) -> None:
    rig = teams_only
    rig.teams.fail_always("rate_limited", retry_after=2)
    result = rig.run(sample(INFO))
    assert rig.sleeps == [2.0, 2.0, 2.0] and len(rig.teams.requests) == 4
    assert result.failed == [("teams", "rate_limited")] and len(rig.sns()) == 1


@dataclass
class Deployed:
    """functions/alerts/app.py with Teams configured, on the embedded AWS and the local endpoint."""

    teams: LocalTeams
    local: LocalAlerts
    handler: Any


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[Deployed]:
    # Every logger at DEBUG from before the cold start, as Lambda's LOG_LEVEL=DEBUG sets it.
    caplog.set_level(logging.DEBUG)
    shared_metrics.clear_metrics()
    with EmbeddedAws() as aws, LocalChatEndpoint() as chat:
        local = LocalAlerts(  # Teams alone: its failure is a fact no chat channel delivered
            aws, environment=template_environment("alerts"), chat=chat, slack=False, teams=True
        ).open()
        yield Deployed(chat.teams, local, load_app("alerts", local.environment, monkeypatch=monkeypatch))
    shared_metrics.clear_metrics()


def test_the_deployed_handler_waits_out_a_429_and_delivers_exactly_once(
    deployed: Deployed, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # urllib3's Retry, as functions/alerts/app.py builds the channel (time.sleep, the context's time).
    deployed.teams.fail_next("rate_limited", retry_after=1)
    body = json.dumps(sample(INFO))
    response = deployed.handler.lambda_handler(sqs_event([body], "AlertsQueue"), lambda_context)
    assert response == {"batchItemFailures": []}
    assert [r.status for r in deployed.teams.requests] == [429, 202]
    [delivered] = deployed.teams.delivered()
    assert adaptive_card_problem(delivered.payload) is None
    blobs, _, _ = printed(capsys)
    sent = {(d["Channel"], d["Severity"]) for _, d in metric_values(blobs, "NotificationsSent")}
    assert ("teams", "info") in sent and metric_values(blobs, "NotificationsFailed") == []
    assert deployed.local.sns_messages() == []
    deployed.handler.lambda_handler(sqs_event([body], "AlertsQueue"), lambda_context)  # SQS redelivery
    assert len(deployed.teams.delivered()) == 1 and len(deployed.teams.requests) == 2


def test_the_deployed_handler_counts_a_429_that_never_ends_and_falls_back_once(
    deployed: Deployed,
    lambda_context: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    deployed.teams.fail_always("rate_limited", retry_after=1)
    body = json.dumps(sample(INFO))
    response = deployed.handler.lambda_handler(sqs_event([body], "AlertsQueue"), lambda_context)
    assert response == {"batchItemFailures": []}  # the on-call topic stood in: nothing retried
    assert [r.status for r in deployed.teams.requests] == [429] * 4  # the first post and 3 retries
    assert deployed.teams.delivered() == []
    blobs, _, out = printed(capsys)
    failed = {(d["Channel"], d.get("Reason")): v for v, d in metric_values(blobs, "NotificationsFailed")}
    assert failed == {("teams", "rate_limited"): 1.0, ("teams", None): 1.0}
    [message] = deployed.local.sns_messages()
    assert "Teams delivery failed: rate_limited" in message["Message"]
    assert message["MessageAttributes"]["fallback_from"]["Value"] == "teams"
    # urllib3 logs each retry's URL at DEBUG (urllib3.util.retry): held at INFO like the others.
    logged = out + "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert deployed.teams.signature not in logged and deployed.teams.workflow_path not in logged


def test_the_request_after_a_429_wait_gets_only_the_time_then_left(teams_only: Rig) -> None:
    rig = teams_only
    # 429 (Retry-After: 2), then a webhook that holds the connection: the request after the wait is
    # bounded by what is left of the chat budget, not by the first request's timeout (which would
    # end 2 s after the budget, inside the reserve the on-call fallback needs).
    rig.teams.fail_next("rate_limited", retry_after=2)
    rig.teams.fail_next("hang", delay=30.0)
    alerts = rig.service(real_sleep=True)
    deadline = time.monotonic() + CHAT_RESERVE_SECONDS + 5.0

    def time_left() -> float:  # the Lambda context's, on the real clock
        return deadline - time.monotonic()

    result = alerts.process([("m-0", json.dumps(sample(INFO)))], time_left)
    assert time_left() > CHAT_RESERVE_SECONDS - 1.0  # the fallback's reserve was never spent
    assert [r.status for r in rig.teams.requests][:1] == [429] and len(rig.teams.requests) == 2
    assert result.failed == [("teams", "timeout")] and not result.records[0].failed
    [message] = rig.sns()
    assert "Teams delivery failed: timeout" in message["Message"]


@pytest.mark.parametrize(
    ("mode", "reason"),
    [("server_error", "http_500"), ("not_found", "http_404"), ("unauthorized", "http_401")],
)
def test_a_failed_post_falls_back_to_the_on_call_topic_once(teams_only: Rig, mode: str, reason: str) -> None:
    rig = teams_only
    rig.teams.fail_next(mode)
    result = rig.run(sample(INFO))
    assert len(rig.teams.requests) == 1  # no retry: a 5xx may have posted already
    assert result.failed == [("teams", reason)]
    assert result.records[0].outcome is Outcome.PROCESSED and not result.records[0].failed
    assert result.records[0].channels == ["sns"]  # no chat channel got it: the topic stood in
    [message] = rig.sns()
    assert f"Teams delivery failed: {reason}" in message["Message"]
    attributes = {k: v["Value"] for k, v in message["MessageAttributes"].items()}
    assert attributes["fallback_from"] == "teams" and attributes["severity"] == "info"
    retry = rig.run(sample(INFO))  # the fallback counts as delivered: nothing is sent twice
    assert retry.records[0].outcome is Outcome.DUPLICATE and rig.sns() == []


def test_a_timeout_falls_back(teams_only: Rig) -> None:
    rig = teams_only
    rig.chat_timeout = 0.5
    rig.teams.fail_next("timeout", delay=2.0)
    result = rig.run(sample(INFO))
    assert result.failed == [("teams", "timeout")]
    assert [r.delay for r in rig.teams.requests] == [2.0]  # answered only after the client gave up
    [message] = rig.sns()
    assert "Teams delivery failed: timeout" in message["Message"]


def test_an_unreachable_webhook_falls_back() -> None:
    for rig in open_rig(teams=True):
        rig.chat.stop()  # Slack too: both fall back, in one on-call message
        result = rig.run(sample(INFO))
        assert sorted(result.failed) == [("slack", "connection_error"), ("teams", "connection_error")]
        [message] = rig.sns()
        assert "Slack delivery failed: connection_error" in message["Message"]
        assert "Teams delivery failed: connection_error" in message["Message"]
        assert message["MessageAttributes"]["fallback_from"]["Value"] == "slack,teams"


def test_a_critical_fact_teams_refuses_is_not_paged_twice(rig: Rig) -> None:
    rig.teams.fail_next("server_error")
    result = rig.run(sample(CRITICAL))
    assert result.failed == [("teams", "http_500")] and not result.records[0].failed
    assert len(rig.sns()) == 1  # the page itself stands in for Teams


def test_a_burst_is_one_digest_card(rig: Rig) -> None:
    result = rig.run(*failed_fleet(40, "Host EC2 (instance i-0abc) terminated.", series="2222"))
    assert ("teams", "info") in result.sent and result.sent.count(("teams", "info")) == 1
    [card] = cards(rig.teams)
    [request] = rig.teams.delivered()
    assert adaptive_card_problem(request.payload) is None and request.size <= MAX_PAYLOAD_BYTES
    assert card["fallbackText"] == "Info: 40 container jobs: SPOT_INTERRUPTION on ml-training-highpri"
    texts = [r["text"] for r in runs(card)]
    assert "…and 20 more (list truncated)" in texts
    linked = [r for r in runs(card) if "selectAction" in r]
    assert len(linked) == 20 and linked[0]["selectAction"]["type"] == "Action.OpenUrl"


def test_long_reasons_and_names_fit_teams_limits(rig: Rig) -> None:
    event = batch_job(
        "FAILED",
        jobName="llama3-70b-" + "x" * 189,
        attempts=[{"container": {"reason": ("CannotPullContainerError: " + "y" * 30_000)[:30_000]}}],
    )
    result = rig.run(event)
    assert ("teams", "critical") in result.sent
    [request] = rig.teams.delivered()
    assert request.size <= MAX_PAYLOAD_BYTES
    assert any(r["text"].endswith("…[truncated]") for r in runs(request.card))


# ----------------------------------------------------------------------------------- secrecy
def test_the_webhook_url_is_never_logged(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # even with every logger at DEBUG (Lambda's LOG_LEVEL=DEBUG)
    rig.teams.fail_next("server_error")
    rig.run(sample(INFO))
    rig.run(sample("batch-job/failed-attempt-timeout"))
    rig.chat_timeout = 0.3
    rig.teams.fail_next("timeout", delay=1.0)
    rig.run(sample("service-job/failed-sagemaker-capacity"))
    assert len(rig.teams.requests) == 3
    logged = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert rig.teams.signature not in logged and rig.teams.workflow_path not in logged
    assert not any(rig.teams.signature in v for v in rig.local.environment.values())


# ---------------------------------------------------------------------------------- escaping
def test_event_text_is_never_markdown_nor_a_card_function(rig: Rig) -> None:
    reason = (
        "CannotStartContainerError: **bold** [click](https://evil.example) <b>x</b> "
        "{{DATE(2017-02-14T06:08:39Z, SHORT)}}\x07 _it_"
    )
    rig.run(
        batch_job(
            "FAILED", jobName="[job](https://evil.example)", attempts=[{"container": {"reason": reason}}]
        )
    )
    [card] = cards(rig.teams)
    markdown_text = json.dumps([b for b in card["body"] if b["type"] == "TextBlock"])
    assert "evil.example" not in markdown_text  # TextBlocks (Markdown) carry only batchpilot's words
    texts = [r["text"] for r in runs(card)]
    assert any("[click](https://evil.example)" in t for t in texts)  # shown as typed, in a TextRun
    assert not any("{{" in t for t in texts) and any("{\u200b{DATE" in t for t in texts)
    assert not any("\x07" in t for t in texts)
    assert "actions" in card and all("evil.example" not in a["url"] for a in card["actions"])


# ------------------------------------------------------------------- the registry drives delivery
@dataclass
class Pigeon:
    """A test-only chat channel: records what it is asked to post; fails when told to."""

    name: Channel = Channel.TEAMS
    threads: bool = True
    fail_with: str | None = None
    posts: list[tuple[Notice, str | None]] = field(default_factory=list)

    def render(self, notice: Notice) -> Notice:
        return notice

    def post(self, message: Notice, *, thread: str | None, time_left: TimeLeft) -> Delivery:
        assert time_left() > 0
        self.posts.append((message, thread))
        if self.fail_with:
            return Delivery(False, self.fail_with)
        return Delivery(True, thread=f"pigeon-{len(self.posts)}")


def test_the_service_names_no_chat_channel() -> None:
    source = inspect.getsource(service_module)
    assert "SLACK" not in source and "TEAMS" not in source
    assert "slack" not in source.lower() and "teams" not in source.lower()


def test_the_registry_drives_delivery_for_a_channel_the_service_does_not_name(rig: Rig) -> None:
    pigeon = Pigeon()
    policy = load_policy(
        json.dumps({"channels": {"critical": ["sns", "teams"], "warning": [], "info": ["teams"]}})
    )
    failed = sample("service-job/failed-sagemaker-capacity")
    job_arn = failed["detail"]["jobArn"]
    resubmitted = capacity_resubmission(failed, job_arn + "-r1", "lin-1")
    own = own_envelope(resubmitted)
    channels = ChannelRegistry([pigeon])
    first = rig.run(failed, policy=policy, channels=channels)
    second = rig.run(own, policy=policy, channels=channels)
    assert [r.channels for r in (*first.records, *second.records)] == [["teams"], ["teams"]]
    # Threads: the job's later message is a reply in the thread its first message started.
    assert [(len(n.facts), thread) for n, thread in pigeon.posts] == [(1, None), (1, "pigeon-1")]
    # Digests: a burst is one notice of every fact.
    rig.run(
        *failed_fleet(12, "Host EC2 (instance i-0abc) terminated.", series="2222"),
        policy=policy,
        channels=channels,
    )
    notice, thread = pigeon.posts[-1]
    assert notice.digest and len(notice.facts) == 12 and thread is None
    # Fallback: the channel's failure goes to the on-call topic, counted with its reason.
    pigeon.fail_with = "pigeon_lost"
    result = rig.run(sample(INFO), policy=policy, channels=channels)
    assert result.failed == [("teams", "pigeon_lost")] and result.records[0].channels == ["sns"]
    [message] = rig.sns()
    assert "Teams delivery failed: pigeon_lost" in message["Message"]


def test_a_routed_channel_nobody_registered_falls_back_without_a_failure(rig: Rig) -> None:
    policy = load_policy(json.dumps({"channels": {"critical": ["sns"], "warning": [], "info": ["teams"]}}))
    result = rig.run(sample(INFO), policy=policy, channels=ChannelRegistry())
    assert result.failed == [] and result.sent == [("sns", "info")]
    assert rig.teams.requests == []


def test_the_on_call_topic_is_not_a_chat_channel() -> None:
    with pytest.raises(ValueError, match="not a chat channel"):
        ChannelRegistry([Pigeon(name=Channel.SNS)])


def test_default_routes_follow_the_configured_chat_channels() -> None:
    assert RoutingPolicy().for_chat([Channel.SLACK]) == RoutingPolicy()
    both = RoutingPolicy().for_chat([Channel.SLACK, Channel.TEAMS])
    assert both.channels_for(Severity.CRITICAL) == (Channel.SNS, Channel.SLACK, Channel.TEAMS)
    assert both.channels_for(Severity.INFO) == (Channel.SLACK, Channel.TEAMS)
    teams_only = RoutingPolicy().for_chat([Channel.TEAMS])
    assert teams_only.channels_for(Severity.CRITICAL) == (Channel.SNS, Channel.TEAMS)
    assert teams_only.channels_for(Severity.WARNING) == (Channel.TEAMS,)
    explicit = load_policy(json.dumps({"channels": {"critical": ["sns"], "warning": ["slack"], "info": []}}))
    assert explicit.for_chat([Channel.TEAMS]) == explicit  # an explicit route is never rewritten


# --------------------------------------------------- the on-call fallback: only for facts no chat got
def test_a_fact_another_chat_channel_delivered_is_not_paged(rig: Rig) -> None:
    # Slack answers 5xx, Teams delivers: Teams stands in for Slack; nobody is paged for a warning.
    rig.slack.fail_next("server_error")
    result = rig.run(sample(INFO))
    assert result.failed == [("slack", "http_500")]
    [record] = result.records
    assert record.outcome is Outcome.PROCESSED and not record.failed and record.channels == ["teams"]
    assert record.error == "slack: http_500 (delivered to teams)"
    assert len(rig.teams.delivered()) == 1 and rig.slack.delivered() == [] and rig.sns() == []
    again = rig.run({**sample(INFO), "id": "another-envelope-id"})  # SQS redelivery: sent before
    assert again.records[0].outcome is Outcome.DUPLICATE
    assert len(rig.teams.delivered()) == 1 and rig.slack.delivered() == [] and rig.sns() == []


def test_ten_facts_one_chat_channel_delivered_page_nobody() -> None:
    for rig in open_rig(teams=True):
        rig.slack.fail_always("server_error")
        result = rig.run(*failed_fleet(10, "Host EC2 (instance i-0abc) terminated.", series="3333"))
        assert [(r.failed, r.channels) for r in result.records] == [(False, ["teams"])] * 10
        assert ("slack", "http_500") in result.failed
        assert rig.sns() == [] and rig.teams.delivered() != []  # ten warnings, no page


def test_a_fact_every_chat_channel_failed_is_paged_exactly_once(rig: Rig) -> None:
    rig.slack.fail_next("server_error")
    rig.teams.fail_next("server_error")
    result = rig.run(sample(INFO))
    assert sorted(result.failed) == [("slack", "http_500"), ("teams", "http_500")]
    [record] = result.records
    assert not record.failed and record.channels == ["sns"]
    [message] = rig.sns()
    assert message["MessageAttributes"]["fallback_from"]["Value"] == "slack,teams"
    again = rig.run({**sample(INFO), "id": "another-envelope-id"})  # SQS redelivery
    assert again.records[0].outcome is Outcome.DUPLICATE and rig.sns() == []
    assert rig.slack.delivered() == [] and rig.teams.delivered() == []
