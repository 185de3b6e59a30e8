"""What ``batchpilot queue`` shows: the job ledger's running and waiting jobs per job queue and
share, read-only, with start-time forecasts (:mod:`batchpilot_local.forecast`).

Read through the project's own readers, with the caller's clients (a real account's, or the
embedded AWS after a replay):

- the StateTable's ledger (:class:`batchpilot.io.dynamodb.ledger.LedgerStateStore`): the queues it
  has seen (``ledger#queues``), each queue's active jobs (``ledger#active#<queue>``, then their
  records with BatchGetItem), each queue's last reconciliation; the finished jobs whose run times
  the forecast learns from are the ledger's terminal records (kept 7 days), read with one paginated
  Scan filtered on their keys and decoded by the one codec and ``job_from_item``;
- arrivals: the active and finished records' ``createdAt`` of the last 24 hours (what the
  forecast's future arrivals are drawn from);
- recoveries so far: the recovery function's lineage pointer of each job
  (:meth:`batchpilot.io.dynamodb.lineage.DynamoLineageStore.find_job`: the attempt, 0 for a job
  batchpilot never resubmitted);
- AWS Batch: DescribeJobQueues (:meth:`batchpilot.io.batch.BatchLedgerClient.job_queues`),
  DescribeServiceEnvironments (:meth:`batchpilot.io.batch.BatchCapacityClient.describe_environments`),
  DescribeSchedulingPolicies (``fairsharePolicy``), ListQuotaShares, and ListServiceJobs of the
  RUNNABLE jobs (:meth:`batchpilot.io.batch.BatchCapacityClient.runnable_jobs`) for each job's
  ``statusReason`` (why it waits: the ledger does not keep it).

Position: a waiting job's place in its line as the simulator orders it (AWS Batch User Guide, Job
queues and Fair share scheduling policies): a FIFO queue is one line by when jobs became RUNNABLE;
fair-share and quota-management queues have one line per share, higher ``schedulingPriority``
first, then by when they became RUNNABLE. Position 1 is the next to start in its line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from batchpilot.io.batch import BatchCapacityClient, BatchLedgerClient
from batchpilot.io.dynamodb.codec import decode
from batchpilot.io.dynamodb.ledger import LedgerStateStore, job_from_item
from batchpilot.io.dynamodb.lineage import DynamoLineageStore
from batchpilot.ledger.model import IN_USE, JobStatus, LedgerJob
from batchpilot.shared.arns import resource_name
from botocore.exceptions import BotoCoreError, ClientError

from batchpilot_local.forecast import (
    UNKNOWN_TYPE,
    FinishedRun,
    Fleet,
    ForecastJob,
    JobForecast,
    QueueModel,
    RunTimes,
    Submission,
    forecast,
)
from batchpilot_local.simulate.scenario import (
    FairSharePolicy,
    QuotaPolicy,
    QuotaShareSpec,
    SchedulingKind,
    ShareWeight,
    SharingStrategy,
)

__all__ = ["WAITING", "JobRow", "QueueSummary", "Snapshot", "read_snapshot"]

WAITING: frozenset[JobStatus] = frozenset({JobStatus.SUBMITTED, JobStatus.PENDING, JobStatus.RUNNABLE})
"""Statuses of a job that waits for capacity (SUBMITTED and PENDING become RUNNABLE on their own)."""


@dataclass(frozen=True, slots=True)
class JobRow:
    """One running or waiting job.

    Attributes:
        queue, environment, share: its job queue, service environment and share (quota share,
            else share identifier; ``""`` for none).
        arn, name, status: the job (``name``: ``jobName`` when the ledger has it).
        priority: ``schedulingPriority`` (None: not set).
        position: place in its line, 1 first (waiting jobs; None for running ones).
        waiting_since: when it last became RUNNABLE (waiting), else None; started_at: its
            current attempt's start (running).
        reason: ListServiceJobs ``statusReason`` (waiting jobs; None when Batch gives none).
        recoveries: resubmissions by batchpilot's recovery so far (its lineage attempt).
        instance_type, instances: ``ResourceConfig`` (None when not read).
        forecast: its expected start (waiting jobs of a queue whose policy was read).
    """

    queue: str
    environment: str
    share: str
    arn: str
    name: str | None
    status: JobStatus
    priority: int | None
    position: int | None
    waiting_since: datetime | None
    started_at: datetime | None
    reason: str | None
    recoveries: int
    instance_type: str | None
    instances: int | None
    forecast: JobForecast | None = None

    @property
    def waiting(self) -> bool:
        """SUBMITTED, PENDING or RUNNABLE."""
        return self.status in WAITING


@dataclass(frozen=True, slots=True)
class QueueSummary:
    """One job queue: its service environment, scheduling policy and why it has no forecast."""

    name: str
    environment: str
    scheduling: SchedulingKind | None
    no_forecast: str | None = None


@dataclass
class Snapshot:
    """What the ledger holds now.

    Attributes:
        now: the present (aware UTC).
        queues: per job queue the ledger has seen, sorted by name.
        rows: running and waiting jobs, by queue, share, running first, then position.
        finished: finished jobs (with a start) the run times were learned from.
        last_activity: the newest reconciliation pass or job change the ledger records (None:
            nothing), for staleness.
        notices: what the reader could not do (said once each).
    """

    now: datetime
    queues: list[QueueSummary] = field(default_factory=list)
    rows: list[JobRow] = field(default_factory=list)
    finished: int = 0
    last_activity: datetime | None = None
    notices: list[str] = field(default_factory=list)


def _finished(dynamodb: Any, table: str) -> list[LedgerJob]:
    """The ledger's terminal job records: one paginated Scan filtered on the record keys."""
    paginator = dynamodb.get_paginator("scan")
    pages = paginator.paginate(
        TableName=table,
        FilterExpression="begins_with(pk, :p) AND sk = :job AND #status IN (:ok, :failed)",
        ExpressionAttributeNames={"#status": "status"},
        ExpressionAttributeValues={
            ":p": {"S": "ledger#job#"},
            ":job": {"S": "job"},
            ":ok": {"S": JobStatus.SUCCEEDED.value},
            ":failed": {"S": JobStatus.FAILED.value},
        },
    )
    return [job_from_item(decode(raw)) for page in pages for raw in page.get("Items", [])]


