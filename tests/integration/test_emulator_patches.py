"""The embedded AWS's speed patches to moto (batchpilot_local.emulator.patch) change no answer:
an UpdateExpression text parsed once still applies each call's own values and still rejects a
bad text every time; SQS still moves a message to its dead-letter queue after maxReceiveCount
through the event-source-mapping path that calls moto's SQS backend directly, still hides a
received message for its visibility timeout and a delayed one for its delay, and a receive that
asks for some message attributes leaves the others on the queued message; the template's rules
match each sample event as moto's own matcher does; unsigned requests land in the embedded
account, and S3's stay signed. Memory: a queue accepts a second delete of its newest 1,024 deleted
messages and no older one; DynamoDB tables that keep 2 partitions in memory (or none) and spill
the rest answer every API as moto's own dict does, keep every write of a transaction over more
partitions than that, stay at the limit through a replay, and close their store with the
embedded AWS. A DynamoDB condition's syntax tree kept per text, names and values answers every
conditional PutItem as moto's own parse does, and at most CONDITION_TREES_KEPT are kept. Each
request URL's handler, kept, answers as moto's own search does (successes, service errors,
"Not yet implemented", an HTTPException a handler raises), and at most REQUEST_ROUTES_KEPT are
kept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.template import ACCOUNT_ID, load_template
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


def test_an_expression_that_reads_the_item_applies_to_each_items_own_value() -> None:
    """The validator resolves paths against the item on a copy of the shared parse tree: one
    call's item values never leak into the next call's."""
    expression = "SET #n = if_not_exists(#n, :zero) + :n, #who = :who"
    with EmbeddedAws() as aws:
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


def _backend_queue(aws: EmbeddedAws, name: str) -> Any:
    from moto.sqs.models import sqs_backends

    return sqs_backends[ACCOUNT_ID][aws.region].get_queue(name)


def test_a_received_message_stays_hidden_until_its_visibility_timeout_ends() -> None:
    with EmbeddedAws() as aws:
        aws.create_queue("q", {"VisibilityTimeout": "30"})
        sent = aws.send("q", "x")
        first = aws.receive_as_lambda_event("q")["Records"]
        hidden = aws.receive_as_lambda_event("q")["Records"]
        message = next(m for m in _backend_queue(aws, "q")._messages if m.id == sent)
        message.visible_at -= 31_000  # the 30 s timeout has run out
        again = aws.receive_as_lambda_event("q")["Records"]
    assert [r["messageId"] for r in first] == [sent] and hidden == []
    assert [(r["messageId"], r["attributes"]["ApproximateReceiveCount"]) for r in again] == [(sent, "2")]


def test_a_delayed_message_is_not_delivered_before_its_delay() -> None:
    with EmbeddedAws() as aws:
        aws.create_queue("q", {"DelaySeconds": "60"})
        sent = aws.send("q", "later")
        early = aws.receive_as_lambda_event("q")["Records"]
        message = next(m for m in _backend_queue(aws, "q")._messages if m.id == sent)
        message.delayed_until -= 61_000
        due = aws.receive_as_lambda_event("q")["Records"]
    assert early == [] and [r["body"] for r in due] == ["later"]


def test_a_receive_of_some_attributes_leaves_the_others_on_the_queued_message() -> None:
    with EmbeddedAws() as aws:
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


def test_unsigned_requests_land_in_the_embedded_account_and_s3_stays_signed() -> None:
    from batchpilot.io import clients

    signed: dict[str, set[bool]] = {}

    def remember(request: Any, **_: Any) -> None:
        host = request.url.split("//", 1)[1].split("/", 1)[0]
        service = "s3" if ".s3." in f".{host}" else host.split(".", 1)[0]
        signed.setdefault(service, set()).add("Authorization" in request.headers)

    with EmbeddedAws() as aws:
        sqs, s3 = clients.client("sqs"), clients.client("s3")
        for client in (sqs, s3):
            client.meta.events.register("before-send", remember)
        url = sqs.create_queue(QueueName="unsigned")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        s3.create_bucket(Bucket="signed-bucket")
        s3.put_object(Bucket="signed-bucket", Key="k", Body=b"v")
        body = s3.get_object(Bucket="signed-bucket", Key="k")["Body"].read()
        for client in (sqs, s3):
            client.meta.events.unregister("before-send", remember)
    assert arn == f"arn:aws:sqs:{aws.region}:{ACCOUNT_ID}:unsigned"
    assert body == b"v"
    assert signed == {"sqs": {False}, "s3": {True}}


def test_an_item_over_the_size_limit_is_refused_and_one_under_it_is_stored() -> None:
    """moto's 400 KB item limit holds when the size is checked once per item."""
    with EmbeddedAws() as aws:
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


