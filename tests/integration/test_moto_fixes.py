"""The fixes of moto's own inefficiencies (batchpilot_local.emulator.moto_fixes) change no answer,
and the embedded AWS answers the same without them.

Each behaviour below runs twice, with the fixes in (as the embedded AWS installs them) and out
(moto as it is): an UpdateExpression text parsed once still applies each call's own values and
still rejects a bad text (or two SET clauses) every time; a transaction over several items keeps
all its writes, and a cancelled one none; a backup restores every item as it was; SQS moves a
message to its dead-letter queue after maxReceiveCount through the event-source-mapping path
that calls moto's SQS backend directly, drops a message past its retention period, hides a
received message for its visibility timeout and a delayed one for its delay, accepts a second
delete of a deleted message, and a receive that asks for some message attributes leaves the
others on the queued message; moto's EventBridge fills a target's default input paths per event.
Random DynamoDB operations (puts, conditional updates, deletes, queries, scans, transactions,
batches) get the same answers with the fixes as without. Sent and deleted messages are not kept
in memory (moto's model registry is emptied after each batch). The fixes apply only to the moto
releases they were written for, and say in one line what to do for any other.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.emulator import moto_fixes
from batchpilot_local.template import ACCOUNT_ID, load_template
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

TABLE = "t"
EXPRESSION = "ADD #n :n SET #who = :who"


@pytest.fixture(params=["fixes", "moto as it is"])
def aws(request: pytest.FixtureRequest) -> Iterator[EmbeddedAws]:
    """An open embedded AWS, with moto's fixes in or out."""
    with EmbeddedAws() as embedded:
        if request.param != "fixes":
            moto_fixes.uninstall()
        try:
            yield embedded
        finally:
            moto_fixes.install()


@pytest.fixture(autouse=True)
def _fixes_back() -> Iterator[None]:
    yield
    moto_fixes.install()


def _table(dynamodb: Any) -> None:
    dynamodb.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    )


def _update(dynamodb: Any, pk: str, n: int, who: str, expression: str = EXPRESSION) -> None:
    dynamodb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": pk}},
        UpdateExpression=expression,
        ExpressionAttributeNames={"#n": "n", "#who": "who"},
        ExpressionAttributeValues={":n": {"N": str(n)}, ":who": {"S": who}},
    )


# ------------------------------------------------------------------------------ DynamoDB expressions
def test_one_expression_text_applies_each_calls_values(aws: EmbeddedAws) -> None:
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


def test_a_bad_expression_is_rejected_every_time(aws: EmbeddedAws) -> None:
    dynamodb = aws.client("dynamodb")
    _table(dynamodb)
    codes = []
    for _ in range(2):
        with pytest.raises(ClientError) as error:
            _update(dynamodb, "a", 1, "x", expression="ADD #n :n SET")
        codes.append(error.value.response["Error"]["Code"])
    assert codes == ["ValidationException", "ValidationException"]


def test_an_expression_that_reads_the_item_applies_to_each_items_own_value(aws: EmbeddedAws) -> None:
    """The validator resolves paths against the item on a copy of the shared parse tree: one
    call's item values never leak into the next call's."""
    expression = "SET #n = if_not_exists(#n, :zero) + :n, #who = :who"
    dynamodb = aws.client("dynamodb")
    _table(dynamodb)
    for pk, n in (("a", 2), ("b", 7), ("a", 3), ("b", 1)):
        dynamodb.update_item(
            TableName=TABLE,
            Key={"pk": {"S": pk}},
            UpdateExpression=expression,
            ExpressionAttributeNames={"#n": "n", "#who": "who"},
            ExpressionAttributeValues={":n": {"N": str(n)}, ":zero": {"N": "0"}, ":who": {"S": pk}},
        )
    items = {pk: dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": pk}})["Item"] for pk in "ab"}
    assert {pk: item["n"]["N"] for pk, item in items.items()} == {"a": "5", "b": "8"}


def test_an_update_with_two_set_clauses_is_still_refused(aws: EmbeddedAws) -> None:
    """moto's ActionCountValidator (which walks the tree with find_clauses) still counts clauses."""
    dynamodb = aws.client("dynamodb")
    _table(dynamodb)
    with pytest.raises(ClientError) as error:
        _update(dynamodb, "a", 1, "x", expression="SET #who = :who SET #n = :n")
    assert error.value.response["Error"]["Code"] == "ValidationException"


def test_a_condition_text_seen_before_still_uses_each_calls_values(aws: EmbeddedAws) -> None:
    condition = "attribute_not_exists(#v) OR #v < :v"
    dynamodb = aws.client("dynamodb")
    _table(dynamodb)
    outcomes = []
    for version in (3, 5, 4, 6):
        try:
            dynamodb.put_item(
                TableName=TABLE,
                Item={"pk": {"S": "job"}, "version": {"N": str(version)}},
                ConditionExpression=condition,
                ExpressionAttributeNames={"#v": "version"},
                ExpressionAttributeValues={":v": {"N": str(version)}},
            )
            outcomes.append(version)
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "ConditionalCheckFailedException"
            outcomes.append(-version)
    stored = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "job"}})["Item"]
    assert outcomes == [3, 5, -4, 6]
    assert stored["version"] == {"N": "6"}


