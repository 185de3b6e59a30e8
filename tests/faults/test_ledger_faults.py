"""The job ledger's one side effect, its TransactWriteItems (job record + aggregates), stays exact
when DynamoDB's answer is lost or the function is killed right after DynamoDB applied it: the
aggregates always equal a recount of the job records and count each job once, whether the write
holds one observation or the fold of a job's records in an SQS batch (then only that job's records
are retried).

The real LedgerService and LedgerStateStore run against moto's DynamoDB through the adapters'
boto3 session, with faults injected at the HTTP layer (docs/reliability.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from aws_lambda_powertools.utilities.batch import process_partial_response
from batchpilot.io.clients import RETRY_ATTEMPTS, client
from batchpilot.io.dynamodb.ledger import LedgerStateStore
from batchpilot.ledger.handler import LedgerProcessor
from batchpilot.ledger.model import JobDetails, JobStatus, Observation
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.classification import JobKind
from batchpilot_local.testing.faults import FaultKind, HttpFaults, Killed
from batchpilot_local.testing.harness import sqs_event
from batchpilot_local.testing.ledger import ListSink, stored_and_recounted
from batchpilot_local.testing.recovery import TABLE, harness
from batchpilot_local.testing.samples import service_job

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
        stored, recounted = stored_and_recounted(client("dynamodb"), TABLE)
    assert stored == recounted
    ((key, delta),) = stored.items()  # one job, counted once, in its latest status
    assert key.status is JobStatus.RUNNING and delta.jobs == 1 and delta.instances == 4
    assert delta.by_type == {"ml.p5.48xlarge": 4}  # the per-instance-type counter, once too


def batch_of_two_jobs() -> list[str]:
    """Two jobs' events in one SQS batch (each RUNNABLE then RUNNING, and one duplicate)."""
    bodies = []
    for minute, status, job in (
        (0, "RUNNABLE", "a"),
        (0, "RUNNABLE", "b"),
        (3, "RUNNING", "a"),
        (3, "RUNNING", "b"),
    ):
        event = service_job(
            status, jobArn=f"{ARN}-{job}", jobId=job, jobQueue="q1", shareIdentifier="HIGHPRI"
        )
        event["time"] = (T0 + timedelta(minutes=minute)).isoformat()
        bodies.append(json.dumps(event))
    return [*bodies, bodies[2]]


def deliver(bodies: list[str]) -> set[str]:
    """One SQS batch to a new execution environment's handler: the message ids it reports failed
    (all of them when the invocation was killed)."""
    processor = LedgerProcessor(ledger())
    event = sqs_event(bodies, "batchpilot-LedgerQueue")
    try:
        response = process_partial_response(event, processor.record_handler, processor)
    except Killed:
        return {f"msg-{i}" for i in range(len(bodies))}
    return {failure["itemIdentifier"] for failure in response["batchItemFailures"]}


@pytest.mark.parametrize(
    "kind",
    [FaultKind.ACCEPTED_SERVER_ERROR, FaultKind.ACCEPTED_TIMEOUT, FaultKind.KILL_AFTER, FaultKind.THROTTLE],
)
@pytest.mark.parametrize("job", [0, 1])  # the batch's write of job a, or of job b
def test_a_lost_answer_to_a_batch_write_counts_each_job_once(kind: FaultKind, job: int) -> None:
    bodies = batch_of_two_jobs()
    with harness(), HttpFaults() as faults:
        faults.add("dynamodb", "TransactWriteItems", kind, times=1, skip=job)
        failed = deliver(bodies)
        assert faults.injected == [("dynamodb:TransactWriteItems", kind)]
        if kind is not FaultKind.KILL_AFTER:
            # Only records of the job whose write failed are retried (a, b, a, b, a: positions).
            assert failed <= {f"msg-{i}" for i in ((0, 2, 4), (1, 3))[job]}
        # SQS delivers the failed records again, then (at least once) the whole batch again.
        retried = [b for i, b in enumerate(bodies) if f"msg-{i}" in failed]
        assert not retried or deliver(retried) == set()
        assert deliver(bodies) == set()
        stored, recounted = stored_and_recounted(client("dynamodb"), TABLE)
    assert stored == recounted
    ((key, delta),) = stored.items()  # both jobs, each counted once, in their latest status
    assert key.status is JobStatus.RUNNING and delta.jobs == 2 and delta.instances == 8
    assert delta.by_type == {"ml.p5.48xlarge": 8}


@pytest.mark.parametrize("job", [0, 1])
def test_a_batch_write_that_keeps_failing_retries_only_that_jobs_records(job: int) -> None:
    bodies = batch_of_two_jobs()
    with harness(), HttpFaults() as faults:
        # Every attempt botocore makes of one job's write is throttled: its records fail.
        faults.add("dynamodb", "TransactWriteItems", FaultKind.THROTTLE, times=RETRY_ATTEMPTS, skip=job)
        assert deliver(bodies) == {f"msg-{i}" for i in ((0, 2, 4), (1, 3))[job]}
        stored, _ = stored_and_recounted(client("dynamodb"), TABLE)
        ((key, delta),) = stored.items()  # meanwhile the other job is written, counted once
        assert key.status is JobStatus.RUNNING and delta.jobs == 1
        retried = [b for i, b in enumerate(bodies) if i in ((0, 2, 4), (1, 3))[job]]
        assert deliver(retried) == set()
        stored, recounted = stored_and_recounted(client("dynamodb"), TABLE)
    assert stored == recounted
    ((key, delta),) = stored.items()
    assert key.status is JobStatus.RUNNING and delta.jobs == 2 and delta.instances == 8
