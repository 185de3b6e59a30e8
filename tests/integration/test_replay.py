"""`batchpilot replay` end to end: the real template.yaml, the real metrics handler, moto, events/.

Input forms, exit codes, the JSON report contract, and that handler output never reaches the
report stream. Runs the command in-process through ``main([...])`` and once as a real subprocess.
"""

from __future__ import annotations

import copy
import io
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local.cli import main
from batchpilot_local.embedded_aws import EmbeddedAws, WorldError
from batchpilot_local.inputs import read_inputs
from batchpilot_local.replay import Replayer
from batchpilot_local.template import load_template
from batchpilot_local.testing.alerts import SLACK_PARAMETERS
from batchpilot_local.testing.samples import sample_event_paths
from batchpilot_local.testing.templates import METRICS_DETAIL_TYPES

ROOT = Path(__file__).resolve().parents[2]
EVENTS_DIR = ROOT / "events"
TEMPLATE = ROOT / "template.yaml"
REPORT_KEYS = [
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
    "batches",
]
JOB_SOURCES = {"aws.batch", "aws.sagemaker"}
JOB_DETAIL_TYPES = set(METRICS_DETAIL_TYPES)


# ------------------------------------------------------------------------------------ helpers
def sample_events() -> list[dict[str, Any]]:
    """Every single-event file under events/, in path order."""
    return [json.loads(path.read_text(encoding="utf-8")) for path in sample_event_paths()]


def find_sample(predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """A deep copy of the first sample event matching ``predicate`` (skips the test if none does)."""
    for event in sample_events():
        if predicate(event):
            return copy.deepcopy(event)
    pytest.skip("no sample event in events/ matches")


def failed_service_job() -> dict[str, Any]:
    return find_sample(
        lambda e: (
            e["detail-type"] == "Batch Service Job State Change" and e["detail"].get("status") == "FAILED"
        )
    )


def batch_job() -> dict[str, Any]:
    """A RUNNING container job: it reaches metrics (and alerts, which stays silent on it)."""
    return find_sample(
        lambda e: e["detail-type"] == "Batch Job State Change" and e["detail"].get("status") == "RUNNING"
    )


def routed(event: dict[str, Any]) -> list[str]:
    """The functions the template's rules route ``event`` to (tests/template/test_routing.py pins
    these per sample); the replay must deliver to exactly these."""
    return sorted({route.function.short_name for route in load_template(TEMPLATE).routes_for(event)})


def ec2_event() -> dict[str, Any]:
    return find_sample(lambda e: e["source"] == "aws.ec2")


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def with_id(event: dict[str, Any], event_id: str) -> dict[str, Any]:
    out = copy.deepcopy(event)
    out["id"] = event_id
    return out


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["replay", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def json_reports(out: str) -> list[dict[str, Any]]:
    """Parse the JSON report stream; every line must be one report with exactly the keys."""
    reports = []
    for line in out.splitlines():
        report = json.loads(line)
        assert list(report) == REPORT_KEYS
        reports.append(report)
    return reports


# ------------------------------------------------------------------------------- input forms
def test_single_object_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    event = batch_job()
    path = write_json(tmp_path / "one.json", event)

    code, out, err = run(capsys, "--format", "json", "--template", str(TEMPLATE), str(path))

    assert (code, err) == (0, "")
    [report] = json_reports(out)
    assert report["event_id"] == event["id"]
    assert report["detail_type"] == "Batch Job State Change"
    assert report["source"] == "aws.batch"
    assert report["functions"] == routed(event)
    assert "metrics" in report["functions"]
    assert report["notifications"] == [] and report["actions"] == [] and report["errors"] == []


def test_array_file_keeps_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = [
        with_id(batch_job(), "id-1"),
        with_id(ec2_event(), "id-2"),
        with_id(failed_service_job(), "id-3"),
    ]
    path = write_json(tmp_path / "many.json", events)

    code, out, _ = run(capsys, "--format", "json", "--template", str(TEMPLATE), str(path))

    assert code == 0
    assert [r["event_id"] for r in json_reports(out)] == ["id-1", "id-2", "id-3"]


def test_json_lines_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [json.dumps(with_id(batch_job(), f"line-{i}")) for i in range(3)]
    path = tmp_path / "stream.jsonl"
    path.write_text(lines[0] + "\n\n" + lines[1] + "\n" + lines[2] + "\n", encoding="utf-8")

    code, out, _ = run(capsys, "--format", "json", "--template", str(TEMPLATE), str(path))

    assert code == 0
    assert [r["event_id"] for r in json_reports(out)] == ["line-0", "line-1", "line-2"]


def test_json_lines_inside_a_json_file(tmp_path: Path) -> None:
    path = tmp_path / "stream.json"
    path.write_text(json.dumps({"a": 1}) + "\n" + json.dumps({"b": 2}) + "\n", encoding="utf-8")

    replay_input = read_inputs([str(path)])

    assert replay_input.events == [{"a": 1}, {"b": 2}]
    assert [item.origin for item in replay_input.items] == [f"{path}:1", f"{path}:2"]


def test_directory_is_read_recursively_in_sorted_path_order(tmp_path: Path) -> None:
    root = tmp_path / "in"
    write_json(root / "b.json", {"n": "b"})
    write_json(root / "a-b" / "x.json", {"n": "a-b/x"})
    write_json(root / "a" / "z.json", {"n": "a/z"})
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "c.jsonl").write_text('{"n": "a/b/c:1"}\n{"n": "a/b/c:2"}\n', encoding="utf-8")
    (root / "README.md").write_text("# not an event\n", encoding="utf-8")
    (root / "a" / "notes.txt").write_text("{not json", encoding="utf-8")
    write_json(root / ".hidden" / "skip.json", {"n": "hidden"})

    names = [item["n"] for item in read_inputs([str(root)]).events]

    assert names == ["a/b/c:1", "a/b/c:2", "a/z", "a-b/x", "b"]


def test_sample_events_directory_replays_cleanly() -> None:
    reports = Replayer(TEMPLATE).run(sample_events())

    assert reports, "events/ holds no sample events"
    for report in reports:
        assert report.errors == [], (report.event_id, report.errors)
        is_job_event = report.source in JOB_SOURCES and report.detail_type in JOB_DETAIL_TYPES
        expected = routed(next(e for e in sample_events() if e["id"] == report.event_id))
        assert report.functions == expected, report.event_id
        assert ("metrics" in report.functions) == is_job_event, report.event_id
        if is_job_event:
            assert report.job is not None
            assert any(m.name == "EventsProcessed" for m in report.metrics)


def test_stdin_dash(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    events = [with_id(batch_job(), "stdin-1"), with_id(ec2_event(), "stdin-2")]
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(events)))

    code, out, err = run(capsys, "--format", "json", "--template", str(TEMPLATE), "-")

    assert (code, err) == (0, "")
    assert [r["event_id"] for r in json_reports(out)] == ["stdin-1", "stdin-2"]


