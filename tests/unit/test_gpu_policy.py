"""The GPU activity policy (batchpilot/gpu/policy.py): which hosts are read, what a series says
(idle, stalled, active, unknown), the gauges and the Job GPU Idle it makes. Pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from batchpilot.gpu.policy import (
    GpuJob,
    GpuRules,
    GpuState,
    MetricSource,
    assess,
    container_gpu_job,
    gpu_job,
    gpu_points,
    host_activity,
    hosts,
    idle_event,
    job_minutes,
    queries,
    resolved_event,
)
from batchpilot.ledger.model import JobDetails, JobStatus, LedgerJob
from batchpilot.shared.classification import JobKind
from batchpilot.shared.own_events import GpuIdleReason, parse_own_event, put_events_entry
from hypothesis import given
from hypothesis import strategies as st

START = datetime(2026, 11, 20, 21, 0, tzinfo=UTC)
ARN = "arn:aws:batch:us-east-1:111122223333:service-job/gpu-1"
RULES = GpuRules()


def record(
    instance_type: str | None = "ml.p4d.24xlarge", instances: int | None = 2, queue: str = "q"
) -> LedgerJob:
    details = JobDetails(
        queue=queue,
        share_identifier="TEAMB",
        priority=40,
        instance_type=instance_type,
        instances=instances,
        name="gpu-1",
        sized=True,
    )
    return LedgerJob(ARN, JobKind.SERVICE_JOB, details, JobStatus.RUNNING, START, attempt_started_at=START)


def job() -> GpuJob:
    made = gpu_job(record(), "AWSBatchgpu-1abc")
    assert made is not None
    return made


def minutes(start: datetime, count: int, value: float) -> list[tuple[datetime, float]]:
    """``count`` minutes of ``value`` (0-1) from ``start``."""
    return [(start + timedelta(minutes=m), value) for m in range(count)]


def test_hosts_and_queries_name_each_instance_twice() -> None:
    made = job()
    assert hosts(made) == ["AWSBatchgpu-1abc/algo-1", "AWSBatchgpu-1abc/algo-2"]
    wanted, where = queries([made])
    assert [(q.metric, dict(q.dimensions)["Host"]) for q in wanted] == [
        ("GPUUtilization", "AWSBatchgpu-1abc/algo-1"),
        ("GPUMemoryUtilization", "AWSBatchgpu-1abc/algo-1"),
        ("GPUUtilization", "AWSBatchgpu-1abc/algo-2"),
        ("GPUMemoryUtilization", "AWSBatchgpu-1abc/algo-2"),
    ]
    assert {q.namespace for q in wanted} == {"/aws/sagemaker/TrainingJobs"}
    assert where["q2"] == (0, "AWSBatchgpu-1abc/algo-2", "GPUUtilization")


@pytest.mark.parametrize(
    ("instance_type", "instances", "training"),
    [
        (None, 2, "tj"),
        ("ml.m5.xlarge", 2, "tj"),
        ("ml.p4d.24xlarge", None, "tj"),
        ("ml.p4d.24xlarge", 2, None),
    ],
)
def test_a_job_that_cannot_be_scaled_or_named_is_not_covered(
    instance_type: str | None, instances: int | None, training: str | None
) -> None:
    assert gpu_job(record(instance_type, instances), training) is None


def test_activity_is_per_gpu_the_mean_over_the_hosts_of_each_minute() -> None:
    made = job()  # 8 GPUs an instance: GPUUtilization runs to 800
    at = START + timedelta(minutes=20)
    per_host = {"a": [(at, 800.0), (at + timedelta(minutes=1), 80.0)], "b": [(at, 0.0)]}
    assert job_minutes(made, per_host) == [(at, 0.5), (at + timedelta(minutes=1), 0.1)]


def test_idle_after_the_warm_up_and_the_whole_window() -> None:
    made = job()
    warm = START + RULES.warmup
    series = minutes(START, 60, 0.03)
    assert assess(made, series[:44], warm + timedelta(minutes=29), RULES).state is GpuState.UNKNOWN
    found = assess(made, series[:46], warm + timedelta(minutes=30), RULES)
    assert found.state is GpuState.IDLE and found.since == warm and found.latest == pytest.approx(0.03)


def test_missing_or_late_metrics_are_never_idle() -> None:
    made = job()
    now = START + timedelta(hours=1)
    assert assess(made, [], now, RULES).state is GpuState.UNKNOWN
    stale = minutes(START, 40, 0.0)  # the last datapoint 20 minutes old
    assert assess(made, stale, now, RULES).state is GpuState.UNKNOWN
    sparse = [p for i, p in enumerate(minutes(START + RULES.warmup, 45, 0.0)) if i % 2 == 0]
    assert assess(made, sparse, now, RULES).state is GpuState.UNKNOWN  # half the minutes missing


def test_a_fall_from_working_to_zero_is_a_stall_and_activity_back_is_active() -> None:
    made = job()
    working = minutes(START + RULES.warmup, 10, 0.85)
    stopped = minutes(working[-1][0] + timedelta(minutes=1), 31, 0.0)
    now = stopped[-1][0] + timedelta(minutes=1)
    found = assess(made, working + stopped, now, RULES)
    assert found.state is GpuState.STALLED and found.since == stopped[0][0]
    back = [*working, *stopped, (now, 0.6)]
    assert assess(made, back, now + timedelta(minutes=1), RULES).state is GpuState.ACTIVE


def test_low_but_never_working_is_idle_not_stalled() -> None:
    made = job()
    series = minutes(START + RULES.warmup, 40, 0.0)
    assert assess(made, series, series[-1][0] + timedelta(minutes=1), RULES).state is GpuState.IDLE


def test_the_gauges_per_share_mean_p10_and_idle_gpu_hours() -> None:
    made = job()
    other = gpu_job(record(queue=""), "standalone")
    assert other is not None
    points = gpu_points([(made, {"a": 0.5, "b": 0.1}), (other, {"x": 1.0})], START)
    got = {(p.name, p.dimensions): p.value for p in points}
    share = (("JobQueue", "q"), ("ShareIdentifier", "TEAMB"))
    assert got[("GpuActivity", share)] == pytest.approx(30.0)
    assert got[("GpuActivityP10", share)] == pytest.approx(10.0)
    assert got[("IdleGpuHours", share)] == pytest.approx((8 * 0.5 + 8 * 0.9) / 60)  # one minute of 16 GPUs
    assert got[("IdleGpuHours", (("JobKind", "service-job"),))] == 0.0
    assert gpu_points([(made, {})], START) == []  # nothing measured: no series


@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=64))
def test_the_gauges_stay_within_their_ranges(activities: list[float]) -> None:
    made = job()
    points = gpu_points([(made, {f"h{i}": a for i, a in enumerate(activities)})], START)
    by_name = {p.name: p.value for p in points}
    assert 0.0 <= by_name["GpuActivityP10"] <= by_name["GpuActivity"] + 1e-9 <= 100.0 + 1e-9
    assert 0.0 <= by_name["IdleGpuHours"] <= 8 * len(activities) / 60 + 1e-9


def test_the_event_names_job_share_priority_size_duration_and_cost() -> None:
    made = job()
    since = START + RULES.warmup
    found = assess(made, minutes(START, 50, 0.03), since + timedelta(minutes=35), RULES)
    event = idle_event(made, found, since + timedelta(minutes=35), RULES, {"ml.p4d.24xlarge": 40.0})
    assert event.reason is GpuIdleReason.IDLE and event.idle_seconds == 35 * 60
    assert (event.instances, event.gpus, event.scheduling_priority) == (2, 16, 40)
    assert event.hourly_cost_usd == pytest.approx(2 * 40.0 * 0.97)
    assert "gpu-1" in event.message and "TEAMB" in event.message and "35 min" in event.message
    raw = put_events_entry(event, "bus")
    delivered = {"source": "batchpilot", "detail-type": raw["DetailType"], "detail": raw["Detail"]}
    assert parse_own_event({**delivered, "time": event.time.isoformat()}) == event
    unpriced = idle_event(made, found, since + timedelta(minutes=35), RULES, {})
    assert unpriced.hourly_cost_usd is None and "$" not in unpriced.message


def test_activity_back_is_active_since_the_first_minute_of_the_active_run() -> None:
    made = job()
    idle = minutes(START + RULES.warmup, 35, 0.03)
    back = minutes(idle[-1][0] + timedelta(minutes=1), 3, 0.75)
    now = back[-1][0] + timedelta(minutes=1)
    found = assess(made, idle + back, now, RULES)
    assert found.state is GpuState.ACTIVE and found.since == back[0][0]
    assert found.latest == pytest.approx(0.75)


@pytest.mark.parametrize("was", [GpuIdleReason.IDLE, GpuIdleReason.STALLED])
def test_the_resolution_says_how_long_the_episode_lasted(was: GpuIdleReason) -> None:
    made = job()
    since = START + RULES.warmup
    idle = minutes(since, 45, 0.03)
    back = minutes(idle[-1][0] + timedelta(minutes=1), 5, 0.75)
    now = back[-1][0] + timedelta(minutes=1)
    event = resolved_event(made, assess(made, idle + back, now, RULES), was, since, now, RULES)
    assert event.reason is GpuIdleReason.ACTIVE and event.idle_since == since
    assert event.idle_seconds == 45 * 60  # up to the first active minute, not to the run
    assert event.activity_percent == pytest.approx(75) and event.hourly_cost_usd is None
    assert f"after 45 min {was.value.lower()}" in event.message and "gpu-1" in event.message
    raw = put_events_entry(event, "bus")
    delivered = {"source": "batchpilot", "detail-type": raw["DetailType"], "detail": raw["Detail"]}
    assert parse_own_event({**delivered, "time": event.time.isoformat()}) == event


AGENT = MetricSource(
    "CWAgent", "nvidia_smi_utilization_gpu", "nvidia_smi_utilization_memory", "InstanceId", False
)


def container(gpus: int | None = 8) -> LedgerJob:
    details = JobDetails(queue="q", share_identifier="TEAMB", gpus=gpus, name="train", sized=True)
    return LedgerJob(
        "arn:aws:batch:us-east-1:111122223333:job/c-1",
        JobKind.CONTAINER_JOB,
        details,
        JobStatus.RUNNING,
        START,
        attempt_started_at=START,
    )


def test_a_container_job_reads_its_instances_agent_series() -> None:
    job = container_gpu_job(container(8), ["i-2", "i-1", "i-2"], "g5.48xlarge", AGENT)
    assert job is not None and (job.instances, job.gpus_per_instance, job.gpus) == (2, 4, 8)
    assert hosts(job) == ["i-1", "i-2"]
    wanted, where = queries([job])
    assert [(q.namespace, q.metric, q.dimensions) for q in wanted[:2]] == [
        ("CWAgent", "nvidia_smi_utilization_gpu", (("InstanceId", "i-1"),)),
        ("CWAgent", "nvidia_smi_utilization_memory", (("InstanceId", "i-1"),)),
    ]
    assert len(wanted) == 4 and where[wanted[3].id] == (0, "i-2", "nvidia_smi_utilization_memory")


def test_the_agents_value_is_already_a_mean_over_the_gpus() -> None:
    # SageMaker's 400 on 8 GPUs is 50 %; the agent's per-instance aggregate of 50 is 50 % too.
    agent = container_gpu_job(container(8), ["i-1"], None, AGENT)
    sagemaker = gpu_job(record(), "tj")
    assert agent is not None and sagemaker is not None
    assert host_activity(agent, 50.0) == 0.5 == host_activity(sagemaker, 400.0)


def test_the_same_policy_judges_a_container_job_idle() -> None:
    job = container_gpu_job(container(4), ["i-1"], None, AGENT)
    assert job is not None
    now = START + timedelta(minutes=46)
    minutes = job_minutes(job, {"i-1": [(START + timedelta(minutes=m), 3.0) for m in range(46)]})
    assessment = assess(job, minutes, now, RULES)
    assert assessment.state is GpuState.IDLE and assessment.since == START + timedelta(minutes=15)
    event = idle_event(job, assessment, now, RULES, {"g5.12xlarge": 5.67})
    assert event.training_job_name is None and event.instance_type is None and event.hourly_cost_usd is None
    assert "1 x instance (4 GPUs)" in event.message


@pytest.mark.parametrize(("gpus", "instances"), [(0, ["i-1"]), (None, ["i-1"]), (4, [])])
def test_a_container_job_without_gpus_or_instances_is_not_covered(
    gpus: int | None, instances: list[str]
) -> None:
    assert container_gpu_job(container(gpus), instances, "g5.12xlarge", AGENT) is None
