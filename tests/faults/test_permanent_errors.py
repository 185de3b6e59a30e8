"""Permanent errors are permanent (docs/reliability.md): a request AWS refuses for good
(:mod:`batchpilot.shared.errors`) is reported, counted and logged with the operation and a bounded
excerpt, and the record is not handed back to SQS (it would only reach the dead-letter queue after
every retry, its alert never sent). Where it can, the fact still gets through, shortened: a long
job ARN hashed in the ledger's keys, a long reason cut to what the on-call topic takes."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from batchpilot.alerts.render import SNS_BODY_MAX_BYTES, SNS_MESSAGE_MAX_BYTES, TRUNCATION_MARK, SnsMessage
from batchpilot.io.dynamodb.ledger import LedgerStateStore
from batchpilot.io.sns import SnsPublisher
from batchpilot.recovery.handler import RecoveryProcessor
from batchpilot.shared.metrics import dimension_value, dimensions
from batchpilot.shared.observability import log_field
from batchpilot.shared.records import Outcome
from batchpilot_local.chat_endpoint import LocalChatEndpoint
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.notifications import LocalAlerts
from batchpilot_local.testing.alerts import Rig, open_rig
from batchpilot_local.testing.faults import FaultKind, HttpFaults
from batchpilot_local.testing.harness import (
    aws_with_state_table,
    load_app,
    metric_values,
    printed,
    sqs_event,
    template_environment,
)
from batchpilot_local.testing.recovery import BUCKET, harness, training_job_item, world
from batchpilot_local.testing.samples import sample, service_job

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


TABLE = "batchpilot-StateTable"
LEDGER_ENV = {"BATCHPILOT_STATE_TABLE": TABLE, "POWERTOOLS_SERVICE_NAME": "batchpilot"}
LONG_ARN = "arn:aws:batch:us-east-1:111122223333:service-job/" + "a" * (3000 - 49)
"""A 3,000-character job ARN: over DynamoDB's 1,024-byte sort key (and 2,048-byte partition key)."""


@pytest.fixture
def ledger_aws() -> Iterator[EmbeddedAws]:
    yield from aws_with_state_table(TABLE)


def long_arn_event() -> str:
    assert len(LONG_ARN) == 3000
    return json.dumps(service_job("RUNNABLE", jobArn=LONG_ARN, jobId="long", jobQueue="q"))


def not_processed(caplog: pytest.LogCaptureFixture) -> list[Any]:
    return [r for r in caplog.records if r.getMessage() == "event not processed"]


def test_moto_refuses_a_3000_character_sort_key_as_dynamodb_does(ledger_aws: EmbeddedAws) -> None:
    dynamodb = ledger_aws.client("dynamodb")
    item = {"pk": {"S": "ledger#active#q"}, "sk": {"S": LONG_ARN}}
    with pytest.raises(Exception) as refused:  # botocore ClientError
        dynamodb.put_item(TableName=TABLE, Item=item)
    assert "ValidationException" in str(refused.value) and "1024" in str(refused.value)