def test_scenario_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = {"world": {}, "events": [with_id(failed_service_job(), "s-1"), with_id(ec2_event(), "s-2")]}
    path = write_json(tmp_path / "scenario.json", scenario)

    code, out, _ = run(capsys, "--format", "json", "--template", str(TEMPLATE), str(path))

    assert code == 0
    reports = json_reports(out)
    assert [r["event_id"] for r in reports] == ["s-1", "s-2"]
    assert [r["functions"] for r in reports] == [routed(failed_service_job()), []]
    assert "metrics" in reports[0]["functions"]


def test_scenario_with_unknown_world_key_is_unreadable_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_json(tmp_path / "scenario.json", {"world": {"jobQueues": []}, "events": []})

    code, out, err = run(capsys, "--template", str(TEMPLATE), str(path))

    assert (code, out) == (2, "")
    assert str(path) in err and "jobQueues" in err
    assert err.count("\n") == 1


def test_seed_accepts_an_empty_world_and_rejects_unknown_keys() -> None:
    with EmbeddedAws() as aws:
        aws.seed({})
        with pytest.raises(WorldError, match="unknown world key"):
            aws.seed({"trainingJobs": []})


# ---------------------------------------------------------------------------------- exit codes
@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bad.json", '{"id": "x",\n  "detail-type": }', "line 2"),
        ("scalar.json", "42", "expected a JSON object or array"),
        ("empty.json", "  \n", "empty input"),
    ],
)
def test_input_with_nothing_readable_exits_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")

    code, out, err = run(capsys, "--format", "json", "--template", str(TEMPLATE), str(path))

    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("batchpilot replay: nothing to replay: ")
    assert str(path) in err and expected in err


