"""The ledger, recovery and capacity functions under a state table that is down, throttled or slow
(issue 25): every AWS call is bounded by the invocation's deadline (batchpilot.io.deadline, set by
``SqsProcessor.handle`` from the Lambda context and by ``schedule_entry`` for scheduled runs), so
no invocation runs past the function's ``Timeout`` (template.yaml), the records that could not
finish are reported in ``batchItemFailures`` (none lost) and each side effect happens once: a job
counted once (the ledger equals a recount), one resubmission per failed job.

Time is a fake clock, as in tests/faults/test_deadline_faults.py: botocore's backoff sleeps and
each slow call advance it, and the context's remaining time is ``TIMEOUT`` minus it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import botocore.endpoint
import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from batchpilot.io.clients import READ_TIMEOUT_SECONDS, client, session
from batchpilot.io.dynamodb.ledger import LedgerStateStore
from batchpilot.ledger.handler import LedgerProcessor
from batchpilot.ledger.model import JobDetails, JobStatus
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.recovery.handler import RecoveryProcessor
from batchpilot.shared.classification import JobKind
from batchpilot.shared.deadline import DEADLINE
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.testing.faults import Fault, FaultKind, HttpFaults
from batchpilot_local.testing.harness import aws_with_state_table, load_app, sqs_event
from batchpilot_local.testing.ledger import ListSink, stored_and_recounted
from batchpilot_local.testing.recovery import (
    BUCKET,
    TABLE,
    Harness,
    checkpoint_item,
    container_job_item,
    harness,
    service_job_item,
    training_job_item,
    world,
)
from batchpilot_local.testing.samples import sample, scheduled_event, service_job

LEDGER_TIMEOUT = 60.0  # LedgerFunction's Timeout (template.yaml)
T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
ARN = "arn:aws:batch:us-east-1:111122223333:service-job/ledger-deadline"
DETAILS = JobDetails(
    queue="q1",
    environment="env",
    share_identifier="HIGHPRI",
    instance_type="ml.p5.48xlarge",
    instances=4,
    sized=True,
)
MAX_INVOCATIONS = 12
RECOVERY_TIMEOUT = 60.0  # RecoveryFunction's Timeout (template.yaml)
DYNAMODB_OPERATIONS = (
    "TransactWriteItems",
    "GetItem",
    "UpdateItem",
    "PutItem",
    "DeleteItem",
    "Query",
    "BatchGetItem",
)


class Details:
    """Describes from a constant (the ledger's one describe is not under test here)."""

    def describe(self, arn: str, kind: JobKind) -> JobDetails | None:
        return DETAILS


class FakeTime:
    """Seconds spent in the running invocation (botocore's sleeps and slow calls add to it), and
    a Lambda context whose remaining time is the function's timeout minus them."""

    function_name = "batchpilot-function"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:111122223333:function:batchpilot-function"
    aws_request_id = "52fdfc07-2182-454f-963f-5f0f9a621d72"

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.spent = 0.0
        self.longest = 0.0

    def sleep(self, seconds: float) -> None:
        self.spent += seconds
        self.longest = max(self.longest, self.spent)

    def get_remaining_time_in_millis(self) -> int:
        return int((self.timeout - self.spent) * 1000)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTime]:
    clock = FakeTime(LEDGER_TIMEOUT)
    monkeypatch.setattr(botocore.endpoint.time, "sleep", clock.sleep)
    yield clock
    DEADLINE.clear()


@dataclass
class EveryOther(Fault):
    """Throttles every other matching request."""

    seen_requests: int = 0

    def take(self) -> bool:
        self.seen_requests += 1
        if self.seen_requests % 2:
            return False
        self.hits += 1
        return True


def ledger() -> LedgerService:
    """A ledger service on new clients (built after any test hook is on the session)."""
    return LedgerService(
        LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": TABLE}),
        LedgerStateStore(client("dynamodb"), TABLE),
        Details(),  # type: ignore[arg-type]  # only describe is used on the event path
        ListSink(),
        lambda: T0,
    )


