"""GPU activity check: AWS calls and run time per scheduled run for 10, 100 and 1,000 RUNNING
training jobs.

The real :class:`batchpilot.gpu.service.GpuActivityService` with its real adapters
(``CloudWatchSeries`` on GetMetricData, ``GpuEpisodeStore`` on DynamoDB) runs against moto; the
ledger's records are in memory (their reads, ``Q + 1`` Queries and ``ceil(R / 100)``
BatchGetItem, are the ledger store's and are not timed here). Each job is a standalone training
job of ``--instances`` ml.p4d.24xlarge hosts with ``--minutes`` of datapoints at 3 % (idle, so
the first run past the window claims and publishes each job's episode, the next run finds them
claimed). Calls are counted with a botocore ``before-call`` hook; run time is wall time in this
process (against AWS each call is a round trip: read the call counts as the cost).

GetMetricData is answered by botocore's ``Stubber`` (``--cloudwatch stub``, the default: botocore's
documented seam, the same datapoints as a response of the API's shape) or by moto
(``--cloudwatch moto``). A cProfile of the 100-job run against moto put 70 of its 73 s in moto's
``CloudWatchBackend.get_metric_data`` (it filters every stored datapoint for each query and
period: 48,800 list scans), 1.3 s in the check itself: moto's time measures moto, not batchpilot.

    .venv/bin/python benchmarks/bench_gpu.py [--jobs 10 100 1000] [--instances 2] [--minutes 50]
        [--cloudwatch stub|moto]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from _common import ROOT, machine, machine_markdown, now, write_section

sys.path[0:0] = [str(ROOT / "layers" / "batchpilot"), str(ROOT / "local")]

STARTED = datetime(2026, 11, 20, 21, 0, tzinfo=UTC)


def _answers(jobs: int, instances: int, minutes: int) -> list[dict[str, Any]]:
    """GetMetricData responses of one run, request by request (500 queries each, the order
    :func:`batchpilot.gpu.policy.queries` asks them: per host GPU then GPU memory), each GPU query
    answered with the host's ``minutes`` datapoints, the memory queries with none."""
    from batchpilot.io.cloudwatch import MAX_QUERIES

    stamps = [STARTED + timedelta(minutes=15 + m) for m in range(minutes)]
    total = 2 * jobs * instances
    out = []
    for first in range(0, total, MAX_QUERIES):
        results = []
        for n in range(first, min(first + MAX_QUERIES, total)):
            gpu = n % 2 == 0
            results.append(
                {
                    "Id": f"q{n}",
                    "Label": "GPUUtilization" if gpu else "GPUMemoryUtilization",
                    "Timestamps": stamps if gpu else [],
                    "Values": [24.0] * len(stamps) if gpu else [],
                    "StatusCode": "Complete",
                }
            )
        out.append({"MetricDataResults": results, "Messages": []})
    return out


def measure(jobs: int, instances: int, minutes: int, cloudwatch_mode: str = "stub") -> dict[str, Any]:
    import boto3
    from batchpilot.gpu.service import GpuActivityService
    from batchpilot.io.cloudwatch import CloudWatchSeries
    from batchpilot.io.dynamodb.gpu import GpuEpisodeStore
    from batchpilot.ledger.model import JobDetails, JobStatus, LedgerJob
    from batchpilot.shared.classification import JobKind
    from batchpilot_local.testing.harness import create_state_table
    from batchpilot_local.testing.ledger import ListPublisher, ListSink, MemoryLedgerStore
    from botocore.stub import Stubber
    from moto import mock_aws

    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        calls: Counter[str] = Counter()
        session.events.register("before-call", lambda model, **_: calls.update([model.name]))
        dynamodb, cloudwatch = session.client("dynamodb"), session.client("cloudwatch")
        create_state_table(dynamodb, "StateTable")
        store = MemoryLedgerStore()
        datums: list[dict[str, Any]] = []
        for j in range(jobs):
            name = f"bench-{j}"
            details = JobDetails(instance_type="ml.p4d.24xlarge", instances=instances, name=name, sized=True)
            arn = f"arn:aws:sagemaker:us-east-1:111122223333:training-job/{name}"
            store.jobs[arn] = LedgerJob(
                arn, JobKind.TRAINING_JOB, details, JobStatus.RUNNING, STARTED, attempt_started_at=STARTED
            )
            for n in range(1, instances + 1):
                for m in range(minutes):
                    datums.append(
                        {
                            "MetricName": "GPUUtilization",
                            "Dimensions": [{"Name": "Host", "Value": f"{name}/algo-{n}"}],
                            "Timestamp": STARTED + timedelta(minutes=15 + m),
                            "Value": 24.0,
                        }
                    )
        stubber = Stubber(cloudwatch)
        if cloudwatch_mode == "moto":
            for first in range(0, len(datums), 1000):
                cloudwatch.put_metric_data(
                    Namespace="/aws/sagemaker/TrainingJobs", MetricData=datums[first : first + 1000]
                )
        else:
            for _ in range(2):  # the two runs
                for answer in _answers(jobs, instances, minutes):
                    stubber.add_response("get_metric_data", answer)
            stubber.activate()
        service = GpuActivityService(
            jobs=store,
            names=None,  # type: ignore[arg-type]  # standalone training jobs: never asked
            metrics=CloudWatchSeries(cloudwatch),
            episodes=GpuEpisodeStore(dynamodb, "StateTable"),
            sink=ListSink(),
            publisher=ListPublisher(),
        )
        out: dict[str, Any] = {"jobs": jobs, "hosts": jobs * instances}
        for label, at in (("first idle run", 46), ("next run", 47)):
            calls.clear()
            started = time.perf_counter()
            summary = service.run(STARTED + timedelta(minutes=15 + at))
            elapsed = time.perf_counter() - started
            # The Stubber answers at before-call, ahead of the counting hook: GetMetricData calls
            # are the adapter's own count (every page it requested).
            calls["GetMetricData"] = summary.requests
            out[label] = {
                "seconds": elapsed,
                "calls": dict(calls),
                "published": summary.idle,
                "queries": summary.queries,
            }
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--minutes", type=int, default=50)
    parser.add_argument("--cloudwatch", choices=["stub", "moto"], default="stub")
    args = parser.parse_args()
    rows = []
    for jobs in args.jobs:
        result = measure(jobs, args.instances, args.minutes, args.cloudwatch)
        first, steady = result["first idle run"], result["next run"]
        rows.append(
            f"| {jobs:,} | {result['hosts']:,} | {first['queries']:,} | "
            f"{steady['calls'].get('GetMetricData', 0)} | {sum(steady['calls'].values())} | "
            f"{steady['seconds'] * 1000:,.0f} ms | {sum(first['calls'].values())} "
            f"({first['published']} published) | {first['seconds'] * 1000:,.0f} ms |"
        )
        print(rows[-1], flush=True)
    table = "\n".join(
        [
            "| running jobs | hosts | GetMetricData queries | GetMetricData calls | AWS calls, steady run |"
            " steady run time | AWS calls, run that claims every job | its time |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
        ]
    )
    answered = f"GetMetricData answered by {args.cloudwatch}"
    body = f"Run {now()}, {answered}, {machine_markdown(machine())}\n\n{table}\n"
    write_section("gpu", body)
    print(table)


if __name__ == "__main__":
    main()
