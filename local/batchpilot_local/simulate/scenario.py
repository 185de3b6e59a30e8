"""Scenario files for ``batchpilot simulate``: the fleet, the job queues, the workload, batchpilot.

A scenario is YAML (or JSON, which YAML reads too), validated with pydantic; unknown fields are
errors. Every count is instances, every duration seconds unless the name says hours::

    name: example-fair-share
    seed: 7
    horizon_hours: 168
    start: 2026-11-02T00:00:00Z           # the simulated clock's origin (aware)
    instance_types:                         # optional, per SageMaker instance type
      ml.p5.48xlarge: {spot_interruptions_per_hour: 0.02, failures_per_hour: 0.001}
    service_environments:
      - {name: gpu, capacity_limits: {NUM_INSTANCES: 32}}
    job_queues:
      - name: training
        service_environment: gpu
        scheduling: FAIR_SHARE              # FIFO | FAIR_SHARE | QUOTA_MANAGEMENT
        fair_share:
          share_decay_seconds: 3600
          compute_reservation: 0
          share_distribution:
            - {share_identifier: HIGHPRI, weight_factor: 1}
    workload:
      generator:
        streams:
          - {share: HIGHPRI, arrivals_per_hour: 1.5, instance_type: ml.p5.48xlarge,
             instance_count: {kind: CHOICE, values: [4, 8, 16]},
             duration_s: {kind: LOGNORMAL, median: 14400, sigma: 0.7, max: 172800}}
    batchpilot:
      capacity: {policy: {...the CapacityPolicy parameter's JSON...}}
      recovery: {budgets: {PREEMPTION: 3}}

:func:`load_scenario` reads and checks a file; every problem is a :class:`ScenarioError` whose
message is one line naming the file and the field (``workload.generator.streams[0].duration_s``).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Self

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from batchpilot_local.simulate.instances import accelerators

__all__ = [
    "NUM_INSTANCES",
    "BatchpilotSpec",
    "CapacityErrors",
    "CapacityLoop",
    "Distribution",
    "DistributionKind",
    "FairSharePolicy",
    "Generator",
    "HeadOfLine",
    "HistorySpec",
    "InstanceTypeSpec",
    "JobQueueSpec",
    "JobTemplate",
    "QuotaPolicy",
    "QuotaShareSpec",
    "RecoveryLoop",
    "Scenario",
    "ScenarioError",
    "SchedulingKind",
    "ServiceEnvironmentSpec",
    "ShareWeight",
    "SharingStrategy",
    "Stream",
    "Workload",
    "load_scenario",
    "parse_scenario",
]

NUM_INSTANCES = "NUM_INSTANCES"
"""The capacity unit of FIFO and fair-share service environments (AWS Batch API Reference:
CapacityLimit); quota-management environments count instance types instead."""

_NAME = r"^[A-Za-z0-9_-]{1,128}$"
_SHARE = r"^[A-Za-z0-9_-]{1,255}$"
_DEFAULT_START = datetime(2026, 1, 5, tzinfo=UTC)


class ScenarioError(Exception):
    """A scenario (or the history it names) that cannot be simulated. The message is one line that
    names the file and the field or record, never a traceback."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DistributionKind(StrEnum):
    """How a value is drawn for each generated job."""

    CONSTANT = "CONSTANT"  # value
    UNIFORM = "UNIFORM"  # low .. high
    EXPONENTIAL = "EXPONENTIAL"  # mean
    LOGNORMAL = "LOGNORMAL"  # median, sigma (of the underlying normal)
    CHOICE = "CHOICE"  # values, optional weights


