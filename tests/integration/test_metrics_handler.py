"""The real metrics handler, fed SQS batches of sample events; EMF parsed from what it prints."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from batchpilot.shared.observability import metrics as shared_metrics
from batchpilot.shared.settings import ConfigError
from batchpilot_local.testing.harness import load_app, metric_values, printed, sqs_event
from batchpilot_local.testing.paths import ROOT
from batchpilot_local.testing.samples import job_event_paths, sample

APP = ROOT / "functions" / "metrics" / "app.py"
QUEUE = "batchpilot-MetricsQueue"
ENV = {"POWERTOOLS_SERVICE_NAME": "batchpilot"}


@pytest.fixture
def handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    shared_metrics.clear_metrics()
    yield load_app("metrics", ENV, monkeypatch=monkeypatch)
    shared_metrics.clear_metrics()


def test_batch_of_samples_emits_valid_emf(
    handler: ModuleType, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = job_event_paths()
    total_failed = 0
    for start in range(0, len(paths), 10):
        bodies = [p.read_text() for p in paths[start : start + 10]]
        assert handler.lambda_handler(sqs_event(bodies, QUEUE), lambda_context) == {"batchItemFailures": []}
        blobs, _, _ = printed(capsys, all_json=True)
        for blob in blobs:
            directive = blob["_aws"]["CloudWatchMetrics"][0]
            assert directive["Namespace"] == "BatchPilot"
            assert len(directive["Metrics"]) <= 100
            for dims in directive["Dimensions"]:
                assert len(dims) <= 30
                for key in dims:
                    assert isinstance(blob[key], str) and blob[key].strip()
            for metric in directive["Metrics"]:
                assert all(v >= 0 for v in blob[metric["Name"]])
        total_failed += sum(v for v, _ in metric_values(blobs, "JobsFailed"))
    expected_failed = 0
    for p in paths:
        status = json.loads(p.read_text())["detail"].get("status") or json.loads(p.read_text())["detail"].get(
            "TrainingJobStatus"
        )
        expected_failed += status in {"FAILED", "Failed", "Stopped"} and "Queue Blocked" not in p.read_text()
    assert total_failed == expected_failed


def test_failed_spot_reclaim_metrics(
    handler: ModuleType, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    handler.lambda_handler(
        sqs_event([json.dumps(sample("batch-job/failed-spot-reclaim"))], QUEUE), lambda_context
    )
    blobs, _, _ = printed(capsys, all_json=True)
    [(value, dims)] = metric_values(blobs, "JobsFailed")
    assert value == 1.0
    assert dims["FailureCategory"] == "SPOT_INTERRUPTION"
    assert dims["JobKind"] == "container-job"
    assert not dims["JobQueue"].startswith("arn:")
    assert metric_values(blobs, "EventsProcessed") == [
        (1.0, {"Function": "metrics", "service": "batchpilot"})
    ]


def test_failure_rate_is_one_percent_sample_per_ended_job_in_one_blob_per_queue(
    handler: ModuleType, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = sample("service-job/failed-algorithm-error")
    ended = [failed, *(sample("service-job/succeeded") for _ in range(3)), sample("service-job/running")]
    for event in ended:  # one queue, one minute: the EMF adapter groups them
        event["detail"]["jobQueue"] = failed["detail"]["jobQueue"]
        event["time"] = failed["time"]
    result = handler.lambda_handler(sqs_event([json.dumps(e) for e in ended], QUEUE), lambda_context)
    assert result == {"batchItemFailures": []}
    blobs, _, _ = printed(capsys, all_json=True)
    [blob] = [b for b in blobs if "JobFailureRate" in b]
    directive = blob["_aws"]["CloudWatchMetrics"][0]
    assert directive["Dimensions"] == [["JobQueue", "service"]]
    assert directive["Metrics"] == [{"Name": "JobFailureRate", "Unit": "Percent"}]
    # Every value of the EMF array is its own sample for CloudWatch: Average = 25 %, SampleCount = 4.
    assert sorted(blob["JobFailureRate"]) == [0.0, 0.0, 0.0, 100.0]


def test_malformed_and_unknown_events_are_counted_not_retried_and_not_logged(
    handler: ModuleType,
    lambda_context: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = sample("batch-job/failed-spot-reclaim")
    del broken["detail"]["status"]
    broken["detail"]["container"] = {"environment": [{"name": "TOKEN", "value": "hunter2-secret"}]}
    bodies = [
        "{not json",
        json.dumps(broken),
        json.dumps(sample("ignored/ec2-spot-interruption-warning")),
        json.dumps(sample("service-job/succeeded")),
    ]
    result = handler.lambda_handler(sqs_event(bodies, QUEUE), lambda_context)
    assert result == {"batchItemFailures": []}
    blobs, _, out = printed(capsys, all_json=True)
    assert "hunter2-secret" not in out
    assert "hunter2-secret" not in caplog.text
    assert sum(v for v, _ in metric_values(blobs, "InvalidEvents")) == 2
    assert sum(v for v, _ in metric_values(blobs, "EventsIgnored")) == 1
    assert sum(v for v, _ in metric_values(blobs, "EventsProcessed")) == 1
    assert sum(v for v, _ in metric_values(blobs, "JobsSucceeded")) == 1
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert sorted(r.outcome for r in warnings) == ["ignored", "invalid", "invalid"]  # type: ignore[attr-defined]
    assert any("detail.status" in r.error for r in warnings)  # type: ignore[attr-defined]
    assert "hunter2-secret" not in str([r.__dict__ for r in warnings])


def test_a_publishing_bug_fails_only_its_record(
    handler: ModuleType,
    lambda_context: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = handler.processor.sink

    class FailsOnBlocked:
        def add(self, points: list[Any]) -> None:
            if any(p.name == "QueueBlocked" for p in points):
                raise RuntimeError("boom")
            real.add(points)

        def flush(self) -> int:
            return int(real.flush())

    monkeypatch.setattr(handler.processor, "sink", FailsOnBlocked())
    bodies = [
        json.dumps(sample("service-job/succeeded")),
        json.dumps(sample("service-job-queue-blocked/misconfiguration-service-environment-max-resource")),
    ]
    result = handler.lambda_handler(sqs_event(bodies, QUEUE), lambda_context)
    assert result == {"batchItemFailures": [{"itemIdentifier": "msg-1"}]}
    blobs, _, _ = printed(capsys, all_json=True)
    assert sum(v for v, _ in metric_values(blobs, "JobsSucceeded")) == 1


def test_namespace_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    shared_metrics.clear_metrics()
    module = load_app(
        "metrics", {**ENV, "POWERTOOLS_METRICS_NAMESPACE": "Team/Training"}, monkeypatch=monkeypatch
    )
    module.lambda_handler(sqs_event([json.dumps(sample("sagemaker/completed"))], QUEUE), lambda_context)
    blobs, _, _ = printed(capsys, all_json=True)
    assert blobs
    assert {b["_aws"]["CloudWatchMetrics"][0]["Namespace"] for b in blobs} == {"Team/Training"}
    shared_metrics.clear_metrics()


def test_invalid_namespace_fails_at_cold_start_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="POWERTOOLS_METRICS_NAMESPACE"):
        load_app(
            "metrics", {**ENV, "POWERTOOLS_METRICS_NAMESPACE": "bad namespace!"}, monkeypatch=monkeypatch
        )


def test_handler_imports_only_what_the_layer_ships() -> None:
    # The handler must import only from the layer package and Powertools (what the layer ships).
    source = APP.read_text()
    imported = {
        line.split()[1].split(".")[0] for line in source.splitlines() if line.startswith(("import ", "from "))
    }
    third_party = {name for name in imported if name not in sys.stdlib_module_names}
    assert third_party <= {"aws_lambda_powertools", "batchpilot"}
    assert "sys.path" not in source
