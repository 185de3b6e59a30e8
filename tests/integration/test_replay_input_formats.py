"""`batchpilot replay` reads inputs as AWS exports them, and refuses bad input piece by piece.

CloudWatch Logs exports to S3 (``create-export-task``: gzip files under
``<prefix>/<task>/<stream>/000000.gz``, lines of ``<timestamp> <message>``), Logs Insights exports
(CSV and JSON), gzip told by content; a bad line, file or event is refused with one line naming
its one line, the rest is replayed and the exit status is 1; a folder with nothing readable is an
error (exit 2); non-regular files are never opened; events EventBridge would refuse are refused.
"""

from __future__ import annotations

import copy
import csv
import gzip
import io
import json
import os
import re
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local import inputs
from batchpilot_local.cli import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, main
from batchpilot_local.inputs import (
    PUT_EVENTS_ENTRY_LIMIT,
    SQS_MESSAGE_LIMIT,
    InputError,
    ReplayInput,
    entry_size,
    oversize,
    parse_chunks,
    read_inputs,
)
from batchpilot_local.testing.paths import repo_root
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = repo_root()
TEMPLATE = ROOT / "template.yaml"
RUNNING = json.loads((ROOT / "events/batch-job/running.json").read_text(encoding="utf-8"))
CRITICAL = json.loads((ROOT / "events/service-job/failed-algorithm-error.json").read_text(encoding="utf-8"))
REQUEST_ID = "0f4b6c3e-1111-2222-3333-444455556666"


def event(base: dict[str, Any], event_id: str) -> dict[str, Any]:
    copied = copy.deepcopy(base)
    copied["id"] = event_id
    return copied


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def export_line(message: str, second: int = 0) -> str:
    """One line of a CloudWatch Logs export to S3."""
    return f"2026-11-22T19:51:{second:02d}.400Z {message}\n"


def replay(capsys: pytest.CaptureFixture[str], *paths: Path | str) -> tuple[int, list[str], list[str]]:
    """Exit status, the event ids reported (``--format json``) and the stderr lines."""
    code = main(["replay", "--template", str(TEMPLATE), "--format", "json", *map(str, paths)])
    captured = capsys.readouterr()
    ids = [json.loads(line)["event_id"] for line in captured.out.splitlines()]
    return code, ids, captured.err.splitlines()


def one_line_number(message: str) -> int:
    """The one line number a refusal names (it names exactly one)."""
    numbers = re.findall(r"\bline (\d+)\b", message)
    assert len(numbers) == 1, message
    return int(numbers[0])


def read_without_blocking(target: Callable[[], ReplayInput], seconds: float = 30.0) -> ReplayInput:
    """``target()`` in a thread: a read that blocks (a FIFO opened with no writer) fails the test
    instead of hanging it."""
    result: list[ReplayInput] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(target())
        except BaseException as exc:  # handed to the test below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "reading the input blocked"
    if errors:
        raise errors[0]
    return result[0]


# ------------------------------------------------------------------------ CloudWatch Logs export
def write_logs_export(root: Path) -> list[str]:
    """``create-export-task`` output as ``aws s3 sync`` downloads it; returns the event ids in
    the order a replay of ``root`` reads them."""
    task = root / "exportedlogs" / "1b4a3f5e-8e1c-4c1f-9f3e-111122223333"
    streams = {
        "stream-a": [event(RUNNING, "a0"), event(CRITICAL, "a1")],
        "stream-b": [event(RUNNING, "b0")],
    }
    for stream, events in streams.items():
        folder = task / stream
        folder.mkdir(parents=True)
        text = "".join(export_line(compact(e), i) for i, e in enumerate(events))
        (folder / "000000.gz").write_bytes(gzip.compress(text.encode("utf-8")))
    # The object CloudWatch Logs writes to check the bucket's permissions.
    (root / "exportedlogs" / "aws-logs-write-test").write_text(
        "Permission Check Successful", encoding="utf-8"
    )
    return ["a0", "a1", "b0"]


