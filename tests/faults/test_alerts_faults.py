"""Alerts under faults (docs/reliability.md): at most one copy per channel per fact, nothing lost,
the on-call fallback inside the deadline, every chat text escaped.

The real AlertService and adapters run against the embedded AWS (DynamoDB, SNS, Secrets Manager)
and the local chat endpoint; faults come from the endpoint's failure modes (Slack and Teams: 429,
500, invalid_blocks / 400, timeout, hang) and from :class:`HttpFaults` at botocore's ``before-send``
(SNS 500, DynamoDB throttling and 5xx). A record the service fails is delivered again, as SQS
would; later copies of an event (EventBridge retries, an archive replay) come after the lease.
"""

from __future__ import annotations

import copy
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from batchpilot.alerts.channels.slack import SlackNotifier
from batchpilot.alerts.registry import ChannelRegistry
from batchpilot.alerts.service import CHAT_RESERVE_SECONDS, AlertService, BatchResult
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.alerts import DynamoAlertStore
from batchpilot.io.secrets import SecretSource
from batchpilot.io.sns import SnsPublisher
from batchpilot_local.testing.alerts import Rig, open_rig
from batchpilot_local.testing.faults import FaultKind, HttpFaults
from batchpilot_local.testing.samples import sample

CRITICAL = "service-job/failed-validation"  # critical: on-call topic + chat
INFO = "batch-job/failed-spot-reclaim"  # info: chat only (the on-call topic is its fallback)


@pytest.fixture
def rig() -> Iterator[Rig]:
    yield from open_rig()


@pytest.fixture
def teams_rig() -> Iterator[Rig]:
    yield from open_rig(teams=True)


def service(rig: Rig, channels: ChannelRegistry | None = None) -> AlertService:
    """The alerts service on clients of the adapters' session (so :class:`HttpFaults` sees them:
    make it inside ``with HttpFaults()``)."""
    env = rig.local.environment
    return AlertService(
        AlertsSettings.from_environ(env, function="alerts").policy,
        DynamoAlertStore(client("dynamodb"), env["BATCHPILOT_STATE_TABLE"]),
        SnsPublisher(client("sns"), env["BATCHPILOT_ONCALL_TOPIC_ARN"]),
        channels if channels is not None else rig.channels(),
        clock=rig.clock,
    )


def jobs(name: str, count: int) -> list[str]:
    """``count`` distinct facts: ``name``'s event for jobs on distinct queues (no digest)."""
    bodies = []
    for n in range(count):
        event = copy.deepcopy(sample(name))
        detail = event["detail"]
        detail["jobId"] = f"0000000{n}-aaaa-4bbb-8ccc-00000000000{n}"
        detail["jobArn"] = detail["jobArn"].rsplit("/", 1)[0] + "/" + detail["jobId"]
        detail["jobName"] = f"{detail['jobName']}-{n}"
        detail["jobQueue"] = f"{detail['jobQueue']}-{n}"
        event["id"] = f"event-{name}-{n}"
        bodies.append(json.dumps(event))
    return bodies


def deliver(
    make: Callable[[], AlertService], bodies: list[str], time_left: Callable[[], float] = lambda: 60.0
) -> list[BatchResult]:
    """Process the batch; records the service failed come back (as SQS would) until none fails."""
    results, pending = [], [(f"m-{i}", b) for i, b in enumerate(bodies)]
    for _ in range(6):
        if not pending:
            return results
        result = make().process(pending, time_left)
        results.append(result)
        failed = {r.message_id for r in result.records if r.failed}
        pending = [(m, b) for m, b in pending if m in failed]
    raise AssertionError(f"still failing after 6 deliveries: {pending}")


def copies_per_fact(rig: Rig, channel: str) -> Counter[str]:
    """Job name → messages that name it, on ``channel`` (``sns``, ``slack``, ``teams``). The on-call
    topic's messages are read off its subscribed queue: once per test."""
    if channel == "sns":
        texts = [m["Subject"] + "\n" + m["Message"] for m in rig.sns()]
    elif channel == "slack":
        texts = [json.dumps(r.payload) for r in rig.slack.delivered()]
    else:
        texts = [json.dumps(r.payload) for r in rig.teams.delivered()]
    out: Counter[str] = Counter()
    for text in texts:
        for word in set(text.replace('"', " ").replace("\n", " ").split()):
            if word.startswith(("llama", "hparam", "mistral")):
                out[word.rstrip(".,:)")] += 1
    return out


