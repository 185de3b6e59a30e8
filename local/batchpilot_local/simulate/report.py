"""The HTML report of ``batchpilot simulate --report``: summary, shares, charts, approximations.

Built with :mod:`batchpilot_local.html_report`: one self-contained file (inline SVG charts drawn by
matplotlib, no script, no network).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from batchpilot_local.html_report import Page, line_chart, stacked_area_chart, write_page
from batchpilot_local.simulate.output import ALLOCATION_NOTE, ENTITLEMENT_NOTE, LABELS
from batchpilot_local.simulate.run import Run

__all__ = ["build_report", "write_report"]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100.0 * value:.1f} %"


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600.0:.2f} h"


def _summary(page: Page, runs: Sequence[Run]) -> None:
    labels = [run.result.scenario for run in runs]
    rows: list[list[object]] = []

    def add(name: str, values: list[str]) -> None:
        rows.append([name, *values])

    results = [run.result for run in runs]
    add("allocation (in use / reserved instance-time)", [_pct(r.allocation) for r in results])
    add("peak-hour allocation (busiest hour)", [_pct(r.peak_hour_allocation) for r in results])
    add("allocation while jobs wait", [_pct(r.allocation_while_jobs_wait) for r in results])
    add(LABELS["throughput_jobs"], [f"{r.throughput_jobs:,}" for r in results])
    add(LABELS["instance_hours_completed"], [f"{r.instance_hours_completed:,.1f}" for r in results])
    add(LABELS["gpu_hours_completed"], [f"{r.gpu_hours_completed:,.1f}" for r in results])
    add(LABELS["lost_instance_hours"], [f"{r.lost_instance_hours:,.1f}" for r in results])
    add("preemptions", [f"{r.preemptions:,}" for r in results])
    add("jobs submitted", [f"{r.jobs_submitted:,}" for r in results])
    add("lineages that never completed", [f"{r.lineages_failed:,}" for r in results])
    add("capacity errors", [f"{r.capacity_errors:,}" for r in results])
    add("spot interruptions", [f"{r.spot_interruptions:,}" for r in results])
    add("resubmissions by batchpilot", [f"{r.resubmissions:,}" for r in results])
    add("capacity limit changes by batchpilot", [f"{r.capacity_changes:,}" for r in results])
    add("reserved instance-hours", [f"{r.reserved_instance_hours:,.1f}" for r in results])
    modes = [", ".join(f"{queue}={mode}" for queue, mode in r.head_of_line.items()) for r in results]
    add("head of line, per job queue", modes)
    page.table(["", *labels], rows, caption="Summary")


def _shares(page: Page, run: Run) -> None:
    rows: list[list[object]] = []
    for name, share in run.result.shares.items():
        rows.append(
            [
                name,
                f"{share.instance_hours:,.1f}",
                _pct(share.share_of_usage),
                _pct(share.entitlement),
                _hours(share.wait_p50_s),
                _hours(share.wait_p95_s),
                f"{share.preemptions:,}",
                f"{share.jobs_completed:,} / {share.jobs_submitted:,}",
            ]
        )
    page.table(
        [
            "share",
            "instance-hours",
            "share of usage",
            "entitlement",
            "wait p50",
            "wait p95",
            "preemptions",
            "completed",
        ],
        rows,
        caption=f"Shares: {run.result.scenario}",
    )
    if any(share.entitlement is not None for share in run.result.shares.values()):
        page.paragraph(ENTITLEMENT_NOTE.replace("entitled:", "Entitlement:", 1))


def _charts(page: Page, run: Run) -> None:
    samples = run.simulation.trace.samples
    hours = [t / 3600.0 for t in samples.times]
    name = run.result.scenario
    in_use = [sum(values) for values in zip(*samples.in_use.values(), strict=True)] if samples.in_use else []
    limits = [sum(values) for values in zip(*samples.limits.values(), strict=True)] if samples.limits else []
    page.figure(
        line_chart(
            hours,
            {"in use": in_use, "reserved (capacity limits)": limits},
            title=f"{name}: instances in use vs reserved",
            ylabel="instances",
        ),
        caption="In use: dispatched jobs' instances (SCHEDULED, STARTING, RUNNING). Reserved: the sum of "
        "the service environments' capacity limits, as batchpilot changed them.",
    )
    page.figure(
        stacked_area_chart(
            hours,
            {share: values for share, values in samples.shares.items()},
            title=f"{name}: instances in use per share",
            ylabel="instances",
        ),
        caption="Share identifiers, quota shares, or (FIFO) the team label of each job.",
    )
    page.figure(
        line_chart(
            hours,
            {queue: [float(v) for v in values] for queue, values in samples.runnable.items()},
            title=f"{name}: queue length",
            ylabel="RUNNABLE jobs",
        ),
        caption="RUNNABLE jobs per job queue.",
    )


def build_report(runs: Sequence[Run]) -> str:
    """The report of one run, or of two or more compared runs, as an HTML document."""
    if len(runs) > 1:
        title = "batchpilot simulate: " + " vs ".join(run.result.scenario for run in runs)
    else:
        title = f"batchpilot simulate: {runs[0].result.scenario}"
    first = runs[0].result
    page = Page(title, subtitle=f"seed {first.seed}, {first.horizon_hours:g} h simulated from {first.start}")
    page.heading("Summary")
    _summary(page, runs)
    for run in runs:
        page.heading(f"Scenario {run.result.scenario}")
        if run.scenario.description:
            page.paragraph(run.scenario.description)
        _shares(page, run)
        _charts(page, run)
    page.heading("Approximations")
    merged: dict[str, str] = {}
    for run in runs:
        merged.update(run.result.approximations)
    page.paragraph("Where AWS does not publish its algorithm, the simulation uses these approximations:")
    page.bullets([f"{key}: {text}" for key, text in merged.items()])
    page.bullets([*first.notes, ALLOCATION_NOTE])
    return page.render()


def write_report(path: str | os.PathLike[str], runs: Sequence[Run]) -> None:
    """Write :func:`build_report` to ``path`` (atomically: a temporary file, then a rename).

    Raises:
        OSError: the file cannot be written.
    """
    text = build_report(runs)
    write_page(path, text)
