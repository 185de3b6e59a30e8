"""The cross-team idle sample (events/scenarios/ledger/idle-across-teams.json) replayed as `make run`
does: two teams' service environments of ml.p5.48xlarge, one holding reserved instances idle while
the other's jobs of that instance type wait; and the report's line for it."""

from __future__ import annotations

import pytest
from batchpilot_local.inputs import read_inputs
from batchpilot_local.replay import Replayer
from batchpilot_local.replay_summary import IDLE_ACROSS_TEAMS, render_overview, summarise
from batchpilot_local.report import EventReport
from batchpilot_local.testing.harness import report_gauge
from batchpilot_local.testing.paths import EVENTS_DIR

SCENARIO = EVENTS_DIR / "scenarios" / "ledger" / "idle-across-teams.json"


@pytest.fixture(scope="module")
def ticks() -> list[EventReport]:
    replay_input = read_inputs([str(SCENARIO)])
    return Replayer().run(
        replay_input.events,
        origins=[i.origin for i in replay_input.items],
        scopes=[i.scope for i in replay_input.items],
        scope_worlds={world.origin: world.data for world in replay_input.worlds},
        scope_parameters={world.origin: world.parameters for world in replay_input.worlds},
    )


def idle(report: EventReport) -> list[float]:
    return [
        float(m.value)  # type: ignore[arg-type]
        for m in report.metrics
        if m.name == "IdleWhileQueuedElsewhere" and not set(m.dimensions) - {"service", "Function"}
    ]


def test_idle_reserved_instances_of_one_team_while_the_others_jobs_that_fit_wait(
    ticks: list[EventReport],
) -> None:
    first, second, third = ticks
    assert [r.errors for r in ticks] == [[], [], []]
    # vision: 6 of 8 reserved p5 free; speech: full, 4 p5 and 2 p4d waiting. Neither environment
    # alone has capacity idle while its own jobs wait.
    assert idle(first) == idle(second) == [4]
    assert (
        report_gauge(first, "IdleWhileQueued", ("service", "Function"), ServiceEnvironment="speech-env") == 0
    )
    assert not [
        m for m in first.metrics if m.name == "IdleWhileQueued" and "vision-env" in m.dimensions.values()
    ]
    # speech-3 started: only the p4d job waits, which fits nothing idle: no series at all.
    assert idle(third) == []


def test_the_report_shows_the_peak_beside_the_fleet(ticks: list[EventReport]) -> None:
    overview = render_overview(summarise(ticks)).splitlines()
    [line] = [text for text in overview if IDLE_ACROSS_TEAMS in text]
    assert line.strip() == f"{IDLE_ACROSS_TEAMS}: peak 4 instances, 0 at the last of 3 ledger runs"