class Distribution(_Strict):
    """A distribution of one job attribute (seconds, instances or a priority).

    A bare number in the file is a ``CONSTANT``. ``min``/``max`` clip every draw (a lognormal
    duration with ``max: 172800`` never exceeds two days).
    """

    kind: DistributionKind
    value: float | None = None
    low: float | None = None
    high: float | None = None
    mean: float | None = Field(default=None, gt=0)
    median: float | None = Field(default=None, gt=0)
    sigma: float | None = Field(default=None, ge=0, le=5)
    values: tuple[float, ...] | None = Field(default=None, min_length=1, max_length=1000)
    weights: tuple[float, ...] | None = None
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _complete(self) -> Self:
        need: dict[DistributionKind, tuple[str, ...]] = {
            DistributionKind.CONSTANT: ("value",),
            DistributionKind.UNIFORM: ("low", "high"),
            DistributionKind.EXPONENTIAL: ("mean",),
            DistributionKind.LOGNORMAL: ("median", "sigma"),
            DistributionKind.CHOICE: ("values",),
        }
        missing = [name for name in need[self.kind] if getattr(self, name) is None]
        if missing:
            raise ValueError(f"{self.kind.value} needs {', '.join(missing)}")
        allowed = {*need[self.kind], "kind", "min", "max"} | (
            {"weights"} if self.kind is DistributionKind.CHOICE else set()
        )
        extra = sorted(name for name in self.model_fields_set if name not in allowed)
        if extra:
            raise ValueError(f"{self.kind.value} takes no {', '.join(extra)}")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"low ({self.low}) is greater than high ({self.high})")
        if self.weights is not None:
            if self.values is None or len(self.weights) != len(self.values):
                raise ValueError("weights must have one entry per value")
            if any(w < 0 or not math.isfinite(w) for w in self.weights) or sum(self.weights) <= 0:
                raise ValueError("weights must be finite, not negative, and not all 0")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        for name in ("value", "low", "high", "min", "max"):
            number = getattr(self, name)
            if number is not None and not math.isfinite(number):
                raise ValueError(f"{name} must be finite")
        if self.values is not None and not all(math.isfinite(v) for v in self.values):
            raise ValueError("values must be finite")
        return self

    def sample(self, rng: random.Random) -> float:
        """One draw (clipped to ``[min, max]``)."""
        kind = self.kind
        if kind is DistributionKind.CONSTANT:
            x = float(self.value or 0.0)
        elif kind is DistributionKind.UNIFORM:
            x = rng.uniform(float(self.low or 0.0), float(self.high or 0.0))
        elif kind is DistributionKind.EXPONENTIAL:
            x = rng.expovariate(1.0 / float(self.mean or 1.0))
        elif kind is DistributionKind.LOGNORMAL:
            x = rng.lognormvariate(math.log(float(self.median or 1.0)), float(self.sigma or 0.0))
        else:
            values = self.values or (0.0,)
            x = rng.choices(values, weights=self.weights)[0] if self.weights else rng.choice(values)
        if self.min is not None:
            x = max(x, self.min)
        if self.max is not None:
            x = min(x, self.max)
        return x

    def bounds(self) -> tuple[float, float]:
        """The smallest and largest value a draw can take (``inf`` when unbounded)."""
        kind = self.kind
        if kind is DistributionKind.CONSTANT:
            lo = hi = float(self.value or 0.0)
        elif kind is DistributionKind.UNIFORM:
            lo, hi = float(self.low or 0.0), float(self.high or 0.0)
        elif kind is DistributionKind.CHOICE:
            values = self.values or (0.0,)
            weights = self.weights or tuple(1.0 for _ in values)
            drawn = [v for v, w in zip(values, weights, strict=True) if w > 0]
            lo, hi = min(drawn), max(drawn)
        else:
            # Exponential and lognormal draws are positive, with no upper bound.
            lo, hi = math.nextafter(0.0, 1.0), math.inf
        if self.min is not None:
            lo, hi = max(lo, self.min), max(hi, self.min)
        if self.max is not None:
            lo, hi = min(lo, self.max), min(hi, self.max)
        return lo, hi


def _constant(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"kind": "CONSTANT", "value": value}
    return value


Dist = Annotated[Distribution, BeforeValidator(_constant)]
"""A distribution field: a mapping with ``kind``, or a bare number (a constant)."""


# --------------------------------------------------------------------------------------- the fleet


class CapacityErrors(_Strict):
    """SageMaker ``CapacityError`` on dispatch: the instance type has no capacity for a while.

    Attributes:
        probability: chance that one dispatch of this type fails for capacity (0..1).
        time_to_capacity_s: how long the type then stays without capacity (seconds).
        detected_after_s: seconds from dispatch until SageMaker reports the error.
    """

    probability: float = Field(ge=0, le=1)
    time_to_capacity_s: Dist
    detected_after_s: float = Field(default=60.0, ge=0, le=86_400)


class InstanceTypeSpec(_Strict):
    """What SageMaker does with one instance type (all optional).

    Attributes:
        available: the most instances of this type SageMaker provides at once across every
            environment (a training plan, reserved capacity, or the account's quota); None = no limit.
        accelerators: GPUs (or Trainium chips) per instance, for types the built-in table lacks.
        startup_s: seconds from dispatch to training (provisioning, image download); in use, no progress.
        capacity_errors: see :class:`CapacityErrors`.
        spot_interruptions_per_hour: per instance, for managed spot training jobs.
        spot_restart_s: seconds an interrupted spot job waits for capacity before resuming.
        failures_per_hour: per instance, attempts that fail with ``InternalServerError``.
    """

    available: int | None = Field(default=None, ge=0, le=1_000_000)
    accelerators: int | None = Field(default=None, ge=0, le=1024)
    startup_s: float = Field(default=0.0, ge=0, le=86_400)
    capacity_errors: CapacityErrors | None = None
    spot_interruptions_per_hour: float = Field(default=0.0, ge=0, le=100)
    spot_restart_s: Dist = Field(
        default_factory=lambda: Distribution(kind=DistributionKind.CONSTANT, value=600)
    )
    failures_per_hour: float = Field(default=0.0, ge=0, le=100)


