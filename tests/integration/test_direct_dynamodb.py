"""The direct DynamoDB path (batchpilot_local.emulator.direct.direct_calls, at botocore's
``before-call``) gives exactly the answers botocore's whole HTTP path to moto gives.

Two clients of one boto3 session talk to one embedded AWS: one the normal way (botocore prepares,
signs and "sends" the request, moto's stubber answers at ``before-send``), the other with
``direct_calls`` on its event emitter. Each runs the same operations on tables of the
same names, created afresh for it (at one frozen creation time), and everything a caller sees is
compared: the parsed response or the raised error (its class, message, ``Error``, modeled fields
such as a ConditionalCheckFailedException's ``Item`` and a TransactionCanceledException's
``CancellationReasons``), ``ResponseMetadata`` (status, headers, RetryAttempts) but for the
request id and the date, and the HTTP answer ``after-call`` handlers see (status, headers, body
bytes). Binary attributes (moto's parser decodes their base64) and string values that look like
them (``"B"``) included; a property test does the same for random items and conditions.

Also: ``EmbeddedAws(direct_calls=True)`` sends no DynamoDB request (no ``before-send``) and its
API journal still records each call's status and error code; the handler steps aside while moto's
stubber is off (the HTTP fault hooks); the undo puts a client back on the HTTP path. A call moto
fails with an exception of its own (not an AWS error) is journalled alike on both paths.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import boto3
import pytest
from batchpilot_local.embedded_aws import EmbeddedAws, create_tables
from batchpilot_local.emulator.direct import direct_calls
from batchpilot_local.testing.twin import answer_of, pages_of, wire_recorder
from botocore.exceptions import ClientError

STATE = "state"  # pk, sk (strings); GSI by owner
FLAT = "flat"  # pk (string)
BLOBS = "blobs"  # pk, sk (binary)
INDEX = "by-owner"
TABLES: dict[str, dict[str, Any]] = {
    STATE: {
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "owner", "AttributeType": "S"},
        ],
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": INDEX,
                "KeySchema": [
                    {"AttributeName": "owner", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    },
    FLAT: {
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
    },
    BLOBS: {
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "B"},
            {"AttributeName": "sk", "AttributeType": "B"},
        ],
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
    },
}
CREATED = datetime.datetime(2026, 1, 2, 3, 4, 5)  # every table's creation time (moto: naive UTC)
BIG = 350_000  # bytes of a Binary attribute: under the 405,000-byte item limit, its base64 over it


# ---------------------------------------------------------------------------------------------- runs
@dataclass
class Run:
    """What one client's caller saw of a run of steps (``answers``, by label) and what its
    ``after-call`` handlers saw of each HTTP answer (``wire``); ``sent``: its ``before-send``
    events (requests that took botocore's HTTP path)."""

    answers: dict[str, Any] = field(default_factory=dict)
    wire: list[dict[str, Any]] = field(default_factory=list)
    sent: int = 0


def _run(client: Any, steps: list[tuple[str, str, dict[str, Any]]], tables: dict[str, Any]) -> Run:
    """``steps`` (label, operation, arguments; a ``*`` operation is paginated) on fresh ``tables``,
    which are deleted after."""
    run = Run()

    def sent(**_: Any) -> None:
        run.sent += 1

    create_tables(client, tables)
    client.meta.events.register("after-call.dynamodb", wire_recorder(run.wire), unique_id="test-wire")
    client.meta.events.register("before-send.dynamodb", sent, unique_id="test-sent")
    try:
        for label, operation, kwargs in steps:
            assert label not in run.answers
            if operation.startswith("*"):
                run.answers[label] = pages_of(
                    client, operation[1:], kwargs, token="LastEvaluatedKey", start="ExclusiveStartKey"
                )
            else:
                run.answers[label] = answer_of(client, operation, kwargs)
    finally:
        client.meta.events.unregister("after-call.dynamodb", unique_id="test-wire")
        client.meta.events.unregister("before-send.dynamodb", unique_id="test-sent")
        for name in tables:
            client.delete_table(TableName=name)
    return run


@contextmanager
def _http_and_direct_clients() -> Iterator[tuple[Any, Any]]:
    """An open embedded AWS, its tables all created at :data:`CREATED`, and two DynamoDB clients
    of one session: the first on botocore's HTTP path, the second on the direct path."""
    from moto.dynamodb.models import table

    with EmbeddedAws() as aws, pytest.MonkeyPatch.context() as patch:
        patch.setattr(table, "utcnow", lambda: CREATED)
        session = boto3.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name=aws.region,
        )
        http, direct = session.client("dynamodb"), session.client("dynamodb")
        undo = direct_calls([direct.meta.events], aws.overlay)
        try:
            yield http, direct
        finally:
            undo()


def _assert_same(http: Run, direct: Run) -> None:
    """The two runs' answers and HTTP answers are equal; only the first sent requests."""
    assert direct.answers == http.answers
    assert direct.wire == http.wire
    assert http.sent >= len(http.wire) > 0  # a request per HTTP answer: botocore's HTTP path
    assert direct.sent == 0  # none: the direct path