def test_a_logs_export_folder_replays_every_event_and_names_what_it_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = write_logs_export(tmp_path)

    code, ids, err = replay(capsys, tmp_path)

    assert (code, ids) == (EXIT_OK, expected)
    assert err == [
        f"batchpilot replay: {tmp_path}: skipped 1 file without a suffix and not event input "
        "(aws-logs-write-test)"
    ]


def test_gzip_is_told_by_its_bytes_not_its_name(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    # gzip data named .json; a .gz a browser already decompressed; gzip with no suffix (by content).
    (folder / "a.json").write_bytes(gzip.compress(json.dumps(event(RUNNING, "a")).encode()))
    (folder / "b.gz").write_text(export_line(compact(event(RUNNING, "b"))), encoding="utf-8")
    (folder / "c").write_bytes(gzip.compress(export_line(compact(event(CRITICAL, "c"))).encode()))

    replay_input = read_inputs([str(folder)], tolerant=True)

    assert [e["id"] for e in replay_input.events] == ["a", "b", "c"]
    assert [item.origin for item in replay_input.items] == [
        f"{folder}/a.json",
        f"{folder}/b.gz:1",
        f"{folder}/c:1",
    ]
    assert (replay_input.refused, replay_input.skipped) == ([], [])


def test_export_lines_as_a_lambda_or_an_eventbridge_target_wrote_them(tmp_path: Path) -> None:
    pretty = json.dumps(event(CRITICAL, "pretty"), indent=2)  # one log event of several lines
    lines = [
        export_line(compact(event(RUNNING, "target"))),  # an EventBridge rule's CloudWatch Logs target
        export_line(f"START RequestId: {REQUEST_ID} Version: $LATEST"),
        export_line(f"[INFO]\t2026-11-22T19:51:00.500Z\t{REQUEST_ID}\t{compact(event(RUNNING, 'python'))}"),
        export_line(f"2026-11-22T19:51:00.600Z\t{REQUEST_ID}\tINFO\t{compact(event(RUNNING, 'node'))}"),
        export_line(f"[INFO]\t2026-11-22T19:51:00.700Z\t{REQUEST_ID}\tprocessed 3 records"),
        export_line(
            compact(
                {  # Lambda's JSON log format, the message being the event's text
                    "timestamp": "2026-11-22T19:51:00.800Z",
                    "level": "INFO",
                    "message": compact(event(RUNNING, "lambda-json")),
                    "requestId": REQUEST_ID,
                }
            )
        ),
        export_line(
            compact(
                {  # Powertools' logger.info(event)
                    "level": "INFO",
                    "location": "handler:12",
                    "message": event(CRITICAL, "powertools"),
                    "timestamp": "2026-11-22 19:51:00,900+0000",
                    "service": "watcher",
                }
            )
        ),
        export_line(compact({"time": "2026-11-22T19:51:01.000Z", "type": "platform.report", "record": {}})),
        export_line(pretty),
        export_line(f"END RequestId: {REQUEST_ID}"),
        export_line(f"REPORT RequestId: {REQUEST_ID}\tDuration: 2.1 ms\tBilled Duration: 3 ms"),
    ]
    path = tmp_path / "000000"
    path.write_text("".join(lines), encoding="utf-8")

    replay_input = read_inputs([str(path)], tolerant=True)

    assert [e["id"] for e in replay_input.events] == [
        "target",
        "python",
        "node",
        "lambda-json",
        "powertools",
        "pretty",
    ]
    assert [item.origin for item in replay_input.items] == [f"{path}:{n}" for n in (1, 3, 4, 6, 7, 9)]
    assert replay_input.refused == []
    assert replay_input.skipped == [
        f"{path}: skipped 4 Lambda platform lines and 1 Lambda log line holding no JSON (not events)"
    ]


# ---------------------------------------------------------------------------- Logs Insights
def insights_csv(rows: list[tuple[str, str]], *, quoting: int, bom: bool = False) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=quoting, lineterminator="\r\n")  # as csv.writer's excel dialect
    writer.writerow(["@timestamp", "@logStream", "@message"])
    for stamp, message in rows:
        writer.writerow([stamp, "stream-a", message])
    return ("\ufeff" if bom else "") + buffer.getvalue()


