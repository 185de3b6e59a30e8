"""Run a function's handler as Lambda does: ``functions/<name>/app.py`` imported afresh (a cold
start) with the template's environment, fed Lambda's SQS events; then read what it printed (EMF
metric blobs and JSON log lines)."""

from __future__ import annotations

import functools
import importlib.util
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from batchpilot_local.embedded_aws import EmbeddedAws, create_tables
from batchpilot_local.report import EventReport
from batchpilot_local.template import STATE_TABLE, AppTemplate, load_template
from batchpilot_local.testing.paths import ROOT, TEMPLATE_PATH

LAMBDA_CONTEXT_SOURCE = """class Context:
    function_name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
    function_version = "$LATEST"
    memory_limit_in_mb = int(os.environ["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"])
    invoked_function_arn = "arn:aws:lambda:us-east-1:111122223333:function:" + function_name
    aws_request_id = "52fdfc07-2182-454f-963f-5f0f9a621d72"
    log_group_name = "/aws/lambda/" + function_name
    log_stream_name = "2026/11/20/[$LATEST]0123456789abcdef"

    def get_remaining_time_in_millis(self):
        return 30_000
"""
"""Source of Lambda's ``context`` class for a script run in an isolated child interpreter
(``python -I -S -c``) that cannot import this package: paste it into the script (which has imported
``os``; the function's name and memory come from Lambda's environment variables)."""


@functools.cache
def app_template() -> AppTemplate:
    """The repository's template.yaml as the replay reads it (read once per process)."""
    return load_template(TEMPLATE_PATH)


def template_environment(function: str) -> dict[str, str]:
    """The environment template.yaml gives ``functions/<function>`` (Globals included), a copy.

    Raises:
        KeyError: no such function in the template.
    """
    return dict(app_template().functions[function].environment)


def create_state_table(dynamodb: Any, name: str = STATE_TABLE) -> None:
    """Create template.yaml's StateTable (keys ``pk``/``sk``, TTL) as ``name`` with a moto-backed
    DynamoDB client, unless it exists."""
    create_tables(dynamodb, {name: app_template().tables[STATE_TABLE]})


def aws_with_state_table(
    name: str = STATE_TABLE, *more: str, world: Mapping[str, Any] | None = None
) -> Iterator[EmbeddedAws]:
    """Embedded AWS with the state table ``name`` (and one per name in ``more``) created and
    ``world`` seeded (:meth:`EmbeddedAws.seed`), for a fixture (``yield from``); the layer's shared
    Powertools metrics are cleared before and after, so no test sees another's."""
    from batchpilot.shared.observability import metrics as shared_metrics

    shared_metrics.clear_metrics()
    with EmbeddedAws() as embedded:
        for table in (name, *more):
            create_state_table(embedded.client("dynamodb"), table)
        if world is not None:
            embedded.seed(world)
        yield embedded
    shared_metrics.clear_metrics()


def replay_file(path: str | Path) -> list[EventReport]:
    """``batchpilot replay PATH`` as reports (the repository's template, SQS batches off): one
    report per event, or per tick of a clock scenario."""
    from batchpilot_local.inputs import read_inputs
    from batchpilot_local.replay import Replayer

    replay_input = read_inputs([str(path)])
    return Replayer().run(replay_input.events, origins=[item.origin for item in replay_input.items])


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
        FileNotFoundError: no ``functions/<function>/app.py``.
        Exception: whatever the import raises, e.g. ``ConfigError`` for an invalid environment.
    """
    if monkeypatch is None:
        with pytest.MonkeyPatch.context() as patch:
            return load_app(function, env, monkeypatch=patch, unset=unset)
    for key in unset:
        monkeypatch.delenv(key, raising=False)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    path = ROOT / "functions" / function / "app.py"
    if not path.is_file():
        raise FileNotFoundError(path)
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
    with ``all_json`` every line must be JSON.

    Raises:
        json.JSONDecodeError: a line is not JSON (one starting with ``{``, or any with ``all_json``).
    """
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
    with the blob's dimensions, in blob order."""
    found = []
    for blob in blobs:
        directive = blob["_aws"]["CloudWatchMetrics"][0]
        if any(m["Name"] == name for m in directive["Metrics"]):
            keys = {k for dims in directive["Dimensions"] for k in dims}
            values = blob[name] if isinstance(blob[name], list) else [blob[name]]
            found += [(float(v), {k: blob[k] for k in keys}) for v in values]
    return found


def report_gauge(report: EventReport, name: str, ignore: Iterable[str], **dims: str) -> float:
    """The one value of metric ``name`` in a replay ``report`` whose dimensions, less those named in
    ``ignore``, are exactly ``dims`` (asserts there is exactly one, and that it is a float)."""
    ignored = set(ignore)
    found = [
        m.value
        for m in report.metrics
        if m.name == name and {k: v for k, v in m.dimensions.items() if k not in ignored} == dims
    ]
    assert len(found) == 1, (name, dims, found)
    assert isinstance(found[0], float)
    return found[0]
