"""Replay speed: events per second and peak memory of `batchpilot replay` on an archive of plain
job events (no world), for 1,000, 5,000 and 20,000 events.

Each size runs in a fresh interpreter (`batchpilot replay --format json FILE`, output discarded),
so peak memory is that size's own: the child's ``VmHWM`` (Linux; its ``ru_maxrss`` elsewhere,
which also counts the benchmark process it was started from). The archive is JSON Lines of container
and service job state changes (SUBMITTED .. SUCCEEDED, a few FAILED), different jobs and queues,
one event per second of event time, as an EventBridge archive's events would be, one JSON
object a line. Prints one JSON line per run and a final summary line (``by_size``: each size's
median and best events/s over the rounds, and its highest peak), and writes its section of
``benchmarks/RESULTS.md``.

    .venv/bin/python benchmarks/bench_replay.py                 # 1,000, 5,000 and 20,000 events
    .venv/bin/python benchmarks/bench_replay.py --sizes 1000    # one size
    .venv/bin/python benchmarks/bench_replay.py --repeat 3      # three rounds: median and best
    .venv/bin/python benchmarks/bench_replay.py --sizes 20000 --repeat 3 --against 47021b9

``--against REF`` compares this working tree with the commit ``REF`` (its ``local``, ``layers``,
``functions`` and template exported with ``git archive``): each round runs both replays of the
same archive at the same time, one per core, so that the VM's drifting speed slows both alike,
and reports how many times faster this tree was (REF's replay time over this tree's). That needs
two free cores; with fewer, the two runs share one.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import EVENTS_DIR, ROOT, machine, machine_markdown, now, source_tree, write_section

STATUSES = ["SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED"]


def archive(count: int) -> list[dict[str, Any]]:
    """``count`` plain job events: container and service jobs walking through their states."""
    container = json.loads((EVENTS_DIR / "batch-job/running.json").read_text(encoding="utf-8"))
    service = json.loads((EVENTS_DIR / "service-job/running.json").read_text(encoding="utf-8"))
    start = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    events = []
    for i in range(count):
        job, step = divmod(i, len(STATUSES))
        event = copy.deepcopy(container if job % 2 else service)
        status = STATUSES[step] if job % 25 or step < 5 else "FAILED"
        event["id"] = f"bench-{i:06d}"
        event["time"] = (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        detail = event["detail"]
        detail["status"] = status
        detail["jobName"] = f"bench-job-{job:05d}"
        detail["jobArn"] = detail["jobArn"].rsplit("/", 1)[0] + f"/00000000-0000-4000-8000-{job:012d}"
        detail["jobQueue"] = detail["jobQueue"].rsplit("/", 1)[0] + f"/bench-queue-{job % 4}"
        events.append(event)
    return events


def run_one(count: int) -> dict[str, Any]:
    """One replay of a ``count``-event archive by this tree: ``{events, exit, replay_s, process_s,
    events_per_s, peak_rss_mb}``.

    Raises:
        SystemExit: the replay did not report (it crashed; its stderr is shown).
    """
    with tempfile.TemporaryDirectory() as folder:
        path = write_archive(count, Path(folder))
        return finish(count, start(path, ROOT))


def write_archive(count: int, folder: Path) -> Path:
    """The benchmark's archive of ``count`` events as a JSON Lines file in ``folder``."""
    path = folder / "archive.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in archive(count)) + "\n", encoding="utf-8")
    return path


def start(path: Path, source: Path) -> tuple[subprocess.Popen[str], float, Path]:
    """Start ``batchpilot replay --format json path`` with the code of ``source`` (a repository
    tree: this one, or one exported by :func:`_common.source_tree`); returns the process, its
    start time (``time.perf_counter``) and ``source``."""
    env = dict(os.environ)
    if source != ROOT:  # the exported tree's packages ahead of the editable install's
        env["PYTHONPATH"] = os.pathsep.join([str(source / "local"), str(source / "layers" / "batchpilot")])
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", _REPLAY_CODE, str(path)],
        cwd=source,  # its template.yaml
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, started, source


