"""Incidents through the real alerts handler (functions/alerts/app.py): a fleet-wide burst of
failures on one job queue, in the batches Lambda's event source mapping forms (100 records), gives
one page and one chat post at once, one chat update, and one summary per channel at the window's
end (docs/alerts.md, "Incidents"; docs/reliability.md). The embedded AWS holds the StateTable, the
on-call topic and the alerts queue (the summary's delayed timer); Slack and Teams are the local chat
endpoint. The window's end is reached with the service's injected clock; the timer's body is read
off the SendMessage request (botocore's ``before-parameter-build`` event) and handed to the handler
as SQS would deliver it after its delay.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from batchpilot.io.clients import session
from batchpilot.shared.observability import metrics as shared_metrics
from batchpilot_local.chat_endpoint import LocalChatEndpoint
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.notifications import LocalAlerts
from batchpilot_local.testing.alerts import Clock, failed_fleet
from batchpilot_local.testing.faults import FaultKind, HttpFaults, Killed
from batchpilot_local.testing.harness import load_app, sqs_event, template_environment

QUEUE = "AlertsQueue"
BURST = 1000
BATCH = 100  # AlertsQueue's BatchSize (template.yaml)
REASON = "CannotPullContainerError: pull access denied for 111122223333.dkr.ecr/llm-train"  # critical


@dataclass
class Timers:
    """The bodies and delays of the SendMessage requests to the alerts queue (the summary timers)."""

    sent: list[tuple[str, int]] = field(default_factory=list)

    def __call__(self, params: dict[str, Any], **_: Any) -> None:
        self.sent.append((str(params["MessageBody"]), int(params.get("DelaySeconds", 0))))


@dataclass
class Deployed:
    aws: EmbeddedAws
    chat: LocalChatEndpoint
    local: LocalAlerts
    app: ModuleType
    clock: Clock
    timers: Timers
    faults: HttpFaults
    sns: list[dict[str, Any]] = field(default_factory=list)

    def deliver(self, bodies: list[str], context: Any) -> dict[str, Any]:
        """One invocation, as Lambda's event source mapping makes it (a batch whose every record
        failed raises: Lambda then delivers all of it again, as it does the failures it reports)."""
        event = sqs_event(bodies, QUEUE)
        try:
            response: dict[str, Any] = self.app.lambda_handler(event, context)
        except BatchProcessingError:
            return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]]}
        return response

    def burst(self, events: list[dict[str, Any]], context: Any, seconds: float = 60.0) -> int:
        """``events`` in batches of :data:`BATCH`, spread over ``seconds``; failed records come
        back in the next batch, as SQS delivers them again (at most 20 invocations). Returns how
        many records were delivered again."""
        bodies = [json.dumps(e) for e in events]
        step = timedelta(seconds=seconds / max(1, len(bodies) // BATCH))
        pending: list[str] = []
        again = 0
        for _ in range(20):
            if not (bodies or pending):
                return again
            batch, bodies = (pending + bodies)[:BATCH], (pending + bodies)[BATCH:]
            response = self.deliver(batch, context)
            failed = {int(f["itemIdentifier"].split("-")[1]) for f in response["batchItemFailures"]}
            pending = [b for i, b in enumerate(batch) if i in failed]
            again += len(pending)
            self.clock.now += step
        raise AssertionError(f"{len(pending) + len(bodies)} records still failing after 20 invocations")

    def counts(self) -> dict[str, int]:
        self.sns += self.local.sns_messages()
        return {
            "sns": len(self.sns),
            "slack": len(self.chat.slack.delivered()),
            "teams": len(self.chat.teams.delivered()),
        }


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    shared_metrics.clear_metrics()
    timers = Timers()
    hook = f"incident-timers-{id(timers)}"
    session().events.register("before-parameter-build.sqs.SendMessage", timers, unique_id=hook)
    try:
        # Opened before the handler's cold start: its clients see the hook (faults added later).
        with EmbeddedAws() as aws, LocalChatEndpoint() as chat, HttpFaults() as faults:
            env = template_environment("alerts")
            env["BATCHPILOT_ALERTS_QUEUE_URL"] = aws.create_queue(QUEUE)
            local = LocalAlerts(aws, environment=env, chat=chat, slack=True, teams=True).open()
            app = load_app("alerts", local.environment, monkeypatch=monkeypatch)
            clock = Clock(datetime(2026, 12, 2, 10, tzinfo=UTC))
            app.service.clock = clock  # the service's injected clock: the window's end comes at once
            yield Deployed(aws, chat, local, app, clock, timers, faults)
    finally:
        session().events.unregister("before-parameter-build.sqs.SendMessage", unique_id=hook)
        shared_metrics.clear_metrics()


def test_1000_critical_failures_in_a_minute_page_and_post_at_most_three_times(
    deployed: Deployed, lambda_context: Any
) -> None:
    deployed.burst(failed_fleet(BURST, REASON, series="2525"), lambda_context)
    during = deployed.counts()
    # At once: the first failure pages and posts; the first batch of the rest is one chat update.
    assert during == {"sns": 1, "slack": 2, "teams": 2}
    # One timer, delayed to the window's end (10 minutes from the first failure, within SQS's 900 s).
    assert len(deployed.timers.sent) == 1
    body, delay = deployed.timers.sent[0]
    assert 0 < delay <= 600
    # The window ends; SQS delivers the timer; a copy of it (SQS delivers at least once) sends nothing.
    deployed.clock.now += timedelta(minutes=11)
    assert deployed.deliver([body], lambda_context) == {"batchItemFailures": []}
    assert deployed.deliver([body], lambda_context) == {"batchItemFailures": []}
    after = deployed.counts()
    print(f"\n1,000 critical failures in a minute: {after}")  # the measured numbers (pytest -s)
    assert after == {"sns": 2, "slack": 3, "teams": 3}
    # The summary counts the whole incident.
    assert f"{BURST} " in deployed.sns[-1]["Subject"]
    assert f"{BURST} " in deployed.chat.slack.delivered()[-1].payload["text"]


def test_the_whole_burst_again_after_the_summary_sends_nothing(
    deployed: Deployed, lambda_context: Any
) -> None:
    events = failed_fleet(250, REASON, series="2526")
    deployed.burst(events, lambda_context, seconds=20)
    body, _ = deployed.timers.sent[0]
    deployed.clock.now += timedelta(minutes=11)
    deployed.deliver([body], lambda_context)
    before = deployed.counts()
    # EventBridge's retries, an archive replay: every fact is a duplicate of one already sent.
    deployed.burst(events, lambda_context, seconds=20)
    assert deployed.counts() == before == {"sns": 2, "slack": 3, "teams": 3}


@pytest.mark.parametrize(
    ("kill", "later", "redelivered"),
    [
        # Ended before the summary's publish: the redelivery after the lease (390 s) publishes it.
        (FaultKind.KILL_BEFORE, 400, {"batchItemFailures": []}),
        # Ended after SNS took it, before its record: the redelivery within the lease sends nothing.
        (FaultKind.KILL_AFTER, 360, {"batchItemFailures": [{"itemIdentifier": "msg-0"}]}),
    ],
)
def test_a_summary_killed_mid_delivery_is_sent_once(
    deployed: Deployed, lambda_context: Any, kill: FaultKind, later: int, redelivered: dict[str, Any]
) -> None:
    deployed.burst(failed_fleet(120, REASON, series="2527"), lambda_context, seconds=10)
    body, _ = deployed.timers.sent[0]
    deployed.clock.now += timedelta(minutes=11)
    deployed.faults.add("sns", "PublishBatch", kill)
    with pytest.raises(Killed):
        deployed.deliver([body], lambda_context)
    # SQS delivers the timer again after the visibility timeout (360 s).
    deployed.clock.now += timedelta(seconds=later)
    assert deployed.deliver([body], lambda_context) == redelivered
    assert deployed.counts()["sns"] == 2  # the first failure's page and one summary


def test_a_refused_summary_timer_degrades_to_one_digest_per_batch_and_loses_nothing(
    deployed: Deployed, lambda_context: Any
) -> None:
    # SQS refuses every SendMessage for good (a 400): no summary can come, so no fact may wait for one.
    deployed.faults.add("sqs", "SendMessage", FaultKind.INVALID, times=None)
    assert deployed.burst(failed_fleet(200, REASON, series="2528"), lambda_context, seconds=20) == 0
    counts = deployed.counts()
    # Two batches: each batch's facts as one digest per chat channel, a page then a digest on the
    # on-call topic (the per-batch grouping); no record retried, none waiting for a summary.
    assert counts == {"sns": 4, "slack": 2, "teams": 2}, counts
