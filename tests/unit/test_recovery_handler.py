"""The recovery record path without AWS: decode, deferral through the Deferrer port, the SQS
adapter's ChangeMessageVisibility call, and the time left read from the Lambda context."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from batchpilot.io.sqs import MAX_VISIBILITY_S, SqsDeferrer
from batchpilot.recovery.ports import DeferError, SubmitError
from batchpilot.recovery.service import Recoverer, RetryLater, RetryReason
from batchpilot.recovery.settings import RecoverySettings
from batchpilot.shared.classification import JobKind
from batchpilot.shared.processing import time_left_of
from batchpilot.shared.records import Outcome, Rejected
from batchpilot_local.testing.samples import sample
from botocore.exceptions import ClientError


class Gateway:
    kinds = frozenset(JobKind)


class Deferrer:
    def __init__(self, error: str | None = None) -> None:
        self.calls: list[tuple[str, float]] = []
        self.error = error

    def defer(self, receipt_handle: str, seconds: float) -> bool:
        self.calls.append((receipt_handle, seconds))
        if self.error:
            raise DeferError(self.error)
        return True


def recoverer(deferrer: Deferrer) -> Recoverer:
    unused: Any = object()  # ports the record path under test never reaches
    return Recoverer(
        RecoverySettings.from_mapping({"state_table": "StateTable"}),
        jobs=[Gateway()],  # type: ignore[list-item]
        checkpoints=unused,
        lineage=unused,
        events=unused,
        metrics=unused,
        deferrer=deferrer,
        pacer=unused,
    )


def test_a_malformed_or_foreign_body_is_a_rejected_record_not_an_error() -> None:
    r = recoverer(Deferrer())
    invalid = r.handle_record("{not json", "rh")
    assert isinstance(invalid, Rejected) and invalid.outcome is Outcome.INVALID
    ignored = r.handle_record(
        json.dumps({**sample("batch-job/failed-spot-reclaim"), "detail-type": "Other"}), "rh"
    )
    assert isinstance(ignored, Rejected) and ignored.outcome is Outcome.IGNORED


@pytest.mark.parametrize("error", [None, "AccessDenied"])
def test_a_record_handed_back_with_a_delay_is_deferred_through_the_port(
    monkeypatch: pytest.MonkeyPatch, error: str | None
) -> None:
    deferrer = Deferrer(error)
    r = recoverer(deferrer)

    def backoff(*_: Any) -> Any:
        raise RetryLater(RetryReason.BACKOFF, "backoff: due in 42 s", 42.0)

    monkeypatch.setattr(r, "handle", backoff)
    with pytest.raises(RetryLater) as raised:
        r.handle_record(json.dumps(sample("batch-job/failed-spot-reclaim")), "receipt-1")
    assert deferrer.calls == [("receipt-1", 42.0)]
    assert (raised.value.deferred, raised.value.defer_error) == (
        (False, "AccessDenied") if error else (True, None)
    )

    def throttled(*_: Any) -> Any:  # no delay: the queue's visibility timeout applies
        raise RetryLater(RetryReason.SUBMIT_FAILED, "batch:SubmitJob failed, will retry: Throttling")

    monkeypatch.setattr(r, "handle", throttled)
    with pytest.raises(RetryLater):
        r.handle_record(json.dumps(sample("batch-job/failed-spot-reclaim")), "receipt-2")
    assert len(deferrer.calls) == 1


class Sqs:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail = fail

    def change_message_visibility(self, **params: Any) -> None:
        self.calls.append(params)
        if self.fail:
            raise ClientError(
                {"Error": {"Code": "ReceiptHandleIsInvalid", "Message": "x"}}, "ChangeMessageVisibility"
            )


def test_the_sqs_deferrer_rounds_up_and_clamps_to_12_hours() -> None:
    sqs = Sqs()
    deferrer = SqsDeferrer(sqs, "https://sqs.us-east-1.amazonaws.com/111122223333/RecoveryQueue")
    assert deferrer.defer("rh", 29.2) and deferrer.defer("rh", 10**6) and deferrer.defer("rh", -5)
    assert [c["VisibilityTimeout"] for c in sqs.calls] == [30, MAX_VISIBILITY_S, 0]
    assert sqs.calls[0]["ReceiptHandle"] == "rh" and sqs.calls[0]["QueueUrl"].endswith("/RecoveryQueue")
    assert SqsDeferrer(sqs, None).defer("rh", 5) is False and len(sqs.calls) == 3
    with pytest.raises(DeferError) as refused:
        SqsDeferrer(Sqs(fail=True), "https://q").defer("rh", 5)
    assert refused.value.code == "ReceiptHandleIsInvalid"


def test_time_left_is_read_from_the_context_at_each_call() -> None:
    class Context:
        remaining = 30_000

        def get_remaining_time_in_millis(self) -> int:
            return self.remaining

    context = Context()
    time_left = time_left_of(context)  # type: ignore[arg-type]
    assert time_left() == 30.0
    context.remaining = 1_500
    assert time_left() == 1.5
    assert time_left_of(None)() == math.inf


def test_submit_errors_are_transient_for_throttling_and_server_errors() -> None:
    assert SubmitError("ThrottlingException", "slow down").transient
    assert SubmitError("Whatever", "", http_status=503).transient
    assert not SubmitError("ResourceLimitExceeded", "quota", http_status=400).transient
    assert SubmitError("EndpointConnectionError", "", transient=True).transient
