"""The ``batchpilot`` console command.

``batchpilot replay PATH... [--samples] [--format text|json] [--template PATH] [--report FILE.html]
[--parameter-overrides K=V ...] [--config-env ENV] [--job/--queue/--share/--category PATTERN]
[--fail-on critical|warning] [--verbose] [--summary]`` replays events through the functions of
``template.yaml`` (see :mod:`batchpilot_local.replay`). With ``--format json`` it prints one report
per event (JSON Lines, as each is ready); with ``text`` (the default) first which deployment is
replayed (at once), then a summary a person reads in one screen, a timeline per clock scenario,
the detail of each event and the summary again (:mod:`batchpilot_local.replay_summary`);
``--summary`` prints the deployment, summary and timelines only. ``--report`` also writes the HTML
report (:mod:`batchpilot_local.replay_html`). Progress goes to stderr
(:mod:`batchpilot_local.progress`).

``batchpilot queue [--sample | --scenario FILE]`` shows the job ledger's running and waiting jobs
with expected starts (see :mod:`batchpilot_local.queue_command`).

``batchpilot samples`` lists the sample events ``--samples`` replays (:mod:`batchpilot_local.bundle`).

``batchpilot simulate SCENARIO`` (or ``--compare A B``) simulates a fleet with batchpilot's
policies in the loop (see :mod:`batchpilot_local.simulate.command`); it exits 0 after a run and 2
for bad usage or a scenario that cannot be simulated.

Exit status of ``replay``: 0 when every event was handled (an event no rule matches is handled:
ignored), 1 when any event has errors or some input was refused (a line, a file, an event too
large for EventBridge: each named on stderr, the rest replayed), 2 for input with nothing to
replay (a missing path, a folder with nothing readable, every input refused), an unreadable
template and for bad usage
(an unknown filter value, a parameter the template does not declare, a report path that cannot be
written: one line on stderr, nothing written), 3 when ``--fail-on`` is given and a notification of
that severity or worse was sent (and no event has errors).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

# Only argparse and the sub-commands' parsers at start-up: ``--help`` and ``--version`` answer at
# once. The replay's modules (the embedded AWS: moto, boto3, botocore, aws-sam-translator) are
# imported when a replay runs, the simulator's when a simulation does, boto3 when ``lineage``
# reads AWS (tests/unit/test_cli_startup.py checks it).
from batchpilot_local.bundle import sample_files, samples_dir
from batchpilot_local.lineage_command import add_parser as add_lineage_parser
from batchpilot_local.queue_command import add_parser as add_queue_parser
from batchpilot_local.simulate.command import add_parser as add_simulate_parser

if TYPE_CHECKING:
    from batchpilot_local.inputs import ReplayInput
    from batchpilot_local.progress import Progress
    from batchpilot_local.replay import Replayer
    from batchpilot_local.replay_options import Filters
    from batchpilot_local.report import EventReport

__all__ = ["EXIT_ERRORS", "EXIT_FAIL_ON", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]

EXIT_OK = 0
"""Every event was handled."""
EXIT_ERRORS = 1
"""At least one event has errors, or some input was refused (the rest was replayed)."""
EXIT_USAGE = 2
"""Bad usage, nothing to replay in the input, or an unreadable template."""
EXIT_FAIL_ON = 3
"""``--fail-on``: a notification of that severity or worse was sent."""


def _version() -> str:
    # importlib.metadata costs about 0.1 s of imports: read only when --version is asked.
    from importlib import metadata

    try:
        return metadata.version("batchpilot")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``: print ``batchpilot <version>`` and exit 0, like argparse's own ``version``
    action, with the version looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any, **__: Any) -> None:
        sys.stdout.write(f"batchpilot {_version()}\n")
        sys.stdout.flush()
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, one subcommand per job (``replay``, ``simulate``)."""
    parser = argparse.ArgumentParser(
        prog="batchpilot", description="Local tools for batchpilot (never shipped in the Lambda layer)."
    )
    parser.add_argument("--version", action=_VersionAction, help="show the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    replay = commands.add_parser(
        "replay",
        help="run events through the functions of template.yaml against an embedded AWS",
        description=(
            "Run EventBridge events (files, directories, JSON Lines, concatenated JSON, CloudWatch "
            "Logs output and S3 exports (gzip), Logs Insights results and exports (JSON, CSV), SQS "
            "messages, '-' for stdin, or scenario files) through "
            "every function whose rule in template.yaml matches, with the real handlers, against an "
            "embedded AWS; print what each function did."
        ),
    )
    replay.add_argument(
        "paths", nargs="*", metavar="PATH", help="event file, directory, or '-' for stdin (or --samples)"
    )
    replay.add_argument(
        "--samples",
        action="store_true",
        help="also replay every sample event batchpilot ships (the checkout's events/, else the "
        "installed copy; `batchpilot samples` lists them)",
    )
    replay.add_argument(
        "--format", choices=("text", "json"), default="text", help="report format (default: text)"
    )
    replay.add_argument(
        "--template",
        metavar="PATH",
        default=None,
        help="SAM template (default: ./template.yaml, else the checkout's, else the copy installed "
        "with batchpilot)",
    )
    replay.add_argument(
        "--report", metavar="FILE", default=None, help="also write a self-contained HTML report to FILE"
    )
    replay.add_argument(
        "--parameter-overrides",
        metavar="'K=V ...'",
        action="append",
        default=[],
        help="template parameters, as sam deploy takes them (repeatable; wins over --config-env)",
    )
    replay.add_argument(
        "--config-env",
        metavar="ENV",
        default=None,
        help="use the parameter_overrides of this samconfig.toml environment (see --config-file)",
    )
    replay.add_argument(
        "--config-file",
        metavar="PATH",
        default=None,
        help="samconfig.toml for --config-env (default: the one beside the template)",
    )
    for option, what in (
        ("--job", "job name, ARN or id"),
        ("--queue", "job queue name"),
        ("--share", "share identifier or quota share"),
        ("--category", "failure/blocked category (CAPACITY, MISCONFIGURATION, ...)"),
    ):
        replay.add_argument(
            option,
            metavar="PATTERN",
            action="append",
            default=[],
            help=f"replay only events whose {what} matches (glob; repeatable)",
        )
    replay.add_argument(
        "--fail-on",
        choices=("critical", "warning"),
        default=None,
        help="exit 3 when a notification of this severity or worse was sent (for CI)",
    )
    replay.add_argument(
        "--verbose", action="store_true", help="text report: also list the functions' own counters"
    )
    replay.add_argument(
        "--summary",
        action="store_true",
        help="text report: print only the deployment, the summary and the timelines (not each event)",
    )
    replay.add_argument(
        "--one-by-one",
        action="store_true",
        help="one record per invocation (default: the batches each function's SQS event source "
        "mapping forms, BatchSize and batching window from the template, as Lambda runs them; either "
        "way each event's report holds what its records caused)",
    )
    add_simulate_parser(commands)
    add_lineage_parser(commands)
    add_queue_parser(commands)
    samples = commands.add_parser(
        "samples",
        help="list the sample events batchpilot ships (paths to give `batchpilot replay`)",
        description="Print the path of every sample event and scenario file `batchpilot replay "
        "--samples` replays, one per line (the checkout's events/, else the copy installed with "
        "batchpilot).",
    )
    samples.add_argument("--dir", action="store_true", help="print only the samples folder")
    return parser


