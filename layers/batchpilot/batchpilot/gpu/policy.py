"""GPU activity of running training jobs and container jobs: which series to read, what they
say, what to publish. Pure, no I/O.

Source: SageMaker developer guide, "Amazon SageMaker AI metrics in Amazon CloudWatch" (training
job metrics): each host of a training job publishes ``GPUUtilization`` and
``GPUMemoryUtilization`` to namespace ``/aws/sagemaker/TrainingJobs`` with dimension ``Host`` =
``<training job name>/algo-<n>`` (``n`` from 1), each minute, in percent *summed over the host's
GPUs* (0 to 100 x GPUs). The GPUs per instance come from :mod:`batchpilot.shared.instances`; a
job of an unknown instance type is not covered (its activity cannot be scaled).

Container jobs (AWS Batch on ECS) publish nothing to SageMaker's namespace: they are read only
from series the user publishes with the CloudWatch agent (Amazon CloudWatch User Guide, "Collect
NVIDIA GPU metrics": ``nvidia_smi_utilization_gpu`` and ``nvidia_smi_utilization_memory``, percent
per GPU, namespace ``CWAgent`` unless the agent's ``namespace`` says otherwise), appended with
``InstanceId`` and aggregated per ``InstanceId`` (``append_dimensions``, ``aggregation_dimensions``)
so one series per instance holds the mean over its GPUs (:class:`MetricSource`, ``summed=False``).
That series is the *instance's*: jobs sharing an instance share its value.

Activity of a host in a minute is ``GPUUtilization / (100 x GPUs per instance)`` (0-1, clamped);
of a job in a minute the mean over its hosts with a datapoint that minute. A minute without any
datapoint is missing, never idle: metrics arrive a few minutes late and a job's first minutes
have none.

States (:func:`assess`), over the datapoints after the warm-up (default 15 min after the attempt
started; SageMaker's ``startedAt``, else the ledger's attempt start):

- :attr:`GpuState.STALLED` (the hang signature): the job's activity was at least
  :attr:`GpuRules.working` (default 50 %) and then every minute of the last :attr:`GpuRules.window`
  (default 30 min) is below :attr:`GpuRules.near_zero` (default 2 %).
- :attr:`GpuState.IDLE`: every minute of the last ``window`` is below :attr:`GpuRules.threshold`
  (default 10 %).
- :attr:`GpuState.ACTIVE`: the latest minute is at or above the threshold (an open episode ends;
  a reported one with its resolution, :func:`resolved_event`).
- :attr:`GpuState.UNKNOWN`: too few datapoints (warm-up, delayed or missing metrics, a throttled
  read): nothing is decided.

A run of minutes covers the window when its first minute is at least ``window`` before the run's
time and it holds datapoints for at least :data:`COVERAGE` of the window's minutes (late or
missing minutes tolerated); the latest datapoint must be at most :data:`SLACK` old.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from batchpilot.gpu.ports import MetricQuery
from batchpilot.ledger.model import LedgerJob
from batchpilot.shared.arns import resource_name
from batchpilot.shared.clock import epoch_ms
from batchpilot.shared.instances import accelerators
from batchpilot.shared.metrics import MetricPoint, dimensions
from batchpilot.shared.own_events import GpuIdleReason, JobGpuIdle

__all__ = [
    "COVERAGE",
    "GPU_MEMORY",
    "GPU_UTILIZATION",
    "NAMESPACE",
    "SAGEMAKER",
    "SLACK",
    "Assessment",
    "GpuJob",
    "GpuRules",
    "GpuState",
    "MetricSource",
    "activity",
    "assess",
    "container_gpu_job",
    "episode_id",
    "gpu_job",
    "gpu_points",
    "host_activity",
    "hosts",
    "idle_event",
    "job_minutes",
    "queries",
    "resolved_event",
]

NAMESPACE = "/aws/sagemaker/TrainingJobs"
"""SageMaker's namespace of training job instance metrics."""
GPU_UTILIZATION = "GPUUtilization"
GPU_MEMORY = "GPUMemoryUtilization"