def later_copy(rig: Rig, make: Callable[[], AlertService], bodies: list[str]) -> BatchResult:
    """The same events again after every lease ran out (EventBridge retry, archive replay)."""
    rig.clock.now += timedelta(minutes=30)
    return make().process([(f"again-{i}", b) for i, b in enumerate(bodies)], lambda: 60.0)


# ------------------------------------------------------------------------ chat failure modes
SLACK_MODES = [
    ("rate_limited", {"times": 1, "retry_after": 0}),  # waited out: delivered to Slack
    ("rate_limited", {"times": 10, "retry_after": 0}),  # still 429 after 3 retries: fallback
    ("server_error", {"times": 1}),
    ("invalid_blocks", {"times": 1}),
    ("timeout", {"times": 1, "delay": 2.0}),  # Slack took it, the client gave up: fallback too
    ("hang", {"times": 1, "delay": 3.0}),
]


@pytest.mark.parametrize(("mode", "script"), SLACK_MODES, ids=[f"{m}-{s['times']}" for m, s in SLACK_MODES])
def test_slack_failures_end_with_one_copy_per_channel_and_nothing_lost(
    rig: Rig, mode: str, script: dict[str, Any]
) -> None:
    bodies = [*jobs(CRITICAL, 1), *jobs(INFO, 1)]
    slack = SlackNotifier(
        SecretSource(client("secretsmanager")),
        webhook_secret=rig.local.environment["BATCHPILOT_SLACK_WEBHOOK_SECRET"],
        sleep=lambda seconds: None,
        timeout=1.0,
    )
    channels = ChannelRegistry([slack])
    rig.slack.fail_next(mode, **script)
    results = deliver(lambda: service(rig, channels), bodies)
    assert results[-1].records and all(not r.failed for r in results[-1].records)
    again = later_copy(rig, lambda: service(rig, channels), bodies)
    assert again.records and all(r.suppressed == "duplicate" for r in again.records)
    sns, chat = copies_per_fact(rig, "sns"), copies_per_fact(rig, "slack")
    facts = {"llama-spot-run47-0", "llama3-8b-lora-ft-run-39-0"}
    # Nothing lost: every fact reached a person, on chat or on the on-call topic; never twice.
    assert set(sns) | set(chat) >= facts
    assert max((sns + Counter()).values()) == 1 and max(chat.values(), default=1) == 1


TEAMS_MODES = [
    ("rate_limited", {"times": 1, "retry_after": 0}),  # urllib3's Retry waits it out: delivered
    ("rate_limited", {"times": 10, "retry_after": 0}),  # still 429 after 3 retries: fallback
    ("server_error", {"times": 1}),
    ("bad_request", {"times": 1}),
    ("timeout", {"times": 1, "delay": 2.0}),
    ("hang", {"times": 1, "delay": 3.0}),
]


@pytest.mark.parametrize(("mode", "script"), TEAMS_MODES, ids=[f"{m}-{s['times']}" for m, s in TEAMS_MODES])
def test_teams_failures_end_with_one_copy_per_channel_and_nothing_lost(
    teams_rig: Rig, mode: str, script: dict[str, Any]
) -> None:
    rig = teams_rig
    rig.chat_timeout = 1.0
    bodies = [*jobs(CRITICAL, 1), *jobs(INFO, 1)]
    rig.teams.fail_next(mode, **script)
    results = deliver(lambda: service(rig), bodies)
    assert results[-1].records and all(not r.failed for r in results[-1].records)
    again = later_copy(rig, lambda: service(rig), bodies)
    assert again.records and all(r.suppressed == "duplicate" for r in again.records)
    copies = {channel: copies_per_fact(rig, channel) for channel in ("sns", "slack", "teams")}
    for channel, counted in copies.items():
        assert max(counted.values(), default=1) == 1, channel
    reached = set(copies["sns"]) | set(copies["teams"]) | set(copies["slack"])
    assert reached >= {"llama-spot-run47-0", "llama3-8b-lora-ft-run-39-0"}
    # Slack delivered the info fact whatever Teams did: only the critical fact reached the topic.
    assert set(copies["sns"]) == {"llama-spot-run47-0"}


# ------------------------------------------------------------------------ deadline
def countdown(seconds: float) -> Callable[[], float]:
    """The Lambda context's time left, on the real clock."""
    deadline = time.monotonic() + seconds
    return lambda: deadline - time.monotonic()


