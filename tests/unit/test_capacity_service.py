"""The capacity service with in-memory ports: which events call for a run, the run's time and its
gauge timestamps (the injected wall clock), and what a run publishes and reports."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from batchpilot.capacity.model import (
    NUM_INSTANCES,
    CapacityLimit,
    QueueSnapshot,
    RunnableJob,
    ServiceEnvironment,
)
from batchpilot.capacity.policy import EnvironmentState
from batchpilot.capacity.service import (
    BlockedRun,
    CapacityService,
    Trigger,
    blocked_run,
    scheduled_time,
)
from batchpilot.capacity.settings import CapacitySettings
from batchpilot.shared.events import parse_event
from batchpilot.shared.metrics import MetricPoint
from batchpilot.shared.own_events import OwnEvent
from batchpilot.shared.records import Outcome, Rejected
from batchpilot_local.testing.samples import sample

NOW = datetime(2026, 11, 20, 22, 0, tzinfo=UTC)
BLOCKED = "service-job-queue-blocked/misconfiguration-service-environment-max-resource"
SETTINGS = CapacitySettings.from_environ(
    {
        "BATCHPILOT_STATE_TABLE": "batchpilot-StateTable",
        "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS": "sm-training",
        "BATCHPILOT_CAPACITY_JOB_QUEUES": "sm-training-highpri",
        "BATCHPILOT_CAPACITY_POLICY": json.dumps(
            {"service_environments": {"sm-training": {"job_queues": ["sm-training-highpri"], "max": 64}}}
        ),
    }
)


class Batch:
    """One ENABLED/VALID environment with limit 8 and one RUNNABLE job created an hour before NOW."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, list[CapacityLimit]]] = []

    def describe_environments(self, names: Sequence[str]) -> dict[str, ServiceEnvironment]:
        env = ServiceEnvironment(
            "sm-training", "arn:env", "ENABLED", "VALID", (CapacityLimit(NUM_INSTANCES, 8),)
        )
        return {env.name: env} if env.name in names else {}

    def runnable_jobs(self, queue: str) -> list[RunnableJob]:
        return [RunnableJob("arn:job/1", created_at=NOW - timedelta(hours=1))]

    def snapshot(self, queue: str) -> QueueSnapshot:
        return QueueSnapshot(total={NUM_INSTANCES: 8.0})

    def job_demand(self, job_arn: str, job_id: str | None = None) -> dict[str, int] | None:
        return {"ml.p4d.24xlarge": 4}

    def update_capacity(self, environment: str, limits: Sequence[CapacityLimit]) -> None:
        self.updates.append((environment, list(limits)))


class Store:
    def __init__(self) -> None:
        self.state = EnvironmentState()
        self.wakes: set[tuple[str, datetime]] = set()

    def load(self, environment: str) -> EnvironmentState:
        return self.state

    def load_many(self, environments: Sequence[str]) -> dict[str, EnvironmentState]:
        return {name: self.state for name in environments}

    def save(self, environment: str, state: EnvironmentState, now: datetime) -> int | None:
        if state.version != self.state.version:
            return None
        self.state = EnvironmentState(state.version + 1, state.last_change_at, state.clocks, state.notices)
        return self.state.version

    def cached_demands(self, queue: str, job_arns: Sequence[str]) -> dict[str, dict[str, int]]:
        return {}

    def remember_demands(self, queue: str, demands: Mapping[str, Mapping[str, int]], now: datetime) -> None:
        pass

    def claim_wake(self, environment: str, minute: datetime, now: datetime) -> bool:
        if (environment, minute) in self.wakes:
            return False
        self.wakes.add((environment, minute))
        return True

    def release_wake(self, environment: str, minute: datetime, now: datetime) -> None:
        self.wakes.discard((environment, minute))


class Bus:
    def __init__(self) -> None:
        self.events: list[OwnEvent] = []

    def publish(self, events: Sequence[OwnEvent], resources: Sequence[str] | None = None) -> None:
        self.events += events


class Sink:
    def __init__(self) -> None:
        self.published: list[list[MetricPoint]] = []

    def publish(self, points: Iterable[MetricPoint]) -> int:
        self.published.append(list(points))
        return 1


