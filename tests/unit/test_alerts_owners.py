"""Owners (alerts/owners.py): the tag read, which facts mention their owner, and how the channels
render a mention and an owner's tag value (escaped like any event text)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from batchpilot.alerts.channels.slack import SlackUsers, slack_message, with_mention
from batchpilot.alerts.channels.teams import teams_message
from batchpilot.alerts.facts import AlertFact, Owner
from batchpilot.alerts.oncall import sns_message
from batchpilot.alerts.owners import OnceEach, is_email, mentions_owner, owner_from_tags
from batchpilot.alerts.policy import Match, RoutingPolicy, Severity
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.alerts.severity import decide
from batchpilot.shared.own_events import JobStarving, StarvationReason
from batchpilot.shared.settings import ConfigError
from batchpilot_local.chat_endpoint import adaptive_card_problem
from batchpilot_local.testing.alerts import ENV, capacity_resubmission, fact_of, own_envelope
from batchpilot_local.testing.samples import sample

ANA = "ana.lima@example.com"


@pytest.mark.parametrize(
    ("value", "email"),
    [
        (ANA, True),
        ("Kenji.Sato+ml@research.example.co.jp", True),
        ("team-nlp", False),
        ("ana@localhost", False),  # no dotted domain
        ("<@U0123>@example.com", False),
        ("a&b@example.com", False),
        ("[x](https://evil.example)@example.com", False),
        ("ana lima@example.com", False),
        ("a" * 65 + "@example.com", False),
    ],
)
def test_an_email_is_what_people_use_at_work_and_never_markup(value: str, email: bool) -> None:
    assert is_email(value) is email


def test_the_owner_is_the_tag_named_by_the_deployment() -> None:
    tags = {"owner": f"  {ANA} ", "team": "nlp"}
    assert owner_from_tags(tags, "owner") == Owner(ANA, ANA)
    assert owner_from_tags(tags, "team") == Owner("nlp", None)
    assert owner_from_tags(tags, "missing") is None
    assert owner_from_tags(tags, "") is None
    assert owner_from_tags({"owner": "   "}, "owner") is None
    assert owner_from_tags(None, "owner") is None
    long = owner_from_tags({"owner": "x" * 400}, "owner")
    assert long is not None and len(long.value) == 256


def test_a_studio_user_profile_tag_names_the_profile_and_is_not_mentioned() -> None:
    arn = "arn:aws:sagemaker:us-east-1:111122223333:user-profile/d-abc123/ana-lima"
    owner = owner_from_tags({"sagemaker:user-profile-arn": arn}, "sagemaker:user-profile-arn")
    assert owner == Owner("ana-lima", None)


def _decided(fact: AlertFact, policy: RoutingPolicy | None = None) -> bool:
    policy = policy or RoutingPolicy()
    return mentions_owner(fact, decide(fact, policy).severity, policy)


@pytest.mark.parametrize(
    ("name", "mentioned"),
    [
        ("batch-job/failed-application-error", True),  # critical, not resubmitted
        ("service-job/failed-validation", True),
        ("sagemaker/failed-algorithm-error", True),
        ("batch-job/failed-spot-reclaim", False),  # recovery resubmits it: its outcome speaks
        ("service-job/failed-sagemaker-capacity", False),
        ("service-job/failed-user-terminated", False),  # the owner stopped it
        ("batch-job/succeeded", False),
        ("batch-job/running", False),
        ("service-job-queue-blocked/undetermined", False),  # the platform's problem
        ("service-job-preemption/started", False),
        ("cloudwatch-alarm/alerts-errors-alarm", False),
    ],
)
def test_by_default_the_owner_hears_of_failures_that_stay_failed(name: str, mentioned: bool) -> None:
    assert _decided(fact_of(sample(name))) is mentioned


def test_by_default_resubmissions_and_starvation_mention_the_owner_but_dry_runs_do_not() -> None:
    failed = sample("service-job/failed-sagemaker-capacity")
    new = "arn:aws:batch:us-east-1:111122223333:service-job/0f0e0d0c-0000-4000-8000-000000000001"
    resubmitted = fact_of(own_envelope(capacity_resubmission(failed, new, "lin-1")))
    assert _decided(resubmitted)
    dry = fact_of(own_envelope(capacity_resubmission(failed, new, "lin-1", dry_run=True)))
    assert not _decided(dry)
    starving = JobStarving(
        time=resubmitted.event_time,
        job_arn=failed["detail"]["jobArn"],
        job_kind="service-job",
        reason=StarvationReason.PREEMPTED_REPEATEDLY,
        message="preempted 3 times",
        preemptions=3,
    )
    assert _decided(fact_of(own_envelope(starving)))


def test_the_policy_decides_instead_when_it_lists_owner_mentions() -> None:
    failed = fact_of(sample("batch-job/failed-application-error"))
    assert not _decided(failed, RoutingPolicy(owner_mentions=[]))
    timeouts = RoutingPolicy(owner_mentions=[Match(category=["TIMEOUT"])])
    assert not _decided(failed, timeouts)
    assert _decided(fact_of(sample("batch-job/failed-attempt-timeout")), timeouts)
    spot = RoutingPolicy(owner_mentions=[Match(category=["SPOT_INTERRUPTION"])])
    assert _decided(fact_of(sample("batch-job/failed-spot-reclaim")), spot)
    succeeded = RoutingPolicy(owner_mentions=[Match(status=["SUCCEEDED"])])
    assert not _decided(fact_of(sample("batch-job/succeeded")), succeeded)  # silent: nothing is sent


def test_once_each_says_a_key_once_and_stays_bounded() -> None:
    once = OnceEach(limit=2)
    assert [once.first("a"), once.first("a"), once.first("b")] == [True, False, True]
    assert once.first("c") is True  # the memory was full: forgotten, then "c" remembered
    assert once.first("a") is True


@pytest.mark.parametrize("key", ["owner", "owner-email", "sagemaker:user-profile-arn", "Team Owner"])
def test_the_owner_tag_key_setting_takes_tag_keys(key: str) -> None:
    settings = AlertsSettings.from_environ({**ENV, "BATCHPILOT_OWNER_TAG_KEY": key}, function="alerts")
    assert settings.owner_tag_key == key and settings.service_args["owner_tag_key"] == key


def test_owners_are_off_by_default() -> None:
    assert AlertsSettings.from_environ(ENV, function="alerts").service_args["owner_tag_key"] == ""


@pytest.mark.parametrize("key", ["aws:createdBy", "owner<script>", "x" * 129, "own\ner"])
def test_a_bad_owner_tag_key_names_its_variable(key: str) -> None:
    with pytest.raises(ConfigError, match="BATCHPILOT_OWNER_TAG_KEY"):
        AlertsSettings.from_environ({**ENV, "BATCHPILOT_OWNER_TAG_KEY": key}, function="alerts")


def _owned(owner: Owner) -> AlertFact:
    return dataclasses.replace(fact_of(sample("batch-job/failed-application-error")), owner=owner)


def test_slack_mentions_the_owner_in_its_owner_field_and_its_text() -> None:
    message = slack_message(_owned(Owner(ANA, ANA, mention=True)), Severity.CRITICAL, "a rule")
    assert message.owner_email == ANA
    assert f"*Owner*\\n{ANA}" in json.dumps(message.blocks)  # before the lookup: the address
    mentioned = with_mention(message, "U0ANALIMA1")
    assert mentioned.text.endswith(" · <@U0ANALIMA1>")
    fields = [f["text"] for b in mentioned.blocks for f in b.get("fields", [])]
    assert "*Owner*\n<@U0ANALIMA1>" in fields and f"*Owner*\n{ANA}" not in fields
    assert with_mention(message, "<!channel>") == message  # not a user id: nothing changes


def test_an_owner_not_to_mention_is_shown_only() -> None:
    message = slack_message(_owned(Owner(ANA, ANA, mention=False)), Severity.CRITICAL, "a rule")
    assert message.owner_email is None and with_mention(message, "U0ANALIMA1") == message
    card = teams_message(_owned(Owner(ANA, ANA, mention=False)), Severity.CRITICAL, "a rule").card
    assert "entities" not in card["msteams"] and ANA in json.dumps(card)


def test_teams_mentions_the_owner_with_an_adaptive_card_mention_entity() -> None:
    message = teams_message(_owned(Owner(ANA, ANA, mention=True)), Severity.CRITICAL, "a rule")
    card = message.card
    [entity] = card["msteams"]["entities"]
    assert entity == {"type": "mention", "text": f"<at>{ANA}</at>", "mentioned": {"id": ANA, "name": ANA}}
    lines = [b["text"] for b in card["body"] if b["type"] == "TextBlock"]
    assert f"**Owner:** <at>{ANA}</at>" in lines
    assert adaptive_card_problem(json.loads(message.body())) is None


def test_the_endpoint_refuses_a_mention_whose_text_is_in_no_text_block() -> None:
    message = teams_message(_owned(Owner(ANA, ANA, mention=True)), Severity.CRITICAL, "a rule")
    payload = json.loads(message.body())
    card = payload["attachments"][0]["content"]
    card["body"] = [b for b in card["body"] if "<at>" not in str(b.get("text", ""))]
    assert adaptive_card_problem(payload) == "mention 0: its text is in no TextBlock"


HOSTILE = "<!channel> & [x](https://evil.example) {{DATE()}} <at>all</at>"


def test_an_owner_tag_value_is_escaped_like_any_event_text() -> None:
    fact = _owned(Owner(HOSTILE, None))
    slack = json.dumps(slack_message(fact, Severity.CRITICAL, "a rule").blocks)
    assert "<!channel>" not in slack and "&lt;!channel&gt; &amp; [x]" in slack
    card = teams_message(fact, Severity.CRITICAL, "a rule").card
    runs = [
        run["text"] for block in card["body"] if block["type"] == "RichTextBlock" for run in block["inlines"]
    ]
    assert any("<!channel>" in run and "{\u200b{DATE()}\u200b}" in run for run in runs)  # a TextRun
    assert not any("<at>all" in str(b.get("text", "")) for b in card["body"] if b["type"] == "TextBlock")
    assert "entities" not in card["msteams"]
    body = sns_message(fact, Severity.CRITICAL, "a rule").body
    assert "Owner" in body and "<!channel>" in body  # plain text: no markup to escape


def test_the_slack_user_cache_keeps_ids_and_unknown_addresses_an_hour_and_failures_a_minute() -> None:
    now = [0.0]
    users = SlackUsers(clock=lambda: now[0])
    asked: list[str] = []
    answers = {
        ANA: ("U0ANALIMA1", None),
        "nobody@example.com": (None, "unknown_email"),
        "busy@example.com": (None, "lookup_failed:rate_limited"),
    }

    def lookup(email: str) -> tuple[str | None, str | None]:
        asked.append(email)
        return answers[email.lower()]

    for email in (ANA, ANA.upper(), "nobody@example.com", "busy@example.com"):
        users.resolve(email, lookup)
    assert asked == [ANA, "nobody@example.com", "busy@example.com"]
    now[0] = 61.0  # a failure is asked again after a minute, the others are kept
    for email in (ANA, "nobody@example.com", "busy@example.com"):
        users.resolve(email, lookup)
    assert asked[3:] == ["busy@example.com"]
    now[0] = 3601.0
    assert users.resolve(ANA, lookup) == ("U0ANALIMA1", None) and asked[-1] == ANA
