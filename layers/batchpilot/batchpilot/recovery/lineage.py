"""The lineage of a job: the original job and each resubmission (pure data).

One lineage per job batchpilot did not create (its id comes from that job's ARN,
:func:`~batchpilot.recovery.naming.lineage_id_for`). Every resubmitted job carries the tags
``batchpilot:lineage`` and ``batchpilot:attempt``, so its own failure continues the same lineage.

Exactly once: before a submit, the lineage record is written with a condition on the ``version``
and ``last_attempt`` that were read (DynamoDB, :mod:`batchpilot.io.dynamodb.lineage`). Two
deliveries of the same failure can both read the record, but only one write of attempt ``n`` can
succeed; the other re-reads, finds attempt ``n`` taken by the same failed job and stops. What to
do given a lineage is decided in :func:`batchpilot.recovery.policy.decide` (rows 11-15).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum

from batchpilot.recovery.naming import ATTEMPT_TAG, LINEAGE_TAG, lineage_id_for
from batchpilot.recovery.requests import Operation
from batchpilot.shared.classification import Category, JobKind

__all__ = [
    "AttemptRecord",
    "AttemptState",
    "Lineage",
    "LineageRef",
    "LineageView",
    "base_name",
    "ref_from_tags",
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
        decided_at: when recovery decided (aware UTC).
        operation: the API operation that submits (or submitted) the new job.
        new_job_name: the deterministic name of the new job.
        state: see :class:`AttemptState`.
        new_job_arn: set once AWS accepted the submit.
        client_token: SubmitServiceJob ``clientToken`` (service jobs).
        checkpoint_uri / checkpoint_time: the checkpoint the new job resumes from, when any.
        checkpoint_object / checkpoint_age_seconds: its newest object (``s3://bucket/key``) and
            that object's age at the failure in seconds, when a checkpoint counted.
        restarts_from_step_zero: no checkpoint was found.
        lost_instance_hours: work the failed attempt lost (instance-hours).
        published: the ``Job Resubmitted`` (or final ``Recovery Failed``) event was published.
        failure_published: a ``Recovery Failed`` event for a transient submit error was published.
        error_code: AWS's error code when the submit failed.
        successor_tagged: the failed job carries its successor's ARN and name
            (``batchpilot:successor-arn`` / ``-name``): tagged once, never again on a redelivery.
    """

    attempt: int
    failed_job_arn: str
    category: Category
    reason: str | None
    decided_at: datetime
    operation: Operation
    new_job_name: str
    state: AttemptState
    new_job_arn: str | None = None
    client_token: str | None = None
    checkpoint_uri: str | None = None
    checkpoint_time: datetime | None = None
    checkpoint_object: str | None = None
    checkpoint_age_seconds: float | None = None
    restarts_from_step_zero: bool = False
    lost_instance_hours: float = 0.0
    published: bool = False
    failure_published: bool = False
    error_code: str | None = None
    successor_tagged: bool = False


@dataclass(frozen=True)
class Lineage:
    """A lineage record (DynamoDB item ``pk = recovery#lineage#<id>``, ``sk = LINEAGE``).

    Attributes:
        lineage_id: ``bp`` + 20 hex digits.
        job_kind: what kind of job the lineage resubmits.
        original_job_arn / original_job_name: the job the lineage started from (when the record
            had to be rebuilt from tags alone, the earliest job known).
        job_queue: the job queue ARN (Batch kinds).
        created_at: when the record was first written (aware UTC).
        last_attempt: number of the latest resubmission (0: none yet).
        used: resubmissions so far per category (the budgets).
        last_submitted_at: when the latest resubmission was decided (for the backoff).
        attempts: every resubmission, by number.
        version: incremented by every write; writes are conditional on it.
        first_started_at: when the original job's first attempt started (aware UTC), when known:
            a checkpoint object written before it is not this lineage's.
    """

    lineage_id: str
    job_kind: JobKind
    original_job_arn: str
    original_job_name: str
    job_queue: str | None
    created_at: datetime
    last_attempt: int = 0
    used: dict[Category, int] = field(default_factory=dict)
    last_submitted_at: datetime | None = None
    attempts: dict[int, AttemptRecord] = field(default_factory=dict)
    version: int = 0
    first_started_at: datetime | None = None

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

    def answered(self, job_arn: str) -> bool:
        """True when a resubmission answering the failure of ``job_arn`` was decided and published
        (submitted, dry-run or refused for good): nothing is left to do for that failure."""
        done = (AttemptState.SUBMITTED, AttemptState.DRY_RUN, AttemptState.FAILED)
        return any(
            a.failed_job_arn == job_arn and a.state in done and a.published for a in self.attempts.values()
        )


@dataclass(frozen=True, slots=True)
class LineageRef:
    """Which lineage a failed job belongs to and which attempt it was (0 = the original job)."""

    lineage_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class LineageView:
    """A failed job's lineage as read from the store.

    Attributes:
        ref: the lineage and which of its attempts failed.
        record: the stored lineage; None when nothing was stored for it yet.
        pinned: ``ref`` came from the pointer item written when batchpilot submitted the job
            (``recovery#job#<arn>``), so the job's tags cannot change it.
    """

    ref: LineageRef
    record: Lineage | None
    pinned: bool = False


_OWN_SUFFIX = re.compile(r"-r\d+-[A-Za-z0-9]{1,6}$")


def base_name(name: str) -> str:
    """A job name without batchpilot's ``-r<attempt>-<lineage>`` suffix (the stem of new names)."""
    return _OWN_SUFFIX.sub("", name) or name


def ref_from_tags(job_arn: str, tags: Mapping[str, str]) -> LineageRef:
    """The lineage of a failed job from its tags (``batchpilot:lineage`` and a numeric
    ``batchpilot:attempt``, set on every job batchpilot submits), else the lineage the job itself
    starts (attempt 0, id from its ARN)."""
    lineage_id = tags.get(LINEAGE_TAG)
    attempt = tags.get(ATTEMPT_TAG, "")
    if lineage_id and attempt.isdigit():
        return LineageRef(lineage_id, int(attempt))
    return LineageRef(lineage_id_for(job_arn), 0)
