"""Shared test helpers: the repo's sample events and builders of minimal real-shaped events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