@pytest.mark.parametrize(("quoting", "bom"), [(csv.QUOTE_MINIMAL, False), (csv.QUOTE_ALL, True)])
def test_a_logs_insights_csv_export_with_quoting_and_fields_of_several_lines(
    tmp_path: Path, quoting: int, bom: bool
) -> None:
    multi = json.dumps(event(CRITICAL, "multi"), indent=2)  # a quoted field holding newlines
    large = event(RUNNING, "large")
    large["detail"]["container"]["environment"] = [{"name": "BIG", "value": 'x, "y"' * 40_000}]
    rows = [
        ("2026-11-22 19:51:00.000", compact(event(RUNNING, "a"))),
        ("2026-11-22 19:51:01.000", multi),
        ("2026-11-22 19:51:02.000", compact(large)),  # over the csv module's default field limit
        ("2026-11-22 19:51:03.000", f"START RequestId: {REQUEST_ID} Version: $LATEST"),
    ]
    path = tmp_path / "logs-insights-results.csv"
    path.write_text(insights_csv(rows, quoting=quoting, bom=bom), encoding="utf-8")
    limit = csv.field_size_limit()

    replay_input = read_inputs([str(path)], tolerant=True)

    assert [e["id"] for e in replay_input.events] == ["a", "multi", "large"]
    assert replay_input.events[2] == large
    second_row = 3 + multi.count("\n")
    assert [item.origin for item in replay_input.items] == [
        f"{path}:2",
        f"{path}:3",
        f"{path}:{second_row + 1}",
    ]
    assert replay_input.refused == []
    assert replay_input.skipped == [f"{path}: skipped 1 Lambda platform line (not events)"]
    assert csv.field_size_limit() == limit  # restored


def test_logs_insights_exports_in_csv_and_json_replay_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [("2026-11-22 19:51:00.000", compact(event(CRITICAL, "csv")))]
    (tmp_path / "results.csv").write_text(insights_csv(rows, quoting=csv.QUOTE_MINIMAL), encoding="utf-8")
    exported = [{"@timestamp": "2026-11-22 19:51:00.000", "@message": compact(event(RUNNING, "json"))}]
    (tmp_path / "results.json").write_text(json.dumps(exported, indent=2), encoding="utf-8")

    code, ids, err = replay(capsys, tmp_path / "results.csv", tmp_path / "results.json")

    assert (code, ids, err) == (EXIT_OK, ["csv", "json"], [])


def test_bad_rows_of_a_csv_export_are_refused_each_with_its_line(tmp_path: Path) -> None:
    text = insights_csv(
        [
            ("2026-11-22 19:51:00.000", compact(event(RUNNING, "a"))),
            ("2026-11-22 19:51:01.000", compact(event(RUNNING, "b"))[:-30]),  # cut short
            ("2026-11-22 19:51:02.000", compact(event(RUNNING, "c"))),
        ],
        quoting=csv.QUOTE_MINIMAL,
    )
    text += (
        "only-one-field\r\n" + '2026-11-22 19:51:04.000,stream-a,"{""id"": ""never closed'
    )  # EOF in quotes
    path = tmp_path / "results.csv"
    path.write_text(text, encoding="utf-8")

    replay_input = read_inputs([str(path)], tolerant=True)

    assert [e["id"] for e in replay_input.events] == ["a", "c"]
    assert [one_line_number(m) for m in replay_input.refused] == [3, 5, 6]
    assert "invalid JSON" in replay_input.refused[0]
    assert replay_input.refused[1].endswith("line 5: 1 CSV field, the header names 3")
    assert "not valid CSV: unexpected end of data" in replay_input.refused[2]


