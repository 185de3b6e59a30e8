"""What a replay amounts to, for a person: the figures of the text report's first screen and of
the HTML report, computed from the per-event :class:`~batchpilot_local.report.EventReport` s.

:func:`summarise` reads only what the reports hold: notifications (what people were told),
batchpilot's own events (Job Resubmitted, Recovery Skipped, Capacity Adjusted, Capacity Limited:
their details carry checkpoint times, lost instance-hours, skip reasons and limits from and to),
and the EMF metrics the functions printed (capacity decisions per tick, with the figures of the
capacity function's decision log lines, queue wait per share, the job ledger's share metrics when
they are emitted).
"""

from __future__ import annotations

import re
import textwrap
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from batchpilot_local.report import OWN_COUNTERS, EventReport, JobSummary, MetricRecord
from batchpilot_local.text_table import render_table

__all__ = [
    "FLEET_TITLE",
    "IDLE_ACROSS_TEAMS",
    "OWN_COUNTERS",
    "SHARES_NO_LEDGER",
    "CapacityChange",
    "Resubmission",
    "ShareUsage",
    "Summary",
    "TickRow",
    "add_report",
    "duration",
    "fleet_table",
    "has_ledger_shares",
    "percentile",
    "render_deployment",
    "render_overview",
    "render_timelines",
    "scenario_of",
    "share_table",
    "summarise",
]

_TICK = re.compile(r"^(?P<scenario>.*) ticks\[(?P<index>\d+)\] (?P<at>\S+)")
_SEVERITIES = ("critical", "warning", "info")
_SHARE_KEYS = ("ShareIdentifier", "QuotaShare")


@dataclass(frozen=True)
class Resubmission:
    """A Job Resubmitted event: the failed job, where it resumes from, and the work lost.

    Attributes:
        job: the failed job's name (or ARN). new_job: the resubmitted job's name.
        queue, category: where it ran and why it failed.
        checkpoint_uri: the checkpoint it resumes from, None when it restarts from step zero.
        checkpoint_age_s: the event's ``checkpoint_age_seconds``, else the seconds between its
            ``checkpoint_time`` and the job's stop (None when unknown).
        lost_instance_hours: instance-hours since the checkpoint (recovery's estimate), or None.
        dry_run: decided but not submitted (``RecoveryDryRun``).
    """

    job: str
    new_job: str
    queue: str | None
    category: str | None
    checkpoint_uri: str | None
    checkpoint_age_s: float | None
    lost_instance_hours: float | None
    dry_run: bool


@dataclass(frozen=True)
class CapacityChange:
    """A Capacity Adjusted event: a service environment's limit from → to (instances)."""

    environment: str
    unit: str
    previous: int
    new: int
    reason: str
    dry_run: bool
    time: str | None


@dataclass(frozen=True)
class TickRow:
    """One scheduled capacity run of a clock scenario, for one service environment.

    Attributes:
        at: the tick's time (ISO-8601 UTC). environment, unit: the service environment and unit.
        in_use, demand, limit: instances in use, RUNNABLE instance demand of its job queues and
            the limit the run saw (its ``capacity decision`` log line: ``in_use``,
            ``runnable_demand``, ``current_max``); None when the run did not log them.
        decision, reason: the ``CapacityDecisions`` dimensions (``RAISE``/``DEMAND``, ...).
        new_limit: the limit set by this run (``UpdateServiceEnvironment``), None when unchanged.
    """

    at: str
    environment: str
    unit: str
    in_use: float | None
    demand: float | None
    limit: float | None
    decision: str | None
    reason: str | None
    new_limit: int | None = None


@dataclass
class ShareUsage:
    """One share (share identifier or quota share) of one job queue.

    Attributes:
        in_use: the job ledger's last ``InstancesInUse`` gauge of the share, or None.
        share_of_usage, entitlement: the job ledger's ``ShareOfUsage`` / ``Entitlement``
            (fractions), None until the ledger function emits them.
        waits_s: every ``QueueWaitTime`` (seconds) of its jobs.
    """

    queue: str
    share: str
    in_use: float | None = None
    share_of_usage: float | None = None
    entitlement: float | None = None
    waits_s: list[float] = field(default_factory=list)


