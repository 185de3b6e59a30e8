"""Records reach each function in the batches its own SQS event source mapping forms (BatchSize and
MaximumBatchingWindowInSeconds from template.yaml), independently of the other functions: the
metrics function's batches of 10 (5 s window) do not cut the alerts function's batches of 100
(20 s window), and own events join the alerts function's batch they arrive in.

What shows a batch from outside is what its invocation did as a whole: the cold start of each
function's first invocation is the batch's (``batches``, with its size and events); a batch of one
event's records has no batch section (its outputs are that event's). The alerts function's
incidents are off here (``AlertIncidentWindowMinutes=0``): an incident groups facts across batches
(docs/alerts.md, "Incidents"), so per-batch digests are what shows its batches.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from batchpilot_local.replay import Replayer
from batchpilot_local.report import BatchReport, EventReport
from batchpilot_local.testing.alerts import SLACK_PARAMETERS, failed_fleet
from batchpilot_local.testing.paths import TEMPLATE_PATH

PER_BATCH = {**SLACK_PARAMETERS, "AlertIncidentWindowMinutes": "0"}

SPOT = "Host EC2 (instance i-0abc) terminated."  # SPOT_INTERRUPTION: recovery skips it (NOT_FOUND)


def at(events: list[dict[str, Any]], start: datetime, step_s: float) -> list[dict[str, Any]]:
    for i, event in enumerate(events):
        event["time"] = (start + timedelta(seconds=step_s * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return events


def first_batches(reports: list[EventReport]) -> dict[str, tuple[int, BatchReport]]:
    """Each function's batch report (its first batch: the cold start), with the event it is on."""
    found: dict[str, tuple[int, BatchReport]] = {}
    for report in reports:
        for batch in report.batches:
            assert batch.function not in found, batch.function
            found[batch.function] = (report.number, batch)
    return found


def test_each_function_gets_the_batch_size_of_its_own_event_source_mapping() -> None:
    events = at(failed_fleet(12, SPOT, series="2222"), datetime(2026, 11, 20, 10, 15, tzinfo=UTC), 0)

    reports = Replayer(TEMPLATE_PATH, PER_BATCH, batch=True).run(events)

    assert [r.errors for r in reports] == [[]] * 12
    batches = first_batches(reports)
    assert set(batches) == {"alerts", "ledger", "metrics", "recovery"}
    for name in ("ledger", "metrics", "recovery"):  # BatchSize 10
        number, batch = batches[name]
        assert (number, batch.records, batch.events) == (10, 10, list(range(1, 11)))
    # AlertsQueue: BatchSize 100, so one batch: the 12 failures and the 12 Recovery Skipped events
    # recovery published (its two batches ran within the alerts function's 20 s window).
    number, alerts = batches["alerts"]
    assert (number, alerts.records, alerts.events) == (12, 24, list(range(1, 13)))
    digests = [(n["severity"], n["events"]) for n in alerts.notifications]
    assert digests == [("info", list(range(1, 13))), ("warning", list(range(1, 13)))]  # one digest each
    assert all(n["channel"] == "slack" for n in alerts.notifications)
    assert all(r.notifications == [] for r in reports)  # a digest is no single event's


def test_each_function_closes_its_batches_at_its_own_batching_window() -> None:
    # 8 s apart: past the 5 s window of metrics, ledger and recovery, within the alerts function's 20 s.
    events = at(failed_fleet(3, SPOT, series="3333"), datetime(2026, 11, 20, 11, 0, tzinfo=UTC), 8)

    reports = Replayer(TEMPLATE_PATH, PER_BATCH, batch=True).run(events)

    assert [r.errors for r in reports] == [[]] * 3
    batches = first_batches(reports)
    assert set(batches) == {"alerts"}  # the others ran one event's record at a time
    number, alerts = batches["alerts"]
    # Its window (20 s from the first failure) held the 3 failures and the Recovery Skipped of the
    # first two (recovery ran them at 5 s and 13 s); the third's came at 21 s, in a batch of its own.
    assert (number, alerts.records, alerts.events) == (3, 5, [1, 2, 3])
    cold = [m for m in reports[0].metrics if m.name == "ColdStart"]
    assert len(cold) == 3  # metrics, ledger and recovery: their first batch held event [1] alone
    # Below the digest threshold (5): one message per fact, each on its own event.
    assert [[n["severity"] for n in r.notifications] for r in reports] == [["info", "warning"]] * 3


def test_an_event_arriving_after_a_window_closes_the_pending_batches_first() -> None:
    start = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    early = at(failed_fleet(2, SPOT, series="4444"), start, 0)
    late = at(failed_fleet(1, SPOT, series="5555"), start + timedelta(seconds=60), 0)

    reports = Replayer(TEMPLATE_PATH, PER_BATCH, batch=True).run([*early, *late])

    batches = first_batches(reports)
    number, alerts = batches["alerts"]
    assert (number, alerts.events, alerts.records) == (2, [1, 2], 4)  # the late event is not in it
    assert [n["severity"] for n in reports[2].notifications] == ["info", "warning"]