def test_an_item_over_the_size_limit_is_refused_and_one_under_it_is_stored(aws: EmbeddedAws) -> None:
    dynamodb = aws.client("dynamodb")
    _table(dynamodb)
    attributes = {f"a{i}": {"S": "x" * 50_000} for i in range(9)}  # about 450 KB in all
    with pytest.raises(ClientError) as error:
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "big"}, **attributes})
    assert "Item size has exceeded the maximum allowed size" in str(error.value)
    fits = {f"a{i}": {"S": "x" * 50_000} for i in range(7)}
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "ok"}, **fits})
    stored = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "ok"}})["Item"]
    missing = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "big"}}).get("Item")
    assert len(stored) == 8 and missing is None


def test_json_and_query_protocol_requests_both_reach_moto_whole(aws: EmbeddedAws) -> None:
    """DynamoDB (JSON protocol) and SNS (query protocol) each get every parameter, including
    non-ASCII text and binary values."""
    dynamodb, sns = aws.client("dynamodb"), aws.client("sns")
    _table(dynamodb)
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "ü-job"}, "b": {"B": b"\x00\xff"}})
    item = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "ü-job"}})["Item"]
    topic = sns.create_topic(Name="t", Attributes={"DisplayName": "Zürich on-call"})["TopicArn"]
    shown = sns.get_topic_attributes(TopicArn=topic)["Attributes"]["DisplayName"]
    assert item == {"pk": {"S": "ü-job"}, "b": {"B": b"\x00\xff"}}
    assert shown == "Zürich on-call"


# ------------------------------------------------------------------------------ DynamoDB transactions
def _item(pk: str, value: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": pk}, "v": {"S": value}}


def test_a_transaction_keeps_all_its_writes_and_a_cancelled_one_none(aws: EmbeddedAws) -> None:
    jobs = [f"job#{i}" for i in range(6)]

    def add_one(pk: str) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": TABLE,
                "Key": {"pk": {"S": pk}},
                "UpdateExpression": "ADD n :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        }

    dynamodb = aws.client("dynamodb")
    _table(dynamodb)
    for pk in jobs:
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": pk}, "n": {"N": "0"}})
    dynamodb.transact_write_items(TransactItems=[add_one(pk) for pk in jobs])
    never = {
        "TableName": TABLE,
        "Key": {"pk": {"S": "nowhere"}},
        "ConditionExpression": "attribute_exists(pk)",
    }
    with pytest.raises(ClientError) as error:
        dynamodb.transact_write_items(TransactItems=[*map(add_one, jobs[:5]), {"ConditionCheck": never}])
    counts = [dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": pk}})["Item"]["n"]["N"] for pk in jobs]
    assert error.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert counts == ["1"] * 6


def test_a_cancelled_transaction_leaves_every_item_as_it_was(aws: EmbeddedAws) -> None:
    dynamodb = aws.client("dynamodb")
    _table(dynamodb)
    dynamodb.put_item(TableName=TABLE, Item=_item("kept", "before"))
    dynamodb.put_item(TableName=TABLE, Item=_item("other", "untouched"))
    with pytest.raises(ClientError) as error:
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": _item("kept", "after")}},
                {"Put": {"TableName": TABLE, "Item": _item("new", "x")}},
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": {"pk": {"S": "other"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    assert error.value.response["Error"]["Code"] == "TransactionCanceledException"
    items = {i["pk"]["S"]: i["v"]["S"] for i in dynamodb.scan(TableName=TABLE)["Items"]}
    assert items == {"kept": "before", "other": "untouched"}
    dynamodb.transact_write_items(
        TransactItems=[{"Put": {"TableName": TABLE, "Item": _item("kept", "after")}}]
    )
    assert dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "kept"}})["Item"]["v"]["S"] == "after"