class ServiceEnvironmentSpec(_Strict):
    """A SageMaker service environment (AWS Batch API Reference: CreateServiceEnvironment).

    Attributes:
        name: ``serviceEnvironmentName``.
        capacity_limits: capacity unit → ``maxCapacity`` in instances: ``{NUM_INSTANCES: n}`` for
            FIFO and fair-share queues, or up to 5 instance types for quota management.
    """

    name: str = Field(pattern=_NAME)
    capacity_limits: dict[str, int] = Field(min_length=1, max_length=5)

    @model_validator(mode="after")
    def _units(self) -> Self:
        if NUM_INSTANCES in self.capacity_limits and len(self.capacity_limits) > 1:
            raise ValueError("capacity_limits: NUM_INSTANCES cannot be mixed with instance types")
        for unit, limit in self.capacity_limits.items():
            if limit < 0 or limit > 1_000_000:
                raise ValueError(f"capacity_limits.{unit}: must be 0 to 1000000 instances")
        return self

    @property
    def quota_management(self) -> bool:
        """True when the units are instance types."""
        return NUM_INSTANCES not in self.capacity_limits


# ------------------------------------------------------------------------------------ job queues


class SchedulingKind(StrEnum):
    """The job queue's scheduling policy (AWS Batch User Guide: Job queues; Fair share scheduling
    policies; Quota management)."""

    FIFO = "FIFO"
    FAIR_SHARE = "FAIR_SHARE"
    QUOTA_MANAGEMENT = "QUOTA_MANAGEMENT"


class HeadOfLine(StrEnum):
    """What a RUNNABLE job that does not fit does to the jobs behind it.

    AWS does not publish this for service jobs; it is the simulation's main approximation and
    every output names the value used.
    """

    QUEUE = "QUEUE"  # the first job of the whole queue waits, and nothing behind it starts
    # each line waits for its first job: the queue (FIFO), or each share; a fair share below its
    # entitlement holds freed capacity for its first job (no starvation of large jobs)
    SHARE = "SHARE"
    NONE = "NONE"  # any of the first 100 RUNNABLE jobs of a line that fits starts (backfill)


class ShareWeight(_Strict):
    """One ``shareDistribution`` entry (AWS Batch API Reference: ShareAttributes)."""

    share_identifier: str = Field(pattern=_SHARE)
    # AWS Batch API Reference, ShareAttributes.weightFactor: 0.0001 to 999.9999; lower gets more.
    weight_factor: float = Field(ge=0.0001, le=999.9999)


class FairSharePolicy(_Strict):
    """A ``fairsharePolicy`` (AWS Batch API Reference: FairsharePolicy).

    Attributes:
        share_decay_seconds: 0 to 604800; 0 = current usage only.
        compute_reservation: 0 to 99; holds back (compute_reservation/100)^active shares of capacity.
        share_distribution: weights; shares not listed weigh 1.0.
    """

    share_decay_seconds: int = Field(default=0, ge=0, le=604_800)
    compute_reservation: int = Field(default=0, ge=0, le=99)
    share_distribution: tuple[ShareWeight, ...] = Field(default=(), max_length=500)

    def weight(self, share: str) -> float:
        """The share's ``weightFactor`` (1.0 when it is not listed, as AWS does)."""
        for entry in self.share_distribution:
            if entry.share_identifier == share:
                return entry.weight_factor
        return 1.0


class SharingStrategy(StrEnum):
    """A quota share's ``resourceSharingConfiguration.strategy`` (AWS Batch API Reference:
    QuotaShareResourceSharingConfiguration)."""

    RESERVE = "RESERVE"
    LEND = "LEND"
    LEND_AND_BORROW = "LEND_AND_BORROW"


