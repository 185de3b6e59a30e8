"""The pieces every feature shares: record decoding, the DynamoDB codec, the dimension allow-list,
ARN names and the clock convention."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from batchpilot.io.dynamodb.codec import MAX_KEY_PART, from_iso, is_conditional_failure, iso, key_part
from batchpilot.shared.arns import resource_name
from batchpilot.shared.clock import epoch_ms
from batchpilot.shared.events import BatchJobStateChange
from batchpilot.shared.metrics import dimension_value, dimensions
from batchpilot.shared.records import Outcome, Rejected, decode, decode_any
from batchpilot_local.testing.samples import sample
from botocore.exceptions import ClientError


def test_decode_gives_the_model_of_a_real_event() -> None:
    event = decode(json.dumps(sample("batch-job/failed-spot-reclaim")))
    assert isinstance(event, BatchJobStateChange)


@pytest.mark.parametrize(
    ("body", "outcome"),
    [
        ("{not json", Outcome.INVALID),
        ("[1, 2]", Outcome.INVALID),
        (json.dumps({"detail-type": "EC2 Instance State-change Notification", "id": "e1"}), Outcome.IGNORED),
        (
            json.dumps({"detail-type": "Batch Job State Change", "id": "e2", "detail": "nope"}),
            Outcome.INVALID,
        ),
    ],
)
def test_decode_never_raises_and_says_why(body: str, outcome: Outcome) -> None:
    result = decode(body)
    assert isinstance(result, Rejected)
    assert result.outcome is outcome
    assert result.error


def test_decode_any_reads_batchpilots_own_events_and_decode_does_not() -> None:
    assert isinstance(decode_any(json.dumps(sample("batch-job/failed-spot-reclaim"))), BatchJobStateChange)
    own = {
        "version": "0",
        "id": "own-1",
        "detail-type": "Not A Batchpilot Event",
        "source": "batchpilot",
        "account": "111122223333",
        "time": "2026-11-20T10:15:30Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {},
    }
    rejected = decode_any(json.dumps(own))
    assert isinstance(rejected, Rejected) and rejected.outcome is Outcome.IGNORED
    assert isinstance(decode(json.dumps(own)), Rejected)


def test_long_and_unencodable_identifiers_are_hashed_in_keys() -> None:
    assert (
        key_part("arn:aws:batch:us-east-1:111122223333:job/abc")
        == "arn:aws:batch:us-east-1:111122223333:job/abc"
    )
    long_name = "x" * 100_000
    hashed = key_part(long_name)
    assert hashed.startswith("sha256:") and len(hashed) == 7 + 64
    assert key_part(long_name) == hashed  # deterministic: a redelivery finds the same item
    assert key_part("x" * MAX_KEY_PART) == "x" * MAX_KEY_PART
    surrogate = key_part("job-\udc80")
    assert surrogate.startswith("sha256:") and surrogate.isascii()


def test_times_are_written_in_utc_and_read_back_aware() -> None:
    local = datetime(2026, 11, 20, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    assert iso(local) == "2026-11-20T10:00:00+00:00"
    assert iso(datetime(2026, 11, 20, 10, 0)) == "2026-11-20T10:00:00+00:00"  # naive means UTC
    assert from_iso(iso(local)) == local
    assert from_iso("2026-11-20T10:00:00") == datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    assert from_iso("not a time") is None
    assert from_iso(None) is None
    assert iso(None) is None


def test_only_a_failed_condition_is_a_conditional_failure() -> None:
    def error(code: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": "m"}}, "PutItem")

    assert is_conditional_failure(error("ConditionalCheckFailedException"))
    assert is_conditional_failure(error("TransactionCanceledException"))
    assert not is_conditional_failure(error("ProvisionedThroughputExceededException"))
    assert not is_conditional_failure(ValueError("x"))


def test_dimensions_are_allow_listed_ascii_and_bounded() -> None:
    dims = dimensions(JobQueue="  ml-training  ", ShareIdentifier=None, QuotaShare="", JobKind="SERVICE_JOB")
    assert dims == (("JobKind", "SERVICE_JOB"), ("JobQueue", "ml-training"))
    assert dimension_value("équipe\n") == "?quipe"
    assert len(dimension_value("q" * 5000)) == 1024
    with pytest.raises(ValueError, match="JobName"):
        dimensions(JobName="a job name is never a dimension")


def test_arn_names_and_epoch_ms() -> None:
    assert resource_name("arn:aws:batch:us-east-1:111122223333:job-queue/highpri") == "highpri"
    assert resource_name("highpri") == "highpri"
    assert resource_name("arn:aws:batch:us-east-1:111122223333:job-queue/") is None
    assert resource_name(None) is None
    assert epoch_ms(datetime(2026, 1, 1, tzinfo=UTC)) == 1_767_225_600_000
