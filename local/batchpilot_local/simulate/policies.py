"""The one door between the simulator and batchpilot's production code.

Every ``import batchpilot...`` of the simulator is in this module, and the simulator calls only
what is defined here, so that a change of a policy's API is fixed in one place. What it uses:

- the capacity function's pure policy: :func:`batchpilot.capacity.policy.decide` with the same
  configuration model (``CapacityPolicyConfig``, the ``CapacityPolicy`` parameter) and the same
  demand figures (:func:`batchpilot.capacity.sampling.unit_demands`) the Lambda computes;
- the recovery function's pure decision table, :func:`batchpilot.recovery.policy.decide` (every
  row: scope, category, budgets, backoff, checkpoint policy, dry run), its lineage records, the
  ``SubmitPacer`` token bucket and ``RecoverySettings``;
- classification of reason texts (``category_of_reason``), ``lost_instance_hours`` and the event
  models and payload parser used to rebuild jobs from a recorded history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from batchpilot.capacity.model import NUM_INSTANCES, CapacityLimit, ServiceEnvironment
from batchpilot.capacity.policy import EnvironmentState
from batchpilot.capacity.policy import decide as decide_capacity
from batchpilot.capacity.sampling import BlockedJob, QueueSample, Tally, unit_demands
from batchpilot.capacity.settings import CapacityPolicyConfig, EnvironmentConfig
from batchpilot.recovery.checkpoint import CheckpointLocation, CheckpointState, lost_instance_hours
from batchpilot.recovery.lineage import AttemptRecord, AttemptState, Lineage, LineageRef, LineageView
from batchpilot.recovery.pacing import SubmitPacer
from batchpilot.recovery.policy import Case, Decision, Step, decide
from batchpilot.recovery.requests import Operation
from batchpilot.recovery.settings import RecoverySettings
from batchpilot.recovery.snapshot import JobSnapshot
from batchpilot.shared.classification import Category, EventKind, JobFacts, JobKind, category_of_reason
from batchpilot.shared.events import (
    BatchServiceJobStateChange,
    InvalidEventError,
    SageMakerTrainingJobStateChange,
    ServiceJobDetail,
    TrainingJobDetail,
    UnsupportedEventError,
    parse_event,
)
from batchpilot.shared.resources import instances_from_payload as demand_from_payload
from pydantic import ValidationError

__all__ = [
    "NUM_INSTANCES",
    "CapacityController",
    "CapacityPolicyError",
    "CapacityTick",
    "Category",
    "InvalidEventError",
    "Pacer",
    "QueueDemand",
    "RecoveryDecider",
    "RecoveryOutcome",
    "RecoverySettingsError",
    "RecoveryStep",
    "ServiceJobDetail",
    "TrainingJobDetail",
    "category_of_reason",
    "demand_from_payload",
    "lost_hours",
    "parse_capacity_policy",
    "parse_history_event",
    "recovery_settings",
]


class CapacityPolicyError(ValueError):
    """The capacity policy is not valid; the message starts with the path of the bad field."""


class RecoverySettingsError(ValueError):
    """The recovery settings are not valid; the message starts with the name of the bad field."""


def _pydantic_problem(exc: ValidationError) -> str:
    error = exc.errors(include_url=False, include_input=False)[0]
    path = ".".join(str(part) for part in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{path}: {message}" if path else message


def parse_capacity_policy(data: Mapping[str, Any]) -> CapacityPolicyConfig:
    """The ``CapacityPolicy`` parameter's JSON, validated by the capacity function's own model.

    Raises:
        CapacityPolicyError: ``<field path>: <problem>``.
    """
    try:
        return CapacityPolicyConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise CapacityPolicyError(_pydantic_problem(exc)) from None


# ------------------------------------------------------------------------------------- capacity


@dataclass(frozen=True, slots=True)
class QueueDemand:
    """One job queue as the capacity function samples it (ListServiceJobs + GetJobQueueSnapshot).

    Attributes:
        queue: the job queue name.
        runnable_jobs: RUNNABLE jobs.
        runnable_instances: instance type → instances those jobs ask for (their payloads).
        in_use: instance type → instances held by its dispatched jobs (SCHEDULED, STARTING,
            RUNNING), what ``GetJobQueueSnapshot`` reports as capacity usage.
        blocked: ``(job id, instance type → instances)`` of RUNNABLE jobs that need more than the
            environment's ``maxCapacity`` (``MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE``).
    """

    queue: str
    runnable_jobs: int
    runnable_instances: Mapping[str, int]
    in_use: Mapping[str, int]
    blocked: Sequence[tuple[str, Mapping[str, int]]] = ()


@dataclass(frozen=True, slots=True)
class CapacityTick:
    """What one run of the capacity policy decided for one environment.

    Attributes:
        limits: capacity unit → ``maxCapacity`` after the run (instances).
        changed: an ``UpdateServiceEnvironment`` was made (never in dry run).
        reasons: capacity unit → the policy's reason (``DEMAND``, ``COOLDOWN``, ...).
        messages: the policy's sentences for the units that changed or were limited.
    """

    limits: Mapping[str, int]
    changed: bool
    reasons: Mapping[str, str]
    messages: tuple[str, ...] = ()


class CapacityController:
    """batchpilot's capacity function for one service environment: the real :func:`decide`, its
    state carried from run to run (cooldown and stabilisation clocks) as DynamoDB would carry it.

    Args:
        name: the environment's name.
        config: its entry of the ``CapacityPolicy`` parameter.
        defaults: the parameter's ``defaults``.
        dry_run: decide but never change a limit (``CapacityDryRun``).
    """

    def __init__(self, name: str, config: EnvironmentConfig, defaults: Any, *, dry_run: bool = False) -> None:
        self.name = name
        self._config = config
        self._policy = config.policy(defaults)
        self._bounds = config.bounds()
        self._state = EnvironmentState()
        self._dry_run = dry_run

    @property
    def job_queues(self) -> tuple[str, ...]:
        """The job queues feeding the environment, as configured."""
        return tuple(self._config.job_queues)

    def tick(self, now: datetime, limits: Mapping[str, int], queues: Sequence[QueueDemand]) -> CapacityTick:
        """One scheduled run at ``now`` (aware) against the environment's current ``limits``
        (capacity unit → maxCapacity) and its queues' demand."""
        environment = ServiceEnvironment(
            name=self.name,
            arn=None,
            state="ENABLED",
            status="VALID",
            limits=tuple(CapacityLimit(unit, value) for unit, value in limits.items()),
        )
        samples = [
            QueueSample(
                queue=q.queue,
                environment=self.name,
                runnable=Tally(jobs=q.runnable_jobs, instances=dict(q.runnable_instances)),
                in_use={unit: float(count) for unit, count in q.in_use.items()},
                blocked=[BlockedJob(job, dict(demand)) for job, demand in q.blocked],
            )
            for q in queues
        ]
        demands = unit_demands(environment, samples)
        floors = {unit: self._config.floor(unit, now) for unit in limits} if self._config.floors else {}
        decision = decide_capacity(environment, demands, self._bounds, floors, self._policy, self._state, now)
        changed = decision.changes and not self._dry_run
        if changed or not decision.changes:
            self._state = decision.state
        else:
            # Dry run: the clocks advance, but no change was made, so no cooldown starts.
            self._state = EnvironmentState(
                version=decision.state.version,
                last_change_at=self._state.last_change_at,
                clocks=decision.state.clocks,
                notices=decision.state.notices,
            )
        new_limits = {u.unit: (u.new_max if changed else u.current_max) for u in decision.units}
        messages = tuple(u.message for u in decision.units if u.changes or u.limit_reason is not None)
        return CapacityTick(new_limits, changed, {u.unit: u.reason.value for u in decision.units}, messages)


