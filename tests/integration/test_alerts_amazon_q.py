"""``OnCallMessageFormat=amazon-q``: every message the alerts function publishes to the on-call topic
follows Amazon Q Developer in chat applications' custom notification schema, with the subject and
the message attributes of the plain-text format.

The schema below is the administrator guide's, "Custom notifications using Amazon Q Developer in
chat applications" (https://docs.aws.amazon.com/chatbot/latest/adminguide/custom-notifs.html),
section "Event schema" and its parameter details, as JSON Schema: ``version`` must be ``1.0`` and
``source`` ``custom`` (both required); ``content.textType`` only ``client-markdown``; ``title`` at
most 250 characters, ``description`` at most 8,000, each of ``nextSteps`` at most 350 and each of
``keywords`` at most 75; ``metadata`` with ``threadId``, ``summary``, ``eventType``,
``relatedResources`` (strings) and ``additionalContext`` (string to string). No other member is
allowed, so a typo in a field name fails too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from batchpilot.alerts.facts import AlertFact
from batchpilot.alerts.oncall import sns_digest, sns_message
from batchpilot.alerts.policy import Channel, RoutingPolicy
from batchpilot.alerts.render import OnCallFormat, title
from batchpilot.alerts.severity import decide
from batchpilot_local.testing.alerts import ENV, Rig, fact_of, failed_fleet, open_rig
from batchpilot_local.testing.harness import template_environment
from batchpilot_local.testing.samples import sample, sample_event_paths
from jsonschema import Draft202012Validator

CUSTOM_NOTIFICATION: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Amazon Q Developer in chat applications custom notification",
    "type": "object",
    "required": ["version", "source", "content"],
    "additionalProperties": False,
    "properties": {
        "version": {"const": "1.0"},
        "source": {"const": "custom"},
        "id": {"type": "string"},
        "content": {
            "type": "object",
            "required": ["description"],
            "additionalProperties": False,
            "properties": {
                "textType": {"const": "client-markdown"},
                "title": {"type": "string", "maxLength": 250},
                "description": {"type": "string", "minLength": 1, "maxLength": 8000},
                "nextSteps": {"type": "array", "items": {"type": "string", "maxLength": 350}},
                "keywords": {"type": "array", "items": {"type": "string", "maxLength": 75}},
            },
        },
        "metadata": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "threadId": {"type": "string"},
                "summary": {"type": "string"},
                "eventType": {"type": "string"},
                "relatedResources": {"type": "array", "items": {"type": "string"}},
                "additionalContext": {"type": "object", "additionalProperties": {"type": "string"}},
                "enableCustomActions": {"type": "boolean"},
            },
        },
    },
}
VALIDATOR = Draft202012Validator(CUSTOM_NOTIFICATION)
Draft202012Validator.check_schema(CUSTOM_NOTIFICATION)


def problems(body: str) -> list[str]:
    """Why ``body`` is not a custom notification (empty when it is)."""
    try:
        message = json.loads(body)
    except ValueError:
        return ["not JSON"]
    return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in VALIDATOR.iter_errors(message)]


def notifiable() -> list[tuple[str, AlertFact]]:
    """Every sample event that notifies, as its fact."""
    found = []
    for path in sample_event_paths():
        if "ignored" in path.parts:
            continue
        name = f"{path.parent.name}/{path.stem}"
        fact = fact_of(sample(name))
        if decide(fact, RoutingPolicy()).notify:
            found.append((name, fact))
    return found


SAMPLES = notifiable()


def test_the_schema_is_strict_enough_to_fail() -> None:
    good = {"version": "1.0", "source": "custom", "content": {"description": "x"}}
    assert problems(json.dumps(good)) == []
    assert problems("CRITICAL: service job FAILED") == ["not JSON"]  # the text format
    for bad in (
        {**good, "source": "batchpilot"},
        {**good, "version": "1"},
        {"version": "1.0", "source": "custom"},
        {**good, "content": {"description": "x", "title": "t" * 251}},
        {**good, "content": {"description": "x" * 8001}},
        {**good, "content": {"description": "x", "nextSteps": ["s" * 351]}},
        {**good, "content": {"description": "x", "keywords": ["k" * 76]}},
        {**good, "content": {"description": "x", "textType": "markdown"}},
        {**good, "metadata": {"additionalContext": {"n": 1}}},
        {**good, "metadata": {"threadid": "typo"}},
    ):
        assert problems(json.dumps(bad)), bad


@pytest.mark.parametrize(("name", "fact"), SAMPLES, ids=[name for name, _ in SAMPLES])
def test_every_notifying_sample_is_a_custom_notification_with_the_same_subject_and_attributes(
    name: str, fact: AlertFact
) -> None:
    decision = decide(fact, RoutingPolicy())
    text = sns_message(fact, decision.severity, decision.why)
    amazon_q = sns_message(fact, decision.severity, decision.why, body_format=OnCallFormat.AMAZON_Q)
    assert problems(amazon_q.body) == []
    assert (amazon_q.subject, amazon_q.attributes) == (text.subject, text.attributes)
    message = json.loads(amazon_q.body)
    assert message["content"]["title"].endswith(f"{decision.severity.value.upper()}: {title(fact)}")
    assert message["metadata"]["additionalContext"] == text.attributes
    assert message["metadata"]["relatedResources"][0] == fact.subject
    assert message["metadata"]["eventType"] == fact.detail_type


def test_samples_cover_job_events_and_alarms() -> None:
    names = [name for name, _ in SAMPLES]
    assert any(n.startswith("cloudwatch-alarm/") for n in names) and any(
        n.startswith("service-job/") for n in names
    )


def test_long_hostile_text_stays_within_the_limits_and_cannot_mention_or_link() -> None:
    event = sample("service-job/failed-validation")
    event["detail"]["jobName"] = "<!channel> `x` <https://evil.example|click> " + "n" * 400
    event["detail"]["statusReason"] = "```\n<!here>\n" + "why " * 20_000
    fact = fact_of(event)
    decision = decide(fact, RoutingPolicy())
    message = sns_message(fact, decision.severity, decision.why, body_format=OnCallFormat.AMAZON_Q)
    assert problems(message.body) == []
    content = json.loads(message.body)["content"]
    assert len(content["description"]) <= 8000 and "why …[truncated]" in content["description"]
    shown = content["title"] + content["description"]
    assert "<!channel>" not in shown and "<!here>" not in shown and "<https://evil" not in shown
    assert "&lt;!channel&gt;" in shown


def test_digests_and_fallbacks_are_custom_notifications_too() -> None:
    facts = [fact_of(e) for e in failed_fleet(30, "CannotPullContainerError: pull access denied", "7777")]
    digest = sns_digest(
        facts,
        decide(facts[0], RoutingPolicy()).severity,
        "a burst",
        fallback=[(Channel.SLACK, "rate_limited")],
        body_format=OnCallFormat.AMAZON_Q,
    )
    assert problems(digest.body) == []
    description = json.loads(digest.body)["content"]["description"]
    assert "Sent here because Slack delivery failed: rate_limited" in description
    assert "sweep-lr-000" in description and "…and" not in description.split("\n")[0]
    assert digest.attributes["group_size"] == "30" and digest.attributes["fallback_from"] == "slack"
    # 40 jobs listed with long names and reasons: the description is cut at 8,000, visibly.
    long = failed_fleet(60, "CannotPullContainerError: " + "denied " * 100, "7778")
    for event in long:
        event["detail"]["jobName"] += "-" + "x" * 200
    burst = [fact_of(e) for e in long]
    wide = sns_digest(
        burst, decide(burst[0], RoutingPolicy()).severity, "a burst", body_format=OnCallFormat.AMAZON_Q
    )
    assert problems(wide.body) == []
    assert json.loads(wide.body)["content"]["description"].endswith("…[truncated]")


# --------------------------------------------------------------------------------- deployed
@pytest.fixture
def rig() -> Iterator[Rig]:
    # As the template configures the function, with OnCallMessageFormat=amazon-q.
    environment = {**template_environment("alerts"), **ENV, "BATCHPILOT_ONCALL_MESSAGE_FORMAT": "amazon-q"}
    yield from open_rig(teams=True, environment=environment)


def test_every_message_the_function_publishes_follows_the_schema(rig: Rig) -> None:
    # Slack fails while Teams delivers: Teams stands in, no fallback page (covered below).
    rig.slack.fail_always("no_service")
    events = [
        sample("service-job/failed-validation"),
        sample("batch-job/failed-attempt-timeout"),
        sample("cloudwatch-alarm/job-failure-rate-alarm"),
        *failed_fleet(8, "CannotPullContainerError: pull access denied", "8888"),
    ]
    rig.run(*events)
    rig.run(sample("cloudwatch-alarm/job-failure-rate-ok"))  # 75 minutes later: another batch
    published = rig.sns()
    # 3 pages (one the burst's first job) and the burst's digest; Teams delivered what Slack did
    # not, so nothing stands in for Slack on the topic.
    assert len(published) == 4
    for message in published:
        assert problems(message["Message"]) == [], message["Subject"]
        assert message["MessageAttributes"]["severity"]["Value"] in {"critical", "warning", "info"}
    subjects = [m["Subject"] for m in published]
    assert "[CRITICAL] alarm batchpilot/batchpilot/JobQueueFailureRateAlarm is in ALARM" in subjects
    # Teams still gets its own cards: the format is the on-call topic's only.
    assert rig.teams.delivered() and all("attachments" in r.payload for r in rig.teams.delivered())


def test_fallbacks_for_chat_that_nothing_delivered_follow_the_schema() -> None:
    environment = {**template_environment("alerts"), **ENV, "BATCHPILOT_ONCALL_MESSAGE_FORMAT": "amazon-q"}
    for rig in open_rig(environment=environment):  # Slack only: when it fails, the topic stands in
        rig.slack.fail_always("no_service")
        rig.run(sample("service-job/failed-validation"), sample("batch-job/failed-attempt-timeout"))
        published = rig.sns()
        fallbacks = [m for m in published if "fallback_from" in m["MessageAttributes"]]
        assert len(fallbacks) >= 1, [m["Subject"] for m in published]
        for message in published:
            assert problems(message["Message"]) == [], message["Subject"]
