"""The job ledger's pure core and service with in-memory ports: order rule, exact aggregates
(property test), requeues, preemptions, describe failures, reconciliation drift, fleet gauges."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from batchpilot.ledger.fleet import FleetInputs, fleet_points
from batchpilot.ledger.model import (
    AggregateKey,
    Delta,
    JobDetails,
    JobStatus,
    LedgerJob,
    Observation,
    PreemptionPhase,
    transition,
    type_counts,
)
from batchpilot.ledger.ports import Aggregate, ListedJob, QueueInfo
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.classification import Category, JobKind
from batchpilot.shared.instances import accelerators
from batchpilot.shared.metrics import MetricsDetail
from batchpilot_local.testing.ledger import FakeBatch, ListSink, MemoryLedgerStore, recount, recount_runnable
from batchpilot_local.testing.samples import envelope, service_job
from hypothesis import given, settings
from hypothesis import strategies as st

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
ARN = "arn:aws:batch:us-east-1:111122223333:service-job/"
SIZED = JobDetails(queue="q", environment="env", share_identifier="HIGHPRI", instances=4, sized=True)


def obs(arn: str, status: JobStatus, minute: float, **kw: Any) -> Observation:
    return Observation(
        arn=arn, kind=JobKind.SERVICE_JOB, status=status, at=T0 + timedelta(minutes=minute), **kw
    )


def service(store: MemoryLedgerStore, batch: FakeBatch | None = None, **env: str) -> LedgerService:
    settings_ = LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": "t", **env})
    return LedgerService(settings_, store, batch or FakeBatch(), ListSink(), lambda: T0 + timedelta(hours=1))


# ---------------------------------------------------------------------------------- order rule
def test_duplicate_and_late_events_change_nothing() -> None:
    first = transition(None, obs("a", JobStatus.RUNNABLE, 0, details=SIZED))
    assert first is not None
    running = transition(first.new, obs("a", JobStatus.RUNNING, 5))
    assert running is not None
    assert transition(running.new, obs("a", JobStatus.RUNNING, 5)) is None  # duplicate
    assert transition(running.new, obs("a", JobStatus.RUNNABLE, 1)) is None  # late
    assert transition(running.new, obs("a", JobStatus.STARTING, 5)) is None  # same time, lower rank
    done = transition(running.new, obs("a", JobStatus.SUCCEEDED, 9))
    assert done is not None and done.new.terminal
    assert transition(done.new, obs("a", JobStatus.RUNNING, 20)) is None  # terminal is final


def test_requeue_restarts_runnable_age_and_counts_lost_hours() -> None:
    job = transition(None, obs("a", JobStatus.RUNNABLE, 0, details=SIZED))
    assert job is not None and job.new.runnable_since == T0
    job = transition(job.new, obs("a", JobStatus.RUNNING, 10))
    assert job is not None and job.effects.queue_wait == 600 and job.new.attempts == 1
    requeued = transition(job.new, obs("a", JobStatus.RUNNABLE, 40, preemption=PreemptionPhase.COMPLETED))
    assert requeued is not None
    assert requeued.new.runnable_since == T0 + timedelta(minutes=40)
    assert requeued.new.preemptions == 1 and requeued.effects.preempted
    assert requeued.effects.lost_instance_hours == 4 * 0.5  # 4 instances x 30 minutes
    # The state change for the same requeue, a second later, counts no second preemption.
    again = transition(requeued.new, obs("a", JobStatus.RUNNABLE, 40.02, category=Category.PREEMPTION))
    assert again is not None and again.new.preemptions == 1 and not again.effects.preempted
    assert again.new.runnable_since == T0 + timedelta(minutes=40)
    second = transition(again.new, obs("a", JobStatus.RUNNING, 50))
    assert second is not None and second.new.attempts == 2 and second.effects.queue_wait is None


def test_preemption_started_is_counted_once_per_attempt() -> None:
    job = transition(None, obs("a", JobStatus.RUNNING, 0, details=SIZED))
    assert job is not None
    started = transition(job.new, obs("a", JobStatus.RUNNING, 1, preemption=PreemptionPhase.STARTED))
    assert started is not None and started.effects.preemption_started and not started.deltas
    assert transition(started.new, obs("a", JobStatus.RUNNING, 2, preemption=PreemptionPhase.STARTED)) is None


def test_unknown_size_counts_as_unsized_job() -> None:
    job = transition(None, obs("a", JobStatus.RUNNABLE, 0, details=JobDetails(queue="q")))
    assert job is not None
    ((key, delta),) = job.deltas.items()
    assert key == AggregateKey("", "q", "", JobStatus.RUNNABLE)
    assert delta == Delta(jobs=1)


# ------------------------------------------------------------------------ property: exact aggregates
STATUSES = [JobStatus.RUNNABLE, JobStatus.SCHEDULED, JobStatus.STARTING, JobStatus.RUNNING]
TYPES = ["ml.p5.48xlarge", "ml.g5.12xlarge", "ml.trn1.32xlarge"]


def instances_by_type(jobs: Iterable[LedgerJob]) -> dict[tuple[str, JobStatus, str], int]:
    """(queue, status, instance type) → instances, straight from the active sized records."""
    out: dict[tuple[str, JobStatus, str], int] = {}
    for job in jobs:
        d = job.details
        if job.terminal or not d.sized:
            continue
        pairs = d.by_type if d.by_type is not None else ((d.instance_type, d.instances or 0),)
        for kind, count in pairs:
            if kind:
                out[(d.queue, job.status, kind)] = out.get((d.queue, job.status, kind), 0) + count
    return {k: n for k, n in out.items() if n}


def aggregated_by_type(store: MemoryLedgerStore) -> dict[tuple[str, JobStatus, str], int]:
    """The same, from the aggregates' per-type counters."""
    out: dict[tuple[str, JobStatus, str], int] = {}
    for k, d in store.aggregate_map().items():
        for kind, count in d.types:
            out[(k.queue, k.status, kind)] = out.get((k.queue, k.status, kind), 0) + count
    return out


