"""What the GPU activity check needs from the outside world.

Adapters: :class:`batchpilot.io.cloudwatch.CloudWatchSeries` (GetMetricData),
:class:`batchpilot.io.dynamodb.ledger.LedgerStateStore` (the jobs the ledger holds as active: it is
a :class:`RunningJobs`), :class:`batchpilot.io.batch.ServiceJobAttempts` (a service job's training
job, DescribeServiceJob), :class:`batchpilot.io.batch.ContainerJobPlacements` (a container job's
ECS container instances, DescribeJobs), :class:`batchpilot.io.ecs.EcsContainerInstances` (their EC2
instances, DescribeContainerInstances), :class:`batchpilot.io.dynamodb.gpu.GpuEpisodeStore` (one idle episode
per job), :class:`batchpilot.io.eventbridge.EventBridgePublisher` (``Job GPU Idle``) and
:class:`batchpilot.io.emf.EmfPublisher` (the gauges).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from batchpilot.ledger.model import LedgerJob
from batchpilot.ledger.ports import ActiveEntry
from batchpilot.shared.metrics import MetricPoint
from batchpilot.shared.own_events import GpuIdleReason, OwnEvent

__all__ = [
    "ContainerInstance",
    "ContainerInstances",
    "ContainerPlacements",
    "Episode",
    "EpisodeStore",
    "EventPublisher",
    "HostsUnreadable",
    "MetricQuery",
    "MetricReader",
    "MetricSink",
    "RunningJobs",
    "SeriesRead",
    "TrainingJobNames",
    "TrainingJobUnreadable",
]


@dataclass(frozen=True, slots=True)
class MetricQuery:
    """One ``MetricDataQuery`` of GetMetricData (a ``MetricStat``).

    Attributes:
        id: the query's ``Id`` (``^[a-z][a-zA-Z0-9_]*$``, unique in a run).
        namespace, metric: ``/aws/sagemaker/TrainingJobs`` and ``GPUUtilization``, for instance.
        dimensions: ``(name, value)`` pairs (``("Host", "<training job>/algo-1")``).
        period: seconds per datapoint (60: SageMaker publishes job metrics each minute).
        stat: the statistic (``Average``).
    """

    id: str
    namespace: str
    metric: str
    dimensions: tuple[tuple[str, str], ...]
    period: int = 60
    stat: str = "Average"


@dataclass
class SeriesRead:
    """What one read returned: ``values`` query id → ``[(aware UTC time, value)]`` oldest first;
    ``failed`` ids of queries whose request failed; ``errors`` one bounded line per failed request;
    ``requests`` GetMetricData calls made."""

    values: dict[str, list[tuple[datetime, float]]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: int = 0


class MetricReader(Protocol):
    """Metric series (:class:`batchpilot.io.cloudwatch.CloudWatchSeries`)."""

    def read(self, queries: Sequence[MetricQuery], start: datetime, end: datetime) -> SeriesRead:
        """Every query's datapoints in ``[start, end)`` (GetMetricData, 500 queries a request,
        every page). Never raises for AWS errors: failed requests are in ``failed``/``errors``."""
        ...


class RunningJobs(Protocol):
    """The ledger's items (:class:`batchpilot.io.dynamodb.ledger.LedgerStateStore`)."""

    def queues(self) -> dict[str, str]:
        """Job queue name → service environment name of every queue the ledger has seen."""
        ...

    def active(self, queue: str) -> list[ActiveEntry]:
        """The jobs the ledger holds as active in ``queue`` (``""``: standalone training jobs)."""
        ...

    def get_many(self, arns: Sequence[str]) -> dict[str, LedgerJob | None]:
        """The records of ``arns`` (one BatchGetItem per 100 jobs)."""
        ...


class TrainingJobUnreadable(RuntimeError):
    """A service job's training job could not be read (DescribeServiceJob throttled after
    botocore's retries, denied, out of time): the job is left unread this run, asked again next."""