@dataclass
class FleetUsage:
    """One service environment as the job ledger last reported it (its fleet gauges).

    Attributes:
        environment: the service environment's name.
        reserved, in_use, limit: ``ReservedInstances``, ``InstancesInUse``, ``CapacityLimit``
            (instances), or None when not emitted.
        utilisation: ``Utilization`` as a fraction (the ledger publishes Percent), or None.
        idle_while_queued: ``IdleWhileQueued`` (instance-minutes per minute), or None.
        gpus_in_use: ``GpusInUse``, or None.
    """

    environment: str
    reserved: float | None = None
    in_use: float | None = None
    limit: float | None = None
    utilisation: float | None = None
    idle_while_queued: float | None = None
    gpus_in_use: float | None = None


_FLEET_FIELDS = {
    "ReservedInstances": "reserved",
    "InstancesInUse": "in_use",
    "CapacityLimit": "limit",
    "IdleWhileQueued": "idle_while_queued",
    "GpusInUse": "gpus_in_use",
}


@dataclass
class IdleAcrossTeams:
    """The job ledger's ``IdleWhileQueuedElsewhere`` over the replay's scheduled ledger runs:
    reserved instances idle in one service environment while RUNNABLE jobs that would fit them
    (the same instance type) wait in another.

    Attributes:
        runs: scheduled ledger runs seen (each publishes ``ReconcilePending``).
        last: instances at the last run (0 when it published none: the gauge is published only
            while above zero); ``peak``: the most at any run.
    """

    runs: int = 0
    last: float = 0.0
    peak: float = 0.0

    def line(self) -> str:
        """One line for the reports, under the fleet table."""
        if not self.peak:
            return f"{IDLE_ACROSS_TEAMS}: none in {self.runs} ledger runs"
        return (
            f"{IDLE_ACROSS_TEAMS}: peak {_number(self.peak)} instances, "
            f"{_number(self.last)} at the last of {self.runs} ledger runs"
        )


IDLE_ACROSS_TEAMS = "Idle while jobs that fit wait in another environment (IdleWhileQueuedElsewhere)"


@dataclass
class Summary:
    """The figures of one replay (see the module docstring)."""

    events: int = 0
    routed: int = 0
    ignored: int = 0
    with_errors: int = 0
    notifications: Counter[tuple[str, str]] = field(default_factory=Counter)
    pages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    resubmissions: list[Resubmission] = field(default_factory=list)
    skips: Counter[str] = field(default_factory=Counter)
    capacity_changes: list[CapacityChange] = field(default_factory=list)
    capacity_refusals: Counter[str] = field(default_factory=Counter)
    shares: dict[tuple[str, str], ShareUsage] = field(default_factory=dict)
    fleet: dict[str, FleetUsage] = field(default_factory=dict)
    idle_across_teams: IdleAcrossTeams = field(default_factory=IdleAcrossTeams)
    timelines: dict[str, list[TickRow]] = field(default_factory=dict)

    def count(self, channel: str | None = None, severity: str | None = None) -> int:
        """Notifications sent, for one channel and/or severity (None: all)."""
        return sum(
            n
            for (c, s), n in self.notifications.items()
            if (channel is None or c == channel) and (severity is None or s == severity)
        )

    @property
    def channels(self) -> list[str]:
        """The channels that received anything, in a fixed order (sns, slack, teams, others)."""
        order = {"sns": 0, "slack": 1, "teams": 2}
        return sorted({c for c, _ in self.notifications}, key=lambda c: (order.get(c, 9), c))

    @property
    def lost_instance_hours(self) -> float:
        """Instance-hours lost since the checkpoints of every resubmitted job."""
        return sum(r.lost_instance_hours or 0.0 for r in self.resubmissions)


def scenario_of(report: EventReport) -> tuple[str, str] | None:
    """``(scenario, tick time)`` for a clock scenario's tick report, else None."""
    match = _TICK.match(report.origin or "") if report.detail_type == "Scheduled Event" else None
    return (match.group("scenario"), match.group("at")) if match else None


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _value(metric: MetricRecord) -> float:
    return metric.value if isinstance(metric.value, float) else sum(metric.value)