# ---------------------------------------------------------------------------------- bad input
def test_a_cut_line_in_json_lines_is_refused_with_its_one_line_and_the_rest_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [compact(event(RUNNING, f"e{i}")) for i in range(5)]
    lines[2] = lines[2][: len(lines[2]) // 2]  # a download that stopped mid-line, then resumed
    path = tmp_path / "archive.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    code, ids, err = replay(capsys, path)

    assert code == EXIT_ERRORS
    assert ids == ["e0", "e1", "e3", "e4"]
    assert err == [
        f"batchpilot replay: {path}: line 3: invalid JSON: cut short: the document starting on this line "
        "never closes; not replayed",
        "batchpilot replay: 1 input refused (listed before the replay); the rest was replayed",
    ]


def test_a_pretty_printed_document_broken_inside_names_the_line_where_it_breaks(tmp_path: Path) -> None:
    documents = [json.dumps(event(RUNNING, f"p{i}"), indent=2) for i in range(3)]
    documents[1] = documents[1].replace('"source": ', '"source" ', 1)
    path = tmp_path / "cat.json"
    path.write_text("\n".join(documents) + "\n", encoding="utf-8")
    broken = path.read_text(encoding="utf-8").splitlines().index('  "source" "aws.batch",') + 1

    replay_input = read_inputs([str(path)], tolerant=True)

    assert [e["id"] for e in replay_input.events] == ["p0", "p2"]
    assert replay_input.refused == [
        f"{path}: line {broken}: invalid JSON: Expecting ':' delimiter (column 12)"
    ]


def test_a_gzip_file_cut_short_keeps_what_came_before_and_names_where_it_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "".join(export_line(compact(event(RUNNING, f"g{i}")), i % 60) for i in range(300))
    data = gzip.compress(text.encode("utf-8"))
    cut = tmp_path / "cut" / "000000.gz"
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) // 2])
    not_gzip = tmp_path / "garbage.gz"
    not_gzip.write_bytes(b"\x1f\x8b" + os.urandom(200))  # gzip's magic bytes, then noise
    good = tmp_path / "good.json"
    good.write_text(json.dumps(event(CRITICAL, "good")), encoding="utf-8")

    code, ids, err = replay(capsys, cut, not_gzip, good)

    assert code == EXIT_ERRORS
    assert ids[-1] == "good" and ids[:-1] == [f"g{i}" for i in range(len(ids) - 1)]
    assert 0 < len(ids) - 1 < 300  # what came before the cut, and only that
    refused_cut, refused_garbage, summary = err
    assert one_line_number(refused_cut) == len(ids)  # the line being read when the data ended
    assert (
        "gzip data corrupt or cut short" in refused_cut and "the rest of the file is not read" in refused_cut
    )
    assert refused_garbage.startswith(f"batchpilot replay: {not_gzip}: gzip data corrupt or cut short")
    assert summary.endswith("2 inputs refused (listed before the replay); the rest was replayed")


def big_event(event_id: str, detail_bytes: int) -> dict[str, Any]:
    """A Batch job event whose ``detail`` is about ``detail_bytes`` of compact JSON."""
    big = event(RUNNING, event_id)
    padding = detail_bytes - len(compact(big["detail"]).encode())
    big["detail"]["container"]["environment"] = [{"name": "PAD", "value": "x" * max(padding - 40, 0)}]
    return big


def test_entry_size_is_eventbridges_calculation() -> None:
    entry = {
        "time": "2026-11-22T19:51:18Z",
        "source": "aws.batch",
        "detail-type": "Batch Job State Change",
        "resources": ["arn:aws:batch:us-east-1:1:job/é"],
        "detail": {"jobName": "naïve"},
    }
    detail = '{"jobName":"naïve"}'.encode()

    # Time: 14 bytes; Source, DetailType, Detail and each resource: their UTF-8 bytes.
    expected = 14 + len(b"aws.batch") + len(b"Batch Job State Change") + len(detail)
    assert entry_size(entry) == expected + len("arn:aws:batch:us-east-1:1:job/é".encode())
    assert entry_size({k: v for k, v in entry.items() if k != "time"}) == entry_size(entry) - 14