@st.composite
def populations(draw: st.DrawFn) -> tuple[list[Observation], dict[str, JobDetails], set[str]]:
    """Random jobs, each with a life of observations; shuffled, with duplicates and late copies."""
    jobs = draw(st.integers(1, 8))
    observations: list[Observation] = []
    details: dict[str, JobDetails] = {}
    failing: set[str] = set()
    for j in range(jobs):
        arn = f"{ARN}{j}"
        queue = draw(st.sampled_from(["q1", "q2"]))
        share = draw(st.sampled_from(["HIGHPRI", "MIDPRI", "LOWPRI", ""]))
        # What a describe reads: one instance type, a heterogeneous cluster (several types, maybe
        # instances of no type), a record written before types were kept, or no usable size.
        groups = draw(st.lists(st.tuples(st.sampled_from(TYPES), st.integers(1, 4)), max_size=3))
        by_type = type_counts(dict(groups))
        untyped = draw(st.sampled_from([0, 0, 1]))
        instances = sum(n for _, n in by_type) + untyped or None
        legacy = draw(st.booleans()) and len(by_type) == 1 and not untyped
        details[arn] = JobDetails(
            queue=queue,
            environment="env",
            share_identifier=share or None,
            instance_type=by_type[0][0] if len(by_type) == 1 else None,
            instances=instances,
            sized=True,
            by_type=None if legacy else by_type,
        )
        if draw(st.booleans()):
            failing.add(arn)
        steps = draw(st.lists(st.sampled_from(STATUSES), min_size=1, max_size=6))
        if draw(st.booleans()):
            steps.append(draw(st.sampled_from([JobStatus.SUCCEEDED, JobStatus.FAILED])))
        minute = 0.0
        for status in steps:
            minute += draw(st.sampled_from([0.0, 0.5, 1.0, 3.0]))
            preemption = (
                PreemptionPhase.COMPLETED if status is JobStatus.RUNNABLE and draw(st.booleans()) else None
            )
            observations.append(
                obs(
                    arn,
                    status,
                    minute,
                    details=JobDetails(queue=queue, share_identifier=share or None),
                    preemption=preemption,
                )
            )
    seed = draw(st.integers(0, 2**32))
    rng = random.Random(seed)
    extra = [rng.choice(observations) for _ in range(rng.randint(0, len(observations)))]
    shuffled = observations + extra
    rng.shuffle(shuffled)
    return shuffled, details, failing


