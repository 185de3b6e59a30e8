"""What the ledger needs from the outside world: its DynamoDB store, AWS Batch, and a metric sink.

Adapters: :class:`batchpilot.io.dynamodb.ledger.LedgerStateStore` (the StateTable's ``ledger#``
items), :class:`batchpilot.io.batch.BatchLedgerClient` (AWS Batch reads),
:class:`batchpilot.io.s3.S3Checkpoints` (checkpoint listings, ListObjectsV2),
:class:`batchpilot.io.emf.EmfPublisher` (CloudWatch EMF) and
:class:`batchpilot.io.eventbridge.EventBridgePublisher` (``Job Starving`` on batchpilot's bus).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from batchpilot.ledger.model import AggregateKey, Delta, JobDetails, JobStatus, LedgerJob, Transition
from batchpilot.ledger.runnable import RunnableEntry
from batchpilot.shared.checkpoints import CheckpointLocation, CheckpointState
from batchpilot.shared.classification import JobKind
from batchpilot.shared.metrics import MetricPoint
from batchpilot.shared.own_events import OwnEvent, StarvationReason

__all__ = [
    "ActiveEntry",
    "Aggregate",
    "BatchReader",
    "CheckpointReader",
    "DescribeError",
    "EventPublisher",
    "LedgerStore",
    "ListedJob",
    "MetricSink",
    "QueueInfo",
    "QuotaShareLimit",
    "ReconcileCursor",
    "ReconcileState",
]

DESCRIBE_JOBS_MAX = 100
"""Job IDs one DescribeJobs request takes (AWS Batch API Reference, DescribeJobs ``jobs``: up to
100); DescribeServiceJob takes one."""


class DescribeError(RuntimeError):
    """A describe failed for a reason other than "no such job" (throttling left after botocore's
    retries, an access error): the job is counted at its queue's mean size and read again later."""


class CursorExpired(RuntimeError):
    """AWS Batch refused a kept ``nextToken`` (expired or invalid: ``ClientException``): the
    queue's listing starts over."""


@dataclass(frozen=True, slots=True)
class Aggregate:
    """One aggregate item: ``key``'s jobs and their size; ``quota``: the share is a quota share."""

    key: AggregateKey
    total: Delta
    quota: bool = False


