"""A failed job as AWS describes it: the facts recovery decides on (pure).

The event that triggered recovery says a job failed; the Describe* response says everything else
(the service job's payload and tags, share fields the event often lacks, the training job's
checkpoint). :class:`JobSnapshot` joins them. Its ``facts`` are
:func:`~batchpilot.shared.classification.classify`
applied to the *described* job, wrapped in the same event model, so the category is decided by the
same rules as everywhere else in batchpilot, on the fullest data available.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from batchpilot.recovery.checkpoint import CheckpointLocation, container_checkpoint, sagemaker_checkpoint
from batchpilot.recovery.naming import ARRAY_INDEX_TAG
from batchpilot.recovery.requests import payload_of, tag_map
from batchpilot.recovery.settings import CheckpointSource
from batchpilot.shared.classification import JobFacts, JobKind, classify
from batchpilot.shared.events import (
    BatchJobStateChange,
    BatchServiceJobStateChange,
    InvalidEventError,
    JobEvent,
    SageMakerTrainingJobStateChange,
    to_datetime_or_none,
)
from batchpilot.shared.resources import total_instances

__all__ = [
    "JobSnapshot",
    "container_job_snapshot",
    "reclassify",
    "service_job_snapshot",
    "tag_map",
    "training_job_snapshot",
]


@dataclass(frozen=True)
class JobSnapshot:
    """A failed job, described by AWS.

    Attributes:
        kind: container job, service job or training job.
        arn: ``jobArn`` / ``TrainingJobArn``.
        name: ``jobName`` / ``TrainingJobName``.
        facts: classification of the described job.
        described: the Describe* response (DescribeServiceJob, one DescribeJobs ``jobs[]`` item,
            DescribeTrainingJob); may hold secrets (environment, hyperparameters): never logged.
        tags: the job's tags (Describe* ``tags``; SageMaker ListTags).
        role_arn: the SageMaker execution role the new job will pass (training jobs, and service
            jobs through their payload); None for container jobs.
        instances: instances the attempt used (``ResourceConfig.InstanceCount`` or instance
            groups; ``capacityUsage`` NUM_INSTANCES; multi-node ``numNodes``; else 1).
        attempt_started_at / stopped_at: start and stop of the failed attempt (UTC), when known.
        checkpoint: where the job keeps its checkpoint, when it has one.
        job_queue: the job queue ARN (Batch kinds).
        first_started_at: when the job's first attempt started (UTC): the earliest ``startedAt``
            of its attempts (Batch retries), else ``attempt_started_at``.
    """

    kind: JobKind
    arn: str
    name: str
    facts: JobFacts
    described: Mapping[str, Any]
    tags: dict[str, str] = field(default_factory=dict)
    role_arn: str | None = None
    instances: float = 1.0
    attempt_started_at: datetime | None = None
    stopped_at: datetime | None = None
    checkpoint: CheckpointLocation | None = None
    job_queue: str | None = None
    first_started_at: datetime | None = None

    @property
    def preemption_retries(self) -> int | None:
        """``preemptionConfiguration.preemptionRetriesBeforeTermination`` of a service job
        (DescribeServiceJob): how many preemptions its submitter allowed before Batch fails it;
        None when not set (Batch then requeues a preempted job without limit)."""
        config = self.described.get("preemptionConfiguration")
        value = config.get("preemptionRetriesBeforeTermination") if isinstance(config, Mapping) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def array_index(self) -> int | None:
        """The array index of an array child (``arrayProperties.index``), or of a child batchpilot
        resubmitted alone (its ``batchpilot:array-index`` tag); else None."""
        if self.facts.array_index is not None:
            return self.facts.array_index
        tag = self.tags.get(ARRAY_INDEX_TAG, "")
        return int(tag) if tag.isdigit() else None


def _first_time(*values: Any) -> datetime | None:
    """The first of ``values`` that is a timestamp (see :func:`to_datetime_or_none`), or None."""
    return next((t for t in map(to_datetime_or_none, values) if t is not None), None)


def reclassify(event: JobEvent, described: Mapping[str, Any]) -> JobFacts:
    """Facts of ``described`` (a Describe* response), classified as if it were ``event``'s detail.

    Falls back to the event's own facts when the description does not fit the event model.
    """
    envelope = {
        "id": event.id,
        "detail-type": event.detail_type,
        "source": event.source,
        "time": event.time,
        "detail": dict(described),
    }
    model: type[JobEvent]
    if isinstance(event, BatchServiceJobStateChange):
        model = BatchServiceJobStateChange
    elif isinstance(event, BatchJobStateChange):
        model = BatchJobStateChange
    elif isinstance(event, SageMakerTrainingJobStateChange):
        model = SageMakerTrainingJobStateChange
    else:
        return classify(event)
    try:
        return classify(model.model_validate(envelope))
    except (InvalidEventError, ValueError):
        return classify(event)


def _last_attempt(described: Mapping[str, Any]) -> Mapping[str, Any]:
    attempts = described.get("attempts")
    if isinstance(attempts, Sequence) and attempts and isinstance(attempts[-1], Mapping):
        return attempts[-1]
    return {}


def _batch_job_snapshot(
    kind: JobKind,
    event: JobEvent,
    described: Mapping[str, Any],
    *,
    instances: float,
    checkpoint: CheckpointLocation | None,
    role_arn: str | None = None,
) -> JobSnapshot:
    """A Batch job from its Describe* item: what DescribeServiceJob and DescribeJobs name alike
    (``jobArn``, ``jobName``, ``tags``, ``attempts``, ``startedAt``, ``stoppedAt``, ``jobQueue``)."""
    facts = reclassify(event, described)
    last = _last_attempt(described)
    attempts = described.get("attempts")
    starts = [
        t
        for t in (
            to_datetime_or_none(a.get("startedAt"))
            for a in (attempts if isinstance(attempts, Sequence) else [])
            if isinstance(a, Mapping)
        )
        if t is not None
    ]
    attempt_started = _first_time(last.get("startedAt"), described.get("startedAt"))
    return JobSnapshot(
        kind=kind,
        arn=str(described.get("jobArn") or facts.arn),
        name=str(described.get("jobName") or facts.name or "job"),
        facts=facts,
        described=described,
        tags=tag_map(described.get("tags")),
        role_arn=role_arn,
        instances=instances,
        attempt_started_at=attempt_started,
        stopped_at=_first_time(last.get("stoppedAt"), described.get("stoppedAt")),
        checkpoint=checkpoint,
        job_queue=described.get("jobQueue") or facts.queue_arn,
        first_started_at=min(starts, default=attempt_started),
    )


def service_job_snapshot(event: JobEvent, described: Mapping[str, Any]) -> JobSnapshot:
    """A service job from DescribeServiceJob (payload, tags and share fields included)."""
    payload = payload_of(described)
    total = total_instances((payload or {}).get("ResourceConfig"))
    instances = float(total) if total else None
    if instances is None:
        for usage in described.get("capacityUsage") or []:
            if isinstance(usage, Mapping) and usage.get("capacityUnit") == "NUM_INSTANCES":
                instances = float(usage.get("quantity") or 0) or None
    role = payload.get("RoleArn") if payload else None
    return _batch_job_snapshot(
        JobKind.SERVICE_JOB,
        event,
        described,
        instances=instances or 1.0,
        checkpoint=sagemaker_checkpoint(payload),
        role_arn=role if isinstance(role, str) else None,
    )


def container_job_snapshot(
    event: JobEvent, described: Mapping[str, Any], sources: Sequence[tuple[CheckpointSource, str]]
) -> JobSnapshot:
    """A container job from one DescribeJobs ``jobs[]`` item."""
    nodes = described.get("nodeProperties")
    num_nodes = nodes.get("numNodes") if isinstance(nodes, Mapping) else None
    return _batch_job_snapshot(
        JobKind.CONTAINER_JOB,
        event,
        described,
        instances=float(num_nodes) if isinstance(num_nodes, int) and num_nodes > 0 else 1.0,
        checkpoint=container_checkpoint(described, sources),
    )


def training_job_snapshot(event: JobEvent, described: Mapping[str, Any], tags: Any) -> JobSnapshot:
    """A standalone training job from DescribeTrainingJob and ListTags."""
    facts = reclassify(event, described)
    role = described.get("RoleArn")
    return JobSnapshot(
        kind=JobKind.TRAINING_JOB,
        arn=str(described.get("TrainingJobArn") or facts.arn),
        name=str(described.get("TrainingJobName") or facts.name or "job"),
        facts=facts,
        described=described,
        tags=tag_map(tags),
        role_arn=role if isinstance(role, str) else None,
        instances=float(total_instances(described.get("ResourceConfig")) or 1),
        attempt_started_at=_first_time(described.get("TrainingStartTime")),
        stopped_at=_first_time(described.get("TrainingEndTime"), described.get("LastModifiedTime")),
        checkpoint=sagemaker_checkpoint(described),
        first_started_at=_first_time(described.get("TrainingStartTime")),
    )
