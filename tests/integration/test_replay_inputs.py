"""`batchpilot replay` with inputs as users have them, and the options that shape a replay.

Concatenated pretty-printed JSON, CloudWatch Logs and Logs Insights output, SQS messages;
`--version`; filters; `--fail-on`; template parameters from the command line, samconfig.toml and
scenarios; one-line errors with exit 2 and nothing written.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from batchpilot.shared.classification import classify
from batchpilot.shared.events import parse_event
from batchpilot_local.cli import EXIT_ERRORS, EXIT_FAIL_ON, EXIT_USAGE, main
from batchpilot_local.inputs import InputError, read_inputs
from batchpilot_local.replay import Replayer
from batchpilot_local.testing.alerts import SLACK_PARAMETER_VALUE
from batchpilot_local.testing.paths import repo_root

ROOT = repo_root()
TEMPLATE = ROOT / "template.yaml"


def sample(relative: str, event_id: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((ROOT / "events" / relative).read_text(encoding="utf-8"))
    if event_id is not None:
        event = copy.deepcopy(event)
        event["id"] = event_id
    return event


CRITICAL = "service-job/failed-algorithm-error.json"  # APPLICATION_ERROR on sm-training-research
RUNNING = "batch-job/running.json"
SLACK = ("--parameter-overrides", f"SlackWebhookSecretArn={SLACK_PARAMETER_VALUE}")
"""A stack with Slack (a default one has no chat channel: every message goes to the on-call topic)."""


def stdin_of(text: str) -> io.StringIO:
    return io.StringIO(text)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["replay", "--template", str(TEMPLATE), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ------------------------------------------------------------------------------------- inputs
def test_concatenated_pretty_printed_objects_from_stdin() -> None:
    first, second = sample(RUNNING, "a"), sample(CRITICAL, "b")
    text = json.dumps(first, indent=2) + "\n" + json.dumps(second, indent=4)  # `cat a.json b.json`

    replay_input = read_inputs(["-"], stdin=stdin_of(text))

    assert [e["id"] for e in replay_input.events] == ["a", "b"]
    second_line = len(json.dumps(first, indent=2).splitlines()) + 1
    assert [i.origin for i in replay_input.items] == ["<stdin>:1", f"<stdin>:{second_line}"]


def test_concatenated_objects_without_separators_and_a_truncated_one_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "cat.json"
    path.write_text(json.dumps({"n": 1}) + json.dumps({"n": 2}) + '\n{"n": \n', encoding="utf-8")

    with pytest.raises(InputError) as error:
        read_inputs([str(path)])

    message = str(error.value)
    assert message.startswith(f"{path}: line 2: invalid JSON") and "\n" not in message


def log_page(events: list[dict[str, Any]], token: str | None) -> dict[str, Any]:
    """A page of `aws logs filter-log-events` output."""
    page: dict[str, Any] = {
        "events": [
            {
                "logStreamName": "stream",
                "timestamp": 1764000000000 + i,
                "message": json.dumps(event),
                "ingestionTime": 1764000000100 + i,
                "eventId": f"e{i}",
            }
            for i, event in enumerate(events)
        ],
        "searchedLogStreams": [],
    }
    if token:
        page["nextToken"] = token
    return page


def test_filter_log_events_pages_concatenated(tmp_path: Path) -> None:
    path = tmp_path / "archive.json"
    pages = [
        log_page([sample(RUNNING, "a"), sample(CRITICAL, "b")], "tok"),
        log_page([sample(RUNNING, "c")], None),
    ]
    path.write_text("\n".join(json.dumps(p, indent=2) for p in pages), encoding="utf-8")

    replay_input = read_inputs([str(path)])

    assert [e["id"] for e in replay_input.events] == ["a", "b", "c"]
    assert replay_input.items[1].origin == f"{path}:1 events[1].message"
    assert replay_input.worlds == []  # not mistaken for a scenario


def test_get_log_events_output() -> None:
    page = log_page([sample(RUNNING, "a")], None)
    del page["searchedLogStreams"]
    page |= {"nextForwardToken": "f/1", "nextBackwardToken": "b/1"}

    assert [e["id"] for e in read_inputs(["-"], stdin=stdin_of(json.dumps(page))).events] == ["a"]


def test_logs_insights_results_and_console_export() -> None:
    query_results = {
        "results": [
            [
                {"field": "@timestamp", "value": "2026-11-24 10:00:00.000"},
                {"field": "@message", "value": json.dumps(sample(RUNNING, "a"))},
            ],
            [{"field": "@message", "value": json.dumps(sample(CRITICAL, "b"))}],
        ],
        "statistics": {"recordsMatched": 2.0},
        "status": "Complete",
    }
    export = [{"@timestamp": "2026-11-24 10:00:00.000", "@message": json.dumps(sample(RUNNING, "c"))}]

    assert [e["id"] for e in read_inputs(["-"], stdin=stdin_of(json.dumps(query_results))).events] == [
        "a",
        "b",
    ]
    assert [e["id"] for e in read_inputs(["-"], stdin=stdin_of(json.dumps(export))).events] == ["c"]


def test_sqs_wrapped_bodies() -> None:
    received = {
        "Messages": [
            {
                "MessageId": "m1",
                "ReceiptHandle": "r1",
                "MD5OfBody": "x",
                "Body": json.dumps(sample(RUNNING, "a")),
            }
        ]
    }
    lambda_event = {
        "Records": [{"messageId": "m2", "eventSource": "aws:sqs", "body": json.dumps(sample(CRITICAL, "b"))}]
    }

    assert [e["id"] for e in read_inputs(["-"], stdin=stdin_of(json.dumps(received))).events] == ["a"]
    assert [e["id"] for e in read_inputs(["-"], stdin=stdin_of(json.dumps(lambda_event))).events] == ["b"]


def test_a_lambda_sqs_event_cut_down_to_its_bodies_is_read_and_an_s3_one_is_not() -> None:
    bodies_only = {"Records": [{"body": json.dumps(sample(RUNNING, "c"))}]}
    s3_event = {"Records": [{"eventSource": "aws:s3", "body": json.dumps(sample(RUNNING, "d"))}]}

    assert [e["id"] for e in read_inputs(["-"], stdin=stdin_of(json.dumps(bodies_only))).events] == ["c"]
    assert read_inputs(["-"], stdin=stdin_of(json.dumps(s3_event))).events == [s3_event]  # not unwrapped


def test_a_log_message_that_is_not_json_is_refused_naming_where_it_is_and_the_others_are_kept() -> None:
    page = log_page([sample(RUNNING, "a"), sample(RUNNING, "b"), sample(CRITICAL, "c")], None)
    page["events"][0]["message"] = "START RequestId: 1234 Version: $LATEST"  # Lambda's own line
    page["events"][1]["message"] = "hello"

    replay_input = read_inputs(["-"], stdin=stdin_of(json.dumps(page)), tolerant=True)

    assert [e["id"] for e in replay_input.events] == ["c"]
    assert replay_input.refused == [
        "<stdin>: events[1].message: not JSON: expected an event's JSON text or a Lambda log line holding one"
    ]
    assert replay_input.skipped == ["<stdin>: skipped 1 Lambda platform line (not events)"]
    with pytest.raises(InputError, match=r"^<stdin>: events\[1\]\.message: not JSON"):  # not tolerant
        read_inputs(["-"], stdin=stdin_of(json.dumps(page)))


def test_filter_log_events_output_replays_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "page.json"
    path.write_text(json.dumps(log_page([sample(RUNNING, "a")], "tok"), indent=2), encoding="utf-8")

    code, out, err = run(capsys, "--format", "json", str(path))

    assert (code, err) == (0, "")
    [report] = [json.loads(line) for line in out.splitlines()]
    assert report["event_id"] == "a" and "metrics" in report["functions"]


# ------------------------------------------------------------------------------------ options
def test_an_event_with_a_lone_surrogate_is_an_error_and_the_others_are_still_delivered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "\\ud800" is valid JSON text that json.loads takes, but no UTF-8 text (an SQS body) can hold.
    odd = sample(RUNNING, "odd")
    odd["detail"]["jobName"] = "train-\ud800"
    path = tmp_path / "events.json"
    path.write_text(json.dumps([odd, sample(CRITICAL, "crit")]), encoding="ascii")

    code, out, _ = run(capsys, "--format", "json", str(path))
    text_code, text, _ = run(capsys, "--report", str(tmp_path / "report.html"), str(path))

    reports = {r["event_id"]: r for r in map(json.loads, out.splitlines())}
    assert code == text_code == EXIT_ERRORS
    assert reports["odd"]["functions"] == [] and reports["odd"]["metrics"] == []
    assert len(reports["odd"]["errors"]) == 1 and "lone UTF-16 surrogate" in reports["odd"]["errors"][0]
    assert reports["crit"]["errors"] == [] and pages(out)  # the next event still paged
    assert "2 events, 1 routed, 0 ignored, 1 with errors" in text
    assert (tmp_path / "report.html").stat().st_size > 0


def test_an_event_nested_deeper_than_pydantic_cores_encoder_goes_is_still_delivered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = sample(CRITICAL, "deep")
    nested: Any = "bottom"
    for _ in range(300):  # json reads it; pydantic-core's encoder stops at 255 levels
        nested = {"n": nested}
    deep["detail"]["tags"] = {"nested": nested}
    path = tmp_path / "events.json"
    path.write_text(json.dumps([deep]), encoding="utf-8")

    code, out, _ = run(capsys, "--format", "json", str(path))

    # Delivered to every function its rules name; they refuse it themselves, saying why (their
    # JSON reader, pydantic-core's, stops at about 200 levels), as they would in Lambda.
    (report,) = [json.loads(line) for line in out.splitlines()]
    assert report["functions"] == ["alerts", "ledger", "metrics", "recovery"]
    assert code == EXIT_ERRORS
    assert sorted(report["errors"]) == [
        f"{function}: event not processed: event is nested too deeply to read (more than about 200 levels)"
        for function in report["functions"]
    ]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "batchpilot 0.1.0"


def write_events(tmp_path: Path, *events: dict[str, Any]) -> Path:
    path = tmp_path / "events.json"
    path.write_text(json.dumps(list(events)), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        (
            "--queue",
            "no-such-queue",
            "--queue no-such-queue: no input event has it (job queues in the input:",
        ),
        ("--job", "nobody", "--job nobody: no input event has it (jobs in the input:"),
        ("--share", "nobody", "--share nobody: no input event has it"),
        ("--category", "BOGUS", "--category BOGUS: not a category (one of: SPOT_INTERRUPTION"),
        ("--category", "CAPACITY", "--category CAPACITY: no input event has it"),
    ],
)
def test_an_unknown_filter_value_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, expected: str
) -> None:
    path = write_events(tmp_path, sample(RUNNING), sample(CRITICAL))

    code, out, err = run(capsys, option, value, str(path))

    assert (code, out) == (EXIT_USAGE, "")
    assert err.count("\n") == 1 and expected in err


def test_filters_keep_only_matching_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    critical = sample(CRITICAL, "crit")
    path = write_events(tmp_path, sample(RUNNING, "run"), critical)

    by_queue = run(capsys, "--format", "json", "--queue", "sm-training-*", str(path))
    category = classify(parse_event(critical)).category
    assert category is not None
    by_share = run(capsys, "--format", "json", "--share", "research", "--category", category.value, str(path))
    by_job = run(
        capsys, "--format", "json", "--job", critical["detail"]["jobArn"].rsplit("/", 1)[-1], str(path)
    )

    for code, out, _ in (by_queue, by_share, by_job):
        assert code == 0
        assert [json.loads(line)["event_id"] for line in out.splitlines()] == ["crit"]


def test_fail_on_sets_the_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    critical = write_events(tmp_path, sample(CRITICAL))
    quiet_dir = tmp_path / "quiet"
    quiet_dir.mkdir()
    quiet = write_events(quiet_dir, sample(RUNNING))

    assert run(capsys, "--fail-on", "critical", str(critical))[0] == EXIT_FAIL_ON
    assert run(capsys, "--fail-on", "warning", str(critical))[0] == EXIT_FAIL_ON
    assert run(capsys, "--fail-on", "critical", str(quiet))[0] == 0
    assert run(capsys, str(critical))[0] == 0  # without --fail-on, pages are not failures


def pages(out: str) -> list[dict[str, Any]]:
    return [
        n for line in out.splitlines() for n in json.loads(line)["notifications"] if n["channel"] == "sns"
    ]


NEVER_PAGE = json.dumps({"never_page": {"job_queues": ["sm-training-research"]}})


def test_parameter_overrides_configure_the_functions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_events(tmp_path, sample(CRITICAL))

    default = run(capsys, "--format", "json", *SLACK, str(path))
    overridden = run(
        capsys,
        "--format",
        "json",
        *SLACK,
        "--parameter-overrides",
        f"AlertRoutingPolicy='{NEVER_PAGE}'",
        str(path),
    )

    assert default[0] == 0 and len(pages(default[1])) == 1
    assert overridden[0] == 0 and pages(overridden[1]) == []


def test_config_env_reads_samconfig_parameter_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_events(tmp_path, sample(CRITICAL))
    config = tmp_path / "samconfig.toml"
    policy = NEVER_PAGE.replace('"', '\\"')
    overrides = f"LogLevel=INFO SlackWebhookSecretArn={SLACK_PARAMETER_VALUE} AlertRoutingPolicy='{policy}'"
    config.write_text(
        f'version = 0.1\n[staging.deploy.parameters]\nparameter_overrides = "{overrides}"\n', encoding="utf-8"
    )

    code, out, err = run(
        capsys, "--format", "json", "--config-env", "staging", "--config-file", str(config), str(path)
    )
    missing = run(capsys, "--config-env", "prod", "--config-file", str(config), str(path))

    assert (code, err) == (0, "") and pages(out) == []
    assert missing[0] == EXIT_USAGE and missing[2].count("\n") == 1
    assert "no environment 'prod' (it has: staging)" in missing[2]


def test_scenario_parameters_configure_its_events_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quiet = tmp_path / "a-quiet.json"
    quiet.write_text(
        json.dumps(
            {"parameters": {"AlertRoutingPolicy": json.loads(NEVER_PAGE)}, "events": [sample(CRITICAL, "q")]}
        ),
        encoding="utf-8",
    )
    loud = tmp_path / "b-loud.json"
    loud.write_text(json.dumps(sample(CRITICAL, "l")), encoding="utf-8")

    code, out, _ = run(capsys, "--format", "json", *SLACK, str(quiet), str(loud))

    reports = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["event_id"] for r in reports] == ["q", "l"]
    assert [n["channel"] for n in reports[0]["notifications"]] == ["slack"]  # never paged
    assert "sns" in [n["channel"] for n in reports[1]["notifications"]]


@pytest.mark.parametrize("where", ["command line", "scenario"])
def test_a_parameter_the_template_does_not_declare_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    if where == "scenario":
        path = tmp_path / "s.json"
        path.write_text(
            json.dumps({"parameters": {"NoSuchParameter": 1}, "events": [sample(RUNNING)]}), encoding="utf-8"
        )
        code, out, err = run(capsys, str(path))
    else:
        path = write_events(tmp_path, sample(RUNNING))
        code, out, err = run(capsys, "--parameter-overrides", "NoSuchParameter=1", str(path))

    assert (code, out) == (EXIT_USAGE, "")
    assert err.count("\n") == 1 and "NoSuchParameter: not declared by the template" in err


@pytest.mark.parametrize("target", ["missing-dir/report.html", "."])
def test_an_unwritable_report_path_fails_before_the_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    path = write_events(tmp_path, sample(RUNNING))
    report = tmp_path / target

    code, out, err = run(capsys, "--report", str(report), str(path))

    assert (code, out) == (EXIT_USAGE, "")
    assert err.count("\n") == 1 and f"--report {report}" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.json"]  # nothing half-written


def test_progress_on_stderr_above_1000_events() -> None:
    from batchpilot_local.progress import Progress

    quiet, loud = io.StringIO(), io.StringIO()  # not terminals: lines, no bar
    small, large = Progress(quiet, 1_000), Progress(loud, 2_500)
    for _ in range(1_000):
        small.step()
    for _ in range(2_500):
        large.step()

    small.close()
    large.close()
    assert quiet.getvalue() == ""
    lines = loud.getvalue().splitlines()
    assert [line.split(" events")[0] for line in lines] == [
        "batchpilot replay: replayed 1,000/2,500",
        "batchpilot replay: replayed 2,000/2,500",
        "batchpilot replay: replayed 2,500/2,500",
    ]


# ----------------------------------------------------------------------------------- batching
def burst(count: int) -> list[dict[str, Any]]:
    """``count`` jobs of one queue failing for the same reason within a few seconds."""
    events = []
    for i in range(count):
        event = sample(CRITICAL, f"burst-{i}")
        event["time"] = f"2026-11-22T19:51:{20 + i:02d}Z"
        event["detail"]["jobName"] = f"burst-job-{i}"
        event["detail"]["jobArn"] = event["detail"]["jobArn"][:-2] + f"{i:02d}"
        events.append(event)
    return events


def slack_titles(out: str) -> list[str]:
    """Every Slack message's title: each event's own, and its batches' (a digest is the batch's)."""
    return [
        n["title"]
        for line in out.splitlines()
        for outputs in [json.loads(line), *json.loads(line)["batches"]]
        for n in outputs["notifications"]
        if n["channel"] == "slack"
    ]


def test_records_reach_each_function_in_sqs_batches_so_digests_appear(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_events(tmp_path, *burst(7))
    # Incidents off: an incident groups across batches (docs/alerts.md), which would hide them.
    per_batch = (SLACK[0], SLACK[1] + " AlertIncidentWindowMinutes=0")
    code, batched, _ = run(capsys, "--format", "json", *per_batch, str(path))
    code_single, single, _ = run(capsys, "--format", "json", *per_batch, "--one-by-one", str(path))

    assert (code, code_single) == (0, 0)
    assert len(slack_titles(single)) == 7  # one invocation per record: no burst to digest
    [digest] = slack_titles(batched)  # one batch (AlertsQueue: 100 records, 20 s): one digest
    assert "7" in digest
    reports = [json.loads(line) for line in batched.splitlines()]
    assert [r["event_id"] for r in reports] == [f"burst-{i}" for i in range(7)]  # input order kept
    # The digest tells about every event of the batch: it is the batch's, on its last event.
    [batch] = [b for b in reports[-1]["batches"] if b["function"] == "alerts"]
    [note] = [n for n in batch["notifications"] if n["channel"] == "slack"]
    assert note["events"] == list(range(1, 8)) and batch["events"] == list(range(1, 8))
    assert all(n["channel"] != "slack" for r in reports for n in r["notifications"])
    assert all(r["functions"] == reports[0]["functions"] for r in reports)


def test_a_batch_closes_when_the_events_clock_passes_the_batching_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = burst(6)
    for event in events[3:]:
        event["time"] = event["time"].replace("19:51:", "19:52:")  # a minute later: past the 20 s window
    path = write_events(tmp_path, *events)

    # Incidents off, as above: this checks where one batch ends, not how an incident groups.
    code, out, _ = run(
        capsys, "--format", "json", SLACK[0], SLACK[1] + " AlertIncidentWindowMinutes=0", str(path)
    )

    assert code == 0
    assert len(slack_titles(out)) == 6  # two batches of 3, below the digest threshold (5): one message each


# ------------------------------------------------------------------------------ memory shape
def test_events_are_held_deflated_and_decode_to_what_was_read(tmp_path: Path) -> None:
    events = [sample(RUNNING, "a"), sample(CRITICAL, "b"), sample(RUNNING, "c")]
    path = tmp_path / "archive.jsonl"
    path.write_text("\n".join(json.dumps(e, indent=None) for e in events) + "\n", encoding="utf-8")

    items = read_inputs([str(path)]).items

    assert [item.packed for item in items] == [True, True, True]
    compact = [len(json.dumps(e, separators=(",", ":")).encode()) for e in events]
    assert all(isinstance(item.payload, bytes) for item in items)
    # Against the first event's text, a later event of the same kind keeps a small part of its own.
    assert len(items[2].payload) * 4 < compact[2]
    assert [item.value for item in items] == events


def test_a_replay_that_keeps_no_reports_still_hands_each_one_over() -> None:
    events = [sample(RUNNING, "a"), sample(CRITICAL, "b"), ["not", "an", "event"]]
    seen: list[str | None] = []

    kept = Replayer(TEMPLATE, batch=True).run(
        events, on_report=lambda report: seen.append(report.event_id), keep_reports=False
    )

    assert kept == []
    assert seen == ["a", "b", None]


def test_the_text_report_is_the_same_whether_events_wait_in_memory_or_on_disk(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "two.json"
    path.write_text(json.dumps([sample(RUNNING, "a"), sample(CRITICAL, "b")]), encoding="utf-8")
    report = tmp_path / "r.html"

    _, spooled, _ = run(capsys, str(path))
    _, kept, _ = run(capsys, "--report", str(report), str(path))  # --report keeps every report

    assert spooled.index("batchpilot replay: 2 events") < spooled.index("\nEvents\n")
    assert "[2] Batch Service Job State Change" in spooled
    assert _without_times(spooled) == _without_times(kept)


def _without_times(text: str) -> str:
    """The text report without the wall-clock timestamps of the functions' own counters."""
    import re

    return re.sub(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "<t>", text)