@settings(max_examples=300, deadline=None)
@given(populations())
def test_aggregates_always_equal_a_recount(
    case: tuple[list[Observation], dict[str, JobDetails], set[str]],
) -> None:
    observations, details, failing = case
    store = MemoryLedgerStore()
    ledger = service(store, FakeBatch(details, failing=failing))
    for i, o in enumerate(observations):
        if i % 3 == 0:
            store.lose_next = 1  # a concurrent writer wins now and then: read, decide again
        ledger.apply(o)
        assert store.aggregate_map() == recount(store.jobs.values())
        # The RUNNABLE index (OldestRunnableAge, starvation) holds exactly the RUNNABLE records.
        assert store.runnable == recount_runnable(store.jobs.values())
        # The per-instance-type counters (quota-management capacity units) are exact too.
        assert aggregated_by_type(store) == instances_by_type(store.jobs.values())
    # Every job ends in the status of its latest observation (ties: the higher rank).
    for arn, job in store.jobs.items():
        mine = [o for o in observations if o.arn == arn]
        assert job.status_at == max(o.at for o in mine)


# --------------------------------------------------------------------------------- service
def test_event_for_unseen_job_is_described_once_and_never_again() -> None:
    store = MemoryLedgerStore()
    batch = FakeBatch({f"{ARN}x": SIZED})
    ledger = service(store, batch)
    arn = f"{ARN}x"
    for minute, status in ((0, "RUNNABLE"), (5, "RUNNING"), (5, "RUNNING")):
        body = service_job(status, jobArn=arn, jobId="x")
        body["time"] = (T0 + timedelta(minutes=minute)).isoformat()
        ledger.record(json.dumps(body))
    assert [c for c in batch.calls if c[0] == "describe"] == [("describe", arn)]
    job = store.jobs[arn]
    assert job.details.instances == 4 and job.details.environment == "env" and job.status is JobStatus.RUNNING


def test_failed_describe_is_counted_unsized_and_retried_on_the_next_event() -> None:
    store = MemoryLedgerStore()
    arn = f"{ARN}y"
    batch = FakeBatch({arn: SIZED}, failing=[arn])
    ledger = service(store, batch)
    ledger.apply(obs(arn, JobStatus.RUNNABLE, 0, details=JobDetails(queue="q")))
    assert store.jobs[arn].describe_failures == 1 and not store.jobs[arn].details.sized
    batch.failing.clear()
    ledger.apply(obs(arn, JobStatus.RUNNING, 1))
    assert store.jobs[arn].details.instances == 4
    assert store.aggregate_map() == recount(store.jobs.values())


def test_event_metrics() -> None:
    store = MemoryLedgerStore()
    arn = f"{ARN}z"
    sink = ListSink()
    ledger = LedgerService(
        LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": "t"}),
        store,
        FakeBatch(
            {arn: JobDetails(queue="q", environment="env", quota_share="research", instances=2, sized=True)}
        ),
        sink,
        lambda: T0,
    )
    for minute, body in (
        (0, service_job("RUNNABLE", jobArn=arn, jobQueue="q", createdAt=int(T0.timestamp() * 1000))),
        (2, service_job("RUNNING", jobArn=arn, jobQueue="q")),
        (32, envelope("Batch Service Job Preemption Started", {"preemptedJobArn": arn, "status": "RUNNING"})),
        (
            33,
            envelope(
                "Batch Service Job Preemption Completed", {"preemptedJobArn": arn, "status": "RUNNABLE"}
            ),
        ),
    ):
        body["time"] = (T0 + timedelta(minutes=minute)).isoformat()
        ledger.record(json.dumps(body))
    # The queue wait is the metrics function's QueueWaitTime (one series per concept).
    assert sink.values("QueueWaitTime", JobQueue="q", QuotaShare="research") == []
    assert sink.values("Preemptions", JobQueue="q", QuotaShare="research") == [1.0]
    assert sink.values("PreemptionsCompleted", JobQueue="q") == [1.0]
    assert sink.values("LostInstanceHours", JobQueue="q", Basis="attempt") == [2 * 31 / 60]


