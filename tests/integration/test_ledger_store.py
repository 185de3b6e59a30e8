"""The job ledger against the embedded AWS (moto DynamoDB + the embedded Batch backend): exact
aggregates through real TransactWriteItems, reconciliation with paginated listings of tens of
thousands of jobs, and the function's cold start and event path."""

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
from batchpilot.io.dynamodb.ledger import (
    STARVING_TTL,
    LedgerDemandReader,
    LedgerStateStore,
)
from batchpilot.ledger.model import (
    AggregateKey,
    Delta,
    JobDetails,
    JobStatus,
    Observation,
    PreemptionPhase,
    type_counts,
)
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.classification import JobKind
from batchpilot.shared.own_events import StarvationReason
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.testing.harness import aws_with_state_table, load_app, sqs_event
from batchpilot_local.testing.ledger import ListSink, stored_and_recounted
from batchpilot_local.testing.samples import service_job
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TABLE = "batchpilot-StateTable"
ACCOUNT = "111122223333"
T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


@pytest.fixture(scope="module")
def aws() -> Iterator[EmbeddedAws]:
    yield from aws_with_state_table(
        TABLE,
        world={
            "service_environments": [
                {
                    "name": "sm-env",
                    "capacityLimits": [{"maxCapacity": 32, "capacityUnit": "NUM_INSTANCES"}],
                }
            ],
            "job_queues": [{"name": "sm-q", "serviceEnvironment": "sm-env", "scheduling": "FAIR_SHARE"}],
        },
    )


def clear_ledger(dynamodb: Any) -> None:
    for page in dynamodb.get_paginator("scan").paginate(TableName=TABLE):
        for item in page.get("Items", []):
            dynamodb.delete_item(TableName=TABLE, Key={"pk": item["pk"], "sk": item["sk"]})


class Details:
    """A BatchReader whose describes come from a dict (no AWS call)."""

    def __init__(self, details: dict[str, JobDetails]) -> None:
        self.details = details

    def describe(self, arn: str, kind: JobKind) -> JobDetails | None:
        return self.details.get(arn)


STATUSES = [JobStatus.RUNNABLE, JobStatus.SCHEDULED, JobStatus.RUNNING, JobStatus.SUCCEEDED]
TYPES = ["ml.p5.48xlarge", "ml.g5.12xlarge"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), jobs=st.integers(1, 6))
def test_aggregates_equal_recount_through_dynamodb(aws: EmbeddedAws, seed: int, jobs: int) -> None:
    dynamodb = aws.client("dynamodb")
    clear_ledger(dynamodb)
    rng = random.Random(seed)
    details = {}
    for i in range(jobs):
        # One instance type, or a heterogeneous cluster: the per-type counters go through DynamoDB.
        by_type = type_counts({t: rng.choice([1, 2, 4]) for t in rng.sample(TYPES, rng.randint(1, 2))})
        details[f"arn:j{i}"] = JobDetails(
            queue=rng.choice(["q1", "q2"]),
            environment="env",
            share_identifier=rng.choice(["HIGHPRI", "LOWPRI"]),
            instance_type=by_type[0][0] if len(by_type) == 1 else None,
            instances=sum(n for _, n in by_type),
            sized=True,
            by_type=by_type,
        )
    observations = []
    for arn in details:
        minute = 0
        for status in rng.sample(STATUSES, rng.randint(1, 4)):
            minute += rng.choice([0, 1, 2])
            preemption = (
                PreemptionPhase.COMPLETED if status is JobStatus.RUNNABLE and rng.random() < 0.3 else None
            )
            observations.append(
                Observation(
                    arn, JobKind.SERVICE_JOB, status, T0 + timedelta(minutes=minute), preemption=preemption
                )
            )
    observations += rng.choices(observations, k=len(observations) // 2)  # duplicates, late copies
    rng.shuffle(observations)
    ledger = LedgerService(
        LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": TABLE}),
        LedgerStateStore(dynamodb, TABLE),
        Details(details),  # type: ignore[arg-type]  # only describe is used on the event path
        ListSink(),
        lambda: T0,
    )
    for o in observations:
        ledger.apply(o)
    stored, recounted = stored_and_recounted(dynamodb, TABLE)
    assert stored == recounted


def runnable_jobs(count: int, prefix: str = "r") -> list[dict[str, Any]]:
    payload = {
        "TrainingJobName": "t",
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2},
    }
    return [
        {
            "jobArn": f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/{prefix}{i:05d}",
            "jobId": f"{prefix}{i:05d}",
            "jobName": f"{prefix}{i}",
            "jobQueue": "sm-q",
            "status": "RUNNABLE",
            "shareIdentifier": ["HIGHPRI", "MIDPRI", "LOWPRI"][i % 3],
            "createdAt": ms(T0 - timedelta(hours=1)),
            "serviceRequestPayload": payload,
        }
        for i in range(count)
    ]