def test_a_condition_text_seen_before_still_uses_each_calls_values() -> None:
    """Tokens are kept per ConditionExpression text; names and values are each call's own."""
    condition = "attribute_not_exists(#v) OR #v < :v"
    with EmbeddedAws() as aws:
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


def test_json_and_query_protocol_requests_both_reach_moto_whole() -> None:
    """DynamoDB (JSON protocol: the light request) and SNS (query protocol: moto's werkzeug
    request) each get every parameter, including non-ASCII text."""
    with EmbeddedAws() as aws:
        dynamodb, sns = aws.client("dynamodb"), aws.client("sns")
        _table(dynamodb)
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "ü-job"}, "b": {"B": b"\x00\xff"}})
        item = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "ü-job"}})["Item"]
        topic = sns.create_topic(Name="t", Attributes={"DisplayName": "Zürich on-call"})["TopicArn"]
        shown = sns.get_topic_attributes(TopicArn=topic)["Attributes"]["DisplayName"]
    assert item == {"pk": {"S": "ü-job"}, "b": {"B": b"\x00\xff"}}
    assert shown == "Zürich on-call"


def test_the_user_agent_text_follows_the_request_features() -> None:
    """botocore's User-Agent header, built once per client and feature set, still names the
    features of the request that sends it (``m/...``; a paginator adds its own)."""
    seen: list[str] = []
    with EmbeddedAws() as aws:
        dynamodb = aws.client("dynamodb")
        _table(dynamodb)
        dynamodb.meta.events.register(
            "before-send", lambda request, **_: seen.append(str(request.headers["User-Agent"]))
        )
        dynamodb.list_tables()
        list(dynamodb.get_paginator("list_tables").paginate())
        dynamodb.list_tables()
    plain, paginated, again = seen
    assert plain == again and paginated != plain
    assert plain.startswith("Boto3/") or plain.startswith("Botocore/")


def test_an_own_event_reaches_its_rules_target_queue_whole_each_time() -> None:
    """moto's EventBridge still fills a target's default input paths per event (the parsed paths
    are shared): each event arrives in the target queue as it was put."""
    with EmbeddedAws() as aws:
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


def test_an_update_with_two_set_clauses_is_still_refused() -> None:
    """moto's ActionCountValidator (which walks the tree with find_clauses) still counts clauses."""
    with EmbeddedAws() as aws:
        dynamodb = aws.client("dynamodb")
        _table(dynamodb)
        with pytest.raises(ClientError) as error:
            _update(dynamodb, "a", 1, "x", expression="SET #who = :who SET #n = :n")
    assert error.value.response["Error"]["Code"] == "ValidationException"


# ------------------------------------------------------------------ memory: receipt handles


def _delete_messages(sqs: Any, url: str, count: int) -> None:
    """Send, receive and delete ``count`` messages, ten at a time."""
    while count > 0:
        n = min(10, count)
        sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(n)]
        )
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=n)["Messages"]
        assert len(received) == n
        done = sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received)],
        )
        assert len(done["Successful"]) == n
        count -= n


