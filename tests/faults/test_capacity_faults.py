"""No fan-out (docs/reliability.md): Queue Blocked events wake a service environment at most once
per minute across invocations, whatever DynamoDB does to the wake-up claim.

The real CapacityService, BatchCapacityClient and CapacityStateStore run against the embedded AWS
(the embedded Batch and moto's DynamoDB); each "invocation" is a new service with new clients, as a
new execution environment would be. Runs are counted from the requests (one
DescribeServiceEnvironments per run).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from datetime import UTC, datetime

import pytest
from batchpilot.capacity.service import BlockedRun, CapacityService, blocked_run
from batchpilot.capacity.settings import CapacitySettings
from batchpilot.io.batch import BatchCapacityClient
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.capacity import CapacityStateStore
from batchpilot.shared.events import parse_event
from batchpilot.shared.metrics import MetricPoint
from batchpilot.shared.own_events import OwnEvent
from batchpilot_local.testing.faults import FaultKind, HttpFaults
from batchpilot_local.testing.recovery import TABLE, harness
from batchpilot_local.testing.samples import sample

BLOCKED = "service-job-queue-blocked/misconfiguration-service-environment-max-resource"
WALL = datetime(2026, 11, 24, 6, 19, 5, tzinfo=UTC)
SETTINGS = CapacitySettings.from_environ(
    {
        "BATCHPILOT_STATE_TABLE": TABLE,
        "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS": "sm-training",
        "BATCHPILOT_CAPACITY_JOB_QUEUES": "sm-training-highpri",
        "BATCHPILOT_CAPACITY_POLICY": json.dumps(
            {"service_environments": {"sm-training": {"job_queues": ["sm-training-highpri"], "max": 64}}}
        ),
    }
)


class Kept:
    """Own events and gauges, kept (not under test here)."""

    def __init__(self) -> None:
        self.events: list[OwnEvent] = []
        self.points: list[MetricPoint] = []

    def publish(self, items: Iterable[OwnEvent] | Iterable[MetricPoint], resources: object = None) -> int:
        for item in items:
            (self.events if isinstance(item, OwnEvent) else self.points).append(item)
        return 1


def invocation(wall: datetime = WALL) -> CapacityService:
    """A new execution environment's capacity service (new clients, new demand memory)."""
    kept = Kept()
    return CapacityService(
        SETTINGS,
        BatchCapacityClient(client("batch")),
        CapacityStateStore(client("dynamodb"), TABLE),
        kept,
        kept,
        clock=lambda: wall,
    )


def blocked(n: int) -> BlockedRun:
    """The sample Queue Blocked event, as event ``n`` (its own id)."""
    event = copy.deepcopy(sample(BLOCKED))
    event["id"] = f"blocked-{n}"
    run = blocked_run(parse_event(event), SETTINGS.policy)
    assert isinstance(run, BlockedRun)
    return run


def runs(faults: HttpFaults) -> int:
    return faults.seen.count("batch:DescribeServiceEnvironments")


@pytest.mark.parametrize(
    "fault",
    [
        None,
        (FaultKind.THROTTLE, 2),  # retried by botocore
        (FaultKind.ACCEPTED_SERVER_ERROR, 1),  # the claim was written; its retry finds it its own
    ],
    ids=["no-fault", "throttled-claim", "accepted-claim-5xx"],
)
def test_ten_invocations_in_one_minute_wake_the_environment_once(fault: tuple[FaultKind, int] | None) -> None:
    with harness(), HttpFaults() as faults:
        if fault is not None:
            faults.add("dynamodb", "PutItem", fault[0], times=fault[1])
        reports = [invocation().run_blocked(blocked(n)) for n in range(10)]
        assert sum(r is not None for r in reports) == 1
        assert runs(faults) == 1
        # The next minute wakes it again.
        later = WALL.replace(minute=WALL.minute + 1)
        assert invocation(later).run_blocked(blocked(99)) is not None
        assert runs(faults) == 2


def test_a_failed_run_gives_its_claim_back_so_the_retried_record_runs() -> None:
    with harness(), HttpFaults() as faults:
        faults.add("batch", "DescribeServiceEnvironments", FaultKind.SERVER_ERROR, times=6)
        first = invocation().run_blocked(blocked(1))
        assert first is not None and first.errors  # every attempt failed
        again = invocation().run_blocked(blocked(1))  # SQS redelivers it
        assert again is not None and not again.errors
        assert invocation().run_blocked(blocked(2)) is None
