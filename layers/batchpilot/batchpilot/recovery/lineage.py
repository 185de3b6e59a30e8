"""The lineage of a job: the original job and each resubmission (pure data and planning).

One lineage per job batchpilot did not create (its id comes from that job's ARN,
:func:`~batchpilot.recovery.naming.lineage_id_for`). Every resubmitted job carries the tags
``batchpilot:lineage`` and ``batchpilot:attempt``, so its own failure continues the same lineage.

Exactly once: before a submit, the lineage record is written with a condition on the ``version``
and ``last_attempt`` that were read (DynamoDB, :mod:`batchpilot.io.dynamodb.lineage`). Two
deliveries of the same failure can both read the record, but only one write of attempt ``n`` can
succeed; the other re-reads, finds attempt ``n`` taken by the same failed job and stops.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from batchpilot.recovery.pacing import backoff_seconds
from batchpilot.shared.classification import Category

__all__ = [
    "AttemptRecord",
    "AttemptState",
    "Lineage",
    "LineageRef",
    "Plan",
    "Step",
    "base_name",
    "plan",
]


class AttemptState(StrEnum):
    """Where one resubmission stands."""

    SUBMITTING = "SUBMITTING"  # reserved in DynamoDB; the submit call may or may not have happened
    SUBMITTED = "SUBMITTED"  # AWS accepted it; new_job_arn is set
    FAILED = "FAILED"  # AWS refused it for good (e.g. ResourceLimitExceeded, ValidationException)
    DRY_RUN = "DRY_RUN"  # decided in dry-run mode: nothing was submitted


@dataclass(frozen=True)
class AttemptRecord:
    """One resubmission in a lineage.

    Attributes:
        attempt: 1 for the first resubmission, 2 for the next, ...
        failed_job_arn: the job whose failure this resubmission answers.
        category: the failure category (``PREEMPTION``, ``SPOT_INTERRUPTION``, ...).
        reason: AWS's reason text for the failure (free text, truncated to 500 characters).
        decided_at: when recovery decided (UTC).
        operation: ``batch:SubmitServiceJob`` / ``batch:SubmitJob`` / ``sagemaker:CreateTrainingJob``.
        new_job_name: the deterministic name of the new job.
        state: see :class:`AttemptState`.
        new_job_arn: set once AWS accepted the submit.
        client_token: SubmitServiceJob ``clientToken`` (service jobs).
        checkpoint_uri / checkpoint_time: the checkpoint the new job resumes from, when any.
        restarts_from_step_zero: no checkpoint was found.
        lost_instance_hours: work the failed attempt lost (instance-hours).
        published: the ``Job Resubmitted`` (or final ``Recovery Failed``) event was published.
        failure_published: a ``Recovery Failed`` event for a transient submit error was published.
        error_code: AWS's error code when the submit failed.
    """

    attempt: int
    failed_job_arn: str
    category: str
    reason: str | None
    decided_at: datetime
    operation: str
    new_job_name: str
    state: AttemptState
    new_job_arn: str | None = None
    client_token: str | None = None
    checkpoint_uri: str | None = None
    checkpoint_time: datetime | None = None
    restarts_from_step_zero: bool = False
    lost_instance_hours: float = 0.0
    published: bool = False
    failure_published: bool = False
    error_code: str | None = None


@dataclass(frozen=True)
class Lineage:
    """A lineage record (DynamoDB item ``pk = recovery#lineage#<id>``, ``sk = LINEAGE``).

    Attributes:
        lineage_id: ``bp`` + 20 hex digits.
        job_kind: ``service-job``, ``container-job`` or ``training-job``.
        original_job_arn / original_job_name: the job the lineage started from (when the record
            had to be rebuilt from tags alone, the earliest job known).
        job_queue: the job queue ARN (Batch kinds).
        created_at: when the record was first written.
        last_attempt: number of the latest resubmission (0: none yet).
        used: resubmissions so far per category (the budgets).
        last_submitted_at: when the latest resubmission was decided (for the backoff).
        attempts: every resubmission, by number.
        version: incremented by every write; writes are conditional on it.
    """

    lineage_id: str
    job_kind: str
    original_job_arn: str
    original_job_name: str
    job_queue: str | None
    created_at: datetime
    last_attempt: int = 0
    used: dict[str, int] = field(default_factory=dict)
    last_submitted_at: datetime | None = None
    attempts: dict[int, AttemptRecord] = field(default_factory=dict)
    version: int = 0

    def with_attempt(self, record: AttemptRecord) -> Lineage:
        """A copy with ``record`` as the newest resubmission (budget and backoff clock advanced)."""
        used = dict(self.used)
        used[record.category] = used.get(record.category, 0) + 1
        return replace(
            self,
            last_attempt=record.attempt,
            used=used,
            last_submitted_at=record.decided_at,
            attempts={**self.attempts, record.attempt: record},
            version=self.version + 1,
        )


@dataclass(frozen=True, slots=True)
class LineageRef:
    """Which lineage a failed job belongs to and which attempt it was (0 = the original job)."""

    lineage_id: str
    attempt: int


class Step(StrEnum):
    """What to do for a failed job, given its lineage."""

    NEW = "NEW"  # reserve the next attempt, then submit
    RESUME = "RESUME"  # the attempt was reserved but not confirmed: submit again (idempotent)
    PUBLISH = "PUBLISH"  # submitted but the event was not published: publish it
    DUPLICATE = "DUPLICATE"  # this failure was already answered (or a newer attempt exists)
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    DEFER = "DEFER"  # the backoff since the previous resubmission is not over


@dataclass(frozen=True)
class Plan:
    """The outcome of :func:`plan`.

    Attributes:
        step: what to do.
        attempt: the resubmission number concerned (the next one for NEW).
        used / limit: resubmissions used and allowed for the category (before this one).
        defer_seconds: for DEFER, seconds until the backoff is over.
        record: the existing attempt for RESUME / PUBLISH / DUPLICATE, when there is one.
        message: a one-line explanation.
    """

    step: Step
    attempt: int
    used: int = 0
    limit: int = 0
    defer_seconds: float = 0.0
    record: AttemptRecord | None = None
    message: str = ""


_OWN_SUFFIX = re.compile(r"-r\d+-[A-Za-z0-9]{1,6}$")


def base_name(name: str) -> str:
    """A job name without batchpilot's ``-r<attempt>-<lineage>`` suffix (the stem of new names)."""
    return _OWN_SUFFIX.sub("", name) or name


def plan(
    lineage: Lineage | None,
    *,
    failed_job_arn: str,
    failed_attempt: int,
    category: Category,
    budgets: dict[Category, int],
    backoff_base: float,
    backoff_max: float,
    now: datetime,
) -> Plan:
    """Decide the lineage step for the failure of ``failed_job_arn`` (resubmission ``failed_attempt``
    of its lineage, 0 for the original job).

    A record that is missing although the job's tags say it is resubmission ``n`` (restored table,
    deleted item) counts ``n`` resubmissions against this category's budget: never more
    resubmissions than the budget allows, whatever was lost.
    """
    limit = budgets.get(category, 0)
    next_attempt = failed_attempt + 1
    if lineage is None:
        used = failed_attempt
        if used >= limit:
            return Plan(
                Step.BUDGET_EXHAUSTED, next_attempt, used, limit, message=_exhausted(category, used, limit)
            )
        return Plan(Step.NEW, next_attempt, used, limit)

    used = lineage.used.get(category.value, 0)
    existing = lineage.attempts.get(next_attempt)
    if lineage.last_attempt > next_attempt or (lineage.last_attempt == next_attempt and existing is None):
        return Plan(
            Step.DUPLICATE,
            next_attempt,
            used,
            limit,
            record=existing,
            message=f"attempt {lineage.last_attempt} already exists in lineage {lineage.lineage_id}",
        )
    if existing is not None:
        if existing.failed_job_arn != failed_job_arn:
            return Plan(
                Step.DUPLICATE,
                next_attempt,
                used,
                limit,
                record=existing,
                message=f"attempt {next_attempt} answers another job's failure",
            )
        if existing.state is AttemptState.SUBMITTING:
            return Plan(
                Step.RESUME, next_attempt, used, limit, record=existing, message="submit not confirmed"
            )
        if existing.state in (AttemptState.SUBMITTED, AttemptState.DRY_RUN) and not existing.published:
            return Plan(
                Step.PUBLISH, next_attempt, used, limit, record=existing, message="event not published"
            )
        return Plan(
            Step.DUPLICATE,
            next_attempt,
            used,
            limit,
            record=existing,
            message=f"attempt {next_attempt} is {existing.state.value}",
        )
    if any(r.failed_job_arn == failed_job_arn for r in lineage.attempts.values()):
        return Plan(Step.DUPLICATE, next_attempt, used, limit, message="this failure was already answered")
    if used >= limit:
        return Plan(
            Step.BUDGET_EXHAUSTED, next_attempt, used, limit, message=_exhausted(category, used, limit)
        )
    wait = backoff_seconds(lineage.last_attempt, backoff_base, backoff_max)
    if wait > 0 and lineage.last_submitted_at is not None:
        due = lineage.last_submitted_at + timedelta(seconds=wait)
        if now < due:
            remaining = (due - now).total_seconds()
            return Plan(
                Step.DEFER,
                next_attempt,
                used,
                limit,
                defer_seconds=remaining,
                message=f"backoff: resubmission {next_attempt} is due in {remaining:.0f} s",
            )
    return Plan(Step.NEW, next_attempt, used, limit)


def _exhausted(category: Category, used: int, limit: int) -> str:
    return f"{category.value} budget exhausted: {used} of {limit} resubmissions used"