def test_a_deleted_message_can_be_deleted_again_until_a_thousand_later_ones_were() -> None:
    from batchpilot_local.emulator.patch import DELETED_MESSAGES_REMEMBERED

    with EmbeddedAws() as aws:
        sqs = aws.client("sqs")
        url = aws.create_queue("q")
        sqs.send_message(QueueUrl=url, MessageBody="first")
        handle = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)  # again: succeeds, as in moto
        _delete_messages(sqs, url, DELETED_MESSAGES_REMEMBERED - 1)
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)  # still among the newest 1,024
        _delete_messages(sqs, url, 1)
        with pytest.raises(ClientError) as error:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    assert error.value.response["Error"]["Code"] == "ReceiptHandleIsInvalid"


def test_a_queue_remembers_the_handles_of_a_bounded_number_of_deleted_messages() -> None:
    from batchpilot_local.emulator.patch import DELETED_MESSAGES_REMEMBERED

    with EmbeddedAws() as aws:
        sqs = aws.client("sqs")
        url = aws.create_queue("q")
        _delete_messages(sqs, url, 3 * DELETED_MESSAGES_REMEMBERED)
        remembered = set(_backend_queue(aws, "q").deleted_messages)
    # One receive, one handle, per message; moto also lists None, a message's handle before it.
    assert None in remembered and len(remembered - {None}) == DELETED_MESSAGES_REMEMBERED


# ------------------------------------------------------------------ memory: spilled DynamoDB items

STATE = "state"
FLAT = "flat"
INDEX = "by_g"
PKS = ("a", "b", "c", "d", "e")
SKS = ("1", "2")
NUMBERS = ("1", "2", "20", "0.5", "3")  # FLAT's keys: numbers, some also written another way
ALIASES = ("1.0", "2E1", "5E-1", "20.00")


def _spill_tables(dynamodb: Any) -> None:
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
    _table(dynamodb)  # TABLE: pk only
    dynamodb.create_table(
        TableName=FLAT,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "N"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    )


def _store(aws: EmbeddedAws, table: str) -> Any:
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[ACCOUNT_ID][aws.region].tables[table].items


def _key(table: str, pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}} if table == STATE else {"pk": {"N": pk}}


def _answer(call: Any, **kwargs: Any) -> Any:
    """The response without its metadata, or the error response (code, message, reasons)."""
    try:
        response = call(**kwargs)
    except ClientError as error:
        response = error.response
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


def _pages(call: Any, **kwargs: Any) -> list[Any]:
    """Every page of a Query or Scan, following LastEvaluatedKey."""
    pages = []
    while True:
        page = _answer(call, **kwargs)
        pages.append(page)
        if "LastEvaluatedKey" not in page:
            return pages
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _run(dynamodb: Any, operation: tuple[Any, ...]) -> Any:
    """One generated operation against the tables of :func:`_spill_tables`; its answers."""
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
        found = answer.get("Responses", {}).get(STATE, [])
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
    from hypothesis import strategies as st

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


@contextmanager
def _hot_partitions(limit: int) -> Iterator[None]:
    """Tables keep ``limit`` partitions in memory inside the block, the default after."""
    from batchpilot_local.emulator.patch import spilled_dynamodb_items

    spilled_dynamodb_items(limit)
    try:
        yield
    finally:
        spilled_dynamodb_items()