@dataclass(frozen=True, slots=True)
class ActiveEntry:
    """A job the ledger holds as active in a queue (its per-queue index item)."""

    arn: str
    kind: JobKind
    status: JobStatus
    sized: bool
    runnable_since: datetime | None
    share: str = ""


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A job queue (DescribeJobQueues).

    Attributes:
        name: the queue's name.
        service: a service-job queue (``serviceEnvironmentOrder``), else a container-job queue.
        environment: the first service environment of ``serviceEnvironmentOrder`` (``""``).
        scheduling_policy_arn: ``schedulingPolicyArn`` (fair share), when set.
    """

    name: str
    service: bool
    environment: str = ""
    scheduling_policy_arn: str | None = None


@dataclass(frozen=True, slots=True)
class QuotaShareLimit:
    """One quota share of a job queue (ListQuotaShares).

    Attributes:
        limit: its ``capacityLimits[].maxCapacity`` summed (instances).
        lends: its ``resourceSharingConfiguration.strategy`` lends idle capacity to the other
            quota shares (``LEND``, ``LEND_AND_BORROW``; not ``RESERVE``).
    """

    limit: int
    lends: bool = True


@dataclass(frozen=True, slots=True)
class ListedJob:
    """One job summary of ListServiceJobs / ListJobs (times aware UTC)."""

    arn: str
    job_id: str
    kind: JobKind
    status: JobStatus
    share_identifier: str | None = None
    quota_share: str | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ListedPage:
    """One page of a queue's listing (ListServiceJobs / ListJobs, at most 100 summaries).

    Attributes:
        jobs: the page's job summaries.
        next_token: the API's ``nextToken`` (``None``: the status's last page).
        statuses: how many active statuses the queue's listing pages through (5 for ListJobs,
            6 for ListServiceJobs): the cursor's ``status`` runs from 0 to ``statuses - 1``.
    """

    jobs: list[ListedJob]
    next_token: str | None
    statuses: int


@dataclass(frozen=True, slots=True)
class ReconcileCursor:
    """Where a queue's unfinished listing resumes (kept in the state table between runs).

    Attributes:
        status: index of the active status being listed (``0 .. ListedPage.statuses - 1``).
        token: ``nextToken`` of that status's next page (``None``: its first page).
        started: when the pass began (aware UTC); it names the pass's record of the jobs it
            listed (:meth:`LedgerStore.seen`).
        checking: the listing is done; the pass is checking the active jobs it did not list
            (DescribeJobs / DescribeServiceJob) before closing them.
    """

    status: int
    token: str | None
    started: datetime
    checking: bool = False


@dataclass(frozen=True, slots=True)
class ReconcileState:
    """A queue's reconciliation marker: ``at`` its last finished pass (``None``: never), ``cursor``
    its unfinished pass (``None``: none)."""

    at: datetime | None = None
    cursor: ReconcileCursor | None = None


class LedgerStore(Protocol):
    """The ledger's items. Every method raises ``botocore.exceptions.ClientError`` for DynamoDB
    errors other than a lost conditional write (throttling already retried by botocore)."""

    def get(self, arn: str) -> LedgerJob | None:
        """The job's record (strongly consistent read), or ``None``."""
        ...

    def get_many(self, arns: Sequence[str]) -> dict[str, LedgerJob | None]:
        """The records of ``arns`` (strongly consistent, one BatchGetItem per 100 jobs): ARN → its
        record, ``None`` when the ledger has none; every ARN of ``arns`` is a key."""
        ...

    def write(self, change: Transition, now: datetime) -> bool:
        """Write ``change.new``, its aggregate deltas and its index item in one transaction,
        conditioned on the record still being ``change.old`` (its version).

        Returns:
            ``False`` when the record changed since it was read (nothing written: read again).
        """
        ...

    def aggregates(self, queue: str) -> list[Aggregate]:
        """Every aggregate of ``queue`` (one Query)."""
        ...

    def queues(self) -> dict[str, str]:
        """Job queue name → service environment name, for every queue the ledger has seen."""
        ...

    def active(self, queue: str) -> list[ActiveEntry]:
        """Every job the ledger holds as active in ``queue`` (Query, every page)."""
        ...

    def oldest_runnable(self, queue: str, share: str) -> RunnableEntry | None:
        """The RUNNABLE job of ``queue`` and ``share`` (``""``: no share) that became RUNNABLE
        first, from the index written with each transition (one read, whatever the job count);
        ``None`` when the share has no RUNNABLE job."""
        ...

    def reconcile_state(self, queue: str) -> ReconcileState:
        """``queue``'s reconciliation marker (last finished pass, unfinished pass's cursor)."""
        ...

    def reconcile_states(self, queues: Sequence[str]) -> dict[str, ReconcileState]:
        """The reconciliation markers of ``queues`` (one BatchGetItem per 100 queues): every name
        of ``queues`` is a key (``ReconcileState()``: never reconciled)."""
        ...

    def seen(self, queue: str, started: datetime) -> set[str]:
        """ARNs of the jobs the pass of ``queue`` that began at ``started`` recorded as listed
        (or checked and found active) in its earlier runs (one Query, every page)."""
        ...

    def save_seen(self, queue: str, started: datetime, part: str, arns: Sequence[str]) -> None:
        """Record ``arns`` as seen by the pass of ``queue`` that began at ``started``, under
        ``part`` (the same ``part`` written again replaces its ARNs: a run killed and run again
        writes the same items). The record expires on its own (TTL, days)."""
        ...

    def mark_reconciled(self, queue: str, at: datetime) -> None:
        """Record that ``queue``'s pass finished at ``at`` (its cursor removed)."""
        ...

    def save_cursor(self, queue: str, at: datetime | None, cursor: ReconcileCursor) -> None:
        """Keep ``queue``'s unfinished pass's ``cursor`` (``at``: its last finished pass, kept)."""
        ...

    def claim_starvation(self, arn: str, reason: StarvationReason, at: datetime) -> bool:
        """Claim the one ``Job Starving`` of job ``arn`` for ``reason`` (a conditional put). A claim
        never confirmed (its invocation died before publishing) can be taken over once a lease
        (minutes, longer than an invocation) has passed.

        Returns:
            ``False`` when it was already claimed (nothing written: do not publish).
        """
        ...

    def confirm_starvation(self, arn: str, reason: StarvationReason) -> None:
        """Mark a claim published (after PutEvents answered): it is never taken over."""
        ...

    def release_starvation(self, arn: str, reason: StarvationReason) -> None:
        """Give a claim back (its event could not be published: the next check claims again)."""
        ...