def test_listing_pages_through_tens_of_thousands_of_jobs(aws: EmbeddedAws) -> None:
    count = 25_000
    aws.set_world({"service_jobs": runnable_jobs(count)})
    aws.drain_journal()
    batch = BatchLedgerClient(client("batch"))
    (queue,) = [q for q in batch.job_queues() if q.name == "sm-q"]
    listed = batch.list_active(queue)
    calls = [e.action for e in aws.drain_journal()]
    assert len(listed) == len({j.arn for j in listed}) == count
    assert {j.status for j in listed} == {JobStatus.RUNNABLE}
    # 250 pages of RUNNABLE (100 per page), one page for each other active status.
    assert calls.count("batch:ListServiceJobs") == count // 100 + 5
    assert queue.environment == "sm-env" and queue.service


def test_reconciliation_repairs_drift_both_ways(aws: EmbeddedAws) -> None:
    # moto's TransactWriteItems deep-copies the table for each transaction (quadratic time and
    # memory): a few hundred jobs here; the tens of thousands are paged through above.
    dynamodb = aws.client("dynamodb")
    clear_ledger(dynamodb)
    runnable = 200
    aws.set_world({"service_jobs": runnable_jobs(runnable)})
    store = LedgerStateStore(dynamodb, TABLE)
    # One job the ledger holds as RUNNING that AWS no longer lists: drift the other way.
    batch = BatchLedgerClient(client("batch"))
    sink = ListSink()
    ledger = LedgerService(
        LedgerSettings.from_environ(
            {"BATCHPILOT_STATE_TABLE": TABLE, "BATCHPILOT_LEDGER_DESCRIBES_PER_RUN": "50"}
        ),
        store,
        batch,
        sink,
        lambda: T0,
    )
    ledger.apply(
        Observation(
            "arn:aws:batch:us-east-1:111122223333:service-job/ghost",
            JobKind.SERVICE_JOB,
            JobStatus.RUNNING,
            T0 - timedelta(minutes=5),
            details=JobDetails(queue="sm-q", environment="sm-env", instances=4, sized=True),
        ),
        describe=False,
    )
    aws.drain_journal()
    summary = ledger.run(T0)
    calls = [e.action for e in aws.drain_journal()]
    assert summary.drift == {"sm-q:missing": runnable, "sm-q:gone": 1}
    assert calls.count("batch:ListServiceJobs") >= runnable // 100  # every page of RUNNABLE
    # The describe budget, no more, and the ghost's check (AWS Batch no longer knows it: FAILED).
    assert calls.count("batch:DescribeServiceJob") == 50 + 1
    assert summary.checks == 1
    assert sum(sink.values("RunnableJobs", JobQueue="sm-q")) == runnable
    # 50 sized jobs of 2 instances: the 150 others count at that mean, not at 1.
    assert sum(sink.values("RunnableInstances", JobQueue="sm-q")) == 2 * runnable
    assert sink.values("LedgerDrift", JobQueue="sm-q", Drift="missing") == [runnable]
    stored, recounted = stored_and_recounted(dynamodb, TABLE)
    assert stored == recounted
    # The per-instance-type counter: the 50 described jobs' 2 ml.p5.48xlarge each.
    assert sum(d.by_type.get("ml.p5.48xlarge", 0) for d in stored.values()) == 2 * 50
    # Within the interval nothing is listed again; gauges still come from the aggregates.
    summary = ledger.run(T0 + timedelta(minutes=1))
    calls = [e.action for e in aws.drain_journal()]
    assert summary.reconciled == [] and "batch:ListServiceJobs" not in calls


def test_function_cold_start_and_event_path(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    dynamodb = aws.client("dynamodb")
    clear_ledger(dynamodb)
    arn = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/ev1"
    aws.set_world(
        {
            "service_jobs": [
                {
                    "jobArn": arn,
                    "jobId": "ev1",
                    "jobName": "ev1",
                    "jobQueue": "sm-q",
                    "status": "RUNNING",
                    "shareIdentifier": "HIGHPRI",
                    "schedulingPriority": 90,
                    "serviceRequestPayload": {
                        "TrainingJobName": "t",
                        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 3},
                    },
                }
            ]
        }
    )
    app = load_app(
        "ledger",
        {"BATCHPILOT_STATE_TABLE": TABLE, "POWERTOOLS_SERVICE_NAME": "batchpilot"},
    )
    bodies = []
    for minute, status in ((0, "RUNNABLE"), (4, "RUNNING"), (4, "RUNNING"), (1, "RUNNABLE")):
        event = service_job(status, jobArn=arn, jobId="ev1", jobQueue="sm-q", shareIdentifier="HIGHPRI")
        event["time"] = (T0 + timedelta(minutes=minute)).isoformat()
        bodies.append(json.dumps(event))
    aws.drain_journal()
    result = app.lambda_handler(sqs_event(bodies, "batchpilot-LedgerQueue"), lambda_context)
    assert result == {"batchItemFailures": []}
    calls = [e.action for e in aws.drain_journal()]
    assert calls.count("batch:DescribeServiceJob") == 1
    job = LedgerStateStore(dynamodb, TABLE).get(arn)
    assert job is not None and job.status is JobStatus.RUNNING
    assert job.details.instances == 3 and job.details.priority == 90 and job.details.environment == "sm-env"
    stored, recounted = stored_and_recounted(dynamodb, TABLE)
    assert (
        stored
        == recounted
        == {
            AggregateKey("sm-env", "sm-q", "HIGHPRI", JobStatus.RUNNING): Delta(
                1, 1, 3, 24, types=(("ml.p4d.24xlarge", 3),)
            ),
        }
    )
    out = capsys.readouterr().out
    # the duplicate deliveries are counted; the queue wait is the metrics function's series alone
    # (one publisher per concept), so the ledger does not publish QueueWaitTime
    assert '"DuplicateEvents"' in out and '"QueueWaitTime"' not in out


