"""The capacity function reading the job ledger (embedded AWS): a run's AWS calls do not grow with
the number of RUNNABLE jobs, and jobs of unknown size count at the queue's mean, not at 1."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from batchpilot.ledger.model import AggregateKey, Delta, JobStatus
from batchpilot.shared.observability import logger
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.lambda_runtime import FakeLambdaContext
from batchpilot_local.report import parse_output
from batchpilot_local.testing.harness import aws_with_state_table, load_app
from batchpilot_local.testing.ledger import seed_aggregates
from batchpilot_local.testing.samples import scheduled_event

TABLE = "batchpilot-StateTable"
ACCOUNT = "111122223333"
T0 = datetime(2026, 11, 20, 22, 0, tzinfo=UTC)
ARN = f"arn:aws:batch:us-east-1:{ACCOUNT}"


@pytest.fixture
def aws() -> Iterator[EmbeddedAws]:
    yield from aws_with_state_table(TABLE)


@pytest.fixture
def lambda_context() -> FakeLambdaContext:
    """A Lambda context of the capacity function: CapacityFunction's Timeout is 60 s (template.yaml)."""
    return FakeLambdaContext(function_name="batchpilot-capacity", memory_limit_in_mb=256, timeout_s=60)


def scheduled() -> dict[str, Any]:
    return scheduled_event(T0)


def _run(app: Any, lambda_context: Any) -> Any:
    """A scheduled run, its log lines on this test's stdout (Powertools keeps the stream it was
    created with)."""
    stream = logger.registered_handler
    previous = stream.setStream(sys.stdout)
    try:
        return app.lambda_handler(scheduled(), lambda_context)
    finally:
        stream.setStream(previous)


