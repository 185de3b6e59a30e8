"""Ledger reconciliation of a fleet already running at the deploy: runs, AWS calls and CPU (embedded AWS).

``--queues`` job queues of ``--jobs`` RUNNABLE service jobs each exist before the ledger has any
record. Scheduled runs (:meth:`batchpilot.ledger.service.LedgerService.run`, the real adapters,
the default settings but ``--minutes`` as ``BATCHPILOT_LEDGER_RECONCILE_MINUTES`` and
``--pages`` as ``BATCHPILOT_LEDGER_LIST_PAGES_PER_RUN``) are made one simulated minute apart until
every queue has been reconciled once. Calls are counted with the embedded AWS's API journal; CPU
is ``time.process_time`` of the runs in this process (moto included: an upper bound of the
function's own work). moto's TransactWriteItems copies the table on each call, so the time grows
with the square of the jobs taken in: thousands of jobs take minutes. Prints one JSON object as
its last line; ``--write`` also records it in RESULTS.md.

    .venv/bin/python benchmarks/bench_reconcile.py [--queues 1] [--jobs 3000] [--pages 100] [--write]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

from _common import ROOT, now, pin_to_one_core, write_section

sys.path[0:0] = [str(ROOT / "layers" / "batchpilot"), str(ROOT / "local")]

from batchpilot_local.testing.harness import create_state_table  # noqa: E402

TABLE = "batchpilot-StateTable"
ACCOUNT = "111122223333"
T0 = datetime(2026, 11, 20, 22, 0, tzinfo=UTC)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=3000, help="RUNNABLE jobs per queue")
    parser.add_argument("--pages", type=int, default=100, help="BATCHPILOT_LEDGER_LIST_PAGES_PER_RUN")
    parser.add_argument("--minutes", type=int, default=15, help="BATCHPILOT_LEDGER_RECONCILE_MINUTES")
    parser.add_argument("--max-runs", type=int, default=500)
    parser.add_argument("--write", action="store_true", help="record the result in RESULTS.md")
    args = parser.parse_args()
    from batchpilot.io.batch import BatchLedgerClient
    from batchpilot.io.clients import client
    from batchpilot.io.dynamodb.ledger import LedgerStateStore
    from batchpilot.ledger.service import LedgerService
    from batchpilot.ledger.settings import LedgerSettings
    from batchpilot_local.embedded_aws import EmbeddedAws
    from batchpilot_local.testing.ledger import ListSink

    pinning = pin_to_one_core()
    names = [f"q{n:02d}" for n in range(args.queues)]
    jobs = [
        {
            "jobArn": f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/{name}-{i:05d}",
            "jobId": f"{name}-{i:05d}",
            "jobName": f"{name}-{i}",
            "jobQueue": name,
            "status": "RUNNABLE",
            "shareIdentifier": ["HIGHPRI", "LOWPRI"][i % 2],
            "createdAt": int((T0 - timedelta(hours=1)).timestamp() * 1000),
        }
        for name in names
        for i in range(args.jobs)
    ]
    with EmbeddedAws() as aws:
        create_state_table(aws.client("dynamodb"), TABLE)
        aws.seed(
            {
                "service_environments": [
                    {"name": "env", "capacityLimits": [{"maxCapacity": 64, "capacityUnit": "NUM_INSTANCES"}]}
                ],
                "job_queues": [
                    {"name": name, "serviceEnvironment": "env", "scheduling": "FAIR_SHARE"} for name in names
                ],
                "service_jobs": jobs,
            }
        )
        settings = LedgerSettings.from_environ(
            {
                "BATCHPILOT_STATE_TABLE": TABLE,
                "BATCHPILOT_LEDGER_LIST_PAGES_PER_RUN": str(args.pages),
                "BATCHPILOT_LEDGER_RECONCILE_MINUTES": str(args.minutes),
            }
        )
        service = LedgerService(
            settings,
            LedgerStateStore(client("dynamodb"), TABLE),
            BatchLedgerClient(client("batch")),
            ListSink(),
            lambda: T0,
        )
        aws.drain_journal()
        done: set[str] = set()
        calls: Counter[str] = Counter()
        per_run_cpu: list[float] = []
        per_run_pages: list[int] = []
        missing = 0
        while len(done) < len(names) and len(per_run_cpu) < args.max_runs:
            t = time.process_time()
            summary = service.run(T0 + timedelta(minutes=len(per_run_cpu)))
            per_run_cpu.append(time.process_time() - t)
            per_run_pages.append(summary.pages)
            done.update(summary.reconciled)
            missing += sum(v for k, v in summary.drift.items() if k.endswith(":missing"))
            calls.update(e.action for e in aws.drain_journal())
    runs = len(per_run_cpu)
    out = {
        "queues": args.queues,
        "jobs_per_queue": args.jobs,
        "pages_per_run": args.pages,
        "reconcile_minutes": args.minutes,
        "runs_needed": runs,
        "all_taken_in": missing == len(jobs) and len(done) == len(names),
        "jobs_taken_in": missing,
        "max_pages_in_a_run": max(per_run_pages),
        "aws_calls": sum(calls.values()),
        "calls": dict(sorted(calls.items())),
        "cpu_s_total": round(sum(per_run_cpu), 2),
        "cpu_s_max_run": round(max(per_run_cpu), 2),
        "cpu": pinning,
    }
    if args.write:
        body = (
            f"Ledger reconciliation of a pre-existing fleet ({now()}; `benchmarks/bench_reconcile.py "
            f"--queues {args.queues} --jobs {args.jobs} --pages {args.pages}`, embedded AWS, CPU "
            f"includes moto):\n\n```json\n{json.dumps(out, indent=1)}\n```\n"
        )
        write_section(f"reconcile-{args.queues}x{args.jobs}", body)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
