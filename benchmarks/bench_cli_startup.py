"""How long ``batchpilot --help``, ``--version`` and ``replay --help`` take, as whole processes.

    .venv/bin/python benchmarks/bench_cli_startup.py [--runs 10] [--results]

Each command runs ``--runs`` times after one warm-up (so bytecode is compiled), in a fresh process
through the venv's ``batchpilot`` console script, from a temporary folder; wall time per run with
``time.perf_counter``. Prints the median, min and max per command, then one JSON object with the
medians; ``--results`` also writes the section of benchmarks/RESULTS.md. Goal: well under a second
(issue 23); tests/unit/test_cli_startup.py checks that nothing heavy is imported, no test times it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, machine_markdown, now, write_section

COMMANDS = (("--help",), ("--version",), ("replay", "--help"), ("simulate", "--help"))
GOAL_SECONDS = 1.0


def time_command(script: Path, argv: tuple[str, ...], runs: int, cwd: str) -> list[float]:
    """Wall seconds of ``runs`` runs of ``script argv`` (one warm-up first, not counted)."""
    seconds = []
    for index in range(runs + 1):
        started = time.perf_counter()
        subprocess.run([str(script), *argv], cwd=cwd, capture_output=True, check=True)
        if index:
            seconds.append(time.perf_counter() - started)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--results", action="store_true", help="write the section of benchmarks/RESULTS.md")
    args = parser.parse_args()
    script = Path(sys.executable).parent / "batchpilot"
    info = machine()
    rows, medians = [], {}
    with tempfile.TemporaryDirectory() as cwd:
        for argv in COMMANDS:
            seconds = time_command(script, argv, args.runs, cwd)
            name = "batchpilot " + " ".join(argv)
            medians[name] = round(statistics.median(seconds), 4)
            rows.append(
                f"| `{name}` | {statistics.median(seconds) * 1000:.0f} | {min(seconds) * 1000:.0f} "
                f"| {max(seconds) * 1000:.0f} |"
            )
    table = "\n".join(["| command | median ms | min ms | max ms |", "|---|---|---|---|", *rows])
    met = all(value < GOAL_SECONDS for value in medians.values())
    print(table)
    print(f"goal: every median under {GOAL_SECONDS:.0f} s: {'met' if met else 'NOT MET'}")
    print(json.dumps({"runs": args.runs, "median_seconds": medians}))
    if args.results:
        write_section(
            "cli_startup",
            f"## CLI start-up\n\nRun {now()} with `.venv/bin/python benchmarks/bench_cli_startup.py "
            f"--runs {args.runs}`: each command {args.runs} times after one warm-up, whole processes "
            f"through the console script.\n\n{table}\n\nGoal: every median under "
            f"{GOAL_SECONDS:.0f} s: **{'met' if met else 'NOT MET'}**.\n\n{machine_markdown(info)}\n",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
