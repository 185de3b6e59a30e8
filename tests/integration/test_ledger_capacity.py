"""The capacity function reading the job ledger (embedded AWS): a run's AWS calls do not grow with
the number of RUNNABLE jobs, and jobs of unknown size count at the queue's mean, not at 1."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from batchpilot.ledger.model import AggregateKey, Delta, JobStatus
from batchpilot_local.embedded_aws import EmbeddedAws
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


def scheduled() -> dict[str, Any]:
    return scheduled_event(T0)


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
    result = app.lambda_handler(scheduled(), lambda_context)
    assert result["errors"] == []
    calls = Counter(e.action for e in aws.drain_journal())
    # No listing, no payload read, no snapshot: one Query per queue whatever its job count.
    assert calls["batch:ListServiceJobs"] == calls["batch:DescribeServiceJob"] == 0
    assert calls["batch:GetJobQueueSnapshot"] == 0
    assert calls["dynamodb:Query"] == len(queues)
    assert calls["batch:DescribeServiceEnvironments"] == 1
    metrics, errors = parse_output("capacity", capsys.readouterr().out)
    assert errors == []

    def gauge(name: str, **dims: str) -> float:
        (value,) = [
            m.value
            for m in metrics
            if m.name == name
            and {k: v for k, v in m.dimensions.items() if k not in ("service", "CapacityUnit")} == dims
        ]
        assert isinstance(value, float)
        return value

    assert gauge("RunnableJobs", JobQueue="q0") == 5_000
    assert gauge("RunnableInstanceDemand", JobQueue="q0") == 300 + 4_900 * 3  # unknown at the mean
    assert gauge("InstancesInUse", JobQueue="q0") == 30
    # The aggregates keep no per-job times: no made-up age (the ledger publishes OldestRunnableAge).
    assert not [
        m for m in metrics if m.name == "OldestRunnableJobAge" and m.dimensions.get("JobQueue") == "q0"
    ]
