"""The repository's sample events (``events/``) and builders of minimal, real-shaped EventBridge
events of the kinds batchpilot receives (Batch container jobs, Batch service jobs, SageMaker
training jobs), for account ``111122223333`` in ``us-east-1``."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from batchpilot_local.testing.paths import EVENTS_DIR

ACCOUNT = "111122223333"
REGION = "us-east-1"
QUEUE_ARN = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/ml-training-highpri"
"""The job queue the built Batch events name."""


def sample(name: str) -> dict[str, Any]:
    """One sample event from ``events/``, e.g. ``sample("batch-job/failed-spot-reclaim")`` (a fresh
    copy each call).

    Raises:
        FileNotFoundError: no ``events/<name>.json``.
    """
    data: dict[str, Any] = json.loads((EVENTS_DIR / f"{name}.json").read_text())
    return data


ALARM_SAMPLES = "cloudwatch-alarm"
"""The folder of ``events/`` with the stack's CloudWatch alarm state changes (alerts only)."""
NOT_JOB_EVENTS = frozenset({"ignored", ALARM_SAMPLES})
"""Folders of ``events/`` whose events are no job events (no metrics, ledger or recovery)."""


def job_event_paths() -> list[Path]:
    """:func:`sample_event_paths` of the job events only (no ``ignored/``, no alarms)."""
    return [p for p in sample_event_paths() if not NOT_JOB_EVENTS & set(p.relative_to(EVENTS_DIR).parts)]


def sample_event_paths() -> list[Path]:
    """Every single-event JSON file under ``events/`` (scenario files excluded), in sorted order."""
    paths = []
    for path in sorted(EVENTS_DIR.rglob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "detail-type" in data:
            paths.append(path)
    return paths


def envelope(
    detail_type: str, detail: dict[str, Any], source: str = "aws.batch", **extra: Any
) -> dict[str, Any]:
    """A real-shaped EventBridge envelope around ``detail``; ``extra`` overrides ``id`` and ``time``
    or adds top-level members."""
    return {
        "version": "0",
        "id": extra.pop("id", "0b1c2d3e-0000-4000-8000-000000000001"),
        "detail-type": detail_type,
        "source": source,
        "account": ACCOUNT,
        "time": extra.pop("time", "2026-11-20T10:15:30Z"),
        "region": REGION,
        "resources": [],
        "detail": detail,
        **extra,
    }


def scheduled_event(at: datetime, detail: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """EventBridge Scheduler's event for a run at ``at`` (a new id each call); ``detail`` defaults to
    the template's schedule Input (``{"attempt": "1"}``); ``extra`` as for :func:`envelope`."""
    return envelope(
        "Scheduled Event",
        {"attempt": "1"} if detail is None else detail,
        source="aws.scheduler",
        id=str(uuid.uuid4()),
        time=at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        **extra,
    )


def batch_job(status: str, **detail: Any) -> dict[str, Any]:
    """A ``Batch Job State Change`` event for a container job in ``status``; ``detail`` overrides or
    adds detail members."""
    base = {
        "jobArn": f"arn:aws:batch:{REGION}:{ACCOUNT}:job/6d1c0c4e-6b7f-4b8a-9f0e-1f2a3b4c5d6e",
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
    """A ``Batch Service Job State Change`` (or ``detail_type``, e.g. ``Batch Service Job Queue
    Blocked``) event for a SageMaker training service job in ``status``."""
    base = {
        "jobArn": f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/4c7599ae-0a82-49aa-ba5a-4727fcce14a8",
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
    """A ``SageMaker Training Job State Change`` event (``TrainingJobStatus`` = ``status``)."""
    base = {
        "TrainingJobName": "bert-large-ft-2026-11-20",
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/bert-large-ft-2026-11-20",
        "TrainingJobStatus": status,
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 500},
        "CreationTime": "1763633000000",
    }
    base.update(detail)
    return envelope("SageMaker Training Job State Change", base, source="aws.sagemaker")
