"""The embedded AWS's speed patches to moto (batchpilot_local.emulator.patch) change no answer:
an UpdateExpression text parsed once still applies each call's own values and still rejects a
bad text every time; SQS still moves a message to its dead-letter queue after maxReceiveCount
through the event-source-mapping path that calls moto's SQS backend directly."""

from __future__ import annotations

import json
from typing import Any

import pytest
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.template import ACCOUNT_ID
from botocore.exceptions import ClientError

TABLE = "t"
EXPRESSION = "ADD #n :n SET #who = :who"


def _table(dynamodb: object) -> None:
    dynamodb.create_table(  # type: ignore[attr-defined]
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    )


def _update(dynamodb: object, pk: str, n: int, who: str, expression: str = EXPRESSION) -> None:
    dynamodb.update_item(  # type: ignore[attr-defined]
        TableName=TABLE,
        Key={"pk": {"S": pk}},
        UpdateExpression=expression,
        ExpressionAttributeNames={"#n": "n", "#who": "who"},
        ExpressionAttributeValues={":n": {"N": str(n)}, ":who": {"S": who}},
    )


def test_one_expression_text_applies_each_calls_values() -> None:
    with EmbeddedAws() as aws:
        dynamodb = aws.client("dynamodb")
        _table(dynamodb)
        _update(dynamodb, "a", 2, "first")
        _update(dynamodb, "b", 5, "second")
        _update(dynamodb, "a", 3, "third")
        dynamodb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": {"pk": {"S": "b"}},
                        "UpdateExpression": EXPRESSION,
                        "ExpressionAttributeNames": {"#n": "n", "#who": "who"},
                        "ExpressionAttributeValues": {":n": {"N": "10"}, ":who": {"S": "fourth"}},
                    }
                }
            ]
        )
        a = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "a"}})["Item"]
        b = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "b"}})["Item"]
    assert (a["n"], a["who"]) == ({"N": "5"}, {"S": "third"})
    assert (b["n"], b["who"]) == ({"N": "15"}, {"S": "fourth"})


def test_a_bad_expression_is_rejected_every_time() -> None:
    with EmbeddedAws() as aws:
        dynamodb = aws.client("dynamodb")
        _table(dynamodb)
        for _ in range(2):
            with pytest.raises(ClientError) as error:
                _update(dynamodb, "a", 1, "x", expression="ADD #n :n SET")
            assert error.value.response["Error"]["Code"] == "ValidationException"


def test_the_event_source_path_redrives_to_the_dead_letter_queue() -> None:
    with EmbeddedAws() as aws:
        aws.create_queue("dlq")
        redrive = {"deadLetterTargetArn": aws.queue_arn("dlq"), "maxReceiveCount": "2"}
        aws.create_queue("q", {"VisibilityTimeout": "0", "RedrivePolicy": json.dumps(redrive)})
        sent = aws.send("q", '{"hello": 1}')
        counts = []
        for _ in range(2):
            records = aws.receive_as_lambda_event("q")["Records"]
            assert [r["messageId"] for r in records] == [sent]
            counts.append(records[0]["attributes"]["ApproximateReceiveCount"])
            aws.delete_processed("q", records, failed_ids={sent})  # the handler failed it
        assert counts == ["1", "2"]
        assert aws.receive_as_lambda_event("q")["Records"] == []
        moved = aws.receive_as_lambda_event("dlq")["Records"]
        assert [(r["messageId"], r["body"]) for r in moved] == [(sent, '{"hello": 1}')]
        aws.delete_processed("dlq", moved, failed_ids=set())
        assert not aws.has_messages("dlq")


def test_sent_and_deleted_messages_are_not_kept() -> None:
    import gc

    from moto.sqs.models import Message

    with EmbeddedAws() as aws:
        aws.create_queue("q")
        for i in range(50):
            aws.send("q", f'{{"n": {i}}}')
            records = aws.receive_as_lambda_event("q")["Records"]
            aws.delete_processed("q", records, failed_ids=set())
        gc.collect()
        alive = [o for o in gc.get_objects() if type(o) is Message]
    assert alive == []


def test_a_message_past_its_queues_retention_period_is_not_delivered() -> None:
    from moto.sqs.models import sqs_backends

    with EmbeddedAws() as aws:
        aws.create_queue("q", {"MessageRetentionPeriod": "60"})
        aws.send("q", "new")
        aws.send("q", "old")
        queue = sqs_backends[ACCOUNT_ID][aws.region].get_queue("q")
        old: Any = next(m for m in queue._messages if m.body == "old")
        old.sent_timestamp -= 120_000  # sent two minutes ago: past the 60 s retention
        records = aws.receive_as_lambda_event("q")["Records"]
        again = aws.receive_as_lambda_event("q")["Records"]
    assert [r["body"] for r in records] == ["new"]
    assert again == []
