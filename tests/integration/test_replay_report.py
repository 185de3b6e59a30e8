"""What a person reads after `batchpilot replay`: the text report's first screen, its timelines and
per-event detail, and the HTML report loaded in headless Chromium (Playwright driving Debian's
``/usr/bin/chromium``; skipped with the install command when it is absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from batchpilot_local.cli import main
from batchpilot_local.testing.browser import load_in_chromium, require_chromium
from batchpilot_local.testing.paths import repo_root

ROOT = repo_root()
TEMPLATE = ROOT / "template.yaml"
BURST = ROOT / "events/scenarios/capacity/burst.json"
SPOT_RECLAIM = ROOT / "events/scenarios/recovery/container-job-spot-reclaimed.json"
CRITICAL = ROOT / "events/service-job/failed-algorithm-error.json"
INPUTS = [str(BURST), str(SPOT_RECLAIM), str(CRITICAL)]


@pytest.fixture(scope="module")
def text_report() -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["replay", "--template", str(TEMPLATE), *INPUTS])
    assert code == 0
    return out.getvalue()


def test_the_text_report_opens_with_a_one_screen_summary(text_report: str) -> None:
    lines = text_report.splitlines()
    first_screen = "\n".join(lines[: lines.index("Events")])
    assert lines[0].startswith("batchpilot replay: ") and lines[0].endswith("0 with errors")
    assert "Pages and chat messages" in first_screen
    sns = next(line.split() for line in lines if line.strip().startswith("sns "))
    assert sns[1:] == ["1", "0", "0", "1"]  # the APPLICATION_ERROR page: critical only
    assert "On-call pages (1)" in first_screen and "phi3-sft-run5" in first_screen
    resubmission = next(line for line in lines if line.strip().startswith("llama3-8b-lora-ft-run-39 "))
    assert "SPOT_INTERRUPTION" in resubmission and "1h 03m" in resubmission and "1.07" in resubmission
    assert "s3://ml-checkpoints-111122223333/llama-ft/run-39/" in resubmission
    assert "Capacity changes (3)" in first_screen
    assert any(line.split()[:4] == ["burst-env", "NUM_INSTANCES", "8", "24"] for line in lines)


def test_one_timeline_per_clock_scenario_a_line_per_tick(text_report: str) -> None:
    lines = text_report.splitlines()
    start = lines.index(f"Timeline: {BURST}")
    header = lines[start + 1].split()
    assert header == ["time", "service", "environment", "in", "use", "demand", "limit", "decision", "reason"]
    ticks = json.loads(BURST.read_text(encoding="utf-8"))["ticks"]
    rows = lines[start + 2 : start + 2 + len(ticks)]
    assert [row.split()[0] for row in rows] == [t["at"] for t in ticks]
    assert rows[1].split()[1:] == ["burst-env", "8", "40", "8", "RAISE", "->", "24", "DEMAND"]


def test_per_event_detail_has_the_reason_and_metric_timestamps_and_own_counters_only_when_verbose(
    text_report: str, capsys: pytest.CaptureFixture[str]
) -> None:
    detail = text_report[text_report.index("\nEvents\n") :]
    assert "reason     Received status from SageMaker: AlgorithmError" in detail
    assert "timestamp" in detail and "2026-11-22T19:51:00.000Z" in detail
    assert "EventsProcessed" not in text_report and "ColdStart" not in text_report

    assert main(["replay", "--verbose", "--template", str(TEMPLATE), str(CRITICAL)]) == 0
    verbose = capsys.readouterr().out
    assert "EventsProcessed" in verbose and "ColdStart" in verbose


@pytest.fixture(scope="module")
def chromium() -> Path:
    return require_chromium()


def test_the_html_report_renders_in_chromium(chromium: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    assert (
        main(["replay", "--template", str(TEMPLATE), "--format", "json", "--report", str(report), *INPUTS])
        == 0
    )

    loaded = load_in_chromium(report, selectors=(".msg.slack", ".msg.sns", ".msg .hdr", "table", "h3"))

    assert loaded["errors"] == []
    assert loaded["requests"] == [report.as_uri()]  # the page itself, nothing else
    assert loaded["title"] == "batchpilot replay"
    counts = loaded["counts"]
    assert counts[".msg.sns"] == 1 and counts[".msg.slack"] >= 3  # failure, resubmission, capacity changes
    assert counts[".msg .hdr"] >= counts[".msg.sns"] + 1  # Slack headers and the SNS subject are drawn
    assert counts["table"] >= 3
    assert counts["h3"] == 4  # the template's four dashboards, their widgets drawn from the replayed metrics
    charts = loaded["charts"]
    assert len(charts) >= 2 + 4  # the burst timeline, queue wait per share, and dashboard widgets with data
    for chart in charts:
        assert chart["width"] > 100 and chart["height"] > 50
        assert chart["drawn"] > 10  # axes, ticks, lines: the chart has content, not an empty box
    html_text = report.read_text(encoding="utf-8")
    assert "<script" not in html_text and "http://" not in html_text.split("<body>")[0]
