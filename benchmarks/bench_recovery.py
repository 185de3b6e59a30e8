"""Recovery: resubmissions per second against SubmitServiceJob's 5 calls/s, and AWS calls per
resubmission.

A fleet of failed service jobs (default 200) is recovered by the real Recoverer on the real
adapters against the embedded AWS (moto + the embedded Batch/SageMaker, which throttles
SubmitServiceJob at 5 calls per second like AWS). Two "execution environments" (the template's
MaximumConcurrency) take batches of 10 in parallel, each with its own submit pacer at
RecoverySubmitsPerSecond / 2.

- Paced run: the pacers sleep on a simulated clock shared with the embedded backend, so the rate
  is measured in simulated seconds from the ``createdAt`` of the new service jobs (what Batch
  records); ``--real-time`` sleeps for real instead (takes FLEET / rate seconds).
- Unpaced run: the same fleet with no pacing (rate limit off in the embedded backend too) and wall
  time: how many resubmissions per second the code itself can do, i.e. how far the limit, not
  the code, is the bound.
- AWS calls per resubmission, by operation, for a service job, a container job and a standalone
  training job, and for a duplicate delivery (read from the API journal).

    .venv/bin/python benchmarks/bench_recovery.py [--fleet 200] [--real-time]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from typing import Any

from _common import machine, machine_markdown, now, write_section
from batchpilot.recovery.service import Recoverer
from batchpilot_local.testing.recovery import (
    BUCKET,
    PREEMPTED,
    FakeTime,
    Harness,
    checkpoint_item,
    container_job_item,
    event_of,
    fleet,
    harness,
    max_in_window,
    run_fleet,
    service_job_item,
    training_job_item,
    world,
)
from batchpilot_local.testing.samples import sample

LIMIT = 5.0
RATE = 4.0  # RecoverySubmitsPerSecond default
CONCURRENCY = 2
BATCH = 10
TIMEOUT_S = 60.0


def recoverers(h: Harness, rate: float | None) -> list[Recoverer]:
    """One recoverer per execution environment, each pacing at ``rate`` (None: no pacing)."""
    return [h.recoverer(rate=rate) if rate else h.recoverer(rate=1e9) for _ in range(CONCURRENCY)]


def paced(size: int, real_time: bool) -> dict[str, Any]:
    checkpoint = f"s3://{BUCKET}/bench/"
    # the fleet is PREEMPTED jobs whose submitter set preemptionRetriesBeforeTermination: opt in
    with harness(
        world(checkpoints=[checkpoint_item(checkpoint, "2026-11-22T00:00:00Z")]),
        extend_preemption_retries=True,
    ) as h:
        if real_time:  # real clock everywhere
            h.time = _RealTime()  # type: ignore[assignment]
            h.aws.overlay.clock = time.time
            h.aws.batch.throttle.clock = time.monotonic
        bodies = fleet(h, size, checkpoint, "be7c0100")
        before = set(h.aws.batch.service_jobs)
        clock = h.time.monotonic
        started = clock()
        done, retried = run_fleet(
            recoverers(h, RATE / CONCURRENCY), bodies, clock, batch_size=BATCH, timeout_s=TIMEOUT_S
        )
        elapsed = clock() - started
        created = [int(j.detail["createdAt"]) for k, j in h.aws.batch.service_jobs.items() if k not in before]
        throttled = sum(1 for e in h.calls("batch:SubmitServiceJob") if e.error_code or e.retries)
        span = (max(created) - min(created)) / 1000 if len(created) > 1 else 0.0
        return {
            "resubmitted": done,
            "handed_back": retried,
            "elapsed_s": elapsed,
            "rate": done / elapsed if elapsed else float("inf"),
            "rate_created": (len(created) - 1) / span if span else float("inf"),
            "max_per_second": max_in_window(created),
            "throttled": throttled,
        }


class _RealTime(FakeTime):
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        self.slept += seconds
        time.sleep(seconds)


def unpaced(size: int) -> dict[str, Any]:
    checkpoint = f"s3://{BUCKET}/bench/"
    # the fleet is PREEMPTED jobs whose submitter set preemptionRetriesBeforeTermination: opt in
    with harness(
        world(checkpoints=[checkpoint_item(checkpoint, "2026-11-22T00:00:00Z")]),
        extend_preemption_retries=True,
    ) as h:
        h.aws.set_submit_rate(None)
        bodies = fleet(h, size, checkpoint, "be7c0200")
        started = time.perf_counter()
        done, _ = run_fleet(
            recoverers(h, None), bodies, time.monotonic, batch_size=BATCH, timeout_s=TIMEOUT_S
        )
        elapsed = time.perf_counter() - started
        return {"resubmitted": done, "elapsed_s": elapsed, "rate": done / elapsed}


def calls_per_resubmission() -> dict[str, Counter[str]]:
    ckpt = f"s3://{BUCKET}/calls/"
    items = {
        "service_jobs": [service_job_item(PREEMPTED, checkpoint_uri=ckpt)],
        "jobs": [container_job_item("batch-job/failed-spot-reclaim")],
        "training_jobs": [training_job_item("sagemaker/failed-capacity-error", checkpoint_uri=ckpt)],
        "checkpoints": [checkpoint_item(ckpt, "2026-11-22T00:00:00Z")],
    }
    out: dict[str, Counter[str]] = {}
    with harness(world(**items)) as h:
        for label, name in (
            ("service job (SubmitServiceJob)", PREEMPTED),
            ("container job (SubmitJob)", "batch-job/failed-spot-reclaim"),
            ("training job (CreateTrainingJob)", "sagemaker/failed-capacity-error"),
            ("duplicate delivery", "batch-job/failed-spot-reclaim"),
            ("skip (user-stopped, no Describe)", "sagemaker/stopped-by-user"),
        ):
            h.aws.drain_journal()
            h.recoverer().handle(event_of(sample(name)))
            out[label] = Counter(e.action for e in h.aws.drain_journal())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleet", type=int, default=200)
    parser.add_argument("--real-time", action="store_true", help="sleep for real (slow)")
    parser.add_argument("--section", default="recovery")
    args = parser.parse_args()

    info = machine()
    pace = paced(args.fleet, args.real_time)
    raw = unpaced(args.fleet)
    calls = calls_per_resubmission()
    clock = "wall clock" if args.real_time else "simulated clock (pacer sleeps advance it)"
    lines = [
        f"## Recovery: resubmissions per second and AWS calls per resubmission ({sys.version.split()[0]})",
        "",
        f"Run {now()} with `.venv/bin/python benchmarks/bench_recovery.py --fleet {args.fleet}"
        + (" --real-time" if args.real_time else "")
        + "`.",
        "",
        f"- Fleet reclaim: {args.fleet} failed service jobs, {CONCURRENCY} environments x batches of "
        f"{BATCH}, pacer {RATE / CONCURRENCY:g}/s each (RecoverySubmitsPerSecond={RATE:g}); "
        f"embedded Batch throttles SubmitServiceJob at {LIMIT:g}/s; {clock}.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| resubmitted / handed back to SQS | {pace['resubmitted']} / {pace['handed_back']} |",
        f"| resubmissions per second (whole run) | {pace['rate']:.2f} (limit {LIMIT:g}) |",
        f"| resubmissions per second (first to last createdAt) | {pace['rate_created']:.2f} |",
        f"| most SubmitServiceJob in any 1 s window | {pace['max_per_second']} |",
        f"| throttled or retried SubmitServiceJob calls | {pace['throttled']} |",
        f"| unpaced: resubmissions per wall second, rate limit off | {raw['rate']:.1f} "
        f"({raw['resubmitted']} in {raw['elapsed_s']:.1f} s) |",
        "",
        "AWS calls per decision (API journal):",
        "",
        "| case | calls | by operation |",
        "|---|---|---|",
    ]
    for label, counter in calls.items():
        ops = ", ".join(f"{op} {n}" for op, n in sorted(counter.items()))
        lines.append(f"| {label} | {sum(counter.values())} | {ops} |")
    lines += ["", "Machine:", "", machine_markdown(info)]
    body = "\n".join(lines)
    print(body)
    write_section(args.section, body)


if __name__ == "__main__":
    main()
