"""What `batchpilot replay` prints where: the deployment first, the summary at the top and again at
the end (or alone with --summary), each event between; progress on stderr only (a rich bar on a
terminal, following NO_COLOR), never on stdout, whose JSON lines stay as they are."""

from __future__ import annotations

import io
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local import progress
from batchpilot_local.cli import EXIT_USAGE, main
from batchpilot_local.progress import Progress
from batchpilot_local.testing.paths import TEMPLATE_PATH
from batchpilot_local.testing.samples import sample

SGR = re.compile(r"\x1b\[[0-9;]*m")  # a colour or style: what NO_COLOR leaves out
ESCAPE = re.compile(r"\x1b")


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as a person's stderr does."""

    def isatty(self) -> bool:
        return True


def events_file(tmp_path: Path) -> Path:
    events = [sample("batch-job/failed-application-error"), sample("batch-job/succeeded")]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    return path


def replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["replay", "--template", str(TEMPLATE_PATH), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_text_opens_with_the_deployment_and_ends_with_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = events_file(tmp_path)

    code, full, _ = replay(capsys, str(path))
    summary_code, summary, err = replay(capsys, "--summary", str(path))

    assert (code, summary_code, err) == (0, 0, "")
    assert full.startswith("Deployment replayed: template.yaml")
    assert "  messages    on-call topic (SNS) only: no chat channel is configured" in full
    assert summary == full[: full.index("\nEvents\n")]  # --summary: the same first screens, nothing more
    assert "[1] " not in summary and "Events" not in summary
    overview = summary[summary.index("batchpilot replay: 2 events") :]
    assert overview.startswith("batchpilot replay: 2 events, 2 routed, 0 ignored, 0 with errors\n")
    assert full.endswith("Summary (as at the top)\n" + overview)  # after the events, the summary again
    assert full.count("[1] Batch Job State Change") == 1 and full.count("[2] Batch Job State Change") == 1


def test_summary_takes_no_json_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = replay(capsys, "--summary", "--format", "json", str(events_file(tmp_path)))
    assert (code, out) == (EXIT_USAGE, "") and err.count("\n") == 1 and "--summary" in err


def test_the_header_names_the_parameters_and_where_they_came_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slack = "SlackWebhookSecretArn=arn:aws:secretsmanager:us-east-1:111122223333:secret:slack-AbCdEf"
    code, out, _ = replay(
        capsys,
        "--summary",
        "--config-env",
        "default",
        "--parameter-overrides",
        slack,
        str(events_file(tmp_path)),
    )
    header = out.split("\n\n", 1)[0]
    said = " ".join(header.split())  # as read, whatever the line breaks
    assert code == 0
    assert "LogLevel=INFO" in said and "(from samconfig.toml [default], then --parameter-overrides)" in said
    assert "messages on-call topic (SNS), Slack (webhook): chat posted to a local endpoint" in said
    assert re.search(r"^ +alerts +AlertsQueue +100 +20$", header, flags=re.MULTILINE)
    assert re.search(r"^ +metrics +MetricsQueue +10 +5$", header, flags=re.MULTILINE)


def test_progress_goes_to_stderr_only_and_json_stdout_is_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = events_file(tmp_path)
    plain = replay(capsys, "--format", "json", str(path))
    terminal = Terminal()
    monkeypatch.setattr(progress, "SHOW_AFTER", 0.0)  # the bar at once, however fast the run
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.delenv("NO_COLOR", raising=False)
    code = main(["replay", "--template", str(TEMPLATE_PATH), "--format", "json", str(path)])
    out = capsys.readouterr().out

    def ids(text: str) -> list[Any]:
        return [json.loads(line)["event_id"] for line in text.splitlines()]

    assert (code, plain[0], plain[2]) == (0, 0, "")  # not a terminal: no progress at all
    assert ids(out) == ids(plain[1]) and len(ids(out)) == 2  # one JSON report per line, as without it
    assert not ESCAPE.search(out) and "replaying" not in out
    drawn = SGR.sub("", terminal.getvalue())  # the bar's colours aside
    assert "replaying" in drawn and "2/2 events" in drawn
    assert drawn.rstrip().splitlines()[-1].split(" in ")[0].endswith("batchpilot replay: replayed 2 events")


def drawn_progress(monkeypatch: pytest.MonkeyPatch, no_color: bool) -> str:
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    terminal = Terminal()
    bar = Progress(terminal, 3, show_after=0.0)
    deadline = time.monotonic() + 10
    while not bar.shown and time.monotonic() < deadline:
        time.sleep(0.01)
    for _ in range(3):
        bar.step()
    time.sleep(0.2)  # a refresh of the bar
    bar.close()
    return terminal.getvalue()


def test_the_bar_follows_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    coloured = drawn_progress(monkeypatch, no_color=False)
    plain = drawn_progress(monkeypatch, no_color=True)
    assert SGR.search(coloured) and "3/3" in coloured
    assert not SGR.search(plain) and "3/3" in plain and "replaying" in plain


def test_a_short_run_on_a_terminal_shows_no_bar() -> None:
    terminal = Terminal()
    bar = Progress(terminal, 3)  # shown after SHOW_AFTER seconds: never, for this run
    for _ in range(3):
        bar.step()
    bar.close()
    assert terminal.getvalue() == "" and not bar.shown