def _fair_share(batch: Any, arn: str) -> FairSharePolicy | None:
    """DescribeSchedulingPolicies → the queue's ``fairsharePolicy``; None when it cannot be read."""
    try:
        policies = batch.describe_scheduling_policies(arns=[arn]).get("schedulingPolicies") or []
    except (ClientError, BotoCoreError):
        return None
    policy = (policies[0].get("fairsharePolicy") if policies else None) or None
    if policy is None:
        return None
    try:
        return FairSharePolicy(
            share_decay_seconds=int(policy.get("shareDecaySeconds") or 0),
            compute_reservation=int(policy.get("computeReservation") or 0),
            share_distribution=tuple(
                ShareWeight(
                    share_identifier=str(e["shareIdentifier"]), weight_factor=float(e.get("weightFactor", 1))
                )
                for e in policy.get("shareDistribution") or []
                if isinstance(e, Mapping)
                and e.get("shareIdentifier")
                and "*" not in str(e["shareIdentifier"])
            ),
        )
    except ValueError:
        return None


def _quota(batch: Any, queue: str) -> QuotaPolicy | None:
    """ListQuotaShares (every page) → the queue's quota shares; None when there are none or they
    cannot be read."""
    shares = []
    try:
        for page in batch.get_paginator("list_quota_shares").paginate(jobQueue=queue):
            for item in page.get("quotaShares") or []:
                sharing = item.get("resourceSharingConfiguration") or {}
                strategy = SharingStrategy(str(sharing.get("strategy") or "RESERVE"))
                extra: dict[str, Any] = {}
                if strategy is SharingStrategy.LEND_AND_BORROW and sharing.get("borrowLimit") is not None:
                    extra["borrow_limit"] = int(sharing["borrowLimit"])
                preemption = item.get("preemptionConfiguration") or {}
                shares.append(
                    QuotaShareSpec(
                        name=str(item["quotaShareName"]),
                        capacity_limits={
                            str(limit["capacityUnit"]): int(limit.get("maxCapacity", 0))
                            for limit in item.get("capacityLimits") or []
                        },
                        strategy=strategy,
                        in_share_preemption=str(preemption.get("inSharePreemption") or "").upper()
                        == "ENABLED",
                        **extra,
                    )
                )
    except (ClientError, BotoCoreError, ValueError, KeyError):
        return None
    return QuotaPolicy(quota_shares=tuple(shares)) if shares else None


