"""The replay report's charts and previews without a browser: which samples a time axis keeps
together, series styles that stay apart where values are equal, markers on a lone sample and its
one tick, legend labels without their shared parts, Teams text shown as Teams renders it, and the
shares the text summary leaves out being in the HTML report (``batchpilot_local.html_report``,
``replay_html``, ``replay_summary``, ``notifications``)."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from batchpilot.alerts.channels.teams import markdown_escaped
from batchpilot_local.html_report import line_chart, series_id, series_styles, time_chart, time_segments
from batchpilot_local.notifications import markdown_shown
from batchpilot_local.replay_html import build_report, short_labels
from batchpilot_local.replay_summary import ShareUsage, Summary, render_overview
from hypothesis import given
from hypothesis import strategies as st

SVG = "{http://www.w3.org/2000/svg}"
T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


def _series_groups(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)
    return {g.get("id", ""): g for g in root.iter(f"{SVG}g") if g.get("id", "").startswith("series-")}


def test_time_segments_split_where_samples_are_further_apart_than_the_gap() -> None:
    minutes = [0, 1, 2, 9, 40, 41, 24 * 60, 24 * 60]  # a burst, a pause of 31 min, a day later
    times = [T0 + timedelta(minutes=m) for m in minutes]
    assert time_segments(reversed(times), timedelta(minutes=30)) == [
        (times[0], times[3]),
        (times[4], times[5]),
        (times[6], times[6]),  # a lone time (twice) is a segment of its own
    ]
    assert time_segments(times, timedelta(days=2)) == [(times[0], times[-1])]
    assert time_segments([]) == []


def test_a_lone_sample_is_drawn_as_a_marker() -> None:
    svg = line_chart([0.0], {"in use": [4.0], "limit": [8.0]}, title="t", ylabel="instances")
    groups = _series_groups(svg)
    assert set(groups) == {"series-in-use", "series-limit"}
    for group in groups.values():
        assert len(list(group.iter(f"{SVG}use"))) == 1  # the marker: a path through one point shows nothing


def _x_tick_labels(svg: str) -> list[str]:
    # matplotlib draws text as paths, each after a comment holding the text.
    return re.findall(r'<g id="xtick_\d+">.*?<!-- (.*?) -->', svg, flags=re.DOTALL)


def test_a_lone_sample_has_one_tick_at_it() -> None:
    svg = line_chart([0.0], {"in use": [4.0]}, title="t", ylabel="instances", xlabel="minutes")
    assert _x_tick_labels(svg) == ["0"]  # not -1 ... 1 around it
    several = line_chart([0.0, 1.0, 2.0], {"in use": [4.0, 5.0, 6.0]}, title="t", ylabel="instances")
    assert len(_x_tick_labels(several)) > 1


def test_the_text_summary_says_where_the_shares_it_leaves_out_are() -> None:
    summary = Summary()
    for i in range(12):
        summary.shares[("q", f"share-{i:02d}")] = ShareUsage("q", f"share-{i:02d}", in_use=float(i))
    overview = render_overview(summary).splitlines()
    start = overview.index("Shares (12)")
    more = overview[start + 12]  # after the header and 10 rows
    assert more == "  ... and 2 more (every one is in the HTML report, --report FILE)"
    page = build_report([], summary)
    shares = page[page.index("<caption>Shares (12)") :]
    shares = shares[: shares.index("</table>")]
    assert re.findall(r"<tr><td>q</td><td>(share-\d+)</td>", shares) == [f"share-{i:02d}" for i in range(12)]


def test_series_stay_distinguishable_where_they_are_equal() -> None:
    names = [f"s{i}" for i in range(12)]
    styles = series_styles(names)
    looks = {(s["color"], s["linestyle"], s["marker"]) for s in styles.values()}
    assert len(looks) == len(names)
    ordered = [styles[n] for n in names]
    assert all(a["zorder"] < b["zorder"] for a, b in itertools.pairwise(ordered))
    # Later series are drawn on top, thinner, with smaller markers: the one below shows around them.
    assert all(a["linewidth"] > b["linewidth"] for a, b in itertools.pairwise(ordered))
    assert all(a["markersize"] > b["markersize"] for a, b in itertools.pairwise(ordered))

    equal = [1.0, 3.0, 3.0, 2.0]
    svg = line_chart([0, 1, 2, 3], {"in use": equal, "limit": equal}, title="t", ylabel="instances")
    groups = _series_groups(svg)
    assert list(groups) == ["series-in-use", "series-limit"]  # document order is paint order
    dashes = [g.find(f"{SVG}path").get("style", "") for g in groups.values()]  # type: ignore[union-attr]
    assert "stroke-dasharray" not in dashes[0] and "stroke-dasharray" in dashes[1]


def test_series_ids_are_slugs_made_unique_within_a_chart() -> None:
    taken: set[str] = set()
    assert series_id("demand (RUNNABLE instances)", taken) == "series-demand-runnable-instances"
    assert series_id("Demand: RUNNABLE instances", taken) == "series-demand-runnable-instances-2"
    assert series_id("", taken) == "series-series"


def test_a_time_chart_draws_bursts_days_apart_and_breaks_lines_at_the_cuts() -> None:
    burst = [(T0 + timedelta(minutes=m), float(m)) for m in range(10)]
    next_day = [(T0 + timedelta(days=1, minutes=m), 5.0) for m in range(0, 21, 3)]
    svg = time_chart(
        {"limit": burst + next_day, "lone": [(T0 + timedelta(hours=5), 1.0)]}, title="t", ylabel="n"
    )
    groups = _series_groups(svg)
    assert len(list(groups["series-limit"].iter(f"{SVG}use"))) == len(burst) + len(next_day)
    assert len(list(groups["series-lone"].iter(f"{SVG}use"))) == 1
    path = groups["series-limit"].find(f"{SVG}path")
    assert path is not None and path.get("d", "").count("M") == 2  # no line across the cut
    assert "11-25 10:00" in svg and "11-26 10:00" in svg and "11-25 15:00" in svg  # each segment's date


def test_legend_labels_leave_out_what_every_series_shares() -> None:
    labels = [
        "CapacityLimit CapacityUnit=NUM_INSTANCES ServiceEnvironment=burst-env",
        "CapacityLimit CapacityUnit=NUM_INSTANCES ServiceEnvironment=night-env",
        "InstancesInUse CapacityUnit=NUM_INSTANCES ServiceEnvironment=night-env",
    ]
    short, shared = short_labels(labels)
    assert shared == ["CapacityUnit=NUM_INSTANCES"]
    assert list(short.values()) == [
        "CapacityLimit ServiceEnvironment=burst-env",
        "CapacityLimit ServiceEnvironment=night-env",
        "InstancesInUse ServiceEnvironment=night-env",
    ]
    assert short_labels(labels[:1]) == ({labels[0]: labels[0]}, [])


def test_teams_text_reads_as_teams_renders_it() -> None:
    assert markdown_shown("Warning: \\[dry run\\] recovery skipped") == "Warning: [dry run] recovery skipped"
    assert markdown_shown("C:\\\\jobs \\<at\\>all\\</at\\>") == "C:\\jobs <at>all</at>"
    assert markdown_shown("a\\b") == "a\\b"  # a backslash before a letter is shown


@given(st.text())
def test_what_the_alerts_function_escapes_teams_shows_as_it_was(text: str) -> None:
    assert markdown_shown(markdown_escaped(text)) == text