def test_a_backup_restores_every_item_as_it_was(aws: EmbeddedAws) -> None:
    dynamodb = aws.client("dynamodb")
    _table(dynamodb)
    keys = ("a", "b", "c", "d", "e")
    for i, pk in enumerate(keys):
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": pk}, "v": {"N": str(i)}})
    arn = dynamodb.create_backup(TableName=TABLE, BackupName="before")["BackupDetails"]["BackupArn"]
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "v": {"N": "100"}})
    dynamodb.restore_table_from_backup(TargetTableName="restored", BackupArn=arn)
    restored = dynamodb.scan(TableName="restored")["Items"]
    count = dynamodb.describe_table(TableName="restored")["Table"]["ItemCount"]
    assert sorted((item["pk"]["S"], item["v"]["N"]) for item in restored) == [
        (pk, str(i)) for i, pk in enumerate(keys)
    ]
    assert count == 5


# ------------------------------------------------------------------------------ SQS
def _sqs_backend(aws: EmbeddedAws) -> Any:
    from moto.sqs.models import sqs_backends

    return sqs_backends[ACCOUNT_ID][aws.region]


def test_the_event_source_path_redrives_to_the_dead_letter_queue(aws: EmbeddedAws) -> None:
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


def test_a_message_past_its_queues_retention_period_is_not_delivered(aws: EmbeddedAws) -> None:
    aws.create_queue("q", {"MessageRetentionPeriod": "60"})
    backend = _sqs_backend(aws)
    backend.send_message("q", "new")
    old = backend.send_message("q", "old")
    old.sent_timestamp -= 120_000  # sent two minutes ago: past the 60 s retention
    records = aws.receive_as_lambda_event("q")["Records"]
    again = aws.receive_as_lambda_event("q")["Records"]
    assert [r["body"] for r in records] == ["new"]
    assert again == []


def test_a_received_message_stays_hidden_until_its_visibility_timeout_ends(aws: EmbeddedAws) -> None:
    aws.create_queue("q", {"VisibilityTimeout": "30"})
    message = _sqs_backend(aws).send_message("q", "x")
    first = aws.receive_as_lambda_event("q")["Records"]
    hidden = aws.receive_as_lambda_event("q")["Records"]
    message.visible_at -= 31_000  # the 30 s timeout has run out
    again = aws.receive_as_lambda_event("q")["Records"]
    assert [r["messageId"] for r in first] == [message.id] and hidden == []
    assert [(r["messageId"], r["attributes"]["ApproximateReceiveCount"]) for r in again] == [
        (message.id, "2")
    ]


def test_a_delayed_message_is_not_delivered_before_its_delay(aws: EmbeddedAws) -> None:
    aws.create_queue("q", {"DelaySeconds": "60"})
    message = _sqs_backend(aws).send_message("q", "later")
    early = aws.receive_as_lambda_event("q")["Records"]
    message.delayed_until -= 61_000
    due = aws.receive_as_lambda_event("q")["Records"]
    assert early == [] and [r["body"] for r in due] == ["later"]


def test_a_receive_of_some_attributes_leaves_the_others_on_the_queued_message(aws: EmbeddedAws) -> None:
    sqs = aws.client("sqs")
    url = aws.create_queue("q", {"VisibilityTimeout": "0"})
    sqs.send_message(
        QueueUrl=url,
        MessageBody="x",
        MessageAttributes={
            "team": {"DataType": "String", "StringValue": "nlp"},
            "run": {"DataType": "Number", "StringValue": "47"},
        },
    )
    some = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["team"])["Messages"]
    every = aws.receive_as_lambda_event("q")["Records"]
    assert set(some[0]["MessageAttributes"]) == {"team"}
    assert set(every[0]["messageAttributes"]) == {"team", "run"}
    assert every[0]["attributes"]["ApproximateReceiveCount"] == "2"


