"""Ledger function: AWS calls and handler CPU per job event (embedded AWS).

``--jobs`` service jobs each go RUNNABLE → RUNNING → SUCCEEDED through the real handler
(``functions/ledger/app.py``), one SQS batch of 10 events at a time, plus one duplicate of every
event. ``--order status`` (the default) delivers every job's RUNNABLE, then every RUNNING, then
every SUCCEEDED (each batch holds 10 different jobs); ``--order job`` delivers each job's events
one after the other (a batch holds 3 or 4 jobs, several events each, as when a job's state
changes arrive seconds apart). Calls are counted with the embedded AWS's API journal; CPU is
``time.process_time`` of the handler in this process (moto included, so an upper bound of the
function's own work). Prints one JSON object as its last line. moto's TransactWriteItems copies
the table on each call, so keep ``--jobs`` in the hundreds.

    .venv/bin/python benchmarks/bench_ledger.py [--jobs 200] [--order status|job]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

from _common import ROOT, pin_to_one_core

sys.path[0:0] = [str(ROOT / "layers" / "batchpilot"), str(ROOT / "local")]

from batchpilot_local.lambda_runtime import FakeLambdaContext  # noqa: E402
from batchpilot_local.testing.harness import create_state_table, load_app, sqs_event  # noqa: E402
from batchpilot_local.testing.samples import service_job  # noqa: E402

TABLE = "batchpilot-StateTable"
ACCOUNT = "111122223333"
T0 = datetime(2026, 11, 20, 22, 0, tzinfo=UTC)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--order", choices=["status", "job"], default="status")
    args = parser.parse_args()
    from batchpilot_local.embedded_aws import EmbeddedAws

    pinning = pin_to_one_core()
    arn = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/"
    payload = {
        "TrainingJobName": "t",
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2},
    }
    with EmbeddedAws() as aws:
        create_state_table(aws.client("dynamodb"), TABLE)
        aws.seed(
            {
                "service_environments": [
                    {"name": "env", "capacityLimits": [{"maxCapacity": 64, "capacityUnit": "NUM_INSTANCES"}]}
                ],
                "job_queues": [{"name": "q", "serviceEnvironment": "env", "scheduling": "FAIR_SHARE"}],
                "service_jobs": [
                    {
                        "jobArn": f"{arn}j{i}",
                        "jobId": f"j{i}",
                        "jobName": f"j{i}",
                        "jobQueue": "q",
                        "status": "RUNNABLE",
                        "shareIdentifier": "HIGHPRI",
                        "serviceRequestPayload": payload,
                    }
                    for i in range(args.jobs)
                ],
            }
        )
        os.environ.update({"BATCHPILOT_STATE_TABLE": TABLE, "POWERTOOLS_LOG_LEVEL": "WARNING"})
        handler = load_app("ledger")
        lives: list[list[str]] = [[] for _ in range(args.jobs)]
        for step, status in enumerate(("RUNNABLE", "RUNNING", "SUCCEEDED")):
            for i in range(args.jobs):
                event = service_job(
                    status, jobArn=f"{arn}j{i}", jobId=f"j{i}", jobQueue="q", shareIdentifier="HIGHPRI"
                )
                event["time"] = (T0 + timedelta(minutes=step)).isoformat()
                lives[i].append(json.dumps(event))
        if args.order == "job":
            bodies = [body for life in lives for body in life]
        else:
            bodies = [life[step] for step in range(3) for life in lives]
        bodies += bodies  # every event delivered twice
        aws.drain_journal()
        real, sys.stdout = sys.stdout, io.StringIO()
        cpu = 0.0
        try:
            for start in range(0, len(bodies), 10):
                t = time.process_time()
                result = handler.lambda_handler(
                    sqs_event(bodies[start : start + 10], "q"),
                    FakeLambdaContext("batchpilot-ledger", 256, 60),
                )
                cpu += time.process_time() - t
                assert result == {"batchItemFailures": []}, result
        finally:
            sys.stdout = real
        calls = Counter(e.action for e in aws.drain_journal())
    events = len(bodies)
    out = {
        "events": events,
        "jobs": args.jobs,
        "order": args.order,
        "aws_calls_per_event": round(sum(calls.values()) / events, 3),
        "calls": dict(sorted(calls.items())),
        "handler_cpu_ms_per_event": round(1000 * cpu / events, 3),
        "cpu": pinning,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