def _replay_operations(
    operations: list[tuple[Any, ...]], hot_partitions: int | None
) -> tuple[list[Any], int]:
    """The answers of every operation in a fresh embedded AWS whose tables keep ``hot_partitions``
    partitions in memory, or (None) keep their items in moto's own ``defaultdict`` and query them
    with moto's own ``Table.query``; also the partitions on disk once every key was written."""
    from collections import defaultdict
    from types import MethodType

    from batchpilot_local.emulator.patch import spilled_dynamodb_items
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.table import Table

    with EmbeddedAws() as aws:
        dynamodb = aws.client("dynamodb")
        _spill_tables(dynamodb)
        if hot_partitions is None:
            for table in dynamodb_backends[ACCOUNT_ID][aws.region].tables.values():
                table.items = defaultdict(dict)
                table.query = MethodType(Table._batchpilot_unpatched_query, table)  # type: ignore[attr-defined]
        else:
            spilled_dynamodb_items(hot_partitions)
        try:
            answers = [_run(dynamodb, ("put", (STATE, pk), sk, 0, "x")) for pk in PKS for sk in SKS]
            answers += [_run(dynamodb, ("put", (FLAT, pk), "", 0, None)) for pk in NUMBERS]
            stores = [_store(aws, STATE), _store(aws, FLAT)]
            spilled = sum(store.on_disk for store in stores if hasattr(store, "on_disk"))
            answers += [_run(dynamodb, operation) for operation in operations]
            answers.append(_pages(dynamodb.scan, TableName=STATE))
            answers.append(_pages(dynamodb.scan, TableName=FLAT))
        finally:
            spilled_dynamodb_items()
    return answers, spilled


def test_tables_that_spill_partitions_to_disk_answer_as_motos_own_tables() -> None:
    from hypothesis import given, settings

    @settings(max_examples=15, deadline=None)
    @given(operations=_operations())
    def check(operations: list[tuple[Any, ...]]) -> None:
        spilling, spilled = _replay_operations(operations, hot_partitions=2)
        motos, _ = _replay_operations(operations, hot_partitions=None)
        assert spilled == 6  # 5 + 5 partitions, 2 of each table kept
        assert spilling == motos

    check()


@pytest.mark.parametrize("hot", [0, 2])
def test_a_transaction_over_more_partitions_than_are_kept_keeps_all_its_writes(hot: int) -> None:
    """The partitions a transaction loads and changes in place are written out after it, not
    while it runs: every write is kept; a cancelled one changes none of them."""
    jobs = [f"job#{i}" for i in range(6)]

    def add_one(pk: str) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": STATE,
                "Key": _key(STATE, pk, "job"),
                "UpdateExpression": "ADD n :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        }

    with EmbeddedAws() as aws:
        dynamodb = aws.client("dynamodb")
        _spill_tables(dynamodb)
        with _hot_partitions(hot):
            for pk in jobs:
                dynamodb.put_item(TableName=STATE, Item={**_key(STATE, pk, "job"), "n": {"N": "0"}})
            store = _store(aws, STATE)
            assert (store.in_memory, store.on_disk) == (hot, 6 - hot)
            dynamodb.transact_write_items(TransactItems=[add_one(pk) for pk in jobs])
            assert (store.in_memory, store.on_disk) == (hot, 6 - hot)
            never = {
                "TableName": FLAT,
                "Key": {"pk": {"N": "99"}},
                "ConditionExpression": "attribute_exists(pk)",
            }
            with pytest.raises(ClientError) as error:
                dynamodb.transact_write_items(TransactItems=[*map(add_one, jobs), {"ConditionCheck": never}])
            counts = [
                dynamodb.get_item(TableName=STATE, Key=_key(STATE, pk, "job"))["Item"]["n"]["N"]
                for pk in jobs
            ]
    assert error.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert counts == ["1"] * 6