class BatchReader(Protocol):
    """AWS Batch reads. Errors propagate as ``botocore.exceptions.ClientError`` unless a method
    says otherwise."""

    def describe(self, arn: str, kind: JobKind) -> JobDetails | None:
        """DescribeServiceJob (service jobs) or DescribeJobs (container jobs) for one job.

        Returns:
            What is read once per job, or ``None`` when AWS Batch no longer knows the job.

        Raises:
            DescribeError: any other failure.
        """
        ...

    def job_statuses(self, kind: JobKind, arns: Sequence[str]) -> dict[str, JobStatus | None]:
        """What AWS Batch says each job's status is now: DescribeServiceJob once per service job,
        DescribeJobs once per :data:`DESCRIBE_JOBS_MAX` container jobs. Every ARN of ``arns`` is a
        key; ``None``: AWS Batch no longer knows the job (ended and aged out).

        Raises:
            DescribeError: a request failed otherwise (throttling already retried by botocore).
        """
        ...

    def job_queues(self) -> list[QueueInfo]:
        """Every job queue of the account and region (DescribeJobQueues, every page)."""
        ...

    def list_active(self, queue: QueueInfo) -> list[ListedJob]:
        """Every active job of ``queue``: ListServiceJobs / ListJobs once per active status,
        every page (botocore paginators)."""
        ...

    def list_page(self, queue: QueueInfo, status: int, token: str | None) -> ListedPage:
        """One page (``maxResults=100``) of ``queue``'s ``status``-th active status
        (ListServiceJobs / ListJobs), from ``token`` (``nextToken``; ``None``: the first page).

        Raises:
            CursorExpired: AWS Batch refused ``token``.
        """
        ...

    def capacity_limits(self, environments: Sequence[str]) -> dict[str, int]:
        """Service environment → its ``NUM_INSTANCES`` (or summed) ``maxCapacity``
        (DescribeServiceEnvironments); a missing environment is absent."""
        ...

    def quota_shares(self, queue: str) -> dict[str, QuotaShareLimit] | None:
        """Quota share name → its limit (summed ``capacityLimits[].maxCapacity``, instances) and
        whether it lends, for a quota-management queue (ListQuotaShares, every page); ``None``
        when they cannot be read."""
        ...

    def share_weights(self, policy_arn: str) -> dict[str, float] | None:
        """Share identifier → ``weightFactor`` of a fair-share scheduling policy
        (DescribeSchedulingPolicies); ``None`` when the policy cannot be read."""
        ...


class CheckpointReader(Protocol):
    """Checkpoint listings (:class:`batchpilot.io.s3.S3Checkpoints`, the adapter recovery uses)."""

    def inspect(
        self, location: CheckpointLocation | None, written_by: datetime | None = None
    ) -> CheckpointState:
        """The newest object under ``location`` (ListObjectsV2, a bounded number of pages) whose
        ``LastModified`` is at or before ``written_by`` (aware UTC; ``None``: any).

        Raises:
            batchpilot.shared.checkpoints.CheckpointListError: the prefix could not be listed
                (``AccessDenied``, ``NoSuchBucket``, throttling after botocore's retries).
        """
        ...


class EventPublisher(Protocol):
    """batchpilot's own events onto its bus (:class:`batchpilot.io.eventbridge.EventBridgePublisher`)."""

    def publish(self, events: Sequence[OwnEvent], resources: Sequence[str] | None = None) -> None:
        """PutEvents, in order.

        Raises:
            batchpilot.shared.own_events.PublishError: an event was not accepted.
        """
        ...


class MetricSink(Protocol):
    """Buffers metric points and writes them in one go (:class:`batchpilot.io.emf.EmfPublisher`)."""

    def add(self, points: Iterable[MetricPoint]) -> None:
        """Buffer ``points`` until :meth:`flush`."""

    def flush(self) -> int:
        """Write the buffered points; returns the number of EMF blobs written."""
        ...
