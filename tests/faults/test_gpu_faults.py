"""The GPU activity check's side effects (the episode claim PutItem, PutEvents, the confirm
UpdateItem; GetMetricData) under faults: one ``Job GPU Idle`` per job and episode whatever the
duplicate runs, a throttled GetMetricData never read as idle, a kill between the claim and the
publish still publishing the one fact (after the claim's lease), every copy under the one key the
alerts function sends one message for.

The real GpuActivityService, GpuEpisodeStore and CloudWatchSeries run against the embedded AWS
(moto's DynamoDB and CloudWatch, its GetMetricData answering the series seeded by PutMetricData),
faults injected at the HTTP layer (docs/reliability.md); the ledger's records are in memory."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from batchpilot.gpu.service import GpuActivityService, GpuRunSummary
from batchpilot.io.batch import ServiceJobAttempts
from batchpilot.io.clients import client
from batchpilot.io.cloudwatch import MAX_QUERIES, CloudWatchSeries
from batchpilot.io.dynamodb.gpu import EPISODE_LEASE, GpuEpisodeStore
from batchpilot.ledger.model import JobDetails, JobStatus, LedgerJob
from batchpilot.shared.classification import JobKind
from batchpilot.shared.own_events import GpuIdleReason, JobGpuIdle
from batchpilot_local.testing.alerts import fact_of, own_envelope
from batchpilot_local.testing.faults import FaultKind, HttpFaults, Killed
from batchpilot_local.testing.ledger import ListPublisher, ListSink, MemoryLedgerStore
from batchpilot_local.testing.recovery import TABLE, harness

STARTED = datetime(2026, 11, 20, 21, 0, tzinfo=UTC)
IDLE_AT = STARTED + timedelta(minutes=15 + 30)  # warm-up, then the whole window
ARN = "arn:aws:sagemaker:us-east-1:111122223333:training-job/gpu-fault-1"


def world(*instances: int, value: float = 16.0) -> dict[str, object]:
    """Standalone training jobs ``gpu-fault-1``, ``-2``, ... of ``instances`` hosts each (default
    one job of 2) at ``value`` (percent summed over a host's 8 GPUs: 16 is 2 %), one datapoint a
    minute from their start on."""
    end = (STARTED + timedelta(hours=1)).isoformat()
    return {
        "gpu_metrics": [
            {"host": f"gpu-fault-{j}/algo-{n}", "from": STARTED.isoformat(), "to": end, "value": value}
            for j, count in enumerate(instances or (2,), start=1)
            for n in range(1, count + 1)
        ]
    }


def ledger(*sizes: int) -> MemoryLedgerStore:
    store = MemoryLedgerStore()
    for j, instances in enumerate(sizes or (2,), start=1):
        name = f"gpu-fault-{j}"
        details = JobDetails(instance_type="ml.p4d.24xlarge", instances=instances, name=name, sized=True)
        arn = f"arn:aws:sagemaker:us-east-1:111122223333:training-job/{name}"
        store.jobs[arn] = LedgerJob(
            arn, JobKind.TRAINING_JOB, details, JobStatus.RUNNING, STARTED, attempt_started_at=STARTED
        )
    return store


def check(
    store: MemoryLedgerStore, publisher: ListPublisher, now: datetime, sink: ListSink | None = None
) -> GpuRunSummary:
    """One scheduled run by a new Lambda instance (new clients, nothing remembered) at ``now``."""
    service = GpuActivityService(
        jobs=store,
        names=ServiceJobAttempts(client("batch")),
        metrics=CloudWatchSeries(client("cloudwatch")),
        episodes=GpuEpisodeStore(client("dynamodb"), TABLE),
        sink=sink or ListSink(),
        publisher=publisher,
    )
    return service.run(now)


def test_duplicate_runs_publish_one_fact_per_episode() -> None:
    publisher = ListPublisher()
    with harness(world()):
        store = ledger()
        assert check(store, publisher, IDLE_AT - timedelta(minutes=1)).idle == 0  # 29 minutes: not yet
        for at in (IDLE_AT, IDLE_AT, IDLE_AT + timedelta(minutes=1), IDLE_AT + timedelta(minutes=20)):
            check(store, publisher, at)  # the same minute twice (a redelivered schedule), then later runs
    assert [type(e) for e in publisher.events] == [JobGpuIdle]
    event = publisher.events[0]
    assert isinstance(event, JobGpuIdle) and event.job_arn == ARN and event.gpus == 16
    assert event.idle_since == STARTED + timedelta(minutes=15)


def series(start: datetime, minutes: int, value: float) -> dict[str, object]:
    """A world of ``minutes`` datapoints of ``value`` from ``start`` on both hosts of gpu-fault-1."""
    end = (start + timedelta(minutes=minutes)).isoformat()
    hosts = ("gpu-fault-1/algo-1", "gpu-fault-1/algo-2")
    return {"gpu_metrics": [{"host": h, "from": start.isoformat(), "to": end, "value": value} for h in hosts]}


def test_activity_back_ends_the_episode_and_a_new_idle_spell_is_a_new_fact() -> None:
    publisher = ListPublisher()
    with harness(world()) as h:
        store = ledger()
        assert check(store, publisher, IDLE_AT).idle == 1
        h.aws.seed(series(IDLE_AT, 2, 600.0))  # 75 % for two minutes
        assert check(store, publisher, IDLE_AT + timedelta(minutes=2)).resolved == 1
        h.aws.seed(series(IDLE_AT + timedelta(minutes=2), 40, 0.0))  # then idle again
        assert check(store, publisher, IDLE_AT + timedelta(minutes=20)).idle == 0  # 18 minutes
        assert check(store, publisher, IDLE_AT + timedelta(minutes=32)).idle == 1  # 30: a new episode
    assert [e.reason for e in publisher.events if isinstance(e, JobGpuIdle)] == [
        GpuIdleReason.IDLE,
        GpuIdleReason.ACTIVE,  # the first episode's resolution
        GpuIdleReason.IDLE,
    ]
    keys = [fact_of(own_envelope(e)).key for e in publisher.events]
    assert len(keys) == 3 and len(set(keys)) == 3  # two episodes and a resolution: three messages


def test_duplicate_runs_publish_one_resolution() -> None:
    publisher = ListPublisher()
    with harness(world()) as h:
        store = ledger()
        assert check(store, publisher, IDLE_AT).idle == 1
        h.aws.seed(series(IDLE_AT, 10, 600.0))  # 75 % again
        back = IDLE_AT + timedelta(minutes=2)
        runs = [check(store, publisher, at) for at in (back, back, back + timedelta(minutes=1))]
    assert [r.announced for r in runs] == [1, 0, 0] and runs[0].resolved == 1
    resolutions = [
        e for e in publisher.events if isinstance(e, JobGpuIdle) and e.reason is GpuIdleReason.ACTIVE
    ]
    assert len(resolutions) == 1
    (resolution,) = resolutions
    assert resolution.idle_since == STARTED + timedelta(minutes=15)
    # Idle from the warm-up's end up to the first active minute (IDLE_AT), not up to the run.
    assert resolution.idle_seconds == (IDLE_AT - resolution.idle_since).total_seconds() == 1800
    assert "after 30 min idle" in resolution.message


def test_a_claimed_resolution_blocks_a_concurrent_run() -> None:
    # Another run claimed the resolution a minute ago (it is publishing): this run publishes none.
    publisher = ListPublisher()
    with harness(world()) as h:
        store = ledger()
        check(store, publisher, IDLE_AT)
        h.aws.seed(series(IDLE_AT, 10, 600.0))
        back = IDLE_AT + timedelta(minutes=2)
        assert GpuEpisodeStore(client("dynamodb"), TABLE).claim_resolution(ARN, back)
        summary = check(store, publisher, back + timedelta(minutes=1))
    assert summary.announced == 0 and summary.resolved == 0
    assert [e.reason for e in publisher.events if isinstance(e, JobGpuIdle)] == [GpuIdleReason.IDLE]


@pytest.mark.parametrize(
    ("operation", "kind", "published_before_the_lease"),
    [
        ("UpdateItem", FaultKind.KILL_AFTER, 0),  # resolution claimed, killed before PutEvents
        ("DeleteItem", FaultKind.KILL_BEFORE, 1),  # published, killed before the episode's delete
    ],
)
def test_a_kill_around_the_resolution_publishes_it_under_one_key(
    operation: str, kind: FaultKind, published_before_the_lease: int
) -> None:
    publisher = ListPublisher()
    with harness(world()) as h, HttpFaults() as faults:
        store = ledger()
        check(store, publisher, IDLE_AT)
        h.aws.seed(series(IDLE_AT, 40, 600.0))  # 75 % from then on
        faults.add("dynamodb", operation, kind, times=1)
        back = IDLE_AT + timedelta(minutes=2)
        with contextlib.suppress(Killed):
            check(store, publisher, back)
        assert faults.injected == [(f"dynamodb:{operation}", kind)]
        check(store, publisher, back + timedelta(minutes=1))  # the next run, within the lease
        resolutions = [
            e for e in publisher.events if isinstance(e, JobGpuIdle) and e.reason is GpuIdleReason.ACTIVE
        ]
        assert len(resolutions) == published_before_the_lease
        later = back + EPISODE_LEASE + timedelta(minutes=1)
        assert check(store, publisher, later).resolved == 1  # taken over after the lease
        assert check(store, publisher, later).resolved == 0  # and ended
    resolutions = [
        e for e in publisher.events if isinstance(e, JobGpuIdle) and e.reason is GpuIdleReason.ACTIVE
    ]
    assert len(resolutions) == 1 + published_before_the_lease
    keys = {fact_of(own_envelope(event)).key for event in resolutions}
    assert len(keys) == 1  # every copy names the one episode: one message from the alerts function


def test_a_failed_resolution_publish_gives_the_claim_back() -> None:
    publisher = ListPublisher()
    with harness(world()) as h:
        store = ledger()
        check(store, publisher, IDLE_AT)
        h.aws.seed(series(IDLE_AT, 10, 600.0))
        publisher.fail_next = 1
        back = IDLE_AT + timedelta(minutes=2)
        assert check(store, publisher, back).unpublished == 1
        assert check(store, publisher, back + timedelta(minutes=1)).announced == 1


def test_a_job_that_stops_while_idle_gets_no_resolution() -> None:
    publisher = ListPublisher()
    with harness(world()):
        store = ledger()
        check(store, publisher, IDLE_AT)
        job = store.jobs[ARN]
        store.jobs[ARN] = LedgerJob(
            ARN, job.kind, job.details, JobStatus.SUCCEEDED, STARTED, attempt_started_at=STARTED
        )
        assert check(store, publisher, IDLE_AT + timedelta(minutes=1)).resolved == 1
    assert [e.reason for e in publisher.events if isinstance(e, JobGpuIdle)] == [GpuIdleReason.IDLE]


@pytest.mark.parametrize("times", [1, None])
def test_a_throttled_get_metric_data_is_never_idle(times: int | None) -> None:
    publisher, sink = ListPublisher(), ListSink()
    with harness(world()), HttpFaults() as faults:
        faults.add("cloudwatch", "GetMetricData", FaultKind.THROTTLE, times=times)
        summary = check(ledger(), publisher, IDLE_AT, sink)
        throttled = [kind for action, kind in faults.injected if action == "cloudwatch:GetMetricData"]
    if times == 1:  # botocore's standard retry mode tries again: read, decided
        assert throttled == [FaultKind.THROTTLE] and summary.unread == 0 and len(publisher.events) == 1
        return
    assert len(throttled) >= 2  # botocore's retries, all throttled
    assert summary.unread == summary.queries == 4 and "Throttling" in summary.errors[0]
    assert publisher.events == [] and sink.pending == []  # no fact, no gauge from missing data


def test_one_failed_request_leaves_the_others_read() -> None:
    # A job of 250 hosts (500 queries: one request) and one of 2 (a second request); the first
    # request is throttled for good (every attempt botocore makes), the second is read.
    publisher, sink = ListPublisher(), ListSink()
    with harness(world(250, 2)), HttpFaults() as faults:
        faults.add("cloudwatch", "GetMetricData", FaultKind.THROTTLE, times=6)  # one call's attempts
        summary = check(ledger(250, 2), publisher, IDLE_AT, sink)
    assert summary.queries == 504 > MAX_QUERIES and summary.unread == MAX_QUERIES
    assert [e.job_arn for e in publisher.events if isinstance(e, JobGpuIdle)] == [ARN[:-1] + "2"]
    assert {p.name for p in sink.pending} == {"GpuActivity", "GpuActivityP10", "IdleGpuHours"}


@pytest.mark.parametrize(
    ("operation", "kind", "published_before_the_lease"),
    [
        ("PutItem", FaultKind.KILL_AFTER, 0),  # claimed, killed before PutEvents
        ("UpdateItem", FaultKind.KILL_BEFORE, 1),  # published, killed before the confirm
        ("UpdateItem", FaultKind.KILL_AFTER, 1),  # confirmed, killed before the run ended
    ],
)
def test_a_kill_around_the_publish_still_publishes_the_one_fact(
    operation: str, kind: FaultKind, published_before_the_lease: int
) -> None:
    publisher = ListPublisher()
    with harness(world()), HttpFaults() as faults:
        store = ledger()
        faults.add("dynamodb", operation, kind, times=1)
        with contextlib.suppress(Killed):
            check(store, publisher, IDLE_AT)
        assert faults.injected == [(f"dynamodb:{operation}", kind)]
        check(store, publisher, IDLE_AT + timedelta(minutes=1))  # the next run, within the lease
        assert len(publisher.events) == published_before_the_lease
        later = IDLE_AT + EPISODE_LEASE + timedelta(minutes=1)
        for _ in range(2):  # after the lease, and once more
            check(store, publisher, later)
    confirmed = kind is FaultKind.KILL_AFTER and operation == "UpdateItem"
    assert 1 <= len(publisher.events) == (1 if confirmed else 1 + published_before_the_lease)
    keys = {fact_of(own_envelope(event)).key for event in publisher.events}
    assert len(keys) == 1  # every copy names the one episode: one message from the alerts function


def test_a_failed_publish_gives_the_claim_back() -> None:
    publisher = ListPublisher()
    publisher.fail_next = 1
    with harness(world()):
        store = ledger()
        assert check(store, publisher, IDLE_AT).unpublished == 1
        assert check(store, publisher, IDLE_AT + timedelta(minutes=1)).idle == 1
    assert len(publisher.events) == 1


def test_a_throttled_describe_of_a_service_job_leaves_it_unread_not_the_run_failed() -> None:
    # A service job's training job comes from DescribeServiceJob; throttled for good, the job is
    # counted uncovered this run and the standalone job beside it is still decided.
    publisher = ListPublisher()
    service_arn = "arn:aws:batch:us-east-1:111122223333:service-job/gpu-fault-sj"
    with harness(world()), HttpFaults() as faults:
        store = ledger()
        details = JobDetails(queue="q", instance_type="ml.p4d.24xlarge", instances=1, name="sj", sized=True)
        store.jobs[service_arn] = LedgerJob(
            service_arn, JobKind.SERVICE_JOB, details, JobStatus.RUNNING, STARTED, attempt_started_at=STARTED
        )
        store.registry["q"] = "env"
        faults.add("batch", "DescribeServiceJob", FaultKind.THROTTLE, times=None)
        summary = check(store, publisher, IDLE_AT)
    assert summary.uncovered == 1 and "DescribeServiceJob" in summary.errors[0]
    assert [e.job_arn for e in publisher.events if isinstance(e, JobGpuIdle)] == [ARN]


def test_a_job_the_ledger_believes_running_that_sagemaker_ended_is_not_alerted() -> None:
    # SageMaker ended the training job 10 minutes ago (its hosts stopped publishing) and the ledger
    # missed the state change: idle datapoints up to the end, none since. The check decides nothing
    # (missing data is never idle); the ledger's reconciliation corrects the record
    # (tests/integration/test_ledger_store.py: a RUNNING job AWS no longer lists), after which the
    # job leaves the check's running set.
    publisher, sink = ListPublisher(), ListSink()
    ended = IDLE_AT + timedelta(minutes=5)
    with harness(series(STARTED, int((ended - STARTED) / timedelta(minutes=1)), 16.0)):
        store = ledger()
        summary = check(store, publisher, ended + timedelta(minutes=10), sink)
        assert summary.running == 1 and summary.measured == 0 and summary.idle == 0
        store.jobs[ARN] = replace(store.jobs[ARN], status=JobStatus.SUCCEEDED)  # reconciled
        after = check(store, publisher, ended + timedelta(minutes=11), sink)
    assert after.running == 0 and after.queries == 0
    assert publisher.events == [] and sink.pending == []
