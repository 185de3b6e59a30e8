"""The job ledger's pure core: one job's record, what an observation does to it, and the exact
change it makes to the per (service environment, job queue, share, status) aggregates.

No I/O. A job's *contribution* to the aggregates is a function of its record alone
(:func:`contribution`), and every change is applied as ``contribution(new) - contribution(old)``
(:func:`aggregate_deltas`) in the same conditional write as the record, so the aggregates always
equal a recount of the records, whatever order, duplicates or late deliveries the events come in.

Order rule (:func:`transition`): an observation changes the record only when its key
``(time, status rank)`` is greater than the record's (:data:`RANK`); a terminal record never
changes. A duplicate has the same key, a late event a smaller one: both change nothing. Statuses
come from AWS Batch (``Job states``, ``Service job states``: SUBMITTED, PENDING, RUNNABLE,
SCHEDULED, STARTING, RUNNING, SUCCEEDED, FAILED) and SageMaker ``TrainingJobStatus`` (mapped by
:func:`training_status`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from batchpilot.shared.checkpoints import lost_instance_hours
from batchpilot.shared.classification import Category, JobKind
from batchpilot.shared.clock import epoch_ms
from batchpilot.shared.instances import accelerators

__all__ = [
    "ACTIVE",
    "IN_USE",
    "RANK",
    "AggregateKey",
    "Basis",
    "Delta",
    "Effects",
    "JobDetails",
    "JobStatus",
    "LedgerJob",
    "Observation",
    "PreemptionPhase",
    "Source",
    "Transition",
    "aggregate_deltas",
    "attempt_key",
    "contribution",
    "training_status",
    "transition",
    "type_counts",
    "typed_instances",
    "with_checkpoint",
    "with_details",
]


class JobStatus(StrEnum):
    """AWS Batch job status (SageMaker training jobs mapped onto it by :func:`training_status`)."""

    SUBMITTED = "SUBMITTED"
    PENDING = "PENDING"
    RUNNABLE = "RUNNABLE"
    SCHEDULED = "SCHEDULED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


RANK: dict[JobStatus, int] = {
    JobStatus.SUBMITTED: 0,
    JobStatus.PENDING: 1,
    JobStatus.RUNNABLE: 2,
    JobStatus.SCHEDULED: 3,
    JobStatus.STARTING: 4,
    JobStatus.RUNNING: 5,
    JobStatus.SUCCEEDED: 6,
    JobStatus.FAILED: 6,
}
"""Progress of a status within one event time: breaks ties between events of the same second."""

ACTIVE: frozenset[JobStatus] = frozenset(RANK) - {JobStatus.SUCCEEDED, JobStatus.FAILED}
"""Statuses counted in the aggregates (terminal jobs contribute nothing)."""
IN_USE: frozenset[JobStatus] = frozenset({JobStatus.SCHEDULED, JobStatus.STARTING, JobStatus.RUNNING})
"""Statuses that hold capacity of the service environment (SCHEDULED: AWS Batch has placed the
service job and SageMaker is starting its instances)."""

_TRAINING = {
    "InProgress": JobStatus.RUNNING,
    "Stopping": JobStatus.RUNNING,
    "Completed": JobStatus.SUCCEEDED,
    "Failed": JobStatus.FAILED,
    "Stopped": JobStatus.FAILED,
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_INTERRUPTIONS = frozenset({Category.PREEMPTION, Category.SPOT_INTERRUPTION})


def training_status(status: str) -> JobStatus | None:
    """SageMaker ``TrainingJobStatus`` → :class:`JobStatus`; ``None`` for an unknown value."""
    return _TRAINING.get(status)


class Source(StrEnum):
    """Where an observation came from."""

    EVENT = "event"
    RECONCILE = "reconcile"


class PreemptionPhase(StrEnum):
    """Which AWS Batch preemption event an observation is."""

    STARTED = "started"
    COMPLETED = "completed"


class Basis(StrEnum):
    """What ``LostInstanceHours`` was measured from."""

    CHECKPOINT = "checkpoint"
    """From the newest checkpoint written during the lost attempt (the work since it was lost)."""
    ATTEMPT = "attempt"
    """The whole attempt: the job names no checkpoint location, no checkpoint was written during
    the attempt, or the location could not be listed."""


@dataclass(frozen=True, slots=True)
class JobDetails:
    """What is read once per job (DescribeServiceJob / DescribeJobs, or a training job's event).

    Attributes:
        queue: job queue name; ``""`` for a standalone SageMaker training job.
        environment: service environment name (service jobs), ``""`` otherwise.
        share_identifier, quota_share: fair-share identifier / quota share name, when any.
        priority: ``schedulingPriority`` (0-99 for service jobs), when set.
        instance_type: the one instance type the job asks for (``None``: several or none).
        instances: instances the job asks for (``ResourceConfig``); ``None`` when unknown.
        by_type: ``(instance type, instances)`` pairs, sorted, of every type ``ResourceConfig``
            names (a heterogeneous cluster's ``InstanceGroups`` has several; instances without a
            type are left out); ``None`` when not read (then ``instance_type`` stands for it).
        vcpus, gpus: container jobs' ``resourceRequirements`` (VCPU, GPU) per node x nodes.
        sized: the size was read (or is not knowable); ``False`` means "read it later".
        name: ``jobName`` (``TrainingJobName``) when an event or describe carried it.
        checkpoint: ``CheckpointConfig.S3Uri`` (``s3://bucket/prefix``) of a service job's
            payload or of a training job, when it names one.
    """

    queue: str = ""
    environment: str = ""
    share_identifier: str | None = None
    quota_share: str | None = None
    priority: int | None = None
    instance_type: str | None = None
    instances: int | None = None
    vcpus: float | None = None
    gpus: int | None = None
    sized: bool = False
    name: str | None = None
    checkpoint: str | None = None
    by_type: tuple[tuple[str, int], ...] | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    """What one event (or one reconciliation listing) says about a job.

    Attributes:
        arn: the job's ARN (Batch ``jobArn`` / ``preemptedJobArn``, SageMaker ``TrainingJobArn``).
        kind: container job, service job or training job.
        status: the status observed.
        at: when (the event's ``time``; the listing's start for reconciliation), aware UTC.
        source: event or reconciliation.
        details: what the observation itself carries (queue, share, ...); ``None`` fields are
            left as the record has them.
        preemption: which preemption event this is, if one.
        preempted_count: ``preemptionSummary.preemptedAttemptCount`` when present.
        attempts: attempts the event lists, when it lists them (AWS Batch lists an attempt in
            ``attempts[]`` once it stopped: a RUNNING event lists the attempts before this one).
        created_at, started_at: the job's ``createdAt`` / this attempt's ``startedAt`` when known.
        preempted_started: ``startedAt`` of the attempt a ``Preemption Completed`` event is about
            (the newest ``preemptionSummary.recentPreemptedAttempts[]``), when it names one.
        category: the classification's category (a failed attempt's cause), when any.
        preempting_share: the quota share whose job preempted this one, when the event's reason
            names it (:func:`batchpilot.shared.classification.preempting_share_of_reason`).
    """

    arn: str
    kind: JobKind
    status: JobStatus
    at: datetime
    source: Source = Source.EVENT
    details: JobDetails = field(default_factory=JobDetails)
    preemption: PreemptionPhase | None = None
    preempted_count: int | None = None
    attempts: int | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    category: Category | None = None
    preempting_share: str | None = None
    preempted_started: datetime | None = None


@dataclass(frozen=True, slots=True)
class LedgerJob:
    """One job's ledger record (one DynamoDB item).

    Attributes:
        arn, kind: the job.
        details: what was read once (:class:`JobDetails`).
        status: last applied status; ``status_at``: its observation time (the order key).
        runnable_since: when the job last *became* RUNNABLE (a requeue restarts it).
        attempt_started_at: start of the current attempt (``None`` when not running).
        first_started_at: start of the first attempt.
        last_started_at: start of the latest attempt (kept after it stopped): its identity.
        created_at: ``createdAt`` when known.
        attempts: attempts started; ``preemptions``: preemptions counted.
        preempted_attempt: identity (:func:`attempt_key`) of the attempt whose preemption was
            counted (-1: none), so a state change and a ``Preemption Completed`` event for one
            preemption, or the same event delivered twice, count once.
        preempting_attempt: identity of the attempt whose ``Preemption Started`` was counted.
        describe_failures: failed describes so far (the next observation tries again).
        version: optimistic-lock version of the item (0: not written yet).
    """

    arn: str
    kind: JobKind
    details: JobDetails
    status: JobStatus
    status_at: datetime
    runnable_since: datetime | None = None
    attempt_started_at: datetime | None = None
    first_started_at: datetime | None = None
    last_started_at: datetime | None = None
    created_at: datetime | None = None
    attempts: int = 0
    preemptions: int = 0
    preempted_attempt: int = -1
    preempting_attempt: int = -1
    describe_failures: int = 0
    version: int = 0

    @property
    def share(self) -> str:
        """The quota share, else the share identifier, else ``""``."""
        return self.details.quota_share or self.details.share_identifier or ""

    @property
    def terminal(self) -> bool:
        """SUCCEEDED or FAILED: the record never changes again."""
        return self.status not in ACTIVE


@dataclass(frozen=True, slots=True, order=True)
class AggregateKey:
    """One aggregate: jobs of a status in a (service environment, job queue, share)."""

    environment: str
    queue: str
    share: str
    status: JobStatus


@dataclass(frozen=True, slots=True)
class Delta:
    """Change of one aggregate (or a job's contribution to it).

    Attributes:
        jobs: jobs; ``sized``: of which the size is known.
        instances: instances of the sized jobs; ``gpus``: accelerators of those of known type.
        vcpus: container jobs' vCPUs.
        types: ``(instance type, instances)`` of the sized jobs, sorted by type, no zeros (what a
            quota-management service environment's capacity units count); instances of no
            known type are in ``instances`` only.
    """

    jobs: int = 0
    sized: int = 0
    instances: int = 0
    gpus: int = 0
    vcpus: float = 0.0
    types: tuple[tuple[str, int], ...] = ()

    def __add__(self, other: Delta) -> Delta:
        return Delta(
            self.jobs + other.jobs,
            self.sized + other.sized,
            self.instances + other.instances,
            self.gpus + other.gpus,
            self.vcpus + other.vcpus,
            _sum_types(self.types, other.types),
        )

    def __neg__(self) -> Delta:
        return Delta(
            -self.jobs,
            -self.sized,
            -self.instances,
            -self.gpus,
            -self.vcpus,
            tuple((kind, -count) for kind, count in self.types),
        )

    @property
    def by_type(self) -> dict[str, int]:
        """Instance type → instances (:attr:`types` as a mapping)."""
        return dict(self.types)

    @property
    def zero(self) -> bool:
        """Nothing changes."""
        return not (self.jobs or self.sized or self.instances or self.gpus or self.vcpus or self.types)


def type_counts(counts: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """Instance type → instances as :attr:`Delta.types` holds them: sorted, zeros dropped."""
    return tuple(sorted((kind, count) for kind, count in counts.items() if count))


def _sum_types(a: tuple[tuple[str, int], ...], b: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    if not b:
        return a
    out = dict(a)
    for kind, count in b:
        out[kind] = out.get(kind, 0) + count
    return type_counts(out)


def typed_instances(details: JobDetails) -> dict[str, int]:
    """Instances a job asks for by instance type: :attr:`JobDetails.by_type` when read, else its
    one ``instance_type`` x ``instances``; ``{}`` when no type is known."""
    if details.by_type is not None:
        return dict(details.by_type)
    if details.instance_type and details.instances:
        return {details.instance_type: details.instances}
    return {}


def contribution(job: LedgerJob | None) -> dict[AggregateKey, Delta]:
    """What ``job`` adds to the aggregates: nothing when absent or terminal."""
    if job is None or job.terminal:
        return {}
    d = job.details
    sized = d.sized and (d.instances is not None or d.vcpus is not None or d.gpus is not None)
    instances = d.instances or 0
    typed = typed_instances(d)
    # Per instance type, so a heterogeneous job (InstanceGroups of several types) counts the
    # accelerators of every group; a type not in the table adds none.
    gpus = (d.gpus or 0) + sum(count * (accelerators(kind) or 0) for kind, count in typed.items())
    key = AggregateKey(d.environment, d.queue, job.share, job.status)
    if not sized:
        return {key: Delta(1, 0, 0, 0, d.vcpus or 0.0)}
    return {key: Delta(1, 1, instances, gpus, d.vcpus or 0.0, type_counts(typed))}


def aggregate_deltas(old: LedgerJob | None, new: LedgerJob | None) -> dict[AggregateKey, Delta]:
    """``contribution(new) - contribution(old)``, zero changes dropped."""
    out: dict[AggregateKey, Delta] = dict(contribution(new))
    for key, delta in contribution(old).items():
        out[key] = out.get(key, Delta()) + (-delta)
    return {key: delta for key, delta in out.items() if not delta.zero}


@dataclass(frozen=True, slots=True)
class Effects:
    """What a transition means for the fleet metrics (emitted once: only when it is applied).

    Attributes:
        queue_wait: seconds from ``createdAt`` (else when it became RUNNABLE) to the first start.
        preempted: a preemption was counted now (``Preemption Completed`` or a requeue or failure
            whose cause is preemption).
        preemption_started: a ``Preemption Started`` was counted now.
        preemption_completed: the observation is a ``Preemption Completed`` that was applied.
        lost_instance_hours: instance-hours of an attempt lost to a preemption or interruption.
        basis: what ``lost_instance_hours`` was measured from.
        preempting_share: the quota share that preempted the job, when a preemption was counted
            now and the observation named it (else None: the dimension is omitted).
    """

    queue_wait: float | None = None
    preempted: bool = False
    preemption_started: bool = False
    preemption_completed: bool = False
    lost_instance_hours: float | None = None
    basis: Basis | None = None
    preempting_share: str | None = None


@dataclass(frozen=True, slots=True)
class Transition:
    """An applied observation: the new record, the aggregate deltas, the effects."""

    old: LedgerJob | None
    new: LedgerJob
    deltas: dict[AggregateKey, Delta]
    effects: Effects


def with_checkpoint(change: Transition, newest: datetime | None) -> Effects:
    """``change``'s effects with ``LostInstanceHours`` measured from the newest checkpoint
    (``Basis.CHECKPOINT``) when it was written during the lost attempt: the work since then,
    ``instances x (stop - checkpoint) / 3600`` (:func:`batchpilot.shared.checkpoints.lost_instance_hours`).
    Otherwise the effects are unchanged (``Basis.ATTEMPT``): no checkpoint, one written before the
    attempt started (the whole attempt was lost), or after it stopped (the next attempt's).

    Args:
        change: an applied transition; ``change.old`` holds the lost attempt's start.
        newest: ``LastModified`` of the newest object under the job's checkpoint location written
            at or before the attempt's stop (UTC; ``S3Checkpoints.inspect(..., written_by=stop)``).
    """
    effects = change.effects
    start = change.old.attempt_started_at if change.old is not None else None
    stop = change.new.status_at
    instances = change.new.details.instances
    if effects.lost_instance_hours is None or newest is None or start is None or not instances:
        return effects
    if not start < newest <= stop:
        return effects
    hours = lost_instance_hours(instances, start, stop, newest)
    return dataclasses.replace(effects, lost_instance_hours=hours, basis=Basis.CHECKPOINT)


def _merge(base: JobDetails, update: JobDetails, *, fill_only: bool = False) -> JobDetails:
    """``base`` with the fields ``update`` knows (non-empty) taken from it: all of them, or with
    ``fill_only`` only those ``base`` lacks (an event never overwrites what a describe read)."""
    changes = {
        f.name: getattr(update, f.name)
        for f in dataclasses.fields(JobDetails)
        if f.name != "sized"
        and getattr(update, f.name) not in (None, "")
        and not (fill_only and getattr(base, f.name) not in (None, ""))
    }
    return dataclasses.replace(base, **changes, sized=base.sized or update.sized)


def with_details(job: LedgerJob, details: JobDetails) -> Transition | None:
    """``job`` with what a describe read merged in (queue, share, size); ``None`` if nothing changed."""
    merged = _merge(job.details, details)
    if merged == job.details:
        return None
    new = dataclasses.replace(job, details=merged)
    return Transition(job, new, aggregate_deltas(job, new), Effects())


def attempt_key(started: datetime | None, number: int) -> int:
    """An attempt's identity: its ``startedAt`` in epoch milliseconds (AWS Batch
    ``attempts[].startedAt``, a service job's ``startedAt``), which no other attempt of the job
    shares; ``-2 - number`` (never -1, "none") when its start is unknown."""
    if started is None:
        return -2 - number
    return epoch_ms(started)


def _seconds(start: datetime | None, end: datetime) -> float | None:
    if start is None:
        return None
    value = (end - start).total_seconds()
    return value if value >= 0 else None


def transition(current: LedgerJob | None, obs: Observation) -> Transition | None:
    """Apply ``obs`` to ``current`` (``None``: a job the ledger never saw).

    Returns:
        The transition, or ``None`` when ``obs`` changes nothing: a terminal record, a duplicate
        (same ``(at, rank)``), a late event (smaller key), or a ``Preemption Started`` already
        counted.
    """
    if current is None:
        base = LedgerJob(
            arn=obs.arn,
            kind=obs.kind,
            details=obs.details,
            status=JobStatus.SUBMITTED,
            status_at=_EPOCH,
            created_at=obs.created_at,
        )
        return _apply(None, base, obs, fresh=True)
    if current.terminal:
        return None
    if obs.preemption is PreemptionPhase.STARTED:
        # Started leaves the job RUNNING (AWS Batch stops the attempt, then requeues it with
        # Preemption Completed): count it once per attempt, change no status.
        key = attempt_key(current.attempt_started_at or current.last_started_at, current.attempts)
        if current.preempting_attempt == key or (obs.at, 0) <= (current.status_at, 0):
            return None
        new = dataclasses.replace(current, preempting_attempt=key)
        return Transition(
            current, new, {}, Effects(preemption_started=True, preempting_share=obs.preempting_share)
        )
    if (obs.at, RANK[obs.status]) <= (current.status_at, RANK[current.status]):
        return None
    return _apply(current, current, obs, fresh=False)


def _apply(old: LedgerJob | None, job: LedgerJob, obs: Observation, *, fresh: bool) -> Transition:
    details = _merge(job.details, obs.details, fill_only=not fresh)
    status, at = obs.status, obs.at
    prev = job.status
    runnable_since = job.runnable_since
    attempt_started = job.attempt_started_at
    first_started = job.first_started_at
    last_started = job.last_started_at
    attempts = max(job.attempts, obs.attempts or 0)
    preemptions = max(job.preemptions, obs.preempted_count or 0)
    preempted_attempt = job.preempted_attempt
    created = job.created_at or obs.created_at
    instances = details.instances if details.sized else None
    queue_wait: float | None = None
    preempted = False
    lost: float | None = None

    was_running = not fresh and prev in IN_USE
    ends_attempt = was_running and status not in IN_USE
    interrupted = obs.preemption is PreemptionPhase.COMPLETED or obs.category in _INTERRUPTIONS
    if ends_attempt and (status is JobStatus.RUNNABLE or interrupted) and attempt_started is not None:
        hours = _seconds(attempt_started, at)
        if hours is not None and instances:
            lost = instances * hours / 3600
    if ends_attempt:
        attempt_started = None
    if status is JobStatus.RUNNABLE and (fresh or prev is not JobStatus.RUNNABLE):
        # A job first seen in a listing has been RUNNABLE since at most its creation (listings do
        # not say when it became RUNNABLE); an event or a requeue says exactly when.
        listed = fresh and obs.source is Source.RECONCILE and obs.created_at is not None
        runnable_since = obs.created_at if listed and obs.created_at and obs.created_at <= at else at
    counts_preemption = obs.preemption is PreemptionPhase.COMPLETED or (
        ends_attempt and obs.category is Category.PREEMPTION
    )
    # The lost attempt: the one the preemption event names, else the one that was running, else
    # the latest one (a requeue already applied without counting).
    lost_attempt = obs.preempted_started if obs.preemption is PreemptionPhase.COMPLETED else None
    lost_key = attempt_key(lost_attempt or job.attempt_started_at or last_started, job.attempts)
    if counts_preemption and preempted_attempt != lost_key:
        preemptions = max(preemptions, job.preemptions + 1)
        preempted_attempt = lost_key
        preempted = True
    if status in IN_USE and (fresh or prev not in IN_USE):
        start = obs.started_at if obs.started_at and obs.started_at <= at else at
        if status is JobStatus.RUNNING or obs.started_at:
            attempt_started = start
            last_started = start
        # A new attempt: the attempts a RUNNING event lists are the ones before it.
        attempts = max(job.attempts + 1, (obs.attempts or 0) + 1)
        if first_started is None:
            first_started = start
            if not fresh or obs.source is Source.EVENT:
                queue_wait = _seconds(created or runnable_since, start)
    elif status is JobStatus.RUNNING and attempt_started is None:
        attempt_started = obs.started_at if obs.started_at and obs.started_at <= at else at
        last_started = attempt_started

    new = dataclasses.replace(
        job,
        details=details,
        status=status,
        status_at=at,
        runnable_since=runnable_since if status in ACTIVE else job.runnable_since,
        attempt_started_at=attempt_started if status in IN_USE else None,
        first_started_at=first_started,
        last_started_at=last_started,
        created_at=created,
        attempts=attempts,
        preemptions=preemptions,
        preempted_attempt=preempted_attempt,
    )
    effects = Effects(
        queue_wait=queue_wait,
        preempted=preempted,
        preemption_completed=obs.preemption is PreemptionPhase.COMPLETED,
        lost_instance_hours=lost,
        basis=Basis.ATTEMPT if lost is not None else None,
        preempting_share=obs.preempting_share if preempted else None,
    )
    return Transition(old, new, aggregate_deltas(old, new), effects)
