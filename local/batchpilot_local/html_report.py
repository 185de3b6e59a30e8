"""Self-contained HTML reports: a page skeleton, tables and inline SVG charts drawn by matplotlib.

Shared by the local tools (``batchpilot simulate --report``; ``batchpilot replay --report`` is meant
to use it too). A page is one file with no network access: styles are inline, charts are SVG
elements inside the page (no ``<img src>``, no fonts to fetch: text in charts is drawn as paths),
and there is no script.

    page = Page("Simulation", subtitle="seed 7")
    page.table(["metric", "value"], [["utilisation", "81.2 %"]])
    page.figure(line_chart([0, 1, 2], {"in use": [1, 3, 2]}, title="In use", ylabel="instances"))
    Path("out.html").write_text(page.render())

Chart output is deterministic (fixed SVG id salt, no date), so a report can be compared byte for
byte between runs.
"""

from __future__ import annotations

import html
import io
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Page", "figure_svg", "line_chart", "stacked_area_chart", "write_page"]

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto;
       max-width: 1100px; padding: 0 1rem; color: #1d2430; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #d5dae3; padding-bottom: 0.2rem; }
h3 { font-size: 1.05rem; margin-top: 1.4rem; }
.subtitle { color: #5a6473; margin-top: 0; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.92rem; }
th, td { border: 1px solid #d5dae3; padding: 0.3rem 0.6rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f1f4f8; }
caption { caption-side: top; text-align: left; color: #5a6473; padding-bottom: 0.3rem; }
figure { margin: 1rem 0; }
figure svg { max-width: 100%; height: auto; display: block; }
figcaption { color: #5a6473; font-size: 0.9rem; }
pre { background: #f6f8fa; padding: 0.8rem; overflow-x: auto; font-size: 0.85rem; }
ul.notes li { margin-bottom: 0.4rem; }
"""


def _text(value: object) -> str:
    return html.escape(str(value), quote=True)


class Page:
    """One HTML page built block by block, rendered to a complete document by :meth:`render`.

    Args:
        title: the page's ``<title>`` and ``<h1>``.
        subtitle: a line under the title (optional).
    """

    def __init__(self, title: str, subtitle: str | None = None) -> None:
        self.title = title
        self._blocks: list[str] = [f"<h1>{_text(title)}</h1>"]
        if subtitle:
            self._blocks.append(f'<p class="subtitle">{_text(subtitle)}</p>')

    def heading(self, text: str, level: int = 2) -> None:
        """A section heading (``level`` 2 to 4)."""
        level = min(4, max(2, level))
        self._blocks.append(f"<h{level}>{_text(text)}</h{level}>")

    def paragraph(self, text: str) -> None:
        """A paragraph of plain text (escaped)."""
        self._blocks.append(f"<p>{_text(text)}</p>")

    def bullets(self, items: Sequence[str]) -> None:
        """A bulleted list of plain-text items."""
        rows = "".join(f"<li>{_text(item)}</li>" for item in items)
        self._blocks.append(f'<ul class="notes">{rows}</ul>')

    def table(
        self, headers: Sequence[str], rows: Sequence[Sequence[object]], caption: str | None = None
    ) -> None:
        """A table: one header row, then ``rows`` (cells are escaped; None shows as ``-``)."""
        head = "".join(f"<th>{_text(h)}</th>" for h in headers)
        body = "".join(
            "<tr>" + "".join(f"<td>{_text('-' if cell is None else cell)}</td>" for cell in row) + "</tr>"
            for row in rows
        )
        cap = f"<caption>{_text(caption)}</caption>" if caption else ""
        self._blocks.append(f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")

    def figure(self, svg: str, caption: str | None = None) -> None:
        """An inline SVG chart (from :func:`figure_svg` and friends) with an optional caption."""
        cap = f"<figcaption>{_text(caption)}</figcaption>" if caption else ""
        self._blocks.append(f"<figure>{svg}{cap}</figure>")

    def markup(self, html_text: str) -> None:
        """A block of ready-made HTML. The caller escapes every text it puts in (``html.escape``);
        used for previews such as chat messages, which tables cannot show."""
        self._blocks.append(html_text)

    def preformatted(self, text: str) -> None:
        """A block of monospaced text (escaped)."""
        self._blocks.append(f"<pre>{_text(text)}</pre>")

    def render(self) -> str:
        """The whole document (UTF-8 text)."""
        body = "\n".join(self._blocks)
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_text(self.title)}</title>\n<style>{_STYLE}</style>\n</head>\n"
            f"<body>\n{body}\n</body>\n</html>\n"
        )


_PROLOGUE = re.compile(r"^.*?(?=<svg\b)", re.DOTALL)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)


def figure_svg(figure: Any) -> str:
    """A matplotlib ``Figure`` as an inline ``<svg>`` element (XML prologue and doctype removed).

    Text is drawn as paths (``svg.fonttype: path``) so the page needs no font; ids use a fixed
    salt and no date is written, so the same figure gives the same bytes.
    """
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "batchpilot", "svg.fonttype": "path"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    svg = _PROLOGUE.sub("", buffer.getvalue(), count=1)
    # matplotlib's RDF <metadata> block only names its own vocabularies: drop it.
    return _METADATA.sub("", svg, count=1).strip()


def _axes(title: str, ylabel: str, xlabel: str, size: tuple[float, float]) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, dpi=100, layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title, fontsize=11, loc="left")
    axes.set_ylabel(ylabel)
    axes.set_xlabel(xlabel)
    axes.grid(True, alpha=0.3)
    return figure, axes


def line_chart(
    x: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    ylabel: str,
    xlabel: str = "hours",
    step: bool = True,
    size: tuple[float, float] = (10.0, 3.2),
) -> str:
    """Lines (steps by default: values hold until the next sample) of each series over ``x``; an
    inline SVG element."""
    figure, axes = _axes(title, ylabel, xlabel, size)
    for name, values in series.items():
        if step:
            axes.step(list(x), list(values), where="post", label=name, linewidth=1.2)
        else:
            axes.plot(list(x), list(values), label=name, linewidth=1.2)
    if len(series) > 1:
        axes.legend(loc="upper right", fontsize=8, ncols=min(4, len(series)))
    axes.set_ylim(bottom=0)
    return figure_svg(figure)


def stacked_area_chart(
    x: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    ylabel: str,
    xlabel: str = "hours",
    size: tuple[float, float] = (10.0, 3.2),
) -> str:
    """Series stacked on each other over ``x`` (e.g. instances in use per share); an inline SVG."""
    figure, axes = _axes(title, ylabel, xlabel, size)
    names = list(series)
    if names:
        axes.stackplot(list(x), *[list(series[n]) for n in names], labels=names, step="post", alpha=0.85)
        axes.legend(loc="upper right", fontsize=8, ncols=min(4, len(names)))
    axes.set_ylim(bottom=0)
    return figure_svg(figure)


def write_page(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file in the same directory, then a rename.

    The file gets the mode ``open()`` would give it (0666 less the umask), not mkstemp's 0600.

    Raises:
        OSError: the file cannot be written.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    handle, temporary = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=directory)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(temporary, 0o666 & ~umask)  # as open() would create it, not mkstemp's 0600
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
