"""The ledger's batch path (:meth:`LedgerService.records`: one read of the batch's job records, the
observations of each job folded in memory, one write per job) leaves exactly what applying the same
records one by one leaves: the records, the aggregates (equal to a recount), the RUNNABLE index,
every record's outcome and metric points, the ``Job Starving`` events; with in-memory ports."""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from batchpilot.ledger.model import JobDetails, LedgerJob
from batchpilot.ledger.service import LedgerService, RecordResult
from batchpilot.ledger.settings import LedgerSettings
from batchpilot_local.testing.ledger import (
    FakeBatch,
    ListPublisher,
    ListSink,
    MemoryCheckpoints,
    MemoryLedgerStore,
    recount,
    recount_runnable,
)
from batchpilot_local.testing.samples import batch_job, envelope, service_job
from hypothesis import given, settings
from hypothesis import strategies as st

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
ACCOUNT = "111122223333"
SERVICE_ARN = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/"
CONTAINER_ARN = f"arn:aws:batch:us-east-1:{ACCOUNT}:job/"
TYPES = ["ml.p5.48xlarge", "ml.g5.12xlarge"]
LIFE = ["SUBMITTED", "PENDING", "RUNNABLE", "SCHEDULED", "STARTING", "RUNNING"]


@dataclasses.dataclass
class Case:
    """Bodies in delivery order, cut into batches; what describes and checkpoint listings answer."""

    bodies: list[str]
    cuts: list[int]
    details: dict[str, JobDetails]
    failing: set[str]
    newest: dict[str, datetime]
    races: set[int]