class QuotaShareSpec(_Strict):
    """A quota share (AWS Batch User Guide: Quota shares; API Reference: CreateQuotaShare).

    Attributes:
        name: ``quotaShareName``.
        capacity_limits: instance type → instances (1 to 5 limits).
        strategy: RESERVE, LEND or LEND_AND_BORROW.
        borrow_limit: percent of its own limits it may borrow on top (-1 = unlimited);
            LEND_AND_BORROW only.
        in_share_preemption: a higher-priority RUNNABLE job may preempt a lower-priority job of
            the same share.
    """

    name: str = Field(pattern=_NAME)
    capacity_limits: dict[str, int] = Field(min_length=1, max_length=5)
    strategy: SharingStrategy = SharingStrategy.RESERVE
    borrow_limit: int = Field(default=-1, ge=-1, le=100_000)
    in_share_preemption: bool = False

    @model_validator(mode="after")
    def _borrow(self) -> Self:
        if "borrow_limit" in self.model_fields_set and self.strategy is not SharingStrategy.LEND_AND_BORROW:
            raise ValueError("borrow_limit applies to LEND_AND_BORROW only")
        for unit, limit in self.capacity_limits.items():
            if unit == NUM_INSTANCES:
                raise ValueError(
                    "capacity_limits are instance types (quota shares never count NUM_INSTANCES)"
                )
            if limit < 0 or limit > 1_000_000:
                raise ValueError(f"capacity_limits.{unit}: must be 0 to 1000000 instances")
        return self

    def borrow_cap(self, unit: str) -> float:
        """The most instances of ``unit`` it may use above its own limit (``inf`` when unlimited)."""
        if self.strategy is not SharingStrategy.LEND_AND_BORROW:
            return 0.0
        if self.borrow_limit < 0:
            return math.inf
        return self.capacity_limits.get(unit, 0) * self.borrow_limit / 100.0


class QuotaPolicy(_Strict):
    """The quota shares of a quota-management job queue (at most 20)."""

    quota_shares: tuple[QuotaShareSpec, ...] = Field(min_length=1, max_length=20)


class JobQueueSpec(_Strict):
    """A SageMaker job queue (AWS Batch API Reference: CreateJobQueue with SAGEMAKER_TRAINING).

    Attributes:
        name: ``jobQueueName``.
        service_environment: the one environment it feeds (one per queue).
        priority: job queue priority: queues of one environment are served higher first.
        scheduling: FIFO, FAIR_SHARE (needs ``fair_share``) or QUOTA_MANAGEMENT (needs ``quota``).
        head_of_line: see :class:`HeadOfLine`.
        job_state_time_limit_s: ``jobStateTimeLimitActions.maxTimeSeconds`` for the reason
            ``CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY``: a job waiting that long for capacity is
            FAILED ("Terminated by JobStateTimeLimit ..."); None = wait for ever.
    """

    name: str = Field(pattern=_NAME)
    service_environment: str = Field(pattern=_NAME)
    priority: int = Field(default=1, ge=0, le=1000)
    scheduling: SchedulingKind = SchedulingKind.FIFO
    fair_share: FairSharePolicy | None = None
    quota: QuotaPolicy | None = None
    head_of_line: HeadOfLine = HeadOfLine.SHARE
    job_state_time_limit_s: float | None = Field(default=None, ge=600, le=86_400)

    @model_validator(mode="after")
    def _policy(self) -> Self:
        if self.scheduling is SchedulingKind.FAIR_SHARE and self.fair_share is None:
            raise ValueError("scheduling FAIR_SHARE needs fair_share")
        if self.scheduling is SchedulingKind.QUOTA_MANAGEMENT and self.quota is None:
            raise ValueError("scheduling QUOTA_MANAGEMENT needs quota")
        if self.scheduling is not SchedulingKind.FAIR_SHARE and self.fair_share is not None:
            raise ValueError(
                f"fair_share is only for FAIR_SHARE queues (this one is {self.scheduling.value})"
            )
        if self.scheduling is not SchedulingKind.QUOTA_MANAGEMENT and self.quota is not None:
            raise ValueError(
                f"quota is only for QUOTA_MANAGEMENT queues (this one is {self.scheduling.value})"
            )
        return self


# -------------------------------------------------------------------------------------- workload


class JobTemplate(_Strict):
    """One job given explicitly (tests, small what-ifs).

    Attributes:
        submit_s: seconds after the start when it is submitted.
        share: share identifier (fair share), quota share name (quota management), or a label
            (FIFO: reported per label, not scheduled by it).
        duration_s: training seconds it needs, without interruptions.
        checkpoint_interval_s: it checkpoints every this many training seconds; None = never.
        retry_attempts: ``retryStrategy.attempts`` (1 to 10, counting the first).
        preemption_retries: ``preemptionConfiguration.preemptionRetriesBeforeTermination``.
        max_wait_s: managed spot ``MaxWaitTimeInSeconds`` (default: twice ``duration_s``).
    """

    name: str | None = Field(default=None, pattern=_NAME)
    queue: str | None = None
    share: str | None = Field(default=None, pattern=_SHARE)
    submit_s: float = Field(default=0.0, ge=0)
    instance_type: str = Field(min_length=1, max_length=64)
    instance_count: int = Field(default=1, ge=1, le=100_000)
    duration_s: float = Field(gt=0, le=90 * 86_400)
    priority: int = Field(default=0, ge=0, le=9999)
    checkpoint_interval_s: float | None = Field(default=None, gt=0)
    spot: bool = False
    retry_attempts: int = Field(default=1, ge=1, le=10)
    preemption_retries: int | None = Field(default=None, ge=0, le=10_000)
    max_wait_s: float | None = Field(default=None, gt=0)