def events(count: int) -> list[str]:
    """``count`` jobs, each RUNNABLE then RUNNING (two SQS records per job)."""
    bodies = []
    for minute, status in ((0, "RUNNABLE"), (3, "RUNNING")):
        for n in range(count):
            event = service_job(
                status, jobArn=f"{ARN}-{n}", jobId=f"j{n}", jobQueue="q1", shareIdentifier="HIGHPRI"
            )
            event["time"] = (T0 + timedelta(minutes=minute)).isoformat()
            bodies.append(json.dumps(event))
    return bodies


def invoke(fake: FakeTime, pending: list[str]) -> list[str]:
    """One invocation of the ledger's SQS entry (``LedgerProcessor.handle``) on ``pending`` with a
    fresh context; returns the bodies it reported in ``batchItemFailures`` (all of them when every
    record failed: Powertools raises and Lambda retries the batch)."""
    fake.spent = 0.0
    processor = LedgerProcessor(ledger())
    try:
        response = processor.handle(sqs_event(pending, "batchpilot-LedgerQueue"), fake)  # type: ignore[arg-type]
    except BatchProcessingError:
        return pending
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    return [body for i, body in enumerate(pending) if f"msg-{i}" in failed]


def redeliver(fake: FakeTime, pending: list[str]) -> tuple[int, float]:
    """Invoke until nothing is reported failed; returns (invocations, longest seconds of one)."""
    invocations, longest = 0, 0.0
    while pending and invocations < MAX_INVOCATIONS:
        pending = invoke(fake, pending)
        invocations += 1
        longest = max(longest, fake.spent)
    assert pending == [], f"{len(pending)} records still failing after {invocations} invocations"
    return invocations, longest


def assert_counted_once(jobs: int) -> None:
    stored, recounted = stored_and_recounted(client("dynamodb"), TABLE)
    assert stored == recounted
    ((key, delta),) = stored.items()
    assert key.status is JobStatus.RUNNING and delta.jobs == jobs and delta.instances == 4 * jobs


def test_ledger_table_down_longer_than_the_timeout_then_back(fake: FakeTime) -> None:
    bodies = events(5)
    with harness():
        faults = HttpFaults()
        for op in DYNAMODB_OPERATIONS:
            faults.add("dynamodb", op, FaultKind.SERVER_ERROR, times=None)
        with faults:
            failed = invoke(fake, bodies)
        assert faults.injected, "the table was never asked"
        assert fake.longest <= LEDGER_TIMEOUT, f"the invocation ran {fake.longest:.1f} s"
        assert len(failed) == len(bodies)  # every record handed back, none lost
        redeliver(fake, failed)
        assert_counted_once(5)


def test_ledger_table_throttled_at_half_of_its_requests(fake: FakeTime) -> None:
    bodies = events(20)
    with harness():
        faults = HttpFaults()
        faults.faults.extend(
            EveryOther("dynamodb", op, FaultKind.THROTTLE, times=None) for op in DYNAMODB_OPERATIONS
        )
        with faults:
            _, longest = redeliver(fake, bodies)
        assert faults.injected, "no request was throttled"
        assert longest <= LEDGER_TIMEOUT, f"an invocation ran {longest:.1f} s"
        assert_counted_once(20)


def test_ledger_table_slow_each_call_near_the_read_timeout(fake: FakeTime) -> None:
    def slow(**_: Any) -> None:
        fake.sleep(READ_TIMEOUT_SECONDS - 0.5)  # answered just before the client gives up

    bodies = events(10)
    with harness():
        session().events.register("before-send.dynamodb", slow, unique_id="test-slow-dynamodb")
        try:
            invocations, longest = redeliver(fake, bodies)
        finally:
            session().events.unregister("before-send.dynamodb", unique_id="test-slow-dynamodb")
        assert longest <= LEDGER_TIMEOUT, f"an invocation ran {longest:.1f} s"
        assert invocations > 1  # 20 slow writes do not fit in one invocation: some were handed back
        assert_counted_once(10)


# ------------------------------------------------------------------------------------ recovery
FAILURES = {  # sample failure event → the checkpoint its job wrote
    "service-job/failed-sagemaker-capacity": f"s3://{BUCKET}/llm/run-12/",
    "batch-job/failed-spot-reclaim": f"s3://{BUCKET}/llama-ft/run-39/",
    "sagemaker/failed-capacity-error": f"s3://{BUCKET}/llama3-70b/",
}