class TrainingJobNames(Protocol):
    """A service job's training job (:class:`batchpilot.io.batch.ServiceJobAttempts`)."""

    def training_job(self, arn: str) -> str | None:
        """The ``TrainingJobName`` of the service job's latest attempt (DescribeServiceJob:
        ``latestAttempt.serviceResourceId``, else the last ``attempts[]``); ``None`` when AWS
        Batch names none yet or no longer knows the job.

        Raises:
            TrainingJobUnreadable: any other failure (throttling after retries, access denied).
        """
        ...


class HostsUnreadable(RuntimeError):
    """A container job's instances could not be read (DescribeJobs or DescribeContainerInstances
    throttled after botocore's retries, denied, out of time): the job is left unread this run
    (counted, never judged), asked again next."""


class ContainerPlacements(Protocol):
    """Where a RUNNING container job runs (:class:`batchpilot.io.batch.ContainerJobPlacements`)."""

    def container_instances(self, arn: str) -> list[str] | None:
        """The ECS container instance ARNs of the job's attempt (DescribeJobs:
        ``container.containerInstanceArn``; a multi-node parallel job: each node's), one per
        node; ``None`` when AWS Batch names none (not placed yet, Fargate, or the job is gone).

        Raises:
            HostsUnreadable: any other failure.
        """
        ...


@dataclass(frozen=True, slots=True)
class ContainerInstance:
    """One ECS container instance: its EC2 ``instance_id`` (``ec2InstanceId``) and
    ``instance_type`` (its ``ecs.instance-type`` attribute; ``None`` when absent)."""

    instance_id: str
    instance_type: str | None


class ContainerInstances(Protocol):
    """ECS container instances (:class:`batchpilot.io.ecs.EcsContainerInstances`)."""

    def describe(self, arns: Sequence[str]) -> dict[str, ContainerInstance]:
        """Container instance ARN → its EC2 instance (DescribeContainerInstances, per ECS
        cluster named in the ARN, 100 a call); ARNs ECS does not know are absent.

        Raises:
            HostsUnreadable: any failure (throttling after retries, access denied, no time).
        """
        ...


@dataclass(frozen=True, slots=True)
class Episode:
    """A job's open idle episode (its claim): ``reason``, ``since`` when the GPUs went idle,
    ``at`` when it was claimed, ``published`` its event was accepted, ``resolving`` when its
    resolution was claimed (``None``: not yet)."""

    arn: str
    reason: GpuIdleReason
    since: datetime
    at: datetime
    published: bool
    resolving: datetime | None = None


class EpisodeStore(Protocol):
    """One ``Job GPU Idle`` per job and episode (:class:`batchpilot.io.dynamodb.gpu.GpuEpisodeStore`).
    Methods raise ``botocore.exceptions.ClientError`` for DynamoDB errors other than a lost
    conditional write."""

    def open_episodes(self) -> dict[str, Episode]:
        """Job ARN → its open episode (one Query, every page)."""
        ...

    def claim(self, arn: str, reason: GpuIdleReason, since: datetime, at: datetime) -> bool:
        """Claim the job's episode (a conditional put): ``False`` when an episode is open and
        published, or claimed less than a lease ago (then do not publish)."""
        ...

    def confirm(self, arn: str) -> None:
        """Mark the claimed episode published (after PutEvents answered)."""
        ...

    def claim_resolution(self, arn: str, at: datetime) -> bool:
        """Claim the published episode's resolution (a conditional update): ``False`` when the
        episode is gone, unpublished, or its resolution was claimed less than a lease ago."""
        ...

    def release_resolution(self, arn: str) -> None:
        """Give the resolution's claim back (its event could not be published)."""
        ...

    def close(self, arn: str) -> None:
        """End the job's episode (its GPUs are active again, it stopped, or its event could not be
        published): the next idle spell is a new episode."""
        ...


class EventPublisher(Protocol):
    """batchpilot's own events (:class:`batchpilot.io.eventbridge.EventBridgePublisher`)."""

    def publish(self, events: Sequence[OwnEvent], resources: Sequence[str] | None = None) -> None:
        """PutEvents. Raises ``batchpilot.shared.own_events.PublishError``."""
        ...


class MetricSink(Protocol):
    """Buffers metric points (:class:`batchpilot.io.emf.EmfPublisher`, shared with the ledger)."""

    def add(self, points: Iterable[MetricPoint]) -> None:
        """Buffer ``points`` until the ledger's flush."""