class Stream(_Strict):
    """A stream of generated jobs of one share (team) into one queue: Poisson arrivals, or elastic
    demand that keeps a number of jobs waiting.

    Attributes:
        share: share identifier / quota share / label (see :class:`JobTemplate`).
        queue: the job queue (optional when the scenario has one).
        arrivals_per_hour: mean submissions per hour while the stream is open (Poisson).
        keep_runnable: elastic demand instead of arrivals: from ``from_hour`` the stream keeps this
            many of its jobs RUNNABLE; each time one of them is first dispatched, the next is
            submitted (people who submit more experiments whenever capacity frees up). The k-th
            job's draws depend only on the seed, the stream and k, so runs compared on one workload
            draw the same jobs, each run as many as its capacity takes. Give this or
            ``arrivals_per_hour``.
        from_hour / until_hour: the stream is open in this window of the horizon.
        max_jobs: stop after this many.
        instance_type / instance_count / duration_s / priority: per job (drawn).
        checkpoint_interval_s: None = the jobs never checkpoint.
        spot_fraction: share of the jobs that use managed spot training.
        spot_max_wait_factor: their ``MaxWaitTimeInSeconds`` = factor x duration.
        retry_attempts / preemption_retries: as in :class:`JobTemplate`.
    """

    share: str = Field(pattern=_SHARE)
    queue: str | None = None
    arrivals_per_hour: float | None = Field(default=None, gt=0, le=100_000)
    keep_runnable: int | None = Field(default=None, ge=1, le=10_000)
    from_hour: float = Field(default=0.0, ge=0)
    until_hour: float | None = Field(default=None, gt=0)
    max_jobs: int | None = Field(default=None, ge=1, le=10_000_000)
    instance_type: str = Field(min_length=1, max_length=64)
    instance_count: Dist = Field(
        default_factory=lambda: Distribution(kind=DistributionKind.CONSTANT, value=1)
    )
    duration_s: Dist
    priority: Dist = Field(default_factory=lambda: Distribution(kind=DistributionKind.CONSTANT, value=0))
    checkpoint_interval_s: float | None = Field(default=None, gt=0)
    spot_fraction: float = Field(default=0.0, ge=0, le=1)
    spot_max_wait_factor: float = Field(default=2.0, ge=1, le=100)
    retry_attempts: int = Field(default=1, ge=1, le=10)
    preemption_retries: int | None = Field(default=None, ge=0, le=10_000)

    @model_validator(mode="after")
    def _demand(self) -> Self:
        if (self.arrivals_per_hour is None) == (self.keep_runnable is None):
            raise ValueError("give arrivals_per_hour (Poisson arrivals) or keep_runnable (elastic), not both")
        return self


class Generator(_Strict):
    """Generated jobs, one stream per share."""

    streams: tuple[Stream, ...] = Field(min_length=1, max_length=500)


class HistorySpec(_Strict):
    """A recorded history: anything ``batchpilot replay`` reads (event files, directories, JSON
    Lines exports of an EventBridge archive, replay scenarios with a ``world``).

    Attributes:
        paths: files or directories, relative to the scenario file.
        queue_map: recorded job queue name → scenario job queue (default: the same name, or the
            only queue).
        default_instance_type / default_instance_count: for jobs whose size no payload or
            training-job event gives.
        default_duration_s: for jobs that never ran to an end in the history.
        checkpoint_interval_s: assumed for every recorded job (None: they never checkpoint).
    """

    paths: tuple[str, ...] = Field(min_length=1, max_length=1000)
    queue_map: dict[str, str] = Field(default_factory=dict)
    default_instance_type: str | None = Field(default=None, min_length=1, max_length=64)
    default_instance_count: int = Field(default=1, ge=1, le=100_000)
    default_duration_s: float | None = Field(default=None, gt=0)
    checkpoint_interval_s: float | None = Field(default=None, gt=0)


class Workload(_Strict):
    """Where the jobs come from: a generator, a recorded history, explicit jobs, or several."""

    generator: Generator | None = None
    history: HistorySpec | None = None
    jobs: tuple[JobTemplate, ...] = Field(default=(), max_length=1_000_000)

    @model_validator(mode="after")
    def _some(self) -> Self:
        if self.generator is None and self.history is None and not self.jobs:
            raise ValueError("give generator, history or jobs")
        return self