def recovery_world() -> dict[str, Any]:
    """One failed service job, container job and training job, each with a fresh checkpoint."""

    def fresh(name: str) -> str:
        failed_at = datetime.fromisoformat(sample(name)["time"].replace("Z", "+00:00"))
        return (failed_at - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")

    service, spot, training = FAILURES
    return world(
        service_jobs=[service_job_item(service, checkpoint_uri=FAILURES[service])],
        jobs=[container_job_item(spot)],
        training_jobs=[training_job_item(training, checkpoint_uri=FAILURES[training])],
        checkpoints=[checkpoint_item(uri, fresh(name)) for name, uri in FAILURES.items()],
    )


def recover(h: Harness, fake: FakeTime, pending: list[str]) -> list[str]:
    """One invocation of recovery's SQS entry (``RecoveryProcessor.handle``, a new execution
    environment) on ``pending``; returns the bodies reported in ``batchItemFailures``."""
    fake.spent = 0.0
    processor = RecoveryProcessor(h.recoverer())
    response = processor.handle(sqs_event(pending, "batchpilot-RecoveryQueue"), fake)  # type: ignore[arg-type]
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    return [body for i, body in enumerate(pending) if f"msg-{i}" in failed]


def recover_all(h: Harness, fake: FakeTime) -> tuple[int, float]:
    """Deliver the three failures until none is handed back (each redelivery two minutes later:
    past any record's delay); returns (invocations, longest seconds of one)."""
    pending = [json.dumps(sample(name)) for name in FAILURES]
    invocations, longest = 0, 0.0
    while pending and invocations < MAX_INVOCATIONS:
        pending = recover(h, fake, pending)
        invocations += 1
        longest = max(longest, fake.spent)
        h.time.advance(120)
    assert pending == [], f"{len(pending)} failures still handed back after {invocations} invocations"
    return invocations, longest


def assert_one_resubmission_per_failure(h: Harness) -> None:
    submits = Counter(e.action for e in h.submits())
    assert submits == {"batch:SubmitServiceJob": 1, "batch:SubmitJob": 1, "sagemaker:CreateTrainingJob": 1}
    assert sorted(e["attempt"] for e in h.published("Job Resubmitted")) == [1, 1, 1]


@pytest.fixture
def recovery_fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTime]:
    clock = FakeTime(RECOVERY_TIMEOUT)
    monkeypatch.setattr(botocore.endpoint.time, "sleep", clock.sleep)
    yield clock
    DEADLINE.clear()


def paced(h: Harness, fake: FakeTime) -> None:
    """The submit pacer's and BatchJobs' waits are spent in the invocation too."""
    wall_sleep = h.time.sleep

    def sleep(seconds: float) -> None:
        wall_sleep(seconds)
        fake.sleep(seconds)

    h.time.sleep = sleep  # type: ignore[method-assign]


def test_recovery_table_down_longer_than_the_timeout_then_back(recovery_fake: FakeTime) -> None:
    with harness(recovery_world()) as h:
        paced(h, recovery_fake)
        faults = HttpFaults()
        for op in DYNAMODB_OPERATIONS:
            faults.add("dynamodb", op, FaultKind.SERVER_ERROR, times=None)
        with faults:
            failed = recover(h, recovery_fake, [json.dumps(sample(name)) for name in FAILURES])
        assert faults.injected, "the table was never asked"
        assert recovery_fake.longest <= RECOVERY_TIMEOUT, f"the invocation ran {recovery_fake.longest:.1f} s"
        assert len(failed) == len(FAILURES)  # every record handed back, none lost
        assert h.submits() == []  # nothing submitted without its lineage reserved
        h.time.advance(120)
        recover_all(h, recovery_fake)
        assert_one_resubmission_per_failure(h)


def test_recovery_table_throttled_at_half_of_its_requests(recovery_fake: FakeTime) -> None:
    with harness(recovery_world()) as h:
        paced(h, recovery_fake)
        faults = HttpFaults()
        faults.faults.extend(
            EveryOther("dynamodb", op, FaultKind.THROTTLE, times=None) for op in DYNAMODB_OPERATIONS
        )
        with faults:
            _, longest = recover_all(h, recovery_fake)
        assert faults.injected, "no request was throttled"
        assert longest <= RECOVERY_TIMEOUT, f"an invocation ran {longest:.1f} s"
        assert_one_resubmission_per_failure(h)


