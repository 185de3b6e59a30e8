"""The ledger function's batch path against the embedded AWS (moto DynamoDB + the embedded Batch
backend): a batch of N records of k jobs costs one BatchGetItem and k TransactWriteItems (counted in
the embedded AWS's API journal), and random batches leave the StateTable exactly as applying the
same records one by one does."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import process_partial_response
from batchpilot.io.dynamodb.codec import decode
from batchpilot.io.dynamodb.ledger import LedgerStateStore, aggregate_from_item, job_from_item
from batchpilot.ledger.handler import LedgerProcessor
from batchpilot.ledger.model import JobDetails
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.classification import JobKind
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.testing.harness import aws_with_state_table, load_app, sqs_event
from batchpilot_local.testing.ledger import ListSink, recount
from batchpilot_local.testing.samples import envelope, service_job
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TABLE = "batchpilot-StateTable"
ONE_BY_ONE = "one-by-one-StateTable"
ACCOUNT = "111122223333"
ARN = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/"
T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
PAYLOAD = {"TrainingJobName": "t", "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2}}


@pytest.fixture(scope="module")
def aws() -> Iterator[EmbeddedAws]:
    yield from aws_with_state_table(
        TABLE,
        ONE_BY_ONE,
        world={
            "service_environments": [
                {"name": "env", "capacityLimits": [{"maxCapacity": 64, "capacityUnit": "NUM_INSTANCES"}]}
            ],
            "job_queues": [{"name": "q", "serviceEnvironment": "env", "scheduling": "FAIR_SHARE"}],
        },
    )


def clear(dynamodb: Any, table: str) -> None:
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        for item in page.get("Items", []):
            dynamodb.delete_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]})


def body(status: str, job: int, minute: float, **detail: Any) -> str:
    event = service_job(status, jobArn=f"{ARN}b{job}", jobId=f"b{job}", jobQueue="q", **detail)
    event["time"] = (T0 + timedelta(minutes=minute)).isoformat()
    return json.dumps(event)


def test_a_batch_of_n_records_of_k_jobs_is_one_batch_get_and_k_transactions(
    aws: EmbeddedAws, lambda_context: Any
) -> None:
    dynamodb = aws.client("dynamodb")
    clear(dynamodb, TABLE)
    jobs = 3
    aws.set_world(
        {
            "service_jobs": [
                {
                    "jobArn": f"{ARN}b{j}",
                    "jobId": f"b{j}",
                    "jobName": f"b{j}",
                    "jobQueue": "q",
                    "status": "RUNNING",
                    "shareIdentifier": "HIGHPRI",
                    "serviceRequestPayload": PAYLOAD,
                }
                for j in range(jobs)
            ]
        }
    )
    app = load_app("ledger", {"BATCHPILOT_STATE_TABLE": TABLE, "POWERTOOLS_SERVICE_NAME": "batchpilot"})
    statuses = ("RUNNABLE", "STARTING", "RUNNING")
    # Each job's events close together, as the event source mapping batches them; one duplicate.
    bodies = [body(s, j, n, shareIdentifier="HIGHPRI") for j in range(jobs) for n, s in enumerate(statuses)]
    bodies.append(bodies[1])
    for round_ in range(2):  # the job's first batch, then the same batch delivered again
        aws.drain_journal()
        result = app.lambda_handler(sqs_event(bodies, "batchpilot-LedgerQueue"), lambda_context)
        assert result == {"batchItemFailures": []}
        calls = Counter(e.action for e in aws.drain_journal() if e.action.startswith("dynamodb:"))
        if round_ == 0:
            assert calls == {"dynamodb:BatchGetItem": 1, "dynamodb:TransactWriteItems": jobs}
        else:  # every record a duplicate: the read alone
            assert calls == {"dynamodb:BatchGetItem": 1}
    store = LedgerStateStore(dynamodb, TABLE)
    for j in range(jobs):
        job = store.get(f"{ARN}b{j}")
        assert job is not None and job.status.value == "RUNNING" and job.details.instances == 2
        assert job.version == 1  # one write for its three records
        assert job.first_started_at == T0 + timedelta(minutes=1)  # STARTING began the attempt


def table_items(dynamodb: Any, table: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Every item but zero aggregates, without what differs by design: the record's optimistic-lock
    ``version`` (one write per job per batch, not per record) and ``updated_at``."""
    out = {}
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        for raw in page.get("Items", []):
            item = decode(raw)
            if item["pk"].startswith("ledger#agg#") and aggregate_from_item(item).total.zero:
                continue
            item.pop("version", None)
            item.pop("updated_at", None)
            out[(item["pk"], item["sk"])] = item
    return out


