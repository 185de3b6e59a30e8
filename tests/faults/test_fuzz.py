"""Fuzz: 10,000 generated events per function through the record handlers (metrics, alerts,
recovery, capacity; the ledger with :data:`LEDGER_EVENTS`) with their real adapters on the embedded
AWS: 0 crashes, 0 good events lost, no record reported failed (so none would reach a dead-letter
queue; a request AWS refuses for good is a result, :mod:`batchpilot.shared.errors`), EMF dimension
values printable ASCII within CloudWatch's limits.

A seeded generator (no timing assertions; the seed makes a failure reproducible) takes every sample
event under ``events/`` and either keeps it (a good event, with fresh ids) or breaks it: strings
replaced by lone surrogates, 100 KB text, chat mentions, control characters, other scripts; values
of the wrong type; keys removed; the body cut, or not JSON at all. Some good events are
oversized but valid: a 3,000-character job ARN (over DynamoDB's 1,024-byte sort key) or a
240,000-character reason (near SNS's 256 KB message limit).
"""

from __future__ import annotations

import copy
import json
import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from batchpilot.alerts.handler import AlertsProcessor
from batchpilot.capacity.handler import CapacityProcessor
from batchpilot.capacity.service import CapacityService
from batchpilot.capacity.settings import CapacitySettings
from batchpilot.io.batch import BatchCapacityClient, BatchLedgerClient
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.capacity import CapacityStateStore
from batchpilot.io.dynamodb.ledger import LedgerStateStore
from batchpilot.io.emf import EmfPublisher
from batchpilot.io.eventbridge import EventBridgePublisher
from batchpilot.io.s3 import S3Checkpoints
from batchpilot.ledger.handler import LedgerProcessor
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.metrics.handler import MetricsProcessor
from batchpilot.recovery.handler import RecoveryProcessor
from batchpilot.recovery.service import RetryLater
from batchpilot.shared.observability import metrics
from batchpilot.shared.records import Rejected, decode_any
from batchpilot_local.testing.alerts import Rig, open_rig
from batchpilot_local.testing.recovery import TABLE, harness
from batchpilot_local.testing.samples import sample_event_paths

EVENTS = 10_000
LEDGER_EVENTS = 2_000
"""The ledger's run (one BatchGetItem and a transaction per job of each batch: the slowest path)."""
OVERSIZED = 0.01
"""Share of events kept good but oversized (:func:`_oversized`)."""
BATCH = 10
SAMPLES = [json.loads(path.read_text()) for path in sample_event_paths()]
WEIRD = [
    "\ud800",
    "<!channel> <http://evil.example|x>",
    "\x00\x1f\x7f",
    "é漢字🙂\u200b",
    "",
    " " * 3,
    "{{DATE()}}",
]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*path, index)
            yield from _leaves(item, (*path, index))


def _set(event: Any, path: tuple[Any, ...], value: Any, delete: bool = False) -> None:
    target = event
    for step in path[:-1]:
        target = target[step]
    if delete and isinstance(target, dict):
        target.pop(path[-1], None)
    else:
        target[path[-1]] = value


