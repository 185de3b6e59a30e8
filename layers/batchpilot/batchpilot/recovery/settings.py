"""Settings of the recovery function, validated once at cold start (env ``BATCHPILOT_*``).

Every variable is optional except ``BATCHPILOT_STATE_TABLE``. A bad value raises
:class:`~batchpilot.shared.settings.ConfigError` naming the variable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from batchpilot.shared.arns import resource_name
from batchpilot.shared.classification import Category
from batchpilot.shared.settings import FunctionSettings

__all__ = [
    "ALL",
    "BUDGET_CATEGORIES",
    "DEFAULT_BUDGETS",
    "DEFAULT_CONTAINER_CHECKPOINT_SOURCES",
    "CheckpointSource",
    "NoCheckpoint",
    "RecoverySettings",
]

ALL = "*"
"""The value of a scope setting (job queues, execution roles) that means "every one"."""

BUDGET_CATEGORIES: tuple[Category, ...] = (
    Category.PREEMPTION,
    Category.SPOT_INTERRUPTION,
    Category.CAPACITY,
    Category.INTERNAL_ERROR,
)
"""The categories recovery may act on; each has its own budget per lineage."""

DEFAULT_BUDGETS: dict[Category, int] = {
    Category.PREEMPTION: 3,
    Category.SPOT_INTERRUPTION: 5,
    Category.CAPACITY: 3,
    Category.INTERNAL_ERROR: 2,
}
"""Resubmissions allowed per lineage and category (the defaults in docs/recovery.md)."""

DEFAULT_CONTAINER_CHECKPOINT_SOURCES = (
    "parameter:checkpoint_uri,environment:CHECKPOINT_URI,tag:checkpoint-uri"
)
"""Where a container job's checkpoint location is read from, first found wins."""


class NoCheckpoint(StrEnum):
    """What to do when a job has no checkpoint to resume from."""

    PROCEED = "proceed"  # resubmit; the notification says it restarts from step 0
    REFUSE = "refuse"  # skip with NO_CHECKPOINT
    # The default: skip with NO_CHECKPOINT when the job configures a checkpoint location (its
    # checkpoint is missing, foreign or stale: step 0 would silently lose work); a job that
    # configures none restarts from step 0 as it always would.
    REFUSE_IF_CONFIGURED = "refuse-if-configured"

    def refuses(self, configured: bool) -> bool:
        """True when a job without a checkpoint that counts is not resubmitted; ``configured``:
        the job names a checkpoint location."""
        return self is NoCheckpoint.REFUSE or (self is NoCheckpoint.REFUSE_IF_CONFIGURED and configured)


class CheckpointSource(StrEnum):
    """Where in a container job (DescribeJobs ``JobDetail``) a checkpoint location can live."""

    PARAMETER = "parameter"  # parameters[<name>]
    ENVIRONMENT = "environment"  # container / ECS / EKS container environment variable <name>
    TAG = "tag"  # tags[<name>]