def test_oversize_names_the_limit_eventbridge_or_sqs_would_refuse_and_lets_smaller_events_through() -> None:
    fits = big_event("fits", 600_000)  # over the old 256 KB entry limit, under today's 1 MiB
    over = big_event("over", PUT_EVENTS_ENTRY_LIMIT + 1_000)
    # An entry just under the limit whose whole event (id, account, region, ... added) is over SQS's.
    edge = big_event("edge", PUT_EVENTS_ENTRY_LIMIT - 300)
    edge["detail"]["container"]["environment"][0]["value"] += "x" * (
        PUT_EVENTS_ENTRY_LIMIT - entry_size(edge) - 1
    )

    assert oversize(fits) is None
    assert entry_size(edge) < PUT_EVENTS_ENTRY_LIMIT < len(compact(edge).encode())
    assert oversize(over) == (
        f"event too large: {entry_size(over):,} bytes as a PutEvents entry, over EventBridge's "
        "1,048,576-byte (1 MiB) entry limit"
    )
    assert oversize(edge) == (
        f"event too large: {len(compact(edge).encode()):,} bytes of JSON, over SQS's 1,048,576-byte "
        "(1 MiB) message limit: EventBridge would take it but could not deliver it to a function's queue"
    )
    assert SQS_MESSAGE_LIMIT == PUT_EVENTS_ENTRY_LIMIT == 1 << 20


def test_an_event_over_the_entry_limit_is_refused_in_one_line_and_the_others_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "archive.jsonl"
    events = [event(CRITICAL, "before"), big_event("huge", 1_200_000), big_event("large", 600_000)]
    path.write_text("\n".join(compact(e) for e in events) + "\n", encoding="utf-8")

    code, ids, err = replay(capsys, path)

    assert code == EXIT_ERRORS
    assert ids == ["before", "large"]  # 600 KB is under EventBridge's entry limit: replayed
    assert not any("Traceback" in line for line in err)
    assert err[0].startswith(f"batchpilot replay: {path}: line 2: event too large: ")
    assert err[0].endswith("over EventBridge's 1,048,576-byte (1 MiB) entry limit; not replayed")
    assert len(err) == 2


def test_a_fifo_in_a_folder_is_skipped_unopened_and_one_named_with_no_writer_does_not_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(event(RUNNING, "a")), encoding="utf-8")
    os.mkfifo(folder / "pipe.json")  # no writer: opening it for reading would wait for one
    lonely = tmp_path / "lonely.fifo"
    os.mkfifo(lonely)

    in_folder = read_without_blocking(lambda: read_inputs([str(folder)], tolerant=True))
    named = read_without_blocking(lambda: read_inputs([str(lonely)], tolerant=True))

    assert [e["id"] for e in in_folder.events] == ["a"]
    assert in_folder.skipped == [f"{folder}: skipped 1 FIFO (not a regular file: not opened)"]
    assert named.events == [] and named.refused == [
        f"{lonely}: empty input: expected a JSON object, an array or JSON Lines"
    ]


def test_a_fifo_named_on_the_command_line_is_read_like_a_pipe(tmp_path: Path) -> None:
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    text = gzip.compress(json.dumps(event(CRITICAL, "piped")).encode())  # `<(gzip -c ...)`

    def write() -> None:
        with fifo.open("wb") as writer:  # blocks until the replay opens it for reading
            writer.write(text)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    replay_input = read_without_blocking(lambda: read_inputs([str(fifo)], tolerant=True))
    writer.join(30)

    assert [e["id"] for e in replay_input.events] == ["piped"] and replay_input.refused == []


def test_a_socket_is_never_opened(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(event(RUNNING, "a")), encoding="utf-8")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(folder / "events.sock"))

        in_folder = read_inputs([str(folder)], tolerant=True)
        named = read_inputs([str(folder / "events.sock")], tolerant=True)

    assert in_folder.skipped == [f"{folder}: skipped 1 socket (not a regular file: not opened)"]
    assert named.refused == [f"{folder / 'events.sock'}: a socket, not a regular file: not read"]


