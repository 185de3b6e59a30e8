"""Self-checks of the recovery test support (:mod:`batchpilot_local.testing.recovery`): its worlds
seed cleanly into the embedded AWS and its fake clock moves only when told."""

from __future__ import annotations

import json
from datetime import timedelta

from batchpilot_local.testing.recovery import (
    BUCKET,
    START,
    FakeTime,
    checkpoint_item,
    container_job_item,
    harness,
    service_job_item,
    training_job_item,
    world,
)


def test_the_base_world_and_every_job_helper_seed_cleanly() -> None:
    items = {
        "service_jobs": [
            service_job_item(
                "service-job/failed-preemption-budget-spent", checkpoint_uri=f"s3://{BUCKET}/a/"
            ),
            service_job_item("service-job/failed-sagemaker-capacity", checkpoint_uri=None),
        ],
        "jobs": [container_job_item("batch-job/failed-spot-reclaim")],
        "training_jobs": [
            training_job_item("sagemaker/failed-capacity-error", checkpoint_uri=f"s3://{BUCKET}/b/")
        ],
        "checkpoints": [checkpoint_item(f"s3://{BUCKET}/a/", "2026-11-22T00:00:00Z")],
    }
    with harness(world(**items)) as h:
        batch = h.aws.client("batch")
        described = batch.describe_service_job(jobId="7ead13ff-d66b-4b4d-b47a-e101068189f4")
        assert (
            json.loads(described["serviceRequestPayload"])["CheckpointConfig"]["S3Uri"] == f"s3://{BUCKET}/a/"
        )
        jobs = batch.describe_jobs(jobs=["939ae232-588e-4bce-b71e-d78a1dc02e27"])["jobs"]
        assert jobs[0]["parameters"]["checkpoint_uri"].startswith("s3://")
        assert h.calls() == []  # the harness's own calls are not journaled


def test_fake_time_moves_only_when_told() -> None:
    t = FakeTime()
    before = t.monotonic()
    t.sleep(2.5)
    assert t.monotonic() - before == 2.5 and t.slept == 2.5
    assert t.now() == START + timedelta(seconds=2.5)
