"""``batchpilot_local.testing.browser.screenshot`` in real headless Chromium: the whole page, its
first pixels, or one part of it (what ``make docs-images`` draws the documentation's pictures with)."""

from __future__ import annotations

import contextlib
import io
import re
import struct
from pathlib import Path

import pytest
from batchpilot_local.testing.browser import VIEWPORT, Part, PartNotFound, main, require_chromium, screenshot

# Three blocks of known size, stacked: 100, 200 and 300 CSS pixels high, 400 wide.
PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
body { margin: 0; } div { width: 400px; margin: 0; }
</style></head><body>
<div class="box" style="height: 100px; background: #c00">first</div>
<div class="box" style="height: 200px; background: #0c0">second</div>
<div class="box" style="height: 300px; background: #00c">third</div>
<div style="height: 1000px">filler</div>
</body></html>"""


@pytest.fixture(scope="module")
def chromium() -> Path:
    return require_chromium()


@pytest.fixture
def page(tmp_path: Path) -> Path:
    path = tmp_path / "page.html"
    path.write_text(PAGE, encoding="utf-8")
    return path


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_a_part_is_the_box_around_an_element_and_its_siblings_with_a_margin(
    chromium: Path, page: Path
) -> None:
    out = screenshot(page, page.with_name("part.png"), part=Part(".box", "second", siblings=1, margin=8))
    # The second and third blocks (y 100 to 600, x 0 to 400), 8 px around, cut at the page's left edge.
    assert png_size(out) == (400 + 8, 500 + 16)


def test_a_part_alone_and_a_height_cut(chromium: Path, page: Path) -> None:
    alone = screenshot(page, page.with_name("alone.png"), part=Part(".box", "first", margin=0))
    assert png_size(alone) == (400, 100)
    cut = screenshot(page, page.with_name("cut.png"), height=150, part=Part(".box", "third", margin=0))
    assert png_size(cut) == (400, 150)
    top = screenshot(page, page.with_name("top.png"), height=250)
    assert png_size(top) == (VIEWPORT["width"], 250)


def test_a_part_not_on_the_page_is_an_error_and_the_cli_exits_2(chromium: Path, page: Path) -> None:
    missing = page.with_name("missing.png")
    with pytest.raises(PartNotFound, match=re.escape("no '.box' containing 'fourth'")):
        screenshot(page, missing, part=Part(".box", "fourth"))
    assert not missing.exists()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([str(page), str(missing), "--part", ".box", "--containing", "fourth"])
    assert code == 2 and "fourth" in err.getvalue() and not missing.exists()
    assert main([str(page), str(page.with_name("ok.png")), "--part", ".box", "--siblings", "2"]) == 0
    assert png_size(page.with_name("ok.png")) == (400 + 8, 600 + 8)  # from the top: no margin above