def test_symlinks_to_files_are_read_symlinks_to_folders_are_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "b.json").write_text(json.dumps(event(RUNNING, "b")), encoding="utf-8")
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(event(RUNNING, "a")), encoding="utf-8")
    (folder / "link.json").symlink_to(elsewhere / "b.json")
    (folder / "loop").symlink_to(folder)  # followed, it would never end
    (folder / "other").symlink_to(elsewhere)
    (folder / "broken.json").symlink_to(tmp_path / "gone.json")

    replay_input = read_inputs([str(folder)], tolerant=True)
    named = read_inputs([str(folder / "other")], tolerant=True)  # a link named is followed

    assert [e["id"] for e in replay_input.events] == ["a", "b"]
    assert replay_input.skipped == [
        f"{folder}: skipped 2 symlinks to folders (not followed); 1 broken symlink"
    ]
    assert [e["id"] for e in named.events] == ["b"]


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        ({}, "nothing to replay: no event input found: {root}: no files to read"),
        (
            {"README.md": "# events", "fleet.yaml": "a: 1", ".hidden.json": "{}"},
            "nothing to replay: no event input found: {root}: skipped "
            "2 files whose suffix is not an event format (.md, .yaml)",
        ),
    ],
)
def test_a_folder_with_nothing_readable_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: dict[str, str], expected: str
) -> None:
    root = tmp_path / "archive"
    root.mkdir()
    for name, text in layout.items():
        (root / name).write_text(text, encoding="utf-8")

    code = main(["replay", "--template", str(TEMPLATE), str(root)])

    captured = capsys.readouterr()
    assert (code, captured.out) == (EXIT_USAGE, "")
    assert captured.err == f"batchpilot replay: {expected.format(root=root)}\n"


def test_input_that_is_all_refused_is_exit_2_after_naming_each_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "archive.jsonl"
    path.write_text('{"id": "cut\n12\n', encoding="utf-8")

    code = main(["replay", "--template", str(TEMPLATE), str(path)])

    captured = capsys.readouterr()
    assert (code, captured.out) == (EXIT_USAGE, "")
    assert captured.err.splitlines() == [
        f"batchpilot replay: {path}: line 1: invalid JSON: cut short: the document starting on this line "
        "never closes; not replayed",
        f"batchpilot replay: {path}: line 2: expected a JSON object or array, got a number; not replayed",
        "batchpilot replay: nothing to replay: every input was refused (2, listed above)",
    ]


def test_a_file_of_many_bad_lines_lists_a_few_and_counts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "junk.jsonl"
    path.write_text(compact(event(RUNNING, "ok")) + "\n" + "not json\n" * 100, encoding="utf-8")

    replay_input = read_inputs([str(path)], tolerant=True)

    assert [e["id"] for e in replay_input.events] == ["ok"]
    assert replay_input.refused_count == 100
    assert [one_line_number(m) for m in replay_input.refused[:5]] == [2, 3, 4, 5, 6]
    assert replay_input.refused[5:] == [f"{path}: 95 more refused (not listed)"]


def test_a_file_in_no_format_is_refused_when_named_and_skipped_in_a_folder_when_it_has_no_suffix(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "notes").write_text("Permission Check Successful", encoding="utf-8")
    (folder / "a.json").write_text(json.dumps(event(RUNNING, "a")), encoding="utf-8")
    binary = tmp_path / "image.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")

    in_folder = read_inputs([str(folder)], tolerant=True)
    with pytest.raises(InputError) as error:
        read_inputs([str(binary)])

    assert [e["id"] for e in in_folder.events] == ["a"] and in_folder.refused == []
    assert str(error.value).startswith(
        f"{binary}: not UTF-8 text: not event input: expected JSON, JSON Lines"
    )


# -------------------------------------------------------------------- properties of the reader
_objects = st.dictionaries(
    st.text("abcxyz", min_size=1, max_size=4),
    st.integers(-100, 100) | st.text('abc é,"', max_size=5) | st.lists(st.integers(0, 9), max_size=3),
    min_size=1,
    max_size=4,
)
_junk = st.sampled_from(["not json", "12", "[1, tru", '"abc', "tru", "-", '{"a": ', "{", '{"k": [1, 2', "}"])


@st.composite
def _json_lines(draw: st.DrawFn) -> tuple[list[tuple[str, Any]], str]:
    """JSON Lines with good lines, cut ones and junk: ``(kind, value)`` per line, and the text."""
    lines: list[tuple[str, Any]] = []
    for value in draw(st.lists(_objects, min_size=1, max_size=8)):
        shape = draw(st.sampled_from(["good", "good", "cut", "junk", "blank"]))
        text = compact(value)
        if shape == "cut":
            lines.append(("bad", text[: draw(st.integers(1, len(text) - 1))]))
        elif shape == "junk":
            lines.append(("bad", draw(_junk)))
        elif shape == "blank":
            lines.append(("blank", ""))
        lines.append(("good", value))
    text = "\n".join(compact(v) if kind == "good" else v for kind, v in lines)
    return lines, text + draw(st.sampled_from(["", "\n", "\r\n"]))


