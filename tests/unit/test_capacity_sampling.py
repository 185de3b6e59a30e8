"""Sampling (pure): payload demand, per-queue and per-share tallies, environment demand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from batchpilot.capacity.model import (
    NUM_INSTANCES,
    CapacityLimit,
    QueueSnapshot,
    RunnableJob,
    ServiceEnvironment,
    instances,
)
from batchpilot.capacity.sampling import sample_queue, unit_demands

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
BLOCKED = "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - Service environment(s) ... cannot meet"


def job(
    n: int,
    *,
    minutes_ago: int = 5,
    share: str | None = None,
    quota: str | None = None,
    reason: str | None = None,
) -> RunnableJob:
    return RunnableJob(
        arn=f"arn:aws:batch:us-east-1:111122223333:service-job/{n:08d}",
        created_at=NOW - timedelta(minutes=minutes_ago),
        share_identifier=share,
        quota_share=quota,
        status_reason=reason,
    )


@pytest.mark.parametrize(
    ("quantity", "whole"), [(0.0, 0), (1.0, 1), (1.5, 2), (2.0000000001, 2), (-3, 0), (float("nan"), 0)]
)
def test_instances_rounds_reported_quantities_up(quantity: float, whole: int) -> None:
    assert instances(quantity) == whole


def test_a_fair_share_queue_is_tallied_per_share() -> None:
    jobs = [
        job(1, minutes_ago=30, share="prod"),
        job(2, minutes_ago=10, share="prod"),
        job(3, minutes_ago=50, share="research"),
        job(4, minutes_ago=1, share="research", reason=BLOCKED),
    ]
    demands = {
        jobs[0].arn: {"ml.p4d.24xlarge": 4},
        jobs[1].arn: {"ml.p4d.24xlarge": 2},
        jobs[3].arn: {"ml.p4d.24xlarge": 16},
    }
    snapshot = QueueSnapshot(total={"ml.p4d.24xlarge": 6.0}, by_share={"prod": {"ml.p4d.24xlarge": 6.0}})
    sample = sample_queue("hi", "sm", jobs, demands, snapshot)
    assert (sample.runnable.jobs, sample.runnable.total_instances, sample.runnable.unknown) == (4, 23, 1)
    assert sample.runnable.age_seconds(NOW) == 50 * 60
    assert sample.by_share["prod"].total_instances == 6
    assert sample.by_share["research"].total_instances == 17  # job 3 unknown: counts as 1
    assert [b.arn for b in sample.blocked] == [jobs[3].arn]
    assert sample.instances_in_use == 6


def test_a_blocked_event_marks_a_job_whose_listing_lacks_the_reason() -> None:
    jobs = [job(1), job(2)]
    sample = sample_queue(
        "hi", "sm", jobs, {jobs[1].arn: {NUM_INSTANCES: 40}}, QueueSnapshot(), [jobs[1].arn]
    )
    assert [b.arn for b in sample.blocked] == [jobs[1].arn]


def test_unit_demands_of_a_num_instances_environment_count_every_type() -> None:
    env = ServiceEnvironment("sm", None, "ENABLED", "VALID", (CapacityLimit(NUM_INSTANCES, 16),))
    jobs_a = [job(1), job(2, reason=BLOCKED)]
    a = sample_queue(
        "a",
        "sm",
        jobs_a,
        {jobs_a[0].arn: {"ml.g5.xlarge": 2}, jobs_a[1].arn: {"ml.p4d.24xlarge": 24}},
        QueueSnapshot(total={"ml.g5.xlarge": 3.0, "ml.p4d.24xlarge": 2.0}),
    )
    b = sample_queue("b", "sm", [job(3)], {}, QueueSnapshot(total={NUM_INSTANCES: 1.0}))
    (demand,) = unit_demands(env, [a, b]).values()
    assert (demand.unit, demand.in_use, demand.runnable, demand.unknown) == (NUM_INSTANCES, 6, 27, 1)
    assert (demand.blocked_need, demand.blocked_job) == (24, jobs_a[1].arn)


def test_unit_demands_of_a_quota_management_environment_are_per_instance_type() -> None:
    env = ServiceEnvironment(
        "sm-quota",
        None,
        "ENABLED",
        "VALID",
        (CapacityLimit("ml.p4d.24xlarge", 8), CapacityLimit("ml.g5.xlarge", 4)),
    )
    jobs = [
        job(1, quota="team-a"),
        job(2, quota="team-b"),
        job(3, quota="team-b", reason=BLOCKED),
        job(4, quota="team-a"),
    ]
    demands = {
        jobs[0].arn: {"ml.p4d.24xlarge": 2},
        jobs[1].arn: {"ml.g5.xlarge": 1, "ml.c5.xlarge": 7},
        jobs[2].arn: {"ml.g5.xlarge": 6},
    }
    snapshot = QueueSnapshot(total={"ml.p4d.24xlarge": 8.0, "ml.g5.xlarge": 1.0})
    sample = sample_queue("q", "sm-quota", jobs, demands, snapshot)
    by_unit = unit_demands(env, [sample])
    assert (by_unit["ml.p4d.24xlarge"].in_use, by_unit["ml.p4d.24xlarge"].runnable) == (8, 2)
    assert (by_unit["ml.g5.xlarge"].in_use, by_unit["ml.g5.xlarge"].runnable) == (1, 7)
    assert (by_unit["ml.g5.xlarge"].blocked_need, by_unit["ml.p4d.24xlarge"].blocked_need) == (6, 0)
    assert sample.by_quota_share["team-b"].jobs == 2