def _resubmission(detail: Mapping[str, Any], stopped_at: str | None) -> Resubmission:
    checkpoint = _parse_time(detail.get("checkpoint_time"))
    stopped = _parse_time(stopped_at)
    age = (stopped - checkpoint).total_seconds() if checkpoint and stopped else None
    given = detail.get("checkpoint_age_seconds")  # recovery's own figure, when it publishes one
    if isinstance(given, int | float) and not isinstance(given, bool):
        age = float(given)
    lost = detail.get("lost_instance_hours")
    restarts = bool(detail.get("restarts_from_step_zero"))
    return Resubmission(
        job=str(detail.get("job_name") or detail.get("failed_job_arn") or "-"),
        new_job=str(detail.get("new_job_name") or "-"),
        queue=detail.get("job_queue"),
        category=detail.get("category"),
        checkpoint_uri=None if restarts else detail.get("checkpoint_uri"),
        checkpoint_age_s=age if age is None or age >= 0 else None,
        lost_instance_hours=float(lost) if isinstance(lost, int | float) else None,
        dry_run=bool(detail.get("dry_run")),
    )


def _own_events(summary: Summary, own_events: Iterable[Mapping[str, Any]], stopped_at: str | None) -> None:
    for event in own_events:
        raw = event.get("detail")
        detail: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        kind = event.get("detail_type")
        if kind == "Job Resubmitted":
            summary.resubmissions.append(_resubmission(detail, stopped_at))
        elif kind == "Recovery Skipped":
            summary.skips[str(detail.get("skip_reason"))] += 1
        elif kind == "Capacity Adjusted":
            summary.capacity_changes.append(
                CapacityChange(
                    environment=str(detail.get("service_environment")),
                    unit=str(detail.get("capacity_unit")),
                    previous=int(detail.get("previous_max") or 0),
                    new=int(detail.get("new_max") or 0),
                    reason=str(detail.get("reason")),
                    dry_run=bool(detail.get("dry_run")),
                    time=event.get("time") if isinstance(event.get("time"), str) else None,
                )
            )
        elif kind == "Capacity Limited":
            summary.capacity_refusals[str(detail.get("limit_reason"))] += 1


def _fleet_metrics(summary: Summary, metrics: Iterable[MetricRecord]) -> None:
    """The last fleet gauge of each service environment (dimension ``ServiceEnvironment`` alone,
    besides ``service``: the job ledger's per-environment gauges)."""
    for metric in metrics:
        environment = metric.dimensions.get("ServiceEnvironment")
        if environment is None or set(metric.dimensions) - {"ServiceEnvironment", "service"}:
            continue
        if metric.name == "Utilization":
            fleet = summary.fleet.setdefault(environment, FleetUsage(environment))
            fleet.utilisation = _value(metric) / 100  # Percent on the wire, a fraction here
        elif metric.name in _FLEET_FIELDS:
            fleet = summary.fleet.setdefault(environment, FleetUsage(environment))
            setattr(fleet, _FLEET_FIELDS[metric.name], _value(metric))


def _idle_across_teams(summary: Summary, metrics: Sequence[MetricRecord]) -> None:
    """One scheduled ledger run's fleet-wide ``IdleWhileQueuedElsewhere`` (none published: 0)."""
    if not any(m.name == "ReconcilePending" for m in metrics):
        return  # not a scheduled ledger run
    value = sum(
        _value(m)
        for m in metrics
        if m.name == "IdleWhileQueuedElsewhere" and not set(m.dimensions) - {"service"}
    )
    idle = summary.idle_across_teams
    idle.runs += 1
    idle.last = value
    idle.peak = max(idle.peak, value)


