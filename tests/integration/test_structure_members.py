"""moto's response serialiser answers exactly as before with
:func:`batchpilot_local.emulator.patch.cheap_structure_members` (each member of a ``dict`` value
looked up by possible keys worked out once per structure and member).

The same calls run on botocore's HTTP path twice, once with moto's own ``_serialize_type_structure``
(the patch's ``__wrapped__``) and once with the patch, on tables created afresh at one frozen time;
the callers' answers and the HTTP answers' bytes must be equal: the scripted DynamoDB run of
``test_direct_dynamodb.py`` (every AttributeValue type, Binary keys, errors, modeled error
fields, pages), random nested items, a few answers of other services whose structures hold dicts
(SQS, SNS, EventBridge, Secrets Manager) and one whose serialiser overrides member serialisation
(Lambda's REST-JSON), where the patch steps aside. ``tests/integration/test_replay.py`` replays
``events/`` both ways.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.testing.twin import answer_of

from tests.integration.test_direct_dynamodb import (
    CREATED,
    FLAT,
    TABLES,
    Run,
    _cases,
    _property_steps,
    _run,
    _script,
)


def _moto_own(patch: pytest.MonkeyPatch) -> None:
    """Put moto's own structure serialiser back for the rest of ``patch``'s context."""
    from moto.core.serialize import ResponseSerializer

    patched = ResponseSerializer._serialize_type_structure
    assert patched.__wrapped__ is not patched  # the patch is installed (EmbeddedAws did it)
    patch.setattr(ResponseSerializer, "_serialize_type_structure", patched.__wrapped__)


@contextmanager
def _client(own: bool) -> Iterator[tuple[EmbeddedAws, Callable[[str], Any]]]:
    """An open embedded AWS (tables created at ``CREATED``) and a maker of HTTP-path clients of
    one session; ``own``: moto's own serialiser answers, not the patched one."""
    from moto.dynamodb.models import table

    with EmbeddedAws() as aws, pytest.MonkeyPatch.context() as patch:
        patch.setattr(table, "utcnow", lambda: CREATED)
        if own:
            _moto_own(patch)
        session = boto3.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=aws.region
        )
        yield aws, session.client


def _both(run: Callable[[Callable[[str], Any]], Run]) -> tuple[Run, Run, list[int]]:
    """``run`` with moto's own serialiser, then with the patched one; and how many times each run
    asked moto's attribute picker for a member's value (the patch asks it for none of a dict's)."""
    from moto.core.serialize import AttributePicker, XFormedAttributePicker

    runs, asked = [], []
    for own in (True, False):
        calls = [0]

        def counted(picker: Any, context: Any, calls: list[int] = calls) -> Any:
            calls[0] += 1
            return AttributePicker.__call__(picker, context)

        with _client(own) as (_, client), pytest.MonkeyPatch.context() as patch:
            patch.setattr(XFormedAttributePicker, "__call__", counted)
            runs.append(run(client))
        asked.append(calls[0])
    return runs[0], runs[1], asked


def test_a_scripted_dynamodb_run_gets_motos_own_answers_byte_for_byte() -> None:
    steps = _script()

    own, patched, asked = _both(lambda client: _run(client("dynamodb"), steps, TABLES))

    assert asked[0] > 10 * asked[1]  # the patch did the work
    assert len(own.wire) > 50
    assert patched.answers == own.answers
    assert patched.wire == own.wire
    assert any(b'"Item": {' in answer["body"] for answer in own.wire)  # items were serialised


def test_random_nested_items_get_motos_own_answers_byte_for_byte() -> None:
    from hypothesis import HealthCheck, given, settings

    with _client(own=False) as (_, make):
        client = make("dynamodb")

        @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(case=_cases())
        def check(case: tuple[Any, ...]) -> None:
            steps = _property_steps(*case)
            patched = _run(client, steps, {FLAT: TABLES[FLAT]})
            with pytest.MonkeyPatch.context() as patch:
                _moto_own(patch)
                own = _run(client, steps, {FLAT: TABLES[FLAT]})
            assert patched.answers == own.answers
            assert patched.wire == own.wire

        check()


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SECRET_SUFFIX = re.compile(r"(:secret:[^-\"]+)-[A-Za-z0-9]{6}")
_CLOCK_KEYS = (
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "CreatedDate",
    "LastChangedDate",
    "LastAccessedDate",
)


def _without_draws(answer: dict[str, Any]) -> Any:
    """``answer`` as JSON with what moto draws at random (uuids) or reads off the wall clock
    masked: not the serialiser's doing."""
    for holder in (answer, answer.get("Attributes") or {}):
        for key in _CLOCK_KEYS:
            if key in holder:
                holder[key] = "<clock>"
    text = _UUID.sub("<uuid>", json.dumps(answer, default=str, sort_keys=True))
    return json.loads(_SECRET_SUFFIX.sub(r"\1-<random>", text))


def _other_services(client: Callable[[str], Any]) -> Run:
    """Answers of SQS (JSON), SNS (query XML), EventBridge and Secrets Manager (JSON) whose
    structures are serialised from dicts and objects alike, and of Lambda (REST-JSON)."""
    run = Run()
    sqs, sns, events = client("sqs"), client("sns"), client("events")
    secrets, lambda_ = client("secretsmanager"), client("lambda")
    url = sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    topic = sns.create_topic(Name="t", Attributes={"DisplayName": "d"})["TopicArn"]
    calls: list[tuple[str, Any, str, dict[str, Any]]] = [
        ("queue attributes", sqs, "get_queue_attributes", {"QueueUrl": url, "AttributeNames": ["All"]}),
        (
            "send",
            sqs,
            "send_message",
            {
                "QueueUrl": url,
                "MessageBody": "b",
                "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}},
            },
        ),
        ("topic attributes", sns, "get_topic_attributes", {"TopicArn": topic}),
        (
            "publish batch",
            sns,
            "publish_batch",
            {
                "TopicArn": topic,
                "PublishBatchRequestEntries": [
                    {"Id": "1", "Message": "m"},
                    {"Id": "1", "Message": "duplicate id"},
                ],
            },
        ),
        (
            "put events",
            events,
            "put_events",
            {
                "Entries": [
                    {"Source": "s", "DetailType": "d", "Detail": json.dumps({"a": 1})},
                    {"Source": "s"},
                ]
            },
        ),
        ("rule", events, "put_rule", {"Name": "r", "EventPattern": json.dumps({"source": ["s"]})}),
        ("describe rule", events, "describe_rule", {"Name": "r"}),
        ("secret", secrets, "create_secret", {"Name": "s", "SecretString": "x"}),
        ("describe secret", secrets, "describe_secret", {"SecretId": "s"}),
        ("lambda missing", lambda_, "get_function", {"FunctionName": "nope"}),
        ("lambda list", lambda_, "list_functions", {}),
    ]
    for label, service, operation, kwargs in calls:
        run.answers[label] = _without_draws(answer_of(service, operation, kwargs))
    return run


def test_other_services_answers_are_motos_own() -> None:
    own, patched, asked = _both(_other_services)

    assert asked[0] > asked[1]
    assert patched.answers == own.answers
    assert own.answers["queue attributes"]["Attributes"]["VisibilityTimeout"] == "30"
    assert own.answers["publish batch"]["raised"] == "BatchEntryIdsNotDistinctException"
    assert own.answers["lambda missing"]["Error"]["Code"] == "ResourceNotFoundException"
