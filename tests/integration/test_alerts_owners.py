"""Owner mentions end to end: the real alerts service and adapters (embedded AWS, the local chat
endpoint's Slack Web API and Teams workflow), every path on which the owner is not mentioned (no
tag, not an e-mail address, an address Slack does not know, no bot token, a failed lookup), the
lookup cache, and a service job's owner read with DescribeServiceJob."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from batchpilot.alerts.policy import Channel
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.shared.observability import metrics as shared_metrics
from batchpilot.shared.records import Outcome
from batchpilot.shared.settings import ConfigError
from batchpilot_local.chat_endpoint import LocalChatEndpoint, adaptive_card_problem
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.notifications import LocalAlerts
from batchpilot_local.testing.alerts import ENV, Rig, capacity_resubmission, open_rig, own_envelope
from batchpilot_local.testing.harness import load_app, sqs_event, template_environment
from batchpilot_local.testing.samples import batch_job, sample

OWNED = {**ENV, "BATCHPILOT_OWNER_TAG_KEY": "owner"}
ANA, KENJI = "ana.lima@example.com", "kenji.sato@example.com"
ANA_ID = "U0ANALIMA1"


def failed(job: int, owner: str | None) -> dict[str, Any]:
    """A container job FAILED with an application error (critical, not resubmitted: its owner is
    mentioned by default), tagged ``owner`` unless None."""
    return batch_job(
        "FAILED",
        id=f"owner-event-{job}",
        jobArn=f"arn:aws:batch:us-east-1:111122223333:job/{job:08d}-0ee0-4000-8000-000000000000",
        jobId=f"{job:08d}-0ee0-4000-8000-000000000000",
        jobName=f"llama-sft-{job:03d}",
        attempts=[{"container": {"exitCode": 1, "reason": "Essential container in task exited"}}],
        statusReason="Essential container in task exited",
        tags={"owner": owner} if owner is not None else {},
    )


@pytest.fixture
def bot() -> Iterator[Rig]:
    yield from open_rig(bot=True, environment=OWNED)


def _posted(rig: Rig) -> list[dict[str, Any]]:
    return [r.payload for r in rig.slack.delivered() if r.kind == "chat.postMessage"]


def _notes(result: Any) -> list[tuple[str, str, Channel | None]]:
    return [r.owner_note for r in result.records if r.owner_note is not None]


def test_slack_mentions_the_owner_found_by_email(bot: Rig) -> None:
    result = bot.run(failed(1, ANA))
    [payload] = _posted(bot)
    assert payload["text"].endswith(f" · <@{ANA_ID}>")
    assert f"*Owner*\n<@{ANA_ID}>" in json.dumps(payload["blocks"], ensure_ascii=False).replace("\\n", "\n")
    [lookup] = bot.slack.lookups
    assert (lookup.email, lookup.status, lookup.authorized) == (ANA, 200, True)
    assert _notes(result) == [] and not result.records[0].failed


def test_one_lookup_per_owner_across_records_and_invocations(bot: Rig) -> None:
    service = bot.service()  # built once, as at a cold start; each process() is an invocation
    first = service.process(
        [("m-1", json.dumps(failed(1, ANA))), ("m-2", json.dumps(failed(2, ANA)))], lambda: 60.0
    )
    second = service.process([("m-3", json.dumps(failed(3, ANA.upper())))], lambda: 60.0)
    assert [r.channels for r in first.records + second.records] == [[Channel.SNS, Channel.SLACK]] * 3
    assert [lookup.email for lookup in bot.slack.lookups] == [ANA]
    assert sum(f"<@{ANA_ID}>" in p["text"] for p in _posted(bot)) == 3
    service.process([("m-4", json.dumps(failed(4, KENJI)))], lambda: 60.0)
    assert [lookup.email for lookup in bot.slack.lookups] == [ANA, KENJI]


def test_an_unknown_email_goes_without_a_mention_and_is_said_once(bot: Rig) -> None:
    stranger = "nobody@example.com"
    service = bot.service()
    first = service.process([("m-1", json.dumps(failed(1, stranger)))], lambda: 60.0)
    again = service.process([("m-2", json.dumps(failed(2, stranger)))], lambda: 60.0)
    posted = _posted(bot)
    assert len(posted) == 2 and not any("<@" in p["text"] for p in posted)
    assert stranger in json.dumps(posted[0]["blocks"])  # shown, not mentioned
    assert _notes(first) == [(stranger, "unknown_email", Channel.SLACK)]
    assert _notes(again) == []  # said once per owner
    assert len(bot.slack.lookups) == 1  # the unknown address is cached too
    assert [r.outcome for r in first.records + again.records] == [Outcome.PROCESSED] * 2


def test_a_job_without_the_tag_or_with_another_value_goes_as_today(bot: Rig) -> None:
    service = bot.service()
    result = service.process(
        [
            ("m-1", json.dumps(failed(1, None))),
            ("m-2", json.dumps(failed(2, "team-nlp"))),
            ("m-3", json.dumps(failed(3, None))),
        ],
        lambda: 60.0,
    )
    posted = _posted(bot)
    assert len(posted) == 3 and not any("<@" in p["text"] for p in posted)
    assert "team-nlp" in json.dumps(posted[1]["blocks"])
    assert bot.slack.lookups == []  # nothing to look up
    assert _notes(result) == [("", "no_owner_tag", None), ("team-nlp", "not_an_email", None)]


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("rate_limited", "lookup_failed:rate_limited"),
        ("missing_scope", "lookup_failed:missing_scope"),
        ("server_error", "lookup_failed:http_500"),
        ("timeout", "lookup_failed:timeout"),
    ],
)
def test_a_failed_lookup_never_fails_the_alert(bot: Rig, mode: str, reason: str) -> None:
    bot.slack.fail_lookups(mode, retry_after=30, delay=3.0)
    bot.remaining = 7.0  # the lookup may take half of what is left for chat (2 s): 1 s
    result = bot.run(failed(1, ANA))
    [payload] = _posted(bot)
    assert "<@" not in payload["text"] and ANA in json.dumps(payload["blocks"])
    [record] = result.records
    assert not record.failed and record.channels == [Channel.SNS, Channel.SLACK]
    assert _notes(result) == [(ANA, reason, Channel.SLACK)]
    assert len(bot.slack.lookups) == 1  # never retried


def test_a_failed_lookup_is_tried_again_later_not_in_the_same_minute(bot: Rig) -> None:
    service = bot.service()
    bot.slack.fail_lookups("rate_limited")
    service.process([("m-1", json.dumps(failed(1, ANA)))], lambda: 60.0)
    bot.slack.fail_lookups(None)
    service.process([("m-2", json.dumps(failed(2, ANA)))], lambda: 60.0)
    assert len(bot.slack.lookups) == 1  # the failure is kept a minute: no request per record
    assert "<@" not in _posted(bot)[-1]["text"]


def test_without_a_bot_token_slack_shows_the_owner_and_says_why_once() -> None:
    for rig in open_rig(environment=OWNED):  # the incoming webhook only
        result = rig.run(failed(1, ANA), failed(2, ANA))
        delivered = rig.slack_delivered()
        assert len(delivered) == 2 and all("<@" not in p["text"] for p in delivered)
        assert ANA in json.dumps(delivered[0]["blocks"])
        assert rig.slack.lookups == []
        assert _notes(result) == [(ANA, "no_bot_token", Channel.SLACK)]


def test_teams_mentions_the_owner_through_the_workflow() -> None:
    for rig in open_rig(teams=True, slack=False, environment=OWNED):
        result = rig.run(failed(1, ANA))
        [request] = rig.teams.delivered()
        assert adaptive_card_problem(request.payload) is None and request.status == 202
        card = request.card
        assert card["msteams"]["entities"] == [
            {"type": "mention", "text": f"<at>{ANA}</at>", "mentioned": {"id": ANA, "name": ANA}}
        ]
        assert f"**Owner:** <at>{ANA}</at>" in [b.get("text") for b in card["body"]]
        assert _notes(result) == []


def test_owners_are_off_without_the_tag_key(bot: Rig) -> None:
    bot.local.environment.pop("BATCHPILOT_OWNER_TAG_KEY")
    result = bot.run(failed(1, ANA))
    [payload] = _posted(bot)
    assert "Owner" not in json.dumps(payload) and bot.slack.lookups == []
    assert _notes(result) == []


def _service_job_with_owner(rig: Rig, owner: str) -> dict[str, Any]:
    event = copy.deepcopy(sample("service-job/failed-validation"))
    described = copy.deepcopy(event["detail"])
    described["tags"] = {"owner": owner}
    rig.aws.batch.put_service_job(described)
    return event


def test_a_service_jobs_owner_is_read_with_describe_service_job(bot: Rig) -> None:
    event = _service_job_with_owner(bot, ANA)
    assert "tags" not in event["detail"]  # the service job's event carries none
    bot.run(event)
    [payload] = _posted(bot)
    assert payload["text"].endswith(f"<@{ANA_ID}>")


def test_a_resubmission_of_a_service_job_mentions_its_owner(bot: Rig) -> None:
    failed_job = _service_job_with_owner(bot, ANA)
    new = "arn:aws:batch:us-east-1:111122223333:service-job/0f0e0d0c-0000-4000-8000-000000000009"
    bot.run(own_envelope(capacity_resubmission(failed_job, new, "lin-owner")))
    [payload] = _posted(bot)
    assert payload["text"].endswith(f"<@{ANA_ID}>")


def test_a_service_job_batch_does_not_know_goes_without_an_owner(bot: Rig) -> None:
    result = bot.run(sample("service-job/failed-validation"))  # not in the embedded AWS
    [payload] = _posted(bot)
    assert "<@" not in payload["text"]
    assert _notes(result) == [("", "no_owner_tag", None)]


def test_the_deployed_function_logs_the_reason_once_per_owner(
    monkeypatch: pytest.MonkeyPatch, lambda_context: Any, caplog: pytest.LogCaptureFixture
) -> None:
    shared_metrics.clear_metrics()
    environment = {**template_environment("alerts"), "BATCHPILOT_OWNER_TAG_KEY": "owner"}
    with EmbeddedAws() as aws, LocalChatEndpoint() as chat:
        local = LocalAlerts(aws, environment=environment, chat=chat, slack=True).open()
        handler = load_app("alerts", local.environment, monkeypatch=monkeypatch)
        with caplog.at_level(logging.INFO):
            for job in (1, 2):  # two invocations of one instance
                body = json.dumps(failed(job, "team-nlp"))
                assert handler.lambda_handler(sqs_event([body], "AlertsQueue"), lambda_context) == {
                    "batchItemFailures": []
                }
        assert len(chat.slack.delivered()) == 2
    shared_metrics.clear_metrics()
    said = [r for r in caplog.records if r.getMessage() == "owner not mentioned"]
    assert [(r.__dict__.get("owner"), r.__dict__.get("reason")) for r in said] == [
        ("team-nlp", "not_an_email")
    ]


def _direct(rig: Rig) -> list[dict[str, Any]]:
    return [p for p in _posted(rig) if p.get("channel") == ANA_ID]


def test_a_direct_message_follows_the_channel_message_exactly_once() -> None:
    environment = {**OWNED, "BATCHPILOT_OWNER_DIRECT_MESSAGE": "true"}
    for rig in open_rig(bot=True, environment=environment):
        service = rig.service()
        body = json.dumps(failed(1, ANA))
        first = service.process([("m-1", body)], lambda: 60.0)
        again = service.process([("m-1", body)], lambda: 60.0)  # SQS delivers the record again
        [channel, direct] = _posted(rig)
        assert channel["channel"] == rig.slack.channel and direct["channel"] == ANA_ID
        assert direct["text"] == channel["text"] and _direct(rig) == [direct]
        assert first.records[0].channels == [Channel.SNS, Channel.SLACK]
        assert again.records[0].outcome is Outcome.DUPLICATE and len(_posted(rig)) == 2


def test_no_direct_message_when_the_channel_refused_the_message() -> None:
    environment = {**OWNED, "BATCHPILOT_OWNER_DIRECT_MESSAGE": "true"}
    for rig in open_rig(bot=True, environment=environment):
        rig.slack.fail_next("invalid_blocks")
        result = rig.run(failed(1, ANA))
        assert _posted(rig) == []  # the refused post is not delivered, and nobody got it alone
        assert [m["Subject"] for m in rig.sns()]  # the on-call topic has it
        assert not result.records[0].failed


def test_direct_messages_need_the_owner_tag_and_a_bot_token() -> None:
    with pytest.raises(ConfigError, match=r"BATCHPILOT_OWNER_DIRECT_MESSAGE.*BATCHPILOT_OWNER_TAG_KEY"):
        AlertsSettings.from_environ({**ENV, "BATCHPILOT_OWNER_DIRECT_MESSAGE": "true"}, function="alerts")
    with pytest.raises(ConfigError, match="BATCHPILOT_SLACK_BOT_TOKEN_SECRET"):
        AlertsSettings.from_environ({**OWNED, "BATCHPILOT_OWNER_DIRECT_MESSAGE": "true"}, function="alerts")