def finish(count: int, run: tuple[subprocess.Popen[str], float, Path]) -> dict[str, Any]:
    """Wait for a run :func:`start` began; its result as :func:`run_one` gives it.

    Raises:
        SystemExit: the replay did not report (its stderr is shown), or it imported
            ``batchpilot_local`` or ``batchpilot`` from outside its source tree.
    """
    process, started, source = run
    _, stderr = process.communicate()
    wall = time.perf_counter() - started
    line = next((x for x in stderr.splitlines() if x.startswith("BENCH ")), None)
    if line is None:
        raise SystemExit(f"replay of {count} events failed: {stderr[-2000:]}")
    _, rc, elapsed, maxrss_kb = line.split()
    code = next((x for x in stderr.splitlines() if x.startswith("CODE ")), "").split()[1:]
    if not code or not all(Path(module).resolve().is_relative_to(source.resolve()) for module in code):
        raise SystemExit(f"the replay ran other code than {source}'s: {code}")
    return {
        "events": count,
        "exit": int(rc),
        "replay_s": round(float(elapsed), 2),
        "process_s": round(wall, 2),
        "events_per_s": round(count / float(elapsed), 1),
        "peak_rss_mb": round(int(maxrss_kb) / 1024, 1),
    }


_REPLAY_CODE = (
    "import resource, sys, time\n"
    "from batchpilot_local.cli import main\n"
    # The CLI imports the replay's modules when a replay starts: outside the timing, as before.
    "import batchpilot_local.replay, batchpilot_local.replay_summary, batchpilot_local.inputs\n"
    "started = time.perf_counter()\n"
    "rc = main(['replay', '--format', 'json', sys.argv[1]])\n"
    "elapsed = time.perf_counter() - started\n"
    "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    # Linux: the child's own high-water mark. ru_maxrss also counts the process it was
    # exec'd from (the benchmark itself, holding the archive it wrote): an overstatement.
    "try:\n"
    "    status = open('/proc/self/status', encoding='ascii').read().split('VmHWM:')[1]\n"
    "    peak = int(status.split()[0])\n"
    "except (OSError, IndexError, ValueError):\n"
    "    pass\n"
    "import batchpilot, batchpilot_local\n"
    "code = [batchpilot_local.__file__, batchpilot.__file__]\n"
    "sys.stderr.write(f'BENCH {rc} {elapsed} {peak}\\n')\n"
    "sys.stderr.write('CODE ' + ' '.join(code) + '\\n')\n"
)


