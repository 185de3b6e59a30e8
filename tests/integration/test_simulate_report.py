"""The simulate HTML report in a real browser: headless Chromium (Debian's ``/usr/bin/chromium``,
driven by Playwright; no browser is downloaded) loads the file with the network off, logs no
console error, makes no request, and draws every chart (each ``<svg>``) with a non-zero size."""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local.simulate.command import add_parser, run_command

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
INSTALL = (
    "headless Chromium is needed at /usr/bin/chromium: install it with "
    "`sudo apt-get update && sudo apt-get install -y chromium` (Debian/Ubuntu; CI's .ci/run does this)"
)
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def chromium() -> Path:
    if not CHROMIUM.exists():
        pytest.skip(INSTALL)
    pytest.importorskip(
        "playwright.sync_api", reason="playwright is a dev dependency: pip install -e '.[dev]'"
    )
    return CHROMIUM


def _report(tmp_path: Path, *args: str) -> Path:
    path = tmp_path / "report.html"
    parser = argparse.ArgumentParser(prog="batchpilot")
    add_parser(parser.add_subparsers(dest="command"))
    out, err = io.StringIO(), io.StringIO()
    code = run_command(parser.parse_args(["simulate", *args, "--report", str(path)]), out, err)
    assert code == 0, err.getvalue()
    return path


def _load(chromium: Path, report: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=ARGS)
        try:
            context = browser.new_context(offline=True)
            page = context.new_page()
            page.on(
                "console", lambda message: errors.append(message.text) if message.type == "error" else None
            )
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("request", lambda request: requests.append(request.url))
            page.goto(report.as_uri(), wait_until="load")
            charts = page.evaluate(
                """() => [...document.querySelectorAll('svg')].map(svg => {
                    const box = svg.getBoundingClientRect();
                    return {width: box.width, height: box.height,
                            drawn: svg.querySelectorAll('path, use').length};
                })"""
            )
            title = page.title()
            tables = page.evaluate("() => document.querySelectorAll('table').length")
        finally:
            browser.close()
    return {"errors": errors, "requests": requests, "charts": charts, "title": title, "tables": tables}


def test_report_of_one_scenario_renders_in_chromium(chromium: Path, tmp_path: Path) -> None:
    report = _report(tmp_path, str(ROOT / "events/simulate/quota-lend-and-borrow.yaml"))
    loaded = _load(chromium, report)
    assert loaded["errors"] == []
    assert loaded["requests"] == [report.as_uri()]  # the page itself, nothing else
    assert loaded["title"] == "batchpilot simulate: quota-lend-and-borrow"
    assert loaded["tables"] >= 2
    assert len(loaded["charts"]) == 3
    for chart in loaded["charts"]:
        assert chart["width"] > 100 and chart["height"] > 50
        assert chart["drawn"] > 10  # axes, ticks, lines: the chart has content, not an empty box


def test_compare_report_renders_in_chromium(chromium: Path, tmp_path: Path) -> None:
    report = _report(
        tmp_path,
        "--compare",
        str(ROOT / "events/simulate/article-fifo.yaml"),
        str(ROOT / "events/simulate/article-fair-share.yaml"),
    )
    loaded = _load(chromium, report)
    assert loaded["errors"] == []
    assert len(loaded["charts"]) == 6
    assert all(c["width"] > 100 and c["height"] > 50 and c["drawn"] > 10 for c in loaded["charts"])
