"""The jobs a simulation runs: generated from streams, read from a recorded history, or given.

:func:`build_jobs` returns :class:`JobSpec` objects sorted by submission time. Generation is
deterministic for a seed: each stream draws from its own ``random.Random`` seeded with the
scenario seed and the stream's index and share, so adding a stream leaves the others' jobs as
they were, and two scenarios with the same workload and seed get the same jobs.

A recorded history is anything ``batchpilot replay`` reads (its reader is reused): every
``Batch Service Job State Change`` event of one ``jobArn`` is merged into one job:

- submitted at ``createdAt`` (the history's earliest ``createdAt`` is the simulation's t = 0);
- duration: the longest attempt (``stoppedAt - startedAt``) of a job that SUCCEEDED, else of any
  attempt that ran, else ``default_duration_s``;
- size: the ``ResourceConfig`` of the job's ``serviceRequestPayload`` when a replay scenario's
  ``world`` has it, else of a ``SageMaker Training Job State Change`` of a training job Batch
  created for it (``AWSBatch<jobName><32 hex>``), else the defaults;
- share identifier / quota share / scheduling priority / retry attempts from the events.

Other events are ignored and counted.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from batchpilot_local.inputs import InputError, read_inputs
from batchpilot_local.simulate.policies import (
    InvalidEventError,
    ServiceJobDetail,
    TrainingJobDetail,
    demand_from_payload,
    parse_history_event,
)
from batchpilot_local.simulate.scenario import (
    JobTemplate,
    Scenario,
    ScenarioError,
    Stream,
    Workload,
    check_job,
)

__all__ = [
    "ElasticStream",
    "HistoryNotes",
    "JobSpec",
    "WorkloadJobs",
    "build_jobs",
    "elastic_streams",
    "generate",
    "read_history",
]


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One service job as submitted (a SageMaker training job queued by AWS Batch).

    Attributes:
        name: ``jobName``.
        queue: the scenario's job queue.
        share: share identifier / quota share / label (see ``scenario.JobTemplate``); None = none.
        submit_s: seconds after the start.
        instance_type / instance_count: ``ResourceConfig``.
        duration_s: training seconds needed without interruptions.
        priority: ``schedulingPriority`` (0-9999, higher first).
        checkpoint_interval_s: training seconds between checkpoints (None = never).
        spot: managed spot training.
        max_wait_s: ``MaxWaitTimeInSeconds`` (spot), None for on-demand.
        retry_attempts: ``retryStrategy.attempts`` (counting the first).
        preemption_retries: ``preemptionRetriesBeforeTermination`` (None = requeued for ever).
    """

    name: str
    queue: str
    share: str | None
    submit_s: float
    instance_type: str
    instance_count: int
    duration_s: float
    priority: int = 0
    checkpoint_interval_s: float | None = None
    spot: bool = False
    max_wait_s: float | None = None
    retry_attempts: int = 1
    preemption_retries: int | None = None
    elastic: int | None = None  # the index of its elastic stream in WorkloadJobs.elastic, if any


@dataclass(frozen=True)
class ElasticStream:
    """A stream with elastic demand (``Stream.keep_runnable``): its jobs are drawn while the
    simulation runs, the k-th one the same in every run of one seed.

    Attributes:
        stream: the scenario's stream; index: its place in the generator (part of the seed).
        queue: the job queue its jobs go to; seed: the run's seed.
    """

    stream: Stream
    index: int
    queue: str
    seed: int

    @property
    def open_s(self) -> float:
        """When the stream opens (seconds)."""
        return self.stream.from_hour * 3600.0

    def close_s(self, horizon_s: float) -> float:
        """When it closes: ``until_hour`` or the horizon (seconds)."""
        until = self.stream.until_hour
        return min(horizon_s, until * 3600.0 if until is not None else math.inf)

    def job(self, k: int, submit_s: float, elastic: int) -> JobSpec:
        """Its ``k``-th job (from 1), submitted at ``submit_s``; ``elastic`` is its index in
        :attr:`WorkloadJobs.elastic`."""
        stream = self.stream
        rng = random.Random(f"{self.seed}:{self.index}:{stream.share}:elastic:{k}")  # noqa: S311
        return _draw(stream, rng, f"{stream.share}-e{k:05d}", self.queue, submit_s, elastic)