def _fresh(event: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A copy with a new event id and, one time in five, a new job (a distinct fact; otherwise a
    copy of a fact, as EventBridge and SageMaker send them), still a good event."""
    out = copy.deepcopy(event)
    out["id"] = str(uuid.UUID(int=rng.getrandbits(128)))
    detail = out.get("detail")
    if isinstance(detail, dict) and isinstance(detail.get("jobId"), str) and rng.random() < 0.2:
        job_id = str(uuid.UUID(int=rng.getrandbits(128)))
        if isinstance(detail.get("jobArn"), str):
            detail["jobArn"] = detail["jobArn"].rsplit("/", 1)[0] + "/" + job_id
        detail["jobId"] = job_id
    return out


def _oversized(event: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A good event with its job ARN 3,000 characters long, or its reason 240,000 characters."""
    detail = event.get("detail")
    if not isinstance(detail, dict):
        return event
    if isinstance(detail.get("jobArn"), str) and rng.random() < 0.5:
        prefix = detail["jobArn"].rsplit("/", 1)[0] + "/"
        detail["jobArn"] = prefix + "j" * (3000 - len(prefix))
    elif isinstance(detail.get("statusReason"), str):
        detail["statusReason"] = "Validation failed: " + "r" * 239_981
    elif isinstance(detail.get("FailureReason"), str):
        detail["FailureReason"] = "AlgorithmError: " + "r" * 239_984
    return event


def generate(seed: int, count: int = EVENTS) -> list[tuple[str, bool]]:
    """``count`` SQS bodies and whether each is a good (unbroken) event."""
    rng = random.Random(seed)
    out: list[tuple[str, bool]] = []
    for _ in range(count):
        event = _fresh(rng.choice(SAMPLES), rng)
        roll = rng.random()
        if roll < OVERSIZED:
            out.append((json.dumps(_oversized(event, rng)), True))
            continue
        if roll < 0.2:
            out.append((json.dumps(event), True))
            continue
        if roll < 0.25:
            text = json.dumps(event)
            out.append((rng.choice([text[: rng.randrange(len(text))], "null", "[]", "not json", ""]), False))
            continue
        paths = list(_leaves(event))
        for _ in range(rng.randint(1, 3)):
            path = rng.choice(paths)
            kind = rng.random()
            try:
                if kind < 0.5:
                    huge = rng.random() < 0.02
                    _set(event, path, "n" * 100_000 if huge else rng.choice(WEIRD))
                elif kind < 0.8:
                    _set(event, path, rng.choice([None, 12345, -1, 1e308, True, [], {}, ["x"]]))
                else:
                    _set(event, path, None, delete=True)
            except (KeyError, IndexError, TypeError):
                continue
        out.append((json.dumps(event), False))
    return out


def sqs_batches(bodies: list[tuple[str, bool]]) -> Iterator[tuple[dict[str, Any], dict[str, bool]]]:
    """Lambda SQS events of :data:`BATCH` records, and message id → good."""
    for start in range(0, len(bodies), BATCH):
        records, good = [], {}
        for n, (body, is_good) in enumerate(bodies[start : start + BATCH], start):
            message_id = f"m-{n}"
            good[message_id] = is_good
            records.append(
                {
                    "messageId": message_id,
                    "receiptHandle": f"rh-{n}",
                    "body": body,
                    "attributes": {"ApproximateReceiveCount": "1"},
                    "messageAttributes": {},
                    "eventSource": "aws:sqs",
                }
            )
        yield {"Records": records}, good


@pytest.fixture(autouse=True)
def powertools_metrics() -> Iterator[None]:
    """The namespace configure() sets at a cold start (Powertools flushes every 100 counts), then
    the global metrics as they were."""
    namespace = metrics.namespace
    metrics.namespace = "batchpilot/fuzz"
    yield
    metrics.clear_metrics()
    metrics.namespace = namespace


def check_emf(out: str) -> int:
    """Every EMF blob on stdout: dimension values printable ASCII of 1 to 1,024 characters."""
    blobs = 0
    for line in out.splitlines():
        if not line.startswith("{") or '"_aws"' not in line:
            continue
        blob = json.loads(line)
        blobs += 1
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            for group in directive["Dimensions"]:
                for name in group:
                    value = blob[name]
                    assert isinstance(value, str) and value.isascii() and value.isprintable(), value
                    assert 0 < len(value) <= 1024
    return blobs


def test_metrics_handler(capsys: pytest.CaptureFixture[str]) -> None:
    processor = MetricsProcessor(
        EmfPublisher("batchpilot/fuzz", "batchpilot"), clock=lambda: datetime.now(UTC)
    )
    lost = 0
    for event, good in sqs_batches(generate(1)):
        failures = process_partial_response(event, processor.record_handler, processor)["batchItemFailures"]
        lost += sum(good[f["itemIdentifier"]] for f in failures)
        assert not failures  # nothing a metric is made of can make a record fail
    assert lost == 0
    assert check_emf(capsys.readouterr().out) > 0


@pytest.fixture
def rig() -> Iterator[Rig]:
    yield from open_rig()


def test_alerts_handler(rig: Rig) -> None:
    from batchpilot.alerts.service import AlertService
    from batchpilot.alerts.settings import AlertsSettings
    from batchpilot.io.dynamodb.alerts import DynamoAlertStore
    from batchpilot.io.sns import SnsPublisher

    env = rig.local.environment
    service = AlertService(
        AlertsSettings.from_environ(env, function="alerts").policy,
        DynamoAlertStore(client("dynamodb"), env["BATCHPILOT_STATE_TABLE"]),
        SnsPublisher(client("sns"), env["BATCHPILOT_ONCALL_TOPIC_ARN"]),
        rig.channels(),
        clock=rig.clock,
    )
    processor = AlertsProcessor(service)
    lost = []
    for event, good in sqs_batches(generate(2)):
        failures = process_partial_response(event, processor.record_handler, processor)["batchItemFailures"]
        lost += [f["itemIdentifier"] for f in failures if good[f["itemIdentifier"]]]
        # A broken event is a result (invalid or ignored), never a retried record.
        assert not failures, failures
    assert lost == []


def test_recovery_handler() -> None:
    bodies = generate(3)
    with harness() as h:
        processor = RecoveryProcessor(h.recoverer())
        crashes, handed_back = 0, 0
        for event, good in sqs_batches(bodies):
            for raw in event["Records"]:
                try:
                    processor.record_handler(SQSRecord(raw))
                except RetryLater:
                    handed_back += 1  # comes back later (backoff, pacing): not lost
                except Exception:
                    crashes += 1
                    assert not good[raw["messageId"]], raw["body"][:500]
        assert crashes == 0
        assert handed_back < EVENTS // 2  # handed back (backoff, pacing) comes back later: not lost


def test_ledger_handler() -> None:
    bodies = generate(5, LEDGER_EVENTS)
    assert sum(1 for body, good in bodies if good and len(body) > 3000) > 0  # oversized ones among them
    with harness():
        settings = LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": TABLE}, function="ledger")
        service = LedgerService(  # wired as functions/ledger/app.py wires it
            settings,
            LedgerStateStore(client("dynamodb"), TABLE),
            BatchLedgerClient(client("batch")),
            EmfPublisher("batchpilot/fuzz", "batchpilot"),
            lambda: datetime.now(UTC),
            publisher=EventBridgePublisher(client("events"), "default"),
            checkpoints=S3Checkpoints(client("s3")),
        )
        processor = LedgerProcessor(service)
        for event, _good in sqs_batches(bodies):
            failures = process_partial_response(event, processor.record_handler, processor)[
                "batchItemFailures"
            ]
            assert not failures, failures  # a refusal AWS would repeat is not retried


def test_capacity_handler() -> None:
    bodies = generate(4)
    good_blocked = sum(
        1
        for body, good in bodies
        if good and not isinstance(decode_any(body), Rejected) and "Blocked" in body
    )
    with harness():
        settings = CapacitySettings.from_environ(
            {
                "BATCHPILOT_STATE_TABLE": TABLE,
                "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS": "sm-training",
                "BATCHPILOT_CAPACITY_JOB_QUEUES": "sm-training-highpri",
                "BATCHPILOT_CAPACITY_POLICY": json.dumps(
                    {
                        "service_environments": {
                            "sm-training": {"job_queues": ["sm-training-highpri"], "max": 64}
                        }
                    }
                ),
            }
        )
        service = CapacityService(
            settings,
            BatchCapacityClient(client("batch")),
            CapacityStateStore(client("dynamodb"), TABLE),
            EventBridgePublisher(client("events"), "default"),
            EmfPublisher("batchpilot/fuzz", "batchpilot"),
        )
        processor = CapacityProcessor(service)
        for event, _good in sqs_batches(bodies):
            failures = process_partial_response(event, processor.record_handler, processor)[
                "batchItemFailures"
            ]
            assert not failures, failures
    assert good_blocked > 0
