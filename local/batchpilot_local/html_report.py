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

import bisect
import html
import io
import math
import os
import re
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = [
    "CUT_AFTER",
    "MARKERS_UP_TO",
    "SERIES_ID_PREFIX",
    "Page",
    "figure_svg",
    "legend_below",
    "legend_rows",
    "line_chart",
    "series_id",
    "series_styles",
    "stacked_area_chart",
    "time_chart",
    "time_segments",
    "write_page",
]

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto;
       max-width: 1100px; padding: 0 1rem; color: #1d2430; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #d5dae3; padding-bottom: 0.2rem; }
h3 { font-size: 1.05rem; margin-top: 1.4rem; }
.subtitle { color: #5a6473; margin-top: 0; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.92rem; }
th, td { border: 1px solid #d5dae3; padding: 0.3rem 0.6rem; text-align: left; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; }
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
        """A table: one header row, then ``rows`` (cells are escaped; None shows as ``-``). A column
        of numbers (:func:`batchpilot_local.text_table.numeric`) is right-aligned, text left."""
        from batchpilot_local.text_table import numeric

        shown = [["-" if cell is None else str(cell) for cell in row] for row in rows]
        right = [
            bool(shown) and numeric([row[i] for row in shown if i < len(row)]) for i in range(len(headers))
        ]

        def cls(i: int) -> str:
            return ' class="num"' if i < len(right) and right[i] else ""

        head = "".join(f"<th{cls(i)}>{_text(h)}</th>" for i, h in enumerate(headers))
        body = "".join(
            "<tr>" + "".join(f"<td{cls(i)}>{_text(cell)}</td>" for i, cell in enumerate(row)) + "</tr>"
            for row in shown
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

MARKERS_UP_TO = 60
"""A series of at most this many samples gets a marker at each: a lone sample is visible, and
where series meet each keeps its own shape."""
SERIES_ID_PREFIX = "series-"
"""Each series' SVG group is ``<g id="series-<name as a slug>">`` (matplotlib's ``gid``), so tests
and readers can find it."""
_LINESTYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_SLUG = re.compile(r"[^a-z0-9]+")


def figure_svg(figure: Any) -> str:
    """A matplotlib ``Figure`` as an inline ``<svg>`` element (XML prologue and doctype removed).

    Text is drawn as paths (``svg.fonttype: path``) so the page needs no font; ids use a fixed
    salt and no date is written, so the same figure gives the same bytes. The saved area is the
    figure's tight bounding box (``bbox_inches="tight"``): a legend or label that reaches past the
    figure's edge is drawn, not clipped.
    """
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "batchpilot", "svg.fonttype": "path"}):
        figure.savefig(
            buffer,
            format="svg",
            metadata={"Date": None, "Creator": None},
            bbox_inches="tight",
            pad_inches=0.05,
        )
    svg = _PROLOGUE.sub("", buffer.getvalue(), count=1)
    # matplotlib's RDF <metadata> block only names its own vocabularies: drop it.
    return _METADATA.sub("", svg, count=1).strip()


def series_id(name: str, taken: set[str] | None = None) -> str:
    """The SVG id of a series' group: :data:`SERIES_ID_PREFIX` and ``name`` as a slug (``"in use"``
    → ``series-in-use``); ``-2``, ``-3``... appended when ``taken`` (the ids of the chart so far,
    updated) already has it."""
    base = SERIES_ID_PREFIX + (_SLUG.sub("-", name.lower()).strip("-") or "series")
    gid, n = base, 1
    while taken is not None and gid in taken:
        n += 1
        gid = f"{base}-{n}"
    if taken is not None:
        taken.add(gid)
    return gid


def series_styles(names: Sequence[str], *, markers: bool = True) -> dict[str, dict[str, Any]]:
    """Matplotlib ``plot``/``step`` keyword arguments per series name that keep each series
    distinguishable where series overlap: its own colour (``C0``... cycled), line style and marker;
    each later series drawn above the earlier ones (``zorder``) and thinner, with a smaller marker,
    so where two series are equal the one below still shows around the one above. ``gid`` is
    :func:`series_id`. Without ``markers``, no marker."""
    count = len(names)
    taken: set[str] = set()
    styles: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(names):
        below = (count - 1 - i) / max(1, count - 1)  # 1 for the first (bottom) series, 0 for the last
        style: dict[str, Any] = {
            "color": f"C{i % 10}",
            "linestyle": _LINESTYLES[i % len(_LINESTYLES)],
            "linewidth": 1.3 + 1.5 * below,
            "zorder": 2.0 + 0.01 * i,
            "gid": series_id(name, taken),
            "clip_on": False,  # a marker on the axes' edge (a value of 0) is drawn whole
        }
        if markers:
            style.update(marker=_MARKERS[i % len(_MARKERS)], markersize=4.0 + 3.0 * below)
        styles[name] = style
    return styles


def _legend_columns(labels: Sequence[str], width_in: float, fontsize: float) -> int:
    """Columns of a legend of ``labels`` that fit in ``width_in`` inches: an entry is its handle
    (about half an inch) and its text (about 0.55 em a character)."""
    entry_in = 0.5 + 0.55 * fontsize / 72 * max((len(label) for label in labels), default=1)
    return max(1, min(len(labels), int(width_in // entry_in)))


def legend_rows(labels: Sequence[str], width_in: float, *, fontsize: float = 8) -> int:
    """Rows :func:`legend_below` takes for ``labels`` on a figure ``width_in`` inches wide (0: no
    legend, for fewer than two labels); for sizing the figure before drawing."""
    if len(labels) < 2:
        return 0
    return -(-len(labels) // _legend_columns(labels, width_in, fontsize))


def legend_below(figure: Any, axes: Any, *, fontsize: float = 8, others: Sequence[Any] = ()) -> int:
    """The legend of ``axes``' labelled artists (then those of the ``others`` axes, such as a
    right-hand axis) under the chart (outside the axes, so it hides no data), in as many columns as
    the longest label allows; the figure's constrained layout makes room for it. Returns the number
    of legend rows (0: no legend, for fewer than two entries)."""
    handles, labels = axes.get_legend_handles_labels()
    for other in others:
        more_handles, more_labels = other.get_legend_handles_labels()
        handles, labels = [*handles, *more_handles], [*labels, *more_labels]
    rows = legend_rows(labels, figure.get_figwidth(), fontsize=fontsize)
    if rows:
        columns = _legend_columns(labels, figure.get_figwidth(), fontsize)
        figure.legend(
            handles, labels, loc="outside lower center", ncols=columns, fontsize=fontsize, frameon=False
        )
    return rows


def _axes(title: str, ylabel: str, xlabel: str, size: tuple[float, float]) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, dpi=100, layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title, fontsize=11, loc="left")
    axes.set_ylabel(ylabel)
    axes.set_xlabel(xlabel)
    axes.grid(True, alpha=0.3)
    return figure, axes


def _grow_for_legend(figure: Any, names: Sequence[str], size: tuple[float, float]) -> None:
    """Taller by the legend's rows (about 0.2 inch each), so the plot keeps its height."""
    figure.set_figheight(size[1] + 0.2 * legend_rows(names, size[0]))


def line_chart(
    x: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    ylabel: str,
    xlabel: str = "hours",
    step: bool = True,
    size: tuple[float, float] = (10.0, 3.2),
    markers: bool | None = None,
    styles: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """Lines (steps by default: values hold until the next sample) of each series over ``x``; an
    inline SVG element.

    Every series is distinguishable where they overlap (:func:`series_styles`; ``styles`` overrides
    keyword arguments per series name). ``markers``: a marker at each sample (default: when there
    are at most :data:`MARKERS_UP_TO` samples, so a single sample shows as a point). A single x is
    centred, with one tick, at it. The legend is
    under the chart (:func:`legend_below`); each series' group has the id :func:`series_id`.
    """
    figure, axes = _axes(title, ylabel, xlabel, size)
    names = list(series)
    marked = len(x) <= MARKERS_UP_TO if markers is None else markers
    chosen = series_styles(names, markers=marked)
    for name in names:
        style = {**chosen[name], **((styles or {}).get(name) or {})}
        if step:
            axes.step(list(x), list(series[name]), where="post", label=name, **style)
        else:
            axes.plot(list(x), list(series[name]), label=name, **style)
    if len(set(x)) == 1:
        # One sample: centred, with a tick at it alone (matplotlib's default would put it in a
        # window of ±0.05 with ticks at values no sample has).
        axes.set_xlim(x[0] - 1, x[0] + 1)
        axes.set_xticks([x[0]])
    _grow_for_legend(figure, names, size)
    legend_below(figure, axes)
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
    """Series stacked on each other over ``x`` (e.g. instances in use per share); an inline SVG,
    the legend under the chart."""
    figure, axes = _axes(title, ylabel, xlabel, size)
    names = list(series)
    if names:
        axes.stackplot(list(x), *[list(series[n]) for n in names], labels=names, step="post", alpha=0.85)
        _grow_for_legend(figure, names, size)
        legend_below(figure, axes)
    axes.set_ylim(bottom=0)
    return figure_svg(figure)


CUT_AFTER = timedelta(minutes=30)
""":func:`time_chart` leaves out a stretch longer than this without a sample (replayed scenarios
are hours or days apart; each scenario's ticks are minutes apart)."""
_NICE_MINUTES = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440)
_MAX_TICKS = 12


def time_segments(times: Iterable[datetime], gap: timedelta = CUT_AFTER) -> list[tuple[datetime, datetime]]:
    """``(first, last)`` of each run of ``times`` (sorted, duplicates merged) in which no two
    neighbours are more than ``gap`` apart; a lone time is ``(t, t)``."""
    segments: list[tuple[datetime, datetime]] = []
    for moment in sorted(set(times)):
        if segments and moment - segments[-1][1] <= gap:
            segments[-1] = (segments[-1][0], moment)
        else:
            segments.append((moment, moment))
    return segments


def _minutes(delta: timedelta) -> float:
    return delta.total_seconds() / 60.0


@dataclass(frozen=True)
class _TimeAxis:
    """Where :func:`time_chart` draws each segment: ``origins[i]`` is the x of segment ``i``'s first
    time (x is in minutes inside a segment), ``cuts`` the x of each dotted line, ``width`` the
    axis' length."""

    segments: list[tuple[datetime, datetime]]
    origins: list[float]
    cuts: list[float]
    width: float

    def x(self, moment: datetime) -> tuple[int, float]:
        """``(segment index, x)`` of a time inside one of the segments."""
        index = bisect.bisect_right([start for start, _ in self.segments], moment) - 1
        return index, self.origins[index] + _minutes(moment - self.segments[index][0])


def _time_axis(segments: list[tuple[datetime, datetime]]) -> _TimeAxis:
    """Each segment gets its length in minutes, but at least an eighth of the longest (a lone time
    is centred in that slot, so bursts of a few samples stay apart); cuts take half of that."""
    longest = max((_minutes(end - start) for start, end in segments), default=0.0)
    floor = max(longest / 8, 1.0)
    cut = floor / 2
    origins: list[float] = []
    cuts: list[float] = []
    position = 0.0
    for i, (start, end) in enumerate(segments):
        if i:
            cuts.append(position + cut / 2)
            position += cut
        length = _minutes(end - start)
        slot = max(length, floor)
        origins.append(position + (slot - length) / 2)
        position += slot
    return _TimeAxis(segments, origins, cuts, position)


def _time_ticks(axis: _TimeAxis) -> tuple[list[float], list[str]]:
    """Ticks of a :func:`time_chart` axis: each segment's first time (labelled with its date), then
    clock-aligned times inside it every "nice" number of minutes (about :data:`_MAX_TICKS` over the
    axis), none closer than 1/25 of the axis to the one before."""
    step = next((m for m in _NICE_MINUTES if m >= axis.width / _MAX_TICKS), _NICE_MINUTES[-1])
    spacing = axis.width / 25
    positions: list[float] = []
    labels: list[str] = []
    for (start, end), origin in zip(axis.segments, axis.origins, strict=True):
        moments = [start]
        midnight = start.replace(hour=0, minute=0, second=0, microsecond=0)
        aligned = midnight + timedelta(minutes=step * math.ceil(_minutes(start - midnight) / step))
        while aligned <= end:
            if aligned > start:
                moments.append(aligned)
            aligned += timedelta(minutes=step)
        for i, moment in enumerate(moments):
            position = origin + _minutes(moment - start)
            if positions and position - positions[-1] < spacing:
                if i or len(positions) < 2 or position - positions[-2] < spacing:
                    continue
                positions.pop()  # a segment's first time wins over the previous segment's last tick
                labels.pop()
            positions.append(position)
            labels.append(moment.strftime("%m-%d %H:%M" if i == 0 else "%H:%M"))
    return positions, labels


def time_chart(
    series: Mapping[str, Sequence[tuple[datetime, float]]],
    *,
    title: str,
    ylabel: str,
    gap: timedelta = CUT_AFTER,
    size: tuple[float, float] = (10.0, 2.8),
    right: Collection[str] = (),
    right_label: str = "",
    horizontal: Sequence[tuple[str, float]] = (),
) -> str:
    """Points over time (aware datetimes) of each series, lines joining a series' points; an
    inline SVG element. The series named in ``right`` are drawn against a second y axis on the
    right (labelled ``right_label``); each ``(label, value)`` of ``horizontal`` is a dashed
    horizontal line across the chart at that value of the left axis (an alarm threshold), in the
    legend.

    Samples of a replay come in bursts hours or days apart (one per scenario or event): stretches
    longer than ``gap`` without a sample are left out of the axis (:func:`time_segments`), each cut
    a dotted vertical line, so every burst gets room and no line crosses a cut. Tick labels are UTC
    times, each segment's first with its date. Every series has a marker at each point (a lone
    point is visible) and is distinguishable where series overlap (:func:`series_styles`); the
    legend is under the chart.
    """
    names = list(series)
    axis = _time_axis(time_segments((t for points in series.values() for t, _ in points), gap))
    xlabel = "time (UTC)"
    if axis.cuts:
        xlabel += f"; stretches of over {_minutes(gap):.0f} min without data are left out at the dotted lines"
    figure, axes = _axes(title, ylabel, xlabel, size)
    styles = series_styles(names, markers=True)
    twin = None
    if any(name in right for name in names):
        twin = axes.twinx()
        twin.set_ylabel(right_label)
    for name in names:
        xs: list[float] = []
        ys: list[float] = []
        previous = None
        for moment, value in sorted(series[name]):
            index, x = axis.x(moment)
            if previous is not None and index != previous:
                xs.append(math.nan)  # no line across a cut
                ys.append(math.nan)
            xs.append(x)
            ys.append(value)
            previous = index
        (twin if twin is not None and name in right else axes).plot(xs, ys, label=name, **styles[name])
    for label, value in horizontal:
        axes.axhline(value, color="#b3261e", linestyle="--", linewidth=1.2, zorder=1.5, label=label)
    for cut in axis.cuts:
        axes.axvline(cut, color="0.45", linestyle=":", linewidth=1.0, zorder=1)
    positions, labels = _time_ticks(axis)
    axes.set_xticks(positions, labels, rotation=30, ha="right", fontsize=7)
    axes.set_xlim(-0.03 * axis.width, 1.03 * axis.width)
    _grow_for_legend(figure, [*names, *(label for label, _ in horizontal)], size)
    legend_below(figure, axes, others=[] if twin is None else [twin])
    axes.set_ylim(bottom=0)
    if twin is not None:
        twin.set_ylim(bottom=0)
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
