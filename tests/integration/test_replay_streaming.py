"""`batchpilot replay` reads its input a window at a time and holds it in a temporary file.

The text of a file arrives in pieces (``batchpilot_local.inputs._CHUNK`` characters): wherever
the pieces are cut, the same documents, origins and errors come out as from the whole text. A
spooled input (:class:`~batchpilot_local.inputs.ItemSpool`) gives back what was read, in order,
as often as it is read. The replay's own chat endpoint forgets each message once it is reported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local import inputs
from batchpilot_local.cli import main
from batchpilot_local.clock import ClockScenario
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.inputs import InputError, InputItem, ItemSpool, ReplayInput, parse_chunks, read_inputs
from batchpilot_local.notifications import LocalAlerts
from batchpilot_local.template import load_template
from batchpilot_local.testing.paths import repo_root
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_sdk.webhook import WebhookClient

ROOT = repo_root()
TEMPLATE = ROOT / "template.yaml"
RUNNING = json.loads((ROOT / "events/batch-job/running.json").read_text(encoding="utf-8"))
CLOCK_SCENARIO = next(p for p in sorted((ROOT / "events").rglob("*.json")) if '"ticks"' in p.read_text())

_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
_documents = st.lists(
    st.tuples(st.dictionaries(st.text(max_size=5), _values, max_size=4), st.sampled_from([None, 2])),
    min_size=1,
    max_size=6,
)


def _read(chunks: list[str], json_lines: bool = False) -> tuple[list[tuple[Any, str]], str | None]:
    """The items (value, origin) that ``chunks`` make, or the error message."""
    out = ReplayInput(packer=None)
    try:
        parse_chunks(chunks, "f.json", out, json_lines=json_lines)
    except InputError as exc:
        return [(item.value, item.origin) for item in out.items], str(exc)
    return [(item.value, item.origin) for item in out.items], None


def _cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True) if a < b]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    documents=_documents,
    gaps=st.lists(st.sampled_from(["", "\n", " ", "\n\n", "\r\n", "\t\n  "]), min_size=6, max_size=6),
    tail=st.sampled_from(["", '\n{"n": \n', "\n[1, tru", '\n{"s": "abc', "\n-", "\n12", '\n{"a": 1} x']),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_any_cut_of_the_text_gives_the_same_documents_origins_and_errors(
    documents: list[tuple[dict[str, Any], int | None]], gaps: list[str], tail: str, cuts: list[int]
) -> None:
    text = "".join(
        json.dumps(doc, indent=indent) + gap for (doc, indent), gap in zip(documents, gaps, strict=False)
    )
    text += tail

    whole = _read([text])
    pieces = _read(_cut(text, cuts))

    assert pieces == whole
    if not tail:
        assert [value for value, _ in whole[0]] == [doc for doc, _ in documents]


def test_json_lines_read_in_small_pieces_keep_their_line_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inputs, "_CHUNK", 64)  # bytes per read: every event spans several
    events = [dict(RUNNING, id=f"e{i}") for i in range(40)]
    path = tmp_path / "archive.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")

    items = read_inputs([str(path)]).items

    assert [item.value for item in items] == events
    assert [item.origin for item in items] == [f"{path}:{n}" for n in range(1, 41)]


def test_a_broken_event_deep_in_a_file_read_in_pieces_is_named_by_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inputs, "_CHUNK", 100)
    path = tmp_path / "archive.jsonl"
    lines = [json.dumps(dict(RUNNING, id=f"e{i}")) for i in range(30)]
    lines[17] = lines[17][:-40]  # cut short: the object never closes
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    with pytest.raises(InputError) as error:
        read_inputs([str(path)])

    assert str(error.value).startswith(f"{path}: line 18: invalid JSON")


def test_bytes_that_are_not_utf8_are_named_by_their_line_and_column_and_the_other_lines_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inputs, "_CHUNK", 7)
    path = tmp_path / "bad.json"
    good = '{"name": "café"}\n'.encode()  # é is two bytes: some reads end inside it
    path.write_bytes(good * 5 + b'{"x": "\xff"}\n' + good)

    with pytest.raises(InputError) as error:
        read_inputs([str(path)])
    tolerant = read_inputs([str(path)], tolerant=True)

    assert str(error.value) == f"{path}: line 6: not UTF-8 text (column 8)"
    assert tolerant.refused == [str(error.value)]
    assert tolerant.events == [{"name": "café"}] * 6


def test_a_spooled_input_gives_back_what_was_read_in_order_each_time_it_is_read(tmp_path: Path) -> None:
    events = [dict(RUNNING, id=f"e{i}") for i in range(5)]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(e) for e in events), encoding="utf-8")
    (tmp_path / "b.json").write_text(CLOCK_SCENARIO.read_text(encoding="utf-8"), encoding="utf-8")

    replay_input = read_inputs([str(tmp_path)], spool=True)
    items = replay_input.items

    assert isinstance(items, ItemSpool) and len(items) == 6
    first, second = list(items), list(items)
    assert [i.value for i in first[:5]] == events and first == second
    clock = first[5].value
    assert isinstance(clock, ClockScenario) and first[5].scope == str(tmp_path / "b.json")
    assert replay_input.steps == 5 + len(clock.ticks)
    with pytest.raises(RuntimeError, match="sealed"):
        items.append(InputItem({}, "x"))
    reading = iter(items)
    next(reading)
    with pytest.raises(RuntimeError, match="already being read"):
        next(iter(items))
    reading.close()  # a reader that stops early frees the spool for the next
    assert list(items) == first
    replay_input.close()
    with pytest.raises(ValueError):  # the file is gone
        next(iter(items))


def test_an_unreadable_later_file_is_refused_before_anything_runs_and_the_rest_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.json").write_text(json.dumps(RUNNING), encoding="utf-8")
    (tmp_path / "b.json").write_text('{"detail-type": ', encoding="utf-8")

    code = main(["replay", "--template", str(TEMPLATE), "--format", "json", str(tmp_path)])

    captured = capsys.readouterr()
    assert code == 1
    assert [json.loads(line)["event_id"] for line in captured.out.splitlines()] == [RUNNING["id"]]
    where = tmp_path / "b.json"
    refusal, summary = captured.err.splitlines()[0], captured.err.splitlines()[-1]
    assert refusal == (
        f"batchpilot replay: {where}: line 1: invalid JSON: cut short: the document starting on "
        "this line never closes; not replayed"
    )
    assert summary.endswith("1 input refused (listed before the replay); the rest was replayed")


def test_progress_counts_only_what_the_filters_keep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = [dict(RUNNING, id=f"e{i}") for i in range(1_001)]
    elsewhere = [
        dict(
            RUNNING,
            id=f"o{i}",
            detail={**RUNNING["detail"], "jobQueue": "arn:aws:batch:us-east-1:1:job-queue/other"},
        )
        for i in range(1_001)
    ]
    path = tmp_path / "archive.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events + elsewhere), encoding="utf-8")
    queue = RUNNING["detail"]["jobQueue"].rsplit("/", 1)[-1]

    code = main(["replay", "--template", str(TEMPLATE), "--format", "json", "--queue", queue, str(path)])

    captured = capsys.readouterr()
    assert code == 0
    assert len(captured.out.splitlines()) == 1_001
    assert "replayed 1,001/1,001 events" in captured.err


def test_the_replays_own_chat_endpoint_forgets_each_message_once_it_is_reported() -> None:
    template = load_template(TEMPLATE)
    with EmbeddedAws() as aws, LocalAlerts(aws, template) as alerts:  # its own endpoint, as the replay's
        for text in ("Critical: one", "Critical: two"):
            assert WebhookClient(alerts.slack.webhook_url).send(text=text, blocks=[]).status_code == 200

        first = alerts.deliveries()

        assert [d.payload["text"] for d in first] == ["Critical: one", "Critical: two"]
        assert alerts.slack.requests == []  # what was reported is not kept
        WebhookClient(alerts.slack.webhook_url).send(text="Critical: three", blocks=[])
        assert [d.payload["text"] for d in alerts.deliveries()] == ["Critical: three"]
        assert alerts.deliveries() == []