def test_a_hanging_slack_costs_one_request_timeout_and_every_fact_falls_back_in_time(rig: Rig) -> None:
    bodies = jobs(INFO, 10)  # ten Slack-only facts on ten queues: ten posts
    slack = SlackNotifier(
        SecretSource(client("secretsmanager")),
        webhook_secret=rig.local.environment["BATCHPILOT_SLACK_WEBHOOK_SECRET"],
        timeout=2.0,
    )
    rig.slack.fail_always("hang", delay=30.0)
    time_left = countdown(CHAT_RESERVE_SECONDS + 7.0)
    result = service(rig, ChannelRegistry([slack])).process(
        [(f"m-{i}", b) for i, b in enumerate(bodies)], time_left
    )
    assert time_left() > CHAT_RESERVE_SECONDS - 1.0  # done well before the deadline
    assert [r.failed for r in result.records] == [False] * 10  # none goes back to the queue (or DLQ)
    assert len(rig.slack.requests) == 1  # one hung request, then the channel counts as down
    assert sorted(copies_per_fact(rig, "sns")) == sorted(f"llama3-8b-lora-ft-run-39-{n}" for n in range(10))


def test_a_429_wait_then_a_hang_still_falls_back_before_the_deadline(rig: Rig) -> None:
    bodies = jobs(INFO, 1)
    slack = SlackNotifier(
        SecretSource(client("secretsmanager")),
        webhook_secret=rig.local.environment["BATCHPILOT_SLACK_WEBHOOK_SECRET"],
    )
    rig.slack.fail_next("rate_limited", retry_after=6)
    rig.slack.fail_next("hang", delay=30.0)
    time_left = countdown(CHAT_RESERVE_SECONDS + 7.0)
    result = service(rig, ChannelRegistry([slack])).process([("m-0", bodies[0])], time_left)
    assert time_left() > 0  # the request after the wait got only the time then left
    assert not result.records[0].failed and result.records[0].channels == ["sns"]
    assert len(copies_per_fact(rig, "sns")) == 1


# ------------------------------------------------------------------------ AWS faults
AWS_FAULTS = [
    ("sns", "PublishBatch", FaultKind.SERVER_ERROR, 6, 0),  # every attempt of one delivery
    ("dynamodb", "UpdateItem", FaultKind.THROTTLE, 6, 0),  # the claim
    ("dynamodb", "PutItem", FaultKind.SERVER_ERROR, 6, 0),  # the job state
    ("dynamodb", "PutItem", FaultKind.ACCEPTED_SERVER_ERROR, 1, 0),  # the job state, answer lost
    # The delivery records after a successful publish and post: both writes, every attempt.
    ("dynamodb", "UpdateItem", FaultKind.SERVER_ERROR, 12, 1),
    ("dynamodb", "UpdateItem", FaultKind.ACCEPTED_SERVER_ERROR, 3, 1),
]


@pytest.mark.parametrize(
    ("service_name", "operation", "kind", "times", "skip"),
    AWS_FAULTS,
    ids=[f"{s}-{o}-{k}-x{t}-after{n}" for s, o, k, t, n in AWS_FAULTS],
)
def test_aws_faults_end_with_one_page_and_one_chat_message(
    rig: Rig, service_name: str, operation: str, kind: FaultKind, times: int, skip: int
) -> None:
    bodies = jobs(CRITICAL, 1)
    with HttpFaults() as faults:
        faults.add(service_name, operation, kind, times=times, skip=skip)
        deliver(lambda: service(rig), bodies)
        later_copy(rig, lambda: service(rig), bodies)
    assert faults.injected
    assert copies_per_fact(rig, "sns") == Counter({"llama-spot-run47-0": 1})
    assert copies_per_fact(rig, "slack") == Counter({"llama-spot-run47-0": 1})


ALARM = "cloudwatch-alarm/job-failure-rate-alarm"  # one of the stack's alarms, critical
ALARM_NAME = "batchpilot/batchpilot/JobQueueFailureRateAlarm"


