"""When recovery acts: the decision table, in one pure function (:func:`decide`).

The table is :class:`Row`; the "When it acts" table of docs/recovery.md is made of the same rows
(``tests/unit/test_recovery_policy.py`` checks that the two are equal, see :func:`table_markdown`).
Rows are checked in order and the first that matches decides.

:func:`decide` takes what is known about one failure (a :class:`Case`): the event's facts, and,
once gathered, the job as AWS describes it, its lineage and its checkpoint. A row that needs an
input not gathered yet does not match yet; when no row matches, :func:`decide` returns the next
input to gather (a :class:`Need`, cheapest first: the lineage in DynamoDB, then Describe*, then the
checkpoint listing) and the service calls it again with that input. So rows that can be checked on
the event alone (1-7) cost no AWS call, a failure already answered (row 11) costs no Describe call,
and the checkpoint is listed only for a job about to be resubmitted (rows 16-18).

Recovered categories (row 5): service jobs FAILED with PREEMPTION, SPOT_INTERRUPTION, CAPACITY or
INTERNAL_ERROR; container jobs FAILED with SPOT_INTERRUPTION (Batch's retries are spent: a job with
retries left goes back to RUNNABLE, row 2); standalone training jobs Failed with CAPACITY or
INTERNAL_ERROR, or Stopped with ``MaxWaitTimeExceeded`` (SPOT_INTERRUPTION). Never MISCONFIGURATION,
USER_STOPPED, APPLICATION_ERROR, OUT_OF_MEMORY, QUOTA, TIMEOUT or UNKNOWN. A service job's event
often lacks what decides its category (``preemptionSummary``, ``isTerminated``), so its row 5 waits
for DescribeServiceJob.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum, IntEnum, StrEnum
from typing import Final, Literal

from batchpilot.recovery.checkpoint import CheckpointState
from batchpilot.recovery.lineage import AttemptRecord, AttemptState, LineageView
from batchpilot.recovery.pacing import backoff_seconds
from batchpilot.recovery.settings import RecoverySettings
from batchpilot.recovery.snapshot import JobSnapshot
from batchpilot.shared.arns import resource_name
from batchpilot.shared.classification import RECOVERABLE, Category, JobFacts, JobKind, NodeRole
from batchpilot.shared.own_events import SkipReason

__all__ = [
    "RECOVERABLE",
    "UNKNOWN",
    "Case",
    "Decision",
    "Need",
    "Row",
    "Step",
    "Unknown",
    "decide",
    "table_markdown",
]

_WHY_NOT: dict[Category, str] = {
    Category.MISCONFIGURATION: "the job cannot run as configured; resubmitting would fail the same way",
    Category.USER_STOPPED: "a person stopped or terminated it on purpose",
    Category.APPLICATION_ERROR: "the training code failed; resubmitting would fail the same way",
    Category.OUT_OF_MEMORY: "it ran out of memory; it needs more memory or a larger instance type",
    Category.QUOTA: "an account service quota is reached; resubmitting hits the same quota",
    Category.TIMEOUT: "it ran out of its own time limit",
    Category.UNKNOWN: "the cause is unknown",
}

_RUNNABLE = "RUNNABLE"  # AWS Batch job status: waiting for capacity (again, after a failed attempt)


class Step(StrEnum):
    """What the service does for a row of the table."""

    SKIP = "skip"  # publish Recovery Skipped (once per job and status) and count RecoverySkipped
    NOTHING = "nothing"  # already answered: publish nothing
    DEFER = "defer"  # hand the record back to SQS, visible again when the backoff is over
    RESUME = "resume"  # submit the reserved attempt again (same clientToken / name: no second job)
    PUBLISH = "publish"  # the attempt was submitted: publish its Job Resubmitted, submit nothing
    DRY_RUN = "dry-run"  # reserve the attempt as DRY_RUN and publish it; submit nothing
    RESUBMIT = "resubmit"  # reserve the next attempt, submit, publish


class Row(Enum):
    """The decision table, in the order it is checked.

    Each row has its ``number``, ``when`` it matches and its ``outcome`` (the docs table's columns, as
    Markdown), the :class:`Step` the service takes and, for skips, the ``skip_reason`` published.
    """

    number: int
    when: str
    outcome: str
    step: Step
    skip_reason: SkipReason | None

    CREATED_BY_BATCH = (
        1,
        "a training job AWS Batch created (`AWSBatch*`) or a node of a multi-node parallel job "
        "(`jobId` `UUID#N`): its service job or parent job decides",
        "skip",
        Step.SKIP,
        SkipReason.CREATED_BY_BATCH,
    )
    RETRIES_LEFT = (
        2,
        "a container job back in RUNNABLE after a failed attempt (Batch is retrying)",
        "skip",
        Step.SKIP,
        SkipReason.RETRIES_LEFT,
    )
    NOT_TERMINAL = (
        3,
        "any other status that is not terminal (preempted and requeued, RUNNING, ...)",
        "skip",
        Step.SKIP,
        SkipReason.NOT_TERMINAL,
    )
    SUCCEEDED = (4, "SUCCEEDED / Completed", "skip", Step.SKIP, SkipReason.SUCCEEDED)
    NOT_RECOVERABLE = (
        5,
        "a category this kind of job is not recovered for (below)",
        "skip",
        Step.SKIP,
        SkipReason.NOT_RECOVERABLE,
    )
    TIME_LIMIT_ACTION = (
        6,
        "a job its job queue's `jobStateTimeLimitActions` ended (`Canceled`/`Terminated by "
        "JobStateTimeLimit action`), unless `RecoveryResubmitTimeLimitedJobs=true`",
        "skip",
        Step.SKIP,
        SkipReason.TIME_LIMIT_ACTION,
    )
    QUEUE_NOT_MANAGED = (
        7,
        "a job queue not in `RecoveryJobQueueArns`",
        "skip",
        Step.SKIP,
        SkipReason.QUEUE_NOT_MANAGED,
    )
    ROLE_NOT_ALLOWED = (
        8,
        "a SageMaker execution role not in `RecoverySageMakerExecutionRoleArns`",
        "skip",
        Step.SKIP,
        SkipReason.ROLE_NOT_ALLOWED,
    )
    NOT_FOUND = (
        9,
        "Describe* no longer knows the job (an old, replayed failure)",
        "skip",
        Step.SKIP,
        SkipReason.NOT_FOUND,
    )
    PREEMPTION_RETRIES_SPENT = (
        10,
        "a service job failed after the `preemptionRetriesBeforeTermination` its submitter set, "
        "unless `RecoveryExtendPreemptionRetries=true`",
        "skip",
        Step.SKIP,
        SkipReason.PREEMPTION_RETRIES_SPENT,
    )
    ALREADY_HANDLED = (
        11,
        "this failure was already answered (duplicate, or an older event after a newer attempt)",
        "nothing published",
        Step.NOTHING,
        SkipReason.ALREADY_HANDLED,
    )
    SUBMIT_NOT_CONFIRMED = (
        12,
        "its resubmission was reserved but the submit not confirmed (the function stopped in between)",
        "submit again, idempotently (same `clientToken` / name)",
        Step.RESUME,
        None,
    )
    NOT_PUBLISHED = (
        13,
        "its resubmission was submitted but `Job Resubmitted` was not published",
        "publish it, submit nothing",
        Step.PUBLISH,
        None,
    )
    BUDGET_EXHAUSTED = (
        14,
        "the lineage used its budget for this category",
        "skip, **critical**",
        Step.SKIP,
        SkipReason.BUDGET_EXHAUSTED,
    )
    BACKOFF = (
        15,
        "the backoff since the lineage's previous resubmission is not over",
        "record handed back to SQS, due then",
        Step.DEFER,
        None,
    )
    NO_CHECKPOINT = (
        16,
        "no checkpoint that counts (none; written before the lineage's first attempt; older than "
        "`RecoveryCheckpointMaxAgeSeconds` at the failure; an array child's not under its own index) "
        "and `RecoveryNoCheckpoint=refuse`, or `refuse-if-configured` (the default) for a job that "
        "configures a checkpoint location",
        "skip",
        Step.SKIP,
        SkipReason.NO_CHECKPOINT,
    )
    DRY_RUN = (
        17,
        "`RecoveryDryRun=true`, or no job queue named in `RecoveryJobQueueArns` (the default)",
        "`Job Resubmitted` with `dry_run: true`, nothing submitted",
        Step.DRY_RUN,
        None,
    )
    RESUBMIT = (18, "otherwise", "resubmit", Step.RESUBMIT, None)

    def __init__(
        self, number: int, when: str, outcome: str, step: Step, skip_reason: SkipReason | None
    ) -> None:
        self.number = number
        self.when = when
        self.outcome = outcome
        self.step = step
        self.skip_reason = skip_reason

    @property
    def critical(self) -> bool:
        """The skip leaves a job nobody will restart: the alerts function pages (row 14)."""
        return self is Row.BUDGET_EXHAUSTED

    @property
    def on_lineage(self) -> bool:
        """The row is decided on the lineage (rows 11 and after): its event names the lineage."""
        return self.number >= Row.ALREADY_HANDLED.number

    def markdown(self) -> str:
        """The row as a line of the table in docs/recovery.md."""
        reason = f"`{self.skip_reason.value}`" if self.skip_reason else "-"
        return f"| {self.number} | {self.when} | {self.outcome} | {reason} |"


def table_markdown() -> list[str]:
    """The decision table of docs/recovery.md, header included, one string per line."""
    return [
        "| # | when | outcome | reason (`skip_reason`) |",
        "|---|---|---|---|",
        *(row.markdown() for row in Row),
    ]


class Unknown(Enum):
    """The value of an input of a :class:`Case` that has not been gathered yet."""

    UNKNOWN = "unknown"


UNKNOWN: Final = Unknown.UNKNOWN


class Need(IntEnum):
    """An input :func:`decide` needs before a row can match, in the order they are gathered."""

    LINEAGE = 1  # the lineage: DynamoDB GetItem (pointer, then record)
    DESCRIPTION = 2  # the job as AWS describes it: DescribeServiceJob / DescribeJobs / DescribeTrainingJob
    CHECKPOINT = 3  # the checkpoint listing: ListObjectsV2


@dataclass(frozen=True)
class Case:
    """What is known about one failure so far.

    Attributes:
        facts: the classification of the event that reported the failure.
        job: the job as AWS describes it; None when AWS no longer knows it.
        lineage: the lineage the failed job belongs to (located by the pointer batchpilot wrote
            when it submitted the job, else by the job's lineage tags, else its own ARN).
        checkpoint: what listing the job's checkpoint location found.
    """

    facts: JobFacts
    job: JobSnapshot | Literal[Unknown.UNKNOWN] | None = UNKNOWN
    lineage: LineageView | Literal[Unknown.UNKNOWN] = UNKNOWN
    checkpoint: CheckpointState | Literal[Unknown.UNKNOWN] = UNKNOWN

    @property
    def current(self) -> JobFacts:
        """The fullest facts known: the described job's, else the event's."""
        return self.job.facts if isinstance(self.job, JobSnapshot) else self.facts


@dataclass(frozen=True)
class Decision:
    """The row that matched, and what the service needs to act on it.

    Attributes:
        row: the row of the table.
        message: one line a person can act on (the ``Recovery Skipped`` message, a log line).
        attempt: the resubmission concerned (rows 11-18 once the lineage is known; 0 before).
        used / limit: resubmissions of this category the lineage used before this one, and its
            budget (rows 11-18).
        defer_seconds: row 15, seconds until the backoff is over.
        record: the attempt already stored for this failure (rows 11-13), when there is one.
    """

    row: Row
    message: str
    attempt: int = 0
    used: int = 0
    limit: int = 0
    defer_seconds: float = 0.0
    record: AttemptRecord | None = None

    @property
    def step(self) -> Step:
        """What the service does (the row's step)."""
        return self.row.step


def _not_recoverable(facts: JobFacts) -> str | None:
    """Row 5: why this kind of job is not resubmitted for its category, or None when it is."""
    category = facts.category or Category.UNKNOWN
    if category in RECOVERABLE[facts.kind]:
        return None
    why = _WHY_NOT.get(category, f"{facts.kind.value}s are not resubmitted for {category.value}")
    if facts.kind is JobKind.CONTAINER_JOB and category in RECOVERABLE[JobKind.SERVICE_JOB]:
        why = "container jobs are resubmitted only after a spot reclaim"
    return f"{category.value}: {why}"


def _job_rows(facts: JobFacts) -> Decision | None:
    """Rows 1-4: on the job's facts alone."""
    if facts.kind is JobKind.TRAINING_JOB and facts.created_by_batch:
        return Decision(
            Row.CREATED_BY_BATCH,
            "AWS Batch created this training job for a service job; the service job's own event decides",
        )
    if facts.node_role in (NodeRole.MAIN_NODE, NodeRole.NODE):
        return Decision(
            Row.CREATED_BY_BATCH,
            f"node {facts.node_index} of a multi-node parallel job; the parent job's own event decides",
        )
    if not facts.terminal:
        if facts.kind is JobKind.CONTAINER_JOB and facts.status == _RUNNABLE and facts.attempts > 0:
            return Decision(Row.RETRIES_LEFT, "Batch is retrying the job (RUNNABLE after a failed attempt)")
        return Decision(Row.NOT_TERMINAL, f"the job is {facts.status}: Batch or SageMaker is still on it")
    if facts.succeeded:
        return Decision(Row.SUCCEEDED, "the job succeeded")
    return None


def _lineage_rows(
    job: JobSnapshot, lineage: LineageView, now: datetime, settings: RecoverySettings
) -> Decision:
    """Rows 11-15 on the described job and its lineage; a :data:`Row.RESUBMIT` decision (attempt,
    budget) when none of them matches."""
    category = job.facts.category or Category.UNKNOWN
    limit = settings.budgets.get(category, 0)
    next_attempt = lineage.ref.attempt + 1
    record = lineage.record

    def decided(row: Row, message: str, used: int, existing: AttemptRecord | None = None) -> Decision:
        return Decision(row, message, next_attempt, used, limit, record=existing)

    def exhausted(used: int) -> Decision:
        message = f"{category.value} budget exhausted: {used} of {limit} resubmissions used"
        return decided(Row.BUDGET_EXHAUSTED, message, used)

    if record is None:
        # A job tagged as resubmission n whose record is gone (restored table, deleted item) counts
        # n resubmissions against the budget: never more than the budget allows, whatever was lost.
        used = lineage.ref.attempt
        return exhausted(used) if used >= limit else decided(Row.RESUBMIT, "", used)

    used = record.used.get(category, 0)
    existing = record.attempts.get(next_attempt)
    if record.last_attempt > next_attempt or (record.last_attempt == next_attempt and existing is None):
        message = f"attempt {record.last_attempt} already exists in lineage {record.lineage_id}"
        return decided(Row.ALREADY_HANDLED, message, used, existing)
    if existing is not None:
        if existing.failed_job_arn != job.arn:
            return decided(
                Row.ALREADY_HANDLED, f"attempt {next_attempt} answers another job's failure", used, existing
            )
        if existing.state is AttemptState.SUBMITTING:
            return decided(Row.SUBMIT_NOT_CONFIRMED, "submit not confirmed", used, existing)
        if existing.state in (AttemptState.SUBMITTED, AttemptState.DRY_RUN) and not existing.published:
            return decided(Row.NOT_PUBLISHED, "event not published", used, existing)
        return decided(
            Row.ALREADY_HANDLED, f"attempt {next_attempt} is {existing.state.value}", used, existing
        )
    if any(r.failed_job_arn == job.arn for r in record.attempts.values()):
        return decided(Row.ALREADY_HANDLED, "this failure was already answered", used)
    if used >= limit:
        return exhausted(used)
    wait = backoff_seconds(record.last_attempt, settings.backoff_base_seconds, settings.backoff_max_seconds)
    if wait > 0 and record.last_submitted_at is not None:
        due = record.last_submitted_at + timedelta(seconds=wait)
        if now < due:
            remaining = (due - now).total_seconds()
            message = f"backoff: resubmission {next_attempt} is due in {remaining:.0f} s"
            return Decision(Row.BACKOFF, message, next_attempt, used, limit, defer_seconds=remaining)
    return decided(Row.RESUBMIT, "", used)


def _checkpoint_rows(checkpoint: CheckpointState, plan: Decision, settings: RecoverySettings) -> Decision:
    """Rows 16-18, for a job rows 1-15 let through (``plan``: its attempt and budget)."""
    configured = checkpoint.location is not None
    if checkpoint.restarts_from_step_zero and settings.no_checkpoint.refuses(configured):
        where = checkpoint.uri or "no checkpoint location configured"
        detail = f" ({checkpoint.rejected})" if checkpoint.rejected else ""
        why = "the job configures checkpoints, so step 0 would lose its work; " if configured else ""
        message = (
            f"no checkpoint to resume from at {where}{detail}; {why}"
            f"BATCHPILOT_RECOVERY_NO_CHECKPOINT={settings.no_checkpoint.value}"
        )
        return Decision(Row.NO_CHECKPOINT, message, plan.attempt, plan.used, plan.limit)
    row = Row.DRY_RUN if settings.dry_run_reason else Row.RESUBMIT
    message = ""
    if checkpoint.restarts_from_step_zero:
        why = f": {checkpoint.rejected}" if checkpoint.rejected else ""
        message = f"restarts from step 0 (no checkpoint{why})"
    return Decision(row, message, plan.attempt, plan.used, plan.limit)


def decide(case: Case, settings: RecoverySettings, now: datetime) -> Decision | Need:
    """The decision for one failure (see :func:`_decide`); in dry-run (``RecoveryDryRun=true``, or
    no job queue named) its message says so, whatever the row.
    """
    decision = _decide(case, settings, now)
    reason = settings.dry_run_reason
    if isinstance(decision, Decision) and reason:
        dry = f"dry run ({reason}): nothing is submitted"
        message = f"{decision.message}; {dry}" if decision.message else dry
        return replace(decision, message=message)
    return decision


def _decide(case: Case, settings: RecoverySettings, now: datetime) -> Decision | Need:
    """The decision for one failure: the first row of :class:`Row` that matches on what is known.

    Args:
        case: what is known so far (see :class:`Case`).
        settings: the recovery settings (budgets, backoff, scope, checkpoint policy, dry-run).
        now: the current time, aware UTC (backoff).

    Returns:
        The :class:`Decision`, or the :class:`Need` to gather before one can be made (call again
        with it).
    """
    facts = case.current
    job = case.job
    described = isinstance(job, JobSnapshot)
    needs: list[Need] = []

    decision = _job_rows(facts)
    if decision is not None:
        return decision
    if facts.kind is JobKind.SERVICE_JOB and not described:  # row 5 waits for DescribeServiceJob
        if job is UNKNOWN:
            needs.append(Need.DESCRIPTION)
    elif (why := _not_recoverable(facts)) is not None:
        return Decision(Row.NOT_RECOVERABLE, why)
    elif facts.time_limit_action and not settings.resubmit_time_limited:
        # AWS Batch User Guide, "Automatic remediation with jobStateTimeLimitActions": an
        # administrator chose how long a job may wait; resubmitting would undo that choice.
        message = (
            "its job queue's jobStateTimeLimitActions ended it (an administrator's limit); "
            "BATCHPILOT_RECOVERY_RESUBMIT_TIME_LIMITED=false"
        )
        return Decision(Row.TIME_LIMIT_ACTION, message)
    queue = job.job_queue if isinstance(job, JobSnapshot) else facts.queue_arn
    if facts.kind is not JobKind.TRAINING_JOB and not settings.manages_queue(queue):
        message = f"job queue {resource_name(queue) or '?'} is not in BATCHPILOT_RECOVERY_JOB_QUEUES"
        return Decision(Row.QUEUE_NOT_MANAGED, message)
    if job is UNKNOWN:
        needs.append(Need.DESCRIPTION)
    elif job is None:
        return Decision(Row.NOT_FOUND, "AWS no longer describes this job; nothing to rebuild")
    elif job.kind is not JobKind.CONTAINER_JOB and not settings.allows_role(job.role_arn):
        message = "the job's SageMaker execution role is not in BATCHPILOT_RECOVERY_SAGEMAKER_ROLE_ARNS"
        return Decision(Row.ROLE_NOT_ALLOWED, message)
    elif (
        job.kind is JobKind.SERVICE_JOB
        and job.facts.category is Category.PREEMPTION
        and job.preemption_retries is not None
        and not settings.extend_preemption_retries
    ):
        message = (
            f"Batch failed it after the {job.preemption_retries} preemption retries its submitter "
            "allowed (preemptionRetriesBeforeTermination); "
            "BATCHPILOT_RECOVERY_EXTEND_PREEMPTION_RETRIES=false"
        )
        return Decision(Row.PREEMPTION_RETRIES_SPENT, message)

    lineage = case.lineage
    if lineage is UNKNOWN:
        needs.append(Need.LINEAGE)
    elif lineage.record is not None and lineage.record.answered(facts.arn):
        return Decision(Row.ALREADY_HANDLED, "this failure was already answered", lineage.ref.attempt + 1)
    if needs or not isinstance(job, JobSnapshot) or lineage is UNKNOWN:
        return min(needs)

    plan = _lineage_rows(job, lineage, now, settings)
    if plan.row is not Row.RESUBMIT:
        return plan
    if case.checkpoint is UNKNOWN:
        return Need.CHECKPOINT
    return _checkpoint_rows(case.checkpoint, plan, settings)
