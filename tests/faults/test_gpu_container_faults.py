"""Container jobs' GPU activity (the CloudWatch agent's NVIDIA metrics, ``LedgerContainerGpuMetrics``)
under faults: the same policy, episodes and gauges as training jobs, one ``Job GPU Idle`` per job
and episode, and a failing DescribeJobs, DescribeContainerInstances or GetMetricData (or a job
without datapoints) counted and never reported idle.

The real GpuActivityService with its real adapters (``ContainerJobPlacements`` on the embedded
Batch's DescribeJobs, ``EcsContainerInstances`` on moto's ECS, ``CloudWatchSeries`` on moto's
GetMetricData of the series PutMetricData seeded, ``GpuEpisodeStore`` on DynamoDB); the ledger's
records are in memory, faults injected at the HTTP layer (docs/reliability.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from batchpilot.gpu.service import GpuActivityService, GpuRunSummary
from batchpilot.gpu.settings import GpuSettings
from batchpilot.io.batch import ContainerJobPlacements, ServiceJobAttempts
from batchpilot.io.clients import client
from batchpilot.io.cloudwatch import CloudWatchSeries
from batchpilot.io.dynamodb.gpu import GpuEpisodeStore
from batchpilot.io.ecs import EcsContainerInstances
from batchpilot.ledger.model import JobDetails, JobStatus, LedgerJob
from batchpilot.shared.classification import JobKind
from batchpilot.shared.own_events import GpuIdleReason, JobGpuIdle
from batchpilot_local.testing.alerts import fact_of, own_envelope
from batchpilot_local.testing.faults import FaultKind, HttpFaults
from batchpilot_local.testing.ledger import ListPublisher, ListSink, MemoryLedgerStore
from batchpilot_local.testing.recovery import Harness, harness

STARTED = datetime(2026, 11, 20, 21, 0, tzinfo=UTC)
IDLE_AT = STARTED + timedelta(minutes=15 + 30)  # warm-up, then the whole window
CLUSTER = "AWSBatch-gpu-ce-1234"
SOURCE = GpuSettings.from_environ(
    {"BATCHPILOT_GPU_CONTAINER_METRICS": "{}"}, function="ledger"
).container_source


def _arn(n: int) -> str:
    return f"arn:aws:batch:us-east-1:123456789012:job/0000000{n}-0000-4000-8000-000000000000"


def place(h: Harness, jobs: int = 1, value: float = 1.0, *, minutes: int = 60) -> MemoryLedgerStore:
    """``jobs`` RUNNING container jobs of 4 GPUs each, each on its own g5.12xlarge (an EC2 instance
    registered as an ECS container instance of :data:`CLUSTER`), the instance's agent series
    (``nvidia_smi_utilization_gpu``, mean over its GPUs) at ``value`` percent for ``minutes``."""
    ec2, ecs, cloudwatch = h.aws.client("ec2"), h.aws.client("ecs"), h.aws.client("cloudwatch")
    ecs.create_cluster(clusterName=CLUSTER)
    store = MemoryLedgerStore()
    store.registry["gpu-q"] = ""
    for n in range(1, jobs + 1):
        instance = ec2.run_instances(
            ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="g5.12xlarge"
        )
        instance_id = instance["Instances"][0]["InstanceId"]
        document = json.dumps(
            {"instanceId": instance_id, "instanceType": "g5.12xlarge", "region": "us-east-1"}
        )
        registered = ecs.register_container_instance(
            cluster=CLUSTER,
            instanceIdentityDocument=document,
            attributes=[{"name": "ecs.instance-type", "value": "g5.12xlarge"}],
        )["containerInstance"]
        h.aws.batch.put_job(
            {
                "jobArn": _arn(n),
                "jobName": f"train-{n}",
                "jobQueue": "gpu-q",
                "status": "RUNNING",
                "jobDefinition": "arn:aws:batch:us-east-1:123456789012:job-definition/train:1",
                "container": {"containerInstanceArn": registered["containerInstanceArn"]},
            }
        )
        details = JobDetails(queue="gpu-q", share_identifier="teamA", gpus=4, name=f"train-{n}", sized=True)
        store.jobs[_arn(n)] = LedgerJob(
            _arn(n), JobKind.CONTAINER_JOB, details, JobStatus.RUNNING, STARTED, attempt_started_at=STARTED
        )
        datums = [
            {
                "MetricName": "nvidia_smi_utilization_gpu",
                "Dimensions": [{"Name": "InstanceId", "Value": instance_id}],
                "Timestamp": STARTED + timedelta(minutes=m),
                "Value": value,
            }
            for m in range(minutes)
        ]
        cloudwatch.put_metric_data(Namespace="CWAgent", MetricData=datums)
    return store


def service(publisher: ListPublisher, sink: ListSink, *, containers: bool = True) -> GpuActivityService:
    """The GPU check as a new Lambda instance builds it (new clients, nothing remembered)."""
    return GpuActivityService(
        jobs=MemoryLedgerStore(),  # replaced by the caller's
        names=ServiceJobAttempts(client("batch")),
        metrics=CloudWatchSeries(client("cloudwatch")),
        episodes=GpuEpisodeStore(client("dynamodb"), "StateTable"),
        sink=sink,
        publisher=publisher,
        container_source=SOURCE if containers else None,
        placements=ContainerJobPlacements(client("batch")),
        instances=EcsContainerInstances(client("ecs")),
    )


@pytest.fixture
def rig() -> Iterator[Harness]:
    with harness() as h:
        yield h


def run(check: GpuActivityService, store: MemoryLedgerStore, at: datetime) -> GpuRunSummary:
    check.jobs = store
    return check.run(at)


def test_an_idle_container_job_is_reported_once_with_gauges_per_queue_and_share(rig: Harness) -> None:
    publisher, sink = ListPublisher(), ListSink()
    store = place(rig)
    with HttpFaults() as calls:  # (clients made after the hook is registered)
        check = service(publisher, sink)
        runs = [run(check, store, at) for at in (IDLE_AT, IDLE_AT, IDLE_AT + timedelta(minutes=1))]
    assert [r.idle for r in runs] == [1, 0, 0] and runs[0].running == runs[0].measured == 1
    # One attempt: one DescribeJobs and one DescribeContainerInstances over the three runs.
    assert calls.seen.count("batch:DescribeJobs") == 1
    assert calls.seen.count("ecs:DescribeContainerInstances") == 1
    (event,) = publisher.events
    assert isinstance(event, JobGpuIdle) and event.reason is GpuIdleReason.IDLE
    assert (event.job_arn, event.job_kind, event.training_job_name) == (_arn(1), "container-job", None)
    assert (event.instance_type, event.instances, event.gpus) == ("g5.12xlarge", 1, 4)
    assert event.activity_percent == pytest.approx(1.0) and event.idle_since == STARTED + timedelta(
        minutes=15
    )
    activity = [p for p in sink.pending if p.name == "GpuActivity"]
    assert len(activity) == 3  # one a run
    first = activity[0]
    assert (first.unit, first.dimensions, first.timestamp) == (
        "Percent",
        (("JobQueue", "gpu-q"), ("ShareIdentifier", "teamA")),
        IDLE_AT,
    )
    assert first.value == pytest.approx(1.0)
    idle_hours = next(p for p in sink.pending if p.name == "IdleGpuHours")
    assert idle_hours.value == pytest.approx(4 * 0.99 / 60)


def test_without_the_parameter_container_jobs_are_not_covered(rig: Harness) -> None:
    publisher, sink = ListPublisher(), ListSink()
    store = place(rig)
    with HttpFaults() as calls:
        summary = run(service(publisher, sink, containers=False), store, IDLE_AT)
    assert summary.running == 0 and summary.queries == 0
    assert publisher.events == [] and sink.pending == []
    assert "batch:DescribeJobs" not in calls.seen and "ecs:DescribeContainerInstances" not in calls.seen


@pytest.mark.parametrize(
    ("service_name", "operation"), [("ecs", "DescribeContainerInstances"), ("batch", "DescribeJobs")]
)
def test_unreadable_instances_are_counted_never_idle_and_read_next_run(
    rig: Harness, service_name: str, operation: str
) -> None:
    publisher, sink = ListPublisher(), ListSink()
    store = place(rig)
    with HttpFaults() as faults:
        faults.add(service_name, operation, FaultKind.THROTTLE, times=None)
        check = service(publisher, sink)
        failed = run(check, store, IDLE_AT)
    assert failed.uncovered == 1 and failed.queries == 0 and operation in failed.errors[0]
    assert publisher.events == [] and sink.pending == []
    # Nothing of the failure is kept: the next run (clients without the fault hook) reports it.
    assert run(service(publisher, sink), store, IDLE_AT + timedelta(minutes=1)).idle == 1


def test_a_failed_get_metric_data_is_never_idle(rig: Harness) -> None:
    publisher, sink = ListPublisher(), ListSink()
    store = place(rig)
    with HttpFaults() as faults:
        faults.add("cloudwatch", "GetMetricData", FaultKind.THROTTLE, times=None)
        summary = run(service(publisher, sink), store, IDLE_AT)
    assert summary.unread == summary.queries == 2 and "Throttling" in summary.errors[0]
    assert publisher.events == [] and sink.pending == []


def test_a_job_without_datapoints_is_not_idle(rig: Harness) -> None:
    # The agent is not installed (or not aggregated per InstanceId): no series, nothing decided.
    publisher, sink = ListPublisher(), ListSink()
    store = place(rig, value=1.0, minutes=1)
    summary = run(service(publisher, sink), store, IDLE_AT)  # its one datapoint is 45 minutes old
    assert summary.running == 1 and summary.measured == 0 and summary.unread == 0
    assert publisher.events == [] and sink.pending == []


def test_activity_back_resolves_the_episode_once(rig: Harness) -> None:
    publisher, sink = ListPublisher(), ListSink()
    store = place(rig)
    assert run(service(publisher, sink), store, IDLE_AT).idle == 1
    (instance,) = [
        i["InstanceId"]
        for r in rig.aws.client("ec2").describe_instances()["Reservations"]
        for i in r["Instances"]
    ]
    rig.aws.client("cloudwatch").put_metric_data(
        Namespace="CWAgent",
        MetricData=[
            {
                "MetricName": "nvidia_smi_utilization_gpu",
                "Dimensions": [{"Name": "InstanceId", "Value": instance}],
                "Timestamp": IDLE_AT + timedelta(minutes=m),
                "Value": 80.0,
            }
            for m in range(3)
        ],
    )
    back = IDLE_AT + timedelta(minutes=2)
    runs = [run(service(publisher, sink), store, at) for at in (back, back)]  # a duplicate run too
    assert [r.announced for r in runs] == [1, 0]
    assert [e.reason for e in publisher.events if isinstance(e, JobGpuIdle)] == [
        GpuIdleReason.IDLE,
        GpuIdleReason.ACTIVE,
    ]
    keys = {fact_of(own_envelope(e)).key for e in publisher.events}
    assert len(keys) == 2


def test_jobs_sharing_an_instance_read_the_instances_activity() -> None:
    # Two jobs placed on the one instance: each reads the instance's mean, so both are idle or
    # neither (documented in docs/ledger.md: the agent's series is per instance, not per job).
    publisher, sink = ListPublisher(), ListSink()
    with harness() as h:
        store = place(h, jobs=2)
        first = h.aws.batch.describe_jobs([_arn(1)])[0]["container"]["containerInstanceArn"]
        second = h.aws.batch.describe_jobs([_arn(2)])[0]
        second["container"]["containerInstanceArn"] = first
        h.aws.batch.put_job(second)
        summary = run(service(publisher, sink), store, IDLE_AT)
    assert summary.idle == 2
    hosts = {e.job_arn for e in publisher.events if isinstance(e, JobGpuIdle)}
    assert hosts == {_arn(1), _arn(2)}