def test_reconciliation_repairs_drift_both_ways() -> None:
    store = MemoryLedgerStore()
    queue = QueueInfo("q", service=True, environment="env")
    gone, missed, stale = f"{ARN}gone", f"{ARN}missed", f"{ARN}stale"
    p5, g5 = "ml.p5.48xlarge", "ml.g5.12xlarge"
    typed = dataclasses.replace(SIZED, instances=3, by_type=((g5, 1), (p5, 2)))
    batch = FakeBatch(
        {gone: typed, missed: typed, stale: dataclasses.replace(typed, by_type=((p5, 3),))},
        queues=[queue],
        listed={
            "q": [
                ListedJob(
                    missed, "missed", JobKind.SERVICE_JOB, JobStatus.RUNNABLE, share_identifier="HIGHPRI"
                ),
                ListedJob(stale, "stale", JobKind.SERVICE_JOB, JobStatus.RUNNING, share_identifier="HIGHPRI"),
            ]
        },
        limits={"env": 10},
    )
    ledger = service(store, batch)
    ledger.apply(obs(gone, JobStatus.RUNNING, 0))
    ledger.apply(obs(stale, JobStatus.RUNNABLE, 0))
    running, runnable = JobStatus.RUNNING, JobStatus.RUNNABLE
    assert aggregated_by_type(store) == {("q", running, g5): 1, ("q", running, p5): 2, ("q", runnable, p5): 3}
    summary = ledger.run(T0 + timedelta(minutes=30))
    assert summary.drift == {"q:missing": 1, "q:stale": 1, "q:gone": 1}
    assert store.jobs[gone].terminal
    assert store.jobs[missed].status is JobStatus.RUNNABLE and store.jobs[missed].details.instances == 3
    assert store.jobs[stale].status is JobStatus.RUNNING
    assert store.aggregate_map() == recount(store.jobs.values())
    # The per-instance-type counters follow: the gone job's types leave, the missed job's arrive.
    assert aggregated_by_type(store) == {
        ("q", runnable, g5): 1,
        ("q", runnable, p5): 2,
        ("q", running, p5): 3,
    }
    # The next run within the interval lists nothing again.
    batch.calls.clear()
    assert ledger.run(T0 + timedelta(minutes=31)).reconciled == []
    assert not [c for c in batch.calls if c[0] == "list_active"]


def test_fleet_gauges_utilisation_and_entitlement() -> None:
    def agg(share: str, status: JobStatus, jobs: int, instances: int, sized: int | None = None) -> Aggregate:
        return Aggregate(
            AggregateKey("env", "q", share, status), Delta(jobs, jobs if sized is None else sized, instances)
        )

    aggregates = [
        agg("HIGHPRI", JobStatus.RUNNING, 2, 8),
        agg("LOWPRI", JobStatus.RUNNING, 1, 2),
        agg("LOWPRI", JobStatus.RUNNABLE, 3, 2, sized=1),  # two unsized jobs count at the mean
    ]
    inputs = FleetInputs(
        queues={"q": QueueInfo("q", True, "env", "policy")},
        aggregates={"q": aggregates},
        limits={"env": 12},
        reserved={"env": 16},
        weights={"q": {"HIGHPRI": 0.5, "LOWPRI": 2.0}},
        oldest={("q", "LOWPRI"): T0},
    )
    at = T0 + timedelta(minutes=10)
    points = {(p.name, p.dimensions): p.value for p in fleet_points(inputs, at)}
    env = (("ServiceEnvironment", "env"),)
    assert points[("Utilization", env)] == 100 * 10 / 16
    assert points[("ReservedInstances", env)] == 16
    assert points[("CapacityLimit", env)] == 12
    assert points[("IdleWhileQueued", env)] == 6  # 6 reserved free while 8 instances of work wait
    queue = (("JobQueue", "q"),)
    low = (("JobQueue", "q"), ("ShareIdentifier", "LOWPRI"))
    high = (("JobQueue", "q"), ("ShareIdentifier", "HIGHPRI"))
    # The job queue's own gauges: the alarm's and the fleet view's, one name each.
    assert points[("RunnableInstances", queue)] == 2 + 2 * 3  # queue mean: 12 instances / 4 sized jobs
    assert points[("RunnableJobs", queue)] == 3
    assert points[("InstancesInUse", queue)] == 10
    assert points[("OldestRunnableAge", queue)] == 600
    assert points[("ShareOfUsage", high)] == 80
    assert points[("Entitlement", high)] == 80  # 1/0.5 over 1/0.5 + 1/2
    assert points[("OldestRunnableAge", low)] == 600
    assert ("GpusInUse", env) not in points  # no GPUs in use: no series
    assert ("OldestRunnableAge", high) not in points  # nothing of HIGHPRI waits
    # The per-share RUNNABLE gauges are MetricsDetail=detailed only.
    assert ("RunnableInstances", low) not in points
    detailed = {(p.name, p.dimensions): p.value for p in fleet_points(inputs, at, MetricsDetail.DETAILED)}
    assert detailed[("RunnableInstances", low)] == 8 and detailed[("RunnableJobs", low)] == 3
    assert points.items() <= detailed.items()


