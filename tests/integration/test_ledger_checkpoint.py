"""The ledger against the embedded AWS (moto's DynamoDB and S3, the emulator's service jobs): the
checkpoint location read once with the job's describe, ``LostInstanceHours`` measured from the
newest checkpoint object through the one S3 adapter, and the RUNNABLE index written in the same
transaction as the records (``OldestRunnableAge`` every minute from one Query per share)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from batchpilot.io.batch import BatchLedgerClient
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.codec import decode
from batchpilot.io.dynamodb.ledger import LedgerStateStore, job_from_item
from batchpilot.io.s3 import S3Checkpoints
from batchpilot.ledger.runnable import RunnableEntry
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.testing.harness import aws_with_state_table
from batchpilot_local.testing.ledger import ListSink, recount_runnable
from batchpilot_local.testing.samples import envelope, service_job

TABLE = "batchpilot-StateTable"
ACCOUNT = "111122223333"
T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
CKPT = "s3://ckpt-bucket/runs/ck-1/"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture(scope="module")
def aws() -> Iterator[EmbeddedAws]:
    yield from aws_with_state_table(
        TABLE,
        world={
            "service_environments": [
                {
                    "name": "ck-env",
                    "capacityLimits": [{"maxCapacity": 16, "capacityUnit": "NUM_INSTANCES"}],
                }
            ],
            "job_queues": [{"name": "ck-q", "serviceEnvironment": "ck-env", "scheduling": "FIFO"}],
        },
    )


def world_job(job_id: str, checkpoint: str | None, share: str = "TEAM") -> dict[str, Any]:
    payload: dict[str, Any] = {
        "TrainingJobName": job_id,
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 4},
    }
    if checkpoint:
        payload["CheckpointConfig"] = {"S3Uri": checkpoint, "LocalPath": "/opt/ml/checkpoints"}
    return {
        "jobArn": f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/{job_id}",
        "jobId": job_id,
        "jobName": job_id,
        "jobQueue": "ck-q",
        "status": "RUNNABLE",
        "shareIdentifier": share,
        "serviceRequestPayload": payload,
    }


def ledger(sink: ListSink, warned: list[tuple[str, str]]) -> LedgerService:
    return LedgerService(
        LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": TABLE}),
        LedgerStateStore(client("dynamodb"), TABLE),
        BatchLedgerClient(client("batch")),
        sink,
        lambda: at(90),
        warn=lambda source, consequence: warned.append((source, consequence)),
        checkpoints=S3Checkpoints(client("s3")),
    )


def lifecycle(arn: str) -> list[str]:
    """RUNNABLE at 0, RUNNING from 10, preempted and requeued at 70."""
    bodies = [
        service_job("RUNNABLE", jobArn=arn, jobQueue="ck-q"),
        service_job("RUNNING", jobArn=arn, jobQueue="ck-q"),
        envelope("Batch Service Job Preemption Completed", {"preemptedJobArn": arn, "status": "RUNNABLE"}),
    ]
    for minute, body in zip((0, 10, 70), bodies, strict=True):
        body["time"] = at(minute).isoformat()
    return [json.dumps(b) for b in bodies]


def test_lost_hours_from_the_newest_checkpoint_in_s3(aws: EmbeddedAws) -> None:
    objects = [
        {"key": "step-100.pt", "last_modified": at(30).isoformat()},
        {"key": "step-200.pt", "last_modified": at(58).isoformat()},  # the newest: 12 minutes lost
    ]
    aws.set_world(
        {"service_jobs": [world_job("ck-1", CKPT)], "checkpoints": [{"uri": CKPT, "objects": objects}]}
    )
    arn = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/ck-1"
    sink, warned = ListSink(), list[tuple[str, str]]()
    service = ledger(sink, warned)
    results = [service.record(body) for body in lifecycle(arn)]
    stored = LedgerStateStore(client("dynamodb"), TABLE).get(arn)
    assert stored is not None and stored.details.checkpoint == CKPT  # read once, with the describe
    assert results[-1].fields["basis"] == "checkpoint"
    team = {"JobQueue": "ck-q", "ShareIdentifier": "TEAM"}
    assert sink.values("LostInstanceHours", **team, Basis="checkpoint") == [pytest.approx(4 * 12 / 60)]
    assert sink.values("LostInstanceHours", **team, Basis="attempt") == [] and warned == []
    # The requeued job is in the RUNNABLE index from its requeue (its age restarted).
    index = LedgerStateStore(client("dynamodb"), TABLE)
    assert index.oldest_runnable("ck-q", "TEAM") == RunnableEntry("ck-q", "TEAM", at(70), arn)


def test_lost_hours_ignore_the_next_attempts_checkpoints(aws: EmbeddedAws) -> None:
    """The listing runs after the next attempt has written checkpoints of its own (a late event,
    a replay): the lost attempt is measured from the newest object written before it stopped."""
    objects = [
        {"key": "step-100.pt", "last_modified": at(30).isoformat()},
        {"key": "step-200.pt", "last_modified": at(58).isoformat()},  # the lost attempt's last
        {"key": "step-300.pt", "last_modified": at(85).isoformat()},  # the next attempt's
        {"key": "step-400.pt", "last_modified": at(95).isoformat()},
    ]
    aws.set_world(
        {"service_jobs": [world_job("ck-3", CKPT)], "checkpoints": [{"uri": CKPT, "objects": objects}]}
    )
    arn = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/ck-3"
    sink, warned = ListSink(), list[tuple[str, str]]()
    service = ledger(sink, warned)
    results = [service.record(body) for body in lifecycle(arn)]
    assert results[-1].fields["basis"] == "checkpoint"
    team = {"JobQueue": "ck-q", "ShareIdentifier": "TEAM"}
    assert sink.values("LostInstanceHours", **team, Basis="checkpoint") == [pytest.approx(4 * 12 / 60)]
    assert sink.values("LostInstanceHours", **team, Basis="attempt") == [] and warned == []


def test_a_missing_bucket_falls_back_to_the_whole_attempt_said_once(aws: EmbeddedAws) -> None:
    gone = "s3://no-such-ckpt-bucket/runs/"
    aws.set_world({"service_jobs": [world_job("nb-1", gone), world_job("nb-2", gone)]})
    sink, warned = ListSink(), list[tuple[str, str]]()
    service = ledger(sink, warned)
    for job_id in ("nb-1", "nb-2"):
        results = [
            service.record(b) for b in lifecycle(f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/{job_id}")
        ]
        assert results[-1].fields["basis"] == "attempt"
        assert results[-1].fields["checkpoint_unreadable"] == "NoSuchBucket"
    team = {"JobQueue": "ck-q", "ShareIdentifier": "TEAM"}
    assert sink.values("LostInstanceHours", **team, Basis="attempt") == [4.0, 4.0]  # the hour, never lost
    assert [source for source, _ in warned] == ["checkpoint bucket no-such-ckpt-bucket"]


def index_and_recount() -> tuple[set[RunnableEntry], set[RunnableEntry]]:
    items, jobs = [], []
    for page in client("dynamodb").get_paginator("scan").paginate(TableName=TABLE):
        for raw in page.get("Items", []):
            item = decode(raw)
            if item["pk"].startswith("ledger#job#"):
                jobs.append(job_from_item(item))
            elif item["pk"].startswith("ledger#runnable#"):
                items.append(item)
    by_arn = {j.arn: j for j in jobs}
    index = set()
    for item in items:
        job = by_arn[item["arn"]]
        since = datetime.fromisoformat(item["since"])
        index.add(RunnableEntry(job.details.queue, job.share, since, item["arn"]))
    return index, recount_runnable(jobs)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_runnable_index_equals_the_runnable_records_and_gives_the_oldest(aws: EmbeddedAws, seed: int) -> None:
    """Random lives (requeues, starts, ends; duplicates and late copies) through DynamoDB."""
    rng = random.Random(seed)
    jobs = {f"ix{seed}-{n}": rng.choice(["A", "B"]) for n in range(12)}
    aws.set_world({"service_jobs": [world_job(job_id, None, share) for job_id, share in jobs.items()]})
    bodies = []
    for job_id, share in jobs.items():
        arn = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/{job_id}"
        minute = rng.randint(0, 30)
        for status in rng.choices(["RUNNABLE", "RUNNING", "RUNNABLE", "SUCCEEDED"], k=rng.randint(1, 5)):
            minute += rng.choice([0, 1, 2])
            event = service_job(status, jobArn=arn, jobQueue="ck-q", shareIdentifier=share)
            event["time"] = at(minute).isoformat()
            bodies.append(json.dumps(event))
    bodies += rng.choices(bodies, k=len(bodies) // 3)
    rng.shuffle(bodies)
    service = ledger(ListSink(), [])
    for body in bodies:
        service.record(body)
    index, recounted = index_and_recount()
    assert index == recounted
    store = LedgerStateStore(client("dynamodb"), TABLE)
    for share in ("A", "B"):
        mine = [e for e in recounted if e.queue == "ck-q" and e.share == share]
        expected = min(mine, key=lambda e: (e.since, e.arn)) if mine else None
        assert store.oldest_runnable("ck-q", share) == expected
    assert {e.share for e in index} & {"A", "B"}  # the lives left some of these jobs RUNNABLE