# -------------------------------------------------------------------------------- the scripted run
def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int | str) -> dict[str, str]:
    return {"N": str(value)}


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": _s(pk), "sk": _s(sk)}


def _blob_key(pk: bytes, sk: bytes) -> dict[str, Any]:
    return {"pk": {"B": pk}, "sk": {"B": sk}}


RICH = {  # every kind of AttributeValue, and string values that look like Binary ones
    **_key("job#1", "a"),
    "owner": _s("ana"),
    "n": _n(1),
    "price": _n("12.50"),
    "B": _s("B"),  # an attribute named "B" holding the string "B": not a blob
    "BS": _s("BS"),
    "flag": {"BOOL": True},
    "off": {"BOOL": False},
    "nothing": {"NULL": True},
    "tags": {"SS": ["x", "y", "B"]},
    "scores": {"NS": ["1", "2.5", "-3"]},
    "list": {"L": [_s("B"), _n(7), {"L": [{"BOOL": False}]}, {"M": {"k": _s("v")}}]},
    "map": {"M": {"inner": _s("deep"), "B": {"M": {"S": _s("B")}}, "empty": {"M": {}}}},
}
BLOB_ITEM = {
    **_blob_key(b"\x00\x01", b"ab"),
    "payload": {"B": b"\x00\xff\xfe binary \x80"},
    "parts": {"BS": [b"\x01", b"\xfb\xff", b"abc"]},
    "nested": {"M": {"raw": {"B": b"\xc3\x28"}, "list": {"L": [{"B": b""}, {"BS": [b"z"]}]}}},
    "label": _s("B"),
}
SORTED_KEYS = [b"\x00", b"a", b"ab", b"abc", b"\xfb\xff"]  # byte order; base64 order differs