def _cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True) if a < b]


def _tolerant_read(chunks: list[str], *, json_lines: bool) -> tuple[list[tuple[Any, str]], list[str]]:
    out = ReplayInput(packer=None, tolerant=True)
    parse_chunks(iter(chunks), "f", out, json_lines=json_lines)
    return [(item.value, item.origin) for item in out.items], out.refused


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_json_lines(), cuts=st.lists(st.integers(0, 5_000), max_size=10))
def test_in_json_lines_each_bad_line_is_one_refusal_naming_it_and_every_good_line_is_read(
    data: tuple[list[tuple[str, Any]], str], cuts: list[int]
) -> None:
    lines, text = data
    if text.lstrip()[:1] not in ("{", "["):
        text = compact({"first": 1}) + "\n" + text  # the format is told by the first line
        lines = [("good", {"first": 1}), *lines]

    items, refused = _tolerant_read(_cut(text, cuts), json_lines=True)

    good = [(value, f"f:{n}") for n, (kind, value) in enumerate(lines, 1) if kind == "good"]
    bad = [n for n, (kind, _) in enumerate(lines, 1) if kind == "bad"]
    assert items == good
    assert [one_line_number(message) for message in refused] == bad
    assert (items, refused) == _tolerant_read([text], json_lines=True)  # wherever the text is cut


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(_objects, min_size=1, max_size=6),
    damage=st.lists(st.integers(0, 10_000), max_size=3),
    indent=st.sampled_from([None, 2]),
    cuts=st.lists(st.integers(0, 10_000), max_size=10),
)
def test_any_cut_of_damaged_text_gives_the_same_items_and_refusals(
    values: list[dict[str, Any]], damage: list[int], indent: int | None, cuts: list[int]
) -> None:
    text = "\n".join(json.dumps(v, indent=indent) for v in values) + "\n"
    for at in damage:  # delete a character: a document cut short, or broken inside
        at %= len(text)
        text = text[:at] + text[at + 1 :]

    whole = _tolerant_read([text], json_lines=False)
    pieces = _tolerant_read(_cut(text, cuts), json_lines=False)

    assert pieces == whole
    assert all(len(re.findall(r"\bline \d+\b", message)) == 1 for message in whole[1])
    if not damage:
        assert [value for value, _ in whole[0]] == values and whole[1] == []


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(_objects, min_size=1, max_size=6),
    form=st.sampled_from(["export", "csv"]),
    cuts=st.lists(st.integers(0, 5_000), max_size=10),
)
def test_log_exports_read_in_any_pieces_give_each_event_with_its_line(
    values: list[dict[str, Any]], form: str, cuts: list[int]
) -> None:
    events = [{"source": "aws.batch", "detail-type": "Batch Job State Change", "detail": v} for v in values]
    messages = [json.dumps(e, indent=2 if i % 2 else None) for i, e in enumerate(events)]  # some multi-line
    if form == "export":
        text = "".join(export_line(message, i) for i, message in enumerate(messages))
    else:
        text = insights_csv([("t", message) for message in messages], quoting=csv.QUOTE_MINIMAL)

    items, refused = _tolerant_read(_cut(text, cuts), json_lines=False)

    heights = [message.count("\n") + 1 for message in messages]
    first = 2 if form == "csv" else 1  # after the header row
    starts = [first + sum(heights[:k]) for k in range(len(events))]
    assert refused == []
    assert items == [(e, f"f:{start}") for e, start in zip(events, starts, strict=True)]


def test_a_small_read_window_changes_nothing_for_an_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inputs, "_CHUNK", 50)  # decompressed a few bytes at a time
    expected = write_logs_export(tmp_path)

    replay_input = read_inputs([str(tmp_path)], tolerant=True)

    assert [e["id"] for e in replay_input.events] == expected
    assert replay_input.refused == []