def _split(value: Any) -> Any:
    """``"a, b,,c"`` → ``("a", "b", "c")``; other values are left to pydantic."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _budgets(value: Any) -> Any:
    """``"PREEMPTION=3,CAPACITY=1"`` → ``{Category.PREEMPTION: 3, Category.CAPACITY: 1}``."""
    if not isinstance(value, str):
        return value
    out: dict[str, Any] = {}
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        key, sep, number = part.partition("=")
        if not sep:
            raise ValueError(f"expected CATEGORY=N, got {part[:40]!r}")
        out[key.strip().upper()] = number.strip()
    return out


def _sources(value: Any) -> Any:
    """``"parameter:checkpoint_uri,tag:ckpt"`` → ``((PARAMETER, "checkpoint_uri"), (TAG, "ckpt"))``."""
    if not isinstance(value, str):
        return value
    out = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        kind, sep, name = part.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"expected parameter:NAME, environment:NAME or tag:NAME, got {part[:60]!r}")
        out.append((kind.strip().lower(), name.strip()))
    return tuple(out)


_QUEUE_ARN = re.compile(r"^arn:aws[a-z-]*:batch:[a-z0-9-]+:\d{12}:job-queue/[A-Za-z0-9_-]{1,128}$")
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")


class RecoverySettings(FunctionSettings):
    """Configuration of the recovery function.

    Attributes:
        state_table: DynamoDB table for lineage records (``BATCHPILOT_STATE_TABLE``, required).
        event_bus: bus for ``Job Resubmitted`` / ``Recovery Skipped`` / ``Recovery Failed``
            (``BATCHPILOT_EVENT_BUS``, default ``default``).
        dry_run: decide, record and publish (``dry_run: true``) but submit nothing
            (``BATCHPILOT_RECOVERY_DRY_RUN``, default false).
        job_queues: job queue ARNs or names recovery may resubmit to, ``("*",)`` for all, or
            ``()`` for none (``BATCHPILOT_RECOVERY_JOB_QUEUES``, comma-separated, default empty:
            with none named, recovery decides, reports and alerts as dry-run and submits
            nothing, see :attr:`dry_run_reason`).
        execution_roles: SageMaker execution role ARNs a resubmitted training job may pass, or
            ``("*",)`` (``BATCHPILOT_RECOVERY_SAGEMAKER_ROLE_ARNS``, default ``*``).
        budgets: resubmissions per lineage and category (``BATCHPILOT_RECOVERY_BUDGETS``,
            ``PREEMPTION=3,SPOT_INTERRUPTION=5,CAPACITY=3,INTERNAL_ERROR=2``; categories left out
            keep their default; 0 disables recovery for that category).
        backoff_base_seconds / backoff_max_seconds: the wait before the n-th resubmission of one
            lineage is ``min(max, base * 2**(n-2))`` seconds after the previous one (none before the
            first) (``BATCHPILOT_RECOVERY_BACKOFF_BASE_SECONDS`` default 60,
            ``BATCHPILOT_RECOVERY_BACKOFF_MAX_SECONDS`` default 3600; at most 43200, SQS's longest
            visibility timeout).
        no_checkpoint: what to do when a job has no checkpoint that counts
            (``BATCHPILOT_RECOVERY_NO_CHECKPOINT``): ``refuse-if-configured`` (default: refuse
            when the job configures a checkpoint location, else restart from step 0),
            ``proceed`` or ``refuse``.
        container_checkpoint: ordered sources of a container job's checkpoint S3 URI
            (``BATCHPILOT_RECOVERY_CONTAINER_CHECKPOINT``, default
            ``parameter:checkpoint_uri,environment:CHECKPOINT_URI,tag:checkpoint-uri``).
        submits_per_second: client-side limit on submit calls for the whole function
            (``BATCHPILOT_RECOVERY_SUBMITS_PER_SECOND``, default 4, at most 4.5: SubmitServiceJob
            allows 5 per second per account, and people share that account).
        max_concurrency: how many invocations can run at once (the event source mapping's
            ``MaximumConcurrency``; ``BATCHPILOT_RECOVERY_MAX_CONCURRENCY``, default 2); each
            invocation paces itself at ``submits_per_second / max_concurrency``.
        queue_url: the function's own SQS queue, used to delay a record until its backoff is over
            (``BATCHPILOT_RECOVERY_QUEUE_URL``; without it a deferred record comes back after the
            queue's visibility timeout).
        checkpoint_max_pages: how many ListObjectsV2 pages (1000 keys each) to read per
            checkpoint prefix (``BATCHPILOT_RECOVERY_CHECKPOINT_MAX_PAGES``, default 20).
        resubmit_time_limited: resubmit jobs that their job queue's ``jobStateTimeLimitActions``
            cancelled or terminated (``BATCHPILOT_RECOVERY_RESUBMIT_TIME_LIMITED``, default false:
            an administrator set that limit on purpose).
        extend_preemption_retries: resubmit service jobs that failed after the
            ``preemptionRetriesBeforeTermination`` their submitter set, within the PREEMPTION
            budget (``BATCHPILOT_RECOVERY_EXTEND_PREEMPTION_RETRIES``, default false).
        checkpoint_max_age_seconds: the oldest a checkpoint object may be at the failure, in
            seconds, to count (``BATCHPILOT_RECOVERY_CHECKPOINT_MAX_AGE_SECONDS``, default 86400:
            24 h; at least 60, at most 30 days).
    """

    function: str = Field(default="recovery", min_length=1, max_length=64)
    state_table: str = Field(min_length=3, max_length=255, pattern=r"^[A-Za-z0-9_.-]+$")
    event_bus: str = Field(default="default", min_length=1, max_length=1600, pattern=r"^[A-Za-z0-9._/:-]+$")
    dry_run: bool = False
    job_queues: Annotated[tuple[str, ...], BeforeValidator(_split)] = ()
    execution_roles: Annotated[tuple[str, ...], BeforeValidator(_split)] = (ALL,)
    budgets: Annotated[dict[Category, int], BeforeValidator(_budgets)] = Field(
        default_factory=lambda: dict(DEFAULT_BUDGETS)
    )
    backoff_base_seconds: float = Field(default=60.0, ge=0, le=43_200)
    backoff_max_seconds: float = Field(default=3600.0, ge=0, le=43_200)
    no_checkpoint: NoCheckpoint = NoCheckpoint.REFUSE_IF_CONFIGURED
    container_checkpoint: Annotated[tuple[tuple[CheckpointSource, str], ...], BeforeValidator(_sources)] = (
        Field(default=DEFAULT_CONTAINER_CHECKPOINT_SOURCES, validate_default=True)
    )
    submits_per_second: float = Field(default=4.0, gt=0, le=4.5)
    max_concurrency: int = Field(default=2, ge=1, le=1000)
    queue_url: str | None = Field(default=None, min_length=1, max_length=2048, pattern=r"^\S+$")
    checkpoint_max_pages: int = Field(default=20, ge=1, le=1000)
    checkpoint_max_age_seconds: float = Field(default=86_400.0, ge=60, le=30 * 86_400)
    resubmit_time_limited: bool = False
    extend_preemption_retries: bool = False

    _ENV: ClassVar[dict[str, str]] = {
        **FunctionSettings._ENV,
        "state_table": "BATCHPILOT_STATE_TABLE",
        "event_bus": "BATCHPILOT_EVENT_BUS",
        "dry_run": "BATCHPILOT_RECOVERY_DRY_RUN",
        "job_queues": "BATCHPILOT_RECOVERY_JOB_QUEUES",
        "execution_roles": "BATCHPILOT_RECOVERY_SAGEMAKER_ROLE_ARNS",
        "budgets": "BATCHPILOT_RECOVERY_BUDGETS",
        "backoff_base_seconds": "BATCHPILOT_RECOVERY_BACKOFF_BASE_SECONDS",
        "backoff_max_seconds": "BATCHPILOT_RECOVERY_BACKOFF_MAX_SECONDS",
        "no_checkpoint": "BATCHPILOT_RECOVERY_NO_CHECKPOINT",
        "container_checkpoint": "BATCHPILOT_RECOVERY_CONTAINER_CHECKPOINT",
        "submits_per_second": "BATCHPILOT_RECOVERY_SUBMITS_PER_SECOND",
        "max_concurrency": "BATCHPILOT_RECOVERY_MAX_CONCURRENCY",
        "queue_url": "BATCHPILOT_RECOVERY_QUEUE_URL",
        "checkpoint_max_pages": "BATCHPILOT_RECOVERY_CHECKPOINT_MAX_PAGES",
        "checkpoint_max_age_seconds": "BATCHPILOT_RECOVERY_CHECKPOINT_MAX_AGE_SECONDS",
        "resubmit_time_limited": "BATCHPILOT_RECOVERY_RESUBMIT_TIME_LIMITED",
        "extend_preemption_retries": "BATCHPILOT_RECOVERY_EXTEND_PREEMPTION_RETRIES",
    }

    @field_validator("job_queues")
    @classmethod
    def _check_queues(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:  # none named: dry-run (dry_run_reason)
            return value
        if ALL in value:
            if len(value) > 1:
                raise ValueError("* cannot be combined with job queue names")
            return value
        for item in value:
            if not (_QUEUE_ARN.match(item) or _QUEUE_NAME.match(item)):
                raise ValueError(f"not a job queue ARN or name: {item[:80]!r}")
        return value

    @field_validator("execution_roles")
    @classmethod
    def _check_roles(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("give IAM role ARNs, or * for every role")
        if ALL in value:
            if len(value) > 1:
                raise ValueError("* cannot be combined with role ARNs")
            return value
        for item in value:
            if not _ROLE_ARN.match(item):
                raise ValueError(f"not an IAM role ARN: {item[:80]!r}")
        return value

    @field_validator("budgets", mode="after")
    @classmethod
    def _check_budgets(cls, value: dict[Category, int]) -> dict[Category, int]:
        unknown = [c.value for c in value if c not in BUDGET_CATEGORIES]
        if unknown:
            allowed = ", ".join(c.value for c in BUDGET_CATEGORIES)
            raise ValueError(f"no budget for {', '.join(unknown)} (budgets exist for {allowed})")
        bad = [f"{c.value}={n}" for c, n in value.items() if not 0 <= n <= 100]
        if bad:
            raise ValueError(f"budgets must be 0 to 100: {', '.join(bad)}")
        return {**DEFAULT_BUDGETS, **value}

    @field_validator("container_checkpoint")
    @classmethod
    def _check_sources(
        cls, value: tuple[tuple[CheckpointSource, str], ...]
    ) -> tuple[tuple[CheckpointSource, str], ...]:
        for _, name in value:
            if len(name) > 256:
                raise ValueError("checkpoint source names are at most 256 characters")
        return value

    @field_validator("backoff_max_seconds")
    @classmethod
    def _check_backoff(cls, value: float, info: ValidationInfo) -> float:
        base = info.data.get("backoff_base_seconds")
        if isinstance(base, float | int) and value < base:
            raise ValueError("must be at least BATCHPILOT_RECOVERY_BACKOFF_BASE_SECONDS")
        return value

    # ------------------------------------------------------------------ questions the policy asks
    @property
    def dry_run_reason(self) -> str | None:
        """Why recovery submits nothing (every decision is made, reported and alerted as dry-run),
        or None when it acts: ``RecoveryDryRun=true``, or no job queue named (the default)."""
        if self.dry_run:
            return "BATCHPILOT_RECOVERY_DRY_RUN=true"
        if not self.job_queues:
            return "no job queue is named in BATCHPILOT_RECOVERY_JOB_QUEUES"
        return None

    def manages_queue(self, queue: str | None) -> bool:
        """True when ``queue`` (a job queue ARN or name) is one recovery may resubmit to. With no
        job queue named every queue is decided on (as dry-run: :attr:`dry_run_reason`)."""
        if self.job_queues == (ALL,) or not self.job_queues:
            return True
        if not queue:
            return False
        name = resource_name(queue)
        for item in self.job_queues:
            if item.startswith("arn:") and queue.startswith("arn:"):
                if item == queue:
                    return True
            elif resource_name(item) == name:
                return True
        return False

    def allows_role(self, role_arn: str | None) -> bool:
        """True when a training job may be created with ``role_arn`` (``iam:PassRole`` is granted).

        A job without a role (None) is allowed only when every role is (``*``).
        """
        if self.execution_roles == (ALL,):
            return True
        return role_arn is not None and role_arn in self.execution_roles

    def per_invocation_rate(self) -> float:
        """Submit calls per second one invocation may make (``submits_per_second / max_concurrency``)."""
        return self.submits_per_second / self.max_concurrency

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RecoverySettings:
        """Settings from field names (tests, benchmarks); same validation as :meth:`from_environ`."""
        return cls.model_validate(dict(values))
