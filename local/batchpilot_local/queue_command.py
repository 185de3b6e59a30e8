"""``batchpilot queue``: the job ledger's running and waiting jobs per job queue and share, with
expected starts (read-only).

Reads, with the caller's own AWS credentials (``--profile``, ``--region``, else the usual boto3
chain), batchpilot's state table (``--table``, else the ``StateTableName`` output of the
CloudFormation stack ``--stack``) and AWS Batch (:mod:`batchpilot_local.queue_view`). With
``--scenario FILE`` (or ``--sample``, the sample world of three fair shares,
``events/scenarios/ledger/fair-share-fleet.json``) it first replays that clock scenario through the
functions of template.yaml in the embedded AWS, as ``batchpilot replay`` does, and reads the ledger
the replay wrote there, at the scenario's last tick.

Each waiting job gets an expected start (median and p90 of the simulated starts,
:mod:`batchpilot_local.forecast`), unless ``--no-forecast``. Filters: ``--queue``, ``--share``,
``--status`` (globs, repeatable); ``--owner`` needs owner tags, which the ledger does not keep.
``--format json`` prints one JSON object (:func:`snapshot_json`); ``--watch SECONDS`` prints the
view again every SECONDS until interrupted.

Exit status: 0 printed; 1 the ledger cannot be read (unreachable, no such table or stack, no
access: one line on stderr); 2 usage errors; 3 the ledger is empty (it has seen no job queue);
4 the ledger is stale (nothing reconciled or changed within ``--stale-after`` minutes; the view
is printed, and a line on stderr says how old it is).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from batchpilot_local.queue_view import JobRow, Snapshot

__all__ = [
    "EXIT_EMPTY",
    "EXIT_STALE",
    "EXIT_UNREACHABLE",
    "add_parser",
    "run_queue",
    "snapshot_json",
]

EXIT_UNREACHABLE = 1
"""The ledger cannot be read."""
EXIT_USAGE = 2
EXIT_EMPTY = 3
"""The ledger has seen no job queue."""
EXIT_STALE = 4
"""Nothing in the ledger changed or was reconciled within ``--stale-after`` minutes."""
SAMPLE_SCENARIO = "scenarios/ledger/fair-share-fleet.json"
"""``--sample``: the sample world (three fair shares on one service environment), under events/."""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add the ``queue`` subcommand to ``commands`` (argparse's subparsers)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "queue",
        help="show running and waiting jobs per job queue and share, with expected starts",
        description=(
            "Show the job ledger's running and waiting jobs per job queue and share: position in "
            "the share, scheduling priority, waiting since, why waiting, recoveries so far and the "
            "expected start (forecast by the simulator's scheduling model from the present). "
            "Read-only; uses your own AWS credentials, or the embedded AWS with --scenario/--sample."
        ),
    )
    parser.add_argument("--region", default=None, help="AWS region (default: your profile's)")
    parser.add_argument("--profile", default=None, help="AWS profile (default: the boto3 credential chain)")
    parser.add_argument(
        "--table", default=None, help="state table name (default: the stack's StateTableName)"
    )
    parser.add_argument("--stack", default="batchpilot", help="CloudFormation stack (default: batchpilot)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--scenario",
        metavar="FILE",
        default=None,
        help="replay this clock scenario in the embedded AWS first and show its ledger (no account)",
    )
    source.add_argument(
        "--sample",
        action="store_true",
        help="the sample world: replay events/scenarios/ledger/fair-share-fleet.json (three shares)",
    )
    for option, what in (
        ("--queue", "job queue name"),
        ("--share", "share identifier or quota share"),
        ("--status", "status (RUNNABLE, RUNNING, ...)"),
    ):
        parser.add_argument(
            option,
            metavar="PATTERN",
            action="append",
            default=[],
            help=f"only jobs whose {what} matches (glob)",
        )
    parser.add_argument(
        "--owner",
        metavar="PATTERN",
        action="append",
        default=[],
        help="only jobs of this owner: not available yet (the ledger keeps no owner tags; exits 2)",
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="text for a person (default), or JSON"
    )
    parser.add_argument(
        "--watch", metavar="SECONDS", type=float, default=None, help="print the view again every SECONDS"
    )
    parser.add_argument("--watch-count", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--no-forecast", action="store_true", help="no expected starts (faster)")
    parser.add_argument(
        "--samples", type=int, default=20, help="simulated runs per forecast (default 20; more: steadier)"
    )
    parser.add_argument(
        "--stale-after",
        metavar="MINUTES",
        type=float,
        default=60.0,
        help="call the ledger stale when nothing changed or was reconciled for this long (default 60)",
    )
    return parser


class _Unreachable(Exception):
    """What the one line on stderr says."""


def _table(args: argparse.Namespace, session: Any) -> str:
    from botocore.exceptions import ClientError

    if args.table:
        return str(args.table)
    try:
        stacks = session.client("cloudformation").describe_stacks(StackName=args.stack)["Stacks"]
    except ClientError as exc:
        raise _Unreachable(
            f"stack {args.stack}: {exc.response.get('Error', {}).get('Code', 'error')}"
        ) from None
    for output in stacks[0].get("Outputs") or []:
        if output.get("OutputKey") == "StateTableName":
            return str(output["OutputValue"])
    raise _Unreachable(f"stack {args.stack} has no StateTableName output; pass --table")


def _keep(row: JobRow, args: argparse.Namespace) -> bool:
    def matches(value: str, patterns: list[str]) -> bool:
        return not patterns or any(fnmatch.fnmatchcase(value, p) for p in patterns)

    return (
        matches(row.queue, args.queue)
        and matches(row.share or "-", args.share)
        and matches(row.status.value, [p.upper() for p in args.status])
    )


def _when(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value is not None else None


def _seconds(value: float) -> float | None:
    return None if math.isinf(value) else round(value, 1)


def snapshot_json(snapshot: Snapshot, rows: list[JobRow]) -> dict[str, Any]:
    """The view as ``--format json`` prints it.

    Shape: ``now`` (ISO 8601 UTC); ``last_activity`` (the newest change or reconciliation the
    ledger records, or null); ``finished_jobs`` (run-time history size); ``queues``: per job queue
    ``name``, ``service_environment``, ``scheduling`` (FIFO, FAIR_SHARE, QUOTA_MANAGEMENT or null),
    ``no_forecast`` (why none, or null), ``running``, ``waiting``; ``jobs``: per job ``queue``,
    ``share``, ``job_arn``, ``job_name``, ``status``, ``scheduling_priority``, ``position`` (in its
    share's line, 1 first; null when running), ``waiting_since``, ``started_at``, ``status_reason``,
    ``recoveries``, ``instance_type``, ``instances``, ``expected_start`` (null, or ``median`` and
    ``p90`` and ``p10`` as ISO times, null beyond the forecast's horizon, ``median_s``/``p90_s``/
    ``p10_s`` in seconds from ``now``, and ``basis``: where the run times came from);
    ``notices``.
    """
    jobs = []
    for row in rows:
        expected = None
        if row.forecast is not None:
            f = row.forecast
            expected = {
                "median": _when(f.at(snapshot.now, f.median_s)),
                "p90": _when(f.at(snapshot.now, f.high_s)),
                "p10": _when(f.at(snapshot.now, f.low_s)),
                "median_s": _seconds(f.median_s),
                "p90_s": _seconds(f.high_s),
                "p10_s": _seconds(f.low_s),
                "basis": f.basis,
            }
        jobs.append(
            {
                "queue": row.queue,
                "share": row.share or None,
                "job_arn": row.arn,
                "job_name": row.name,
                "status": row.status.value,
                "scheduling_priority": row.priority,
                "position": row.position,
                "waiting_since": _when(row.waiting_since),
                "started_at": _when(row.started_at),
                "status_reason": row.reason,
                "recoveries": row.recoveries,
                "instance_type": row.instance_type,
                "instances": row.instances,
                "expected_start": expected,
            }
        )
    queues = []
    for q in snapshot.queues:
        mine = [r for r in rows if r.queue == q.name]
        queues.append(
            {
                "name": q.name,
                "service_environment": q.environment,
                "scheduling": q.scheduling.value if q.scheduling else None,
                "no_forecast": q.no_forecast,
                "running": sum(1 for r in mine if not r.waiting),
                "waiting": sum(1 for r in mine if r.waiting),
            }
        )
    return {
        "now": _when(snapshot.now),
        "last_activity": _when(snapshot.last_activity),
        "finished_jobs": snapshot.finished,
        "queues": queues,
        "jobs": jobs,
        "notices": list(snapshot.notices),
    }


def _ago(now: datetime, value: datetime | None) -> str:
    if value is None:
        return "-"
    return f"{value.strftime('%m-%d %H:%M')} ({_span((now - value).total_seconds())} ago)"


def _span(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    if seconds < 86_400:
        return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
    return f"{int(seconds // 86_400)}d{int(seconds % 86_400 // 3600):02d}h"


def _start(now: datetime, seconds: float) -> str:
    if math.isinf(seconds):
        from batchpilot_local.forecast import DEFAULT_HORIZON_S

        return f"beyond {DEFAULT_HORIZON_S / 86_400:g}d"
    if seconds < 60:
        return "now"
    return f"in {_span(seconds)} ({(now + timedelta(seconds=seconds)).strftime('%H:%M')})"


def _lines(snapshot: Snapshot, rows: list[JobRow]) -> list[str]:
    from batchpilot_local.text_table import render_table

    now = snapshot.now
    out = [f"batchpilot queue at {now.isoformat(timespec='seconds')}"]
    for q in snapshot.queues:
        mine = [r for r in rows if r.queue == q.name]
        if not mine and any(r.queue != q.name for r in rows):
            continue  # filtered out
        running = sum(1 for r in mine if not r.waiting)
        kind = q.scheduling.value if q.scheduling else "scheduling unknown"
        out.append("")
        out.append(
            f"job queue {q.name} (service environment {q.environment or '?'}, {kind}): "
            f"{running} running, {len(mine) - running} waiting"
        )
        if q.no_forecast:
            out.append(f"  no forecast: {q.no_forecast}")
        if not mine:
            out.append("  no running or waiting jobs")
            continue
        headers = [
            "share",
            "pos",
            "job",
            "status",
            "priority",
            "waiting since",
            "why waiting",
            "recoveries",
            "expected start",
            "p90 start",
        ]
        table = []
        for r in mine:
            f = r.forecast
            table.append(
                [
                    r.share or "-",
                    str(r.position) if r.position is not None else "-",
                    r.name or r.arn,
                    r.status.value,
                    str(r.priority) if r.priority is not None else "-",
                    _ago(now, r.waiting_since) if r.waiting else f"started {_ago(now, r.started_at)}",
                    (r.reason or "-")[:60] if r.waiting else "-",
                    str(r.recoveries),
                    _start(now, f.median_s) if f is not None else "-",
                    _start(now, f.high_s) if f is not None else "-",
                ]
            )
        out += render_table(headers, table, indent="  ")
    bases = sorted({r.forecast.basis for r in rows if r.forecast is not None})
    if bases:
        out.append("")
        out.append(
            f"Expected starts: median and p90 of simulated runs from now ({snapshot.finished} finished jobs "
            f"of history; run times from {'; '.join(bases)}). Not foreseen: jobs submitted later, capacity "
            "changes, failures and preemptions."
        )
    return out


def _now_of(path: str) -> datetime:
    """The last tick's time of the clock scenario at ``path`` (its present)."""
    from batchpilot_local.clock import ClockScenario
    from batchpilot_local.inputs import read_inputs

    items = read_inputs([path])
    scenarios = [item.value for item in items.items if isinstance(item.value, ClockScenario)]
    if not scenarios:
        raise _Unreachable(f"{path}: not a clock scenario (no ticks)")
    return max(tick.at for scenario in scenarios for tick in scenario.ticks)


def _embedded(path: str, args: argparse.Namespace) -> Snapshot:
    """Replay the clock scenario at ``path`` in the embedded AWS and read its ledger there."""
    from batchpilot_local.inputs import InputError, read_inputs
    from batchpilot_local.queue_view import read_snapshot
    from batchpilot_local.replay import Replayer
    from batchpilot_local.template import STATE_TABLE

    try:
        replay_input = read_inputs([path])
        now = _now_of(path)
    except InputError as exc:
        raise _Unreachable(str(exc)) from None
    found: list[Snapshot] = []

    def read(aws: Any) -> None:
        found.append(
            read_snapshot(
                aws.client("dynamodb"),
                aws.client("batch"),
                STATE_TABLE,
                now,
                with_forecast=not args.no_forecast,
                samples=args.samples,
            )
        )

    Replayer(batch=True).run_items(
        ((item.value, item.origin, item.scope) for item in replay_input.items),
        scope_worlds={world.origin: world.data for world in replay_input.worlds},
        scope_parameters={world.origin: world.parameters for world in replay_input.worlds},
        keep_reports=False,
        at_end=read,
    )
    if not found:
        raise _Unreachable(f"{path}: nothing was replayed")
    return found[-1]


def _account(args: argparse.Namespace, session: Any, table: str) -> Snapshot:
    from batchpilot_local.queue_view import read_snapshot

    return read_snapshot(
        session.client("dynamodb"),
        session.client("batch"),
        table,
        datetime.now(UTC),
        with_forecast=not args.no_forecast,
        samples=args.samples,
    )


def run_queue(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """Print the view; returns the exit status (see the module docstring)."""
    if args.owner:
        stderr.write(
            "batchpilot queue: --owner needs owner tags, which the ledger does not keep yet; "
            "filter by --queue or --share\n"
        )
        return EXIT_USAGE
    if args.samples < 1:
        stderr.write("batchpilot queue: --samples must be at least 1\n")
        return EXIT_USAGE
    scenario = args.scenario
    if args.sample:
        from batchpilot_local.bundle import samples_dir

        folder = samples_dir()
        if folder is None:
            stderr.write("batchpilot queue: --sample: no sample events installed with batchpilot\n")
            return EXIT_USAGE
        scenario = str(folder / SAMPLE_SCENARIO)
    if scenario is not None and args.watch is not None:
        stderr.write("batchpilot queue: --watch reads an account; a replayed scenario does not change\n")
        return EXIT_USAGE
    if args.watch is not None and args.watch <= 0:
        stderr.write("batchpilot queue: --watch SECONDS must be more than 0\n")
        return EXIT_USAGE
    count = 0
    while True:
        status = _once(args, scenario, stdout, stderr)
        count += 1
        if (
            args.watch is None
            or status in (EXIT_UNREACHABLE,)
            or (args.watch_count is not None and count >= args.watch_count)
        ):
            return status
        try:
            time.sleep(args.watch)
        except KeyboardInterrupt:
            return status


def _once(args: argparse.Namespace, scenario: str | None, stdout: TextIO, stderr: TextIO) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        if scenario is not None:
            snapshot = _embedded(scenario, args)
        else:
            import boto3

            session = boto3.Session(profile_name=args.profile, region_name=args.region)
            snapshot = _account(args, session, _table(args, session))
    except _Unreachable as exc:
        stderr.write(f"batchpilot queue: {exc}\n")
        return EXIT_UNREACHABLE
    except (ClientError, BotoCoreError) as exc:
        stderr.write(f"batchpilot queue: the ledger cannot be read: {exc}\n")
        return EXIT_UNREACHABLE
    if not snapshot.queues:
        stderr.write(
            "batchpilot queue: the ledger is empty: it has seen no job queue "
            "(is the ledger function deployed?)\n"
        )
        return EXIT_EMPTY
    rows = [row for row in snapshot.rows if _keep(row, args)]
    for notice in snapshot.notices:
        stderr.write(f"batchpilot queue: {notice}\n")
    if len(rows) < len(snapshot.rows):
        # Said on stderr so that a filtered view that shows nothing is not read as an empty fleet.
        stderr.write(
            f"batchpilot queue: the filters show {len(rows)} of {len(snapshot.rows)} "
            "running and waiting jobs\n"
        )
    if args.format == "json":
        stdout.write(json.dumps(snapshot_json(snapshot, rows), ensure_ascii=False) + "\n")
    else:
        for line in _lines(snapshot, rows):
            stdout.write(line + "\n")
    stdout.flush()
    last = snapshot.last_activity
    if last is None or snapshot.now - last > timedelta(minutes=args.stale_after):
        age = "never" if last is None else f"{_span((snapshot.now - last).total_seconds())} ago"
        stderr.write(
            f"batchpilot queue: the ledger is stale: its last change or reconciliation was {age} "
            f"(more than {args.stale_after:g} minutes)\n"
        )
        return EXIT_STALE
    return 0