@dataclass
class HistoryNotes:
    """What reading a history found.

    Attributes:
        events: items read; service_jobs: jobs rebuilt; ignored: events of other kinds.
        sized_from_payload / sized_from_training_job / sized_by_default: where sizes came from.
        start: the earliest ``createdAt`` (the simulation's t = 0).
    """

    events: int = 0
    service_jobs: int = 0
    ignored: int = 0
    sized_from_payload: int = 0
    sized_from_training_job: int = 0
    sized_by_default: int = 0
    start: datetime | None = None


@dataclass
class WorkloadJobs:
    """The jobs and, for a history, what reading it found."""

    jobs: list[JobSpec]
    history: HistoryNotes | None = None
    elastic: list[ElasticStream] = field(default_factory=list)


def _draw(
    stream: Stream, rng: random.Random, name: str, queue: str, submit_s: float, elastic: int | None = None
) -> JobSpec:
    """One job of ``stream``: its size, duration, priority and spot draws from ``rng``."""
    count = max(1, round(stream.instance_count.sample(rng)))
    duration = max(1.0, stream.duration_s.sample(rng))  # whole seconds at least
    priority = min(9999, max(0, round(stream.priority.sample(rng))))
    spot = stream.spot_fraction > 0 and rng.random() < stream.spot_fraction
    return JobSpec(
        name=name,
        queue=queue,
        share=stream.share,
        submit_s=submit_s,
        instance_type=stream.instance_type,
        instance_count=count,
        duration_s=duration,
        priority=priority,
        checkpoint_interval_s=stream.checkpoint_interval_s,
        spot=spot,
        max_wait_s=duration * stream.spot_max_wait_factor if spot else None,
        retry_attempts=stream.retry_attempts,
        preemption_retries=stream.preemption_retries,
        elastic=elastic,
    )


def _stream_jobs(scenario: Scenario, stream: Stream, index: int, seed: int, queue: str) -> list[JobSpec]:
    rng = random.Random(f"{seed}:{index}:{stream.share}")  # noqa: S311 - a simulation, not security
    start = stream.from_hour * 3600.0
    end = min(scenario.horizon_s, stream.until_hour * 3600.0 if stream.until_hour is not None else math.inf)
    rate = (stream.arrivals_per_hour or 0.0) / 3600.0
    out: list[JobSpec] = []
    t = start
    while True:
        t += rng.expovariate(rate)  # Poisson arrivals: exponential gaps
        if t >= end or (stream.max_jobs is not None and len(out) >= stream.max_jobs):
            break
        out.append(_draw(stream, rng, f"{stream.share}-{len(out) + 1:05d}", queue, t))
    return out


def elastic_streams(scenario: Scenario, workload: Workload, seed: int) -> list[ElasticStream]:
    """The generator's streams with elastic demand (validated against ``scenario``'s queues).

    Raises:
        ScenarioError: a stream names an unknown queue or share, or draws jobs no environment fits.
    """
    out: list[ElasticStream] = []
    if workload.generator is None:
        return out
    for index, stream in enumerate(workload.generator.streams):
        if stream.keep_runnable is None:
            continue
        where = f"workload.generator.streams[{index}]"
        _, hi = stream.instance_count.bounds()
        queue = check_job(scenario, where, stream.queue, stream.share, stream.instance_type, hi)
        out.append(ElasticStream(stream, index, queue, seed))
    return out


def generate(scenario: Scenario, workload: Workload, seed: int) -> list[JobSpec]:
    """The generated and explicit jobs of ``workload`` (validated against ``scenario``'s queues)."""
    jobs: list[JobSpec] = []
    if workload.generator is not None:
        for index, stream in enumerate(workload.generator.streams):
            if stream.keep_runnable is not None:
                continue  # elastic demand: drawn while the simulation runs (elastic_streams)
            where = f"workload.generator.streams[{index}]"
            _, hi = stream.instance_count.bounds()
            queue = check_job(scenario, where, stream.queue, stream.share, stream.instance_type, hi)
            jobs.extend(_stream_jobs(scenario, stream, index, seed, queue))
    for index, template in enumerate(workload.jobs):
        where = f"workload.jobs[{index}]"
        queue = check_job(
            scenario, where, template.queue, template.share, template.instance_type, template.instance_count
        )
        jobs.append(_explicit(template, index, queue))
    return jobs


