"""The job ledger's quota-share samples (events/scenarios/ledger/quota-share-*.json) replayed as
`make run` does, against the embedded AWS (quota shares answered by ListQuotaShares): a quota share
borrowing above its own limit, each quota share's usage beside its entitlement, and preemptions by
preempted and (when the reason names it) preempting quota share."""

from __future__ import annotations

import pytest
from batchpilot_local.inputs import read_inputs
from batchpilot_local.replay import Replayer
from batchpilot_local.report import EventReport
from batchpilot_local.testing.harness import report_gauge
from batchpilot_local.testing.paths import EVENTS_DIR

LEDGER = EVENTS_DIR / "scenarios" / "ledger"
QUEUE = {"JobQueue": "quota-q"}


def replay(name: str) -> list[EventReport]:
    replay_input = read_inputs([str(LEDGER / name)])
    return Replayer().run(
        replay_input.events,
        origins=[i.origin for i in replay_input.items],
        scopes=[i.scope for i in replay_input.items],
        scope_worlds={world.origin: world.data for world in replay_input.worlds},
        scope_parameters={world.origin: world.parameters for world in replay_input.worlds},
    )


@pytest.fixture(scope="module")
def borrowing() -> list[EventReport]:
    return replay("quota-share-borrowing.json")


@pytest.fixture(scope="module")
def preemption() -> list[EventReport]:
    return replay("quota-share-preemption.json")


def gauge(report: EventReport, name: str, **dims: str) -> float:
    return report_gauge(report, name, ("service", "Function"), **dims)


def test_a_quota_share_above_its_own_limit_is_borrowing(borrowing: list[EventReport]) -> None:
    first, second = borrowing
    assert first.errors == [] and second.errors == [] and first.functions == ["ledger"]
    # research: 10 instances in use against its own limit of 4; prod: 2 of 8
    assert gauge(first, "BorrowedInstances", **QUEUE, QuotaShare="research") == 6
    # prod borrows nothing: no series (a gauge is published only while there is something to measure)
    assert [
        m for m in first.metrics if m.name == "BorrowedInstances" and "prod" in m.dimensions.values()
    ] == []
    assert gauge(first, "InstancesInUse", **QUEUE, QuotaShare="research") == 10
    assert gauge(first, "RunnableJobs", **QUEUE) == 1  # the queue's; per quota share: MetricsDetail=detailed
    assert gauge(first, "Utilization", ServiceEnvironment="quota-env") == 100
    # AWS Batch preempted research-2 (4 instances) and started prod-2: research still borrows 2
    assert gauge(second, "BorrowedInstances", **QUEUE, QuotaShare="research") == 2
    assert gauge(second, "InstancesInUse", **QUEUE, QuotaShare="prod") == 6


def test_each_quota_shares_usage_beside_its_entitlement(borrowing: list[EventReport]) -> None:
    first = borrowing[0]
    assert round(gauge(first, "Entitlement", **QUEUE, QuotaShare="research"), 1) == 33.3  # 4 of 4 + 8
    assert round(gauge(first, "Entitlement", **QUEUE, QuotaShare="prod"), 1) == 66.7
    assert round(gauge(first, "ShareOfUsage", **QUEUE, QuotaShare="research"), 1) == 83.3  # 10 of 12


def test_preemptions_name_the_preempting_share_only_when_the_reason_does(
    preemption: list[EventReport],
) -> None:
    assert all(report.errors == [] for report in preemption)
    named, completed, documented = preemption[2], preemption[3], preemption[4]
    assert named.detail_type == documented.detail_type == "Batch Service Job Preemption Started"
    research = {**QUEUE, "QuotaShare": "research"}
    assert gauge(named, "Preemptions", **research, PreemptingShare="prod") == 1
    assert gauge(documented, "Preemptions", **research) == 1  # AWS's example reason names no share
    # One series per concept: the metrics function counts no Preemptions of its own.
    assert [
        m for r in preemption for m in r.metrics if m.name == "Preemptions" and "JobQueue" not in m.dimensions
    ] == []
    assert [m for m in documented.metrics if "PreemptingShare" in m.dimensions] == []
    # Completed counts no second preemption for the attempt whose Started was counted
    assert [m.name for m in completed.metrics if m.name.startswith("Preemption")] == ["PreemptionsCompleted"]
    assert gauge(completed, "LostInstanceHours", **research, Basis="attempt") > 0


def test_the_quota_share_lending_beside_the_one_borrowing(borrowing: list[EventReport]) -> None:
    first, second = borrowing
    # prod (its own limit 8, 2 in use) lends the 6 research borrows; then 2 of 8 free, 2 borrowed.
    assert gauge(first, "LentInstances", **QUEUE, QuotaShare="prod") == 6
    assert gauge(second, "LentInstances", **QUEUE, QuotaShare="prod") == 2
    # research lends nothing (it borrows): no series
    assert [
        m
        for r in borrowing
        for m in r.metrics
        if m.name == "LentInstances" and "research" in m.dimensions.values()
    ] == []
