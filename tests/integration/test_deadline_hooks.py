"""io.deadline's botocore hooks on every io.clients client, against the embedded AWS: an attempt or
a retry that cannot end before the deadline is refused (DeadlineExceeded, never retried); answers
botocore would not retry keep their own error; without a deadline nothing is bounded."""

from __future__ import annotations

from collections.abc import Iterator

import botocore.endpoint
import pytest
from batchpilot.io.clients import CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS, RETRY_ATTEMPTS, client
from batchpilot.shared.deadline import DEADLINE, MARGIN_SECONDS, DeadlineExceeded
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.testing.faults import FaultKind, HttpFaults
from botocore.exceptions import ClientError

ATTEMPT = CONNECT_TIMEOUT_SECONDS + READ_TIMEOUT_SECONDS


class Clock:
    def __init__(self, left: float) -> None:
        self.left = left

    def sleep(self, seconds: float) -> None:
        self.left -= seconds


@pytest.fixture
def aws() -> Iterator[EmbeddedAws]:
    with EmbeddedAws() as embedded:
        yield embedded
    DEADLINE.clear()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock(60.0)
    monkeypatch.setattr(botocore.endpoint.time, "sleep", fake.sleep)
    DEADLINE.start(lambda: fake.left)
    return fake


def test_an_attempt_that_cannot_end_in_time_is_not_sent(aws: EmbeddedAws, clock: Clock) -> None:
    clock.left = ATTEMPT + MARGIN_SECONDS - 0.1
    with HttpFaults() as faults, pytest.raises(DeadlineExceeded, match="dynamodb:ListTables"):
        client("dynamodb").list_tables()
    assert faults.seen == []  # refused before any other hook, so never sent
    clock.left = ATTEMPT + MARGIN_SECONDS
    assert client("dynamodb").list_tables()["TableNames"] == []


def test_retries_stop_when_the_next_backoff_and_attempt_do_not_fit(aws: EmbeddedAws, clock: Clock) -> None:
    clock.left = 20.0
    faults = HttpFaults().add("dynamodb", "ListTables", FaultKind.SERVER_ERROR, times=None)
    with faults, pytest.raises(DeadlineExceeded, match="after InternalServerError"):
        client("dynamodb").list_tables()
    assert 1 <= len(faults.seen) < RETRY_ATTEMPTS
    assert clock.left >= MARGIN_SECONDS  # no sleep past the deadline


def test_an_error_botocore_does_not_retry_keeps_its_code(aws: EmbeddedAws, clock: Clock) -> None:
    clock.left = ATTEMPT + MARGIN_SECONDS  # room for one attempt, none for a retry
    with HttpFaults().add("dynamodb", "ListTables", FaultKind.INVALID), pytest.raises(ClientError) as raised:
        client("dynamodb").list_tables()
    assert raised.value.response["Error"]["Code"] == "ValidationException"


def test_without_a_deadline_every_retry_is_taken(aws: EmbeddedAws, clock: Clock) -> None:
    DEADLINE.clear()
    clock.left = 1.0
    faults = HttpFaults().add("dynamodb", "ListTables", FaultKind.SERVER_ERROR, times=None)
    with faults, pytest.raises(ClientError):
        client("dynamodb").list_tables()
    assert len(faults.seen) == RETRY_ATTEMPTS


def test_a_step_of_several_calls_starts_only_when_all_fit(aws: EmbeddedAws, clock: Clock) -> None:
    client("dynamodb")  # every io.clients client makes its worst case the deadline's call_seconds
    assert DEADLINE.call_seconds >= ATTEMPT
    clock.left = 3 * DEADLINE.call_seconds + MARGIN_SECONDS - 0.1
    with pytest.raises(DeadlineExceeded, match="capacity change"):
        DEADLINE.require_calls(3, "capacity change")
    clock.left += 0.1
    DEADLINE.require_calls(3, "capacity change")
