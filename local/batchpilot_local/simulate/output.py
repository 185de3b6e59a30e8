"""Text output of ``batchpilot simulate``: one result, or two side by side (``--compare``)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence

from batchpilot_local.simulate.results import ShareResult, SimulationResult

__all__ = ["ALLOCATION_NOTE", "ENTITLEMENT_NOTE", "LABELS", "render_compare", "render_text"]

LABELS = {
    "throughput_jobs": "jobs succeeded",
    "instance_hours_completed": "instance-hours of succeeded jobs",
    "gpu_hours_completed": "GPU-hours of succeeded jobs",
    "lost_instance_hours": "instance-hours lost (since the last checkpoint)",
}
"""The readable label of each JSON figure whose key is not already words (text and HTML alike)."""

ENTITLEMENT_NOTE = (
    "entitled: fair share, the share's 1/weightFactor over the sum of the active shares', averaged "
    "over the time the share had work, so shares active at different times (each entitled to more "
    "while the others were idle) can add up to more than 100 %; quota management, the quota share's "
    "own limits over the environment's."
)
"""Why a column of entitlements need not add up to 100 % (the shares table's footnote)."""

_Row = tuple[str, Callable[[SimulationResult], float | int | None], str]

_ROWS: tuple[_Row, ...] = (
    ("allocation (instances in use / capacity limit)", lambda r: r.allocation, "pct"),
    ("peak-hour allocation (busiest hour)", lambda r: r.peak_hour_allocation, "pct"),
    ("allocation while jobs wait", lambda r: r.allocation_while_jobs_wait, "pct"),
    (LABELS["throughput_jobs"], lambda r: r.throughput_jobs, "int"),
    (LABELS["instance_hours_completed"], lambda r: r.instance_hours_completed, "num"),
    (LABELS["gpu_hours_completed"], lambda r: r.gpu_hours_completed, "num"),
    (LABELS["lost_instance_hours"], lambda r: r.lost_instance_hours, "num"),
    ("preemptions", lambda r: r.preemptions, "int"),
    ("jobs submitted", lambda r: r.jobs_submitted, "int"),
    ("jobs failed (lineages never completed)", lambda r: r.lineages_failed, "int"),
    ("capacity errors / spot interruptions", lambda r: None, "skip"),
    ("resubmissions by batchpilot", lambda r: r.resubmissions, "int"),
    ("capacity limit changes by batchpilot", lambda r: r.capacity_changes, "int"),
    ("reserved instance-hours", lambda r: r.reserved_instance_hours, "num"),
)


def _fmt(value: float | int | None, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "pct":
        return f"{100.0 * value:.1f} %"
    if kind == "int":
        return f"{int(value):,}"
    return f"{value:,.1f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _incidents(result: SimulationResult) -> str:
    return f"{result.capacity_errors:,} / {result.spot_interruptions:,}"


def _share_rows(shares: dict[str, ShareResult]) -> list[list[str]]:
    rows = [["share", "instance-h", "usage", "entitled", "wait p50", "wait p95", "preempted", "completed"]]
    for name, share in shares.items():
        rows.append(
            [
                name,
                f"{share.instance_hours:,.1f}",
                f"{100 * share.share_of_usage:.1f} %",
                "-" if share.entitlement is None else f"{100 * share.entitlement:.1f} %",
                _duration(share.wait_p50_s),
                _duration(share.wait_p95_s),
                f"{share.preemptions:,}",
                f"{share.jobs_completed:,}/{share.jobs_submitted:,}",
            ]
        )
    return rows


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(widths[i + 1]) for i, cell in enumerate(row[1:])]
        out.append(indent + "  ".join(cells).rstrip())
    return out


def _approximations(result: SimulationResult) -> list[str]:
    lines = ["approximations (AWS does not publish these algorithms):"]
    for name, text in result.approximations.items():
        wrapped = textwrap.wrap(f"{name}: {text}", width=100, initial_indent="  - ", subsequent_indent="    ")
        lines.extend(wrapped)
    return lines


def render_text(result: SimulationResult) -> str:
    """The readable report of one run."""
    hol = ", ".join(f"{queue}={mode}" for queue, mode in result.head_of_line.items())
    lines = [
        f"batchpilot simulate: {result.scenario} (seed {result.seed}, {result.horizon_hours:g} h from "
        f"{result.start}; head_of_line {hol})",
    ]
    rows = [["", "value"]]
    for label, get, kind in _ROWS:
        rows.append([label, _incidents(result) if kind == "skip" else _fmt(get(result), kind)])
    lines += _table(rows[1:])
    lines.append("")
    lines += _table(_share_rows(result.shares))
    if any(share.entitlement is not None for share in result.shares.values()):
        lines += textwrap.wrap(ENTITLEMENT_NOTE, width=100, initial_indent="  ", subsequent_indent="  ")
    lines.append("")
    env_rows = [
        ["service environment", "allocation", "reserved inst-h", "in use inst-h", "limit at end", "changes"]
    ]
    for name, env in result.environments.items():
        limits = ", ".join(f"{unit} {value}" for unit, value in env.final_limits.items())
        env_rows.append(
            [
                name,
                f"{100 * env.allocation:.1f} %",
                f"{env.reserved_instance_hours:,.1f}",
                f"{env.in_use_instance_hours:,.1f}",
                limits,
                f"{env.limit_changes}",
            ]
        )
    lines += _table(env_rows)
    lines += textwrap.wrap(ALLOCATION_NOTE, width=100, initial_indent="  ", subsequent_indent="  ")
    if result.recovery:
        lines.append("")
        lines.append(
            "  recovery: "
            + ", ".join(f"{key} {value}" for key, value in result.recovery.items())
            + f"; at most {result.max_submits_in_one_second} SubmitServiceJob in any second"
        )
    if result.history is not None:
        h = result.history
        lines.append(
            f"  history: {h['events']} events, {h['service_jobs']} service jobs rebuilt "
            f"({h['sized_from_payload']} sized from payloads, {h['sized_from_training_job']} from training "
            f"jobs, {h['sized_by_default']} by default), {h['ignored']} other events ignored"
        )
    lines.append("")
    lines += _approximations(result)
    return "\n".join(lines) + "\n"


ALLOCATION_NOTE = (
    "allocation is instances given to jobs over the capacity limit; what a training job does with its "
    "GPUs (GPU activity) is not simulated."
)
"""What the allocation figures measure, and what they do not (every text report's footnote)."""


def render_compare(a: SimulationResult, *others: SimulationResult) -> str:
    """Two or more runs on A's workload and seed, side by side (each run / A after the runs)."""
    runs = (a, *others)
    names = [chr(ord("A") + i) if i < 26 else f"#{i + 1}" for i in range(len(runs))]
    named = ", ".join(f"{name} = {run.scenario}" for name, run in zip(names, runs, strict=True))
    lines = [
        f"batchpilot simulate --compare: {named} (same workload, seed {a.seed}, {a.horizon_hours:g} h)",
    ]
    rows = [["", *names, *(f"{name} / A" for name in names[1:])]]
    for label, get, kind in _ROWS:
        if kind == "skip":
            rows.append([label, *(_incidents(r) for r in runs), *("" for _ in others)])
            continue
        values = [get(r) for r in runs]
        va = values[0]
        ratios = [
            f"{vb / va:.2f}x" if isinstance(va, int | float) and isinstance(vb, int | float) and va else ""
            for vb in values[1:]
        ]
        rows.append([label, *(_fmt(v, kind) for v in values), *ratios])
    lines += _table(rows)
    lines.append("")
    share_rows = [
        [
            "share",
            *(f"usage {n}" for n in names),
            *(f"wait p95 {n}" for n in names),
            *(f"completed {n}" for n in names),
        ]
    ]
    for share in sorted(set().union(*(r.shares for r in runs))):
        found = [r.shares.get(share) for r in runs]
        share_rows.append(
            [
                share,
                *("-" if s is None else f"{100 * s.share_of_usage:.1f} %" for s in found),
                *("-" if s is None else _duration(s.wait_p95_s) for s in found),
                *("-" if s is None else f"{s.jobs_completed:,}" for s in found),
            ]
        )
    lines += _table(share_rows)
    lines.append("")
    lines += textwrap.wrap(ALLOCATION_NOTE, width=100, initial_indent="  ", subsequent_indent="  ")
    lines.append("")
    merged: dict[str, str] = {}
    for run in runs:
        merged.update(run.approximations)
    lines += _approximations(
        SimulationResult(**{**a.__dict__, "approximations": merged})  # one list for every run
    )
    return "\n".join(lines) + "\n"
