"""What the recovery service asks of the outside world: the interfaces its adapters implement.

=========================  ==================================================================
port                       adapter (``batchpilot.io``)
=========================  ==================================================================
:class:`JobGateway`        ``batch.BatchJobs`` (service jobs, container jobs),
                           ``sagemaker.TrainingJobs`` (standalone training jobs)
:class:`CheckpointStore`   ``s3.S3Checkpoints`` (ListObjectsV2)
:class:`LineageStore`      ``dynamodb.lineage.DynamoLineageStore`` (the StateTable)
:class:`EventPublisher`    ``eventbridge.EventBridgePublisher`` (PutEvents)
:class:`MetricSink`        ``emf.EmfPublisher`` (CloudWatch Embedded Metric Format on stdout)
:class:`Deferrer`          ``sqs.SqsDeferrer`` (ChangeMessageVisibility)
:class:`Pacer`             :class:`batchpilot.recovery.pacing.SubmitPacer` (pure, in-process)
=========================  ==================================================================

Tests and the local replay substitute any of them. Times are aware UTC datetimes; durations are
seconds (floats).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from batchpilot.recovery.checkpoint import CheckpointLocation, CheckpointState
from batchpilot.recovery.lineage import AttemptRecord, Lineage, LineageRef
from batchpilot.recovery.requests import Operation, RebuiltRequest, Shape
from batchpilot.recovery.snapshot import JobSnapshot
from batchpilot.shared.classification import JobFacts, JobKind
from batchpilot.shared.events import JobEvent
from batchpilot.shared.metrics import MetricPoint
from batchpilot.shared.own_events import OwnEvent, SkipReason

__all__ = [
    "TRANSIENT_CODES",
    "CheckpointStore",
    "DeferError",
    "Deferrer",
    "EventPublisher",
    "JobGateway",
    "LineageStore",
    "MetricSink",
    "Pacer",
    "SubmitError",
    "TagError",
]

TRANSIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "LimitExceededException",
        "SlowDown",
        "InternalFailure",
        "InternalServerError",
        "InternalServerException",
        "ServerException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
    }
)
"""AWS error codes (the ``Error.Code`` of an API error response) worth another delivery of the
record: throttling and server-side errors. botocore's standard retry mode already retried them
within the call."""


class SubmitError(Exception):
    """A submit call (SubmitServiceJob, SubmitJob, CreateTrainingJob) failed after botocore's retries.

    Args:
        code: AWS's error code (``ThrottlingException``, ``ResourceLimitExceeded``, ...), or the
            botocore exception's class name for a connection error.
        message: AWS's error message (may quote request values: never logged whole).
        transient: True when delivering the record again may succeed; by default, a code in
            :data:`TRANSIENT_CODES` or an HTTP status of 500 and above.
        http_status: the response's HTTP status code (0 when there was no response).
    """

    def __init__(
        self, code: str, message: str, *, transient: bool | None = None, http_status: int = 0
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.http_status = http_status
        self.transient = (
            transient if transient is not None else (code in TRANSIENT_CODES or http_status >= 500)
        )


class TagError(Exception):
    """Tagging a failed job with its successor (Batch TagResource, SageMaker AddTags) failed;
    ``code`` is AWS's error code or the botocore exception's class name. The resubmission stands."""

    def __init__(self, code: str) -> None:
        super().__init__(f"tagging the failed job with its successor failed: {code}")
        self.code = code


class DeferError(Exception):
    """SQS refused to change a record's visibility (``code``: AWS's error code). The record still
    comes back, after the queue's visibility timeout."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class JobGateway(Protocol):
    """Describe and resubmit jobs of the kinds in :attr:`kinds` (AWS Batch or SageMaker)."""

    @property
    def kinds(self) -> frozenset[JobKind]:
        """The job kinds this gateway describes and submits."""
        ...

    def describe(self, event: JobEvent, facts: JobFacts) -> JobSnapshot | None:
        """The failed job as AWS describes it now (DescribeServiceJob, DescribeJobs, or
        DescribeTrainingJob + ListTags), classified again on that fuller data.

        Args:
            event: the failure event (its model decides how the description is classified).
            facts: the event's classification (``arn``, ``name``, ``kind``).

        Returns:
            The snapshot, or None when AWS no longer knows the job.

        Raises:
            botocore.exceptions.ClientError: any other error (AccessDenied, throttling after
                botocore's retries): the record is retried by SQS.
        """
        ...

    def input_shape(self, operation: Operation) -> Shape:
        """botocore's input shape of ``operation``, from the client's own service model (what a
        rebuilt request is projected on: :func:`batchpilot.recovery.requests.project`)."""
        ...

    def submit(self, request: RebuiltRequest, *, resume: bool) -> str:
        """Send the request; returns the new job's ARN.

        Args:
            request: the rebuilt SubmitServiceJob / SubmitJob / CreateTrainingJob request.
            resume: a previous call for the same attempt may have succeeded: find that job first
                (ListJobs by the deterministic name, DescribeTrainingJob by name; SubmitServiceJob
                is idempotent by its ``clientToken``).

        Raises:
            SubmitError: AWS refused it (``transient`` for throttling and server errors).
        """
        ...

    def tag_successor(self, failed_job_arn: str, tags: Mapping[str, str]) -> None:
        """Add ``tags`` (the successor's ARN and name) to the failed job: Batch TagResource on
        the job or service job ARN, SageMaker AddTags on the training job ARN. Tagging the same
        key again with the same value changes nothing.

        Raises:
            TagError: AWS refused it or could not be reached (after botocore's retries).
        """
        ...


