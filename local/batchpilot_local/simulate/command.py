"""The ``batchpilot simulate`` sub-command.

``batchpilot simulate SCENARIO [--seed N] [--format text|json] [--report out.html]``
``batchpilot simulate --compare A B [C ...] [--seed N] [--format text|json] [--report out.html]``

Exit status: 0 after a run; 2 for bad usage or a scenario that cannot be simulated (one line on
stderr naming the file and the field or record).
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

__all__ = ["add_parser", "run_command"]

EXIT_OK = 0
EXIT_USAGE = 2


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add ``simulate`` to the CLI's sub-command parsers (``argparse`` sub-parsers action)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "simulate",
        help="simulate share weights, quota limits, capacity and recovery policies on a workload",
        description=(
            "Run a scenario (YAML or JSON: service environments, job queues, a workload, batchpilot's "
            "capacity and recovery settings) through a discrete-event simulation of AWS Batch and "
            "SageMaker, with batchpilot's real policies in the loop; print allocation (average and "
            "busiest hour), throughput, lost work and per-share usage and waits."
        ),
    )
    parser.add_argument("scenario", nargs="?", metavar="SCENARIO", help="scenario file (.yaml or .json)")
    parser.add_argument(
        "--compare",
        nargs="+",
        metavar="FILE",
        help="A B [C ...]: run two or more scenarios on the first one's workload and seed, side by side",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: the scenario's)")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output (default: text)")
    parser.add_argument(
        "--report", metavar="PATH", default=None, help="also write a self-contained HTML report"
    )
    return parser


def _fail(stderr: TextIO, message: str) -> int:
    stderr.write(f"batchpilot simulate: {message}\n")
    stderr.flush()
    return EXIT_USAGE


def run_command(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """Run ``batchpilot simulate`` with parsed ``args``; returns the exit status."""
    # Imported here so that ``batchpilot replay`` does not load the simulator.
    from batchpilot_local.simulate.output import render_compare, render_text
    from batchpilot_local.simulate.run import Run, run_compare, run_scenario
    from batchpilot_local.simulate.scenario import ScenarioError

    if (args.scenario is None) == (args.compare is None):
        return _fail(stderr, "give one SCENARIO, or --compare A B [C ...]")
    if args.compare is not None and len(args.compare) < 2:
        return _fail(stderr, "--compare needs two or more scenarios (A B [C ...])")
    if args.seed is not None and args.seed < 0:
        return _fail(stderr, "--seed must be 0 or more")
    runs: list[Run]
    try:
        if args.compare is not None:
            runs = list(run_compare(args.compare[0], *args.compare[1:], seed=args.seed))
        else:
            runs = [run_scenario(args.scenario, args.seed)]
    except ScenarioError as exc:
        return _fail(stderr, str(exc).splitlines()[0] if str(exc) else "invalid scenario")
    if args.report is not None:
        from batchpilot_local.simulate.report import write_report

        try:
            write_report(args.report, runs)
        except OSError as exc:
            return _fail(stderr, f"{args.report}: cannot write: {exc.strerror or type(exc).__name__}")
    if args.format == "json":
        if len(runs) > 1:
            # {"a": ..., "b": ...} for two runs, as before; then "c", "d", ...
            document: dict[str, Any] = {chr(ord("a") + i): r.result.to_json() for i, r in enumerate(runs)}
        else:
            document = runs[0].result.to_json()
        stdout.write(json.dumps(document, sort_keys=False) + "\n")
    elif len(runs) > 1:
        stdout.write(render_compare(runs[0].result, *(r.result for r in runs[1:])))
    else:
        stdout.write(render_text(runs[0].result))
    stdout.flush()
    return EXIT_OK