# ------------------------------------------------------------------------------------ batchpilot


class CapacityLoop(_Strict):
    """batchpilot's capacity function in the loop.

    Attributes:
        policy: exactly the ``CapacityPolicy`` template parameter (``BATCHPILOT_CAPACITY_POLICY``),
            validated by batchpilot's own settings model.
        interval_s: how often it runs (the schedule is every minute).
        dry_run: decide, never change a limit (``CapacityDryRun``).
    """

    enabled: bool = True
    policy: dict[str, Any]
    interval_s: int = Field(default=60, ge=60, le=86_400)
    dry_run: bool = False


class RecoveryLoop(_Strict):
    """batchpilot's recovery function in the loop; the fields are the recovery settings' own
    (docs/recovery.md, "Configuration"), validated by batchpilot's settings model.

    Attributes:
        event_delay_s: seconds from the failure to the function's decision (EventBridge, SQS).
    """

    enabled: bool = True
    dry_run: bool = False
    budgets: dict[str, int] | None = None
    backoff_base_seconds: float | None = None
    backoff_max_seconds: float | None = None
    no_checkpoint: str | None = None
    submits_per_second: float | None = None
    max_concurrency: int | None = None
    event_delay_s: float = Field(default=5.0, ge=0, le=3600)

    def settings_values(self) -> dict[str, Any]:
        """The fields batchpilot's ``RecoverySettings`` takes, as set here."""
        names = (
            "dry_run",
            "budgets",
            "backoff_base_seconds",
            "backoff_max_seconds",
            "no_checkpoint",
            "submits_per_second",
            "max_concurrency",
        )
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}


class BatchpilotSpec(_Strict):
    """Which batchpilot functions act on the simulated fleet (none by default)."""

    capacity: CapacityLoop | None = None
    recovery: RecoveryLoop | None = None


# -------------------------------------------------------------------------------------- scenario


class Scenario(_Strict):
    """A whole scenario (see the module docstring).

    Attributes:
        seed: the random seed (``--seed`` overrides it).
        horizon_hours: simulated time; jobs still running at the end are not completed.
        start: the simulated clock's origin (aware; cron floors of the capacity policy use it).
        sample_interval_s: how often the charts are sampled (default: 60 s, coarser for long runs).
    """

    name: str = Field(min_length=1, max_length=128)
    description: str = Field(default="", max_length=4000)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    horizon_hours: float = Field(gt=0, le=24 * 366)
    start: datetime = _DEFAULT_START
    sample_interval_s: float | None = Field(default=None, ge=1, le=86_400)
    instance_types: dict[str, InstanceTypeSpec] = Field(default_factory=dict)
    service_environments: tuple[ServiceEnvironmentSpec, ...] = Field(min_length=1, max_length=50)
    job_queues: tuple[JobQueueSpec, ...] = Field(min_length=1, max_length=500)
    workload: Workload
    batchpilot: BatchpilotSpec = Field(default_factory=BatchpilotSpec)

    @property
    def horizon_s(self) -> float:
        """The horizon in seconds."""
        return self.horizon_hours * 3600.0

    def environment(self, name: str) -> ServiceEnvironmentSpec:
        """The environment called ``name`` (KeyError when none is)."""
        for env in self.service_environments:
            if env.name == name:
                return env
        raise KeyError(name)

    def queue(self, name: str) -> JobQueueSpec:
        """The job queue called ``name`` (KeyError when none is)."""
        for queue in self.job_queues:
            if queue.name == name:
                return queue
        raise KeyError(name)

    def accelerators(self, instance_type: str) -> int | None:
        """GPUs (or Trainium chips) per instance of ``instance_type`` (None when unknown)."""
        spec = self.instance_types.get(instance_type)
        return accelerators(instance_type, {instance_type: spec.accelerators if spec else None})


# ----------------------------------------------------------------------------------- validation


def _loc(parts: tuple[int | str, ...]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not out:
            out = str(part)
        elif "[" in str(part) or part.startswith(("function-", "constrained-")):
            continue
        else:
            out += f".{part}"
    return out or "scenario"


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    loc = _loc(tuple(first["loc"]))
    message = str(first["msg"]).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc}: {message}{more}"


