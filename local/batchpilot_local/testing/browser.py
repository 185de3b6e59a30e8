"""Loading a local HTML report in headless Chromium (Debian's ``/usr/bin/chromium``, driven by
Playwright; no browser is downloaded), for tests of the self-contained reports.

:func:`load_in_chromium` opens the file with the network off and returns what a person's browser
would have: console errors, every request made, and for each inline ``<svg>`` chart its size, the
texts it draws (matplotlib draws text as paths, after an SVG comment holding the text), its legend
labels, the texts that reach past the chart's box (which the browser clips), and each series'
group (the ``series-...`` ids of :func:`batchpilot_local.html_report.series_id`) with its drawn
box; each table's caption, headers and cells; and which elements' content runs past their box.
:func:`screenshot` saves a PNG of a report as the browser shows it, whole, its first pixels, or one
part of it (an element and the ones after it: a dashboard's widgets, a message preview); ``make
docs-images`` makes the documentation's pictures (``docs/img/``) with it. Tests skip with
:data:`INSTALL_HINT` when :data:`CHROMIUM` is absent.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import ViewportSize

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "INSTALL_HINT",
    "Part",
    "PartNotFound",
    "load_in_chromium",
    "require_chromium",
    "screenshot",
]

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
VIEWPORT: ViewportSize = {"width": 1200, "height": 900}
"""The window a report is loaded in (CSS pixels)."""

_CHARTS = """() => [...document.querySelectorAll('svg')].map(svg => {
    const box = svg.getBoundingClientRect();
    const inside = r => r.left >= box.left - 0.5 && r.right <= box.right + 0.5
        && r.top >= box.top - 0.5 && r.bottom <= box.bottom + 0.5;
    const said = g => {
        const note = [...g.childNodes].find(n => n.nodeType === Node.COMMENT_NODE);
        return note ? note.data.trim() : '';
    };
    const texts = [...svg.querySelectorAll('g[id^="text_"]')];
    const legends = [...svg.querySelectorAll('g[id^="legend"]')];
    const plot = svg.querySelector('g[id^="axes_"] > g[id^="patch_"] path');
    const area = plot ? plot.getBoundingClientRect() : box;
    return {
        width: box.width,
        height: box.height,
        drawn: svg.querySelectorAll('path, use').length,
        texts: texts.map(said),
        legend: legends.flatMap(l => [...l.querySelectorAll('g[id^="text_"]')].map(said)),
        outside: [...texts, ...legends].filter(g => !inside(g.getBoundingClientRect()))
            .map(g => said(g) || g.id),
        series: [...svg.querySelectorAll('g[id^="series-"]')].map(g => {
            const r = g.getBoundingClientRect();
            const line = g.querySelector('path');
            const dashes = line ? getComputedStyle(line).strokeDasharray : 'none';
            return {id: g.id, width: r.width, height: r.height,
                    dashed: dashes !== 'none' && dashes !== '',
                    markers: g.querySelectorAll('use').length};
        }),
        empty: [...svg.querySelectorAll('g[id^="line2d_"], g[id^="series-"]')]
            .filter(g => { const r = g.getBoundingClientRect(); return r.width === 0 && r.height === 0; })
            .map(g => g.id),
        plot: {width: area.width, height: area.height},
    };
})"""


_TABLES = """() => [...document.querySelectorAll('table')].map(table => ({
    caption: table.caption ? table.caption.innerText.trim() : '',
    headers: [...table.querySelectorAll('thead th')].map(th => th.innerText.trim()),
    rows: [...table.querySelectorAll('tbody tr')].map(tr => [...tr.cells].map(td => td.innerText.trim())),
}))"""
# An element whose content is wider than its box: scrolled (overflow: auto) or drawn past its edge.
_OVERFLOWING = """(s) => [...document.querySelectorAll(s)]
    .filter(e => e.scrollWidth > e.clientWidth + 0.5)
    .map(e => ({text: e.innerText.slice(0, 120), scroll: e.scrollWidth, client: e.clientWidth}))"""


def require_chromium() -> Path:
    """Return :data:`CHROMIUM`, or skip the calling test when it or Playwright is absent."""
    import pytest

    if not CHROMIUM.exists():
        pytest.skip(INSTALL_HINT)
    pytest.importorskip(
        "playwright.sync_api", reason="playwright is a dev dependency: pip install -e '.[dev]'"
    )
    return CHROMIUM


def load_in_chromium(
    report: Path,
    *,
    selectors: tuple[str, ...] = (),
    texts_of: tuple[str, ...] = (),
    fit: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Open ``report`` offline in headless Chromium (a :data:`VIEWPORT` window).

    Returns:
        ``{"errors": [console errors and page errors], "requests": [URLs], "charts": [chart],
        "title": str, "counts": {selector: number of elements}, "texts": {selector: [innerText of
        each element]}, "tables": [table], "overflowing": {selector: [element]}}`` for the CSS
        ``selectors``, ``texts_of`` and ``fit``. A table, one per ``<table>`` in document order:
        ``{"caption", "headers": [str], "rows": [[cell text]]}``. ``overflowing``: for each
        selector of ``fit``, the elements whose content is wider than their box (``scrollWidth``
        over ``clientWidth``: scrolled sideways, or drawn past the edge), as ``{"text": the first
        120 characters, "scroll", "client"}`` (CSS pixels). A chart, one per ``<svg>``
        in document order: ``width``, ``height`` (CSS pixels); ``drawn`` (paths and uses);
        ``texts`` (every text drawn); ``legend`` (legend labels); ``outside``
        (texts or legends whose box reaches past the chart's); ``series``: ``[{"id", "width",
        "height", "dashed", "markers"}]`` (each series' group, in paint order: later ones are
        drawn on top); ``empty``: the ids of lines (``line2d_*``, ``series-*``) whose box is empty,
        which shows nothing (a line through one point without a marker); ``plot``: ``{"width",
        "height"}`` (the plotting area).
    """
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(offline=True, viewport=VIEWPORT)
            page = context.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("request", lambda request: requests.append(request.url))
            page.goto(report.as_uri(), wait_until="load")
            charts = page.evaluate(_CHARTS)
            counts = {s: page.evaluate("(s) => document.querySelectorAll(s).length", s) for s in selectors}
            texts = {
                s: page.evaluate("(s) => [...document.querySelectorAll(s)].map(e => e.innerText)", s)
                for s in texts_of
            }
            tables = page.evaluate(_TABLES)
            overflowing = {s: page.evaluate(_OVERFLOWING, s) for s in fit}
            title = page.title()
        finally:
            browser.close()
    return {
        "errors": errors,
        "requests": requests,
        "charts": charts,
        "title": title,
        "counts": counts,
        "texts": texts,
        "tables": tables,
        "overflowing": overflowing,
    }


