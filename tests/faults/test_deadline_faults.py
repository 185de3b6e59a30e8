"""Alerts under a state table that is down or slow (issue 25): every AWS call is bounded by the
invocation's deadline (batchpilot.io.deadline), so no invocation runs past its timeout, what could
not finish is reported failed and redelivered, and each fact reaches each channel (the on-call
topic, Slack and Microsoft Teams at the local chat endpoint) at most once.

Time is a fake clock: botocore's backoff sleeps and each slow call advance it, and the deadline's
time left is ``TIMEOUT`` minus it, so nothing sleeps for real.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import botocore.endpoint
import pytest
from batchpilot.alerts.service import AlertService
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.io.clients import READ_TIMEOUT_SECONDS, client, session
from batchpilot.io.dynamodb.alerts import DynamoAlertStore
from batchpilot.io.sns import SnsPublisher
from batchpilot.shared.deadline import DEADLINE
from batchpilot_local.testing.alerts import Rig, open_rig
from batchpilot_local.testing.faults import Fault, FaultKind, HttpFaults, Killed
from batchpilot_local.testing.samples import sample

TIMEOUT = 60.0  # the alerts function's Timeout (template.yaml)
DYNAMODB_OPERATIONS = ("UpdateItem", "PutItem", "GetItem")
CRITICAL = "service-job/failed-validation"  # critical: on-call topic + chat
ONE_EACH = {"sns": 1, "slack": 1, "teams": 1}  # the most copies of a fact any channel may hold


def jobs(count: int) -> list[str]:
    """``count`` distinct critical facts (jobs on distinct queues: no digest)."""
    bodies = []
    for n in range(count):
        event = copy.deepcopy(sample(CRITICAL))
        detail = event["detail"]
        detail["jobId"] = f"0000000{n}-aaaa-4bbb-8ccc-00000000000{n}"
        detail["jobArn"] = detail["jobArn"].rsplit("/", 1)[0] + "/" + detail["jobId"]
        detail["jobName"] = f"deadline-job-{n}-"  # the dash ends the name: job-1 is not in job-10
        detail["jobQueue"] = f"{detail['jobQueue']}-{n}"
        event["id"] = f"event-deadline-{n}"
        bodies.append(json.dumps(event))
    return bodies


def copies_per_fact(rig: Rig, count: int = 5) -> dict[str, Counter[str]]:
    """Channel (``sns``, ``slack``, ``teams``) → job name → messages naming it (read once per test)."""
    texts = {
        "sns": [m["Subject"] + "\n" + m["Message"] for m in rig.sns()],
        "slack": [json.dumps(r.payload) for r in rig.slack.delivered()],
        "teams": [json.dumps(r.payload) for r in rig.teams.delivered()],
    }
    out: dict[str, Counter[str]] = {}
    for channel, messages in texts.items():
        counter: Counter[str] = Counter()
        for text in messages:
            for n in range(count):
                counter[f"deadline-job-{n}-"] += f"deadline-job-{n}-" in text
        out[channel] = +counter
    return out


class FakeTime:
    """Seconds spent in the running invocation; botocore's sleeps add to it."""

    def __init__(self) -> None:
        self.spent = 0.0
        self.longest = 0.0

    def sleep(self, seconds: float) -> None:
        self.spent += seconds
        self.longest = max(self.longest, self.spent)

    def time_left(self) -> float:
        return TIMEOUT - self.spent


@pytest.fixture
def rig() -> Iterator[Rig]:
    yield from open_rig(teams=True)  # Slack and Teams, each at the local chat endpoint


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTime]:
    clock = FakeTime()
    monkeypatch.setattr(botocore.endpoint.time, "sleep", clock.sleep)
    yield clock
    DEADLINE.clear()


def service(rig: Rig) -> AlertService:
    """The alerts service as functions/alerts/app.py builds it (settings' service arguments: the
    lease from the queue's visibility timeout, the time reserves), on the adapters' session."""
    env = rig.local.environment
    settings = AlertsSettings.from_environ(env, function="alerts")
    return AlertService(
        settings.policy,
        DynamoAlertStore(client("dynamodb"), env["BATCHPILOT_STATE_TABLE"]),
        SnsPublisher(client("sns"), env["BATCHPILOT_ONCALL_TOPIC_ARN"]),
        rig.channels(),
        clock=rig.clock,
        **settings.service_args,
    )