def test_a_deleted_message_can_be_deleted_again(aws: EmbeddedAws) -> None:
    sqs = aws.client("sqs")
    url = aws.create_queue("q")
    sqs.send_message(QueueUrl=url, MessageBody="first")
    handle = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)  # again: succeeds, as in moto
    with pytest.raises(ClientError) as error:
        sqs.delete_message(QueueUrl=url, ReceiptHandle="never-given")
    assert error.value.response["Error"]["Code"] == "ReceiptHandleIsInvalid"


def test_sent_and_deleted_messages_are_not_kept(aws: EmbeddedAws) -> None:
    from moto.sqs.models import Message

    aws.create_queue("q")
    for i in range(50):
        aws.send("q", f'{{"n": {i}}}')
        records = aws.receive_as_lambda_event("q")["Records"]
        assert len(records) == 1
        aws.delete_processed("q", records, failed_ids=set())
    gc.collect()
    alive = [o for o in gc.get_objects() if type(o) is Message]
    assert alive == []


# ------------------------------------------------------------------------------ EventBridge
def test_an_own_event_reaches_its_rules_target_queue_whole_each_time(aws: EmbeddedAws) -> None:
    """moto's EventBridge fills a target's default input paths per event (parsed once with the
    fixes): each event arrives in the target queue as it was put."""
    events = aws.client("events")
    aws.create_queue("target")
    events.put_rule(Name="own", EventPattern=json.dumps({"source": ["batchpilot"]}))
    events.put_targets(Rule="own", Targets=[{"Id": "q", "Arn": aws.queue_arn("target")}])
    for n in range(3):
        entry = {"Source": "batchpilot", "DetailType": "Job Starving", "Detail": json.dumps({"n": n})}
        events.put_events(Entries=[entry])
    bodies = [json.loads(r["body"]) for r in aws.receive_as_lambda_event("target")["Records"]]
    assert sorted(b["detail"]["n"] for b in bodies) == [0, 1, 2]
    assert {(b["source"], b["detail-type"], b["region"]) for b in bodies} == {
        ("batchpilot", "Job Starving", aws.region)
    }
    assert len({b["id"] for b in bodies}) == 3


def test_every_rule_matches_each_sample_event_as_motos_matcher_does() -> None:
    root = Path(__file__).resolve().parents[2]
    template = load_template(root / "template.yaml")
    events = [
        json.loads(path.read_text(encoding="utf-8"))
        for path in sorted((root / "events").rglob("*.json"))
        if "scenarios" not in path.parts
    ]
    events = [e for e in events if isinstance(e, dict) and "detail-type" in e]
    assert len(events) > 20
    matched = 0
    for event in events:
        for bus in {route.event_bus for route in template.routes}:
            expected = [r for r in template.routes if r.event_bus == bus and r.matches(event)]
            assert template.routes_for(event, bus) == expected, event.get("detail-type")
            matched += len(expected)
    assert matched > len(events)  # most sample events reach several functions


# ------------------------------------------------------------------------------ random DynamoDB work
STATE = "state"
FLAT = "flat"
INDEX = "by_g"
PKS = ("a", "b", "c", "d", "e")
SKS = ("1", "2")
NUMBERS = ("1", "2", "20", "0.5", "3")  # FLAT's keys: numbers, some also written another way
ALIASES = ("1.0", "2E1", "5E-1", "20.00")


def _tables(dynamodb: Any) -> None:
    """A StateTable-like table (pk/sk, TTL on expires_at, and a GSI on g) and one with a number
    hash key only."""
    dynamodb.create_table(
        TableName=STATE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "g", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": INDEX,
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    dynamodb.update_time_to_live(
        TableName=STATE, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )
    dynamodb.create_table(
        TableName=FLAT,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "N"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    )


def _key(table: str, pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}} if table == STATE else {"pk": {"N": pk}}


def _answer(call: Any, **kwargs: Any) -> Any:
    """The response without its metadata, or the error response (code, message, reasons), or
    what was raised (moto raises some errors out of the client call)."""
    try:
        response = call(**kwargs)
    except ClientError as error:
        response = error.response
    except Exception as exc:  # compared, not handled
        return (type(exc).__name__, str(exc))
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