def test_fleet_gauges_are_published_only_while_there_is_work() -> None:
    idle = Aggregate(AggregateKey("env", "q", "HIGHPRI", JobStatus.RUNNING), Delta(0, 0, 0))
    inputs = FleetInputs(
        queues={"q": QueueInfo("q", True, "env", "policy")},
        aggregates={"q": [idle]},
        limits={"env": 12, "other-env": 4},
        reserved={"env": 16, "other-env": 4},
        weights={"q": {"HIGHPRI": 0.5}},
        oldest={},
    )
    # CloudWatch bills every metric for each hour it is published: an idle fleet publishes none.
    assert fleet_points(inputs, T0) == []


def test_unreadable_policy_omits_entitlement_and_warns_once() -> None:
    store = MemoryLedgerStore()
    warned: list[str] = []

    def warn(source: str, consequence: str) -> None:
        warned.append(source)

    queue = QueueInfo("q", True, "env", "arn:policy")
    ledger = LedgerService(
        LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": "t"}),
        store,
        FakeBatch(
            {f"{ARN}a": SIZED},
            queues=[queue],
            listed={"q": [ListedJob(f"{ARN}a", "a", JobKind.SERVICE_JOB, JobStatus.RUNNING)]},
            limits={"env": 8},
        ),
        ListSink(),
        lambda: T0,
        warn=warn,
    )
    ledger.apply(obs(f"{ARN}a", JobStatus.RUNNING, 0))
    ledger.run(T0)
    ledger.run(T0 + timedelta(minutes=1))
    assert warned == ["arn:policy"]
    assert ledger.sink.pending and not [p for p in ledger.sink.pending if p.name == "Entitlement"]  # type: ignore[attr-defined]
    assert [p for p in ledger.sink.pending if p.name == "Utilization"]  # type: ignore[attr-defined]


def test_gpu_table() -> None:
    assert accelerators("ml.p5.48xlarge") == 8
    assert accelerators("ml.g5.12xlarge") == 4 and accelerators("g6e.xlarge") == 1
    assert accelerators("ml.trn1.32xlarge") == 16 and accelerators("ml.trn2.48xlarge") == 16
    assert accelerators("ml.p4de.24xlarge") == 8 and accelerators("ml.p5en.48xlarge") == 8
    assert accelerators("ml.m5.xlarge") is None and accelerators(None) is None


def test_reconciliation_is_spread_over_the_interval() -> None:
    store = MemoryLedgerStore()
    queues = [QueueInfo(f"q{i}", service=True, environment="env") for i in range(30)]
    batch = FakeBatch(queues=queues)
    ledger = service(store, batch)  # every 15 minutes: 2 queues per run
    listed: list[str] = []
    for minute in range(15):
        batch.calls.clear()
        ledger.run(T0 + timedelta(minutes=minute))
        listed += [name for op, name in batch.calls if op == "list_active"]
    assert sorted(listed) == sorted(q.name for q in queues)  # each once in the interval
    batch.calls.clear()
    ledger.run(T0 + timedelta(minutes=15))
    assert [name for op, name in batch.calls if op == "list_active"] == ["q0", "q1"]  # the longest-waiting