def invoke(rig: Rig, fake: FakeTime, pending: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """One invocation over ``pending`` (a fresh deadline); returns the records it reported failed."""
    fake.spent = 0.0
    DEADLINE.start(fake.time_left)
    try:
        result = service(rig).process(pending, fake.time_left)
    finally:
        DEADLINE.clear()
    failed = {r.message_id for r in result.records if r.failed}
    return [(m, b) for m, b in pending if m in failed]


def test_table_down_longer_than_the_timeout_then_back(rig: Rig, fake: FakeTime) -> None:
    bodies = jobs(5)
    pending = [(f"m-{i}", b) for i, b in enumerate(bodies)]
    faults = HttpFaults()
    for op in DYNAMODB_OPERATIONS:
        faults.add("dynamodb", op, FaultKind.SERVER_ERROR, times=None)
    with faults:
        pending = invoke(rig, fake, pending)
    assert fake.longest <= TIMEOUT, f"the invocation ran {fake.longest:.1f} s"
    assert len(pending) == 5  # every record released for redelivery, none posted
    for _ in range(3):  # the table is back: SQS redelivers the failed records
        if pending:
            pending = invoke(rig, fake, pending)
    assert pending == []
    copies = copies_per_fact(rig)
    assert {channel: len(c) for channel, c in copies.items()} == {"sns": 5, "slack": 5, "teams": 5}, copies
    assert {channel: max(c.values()) for channel, c in copies.items()} == ONE_EACH, copies


def test_table_slow_each_call_near_the_read_timeout(rig: Rig, fake: FakeTime) -> None:
    def slow(event_name: str = "", **_: Any) -> None:
        fake.sleep(READ_TIMEOUT_SECONDS - 0.5)  # answered just before the client gives up

    bodies = jobs(5)
    pending = [(f"m-{i}", b) for i, b in enumerate(bodies)]
    session().events.register("before-send.dynamodb", slow, unique_id="test-slow-dynamodb")
    invocations, longest = 0, 0.0
    try:
        while pending and invocations < 12:
            pending = invoke(rig, fake, pending)
            invocations += 1
            longest = max(longest, fake.spent)
    finally:
        session().events.unregister("before-send.dynamodb", unique_id="test-slow-dynamodb")
    assert longest <= TIMEOUT, f"an invocation ran {longest:.1f} s"
    assert pending == []
    copies = copies_per_fact(rig)
    assert {channel: len(c) for channel, c in copies.items()} == {"sns": 5, "slack": 5, "teams": 5}, copies
    assert {channel: max(c.values()) for channel, c in copies.items()} == ONE_EACH, copies


@dataclass
class EveryOther(Fault):
    """Throttles every other matching request (half the table's writes and reads)."""

    seen_requests: int = 0

    def take(self) -> bool:
        self.seen_requests += 1
        if self.seen_requests % 2:
            return False
        self.hits += 1
        return True


def test_table_throttled_at_half_of_its_requests(rig: Rig, fake: FakeTime) -> None:
    bodies = jobs(50)
    pending = [(f"m-{i}", b) for i, b in enumerate(bodies)]
    faults = HttpFaults()
    faults.faults.extend(
        EveryOther("dynamodb", op, FaultKind.THROTTLE, times=None) for op in DYNAMODB_OPERATIONS
    )
    invocations, longest = 0, 0.0
    with faults:
        while pending and invocations < 12:
            pending = invoke(rig, fake, pending)
            invocations += 1
            longest = max(longest, fake.spent)
    assert faults.injected, "no request was throttled"
    assert longest <= TIMEOUT, f"an invocation ran {longest:.1f} s"
    assert pending == []
    copies = copies_per_fact(rig, 50)
    assert {channel: len(c) for channel, c in copies.items()} == {"sns": 50, "slack": 50, "teams": 50}, copies
    assert {channel: max(c.values()) for channel, c in copies.items()} == ONE_EACH, copies


def test_a_claim_outlives_the_redelivery_of_a_killed_invocation(rig: Rig, fake: FakeTime) -> None:
    # Killed after posting to the topic, before its delivery record: SQS delivers the
    # batch again after the queue's visibility timeout (360 s), while the lease (360 + 30 s) holds.
    pending = [(f"m-{i}", b) for i, b in enumerate(jobs(1))]
    with HttpFaults().add("dynamodb", "UpdateItem", FaultKind.KILL_BEFORE, skip=1), pytest.raises(Killed):
        invoke(rig, fake, pending)  # the first UpdateItem is the claim, the second a delivery record
    rig.clock.now += timedelta(seconds=360)
    assert invoke(rig, fake, pending) == pending  # the lease holds: failed, not sent again
    copies = copies_per_fact(rig, 1)
    assert {channel: dict(c) for channel, c in copies.items()} == {
        "sns": {"deadline-job-0-": 1},  # posted once, before the kill
        "slack": {},  # the kill came first: Slack waits for the lease to run out (390 s)
        "teams": {},  # and so does Teams
    }
