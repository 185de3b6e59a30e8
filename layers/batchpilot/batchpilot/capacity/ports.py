"""What the capacity service needs from the outside world, as Protocols the adapters implement.

- :class:`BatchCapacityApi`: AWS Batch ``DescribeServiceEnvironments``, ``ListServiceJobs``,
  ``GetJobQueueSnapshot``, ``DescribeServiceJob``, ``UpdateServiceEnvironment``
  (:class:`batchpilot.io.batch.BatchCapacityClient`).
- :class:`StateStore`: the DynamoDB ``StateTable``, ``capacity#`` keys
  (:class:`batchpilot.io.dynamodb.capacity.CapacityStateStore`).
- :class:`EventPublisher`: EventBridge ``PutEvents`` on batchpilot's bus
  (:class:`batchpilot.io.eventbridge.EventBridgePublisher`).
- :class:`GaugeSink`: CloudWatch Embedded Metric Format on stdout, no API call
  (:class:`batchpilot.io.emf.EmfPublisher`).
- :class:`LedgerDemand`: RUNNABLE demand from the job ledger's aggregates, ``ledger#`` keys
  (:class:`batchpilot.io.dynamodb.ledger.LedgerDemandReader`), optional.

Counts are instances (of a capacity unit: ``NUM_INSTANCES`` or, in a quota-management
environment, an instance type); times are aware UTC datetimes. AWS errors surface as whatever the
SDK raises once botocore's standard retries are spent (``botocore.exceptions.ClientError``,
``BotoCoreError``): the service catches them per service environment, so one environment's error
never stops the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from batchpilot.capacity.model import CapacityLimit, QueueSnapshot, RunnableJob, ServiceEnvironment
from batchpilot.capacity.policy import EnvironmentState
from batchpilot.capacity.sampling import QueueSample
from batchpilot.shared.metrics import MetricPoint
from batchpilot.shared.own_events import OwnEvent

__all__ = ["BatchCapacityApi", "EventPublisher", "GaugeSink", "LedgerDemand", "StateStore"]


class BatchCapacityApi(Protocol):
    """AWS Batch as the capacity function reads and changes it. Every method raises the SDK's
    error when AWS refuses (throttling already retried)."""

    def describe_environments(self, names: Sequence[str]) -> dict[str, ServiceEnvironment]:
        """``DescribeServiceEnvironments`` (every page): name → environment, for the names that
        exist (a missing name is absent, not an error)."""
        ...

    def runnable_jobs(self, queue: str) -> list[RunnableJob]:
        """Every RUNNABLE service job of job queue ``queue`` (a name): ``ListServiceJobs`` with
        ``jobStatus=RUNNABLE``, every page."""
        ...

    def snapshot(self, queue: str) -> QueueSnapshot:
        """Capacity in use by ``queue``'s dispatched jobs (``GetJobQueueSnapshot``
        ``queueUtilization``), in the capacity units AWS reports."""
        ...

    def job_demand(self, job_arn: str, job_id: str | None = None) -> dict[str, int] | None:
        """Instances one service job asks for, by instance type, from ``DescribeServiceJob``'s
        ``serviceRequestPayload`` ``ResourceConfig``.

        Returns:
            Instance type → instances; ``{}`` when the payload was read but names no usable
            resources (or the job is gone): cached as "read, unknown"; ``None`` when nothing could
            be read (the job counts as 1 instance until a later run reads it).
        """
        ...

    def update_capacity(self, environment: str, limits: Sequence[CapacityLimit]) -> None:
        """``UpdateServiceEnvironment`` of ``environment`` (a name) with the full
        ``capacityLimits`` (every unit, changed or not). Raises when the update is refused."""
        ...


class StateStore(Protocol):
    """Each service environment's capacity state (optimistic locking) and the payload-demand cache."""

    def load(self, environment: str) -> EnvironmentState:
        """The saved state (strongly consistent read); a fresh ``EnvironmentState()`` if none."""
        ...

    def load_many(self, environments: Sequence[str]) -> dict[str, EnvironmentState]:
        """:meth:`load` of each of ``environments`` at once (one request for a run's states)."""
        ...

    def save(self, environment: str, state: EnvironmentState, now: datetime) -> int | None:
        """Write ``state`` if nobody saved since it was loaded (its ``version``).

        Returns:
            The new version, or ``None`` when another run saved first (nothing written).
        """
        ...

    def claim_wake(self, environment: str, minute: datetime, now: datetime) -> bool:
        """Claim the one blocked-event run of ``environment`` in ``minute`` (whole minutes, aware
        UTC), across invocations: True for the first claim, False when another invocation (or an
        earlier delivery of the same event) made one already."""
        ...

    def release_wake(self, environment: str, minute: datetime, now: datetime) -> None:
        """Give a claim of :meth:`claim_wake` back (its run failed)."""
        ...

    def cached_demands(self, queue: str, job_arns: Sequence[str]) -> dict[str, dict[str, int]]:
        """Job ARN → cached demand (instance type → instances) of those of ``job_arns`` that have
        one; the others are absent."""
        ...

    def remember_demands(self, queue: str, demands: Mapping[str, Mapping[str, int]], now: datetime) -> None:
        """Cache job ARN → demand for ``queue``'s jobs (a payload never changes; entries expire)."""
        ...


class EventPublisher(Protocol):
    """batchpilot's own events (``Capacity Adjusted``, ``Capacity Limited``) onto its bus."""

    def publish(self, events: Sequence[OwnEvent], resources: Sequence[str] | None = None) -> None:
        """Put every event on the bus, in order; ``resources`` are the envelopes' ARNs (the
        service environment's).

        Raises:
            batchpilot.shared.own_events.PublishError: the request failed or an entry was
                rejected (the message names detail-types and error codes, never details).
        """
        ...


class GaugeSink(Protocol):
    """Where a run's gauges go: CloudWatch EMF, one blob per dimension set and minute."""

    def publish(self, points: Iterable[MetricPoint]) -> int:
        """Write ``points`` at once (each carries its allow-listed dimensions and aware UTC
        timestamp; the sink adds ``service`` and the namespace); returns the blobs written.
        Raises only for a malformed blob (a bug)."""
        ...


class LedgerDemand(Protocol):
    """A queue's demand and use from the job ledger: a constant number of reads per queue (one
    DynamoDB Query, plus one GetItem per job a blocked event named), whatever its job count."""

    def sample(
        self, queue: str, environment: str, blocked_arns: Sequence[str], *, by_type: bool = False
    ) -> QueueSample | None:
        """The queue's sample: RUNNABLE demand and instances in use (SCHEDULED, STARTING,
        RUNNING), jobs of unknown size at the queue's mean; ``None`` when the ledger holds nothing
        for the queue yet (the run then lists the queue and reads its snapshot as before).

        Args:
            by_type: count per instance type (a quota-management environment's capacity units;
                instances of no known type under ``NUM_INSTANCES``), else every instance under
                ``NUM_INSTANCES``.
        """
        ...