def test_a_job_first_seen_finished_is_recorded_without_a_describe() -> None:
    store = MemoryLedgerStore()
    batch = FakeBatch({f"{ARN}done": SIZED})
    ledger = service(store, batch)
    ledger.apply(obs(f"{ARN}done", JobStatus.SUCCEEDED, 0, details=JobDetails(queue="q")))
    assert store.jobs[f"{ARN}done"].terminal and not batch.calls
    assert store.aggregate_map() == {}


def test_quota_shares_entitlement_and_borrowing() -> None:
    def agg(share: str, status: JobStatus, jobs: int, instances: int) -> Aggregate:
        return Aggregate(AggregateKey("env", "qm", share, status), Delta(jobs, jobs, instances), quota=True)

    inputs = FleetInputs(
        queues={"qm": QueueInfo("qm", True, "env")},
        aggregates={"qm": [agg("QS1", JobStatus.RUNNING, 3, 12), agg("QS2", JobStatus.RUNNABLE, 1, 4)]},
        limits={"env": 16},
        reserved={"env": 16},
        weights={},
        oldest={},
        quota_limits={"qm": {"QS1": 8, "QS2": 8}},
    )
    points = {(p.name, p.dimensions): p.value for p in fleet_points(inputs, T0)}
    qs1 = (("JobQueue", "qm"), ("QuotaShare", "QS1"))
    qs2 = (("JobQueue", "qm"), ("QuotaShare", "QS2"))
    assert points[("BorrowedInstances", qs1)] == 4  # 12 in use on a limit of 8
    assert ("BorrowedInstances", qs2) not in points  # borrows nothing: no series
    assert points[("Entitlement", qs1)] == points[("Entitlement", qs2)] == 50  # 8 of 16
    # Usage against the same environment: 12 of 16, above its entitlement (it borrows 4).
    assert points[("ShareOfUsage", qs1)] == 75


def test_a_quota_share_borrowing_alone_is_entitled_to_its_own_quota() -> None:
    """One quota share with jobs, borrowing: its quota is half the environment, not all of it."""
    inputs = FleetInputs(
        queues={"qm": QueueInfo("qm", True, "env")},
        aggregates={
            "qm": [
                Aggregate(AggregateKey("env", "qm", "QS1", JobStatus.RUNNING), Delta(3, 3, 12), quota=True)
            ]
        },
        limits={"env": 16},
        reserved={"env": 16},
        weights={},
        oldest={},
        quota_limits={"qm": {"QS1": 8, "QS2": 8}},
    )
    points = {(p.name, p.dimensions): p.value for p in fleet_points(inputs, T0)}
    qs1 = (("JobQueue", "qm"), ("QuotaShare", "QS1"))
    assert points[("Entitlement", qs1)] == 50
    assert points[("ShareOfUsage", qs1)] == 75
    assert points[("BorrowedInstances", qs1)] == 4


def test_unreadable_quota_shares_omit_entitlement_and_borrowing_and_warn_once() -> None:
    store = MemoryLedgerStore()
    warned: list[str] = []

    def warn(source: str, consequence: str) -> None:
        warned.append(source)

    arn = f"{ARN}qj"
    queue = QueueInfo("qm", True, "env")
    details = JobDetails(queue="qm", environment="env", quota_share="QS1", instances=2, sized=True)
    ledger = LedgerService(
        LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": "t"}),
        store,
        FakeBatch(
            {arn: details},
            queues=[queue],
            listed={"qm": [ListedJob(arn, "qj", JobKind.SERVICE_JOB, JobStatus.RUNNING, quota_share="QS1")]},
        ),
        ListSink(),
        lambda: T0,
        warn=warn,
    )
    ledger.apply(obs(arn, JobStatus.RUNNING, 0))
    ledger.run(T0)
    ledger.run(T0 + timedelta(minutes=1))
    assert warned == ["quota shares of job queue qm"]
    names = {p.name for p in ledger.sink.pending}  # type: ignore[attr-defined]
    assert "InstancesInUse" in names and not names & {"Entitlement", "BorrowedInstances"}


