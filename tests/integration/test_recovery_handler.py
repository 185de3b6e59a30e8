"""The real recovery handler (functions/recovery/app.py) with the environment template.yaml gives
it, fed SQS batches inside the embedded AWS: partial batch responses, EMF metrics, logs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pytest
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.lineage import DynamoLineageStore
from batchpilot.recovery.lineage import AttemptRecord, AttemptState, Lineage
from batchpilot.recovery.naming import ATTEMPT_TAG, LINEAGE_TAG
from batchpilot.recovery.requests import Operation
from batchpilot.shared.classification import Category, JobKind
from batchpilot.shared.observability import metrics as shared_metrics
from batchpilot.shared.settings import ConfigError
from batchpilot_local.testing.harness import load_app, metric_values, printed, template_environment
from batchpilot_local.testing.recovery import (
    BUCKET,
    TABLE,
    Harness,
    checkpoint_item,
    container_job_item,
    harness,
    service_job_item,
    world,
)
from batchpilot_local.testing.samples import sample

SECRET = "not-a-real-secret"  # WANDB_API_KEY in the spot-reclaim sample's container environment
RECENT_LINEAGE = "bp00000000000000000042"


def load_handler(monkeypatch: pytest.MonkeyPatch, **env: str) -> ModuleType:
    """functions/recovery/app.py after a cold start with the template's environment and ``env``."""
    return load_app("recovery", {**template_environment("recovery"), **env}, monkeypatch=monkeypatch)


def create_function_resources(h: Harness) -> None:
    """What the stack creates for the function: its queue (the template's
    BATCHPILOT_RECOVERY_QUEUE_URL) and batchpilot's event bus (BATCHPILOT_EVENT_BUS)."""
    h.aws.create_queue("RecoveryQueue")
    h.aws.client("events").create_event_bus(Name=template_environment("recovery")["BATCHPILOT_EVENT_BUS"])


def seeded_world() -> dict[str, Any]:
    # A service job that batchpilot resubmitted a few seconds ago (attempt 1 of RECENT_LINEAGE)
    # and that failed again: its backoff is not over.
    recent = service_job_item(
        "service-job/failed-sagemaker-capacity",
        checkpoint_uri=f"s3://{BUCKET}/recent/",
        tags={LINEAGE_TAG: RECENT_LINEAGE, ATTEMPT_TAG: "1"},
        jobArn="arn:aws:batch:us-east-1:111122223333:service-job/4ece0000-0000-4000-8000-000000000001",
        jobId="4ece0000-0000-4000-8000-000000000001",
        jobName="mistral-dpo-run18-r1-000042",
    )
    return world(
        service_jobs=[service_job_item("service-job/failed-user-terminated", checkpoint_uri=None), recent],
        jobs=[container_job_item("batch-job/failed-spot-reclaim")],
        checkpoints=[checkpoint_item(f"s3://{BUCKET}/llama-ft/run-39/", "2026-11-21T05:00:00Z")],
    )


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Harness, ModuleType]]:
    shared_metrics.clear_metrics()
    with harness(seeded_world()) as h:
        create_function_resources(h)
        now = datetime.now(UTC)
        store = DynamoLineageStore(client("dynamodb"), TABLE)
        record = AttemptRecord(
            attempt=1,
            failed_job_arn="arn:aws:batch:us-east-1:111122223333:service-job/f1977fd6-45dc-4232-ad30-cb0307ddd33d",
            category=Category.CAPACITY,
            reason="CapacityError",
            decided_at=now,
            operation=Operation.SUBMIT_SERVICE_JOB,
            new_job_name="mistral-dpo-run18-r1-000042",
            state=AttemptState.SUBMITTED,
            new_job_arn="arn:aws:batch:us-east-1:111122223333:service-job/4ece0000-0000-4000-8000-000000000001",
            published=True,
        )
        base = Lineage(
            RECENT_LINEAGE, JobKind.SERVICE_JOB, record.failed_job_arn, "mistral-dpo-run18", None, now
        )
        assert store.reserve(base.with_attempt(record), previous=None)
        # Recovery turned on for every job queue (the template's default names none: dry-run).
        yield h, load_handler(monkeypatch, BATCHPILOT_RECOVERY_JOB_QUEUES="*")
    shared_metrics.clear_metrics()


def sqs_batch(h: Harness, bodies: list[str]) -> dict[str, Any]:
    for body in bodies:
        h.aws.send("RecoveryQueue", body)
    event = h.aws.receive_as_lambda_event("RecoveryQueue", max_records=10)
    assert len(event["Records"]) == len(bodies)
    return event


