"""Starvation: the pure rules (table), and the ledger service publishing ``Job Starving`` exactly
once per job and reason, under duplicate events, repeated runs and a failed PutEvents."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from batchpilot.ledger.model import JobDetails, JobStatus, LedgerJob, Observation
from batchpilot.ledger.ports import ListedJob, QueueInfo
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.ledger.starvation import ShareStanding, StarvationRules, share_standing, starving_event
from batchpilot.shared.classification import JobKind
from batchpilot.shared.metrics import MetricPoint, dimensions
from batchpilot.shared.own_events import JobStarving, PublishError, StarvationReason, parse_own_event
from batchpilot.shared.settings import ConfigError
from batchpilot_local.testing.ledger import (
    FakeBatch,
    ListPublisher,
    ListSink,
    MemoryLedgerStore,
    preemption_bodies,
)

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
ARN = "arn:aws:batch:us-east-1:111122223333:service-job/"
HOUR = timedelta(hours=1)
QUEUE_ARN = "arn:aws:batch:us-east-1:111122223333:job-queue/slow"


def job(
    status: JobStatus = JobStatus.RUNNABLE,
    *,
    preemptions: int = 0,
    since: datetime | None = T0,
    queue: str = "q",
) -> LedgerJob:
    details = JobDetails(queue=queue, share_identifier="LOWPRI", priority=10, name="train-7b", sized=True)
    return LedgerJob(
        arn=f"{ARN}a",
        kind=JobKind.SERVICE_JOB,
        details=details,
        status=status,
        status_at=T0,
        runnable_since=since,
        preemptions=preemptions,
    )


# ---------------------------------------------------------------------------------- pure rules
@pytest.mark.parametrize(
    ("record", "threshold", "starving"),
    [
        (job(preemptions=2), 3, False),
        (job(preemptions=3), 3, True),  # reaches N
        (job(JobStatus.RUNNING, preemptions=4), 3, True),  # past N, still active
        (job(JobStatus.FAILED, preemptions=5), 3, False),  # finished: nobody waits
        (job(preemptions=1), 1, True),
    ],
)
def test_preempted_repeatedly(record: LedgerJob, threshold: int, starving: bool) -> None:
    assert StarvationRules(preemptions=threshold).preempted_repeatedly(record) is starving


BELOW = ShareStanding(usage=5.0, entitlement=20.0)
NOTHING_IN_USE = ShareStanding(usage=None, entitlement=20.0)
AT = ShareStanding(usage=20.0, entitlement=20.0)
UNKNOWN = ShareStanding(usage=0.0, entitlement=None)


@pytest.mark.parametrize(
    ("record", "standing", "waited", "queue_minutes", "starving"),
    [
        (job(), BELOW, 2 * HOUR, {}, True),
        (job(), NOTHING_IN_USE, 2 * HOUR, {}, True),  # no usage at all is 0 %
        (job(), BELOW, HOUR, {}, False),  # exactly the threshold: not yet
        (job(), BELOW, 30 * timedelta(minutes=1), {}, False),
        (job(), AT, 5 * HOUR, {}, False),  # the share gets what it is entitled to
        (job(), UNKNOWN, 5 * HOUR, {}, False),  # no entitlement known: never called starving
        (job(JobStatus.RUNNING), BELOW, 5 * HOUR, {}, False),
        (job(since=None), BELOW, 5 * HOUR, {}, False),
        (job(queue="slow"), BELOW, 2 * HOUR, {"slow": timedelta(hours=3)}, False),  # per-queue threshold
        (job(queue="slow"), BELOW, 4 * HOUR, {"slow": timedelta(hours=3)}, True),
    ],
)
def test_waiting_below_entitlement(
    record: LedgerJob,
    standing: ShareStanding,
    waited: timedelta,
    queue_minutes: dict[str, timedelta],
    starving: bool,
) -> None:
    rules = StarvationRules(queue_waiting=queue_minutes)
    assert rules.waiting_below_entitlement(record, standing, T0 + waited) is starving


def test_share_standing_reads_usage_and_entitlement_points() -> None:
    def point(name: str, value: float, **dims: str) -> MetricPoint:
        return MetricPoint(name, "Percent", value, dimensions(**dims), T0)

    points = [
        point("ShareOfUsage", 80, JobQueue="q", ShareIdentifier="HIGHPRI"),
        point("Entitlement", 80, JobQueue="q", ShareIdentifier="HIGHPRI"),
        point("Entitlement", 20, JobQueue="q", ShareIdentifier="LOWPRI"),
        point("Entitlement", 50, JobQueue="q2", QuotaShare="research"),
        point("RunnableJobs", 3, JobQueue="q", ShareIdentifier="LOWPRI"),
    ]
    assert share_standing(points) == {
        ("q", "HIGHPRI"): ShareStanding(80, 80),
        ("q", "LOWPRI"): ShareStanding(None, 20),
        ("q2", "research"): ShareStanding(None, 50),
    }
    assert not share_standing(points)[("q", "HIGHPRI")].below_entitlement
    assert share_standing(points)[("q", "LOWPRI")].below_entitlement


def test_event_names_job_share_priority_and_how_long() -> None:
    rules = StarvationRules()
    event = starving_event(
        job(), StarvationReason.WAITING_BELOW_ENTITLEMENT, T0 + 2 * HOUR, rules, ShareStanding(5, 20)
    )
    assert (event.job_name, event.share_identifier, event.scheduling_priority) == ("train-7b", "LOWPRI", 10)
    assert event.waiting_seconds == 7200 and event.threshold == 3600
    assert (event.share_usage_percent, event.entitlement_percent) == (5, 20)
    assert "train-7b" in event.message and "LOWPRI" in event.message and "priority 10" in event.message
    assert "RUNNABLE for 2.0 h" in event.message
    preempted = starving_event(job(preemptions=3), StarvationReason.PREEMPTED_REPEATEDLY, T0 + HOUR, rules)
    assert preempted.preemptions == 3 and preempted.threshold == 3
    assert "preempted 3 times" in preempted.message
    # On the wire and back (the alerts function parses it).
    wire = json.loads(preempted.model_dump_json(exclude_none=True))
    raw = {"source": "batchpilot", "detail-type": "Job Starving", "time": T0.isoformat(), "detail": wire}
    parsed = parse_own_event(raw)
    assert isinstance(parsed, JobStarving) and parsed.reason is StarvationReason.PREEMPTED_REPEATEDLY


def test_settings_thresholds() -> None:
    settings = LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": "t"})
    assert settings.starving_preemptions == 3
    assert settings.starving_waiting == (HOUR, {})
    settings = LedgerSettings.from_environ(
        {
            "BATCHPILOT_STATE_TABLE": "t",
            "BATCHPILOT_LEDGER_STARVING_PREEMPTIONS": "5",
            "BATCHPILOT_LEDGER_STARVING_MINUTES": json.dumps({"*": 30, QUEUE_ARN: 240}),
        }
    )
    assert settings.starving_preemptions == 5
    assert settings.starving_waiting == (timedelta(minutes=30), {"slow": timedelta(hours=4)})
    for bad in ('{"q": 0}', '{"q": "an hour"}', "[60]", "sixty"):
        with pytest.raises(ConfigError, match="BATCHPILOT_LEDGER_STARVING_MINUTES"):
            LedgerSettings.from_environ(
                {"BATCHPILOT_STATE_TABLE": "t", "BATCHPILOT_LEDGER_STARVING_MINUTES": bad}
            )


# ------------------------------------------------------------------------- service: preemptions
def ledger_with(
    store: MemoryLedgerStore, publisher: ListPublisher, batch: FakeBatch | None = None, **env: str
) -> LedgerService:
    settings = LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": "t", **env})
    return LedgerService(
        settings, store, batch or FakeBatch(), ListSink(), lambda: T0 + 3 * HOUR, publisher=publisher
    )


def test_third_preemption_publishes_job_starving_exactly_once_under_duplicates() -> None:
    store, publisher = MemoryLedgerStore(), ListPublisher()
    arn = f"{ARN}p"
    batch = FakeBatch({arn: JobDetails(queue="q", share_identifier="LOWPRI", instances=2, sized=True)})
    ledger = ledger_with(store, publisher, batch)
    bodies = preemption_bodies(arn, 4, T0)
    for body in bodies[:5]:  # two preemptions: nothing yet
        ledger.record(json.dumps(body))
    assert publisher.events == []
    third = json.dumps(bodies[6])
    ledger.record(json.dumps(bodies[5]))
    result = ledger.record(third)
    assert result.fields.get("starving") == "PREEMPTED_REPEATEDLY"
    for body in (third, third, json.dumps(bodies[5])):  # redeliveries
        ledger.record(body)
    for body in bodies[7:]:  # a fourth preemption: already reported
        ledger.record(json.dumps(body))
    assert store.jobs[arn].preemptions == 4
    (event,) = publisher.events
    assert isinstance(event, JobStarving)
    assert (event.job_arn, event.job_name, event.job_queue) == (arn, "train-7b", "q")
    assert (event.share_identifier, event.scheduling_priority, event.preemptions) == ("LOWPRI", 10, 3)
    assert event.reason is StarvationReason.PREEMPTED_REPEATEDLY
    assert event.waiting_seconds is not None  # requeued: RUNNABLE since the third preemption


def test_how_long_a_job_waited_is_measured_to_its_event_not_the_clock() -> None:
    """The ledger runs 3 h after the events (a backlog, a replay): the job its third preemption
    requeued has waited no time at that event, not the 3 h since."""
    store, publisher = MemoryLedgerStore(), ListPublisher()
    arn = f"{ARN}w"
    batch = FakeBatch({arn: JobDetails(queue="q", share_identifier="LOWPRI", instances=2, sized=True)})
    ledger = ledger_with(store, publisher, batch)
    bodies = preemption_bodies(arn, 3, T0)
    for body in bodies:
        ledger.record(json.dumps(body))
    (event,) = publisher.events
    assert isinstance(event, JobStarving) and event.reason is StarvationReason.PREEMPTED_REPEATEDLY
    assert event.waiting_seconds == 0.0 and "RUNNABLE for 0 min" in event.message


def test_failed_publish_gives_the_claim_back_and_the_redelivery_publishes() -> None:
    store, publisher = MemoryLedgerStore(), ListPublisher()
    arn = f"{ARN}f"
    ledger = ledger_with(store, publisher, FakeBatch({arn: JobDetails(queue="q", sized=True)}))
    bodies = preemption_bodies(arn, 3, T0)
    for body in bodies[:-1]:
        ledger.record(json.dumps(body))
    publisher.fail_next = 1
    with pytest.raises(PublishError):
        ledger.record(json.dumps(bodies[-1]))
    assert store.starving == {}
    assert store.jobs[arn].preemptions == 3  # the ledger itself was written
    ledger.record(json.dumps(bodies[-1]))  # SQS delivers it again: a duplicate for the ledger
    ledger.record(json.dumps(bodies[-1]))
    assert [e.reason for e in publisher.events if isinstance(e, JobStarving)] == [
        StarvationReason.PREEMPTED_REPEATEDLY
    ]


def test_without_a_publisher_nothing_is_claimed() -> None:
    store = MemoryLedgerStore()
    arn = f"{ARN}n"
    settings = LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": "t"})
    ledger = LedgerService(
        settings, store, FakeBatch({arn: JobDetails(queue="q", sized=True)}), ListSink(), lambda: T0
    )
    for body in preemption_bodies(arn, 3, T0):
        ledger.record(json.dumps(body))
    assert store.jobs[arn].preemptions == 3 and store.starving == {}


# ------------------------------------------------------------------- service: waiting on schedule
def fair_share_fleet(**env: str) -> tuple[LedgerService, MemoryLedgerStore, ListPublisher, FakeBatch]:
    """HIGHPRI (weight 0.5, entitled to 80 %) runs 4 instances and has a job waiting; LOWPRI
    (weight 2, entitled to 20 %) runs nothing and has two jobs waiting since T0 and T0 + 10 min."""
    store, publisher = MemoryLedgerStore(), ListPublisher()
    queue = QueueInfo("q", True, "env", "arn:policy")
    jobs = {
        f"{ARN}high-run": ("HIGHPRI", JobStatus.RUNNING, 0),
        f"{ARN}high-wait": ("HIGHPRI", JobStatus.RUNNABLE, 0),
        f"{ARN}low-old": ("LOWPRI", JobStatus.RUNNABLE, 0),
        f"{ARN}low-new": ("LOWPRI", JobStatus.RUNNABLE, 10),
    }
    listed = [
        ListedJob(arn, arn.rsplit("/", 1)[1], JobKind.SERVICE_JOB, status, share_identifier=share)
        for arn, (share, status, _) in jobs.items()
    ]
    batch = FakeBatch(
        queues=[queue],
        listed={"q": listed},
        limits={"env": 8},
        weights={"arn:policy": {"HIGHPRI": 0.5, "LOWPRI": 2.0}},
    )
    ledger = ledger_with(store, publisher, batch, **env)
    for arn, (share, status, minute) in jobs.items():
        details = JobDetails(
            queue="q", environment="env", share_identifier=share, priority=3, instances=4, sized=True
        )
        ledger.apply(
            Observation(arn, JobKind.SERVICE_JOB, status, T0 + timedelta(minutes=minute), details=details)
        )
    return ledger, store, publisher, batch


def test_oldest_job_of_a_share_below_entitlement_is_published_once() -> None:
    ledger, store, publisher, _ = fair_share_fleet()
    summary = ledger.run(T0 + 2 * HOUR)
    assert summary.starving == 1 and summary.drift == {}
    (event,) = publisher.events
    assert isinstance(event, JobStarving)
    assert event.job_arn == f"{ARN}low-old" and event.reason is StarvationReason.WAITING_BELOW_ENTITLEMENT
    assert (event.share_identifier, event.scheduling_priority, event.waiting_seconds) == ("LOWPRI", 3, 7200)
    assert (event.share_usage_percent or 0.0, event.entitlement_percent) == (0.0, 20.0)
    # The next reconciliations of the queue find it claimed: one conditional put, nothing read.
    for minutes in (140, 160):
        assert ledger.run(T0 + timedelta(minutes=minutes)).starving == 0
    assert len(publisher.events) == 1
    assert set(store.starving) == {(f"{ARN}low-old", StarvationReason.WAITING_BELOW_ENTITLEMENT)}


def test_per_queue_threshold_and_failed_publish_on_schedule() -> None:
    ledger, _, publisher, _ = fair_share_fleet(BATCHPILOT_LEDGER_STARVING_MINUTES='{"q": 180}')
    assert ledger.run(T0 + 2 * HOUR).starving == 0  # q waits 3 h before calling a job starving
    ledger, store, publisher, _ = fair_share_fleet()
    publisher.fail_next = 1
    summary = ledger.run(T0 + 2 * HOUR)
    assert (summary.starving, summary.starving_unpublished) == (0, 1) and store.starving == {}
    assert ledger.run(T0 + 2 * HOUR + timedelta(minutes=15)).starving == 1  # the next listing retries
