"""Configuration of the capacity function: which service environments it manages, within which bounds.

Three environment variables, validated together at cold start (every error names its variable):

- ``BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS``: comma-separated service environment ARNs (or
  names). The template scopes ``batch:UpdateServiceEnvironment`` to the same list.
- ``BATCHPILOT_CAPACITY_JOB_QUEUES``: comma-separated job queue ARNs (or names), the scope of
  ``batch:GetJobQueueSnapshot``.
- ``BATCHPILOT_CAPACITY_POLICY``: JSON, the bounds and policy of each of those environments::

    {"defaults": {"headroom": 0, "max_step": 16, "stabilisation_window_minutes": 10,
                  "cooldown_minutes": 3, "notice_repeat_minutes": 60},
     "service_environments": {
       "sm-training": {"job_queues": ["sm-training-highpri", "sm-training-lowpri"],
                       "min": 0, "max": 64,
                       "floors": [{"cron": "0 8 * * MON-FRI", "duration_minutes": 600, "min": 16}]},
       "sm-quota": {"job_queues": ["sm-quota"],
                    "units": {"ml.p4d.24xlarge": {"min": 0, "max": 8}}}}}

The names in the policy and in the two lists must be the same: an environment outside the IAM
scope could never be updated, and a name in the scope without bounds would be a silent no-op.
Counts are instances (for quota-management environments: instances of the capacity unit's
instance type); cron expressions are 5-field, evaluated in ``timezone`` (default UTC).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, ClassVar, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from batchpilot.capacity.model import NUM_INSTANCES
from batchpilot.shared.settings import FunctionSettings

__all__ = [
    "CapacityPolicyConfig",
    "CapacitySettings",
    "EnvironmentConfig",
    "PolicyDefaults",
    "ScheduledFloor",
    "UnitBounds",
]

_NAME = r"^[A-Za-z0-9_-]{1,128}$"
"""Service environment and job queue names: up to 128 letters, numbers, hyphens, underscores."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class UnitBounds(_Strict):
    """The range the capacity limit of one capacity unit may take (instances).

    Raises (validation): ``min`` greater than ``max``.
    """

    min: int = Field(default=0, ge=0, le=100_000)
    max: int = Field(ge=0, le=100_000)

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self


class ScheduledFloor(_Strict):
    """A known busy window: while it is open the capacity limit stays at or above ``min``.

    Attributes:
        cron: 5-field cron expression of the window's start (``0 8 * * MON-FRI``).
        duration_minutes: how long the window stays open after each start (1 minute to 7 days).
        min: the floor in instances while the window is open (clamped to the unit's ``max``).
        timezone: IANA zone the cron is read in (default ``UTC``).
        capacity_unit: the unit it applies to; None means ``NUM_INSTANCES`` (or every unit of a
            quota-management environment).
    """

    cron: str = Field(min_length=9, max_length=200)
    duration_minutes: int = Field(gt=0, le=7 * 24 * 60)
    min: int = Field(ge=0, le=100_000)
    timezone: str = "UTC"
    capacity_unit: str | None = None

    @field_validator("cron")
    @classmethod
    def _cron_parses(cls, value: str) -> str:
        try:
            CronSim(value, datetime(2026, 1, 1))
        except CronSimError as exc:
            raise ValueError(f"invalid cron expression {value!r}: {exc}") from None
        return value

    @field_validator("timezone")
    @classmethod
    def _zone_exists(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}") from None
        return value

    def is_open(self, now: datetime) -> bool:
        """True when ``now`` (aware) falls in a window: the latest start at or before ``now``'s
        minute is less than ``duration_minutes`` ago."""
        local = now.astimezone(ZoneInfo(self.timezone)).replace(second=0, microsecond=0)
        # CronSim(reverse=True) yields starts strictly before its argument: one minute past
        # ``now``'s minute makes a start at exactly that minute count.
        start = next(CronSim(self.cron, local + timedelta(minutes=1), reverse=True), None)
        return start is not None and local - start < timedelta(minutes=self.duration_minutes)


class PolicyDefaults(_Strict):
    """Policy values every environment gets unless it sets its own (the defaults table of docs/capacity.md).

    Attributes:
        headroom: instances added on top of in-use + RUNNABLE demand.
        max_step: the most one raise may add because of demand (instances); a configured
            minimum, an open scheduled floor and a blocked job's need are reached in one change.
            Lowering is held back by the stabilisation window instead.
        stabilisation_window_minutes: demand must stay below the limit this long before it is
            lowered; it is lowered to the highest demand seen in the window.
        cooldown_minutes: no change within this long after the previous one.
        notice_repeat_minutes: a refusal (``Capacity Limited``) that has not changed is published
            again only after this long.
    """

    headroom: int = Field(default=0, ge=0, le=10_000)
    max_step: int = Field(default=16, ge=1, le=100_000)
    stabilisation_window_minutes: int = Field(default=10, ge=0, le=24 * 60)
    cooldown_minutes: int = Field(default=3, ge=0, le=24 * 60)
    notice_repeat_minutes: int = Field(default=60, ge=1, le=7 * 24 * 60)