class Details:
    """A BatchReader whose describes come from a dict (no AWS call)."""

    def __init__(self, details: dict[str, JobDetails]) -> None:
        self.details = details

    def describe(self, arn: str, kind: JobKind) -> JobDetails | None:
        return self.details.get(arn)


def service(dynamodb: Any, table: str, details: dict[str, JobDetails]) -> LedgerService:
    return LedgerService(
        LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": table}),
        LedgerStateStore(dynamodb, table),
        Details(details),  # type: ignore[arg-type]  # only describe is used on the event path
        ListSink(),
        lambda: T0,
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), jobs=st.integers(1, 5))
def test_random_batches_leave_the_table_one_by_one_leaves(aws: EmbeddedAws, seed: int, jobs: int) -> None:
    dynamodb = aws.client("dynamodb")
    clear(dynamodb, TABLE)
    clear(dynamodb, ONE_BY_ONE)
    rng = random.Random(seed)
    details, bodies = {}, []
    for j in range(jobs):
        share = rng.choice(["HIGHPRI", "LOWPRI"])
        details[f"{ARN}b{j}"] = JobDetails(
            queue="q", environment="env", share_identifier=share, instance_type="ml.p5.48xlarge",
            instances=rng.choice([1, 2, 4]), sized=True, by_type=(("ml.p5.48xlarge", 2),),
        )  # fmt: skip
        minute = 0.0
        later = rng.sample(["RUNNABLE", "RUNNING", "SUCCEEDED"], 2)
        for status in ["RUNNABLE", "STARTING", "RUNNING", *later]:
            minute += rng.choice([0, 1, 2])
            bodies.append(body(status, j, minute, shareIdentifier=share))
        if rng.random() < 0.5:
            completed = {"preemptedJobArn": f"{ARN}b{j}", "status": "RUNNABLE"}
            event = envelope("Batch Service Job Preemption Completed", completed)
            event["time"] = (T0 + timedelta(minutes=minute + 0.5)).isoformat()
            bodies.append(json.dumps(event))
    bodies += rng.choices(bodies, k=len(bodies) // 2)  # duplicates and late copies
    order = sorted(range(len(bodies)), key=lambda i: i + rng.uniform(-3, 3))
    bodies = [bodies[i] for i in order]

    one = service(dynamodb, ONE_BY_ONE, details)
    for b in bodies:
        one.record(b)
    processor = LedgerProcessor(service(dynamodb, TABLE, details))
    start = 0
    while start < len(bodies):
        cut = start + rng.randint(1, 10)
        event = sqs_event(bodies[start:cut], "batchpilot-LedgerQueue")
        assert process_partial_response(event, processor.record_handler, processor) == {
            "batchItemFailures": []
        }
        start = cut

    folded = table_items(dynamodb, TABLE)
    assert folded == table_items(dynamodb, ONE_BY_ONE)
    jobs_ = [
        job_from_item({**item, "version": 0})
        for item in folded.values()
        if item["pk"].startswith("ledger#job#")
    ]
    aggregates = {
        (agg := aggregate_from_item(item)).key: agg.total
        for item in folded.values()
        if item["pk"].startswith("ledger#agg#")
    }
    assert aggregates == recount(jobs_)