def _share_metrics(summary: Summary, metrics: Sequence[MetricRecord], job: JobSummary | None = None) -> None:
    """The share figures of one output's metrics; a ``QueueWaitTime`` without a share dimension
    (``MetricsDetail=basic``: the share is per-job detail) counts for the share of the event's job,
    unless the output also has the wait with the share's dimension (``MetricsDetail=detailed``
    publishes each point twice, per job queue and per share): each job's wait counts once."""
    job_share = (job.share_identifier or job.quota_share) if job is not None else None
    per_share_wait = any(
        m.name == "QueueWaitTime" and any(k in m.dimensions for k in _SHARE_KEYS) for m in metrics
    )
    for metric in metrics:
        queue = metric.dimensions.get("JobQueue")
        share = next((metric.dimensions[k] for k in _SHARE_KEYS if k in metric.dimensions), None)
        if (
            share is None
            and metric.name == "QueueWaitTime"
            and not per_share_wait
            and job is not None
            and queue == job.queue
        ):
            share = job_share
        if queue is None or share is None:
            continue
        usage = summary.shares.setdefault((queue, share), ShareUsage(queue, share))
        if metric.name == "InstancesInUse":
            usage.in_use = _value(metric)
        # The ledger publishes both in CloudWatch's Percent unit (0-100); kept here as fractions.
        elif metric.name == "ShareOfUsage":
            usage.share_of_usage = _value(metric) / 100
        elif metric.name == "Entitlement":
            usage.entitlement = _value(metric) / 100
        elif metric.name == "QueueWaitTime":
            values = metric.value if isinstance(metric.value, list) else [metric.value]
            usage.waits_s.extend(values)


def _number_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _tick_rows(
    report: EventReport, at: str, queue_environments: Mapping[str, Mapping[str, str]], scenario: str
) -> list[TickRow]:
    """One row per (service environment, unit) the run decided on: the decision from its
    ``CapacityDecisions`` metric, the figures from its ``capacity decision`` log line."""
    by_unit: dict[tuple[str, str], dict[str, Any]] = defaultdict(dict)
    for metric in report.metrics:
        dims = metric.dimensions
        if metric.name == "CapacityDecisions" and "ServiceEnvironment" in dims and "CapacityUnit" in dims:
            row = by_unit[(dims["ServiceEnvironment"], dims["CapacityUnit"])]
            row["decision"], row["reason"] = dims.get("Decision"), dims.get("Reason")
    for line in report.decisions:
        key = (str(line.get("service_environment")), str(line.get("capacity_unit")))
        if key in by_unit:
            by_unit[key].update(line)
    updates = {
        str(a.get("request", {}).get("serviceEnvironment")): a.get("request", {}).get("capacityLimits")
        for a in report.actions
        if a.get("type") == "update-capacity" and not a.get("error")
    }
    rows = []
    for (environment, unit), row in sorted(by_unit.items()):
        new_limit = None
        for limit in updates.get(environment) or []:
            if isinstance(limit, Mapping) and limit.get("capacityUnit") == unit:
                new_limit = int(limit.get("maxCapacity") or 0)
        rows.append(
            TickRow(
                at=at,
                environment=environment,
                unit=unit,
                in_use=_number_or_none(row.get("in_use")),
                demand=_number_or_none(row.get("runnable_demand")),
                limit=_number_or_none(row.get("current_max")),
                decision=row.get("decision"),
                reason=row.get("reason"),
                new_limit=new_limit,
            )
        )
    return rows


def summarise(
    reports: Sequence[EventReport], queue_environments: Mapping[str, Mapping[str, str]] | None = None
) -> Summary:
    """The figures of a replay.

    Args:
        reports: every report, in order.
        queue_environments: per clock scenario (its origin), job queue name → service environment
            name, from its world: how a queue's RUNNABLE demand adds up per environment in the
            timeline (without it the timeline's demand is unknown).
    """
    summary = Summary()
    for report in reports:
        add_report(summary, report, queue_environments)
    return summary


def add_report(
    summary: Summary, report: EventReport, queue_environments: Mapping[str, Mapping[str, str]] | None = None
) -> None:
    """Add one report's figures to ``summary`` (:func:`summarise` one report at a time, so a
    caller can drop each report once it is added: memory stays flat in the number of events)."""
    summary.events += 1
    summary.routed += report.routed
    summary.ignored += report.ignored
    summary.with_errors += report.has_errors
    for outputs in report.outputs():  # the event's own, then its batches': each output once
        for note in outputs.notifications:
            channel, severity = str(note.get("channel")), str(note.get("severity"))
            summary.notifications[(channel, severity)] += 1
            if channel == "sns" and severity == "critical":
                summary.pages.append(str(note.get("title")))
            elif channel == "sns" and severity == "warning":
                summary.warnings.append(str(note.get("title")))
        _own_events(summary, outputs.own_events, report.job.stopped_at if report.job else None)
        _share_metrics(summary, outputs.metrics, report.job if outputs is report else None)
        _fleet_metrics(summary, outputs.metrics)
        _idle_across_teams(summary, outputs.metrics)
    tick = scenario_of(report)
    if tick is not None:
        scenario, at = tick
        rows = _tick_rows(report, at, queue_environments or {}, scenario)
        summary.timelines.setdefault(scenario, []).extend(rows)