# -------------------------------------------------------------------------------------- recovery


def recovery_settings(values: Mapping[str, Any]) -> RecoverySettings:
    """batchpilot's ``RecoverySettings`` from field names (budgets, backoff, pacing, ...).

    The simulator models recovery turned on for every job queue and allowed to extend
    ``preemptionRetriesBeforeTermination`` and to restart from step 0 (the deployed defaults are
    stricter: no job queue named means dry-run); a scenario's ``values`` override these.

    Raises:
        RecoverySettingsError: ``<field>: <problem>``.
    """
    simulated = {
        "state_table": "simulated-state",
        "job_queues": "*",
        "no_checkpoint": "proceed",
        "extend_preemption_retries": True,
    }
    try:
        return RecoverySettings.from_mapping({**simulated, **values})
    except ValidationError as exc:
        raise RecoverySettingsError(_pydantic_problem(exc)) from None


class RecoveryStep(StrEnum):
    """What the recovery function does with one failed service job."""

    RESUBMIT = "RESUBMIT"  # SubmitServiceJob, resuming from the checkpoint
    DRY_RUN = "DRY_RUN"  # would resubmit; dry run
    DEFER = "DEFER"  # the lineage's backoff is not over: the record comes back later
    SKIP = "SKIP"  # not recovered (reason in ``skip_reason``)