class EnvironmentConfig(_Strict):
    """One managed service environment: its job queues, bounds and (optional) policy overrides.

    ``min``/``max`` bound the ``NUM_INSTANCES`` limit of FIFO and fair-share environments;
    ``units`` bound each instance-type limit of a quota-management environment. At least one of
    the two must be given. Policy fields left out take the values of ``defaults``.
    """

    job_queues: tuple[str, ...] = Field(min_length=1, max_length=50)
    min: int | None = Field(default=None, ge=0, le=100_000)
    max: int | None = Field(default=None, ge=0, le=100_000)
    units: dict[str, UnitBounds] = Field(default_factory=dict, max_length=50)
    floors: tuple[ScheduledFloor, ...] = Field(default=(), max_length=20)
    headroom: int | None = Field(default=None, ge=0, le=10_000)
    max_step: int | None = Field(default=None, ge=1, le=100_000)
    stabilisation_window_minutes: int | None = Field(default=None, ge=0, le=24 * 60)
    cooldown_minutes: int | None = Field(default=None, ge=0, le=24 * 60)
    notice_repeat_minutes: int | None = Field(default=None, ge=1, le=7 * 24 * 60)

    @field_validator("job_queues")
    @classmethod
    def _queue_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        _check_names(value, "job queue")
        if len(set(value)) != len(value):
            raise ValueError("a job queue is listed twice")
        return value

    @model_validator(mode="after")
    def _bounded(self) -> Self:
        if self.max is None and not self.units:
            raise ValueError("give max (NUM_INSTANCES) or units (quota management)")
        if self.max is None and self.min is not None:
            raise ValueError("min without max")
        if self.max is not None and (self.min or 0) > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        if NUM_INSTANCES in self.units:
            raise ValueError("units are instance types; use min/max for NUM_INSTANCES")
        for floor in self.floors:
            unit = floor.capacity_unit
            if unit is not None and unit != NUM_INSTANCES and unit not in self.units:
                raise ValueError(f"floor for capacity unit {unit!r}, which has no bounds in units")
        return self

    def bounds(self) -> dict[str, UnitBounds]:
        """Capacity unit → bounds (``NUM_INSTANCES`` from ``min``/``max``, instance types from ``units``)."""
        out = dict(self.units)
        if self.max is not None:
            out[NUM_INSTANCES] = UnitBounds(min=self.min or 0, max=self.max)
        return out

    def floor(self, unit: str, now: datetime) -> int:
        """The highest open scheduled floor for ``unit`` at ``now`` (0 when none is open)."""
        return max(
            (f.min for f in self.floors if f.capacity_unit in (None, unit) and f.is_open(now)), default=0
        )

    def policy(self, defaults: PolicyDefaults) -> PolicyDefaults:
        """The effective policy values: this environment's own where set, else ``defaults``."""
        own = {name: getattr(self, name) for name in PolicyDefaults.model_fields}
        return defaults.model_copy(update={k: v for k, v in own.items() if v is not None})


class CapacityPolicyConfig(_Strict):
    """The parsed ``BATCHPILOT_CAPACITY_POLICY``: defaults and the managed environments by name."""

    defaults: PolicyDefaults = Field(default_factory=PolicyDefaults)
    service_environments: dict[str, EnvironmentConfig] = Field(default_factory=dict, max_length=50)

    @field_validator("service_environments")
    @classmethod
    def _one_environment_per_queue(cls, value: dict[str, EnvironmentConfig]) -> dict[str, EnvironmentConfig]:
        _check_names(value, "service environment")
        owner: dict[str, str] = {}
        for name, config in value.items():
            for queue in config.job_queues:
                if queue in owner:
                    raise ValueError(
                        f"job queue {queue!r} is listed under {owner[queue]!r} and {name!r}: "
                        "a job queue has one service environment"
                    )
                owner[queue] = name
        return value

    def environment_of(self, queue: str) -> str | None:
        """The managed service environment that ``queue`` (a name) feeds, or None."""
        for name, config in self.service_environments.items():
            if queue in config.job_queues:
                return name
        return None


def _check_names(names: Any, what: str) -> None:
    for name in names:
        if not re.fullmatch(_NAME, str(name)):
            raise ValueError(f"{what} name {name!r} must be 1-128 of A-Z a-z 0-9 _ -")


def _names(value: Any, kind: str) -> Any:
    """``"a,b"`` or ``"arn:aws:batch:REGION:ACCOUNT:<kind>/a,..."`` → ``("a", "b")``."""
    if not isinstance(value, str):
        return value
    names = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        if part.startswith("arn:"):
            resource = part.split(":", 5)[-1]
            if not resource.startswith(f"{kind}/") or ":batch:" not in part:
                raise ValueError(f"{part!r} is not the ARN of a Batch {kind}")
            part = resource.split("/", 1)[1]
        names.append(part)
    return tuple(names)


