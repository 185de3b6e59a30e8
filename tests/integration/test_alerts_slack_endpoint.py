"""The local Slack endpoint answers slack-sdk's real clients the way Slack does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from batchpilot_local.chat_endpoint import FAILURE_MODES, LocalChatEndpoint, LocalSlack
from batchpilot_local.notifications import notification_from_slack, notification_from_sns
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.webhook import WebhookClient


@pytest.fixture
def slack() -> Iterator[LocalSlack]:
    with LocalChatEndpoint() as endpoint:
        yield endpoint.slack


def test_listens_on_loopback_only(slack: LocalSlack) -> None:
    assert slack.webhook_url.startswith("http://127.0.0.1:")
    assert slack.api_url.endswith("/api/")


def test_webhook_success_is_200_ok_and_recorded(slack: LocalSlack) -> None:
    response = WebhookClient(slack.webhook_url).send(text="Critical: hello", blocks=[])
    assert (response.status_code, response.body) == (200, "ok")
    [request] = slack.requests
    assert request.kind == "webhook" and request.delivered and request.payload["text"] == "Critical: hello"
    assert notification_from_slack(request) == {"channel": "slack", "severity": "critical", "title": "hello"}


@pytest.mark.parametrize(
    ("mode", "status", "body"),
    [
        ("rate_limited", 429, "rate_limited"),
        ("invalid_blocks", 400, "invalid_blocks"),
        ("action_prohibited", 403, "action_prohibited"),
        ("no_service", 404, "no_service"),
        ("channel_not_found", 404, "channel_not_found"),
        ("channel_is_archived", 410, "channel_is_archived"),
        ("server_error", 500, ""),
    ],
)
def test_webhook_failure_modes(slack: LocalSlack, mode: str, status: int, body: str) -> None:
    assert mode in FAILURE_MODES
    slack.fail_next(mode, retry_after=7)
    client = WebhookClient(slack.webhook_url, retry_handlers=[])
    response = client.send(text="x")  # slack-sdk's WebhookClient.send does not raise on errors
    assert (response.status_code, response.body) == (status, body)
    if status == 429:
        assert response.headers.get("Retry-After") == "7" or response.headers.get("retry-after") == "7"
    assert not slack.requests[-1].delivered
    assert client.send(text="x").status_code == 200  # fail_next is one request only


def test_fail_always_until_recover(slack: LocalSlack) -> None:
    slack.fail_always("no_service")
    client = WebhookClient(slack.webhook_url, retry_handlers=[])
    assert [client.send(text="x").status_code for _ in range(3)] == [404] * 3
    slack.recover()
    assert client.send(text="x").status_code == 200
    with pytest.raises(ValueError, match="unknown failure mode"):
        slack.fail_next("teapot")


def test_block_kit_limits_are_enforced_like_slack(slack: LocalSlack) -> None:
    client = WebhookClient(slack.webhook_url, retry_handlers=[])
    too_long_header = [{"type": "header", "text": {"type": "plain_text", "text": "x" * 151}}]
    assert client.send(text="x", blocks=too_long_header).body == "invalid_blocks"
    too_many = [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}] * 51
    assert client.send(text="x", blocks=too_many).body == "invalid_blocks"
    long_section = [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}]
    assert client.send(text="x", blocks=long_section).body == "invalid_blocks"
    eleven_fields = [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}]
    assert client.send(text="x", blocks=eleven_fields).body == "invalid_blocks"
    assert client.send(text="", blocks=[]).body == "invalid_blocks"


def test_chat_post_message_checks_the_token_and_answers_like_the_web_api(slack: LocalSlack) -> None:
    with pytest.raises(SlackApiError) as error:
        WebClient(token="xoxb-wrong", base_url=slack.api_url).chat_postMessage(channel="C1", text="x")
    assert error.value.response["error"] == "invalid_auth"
    client = WebClient(token=slack.bot_token, base_url=slack.api_url, retry_handlers=[])
    first = client.chat_postMessage(channel="C1", text="Info: root")
    reply = client.chat_postMessage(channel="C1", text="Info: reply", thread_ts=first["ts"])
    assert first["ok"] and reply["ts"] != first["ts"]
    assert slack.requests[-1].payload["thread_ts"] == first["ts"]
    slack.fail_next("channel_is_archived")
    with pytest.raises(SlackApiError) as error:
        client.chat_postMessage(channel="C1", text="x")
    assert error.value.response["error"] == "is_archived"


def test_sns_envelope_to_notification() -> None:
    envelope = {
        "Subject": "[WARNING] job queue q blocked (CAPACITY)",
        "MessageAttributes": {"severity": {"Value": "warning"}},
    }
    assert notification_from_sns(envelope) == {
        "channel": "sns",
        "severity": "warning",
        "title": "job queue q blocked (CAPACITY)",
    }


def test_sns_notification_title_is_the_bodys_whole_title() -> None:
    title = (
        "container job llama3-8b-lora-ft-run-39 resubmitted as llama3-8b-lora-ft-run-39-r1-909da0"
        " from its checkpoint (resubmission 1) (SPOT_INTERRUPTION) on gpu-spot-queue"
    )
    envelope = {
        "Subject": "[WARNING] Resubmitted (SPOT_INTERRUPTION): container job llama3-8b-lora-ft-run-39",
        "Message": f"WARNING: {title}\n\nJob: llama3-8b-lora-ft-run-39\n",
        "MessageAttributes": {"severity": {"Value": "warning"}},
    }
    assert notification_from_sns(envelope) == {"channel": "sns", "severity": "warning", "title": title}
