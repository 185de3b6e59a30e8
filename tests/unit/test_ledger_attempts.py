"""Attempt identity in the ledger: attempt numbers and preemptions from which attempt an event is
about (its start, ``attempts[].startedAt`` / ``startedAt``), not from how long ``attempts[]`` is.

AWS Batch lists an attempt in ``attempts[]`` once it has stopped (AWS Batch API Reference,
``AttemptDetail``), so the RUNNING event of a job's second attempt already lists the first."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from batchpilot.ledger.fleet import effect_points
from batchpilot.ledger.model import JobDetails, JobStatus, LedgerJob, Observation, PreemptionPhase, transition
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.classification import JobKind
from batchpilot_local.testing.ledger import FakeBatch, ListSink, MemoryLedgerStore
from batchpilot_local.testing.samples import envelope, service_job
from hypothesis import given
from hypothesis import strategies as st

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
ARN = "arn:aws:batch:us-east-1:111122223333:service-job/p-1"
SIZED = JobDetails(queue="q", environment="env", quota_share="research", instances=4, sized=True)


def at(minute: float) -> datetime:
    return T0 + timedelta(minutes=minute)


def cycles(preemptions: int) -> list[Observation]:
    """``preemptions`` attempts, each started, preemption started and completed (with the
    ``preemptionSummary`` count AWS Batch sends), and the requeue's state change; then a last
    attempt. Attempt ``n`` starts at minute ``100 n + 10``; RUNNING events list earlier attempts."""
    out: list[Observation] = [Observation(ARN, JobKind.SERVICE_JOB, JobStatus.RUNNABLE, at(0), details=SIZED)]
    for n in range(preemptions + 1):
        start = at(100 * n + 10)
        out.append(
            Observation(
                ARN,
                JobKind.SERVICE_JOB,
                JobStatus.RUNNING,
                start,
                details=SIZED,
                attempts=n or None,
                started_at=start,
                preempted_count=n,
            )
        )
        if n == preemptions:
            break
        for minute, phase in (
            (100 * n + 60, PreemptionPhase.STARTED),
            (100 * n + 61, PreemptionPhase.COMPLETED),
        ):
            status = JobStatus.RUNNING if phase is PreemptionPhase.STARTED else JobStatus.RUNNABLE
            out.append(
                Observation(
                    ARN,
                    JobKind.SERVICE_JOB,
                    status,
                    at(minute),
                    preemption=phase,
                    preempted_count=n + (phase is PreemptionPhase.COMPLETED),
                    preempted_started=start if phase is PreemptionPhase.COMPLETED else None,
                )
            )
        out.append(
            Observation(
                ARN,
                JobKind.SERVICE_JOB,
                JobStatus.RUNNABLE,
                at(100 * n + 62),
                details=SIZED,
                attempts=n + 1,
                preempted_count=n + 1,
            )
        )
    return out


def earlier_start(n: int) -> int:
    return int(at(100 * n + 10).timestamp() * 1000)


def run(observations: list[Observation]) -> tuple[LedgerJob | None, int, int]:
    """The final record, Preemptions points and PreemptionsCompleted points emitted."""
    job: LedgerJob | None = None
    started = completed = 0
    for o in observations:
        change = transition(job, o)
        if change is None:
            continue
        job = change.new
        names = [p.name for p in effect_points(change.new, change.effects, at(0))]
        started += names.count("Preemptions")
        completed += names.count("PreemptionsCompleted")
    return job, started, completed


def test_each_preemption_of_a_requeued_job_is_counted_once() -> None:
    job, started, completed = run(cycles(3))
    assert job is not None and job.status is JobStatus.RUNNING
    assert (job.preemptions, started, completed) == (3, 3, 3)
    assert job.attempts == 4  # the fourth attempt is running


def test_a_running_event_listing_earlier_attempts_starts_a_new_attempt() -> None:
    job, _, _ = run(cycles(1))
    assert job is not None and job.attempts == 2 and job.attempt_started_at == at(110)


@given(st.integers(1, 4), st.data())
def test_preemptions_equal_the_preemption_transitions_in_any_delivery_order(
    n: int, data: st.DataObject
) -> None:
    events = cycles(n)
    twice = data.draw(st.lists(st.sampled_from(events), max_size=len(events)))
    delivered = data.draw(st.permutations(events + twice))
    job, started, completed = run(delivered)
    assert job is not None
    # Whatever the order, the record counts each preemption once (the summary's count is a
    # floor), and no preemption is emitted twice.
    assert job.preemptions == n
    assert started <= n and completed <= n
    # In order, with duplicates delivered late, each preemption is emitted exactly once.
    in_order, started, completed = run(events + twice)
    assert in_order is not None and (in_order.preemptions, started, completed) == (n, n, n)


def test_replayed_preemptions_through_the_service_count_three_of_three() -> None:
    """The user's scenario through the service: three preemptions, each event delivered twice."""
    store, sink = MemoryLedgerStore(), ListSink()
    settings_ = LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": "t"})
    service = LedgerService(settings_, store, FakeBatch(), sink, lambda: at(400))
    bodies: list[tuple[float, dict[str, Any]]] = [(0, service_job("RUNNABLE", jobArn=ARN, jobQueue="q"))]
    for n in range(4):
        start = at(100 * n + 10)
        earlier = [
            {
                "startedAt": int(at(100 * k + 10).timestamp() * 1000),
                "stoppedAt": int(at(100 * k + 61).timestamp() * 1000),
            }
            for k in range(n)
        ]
        bodies.append(
            (
                100 * n + 10,
                service_job(
                    "RUNNING",
                    jobArn=ARN,
                    jobQueue="q",
                    attempts=earlier,
                    startedAt=int(start.timestamp() * 1000),
                    preemptionSummary={"preemptedAttemptCount": n},
                ),
            )
        )
        if n == 3:
            break
        lost = {"startedAt": earlier_start(n), "stoppedAt": int(at(100 * n + 61).timestamp() * 1000)}
        summary = {"preemptedAttemptCount": n + 1, "recentPreemptedAttempts": [lost]}
        bodies.append(
            (
                100 * n + 60,
                envelope(
                    "Batch Service Job Preemption Started", {"preemptedJobArn": ARN, "status": "RUNNING"}
                ),
            )
        )
        bodies.append(
            (
                100 * n + 61,
                envelope(
                    "Batch Service Job Preemption Completed",
                    {"preemptedJobArn": ARN, "status": "RUNNABLE", "preemptionSummary": summary},
                ),
            )
        )
    for minute, body in bodies:
        body["time"] = at(minute).isoformat()
    for _, body in bodies:
        for _ in range(2):
            service.record(json.dumps(body))
    service.flush()
    stored = store.get(ARN)
    assert stored is not None and stored.preemptions == 3
    assert len(sink.values("Preemptions", JobQueue="q")) == 3
