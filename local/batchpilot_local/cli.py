"""The ``batchpilot`` console command.

``batchpilot replay PATH... [--format text|json] [--template PATH]`` replays events through the
functions of ``template.yaml`` (see :mod:`batchpilot_local.replay`) and prints one report per
event: JSON Lines with ``--format json``, readable blocks and a summary line with ``text``.

``batchpilot simulate SCENARIO`` (or ``--compare A B``) simulates a fleet with batchpilot's
policies in the loop (see :mod:`batchpilot_local.simulate.command`); it exits 0 after a run and 2
for bad usage or a scenario that cannot be simulated.

Exit status: 0 when every event was handled (an event no rule matches is handled: ignored),
1 when any event has errors, 2 for unreadable input or template and for bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from batchpilot_local.embedded_aws import WorldError
from batchpilot_local.inputs import InputError, read_inputs
from batchpilot_local.replay import Replayer
from batchpilot_local.report import EventReport, render_summary, render_text
from batchpilot_local.simulate.command import add_parser as add_simulate_parser
from batchpilot_local.simulate.command import run_command as run_simulate
from batchpilot_local.template import TemplateError

__all__ = ["EXIT_ERRORS", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]

EXIT_OK = 0
"""Every event was handled."""
EXIT_ERRORS = 1
"""At least one event has errors."""
EXIT_USAGE = 2
"""Bad usage, unreadable input or template."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, one subcommand per job (``replay``, ``simulate``)."""
    parser = argparse.ArgumentParser(
        prog="batchpilot", description="Local tools for batchpilot (never shipped in the Lambda layer)."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    replay = commands.add_parser(
        "replay",
        help="run events through the functions of template.yaml against an embedded AWS",
        description=(
            "Run EventBridge events (files, directories, JSON Lines, '-' for stdin, or scenario "
            "files) through every function whose rule in template.yaml matches, with the real "
            "handlers, against an embedded AWS; print what each function did."
        ),
    )
    replay.add_argument("paths", nargs="+", metavar="PATH", help="event file, directory, or '-' for stdin")
    replay.add_argument(
        "--format", choices=("text", "json"), default="text", help="report format (default: text)"
    )
    replay.add_argument(
        "--template",
        metavar="PATH",
        default=None,
        help="SAM template (default: ./template.yaml, else the repository's template.yaml)",
    )
    add_simulate_parser(commands)
    return parser


def _fail(stderr: TextIO, message: str) -> int:
    stderr.write(f"batchpilot replay: {message}\n")
    stderr.flush()
    return EXIT_USAGE


def _replay(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        replayer = Replayer(args.template)
        replay_input = read_inputs(args.paths)
    except (TemplateError, InputError) as exc:
        return _fail(stderr, str(exc))

    def emit(report: EventReport) -> None:
        if args.format == "json":
            stdout.write(report.to_json() + "\n")
        else:
            stdout.write(render_text(report) + "\n")
        stdout.flush()

    try:
        reports = replayer.run(
            replay_input.events,
            origins=[item.origin for item in replay_input.items],
            scopes=[item.scope for item in replay_input.items],
            scope_worlds={world.origin: world.data for world in replay_input.worlds},
            on_report=emit,
        )
    except WorldError as exc:
        return _fail(stderr, f"world: {exc}")
    if args.format == "text":
        stdout.write(render_summary(reports))
        stdout.flush()
    return EXIT_ERRORS if any(report.errors for report in reports) else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see the module docstring).

    Usage errors return 2 (argparse's message is printed on stderr); ``--help`` returns 0.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    stdout, stderr = sys.stdout, sys.stderr
    if args.command == "simulate":
        return run_simulate(args, stdout, stderr)
    if args.command != "replay":
        parser.print_usage(stderr)
        stderr.write("batchpilot: a command is required (try: batchpilot replay events/)\n")
        return EXIT_USAGE
    try:
        return _replay(args, stdout, stderr)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, without a traceback at exit
        # (Python's recipe: point stdout's descriptor at /dev/null).
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_ERRORS


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
