"""Shared test helpers: the repo's sample events and builders of minimal real-shaped events; the
functions' handlers loaded as Lambda does, the SQS events they receive and what they print; the
template's tables."""

from __future__ import annotations

import functools
import importlib.util
import json
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from batchpilot_local.embedded_aws import create_tables
from batchpilot_local.template import STATE_TABLE, AppTemplate, load_template

ROOT = Path(__file__).resolve().parent.parent
EVENTS_DIR = ROOT / "events"
QUEUE_ARN = "arn:aws:batch:us-east-1:111122223333:job-queue/ml-training-highpri"


def sample(name: str) -> dict[str, Any]:
    """One sample event from events/, e.g. ``sample("batch-job/failed-spot-reclaim")``."""
    return json.loads((EVENTS_DIR / f"{name}.json").read_text())


def sample_event_paths() -> list[Path]:
    """Every single-event JSON file under events/ (scenario files excluded)."""
    paths = []
    for path in sorted(EVENTS_DIR.rglob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "detail-type" in data:
            paths.append(path)
    return paths


def envelope(
    detail_type: str, detail: dict[str, Any], source: str = "aws.batch", **extra: Any
) -> dict[str, Any]:
    """A real-shaped EventBridge envelope around ``detail``."""
    return {
        "version": "0",
        "id": extra.pop("id", "0b1c2d3e-0000-4000-8000-000000000001"),
        "detail-type": detail_type,
        "source": source,
        "account": "111122223333",
        "time": extra.pop("time", "2026-11-20T10:15:30Z"),
        "region": "us-east-1",
        "resources": [],
        "detail": detail,
        **extra,
    }


def batch_job(status: str, **detail: Any) -> dict[str, Any]:
    """A ``Batch Job State Change`` event for a container job."""
    base = {
        "jobArn": "arn:aws:batch:us-east-1:111122223333:job/6d1c0c4e-6b7f-4b8a-9f0e-1f2a3b4c5d6e",
        "jobName": "llama-ft-run-42",
        "jobId": "6d1c0c4e-6b7f-4b8a-9f0e-1f2a3b4c5d6e",
        "jobQueue": QUEUE_ARN,
        "status": status,
        "attempts": [],
        "createdAt": 1763633000000,
    }
    base.update(detail)
    return envelope("Batch Job State Change", base)


def service_job(
    status: str, detail_type: str = "Batch Service Job State Change", **detail: Any
) -> dict[str, Any]:
    """A ``Batch Service Job State Change`` (or ``... Queue Blocked``) event."""
    base = {
        "jobArn": "arn:aws:batch:us-east-1:111122223333:service-job/4c7599ae-0a82-49aa-ba5a-4727fcce14a8",
        "jobName": "llama-pretrain",
        "jobId": "4c7599ae-0a82-49aa-ba5a-4727fcce14a8",
        "jobQueue": QUEUE_ARN,
        "status": status,
        "serviceJobType": "SAGEMAKER_TRAINING",
        "createdAt": 1763633000000,
    }
    base.update(detail)
    return envelope(detail_type, base)


def training_job(status: str, **detail: Any) -> dict[str, Any]:
    """A ``SageMaker Training Job State Change`` event."""
    base = {
        "TrainingJobName": "bert-large-ft-2026-11-20",
        "TrainingJobArn": "arn:aws:sagemaker:us-east-1:111122223333:training-job/bert-large-ft-2026-11-20",
        "TrainingJobStatus": status,
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 500},
        "CreationTime": "1763633000000",
    }
    base.update(detail)
    return envelope("SageMaker Training Job State Change", base, source="aws.sagemaker")


@pytest.fixture
def lambda_context() -> Any:
    """A fake Lambda context, as Powertools' testing recipes use."""

    class Context:
        function_name = "batchpilot-metrics"
        memory_limit_in_mb = 256
        invoked_function_arn = "arn:aws:lambda:us-east-1:111122223333:function:batchpilot-metrics"
        aws_request_id = "52fdfc07-2182-454f-963f-5f0f9a621d72"

        def get_remaining_time_in_millis(self) -> int:
            return 30_000

    return Context()


