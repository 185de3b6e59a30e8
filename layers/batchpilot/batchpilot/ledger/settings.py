"""Configuration of the ledger function, validated once at cold start (errors name the variable).

- ``BATCHPILOT_STATE_TABLE``: the StateTable (required).
- ``BATCHPILOT_LEDGER_JOB_QUEUES``: comma-separated job queue names or ARNs to reconcile and
  publish gauges for; empty (the default) means every job queue of the account and region.
- ``BATCHPILOT_LEDGER_RECONCILE_MINUTES``: how often each queue is listed and compared with the
  ledger (default 15; 1-1440). The schedule runs every minute; a queue is listed at most once
  per interval.
- ``BATCHPILOT_LEDGER_LIST_PAGES_PER_RUN``: ListJobs / ListServiceJobs pages a scheduled run may
  request (default 100; 1-10000); a listing that does not fit resumes from its cursor next run.
- ``BATCHPILOT_LEDGER_DESCRIBES_PER_RUN``: describes a scheduled run may make to size jobs the
  ledger learnt of without a size (default 200; shared evenly across queues).
- ``BATCHPILOT_LEDGER_RESERVED_INSTANCES``: JSON ``{"<service environment>": instances}``, what
  each environment has reserved (a training plan, what the team pays for); ``Utilization`` is
  in-use over it. An environment not named uses the capacity policy's ``max``
  (``BATCHPILOT_CAPACITY_POLICY``), else its capacity limit. An environment's value may also be
  ``{"<instance type>": instances}`` (its reserved instances by type: their sum is what it
  reserved, and ``IdleWhileQueuedElsewhere`` knows their type even while it runs no job).
- ``BATCHPILOT_LEDGER_STARVING_PREEMPTIONS``: preemptions after which a job is reported as
  starving (``Job Starving``, default 3; 1-100).
- ``BATCHPILOT_LEDGER_STARVING_MINUTES``: JSON ``{"<job queue>": minutes}``, with ``"*"`` for
  every other queue (default ``{"*": 60}``): how long a job may stay RUNNABLE, while its share
  uses less than its entitlement, before it is reported as starving.
- ``BATCHPILOT_EVENT_BUS``: batchpilot's own bus, where ``Job Starving`` is published.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, ClassVar, Self

from pydantic import Field, ValidationError, field_validator, model_validator

from batchpilot.shared.arns import resource_name
from batchpilot.shared.settings import ConfigError, FunctionSettings

__all__ = ["LedgerSettings"]


class LedgerSettings(FunctionSettings):
    """Settings of the ledger function (see the module docstring for the variables).

    Attributes:
        state_table: DynamoDB table name.
        job_queues: queue names (ARNs reduced to names); empty: every queue.
        reconcile_minutes: reconciliation interval per queue, minutes.
        describes_per_run: describe budget of one scheduled run.
        list_pages_per_run: ListJobs / ListServiceJobs pages one scheduled run may request (its
            share of the account's AWS Batch API rate: the default 100 pages per one-minute run is
            under 2 requests per second on average, about 3 % of the 50 requests per second AWS
            Batch allows an account; AWS re:Post Knowledge Center, "AWS Batch requests error").
            A queue's listing that does not fit resumes from its cursor on the next run.
        reserved: service environment → reserved instances.
        reserved_types: service environment → the instance types of its reserved instances, for
            the environments whose reservation was given by type.
        policy_max: service environment → the capacity policy's ``max`` (read from
            ``BATCHPILOT_CAPACITY_POLICY`` when set; an unreadable policy is ignored here, the
            capacity function reports it).
        starving_preemptions: preemptions at which a job is starving.
        starving_minutes: job queue name (``"*"``: every other) → RUNNABLE minutes at which a job
            of a share below its entitlement is starving.
        event_bus: bus of ``Job Starving``.
    """

    state_table: str = Field(min_length=1, max_length=255)
    job_queues: tuple[str, ...] = ()
    reconcile_minutes: int = Field(default=15, ge=1, le=1440)
    describes_per_run: int = Field(default=200, ge=0, le=10_000)
    list_pages_per_run: int = Field(default=100, ge=1, le=10_000)
    reserved: dict[str, int] = Field(default_factory=dict)
    reserved_types: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    policy_max: dict[str, int] = Field(default_factory=dict)
    starving_preemptions: int = Field(default=3, ge=1, le=100)
    starving_minutes: dict[str, int] = Field(default_factory=lambda: {"*": 60})
    event_bus: str = Field(default="default", min_length=1, max_length=1600)

    _ENV: ClassVar[dict[str, str]] = {
        **FunctionSettings._ENV,
        "state_table": "BATCHPILOT_STATE_TABLE",
        "job_queues": "BATCHPILOT_LEDGER_JOB_QUEUES",
        "reconcile_minutes": "BATCHPILOT_LEDGER_RECONCILE_MINUTES",
        "describes_per_run": "BATCHPILOT_LEDGER_DESCRIBES_PER_RUN",
        "list_pages_per_run": "BATCHPILOT_LEDGER_LIST_PAGES_PER_RUN",
        "reserved": "BATCHPILOT_LEDGER_RESERVED_INSTANCES",
        "starving_preemptions": "BATCHPILOT_LEDGER_STARVING_PREEMPTIONS",
        "starving_minutes": "BATCHPILOT_LEDGER_STARVING_MINUTES",
        "event_bus": "BATCHPILOT_EVENT_BUS",
    }

    @property
    def starving_waiting(self) -> tuple[timedelta, dict[str, timedelta]]:
        """The default RUNNABLE threshold and each named queue's."""
        default = timedelta(minutes=self.starving_minutes.get("*", 60))
        queues = {
            resource_name(q) or q: timedelta(minutes=m) for q, m in self.starving_minutes.items() if q != "*"
        }
        return default, queues

    @field_validator("job_queues", mode="before")
    @classmethod
    def _queues(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(resource_name(part.strip()) or "" for part in value.split(",") if part.strip())
        return value

    @model_validator(mode="before")
    @classmethod
    def _reserved_by_type(cls, data: Any) -> Any:
        """``reserved`` as JSON text, when valid: each environment's instances, or its instances
        by instance type (summed into ``reserved``, the types into ``reserved_types``). Invalid
        text is left for the field's own validator, whose error names the variable."""
        value = data.get("reserved") if isinstance(data, dict) else None
        split = _split_reserved(value) if isinstance(value, str) else None
        if split is None:
            return data
        return {**data, "reserved": split[0], "reserved_types": split[1]}

    @field_validator("reserved", mode="before")
    @classmethod
    def _reserved(cls, value: Any) -> Any:
        if isinstance(value, str):  # not split by _reserved_by_type: invalid
            raise ValueError(
                'expected a JSON object {"<service environment>": <instances>} or '
                '{"<service environment>": {"<instance type>": <instances>}}'
            )
        return value

    @field_validator("starving_minutes", mode="before")
    @classmethod
    def _starving_minutes(cls, value: Any) -> Any:
        parsed = (json.loads(value) if value.strip() else {}) if isinstance(value, str) else value
        if not isinstance(parsed, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 100_000 for v in parsed.values()
        ):
            raise ValueError('expected a JSON object {"<job queue>" or "*": <minutes, 1-100000>}')
        return {"*": 60, **parsed}

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *, function: str = "ledger") -> Self:
        """Build the settings from environment variables (names in ``_ENV``).

        Raises:
            ConfigError: a variable is missing or invalid; the message names it.
        """
        values: dict[str, Any] = {"function": function}
        for name, var in cls._ENV.items():
            if environ.get(var, "").strip():
                values[name] = environ[var].strip()
        values["policy_max"] = _policy_max(environ.get("BATCHPILOT_CAPACITY_POLICY", ""))
        try:
            return cls.model_validate(values)
        except (ValidationError, ValueError) as exc:
            problems = cls._problems(exc) if isinstance(exc, ValidationError) else str(exc)
            raise ConfigError(f"invalid {function} function configuration: {problems}") from None