def _check_names(scenario: Scenario) -> None:
    envs = [e.name for e in scenario.service_environments]
    for i, name in enumerate(envs):
        if name in envs[:i]:
            raise ScenarioError(f"service_environments[{i}].name: {name} is given twice")
    queues = [q.name for q in scenario.job_queues]
    for i, queue in enumerate(scenario.job_queues):
        where = f"job_queues[{i}]"
        if queue.name in queues[:i]:
            raise ScenarioError(f"{where}.name: {queue.name} is given twice")
        if queue.service_environment not in envs:
            raise ScenarioError(
                f"{where}.service_environment: no service environment {queue.service_environment}"
            )
        env = scenario.environment(queue.service_environment)
        # AWS Batch User Guide, Quota management: a quota-management job queue needs a service
        # environment whose capacity limits are instance types; FIFO and fair share count instances.
        if queue.scheduling is SchedulingKind.QUOTA_MANAGEMENT and not env.quota_management:
            raise ScenarioError(
                f"{where}.service_environment: {env.name} counts NUM_INSTANCES; quota management needs "
                "instance-type capacity limits"
            )
        if queue.scheduling is not SchedulingKind.QUOTA_MANAGEMENT and env.quota_management:
            raise ScenarioError(
                f"{where}.service_environment: {env.name} has instance-type limits, which only quota "
                "management uses; give it capacity_limits {NUM_INSTANCES: n}"
            )
        if queue.quota is not None:
            names = [s.name for s in queue.quota.quota_shares]
            for j, share in enumerate(queue.quota.quota_shares):
                if share.name in names[:j]:
                    raise ScenarioError(f"{where}.quota.quota_shares[{j}].name: {share.name} is given twice")
                for unit in share.capacity_limits:
                    if unit not in env.capacity_limits:
                        raise ScenarioError(
                            f"{where}.quota.quota_shares[{j}].capacity_limits.{unit}: {env.name} has no "
                            f"capacity limit for {unit}"
                        )
        if queue.fair_share is not None:
            shares = [s.share_identifier for s in queue.fair_share.share_distribution]
            for j, share_id in enumerate(shares):
                if share_id in shares[:j]:
                    raise ScenarioError(
                        f"{where}.fair_share.share_distribution[{j}].share_identifier: {share_id} is "
                        "given twice"
                    )


def check_job(
    scenario: Scenario,
    where: str,
    queue_name: str | None,
    share: str | None,
    instance_type: str,
    max_count: float,
) -> str:
    """Check that a job (or every job a stream can draw) can ever run; returns its queue's name.

    Raises:
        ScenarioError: an unknown queue or quota share, an instance type without a known
            accelerator count, or a job larger than every environment it could run in.
    """
    queues = [q.name for q in scenario.job_queues]
    if queue_name is None:
        if len(queues) != 1:
            raise ScenarioError(f"{where}.queue: required when the scenario has several job queues")
        queue_name = queues[0]
    if queue_name not in queues:
        raise ScenarioError(f"{where}.queue: no job queue {queue_name}")
    queue = scenario.queue(queue_name)
    env = scenario.environment(queue.service_environment)
    if scenario.accelerators(instance_type) is None:
        raise ScenarioError(
            f"{where}.instance_type: {instance_type} is not in the accelerator table; give "
            f"instance_types.{instance_type}.accelerators"
        )
    largest = _largest_environment(scenario, instance_type)
    if max_count > largest[1]:
        count = int(max_count) if math.isfinite(max_count) else max_count
        raise ScenarioError(
            f"{where}.instance_count: a job of {count} {instance_type} instances is larger than every "
            f"service environment (largest: {largest[0]} with {largest[1]})"
        )
    limit = _environment_max(scenario, env, instance_type)
    if max_count > limit:
        raise ScenarioError(
            f"{where}.instance_count: a job of {int(max_count)} instances cannot fit in {env.name} "
            f"(at most {limit} {instance_type} there), the environment of job queue {queue_name}"
        )
    available = scenario.instance_types.get(instance_type)
    if available is not None and available.available is not None and max_count > available.available:
        raise ScenarioError(
            f"{where}.instance_count: a job of {int(max_count)} instances is more than "
            f"instance_types.{instance_type}.available ({available.available})"
        )
    if queue.quota is not None:
        names = {s.name: s for s in queue.quota.quota_shares}
        if share is None or share not in names:
            raise ScenarioError(
                f"{where}.share: job queue {queue_name} uses quota management; give one of its quota "
                f"shares ({', '.join(sorted(names))})"
            )
        spec = names[share]
        own = spec.capacity_limits.get(instance_type)
        if own is None:
            raise ScenarioError(
                f"{where}.instance_type: quota share {share} has no capacity limit for {instance_type}"
            )
        reach = own + spec.borrow_cap(instance_type)
        if max_count > reach:
            raise ScenarioError(
                f"{where}.instance_count: a job of {int(max_count)} instances is larger than quota share "
                f"{share} can ever hold ({own} own{' + borrowing' if reach > own else ''})"
            )
    return queue_name