def test_capacity_run_reads_the_ledger_not_the_queues(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    queues = [f"q{i}" for i in range(4)]
    aws.seed(
        {
            "service_environments": [
                {"name": "env", "capacityLimits": [{"maxCapacity": 20_000, "capacityUnit": "NUM_INSTANCES"}]}
            ],
            "job_queues": [{"name": q, "serviceEnvironment": "env"} for q in queues],
        }
    )
    aggregates = {}
    for q in queues:
        # 5,000 RUNNABLE jobs, 100 of them sized (300 instances: mean 3); 10 running jobs of 3.
        aggregates[AggregateKey("env", q, "HIGHPRI", JobStatus.RUNNABLE)] = Delta(5_000, 100, 300)
        aggregates[AggregateKey("env", q, "HIGHPRI", JobStatus.RUNNING)] = Delta(10, 10, 30, 240)
    seed_aggregates(aws.client("dynamodb"), TABLE, aggregates)
    app = load_app(
        "capacity",
        {
            "POWERTOOLS_SERVICE_NAME": "batchpilot",
            "BATCHPILOT_STATE_TABLE": TABLE,
            "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS": f"{ARN}:service-environment/env",
            "BATCHPILOT_CAPACITY_JOB_QUEUES": ",".join(f"{ARN}:job-queue/{q}" for q in queues),
            "BATCHPILOT_CAPACITY_POLICY": json.dumps(
                {"service_environments": {"env": {"job_queues": queues, "max": 20_000}}}
            ),
        },
    )
    capsys.readouterr()
    aws.drain_journal()
    result = _run(app, lambda_context)
    assert result["errors"] == []
    calls = Counter(e.action for e in aws.drain_journal())
    # No listing, no payload read, no snapshot: one Query per queue whatever its job count.
    assert calls["batch:ListServiceJobs"] == calls["batch:DescribeServiceJob"] == 0
    assert calls["batch:GetJobQueueSnapshot"] == 0
    assert calls["dynamodb:Query"] == len(queues)
    assert calls["batch:DescribeServiceEnvironments"] == 1
    out = capsys.readouterr().out
    metrics, errors = parse_output("capacity", out)
    assert errors == []
    # What the run saw is in its log (the fleet's gauges are the ledger's): one line per queue.
    (q0,) = [
        line
        for line in map(json.loads, (t for t in out.splitlines() if t.startswith("{") and '"_aws"' not in t))
        if line.get("message") == "capacity sample" and line["job_queue"] == "q0"
    ]
    assert q0["runnable_jobs"] == 5_000
    assert q0["runnable_instances"] == 300 + 4_900 * 3  # unknown at the mean
    assert q0["instances_in_use"] == 30
    # The aggregates keep no per-job times: no made-up age (the ledger publishes OldestRunnableAge).
    assert q0.get("oldest_runnable_seconds") is None
    assert not [m for m in metrics if "JobQueue" in m.dimensions]


def test_quota_management_environment_is_sized_per_instance_type_from_the_ledger(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    p5, g5 = "ml.p5.48xlarge", "ml.g5.12xlarge"
    queues = ["quota-q0", "quota-q1"]
    aws.seed(
        {
            "service_environments": [
                {
                    "name": "quota-env",
                    "capacityLimits": [
                        {"maxCapacity": 4, "capacityUnit": p5},
                        {"maxCapacity": 4, "capacityUnit": g5},
                    ],
                }
            ],
            "job_queues": [{"name": q, "serviceEnvironment": "quota-env"} for q in queues],
            # The queues do hold RUNNABLE jobs: the run must not list them.
            "service_jobs": [
                {
                    "jobName": f"j{i}",
                    "jobQueue": queues[i % 2],
                    "status": "RUNNABLE",
                    "quotaShareName": "team-a",
                    "serviceRequestPayload": {
                        "TrainingJobName": f"j{i}",
                        "ResourceConfig": {"InstanceType": p5, "InstanceCount": 1},
                    },
                }
                for i in range(250)
            ],
        }
    )
    aggregates = {}
    for q in queues:
        # 1,000 RUNNABLE jobs, 10 sized: 10 p5 and 10 g5 (a mean of 1 of each per job); 2 running
        # jobs of 2 p5 and 1 g5 each.
        aggregates[AggregateKey("quota-env", q, "team-a", JobStatus.RUNNABLE)] = Delta(
            1_000, 10, 20, types=((g5, 10), (p5, 10))
        )
        aggregates[AggregateKey("quota-env", q, "team-a", JobStatus.RUNNING)] = Delta(
            2, 2, 6, types=((g5, 2), (p5, 4))
        )
    seed_aggregates(aws.client("dynamodb"), TABLE, aggregates, quota=True)
    app = load_app(
        "capacity",
        {
            "POWERTOOLS_SERVICE_NAME": "batchpilot",
            "BATCHPILOT_STATE_TABLE": TABLE,
            "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS": f"{ARN}:service-environment/quota-env",
            "BATCHPILOT_CAPACITY_JOB_QUEUES": ",".join(f"{ARN}:job-queue/{q}" for q in queues),
            "BATCHPILOT_CAPACITY_POLICY": json.dumps(
                {
                    "defaults": {"max_step": 100_000},
                    "service_environments": {
                        "quota-env": {
                            "job_queues": queues,
                            "units": {p5: {"max": 5_000}, g5: {"max": 1_500}},
                        }
                    },
                }
            ),
        },
    )
    capsys.readouterr()
    aws.drain_journal()
    result = _run(app, lambda_context)
    assert result["errors"] == [] and result["updated"] == ["quota-env"]
    journal = aws.drain_journal()
    calls = Counter(e.action for e in journal)
    assert calls["batch:ListServiceJobs"] == calls["batch:DescribeServiceJob"] == 0
    assert calls["batch:GetJobQueueSnapshot"] == 0
    assert calls["dynamodb:Query"] == len(queues)
    (env,) = aws.client("batch").describe_service_environments(serviceEnvironments=["quota-env"])[
        "serviceEnvironments"
    ]
    limits = {c["capacityUnit"]: c["maxCapacity"] for c in env["capacityLimits"]}
    # Per queue and type: 4 p5 / 2 g5 in use + 10 sized + 990 unsized at the queue's mean of
    # the type (14 p5 / 12 sized jobs, 12 g5 / 12 sized jobs), rounded up.
    p5_per_queue = 4 + 10 + math.ceil(990 * 14 / 12)
    g5_per_queue = 2 + 10 + 990
    assert limits == {p5: min(5_000, 2 * p5_per_queue), g5: min(1_500, 2 * g5_per_queue)}
    out = capsys.readouterr().out
    _, errors = parse_output("capacity", out)
    assert errors == []
    in_use = {
        line["capacity_unit"]: line["in_use"]
        for line in map(json.loads, (t for t in out.splitlines() if t.startswith("{") and '"_aws"' not in t))
        if line.get("message") == "capacity decision" and line["service_environment"] == "quota-env"
    }
    assert in_use == {p5: 8, g5: 4}