def test_a_batch_resubmits_skips_defers_and_counts(
    env: tuple[Harness, ModuleType],
    lambda_context: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    h, handler = env
    recent = sample("service-job/failed-sagemaker-capacity")
    recent["detail"].update(
        jobArn="arn:aws:batch:us-east-1:111122223333:service-job/4ece0000-0000-4000-8000-000000000001",
        jobId="4ece0000-0000-4000-8000-000000000001",
        jobName="mistral-dpo-run18-r1-000042",
    )
    spot = json.dumps(sample("batch-job/failed-spot-reclaim"))
    bodies = [
        spot,
        json.dumps(sample("service-job/failed-user-terminated")),
        "{not json",
        json.dumps(recent),  # backoff not over: handed back
        spot,  # the same failure twice in one batch
        json.dumps(sample("service-job/succeeded")),  # no rule sends it; if one did: skipped quietly
    ]
    event = sqs_batch(h, bodies)
    result = handler.lambda_handler(event, lambda_context)
    deferred_id = event["Records"][3]["messageId"]
    assert result == {"batchItemFailures": [{"itemIdentifier": deferred_id}]}

    (visibility,) = h.calls("sqs:ChangeMessageVisibility")
    assert 55 <= visibility.params["VisibilityTimeout"] <= 61  # when the 60 s backoff is over
    assert [e.action for e in h.submits()] == ["batch:SubmitJob"]
    published = sorted(e["detail-type"] for e in h.published())
    assert published == ["Job Resubmitted", "Recovery Skipped"]

    blobs, _, out = printed(capsys)
    assert SECRET not in out  # container environments are never logged
    assert metric_values(blobs, "Resubmissions") == [
        (
            1.0,
            {
                "JobKind": "container-job",
                "JobQueue": "gpu-spot-queue",
                "FailureCategory": "SPOT_INTERRUPTION",
                "service": "batchpilot",
            },
        )
    ]
    assert metric_values(blobs, "RecoverySkipped") == [
        (
            1.0,
            {
                "JobKind": "service-job",  # the queue: a dimension only with MetricsDetail=detailed
                "FailureCategory": "USER_STOPPED",
                "SkipReason": "NOT_RECOVERABLE",
                "service": "batchpilot",
            },
        )
    ]
    [(lost, _)] = metric_values(blobs, "LostInstanceHours")
    assert lost > 0
    counters = {
        name: sum(v for v, _ in metric_values(blobs, name))
        for name in ("EventsProcessed", "InvalidEvents", "DuplicateEvents", "RecordsRetried")
    }
    assert counters == {"EventsProcessed": 3, "InvalidEvents": 1, "DuplicateEvents": 1, "RecordsRetried": 1}
    decisions = [r for r in caplog.records if r.getMessage() == "recovery decision"]
    assert sorted(r.action for r in decisions) == ["duplicate", "resubmitted", "skipped", "skipped"]  # type: ignore[attr-defined]
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    invalid = [r for r in caplog.records if getattr(r, "outcome", None) == "invalid"]
    assert len(invalid) == 1 and invalid[0].levelname == "WARNING"
    assert SECRET not in caplog.text and SECRET not in str([r.__dict__ for r in caplog.records])


def test_dry_run_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    shared_metrics.clear_metrics()
    with harness(seeded_world()) as h:
        create_function_resources(h)
        handler = load_handler(monkeypatch, BATCHPILOT_RECOVERY_DRY_RUN="true")
        event = sqs_batch(h, [json.dumps(sample("batch-job/failed-spot-reclaim"))])
        assert handler.lambda_handler(event, lambda_context) == {"batchItemFailures": []}
        assert h.submits() == []
        (resubmitted,) = h.published("Job Resubmitted")
        assert resubmitted["dry_run"] is True
    capsys.readouterr()
    shared_metrics.clear_metrics()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("BATCHPILOT_STATE_TABLE", ""),
        ("BATCHPILOT_RECOVERY_BUDGETS", "PREEMPTION=lots"),
        ("BATCHPILOT_RECOVERY_SUBMITS_PER_SECOND", "50"),
    ],
)
def test_bad_configuration_fails_at_cold_start_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    if not value:
        env = {k: v for k, v in template_environment("recovery").items() if k != variable}
        with pytest.raises(ConfigError, match=variable):
            load_app("recovery", env, monkeypatch=monkeypatch, unset=[variable])
        return
    with pytest.raises(ConfigError, match=variable):
        load_handler(monkeypatch, **{variable: value})
