"""Each event's own outputs: in a batch, every metric, error, message and own event is reported
under the event whose record caused it, in the JSON, text and HTML reports alike; what an
invocation did for its batch as a whole (here the cold start) is reported once, as the batch's.

One batch per function: a failed job (it pages, recovery skips it), a malformed event and a
succeeded job, all at the same time. Before records were tied to their outputs, the failure's page
and metrics were listed under the event that closed the batch (the success), and so were the
malformed event's errors.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local.cli import EXIT_ERRORS, main
from batchpilot_local.testing.browser import load_in_chromium, require_chromium
from batchpilot_local.testing.paths import TEMPLATE_PATH
from batchpilot_local.testing.samples import sample

FAILURE_TITLE = "container job t5-xl-summarization-eval-12 FAILED (APPLICATION_ERROR) on ml-training-research"
FUNCTIONS = {"alerts", "ledger", "metrics", "recovery"}


def batch_of_three() -> list[dict[str, Any]]:
    failed = sample("batch-job/failed-application-error")
    malformed = {
        **failed,
        "id": "malformed-0001",
        "detail": {"status": "FAILED", "jobQueue": 7},  # no job name or id; a queue that is not text
    }
    succeeded = {**sample("batch-job/succeeded"), "time": failed["time"]}
    return [failed, malformed, succeeded]


@dataclass(frozen=True)
class Replayed:
    """The three reports as JSON, the text report (``--verbose``) and the HTML report's path."""

    code: int
    json_reports: list[dict[str, Any]]
    text: str
    html: Path
    origins: list[str]


def replay(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["replay", "--template", str(TEMPLATE_PATH), *args])
    return code, out.getvalue()


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    folder = tmp_path_factory.mktemp("attribution")
    path = folder / "batch.json"
    path.write_text(json.dumps(batch_of_three()), encoding="utf-8")
    html = folder / "report.html"
    code, out = replay("--format", "json", "--report", str(html), str(path))
    text_code, text = replay("--verbose", str(path))
    assert code == text_code
    return Replayed(
        code, [json.loads(line) for line in out.splitlines()], text, html, [f"{path}[{i}]" for i in range(3)]
    )


def names(outputs: dict[str, Any]) -> list[str]:
    return [m["name"] for m in outputs["metrics"]]


# ------------------------------------------------------------------------------------------ JSON
def test_json_each_event_holds_exactly_its_own_outputs(replayed: Replayed) -> None:
    assert replayed.code == EXIT_ERRORS  # the malformed event is an error
    failed, malformed, succeeded = replayed.json_reports
    assert set(failed["functions"]) == set(malformed["functions"]) == FUNCTIONS

    assert "JobsFailed" in names(failed) and "RecoverySkipped" in names(failed)
    assert failed["notifications"] == [{"channel": "sns", "severity": "critical", "title": FAILURE_TITLE}]
    assert [e["detail_type"] for e in failed["own_events"]] == ["Recovery Skipped"]
    assert failed["errors"] == []

    assert sorted(names(malformed)) == ["InvalidEvents"] * 4  # one per function, nothing else
    assert len(malformed["errors"]) == 4
    assert {e.split(":")[0] for e in malformed["errors"]} == FUNCTIONS
    assert all("event not processed: detail.jobName: Field required" in e for e in malformed["errors"])
    assert (malformed["notifications"], malformed["own_events"]) == ([], [])

    assert "JobsSucceeded" in names(succeeded) and "JobsFailed" not in names(succeeded)
    assert (succeeded["notifications"], succeeded["errors"], succeeded["own_events"]) == ([], [], [])


def test_json_the_batchs_own_outputs_are_reported_once_as_the_batchs(replayed: Replayed) -> None:
    reports = replayed.json_reports
    batches = [(i + 1, b) for i, r in enumerate(reports) for b in r["batches"]]
    assert {b["function"] for _, b in batches} == FUNCTIONS  # each function's first batch: a cold start
    for number, batch in batches:
        assert names(batch) == ["ColdStart"]  # an invocation's, no record's
        assert (batch["notifications"], batch["errors"], batch["actions"]) == ([], [], [])
        assert number == max(batch["events"])  # on the batch's last event
    by_function = {b["function"]: b for _, b in batches}
    assert by_function["metrics"]["events"] == [1, 2, 3] and by_function["metrics"]["records"] == 3
    assert by_function["recovery"]["events"] == [1, 2]  # the success is no recovery record
    assert by_function["alerts"]["records"] == 4  # three events and the failure's Recovery Skipped
    assert all("ColdStart" not in names(r) for r in reports)  # never in an event's own metrics