@dataclass(frozen=True)
class Part:
    """A part of a page to photograph: the first element matching the CSS ``selector`` whose text
    contains ``containing`` (any, when empty), and the ``siblings`` elements after it (0: it alone).
    The picture is the box around them all, with ``margin`` CSS pixels around it."""

    selector: str
    containing: str = ""
    siblings: int = 0
    margin: int = 8


class PartNotFound(LookupError):
    """No element of the page matches a :class:`Part`'s selector and text."""


# The box around the part (page coordinates, CSS pixels), or null when nothing matches.
_PART_BOX = """([selector, containing, siblings]) => {
    const first = [...document.querySelectorAll(selector)].find(e => e.innerText.includes(containing));
    if (!first) return null;
    const parts = [first];
    let next = first.nextElementSibling;
    while (next && parts.length <= siblings) { parts.push(next); next = next.nextElementSibling; }
    const boxes = parts.map(e => e.getBoundingClientRect());
    return {left: Math.min(...boxes.map(b => b.left)) + scrollX,
            top: Math.min(...boxes.map(b => b.top)) + scrollY,
            right: Math.max(...boxes.map(b => b.right)) + scrollX,
            bottom: Math.max(...boxes.map(b => b.bottom)) + scrollY};
}"""


def screenshot(report: Path, png: Path, *, height: int | None = None, part: Part | None = None) -> Path:
    """Save a PNG of ``report`` as headless Chromium shows it offline in a :data:`VIEWPORT`-wide
    window: the whole page, its first ``height`` CSS pixels, or only ``part`` (the box around it;
    ``height`` then cuts that box). One CSS pixel is one PNG pixel. Returns ``png``.

    Raises:
        PartNotFound: ``part`` matches no element of the page.
        playwright.sync_api.Error: Chromium could not start or the page could not be loaded.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(offline=True, viewport=VIEWPORT).new_page()
            page.goto(report.as_uri(), wait_until="load")
            width = int(page.evaluate("document.documentElement.scrollWidth"))
            full = int(page.evaluate("document.documentElement.scrollHeight"))
            left, top, right, bottom = 0.0, 0.0, float(VIEWPORT["width"]), float(full)
            if part is not None:
                box = page.evaluate(_PART_BOX, [part.selector, part.containing, part.siblings])
                if box is None:
                    raise PartNotFound(f"no {part.selector!r} containing {part.containing!r} in {report}")
                left, top = max(0.0, box["left"] - part.margin), max(0.0, box["top"] - part.margin)
                right, bottom = min(width, box["right"] + part.margin), min(full, box["bottom"] + part.margin)
            if height is not None:
                bottom = min(bottom, top + height)
            page.screenshot(
                path=str(png),
                full_page=True,
                clip={"x": left, "y": top, "width": right - left, "height": bottom - top},
            )
        finally:
            browser.close()
    return png


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m batchpilot_local.testing.browser REPORT.html OUT.png [HEIGHT] [--part CSS
    [--containing TEXT] [--siblings N]]``: :func:`screenshot` (exit 2 with a message when the
    arguments are wrong, Chromium is absent or the part is not on the page)."""
    parser = argparse.ArgumentParser(
        prog="python -m batchpilot_local.testing.browser",
        description="Save a PNG of a local HTML report as headless Chromium shows it.",
    )
    parser.add_argument("report", type=Path, help="the HTML file")
    parser.add_argument("png", type=Path, help="the PNG to write")
    parser.add_argument("height", type=int, nargs="?", help="keep only the first HEIGHT CSS pixels")
    parser.add_argument("--part", metavar="CSS", help="photograph only the first element matching CSS")
    parser.add_argument("--containing", default="", metavar="TEXT", help="... whose text contains TEXT")
    parser.add_argument("--siblings", type=int, default=0, metavar="N", help="and the N elements after it")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if not CHROMIUM.exists():
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    part = None if args.part is None else Part(args.part, args.containing, args.siblings)
    try:
        screenshot(args.report.resolve(), args.png, height=args.height, part=part)
    except PartNotFound as error:
        print(error, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