def _environment_max(scenario: Scenario, env: ServiceEnvironmentSpec, instance_type: str) -> int:
    """The most instances of ``instance_type`` a job could get in ``env``: its limit, or the
    capacity policy's ``max`` when batchpilot manages it (a blocked job makes it raise to max)."""
    unit = NUM_INSTANCES if not env.quota_management else instance_type
    limit = env.capacity_limits.get(unit)
    if limit is None:
        return 0
    loop = scenario.batchpilot.capacity
    if loop is not None and loop.enabled and not loop.dry_run:
        config = loop.policy.get("service_environments", {})
        own = config.get(env.name) if isinstance(config, Mapping) else None
        if isinstance(own, Mapping):
            if unit == NUM_INSTANCES and isinstance(own.get("max"), int):
                limit = max(limit, int(own["max"]))
            units = own.get("units")
            if isinstance(units, Mapping) and isinstance(units.get(unit), Mapping):
                unit_max = units[unit].get("max")
                if isinstance(unit_max, int):
                    limit = max(limit, unit_max)
    return limit


def _largest_environment(scenario: Scenario, instance_type: str) -> tuple[str, int]:
    best = ("", -1)
    for env in scenario.service_environments:
        size = _environment_max(scenario, env, instance_type)
        if size > best[1]:
            best = (env.name, size)
    return best


def _check_workload(scenario: Scenario) -> None:
    workload = scenario.workload
    if workload.generator is not None:
        for i, stream in enumerate(workload.generator.streams):
            where = f"workload.generator.streams[{i}]"
            lo, hi = stream.instance_count.bounds()
            if lo < 1:
                raise ScenarioError(
                    f"{where}.instance_count: can draw {lo:g}; every job needs at least 1 instance"
                )
            dlo, _ = stream.duration_s.bounds()
            if dlo <= 0:
                raise ScenarioError(f"{where}.duration_s: can draw {dlo:g}; durations must be positive")
            plo, phi = stream.priority.bounds()
            if plo < 0 or phi > 9999:
                raise ScenarioError(f"{where}.priority: schedulingPriority is 0 to 9999")
            if stream.until_hour is not None and stream.until_hour <= stream.from_hour:
                raise ScenarioError(f"{where}.until_hour: must be after from_hour")
            check_job(scenario, where, stream.queue, stream.share, stream.instance_type, hi)
    for i, job in enumerate(workload.jobs):
        where = f"workload.jobs[{i}]"
        check_job(scenario, where, job.queue, job.share, job.instance_type, job.instance_count)
    if scenario.batchpilot.capacity is not None:
        _check_capacity_policy(scenario)


def _check_capacity_policy(scenario: Scenario) -> None:
    from batchpilot_local.simulate.policies import CapacityPolicyError, parse_capacity_policy

    loop = scenario.batchpilot.capacity
    assert loop is not None
    try:
        config = parse_capacity_policy(loop.policy)
    except CapacityPolicyError as exc:
        raise ScenarioError(f"batchpilot.capacity.policy.{exc}") from None
    queues = {q.name: q.service_environment for q in scenario.job_queues}
    for name, env_config in config.service_environments.items():
        where = f"batchpilot.capacity.policy.service_environments.{name}"
        try:
            env = scenario.environment(name)
        except KeyError:
            raise ScenarioError(f"{where}: the scenario has no service environment {name}") from None
        for queue in env_config.job_queues:
            if queues.get(queue) != name:
                raise ScenarioError(
                    f"{where}.job_queues: {queue} is not a job queue of {name} in this scenario"
                )
        for unit in env_config.bounds():
            if unit not in env.capacity_limits:
                raise ScenarioError(f"{where}: {name} has no capacity limit for {unit}")


def parse_scenario(data: Any, origin: str = "scenario") -> Scenario:
    """Validate a decoded scenario document.

    Raises:
        ScenarioError: one line, ``<origin>: <field>: <problem>``.
    """
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{origin}: expected a mapping at the top, got {type(data).__name__}")
    try:
        scenario = Scenario.model_validate(dict(data))
    except ValidationError as exc:
        raise ScenarioError(f"{origin}: {_first_error(exc)}") from None
    if scenario.start.tzinfo is None:
        raise ScenarioError(f"{origin}: start: give a time zone (e.g. 2026-11-02T00:00:00Z)")
    try:
        _check_names(scenario)
        _check_workload(scenario)
    except ScenarioError as exc:
        raise ScenarioError(f"{origin}: {exc}") from None
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file (YAML or JSON).

    Raises:
        ScenarioError: the file cannot be read or parsed, or the scenario is not valid.
    """
    origin = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ScenarioError(f"{origin}: cannot read: {reason}") from None
    try:
        data = json.loads(text) if origin.endswith(".json") else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{origin}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ScenarioError(f"{origin}: {where}invalid YAML: {problem}") from None
    return parse_scenario(data, origin)