def _split_reserved(text: str) -> tuple[dict[str, int], dict[str, tuple[str, ...]]] | None:
    """``LedgerReservedInstances`` text → (environment → instances, environment → instance types
    of the environments given by type); ``None`` when it is not one of the two forms."""
    try:
        parsed = json.loads(text) if text.strip() else {}
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    reserved: dict[str, int] = {}
    types: dict[str, tuple[str, ...]] = {}
    for env, count in parsed.items():
        if isinstance(count, dict) and count and all(isinstance(t, str) and t for t in count):
            if not all(_instances(n) for n in count.values()):
                return None
            reserved[env] = sum(count.values())
            types[env] = tuple(sorted(count))
        elif _instances(count):
            reserved[env] = count
        else:
            return None
    return reserved, types


def _instances(value: Any) -> bool:
    """A count of instances: an int (not a bool) of at least 0."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _policy_max(text: str) -> dict[str, int]:
    """``{"service_environments": {"<env>": {"max": N}}}`` → env → N; anything else → ``{}``."""
    try:
        policy = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    envs = policy.get("service_environments") if isinstance(policy, dict) else None
    if not isinstance(envs, dict):
        return {}
    return {
        str(name): int(config["max"])
        for name, config in envs.items()
        if isinstance(config, dict) and isinstance(config.get("max"), int)
    }
