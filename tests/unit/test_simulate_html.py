"""The reusable HTML report module (batchpilot_local.html_report): escaping, the page skeleton and
deterministic inline SVG charts."""

from __future__ import annotations

from batchpilot_local.html_report import Page, line_chart, stacked_area_chart


def test_page_escapes_text_and_is_a_complete_document() -> None:
    page = Page("a <b> & c", subtitle='s"1')
    page.heading("<h>")
    page.paragraph("x < y")
    page.table(["k", "v"], [["<script>", None]], caption="cap & co")
    page.bullets(["one & two"])
    page.preformatted("<pre>")
    html = page.render()
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "<title>a &lt;b&gt; &amp; c</title>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<td>-</td>" in html  # None shows as '-'
    assert "s&quot;1" in html and "one &amp; two" in html


def test_charts_are_inline_deterministic_svg_without_metadata() -> None:
    x = [0.0, 1.0, 2.0, 3.0]
    first = line_chart(x, {"in use": [1, 3, 2, 4], "reserved": [4, 4, 4, 4]}, title="t", ylabel="instances")
    assert first.startswith("<svg") and first.endswith("</svg>")
    assert "<?xml" not in first and "<!DOCTYPE" not in first and "<metadata>" not in first
    assert (
        line_chart(x, {"in use": [1, 3, 2, 4], "reserved": [4, 4, 4, 4]}, title="t", ylabel="instances")
        == first
    )
    stacked = stacked_area_chart(x, {"A": [1, 1, 0, 2], "B": [0, 2, 2, 1]}, title="s", ylabel="instances")
    assert stacked.startswith("<svg") and stacked != first
    page = Page("charts")
    page.figure(first, caption="c")
    assert page.render().count("<svg") == 1