def test_heterogeneous_job_is_counted_per_instance_type(aws: EmbeddedAws) -> None:
    dynamodb = aws.client("dynamodb")
    clear_ledger(dynamodb)
    arn = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/het1"
    groups = [
        {"InstanceGroupName": "gpu", "InstanceType": "ml.p5.48xlarge", "InstanceCount": 2},
        {"InstanceGroupName": "cpu", "InstanceType": "ml.c5.4xlarge", "InstanceCount": 3},
    ]
    job = {
        "jobArn": arn,
        "jobId": "het1",
        "jobName": "het1",
        "jobQueue": "sm-q",
        "status": "RUNNABLE",
        "serviceRequestPayload": {"TrainingJobName": "t", "ResourceConfig": {"InstanceGroups": groups}},
    }
    aws.set_world({"service_jobs": [job]})
    details = BatchLedgerClient(client("batch")).describe(arn, JobKind.SERVICE_JOB)
    assert details is not None and details.instance_type is None and details.instances == 5
    assert details.by_type == (("ml.c5.4xlarge", 3), ("ml.p5.48xlarge", 2))
    store = LedgerStateStore(dynamodb, TABLE)
    ledger = LedgerService(
        LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": TABLE}),
        store,
        BatchLedgerClient(client("batch")),
        ListSink(),
        lambda: T0,
    )
    ledger.apply(Observation(arn, JobKind.SERVICE_JOB, JobStatus.RUNNABLE, T0))
    ledger.apply(Observation(arn, JobKind.SERVICE_JOB, JobStatus.RUNNING, T0 + timedelta(minutes=3)))
    stored_job = store.get(arn)
    assert stored_job is not None and stored_job.details.by_type == details.by_type
    stored, recounted = stored_and_recounted(dynamodb, TABLE)
    assert stored == recounted
    (running,) = [d for k, d in stored.items() if k.status is JobStatus.RUNNING]
    assert running.by_type == {"ml.c5.4xlarge": 3, "ml.p5.48xlarge": 2} and running.instances == 5
    # The RUNNABLE aggregate's counters went back to zero with the transition.
    assert not [k for k in stored if k.status is JobStatus.RUNNABLE]
    # What the capacity function reads of it for a quota-management environment (a blocked event
    # naming the job: its demand per type from its record).
    sample = LedgerDemandReader(dynamodb, TABLE).sample("sm-q", "sm-env", [arn], by_type=True)
    assert sample is not None and sample.in_use == {"ml.c5.4xlarge": 3.0, "ml.p5.48xlarge": 2.0}
    assert [(b.arn, b.demand) for b in sample.blocked] == [(arn, {"ml.c5.4xlarge": 3, "ml.p5.48xlarge": 2})]


def test_starvation_claim_is_conditional_and_given_back(aws: EmbeddedAws) -> None:
    dynamodb = aws.client("dynamodb")
    clear_ledger(dynamodb)
    store = LedgerStateStore(dynamodb, TABLE)
    arn = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/starving"
    reason = StarvationReason.PREEMPTED_REPEATEDLY
    assert store.claim_starvation(arn, reason, T0)
    assert not store.claim_starvation(arn, reason, T0 + timedelta(minutes=1))  # once per job and reason
    assert store.claim_starvation(arn, StarvationReason.WAITING_BELOW_ENTITLEMENT, T0)
    (item,) = [
        decode(raw) for raw in dynamodb.scan(TableName=TABLE)["Items"] if decode(raw)["sk"] == reason.value
    ]
    assert item["pk"].startswith("ledger#starving#") and item["arn"] == arn
    assert int(item["expires_at"]) == int((T0 + STARVING_TTL).timestamp())
    store.release_starvation(arn, reason)
    assert store.claim_starvation(arn, reason, T0 + timedelta(minutes=2))