@dataclass(frozen=True, slots=True)
class RecoveryOutcome:
    """The decision for one failure.

    Attributes:
        step: see :class:`RecoveryStep`.
        category: the failure's category as batchpilot classifies the reason.
        attempt: the resubmission number (1 for the first) for RESUBMIT / DRY_RUN.
        defer_s: seconds until the backoff is over (DEFER).
        skip_reason: batchpilot's ``SkipReason`` value (SKIP), or ``DUPLICATE``.
        message: batchpilot's one-line explanation.
    """

    step: RecoveryStep
    category: str
    attempt: int = 0
    defer_s: float = 0.0
    skip_reason: str | None = None
    message: str = ""


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


_ROW_CHECKPOINT = CheckpointLocation(
    "s3://simulated/checkpoints/", "simulated", "checkpoints/", "CheckpointConfig.S3Uri"
)


class RecoveryDecider:
    """The recovery function's decision for failed service jobs: batchpilot's pure decision table
    (:func:`batchpilot.recovery.policy.decide`, every row), with each lineage record kept in
    memory (DynamoDB's role) so budgets and backoff span the whole simulation.

    Args:
        settings: from :func:`recovery_settings`.
    """

    def __init__(self, settings: RecoverySettings) -> None:
        self.settings = settings
        self._lineages: dict[str, Lineage] = {}

    def decide(
        self,
        *,
        lineage_id: str,
        job_arn: str,
        job_name: str,
        queue: str,
        reason: str,
        failed_attempt: int,
        instances: int,
        has_checkpoint: bool,
        created_at: datetime,
        started_at: datetime | None,
        stopped_at: datetime,
        now: datetime,
    ) -> RecoveryOutcome:
        """The decision table for a service job that ended FAILED with ``reason``.

        The simulator knows everything the function gathers (the job as DescribeServiceJob would
        describe it, its lineage, its checkpoint), so every input is given at once.

        Args:
            lineage_id: the lineage (the original job's id).
            job_arn / job_name / queue: the failed job (``queue``: the job queue's name).
            reason: its ``statusReason`` as AWS writes it (classified by batchpilot).
            failed_attempt: which resubmission of the lineage failed (0 = the original job).
            instances: instances of the failed attempt.
            has_checkpoint: the job's checkpoint prefix holds at least one object.
            created_at / started_at / stopped_at: the failed job's times (aware).
            now: the decision time (aware).
        """
        category = category_of_reason(reason) or Category.UNKNOWN
        queue_arn = f"arn:aws:batch:us-east-1:111122223333:job-queue/{queue}"
        facts = JobFacts(
            kind=JobKind.SERVICE_JOB,
            event_kind=EventKind.STATE_CHANGE,
            arn=job_arn,
            name=job_name,
            queue_arn=queue_arn,
            queue=queue,
            status="FAILED",
            secondary_status=None,
            terminal=True,
            succeeded=False,
            category=category,
            reason=reason,
            created_at=created_at,
            started_at=started_at,
            stopped_at=stopped_at,
        )
        snapshot = JobSnapshot(
            kind=JobKind.SERVICE_JOB,
            arn=job_arn,
            name=job_name,
            facts=facts,
            described={},
            instances=float(instances),
            attempt_started_at=started_at,
            stopped_at=stopped_at,
            checkpoint=_ROW_CHECKPOINT,
            job_queue=queue_arn,
        )
        lineage = LineageView(LineageRef(lineage_id, failed_attempt), self._lineages.get(lineage_id))
        checkpoint = CheckpointState(_ROW_CHECKPOINT, newest=stopped_at if has_checkpoint else None)
        decision = decide(Case(facts, snapshot, lineage, checkpoint), self.settings, now)
        if not isinstance(decision, Decision):  # a Need: an input was missing (never: all are given)
            raise RuntimeError(f"batchpilot's recovery policy asked for {decision.name}")
        step = decision.step
        if step is Step.RESUBMIT:
            return RecoveryOutcome(RecoveryStep.RESUBMIT, category.value, attempt=decision.attempt)
        if step is Step.DRY_RUN:
            return RecoveryOutcome(RecoveryStep.DRY_RUN, category.value, attempt=decision.attempt)
        if step is Step.DEFER:
            return RecoveryOutcome(
                RecoveryStep.DEFER, category.value, defer_s=decision.defer_seconds, message=decision.message
            )
        reason_name = decision.row.skip_reason.value if decision.row.skip_reason else decision.row.name
        return RecoveryOutcome(
            RecoveryStep.SKIP, category.value, skip_reason=reason_name, message=decision.message
        )

    def record(
        self,
        *,
        lineage_id: str,
        failed_job_arn: str,
        job_name: str,
        queue: str,
        outcome: RecoveryOutcome,
        now: datetime,
    ) -> None:
        """Write the lineage as the recovery function does after a submit (or a dry-run decision):
        the attempt, the category's budget use and the backoff clock."""
        lineage = self._lineages.get(lineage_id) or Lineage(
            lineage_id=lineage_id,
            job_kind=JobKind.SERVICE_JOB,
            original_job_arn=failed_job_arn,
            original_job_name=job_name,
            job_queue=queue,
            created_at=now,
        )
        record = AttemptRecord(
            attempt=outcome.attempt,
            failed_job_arn=failed_job_arn,
            category=Category(outcome.category),
            reason=None,
            decided_at=now,
            operation=Operation.SUBMIT_SERVICE_JOB,
            new_job_name=f"{job_name}-r{outcome.attempt}",
            state=AttemptState.DRY_RUN if outcome.step is RecoveryStep.DRY_RUN else AttemptState.SUBMITTED,
            published=True,
        )
        self._lineages[lineage_id] = lineage.with_attempt(record)