def _order_key(job: LedgerJob, scheduling: SchedulingKind | None) -> tuple[int, float, str]:
    since = job.runnable_since or job.created_at or job.status_at
    priority = 0 if scheduling in (None, SchedulingKind.FIFO) else -(job.details.priority or 0)
    return (priority, since.timestamp(), job.arn)


def read_snapshot(
    dynamodb: Any,
    batch: Any,
    table: str,
    now: datetime,
    *,
    with_forecast: bool = True,
    samples: int = 20,
) -> Snapshot:
    """Read the ledger and AWS Batch (see the module docstring) and forecast the waiting jobs.

    Args:
        dynamodb, batch: boto3 clients; table: the StateTable's name.
        now: the present (aware UTC): waiting ages and forecasts count from it.
        with_forecast: False: no forecast (and no Scan of the finished jobs).
        samples: forecast runs (:func:`batchpilot_local.forecast.forecast`).

    Raises:
        botocore.exceptions.ClientError, BotoCoreError: the ledger cannot be read (a missing
            table, no access, no endpoint). Batch reads that fail only cost the forecast or
            the reasons, said in :attr:`Snapshot.notices`.
    """
    store = LedgerStateStore(dynamodb, table)
    lineage = DynamoLineageStore(dynamodb, table)
    snapshot = Snapshot(now)
    seen = store.queues()
    if not seen:
        return snapshot
    records: dict[str, list[LedgerJob]] = {}
    activity: list[datetime] = []
    for queue in sorted(seen):
        arns = [entry.arn for entry in store.active(queue)]
        found = store.get_many(arns)
        records[queue] = [job for job in found.values() if job is not None and not job.terminal]
        activity += [job.status_at for job in records[queue]]
        reconciled = store.reconcile_state(queue).at
        if reconciled is not None:
            activity.append(reconciled)
    finished = _finished(dynamodb, table) if with_forecast else []
    runs = _runs(finished)
    snapshot.finished = len(runs)
    activity += [job.status_at for job in finished]
    snapshot.last_activity = max(activity, default=None)

    # AWS Batch: what each queue is and why its jobs wait.
    infos: dict[str, Any] = {}
    limits: dict[str, dict[str, int]] = {}
    try:
        infos = {info.name: info for info in BatchLedgerClient(batch).job_queues()}
        environments = sorted(
            {info.environment for info in infos.values() if info.environment} | set(seen.values()) - {""}
        )
        described = BatchCapacityClient(batch).describe_environments(environments)
        limits = {name: {lim.unit: lim.max_capacity for lim in env.limits} for name, env in described.items()}
    except (ClientError, BotoCoreError) as exc:
        snapshot.notices.append(
            f"AWS Batch could not be read ({type(exc).__name__}): no reasons, no forecast"
        )
    models: list[QueueModel] = []
    reasons: dict[str, str] = {}
    for queue in sorted(seen):
        info = infos.get(queue)
        environment = (info.environment if info else "") or seen[queue]
        scheduling: SchedulingKind | None = None
        model: QueueModel | None = None
        why: str | None = None
        if info is None:
            why = "AWS Batch does not describe this job queue"
        elif not info.scheduling_policy_arn:
            scheduling = SchedulingKind.FIFO
            model = QueueModel(queue, environment, scheduling=scheduling)
        else:
            fair = _fair_share(batch, info.scheduling_policy_arn)
            quota = None if fair is not None else _quota(batch, queue)
            if fair is not None:
                scheduling = SchedulingKind.FAIR_SHARE
                model = QueueModel(queue, environment, scheduling=scheduling, fair_share=fair)
            elif quota is not None:
                scheduling = SchedulingKind.QUOTA_MANAGEMENT
                model = QueueModel(queue, environment, scheduling=scheduling, quota=quota)
            else:
                why = f"its scheduling policy {resource_name(info.scheduling_policy_arn)} cannot be read"
        if model is not None and environment not in limits:
            why, model = f"its service environment {environment or '?'} cannot be described", None
        if model is not None:
            models.append(model)
        snapshot.queues.append(QueueSummary(queue, environment, scheduling, why))
        if info is not None and info.service:
            try:
                for runnable in BatchCapacityClient(batch).runnable_jobs(queue):
                    if runnable.status_reason:
                        reasons[runnable.arn] = runnable.status_reason
            except (ClientError, BotoCoreError) as exc:
                snapshot.notices.append(f"{queue}: ListServiceJobs failed ({type(exc).__name__}): no reasons")

    kinds = {summary.name: summary.scheduling for summary in snapshot.queues}
    quota_shares = {m.name: {s.name for s in m.quota.quota_shares} for m in models if m.quota is not None}
    forecast_jobs: list[ForecastJob] = []
    rows: list[JobRow] = []
    for queue in sorted(records):
        scheduling = kinds.get(queue)
        lines: dict[str, list[LedgerJob]] = {}
        for job in records[queue]:
            if job.status in WAITING:
                line = "" if scheduling in (None, SchedulingKind.FIFO) else job.share
                lines.setdefault(line, []).append(job)
        positions = {}
        for jobs in lines.values():
            for index, job in enumerate(sorted(jobs, key=lambda j: _order_key(j, scheduling)), start=1):
                positions[job.arn] = index
        for job in records[queue]:
            d = job.details
            waiting = job.status in WAITING
            ref = lineage.find_job(job.arn)
            rows.append(
                JobRow(
                    queue=queue,
                    environment=d.environment or seen.get(queue, ""),
                    share=job.share,
                    arn=job.arn,
                    name=d.name or resource_name(job.arn),
                    status=job.status,
                    priority=d.priority,
                    position=positions.get(job.arn),
                    waiting_since=(job.runnable_since or job.created_at or job.status_at)
                    if waiting
                    else None,
                    started_at=job.attempt_started_at if job.status in IN_USE else None,
                    reason=reasons.get(job.arn) if waiting else None,
                    recoveries=ref.attempt if ref is not None else 0,
                    instance_type=d.instance_type,
                    instances=d.instances,
                )
            )
            if queue in quota_shares and job.share not in quota_shares[queue]:
                continue  # a job of no known quota share cannot be placed
            since = (
                (job.runnable_since or job.created_at or job.status_at)
                if waiting
                else (job.attempt_started_at or job.status_at)
            )
            forecast_jobs.append(
                ForecastJob(
                    arn=job.arn,
                    queue=queue,
                    share=job.share or None,
                    instance_type=d.instance_type or UNKNOWN_TYPE,
                    instances=d.instances or 1,
                    priority=d.priority or 0,
                    since=since,
                    running=not waiting,
                )
            )
    forecasts: dict[str, JobForecast] = {}
    if with_forecast and models:
        fleet = Fleet({name: limits[name] for name in {m.environment for m in models}}, models)
        active = [job for jobs in records.values() for job in jobs]
        forecasts = forecast(
            fleet,
            forecast_jobs,
            RunTimes(runs),
            now,
            samples=samples,
            submissions=_submissions([*active, *finished]),
        )
    snapshot.rows = sorted(
        (_with(row, forecasts.get(row.arn)) for row in rows),
        key=lambda r: (r.queue, r.share, r.waiting, r.position or 0, r.arn),
    )
    return snapshot


def _with(row: JobRow, found: JobForecast | None) -> JobRow:
    return row if found is None else replace(row, forecast=found)


def _submissions(jobs: Sequence[LedgerJob]) -> list[Submission]:
    """Active and finished records with a ``createdAt`` → the submissions arrivals are drawn from."""
    return [
        Submission(
            job.details.queue,
            job.share or None,
            job.details.instance_type or UNKNOWN_TYPE,
            job.details.instances or 1,
            job.details.priority or 0,
            job.created_at,
        )
        for job in jobs
        if job.created_at is not None
    ]


def _runs(finished: Sequence[LedgerJob]) -> list[FinishedRun]:
    """Finished jobs → run times: the last attempt's start to the final status (seconds)."""
    out = []
    for job in finished:
        started = job.last_started_at or job.attempt_started_at
        if started is None:
            continue
        out.append(
            FinishedRun(
                job.details.queue,
                job.share or None,
                job.details.instance_type or UNKNOWN_TYPE,
                (job.status_at - started).total_seconds(),
            )
        )
    return out