def test_recovery_table_slow_each_call_near_the_read_timeout(recovery_fake: FakeTime) -> None:
    def slow(**_: Any) -> None:
        recovery_fake.sleep(READ_TIMEOUT_SECONDS - 0.5)

    with harness(recovery_world()) as h:
        paced(h, recovery_fake)
        session().events.register("before-send.dynamodb", slow, unique_id="test-slow-dynamodb")
        try:
            _, longest = recover_all(h, recovery_fake)
        finally:
            session().events.unregister("before-send.dynamodb", unique_id="test-slow-dynamodb")
        assert longest <= RECOVERY_TIMEOUT, f"an invocation ran {longest:.1f} s"
        assert_one_resubmission_per_failure(h)


# ------------------------------------------------------------------------------------ capacity
CAPACITY_TIMEOUT = 60.0  # CapacityFunction's Timeout (template.yaml)
CAPACITY_TABLE = "batchpilot-StateTable"
ACCOUNT = "111122223333"
BLOCKED_SAMPLE = "service-job-queue-blocked/misconfiguration-service-environment-max-resource"
T_RUN = datetime(2026, 11, 24, 6, 20, tzinfo=UTC)


def batch_arn(kind: str, name: str) -> str:
    return f"arn:aws:batch:us-east-1:{ACCOUNT}:{kind}/{name}"


def capacity_world() -> dict[str, Any]:
    """Environment ``sm-training`` (limit 8 instances) whose fair-share queue holds the blocked
    sample's job, RUNNABLE, needing 32 ml.p4d.24xlarge instances: one raise to 32 is due."""
    detail = sample(BLOCKED_SAMPLE)["detail"]
    payload = {
        "TrainingJobName": "t",
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 32, "VolumeSizeInGB": 50},
    }
    return {
        "service_environments": [
            {"name": "sm-training", "capacityLimits": [{"maxCapacity": 8, "capacityUnit": "NUM_INSTANCES"}]}
        ],
        "job_queues": [
            {"name": "sm-training-highpri", "serviceEnvironment": "sm-training", "scheduling": "FAIR_SHARE"}
        ],
        "service_jobs": [
            {
                "jobArn": detail["jobArn"],
                "jobName": detail["jobName"],
                "jobQueue": "sm-training-highpri",
                "status": "RUNNABLE",
                "shareIdentifier": "prod",
                "createdAt": detail["createdAt"],
                "serviceRequestPayload": payload,
            }
        ],
    }


@pytest.fixture
def capacity_aws() -> Iterator[EmbeddedAws]:
    yield from aws_with_state_table(CAPACITY_TABLE, world=capacity_world())


@pytest.fixture
def capacity_fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTime]:
    clock = FakeTime(CAPACITY_TIMEOUT)
    monkeypatch.setattr(botocore.endpoint.time, "sleep", clock.sleep)
    yield clock
    DEADLINE.clear()


def capacity_app() -> ModuleType:
    """functions/capacity/app.py after a cold start (new clients, built after any test hook)."""
    policy = {"service_environments": {"sm-training": {"job_queues": ["sm-training-highpri"], "max": 48}}}
    return load_app(
        "capacity",
        {
            "POWERTOOLS_SERVICE_NAME": "batchpilot",
            "POWERTOOLS_METRICS_NAMESPACE": "BatchPilot",
            "BATCHPILOT_STATE_TABLE": CAPACITY_TABLE,
            "BATCHPILOT_EVENT_BUS": "default",
            "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS": batch_arn("service-environment", "sm-training"),
            "BATCHPILOT_CAPACITY_JOB_QUEUES": batch_arn("job-queue", "sm-training-highpri"),
            "BATCHPILOT_CAPACITY_POLICY": json.dumps(policy),
        },
    )


def capacity_invoke(fake: FakeTime, event: dict[str, Any]) -> Any:
    """One invocation of capacity's ``lambda_handler`` (a cold start) with a fresh context."""
    fake.spent = 0.0
    return capacity_app().lambda_handler(event, fake)


def updates(aws: EmbeddedAws) -> list[int]:
    """The maxCapacity of every UpdateServiceEnvironment AWS accepted so far."""
    return [
        e.params["capacityLimits"][0]["maxCapacity"]
        for e in aws.journal
        if e.action == "batch:UpdateServiceEnvironment" and e.succeeded
    ]


