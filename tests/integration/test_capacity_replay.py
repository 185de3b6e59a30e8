"""`batchpilot replay` on clock scenarios: the capacity function run tick by tick on a scenario's clock."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local.cli import main
from batchpilot_local.clock import ClockScenario
from batchpilot_local.inputs import InputError, read_inputs
from batchpilot_local.replay import Replayer
from batchpilot_local.report import EventReport
from batchpilot_local.testing.harness import report_gauge
from batchpilot_local.testing.paths import EVENTS_DIR

SCENARIOS = EVENTS_DIR / "scenarios" / "capacity"
ARN = "arn:aws:batch:us-east-1:111122223333"


@pytest.fixture(scope="module")
def reports() -> dict[str, list[EventReport]]:
    """Every capacity scenario replayed once, in one run (as `make run` does), by file."""
    replay_input = read_inputs([str(SCENARIOS)])
    assert all(isinstance(item.value, ClockScenario) for item in replay_input.items)
    out = Replayer().run(replay_input.events, origins=[i.origin for i in replay_input.items])
    by_file: dict[str, list[EventReport]] = {}
    for report in out:
        assert report.origin is not None
        by_file.setdefault(Path(report.origin.split(" ", 1)[0]).stem, []).append(report)
    return by_file


def decisions(report: EventReport, environment: str | None = None) -> list[tuple[str, str]]:
    return [
        (m.dimensions["Decision"], m.dimensions["Reason"])
        for m in report.metrics
        if m.name == "CapacityDecisions" and environment in (None, m.dimensions["ServiceEnvironment"])
    ]


def updates(report: EventReport) -> list[int]:
    return [
        limit["maxCapacity"]
        for action in report.actions
        if action["type"] == "update-capacity"
        for limit in action["request"]["capacityLimits"]
    ]


def gauge(report: EventReport, name: str, **dims: str) -> float:
    return report_gauge(report, name, ("service", "CapacityUnit"), **dims)


def test_every_tick_is_a_report_without_errors(reports: dict[str, list[EventReport]]) -> None:
    assert set(reports) == {"burst", "quiet-night", "blocked-job-larger-than-limit", "sample-world"}
    for ticks in reports.values():
        for report in ticks:
            assert report.errors == []
            assert (report.detail_type, report.source, report.job) == (
                "Scheduled Event",
                "aws.scheduler",
                None,
            )
            assert "capacity" in report.functions
            assert decisions(report), report.origin  # a decision, with its reason, every tick
            keys = list(report.to_dict())
            assert keys == [
                "event_id",
                "detail_type",
                "source",
                "functions",
                "job",
                "metrics",
                "notifications",
                "actions",
                "errors",
                "own_events",
            ]


def test_burst(reports: dict[str, list[EventReport]]) -> None:
    ticks = reports["burst"]
    assert [decisions(t) for t in ticks] == [
        [("HOLD", "STEADY")],
        [("RAISE", "DEMAND")],
        [("HOLD", "COOLDOWN")],
        [("HOLD", "COOLDOWN")],
        [("RAISE", "DEMAND")],
        [("HOLD", "COOLDOWN")],
        [("RAISE", "DEMAND")],
        [("HOLD", "STEADY")],
        [("HOLD", "STEADY")],
    ]
    assert [updates(t) for t in ticks] == [[], [24], [], [], [40], [], [48], [], []]
    for tick in ticks:
        for action in tick.actions:
            assert action == {
                "type": "update-capacity",
                "operation": "batch:UpdateServiceEnvironment",
                "request": {
                    "serviceEnvironment": "burst-env",
                    "capacityLimits": [{"maxCapacity": updates(tick)[0], "capacityUnit": "NUM_INSTANCES"}],
                },
            }
    # The limit it aims at: 8 in use + 40 RUNNABLE (what it saw is in its log, not in gauges:
    # the fleet's gauges are the job ledger's).
    assert gauge(ticks[1], "CapacityTarget", ServiceEnvironment="burst-env") == 48
    assert not [m for t in ticks for m in t.metrics if "JobQueue" in m.dimensions]
    # The second burst asks for more than max (48): a Capacity Limited, which the alerts function posts.
    assert [n["title"] for n in ticks[8].notifications if "AT_MAX" in n["title"]]


def test_quiet_night(reports: dict[str, list[EventReport]]) -> None:
    ticks = reports["quiet-night"]
    reasons = [decisions(t)[0] for t in ticks]
    assert reasons[:10] == [("HOLD", "STABILISING")] * 10  # 06:40-06:49
    assert reasons[10] == ("LOWER", "DEMAND") and updates(ticks[10]) == [12]  # in use: 12, min: 4
    assert reasons[11:14] == [("HOLD", "STEADY")] * 3  # 06:51, 06:52, 06:59
    assert reasons[14] == ("RAISE", "SCHEDULED_FLOOR") and updates(ticks[14]) == [24]  # 07:00
    assert reasons[15] == ("HOLD", "STEADY")
    assert all(updates(t) == [] for i, t in enumerate(ticks) if i not in (10, 14))


def test_blocked_job_larger_than_the_limit(reports: dict[str, list[EventReport]]) -> None:
    first, second, hour_later = reports["blocked-job-larger-than-limit"]
    assert decisions(first) == [("RAISE", "BLOCKED_JOB")] and updates(first) == [32]
    critical = [n for n in first.notifications if n["severity"] == "critical"]
    assert critical and all("BLOCKED_JOB_EXCEEDS_MAX" in n["title"] for n in critical)
    assert decisions(second) == [("HOLD", "STEADY")] and second.notifications == []  # not repeated
    assert [n["severity"] for n in hour_later.notifications] and all(
        "BLOCKED_JOB_EXCEEDS_MAX" in n["title"] for n in hour_later.notifications
    )


def test_sample_world_decisions(reports: dict[str, list[EventReport]]) -> None:
    (tick,) = reports["sample-world"]
    # Its own decisions only, per environment and capacity unit: the fleet's gauges are the ledger's.
    targets = {
        (m.dimensions["ServiceEnvironment"], m.dimensions["CapacityUnit"])
        for m in tick.metrics
        if m.name == "CapacityTarget"
    }
    assert ("sample-quota", "ml.p4d.24xlarge") in targets and ("sample-quota", "ml.g5.12xlarge") in targets
    assert {m.name for m in tick.metrics if "ServiceEnvironment" in m.dimensions} == {
        "CapacityTarget",
        "CapacityDecisions",
    }
    assert decisions(tick, "sample-fifo") == [("HOLD", "STEADY")]
    assert decisions(tick, "sample-fairshare") == [("RAISE", "DEMAND")]
    assert decisions(tick, "sample-quota") == [("HOLD", "STEADY"), ("HOLD", "STABILISING")]
    assert decisions(tick, "sample-paused") == [("LEAVE_ALONE", "NOT_VALID")]
    assert updates(tick) == [32]


def test_the_same_clock_replays_to_the_same_decisions() -> None:
    def run() -> list[Any]:
        replay_input = read_inputs([str(SCENARIOS / "burst.json")])
        out = Replayer().run(replay_input.events, origins=[i.origin for i in replay_input.items])
        return [(r.event_id, decisions(r), r.actions) for r in out]

    assert run() == run()


@pytest.fixture
def scenario_file(tmp_path: Path) -> Iterator[Any]:
    def write(data: Any) -> str:
        path = tmp_path / "scenario.json"
        path.write_text(json.dumps(data))
        return str(path)

    yield write


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"ticks": []}, "ticks must be a non-empty array"),
        ({"ticks": [{"at": "2026-11-20T10:00:00Z"}], "tick": 1}, "unknown clock scenario key(s): tick"),
        ({"ticks": [{"when": "2026-11-20T10:00:00Z"}]}, "ticks[0]: unknown key(s): when"),
        ({"ticks": [{}]}, "ticks[0].at: required"),
        ({"ticks": [{"at": "yesterday"}]}, "ticks[0].at: 'yesterday' is neither ISO-8601"),
        (
            {"ticks": [{"at": "2026-11-20T10:01:00Z"}, {"at": "2026-11-20T10:00:00Z"}]},
            "ticks[1].at: ticks must be in increasing time order",
        ),
        (
            {"ticks": [{"at": "2026-11-20T10:00:00Z", "world": {"jobz": []}}]},
            "ticks[0].world: unknown world key(s): jobz",
        ),
        ({"world": [], "ticks": [{"at": "2026-11-20T10:00:00Z"}]}, "world: world must be a JSON object"),
        (
            {"parameters": {"CapacityDryRun": None}, "ticks": [{"at": "2026-11-20T10:00:00Z"}]},
            "parameters.CapacityDryRun",
        ),
    ],
)
def test_malformed_clock_scenarios_are_input_errors(scenario_file: Any, data: Any, message: str) -> None:
    path = scenario_file(data)
    with pytest.raises(InputError) as error:
        read_inputs([path])
    assert str(error.value).startswith(f"{path}: ") and message in str(error.value)


def test_a_scenario_that_does_not_fit_the_template_is_a_report_error(
    scenario_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = scenario_file({"parameters": {"NoSuchParameter": "x"}, "ticks": [{"at": "2026-11-20T10:00:00Z"}]})
    assert main(["replay", "--format", "json", path]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    report = json.loads(line)
    assert report["errors"] == ["clock: parameters: NoSuchParameter: not parameters of the template"]


def test_a_bad_policy_is_the_functions_init_error_on_every_tick(
    scenario_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = scenario_file(
        {
            "parameters": {
                "CapacityServiceEnvironmentArns": f"{ARN}:service-environment/e",
                "CapacityJobQueueArns": f"{ARN}:job-queue/q",
                "CapacityPolicy": {"service_environments": {"e": {"job_queues": ["q"], "max": -1}}},
            },
            "ticks": [{"at": "2026-11-20T10:00:00Z"}, {"at": "2026-11-20T10:01:00Z"}],
        }
    )
    assert main(["replay", "--format", "json", path]) == 1
    errors = [json.loads(line)["errors"] for line in capsys.readouterr().out.splitlines()]
    assert len(errors) == 2
    for tick_errors in errors:
        (error,) = tick_errors
        assert error.startswith(
            "capacity: init failed: ConfigError: invalid capacity function configuration: "
        )
        assert "BATCHPILOT_CAPACITY_POLICY: service_environments.e.max" in error