def test_a_replay_keeps_at_most_the_limit_of_partitions_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs replayed through the real handlers with a limit of 4 partitions per table: after every
    event at most 4 are in memory, and the StateTable ends with the same items as a replay that
    keeps them all."""
    from batchpilot_local.emulator import patch
    from batchpilot_local.replay import Replayer
    from batchpilot_local.testing.samples import batch_job
    from moto.dynamodb.models import dynamodb_backends

    statuses = ["SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED"]
    events = []
    for step, status in enumerate(statuses):  # eight jobs in flight together
        for job in range(8):
            job_id = f"00000000-0000-4000-8000-{job:012d}"
            event = batch_job(status, jobId=job_id, jobName=f"job-{job}", createdAt=1763633000000 + job)
            event["detail"]["jobArn"] = event["detail"]["jobArn"].rsplit("/", 1)[0] + f"/{job_id}"
            event["id"] = f"event-{step}-{job}"
            event["time"] = f"2026-11-20T10:{step:02d}:{job:02d}Z"
            events.append(event)

    def replay(limit: int) -> tuple[list[int], list[str], list[str]]:
        monkeypatch.setattr(patch, "HOT_PARTITIONS", limit)  # what each EmbeddedAws opened sets
        in_memory: list[int] = []
        keys: list[str] = []

        def on_report(report: Any) -> None:
            tables = dynamodb_backends[ACCOUNT_ID][aws_region].tables.values()
            in_memory.append(max(t.items.in_memory for t in tables))
            if len(in_memory) == len(events):
                keys.extend(
                    sorted(f"{i.hash_key.value} {i.range_key.value}" for t in tables for i in t.all_items())
                )

        reports = Replayer().run(events, on_report=on_report)
        return in_memory, keys, [error for report in reports for error in report.errors]

    from batchpilot_local.template import REGION as aws_region

    bounded, spilled_keys, errors = replay(4)
    _, all_keys, _ = replay(1_000)
    assert errors == []
    assert len(bounded) == len(events) and max(bounded) == 4
    assert len(all_keys) > 16 and spilled_keys == all_keys


def test_a_closed_embedded_aws_closes_its_tables_stores_and_the_next_starts_empty() -> None:
    import gc
    import sqlite3
    import weakref

    with EmbeddedAws() as aws:
        dynamodb = aws.client("dynamodb")
        _spill_tables(dynamodb)
        with _hot_partitions(2):
            for pk in PKS:
                dynamodb.put_item(TableName=STATE, Item=_key(STATE, pk, "1"))
            store = _store(aws, STATE)
            assert store.on_disk == 3
            database = store._db  # the store's own SQLite connection
            gone = weakref.ref(store)
            del store
    gc.collect()
    assert gone() is None
    with pytest.raises(sqlite3.ProgrammingError):  # closed with its store
        database.execute("SELECT 1")
    with EmbeddedAws() as aws:
        dynamodb = aws.client("dynamodb")
        _spill_tables(dynamodb)
        assert dynamodb.scan(TableName=STATE)["Items"] == []


def test_a_backup_of_a_table_with_spilled_partitions_restores_every_item_as_it_was() -> None:

    with EmbeddedAws() as aws:
        dynamodb = aws.client("dynamodb")
        _spill_tables(dynamodb)
        with _hot_partitions(2):
            for i, pk in enumerate(PKS):
                dynamodb.put_item(TableName=STATE, Item={**_key(STATE, pk, "1"), "v": {"N": str(i)}})
            arn = dynamodb.create_backup(TableName=STATE, BackupName="before")["BackupDetails"]["BackupArn"]
            dynamodb.put_item(TableName=STATE, Item={**_key(STATE, "a", "1"), "v": {"N": "100"}})
            dynamodb.restore_table_from_backup(TargetTableName="restored", BackupArn=arn)
            restored = dynamodb.scan(TableName="restored")["Items"]
            count = dynamodb.describe_table(TableName="restored")["Table"]["ItemCount"]
            spilled = _store(aws, "restored").on_disk
    assert sorted((item["pk"]["S"], item["v"]["N"]) for item in restored) == [
        (pk, str(i)) for i, pk in enumerate(PKS)
    ]
    assert (count, spilled) == (5, 3)


CONDITIONS = [
    "attribute_not_exists(#a)",
    "#a = :x",
    "#a < :x OR attribute_not_exists(#a)",
    "(#a <= :x) AND #b = :y",
    "begins_with(#b, :y)",
    "#a BETWEEN :x AND :x",
    "size(#b) > :x",
    "#a IN (:x, :x)",
    "NOT #a = :x",
    "#a = :x AND",  # not a condition: refused every time
    "#a = :nowhere",  # a value that is not given: refused every time
]


def _answer_or_raised(call: Any, **kwargs: Any) -> Any:
    """:func:`_answer`, or what was raised: moto raises ``ValueError`` out of the client call for
    some texts that are not conditions (``#a = :x AND``)."""
    try:
        return _answer(call, **kwargs)
    except Exception as exc:  # compared, not handled
        return (type(exc).__name__, str(exc))


def _conditional_puts(puts: list[tuple[Any, ...]], cached: bool) -> list[Any]:
    """The answers of conditional PutItems (then a Scan) in a fresh embedded AWS, its condition
    trees kept (``cached``) or parsed by moto on every call."""
    from moto.dynamodb.comparisons import ConditionExpressionParser

    parser: Any = ConditionExpressionParser
    with EmbeddedAws() as aws:
        dynamodb = aws.client("dynamodb")
        _table(dynamodb)
        patched = parser.parse
        if not cached:
            parser.parse = parser._batchpilot_unpatched_parse
        try:
            answers = []
            for pk, condition, extra_name, n, s, x, y in puts:
                names = {"#a": "n", "#b": "s", **({"#c": "c"} if extra_name else {})}
                used = {k: v for k, v in names.items() if k in condition or k == "#c"}
                answers.append(
                    _answer_or_raised(
                        dynamodb.put_item,
                        TableName=TABLE,
                        Item={"pk": {"S": pk}, "n": {"N": str(n)}, "s": {"S": s}},
                        ConditionExpression=condition,
                        ExpressionAttributeNames=used,
                        ExpressionAttributeValues={
                            k: v for k, v in {":x": {"N": str(x)}, ":y": {"S": y}}.items() if k in condition
                        },
                    )
                )
            answers.append(_pages(dynamodb.scan, TableName=TABLE))
        finally:
            parser.parse = patched
    return answers


def test_a_condition_tree_kept_answers_every_put_as_motos_own_parse() -> None:
    """Same condition text, names and values: the kept tree; any other: a new parse. Conditions
    that fail, that are not conditions, names that are not used and values not given answer as
    moto's own parse does, every time they are sent."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    put = st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(CONDITIONS),
        st.booleans(),  # an unused name (#c): refused
        st.integers(0, 4),
        st.sampled_from(["p", "pq", "q"]),
        st.integers(0, 4),
        st.sampled_from(["p", "q"]),
    )

    @settings(max_examples=20, deadline=None)
    @given(puts=st.lists(put, min_size=1, max_size=30))
    def check(puts: list[tuple[Any, ...]]) -> None:
        assert _conditional_puts(puts, cached=True) == _conditional_puts(puts, cached=False)

    check()


def test_condition_trees_kept_are_bounded_and_the_least_recently_used_goes_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from batchpilot_local.emulator import patch
    from moto.dynamodb.comparisons import ConditionExpressionParser

    monkeypatch.setattr(patch, "CONDITION_TREES_KEPT", 3)
    trees: Any = ConditionExpressionParser._batchpilot_condition_trees  # type: ignore[attr-defined]
    trees.clear()
    _conditional_puts([("a", "#a = :x", False, 1, "p", x, "p") for x in (0, 1, 2, 0, 3)], cached=True)
    assert [json.loads(values)[":x"]["N"] for _, _, values in trees] == ["2", "0", "3"]


def _answers_across_services(own_search: bool) -> list[Any]:
    """Answers (and errors) of calls to several services, DynamoDB through S3 path-style URLs
    and a service moto lacks, with moto finding each URL's handler itself (``own_search``) or
    the kept routes doing it."""
    from batchpilot_local.emulator.patch import cached_request_routes
    from moto.core.botocore_stubber import BotocoreStubber

    cached_request_routes()  # patched before it is read, so that the finally restores it
    stubber: Any = BotocoreStubber
    patched = stubber.process_request
    if own_search:
        stubber.process_request = stubber._batchpilot_unpatched_process_request
    try:
        with EmbeddedAws() as aws:
            dynamodb, s3, sqs = aws.client("dynamodb"), aws.client("s3"), aws.client("sqs")
            _table(dynamodb)
            calls: list[tuple[Any, dict[str, Any]]] = [
                (dynamodb.put_item, {"TableName": TABLE, "Item": {"pk": {"S": "a"}}}),
                (dynamodb.get_item, {"TableName": TABLE, "Key": {"pk": {"S": "a"}}}),
                (dynamodb.get_item, {"TableName": "missing", "Key": {"pk": {"S": "a"}}}),
                (s3.create_bucket, {"Bucket": "one"}),
                (s3.put_object, {"Bucket": "one", "Key": "a/b", "Body": b"x"}),
                (s3.get_object, {"Bucket": "one", "Key": "missing"}),
                (s3.list_objects_v2, {"Bucket": "two"}),
                (sqs.create_queue, {"QueueName": "q"}),
                (sqs.get_queue_url, {"QueueName": "missing"}),
                (aws.client("braket").search_devices, {"filters": []}),
            ]
            answers = []
            for call, kwargs in calls:
                answer = _answer_or_raised(call, **kwargs)
                if isinstance(answer, dict):
                    answer.pop("Body", None)  # a stream
                    answer.pop("LastModified", None)
                    answer.pop("ETag", None)
                answers.append(answer)
            return answers
    finally:
        stubber.process_request = patched


def test_each_url_reaches_the_handler_motos_own_search_finds() -> None:
    """Handlers kept per URL answer as moto's own search per request does: successes, service
    errors (moto's HTTPException answers) and "Not yet implemented" for a service moto lacks."""
    kept = _answers_across_services(own_search=False)
    assert kept == _answers_across_services(own_search=True)
    assert kept[-1]["Error"]["Message"] == "Not yet implemented"
    assert kept[1]["Item"] == {"pk": {"S": "a"}}
    assert kept[2]["Error"]["Code"] == "ResourceNotFoundException"
    assert kept[5]["Error"]["Code"] == "NoSuchKey"


def test_request_routes_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most REQUEST_ROUTES_KEPT URLs (an S3 key is a URL); each request still answered."""
    from batchpilot_local.emulator import patch
    from moto.core.botocore_stubber import BotocoreStubber

    monkeypatch.setattr(patch, "REQUEST_ROUTES_KEPT", 2)
    with EmbeddedAws() as aws:
        s3 = aws.client("s3")
        s3.create_bucket(Bucket="bucket")
        sizes = []
        for i in range(5):
            s3.put_object(Bucket="bucket", Key=f"k{i}", Body=b"x")
            sizes.append(len(BotocoreStubber._batchpilot_request_routes))  # type: ignore[attr-defined]
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="bucket")["Contents"])
    assert max(sizes) <= 2
    assert keys == [f"k{i}" for i in range(5)]


def test_an_http_error_a_kept_handler_raises_is_the_answer_the_client_gets() -> None:
    """moto's errors derive from werkzeug's HTTPException; one raised by a handler is answered
    with its code, headers and body, as moto's own stubber does."""
    from moto.core.botocore_stubber import BotocoreStubber
    from moto.core.exceptions import JsonRESTError

    def refuse(request: Any, full_url: str, headers: Any) -> Any:
        raise JsonRESTError("TestRefusal", "refused by the test")

    with EmbeddedAws() as aws:
        dynamodb = aws.client("dynamodb")
        dynamodb.list_tables()  # the URL's route is kept now
        routes = BotocoreStubber._batchpilot_request_routes  # type: ignore[attr-defined]
        (url,) = [u for u, route in routes.items() if route and route[0] == "dynamodb"]
        kept = routes[url]
        routes[url] = ("dynamodb", refuse)
        try:
            with pytest.raises(ClientError) as caught:
                dynamodb.list_tables()
        finally:
            routes[url] = kept
        assert dynamodb.list_tables()["TableNames"] == []
    assert caught.value.response["Error"] == {"Code": "TestRefusal", "Message": "refused by the test"}