@pytest.mark.parametrize(
    ("service_name", "operation", "kind", "times", "skip"),
    AWS_FAULTS,
    ids=[f"{s}-{o}-{k}-x{t}-after{n}" for s, o, k, t, n in AWS_FAULTS],
)
def test_aws_faults_on_an_alarm_end_with_one_page_and_one_chat_message(
    rig: Rig, service_name: str, operation: str, kind: FaultKind, times: int, skip: int
) -> None:
    # The state change, a copy under another envelope id in the same batch, and a later copy.
    alarm = sample(ALARM)
    bodies = [json.dumps(alarm), json.dumps({**alarm, "id": "another-envelope-id"})]
    with HttpFaults() as faults:
        faults.add(service_name, operation, kind, times=times, skip=skip)
        deliver(lambda: service(rig), bodies)
        later_copy(rig, lambda: service(rig), bodies)
    assert faults.injected
    pages = [m for m in rig.sns() if ALARM_NAME in m["Subject"]]
    assert len(pages) == 1 and pages[0]["MessageAttributes"]["severity"]["Value"] == "critical"
    assert sum(ALARM_NAME in json.dumps(r.payload) for r in rig.slack.delivered()) == 1


def test_an_accepted_publish_whose_answer_is_lost_pages_at_most_twice(rig: Rig) -> None:
    """SNS standard topics have no idempotency key: a PublishBatch that SNS took but whose answer
    was lost is sent again (by botocore, or by the record's redelivery). The bound: one extra page
    per lost answer (docs/reliability.md); chat still gets one message."""
    bodies = jobs(CRITICAL, 1)
    with HttpFaults() as faults:
        faults.add("sns", "PublishBatch", FaultKind.ACCEPTED_SERVER_ERROR, times=1)
        deliver(lambda: service(rig), bodies)
        later_copy(rig, lambda: service(rig), bodies)
    assert faults.injected
    assert copies_per_fact(rig, "sns") == Counter({"llama-spot-run47-0": 2})
    assert copies_per_fact(rig, "slack") == Counter({"llama-spot-run47-0": 1})


def test_a_claim_race_sends_once(rig: Rig) -> None:
    """Two invocations with the same fact (an EventBridge duplicate): the second finds the lease
    held, fails its record, and its redelivery finds the fact sent."""
    bodies = jobs(CRITICAL, 1)
    first = service(rig)
    store = first.store
    facts_claimed = first.process([("a", bodies[0])], lambda: 60.0)
    assert not facts_claimed.records[0].failed
    deliver(lambda: service(rig), bodies)
    assert isinstance(store, DynamoAlertStore)
    assert copies_per_fact(rig, "sns") == Counter({"llama-spot-run47-0": 1})
    assert copies_per_fact(rig, "slack") == Counter({"llama-spot-run47-0": 1})


# ------------------------------------------------------------------------ escaping
FORGED = "<!channel> <@U0ADMIN> <http://evil.example|click here> [click](http://evil.example) <at>all</at>"


def forged_events() -> list[str]:
    event = copy.deepcopy(sample(CRITICAL))
    event["detail"]["statusReason"] = FORGED
    event["detail"]["jobName"] = "<!here>-job"
    return [json.dumps(event)]


def strings(value: Any) -> Iterator[str]:
    """Every text Slack parses as mrkdwn (``plain_text`` objects never render mentions or links:
    Block Kit reference, text object)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        if value.get("type") == "plain_text":
            return
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_every_text_sent_to_slack_is_escaped(rig: Rig) -> None:
    service(rig).process([("m", b) for b in forged_events()], lambda: 60.0)
    [payload] = rig.slack_delivered()
    assert "&lt;!channel&gt;" in payload["text"] or "&lt;!here&gt;" in payload["text"]
    texts = list(strings(payload))
    assert payload["text"] in texts
    for text in texts:
        assert "<!" not in text and "<@" not in text and "<http://evil" not in text, text


def test_every_text_sent_to_teams_is_escaped(teams_rig: Rig) -> None:
    service(teams_rig).process([("m", b) for b in forged_events()], lambda: 60.0)
    [request] = teams_rig.teams.delivered()
    card = request.card
    assert "[click](" not in card["fallbackText"] and "<!here>" not in card["fallbackText"]

    def blocks(items: list[Any]) -> Iterator[dict[str, Any]]:
        for item in items:
            if isinstance(item, dict):
                yield item
                yield from blocks(item.get("items", []) + item.get("columns", []))

    text_blocks = [block for block in blocks(card["body"]) if block.get("type") == "TextBlock"]
    assert text_blocks
    for block in text_blocks:  # Markdown: batchpilot's own words only
        assert "evil" not in block["text"] and "<!" not in block["text"], block
