"""The embedded AWS's speed patches to moto (batchpilot_local.emulator.patch) change no answer:
an UpdateExpression text parsed once still applies each call's own values and still rejects a
bad text every time; SQS still moves a message to its dead-letter queue after maxReceiveCount
through the event-source-mapping path that calls moto's SQS backend directly, still hides a
received message for its visibility timeout and a delayed one for its delay, and a receive that
asks for some message attributes leaves the others on the queued message; the template's rules
match each sample event as moto's own matcher does; unsigned requests land in the embedded
account, and S3's stay signed."""

from __future__ import annotations

import json
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