# ------------------------------------------------------------------------------------ text
_MAX_ROWS = 10  # per list on the first screen; the rest is counted


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """``rows[0]`` the headers, the rest the cells: aligned by rich (numbers to the right)."""
    return render_table(list(rows[0]), [list(row) for row in rows[1:]], indent=indent)


def _number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def duration(seconds: float | None) -> str:
    """``3h 05m``, ``12m 30s``, ``45s``; ``-`` for None."""
    if seconds is None:
        return "-"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


_PER_EVENT = "in the per-event report"
_IN_THE_PAGE = "every one is in the HTML report, --report FILE"


def _more(lines: list[str], total: int, where: str = _PER_EVENT, indent: str = "  ") -> list[str]:
    """``lines`` and, when ``total`` passes :data:`_MAX_ROWS`, a line counting the rest and saying
    where they are (``where``)."""
    if total > _MAX_ROWS:
        lines.append(f"{indent}... and {total - _MAX_ROWS} more ({where})")
    return lines


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile of ``values`` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


def render_overview(summary: Summary) -> str:
    """The first screen of the text report: counts, pages and chat messages by severity,
    resubmissions, skips, capacity changes and shares (several lines, ending with a newline)."""
    lines = [
        f"batchpilot replay: {summary.events:,} {'event' if summary.events == 1 else 'events'}, "
        f"{summary.routed:,} routed, "
        f"{summary.ignored:,} ignored, {summary.with_errors:,} with errors",
        "",
    ]
    if summary.notifications:
        rows = [["messages", *_SEVERITIES, "total"]]
        for channel in summary.channels:
            counts = [summary.count(channel, s) for s in _SEVERITIES]
            rows.append([channel, *[str(c) for c in counts], str(summary.count(channel))])
        lines.append("Pages and chat messages (sns = the on-call topic)")
        lines.extend(_table(rows))
    else:
        lines.append("Pages and chat messages: none")
    if summary.pages:
        lines.append(f"On-call pages ({len(summary.pages)})")
        lines.extend(f"  - {title}" for title in summary.pages[:_MAX_ROWS])
        _more(lines, len(summary.pages))
    if summary.warnings:
        lines.append(f"Warnings to the on-call topic ({len(summary.warnings)})")
        lines.extend(f"  - {title}" for title in summary.warnings[:_MAX_ROWS])
        _more(lines, len(summary.warnings))
    if summary.resubmissions:
        lost = summary.lost_instance_hours
        lines.append(
            f"Resubmissions ({len(summary.resubmissions)}; {lost:,.2f} instance-hours lost since checkpoints)"
        )
        rows = [["job", "queue", "category", "checkpoint age", "lost inst-h", "resumes from"]]
        for r in summary.resubmissions[:_MAX_ROWS]:
            rows.append(
                [
                    r.job + (" (dry run)" if r.dry_run else ""),
                    r.queue or "-",
                    r.category or "-",
                    duration(r.checkpoint_age_s),
                    _number(r.lost_instance_hours, 2),
                    r.checkpoint_uri or "step zero",
                ]
            )
        lines.extend(_more(_table(rows), len(summary.resubmissions)))
    if summary.skips:
        skips = ", ".join(f"{reason} {n}" for reason, n in summary.skips.most_common())
        lines.append(f"Recovery skipped ({sum(summary.skips.values())}): {skips}")
    if summary.capacity_changes:
        lines.append(f"Capacity changes ({len(summary.capacity_changes)})")
        rows = [["service environment", "unit", "from", "to", "reason"]]
        for c in summary.capacity_changes[:_MAX_ROWS]:
            reason = c.reason + (" (dry run)" if c.dry_run else "")
            rows.append([c.environment, c.unit, str(c.previous), str(c.new), reason])
        lines.extend(_more(_table(rows), len(summary.capacity_changes)))
    if summary.capacity_refusals:
        refusals = ", ".join(f"{reason} {n}" for reason, n in summary.capacity_refusals.most_common())
        lines.append(f"Capacity limited ({sum(summary.capacity_refusals.values())}): {refusals}")
    if summary.fleet:
        lines.extend(_fleet_lines(summary))
    if summary.shares:
        lines.extend(_share_lines(summary))
    return "\n".join(lines) + "\n"