class CapacitySettings(FunctionSettings):
    """Settings of the capacity function (see the module docstring for the three capacity variables).

    Attributes:
        state_table: DynamoDB table for capacity state and the payload cache (``BATCHPILOT_STATE_TABLE``).
        event_bus: bus for ``Capacity Adjusted`` / ``Capacity Limited`` (``BATCHPILOT_EVENT_BUS``).
        dry_run: decide and report, never call ``UpdateServiceEnvironment``
            (``BATCHPILOT_CAPACITY_DRY_RUN``, ``true``/``false``).
        service_environments: the IAM scope of updates (``BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS``).
        job_queues: the IAM scope of queue snapshots (``BATCHPILOT_CAPACITY_JOB_QUEUES``).
        policy: bounds and policy per environment (``BATCHPILOT_CAPACITY_POLICY``, JSON).
        describe_budget: at most this many ``DescribeServiceJob`` calls per run for RUNNABLE jobs
            whose payload is not cached yet; the others count as 1 instance each until a later
            run reads them (``BATCHPILOT_CAPACITY_DESCRIBE_BUDGET``, default 300).
    """

    function: str = Field(default="capacity", min_length=1, max_length=64)
    state_table: str = Field(default="", max_length=255)
    event_bus: str = Field(default="default", min_length=1, max_length=1600)
    dry_run: bool = False
    service_environments: tuple[str, ...] = ()
    job_queues: tuple[str, ...] = ()
    policy: CapacityPolicyConfig = Field(default_factory=CapacityPolicyConfig)
    describe_budget: int = Field(default=300, ge=0, le=10_000)

    _ENV: ClassVar[dict[str, str]] = {
        **FunctionSettings._ENV,
        "state_table": "BATCHPILOT_STATE_TABLE",
        "event_bus": "BATCHPILOT_EVENT_BUS",
        "dry_run": "BATCHPILOT_CAPACITY_DRY_RUN",
        "service_environments": "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS",
        "job_queues": "BATCHPILOT_CAPACITY_JOB_QUEUES",
        "policy": "BATCHPILOT_CAPACITY_POLICY",
        "describe_budget": "BATCHPILOT_CAPACITY_DESCRIBE_BUDGET",
    }

    @field_validator("service_environments", mode="before")
    @classmethod
    def _environment_names(cls, value: Any) -> Any:
        return _names(value, "service-environment")

    @field_validator("job_queues", mode="before")
    @classmethod
    def _queue_names(cls, value: Any) -> Any:
        return _names(value, "job-queue")

    @field_validator("policy", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise ValueError(f"not valid JSON ({exc})") from None
        return value

    @model_validator(mode="after")
    def _scopes_match(self) -> Self:
        policy_envs = set(self.policy.service_environments)
        scope_envs = set(self.service_environments)
        env_var = self._ENV["service_environments"]
        if policy_envs - scope_envs:
            raise ValueError(
                f"service environment(s) {_listing(policy_envs - scope_envs)} have bounds in "
                f"BATCHPILOT_CAPACITY_POLICY but are not in {env_var} (the IAM scope): their updates "
                "would be denied"
            )
        if scope_envs - policy_envs:
            raise ValueError(
                f"service environment(s) {_listing(scope_envs - policy_envs)} are in {env_var} but "
                "have no bounds in BATCHPILOT_CAPACITY_POLICY"
            )
        policy_queues = {q for c in self.policy.service_environments.values() for q in c.job_queues}
        scope_queues = set(self.job_queues)
        queue_var = self._ENV["job_queues"]
        if policy_queues != scope_queues:
            raise ValueError(
                f"the job queues in BATCHPILOT_CAPACITY_POLICY and in {queue_var} (the IAM scope) "
                f"differ: only in the policy {_listing(policy_queues - scope_queues)}, only in "
                f"{queue_var} {_listing(scope_queues - policy_queues)}"
            )
        if self.policy.service_environments and not self.state_table:
            raise ValueError("BATCHPILOT_STATE_TABLE is required when service environments are managed")
        return self

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *, function: str = "capacity") -> Self:
        """Build the settings from environment variables (names in ``_ENV``).

        Raises:
            ConfigError: a variable is invalid, or the three capacity variables disagree; the
                message names the variable and, inside the policy JSON, the path of the bad field.
        """
        return super().from_environ(environ, function=function)

    @classmethod
    def _problems(cls, exc: ValidationError) -> str:
        """The validation errors, each named by its variable and, inside the policy JSON, the path
        of the bad field."""
        problems = []
        for error in exc.errors(include_url=False, include_input=False):
            loc = [str(part) for part in error["loc"]]
            var = cls._ENV.get(loc[0], loc[0]) if loc else "configuration"
            path = ".".join(loc[1:])
            problems.append(f"{var}{': ' + path if path else ''}: {error['msg']}")
        return "; ".join(problems)

    def environment(self, name: str) -> EnvironmentConfig:
        """The configuration of a managed environment. Raises ``KeyError`` for an unmanaged one."""
        return self.policy.service_environments[name]


def _listing(names: set[str]) -> str:
    return ", ".join(sorted(names)) or "(none)"