def _script() -> list[tuple[str, str, dict[str, Any]]]:
    """Every DynamoDB call the adapters make, and more, with answers that succeed and fail."""
    steps: list[tuple[str, str, dict[str, Any]]] = [
        ("put", "put_item", {"TableName": STATE, "Item": RICH}),
        (
            "put b",
            "put_item",
            {"TableName": STATE, "Item": {**_key("job#1", "b"), "owner": _s("ana"), "n": _n(2)}},
        ),
        (
            "put c",
            "put_item",
            {"TableName": STATE, "Item": {**_key("job#1", "c"), "owner": _s("bob"), "n": _n(3)}},
        ),
        (
            "put d",
            "put_item",
            {"TableName": STATE, "Item": {**_key("job#2", "a"), "owner": _s("ana"), "n": _n(4)}},
        ),
        (
            "put if new",
            "put_item",
            {
                "TableName": FLAT,
                "Item": {"pk": _s("f1"), "v": _n(1)},
                "ConditionExpression": "attribute_not_exists(pk)",
                "ReturnValues": "ALL_OLD",
            },
        ),
        (
            "put if new, fails, all old",
            "put_item",
            {
                "TableName": STATE,
                "Item": _key("job#1", "a"),
                "ConditionExpression": "attribute_not_exists(pk)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        (
            "put if new, fails",
            "put_item",
            {"TableName": FLAT, "Item": {"pk": _s("f1")}, "ConditionExpression": "attribute_not_exists(pk)"},
        ),
        (
            "put if below",
            "put_item",
            {
                "TableName": FLAT,
                "Item": {"pk": _s("f1"), "v": _n(2), "B": {"SS": ["B", "BS"]}},
                "ConditionExpression": "#v < :max",
                "ExpressionAttributeNames": {"#v": "v"},
                "ExpressionAttributeValues": {":max": _n(5)},
                "ReturnValues": "ALL_OLD",
            },
        ),
        (
            "put over, all old",
            "put_item",
            {"TableName": FLAT, "Item": {"pk": _s("f1"), "v": _n(3)}, "ReturnValues": "ALL_OLD"},
        ),
        (
            "update set, all new",
            "update_item",
            {
                "TableName": STATE,
                "Key": _key("job#1", "b"),
                "UpdateExpression": "SET #s = :s, #l = list_append(if_not_exists(#l, :empty), :one)",
                "ExpressionAttributeNames": {"#s": "status", "#l": "log"},
                "ExpressionAttributeValues": {":s": _s("B"), ":empty": {"L": []}, ":one": {"L": [_n(1)]}},
                "ReturnValues": "ALL_NEW",
            },
        ),
        (
            "update add, updated old",
            "update_item",
            {
                "TableName": STATE,
                "Key": _key("job#1", "a"),
                "UpdateExpression": "ADD #n :two, tags :more",
                "ExpressionAttributeNames": {"#n": "n"},
                "ExpressionAttributeValues": {":two": _n(2), ":more": {"SS": ["z"]}},
                "ReturnValues": "UPDATED_OLD",
            },
        ),
        (
            "update remove, updated new",
            "update_item",
            {
                "TableName": STATE,
                "Key": _key("job#1", "a"),
                "UpdateExpression": "REMOVE #gone SET #m.#i = :x",
                "ExpressionAttributeNames": {"#gone": "nothing", "#m": "map", "#i": "inner"},
                "ExpressionAttributeValues": {":x": _s("changed")},
                "ReturnValues": "UPDATED_NEW",
            },
        ),
        (
            "update new item",
            "update_item",
            {
                "TableName": FLAT,
                "Key": {"pk": _s("f2")},
                "UpdateExpression": "ADD hits :one",
                "ExpressionAttributeValues": {":one": _n(1)},
                "ReturnValues": "ALL_NEW",
            },
        ),
        (
            "update fails, all old",
            "update_item",
            {
                "TableName": STATE,
                "Key": _key("job#1", "c"),
                "UpdateExpression": "ADD #n :one",
                "ConditionExpression": "#n > :big",
                "ExpressionAttributeNames": {"#n": "n"},
                "ExpressionAttributeValues": {":one": _n(1), ":big": _n(100)},
                "ReturnValues": "ALL_NEW",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        ("get", "get_item", {"TableName": STATE, "Key": _key("job#1", "a"), "ConsistentRead": True}),
        ("get miss", "get_item", {"TableName": STATE, "Key": _key("job#9", "a")}),
        (
            "get projected",
            "get_item",
            {
                "TableName": STATE,
                "Key": _key("job#1", "a"),
                "ProjectionExpression": "#n, #m.#i, #l, tags, B",
                "ExpressionAttributeNames": {"#n": "n", "#m": "map", "#i": "inner", "#l": "list"},
            },
        ),
        (
            "get with capacity",
            "get_item",
            {"TableName": STATE, "Key": _key("job#1", "b"), "ReturnConsumedCapacity": "TOTAL"},
        ),
        (
            "batch write",
            "batch_write_item",
            {
                "RequestItems": {
                    FLAT: [
                        {"PutRequest": {"Item": {"pk": _s("f3"), "v": _n(3)}}},
                        {"PutRequest": {"Item": {"pk": _s("f4"), "v": {"L": [_s("B")]}}}},
                        {"DeleteRequest": {"Key": {"pk": _s("f2")}}},
                    ],
                    STATE: [{"PutRequest": {"Item": {**_key("job#3", "a"), "owner": _s("cy")}}}],
                }
            },
        ),
        (
            "batch get",
            "batch_get_item",
            {
                "RequestItems": {
                    FLAT: {"Keys": [{"pk": _s("f1")}, {"pk": _s("f2")}, {"pk": _s("f3")}]},
                    STATE: {"Keys": [_key("job#1", "b"), _key("job#3", "a")], "ConsistentRead": True},
                }
            },
        ),
        (
            "transact write",
            "transact_write_items",
            {
                "TransactItems": [
                    {"Put": {"TableName": FLAT, "Item": {"pk": _s("t1"), "v": _n(1)}}},
                    {
                        "Update": {
                            "TableName": STATE,
                            "Key": _key("job#1", "b"),
                            "UpdateExpression": "ADD #n :one",
                            "ExpressionAttributeNames": {"#n": "n"},
                            "ExpressionAttributeValues": {":one": _n(1)},
                        }
                    },
                    {
                        "ConditionCheck": {
                            "TableName": STATE,
                            "Key": _key("job#1", "c"),
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    },
                    {"Delete": {"TableName": FLAT, "Key": {"pk": _s("f4")}}},
                ]
            },
        ),
        (
            "transact write cancelled",
            "transact_write_items",
            {
                "TransactItems": [
                    {"Put": {"TableName": FLAT, "Item": {"pk": _s("t2")}}},
                    {
                        "ConditionCheck": {
                            "TableName": STATE,
                            "Key": _key("job#1", "a"),
                            "ConditionExpression": "#n > :big",
                            "ExpressionAttributeNames": {"#n": "n"},
                            "ExpressionAttributeValues": {":big": _n(100)},
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                    {
                        "Update": {
                            "TableName": FLAT,
                            "Key": {"pk": _s("f1")},
                            "UpdateExpression": "SET v = :v",
                            "ConditionExpression": "attribute_not_exists(pk)",
                            "ExpressionAttributeValues": {":v": _n(0)},
                        }
                    },
                ]
            },
        ),
        (
            "transact get",
            "transact_get_items",
            {
                "TransactItems": [
                    {"Get": {"TableName": STATE, "Key": _key("job#1", "b")}},
                    {"Get": {"TableName": FLAT, "Key": {"pk": _s("t2")}}},  # never written: a miss
                    {"Get": {"TableName": FLAT, "Key": {"pk": _s("t1")}, "ProjectionExpression": "v"}},
                ]
            },
        ),
        (
            "query",
            "query",
            {
                "TableName": STATE,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": _s("job#1")},
            },
        ),
        (
            "query filtered, backwards",
            "query",
            {
                "TableName": STATE,
                "KeyConditionExpression": "pk = :pk AND sk > :after",
                "FilterExpression": "#n >= :two",
                "ExpressionAttributeNames": {"#n": "n"},
                "ExpressionAttributeValues": {":pk": _s("job#1"), ":after": _s("a"), ":two": _n(2)},
                "ScanIndexForward": False,
            },
        ),
        (
            "query pages",
            "*query",
            {
                "TableName": STATE,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": _s("job#1")},
                "Limit": 1,
                "ReturnConsumedCapacity": "TOTAL",
            },
        ),
        (
            "query index",
            "*query",
            {
                "TableName": STATE,
                "IndexName": INDEX,
                "KeyConditionExpression": "#owner = :o",
                "ExpressionAttributeNames": {"#owner": "owner"},
                "ExpressionAttributeValues": {":o": _s("ana")},
                "Limit": 2,
            },
        ),
        (
            "query count",
            "query",
            {
                "TableName": STATE,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": _s("job#1")},
                "Select": "COUNT",
            },
        ),
        ("scan", "scan", {"TableName": STATE}),
        ("scan pages", "*scan", {"TableName": FLAT, "Limit": 2}),
        (
            "scan filtered",
            "scan",
            {
                "TableName": STATE,
                "FilterExpression": "contains(tags, :b) OR #owner = :o",
                "ExpressionAttributeNames": {"#owner": "owner"},
                "ExpressionAttributeValues": {":b": _s("B"), ":o": _s("bob")},
            },
        ),
        (
            "delete, all old",
            "delete_item",
            {"TableName": STATE, "Key": _key("job#2", "a"), "ReturnValues": "ALL_OLD"},
        ),
        (
            "delete miss",
            "delete_item",
            {"TableName": STATE, "Key": _key("job#2", "a"), "ReturnValues": "ALL_OLD"},
        ),
        (
            "delete fails, all old",
            "delete_item",
            {
                "TableName": STATE,
                "Key": _key("job#1", "c"),
                "ConditionExpression": "#owner = :o",
                "ExpressionAttributeNames": {"#owner": "owner"},
                "ExpressionAttributeValues": {":o": _s("ana")},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        ("describe", "describe_table", {"TableName": STATE}),
        (
            "bad expression",
            "update_item",
            {
                "TableName": STATE,
                "Key": _key("job#1", "a"),
                "UpdateExpression": "SET",
            },
        ),
        (
            "bad filter",
            "scan",
            {"TableName": FLAT, "FilterExpression": "pk = ", "ExpressionAttributeValues": {":v": _s("x")}},
        ),
        (
            "bad key condition",
            "query",
            {
                "TableName": STATE,
                "KeyConditionExpression": "pk < :v",
                "ExpressionAttributeValues": {":v": _s("x")},
            },
        ),
        (
            "moto's own error",  # moto raises a ValueError, not an AWS error
            "put_item",
            {"TableName": FLAT, "Item": {"pk": _s("x")}, "ConditionExpression": "attribute_not_exists("},
        ),
        (
            "unused name",
            "get_item",
            {
                "TableName": STATE,
                "Key": _key("job#1", "a"),
                "ProjectionExpression": "pk",
                "ExpressionAttributeNames": {"#unused": "x"},
            },
        ),
        ("missing table", "get_item", {"TableName": "missing", "Key": {"pk": _s("x")}}),
        (
            "missing table query",
            "query",
            {
                "TableName": "missing",
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": _s("x")},
            },
        ),
        ("wrong key type", "get_item", {"TableName": FLAT, "Key": {"pk": _n(1)}}),
        ("invalid parameters", "put_item", {"TableName": FLAT}),  # botocore refuses it: no Item
        # Binary keys and attributes: bytes in, bytes out, byte order
        ("put blob", "put_item", {"TableName": BLOBS, "Item": BLOB_ITEM, "ReturnValues": "ALL_OLD"}),
        *[
            (
                "put key " + repr(sk),
                "put_item",
                {"TableName": BLOBS, "Item": {**_blob_key(b"\x00\x02", sk), "v": _n(i)}},
            )
            for i, sk in enumerate(reversed(SORTED_KEYS))
        ],
        ("get blob", "get_item", {"TableName": BLOBS, "Key": _blob_key(b"\x00\x01", b"ab")}),
        (
            "put blob if same",
            "put_item",
            {
                "TableName": BLOBS,
                "Item": {**BLOB_ITEM, "label": _s("again")},
                "ConditionExpression": "payload = :p AND contains(parts, :part)",
                "ExpressionAttributeValues": {":p": BLOB_ITEM["payload"], ":part": {"B": b"\xfb\xff"}},
                "ReturnValues": "ALL_OLD",
            },
        ),
        (
            "put blob if other, fails",
            "put_item",
            {
                "TableName": BLOBS,
                "Item": _blob_key(b"\x00\x01", b"ab"),
                "ConditionExpression": "payload = :p",
                "ExpressionAttributeValues": {":p": {"B": b"other"}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        (
            "update blob set",
            "update_item",
            {
                "TableName": BLOBS,
                "Key": _blob_key(b"\x00\x01", b"ab"),
                "UpdateExpression": "ADD parts :more SET extra = :e",
                "ExpressionAttributeValues": {":more": {"BS": [b"\x00", b"\x01"]}, ":e": {"B": b"\x7f"}},
                "ReturnValues": "ALL_NEW",
            },
        ),
        (
            "query blob keys",
            "query",
            {
                "TableName": BLOBS,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": {"B": b"\x00\x02"}},
            },
        ),
        (
            "query blob prefix",
            "query",
            {
                "TableName": BLOBS,
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
                "ExpressionAttributeValues": {":pk": {"B": b"\x00\x02"}, ":prefix": {"B": b"ab"}},
            },
        ),
        (
            "scan blob size",
            "scan",
            {
                "TableName": BLOBS,
                "FilterExpression": "size(sk) = :two",
                "ExpressionAttributeValues": {":two": _n(2)},
            },
        ),
        (
            "blob batch get",
            "batch_get_item",
            {"RequestItems": {BLOBS: {"Keys": [_blob_key(b"\x00\x02", b"a"), _blob_key(b"\x00\x03", b"a")]}}},
        ),
        (
            "big blob",
            "put_item",
            {"TableName": FLAT, "Item": {"pk": _s("big"), "data": {"B": b"\xaa" * BIG}}},
        ),
        (
            "big blob size",
            "get_item",
            {"TableName": FLAT, "Key": {"pk": _s("big")}, "ProjectionExpression": "pk"},
        ),
        ("describe blobs", "describe_table", {"TableName": BLOBS}),
    ]
    return steps


def test_every_answer_of_a_scripted_run_is_the_http_paths_answer() -> None:
    """Puts, updates, gets, deletes (plain, conditional that pass and fail, each ReturnValues),
    batch and transactional reads and writes (a cancelled one with its reasons), Query (filters,
    pages, the GSI), Scan, DescribeTable, service errors and botocore's own refusal, and Binary
    keys and attributes: the direct client's caller and its ``after-call`` handlers see exactly
    what the HTTP client's see, and it sends no request. The answers are the right ones too."""
    steps = _script()
    with _http_and_direct_clients() as (http_client, direct_client):
        http = _run(http_client, steps, TABLES)
        direct = _run(direct_client, steps, TABLES)
    _assert_same(http, direct)

    answers = direct.answers
    ccf = answers["put if new, fails, all old"]
    assert ccf["raised"] == "ConditionalCheckFailedException"
    assert ccf["Error"] == {
        "Code": "ConditionalCheckFailedException",
        "Message": "The conditional request failed",
    }
    assert ccf["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert ccf["ResponseMetadata"]["RetryAttempts"] == 0
    assert ccf["Item"] == RICH  # the modeled field: the item as it was
    assert "Item" not in answers["put if new, fails"]
    assert answers["update fails, all old"]["Item"]["n"] == _n(3)
    assert answers["delete fails, all old"]["Item"]["owner"] == _s("bob")
    assert answers["put over, all old"]["Attributes"] == {
        "pk": _s("f1"),
        "v": _n(2),
        "B": {"SS": ["B", "BS"]},
    }
    assert answers["get"]["Item"]["B"] == _s("B")
    assert answers["get"]["Item"]["n"] == _n(3)
    assert answers["get"]["ResponseMetadata"]["RetryAttempts"] == 0
    assert "Item" not in answers["get miss"]
    projected = answers["get projected"]["Item"]
    assert sorted(projected.pop("tags")["SS"]) == ["B", "x", "y", "z"]
    assert projected == {
        "n": _n(3),
        "map": {"M": {"inner": _s("changed")}},
        "list": RICH["list"],
        "B": _s("B"),
    }
    assert answers["update remove, updated new"]["Attributes"] == {"map": {"M": {"inner": _s("changed")}}}
    cancelled = answers["transact write cancelled"]
    assert cancelled["raised"] == "TransactionCanceledException"
    assert [reason["Code"] for reason in cancelled["CancellationReasons"]] == [
        "None",
        "ConditionalCheckFailed",
        "ConditionalCheckFailed",
    ]
    assert cancelled["CancellationReasons"][1]["Item"]["n"] == _n(3)
    assert answers["transact get"]["Responses"][1] == {}
    assert answers["batch get"]["UnprocessedKeys"] == {}
    assert sum(len(items) for items in answers["batch get"]["Responses"].values()) == 4
    assert [page["Count"] for page in answers["query pages"]] == [1, 1, 1]
    assert [item["sk"] for page in answers["query index"] for item in page.get("Items", [])] == [
        _s("a"),
        _s("a"),
        _s("b"),
    ]
    assert answers["bad expression"]["Error"]["Code"] == "ValidationException"
    assert answers["bad filter"]["Error"]["Code"] == "ValidationException"
    assert answers["bad key condition"]["Error"]["Code"] == "ValidationException"
    assert answers["moto's own error"]["raised"] == "ValueError"
    assert answers["missing table"]["Error"]["Code"] == "ResourceNotFoundException"
    assert answers["missing table"]["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert answers["invalid parameters"]["raised"] == "ParamValidationError"
    assert answers["get blob"]["Item"] == BLOB_ITEM
    assert answers["put blob if same"]["Attributes"] == BLOB_ITEM
    assert answers["put blob if other, fails"]["Item"]["payload"] == BLOB_ITEM["payload"]
    assert {b"\x00", b"\x01", b"abc"} <= set(answers["update blob set"]["Attributes"]["parts"]["BS"])
    assert [item["sk"]["B"] for item in answers["query blob keys"]["Items"]] == SORTED_KEYS
    assert [item["sk"]["B"] for item in answers["query blob prefix"]["Items"]] == [b"ab", b"abc"]
    assert [item["sk"]["B"] for item in answers["scan blob size"]["Items"]] == [b"ab", b"ab", b"\xfb\xff"]
    assert answers["big blob"]["raised"] is None
    assert answers["big blob size"]["Item"] == {"pk": _s("big")}


# ------------------------------------------------------------------------------ the property test
NAMES = ("a", "b", "B", "BS", "S", "N", "L", "M", "x y")  # attribute and map-key names, blob-like too
SIZED = frozenset({"S", "B", "SS", "NS", "BS", "L", "M"})  # types size() accepts


def _attribute_values() -> tuple[Any, Any]:
    """Random AttributeValues: scalars and sets, and every type nested in lists and maps;
    strings such as "B" among them."""
    from hypothesis import strategies as st

    text = st.one_of(st.text(max_size=6), st.sampled_from(["B", "BS", '"B"', "S"]))
    number = st.one_of(st.integers(-(10**6), 10**6).map(str), st.sampled_from(["0.5", "-2.25"]))
    blob = st.binary(max_size=8)
    scalars = st.one_of(
        text.map(lambda v: {"S": v}),
        number.map(lambda v: {"N": v}),
        blob.map(lambda v: {"B": v}),
        st.booleans().map(lambda v: {"BOOL": v}),
        st.just({"NULL": True}),
        st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=4, unique=True).map(
            lambda v: {"SS": v}
        ),
        st.lists(st.integers(-99, 99), min_size=1, max_size=4, unique=True).map(
            lambda v: {"NS": [str(n) for n in v]}
        ),
        st.lists(st.binary(min_size=1, max_size=6), min_size=1, max_size=4, unique=True).map(
            lambda v: {"BS": v}
        ),
    )
    return scalars, st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=3).map(lambda v: {"L": v}),
            st.dictionaries(st.sampled_from(NAMES), children, max_size=3).map(lambda v: {"M": v}),
        ),
        max_leaves=8,
    )


def _cases() -> Any:
    """(first item's attributes, second item's, a condition on the first, a value to SET)."""
    from hypothesis import strategies as st

    scalars, values = _attribute_values()
    attributes = st.dictionaries(st.sampled_from(NAMES), st.one_of(scalars, values), max_size=5)

    @st.composite
    def condition(draw: Any, item: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
        """An attribute name, a condition on it and the condition's values: true or false of
        ``item``, about one of its attributes or one it lacks."""
        candidates = []  # the functions first: hypothesis draws early choices more often
        for name, value in item.items():
            (kind, inner) = next(iter(value.items()))
            if kind in SIZED:
                candidates.append((name, "size"))
            if kind in ("S", "B") and inner:
                candidates.append((name, "begins_with"))
            if kind in ("SS", "NS", "BS"):
                candidates.append((name, "contains"))
        for name in [*item, "absent"]:
            candidates += [(name, "equals"), (name, "exists"), (name, "not_exists")]
        name, test = draw(st.sampled_from(candidates))
        if test == "exists":
            return name, "attribute_exists(#a)", {}
        if test == "not_exists":
            return name, "attribute_not_exists(#a)", {}
        if test == "equals":
            same = name in item and draw(st.booleans())
            return name, "#a = :v", {":v": item[name] if same else draw(values)}
        if test == "size":
            return name, "size(#a) > :n", {":n": {"N": str(draw(st.integers(0, 12)))}}
        (kind, inner) = next(iter(item[name].items()))
        if test == "begins_with":
            prefix = inner[: draw(st.integers(1, len(inner)))] if draw(st.booleans()) else inner[::-1]
            return name, "begins_with(#a, :p)", {":p": {kind: prefix}}
        other = str(int(inner[0]) + 1000) if kind == "NS" else inner[0] + inner[0]  # mostly not in the set
        member = draw(st.sampled_from(inner)) if draw(st.booleans()) else other
        return name, "contains(#a, :m)", {":m": {kind[0]: member}}

    @st.composite
    def case(draw: Any) -> tuple[Any, ...]:
        first, second = draw(attributes), draw(attributes)
        name, text, condition_values = draw(condition(first))
        return first, second, name, text, condition_values, draw(values)

    return case()


def _property_steps(
    first: dict[str, Any],
    second: dict[str, Any],
    name: str,
    text: str,
    condition_values: dict[str, Any],
    update_value: dict[str, Any],
) -> list[tuple[str, str, dict[str, Any]]]:
    """Put ``first``, put ``second`` if the condition holds (both ALL_OLD), read it, SET an
    attribute if the condition holds, a transaction whose ConditionCheck asks it too, a Scan."""
    key = {"pk": _s("item")}
    condition = {
        "ConditionExpression": text,
        "ExpressionAttributeNames": {"#a": name},
        **({"ExpressionAttributeValues": condition_values} if condition_values else {}),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    return [
        ("put", "put_item", {"TableName": FLAT, "Item": {**key, **first}, "ReturnValues": "ALL_OLD"}),
        (
            "put if",
            "put_item",
            {"TableName": FLAT, "Item": {**key, **second}, "ReturnValues": "ALL_OLD", **condition},
        ),
        ("get", "get_item", {"TableName": FLAT, "Key": key, "ConsistentRead": True}),
        (
            "update if",
            "update_item",
            {
                "TableName": FLAT,
                "Key": key,
                "UpdateExpression": "SET #u = :u",
                **condition,
                "ExpressionAttributeNames": {"#a": name, "#u": "updated"},
                "ExpressionAttributeValues": {**condition_values, ":u": update_value},
                "ReturnValues": "ALL_NEW",
            },
        ),
        (
            "transact if",
            "transact_write_items",
            {
                "TransactItems": [
                    {"Put": {"TableName": FLAT, "Item": {"pk": _s("other"), **second}}},
                    {"ConditionCheck": {"TableName": FLAT, "Key": key, **condition}},
                ]
            },
        ),
        ("scan", "scan", {"TableName": FLAT}),
    ]


def _canonical(value: Any) -> Any:
    """An AttributeValue tree with its sets' members sorted (sets have no order)."""
    if isinstance(value, dict):
        return {
            k: sorted(v) if k in ("SS", "NS", "BS") and isinstance(v, list) else _canonical(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def test_random_items_and_conditions_get_the_http_paths_answers() -> None:
    """Random items (every AttributeValue type, Binary ones and strings that look like them,
    nested) put, conditionally put, read, updated, checked in a transaction and scanned: the
    direct client gets exactly the HTTP client's answers, conditions pass and fail, and what is
    read back is what was written, bytes as bytes."""
    from hypothesis import given, settings

    outcomes: list[str | None] = []
    with _http_and_direct_clients() as (http_client, direct_client):

        @settings(max_examples=60, deadline=None)
        @given(case=_cases())
        def check(case: tuple[Any, ...]) -> None:
            steps = _property_steps(*case)
            http = _run(http_client, steps, {FLAT: TABLES[FLAT]})
            direct = _run(direct_client, steps, {FLAT: TABLES[FLAT]})
            _assert_same(http, direct)
            first, second = case[0], case[1]
            answers = direct.answers
            assert answers["put"]["raised"] is None
            passed = answers["put if"]["raised"] is None
            outcomes.append(answers["put if"]["raised"])
            expected = {"pk": _s("item"), **(second if passed else first)}
            assert _canonical(answers["get"]["Item"]) == _canonical(expected)
            if passed:
                assert _canonical(answers["put if"]["Attributes"]) == _canonical({"pk": _s("item"), **first})
            elif answers["put if"]["raised"] == "ConditionalCheckFailedException":
                assert _canonical(answers["put if"]["Item"]) == _canonical(expected)

        check()
    assert None in outcomes
    assert "ConditionalCheckFailedException" in outcomes


# --------------------------------------------------------------------- EmbeddedAws and the handler
def _sends(client: Any) -> list[str]:
    """The operations ``client`` sends from now on (its ``before-send`` events)."""
    sent: list[str] = []

    def record(event_name: str, **_: Any) -> None:
        sent.append(event_name.rsplit(".", 1)[-1])

    client.meta.events.register("before-send.dynamodb", record)
    return sent


def _journalled_calls(direct: bool) -> tuple[dict[str, list[str]], list[Any], dict[str, Any]]:
    """In an ``EmbeddedAws(direct_calls=direct)``: the requests sent by its own client, the
    functions' client (``batchpilot.io.clients``) and a default-session one; the journal of a put,
    a get and a conditional put that fails; the failure's ``Item``."""
    from batchpilot.io import clients

    with EmbeddedAws(direct_calls=direct) as aws:
        own, adapters, default = aws.client("dynamodb"), clients.client("dynamodb"), boto3.client("dynamodb")
        sent = {"own": _sends(own), "adapters": _sends(adapters), "default": _sends(default)}
        create_tables(own, {FLAT: TABLES[FLAT]})
        default.put_item(TableName=FLAT, Item={"pk": _s("a"), "blob": {"B": b"\x00\xff"}, "B": _s("B")})
        adapters.get_item(TableName=FLAT, Key={"pk": _s("a")})
        with pytest.raises(ClientError) as failed:
            adapters.put_item(
                TableName=FLAT,
                Item={"pk": _s("a")},
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        return sent, aws.drain_journal(), cast(Any, failed.value.response)["Item"]


def test_embedded_aws_with_direct_dynamodb_sends_no_request_and_journals_every_call() -> None:
    """``EmbeddedAws(direct_calls=True)`` answers its own, the functions' and default-session
    clients' DynamoDB calls without sending a request (no ``before-send``), and its API journal
    records them exactly as with the HTTP path: the failing conditional put with its status 400
    and error code, and its modeled ``Item``."""
    http_sent, http_journal, http_item = _journalled_calls(direct=False)
    direct_sent, direct_journal, direct_item = _journalled_calls(direct=True)
    assert http_sent == {
        "own": ["ListTables", "CreateTable"],
        "adapters": ["GetItem", "PutItem"],
        "default": ["PutItem"],
    }
    assert direct_sent == {"own": [], "adapters": [], "default": []}
    assert direct_journal == http_journal
    assert [
        (e.action, e.sent, e.succeeded, e.http_status, e.error_code, e.retries) for e in direct_journal
    ] == [
        ("dynamodb:PutItem", True, True, 200, None, 0),
        ("dynamodb:GetItem", True, True, 200, None, 0),
        ("dynamodb:PutItem", True, False, 400, "ConditionalCheckFailedException", 0),
    ]
    assert direct_item == http_item == {"pk": _s("a"), "blob": {"B": b"\x00\xff"}, "B": _s("B")}


def test_a_call_moto_fails_with_its_own_exception_is_journalled_alike_on_both_paths() -> None:
    """An operation moto lacks (NotImplementedError) and a condition moto's parser rejects with a
    ValueError raise the same exception on both paths, and should be journalled alike."""
    journals = []
    for direct in (False, True):
        with EmbeddedAws(direct_calls=direct) as aws:
            create_tables(aws.client("dynamodb"), {FLAT: TABLES[FLAT]})
            client = boto3.client("dynamodb")
            with pytest.raises(NotImplementedError):
                client.list_global_tables()
            with pytest.raises(ValueError, match="Bad function expression"):
                client.put_item(
                    TableName=FLAT, Item={"pk": _s("a")}, ConditionExpression="attribute_not_exists("
                )
            journals.append(aws.drain_journal())
    http, direct_ = journals
    assert [(e.sent, e.error_code) for e in http] == [(True, "NotImplementedError"), (True, "ValueError")]
    assert direct_ == http


def test_the_direct_path_steps_aside_while_motos_stubber_is_off() -> None:
    """With moto's stubber off (as the HTTP fault hooks turn it off for a faulted request) the
    handler answers nothing and the call takes botocore's HTTP path, where a ``before-send``
    hook answers it; with the stubber on, the same hook is never reached."""
    from botocore.awsrequest import AWSResponse, HTTPHeaders
    from moto.core.botocore_stubber import MockRawResponse
    from moto.core.models import botocore_stubber

    def canned(request: Any, **_: Any) -> AWSResponse:
        headers = HTTPHeaders()
        headers["Content-Type"] = "application/x-amz-json-1.0"
        body = MockRawResponse(b'{"TableNames": ["from-before-send"]}')
        return AWSResponse(request.url, 200, headers, body)

    with _http_and_direct_clients() as (_, direct):
        create_tables(direct, {FLAT: TABLES[FLAT]})
        sent = _sends(direct)
        direct.meta.events.register("before-send.dynamodb", canned)
        assert direct.list_tables()["TableNames"] == [FLAT]
        was = botocore_stubber.enabled
        botocore_stubber.enabled = False
        try:
            assert direct.list_tables()["TableNames"] == ["from-before-send"]
        finally:
            botocore_stubber.enabled = was
        assert direct.list_tables()["TableNames"] == [FLAT]
    assert sent == ["ListTables"]


def test_the_undo_puts_a_client_back_on_the_http_path() -> None:
    """``direct_calls`` answers a client's calls directly until its undo; after it the
    client sends its requests again, and gets the same answers."""
    with EmbeddedAws() as aws:
        client = boto3.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name=aws.region,
        ).client("dynamodb")
        sent = _sends(client)
        undo = direct_calls([client.meta.events], aws.overlay)
        create_tables(client, {FLAT: TABLES[FLAT]})
        client.put_item(TableName=FLAT, Item={"pk": _s("a"), "v": {"B": b"\x01"}})
        before = client.get_item(TableName=FLAT, Key={"pk": _s("a")})["Item"]
        assert sent == []
        undo()
        after = client.get_item(TableName=FLAT, Key={"pk": _s("a")})["Item"]
        assert sent == ["GetItem"]
    assert before == after == {"pk": _s("a"), "v": {"B": b"\x01"}}
