"""The ledger's other side effect, ``Job Starving`` (claim PutItem, PutEvents, confirm UpdateItem),
survives a function killed between any two of them: the event is published at least once, and
every copy names the same (job, reason), the key under which the alerts function sends one message
(``AlertFact.key``; duplicates of an own event are one message: tests/integration/
test_alerts_delivery.py). A claim whose invocation died before publishing is taken over after
its lease (``STARVING_LEASE``); one confirmed is never published again.

The real LedgerService and LedgerStateStore run against moto's DynamoDB, faults injected at the
HTTP layer (docs/reliability.md)."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta

import pytest
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.ledger import STARVING_LEASE, LedgerStateStore
from batchpilot.ledger.model import JobDetails
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.own_events import JobStarving
from batchpilot_local.testing.alerts import fact_of, own_envelope
from batchpilot_local.testing.faults import FaultKind, HttpFaults, Killed
from batchpilot_local.testing.ledger import FakeBatch, ListPublisher, ListSink, preemption_bodies
from batchpilot_local.testing.recovery import TABLE, harness

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
ARN = "arn:aws:batch:us-east-1:111122223333:service-job/starving-fault-1"


def deliver(body: str, publisher: ListPublisher, now: datetime) -> None:
    """One delivery of ``body`` to a new execution environment's ledger (new clients) at ``now``;
    a kill ends the invocation (SQS delivers the record again later)."""
    ledger = LedgerService(
        LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": TABLE}),
        LedgerStateStore(client("dynamodb"), TABLE),
        FakeBatch({ARN: JobDetails(queue="q", share_identifier="LOWPRI", instances=2, sized=True)}),
        ListSink(),
        lambda: now,
        publisher=publisher,
    )
    with contextlib.suppress(Killed):
        ledger.record(body)


@pytest.mark.parametrize(
    ("operation", "kind", "published_before_the_lease"),
    [
        ("PutItem", FaultKind.KILL_AFTER, 0),  # claimed, killed before PutEvents
        ("UpdateItem", FaultKind.KILL_BEFORE, 1),  # published, killed before the confirm
        ("UpdateItem", FaultKind.KILL_AFTER, 1),  # confirmed, killed before the record ended
    ],
)
def test_a_kill_around_the_publish_still_publishes_the_one_fact(
    operation: str, kind: FaultKind, published_before_the_lease: int
) -> None:
    bodies = [json.dumps(b) for b in preemption_bodies(ARN, 3, T0)]
    publisher = ListPublisher()
    now = T0 + timedelta(hours=1)
    with harness(), HttpFaults() as faults:
        for body in bodies[:-1]:
            deliver(body, publisher, now)
        assert publisher.events == []  # two preemptions and a third RUNNING: not yet
        faults.add("dynamodb", operation, kind, times=1)
        deliver(bodies[-1], publisher, now)  # the third preemption: the kill
        assert faults.injected == [(f"dynamodb:{operation}", kind)]
        deliver(bodies[-1], publisher, now + timedelta(minutes=1))  # redelivered within the lease
        assert len(publisher.events) == published_before_the_lease
        later = now + STARVING_LEASE + timedelta(minutes=1)
        for _ in range(2):  # redelivered after the lease, and once more
            deliver(bodies[-1], publisher, later)
    confirmed = kind is FaultKind.KILL_AFTER and operation == "UpdateItem"
    assert 1 <= len(publisher.events) == (1 if confirmed else 1 + published_before_the_lease)
    assert all(isinstance(e, JobStarving) for e in publisher.events)
    keys = {fact_of(own_envelope(event)).key for event in publisher.events}
    assert keys == {(ARN, "starving#PREEMPTED_REPEATEDLY")}  # one message from the alerts function