def _samples(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """``batchpilot samples``: the sample files (or ``--dir``: their folder), one path a line."""
    folder = samples_dir()
    if folder is None:
        stderr.write("batchpilot samples: no sample events installed with batchpilot\n")
        return EXIT_USAGE
    for path in [folder] if args.dir else sample_files():
        stdout.write(f"{path}\n")
    return EXIT_OK


def _fail(stderr: TextIO, message: str) -> int:
    stderr.write(f"batchpilot replay: {message}\n")
    stderr.flush()
    return EXIT_USAGE


def _check_writable(path: str) -> None:
    """Fail before the replay when the report cannot be written (a missing folder, a directory,
    no permission), by creating and removing a temporary file beside it.

    Raises:
        OptionError: one line naming the path.
    """
    from batchpilot_local.replay_options import OptionError

    target = Path(path)
    if target.is_dir():
        raise OptionError(f"--report {path}: is a directory")
    folder = target.parent if str(target.parent) else Path(".")
    try:
        handle, probe = tempfile.mkstemp(prefix=".report-", suffix=".probe", dir=folder)
    except OSError as exc:
        raise OptionError(f"--report {path}: cannot write: {exc.strerror or type(exc).__name__}") from None
    os.close(handle)
    os.unlink(probe)


def _parameters(args: argparse.Namespace, sources: list[str] | None = None) -> dict[str, str]:
    """The template parameters of the command line; where they came from is appended to ``sources``
    (``samconfig.toml [default]``, ``--parameter-overrides``), for the report's header."""
    from batchpilot_local.replay_options import parse_overrides, samconfig_overrides
    from batchpilot_local.template import default_template_path

    parameters: dict[str, str] = {}
    if args.config_env is not None:
        if args.config_file is not None:
            config = Path(args.config_file)
        else:
            template = Path(args.template) if args.template else default_template_path()
            config = template.parent / "samconfig.toml"
        parameters.update(samconfig_overrides(config, args.config_env))
        if sources is not None:
            sources.append(f"{config.name} [{args.config_env}]")
    overrides = parse_overrides(args.parameter_overrides)
    parameters.update(overrides)
    if overrides and sources is not None:
        sources.append("--parameter-overrides")
    return parameters


def _deployment(replayer: Replayer, sources: list[str]) -> str:
    """The text report's header: the template, its parameters, functions and channels."""
    from batchpilot_local.replay_summary import render_deployment

    wiring = replayer.wiring
    path = replayer.template.path
    try:
        shown = str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        shown = str(path)
    return render_deployment(
        wiring.functions, wiring.channels, wiring.chat, wiring.overrides, template=shown, sources=sources
    )


def _queue_environments(items: Iterable[Any]) -> dict[str, dict[str, str]]:
    """Per clock scenario, job queue name → service environment name (from its world and ticks)."""
    from batchpilot_local.clock import ClockScenario

    out: dict[str, dict[str, str]] = {}
    for item in items:
        if not isinstance(item, ClockScenario):
            continue
        mapping = out.setdefault(item.origin, {})
        for world in (item.world, *(tick.world for tick in item.ticks)):
            for queue in world.get("job_queues") or []:
                if isinstance(queue, dict) and queue.get("name") and queue.get("serviceEnvironment"):
                    mapping[str(queue["name"])] = str(queue["serviceEnvironment"])
    return out


def _input_paths(args: argparse.Namespace) -> list[str]:
    """The PATHs, then the samples folder with ``--samples``.

    Raises:
        OptionError: neither is given, or ``--samples`` and no samples are installed.
    """
    from batchpilot_local.replay_options import OptionError

    paths = list(args.paths)
    if args.samples:
        folder = samples_dir()
        if folder is None:
            raise OptionError("--samples: no sample events installed with batchpilot")
        paths.append(str(folder))
    if not paths:
        raise OptionError("give one or more PATHs ('-' for stdin), or --samples for the sample events")
    return paths


def _replay(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from batchpilot_local.inputs import InputError, read_inputs, steps_of
    from batchpilot_local.progress import Progress
    from batchpilot_local.replay import Replayer
    from batchpilot_local.replay_options import Filters, OptionError
    from batchpilot_local.template import TemplateError

    filters = Filters(tuple(args.job), tuple(args.queue), tuple(args.share), tuple(args.category))
    if args.summary and args.format == "json":
        return _fail(stderr, "--summary prints the text report's summary: it takes no --format json")
    sources: list[str] = []
    try:
        paths = _input_paths(args)
        parameters = _parameters(args, sources)
        replayer = Replayer(args.template, parameters, batch=not args.one_by_one)
        # Spooled: the input is read once here (every error found before anything runs), held in
        # a temporary file, and read back one item at a time: memory does not grow with it.
        replay_input = read_inputs(paths, spool=True, tolerant=True)
    except (TemplateError, InputError, OptionError) as exc:
        return _fail(stderr, str(exc))
    with contextlib.closing(replay_input):
        for notice in replay_input.notices():  # refused input (a line, a file), skipped files
            stderr.write(f"batchpilot replay: {notice}\n")
        if not len(replay_input.items):  # the last notice said there is nothing to replay
            return EXIT_USAGE
        try:
            for world in replay_input.worlds:
                unknown = sorted(set(world.parameters) - set(replayer.template.parameters))
                if unknown:
                    raise OptionError(
                        f"{world.origin}: parameters {', '.join(unknown)}: not declared by the template"
                    )
            filters.check(item.value for item in replay_input.items)
            if args.report is not None:
                _check_writable(args.report)
        except OptionError as exc:
            return _fail(stderr, str(exc))
        if filters.active:
            total = sum(steps_of(item.value) for item in replay_input.items if filters.keep(item.value))
        else:
            total = replay_input.steps
        header = _deployment(replayer, sources)
        if args.format == "text":
            stdout.write(header + "\n")  # at once: what is being replayed, before the replay runs
            stdout.flush()
        progress = Progress(stderr, total)
        # The text report puts the summary first, so each event's block waits in a temporary file
        # until the replay ends: memory stays flat in the number of events (only --report keeps them).
        try:
            with tempfile.TemporaryFile("w+", encoding="utf-8") as spool, _fewer_collections():
                return _replay_into(
                    args, stdout, stderr, replayer, replay_input, filters, progress, spool, header
                )
        finally:
            progress.close()


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """Run the cyclic garbage collector less often while a replay runs (thresholds 20,000 / 20 /
    100 instead of CPython's 700 / 10 / 10), then restore the thresholds.

    Each replayed event allocates and drops thousands of short-lived objects (requests, parsed
    responses, moto's models), and the embedded AWS holds a few hundred thousand long-lived ones
    (botocore's service models) that every older-generation pass walks again: with the defaults
    the collector took about 4 % of a 20,000-event replay (``benchmarks/bench_replay.py``).
    Reference counting still frees everything that is not in a cycle at once.
    """
    saved = gc.get_threshold()
    gc.set_threshold(20_000, 20, 100)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def _replay_into(
    args: argparse.Namespace,
    stdout: TextIO,
    stderr: TextIO,
    replayer: Replayer,
    replay_input: ReplayInput,
    filters: Filters,
    progress: Progress,
    spool: TextIO,
    header: str = "",
) -> int:
    """:func:`_replay` once its input is read: replay, print, write the HTML report; exit status.
    ``spool`` holds the text blocks of the events until the summary is printed; ``header`` is the
    deployment (for the HTML report)."""
    from batchpilot_local.clock import ClockScenario
    from batchpilot_local.embedded_aws import WorldError
    from batchpilot_local.replay_options import failed_on
    from batchpilot_local.replay_summary import Summary, add_report, render_overview, render_timelines
    from batchpilot_local.report import render_text

    summary = Summary()
    environments: dict[str, dict[str, str]] = {}  # per clock scenario, filled as each is reached
    outcome = {"errors": False, "fail_on": False}

    def emit(report: EventReport) -> None:
        progress.step()
        add_report(summary, report, environments)
        outcome["errors"] = outcome["errors"] or report.has_errors
        notes = [note for outputs in report.outputs() for note in outputs.notifications]
        outcome["fail_on"] = outcome["fail_on"] or failed_on(args.fail_on, notes)
        if args.format == "json":
            stdout.write(report.to_json() + "\n")
            stdout.flush()
        elif not args.summary:
            spool.write(render_text(report, verbose=args.verbose) + "\n")

    def items() -> Iterator[tuple[Any, str | None, str | None]]:
        for item in replay_input.items:
            value = item.value
            if filters.active and not filters.keep(value):
                continue
            if isinstance(value, ClockScenario):  # its reports are emitted after it is taken
                environments.update(_queue_environments([value]))
            yield value, item.origin, item.scope

    try:
        reports = replayer.run_items(
            items(),
            scope_worlds={world.origin: world.data for world in replay_input.worlds},
            scope_parameters={world.origin: world.parameters for world in replay_input.worlds},
            on_report=emit,
            keep_reports=args.report is not None,
        )
    except WorldError as exc:
        return _fail(stderr, f"world: {exc}")
    if args.format == "text":
        overview = render_overview(summary)
        stdout.write(overview)
        timelines = render_timelines(summary)
        if timelines:
            stdout.write("\n" + timelines)
        if not args.summary:
            stdout.write("\nEvents\n")
            spool.seek(0)
            shutil.copyfileobj(spool, stdout)
            # The summary again: after a long list of events it has scrolled away.
            stdout.write("Summary (as at the top)\n" + overview)
        stdout.flush()
    if args.report is not None:
        from batchpilot_local.replay_html import write_report

        try:
            write_report(
                args.report, reports, summary, template=replayer.template, deployment=header.splitlines()
            )
        except OSError as exc:
            return _fail(
                stderr, f"--report {args.report}: cannot write: {exc.strerror or type(exc).__name__}"
            )
    refused = replay_input.refused_summary()
    if refused is not None:  # said again at the end, where the reader is
        stderr.write(f"batchpilot replay: {refused}\n")
    if outcome["errors"] or refused is not None:
        return EXIT_ERRORS
    return EXIT_FAIL_ON if outcome["fail_on"] else EXIT_OK


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
    try:
        return _dispatch(parser, args, stdout, stderr)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, without a traceback at exit
        # (Python's recipe: point stdout's descriptor at /dev/null). Every command, not only replay.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_ERRORS


def _dispatch(
    parser: argparse.ArgumentParser, args: argparse.Namespace, stdout: TextIO, stderr: TextIO
) -> int:
    """Run the subcommand ``args.command`` names; its exit status."""
    if args.command == "simulate":
        from batchpilot_local.simulate.command import run_command as run_simulate

        return run_simulate(args, stdout, stderr)
    if args.command == "lineage":
        from batchpilot_local.lineage_command import run_lineage

        return run_lineage(args, stdout, stderr)
    if args.command == "queue":
        from batchpilot_local.queue_command import run_queue

        return run_queue(args, stdout, stderr)
    if args.command == "samples":
        return _samples(args, stdout, stderr)
    if args.command != "replay":
        parser.print_usage(stderr)
        stderr.write("batchpilot: a command is required (try: batchpilot replay events/)\n")
        return EXIT_USAGE
    return _replay(args, stdout, stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
