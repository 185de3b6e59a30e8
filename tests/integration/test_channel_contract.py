"""The channel contract: every registered chat channel (``batchpilot.alerts.channels.registered``),
built as the alerts function builds it (its registration's factory, from the settings), through the
same cases against the generic local webhook sink (a real HTTP server on 127.0.0.1): render limits,
escaping of event text, the deadline, HTTP 429, 5xx, a hang, an unreachable webhook, and the URL
(a credential) never logged; then through the real alerts service (embedded AWS): delivered once,
and a failed post falling back to the on-call topic once. A new channel that registers itself is
run through all of them."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from batchpilot.alerts.channels import (
    MAX_RATE_LIMIT_RETRIES,
    ChannelOptions,
    Registration,
    Rendered,
    registered,
)
from batchpilot.alerts.policy import Channel, RoutingPolicy, Severity
from batchpilot.alerts.ports import Delivery, Notice, Notifier
from batchpilot.alerts.registry import ChannelRegistry
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.shared.records import Outcome
from batchpilot_local.chat_endpoint import LocalChatEndpoint, LocalWebhook
from batchpilot_local.testing.alerts import ENV, Rig, StaticSecrets, fact_of, failed_fleet, open_rig
from batchpilot_local.testing.samples import batch_job, sample

REGISTRATIONS = registered()
TIMEOUT = 2.0
"""Seconds one request may take in these cases (the notifier's ``timeout``): long enough that a
loopback answer on a loaded 2-core CI machine never times out (0.5 s once turned a 429 into
``timeout``), short enough that the hang cases stay quick."""
HOSTILE = "<!channel> <@U0123> [x](https://evil.example) a&b *bold* _it_ {{DATE(2017-02-14T06:08:39Z)}}"
"""A job name made of the markup chat services interpret: mentions, links, emphasis, card functions."""


def test_every_chat_channel_registers_itself() -> None:
    assert [r.channel for r in REGISTRATIONS] == [c for c in Channel if c is not Channel.SNS]
    assert len({r.channel for r in REGISTRATIONS}) == len(REGISTRATIONS)


@dataclass
class Subject:
    """One registered channel, configured at its generic local webhook."""

    registration: Registration
    notifier: Notifier[Any]
    hook: LocalWebhook
    sleeps: list[float] = field(default_factory=list)

    def render(self, notice: Notice) -> Rendered:
        return cast(Rendered, self.notifier.render(notice))

    def post(self, notice: Notice, time_left: float = 60.0) -> Delivery:
        return self.notifier.post(self.notifier.render(notice), thread=None, time_left=lambda: time_left)


def configured(registration: Registration, url: str, sleeps: list[float]) -> Notifier[Any]:
    """The channel's notifier as the function builds it, its webhook secret holding ``url``."""
    secret_id = f"batchpilot/contract/{registration.channel.value}-webhook"
    settings = AlertsSettings.from_environ(
        {**ENV, AlertsSettings.webhook_variable(registration.channel): secret_id}, function="alerts"
    )
    assert registration.channel in settings.chat_channels
    secrets = StaticSecrets({secret_id: json.dumps({"url": url})})
    notifier = registration.factory(settings, secrets, ChannelOptions(sleeps.append, TIMEOUT))
    assert notifier is not None and notifier.name is registration.channel
    return notifier


@pytest.fixture(scope="module")
def chat() -> Iterator[LocalChatEndpoint]:
    with LocalChatEndpoint() as endpoint:
        yield endpoint


@pytest.fixture(params=REGISTRATIONS, ids=[r.channel.value for r in REGISTRATIONS])
def subject(request: pytest.FixtureRequest, chat: LocalChatEndpoint) -> Subject:
    registration: Registration = request.param
    hook = chat.webhook(registration.channel.value, registration.accepted)
    hook.recover()
    hook.clear()
    sleeps: list[float] = []
    return Subject(registration, configured(registration, hook.webhook_url, sleeps), hook, sleeps)


def one(event: dict[str, Any]) -> Notice:
    return Notice((fact_of(event),), Severity.CRITICAL, "a terminal failure")


def burst(count: int, reason: str) -> Notice:
    facts = tuple(fact_of(e) for e in failed_fleet(count, reason, series="7777"))
    return Notice(facts, Severity.INFO, "spot interruptions", max_items=40)


INFO = one(sample("batch-job/failed-spot-reclaim"))


# ------------------------------------------------------------------------------- render limits
@pytest.mark.parametrize(
    "notice",
    [
        one(
            batch_job(
                "FAILED",
                jobName="n" * 300,
                attempts=[{"container": {"reason": "CannotPullContainerError: " + "é" * 60_000}}],
            )
        ),
        burst(200, "Host EC2 (instance i-0abc) terminated. " + "x" * 900),
    ],
    ids=["huge-fact", "huge-digest"],
)
def test_a_message_stays_within_the_channels_limits_and_is_delivered(
    subject: Subject, notice: Notice
) -> None:
    limits = subject.registration.limits
    message = subject.render(notice)
    assert 0 < len(message.headline()) <= limits.headline
    assert len(message.body()) <= limits.body
    assert subject.post(notice) == Delivery(True)
    [request] = subject.hook.requests
    assert request.delivered and request.size <= limits.body  # as sent (slack-sdk adds its flags)


def test_a_small_message_is_delivered_once(subject: Subject) -> None:
    assert subject.post(INFO) == Delivery(True)
    assert [r.status for r in subject.hook.requests] == [subject.registration.accepted[0]]
    assert subject.sleeps == []


# ------------------------------------------------------------------------------------ escaping
def test_event_text_in_the_summary_is_escaped_as_the_channel_documents(subject: Subject) -> None:
    message = subject.render(one(batch_job("FAILED", jobName=HOSTILE)))
    escaped = subject.registration.escape(HOSTILE)
    assert escaped != HOSTILE  # every channel has markup this name would trigger
    assert escaped in message.summary() and HOSTILE not in message.summary()
    # (Plain-text parts, Slack's header and Teams' TextRuns, show the name as typed: no markup.)


# ------------------------------------------------------------------------------------ deadline
def test_no_time_left_posts_nothing(subject: Subject) -> None:
    assert subject.post(INFO, time_left=0.2) == Delivery(False, "deadline")
    assert subject.hook.requests == []


# ---------------------------------------------------------------------------------------- 429
def test_429_is_waited_out_while_it_fits_in_the_time_left(subject: Subject) -> None:
    subject.hook.fail_next("rate_limited", times=2, retry_after=1)
    assert subject.post(INFO) == Delivery(True)
    assert [r.status for r in subject.hook.requests] == [429, 429, subject.registration.accepted[0]]
    assert subject.sleeps == [1.0, 1.0]


def test_a_429_whose_wait_does_not_fit_fails_at_once(subject: Subject) -> None:
    subject.hook.fail_next("rate_limited", retry_after=30)
    assert subject.post(INFO, time_left=10.0) == Delivery(False, "rate_limited")
    assert len(subject.hook.requests) == 1 and subject.sleeps == []


def test_429_retries_are_bounded(subject: Subject) -> None:
    subject.hook.fail_always("rate_limited", retry_after=1)
    assert subject.post(INFO) == Delivery(False, "rate_limited")
    assert len(subject.hook.requests) == 1 + MAX_RATE_LIMIT_RETRIES
    assert subject.sleeps == [1.0] * MAX_RATE_LIMIT_RETRIES


# ---------------------------------------------------------------------------------------- 5xx
@pytest.mark.parametrize(
    ("mode", "status"),
    [("server_error", 500), ("not_found", 404), ("bad_request", 400), ("unauthorized", 401)],
)
def test_any_other_answer_is_final_at_once(subject: Subject, mode: str, status: int) -> None:
    subject.hook.fail_next(mode)
    assert subject.post(INFO) == Delivery(False, f"http_{status}")
    assert [r.status for r in subject.hook.requests] == [status]  # no retry: a 5xx may have posted
    assert subject.sleeps == []


# --------------------------------------------------------------------------------------- hang
def test_a_webhook_that_never_answers_times_out_within_the_timeout(subject: Subject) -> None:
    subject.hook.fail_next("hang", delay=5.0)
    started = time.monotonic()
    assert subject.post(INFO) == Delivery(False, "timeout")
    assert time.monotonic() - started < TIMEOUT + 1.5
    assert len(subject.hook.requests) == 1 and not subject.hook.requests[0].delivered


def test_the_request_timeout_is_never_past_the_time_left(subject: Subject) -> None:
    subject.hook.fail_next("hang", delay=5.0)
    started = time.monotonic()
    assert subject.post(INFO, time_left=0.7) == Delivery(False, "timeout")
    assert time.monotonic() - started < 0.7 + 1.0
    assert len(subject.hook.requests) == 1 and subject.sleeps == []  # one try, not retried


def test_an_unreachable_webhook_is_a_connection_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on: bound, then closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert REGISTRATIONS
    for registration in REGISTRATIONS:
        notifier = configured(registration, f"http://127.0.0.1:{port}/hooks/x/secret", [])
        message = notifier.render(INFO)
        assert notifier.post(message, thread=None, time_left=lambda: 60.0) == Delivery(
            False, "connection_error"
        )


# ------------------------------------------------------------------------------------- secrecy
def test_the_webhook_url_is_never_logged(subject: Subject, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # even with every logger at DEBUG (Lambda's LOG_LEVEL=DEBUG)
    reasons = [subject.post(INFO).reason]
    subject.hook.fail_next("server_error")
    reasons.append(subject.post(INFO).reason)
    subject.hook.fail_next("rate_limited", retry_after=1)
    reasons.append(subject.post(INFO).reason)
    subject.hook.fail_next("hang", delay=3.0)
    reasons.append(subject.post(INFO).reason)
    assert reasons == [None, "http_500", None, "timeout"]
    assert len(subject.hook.requests) == 5
    logged = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert subject.hook.token not in logged
    assert not any(subject.hook.token in (reason or "") for reason in reasons)


# --------------------------------------------------------------- through the alerts service
@pytest.fixture
def rig() -> Iterator[Rig]:
    yield from open_rig()  # a fresh StateTable and topic per case


def service_of(subject: Subject) -> tuple[RoutingPolicy, ChannelRegistry]:
    """The default policy of a deployment with only this channel, and a registry holding it."""
    return RoutingPolicy().for_chat((subject.registration.channel,)), ChannelRegistry([subject.notifier])


def test_a_fact_reaches_the_channel_once(rig: Rig, subject: Subject) -> None:
    policy, channels = service_of(subject)
    event = sample("batch-job/failed-spot-reclaim")
    result = rig.run(event, policy=policy, channels=channels)
    assert result.sent == [(subject.registration.channel.value, "info")] and result.failed == []
    again = rig.run({**event, "id": "another-envelope-id"}, policy=policy, channels=channels)
    assert again.records[0].outcome is Outcome.DUPLICATE
    assert len(subject.hook.delivered()) == 1 and rig.sns() == []


def test_a_failed_post_falls_back_to_the_on_call_topic_once(rig: Rig, subject: Subject) -> None:
    name = subject.registration.channel.value
    policy, channels = service_of(subject)
    subject.hook.fail_next("server_error")
    event = sample("batch-job/failed-spot-reclaim")
    result = rig.run(event, policy=policy, channels=channels)
    assert result.failed == [(name, "http_500")] and not result.records[0].failed
    [message] = rig.sns()
    assert f"{subject.registration.channel.label} delivery failed: http_500" in message["Message"]
    assert message["MessageAttributes"]["fallback_from"]["Value"] == name
    retry = rig.run(event, policy=policy, channels=channels)  # the fallback counts as delivered
    assert retry.records[0].outcome is Outcome.DUPLICATE and rig.sns() == []
    assert len(subject.hook.requests) == 1