@pytest.mark.parametrize(
    ("name", "bad", "expected"),
    [("bad.jsonl", '{"id": ', "line 3: invalid JSON"), ("scalar-line.jsonl", '"text"', "line 3: expected")],
)
def test_a_bad_line_is_refused_the_rest_replayed_and_the_exit_status_is_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, bad: str, expected: str
) -> None:
    good = [json.dumps(with_id(ec2_event(), f"e-{i}")) for i in range(3)]  # routed nowhere: handled
    path = tmp_path / name
    path.write_text("\n".join([*good[:2], bad, good[2]]) + "\n", encoding="utf-8")

    code, out, err = run(capsys, "--format", "json", "--template", str(TEMPLATE), str(path))

    assert code == 1
    assert [r["event_id"] for r in json_reports(out)] == ["e-0", "e-1", "e-2"]
    refusal, summary = err.splitlines()
    assert refusal.startswith(f"batchpilot replay: {path}: {expected}") and refusal.endswith("; not replayed")
    assert summary == "batchpilot replay: 1 input refused (listed before the replay); the rest was replayed"


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.json"

    code, out, err = run(capsys, "--template", str(TEMPLATE), str(missing))

    assert (code, out) == (2, "")
    assert str(missing) in err and "no such file" in err


def test_missing_template_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_json(tmp_path / "one.json", batch_job())

    code, _, err = run(capsys, "--template", str(tmp_path / "template.yaml"), str(path))

    assert code == 2 and "template.yaml" in err


@pytest.mark.parametrize(
    "argv",
    [[], ["replay"], ["replay", "--format", "xml", "x.json"], ["frobnicate"], ["replay", "--bogus", "x"]],
)
def test_bad_usage_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().out == ""


def test_all_handled_exits_0_and_errors_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write_json(tmp_path / "good.json", [batch_job(), ec2_event()])
    bad = write_json(tmp_path / "bad.json", [batch_job(), "not an event"])

    assert run(capsys, "--format", "json", "--template", str(TEMPLATE), str(good))[0] == 0
    assert run(capsys, "--format", "json", "--template", str(TEMPLATE), str(bad))[0] == 1


def test_items_that_are_not_eventbridge_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    no_source = batch_job()
    del no_source["source"]
    path = write_json(
        tmp_path / "mixed.json", [batch_job(), 42, no_source, {"detail-type": 7, "source": "x"}]
    )

    code, out, _ = run(capsys, "--format", "json", "--template", str(TEMPLATE), str(path))

    assert code == 1
    first, number, missing, mistyped = json_reports(out)
    assert first["errors"] == [] and "metrics" in first["functions"]
    for report in (number, missing, mistyped):
        assert report["event_id"] is None
        assert report["functions"] == []
        [error] = report["errors"]
        assert error.startswith("not an EventBridge event: ")
    assert "source" in missing["errors"][0]
    assert "detail-type" in mistyped["errors"][0]


# ------------------------------------------------------------------------------ what is reported
def test_failed_service_job_reports_jobs_failed_with_category_and_queue_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event = failed_service_job()
    queue_name = event["detail"]["jobQueue"].rsplit("/", 1)[-1]
    path = write_json(tmp_path / "failed.json", event)

    code, out, _ = run(capsys, "--format", "json", "--template", str(TEMPLATE), str(path))

    assert code == 0
    [report] = json_reports(out)
    job = report["job"]
    assert job["kind"] == "service-job"
    assert job["status"] == "FAILED"
    assert job["queue"] == queue_name
    assert job["arn"] == event["detail"]["jobArn"]
    assert isinstance(job["category"], str)
    [failed] = [m for m in report["metrics"] if m["name"] == "JobsFailed"]
    assert failed["unit"] == "Count"
    assert failed["value"] == 1
    assert failed["dimensions"]["FailureCategory"] == job["category"]
    assert failed["dimensions"]["JobQueue"] == queue_name
    assert failed["dimensions"]["JobKind"] == "service-job"
    assert failed["timestamp"].endswith("Z") and "T" in failed["timestamp"]
    assert set(failed) == {"name", "unit", "value", "dimensions", "timestamp"}


def summary_line(text: str) -> str:
    """The text report's first summary line: the first line after the deployment header."""
    return text.split("\n\n", 1)[1].splitlines()[0]