# ------------------------------------------------------------------------------ template and handlers
@functools.cache
def app_template() -> AppTemplate:
    """The repository's template.yaml as the replay reads it (read once per test session)."""
    return load_template(ROOT / "template.yaml")


def template_environment(function: str) -> dict[str, str]:
    """The environment template.yaml gives ``functions/<function>`` (Globals included), a copy."""
    return dict(app_template().functions[function].environment)


def create_state_table(dynamodb: Any, name: str = STATE_TABLE) -> None:
    """Create template.yaml's StateTable (keys ``pk``/``sk``, TTL) as ``name`` with a moto-backed
    DynamoDB client, unless it exists."""
    create_tables(dynamodb, {name: app_template().tables[STATE_TABLE]})


def load_app(
    function: str,
    env: Mapping[str, str] | None = None,
    *,
    monkeypatch: pytest.MonkeyPatch | None = None,
    unset: Iterable[str] = (),
) -> ModuleType:
    """Import ``functions/<function>/app.py`` afresh, as a Lambda cold start does (a new module each
    call: the settings are read again), with ``env`` set and the ``unset`` variables removed.

    With ``monkeypatch`` the environment stays so until the test ends; without, ``os.environ`` is
    restored as soon as the module is loaded (the handler has read its settings by then).

    Raises:
        whatever the import raises, e.g. ``ConfigError`` for an invalid environment.
    """
    if monkeypatch is None:
        with pytest.MonkeyPatch.context() as patch:
            return load_app(function, env, monkeypatch=patch, unset=unset)
    for key in unset:
        monkeypatch.delenv(key, raising=False)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    path = ROOT / "functions" / function / "app.py"
    spec = importlib.util.spec_from_file_location(f"{function}_app_{uuid.uuid4().hex}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sqs_event(bodies: Iterable[str], queue: str) -> dict[str, Any]:
    """Lambda's SQS event with one record per body, in order (``messageId`` ``msg-0``, ``msg-1``,
    ...), as received from the queue named ``queue`` of the test account."""
    return {
        "Records": [
            {
                "messageId": f"msg-{i}",
                "receiptHandle": f"handle-{i}",
                "body": body,
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1763633000000"},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:us-east-1:111122223333:{queue}",
                "awsRegion": "us-east-1",
            }
            for i, body in enumerate(bodies)
        ]
    }


def printed(
    capsys: pytest.CaptureFixture[str], *, all_json: bool = False
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """What was printed on stdout since the last read: EMF blobs (records with ``_aws``), the other
    JSON records (log lines), and the raw text. Lines that do not start with ``{`` are passed over;
    with ``all_json`` every line must be JSON (one that is not fails the test)."""
    out = capsys.readouterr().out
    blobs: list[dict[str, Any]] = []
    logs: list[dict[str, Any]] = []
    for line in out.splitlines():
        if all_json or line.startswith("{"):
            record = json.loads(line)
            (blobs if "_aws" in record else logs).append(record)
    return blobs, logs, out


def metric_values(blobs: Iterable[Mapping[str, Any]], name: str) -> list[tuple[float, dict[str, str]]]:
    """Every value of the metric ``name`` in EMF ``blobs`` (a blob holds one value or a list), each
    with the blob's dimensions."""
    found = []
    for blob in blobs:
        directive = blob["_aws"]["CloudWatchMetrics"][0]
        if any(m["Name"] == name for m in directive["Metrics"]):
            keys = {k for dims in directive["Dimensions"] for k in dims}
            values = blob[name] if isinstance(blob[name], list) else [blob[name]]
            found += [(float(v), {k: blob[k] for k in keys}) for v in values]
    return found
