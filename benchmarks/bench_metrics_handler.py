"""Per-event cost of the real metrics handler (functions/metrics/app.py), on one core.

The handler is imported the way Lambda imports it (``app`` from the function's folder, the
template's environment variables set first) and fed SQS batches of 10 records (the template's
BatchSize), the bodies taken round-robin from every sample event in events/ except events/ignored/.
Everything it prints (EMF blobs, warnings) goes to an in-memory sink: formatting and writing the
EMF is part of the cost, the terminal is not. Per batch: wall time / 10 = per-event cost.

Goal (issue): <= 100 us per event on one core. Reported, never asserted.

    .venv/bin/python benchmarks/bench_metrics_handler.py [--events 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import io
import json
import os
import platform
import pstats
import statistics
import sys
import time
from typing import Any

from _common import (
    EVENTS_DIR,
    FUNCTION_DIR,
    LAMBDA_ENV,
    machine,
    machine_markdown,
    now,
    percentile,
    pin_to_one_core,
    shown,
    sqs_record,
    write_section,
)

GOAL_US = 100.0
BATCH_SIZE = 10

# Stages reported by the profile breakdown: (path suffix, function) -> label. Missing ones are skipped.
STAGES = {
    ("batchpilot/shared/processing.py", "handle"): "processor.handle (batch utility, in lambda_handler)",
    ("batchpilot/shared/processing.py", "record_handler"): "  record_handler (per record, in its scope)",
    ("batchpilot/metrics/handler.py", "process_record"): "    MetricsProcessor.process_record",
    ("batchpilot/metrics/service.py", "record_metrics"): "      record_metrics",
    ("batchpilot/shared/records.py", "decode"): "        decode (pydantic_core.from_json + pydantic)",
    ("batchpilot/shared/classification.py", "classify"): "        classify",
    ("batchpilot/shared/metrics.py", "metric_points"): "        metric_points",
    ("batchpilot/shared/observability.py", "count_outcome"): "      count_outcome (own counters)",
    ("batchpilot/metrics/handler.py", "_clean"): "  MetricsProcessor._clean (the batch's EMF, once)",
    ("batchpilot/io/emf.py", "flush"): "    EmfPublisher.flush (Powertools EMF provider + write)",
}


class Context:
    """A minimal Lambda context, as Powertools' testing recipes use."""

    function_name = "batchpilot-metrics"
    function_version = "$LATEST"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:111122223333:function:batchpilot-metrics"
    aws_request_id = "52fdfc07-2182-454f-963f-5f0f9a621d72"
    log_group_name = "/aws/lambda/batchpilot-metrics"
    log_stream_name = "2026/11/20/[$LATEST]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def sample_bodies() -> list[str]:
    """Every single-event sample, as the compact JSON EventBridge puts in an SQS body."""
    bodies = []
    for path in sorted(EVENTS_DIR.rglob("*.json")):
        if {"ignored", "cloudwatch-alarm"} & set(path.relative_to(EVENTS_DIR).parts):
            continue  # events the metrics function never receives
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "detail-type" in data:
            bodies.append(json.dumps(data))
    if not bodies:
        raise SystemExit(f"no sample events under {EVENTS_DIR}")
    return bodies


def sqs_batches(bodies: list[str], events: int) -> list[dict[str, Any]]:
    """``events`` records round-robin over ``bodies``, in Lambda SQS events of BATCH_SIZE records."""
    batches = []
    for start in range(0, events, BATCH_SIZE):
        records = [
            sqs_record(i, bodies[i % len(bodies)], "batchpilot-MetricsQueue")
            for i in range(start, min(start + BATCH_SIZE, events))
        ]
        batches.append({"Records": records})
    return batches


def profile_breakdown(run: Any) -> list[str]:
    """One more pass under cProfile: share of processor.handle time per stage, and top self-time functions.

    cProfile slows everything down, unevenly: read the shares as a guide to what to cut, not as times.
    """
    profiler = cProfile.Profile()
    profiler.enable()
    run(None)
    profiler.disable()
    stats: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = pstats.Stats(profiler).stats
    cumulative: dict[tuple[str, str], float] = {}
    for (filename, _line, name), (_cc, _nc, _tt, ct, _callers) in stats.items():
        for key in STAGES:
            if name == key[1] and filename.replace(os.sep, "/").endswith(key[0]):
                cumulative[key] = cumulative.get(key, 0.0) + ct
    total = cumulative.get(("batchpilot/shared/processing.py", "handle"))
    lines = []
    if total:
        lines.append("share of processor.handle time (cProfile, cumulative):")
        lines += [
            f"  {cumulative[key] / total:6.1%}  {label}" for key, label in STAGES.items() if key in cumulative
        ]
    top = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:12]
    all_self = sum(value[2] for value in stats.values())
    lines.append("top functions by self time (cProfile):")
    for (filename, line, name), (_cc, calls, tt, _ct, _callers) in top:
        where = filename if filename.startswith("<") or filename == "~" else f"{_short(filename)}:{line}"
        lines.append(f"  {tt / all_self:6.1%}  {calls:>7} calls  {name}  {where}")
    return lines


