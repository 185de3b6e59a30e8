"""Replay speed: events per second and peak memory of `batchpilot replay` on archives of job
events (no world), for 1,000, 5,000 and 20,000 events.

Each size runs in a fresh interpreter (`batchpilot replay --format json FILE`, output discarded),
so peak memory is that size's own: the child's ``VmHWM`` (Linux; its ``ru_maxrss`` elsewhere,
which also counts the benchmark process it was started from). Two archives (``--archive``), JSON
Lines, one event a line, as an EventBridge archive holds them:

- ``realistic`` (:func:`archive`): container and service jobs, each with its whole lifecycle
  (SUBMITTED to SUCCEEDED; one job in 20 FAILED instead), about a hundred in flight at once, their
  events interleaved in time;
- ``samples`` (:func:`samples_archive`): the sample events of ``events/`` over and over, each
  round's jobs new: failure-heavy (every failure pages, posts and may resubmit).

Prints one JSON line per run and a final summary line (``by_size``: each archive and size's median
and best events/s over the rounds, and its highest peak), and writes its section of
``benchmarks/RESULTS.md``.

    .venv/bin/python benchmarks/bench_replay.py                 # 1,000, 5,000 and 20,000 events
    .venv/bin/python benchmarks/bench_replay.py --sizes 1000    # one size
    .venv/bin/python benchmarks/bench_replay.py --repeat 3      # three rounds: median and best
    .venv/bin/python benchmarks/bench_replay.py --archive realistic samples --sizes 2000 20000 --against main
    .venv/bin/python benchmarks/bench_replay.py --against main --env BATCHPILOT_MOTO_FIXES=0

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
import re
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
STEP_OFFSETS_S = (0, 5, 20, 60, 90)  # each state's time after SUBMITTED; the end comes after a run
FAILING_EVERY = 20  # one job in 20 (5 %) ends FAILED instead of SUCCEEDED
JOB_EVERY_S = 6  # a job submitted every 6 s: at one event a second, some 100 jobs in flight


def archive(count: int) -> list[dict[str, Any]]:
    """``count`` events of a realistic archive: container and service jobs (alternately), each
    walking its whole lifecycle SUBMITTED, PENDING, RUNNABLE, STARTING, RUNNING to SUCCEEDED, one
    job in :data:`FAILING_EVERY` to FAILED instead (with the sample's reason), on four queues; a
    job submitted every :data:`JOB_EVERY_S` seconds, each running 5 to 55 minutes, so that about
    a hundred jobs are in flight and their events interleave, sorted by time as an EventBridge
    archive holds them. Deterministic."""
    samples = {
        (kind, status): json.loads((EVENTS_DIR / f"{kind}/{name}.json").read_text(encoding="utf-8"))
        for kind, names in (
            ("batch-job", {"RUNNING": "running", "FAILED": "failed-application-error"}),
            ("service-job", {"RUNNING": "running", "FAILED": "failed-algorithm-error"}),
        )
        for status, name in names.items()
    }
    start = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    timed: list[tuple[int, int, dict[str, Any]]] = []
    jobs = count // len(STATUSES) + 1
    for job in range(jobs):
        kind = "batch-job" if job % 2 else "service-job"
        run_s = 300 + (job * 7919) % 3000  # 5 to 55 minutes, spread without a random generator
        submitted = job * JOB_EVERY_S
        for step, status in enumerate(STATUSES):
            final = step == len(STATUSES) - 1
            if final and job % FAILING_EVERY == FAILING_EVERY - 1:
                status = "FAILED"
            event = copy.deepcopy(samples[(kind, "FAILED" if status == "FAILED" else "RUNNING")])
            at = submitted + (STEP_OFFSETS_S[-1] + run_s if final else STEP_OFFSETS_S[step])
            detail = event["detail"]
            detail["status"] = status
            detail["jobName"] = f"bench-job-{job:05d}"
            detail["jobId"] = f"00000000-0000-4000-8000-{job:012d}"
            detail["jobArn"] = detail["jobArn"].rsplit("/", 1)[0] + f"/{detail['jobId']}"
            detail["jobQueue"] = detail["jobQueue"].rsplit("/", 1)[0] + f"/bench-queue-{job % 4}"
            timed.append((at, job * len(STATUSES) + step, event))
    timed.sort(key=lambda entry: entry[:2])
    events = []
    for i, (at, _, event) in enumerate(timed[:count]):
        event["id"] = f"bench-{i:06d}"
        event["time"] = (start + timedelta(seconds=at)).strftime("%Y-%m-%dT%H:%M:%SZ")
        events.append(event)
    return events


_ID_KEYS = ("jobId", "jobName", "TrainingJobName")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def samples_archive(count: int) -> list[dict[str, Any]]:
    """``count`` events: the sample events of ``events/`` (not the scenarios), in file order, over
    and over, each round's jobs made new (their ids and names, wherever the event spells them:
    ARNs too) so that every failure is a new one that pages, posts and may be resubmitted, as in
    a failure-heavy fleet. Event ids are made unique; times are the samples' own."""
    samples = []
    for path in sorted(EVENTS_DIR.rglob("*.json")):
        if "scenarios" in path.parts:
            continue
        event = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(event, dict) and "detail-type" in event:
            samples.append(event)
    events = []
    for i in range(count):
        round_, sample = divmod(i, len(samples))
        text = json.dumps(samples[sample])
        if round_:
            detail = samples[sample].get("detail") or {}
            for key in _ID_KEYS:
                value = detail.get(key)
                if not isinstance(value, str) or not value:
                    continue
                new = value[:-12] + f"{round_:012x}" if _UUID.match(value) else f"{value}-r{round_}"
                text = re.sub(r'(?<=["/])' + re.escape(value) + r'(?=")', new, text)
        event = json.loads(text)
        event["id"] = f"sample-{i:06d}"
        events.append(event)
    return events


