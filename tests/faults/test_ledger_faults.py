"""The job ledger's one side effect, its TransactWriteItems (job record + aggregates), stays exact
when DynamoDB's answer is lost or the function is killed right after DynamoDB applied it: the
aggregates always equal a recount of the job records and count each job once.

The real LedgerService and LedgerStateStore run against moto's DynamoDB through the adapters'
boto3 session, with faults injected at the HTTP layer (README "Reliability")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.codec import decode
from batchpilot.io.dynamodb.ledger import LedgerStateStore, aggregate_from_item, job_from_item
from batchpilot.ledger.model import AggregateKey, Delta, JobDetails, JobStatus, Observation
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.classification import JobKind
from batchpilot_local.testing.faults import FaultKind, HttpFaults, Killed
from batchpilot_local.testing.ledger import ListSink, recount
from batchpilot_local.testing.recovery import TABLE, harness

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
ARN = "arn:aws:batch:us-east-1:111122223333:service-job/ledger-fault-1"
DETAILS = JobDetails(
    queue="q1",
    environment="env",
    share_identifier="HIGHPRI",
    instance_type="ml.p5.48xlarge",
    instances=4,
    sized=True,
)


class Details:
    """Describes from a constant (the ledger's one describe is not under test here)."""

    def describe(self, arn: str, kind: JobKind) -> JobDetails | None:
        return DETAILS


def ledger() -> LedgerService:
    """A new execution environment's ledger service (new clients), as after a kill."""
    return LedgerService(
        LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": TABLE}),
        LedgerStateStore(client("dynamodb"), TABLE),
        Details(),  # type: ignore[arg-type]  # only describe is used on the event path
        ListSink(),
        lambda: T0,
    )


def stored_and_recounted() -> tuple[dict[AggregateKey, Delta], dict[AggregateKey, Delta]]:
    jobs, aggregates = [], {}
    for page in client("dynamodb").get_paginator("scan").paginate(TableName=TABLE):
        for raw in page.get("Items", []):
            item = decode(raw)
            if item["pk"].startswith("ledger#job#"):
                jobs.append(job_from_item(item))
            elif item["pk"].startswith("ledger#agg#"):
                agg = aggregate_from_item(item)
                if not agg.total.zero:
                    aggregates[agg.key] = agg.total
    return aggregates, recount(jobs)


@pytest.mark.parametrize(
    "kind",
    [FaultKind.ACCEPTED_SERVER_ERROR, FaultKind.ACCEPTED_TIMEOUT, FaultKind.KILL_AFTER, FaultKind.THROTTLE],
)
@pytest.mark.parametrize("step", [0, 1])  # the job's first write (RUNNABLE) or its transition (RUNNING)
def test_a_lost_answer_or_a_kill_after_the_write_counts_the_job_once(kind: FaultKind, step: int) -> None:
    observations = [
        Observation(ARN, JobKind.SERVICE_JOB, JobStatus.RUNNABLE, T0),
        Observation(ARN, JobKind.SERVICE_JOB, JobStatus.RUNNING, T0 + timedelta(minutes=3)),
    ]
    with harness(), HttpFaults() as faults:
        faults.add("dynamodb", "TransactWriteItems", kind, times=1, skip=step)
        for observation in observations:
            try:
                ledger().apply(observation)
            except Killed:
                ledger().apply(observation)  # SQS delivers the record again to a new instance
            except Exception:  # the record failed and is delivered again
                ledger().apply(observation)
        ledger().apply(observations[-1])  # and a late duplicate of the last event
        assert faults.injected == [("dynamodb:TransactWriteItems", kind)]
        stored, recounted = stored_and_recounted()
    assert stored == recounted
    ((key, delta),) = stored.items()  # one job, counted once, in its latest status
    assert key.status is JobStatus.RUNNING and delta.jobs == 1 and delta.instances == 4
    assert delta.by_type == {"ml.p5.48xlarge": 4}  # the per-instance-type counter, once too