def compare(sizes: list[int], rounds: int, ref: str) -> list[dict[str, Any]]:
    """``rounds`` rounds over ``sizes``, each replaying one archive with this tree and with ``ref``
    at the same time; one ``{events, this, ref, speedup}`` per run (``speedup``: ref's replay time
    over this tree's)."""
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        other = source_tree(
            ref, Path(folder), ["template.yaml", "events", "functions", "layers/batchpilot", "local"]
        )
        # Bytecode first, as this tree has it: compiling at the first import is no replay's cost.
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(other)], check=True)
        for _ in range(max(1, rounds)):
            for size in sizes:
                path = write_archive(size, Path(folder))
                mine, theirs = start(path, ROOT), start(path, other)
                this_run, ref_run = finish(size, mine), finish(size, theirs)
                run = {
                    "events": size,
                    "this": this_run,
                    "ref": ref_run,
                    "speedup": round(ref_run["replay_s"] / this_run["replay_s"], 3),
                }
                print(json.dumps(run), flush=True)
                runs.append(run)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 5_000, 20_000])
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds over the sizes (each round runs every size once, in order); the summary gives "
        "each size's median and best events/s and its highest peak",
    )
    parser.add_argument("--section", default=None, help="the RESULTS.md section to write")
    parser.add_argument(
        "--against", metavar="REF", help="also replay each archive with this git commit, at the same time"
    )
    args = parser.parse_args()
    info = machine()  # before the runs: the load average at the start
    if args.against:
        against(args, info)
        return
    results = []
    for _ in range(max(1, args.repeat)):
        for size in args.sizes:
            result = run_one(size)
            print(json.dumps(result), flush=True)
            results.append(result)
    by_size = summary(results)
    print(json.dumps({"machine": info, "results": results, "by_size": by_size, "self_rss_mb": _self_rss()}))
    lines = [
        f"## Replay: events per second and peak memory ({info['python'].split(' (')[0]})",
        "",
        f"`{_command()}`, {now()}: `batchpilot replay --format json`",
        "of an archive of plain job events, in a fresh interpreter per run; peak memory is the",
        "child's `VmHWM`. The goal: 500 events/s or more at 20,000 events, at most 300 MB, flat.",
        "",
        "| events | events/s, by round | median | best | peak RSS |",
        "|---:|---|---:|---:|---:|",
    ]
    for size, row in by_size.items():
        rates = ", ".join(f"{rate:g}" for rate in row["events_per_s"])
        lines.append(
            f"| {int(size):,} | {rates} | {row['median_events_per_s']:g} | {row['best_events_per_s']:g} "
            f"| {row['peak_rss_mb']:g} MB |"
        )
    lines += ["", "Machine:", "", machine_markdown(info)]
    write_section(args.section or "replay", "\n".join(lines))


def _command() -> str:
    """This run's command line, as the RESULTS.md section names it."""
    return " ".join(["benchmarks/bench_replay.py", *map(shlex.quote, sys.argv[1:])])


def against(args: argparse.Namespace, info: dict[str, str]) -> None:
    """``--against``: the side-by-side rounds, a summary line (median speed-up per size) and the
    ``replay_against`` section of RESULTS.md."""
    runs = compare(args.sizes, args.repeat, args.against)
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.against],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    speedups = {
        str(size): [r["speedup"] for r in runs if r["events"] == size] for size in dict.fromkeys(args.sizes)
    }
    medians = {size: round(statistics.median(values), 3) for size, values in speedups.items()}
    print(json.dumps({"machine": info, "against": commit, "speedup": speedups, "median_speedup": medians}))
    lines = [
        f"## Replay against {commit}: the same archive at the same time ({info['python'].split(' (')[0]})",
        "",
        f"`{_command()}`, {now()}: each row replays one archive with this tree and with "
        f"{commit} at once, one process per core; speed-up is {commit}'s replay time over this tree's.",
        "",
        "| events | this tree, events/s | " + commit + ", events/s | speed-up |",
        "|---:|---:|---:|---:|",
    ]
    for run in runs:
        lines.append(
            f"| {run['events']:,} | {run['this']['events_per_s']:g} | {run['ref']['events_per_s']:g} "
            f"| {run['speedup']:.3f}x |"
        )
    lines += ["", "Median speed-up: " + ", ".join(f"{int(k):,} events {v:.3f}x" for k, v in medians.items())]
    lines += ["", "Machine:", "", machine_markdown(info)]
    write_section(args.section or "replay_against", "\n".join(lines))


def summary(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per size: the runs' events/s (in run order), their median and best, and the highest peak
    (MB). The machine's speed drifts between runs (a VM): the spread is part of the result."""
    by_size: dict[str, dict[str, Any]] = {}
    for size in dict.fromkeys(r["events"] for r in results):
        runs = [r for r in results if r["events"] == size]
        rates = [r["events_per_s"] for r in runs]
        by_size[str(size)] = {
            "events_per_s": rates,
            "median_events_per_s": round(statistics.median(rates), 1),
            "best_events_per_s": max(rates),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        }
    return by_size


def _self_rss() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


if __name__ == "__main__":
    main()
