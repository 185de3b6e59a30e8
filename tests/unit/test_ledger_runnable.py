"""The ledger's RUNNABLE index (per-minute ``OldestRunnableAge`` and the starvation check on every
run, not only on reconciled queues) and ``LostInstanceHours`` measured from the newest checkpoint
(``Basis``), with in-memory ports."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from batchpilot.ledger.model import (
    Basis,
    JobDetails,
    JobStatus,
    Observation,
    PreemptionPhase,
    transition,
    with_checkpoint,
)
from batchpilot.ledger.ports import ListedJob, QueueInfo
from batchpilot.ledger.runnable import RunnableEntry, runnable_changes, runnable_entry
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.classification import JobKind
from batchpilot.shared.own_events import JobStarving, StarvationReason
from batchpilot_local.testing.ledger import (
    FakeBatch,
    ListPublisher,
    ListSink,
    MemoryCheckpoints,
    MemoryLedgerStore,
    recount_runnable,
)
from batchpilot_local.testing.samples import envelope, service_job

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
ARN = "arn:aws:batch:us-east-1:111122223333:service-job/"
CKPT = "s3://ckpt-bucket/runs/a/"
SIZED = JobDetails(
    queue="q", environment="env", share_identifier="LOWPRI", instances=4, sized=True, checkpoint=CKPT
)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def obs(arn: str, status: JobStatus, minute: float, **kw: Any) -> Observation:
    return Observation(arn=arn, kind=JobKind.SERVICE_JOB, status=status, at=at(minute), **kw)


# ------------------------------------------------------------------------------- the index, pure
def test_only_transitions_into_or_out_of_runnable_touch_the_index() -> None:
    first = transition(None, obs("a", JobStatus.RUNNABLE, 0, details=SIZED))
    assert first is not None
    assert runnable_changes(first) == (None, RunnableEntry("q", "LOWPRI", T0, "a"))
    started = transition(first.new, obs("a", JobStatus.STARTING, 5))
    assert started is not None and runnable_changes(started) == (RunnableEntry("q", "LOWPRI", T0, "a"), None)
    running = transition(started.new, obs("a", JobStatus.RUNNING, 6))
    assert running is not None and runnable_changes(running) == (None, None)  # no index write
    requeued = transition(running.new, obs("a", JobStatus.RUNNABLE, 30, preemption=PreemptionPhase.COMPLETED))
    assert requeued is not None
    assert runnable_changes(requeued) == (None, RunnableEntry("q", "LOWPRI", at(30), "a"))  # age restarts
    assert runnable_entry(None) is None


# ---------------------------------------------------------------- per-minute OldestRunnableAge
def fleet(**env: str) -> tuple[LedgerService, MemoryLedgerStore, ListSink, FakeBatch, ListPublisher]:
    """One fair-share queue reconciled every 15 minutes: HIGHPRI (weight 0.5, entitled to 80 %)
    runs 4 instances; LOWPRI (weight 2, 20 %) runs nothing and has a job waiting since T0."""
    store, sink, publisher = MemoryLedgerStore(), ListSink(), ListPublisher()
    jobs = {f"{ARN}high": ("HIGHPRI", JobStatus.RUNNING), f"{ARN}low": ("LOWPRI", JobStatus.RUNNABLE)}
    batch = FakeBatch(
        queues=[QueueInfo("q", True, "env", "arn:policy")],
        listed={
            "q": [
                ListedJob(arn, arn.rsplit("/", 1)[1], JobKind.SERVICE_JOB, status, share_identifier=share)
                for arn, (share, status) in jobs.items()
            ]
        },
        limits={"env": 8},
        weights={"arn:policy": {"HIGHPRI": 0.5, "LOWPRI": 2.0}},
    )
    settings = LedgerSettings.from_environ(
        {"BATCHPILOT_STATE_TABLE": "t", "BATCHPILOT_LEDGER_RECONCILE_MINUTES": "15", **env}
    )
    ledger = LedgerService(settings, store, batch, sink, lambda: T0, publisher=publisher)
    for arn, (share, status) in jobs.items():
        details = JobDetails(queue="q", environment="env", share_identifier=share, instances=4, sized=True)
        ledger.apply(Observation(arn, JobKind.SERVICE_JOB, status, T0, details=details))
    return ledger, store, sink, batch, publisher


def test_oldest_runnable_age_is_published_every_minute_without_listing_the_queue() -> None:
    ledger, _, sink, batch, _ = fleet()
    low = {"JobQueue": "q", "ShareIdentifier": "LOWPRI"}
    ages = []
    for minute in range(5):
        batch.calls.clear()
        summary = ledger.run(at(minute))
        ledger.flush()
        ages.append(sink.values("OldestRunnableAge", **low)[-1])
        # Minute 0 reconciles the queue; the next runs list nothing and still publish the gauge.
        assert summary.reconciled == (["q"] if minute == 0 else [])
        assert bool([c for c in batch.calls if c[0] == "list_active"]) is (minute == 0)
    assert ages == [0, 60, 120, 180, 240]
    assert sink.values("OldestRunnableAge", JobQueue="q", ShareIdentifier="HIGHPRI") == []  # none waits


def test_index_follows_starts_and_requeues_between_reconciliations() -> None:
    ledger, store, sink, _, _ = fleet()
    ledger.run(at(0))
    low2 = JobDetails(queue="q", environment="env", share_identifier="LOWPRI", instances=1, sized=True)
    ledger.apply(obs(f"{ARN}low2", JobStatus.RUNNABLE, 2, details=low2))
    ledger.apply(obs(f"{ARN}low", JobStatus.RUNNING, 3))  # the oldest starts: the next one is oldest
    ledger.run(at(4))
    ledger.flush()
    assert sink.values("OldestRunnableAge", JobQueue="q", ShareIdentifier="LOWPRI")[-1] == 120
    assert store.runnable == recount_runnable(store.jobs.values())


# ------------------------------------------------------------------ starvation on every run
def test_starvation_is_checked_every_minute_and_claimed_once_per_instance() -> None:
    ledger, store, _, batch, publisher = fleet()
    claims = store.claims
    assert ledger.run(at(0)).starving == 0  # reconciled; LOWPRI has waited 0 of 60 minutes
    for minute in range(1, 62):
        ledger.run(at(minute))
    # Published at the first run past the threshold (minute 61), not at the next reconciliation
    # (minute 75), though the queue was last listed at minute 60.
    (event,) = publisher.events
    assert isinstance(event, JobStarving) and event.job_arn == f"{ARN}low"
    assert event.waiting_seconds == 61 * 60 and event.reason is StarvationReason.WAITING_BELOW_ENTITLEMENT
    assert claims == [f"{ARN}low"]
    batch.calls.clear()
    for minute in range(62, 70):
        assert ledger.run(at(minute)).starving == 0
    assert claims == [f"{ARN}low"]  # this instance remembers its claim: no PutItem every minute
    # Another instance (a cold start) tries the conditional claim once, finds it taken.
    ledger2 = LedgerService(ledger.settings, store, batch, ListSink(), lambda: T0, publisher=publisher)
    assert ledger2.run(at(70)).starving == 0 and ledger2.run(at(71)).starving == 0
    assert claims == [f"{ARN}low", f"{ARN}low"] and len(publisher.events) == 1


# ------------------------------------------------------------------ LostInstanceHours basis
def requeue(checkpoint_minute: float | None) -> tuple[Observation, Any]:
    """A 4-instance job RUNNING from minute 10, requeued at minute 70; its newest checkpoint."""
    first = transition(None, obs("a", JobStatus.RUNNABLE, 0, details=SIZED))
    assert first is not None
    running = transition(first.new, obs("a", JobStatus.RUNNING, 10))
    assert running is not None
    lost = obs("a", JobStatus.RUNNABLE, 70, preemption=PreemptionPhase.COMPLETED)
    change = transition(running.new, lost)
    assert change is not None and change.effects.basis is Basis.ATTEMPT
    assert change.effects.lost_instance_hours == 4 * 1.0  # the whole hour-long attempt
    return lost, with_checkpoint(change, None if checkpoint_minute is None else at(checkpoint_minute))


@pytest.mark.parametrize(
    ("checkpoint_minute", "hours", "basis"),
    [
        (55, 4 * 15 / 60, Basis.CHECKPOINT),  # written during the attempt: 15 minutes lost
        (70, 0.0, Basis.CHECKPOINT),  # written at the stop: nothing lost
        (5, 4.0, Basis.ATTEMPT),  # before the attempt started: the attempt restarted from it
        (10, 4.0, Basis.ATTEMPT),  # at the start: nothing written during the attempt
        (80, 4.0, Basis.ATTEMPT),  # after the stop: the next attempt's, not this one's
        (None, 4.0, Basis.ATTEMPT),  # no checkpoint at all
    ],
)
def test_lost_hours_from_the_checkpoint_written_during_the_attempt(
    checkpoint_minute: float | None, hours: float, basis: Basis
) -> None:
    _, effects = requeue(checkpoint_minute)
    assert effects.lost_instance_hours == pytest.approx(hours) and effects.basis is basis


def preempted_bodies(arn: str) -> list[str]:
    bodies = [
        service_job("RUNNABLE", jobArn=arn, jobQueue="q"),
        service_job("RUNNING", jobArn=arn, jobQueue="q"),
        envelope("Batch Service Job Preemption Completed", {"preemptedJobArn": arn, "status": "RUNNABLE"}),
    ]
    for minute, body in zip((0, 10, 70), bodies, strict=True):
        body["time"] = at(minute).isoformat()
    return [json.dumps(b) for b in bodies]


def service_with(
    checkpoints: MemoryCheckpoints, details: dict[str, JobDetails]
) -> tuple[LedgerService, ListSink, list[tuple[str, str]]]:
    warned: list[tuple[str, str]] = []
    sink = ListSink()
    ledger = LedgerService(
        LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": "t"}),
        MemoryLedgerStore(),
        FakeBatch(details),
        sink,
        lambda: at(71),
        warn=lambda source, consequence: warned.append((source, consequence)),
        checkpoints=checkpoints,
    )
    return ledger, sink, warned


def test_the_event_path_lists_the_checkpoint_once_per_lost_attempt() -> None:
    arn = f"{ARN}ck"
    checkpoints = MemoryCheckpoints({CKPT: at(55)})
    ledger, sink, warned = service_with(checkpoints, {arn: SIZED})
    results = [ledger.record(body) for body in preempted_bodies(arn)]
    assert results[-1].fields["basis"] == "checkpoint"
    assert checkpoints.listed == [CKPT]  # only the transition that lost an attempt lists it
    low = {"JobQueue": "q", "ShareIdentifier": "LOWPRI"}
    assert sink.values("LostInstanceHours", **low, Basis="checkpoint") == [pytest.approx(1.0)]
    assert sink.values("LostInstanceHours", **low, Basis="attempt") == [] and warned == []


def test_an_unreadable_checkpoint_falls_back_to_the_whole_attempt_said_once() -> None:
    checkpoints = MemoryCheckpoints(failing=[CKPT])
    arns = [f"{ARN}f1", f"{ARN}f2"]
    ledger, sink, warned = service_with(checkpoints, dict.fromkeys(arns, SIZED))
    for arn in arns:
        results = [ledger.record(body) for body in preempted_bodies(arn)]
        assert results[-1].fields["basis"] == "attempt"
        assert results[-1].fields["checkpoint_unreadable"] == "AccessDenied"
    low = {"JobQueue": "q", "ShareIdentifier": "LOWPRI"}
    assert sink.values("LostInstanceHours", **low, Basis="attempt") == [4.0, 4.0]  # never lost
    assert warned == [
        ("checkpoint bucket ckpt-bucket", "AccessDenied: LostInstanceHours measured from the whole attempt")
    ]


def test_a_job_without_a_checkpoint_location_is_not_listed() -> None:
    arn = f"{ARN}none"
    checkpoints = MemoryCheckpoints()
    plain = JobDetails(queue="q", environment="env", share_identifier="LOWPRI", instances=4, sized=True)
    ledger, sink, _ = service_with(checkpoints, {arn: plain})
    for body in preempted_bodies(arn):
        ledger.record(body)
    assert checkpoints.listed == []
    assert sink.values("LostInstanceHours", Basis="attempt") == [4.0]