def _body(event: dict[str, Any], minute: float, event_id: str) -> str:
    event["time"] = (T0 + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ")
    event["id"] = event_id
    return json.dumps(event)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """Random service and container jobs, each walking through its states (requeues, preemption
    events, an end or not); shuffled, with duplicates and late copies, then cut into batches."""
    bodies: list[str] = []
    details: dict[str, JobDetails] = {}
    failing: set[str] = set()
    newest: dict[str, datetime] = {}
    for j in range(draw(st.integers(1, 6))):
        service = draw(st.booleans())
        arn = f"{SERVICE_ARN if service else CONTAINER_ARN}job-{j}"
        queue = draw(st.sampled_from(["q1", "q2"]))
        share = draw(st.sampled_from(["HIGHPRI", "LOWPRI", None]))
        kind = draw(st.sampled_from(TYPES))
        count = draw(st.integers(1, 4))
        checkpoint = f"s3://ckpt/{j}/" if draw(st.booleans()) else None
        answer = draw(st.sampled_from(["sized", "sized", "failing", "unknown"]))
        if answer == "failing":
            failing.add(arn)
        if answer != "unknown":
            details[arn] = JobDetails(
                queue=queue,
                environment="env" if service else "",
                share_identifier=share,
                instance_type=kind if service else None,
                instances=count if service else None,
                vcpus=None if service else 8.0,
                sized=True,
                by_type=((kind, count),) if service else None,
                checkpoint=checkpoint if service else None,
            )
        if checkpoint:
            newest[checkpoint] = T0 + timedelta(minutes=draw(st.sampled_from([1, 4, 9])))
        detail: dict[str, Any] = {"jobArn": arn, "jobId": f"job-{j}", "jobQueue": queue}
        if share:
            detail["shareIdentifier"] = share
        minute, preempted = 0.0, 0
        start = draw(st.integers(0, 3))
        steps = LIFE[start:] + draw(st.lists(st.sampled_from(["RUNNABLE", "RUNNING", "PREEMPT"]), max_size=4))
        if draw(st.booleans()):
            steps.append(draw(st.sampled_from(["SUCCEEDED", "FAILED"])))
        for n, step in enumerate(steps):
            minute += draw(st.sampled_from([0.0, 1.0, 2.0]))
            event_id = f"{j}-{n}"
            if step == "PREEMPT" and service:
                preempted += 1
                summary = {"preemptedAttemptCount": preempted}
                started = {"preemptedJobArn": arn, "status": "RUNNING", "preemptionSummary": summary}
                completed = {"preemptedJobArn": arn, "status": "RUNNABLE", "preemptionSummary": summary}
                bodies.append(
                    _body(envelope("Batch Service Job Preemption Started", started), minute, event_id)
                )
                bodies.append(
                    _body(
                        envelope("Batch Service Job Preemption Completed", completed),
                        minute + 0.5,
                        f"{event_id}c",
                    )
                )
                continue
            status = "RUNNABLE" if step == "PREEMPT" else step
            event = service_job(status, **detail) if service else batch_job(status, **detail)
            bodies.append(_body(event, minute, event_id))
    bodies.append("{not json")  # a malformed record: rejected, never retried
    bodies.append(json.dumps(envelope("Batch Job Queue Blocked", {"jobQueue": "q1"})))  # no job: invalid
    rng = random.Random(draw(st.integers(0, 2**32)))
    bodies += [rng.choice(bodies) for _ in range(rng.randint(0, len(bodies)))]  # duplicates
    # Mostly in order with late copies: SQS delivers in no particular order, events of one job
    # often close together.
    order = sorted(range(len(bodies)), key=lambda i: i + rng.uniform(-4, 4))
    bodies = [bodies[i] for i in order]
    cuts, at = [], 0
    while at < len(bodies):
        at += rng.randint(1, 10)
        cuts.append(min(at, len(bodies)))
    races = {i for i in range(len(cuts)) if rng.random() < 0.3}
    return Case(bodies, cuts, details, failing, newest, races)


def ledger(case: Case) -> tuple[LedgerService, MemoryLedgerStore, ListSink, ListPublisher, FakeBatch]:
    store, sink, publisher = MemoryLedgerStore(), ListSink(), ListPublisher()
    batch = FakeBatch(case.details, failing=case.failing)
    settings_ = LedgerSettings.from_environ(
        {"BATCHPILOT_STATE_TABLE": "t", "BATCHPILOT_LEDGER_STARVING_PREEMPTIONS": "2"}
    )
    service = LedgerService(
        settings_,
        store,
        batch,
        sink,
        lambda: T0 + timedelta(hours=1),
        publisher=publisher,
        checkpoints=MemoryCheckpoints(case.newest),
    )
    return service, store, sink, publisher, batch


def unversioned(jobs: dict[str, LedgerJob]) -> dict[str, LedgerJob]:
    return {arn: dataclasses.replace(job, version=0) for arn, job in jobs.items()}


@settings(max_examples=300, deadline=None)
@given(cases())
def test_batches_leave_exactly_what_one_by_one_leaves(case: Case) -> None:
    one, one_store, one_sink, one_events, _ = ledger(case)
    singles: list[RecordResult | Exception] = []
    for body in case.bodies:
        singles.append(one.records([body])[0])
    folded, store, sink, events, batch = ledger(case)
    results: list[RecordResult | Exception] = []
    start = 0
    for n, cut in enumerate(case.cuts):
        if n in case.races:
            store.lose_next = 1  # a concurrent writer wins the batch's first write: read, fold again
        results += folded.records(case.bodies[start:cut])
        start = cut
        assert store.aggregate_map() == recount(store.jobs.values())

    assert not [r for r in singles if isinstance(r, Exception)]
    assert results == singles  # every record's outcome and log fields
    assert sink.pending == one_sink.pending  # every record's metric points, in record order
    assert unversioned(store.jobs) == unversioned(one_store.jobs)
    assert store.aggregate_map() == one_store.aggregate_map() == recount(store.jobs.values())
    nonzero = store.aggregate_map()
    assert {k: store.quota[k] for k in nonzero} == {k: one_store.quota[k] for k in nonzero}
    assert store.runnable == one_store.runnable == recount_runnable(store.jobs.values())
    assert store.registry == one_store.registry
    assert store.starving == one_store.starving
    assert Counter(e.model_dump_json() for e in events.events) == Counter(
        e.model_dump_json() for e in one_events.events
    )
    # One read per batch (no GetItem but after a lost race), at most one write and one describe
    # per job per batch.
    assert store.batch_reads <= len(case.cuts) and store.reads <= len(case.races)
    assert store.writes <= one_store.writes
    describes = Counter(arn for call, arn in batch.calls if call == "describe")
    assert all(n <= len(case.cuts) for n in describes.values())