def _short(filename: str) -> str:
    for marker in ("site-packages/", "layers/batchpilot/", "functions/", "/python/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return os.path.basename(filename)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="events per repetition (>= 10000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions after one warm-up")
    parser.add_argument("--section", default="metrics_handler", help="RESULTS.md section key to replace")
    parser.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile breakdown pass")
    args = parser.parse_args()
    if args.events < 10_000 or args.events % BATCH_SIZE:
        parser.error("--events must be a multiple of 10 and at least 10000")

    pinning = pin_to_one_core()
    terminal = sys.stdout
    info = machine()

    # Lambda's environment, then the import: Powertools' Logger binds sys.stdout when it is created
    # (at import of batchpilot.shared.observability), so the sink must be in place before the import.
    os.environ.update(LAMBDA_ENV)
    sink = io.StringIO()
    sys.stdout = sink
    sys.path.insert(0, str(FUNCTION_DIR))
    app = importlib.import_module("app")
    assert callable(app.lambda_handler)

    bodies = sample_bodies()
    batches = sqs_batches(bodies, args.events)
    context = Context()
    handler = app.lambda_handler
    clock = time.perf_counter_ns

    def run(collect: list[float] | None) -> tuple[int, int]:
        failures = printed = 0
        for batch in batches:
            start = clock()
            result = handler(batch, context)
            elapsed = clock() - start
            if collect is not None:
                collect.append(elapsed / BATCH_SIZE / 1000)  # us per event
            failures += len(result["batchItemFailures"])
            printed += sink.tell()
            sink.seek(0)
            sink.truncate()
        return failures, printed

    run(None)  # warm-up: first-call paths, caches, the cold-start metric
    per_event: list[float] = []
    rep_medians: list[float] = []
    failures = printed = 0
    wall_start = time.perf_counter()
    for _ in range(args.repeat):
        rep: list[float] = []
        gc.collect()
        f, p = run(rep)
        failures += f
        printed += p
        per_event.extend(rep)
        rep_medians.append(statistics.median(rep))
    wall = time.perf_counter() - wall_start
    breakdown = [] if args.no_profile else profile_breakdown(run)
    sys.stdout = terminal

    total_events = args.events * args.repeat
    median = statistics.median(per_event)
    p95 = percentile(per_event, 95)
    mean = statistics.fmean(per_event)
    met = p95 <= GOAL_US
    verdict = (
        f"MET: p95 {p95:.1f} us <= {GOAL_US:.0f} us per event"
        if met
        else (
            f"NOT MET by p95 ({p95:.1f} us > {GOAL_US:.0f} us)"
            + ("; the median does meet it" if median <= GOAL_US else "; the median misses it too")
        )
    )

    lines = [
        f"metrics handler, {total_events} events ({args.repeat} x {args.events}, batches of {BATCH_SIZE}, "
        f"{len(bodies)} distinct samples round-robin), {pinning}",
        f"  per event (batch time / {BATCH_SIZE}): median {median:.1f} us, p95 {p95:.1f} us, "
        f"mean {mean:.1f} us",
        f"  per-repetition medians: {', '.join(f'{m:.1f}' for m in rep_medians)} us",
        f"  EMF/log output: {printed / total_events:.0f} bytes per event; batch item failures: {failures}",
        f"  goal <= {GOAL_US:.0f} us per event on one core: {verdict}",
        f"  wall time of the timed repetitions: {wall:.1f} s",
    ]
    print("\n".join(lines + breakdown))
    print("\n".join(f"  {k}: {v}" for k, v in info.items()))
    if failures:
        print(f"WARNING: {failures} records were reported as failed; the numbers include failure handling")

    if not args.no_write:
        profile_md = (
            "\nWhere the time goes (one extra pass under cProfile, not part of the numbers above):\n\n```\n"
            + "\n".join(breakdown)
            + "\n```\n"
            if breakdown
            else ""
        )
        pythonpath = os.environ.get("PYTHONPATH")
        command = " ".join(
            ([f"PYTHONPATH={pythonpath}"] if pythonpath else []) + [shown(sys.executable), *sys.argv]
        )
        layer_note = (
            f"- Dependencies and `batchpilot` from PYTHONPATH `{pythonpath}` (a built layer's python/).\n"
            if pythonpath
            else ""
        )
        body = f"""## Metrics handler: per-event cost (Python {platform.python_version()})

Run {now()} with `{command}`.

- What: `functions/metrics/app.py` imported as Lambda does (`app` from the function folder, the
  template's environment), called with {total_events} events: {args.repeat} repetitions of {args.events}
  after one warm-up pass, in SQS batches of {BATCH_SIZE}, bodies round-robin over the {len(bodies)}
  samples in `events/` (`events/ignored/` skipped).
{layer_note}- Its output (EMF blobs, warnings) goes to an in-memory sink: {printed / total_events:.0f} bytes
  per event.
- Per event = wall time of one batch / {BATCH_SIZE}. {pinning[0].upper() + pinning[1:]}.
- Lambda runs python3.13 on arm64 (Graviton); this run is {platform.python_version()} on
  {platform.machine()}: read it against the goal as an indication, not a Lambda measurement.

| statistic | us per event |
|---|---|
| median | {median:.1f} |
| p95 | {p95:.1f} |
| mean | {mean:.1f} |
| per-repetition medians | {", ".join(f"{m:.1f}" for m in rep_medians)} |

Goal: <= {GOAL_US:.0f} us per event on one core. **{verdict}.** Batch item failures: {failures}.
{profile_md}
Machine:

{machine_markdown(info)}
"""
        write_section(args.section, body)


if __name__ == "__main__":
    main()