def capacity_faults(kind: str) -> HttpFaults:
    """The state table down (every request a 500) or throttled at half of its requests."""
    faults = HttpFaults()
    if kind == "down":
        for op in DYNAMODB_OPERATIONS:
            faults.add("dynamodb", op, FaultKind.SERVER_ERROR, times=None)
    else:
        faults.faults.extend(
            EveryOther("dynamodb", op, FaultKind.THROTTLE, times=None) for op in DYNAMODB_OPERATIONS
        )
    return faults


def schedule_until_done(fake: FakeTime, tick: dict[str, Any]) -> tuple[int, float]:
    """The same scheduled event until its run has no error (a retry of the tick); returns
    (invocations, longest seconds of one)."""
    invocations, longest, errors = 0, 0.0, ["not run"]
    while errors and invocations < MAX_INVOCATIONS:
        errors = capacity_invoke(fake, tick)["errors"]
        invocations += 1
        longest = max(longest, fake.spent)
    assert errors == [], errors
    return invocations, longest


def queue_until_done(fake: FakeTime, pending: list[str]) -> tuple[int, float]:
    """CapacityQueue batches until none is reported failed; returns (invocations, longest)."""
    invocations, longest = 0, 0.0
    while pending and invocations < MAX_INVOCATIONS:
        try:
            response = capacity_invoke(fake, sqs_event(pending, "batchpilot-CapacityQueue"))
            failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        except BatchProcessingError:  # every record failed: Lambda retries the batch
            failed = {f"msg-{i}" for i in range(len(pending))}
        pending = [body for i, body in enumerate(pending) if f"msg-{i}" in failed]
        invocations += 1
        longest = max(longest, fake.spent)
    assert pending == [], f"{len(pending)} records still failing after {invocations} invocations"
    return invocations, longest


@pytest.mark.parametrize("kind", ["down", "throttled"])
def test_capacity_schedule_table_down_or_throttled(
    capacity_aws: EmbeddedAws, capacity_fake: FakeTime, kind: str
) -> None:
    tick = scheduled_event(T_RUN)
    faults = capacity_faults(kind)
    with faults:
        first = capacity_invoke(capacity_fake, tick)
        if kind == "throttled":
            schedule_until_done(capacity_fake, tick)
    assert faults.injected, "the table was never asked"
    assert capacity_fake.longest <= CAPACITY_TIMEOUT, f"a run took {capacity_fake.longest:.1f} s"
    if kind == "down":
        assert first["errors"] and first["updated"] == []  # reported, and nothing changed blind
        schedule_until_done(capacity_fake, tick)  # the table is back: the tick retried
    capacity_invoke(capacity_fake, tick)  # and once more: the decision is made, not made again
    assert updates(capacity_aws) == [24]  # one UpdateServiceEnvironment: 8 → 8 + max_step 16


@pytest.mark.parametrize("kind", ["down", "throttled"])
def test_capacity_queue_table_down_or_throttled(
    capacity_aws: EmbeddedAws, capacity_fake: FakeTime, kind: str
) -> None:
    body = json.dumps(sample(BLOCKED_SAMPLE))
    faults = capacity_faults(kind)
    with faults:
        if kind == "down":
            try:
                response = capacity_invoke(capacity_fake, sqs_event([body], "batchpilot-CapacityQueue"))
                failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
            except BatchProcessingError:
                failed = ["msg-0"]
            assert failed == ["msg-0"]  # handed back, not lost
            assert updates(capacity_aws) == []
        else:
            queue_until_done(capacity_fake, [body])
    assert faults.injected, "the table was never asked"
    assert capacity_fake.longest <= CAPACITY_TIMEOUT, f"an invocation ran {capacity_fake.longest:.1f} s"
    queue_until_done(capacity_fake, [body])  # redelivered (the table back)
    queue_until_done(capacity_fake, [body])  # and a duplicate delivery within the minute
    assert updates(capacity_aws) == [32]  # one UpdateServiceEnvironment: to the blocked job's 32


