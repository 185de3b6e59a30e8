"""The capacity function's sample of a quota-management environment from the job ledger's
aggregates (per instance type, pure): it equals what listing every job would give when every size
is known, and jobs of unknown size count at the queue's observed mean of each type."""

from __future__ import annotations

from datetime import UTC, datetime

from batchpilot.capacity.model import (
    NUM_INSTANCES,
    CapacityLimit,
    QueueSnapshot,
    RunnableJob,
    ServiceEnvironment,
)
from batchpilot.capacity.sampling import sample_queue, unit_demands
from batchpilot.ledger.demand import ledger_sample
from batchpilot.ledger.model import AggregateKey, Delta, JobDetails, JobStatus, LedgerJob, type_counts
from batchpilot.ledger.ports import Aggregate
from batchpilot.shared.classification import JobKind
from batchpilot_local.testing.ledger import recount
from hypothesis import given, settings
from hypothesis import strategies as st

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
ARN = "arn:aws:batch:us-east-1:111122223333:service-job/"
P5, G5, TRN1 = "ml.p5.48xlarge", "ml.g5.12xlarge", "ml.trn1.32xlarge"
QUOTA_ENV = ServiceEnvironment(
    "sm-quota",
    None,
    "ENABLED",
    "VALID",
    (CapacityLimit(P5, 16), CapacityLimit(G5, 8), CapacityLimit(TRN1, 4)),
)


def aggregates_of(jobs: list[LedgerJob]) -> list[Aggregate]:
    """The queue's aggregates as the ledger keeps them (equal to a recount: the ledger's property)."""
    quota = {AggregateKey("sm-quota", "q", j.share, j.status): bool(j.details.quota_share) for j in jobs}
    return [Aggregate(k, d, quota[k]) for k, d in recount(jobs).items()]


@st.composite
def quota_queues(draw: st.DrawFn) -> list[LedgerJob]:
    """A quota-management queue's active jobs, every size known (one type, several, or no type)."""
    jobs = []
    for n in range(draw(st.integers(0, 12))):
        groups = draw(st.lists(st.tuples(st.sampled_from([P5, G5, TRN1]), st.integers(1, 4)), max_size=3))
        by_type = type_counts(dict(groups))
        untyped = draw(st.sampled_from([0, 0, 2])) if by_type else 2  # every job asks for some
        details = JobDetails(
            queue="q",
            environment="sm-quota",
            quota_share=draw(st.sampled_from(["team-a", "team-b"])),
            instances=sum(c for _, c in by_type) + untyped,
            by_type=by_type,
            sized=True,
        )
        status = draw(st.sampled_from([JobStatus.RUNNABLE, JobStatus.STARTING, JobStatus.RUNNING]))
        jobs.append(LedgerJob(f"{ARN}{n}", JobKind.SERVICE_JOB, details, status, T0))
    return jobs


@settings(max_examples=200, deadline=None)
@given(quota_queues())
def test_ledger_sample_per_type_equals_listing_every_job(jobs: list[LedgerJob]) -> None:
    # What the listing path sees: RUNNABLE jobs with their payload demand, and the snapshot.
    runnable = [j for j in jobs if j.status is JobStatus.RUNNABLE]
    listed = [RunnableJob(j.arn, T0, quota_share=j.details.quota_share) for j in runnable]
    demands = {}
    for j in runnable:
        demand = dict(j.details.by_type or ())
        rest = (j.details.instances or 0) - sum(demand.values())
        if rest:
            demand[NUM_INSTANCES] = rest
        demands[j.arn] = demand
    total: dict[str, float] = {}
    by_quota: dict[str, dict[str, float]] = {}
    for j in jobs:
        if j.status is not JobStatus.RUNNABLE:
            for kind, count in j.details.by_type or ():
                total[kind] = total.get(kind, 0.0) + count
                share = by_quota.setdefault(j.share, {})
                share[kind] = share.get(kind, 0.0) + count
    listing = sample_queue(
        "q", "sm-quota", listed, demands, QueueSnapshot(total=total, by_quota_share=by_quota)
    )

    ledger = ledger_sample("q", "sm-quota", aggregates_of(jobs), {}, by_type=True)

    assert unit_demands(QUOTA_ENV, [ledger]) == unit_demands(QUOTA_ENV, [listing])
    assert ledger.runnable.jobs == listing.runnable.jobs
    for share, tally in listing.by_quota_share.items():
        assert ledger.by_quota_share[share].instances == tally.instances
    for share, usage in ledger.quota_share_in_use.items():
        assert {k: v for k, v in usage.items() if k != NUM_INSTANCES and v} == by_quota.get(share, {})


def test_unknown_sizes_count_at_the_queue_mean_of_each_type() -> None:
    def agg(status: JobStatus, delta: Delta) -> Aggregate:
        return Aggregate(AggregateKey("sm-quota", "q", "team-a", status), delta, quota=True)

    aggregates = [
        # 4 sized jobs: 6 p5 and 2 g5 instances (means 1.5 and 0.5 per job); 3 jobs not read yet.
        agg(JobStatus.RUNNABLE, Delta(5, 2, 4, types=((G5, 2), (P5, 2)))),
        agg(JobStatus.RUNNING, Delta(3, 2, 4, types=((P5, 4),))),
    ]
    sample = ledger_sample("q", "sm-quota", aggregates, {f"{ARN}b": {G5: 3}}, by_type=True)
    assert sample.runnable.jobs == 5
    assert sample.runnable.instances == {P5: 2 + 5, G5: 2 + 2}  # 3 unknown: ceil(4.5), ceil(1.5)
    assert sample.in_use == {P5: 4 + 1.5, G5: 0.5}  # 1 running job of unknown size
    assert sample.quota_share_in_use == {"team-a": {P5: 5.5, G5: 0.5}}
    demands = unit_demands(QUOTA_ENV, [sample])
    assert (demands[P5].in_use, demands[P5].runnable) == (6, 7)
    assert (demands[G5].in_use, demands[G5].runnable, demands[G5].blocked_need) == (1, 4, 3)
    assert (demands[TRN1].in_use, demands[TRN1].runnable) == (0, 0)


def test_a_queue_with_no_sized_job_counts_unknown_jobs_as_one_untyped_instance() -> None:
    aggregates = [Aggregate(AggregateKey("sm-quota", "q", "", JobStatus.RUNNABLE), Delta(3), quota=True)]
    sample = ledger_sample("q", "sm-quota", aggregates, {}, by_type=True)
    assert sample.runnable.instances == {NUM_INSTANCES: 3} and sample.runnable.total_instances == 3
    assert unit_demands(QUOTA_ENV, [sample])[P5].runnable == 0  # no type to charge them to
