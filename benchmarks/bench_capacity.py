"""Capacity function: AWS calls per run and run time for 1 job queue x 5,000 RUNNABLE jobs.

The real handler (``functions/capacity/app.py``) runs against the embedded AWS (moto plus the embedded
Batch service-job backend) with one managed service environment fed by one job queue that holds
``--jobs`` RUNNABLE service jobs. Calls are counted with the embedded AWS's API journal, per run:

1. first run ever (empty payload cache) with the default DescribeServiceJob budget (300 per run);
2. the runs after it in the same Lambda instance until every payload is cached (how many runs);
3. a warm run (same Lambda instance, every payload in memory): ``--runs`` repetitions, median time;
4. a cold start (new Lambda instance): payloads come back from DynamoDB in one Query.

Run time is wall time of ``lambda_handler`` in this process. Against AWS each call is a network
round trip: read the call counts, not the local milliseconds, as the cost there. Reported, never
asserted.

    .venv/bin/python benchmarks/bench_capacity.py [--jobs 5000] [--runs 7]

With ``--queues Q --jobs-per-queue J --environments E`` it measures the capacity function reading
the job ledger instead: E service environments fed by Q job queues (round-robin), each queue with J
RUNNABLE jobs in the ledger's aggregates (1 in 100 of known size, the rest counted at the queue's
mean), and prints as its last line one JSON object (``aws_calls_first_run``, ``aws_calls_steady``,
``handler_cpu_s_steady``, ``runs_to_warm``, the steady run's calls by operation, and the
reconciliation listing calls the ledger function makes per queue and interval). With ``--quota`` the
environments are quota-management ones (one capacity limit per instance type: ml.p5.48xlarge and
ml.g5.12xlarge), the shares are quota shares, the aggregates carry their per-instance-type counters,
and the queues also hold their RUNNABLE jobs in AWS Batch (each 1-4 instances of one of the two
types), so a run that lists them pays for every page.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

from _common import ROOT, machine, machine_markdown, now, pin_to_one_core, write_section

sys.path[0:0] = [str(ROOT / "layers" / "batchpilot"), str(ROOT / "local")]

from batchpilot_local.lambda_runtime import FakeLambdaContext  # noqa: E402
from batchpilot_local.testing.harness import create_state_table, load_app  # noqa: E402
from batchpilot_local.testing.samples import scheduled_event  # noqa: E402

TABLE = "batchpilot-StateTable"
ACCOUNT = "111122223333"
T0 = datetime(2026, 11, 20, 22, 0, tzinfo=UTC)


def _env() -> dict[str, str]:
    arn = f"arn:aws:batch:us-east-1:{ACCOUNT}"
    return {
        "POWERTOOLS_SERVICE_NAME": "batchpilot",
        "POWERTOOLS_METRICS_NAMESPACE": "BatchPilot",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "BATCHPILOT_STATE_TABLE": TABLE,
        "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS": f"{arn}:service-environment/bench-env",
        "BATCHPILOT_CAPACITY_JOB_QUEUES": f"{arn}:job-queue/bench-q",
        "BATCHPILOT_CAPACITY_POLICY": json.dumps(
            {"service_environments": {"bench-env": {"job_queues": ["bench-q"], "max": 20_000}}}
        ),
    }


def _load() -> ModuleType:
    os.environ.update(_env())  # as Lambda sets it, for the whole run
    return load_app("capacity")


def _event(minute: int) -> dict[str, Any]:
    return scheduled_event(T0 + timedelta(minutes=minute), {})


def _world(jobs: int) -> dict[str, Any]:
    demand = sum(1 + i % 4 for i in range(jobs))  # instances the RUNNABLE jobs ask for
    return {
        "service_environments": [
            # The limit already fits the demand (sum of 1 + i % 4 = 12,500): runs measure sampling.
            {
                "name": "bench-env",
                "capacityLimits": [{"maxCapacity": demand, "capacityUnit": "NUM_INSTANCES"}],
            }
        ],
        "job_queues": [{"name": "bench-q", "serviceEnvironment": "bench-env"}],
        "service_jobs": [
            {
                "jobName": f"job-{i}",
                "jobQueue": "bench-q",
                "status": "RUNNABLE",
                "createdAt": int((T0 - timedelta(seconds=i)).timestamp() * 1000),
                "serviceRequestPayload": {
                    "TrainingJobName": f"job-{i}",
                    "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1 + i % 4},
                },
            }
            for i in range(jobs)
        ],
    }


def _run(aws: Any, handler: ModuleType, minute: int, sink: Any) -> tuple[float, Counter[str], Any]:
    aws.drain_journal()
    real = sys.stdout
    sys.stdout = sink  # EMF and logs: not part of what is measured here
    try:
        start = time.perf_counter()
        result = handler.lambda_handler(_event(minute), FakeLambdaContext("batchpilot-capacity", 256, 60))
        elapsed = time.perf_counter() - start
    finally:
        sys.stdout = real
    if result["errors"]:
        raise SystemExit(f"run failed: {result['errors']}")
    return elapsed, Counter(e.action for e in aws.drain_journal()), result


def _calls(counter: Counter[str]) -> str:
    return (
        ", ".join(f"{op.split(':', 1)[1]} {n}" for op, n in sorted(counter.items()))
        + f" (total {sum(counter.values())})"
    )


QUOTA_TYPES = ("ml.g5.12xlarge", "ml.p5.48xlarge")


def _fleet_env(queues: int, environments: int, quota: bool = False) -> dict[str, str]:
    arn = f"arn:aws:batch:us-east-1:{ACCOUNT}"
    by_env: dict[str, list[str]] = {f"env-{e}": [] for e in range(environments)}
    for q in range(queues):
        by_env[f"env-{q % environments}"].append(f"q-{q}")
    bounds: dict[str, Any] = (
        {"units": {t: {"max": 100_000} for t in QUOTA_TYPES}} if quota else {"max": 100_000}
    )
    policy = {"service_environments": {e: {"job_queues": qs, **bounds} for e, qs in by_env.items()}}
    return {
        **_env(),
        "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS": ",".join(
            f"{arn}:service-environment/{e}" for e in by_env
        ),
        "BATCHPILOT_CAPACITY_JOB_QUEUES": ",".join(
            f"{arn}:job-queue/{q}" for qs in by_env.values() for q in qs
        ),
        "BATCHPILOT_CAPACITY_POLICY": json.dumps(policy),
    }


def _fleet(args: argparse.Namespace) -> None:
    """Capacity runs reading the job ledger at ``--queues`` x ``--jobs-per-queue``; JSON last line."""
    import io

    from batchpilot.ledger.model import AggregateKey, Delta, JobStatus
    from batchpilot_local.embedded_aws import EmbeddedAws
    from batchpilot_local.testing.ledger import seed_aggregates

    pinning = pin_to_one_core()
    queues, jobs, environments, quota = args.queues, args.jobs_per_queue, args.environments, args.quota
    units = QUOTA_TYPES if quota else ("NUM_INSTANCES",)
    shares = (
        (("team-a", 2), ("team-b", 3), ("team-c", 5))
        if quota
        else (("HIGHPRI", 2), ("MIDPRI", 3), ("LOWPRI", 5))
    )
    sink = io.StringIO()
    with EmbeddedAws() as aws:
        create_state_table(aws.client("dynamodb"), TABLE)
        world: dict[str, Any] = {
            "service_environments": [
                {
                    "name": f"env-{e}",
                    "capacityLimits": [{"maxCapacity": 100_000, "capacityUnit": unit} for unit in units],
                }
                for e in range(environments)
            ],
            "job_queues": [
                {"name": f"q-{q}", "serviceEnvironment": f"env-{q % environments}"} for q in range(queues)
            ],
        }
        if quota:  # the jobs the aggregates count, also in AWS Batch: what a listing pays for
            world["service_jobs"] = [
                {
                    "jobName": f"q{q}-{i}",
                    "jobQueue": f"q-{q}",
                    "status": "RUNNABLE",
                    "quotaShareName": shares[i % 3][0],
                    "createdAt": int((T0 - timedelta(seconds=i)).timestamp() * 1000),
                    "serviceRequestPayload": {
                        "TrainingJobName": f"q{q}-{i}",
                        "ResourceConfig": {"InstanceType": QUOTA_TYPES[i % 2], "InstanceCount": 1 + i % 4},
                    },
                }
                for q in range(queues)
                for i in range(jobs)
            ]
        aws.seed(world)
        sized = max(1, jobs // 100)
        aggregates = {}
        for q in range(queues):
            env = f"env-{q % environments}"
            for share, part in shares:
                count = jobs * part // 10
                known = sized * part // 10
                # Quota management: the sized jobs' instances per type, one of each type per job.
                typed = tuple((t, known) for t in QUOTA_TYPES) if quota else ()
                aggregates[AggregateKey(env, f"q-{q}", share, JobStatus.RUNNABLE)] = Delta(
                    count, known, known * 2, types=typed
                )
                aggregates[AggregateKey(env, f"q-{q}", share, JobStatus.RUNNING)] = Delta(
                    part, part, part * 2, part * 16, types=(("ml.p5.48xlarge", part * 2),) if quota else ()
                )
        seed_aggregates(aws.client("dynamodb"), TABLE, aggregates, quota=quota)
        os.environ.update(_fleet_env(queues, environments, quota))
        handler = load_app("capacity")
        _, first_calls, _ = _run(aws, handler, 0, sink)
        # Warm: the first run that reads no payload (DescribeServiceJob); None if none of the
        # measured runs is (a listing run whose payload memory cannot hold every job never is).
        warm_at: int | None = None if first_calls["batch:DescribeServiceJob"] else 1
        cpu: list[float] = []  # of the warm runs (of every run when none is warm)
        warming: list[float] = []
        steady_calls: Counter[str] = Counter()
        for minute in range(1, args.runs + 1):
            start = time.process_time()
            _, steady_calls, _ = _run(aws, handler, minute, sink)
            if warm_at is None and not steady_calls["batch:DescribeServiceJob"]:
                warm_at = minute + 1
            (warming if warm_at is None else cpu).append(time.process_time() - start)
        cpu = cpu or warming
    listing = queues * ((jobs + 99) // 100 + 5)  # ListServiceJobs pages: RUNNABLE + 5 other statuses
    result = {
        "queues": queues,
        "jobs_per_queue": jobs,
        "environments": environments,
        "quota_management": quota,
        "source": "ledger",
        "aws_calls_first_run": sum(first_calls.values()),
        "aws_calls_steady": sum(steady_calls.values()),
        "aws_calls_steady_by_operation": dict(sorted(steady_calls.items())),
        "handler_cpu_s_steady": round(statistics.median(cpu), 4),
        # Reading the ledger, unknown sizes count at the queue's mean from the first run: 1.
        "runs_to_warm": warm_at,
        "ledger_reconcile_listing_calls_per_interval": listing,
        "cpu": pinning,
    }
    print(
        f"capacity function reading the job ledger: {queues} queues x {jobs} RUNNABLE jobs, "
        f"{environments} {'quota-management ' if quota else ''}environments: "
        f"{_calls(steady_calls)} per steady run"
    )
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, help="job queues (with the job ledger; JSON last line)")
    parser.add_argument("--jobs-per-queue", type=int, default=5000, help="RUNNABLE jobs per queue (--queues)")
    parser.add_argument("--environments", type=int, default=1, help="service environments (--queues)")
    parser.add_argument(
        "--quota",
        action="store_true",
        help="quota-management environments (a limit per instance type); jobs also in Batch (--queues)",
    )
    parser.add_argument("--jobs", type=int, default=5000, help="RUNNABLE jobs in the queue")
    parser.add_argument("--runs", type=int, default=7, help="warm runs to time")
    parser.add_argument("--section", default="capacity", help="RESULTS.md section key to replace")
    parser.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    args = parser.parse_args()
    if args.queues:
        _fleet(args)
        return

    import io

    from batchpilot_local.embedded_aws import EmbeddedAws

    pinning = pin_to_one_core()
    info = machine()
    sink = io.StringIO()
    with EmbeddedAws() as aws:
        create_state_table(aws.client("dynamodb"), TABLE)
        aws.seed(_world(args.jobs))
        handler = _load()
        minute = 0
        first_time, first_calls, _ = _run(aws, handler, minute, sink)
        filling = []
        while True:
            minute += 1
            elapsed, calls, _ = _run(aws, handler, minute, sink)
            if not calls["batch:DescribeServiceJob"]:
                break
            filling.append((elapsed, calls))
        warm: list[float] = []
        warm_calls: Counter[str] = Counter()
        for _ in range(args.runs):
            minute += 1
            elapsed, warm_calls, _ = _run(aws, handler, minute, sink)
            warm.append(elapsed)
        minute += 1
        cold_time, cold_calls, _ = _run(aws, _load(), minute, sink)

    runs_to_fill = 1 + len(filling)
    first = f"{first_time * 1000:.0f} ms"
    warm_median = f"{statistics.median(warm) * 1000:.0f} ms"
    cold = f"{cold_time * 1000:.0f} ms"
    lines = [
        f"capacity function, 1 job queue x {args.jobs} RUNNABLE jobs, {pinning}",
        f"  first run (empty cache, describe budget 300): {first}; calls: {_calls(first_calls)}",
        f"  payload cache complete after {runs_to_fill} runs (300 payloads read per run)",
        f"  warm run (same instance), median of {args.runs}: {warm_median} "
        f"(min {min(warm) * 1000:.0f}, max {max(warm) * 1000:.0f}); calls: {_calls(warm_calls)}",
        f"  cold start (new instance, cache in DynamoDB): {cold}; calls: {_calls(cold_calls)}",
    ]
    print("\n".join(lines))
    if args.no_write:
        return
    body = f"""## Capacity function: 1 job queue x {args.jobs} RUNNABLE jobs (Python {sys.version.split()[0]})

Run {now()} with `.venv/bin/python benchmarks/bench_capacity.py`.

- What: `functions/capacity/app.py` against the embedded AWS (moto + embedded Batch), one service
  environment fed by one job queue with {args.jobs} RUNNABLE service jobs (1-4 instances each).
  AWS calls counted with the embedded AWS's API journal; time is the handler's wall time in this
  process ({pinning}). Against AWS each call is a network round trip: the call counts are the cost.

| run | AWS calls | time |
|---|---|---|
| first run ever (empty payload cache, DescribeServiceJob budget 300) | {_calls(first_calls)} | {first} |
| warm (same Lambda instance, payloads known), median of {args.runs} | {_calls(warm_calls)} | {warm_median} |
| cold start (new instance, payloads from the DynamoDB cache) | {_calls(cold_calls)} | {cold} |

Every payload is cached after {runs_to_fill} runs (300 `DescribeServiceJob` per run); from then on a
run reads no payload again. `ListServiceJobs` returns at most 100 jobs per page (the API maximum),
so listing the queue is {(args.jobs + 99) // 100} of the calls and the rest is a constant handful.

Machine:

{machine_markdown(info)}
"""
    write_section(args.section, body)


if __name__ == "__main__":
    main()
