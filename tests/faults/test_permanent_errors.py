"""Permanent errors are permanent (docs/reliability.md): a request AWS refuses as invalid is
reported and counted, and the record is not handed back to SQS (it would only reach the dead-letter
queue after every retry, its alert never sent)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from batchpilot.recovery.handler import RecoveryProcessor
from batchpilot.shared.metrics import dimension_value, dimensions
from batchpilot.shared.observability import log_field
from batchpilot.shared.records import Outcome
from batchpilot_local.testing.alerts import Rig, open_rig
from batchpilot_local.testing.faults import FaultKind, HttpFaults
from batchpilot_local.testing.recovery import BUCKET, harness, training_job_item, world
from batchpilot_local.testing.samples import sample

SM_CAPACITY = "sagemaker/failed-capacity-error"
CRITICAL = "service-job/failed-validation"


def record(body: str) -> SQSRecord:
    return SQSRecord({"messageId": "m-1", "receiptHandle": "rh", "body": body, "attributes": {}})


def test_a_training_job_name_sagemaker_refuses_is_counted_not_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    event = copy.deepcopy(sample(SM_CAPACITY))
    event["detail"]["TrainingJobName"] = "n" * 100_000  # SageMaker: ValidationException (max 63)
    seed = world(training_jobs=[training_job_item(SM_CAPACITY, checkpoint_uri=f"s3://{BUCKET}/x/")])
    with harness(seed) as h, HttpFaults() as faults:
        faults.add("sagemaker", "DescribeTrainingJob", FaultKind.INVALID, times=None)
        processor = RecoveryProcessor(h.recoverer())
        processor.record_handler(record(json.dumps(event)))  # returns: the record is not retried
        assert faults.injected
        assert not h.submits()
    [line] = [r for r in caplog.records if r.getMessage() == "event not processed"]
    assert getattr(line, "outcome", None) == "invalid"
    assert "ValidationException" in str(getattr(line, "error", ""))
    assert not [r for r in caplog.records if r.getMessage() == "record failed"]  # not an error: no retry
    assert all(len(str(r.__dict__)) < 8_000 for r in caplog.records)  # the 100 KB name never logged


@pytest.fixture
def rig() -> Iterator[Rig]:
    yield from open_rig()


def test_a_state_write_dynamodb_refuses_makes_the_record_invalid_not_failed(rig: Rig) -> None:
    from batchpilot.alerts.service import AlertService
    from batchpilot.alerts.settings import AlertsSettings
    from batchpilot.io.clients import client
    from batchpilot.io.dynamodb.alerts import DynamoAlertStore
    from batchpilot.io.sns import SnsPublisher

    env = rig.local.environment
    with HttpFaults() as faults:
        faults.add("dynamodb", "UpdateItem", FaultKind.INVALID, times=None)
        service = AlertService(
            AlertsSettings.from_environ(env, function="alerts").policy,
            DynamoAlertStore(client("dynamodb"), env["BATCHPILOT_STATE_TABLE"]),
            SnsPublisher(client("sns"), env["BATCHPILOT_ONCALL_TOPIC_ARN"]),
            rig.channels(),
            clock=rig.clock,
        )
        [outcome] = service.process([("m", json.dumps(sample(CRITICAL)))], lambda: 60.0).records
    assert outcome.outcome is Outcome.INVALID and not outcome.failed
    assert outcome.error is not None and "ValidationException" in outcome.error


DIMENSION_VALUES = ["ml-training-\u00e9t\u00e9", "q\ud800", "x" * 5000, "tab\there", "\u200b"]


@pytest.mark.parametrize("value", DIMENSION_VALUES, ids=["accents", "surrogate", "5000", "tab", "zero-width"])
def test_dimension_values_are_printable_ascii_within_cloudwatch_limits(value: str) -> None:
    [(key, text)] = dimensions(JobQueue=value)  # the one dimension, whatever its value
    assert key == "JobQueue"
    assert text.isascii() and text.isprintable() and 0 < len(text) <= 1024
    assert text == dimension_value(value)


def test_event_strings_in_log_fields_are_cut_to_256_characters() -> None:
    cut: Any = log_field("n" * 100_000)
    assert isinstance(cut, str) and len(cut) <= 256 + 16