def _pages(call: Any, **kwargs: Any) -> list[Any]:
    """Every page of a Query or Scan, following LastEvaluatedKey."""
    pages = []
    while True:
        page = _answer(call, **kwargs)
        pages.append(page)
        if not isinstance(page, dict) or "LastEvaluatedKey" not in page:
            return pages
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _run(dynamodb: Any, operation: tuple[Any, ...]) -> Any:
    """One generated operation against the tables of :func:`_tables`; its answers."""
    kind, *args = operation
    if kind == "put":
        (table, pk), sk, v, g = args
        item = {**_key(table, pk, sk), "v": {"N": str(v)}, "expires_at": {"N": "1900000000"}}
        if g is not None and table == STATE:
            item["g"] = {"S": g}
        return _answer(dynamodb.put_item, TableName=table, Item=item, ReturnValues="ALL_OLD")
    if kind == "get":
        (table, pk), sk = args
        return _answer(dynamodb.get_item, TableName=table, Key=_key(table, pk, sk), ConsistentRead=True)
    if kind == "update":  # the ledger's kind of write: a counter under a condition that may fail
        (table, pk), sk, n, below = args
        return _answer(
            dynamodb.update_item,
            TableName=table,
            Key=_key(table, pk, sk),
            UpdateExpression="ADD #v :n SET #seen = list_append(if_not_exists(#seen, :empty), :this)",
            ConditionExpression="attribute_not_exists(#v) OR #v < :below",
            ExpressionAttributeNames={"#v": "v", "#seen": "seen"},
            ExpressionAttributeValues={
                ":n": {"N": str(n)},
                ":below": {"N": str(below)},
                ":empty": {"L": []},
                ":this": {"L": [{"N": str(n)}]},
            },
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    if kind == "delete":
        (table, pk), sk, conditional = args
        extra = {"ConditionExpression": "attribute_exists(pk)"} if conditional else {}
        return _answer(
            dynamodb.delete_item, TableName=table, Key=_key(table, pk, sk), ReturnValues="ALL_OLD", **extra
        )
    if kind == "query":
        pk, forward, limit = args
        return _pages(
            dynamodb.query,
            TableName=STATE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
            ScanIndexForward=forward,
            Limit=limit,
        )
    if kind == "query_index":
        (g,) = args
        return _pages(
            dynamodb.query,
            TableName=STATE,
            IndexName=INDEX,
            KeyConditionExpression="g = :g",
            ExpressionAttributeValues={":g": {"S": g}},
        )
    if kind == "scan":
        table, limit = args
        return _pages(dynamodb.scan, TableName=table, Limit=limit)
    if kind == "transact":
        writes, fail = args
        items: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": STATE,
                    "Key": _key(STATE, pk, sk),
                    "UpdateExpression": "ADD v :n",
                    "ExpressionAttributeValues": {":n": {"N": "1"}},
                }
            }
            for pk, sk in writes
        ]
        if fail:
            items.append(
                {
                    "ConditionCheck": {
                        "TableName": FLAT,
                        "Key": {"pk": {"N": "99"}},
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                }
            )
        return _answer(dynamodb.transact_write_items, TransactItems=items)
    if kind == "batch_write":
        (keys,) = args
        requests = [{"PutRequest": {"Item": {**_key(STATE, pk, sk), "v": {"N": "7"}}}} for pk, sk in keys]
        return _answer(dynamodb.batch_write_item, RequestItems={STATE: requests})
    if kind == "batch_get":
        (keys,) = args
        answer = _answer(
            dynamodb.batch_get_item, RequestItems={STATE: {"Keys": [_key(STATE, pk, sk) for pk, sk in keys]}}
        )
        found = answer.get("Responses", {}).get(STATE, []) if isinstance(answer, dict) else []
        return {**answer, "Responses": sorted(json.dumps(item, sort_keys=True) for item in found)}
    if kind == "transact_get":
        (keys,) = args
        return _answer(
            dynamodb.transact_get_items,
            TransactItems=[{"Get": {"TableName": STATE, "Key": _key(STATE, pk, sk)}} for pk, sk in keys],
        )
    assert kind == "count"
    (table,) = args
    return dynamodb.describe_table(TableName=table)["Table"]["ItemCount"]


def _operations() -> Any:
    tables = st.sampled_from([STATE, FLAT])
    pk, sk = st.sampled_from(PKS), st.sampled_from(SKS)
    target = st.one_of(  # (table, partition key)
        st.tuples(st.just(STATE), pk), st.tuples(st.just(FLAT), st.sampled_from(NUMBERS + ALIASES))
    )
    keys = st.lists(st.tuples(pk, sk), min_size=1, max_size=4, unique=True)
    return st.lists(
        st.one_of(
            st.tuples(st.just("put"), target, sk, st.integers(0, 5), st.sampled_from([None, "x", "y"])),
            st.tuples(st.just("get"), target, sk),
            st.tuples(st.just("update"), target, sk, st.integers(1, 3), st.integers(0, 6)),
            st.tuples(st.just("delete"), target, sk, st.booleans()),
            st.tuples(st.just("query"), pk, st.booleans(), st.integers(1, 3)),
            st.tuples(st.just("query_index"), st.sampled_from(["x", "y"])),
            st.tuples(st.just("scan"), tables, st.integers(1, 4)),
            st.tuples(st.just("transact"), keys, st.booleans()),
            st.tuples(st.just("batch_write"), keys),
            st.tuples(st.just("batch_get"), keys),
            st.tuples(st.just("transact_get"), keys),
            st.tuples(st.just("count"), tables),
        ),
        min_size=1,
        max_size=25,
    )


def _replay_operations(operations: list[tuple[Any, ...]], fixes: bool) -> list[Any]:
    """The answers of every operation in a fresh embedded AWS with moto's fixes in or out."""
    with EmbeddedAws() as aws:
        if not fixes:
            moto_fixes.uninstall()
        try:
            dynamodb = aws.client("dynamodb")
            _tables(dynamodb)
            answers = [_run(dynamodb, ("put", (STATE, pk), sk, 0, "x")) for pk in PKS for sk in SKS]
            answers += [_run(dynamodb, ("put", (FLAT, pk), "", 0, None)) for pk in NUMBERS]
            answers += [_run(dynamodb, operation) for operation in operations]
            answers.append(_pages(dynamodb.scan, TableName=STATE))
            answers.append(_pages(dynamodb.scan, TableName=FLAT))
        finally:
            moto_fixes.install()
    return answers


def test_random_dynamodb_work_gets_the_same_answers_with_the_fixes_as_without() -> None:
    @settings(max_examples=15, deadline=None)
    @given(operations=_operations())
    def check(operations: list[tuple[Any, ...]]) -> None:
        with_fixes = _replay_operations(operations, fixes=True)
        assert with_fixes  # answers were gathered
        assert with_fixes == _replay_operations(operations, fixes=False)

    check()


# ------------------------------------------------------------------------------ the version guard
def test_the_fixes_are_in_for_the_moto_they_were_written_for() -> None:
    with EmbeddedAws():
        assert moto_fixes.installed() is (moto_fixes.moto_version() in moto_fixes.WRITTEN_FOR)


def test_another_moto_gets_no_fix_and_one_line_saying_what_to_do(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from moto.dynamodb.models import DynamoDBBackend

    moto_fixes.uninstall()
    plain = DynamoDBBackend.transact_write_items
    monkeypatch.setattr(moto_fixes, "moto_version", lambda: "5.9.0")
    monkeypatch.setitem(moto_fixes._state, "told", False)
    assert moto_fixes.install() is False
    assert moto_fixes.install() is False  # said once
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert "moto 5.9.0" in lines[0] and "moto_fixes.py" in lines[0] and "install moto" in lines[0]
    assert DynamoDBBackend.transact_write_items is plain  # nothing changed
    monkeypatch.undo()
    moto_fixes.uninstall()
    assert moto_fixes.install() is (moto_fixes.moto_version() in moto_fixes.WRITTEN_FOR)


def test_the_fixes_can_be_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    moto_fixes.uninstall()
    monkeypatch.setenv(moto_fixes.DISABLE_ENV, "0")
    assert moto_fixes.install() is False and not moto_fixes.installed()
    monkeypatch.delenv(moto_fixes.DISABLE_ENV)
    moto_fixes.uninstall()