def test_ec2_event_goes_to_no_function(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    event = ec2_event()
    path = write_json(tmp_path / "ec2.json", event)

    code, out, _ = run(capsys, "--format", "json", "--template", str(TEMPLATE), str(path))

    assert code == 0
    [report] = json_reports(out)
    assert report["event_id"] == event["id"]
    assert report == {**report, "functions": [], "job": None, "metrics": [], "errors": []}

    code, text, _ = run(capsys, "--template", str(TEMPLATE), str(path))
    assert code == 0
    assert "no matching rule: ignored" in text
    assert text.startswith("Deployment replayed: ")  # what was replayed, then the summary
    assert summary_line(text) == "batchpilot replay: 1 event, 0 routed, 1 ignored, 0 with errors"


@pytest.mark.parametrize("mode", [[], ["--one-by-one"]], ids=["batches", "one-by-one"])
def test_malformed_batch_event_is_an_error_and_the_others_are_still_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: list[str]
) -> None:
    malformed = with_id(batch_job(), "malformed")
    del malformed["detail"]["status"]
    events = [with_id(batch_job(), "before"), malformed, with_id(failed_service_job(), "after")]
    path = write_json(tmp_path / "mixed.json", events)

    # In SQS batches as in one record per invocation, each report holds exactly what its own event
    # caused (each output names its record).
    code, out, _ = run(capsys, "--format", "json", *mode, "--template", str(TEMPLATE), str(path))

    assert code == 1
    before, bad, after = json_reports(out)
    assert before["errors"] == [] and any(m["name"] == "EventsProcessed" for m in before["metrics"])
    assert after["errors"] == [] and any(m["name"] == "JobsFailed" for m in after["metrics"])
    assert bad["event_id"] == "malformed"
    assert bad["functions"] == routed(malformed)
    assert bad["job"] is None
    # Each function it reached reports it, naming the field; each counts it once, nothing else.
    assert sorted(e.split(": ", 1)[0] for e in bad["errors"]) == bad["functions"]
    assert all("detail.status" in error for error in bad["errors"])
    assert [m["name"] for m in bad["metrics"]] == ["InvalidEvents"] * len(bad["functions"])


def test_text_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    malformed = with_id(batch_job(), "malformed")
    del malformed["detail"]["status"]
    event = failed_service_job()
    path = write_json(tmp_path / "mixed.json", [event, ec2_event(), malformed])

    code, out, _ = run(capsys, "--template", str(TEMPLATE), str(path))

    assert code == 1
    assert f"[1] Batch Service Job State Change  {event['id']}" in out
    assert "status=FAILED" in out and f"functions  {', '.join(routed(event))}" in out
    assert "JobsFailed" in out and "FailureCategory=" in out
    assert "errors" in out and "detail.status" in out
    assert not any(line.lstrip().startswith("{") for line in out.splitlines())
    assert summary_line(out) == "batchpilot replay: 3 events, 2 routed, 1 ignored, 1 with errors"
    assert out.rstrip().endswith(
        out.split("\n\n", 1)[1].split("\nEvents\n", 1)[0].rstrip()
    )  # again at the end


def test_handler_stdout_does_not_leak_into_the_report_stream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    malformed = batch_job()
    del malformed["detail"]["status"]
    path = write_json(tmp_path / "events.json", [batch_job(), failed_service_job(), malformed])
    stdout_before = sys.stdout

    _, out, err = run(capsys, "--format", "json", "--template", str(TEMPLATE), str(path))

    assert sys.stdout is stdout_before
    assert len(json_reports(out)) == 3  # every line is a report: no EMF blob, no log line
    assert "_aws" not in out and '"level"' not in out
    assert "_aws" not in err


def test_repeated_runs_in_one_process_capture_the_handler_logs_each_time() -> None:
    malformed = batch_job()
    del malformed["detail"]["status"]
    replayer = Replayer(TEMPLATE)

    for _ in range(2):
        [report] = replayer.run([malformed])
        assert len(report.errors) == len(routed(malformed)) >= 1
        assert all("detail.status" in error for error in report.errors)