ARCHIVES = {"realistic": archive, "samples": samples_archive}
"""The archives a run can replay (``--archive``)."""


def write_archive(count: int, folder: Path, kind: str = "realistic") -> Path:
    """The benchmark's archive ``kind`` (:data:`ARCHIVES`) of ``count`` events as a JSON Lines
    file in ``folder``."""
    path = folder / "archive.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in ARCHIVES[kind](count)) + "\n", encoding="utf-8")
    return path


def start(
    path: Path, source: Path, extra_env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], float, Path]:
    """Start ``batchpilot replay --format json path`` with the code of ``source`` (a repository
    tree: this one, or one exported by :func:`_common.source_tree`) and ``extra_env`` in its
    environment; returns the process, its start time (``time.perf_counter``) and ``source``."""
    env = {**os.environ, **(extra_env or {})}
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


def compare(
    sizes: list[int], rounds: int, ref: str, kinds: list[str], extra_env: dict[str, str]
) -> list[dict[str, Any]]:
    """``rounds`` rounds over ``kinds`` and ``sizes``, each replaying one archive with this tree
    (``extra_env`` in its environment) and with ``ref`` at the same time; one ``{archive, events,
    this, ref, speedup}`` per run (``speedup``: ref's replay time over this tree's)."""
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        other = source_tree(
            ref, Path(folder), ["template.yaml", "events", "functions", "layers/batchpilot", "local"]
        )
        # Bytecode first, as this tree has it: compiling at the first import is no replay's cost.
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(other)], check=True)
        for _ in range(max(1, rounds)):
            for kind in kinds:
                for size in sizes:
                    path = write_archive(size, Path(folder), kind)
                    mine, theirs = start(path, ROOT, extra_env), start(path, other)
                    this_run, ref_run = finish(size, mine), finish(size, theirs)
                    run = {
                        "archive": kind,
                        "events": size,
                        "this": this_run,
                        "ref": ref_run,
                        "speedup": round(ref_run["replay_s"] / this_run["replay_s"], 3),
                    }
                    print(json.dumps(run), flush=True)
                    runs.append(run)
    return runs


