"""The ledger's checkpoint listing (ListObjectsV2, for ``LostInstanceHours``) failing: throttled
past botocore's retries, a 500, or an answer that never comes. The metric is never lost: it is
published with ``Basis=attempt`` (the whole attempt), the failure is said once per bucket and named
in the record's log line, and the record is not retried for it.

The real LedgerService, LedgerStateStore, BatchLedgerClient and S3Checkpoints run against the
embedded AWS with faults injected at the HTTP layer (docs/reliability.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from batchpilot.io.batch import BatchLedgerClient
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.ledger import LedgerStateStore
from batchpilot.io.s3 import S3Checkpoints
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.records import Outcome
from batchpilot_local.testing.faults import FaultKind, HttpFaults
from batchpilot_local.testing.ledger import ListSink
from batchpilot_local.testing.recovery import TABLE, harness
from batchpilot_local.testing.samples import envelope, service_job

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
ACCOUNT = "111122223333"
CKPT = "s3://fault-ckpt/runs/"


def job(job_id: str) -> dict[str, object]:
    payload = {
        "TrainingJobName": job_id,
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2},
        "CheckpointConfig": {"S3Uri": CKPT},
    }
    return {
        "jobArn": f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/{job_id}",
        "jobId": job_id,
        "jobName": job_id,
        "jobQueue": "fq",
        "status": "RUNNABLE",
        "shareIdentifier": "TEAM",
        "serviceRequestPayload": payload,
    }


def bodies(arn: str) -> list[str]:
    events = [
        service_job("RUNNABLE", jobArn=arn, jobQueue="fq"),
        service_job("RUNNING", jobArn=arn, jobQueue="fq"),
        envelope("Batch Service Job Preemption Completed", {"preemptedJobArn": arn, "status": "RUNNABLE"}),
    ]
    for minute, event in zip((0, 10, 40), events, strict=True):
        event["time"] = (T0 + timedelta(minutes=minute)).isoformat()
    return [json.dumps(e) for e in events]


WORLD = {
    "service_environments": [
        {"name": "fenv", "capacityLimits": [{"maxCapacity": 8, "capacityUnit": "NUM_INSTANCES"}]}
    ],
    "job_queues": [{"name": "fq", "serviceEnvironment": "fenv", "scheduling": "FIFO"}],
    "service_jobs": [job("fj-1"), job("fj-2")],
    "checkpoints": [
        {"uri": CKPT, "objects": [{"key": "step-1.pt", "last_modified": "2026-11-20T10:30:00Z"}]}
    ],
}


@pytest.mark.parametrize("kind", [FaultKind.THROTTLE, FaultKind.SERVER_ERROR, FaultKind.ACCEPTED_TIMEOUT])
def test_an_unreadable_checkpoint_keeps_the_metric_on_the_whole_attempt(kind: FaultKind) -> None:
    warned: list[tuple[str, str]] = []
    sink = ListSink()
    with harness(WORLD), HttpFaults() as faults:
        faults.add("s3", "ListObjectsV2", kind, times=None)  # every try, botocore's retries included
        ledger = LedgerService(
            LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": TABLE}),
            LedgerStateStore(client("dynamodb"), TABLE),
            BatchLedgerClient(client("batch")),
            sink,
            lambda: T0 + timedelta(hours=1),
            warn=lambda source, consequence: warned.append((source, consequence)),
            checkpoints=S3Checkpoints(client("s3")),
        )
        results = []
        for job_id in ("fj-1", "fj-2"):
            for body in bodies(f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/{job_id}"):
                results.append(ledger.record(body))  # never raises: nothing to retry
        listed = [action for action, _ in faults.injected if action == "s3:ListObjectsV2"]
    assert listed  # the listing was tried and failed
    assert all(r.outcome is Outcome.PROCESSED for r in results)
    lost = [r for r in results if "basis" in r.fields]
    assert [r.fields["basis"] for r in lost] == ["attempt", "attempt"]
    assert all(r.fields["checkpoint_unreadable"] for r in lost)
    team = {"JobQueue": "fq", "ShareIdentifier": "TEAM"}
    assert sink.values("LostInstanceHours", **team, Basis="attempt") == [1.0, 1.0]  # 2 x 30 min each
    assert sink.values("LostInstanceHours", **team, Basis="checkpoint") == []
    assert [source for source, _ in warned] == ["checkpoint bucket fault-ckpt"]  # once, not per job


def test_without_faults_the_same_jobs_use_their_checkpoint() -> None:
    sink = ListSink()
    with harness(WORLD):
        ledger = LedgerService(
            LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": TABLE}),
            LedgerStateStore(client("dynamodb"), TABLE),
            BatchLedgerClient(client("batch")),
            sink,
            lambda: T0 + timedelta(hours=1),
            checkpoints=S3Checkpoints(client("s3")),
        )
        for body in bodies(f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/fj-1"):
            ledger.record(body)
    # Checkpoint at minute 30 of an attempt from 10 to 40: 2 instances x 10 minutes lost.
    assert sink.values("LostInstanceHours", Basis="checkpoint") == [pytest.approx(2 * 10 / 60)]