def test_capacity_table_slow_each_call_near_the_read_timeout(
    capacity_aws: EmbeddedAws, capacity_fake: FakeTime
) -> None:
    def slow(**_: Any) -> None:
        capacity_fake.sleep(READ_TIMEOUT_SECONDS - 0.5)

    tick, body = scheduled_event(T_RUN), json.dumps(sample(BLOCKED_SAMPLE))
    session().events.register("before-send.dynamodb", slow, unique_id="test-slow-dynamodb")
    try:
        runs = [capacity_invoke(capacity_fake, tick) for _ in range(2)]
        scheduled_longest = capacity_fake.longest
        try:
            failed = capacity_invoke(capacity_fake, sqs_event([body], "batchpilot-CapacityQueue"))
        except BatchProcessingError:
            failed = {"batchItemFailures": [{"itemIdentifier": "msg-0"}]}
    finally:
        session().events.unregister("before-send.dynamodb", unique_id="test-slow-dynamodb")
    assert scheduled_longest <= CAPACITY_TIMEOUT and capacity_fake.longest <= CAPACITY_TIMEOUT
    assert [run["errors"] for run in runs] == [
        ["sm-training: DeadlineExceeded: capacity change of sm-training: 22.0 s left, needs up to 39.0 s"],
        ["sm-training: DeadlineExceeded: capacity change of sm-training: 31.5 s left, needs up to 39.0 s"],
    ]  # the change, its claim and its undo would not fit after four (then three) slow reads
    assert failed["batchItemFailures"] == [{"itemIdentifier": "msg-0"}]  # handed back, not lost
    assert updates(capacity_aws) == []
    # The table fast again: nothing claimed without its change, so no cooldown holds it back.
    schedule_until_done(capacity_fake, tick)
    queue_until_done(capacity_fake, [body])  # the redelivered record: cooldown after the raise
    capacity_invoke(capacity_fake, tick)
    assert updates(capacity_aws) == [24]  # one UpdateServiceEnvironment for the one decision


# ------------------------------------------------------------------------------ ledger schedule
def ledger_app() -> ModuleType:
    """functions/ledger/app.py after a cold start (new clients, built after any test hook)."""
    return load_app(
        "ledger", {"BATCHPILOT_STATE_TABLE": CAPACITY_TABLE, "POWERTOOLS_SERVICE_NAME": "batchpilot"}
    )


def scheduled_ledger_runs(fake: FakeTime, tick: dict[str, Any], times: int) -> list[str]:
    """``times`` invocations of the ledger's scheduled entry on ``tick`` (a run that raises is a
    failed invocation: EventBridge Scheduler retries the tick); returns each one's outcome."""
    outcomes = []
    for _ in range(times):
        fake.spent = 0.0
        try:
            ledger_app().lambda_handler(tick, fake)
            outcomes.append("ok")
        except Exception as exc:  # the invocation failed: the tick is retried
            outcomes.append(type(exc).__name__)
    return outcomes


@pytest.mark.parametrize("kind", ["down", "throttled", "slow"])
def test_ledger_schedule_under_a_faulty_table(
    capacity_aws: EmbeddedAws, capacity_fake: FakeTime, kind: str
) -> None:
    def slow(**_: Any) -> None:
        capacity_fake.sleep(READ_TIMEOUT_SECONDS - 0.5)

    tick = scheduled_event(T_RUN)
    faults = capacity_faults(kind) if kind != "slow" else HttpFaults()
    if kind == "slow":
        session().events.register("before-send.dynamodb", slow, unique_id="test-slow-dynamodb")
    try:
        with faults:
            faulty = scheduled_ledger_runs(capacity_fake, tick, 3)
    finally:
        session().events.unregister("before-send.dynamodb", unique_id="test-slow-dynamodb")
    assert capacity_fake.longest <= LEDGER_TIMEOUT, f"a run took {capacity_fake.longest:.1f} s ({faulty})"
    if kind == "down":
        assert faults.injected and "ok" not in faulty, faulty  # the run fails, and is retried
    assert scheduled_ledger_runs(capacity_fake, tick, 1) == ["ok"]  # the table fine again
    assert scheduled_ledger_runs(capacity_fake, scheduled_event(T_RUN + timedelta(hours=1)), 1) == ["ok"]
    stored, recounted = stored_and_recounted(client("dynamodb"), CAPACITY_TABLE)
    assert stored == recounted
    ((key, delta),) = stored.items()  # the blocked job, reconciled into the ledger once
    assert key.status is JobStatus.RUNNABLE and delta.jobs == 1 and delta.instances == 32