def test_a_heterogeneous_jobs_gpus_count_every_instance_group() -> None:
    """ResourceConfig.InstanceGroups of two types: 2 x ml.p5.48xlarge (8 GPUs each) and 3 x
    ml.g5.xlarge (1 GPU each) are 19 GPUs in use; an unknown type adds none."""
    groups = dataclasses.replace(
        SIZED,
        instances=6,
        instance_type="ml.p5.48xlarge",
        by_type=(("ml.g5.xlarge", 3), ("ml.p5.48xlarge", 2), ("ml.x9.unknown", 1)),
    )
    change = transition(None, obs("arn:het", JobStatus.RUNNING, 1, details=groups))
    assert change is not None
    (delta,) = change.deltas.values()
    assert delta.gpus == 2 * 8 + 3 * 1
    assert delta.instances == 6


def test_a_share_alone_in_its_queue_has_no_fairness_gauges() -> None:
    alone = Aggregate(AggregateKey("env", "q", "HIGHPRI", JobStatus.RUNNING), Delta(2, 2, 8))
    inputs = FleetInputs(
        queues={"q": QueueInfo("q", True, "env", "policy")},
        aggregates={"q": [alone]},
        limits={"env": 12},
        reserved={"env": 12},
        weights={"q": {"HIGHPRI": 0.5, "LOWPRI": 2.0}},
        oldest={},
    )
    names = {p.name for p in fleet_points(inputs, T0) if dict(p.dimensions).get("ShareIdentifier")}
    # 100 % of the usage and of the entitlement says nothing: no series until a second share has jobs.
    assert names == {"InstancesInUse"}


def test_scheduling_policies_are_read_once_per_ttl() -> None:
    policy = "arn:aws:batch:us-east-1:111122223333:scheduling-policy/fair"
    queues = [
        QueueInfo(f"q{i}", service=True, environment="env", scheduling_policy_arn=policy) for i in range(3)
    ]
    batch = FakeBatch(queues=queues, weights={policy: {"HIGHPRI": 1.0}})
    ledger = service(MemoryLedgerStore(), batch)
    for minute in range(16):
        ledger.run(T0 + timedelta(minutes=minute))
    reads = [arn for op, arn in batch.calls if op == "share_weights"]
    assert reads == [policy, policy]  # at minute 0 and once POLICY_TTL (15 minutes) passed


def test_a_check_that_keeps_failing_ends_the_pass_and_the_next_one_closes_the_job() -> None:
    store = MemoryLedgerStore()
    warned: list[str] = []
    gone = f"{ARN}gone"
    queue = QueueInfo("q", service=True, environment="env")
    batch = FakeBatch(queues=[queue], listed={"q": []}, failing=[gone], statuses={})
    ledger = LedgerService(
        LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": "t"}),
        store,
        batch,
        ListSink(),
        lambda: T0,
        warn=lambda subject, consequence: warned.append(subject),
    )
    ledger.apply(obs(gone, JobStatus.RUNNING, 0, details=SIZED), describe=False)
    first = ledger.run(T0 + timedelta(minutes=1))  # DescribeServiceJob fails (after botocore's retries)
    assert first.reconciled == ["q"] and first.checks == 1 and first.pending == 0
    assert not store.jobs[gone].terminal and store.cursors == {}  # no pass left holding the queue
    assert warned == ["checks of job queue q"]
    batch.failing.clear()  # answered again: AWS Batch no longer knows the job
    assert ledger.run(T0 + timedelta(minutes=20)).drift == {"q:gone": 1}
    assert store.jobs[gone].status is JobStatus.FAILED
    assert [c for c in batch.calls if c[0] == "job_statuses"] == [("job_statuses", (gone,))] * 2
    assert store.aggregate_map() == recount(store.jobs.values())
