"""The article's experiment as docs/simulate.md shows it: the four shipped scenarios run as
``make simulate`` runs them, and the page's generated table rendered from that run.

    .venv/bin/python -m batchpilot_local.testing.article          # rewrite the table in the page
    .venv/bin/python -m batchpilot_local.testing.article --check  # exit 1 when it has drifted

The simulation is deterministic (one seed gives one result, byte for byte), so the table is the
run's, not a diary entry: ``tests/integration/test_simulate_cli.py`` fails when it drifts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from batchpilot_local.simulate.results import SimulationResult
from batchpilot_local.simulate.run import run_compare
from batchpilot_local.testing.paths import ROOT
from batchpilot_local.testing.sections import read_section, write_section

__all__ = [
    "COMMAND",
    "DOC",
    "SCENARIOS",
    "SECTION",
    "generated_section",
    "render",
    "run_article",
    "write_doc",
]

SCENARIOS = tuple(
    ROOT / "events" / "simulate" / f"{name}.yaml"
    for name in ("article-before-per-team", "article-after-shared", "article-after-quota", "article-fifo")
)
"""Before (per-team reserves), after (shared pool: fair share, then quota shares), and a shared
FIFO queue; the order of ``make simulate`` (A, B, C, D)."""

DOC = ROOT / "docs" / "simulate.md"
SECTION = "simulate-article"
"""The key of docs/simulate.md's generated section (:mod:`batchpilot_local.testing.sections`)."""

COMMAND = ".venv/bin/batchpilot simulate --compare " + " ".join(
    str(path.relative_to(ROOT)) for path in SCENARIOS
)
"""The command ``make simulate`` runs (text output; ``--format json`` gives every figure)."""

_COLUMNS = (
    "per-team reserves (before)",
    "shared pool, fair share",
    "shared pool, quota shares",
    "shared pool, one FIFO queue",
)


def run_article(seed: int | None = None) -> list[SimulationResult]:
    """The four results of ``make simulate`` (A's workload and seed unless ``seed`` is given).

    Raises:
        ScenarioError: a shipped scenario is invalid (one line naming the file).
    """
    return [run.result for run in run_compare(SCENARIOS[0], *SCENARIOS[1:], seed=seed)]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.1f} h"


def render(results: Sequence[SimulationResult]) -> str:
    """docs/simulate.md's generated section: one markdown table, a column per scenario.

    Args:
        results: :func:`run_article`'s four results, before first.
    """
    before = results[0]
    rows: list[tuple[str, list[str]]] = [
        ("allocation, average (instances in use / 32)", [_pct(r.allocation) for r in results]),
        (
            "allocation, peak hour (the busiest clock hour)",
            [f"{_pct(r.peak_hour_allocation)} (hour {r.peak_hour})" for r in results],
        ),
        ("allocation while jobs wait", [_pct(r.allocation_while_jobs_wait) for r in results]),
        (
            "GPU-hours of succeeded jobs (x before)",
            [
                f"{r.gpu_hours_completed:,.0f} ({r.gpu_hours_completed / before.gpu_hours_completed:.2f}x)"
                if before.gpu_hours_completed
                else f"{r.gpu_hours_completed:,.0f}"
                for r in results
            ],
        ),
        ("jobs succeeded", [f"{r.throughput_jobs:,}" for r in results]),
    ]
    for share, label in (("PROD", "production"), ("RESEARCH", "research"), ("SWEEPS", "sweeps")):
        rows.append(
            (
                f"wait p95, {label} ({share})",
                [_hours(r.shares[share].wait_p95_s) if share in r.shares else "-" for r in results],
            )
        )
    rows += [
        ("preemptions", [f"{r.preemptions:,}" for r in results]),
        ("jobs failed after Batch's one attempt", [f"{r.lineages_failed:,}" for r in results]),
    ]
    head = f"{before.horizon_hours / 24:g} days, seed {before.seed}"
    lines = [
        "```bash",
        f"{COMMAND}   # make simulate",
        "```",
        "",
        "| " + " | ".join([head, *_COLUMNS[: len(results)]]) + " |",
        "|" + "---|" * (len(results) + 1),
    ]
    lines += ["| " + " | ".join([label, *values]) + " |" for label, values in rows]
    return "\n".join(lines) + "\n"


def write_doc(section: str, doc: Path = DOC) -> None:
    """Replace docs/simulate.md's generated section (SystemExit when the page lacks its markers)."""
    write_section(doc, SECTION, section)


def generated_section(doc: Path = DOC) -> str:
    """docs/simulate.md's generated section as it stands (between the markers)."""
    return read_section(doc, SECTION)


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite (or, with ``--check``, compare) the page's table; 0 when written or current."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when the page's table has drifted")
    args = parser.parse_args(argv)
    section = render(run_article())
    if args.check:
        if generated_section() != section:
            sys.stderr.write(f"{DOC}: the article table has drifted; run python -m {__name__}\n")
            return 1
        return 0
    write_doc(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