# ------------------------------------------------------------------------------------------ text
def blocks(text: str) -> dict[int, str]:
    """The text report's event blocks, by event number."""
    events = text.split("\nEvents\n", 1)[1].split("\nSummary (as at the top)\n", 1)[0]
    found = re.split(r"^\[(\d+)\] ", events, flags=re.MULTILINE)[1:]
    return {int(found[i]): found[i + 1] for i in range(0, len(found), 2)}


def test_text_each_event_block_holds_exactly_its_own_outputs(replayed: Replayed) -> None:
    by_number = blocks(replayed.text)
    assert sorted(by_number) == [1, 2, 3]
    failed, malformed, succeeded = (by_number[n].split("\n    batch of ")[0] for n in (1, 2, 3))

    assert FAILURE_TITLE in failed and "JobsFailed" in failed and "Recovery Skipped:" in failed
    assert "errors" not in failed and "InvalidEvents" not in failed

    assert malformed.count("event not processed") == 4 and malformed.count("InvalidEvents") == 4
    assert (
        FAILURE_TITLE not in malformed and "JobsFailed" not in malformed and "notifications" not in malformed
    )

    assert "JobsSucceeded" in succeeded and FAILURE_TITLE not in succeeded
    assert "errors" not in succeeded and "notifications" not in succeeded and "InvalidEvents" not in succeeded
    assert "ColdStart" not in failed + malformed + succeeded


def test_text_labels_the_batchs_own_outputs_as_the_batchs(replayed: Replayed) -> None:
    by_number = blocks(replayed.text)
    labels = re.findall(
        r"^    batch of (\w+): (\d+) records, events (.+?) \(", replayed.text, flags=re.MULTILINE
    )
    assert sorted(labels) == [
        ("alerts", "4", "[1]-[3]"),
        ("ledger", "3", "[1]-[3]"),
        ("metrics", "3", "[1]-[3]"),
        ("recovery", "2", "[1]-[2]"),
    ]
    assert "batch of recovery" in by_number[2] and "batch of metrics" in by_number[3]
    assert "batch of" not in by_number[1]


# ------------------------------------------------------------------------------------------ HTML
def test_html_labels_each_message_and_error_with_its_event(replayed: Replayed) -> None:
    require_chromium()
    page = load_in_chromium(replayed.html, selectors=(".msg",), texts_of=(".msg .from",))
    assert page["errors"] == []
    assert page["texts"][".msg .from"] == [f"event [1] Batch Job State Change ({replayed.origins[0]})"]
    tables = {t["caption"].split(" (")[0]: t for t in page["tables"]}
    [errors] = [t for t in page["tables"] if t["headers"] == ["event", "error"]]
    assert len(errors["rows"]) == 4
    assert all(
        row[0] == f"event [2] Batch Job State Change ({replayed.origins[1]})" for row in errors["rows"]
    )
    [own] = [t for t in page["tables"] if t["headers"][:2] == ["event", "detail-type"]]
    rows = {row[0]: dict(zip(own["headers"], row, strict=True)) for row in own["rows"]}
    assert list(rows) == ["[1]", "[2]", "[3]"]
    assert rows["[1]"]["messages"] == "sns critical" and rows["[1]"]["errors"] == "-"
    assert "JobsFailed" in rows["[1]"]["metrics"] and rows["[1]"]["own events"] == "Recovery Skipped"
    assert rows["[2]"]["messages"] == "-" and rows["[2]"]["errors"] == "4" and rows["[2]"]["metrics"] == "-"
    assert rows["[3]"]["messages"] == "-" and rows["[3]"]["errors"] == "-"
    assert "JobsSucceeded" in rows["[3]"]["metrics"] and "JobsFailed" not in rows["[3]"]["metrics"]
    assert tables  # every table has a caption or headers the checks above found