FLEET_TITLE = "Fleet: utilisation against reserved capacity (the job ledger's last gauges)"
SHARES_NO_LEDGER = "share of usage and entitlement come from the job ledger's metrics; none in this replay"


def fleet_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
    """``(headers, rows)`` of the fleet: a row per service environment (sorted by name) with the
    job ledger's last fleet gauges, ReservedInstances, InstancesInUse, CapacityLimit (instances),
    Utilization (shown as ``41.7 %``), IdleWhileQueued and GpusInUse; ``-`` where not emitted. The
    text report shows the first rows, the HTML report all of them."""
    headers = [
        "service environment",
        "reserved",
        "in use",
        "limit",
        "utilisation",
        "idle while queued",
        "GPUs",
    ]
    rows = [
        [
            f.environment,
            _number(f.reserved),
            _number(f.in_use),
            _number(f.limit),
            "-" if f.utilisation is None else f"{100 * f.utilisation:.1f} %",
            _number(f.idle_while_queued),
            _number(f.gpus_in_use),
        ]
        for f in sorted(summary.fleet.values(), key=lambda f: f.environment)
    ]
    return headers, rows


def share_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
    """``(headers, rows)`` of the shares: a row per (job queue, share), sorted, with its last
    InstancesInUse, ShareOfUsage and Entitlement (shown as ``65.2 %``) and the p50 and maximum of
    its jobs' QueueWaitTime (``14m 00s``); ``-`` where not emitted. The text report shows the first
    rows, the HTML report all of them."""
    headers = ["job queue", "share", "in use", "share of usage", "entitlement", "wait p50", "wait max"]
    rows = [
        [
            s.queue,
            s.share,
            _number(s.in_use),
            "-" if s.share_of_usage is None else f"{100 * s.share_of_usage:.1f} %",
            "-" if s.entitlement is None else f"{100 * s.entitlement:.1f} %",
            duration(percentile(s.waits_s, 0.5)),
            duration(max(s.waits_s) if s.waits_s else None),
        ]
        for s in sorted(summary.shares.values(), key=lambda s: (s.queue, s.share))
    ]
    return headers, rows


def has_ledger_shares(summary: Summary) -> bool:
    """Whether any share has the job ledger's ShareOfUsage or Entitlement."""
    return any(s.entitlement is not None or s.share_of_usage is not None for s in summary.shares.values())


def _fleet_lines(summary: Summary) -> list[str]:
    headers, rows = fleet_table(summary)
    # The per-event detail holds raw gauges, not this table: the rest is in the HTML report.
    lines = [FLEET_TITLE, *_more(_table([headers, *rows[:_MAX_ROWS]]), len(rows), _IN_THE_PAGE)]
    if summary.idle_across_teams.runs:
        lines.append(f"  {summary.idle_across_teams.line()}")
    return lines


def _share_lines(summary: Summary) -> list[str]:
    headers, rows = share_table(summary)
    lines = [f"Shares ({len(rows)})", *_more(_table([headers, *rows[:_MAX_ROWS]]), len(rows), _IN_THE_PAGE)]
    if not has_ledger_shares(summary):
        lines.append(f"  ({SHARES_NO_LEDGER})")
    return lines


_CHAT_PARAMETERS = "SlackWebhookSecretArn, SlackBotTokenSecretArn and TeamsWebhookSecretArn"
_SHOWN_VALUE = 100  # characters of a parameter's value in the header (a policy's JSON is long)
_WRAP = 110  # the header's width: it is read first, on a terminal