@dataclass(frozen=True, slots=True)
class MetricSource:
    """Where a job's GPU series are read from.

    Attributes:
        namespace, metric, memory_metric: the CloudWatch namespace and metric names.
        dimension: the dimension naming one host (``Host`` for SageMaker, ``InstanceId`` for the
            CloudWatch agent's series aggregated per instance).
        summed: the value is percent summed over the host's GPUs (SageMaker: 0 to 100 x GPUs);
            ``False``: already the mean over them (the agent's per-instance aggregate, 0-100).
    """

    namespace: str
    metric: str
    memory_metric: str
    dimension: str
    summed: bool


SAGEMAKER = MetricSource(NAMESPACE, GPU_UTILIZATION, GPU_MEMORY, "Host", summed=True)
"""SageMaker's training job metrics (the module docstring)."""
SLACK = timedelta(minutes=5)
"""How old a job's latest datapoint may be for anything to be decided (metrics arrive late)."""
COVERAGE = 0.8
"""Share of a window's minutes that must have a datapoint for it to count."""
_MINUTE = timedelta(minutes=1)


class GpuState(StrEnum):
    """What a job's GPU series says (:func:`assess`)."""

    ACTIVE = "active"
    IDLE = "idle"
    STALLED = "stalled"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class GpuRules:
    """The thresholds (fractions 0-1 of the GPUs' capacity, durations).

    Attributes:
        threshold: activity below which a minute is idle (default 0.10: 10 %).
        window: how long every minute must be idle (default 30 min).
        warmup: time after the attempt starts during which nothing is judged (default 15 min).
        near_zero: activity below which a minute counts as stopped, for a stall (default 0.02).
        working: activity a job must have reached before a stall (default 0.50).
        lookback: how far before the window the read goes to find the working minutes (default
            30 min): the read spans ``window + lookback``.
    """

    threshold: float = 0.10
    window: timedelta = timedelta(minutes=30)
    warmup: timedelta = timedelta(minutes=15)
    near_zero: float = 0.02
    working: float = 0.50
    lookback: timedelta = timedelta(minutes=30)

    @property
    def span(self) -> timedelta:
        """How much history a run reads (``window + lookback``; GetMetricData bills per metric,
        not per datapoint, so the history costs nothing more)."""
        return self.window + self.lookback


@dataclass(frozen=True, slots=True)
class GpuJob:
    """A RUNNING training job whose GPUs can be read.

    Attributes:
        job: its ledger record (the service job, or the standalone training job).
        training_job: the ``TrainingJobName`` its hosts are named after.
        instance_type: its one instance type; ``instances``: how many; ``gpus_per_instance``
            from :func:`batchpilot.shared.instances.accelerators`.
        started: when the attempt started (aware UTC), for the warm-up; ``None``: unknown.
        source: where its series are (SageMaker's, or the CloudWatch agent's for a container job).
        host_ids: a container job's hosts (EC2 instance IDs, the ``source.dimension`` values);
            empty for a training job (its hosts are ``<training job>/algo-<n>``).
    """

    job: LedgerJob
    training_job: str
    instance_type: str
    instances: int
    gpus_per_instance: int
    started: datetime | None
    source: MetricSource = SAGEMAKER
    host_ids: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        """GPUs of all its instances."""
        return self.instances * self.gpus_per_instance


def gpu_job(job: LedgerJob, training_job: str | None) -> GpuJob | None:
    """``job`` as a :class:`GpuJob`, or ``None`` when it cannot be read: no training job name, no
    single known instance type (or one without GPUs), no instance count."""
    d = job.details
    per = accelerators(d.instance_type)
    if not training_job or not d.instance_type or not per or not d.instances or d.instances < 1:
        return None
    return GpuJob(job, training_job, d.instance_type, d.instances, per, job.attempt_started_at)


