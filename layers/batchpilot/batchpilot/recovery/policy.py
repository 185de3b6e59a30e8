"""When recovery acts: the decision table (pure). The README's "Recovery" section mirrors it.

Rows are checked in order; the first that matches decides. Rows 1-5 need only the job's facts
(:func:`screen`), rows 6-7 the job as AWS describes it (:func:`check_scope`), rows 8-10 the lineage
(:func:`batchpilot.recovery.lineage.plan`), row 11 the checkpoint listing (:func:`check_checkpoint`).

| # | when | outcome |
|---|---|---|
| 1 | a training job AWS Batch created (``AWSBatch*``) | skip ``CREATED_BY_BATCH`` |
| 2 | a container job back in RUNNABLE after a failed attempt | skip ``RETRIES_LEFT`` |
| 3 | any other status that is not terminal | skip ``NOT_TERMINAL`` |
| 4 | SUCCEEDED / Completed | skip ``SUCCEEDED`` |
| 5 | a category this kind of job is not recovered for | skip ``NOT_RECOVERABLE`` |
| 6 | a job queue not in ``BATCHPILOT_RECOVERY_JOB_QUEUES`` | skip ``QUEUE_NOT_MANAGED`` |
| 7 | an execution role not in ``BATCHPILOT_RECOVERY_SAGEMAKER_ROLE_ARNS`` | skip ``ROLE_NOT_ALLOWED`` |
| 8 | this failure was already answered | nothing (``ALREADY_HANDLED``) |
| 9 | the lineage used its budget for this category | skip ``BUDGET_EXHAUSTED`` (critical) |
| 10 | the backoff since the previous resubmission is not over | retried when it is |
| 11 | no checkpoint and ``BATCHPILOT_RECOVERY_NO_CHECKPOINT=refuse`` | skip ``NO_CHECKPOINT`` |
| 12 | dry-run mode | ``Job Resubmitted`` with ``dry_run: true``, nothing submitted |
| 13 | otherwise | resubmit |

Recovered categories (row 5): service jobs FAILED with PREEMPTION, SPOT_INTERRUPTION, CAPACITY or
INTERNAL_ERROR; container jobs FAILED with SPOT_INTERRUPTION (Batch's retries are spent: a job with
retries left goes back to RUNNABLE, row 2); standalone training jobs Failed with CAPACITY or
INTERNAL_ERROR, or Stopped with ``MaxWaitTimeExceeded`` (SPOT_INTERRUPTION). Never MISCONFIGURATION,
USER_STOPPED, APPLICATION_ERROR, TIMEOUT or UNKNOWN.
"""

from __future__ import annotations

from dataclasses import dataclass

from batchpilot.recovery.checkpoint import CheckpointState
from batchpilot.recovery.settings import NoCheckpoint, RecoverySettings
from batchpilot.recovery.snapshot import JobSnapshot
from batchpilot.shared.classification import Category, JobFacts, JobKind
from batchpilot.shared.own_events import SkipReason

__all__ = ["RECOVERABLE", "Skip", "check_checkpoint", "check_scope", "screen"]

RECOVERABLE: dict[JobKind, frozenset[Category]] = {
    JobKind.SERVICE_JOB: frozenset(
        {Category.PREEMPTION, Category.SPOT_INTERRUPTION, Category.CAPACITY, Category.INTERNAL_ERROR}
    ),
    JobKind.CONTAINER_JOB: frozenset({Category.SPOT_INTERRUPTION}),
    JobKind.TRAINING_JOB: frozenset({Category.CAPACITY, Category.INTERNAL_ERROR, Category.SPOT_INTERRUPTION}),
}
"""Row 5: the categories each kind of job is resubmitted for."""

_WHY_NOT: dict[Category, str] = {
    Category.MISCONFIGURATION: "the job cannot run as configured; resubmitting would fail the same way",
    Category.USER_STOPPED: "a person stopped or terminated it on purpose",
    Category.APPLICATION_ERROR: "the training code failed; resubmitting would fail the same way",
    Category.TIMEOUT: "it ran out of its own time limit",
    Category.UNKNOWN: "the cause is unknown",
}


@dataclass(frozen=True, slots=True)
class Skip:
    """A decision not to resubmit.

    Attributes:
        reason: the named reason (the ``Recovery Skipped`` event's ``skip_reason``).
        message: one line a person can act on.
        critical: the alerts function should page (a budget exhausted).
    """

    reason: SkipReason
    message: str
    critical: bool = False


def screen(facts: JobFacts, *, with_category: bool = True) -> Skip | None:
    """Rows 1-5, on the job's facts alone; None when the job may be recoverable.

    ``with_category=False`` stops after row 4: a service job's event often lacks what decides its
    category (``preemptionSummary``, ``isTerminated``), so row 5 waits for DescribeServiceJob.
    """
    if facts.kind is JobKind.TRAINING_JOB and facts.created_by_batch:
        return Skip(
            SkipReason.CREATED_BY_BATCH,
            "AWS Batch created this training job for a service job; the service job's own event decides",
        )
    if not facts.terminal:
        if facts.kind is JobKind.CONTAINER_JOB and facts.status == "RUNNABLE" and facts.attempts > 0:
            return Skip(
                SkipReason.RETRIES_LEFT, "Batch is retrying the job (RUNNABLE after a failed attempt)"
            )
        return Skip(SkipReason.NOT_TERMINAL, f"the job is {facts.status}: Batch or SageMaker is still on it")
    if facts.succeeded:
        return Skip(SkipReason.SUCCEEDED, "the job succeeded")
    if not with_category:
        return None
    category = facts.category or Category.UNKNOWN
    if category not in RECOVERABLE[facts.kind]:
        why = _WHY_NOT.get(category, f"{facts.kind.value}s are not resubmitted for {category.value}")
        if facts.kind is JobKind.CONTAINER_JOB and category in RECOVERABLE[JobKind.SERVICE_JOB]:
            why = "container jobs are resubmitted only after a spot reclaim"
        return Skip(SkipReason.NOT_RECOVERABLE, f"{category.value}: {why}")
    return None


def check_scope(snapshot: JobSnapshot, settings: RecoverySettings) -> Skip | None:
    """Rows 6-7: the job queue and the SageMaker execution role are ones recovery may use."""
    if snapshot.kind is not JobKind.TRAINING_JOB and not settings.manages_queue(snapshot.job_queue):
        queue = (snapshot.job_queue or "?").rsplit("/", 1)[-1]
        return Skip(
            SkipReason.QUEUE_NOT_MANAGED,
            f"job queue {queue} is not in BATCHPILOT_RECOVERY_JOB_QUEUES",
        )
    if snapshot.kind is not JobKind.CONTAINER_JOB and not settings.allows_role(snapshot.role_arn):
        return Skip(
            SkipReason.ROLE_NOT_ALLOWED,
            "the job's SageMaker execution role is not in BATCHPILOT_RECOVERY_SAGEMAKER_ROLE_ARNS",
        )
    return None


def check_checkpoint(state: CheckpointState, settings: RecoverySettings) -> Skip | None:
    """Row 11: refuse a restart from step 0 when configured to."""
    if state.restarts_from_step_zero and settings.no_checkpoint is NoCheckpoint.REFUSE:
        where = state.uri or "no checkpoint location configured"
        detail = f" ({state.error})" if state.error else ""
        return Skip(
            SkipReason.NO_CHECKPOINT,
            f"no checkpoint to resume from at {where}{detail}; BATCHPILOT_RECOVERY_NO_CHECKPOINT=refuse",
        )
    return None
