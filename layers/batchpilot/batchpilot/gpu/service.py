"""The GPU activity check of one scheduled run (the ledger function's ``LedgerSchedule``, each
minute): read the GPUs of every RUNNING training job the ledger knows, publish the gauges, report
idle and stalled jobs once per episode.

Orchestrates through :mod:`batchpilot.gpu.ports` only (no boto3, no Powertools, no wall clock).

Which jobs: the ledger's active index of every job queue it has seen and of standalone training
jobs (``active``), RUNNING service jobs and training jobs, their records (``get_many``) for the
instance type and count, and for a service job its training job's name (DescribeServiceJob, once
per job and attempt per Lambda instance, kept in memory). RUNNING container jobs only when a
``container_source`` is configured (the CloudWatch agent's NVIDIA metrics the user publishes,
``BATCHPILOT_GPU_CONTAINER_METRICS``; without it they are not covered): their attempt's ECS
container instances (DescribeJobs) and those instances' EC2 IDs and type
(DescribeContainerInstances), once per job and attempt per Lambda instance, kept in memory; then
the same policy, episodes and gauges as training jobs.

Calls per run, with ``Q`` job queues the ledger knows, ``R`` RUNNING training jobs and service
jobs and ``H`` their hosts (instances): ``Q + 1`` Queries of the active index, ``ceil(R / 100)``
BatchGetItem, one Query of the open episodes, ``ceil(2H / 500)`` GetMetricData (two metrics a
host, more only if a result is paged), one DescribeServiceJob per service job attempt the Lambda
instance has not seen yet (a container job's attempt: one DescribeJobs, two for a multi-node
job, and one DescribeContainerInstances); per new episode one conditional PutItem, one PutEvents and one
UpdateItem; per ended episode one DeleteItem, and for a reported one whose activity returned
first one conditional UpdateItem (the resolution's claim) and one PutEvents. CloudWatch bills
GetMetricData per metric requested: ``2H`` a minute.

Faults: a GetMetricData request that fails (throttled after botocore's retries, out of time) leaves
its jobs unread: they get no gauge and no decision this run (missing data is never idle), the
failure is counted in the summary. A claim whose ``Job GPU Idle`` could not be published is closed
again (the next run claims it anew); one whose invocation died before publishing is taken over
after its lease (:data:`batchpilot.io.dynamodb.gpu.EPISODE_LEASE`): at least once, and the alerts
function's claim makes it one message. A resolution is claimed the same way (a conditional
UpdateItem on the episode): a duplicate run publishes none, a run killed between PutEvents and the
DeleteItem is taken over after the lease with the same episode (the same fact id), a failed
PutEvents gives the claim back. A container job whose instances cannot be read (DescribeJobs or
DescribeContainerInstances failing) is counted (``uncovered``, ``errors``) and never judged. A job
that stops while idle gets no resolution: its state change says it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from batchpilot.gpu.policy import (
    SLACK,
    Assessment,
    GpuJob,
    GpuRules,
    GpuState,
    MetricSource,
    assess,
    container_gpu_job,
    gpu_job,
    gpu_points,
    host_activity,
    idle_event,
    job_minutes,
    queries,
    resolved_event,
)
from batchpilot.gpu.ports import (
    ContainerInstances,
    ContainerPlacements,
    Episode,
    EpisodeStore,
    EventPublisher,
    HostsUnreadable,
    MetricReader,
    MetricSink,
    RunningJobs,
    TrainingJobNames,
    TrainingJobUnreadable,
)
from batchpilot.ledger.model import JobStatus, LedgerJob
from batchpilot.shared.classification import JobKind
from batchpilot.shared.own_events import PublishError

__all__ = ["GpuActivityService", "GpuRunSummary"]

_NAMES_KEPT = 10_000
"""Training job names a Lambda instance remembers (bounded: a forgotten one costs one describe)."""
_READ_KINDS = frozenset({JobKind.SERVICE_JOB, JobKind.TRAINING_JOB})


@dataclass
class GpuRunSummary:
    """What one run did (logged with the ledger's run summary).

    Attributes:
        running: RUNNING service and training jobs the ledger holds (and container jobs when a
            container source is configured); ``measured``: those with a recent GPU datapoint;
            ``uncovered``: those that cannot be read (no training job name yet, unknown instance
            type or count; a container job asking for no GPU or whose instances are unread).
        queries: GetMetricData queries; ``requests``: GetMetricData calls; ``unread``: queries
            whose request failed; ``errors``: one bounded line per failed request.
        idle: ``Job GPU Idle`` published; ``unpublished``: those (and resolutions) whose
            PutEvents failed; ``resolved``: episodes ended (activity back, or the job no longer
            running); ``announced``: resolutions published (``Job GPU Idle`` reason ``ACTIVE``);
            ``points``: gauges.
    """

    running: int = 0
    measured: int = 0
    uncovered: int = 0
    queries: int = 0
    requests: int = 0
    unread: int = 0
    errors: list[str] = field(default_factory=list)
    idle: int = 0
    unpublished: int = 0
    resolved: int = 0
    announced: int = 0
    points: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "running": self.running,
            "measured": self.measured,
            "uncovered": self.uncovered,
            "queries": self.queries,
            "requests": self.requests,
            "unread": self.unread,
            "errors": self.errors[:5],
            "idle": self.idle,
            "unpublished": self.unpublished,
            "resolved": self.resolved,
            "announced": self.announced,
            "points": self.points,
        }


class GpuActivityService:
    """The GPU activity check.

    Args:
        jobs: the ledger's items; ``names``: a service job's training job; ``metrics``: the
            series; ``episodes``: the open idle episodes; ``sink``: where the gauges go (the
            ledger's, flushed with its run); ``publisher``: where ``Job GPU Idle`` goes (``None``:
            gauges only).
        rules: thresholds; ``prices``: instance type → USD per instance-hour (list price).
        container_source: where container jobs' GPU series are (the CloudWatch agent's NVIDIA
            metrics); ``placements`` and ``instances`` map a container job to its EC2
            instances. Any of the three ``None``: container jobs are not read.
    """

    def __init__(
        self,
        *,
        jobs: RunningJobs,
        names: TrainingJobNames,
        metrics: MetricReader,
        episodes: EpisodeStore,
        sink: MetricSink,
        publisher: EventPublisher | None = None,
        rules: GpuRules | None = None,
        prices: Mapping[str, float] | None = None,
        container_source: MetricSource | None = None,
        placements: ContainerPlacements | None = None,
        instances: ContainerInstances | None = None,
    ) -> None:
        self.jobs = jobs
        self.names = names
        self.metrics = metrics
        self.episodes = episodes
        self.sink = sink
        self.publisher = publisher
        self.rules = rules or GpuRules()
        self.prices = dict(prices or {})
        self.container_source = container_source
        self.placements = placements
        self.instances = instances
        self._kinds = _READ_KINDS
        if container_source is not None and placements is not None and instances is not None:
            self._kinds = _READ_KINDS | {JobKind.CONTAINER_JOB}
        # (job ARN, attempt start) → its training job's name: one describe per attempt.
        self._names: dict[tuple[str, datetime | None], str] = {}
        # (job ARN, attempt start) → its EC2 instance IDs and instance type: the same, containers.
        self._hosts: dict[tuple[str, datetime | None], tuple[tuple[str, ...], str | None]] = {}

    def run(self, now: datetime) -> GpuRunSummary:
        """One run at ``now`` (the schedule's time, aware UTC).

        Raises:
            botocore.exceptions.ClientError: DynamoDB failed (the run fails; the next minute's
                starts over). GetMetricData and DescribeServiceJob failures are counted (``unread``,
                ``uncovered``, ``errors``), never raised.
        """
        summary = GpuRunSummary()
        running = self._running()
        summary.running = len(running)
        episodes = self.episodes.open_episodes()
        for arn in sorted(set(episodes) - {job.arn for job in running}):
            self.episodes.close(arn)  # the job stopped: its episode ends
            summary.resolved += 1
        readable: list[GpuJob] = []
        for job in running:
            try:
                made = self._gpu_job(job)
            except (TrainingJobUnreadable, HostsUnreadable) as exc:
                summary.errors.append(str(exc))
                made = None
            if made is None:
                summary.uncovered += 1
            else:
                readable.append(made)
        if not readable:
            return summary
        wanted, where = queries(readable)
        summary.queries = len(wanted)
        read = self.metrics.read(wanted, now - self.rules.span, now)
        summary.requests, summary.unread = read.requests, len(read.failed)
        summary.errors.extend(read.errors)
        failed = {where[qid][0] for qid in read.failed}
        per_job: dict[int, dict[str, list[tuple[datetime, float]]]] = {}
        for qid, series in read.values.items():
            index, host, metric = where[qid]
            if metric == readable[index].source.metric and index not in failed:
                per_job.setdefault(index, {})[host] = list(series)
        measured: list[tuple[GpuJob, dict[str, float]]] = []
        for index, read_job in enumerate(readable):
            if index in failed:
                continue  # unread: no gauge, no decision (missing data is never idle)
            per_host = per_job.get(index, {})
            latest = _latest(read_job, per_host, now)
            if latest:
                measured.append((read_job, latest))
            assessment = assess(read_job, job_minutes(read_job, per_host), now, self.rules)
            self._decide(read_job, assessment, now, episodes, summary)
        summary.measured = len(measured)
        points = gpu_points(measured, now)
        self.sink.add(points)
        summary.points = len(points)
        return summary

    def _running(self) -> list[LedgerJob]:
        arns: list[str] = []
        for queue in ["", *sorted(self.jobs.queues())]:
            arns.extend(
                e.arn
                for e in self.jobs.active(queue)
                if e.status is JobStatus.RUNNING and e.kind in self._kinds
            )
        if not arns:
            return []
        records = self.jobs.get_many(sorted(set(arns)))
        return [
            job
            for arn, job in sorted(records.items())
            if job is not None and job.status is JobStatus.RUNNING and job.kind in self._kinds
        ]

    def _gpu_job(self, job: LedgerJob) -> GpuJob | None:
        if job.kind is not JobKind.CONTAINER_JOB:
            return gpu_job(job, self._training_job(job))
        assert self.container_source is not None  # container jobs are read only with a source
        found = self._container_hosts(job)
        if found is None:
            return None
        return container_gpu_job(job, found[0], found[1], self.container_source)

    def _container_hosts(self, job: LedgerJob) -> tuple[tuple[str, ...], str | None] | None:
        """The EC2 instances of the container job's attempt and their instance type, described
        once per attempt (DescribeJobs, then DescribeContainerInstances); ``None`` when AWS Batch
        names no container instance yet (asked again next run). Raises HostsUnreadable."""
        key = (job.arn, job.attempt_started_at)
        if key not in self._hosts:
            assert self.placements is not None and self.instances is not None
            if not (job.details.gpus or 0):
                return None  # asks for no GPU: nothing to read, nothing described
            placed = self.placements.container_instances(job.arn)
            if not placed:
                return None
            described = self.instances.describe(placed)
            found = [described[arn] for arn in placed if arn in described]
            if not found:
                return None
            types = {i.instance_type for i in found if i.instance_type}
            if len(self._hosts) >= _NAMES_KEPT:
                self._hosts.clear()
            self._hosts[key] = (
                tuple(sorted({i.instance_id for i in found})),
                types.pop() if len(types) == 1 else None,
            )
        return self._hosts[key]

    def _training_job(self, job: LedgerJob) -> str | None:
        if job.kind is JobKind.TRAINING_JOB:
            return job.details.name or None
        key = (job.arn, job.attempt_started_at)
        if key not in self._names:
            name = self.names.training_job(job.arn)
            if name is None:
                return None  # AWS Batch names no attempt yet: asked again next run
            if len(self._names) >= _NAMES_KEPT:
                self._names.clear()
            self._names[key] = name
        return self._names[key]

    def _decide(
        self,
        job: GpuJob,
        assessment: Assessment,
        now: datetime,
        episodes: Mapping[str, Episode],
        summary: GpuRunSummary,
    ) -> None:
        arn = job.job.arn
        open_episode = episodes.get(arn)
        if assessment.state is GpuState.ACTIVE:
            if open_episode is not None:
                self._resolve(job, assessment, open_episode, now, summary)
            return
        if assessment.state is GpuState.UNKNOWN or self.publisher is None:
            return
        if open_episode is not None and open_episode.published:
            return  # already reported: one fact per episode
        event = idle_event(job, assessment, now, self.rules, self.prices)
        if not self.episodes.claim(arn, event.reason, event.idle_since, now):
            return
        try:
            self.publisher.publish([event])
        except PublishError:
            self.episodes.close(arn)
            summary.unpublished += 1
            return
        self.episodes.confirm(arn)
        summary.idle += 1

    def _resolve(
        self, job: GpuJob, assessment: Assessment, episode: Episode, now: datetime, summary: GpuRunSummary
    ) -> None:
        """Activity is back: a reported episode's resolution is published once (claimed first, so
        a duplicate run publishes none; a run killed before the delete is taken over after the
        lease, with the same fact identity for the alerts function's claim), then it ends."""
        arn = job.job.arn
        if episode.published and self.publisher is not None:
            if not self.episodes.claim_resolution(arn, now):
                return  # another run resolves it (or did and is deleting it)
            event = resolved_event(job, assessment, episode.reason, episode.since, now, self.rules)
            try:
                self.publisher.publish([event])
            except PublishError:
                self.episodes.release_resolution(arn)  # the next run tries again
                summary.unpublished += 1
                return
            summary.announced += 1
        self.episodes.close(arn)
        summary.resolved += 1


def _latest(
    job: GpuJob, per_host: Mapping[str, Sequence[tuple[datetime, float]]], now: datetime
) -> dict[str, float]:
    """Host → its latest activity (0-1), for the hosts with a datapoint in the last few minutes."""
    out: dict[str, float] = {}
    for host, series in per_host.items():
        if series and now - series[-1][0] <= SLACK:
            out[host] = host_activity(job, series[-1][1])
    return out