def container_gpu_job(
    job: LedgerJob, instance_ids: Sequence[str], instance_type: str | None, source: MetricSource
) -> GpuJob | None:
    """A RUNNING container job as a :class:`GpuJob` read from ``source`` (the CloudWatch agent's
    NVIDIA metrics): ``instance_ids`` the EC2 instances its attempt runs on (one per node, the
    ECS container instances AWS Batch placed it on), ``instance_type`` theirs (the container
    instance's ``ecs.instance-type`` attribute; ``None``: unknown, then no price). Its GPUs are its
    ``resourceRequirements`` GPU x nodes (:attr:`JobDetails.gpus`), shared evenly over its
    instances; ``None`` when it asks for no GPU or runs on no known instance."""
    gpus = job.details.gpus or 0
    hosts_of_job = tuple(sorted(set(instance_ids)))
    if gpus < 1 or not hosts_of_job:
        return None
    per = max(gpus // len(hosts_of_job), 1)
    return GpuJob(
        job, "", instance_type or "", len(hosts_of_job), per, job.attempt_started_at, source, hosts_of_job
    )


def hosts(job: GpuJob) -> list[str]:
    """The host dimension values of the job's instances: a container job's instance IDs, a
    training job's ``<training job>/algo-1`` ... ``-N``."""
    if job.host_ids:
        return list(job.host_ids)
    return [f"{job.training_job}/algo-{n}" for n in range(1, job.instances + 1)]


def queries(jobs: Sequence[GpuJob]) -> tuple[list[MetricQuery], dict[str, tuple[int, str, str]]]:
    """The GetMetricData queries of ``jobs`` (two per host: GPU and GPU memory utilisation of the
    job's :class:`MetricSource`, ``Average`` per minute) and query id → ``(job index, host,
    metric)``."""
    out: list[MetricQuery] = []
    where: dict[str, tuple[int, str, str]] = {}
    for index, job in enumerate(jobs):
        for host in hosts(job):
            source = job.source
            for metric in (source.metric, source.memory_metric):
                qid = f"q{len(out)}"
                out.append(MetricQuery(qid, source.namespace, metric, ((source.dimension, host),)))
                where[qid] = (index, host, metric)
    return out, where


def activity(value: float, gpus_per_instance: int) -> float:
    """A host's activity (0-1) from its ``GPUUtilization`` (percent summed over its GPUs); a
    mean over them (the agent's) is read with ``gpus_per_instance`` 1."""
    if not math.isfinite(value):
        return 0.0
    return min(max(value / (100.0 * gpus_per_instance), 0.0), 1.0)


def host_activity(job: GpuJob, value: float) -> float:
    """A host's activity (0-1) from its value in ``job.source`` (summed or mean percent)."""
    return activity(value, job.gpus_per_instance if job.source.summed else 1)


def job_minutes(
    job: GpuJob, per_host: Mapping[str, Sequence[tuple[datetime, float]]]
) -> list[tuple[datetime, float]]:
    """The job's activity per minute (0-1): the mean over its hosts with a datapoint that minute,
    from each host's ``GPUUtilization`` series (percent summed over its GPUs); oldest first."""
    by_minute: dict[datetime, list[float]] = {}
    for series in per_host.values():
        for stamp, value in series:
            minute = stamp.replace(second=0, microsecond=0)
            by_minute.setdefault(minute, []).append(host_activity(job, value))
    return [(minute, sum(v) / len(v)) for minute, v in sorted(by_minute.items())]


@dataclass(frozen=True, slots=True)
class Assessment:
    """A job's state and, when idle or stalled, since when (the first minute of the idle run,
    aware UTC; when active, the first minute of the active run) and its latest activity (0-1;
    ``None``: no datapoint)."""

    state: GpuState
    since: datetime | None = None
    latest: float | None = None


def _covered(run: Sequence[tuple[datetime, float]], window: timedelta, now: datetime) -> bool:
    return bool(run) and now - run[0][0] >= window and len(run) >= COVERAGE * (window / _MINUTE)


def _trailing(minutes: Sequence[tuple[datetime, float]], below: float) -> list[tuple[datetime, float]]:
    run: list[tuple[datetime, float]] = []
    for point in reversed(minutes):
        if point[1] >= below:
            break
        run.append(point)
    return run[::-1]


def assess(
    job: GpuJob, minutes: Sequence[tuple[datetime, float]], now: datetime, rules: GpuRules
) -> Assessment:
    """The job's state at ``now`` from its activity per minute (:func:`job_minutes`).

    Minutes before the warm-up ends (``started + warmup``) are left out; a latest datapoint older
    than :data:`SLACK` (metrics stopped, a throttled read) leaves the job :attr:`GpuState.UNKNOWN`.
    """
    if job.started is not None:
        minutes = [p for p in minutes if p[0] >= job.started + rules.warmup]
    if not minutes or now - minutes[-1][0] > SLACK + _MINUTE:
        return Assessment(GpuState.UNKNOWN)
    latest = minutes[-1][1]
    if latest >= rules.threshold:
        back = minutes[-1][0]  # the first minute of the trailing active run: when work resumed
        for stamp, value in reversed(minutes):
            if value < rules.threshold:
                break
            back = stamp
        return Assessment(GpuState.ACTIVE, back, latest)
    stopped = _trailing(minutes, rules.near_zero)
    if _covered(stopped, rules.window, now):
        before = minutes[: len(minutes) - len(stopped)]
        if any(value >= rules.working for _, value in before):
            return Assessment(GpuState.STALLED, stopped[0][0], latest)
    idle = _trailing(minutes, rules.threshold)
    if _covered(idle, rules.window, now):
        return Assessment(GpuState.IDLE, idle[0][0], latest)
    return Assessment(GpuState.UNKNOWN, latest=latest)


def _share_dims(job: LedgerJob) -> tuple[tuple[str, str], ...]:
    d = job.details
    if not d.queue:
        return dimensions(JobKind=job.kind.value)
    if d.quota_share:
        return dimensions(JobQueue=d.queue, QuotaShare=d.quota_share)
    return dimensions(JobQueue=d.queue, ShareIdentifier=d.share_identifier)


def _percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` 0-100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(math.ceil(q / 100.0 * len(ordered)), 1)
    return ordered[rank - 1]


def gpu_points(
    measured: Iterable[tuple[GpuJob, Mapping[str, float]]], now: datetime, interval: timedelta = _MINUTE
) -> list[MetricPoint]:
    """The gauges of one run: per job queue and share (``JobQueue`` + ``ShareIdentifier`` or
    ``QuotaShare``; standalone training jobs under ``JobKind=training-job``):

    - ``GpuActivity`` (Percent): mean activity of the GPUs of its hosts with a recent datapoint;
    - ``GpuActivityP10`` (Percent): the 10th percentile (nearest rank) over those hosts;
    - ``IdleGpuHours`` (Count, GPU-hours): ``GPUs x (1 - activity) x interval`` summed over them,
      so the sum over a dashboard's period is the GPU-hours allocated but unused.

    ``measured``: each job with host → its latest activity (0-1); hosts without a datapoint are
    absent, and a (queue, share) without any host gets no point (a gauge only while measured).
    """
    groups: dict[tuple[tuple[str, str], ...], list[tuple[float, int]]] = {}
    for job, per_host in measured:
        for activity in per_host.values():
            groups.setdefault(_share_dims(job.job), []).append((activity, job.gpus_per_instance))
    hours = interval.total_seconds() / 3600.0
    points: list[MetricPoint] = []
    for dims, values in sorted(groups.items()):
        gpus = sum(g for _, g in values)
        mean = sum(a * g for a, g in values) / gpus
        points.append(MetricPoint("GpuActivity", "Percent", 100.0 * mean, dims, now))
        points.append(
            MetricPoint(
                "GpuActivityP10", "Percent", 100.0 * _percentile([a for a, _ in values], 10), dims, now
            )
        )
        idle = sum(g * (1.0 - a) for a, g in values) * hours
        points.append(MetricPoint("IdleGpuHours", "Count", idle, dims, now))
    return points


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"


def _job_fields(job: GpuJob, name: str, now: datetime) -> dict[str, Any]:
    """The fields every ``Job GPU Idle`` of ``job`` carries (idle, stalled or active again): who
    and where the job is, and what it holds (instances, GPUs), from the ledger's record."""
    record = job.job
    d = record.details
    return {
        "time": now,
        "job_arn": record.arn,
        "job_kind": record.kind.value,
        "job_name": name,
        "training_job_name": job.training_job or None,
        "job_queue": d.queue or None,
        "share_identifier": d.share_identifier,
        "quota_share": d.quota_share,
        "scheduling_priority": d.priority,
        "instance_type": job.instance_type or None,
        "instances": job.instances,
        "gpus": job.gpus,
    }


def idle_event(
    job: GpuJob,
    assessment: Assessment,
    now: datetime,
    rules: GpuRules,
    prices: Mapping[str, float],
) -> JobGpuIdle:
    """The ``Job GPU Idle`` of ``job`` (state IDLE or STALLED) at ``now``.

    ``hourly_cost_usd`` is the list price per instance-hour of its instance type (``prices``:
    instance type → USD per hour, the ``ml.`` name or not) x instances x the idle share of its GPUs
    (1 - its latest activity); ``None`` when the price is not configured.
    """
    record = job.job
    d = record.details
    reason = GpuIdleReason.STALLED if assessment.state is GpuState.STALLED else GpuIdleReason.IDLE
    since = assessment.since or now
    idle_seconds = max((now - since).total_seconds(), 0.0)
    latest = assessment.latest or 0.0
    name = d.name or resource_name(record.arn) or record.arn
    share = record.share or "no share"
    priority = "unknown" if d.priority is None else str(d.priority)
    price = prices.get(job.instance_type, prices.get(job.instance_type.removeprefix("ml.")))
    cost = price * job.instances * (1.0 - latest) if price is not None else None
    what = (
        f"GPUs fell from working to {100 * latest:.0f}% and stayed there (a hang?)"
        if reason is GpuIdleReason.STALLED
        else f"GPUs below {100 * rules.threshold:.0f}% (now {100 * latest:.0f}%)"
    )
    kind = job.instance_type or "instance"
    costs = f", about ${cost:,.2f}/h of idle capacity at list price" if cost is not None else ""
    message = (
        f"job {name} (share {share}, priority {priority}) holds {job.instances} x {kind}"
        f" ({job.gpus} GPUs): {what} for {_duration(idle_seconds)}{costs}"
        f" on {d.queue or 'no job queue'}"
    )
    return JobGpuIdle(
        **_job_fields(job, name, now),
        reason=reason,
        activity_percent=100.0 * latest,
        threshold_percent=100.0 * (rules.near_zero if reason is GpuIdleReason.STALLED else rules.threshold),
        idle_since=since,
        idle_seconds=idle_seconds,
        hourly_cost_usd=cost,
        message=message,
    )


def resolved_event(
    job: GpuJob,
    assessment: Assessment,
    idle_reason: GpuIdleReason,
    since: datetime,
    now: datetime,
    rules: GpuRules,
) -> JobGpuIdle:
    """The resolution of a reported episode (``Job GPU Idle`` with reason ``ACTIVE``) at ``now``:
    ``assessment`` is ACTIVE, ``idle_reason`` (IDLE or STALLED) and ``since`` (aware UTC, its first
    idle minute) are the episode's; ``idle_seconds`` is how long it lasted, up to the first minute
    of the active run (``assessment.since``; ``now`` when unknown)."""
    record = job.job
    d = record.details
    idle_seconds = max(((assessment.since or now) - since).total_seconds(), 0.0)
    latest = assessment.latest or 0.0
    name = d.name or resource_name(record.arn) or record.arn
    was = "stalled" if idle_reason is GpuIdleReason.STALLED else "idle"
    message = (
        f"job {name} ({job.instances} x {job.instance_type or 'instance'}, {job.gpus} GPUs):"
        f" GPUs active again"
        f" at {100 * latest:.0f}% after {_duration(idle_seconds)} {was}"
        f" on {d.queue or 'no job queue'}"
    )
    return JobGpuIdle(
        **_job_fields(job, name, now),
        reason=GpuIdleReason.ACTIVE,
        activity_percent=100.0 * latest,
        threshold_percent=100.0 * rules.threshold,
        idle_since=since,
        idle_seconds=idle_seconds,
        message=message,
    )


def episode_id(since: datetime) -> str:
    """An episode's identity in a fact id (epoch ms of its first idle minute)."""
    return str(epoch_ms(since))