def _explicit(template: JobTemplate, index: int, queue: str) -> JobSpec:
    return JobSpec(
        name=template.name or f"job-{index + 1:05d}",
        queue=queue,
        share=template.share,
        submit_s=template.submit_s,
        instance_type=template.instance_type,
        instance_count=template.instance_count,
        duration_s=template.duration_s,
        priority=template.priority,
        checkpoint_interval_s=template.checkpoint_interval_s,
        spot=template.spot,
        max_wait_s=(template.max_wait_s or template.duration_s * 2.0) if template.spot else None,
        retry_attempts=template.retry_attempts,
        preemption_retries=template.preemption_retries,
    )


# --------------------------------------------------------------------------------------- history

_BATCH_NAME = re.compile(r"^AWSBatch(?P<name>.+)[0-9a-f]{32}$")


@dataclass
class _Recorded:
    origin: str
    arn: str
    name: str | None = None
    queue: str | None = None
    status: str | None = None
    created_ms: float | None = None
    share: str | None = None
    quota_share: str | None = None
    priority: int | None = None
    retry_attempts: int | None = None
    runs: list[tuple[float, float, bool]] = field(default_factory=list)  # start ms, stop ms, succeeded
    job_run: tuple[float, float] | None = None


def _ms(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp() * 1000.0


def _merge(record: _Recorded, detail: ServiceJobDetail) -> None:
    record.name = detail.jobName or record.name
    record.queue = (detail.jobQueue or "").rsplit("/", 1)[-1] or record.queue
    created = _ms(detail.createdAt)
    if created is not None:
        record.created_ms = created if record.created_ms is None else min(record.created_ms, created)
    record.share = detail.shareIdentifier or record.share
    record.quota_share = detail.quotaShareName or record.quota_share
    if detail.schedulingPriority is not None:
        record.priority = detail.schedulingPriority
    if detail.retryStrategy is not None and detail.retryStrategy.attempts is not None:
        record.retry_attempts = detail.retryStrategy.attempts
    if record.status not in ("SUCCEEDED", "FAILED"):
        record.status = detail.status
    succeeded = detail.status == "SUCCEEDED"
    attempts = list(detail.attempts)
    for index, attempt in enumerate(attempts):
        start, stop = _ms(attempt.startedAt), _ms(attempt.stoppedAt)
        if start is not None and stop is not None and stop > start:
            run = (start, stop, succeeded and index == len(attempts) - 1)
            if run not in record.runs:
                record.runs.append(run)
    start, stop = _ms(detail.startedAt), _ms(detail.stoppedAt)
    if start is not None and stop is not None and stop > start:
        record.job_run = (start, stop)


def _payload_sizes(worlds: list[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Job ARN and job name → instance type → count, from the replay worlds' service jobs."""
    sizes: dict[str, dict[str, int]] = {}
    for world in worlds:
        for job in world.get("service_jobs", []) or []:
            if not isinstance(job, Mapping):
                continue
            payload = job.get("serviceRequestPayload")
            text = json.dumps(payload) if isinstance(payload, Mapping | list) else payload
            demand = demand_from_payload(text if isinstance(text, str) else None)
            if not demand:
                continue
            for key in (job.get("jobArn"), job.get("jobName")):
                if isinstance(key, str):
                    sizes[key] = demand
    return sizes


def read_history(scenario: Scenario, base: Path) -> WorkloadJobs:
    """Rebuild the jobs of ``scenario.workload.history`` (paths relative to ``base``).

    Raises:
        ScenarioError: unreadable input, a malformed event, or a job that cannot be rebuilt; the
            message names the file and record.
    """
    spec = scenario.workload.history
    assert spec is not None
    paths = [str(p if Path(p).is_absolute() else base / p) for p in spec.paths]
    try:
        replay_input = read_inputs(paths)
    except InputError as exc:
        raise ScenarioError(f"workload.history: {exc}") from None
    notes = HistoryNotes(events=len(replay_input.items))
    records: dict[str, _Recorded] = {}
    trained: dict[str, dict[str, int]] = {}
    for item in replay_input.items:
        try:
            detail = parse_history_event(item.value)
        except InvalidEventError as exc:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ScenarioError(f"workload.history: {item.origin}: {message}") from None
        if isinstance(detail, ServiceJobDetail):
            record = records.setdefault(detail.jobArn, _Recorded(item.origin, detail.jobArn))
            _merge(record, detail)
        elif isinstance(detail, TrainingJobDetail):
            match = _BATCH_NAME.match(detail.TrainingJobName)
            config = detail.ResourceConfig
            if match and config is not None and config.InstanceType and config.InstanceCount:
                trained[match.group("name")] = {config.InstanceType: int(config.InstanceCount)}
            notes.ignored += 0 if match else 1
        else:
            notes.ignored += 1
    payloads = _payload_sizes([w.data for w in replay_input.worlds])
    if not records:
        raise ScenarioError("workload.history: no Batch Service Job State Change event in the history")
    created = [r.created_ms for r in records.values() if r.created_ms is not None]
    if not created:
        first = next(iter(records.values()))
        raise ScenarioError(f"workload.history: {first.origin}: service job {first.arn} has no createdAt")
    t0 = min(created)
    notes.start = datetime.fromtimestamp(t0 / 1000.0, tz=scenario.start.tzinfo)
    jobs: list[JobSpec] = []
    for record in records.values():
        jobs.append(_rebuild(scenario, spec, record, t0, payloads, trained, notes, len(jobs)))
    notes.service_jobs = len(jobs)
    return WorkloadJobs(sorted(jobs, key=lambda j: j.submit_s), notes)


def _rebuild(
    scenario: Scenario,
    spec: Any,
    record: _Recorded,
    t0: float,
    payloads: Mapping[str, Mapping[str, int]],
    trained: Mapping[str, Mapping[str, int]],
    notes: HistoryNotes,
    index: int,
) -> JobSpec:
    where = f"workload.history: {record.origin}"
    if record.created_ms is None:
        raise ScenarioError(f"{where}: service job {record.arn} has no createdAt")
    succeeded = [stop - start for start, stop, ok in record.runs if ok]
    ran = [stop - start for start, stop, _ in record.runs]
    if record.job_run is not None:
        ran.append(record.job_run[1] - record.job_run[0])
    if succeeded:
        duration = max(succeeded) / 1000.0
    elif ran:
        duration = max(ran) / 1000.0
    elif spec.default_duration_s is not None:
        duration = spec.default_duration_s
    else:
        raise ScenarioError(
            f"{where}: service job {record.arn} never ran in the history; give "
            "workload.history.default_duration_s"
        )
    demand = payloads.get(record.arn) or (payloads.get(record.name) if record.name else None)
    if demand:
        notes.sized_from_payload += 1
    else:
        demand = trained.get(record.name) if record.name else None
        if demand:
            notes.sized_from_training_job += 1
    if not demand:
        if spec.default_instance_type is None:
            raise ScenarioError(
                f"{where}: no size for service job {record.arn} (no payload or training job event); give "
                "workload.history.default_instance_type"
            )
        demand = {spec.default_instance_type: spec.default_instance_count}
        notes.sized_by_default += 1
    instance_type, count = max(demand.items(), key=lambda pair: pair[1])
    queues = [q.name for q in scenario.job_queues]
    recorded_queue = record.queue or ""
    queue = spec.queue_map.get(recorded_queue) or (recorded_queue if recorded_queue in queues else None)
    if queue is None and len(queues) == 1:
        queue = queues[0]
    if queue is None:
        raise ScenarioError(
            f"{where}: job queue {recorded_queue or '?'} of service job {record.arn} is not in the scenario; "
            "map it with workload.history.queue_map"
        )
    share = record.quota_share or record.share
    check_job(scenario, where, queue, share, instance_type, count)
    return JobSpec(
        name=record.name or f"history-{index + 1:05d}",
        queue=queue,
        share=share,
        submit_s=(record.created_ms - t0) / 1000.0,
        instance_type=instance_type,
        instance_count=count,
        duration_s=max(1.0, duration),
        priority=record.priority or 0,
        checkpoint_interval_s=spec.checkpoint_interval_s,
        retry_attempts=min(10, max(1, record.retry_attempts or 1)),
    )


def build_jobs(scenario: Scenario, seed: int, base: Path, workload: Workload | None = None) -> WorkloadJobs:
    """Every job of the workload (``workload`` defaults to the scenario's), sorted by submission.

    Raises:
        ScenarioError: see :func:`read_history` and ``scenario.check_job``.
    """
    workload = workload or scenario.workload
    history: HistoryNotes | None = None
    jobs = generate(scenario, workload, seed)
    if workload.history is not None:
        own = (
            scenario if workload is scenario.workload else scenario.model_copy(update={"workload": workload})
        )
        read = read_history(own, base)
        jobs.extend(read.jobs)
        history = read.history
    jobs.sort(key=lambda j: (j.submit_s, j.name))
    return WorkloadJobs(jobs, history, elastic_streams(scenario, workload, seed))
