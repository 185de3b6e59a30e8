"""Event models: dispatch, optional fields, timestamps, tags, and the parser's only error type."""

from __future__ import annotations

import contextlib
import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from batchpilot.shared.events import (
    DETAIL_TYPES,
    BatchJobStateChange,
    BatchServiceJobPreemptionCompleted,
    BatchServiceJobPreemptionStarted,
    InvalidEventError,
    SageMakerTrainingJobStateChange,
    UnsupportedEventError,
    parse_event,
    parse_event_json,
    to_datetime,
)
from batchpilot.shared.records import Outcome, Rejected, decode, decode_any
from batchpilot_local.testing.samples import batch_job, envelope, service_job, training_job
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def test_dispatches_on_detail_type_for_all_seven() -> None:
    assert len(DETAIL_TYPES) == 7
    started = parse_event(
        envelope(
            "Batch Service Job Preemption Started",
            {"preemptedJobArn": "arn:aws:batch:us-east-1:111122223333:service-job/x", "status": "RUNNING"},
        )
    )
    assert isinstance(started, BatchServiceJobPreemptionStarted)
    completed = parse_event(
        envelope(
            "Batch Service Job Preemption Completed",
            {
                "preemptedJobArn": "arn:aws:batch:us-east-1:111122223333:service-job/x",
                "status": "RUNNABLE",
                "preemptionSummary": {"preemptedAttemptCount": 2, "recentPreemptedAttempts": []},
            },
        )
    )
    assert isinstance(completed, BatchServiceJobPreemptionCompleted)
    assert completed.detail.preemptionSummary is not None
    assert completed.detail.preemptionSummary.preemptedAttemptCount == 2
    assert isinstance(parse_event(batch_job("RUNNING")), BatchJobStateChange)
    assert isinstance(parse_event(training_job("InProgress")), SageMakerTrainingJobStateChange)


def test_unknown_fields_are_ignored_and_secrets_not_kept() -> None:
    event = batch_job(
        "FAILED",
        brandNewField={"x": 1},
        container={"image": "img", "environment": [{"name": "TOKEN", "value": "s3cr3t"}], "command": ["x"]},
    )
    event["newEnvelopeField"] = True
    parsed = parse_event(event)
    assert "s3cr3t" not in parsed.model_dump_json()


def test_optional_fields_may_be_missing() -> None:
    parsed = parse_event(batch_job("FAILED", attempts=[{"container": {}}]))
    assert isinstance(parsed, BatchJobStateChange)
    assert parsed.detail.statusReason is None
    assert parsed.detail.attempts[0].container is not None
    assert parsed.detail.attempts[0].container.exitCode is None
    minimal_service = service_job("RUNNABLE")
    del minimal_service["detail"]["jobName"]
    assert parse_event(minimal_service).detail.status == "RUNNABLE"  # type: ignore[union-attr]


def test_array_child_id_kept_intact() -> None:
    parsed = parse_event(batch_job("FAILED", jobId="6d1c0c4e-6b7f-4b8a-9f0e-1f2a3b4c5d6e:7"))
    assert isinstance(parsed, BatchJobStateChange)
    assert parsed.detail.jobId == "6d1c0c4e-6b7f-4b8a-9f0e-1f2a3b4c5d6e:7"


def test_replay_name_is_read() -> None:
    event = batch_job("SUCCEEDED")
    event["replay-name"] = "backfill"
    assert parse_event(event).replay_name == "backfill"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1763633000000, datetime(2025, 11, 20, 10, 3, 20, tzinfo=UTC)),
        ("1763633000000", datetime(2025, 11, 20, 10, 3, 20, tzinfo=UTC)),
        (1763633000123.0, datetime(2025, 11, 20, 10, 3, 20, 123000, tzinfo=UTC)),
        ("2026-03-16T19:57:27Z", datetime(2026, 3, 16, 19, 57, 27, tzinfo=UTC)),
        ("2026-03-16T19:57:27.5+00:00", datetime(2026, 3, 16, 19, 57, 27, 500000, tzinfo=UTC)),
        ("2026-03-16T21:57:27+02:00", datetime(2026, 3, 16, 19, 57, 27, tzinfo=UTC)),
    ],
)
def test_timestamps_become_aware_utc(value: Any, expected: datetime) -> None:
    result = to_datetime(value)
    assert result.tzinfo is not None
    assert result == expected


@pytest.mark.parametrize("value", [True, "yesterday", float("nan"), 10**20, [], {}])
def test_bad_timestamps_raise_value_error(value: Any) -> None:
    with pytest.raises(ValueError):
        to_datetime(value)


