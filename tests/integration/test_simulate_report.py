"""The simulate HTML report in a real browser: headless Chromium (Debian's ``/usr/bin/chromium``,
driven by Playwright; no browser is downloaded) loads the file with the network off, logs no
console error, makes no request, and draws every chart (each ``<svg>``) with a non-zero size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from batchpilot_local.testing.browser import load_in_chromium, require_chromium
from batchpilot_local.testing.simulate import simulate_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def chromium() -> Path:
    return require_chromium()


def _report(tmp_path: Path, *args: str) -> Path:
    path = tmp_path / "report.html"
    code, _, err = simulate_cli("simulate", *args, "--report", str(path))
    assert code == 0, err
    return path


def _load(report: Path) -> dict[str, Any]:
    loaded = load_in_chromium(report, selectors=("table",))
    loaded["tables"] = loaded["counts"]["table"]
    return loaded


def test_report_of_one_scenario_renders_in_chromium(chromium: Path, tmp_path: Path) -> None:
    report = _report(tmp_path, str(ROOT / "events/simulate/quota-lend-and-borrow.yaml"))
    loaded = _load(report)
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
        str(ROOT / "events/simulate/article-before-per-team.yaml"),
        str(ROOT / "events/simulate/article-after-shared.yaml"),
    )
    loaded = _load(report)
    assert loaded["errors"] == []
    assert len(loaded["charts"]) == 6
    assert all(c["width"] > 100 and c["height"] > 50 and c["drawn"] > 10 for c in loaded["charts"])
