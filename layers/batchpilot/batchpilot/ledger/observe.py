"""Job events → ledger observations: pure, no I/O.

Which events the ledger reads (AWS Batch User Guide, "EventBridge events for AWS Batch" and
"Service job events"; SageMaker Developer Guide, "Events that Amazon SageMaker AI sends to Amazon
EventBridge"): every job state change, queue-blocked event (the job is RUNNABLE) and preemption
event, and SageMaker training-job state changes of *standalone* training jobs (a training job
whose name starts ``AWSBatch`` belongs to a service job, which the ledger already counts).
"""

from __future__ import annotations

from datetime import datetime

from batchpilot.ledger.model import JobDetails, JobStatus, Observation, PreemptionPhase, training_status
from batchpilot.shared.checkpoints import parse_s3_uri
from batchpilot.shared.classification import EventKind, JobKind, classify
from batchpilot.shared.events import (
    BatchJobQueueBlocked,
    BatchJobStateChange,
    BatchServiceJobPreemptionCompleted,
    BatchServiceJobPreemptionStarted,
    BatchServiceJobQueueBlocked,
    BatchServiceJobStateChange,
    JobEvent,
    PreemptionSummary,
    SageMakerTrainingJobStateChange,
)

__all__ = ["observe"]

_BATCH_STATUSES = {status.value: status for status in JobStatus}


def observe(event: JobEvent) -> Observation | None:
    """The observation one job event makes, or ``None`` when the ledger does not track it (a
    training job AWS Batch created for a service job; a status it does not know)."""
    facts = classify(event)
    match event:
        case BatchServiceJobStateChange() | BatchServiceJobQueueBlocked():
            d = event.detail
            status = _BATCH_STATUSES.get(d.status)
            if status is None:
                return None
            summary = d.preemptionSummary
            return Observation(
                arn=d.jobArn,
                kind=JobKind.SERVICE_JOB,
                status=status,
                at=event.time,
                details=JobDetails(
                    queue=facts.queue or "",
                    share_identifier=facts.share_identifier,
                    quota_share=facts.quota_share,
                    priority=d.schedulingPriority,
                    name=facts.name,
                ),
                preempted_count=summary.preemptedAttemptCount if summary else None,
                attempts=len(d.attempts) or None,
                created_at=d.createdAt,
                started_at=d.startedAt,
                category=facts.category,
                preempting_share=facts.preempting_share,
            )
        case BatchJobStateChange() | BatchJobQueueBlocked():
            cd = event.detail
            status = _BATCH_STATUSES.get(cd.status)
            if status is None:
                return None
            return Observation(
                arn=facts.arn,
                kind=JobKind.CONTAINER_JOB,
                status=status,
                at=event.time,
                details=JobDetails(
                    queue=facts.queue or "",
                    share_identifier=facts.share_identifier,
                    priority=cd.schedulingPriority,
                    name=facts.name,
                ),
                attempts=len(cd.attempts) or None,
                created_at=cd.createdAt,
                started_at=facts.started_at if status is JobStatus.RUNNING else None,
                category=facts.category if facts.event_kind is EventKind.STATE_CHANGE else None,
            )
        case BatchServiceJobPreemptionStarted() | BatchServiceJobPreemptionCompleted():
            pd = event.detail
            started = isinstance(event, BatchServiceJobPreemptionStarted)
            summary = pd.preemptionSummary
            return Observation(
                arn=pd.preemptedJobArn,
                kind=JobKind.SERVICE_JOB,
                # Started: the job is still RUNNING; Completed: AWS Batch requeued it (RUNNABLE).
                status=JobStatus.RUNNING if started else JobStatus.RUNNABLE,
                at=event.time,
                preemption=PreemptionPhase.STARTED if started else PreemptionPhase.COMPLETED,
                preempted_count=summary.preemptedAttemptCount if summary else None,
                category=facts.category,
                preempting_share=facts.preempting_share,
                preempted_started=None if started or summary is None else _newest_start(summary),
            )
        case SageMakerTrainingJobStateChange():
            if facts.created_by_batch:
                return None
            status = training_status(facts.status)
            if status is None:
                return None
            config = event.detail.CheckpointConfig
            checkpoint = parse_s3_uri(config.S3Uri if config else None, "CheckpointConfig.S3Uri")
            return Observation(
                arn=facts.arn,
                kind=JobKind.TRAINING_JOB,
                status=status,
                at=event.time,
                details=JobDetails(
                    instance_type=facts.instance_type,
                    instances=facts.instance_count,
                    name=facts.name,
                    sized=True,  # the event carries ResourceConfig: nothing to describe
                    checkpoint=checkpoint.uri if checkpoint else None,
                ),
                created_at=facts.created_at,
                started_at=facts.started_at,
                category=facts.category,
            )
    return None  # pragma: no cover - every JobEvent is matched above


def _newest_start(summary: PreemptionSummary) -> datetime | None:
    """``startedAt`` of the newest ``recentPreemptedAttempts[]`` entry: the attempt a
    ``Preemption Completed`` event is about (AWS Batch User Guide, "Service job preemption events")."""
    return max((a.startedAt for a in summary.recentPreemptedAttempts if a.startedAt), default=None)