def test_console_script_in_a_subprocess(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("batchpilot")
    if not script.exists():
        found = shutil.which("batchpilot")
        if found is None:
            pytest.skip("the batchpilot console script is not installed")
        script = Path(found)
    events_dir = tmp_path / "events"
    write_json(events_dir / "a" / "failed.json", failed_service_job())
    write_json(events_dir / "a" / "job.json", batch_job())
    write_json(events_dir / "b" / "ec2.json", ec2_event())
    (events_dir / "README.md").write_text("ignored\n", encoding="utf-8")

    # cwd has no template.yaml: the repository's own is found from the package location.
    done = subprocess.run(
        [str(script), "replay", "--format", "json", str(events_dir)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    reports = json_reports(done.stdout)
    assert len(reports) == 3
    assert [r["functions"] for r in reports] == [routed(failed_service_job()), routed(batch_job()), []]


# ------------------------------------------------------------------------------- own events
def forged_recovery_skipped() -> dict[str, Any]:
    """A "Recovery Skipped" (critical: budget exhausted) as someone else than batchpilot would write it."""
    scenario = json.loads((EVENTS_DIR / "scenarios" / "alerts" / "exactly-once.json").read_text())
    (event,) = [e for e in scenario["events"] if e["id"].endswith("9b03")]
    forged = with_id(event, "forged-0001")
    forged["detail"]["job_name"] = "<!channel> see https://example.invalid/"
    forged["detail"]["message"] = "forged by a principal allowed events:PutEvents on the default bus"
    return forged


def test_a_forged_own_event_on_the_default_bus_reaches_no_function() -> None:
    # Before batchpilot had a bus of its own, the own-events rule listened on the default bus: a
    # source "batchpilot" event there paged the on-call person with the forger's text.
    [report] = Replayer(TEMPLATE).run([forged_recovery_skipped()], bus="default")
    assert (report.functions, report.notifications, report.errors) == ([], [], [])


def test_own_events_reach_the_alerts_function_only_on_batchpilots_bus() -> None:
    app = load_template(TEMPLATE)
    assert app.own_event_bus != "default"
    [report] = Replayer(TEMPLATE, SLACK_PARAMETERS).run([forged_recovery_skipped()], bus=app.own_event_bus)
    assert report.functions == ["alerts"] and report.errors == []
    assert sorted(n["channel"] for n in report.notifications) == ["slack", "sns"]  # critical: it pages


def test_own_events_published_by_the_recovery_function_still_reach_the_alerts_function() -> None:
    # A failed container job AWS no longer describes: recovery publishes Recovery Skipped (NOT_FOUND)
    # on batchpilot's bus, and the alerts function posts it, in the same report.
    event = find_sample(
        lambda e: (
            e["detail-type"] == "Batch Job State Change"
            and e["detail"].get("status") == "FAILED"
            and "Host EC2" in str(e["detail"].get("statusReason"))
        )
    )
    [report] = Replayer(TEMPLATE).run([event])
    assert report.errors == []
    assert {"alerts", "recovery"} <= set(report.functions)
    titles = [n["title"] for n in report.notifications]
    # ("[dry run] " leads the title while no job queue is named in RecoveryJobQueueArns, the default.)
    assert any("recovery skipped for container job" in t and "NOT_FOUND" in t for t in titles), titles


_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
_EPOCH_MS = re.compile(r"\b1[78]\d{11}\b")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _without_run_noise(text: str, started: float, ended: float, known_ids: set[str]) -> str:
    """``text`` with what differs between two runs of the same replay masked: times of the run's
    own wall clock (ISO or epoch ms, from ``started`` to ``ended`` epoch seconds, a minute's
    margin) and uuids the inputs do not hold (request, message and invocation ids). Event times
    and job ids from the inputs stay."""

    def during_run(seconds: float) -> bool:
        return started - 60 <= seconds <= ended + 60

    def iso(match: re.Match[str]) -> str:
        moment = datetime.fromisoformat(match.group(0).replace("Z", "+00:00"))
        return "<now>" if during_run(moment.timestamp()) else match.group(0)

    text = _ISO_TIME.sub(iso, text)
    text = _EPOCH_MS.sub(lambda m: "<now ms>" if during_run(int(m.group(0)) / 1000) else m.group(0), text)
    return _UUID.sub(lambda m: m.group(0) if m.group(0) in known_ids else "<id>", text)


def _events_replayed_twice(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, first: Callable[[], None]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The JSON reports of ``events/`` (every sample and scenario, in SQS batches as ``make run``
    replays them), first after ``first()`` then as the replay is, wall-clock times and random ids
    masked (:func:`_without_run_noise`); both runs exit 0."""
    known_ids = {
        match
        for path in EVENTS_DIR.rglob("*.json")
        for match in _UUID.findall(path.read_text(encoding="utf-8"))
    }
    outputs = []
    for setup in (first, monkeypatch.undo):
        setup()
        started = time.time()
        code = main(["replay", "--format", "json", str(EVENTS_DIR)])
        assert code == 0
        text = _without_run_noise(capsys.readouterr().out, started, time.time(), known_ids)
        outputs.append([json.loads(line) for line in text.splitlines()])
    assert len(outputs[0]) > 100
    assert sum(bool(report["actions"]) for report in outputs[0]) > 10  # reports with AWS calls
    return outputs[0], outputs[1]


def test_direct_calls_replay_events_as_the_http_path_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay's direct path (DynamoDB and the emulator's reads without botocore's HTTP hop)
    changes no report of ``events/``: each report is the HTTP path's, but for wall-clock times and
    random ids."""
    import batchpilot_local.replay as replay_module

    def http_path() -> None:
        # The CLI imports Replayer from batchpilot_local.replay when a replay runs.
        monkeypatch.setattr(
            replay_module, "Replayer", lambda *args, **kwargs: Replayer(*args, direct_calls=False, **kwargs)
        )

    http, direct = _events_replayed_twice(capsys, monkeypatch, http_path)

    assert direct == http