def _env(pairs: list[str]) -> dict[str, str]:
    """``NAME=VALUE`` pairs as a dict (``--env``)."""
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"--env wants NAME=VALUE, not {pair!r}")
        out[name] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 5_000, 20_000])
    parser.add_argument(
        "--archive",
        nargs="+",
        choices=sorted(ARCHIVES),
        default=["realistic"],
        help="the archives to replay: realistic (whole job lifecycles, 5 %% failing) and/or samples "
        "(events/'s samples, each round's jobs new: failure-heavy)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds over the archives and sizes (each round runs every one once, in order); the "
        "summary gives each one's median and best events/s and its highest peak",
    )
    parser.add_argument("--section", default=None, help="the RESULTS.md section to write")
    parser.add_argument(
        "--against", metavar="REF", help="also replay each archive with this git commit, at the same time"
    )
    parser.add_argument(
        "--env",
        nargs="*",
        default=[],
        metavar="NAME=VALUE",
        help="environment of this tree's replays only (BATCHPILOT_MOTO_FIXES=0: without moto's fixes)",
    )
    args = parser.parse_args()
    info = machine()  # before the runs: the load average at the start
    extra_env = _env(args.env)
    if args.against:
        against(args, info, extra_env)
        return
    results = []
    for _ in range(max(1, args.repeat)):
        for kind in args.archive:
            for size in args.sizes:
                with tempfile.TemporaryDirectory() as folder:
                    path = write_archive(size, Path(folder), kind)
                    result = {"archive": kind, **finish(size, start(path, ROOT, extra_env))}
                print(json.dumps(result), flush=True)
                results.append(result)
    by_size = summary(results)
    print(json.dumps({"machine": info, "results": results, "by_size": by_size, "self_rss_mb": _self_rss()}))
    lines = [
        f"## Replay: events per second and peak memory ({info['python'].split(' (')[0]})",
        "",
        f"`{_command()}`, {now()}: `batchpilot replay --format json` of each archive, in a fresh",
        "interpreter per run; peak memory is the child's `VmHWM`.",
        "",
        "| archive | events | events/s, by round | median | best | peak RSS |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for key, row in by_size.items():
        kind, size = key.split(":")
        rates = ", ".join(f"{rate:g}" for rate in row["events_per_s"])
        lines.append(
            f"| {kind} | {int(size):,} | {rates} | {row['median_events_per_s']:g} "
            f"| {row['best_events_per_s']:g} | {row['peak_rss_mb']:g} MB |"
        )
    lines += ["", "Machine:", "", machine_markdown(info)]
    write_section(args.section or "replay", "\n".join(lines))


def _command() -> str:
    """This run's command line, as the RESULTS.md section names it."""
    return " ".join(["benchmarks/bench_replay.py", *map(shlex.quote, sys.argv[1:])])


def against(args: argparse.Namespace, info: dict[str, str], extra_env: dict[str, str]) -> None:
    """``--against``: the side-by-side rounds, a summary line (median speed-up per archive and
    size) and the ``replay_against`` section of RESULTS.md."""
    runs = compare(args.sizes, args.repeat, args.against, args.archive, extra_env)
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.against],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    keys = [f"{kind}:{size}" for kind in args.archive for size in args.sizes]
    speedups = {key: [r["speedup"] for r in runs if f"{r['archive']}:{r['events']}" == key] for key in keys}
    medians = {key: round(statistics.median(values), 3) for key, values in speedups.items()}
    print(json.dumps({"machine": info, "against": commit, "speedup": speedups, "median_speedup": medians}))
    this = "this tree" + (f" ({' '.join(args.env)})" if args.env else "")
    lines = [
        f"## Replay against {commit}: the same archive at the same time ({info['python'].split(' (')[0]})",
        "",
        f"`{_command()}`, {now()}: each row replays one archive with {this} and with "
        f"{commit} at once, one process per core; speed-up is {commit}'s replay time over this tree's;",
        "peak memory is each replay's `VmHWM`.",
        "",
        f"| archive | events | {this}, events/s | {commit}, events/s | speed-up | {this}, peak "
        f"| {commit}, peak |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        lines.append(
            f"| {run['archive']} | {run['events']:,} | {run['this']['events_per_s']:g} "
            f"| {run['ref']['events_per_s']:g} | {run['speedup']:.3f}x | {run['this']['peak_rss_mb']:g} MB "
            f"| {run['ref']['peak_rss_mb']:g} MB |"
        )
    lines += ["", "Median speed-up: " + ", ".join(f"{key} {v:.3f}x" for key, v in medians.items())]
    lines += ["", "Machine:", "", machine_markdown(info)]
    write_section(args.section or "replay_against", "\n".join(lines))


def summary(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per ``archive:size``: the runs' events/s (in run order), their median and best, and the
    highest peak (MB). The machine's speed drifts between runs (a VM): the spread is part of the
    result."""
    by_size: dict[str, dict[str, Any]] = {}
    for key in dict.fromkeys(f"{r.get('archive', 'realistic')}:{r['events']}" for r in results):
        runs = [r for r in results if f"{r.get('archive', 'realistic')}:{r['events']}" == key]
        rates = [r["events_per_s"] for r in runs]
        by_size[key] = {
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