def service(wall: datetime) -> tuple[CapacityService, Batch, Bus, Sink]:
    batch, bus, sink = Batch(), Bus(), Sink()
    return CapacityService(SETTINGS, batch, Store(), bus, sink, clock=lambda: wall), batch, bus, sink


def test_a_blocked_event_of_a_managed_queue_is_a_run_of_its_environment_at_the_event_time() -> None:
    event = parse_event(sample(BLOCKED))
    assert blocked_run(event, SETTINGS.policy) == BlockedRun(
        event_id=event.id,
        time=datetime(2026, 11, 24, 6, 18, 47, tzinfo=UTC),
        environment="sm-training",
        queue="sm-training-highpri",
        job_arn=sample(BLOCKED)["detail"]["jobArn"],
    )


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (
            {"statusReason": "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - no capacity"},
            "not a service job blocked",
        ),
        ({"statusReason": None}, "not a service job blocked"),
        ({"jobQueue": "arn:aws:batch:us-east-1:111122223333:job-queue/other"}, "detail.jobQueue"),
        ({"jobQueue": None}, "detail.jobQueue"),
    ],
)
def test_other_reasons_and_unmanaged_queues_are_ignored(change: dict[str, Any], error: str) -> None:
    raw = sample(BLOCKED)
    raw["detail"].update(change)
    result = blocked_run(parse_event(raw), SETTINGS.policy)
    assert isinstance(result, Rejected)
    assert (result.outcome, result.event_id) == (Outcome.IGNORED, raw["id"])
    assert error in result.error


def test_other_detail_types_are_ignored() -> None:
    result = blocked_run(parse_event(sample("service-job/succeeded")), SETTINGS.policy)
    assert isinstance(result, Rejected) and result.outcome is Outcome.IGNORED


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"source": "aws.scheduler"}, "the event has no 'time'"),
        ({"time": "  "}, "the event has no 'time'"),
        ([], "the event has no 'time'"),
        ({"time": "yesterday"}, "is not an ISO-8601 time"),
    ],
)
def test_a_schedule_event_needs_a_time(event: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        scheduled_time(event)


def test_the_scheduled_time_is_aware_utc() -> None:
    assert scheduled_time({"time": "2026-11-20T22:00:00Z"}) == NOW


def test_a_run_is_at_its_triggers_time_and_publishes_its_gauges_once() -> None:
    capacity, batch, bus, sink = service(wall=NOW + timedelta(seconds=20))
    report = capacity.run_schedule({"time": "2026-11-20T22:00:00Z"})
    assert report.now == NOW and report.trigger is Trigger.SCHEDULE
    (gauges,) = sink.published
    assert gauges == report.gauges and {p.timestamp for p in gauges} == {NOW}
    # Only its decisions: the fleet's gauges are the job ledger's, one name per concept.
    assert {p.name for p in gauges} == {"CapacityTarget", "CapacityDecisions"}
    assert report.samples[0].runnable.age_seconds(NOW) == 3600.0  # to the run's time, not the wall clock
    assert batch.updates == [("sm-training", [CapacityLimit(NUM_INSTANCES, 12)])]  # 8 in use + 4
    assert report.published == (1, 0) and len(bus.events) == 1
    assert report.summary() == {
        "time": NOW.isoformat(),
        "service_environments": 1,
        "updated": ["sm-training"],
        "errors": [],
    }


def test_gauges_of_a_run_older_than_cloudwatch_accepts_carry_the_wall_clock() -> None:
    wall = NOW + timedelta(days=15)
    capacity, _, _, sink = service(wall=wall)
    report = capacity.run(NOW)
    assert report.now == NOW
    (gauges,) = sink.published
    assert gauges and {p.timestamp for p in gauges} == {wall}


def test_a_blocked_run_is_of_its_environment_with_the_job_counted_as_blocked() -> None:
    capacity, *_ = service(wall=NOW)
    blocked = BlockedRun("id-1", NOW, "sm-training", "sm-training-highpri", "arn:job/1")
    report = capacity.run_blocked(blocked)
    assert report.trigger is Trigger.QUEUE_BLOCKED
    assert [s.blocked[0].arn for s in report.samples] == ["arn:job/1"]
    (outcome,) = report.outcomes
    assert outcome.decision is not None and outcome.decision.units[0].blocked_job == "arn:job/1"