def _wrapped(text: str, first: str, rest: str) -> list[str]:
    """``text`` in lines of :data:`_WRAP` characters, broken between words only (never inside an
    option name such as ``--parameter-overrides`` or an ARN)."""
    return textwrap.wrap(
        text,
        _WRAP,
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        break_long_words=False,
    )


def render_deployment(
    functions: Mapping[str, Sequence[tuple[str, int, int]]],
    channels: Sequence[str],
    chat: Mapping[str, str],
    parameters: Mapping[str, str],
    *,
    template: str,
    sources: Sequence[str] = (),
) -> str:
    """The header of the text report: which deployment the replay is (lines ending with a newline).

    Args:
        functions: per function, its SQS event sources ``(queue, BatchSize, window s)``
            (:attr:`batchpilot_local.replay.Replayer.wiring`).
        channels: where messages go (``sns``, ``slack``, ``teams``); chat: how each chat channel
            is wired (``webhook``, ``bot token``).
        parameters: the parameters given; the rest are at their ``Default``.
        template: the template's path as shown.
        sources: where the parameters came from (``samconfig.toml [default]``,
            ``--parameter-overrides``), in the order they were applied.
    """
    indent = " " * 14
    lines = [f"Deployment replayed: {template}, as a deploy with these parameters creates it"]
    if parameters:
        shown = []
        for name, value in sorted(parameters.items()):
            text = value if len(value) <= _SHOWN_VALUE else value[: _SHOWN_VALUE - 3] + "..."
            shown.append(f"{name}={text}" if text else f"{name}=''")
        origin = f" (from {', then '.join(sources)})" if sources else ""
        said = f"{' '.join(shown)}{origin}; the others at their Default"
    else:
        said = "every one at its Default (no --parameter-overrides, no --config-env)"
    lines += _wrapped(said, "  parameters  ", indent)
    if not channels:
        said = "none: the template has no alerts function"
    elif len(channels) == 1:
        said = (
            f"on-call topic (SNS) only: no chat channel is configured ({_CHAT_PARAMETERS} are empty), "
            "so messages routed to chat go to the on-call topic, as in a stack deployed so; to see them "
            "in Slack or Teams, set one (--parameter-overrides SlackWebhookSecretArn=<secret ARN>): "
            "a local endpoint stands in for it"
        )
    else:
        names = {"slack": "Slack", "teams": "Microsoft Teams"}
        chats = ", ".join(f"{names.get(c, c)} ({chat.get(c, 'configured')})" for c in channels if c != "sns")
        said = f"on-call topic (SNS), {chats}: chat posted to a local endpoint on 127.0.0.1"
    lines += _wrapped(said, "  messages    ", indent)
    rows = [
        [name, queue, str(size), str(window)]
        for name, sources_of in functions.items()
        for queue, size, window in sources_of
    ]
    table = render_table(["function", "reads", "batch size", "batching window (s)"], rows, indent=indent)
    lines.append("  functions   " + table[0].strip())
    lines += table[1:]
    return "\n".join(lines) + "\n"


def render_timelines(summary: Summary) -> str:
    """One table per clock scenario: a line per tick and service environment (time, in use,
    demand, limit, decision, reason); empty when the replay had no clock scenario. An
    environment with several capacity limits (a quota-management one: one per instance type)
    has a line per unit, labelled ``environment (unit)``."""
    blocks = []
    for scenario, rows in summary.timelines.items():
        if not rows:  # a clock scenario whose ticks decided no capacity (the ledger's, say)
            continue
        units: dict[str, set[str]] = defaultdict(set)
        for row in rows:
            units[row.environment].add(row.unit)
        table = [["time", "service environment", "in use", "demand", "limit", "decision", "reason"]]
        for row in rows:
            label = row.environment if len(units[row.environment]) < 2 else f"{row.environment} ({row.unit})"
            decision = row.decision or "-"
            if row.new_limit is not None:
                decision += f" -> {row.new_limit}"
            table.append(
                [
                    row.at,
                    label,
                    _number(row.in_use),
                    _number(row.demand),
                    _number(row.limit),
                    decision,
                    row.reason or "-",
                ]
            )
        blocks.append("\n".join([f"Timeline: {scenario}", *_table(table)]) + "\n")
    return "\n".join(blocks)