def test_sagemaker_epoch_strings_and_numbers_both_parse() -> None:
    as_string = parse_event(training_job("Completed", TrainingStartTime="1763633100000"))
    as_number = parse_event(training_job("Completed", TrainingStartTime=1763633100000))
    assert as_string.detail.TrainingStartTime == as_number.detail.TrainingStartTime  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "tags",
    [
        {"team": "nlp", "cost-center": "42"},
        [{"Key": "team", "Value": "nlp"}, {"Key": "cost-center", "Value": "42"}],
    ],
)
def test_sagemaker_tags_as_object_or_list(tags: Any) -> None:
    parsed = parse_event(training_job("InProgress", Tags=tags))
    assert parsed.detail.Tags == {"team": "nlp", "cost-center": "42"}  # type: ignore[union-attr]


def test_unknown_detail_type_is_unsupported_not_invalid_crash() -> None:
    with pytest.raises(UnsupportedEventError) as info:
        parse_event(envelope("EC2 Spot Instance Interruption Warning", {}, source="aws.ec2"))
    assert info.value.detail_type == "EC2 Spot Instance Interruption Warning"


def test_wrong_source_for_detail_type_is_invalid() -> None:
    event = batch_job("RUNNING")
    event["source"] = "my.app"
    with pytest.raises(InvalidEventError, match="source"):
        parse_event(event)


def test_error_names_field_but_never_its_value() -> None:
    event = batch_job("FAILED", createdAt="s3cr3t-value")
    with pytest.raises(InvalidEventError) as info:
        parse_event(event)
    assert "detail.createdAt" in str(info.value)
    assert "s3cr3t" not in str(info.value)
    assert info.value.event_id == event["id"]


@pytest.mark.parametrize("raw", [None, 1, "text", [], {"detail-type": 5}, {"id": "x"}])
def test_not_an_event_raises_invalid_event_error(raw: Any) -> None:
    with pytest.raises(InvalidEventError):
        parse_event(raw)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=30,
)


@st.composite
def near_events(draw: st.DrawFn) -> Any:
    """Arbitrary JSON, half the time grafted onto a real envelope and detail-type."""
    if draw(st.booleans()):
        return draw(json_values)
    detail_type = draw(st.sampled_from([*DETAIL_TYPES, "Other"]))
    event: dict[str, Any] = {
        "id": draw(st.text(max_size=8) | st.integers()),
        "detail-type": detail_type,
        "source": draw(st.sampled_from(["aws.batch", "aws.sagemaker", "x"])),
        "time": draw(st.sampled_from(["2026-01-01T00:00:00Z", "bad", 12, None])),
        "detail": draw(json_values),
    }
    return event


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(near_events())
def test_parser_raises_only_its_own_error(raw: Any) -> None:
    with contextlib.suppress(InvalidEventError):
        parse_event(raw)


@settings(max_examples=200)
@given(json_values)
def test_parser_total_on_arbitrary_detail_of_real_event(detail: Any) -> None:
    event = json.loads(json.dumps(service_job("FAILED")))
    event["detail"] = detail
    with contextlib.suppress(InvalidEventError):
        parse_event(event)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(near_events())
def test_json_fast_path_agrees_with_the_dict_parser(raw: Any) -> None:
    text = json.dumps(raw)
    try:
        expected = parse_event(json.loads(text))
    except InvalidEventError as exc:
        with pytest.raises(type(exc)):
            parse_event_json(text)
    else:
        assert parse_event_json(text) == expected


@pytest.mark.parametrize("text", ["{not json", "", "[1, 2", '"just a string"', "null"])
def test_json_fast_path_rejects_non_events(text: str) -> None:
    with pytest.raises(InvalidEventError):
        parse_event_json(text)


def test_unreadable_text_says_whether_it_is_not_json_or_nested_too_deeply() -> None:
    nested: object = []
    for _ in range(300):
        nested = [nested]
    deep = json.dumps(batch_job("RUNNING", extra=nested))
    json.loads(deep)  # valid JSON, 300 levels deep
    for text, reason in (
        ("{not json", "event is not valid JSON"),
        (deep, "event is nested too deeply to read (more than about 200 levels)"),
    ):
        with pytest.raises(InvalidEventError, match=re.escape(reason)):
            parse_event_json(text)
        for decoded in (decode(text), decode_any(text)):
            assert decoded == Rejected(Outcome.INVALID, None, None, reason)