def test_a_service_job_with_a_3000_character_arn_is_written_not_retried(
    ledger_aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    app = load_app("ledger", LEDGER_ENV)
    result = app.lambda_handler(sqs_event([long_arn_event()], "batchpilot-LedgerQueue"), lambda_context)
    assert result == {"batchItemFailures": []}  # before: TransactWriteItems refused, retried 5 times
    store = LedgerStateStore(ledger_aws.client("dynamodb"), TABLE)
    job = store.get(LONG_ARN)
    assert job is not None and job.arn == LONG_ARN and job.status.value == "RUNNABLE"
    # The index keys hold the ARN's hash (key_part, as the job's own key); the item, the ARN.
    assert [entry.arn for entry in store.active("q")] == [LONG_ARN]
    blobs, _, _ = printed(capsys)
    assert sum(v for v, _ in metric_values(blobs, "EventsProcessed")) == 1.0


def test_a_ledger_write_dynamodb_refuses_is_reported_once_not_retried(
    ledger_aws: EmbeddedAws,
    lambda_context: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with HttpFaults() as faults:
        app = load_app("ledger", LEDGER_ENV)  # its clients are made inside: the hooks see them
        faults.add("dynamodb", "TransactWriteItems", FaultKind.INVALID, times=None)
        result = app.lambda_handler(sqs_event([long_arn_event()], "batchpilot-LedgerQueue"), lambda_context)
        assert len(faults.injected) == 1  # one request: botocore does not retry it, nor does SQS
    assert result == {"batchItemFailures": []}
    [line] = not_processed(caplog)
    assert getattr(line, "permanent", None) is True and getattr(line, "outcome", None) == "invalid"
    assert str(getattr(line, "error", "")).startswith("TransactWriteItems: ValidationException")
    assert len(str(getattr(line, "job_arn", ""))) <= 256  # the ARN cut (log_field)
    blobs, _, _ = printed(capsys)
    assert sum(v for v, _ in metric_values(blobs, "InvalidEvents")) == 1.0
    assert sum(v for v, _ in metric_values(blobs, "PermanentErrors")) == 1.0


def test_moto_refuses_an_sns_message_over_256_kb_as_sns_does() -> None:
    with EmbeddedAws() as aws:
        sns = aws.client("sns")
        topic = sns.create_topic(Name="limit")["TopicArn"]
        over = SnsMessage(subject="s", body="x" * (SNS_MESSAGE_MAX_BYTES + 1), attributes={})
        fits = SnsMessage(subject="s", body="x" * SNS_BODY_MAX_BYTES, attributes={})
        assert SnsPublisher(sns, topic).publish([over, fits]) == ["InvalidParameter", None]


@pytest.fixture
def alerts_app(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, LocalAlerts, HttpFaults]]:
    """The alerts function as a default deploy wires it (the on-call topic, no chat channel), its
    clients made under fault hooks (none scripted)."""
    with EmbeddedAws() as aws, LocalChatEndpoint() as chat, HttpFaults() as faults:
        local = LocalAlerts(aws, environment=template_environment("alerts"), chat=chat).open()
        yield load_app("alerts", local.environment, monkeypatch=monkeypatch), local, faults


def long_reason_event(reason_length: int = 240_000) -> str:
    event = sample(CRITICAL)
    event["detail"]["statusReason"] = "Validation failed: " + "r" * (reason_length - 19)
    return json.dumps(event)


def test_a_240000_character_reason_reaches_the_oncall_topic_cut(
    alerts_app: tuple[Any, LocalAlerts, HttpFaults], lambda_context: Any
) -> None:
    app, local, _ = alerts_app
    result = app.lambda_handler(sqs_event([long_reason_event()], "AlertsQueue"), lambda_context)
    assert result == {"batchItemFailures": []}
    [message] = local.sns_messages()
    body = str(message["Message"])
    assert len(body.encode("utf-8")) <= SNS_BODY_MAX_BYTES
    assert "Validation failed: rrr" in body and TRUNCATION_MARK in body


def test_an_oncall_message_sns_refuses_is_reported_once_not_retried(
    alerts_app: tuple[Any, LocalAlerts, HttpFaults],
    lambda_context: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    app, local, faults = alerts_app
    faults.add("sns", "PublishBatch", FaultKind.INVALID, times=None)
    result = app.lambda_handler(sqs_event([long_reason_event()], "AlertsQueue"), lambda_context)
    assert len(faults.injected) == 1
    assert result == {"batchItemFailures": []}  # before: NotificationNotDeliveredError, retried
    assert local.sns_messages() == []
    [line] = not_processed(caplog)
    assert getattr(line, "permanent", None) is True
    assert getattr(line, "error", None) == "sns: PublishBatch: InvalidParameter"
    blobs, _, _ = printed(capsys)
    assert sum(v for v, _ in metric_values(blobs, "PermanentErrors")) == 1.0
    assert sum(v for v, _ in metric_values(blobs, "EventsFailed")) == 0.0


BLOCKED = "service-job-queue-blocked/misconfiguration-service-environment-max-resource"


def test_a_capacity_run_aws_refuses_is_reported_once_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    from aws_lambda_powertools.utilities.batch import process_partial_response
    from batchpilot.capacity.handler import CapacityProcessor
    from batchpilot.capacity.service import CapacityService
    from batchpilot.capacity.settings import CapacitySettings
    from batchpilot.io.batch import BatchCapacityClient
    from batchpilot.io.clients import client
    from batchpilot.io.dynamodb.capacity import CapacityStateStore
    from batchpilot.io.emf import EmfPublisher
    from batchpilot.io.eventbridge import EventBridgePublisher
    from batchpilot_local.testing.recovery import TABLE

    settings = CapacitySettings.from_environ(
        {
            "BATCHPILOT_STATE_TABLE": TABLE,
            "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS": "sm-training",
            "BATCHPILOT_CAPACITY_JOB_QUEUES": "sm-training-highpri",
            "BATCHPILOT_CAPACITY_POLICY": json.dumps(
                {"service_environments": {"sm-training": {"job_queues": ["sm-training-highpri"], "max": 64}}}
            ),
        }
    )
    with harness(), HttpFaults() as faults:
        faults.add("batch", "DescribeServiceEnvironments", FaultKind.INVALID, times=None)
        service = CapacityService(
            settings,
            BatchCapacityClient(client("batch")),
            CapacityStateStore(client("dynamodb"), TABLE),
            EventBridgePublisher(client("events"), "default"),
            EmfPublisher("batchpilot/test", "batchpilot"),
        )
        processor = CapacityProcessor(service)
        event = sqs_event([json.dumps(sample(BLOCKED))], "CapacityQueue")
        response = process_partial_response(event, processor.record_handler, processor)
        assert len(faults.injected) == 1
    assert response == {"batchItemFailures": []}  # before: RuntimeError, retried into the DLQ
    [line] = not_processed(caplog)
    assert getattr(line, "permanent", None) is True
    assert "ValidationException" in str(getattr(line, "error", ""))