class CheckpointStore(Protocol):
    """Lists checkpoint locations (S3)."""

    def inspect(self, location: CheckpointLocation | None) -> CheckpointState:
        """The newest object (key and ``LastModified``) under ``location`` (ListObjectsV2, a
        bounded number of pages). ``None`` (the job has no checkpoint configured) gives an empty
        :class:`CheckpointState`.

        Raises:
            CheckpointListError: the prefix could not be listed (``AccessDenied``,
                ``NoSuchBucket``, throttling, a connection error); the caller retries the record.
        """
        ...


class LineageStore(Protocol):
    """Lineage records and published-skip markers (DynamoDB, strongly consistent reads).

    Every method raises ``botocore.exceptions.ClientError`` for a DynamoDB failure other than the
    conditional-check failures described below (the record is then retried by SQS).
    """

    def find_job(self, job_arn: str) -> LineageRef | None:
        """The lineage and attempt of a job batchpilot submitted (the pointer item written with
        the attempt's ``SUBMITTED`` state), or None."""
        ...

    def load(self, lineage_id: str) -> Lineage | None:
        """The lineage record, or None when there is none."""
        ...

    def reserve(self, lineage: Lineage, previous: Lineage | None) -> bool:
        """Write ``lineage`` if the stored record is still ``previous`` (same ``version`` and
        ``last_attempt``; absent when ``previous`` is None). False when it is not: someone else
        wrote it since it was read."""
        ...

    def update_attempt(self, lineage_id: str, record: AttemptRecord) -> None:
        """Store the new state of one (reserved) attempt, and the pointer from its new job ARN to
        the lineage when ``record.new_job_arn`` is set (in one transaction)."""
        ...

    def claim_decision(self, job_arn: str, status: str, reason: SkipReason) -> bool:
        """Remember that a ``Recovery Skipped`` for this job in this status (``FAILED``, ``Stopped``,
        ...) is being published; False when it already was (a duplicate delivery)."""
        ...

    def release_decision(self, job_arn: str, status: str) -> None:
        """Forget a claimed decision (its event could not be published)."""
        ...


class EventPublisher(Protocol):
    """Publishes batchpilot's own events (``Job Resubmitted``, ``Recovery Skipped``, ``Recovery
    Failed``) on its event bus."""

    def publish(self, events: Sequence[OwnEvent]) -> None:
        """Put every event on the bus. Raises :class:`~batchpilot.shared.own_events.PublishError`
        when any of them was not accepted."""
        ...


class MetricSink(Protocol):
    """Writes job metric points (``Resubmissions``, ``RecoverySkipped``, ``LostInstanceHours``,
    ``RecoveryFailed``)."""

    def publish(self, points: Sequence[MetricPoint]) -> int:
        """Write the points now; returns how many EMF blobs were written."""
        ...


class Deferrer(Protocol):
    """Delays the SQS record being handled (the record is handed back to SQS by raising)."""

    def defer(self, receipt_handle: str, seconds: float) -> bool:
        """Make the record visible again in ``seconds`` (rounded up; at most SQS's 12 hours).

        Args:
            receipt_handle: the record's ``receiptHandle``.
            seconds: when it is due.

        Returns:
            False when no queue is configured (the queue's visibility timeout applies).

        Raises:
            DeferError: SQS refused (ChangeMessageVisibility failed).
        """
        ...


class Pacer(Protocol):
    """The client-side submit rate limit (:class:`~batchpilot.recovery.pacing.SubmitPacer`)."""

    def acquire(self, budget: float = float("inf")) -> float:
        """Wait for a submit slot, at most ``budget`` seconds; returns the seconds waited.

        Raises:
            batchpilot.recovery.pacing.NotInTime: the next slot is later than ``budget``.
        """
        ...