class Pacer:
    """The recovery function's ``SubmitPacer`` (token bucket) on the simulated clock.

    Args:
        rate: submits per second.
        burst: tokens stored at most.
        clock: the simulated time in seconds.
    """

    def __init__(self, rate: float, burst: float, clock: Callable[[], float]) -> None:
        def no_sleep(_seconds: float) -> None:  # the simulation waits instead (see wait_time)
            return None

        self._bucket = SubmitPacer(rate, burst, clock=clock, sleep=no_sleep)

    def wait_time(self) -> float:
        """Seconds until a token is available (0 when one is)."""
        return self._bucket.wait_time()

    def take(self) -> None:
        """Take a token (call when :meth:`wait_time` is 0)."""
        self._bucket.acquire()


def lost_hours(instances: int, attempt_start_s: float, stop_s: float, checkpoint_s: float | None) -> float:
    """batchpilot's ``LostInstanceHours`` of an attempt: instances x (stop - max(newest checkpoint,
    attempt start)) / 3600. Times are simulated seconds; None = no checkpoint."""
    start = _EPOCH + timedelta(seconds=attempt_start_s)
    stop = _EPOCH + timedelta(seconds=stop_s)
    checkpoint = None if checkpoint_s is None else _EPOCH + timedelta(seconds=checkpoint_s)
    return lost_instance_hours(instances, start, stop, checkpoint)


# --------------------------------------------------------------------------------------- history


def parse_history_event(value: Any) -> ServiceJobDetail | TrainingJobDetail | None:
    """A recorded event as batchpilot's event models read it: a service job's or a training job's
    detail, or None for any other kind of event (ignored by the simulator).

    Raises:
        InvalidEventError: an event of a kind batchpilot knows, but malformed.
    """
    try:
        event = parse_event(value)
    except UnsupportedEventError:
        return None
    if isinstance(event, BatchServiceJobStateChange):
        return event.detail
    if isinstance(event, SageMakerTrainingJobStateChange):
        return event.detail
    return None
