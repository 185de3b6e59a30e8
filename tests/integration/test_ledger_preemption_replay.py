"""events/scenarios/ledger/repeated-preemption.json replayed as `make run` does, against the
embedded AWS: a service job preempted three times, the RUNNING event of every attempt listing the
attempts before it, and the checkpoint bucket already holding every attempt's checkpoints."""

from __future__ import annotations

import pytest
from batchpilot_local.inputs import read_inputs
from batchpilot_local.replay import Replayer
from batchpilot_local.report import EventReport
from batchpilot_local.testing.paths import EVENTS_DIR

SCENARIO = EVENTS_DIR / "scenarios" / "ledger" / "repeated-preemption.json"
JOB = {"JobQueue": "ck-q", "ShareIdentifier": "TEAM"}


@pytest.fixture(scope="module")
def reports() -> list[EventReport]:
    replay_input = read_inputs([str(SCENARIO)])
    return Replayer().run(
        replay_input.events,
        origins=[i.origin for i in replay_input.items],
        scopes=[i.scope for i in replay_input.items],
        scope_worlds={world.origin: world.data for world in replay_input.worlds},
        scope_parameters={world.origin: world.parameters for world in replay_input.worlds},
    )


def values(reports: list[EventReport], name: str) -> list[tuple[float, dict[str, str]]]:
    """Every ledger point ``name`` of the job's queue and share, with its dimensions."""
    return [
        (float(m.value), dict(m.dimensions))
        for r in reports
        for m in r.metrics
        if m.name == name and all(m.dimensions.get(k) == v for k, v in JOB.items())
    ]


def test_each_of_three_preemptions_is_counted_once(reports: list[EventReport]) -> None:
    assert [r.errors for r in reports if r.errors] == []
    assert len(values(reports, "Preemptions")) == 3
    assert len(values(reports, "PreemptionsCompleted")) == 3


def test_lost_work_is_measured_from_each_attempts_own_checkpoint(reports: list[EventReport]) -> None:
    lost = values(reports, "LostInstanceHours")
    # 4 instances x the 21 minutes since the checkpoint each attempt wrote before it stopped,
    # though S3 already holds the next attempts' checkpoints.
    assert [(value, dims["Basis"]) for value, dims in lost] == [(pytest.approx(1.4), "checkpoint")] * 3
