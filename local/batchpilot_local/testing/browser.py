"""Loading a local HTML report in headless Chromium (Debian's ``/usr/bin/chromium``, driven by
Playwright; no browser is downloaded), for tests of the self-contained reports.

:func:`load_in_chromium` opens the file with the network off and returns what a person's browser
would have: console errors, every request made, and each inline ``<svg>`` chart's size and number
of drawn elements. Tests skip with :data:`INSTALL_HINT` when :data:`CHROMIUM` is absent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "INSTALL_HINT", "load_in_chromium", "require_chromium"]

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's chromium package (``.ci/run`` installs it)."""
INSTALL_HINT = (
    "headless Chromium is needed at /usr/bin/chromium: install it with "
    "`sudo apt-get update && sudo apt-get install -y chromium` (Debian/Ubuntu; CI's .ci/run does this)"
)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def require_chromium() -> Path:
    """Return :data:`CHROMIUM`, or skip the calling test when it or Playwright is absent."""
    import pytest

    if not CHROMIUM.exists():
        pytest.skip(INSTALL_HINT)
    pytest.importorskip(
        "playwright.sync_api", reason="playwright is a dev dependency: pip install -e '.[dev]'"
    )
    return CHROMIUM


def load_in_chromium(report: Path, *, selectors: tuple[str, ...] = ()) -> dict[str, Any]:
    """Open ``report`` offline in headless Chromium.

    Returns:
        ``{"errors": [console errors and page errors], "requests": [URLs], "charts": [{"width",
        "height", "drawn"}] per <svg>, "title": str, "counts": {selector: number of elements}}``.
    """
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(offline=True)
            page = context.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
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
            counts = {s: page.evaluate("(s) => document.querySelectorAll(s).length", s) for s in selectors}
            title = page.title()
        finally:
            browser.close()
    return {"errors": errors, "requests": requests, "charts": charts, "title": title, "counts": counts}
