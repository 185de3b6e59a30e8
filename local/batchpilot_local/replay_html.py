"""The HTML report of ``batchpilot replay --report FILE``: one self-contained page a person reads.

Built with :mod:`batchpilot_local.html_report` (the module ``batchpilot simulate --report`` uses):
inline styles, charts drawn by matplotlib as inline SVG, no script, nothing fetched. It shows:

- the summary of :func:`batchpilot_local.replay_summary.summarise` (messages by channel and
  severity, pages, resubmissions, skips, capacity changes, the fleet's utilisation against
  reserved capacity, and every share: usage beside entitlement, queue wait);
- charts: per clock scenario and service environment, the limit, instances in use and RUNNABLE
  demand at each tick; per share, its share of usage beside its entitlement (the shares with the
  job ledger's ShareOfUsage), and its instances in use (the shares with an InstancesInUse gauge);
  queue wait per share;
- the dashboards' widgets (each ``AWS::CloudWatch::Dashboard`` of the template), drawn from the
  replayed metrics (:func:`dashboard_charts`);
- the messages as people would see them: Slack Block Kit and Teams Adaptive Card previews, and
  the on-call topic's subject and text, each labelled with the event that caused it (or, for a
  digest, the batch whose events it tells about);
- each event's own outputs (metrics, messages, actions, errors), one row per event;
- errors, each with its event (or batch), if any.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batchpilot_local.html_report import (
    CUT_AFTER,
    Page,
    figure_svg,
    legend_below,
    legend_rows,
    line_chart,
    time_chart,
    write_page,
)
from batchpilot_local.notifications import Delivery, markdown_shown
from batchpilot_local.replay_summary import (
    FLEET_TITLE,
    SHARES_NO_LEDGER,
    Summary,
    TickRow,
    duration,
    fleet_table,
    has_ledger_shares,
    percentile,
    share_table,
)
from batchpilot_local.report import OWN_COUNTERS, BatchReport, EventReport, MetricRecord, event_numbers
from batchpilot_local.template import AppTemplate

if TYPE_CHECKING:
    from batchpilot_local.dashboards import Line

__all__ = ["batch_label", "build_report", "event_label", "short_labels", "write_report"]

_MAX_PREVIEWS = 60  # messages previewed; the rest are counted
_PREVIEW_BODY_MAX = 4000  # characters of a generic channel's body shown
_MAX_EVENT_ROWS = 500  # rows of the per-event table; the rest are counted
_MAX_TIMELINE_CHARTS = 12
_PREVIEW_STYLE = """
<style>
.previews { display: grid; grid-template-columns: repeat(auto-fill, minmax(480px, 1fr)); gap: 1rem; }
.msg { border: 1px solid #d5dae3; border-radius: 8px; padding: 0.7rem 0.9rem; background: #fff;
       font-size: 0.9rem; }
.msg .chan { font-size: 0.75rem; color: #5a6473; text-transform: uppercase; letter-spacing: 0.04em; }
.msg .from { font-size: 0.8rem; color: #5a6473; margin-bottom: 0.2rem; }
.msg.slack { border-left: 4px solid #4a154b; }
.msg.teams { border-left: 4px solid #464eb8; }
.msg.sns { border-left: 4px solid #d13212; }
.msg .hdr { font-weight: 700; font-size: 1rem; margin: 0.3rem 0; }
.msg .fields { display: grid; grid-template-columns: 1fr 1fr; gap: 0.2rem 1rem; margin: 0.4rem 0; }
.msg .ctx { color: #5a6473; font-size: 0.8rem; margin-top: 0.3rem; }
.msg .facts td, .msg .facts th { border: none; padding: 0.05rem 0.6rem 0.05rem 0; text-align: left; }
.msg .btn { display: inline-block; border: 1px solid #8a94a6; border-radius: 4px; padding: 0.1rem 0.5rem;
            margin: 0.3rem 0.3rem 0 0; font-size: 0.8rem; }
.msg { overflow-wrap: anywhere; min-width: 0; }  /* a long URL wraps inside its box */
.msg pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0.3rem 0 0; }
.sev-critical { color: #b42318; } .sev-warning { color: #b54708; } .sev-info { color: #175cd3; }
</style>
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


# ------------------------------------------------------------------------------ message previews
_SLACK_LINK = re.compile(r"<([^|>]+)\|([^>]+)>")
_BOLD = re.compile(r"\*([^*\n]+)\*")


def _mrkdwn(text: Any) -> str:
    """Slack mrkdwn → escaped HTML: ``*bold*`` and ``<url|label>`` (shown as the label; a preview
    links nowhere)."""
    escaped = _e(_SLACK_LINK.sub(lambda m: m.group(2), str(text or "")))
    return _BOLD.sub(r"<b>\1</b>", escaped).replace("\n", "<br>")


def _slack_block(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    raw = block.get("text")
    text: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    if kind == "header":
        return f'<div class="hdr">{_e(text.get("text", ""))}</div>'
    if kind == "section":
        parts = []
        if text:
            parts.append(f"<div>{_mrkdwn(text.get('text'))}</div>")
        fields = block.get("fields") or []
        if fields:
            cells = "".join(f"<div>{_mrkdwn(f.get('text'))}</div>" for f in fields if isinstance(f, Mapping))
            parts.append(f'<div class="fields">{cells}</div>')
        return "".join(parts)
    if kind == "context":
        elements = block.get("elements") or []
        texts = " ".join(_mrkdwn(e.get("text")) for e in elements if isinstance(e, Mapping))
        return f'<div class="ctx">{texts}</div>'
    if kind == "divider":
        return "<hr>"
    if kind == "actions":
        buttons = block.get("elements") or []
        labels = [((b.get("text") or {}).get("text")) for b in buttons if isinstance(b, Mapping)]
        return "".join(f'<span class="btn">{_e(label)}</span>' for label in labels if label)
    return f'<div class="ctx">[{_e(kind)} block]</div>'


def slack_preview(payload: Mapping[str, Any]) -> str:
    """A Slack message (``text`` + Block Kit ``blocks``) as escaped HTML, roughly as Slack shows it."""
    blocks = payload.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        return f"<div>{_mrkdwn(payload.get('text'))}</div>"
    thread = " (in a thread)" if payload.get("thread_ts") else ""
    body = "".join(_slack_block(b) for b in blocks if isinstance(b, Mapping))
    return body + (f'<div class="ctx">{_e(thread.strip())}</div>' if thread else "")


def _card_element(element: Mapping[str, Any]) -> str:
    kind = element.get("type")
    if kind == "TextBlock":
        weight = "font-weight:700;" if element.get("weight") == "Bolder" else ""
        size = "font-size:1.05rem;" if element.get("size") in ("Large", "ExtraLarge", "Medium") else ""
        subtle = " ctx" if element.get("isSubtle") else ""
        text = markdown_shown(str(element.get("text", "")))  # Markdown in Teams
        return f'<div class="tb{subtle}" style="{weight}{size}">{_e(text)}</div>'
    if kind == "RichTextBlock":
        runs = []
        for run in element.get("inlines") or []:
            if isinstance(run, Mapping):
                text = _e(run.get("text", ""))
                runs.append(f"<b>{text}</b>" if run.get("weight") == "Bolder" else text)
            else:
                runs.append(_e(run))
        return f"<div>{''.join(runs)}</div>"
    if kind == "FactSet":
        rows = "".join(
            f"<tr><th>{_e(markdown_shown(str(f.get('title', ''))))}</th>"
            f"<td>{_e(markdown_shown(str(f.get('value', ''))))}</td></tr>"
            for f in element.get("facts") or []
            if isinstance(f, Mapping)
        )
        return f'<table class="facts">{rows}</table>'
    if kind in ("Container", "Column"):
        return "".join(_card_element(i) for i in element.get("items") or [] if isinstance(i, Mapping))
    if kind == "ColumnSet":
        columns = [c for c in element.get("columns") or [] if isinstance(c, Mapping)]
        return '<div class="fields">' + "".join(f"<div>{_card_element(c)}</div>" for c in columns) + "</div>"
    if kind == "ActionSet":
        return _card_actions(element.get("actions"))
    return f'<div class="ctx">[{_e(kind)}]</div>'


def _card_actions(actions: Any) -> str:
    titles = [a.get("title") for a in actions or [] if isinstance(a, Mapping)]
    return "".join(f'<span class="btn">{_e(t)}</span>' for t in titles if t)


def teams_preview(payload: Mapping[str, Any]) -> str:
    """A Teams workflow message (``attachments`` with an Adaptive Card) as escaped HTML."""
    parts: list[str] = []
    for attachment in payload.get("attachments") or []:
        card = attachment.get("content") if isinstance(attachment, Mapping) else None
        if not isinstance(card, Mapping):
            continue
        parts.extend(_card_element(e) for e in card.get("body") or [] if isinstance(e, Mapping))
        parts.append(_card_actions(card.get("actions")))
    return "".join(parts) or f"<div>{_e(json.dumps(payload)[:500])}</div>"


def sns_preview(payload: Mapping[str, Any]) -> str:
    """An on-call topic message: its subject and plain-text body."""
    subject = _e(payload.get("Subject") or "(no subject)")
    return f'<div class="hdr">{subject}</div><pre>{_e(payload.get("Message") or "")}</pre>'


def _preview(delivery: Delivery, source: str = "") -> str:
    channel = str(delivery.note.get("channel"))
    severity = str(delivery.note.get("severity"))
    label = {"sns": "on-call topic (SNS)", "slack": "Slack", "teams": "Microsoft Teams"}.get(channel, channel)
    if channel == "slack":
        body = slack_preview(delivery.payload)
    elif channel == "teams":
        body = teams_preview(delivery.payload)
    elif channel == "sns":
        body = sns_preview(delivery.payload)
    else:  # another registered webhook channel: its summary line, then the body as sent
        shown = json.dumps(delivery.payload, ensure_ascii=False, indent=2)[:_PREVIEW_BODY_MAX]
        title = _e(str(delivery.note.get("title") or ""))
        body = f'<div class="hdr">{title}</div><pre>{_e(shown)}</pre>'
    head = f'<div class="chan">{_e(label)} · <span class="sev-{_e(severity)}">{_e(severity)}</span></div>'
    origin = f'<div class="from">{_e(source)}</div>' if source else ""
    return f'<div class="msg {_e(channel)}">{head}{origin}{body}</div>'


def event_label(report: EventReport) -> str:
    """``event [5] Batch Job State Change (events/batch-job/x.json)``: where an output comes from."""
    where = f" ({report.origin})" if report.origin else ""
    return f"event [{report.number}] {report.detail_type or '(no detail-type)'}{where}"


def batch_label(batch: BatchReport) -> str:
    """``batch of alerts: 7 records, events [1]-[7]``: an output of a batch as a whole."""
    noun = "record" if batch.records == 1 else "records"
    return f"batch of {batch.function}: {batch.records} {noun}, events {event_numbers(batch.events)}"


def _label(outputs: EventReport | BatchReport) -> str:
    return event_label(outputs) if isinstance(outputs, EventReport) else batch_label(outputs)


def _event_rows(reports: Sequence[EventReport]) -> list[list[str]]:
    """One row per event: its own metrics, messages, actions, own events and errors (counted and
    named); its batches' outputs are not in it (they are labelled as the batch's)."""
    rows = []
    for report in reports:
        shown = [m.name for m in report.metrics if m.name not in OWN_COUNTERS]
        names = sorted(set(shown))
        messages = [f"{n.get('channel')} {n.get('severity')}" for n in report.notifications]
        rows.append(
            [
                f"[{report.number}]",
                report.detail_type or "-",
                (report.job.name or report.job.arn) if report.job else "-",
                ", ".join(report.functions) or "-",
                f"{len(shown)}: {', '.join(names)}" if shown else "-",
                ", ".join(messages) or "-",
                ", ".join(str(a.get("type")) for a in report.actions) or "-",
                ", ".join(str(e.get("detail_type")) for e in report.own_events) or "-",
                str(len(report.errors)) if report.errors else "-",
            ]
        )
    return rows


# ------------------------------------------------------------------------------------ charts
def _bar_chart(
    labels: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str, ylabel: str
) -> str:
    """Grouped bars, one group per label; an inline SVG element."""
    from matplotlib.figure import Figure

    height = (3.2 if len(labels) <= 12 else 4.2) + 0.2 * legend_rows(list(series), 10.0)
    figure = Figure(figsize=(10.0, height), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title, fontsize=11, loc="left")
    axes.set_ylabel(ylabel)
    axes.grid(True, axis="y", alpha=0.3)
    width = 0.8 / max(1, len(series))
    positions = list(range(len(labels)))
    for i, (name, values) in enumerate(series.items()):
        axes.bar([p + i * width for p in positions], list(values), width=width, label=name)
    axes.set_xticks([p + width * (len(series) - 1) / 2 for p in positions])
    axes.set_xticklabels(list(labels), rotation=30 if len(labels) > 4 else 0, ha="right", fontsize=8)
    legend_below(figure, axes)
    axes.set_ylim(bottom=0)
    return figure_svg(figure)


_TIMELINE_STYLES: dict[str, dict[str, Any]] = {
    "in use": {"color": "C0", "linestyle": "-", "linewidth": 3.0, "marker": "o", "markersize": 7.0},
    "demand (RUNNABLE instances)": {"color": "C2", "linestyle": ":", "linewidth": 2.0, "marker": "^"},
    "limit": {
        "color": "C3",
        "linestyle": "--",
        "linewidth": 1.6,
        "marker": "s",
        "markersize": 8.0,
        "markerfacecolor": "none",
        "markeredgewidth": 1.6,
    },
}


def _minutes(rows: Sequence[TickRow]) -> list[float]:
    times = [datetime.fromisoformat(r.at.replace("Z", "+00:00")) for r in rows]
    return [(t - times[0]).total_seconds() / 60.0 for t in times]


def _timeline_charts(page: Page, summary: Summary) -> int:
    drawn = 0
    for scenario, rows in summary.timelines.items():
        by_environment: dict[tuple[str, str], list[TickRow]] = defaultdict(list)
        for row in rows:
            by_environment[(row.environment, row.unit)].append(row)
        for (environment, unit), env_rows in sorted(by_environment.items()):
            if drawn >= _MAX_TIMELINE_CHARTS:
                page.paragraph(f"(more timelines in the text report: {scenario})")
                return drawn
            # The limit is drawn last (on top), dashed with open squares: where it equals the
            # instances in use, both stay visible.
            series = {
                "in use": [r.in_use or 0.0 for r in env_rows],
                "demand (RUNNABLE instances)": [r.demand or 0.0 for r in env_rows],
                "limit": [r.limit or 0.0 for r in env_rows],
            }
            name = Path(scenario).name
            page.figure(
                line_chart(
                    _minutes(env_rows),
                    series,
                    title=f"{name}: {environment} ({unit})",
                    ylabel="instances",
                    xlabel="minutes from the first tick",
                    markers=True,
                    styles=_TIMELINE_STYLES,
                ),
                caption=f"{scenario}: the capacity limit, instances in use and RUNNABLE demand at each "
                "scheduled run (the capacity function's capacity decision log lines).",
            )
            drawn += 1
    return drawn


def _share_charts(page: Page, summary: Summary) -> int:
    shares = sorted(summary.shares.values(), key=lambda s: (s.queue, s.share))
    drawn = 0
    ledger = [s for s in shares if s.share_of_usage is not None]
    if ledger:
        # A missing Entitlement is NaN: no bar, rather than a bar of 0 %.
        series = {
            "share of usage %": [100 * (s.share_of_usage or 0.0) for s in ledger],
            "entitlement %": [math.nan if s.entitlement is None else 100 * s.entitlement for s in ledger],
        }
        left_out = len(shares) - len(ledger)
        caption = (
            "Each share's part of its job queue's usage (the job ledger's ShareOfUsage: instances in "
            "use for service job queues, vCPUs for container job queues; last value) beside its "
            "Entitlement (last value; no bar where none was published), in % of the queue."
        )
        if left_out:
            caption += (
                f" {left_out} of {len(shares)} shares had no ShareOfUsage (the ledger did not publish "
                "for them, or their queue had nothing in use) and are left out; the Shares table "
                "above lists every share."
            )
        page.figure(
            _bar_chart(
                [f"{s.queue}/{s.share}" for s in ledger],
                series,
                title="Share of usage beside entitlement",
                ylabel="% of the queue",
            ),
            caption=caption,
        )
        drawn += 1
    in_use = [s for s in shares if s.in_use is not None]
    if in_use:
        left_out = len(shares) - len(in_use)
        caption = (
            "Instances in use per share: the job ledger's last InstancesInUse gauge with the share's "
            "dimension (published while the share has jobs)."
        )
        if left_out:
            caption += f" {left_out} of {len(shares)} shares had no such gauge and are left out."
        page.figure(
            _bar_chart(
                [f"{s.queue}/{s.share}" for s in in_use],
                {"instances in use": [s.in_use or 0.0 for s in in_use]},
                title="Instances in use per share",
                ylabel="instances",
            ),
            caption=caption,
        )
        drawn += 1
    waited = [s for s in shares if s.waits_s]
    if waited:
        page.figure(
            _bar_chart(
                [f"{s.queue}/{s.share}" for s in waited],
                {
                    "p50": [(percentile(s.waits_s, 0.5) or 0.0) / 60 for s in waited],
                    "max": [max(s.waits_s) / 60 for s in waited],
                },
                title="Queue wait per share",
                ylabel="minutes",
            ),
            caption="QueueWaitTime (created → first started) of the jobs that ended, per share.",
        )
        drawn += 1
    return drawn


# -------------------------------------------------------------------------------- dashboards
def _dashboard_bodies(template: AppTemplate | None) -> list[tuple[str, dict[str, Any]]]:
    """``(logical id, DashboardBody)`` of each ``AWS::CloudWatch::Dashboard`` in the template."""
    if template is None:
        return []
    from batchpilot_local.dashboards import dashboard_bodies

    return dashboard_bodies(template.path, template.overrides)


_MAX_WIDGET_SERIES = 12
_DIMENSION = re.compile(r"(\S+?)=(.*?)(?=\s\S+?=|$)")


def _label_parts(label: str) -> list[str]:
    """``"Name k=v k=v"`` (a :func:`~batchpilot_local.dashboards.widget_lines` label; its name may be
    several words: ``"JobFailureRate Average"``, ``"in use, all environments"``) → its parts."""
    first = re.search(r"(?:^|\s)\S+?=", label)
    if first is None:
        return [label]
    name, dimensions = label[: first.start()].strip(), label[first.start() :].strip()
    return [*([name] if name else []), *(f"{k}={v}" for k, v in _DIMENSION.findall(dimensions))]


def short_labels(labels: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Legend labels without what every label shares: ``(label -> short label, shared parts)``.

    ``["CapacityLimit CapacityUnit=NUM_INSTANCES ServiceEnvironment=a", "CapacityLimit
    CapacityUnit=NUM_INSTANCES ServiceEnvironment=b"]`` → ``ServiceEnvironment=a`` and
    ``ServiceEnvironment=b``, shared ``["CapacityLimit", "CapacityUnit=NUM_INSTANCES"]``. A single
    label is kept whole."""
    if len(labels) < 2:
        return {label: label for label in labels}, []
    parts = {label: _label_parts(label) for label in labels}
    first = parts[labels[0]]
    shared = [p for p in first if all(p in other for other in parts.values())]
    out = {}
    for label in labels:
        short = " ".join(p for p in parts[label] if p not in shared)
        out[label] = short or label
    return out, shared


def dashboard_charts(
    page: Page, template: AppTemplate | None, metrics: Sequence[MetricRecord], namespace: str
) -> int:
    """Draw each metric widget of the template's dashboards from the replayed ``metrics`` as
    CloudWatch would (:func:`batchpilot_local.dashboards.widget_lines`: each line's statistic over
    its period, metric math evaluated): every line, at most :data:`_MAX_WIDGET_SERIES` (those with
    the most points), those on the widget's right axis against a right axis, and each horizontal
    annotation (an alarm threshold, at the template's parameter value) as a dashed line. Replayed
    scenarios are hours or days apart: the time axis leaves out the stretches without data
    (:func:`batchpilot_local.html_report.time_chart`). Returns the number of charts drawn."""
    from batchpilot_local.dashboards import MetricIndex, UnsupportedWidget, widget_lines

    index = MetricIndex(metrics)
    drawn = 0
    for logical_id, body in _dashboard_bodies(template):
        page.heading(f"Dashboard {logical_id}", level=3)
        for widget in body.get("widgets") or []:
            properties = widget.get("properties") or {}
            if widget.get("type") != "metric":
                continue
            title = str(properties.get("title") or "widget")
            try:
                lines = widget_lines(properties, index, namespace)
            except UnsupportedWidget as error:
                page.paragraph(f"{title}: not drawn locally ({error})")
                continue
            if not lines:
                page.paragraph(f"{title}: no data in this replay")
                continue
            chosen = sorted(lines, key=lambda line: -len(line.points))[:_MAX_WIDGET_SERIES]
            chosen = [line for line in lines if line in chosen]  # back in widget order
            labels, shared = short_labels([line.label for line in chosen])
            notes = [_statistics_note(chosen)]
            if shared:
                notes.append("Every series: " + ", ".join(shared) + ".")
            if len(chosen) < len(lines):
                notes.append(f"{len(chosen)} of {len(lines)} series drawn (those with the most points).")
            longest = max(line.period for line in chosen)
            page.figure(
                time_chart(
                    {labels[line.label]: line.points for line in chosen},
                    title=title,
                    ylabel=_y_label(properties),
                    gap=max(CUT_AFTER, timedelta(seconds=2 * longest)),
                    right={labels[line.label] for line in chosen if line.y_axis == "right"},
                    right_label=_y_label(properties, "right"),
                    horizontal=_thresholds(properties),
                ),
                caption=" ".join(notes),
            )
            drawn += 1
    return drawn


def _statistics_note(lines: Sequence[Line]) -> str:
    """How the lines' values are computed: ``"Maximum per 1 min."``, ``"Average, SampleCount per
    5 min."``, ``"Metric math over 60 min periods."``."""
    stats = sorted({line.stat for line in lines if line.stat is not None})
    per = " or ".join(
        f"{p // 60} min" if p % 60 == 0 else f"{p} s" for p in sorted({line.period for line in lines})
    )
    if not stats:
        return f"Metric math over {per} periods."
    math_too = "; metric math" if any(line.stat is None for line in lines) else ""
    return f"{', '.join(stats)} per {per}{math_too}."


def _thresholds(properties: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The widget's horizontal annotations as ``(label, value)`` (``annotations.horizontal``)."""
    annotations = properties.get("annotations")
    marks = annotations.get("horizontal") if isinstance(annotations, Mapping) else None
    out = []
    for mark in marks or []:
        if isinstance(mark, Mapping) and isinstance(mark.get("value"), int | float):
            out.append((str(mark.get("label") or "threshold"), float(mark["value"])))
    return out


def _y_label(properties: Mapping[str, Any], side: str = "left") -> str:
    """The widget's ``yAxis.<side>.label``, or an empty string."""
    axis = properties.get("yAxis")
    which = axis.get(side) if isinstance(axis, Mapping) else None
    label = which.get("label") if isinstance(which, Mapping) else None
    return str(label) if label else ""


# ------------------------------------------------------------------------------------- page
def _summary_tables(page: Page, summary: Summary) -> None:
    if summary.notifications:
        severities = ("critical", "warning", "info")
        rows = [[c, *[summary.count(c, s) for s in severities], summary.count(c)] for c in summary.channels]
        page.table(["channel", *severities, "total"], rows, caption="Pages and chat messages")
    else:
        page.paragraph("No page or chat message was sent.")
    if summary.pages:
        page.paragraph(f"On-call pages ({len(summary.pages)}):")
        page.bullets(summary.pages[:50])
    if summary.warnings:
        page.paragraph(f"Warnings to the on-call topic ({len(summary.warnings)}):")
        page.bullets(summary.warnings[:50])
    if summary.resubmissions:
        page.table(
            ["job", "new job", "queue", "category", "checkpoint age", "lost instance-hours", "resumes from"],
            [
                [
                    r.job + (" (dry run)" if r.dry_run else ""),
                    r.new_job,
                    r.queue,
                    r.category,
                    duration(r.checkpoint_age_s),
                    "-" if r.lost_instance_hours is None else f"{r.lost_instance_hours:.2f}",
                    r.checkpoint_uri or "step zero",
                ]
                for r in summary.resubmissions
            ],
            caption=f"Resubmissions ({summary.lost_instance_hours:.2f} instance-hours lost since "
            "checkpoints)",
        )
    if summary.skips:
        page.table(["reason", "jobs"], summary.skips.most_common(), caption="Recovery skipped")
    if summary.capacity_changes:
        page.table(
            ["service environment", "unit", "from", "to", "reason", "time"],
            [
                [
                    c.environment,
                    c.unit,
                    c.previous,
                    c.new,
                    c.reason + (" (dry run)" if c.dry_run else ""),
                    c.time,
                ]
                for c in summary.capacity_changes
            ],
            caption="Capacity changes",
        )
    if summary.capacity_refusals:
        page.table(["reason", "times"], summary.capacity_refusals.most_common(), caption="Capacity limited")
    if summary.fleet:
        page.table(*fleet_table(summary), caption=FLEET_TITLE)
        if summary.idle_across_teams.runs:
            page.paragraph(summary.idle_across_teams.line())
    if summary.shares:
        share_headers, share_rows = share_table(summary)  # every share: the text report stops at 10
        caption = f"Shares ({len(share_rows)}): usage beside entitlement, and queue wait"
        if not has_ledger_shares(summary):
            caption += f" ({SHARES_NO_LEDGER})"
        page.table(share_headers, share_rows, caption=caption)


def build_report(
    reports: Sequence[EventReport],
    summary: Summary,
    *,
    template: AppTemplate | None = None,
    namespace: str = "BatchPilot",
    deployment: Sequence[str] = (),
) -> str:
    """The replay's HTML document (see the module docstring). ``deployment``: the lines saying
    what was replayed (template, parameters, functions, channels), shown first."""
    subtitle = (
        f"{summary.events:,} events, {summary.routed:,} routed, {summary.ignored:,} ignored, "
        f"{summary.with_errors:,} with errors"
    )
    if template is not None and template.overrides:
        subtitle += "; parameters: " + ", ".join(sorted(template.overrides))
    page = Page("batchpilot replay", subtitle=subtitle)
    page.markup(_PREVIEW_STYLE)
    if deployment:  # the text report's header, as it is (its table aligned in monospace)
        page.heading("Deployment replayed")
        page.preformatted("\n".join(deployment))
    page.heading("Summary")
    _summary_tables(page, summary)
    page.heading("Charts")
    drawn = _timeline_charts(page, summary) + _share_charts(page, summary)
    if not drawn:
        page.paragraph("No clock scenario or share in this replay: nothing to chart.")
    outputs = [o for r in reports for o in r.outputs()]
    all_metrics = [m for o in outputs for m in o.metrics]
    if _dashboard_bodies(template):
        page.heading("Dashboards, drawn from the replayed metrics")
        dashboard_charts(page, template, all_metrics, namespace)
    deliveries = [(d, _label(o)) for o in outputs for d in o.deliveries]
    page.heading(f"Messages ({len(deliveries)})")
    if deliveries:
        shown = "".join(_preview(d, label) for d, label in deliveries[:_MAX_PREVIEWS])
        page.markup(f'<div class="previews">{shown}</div>')
        if len(deliveries) > _MAX_PREVIEWS:
            page.paragraph(
                f"... and {len(deliveries) - _MAX_PREVIEWS} more (the text report lists them all)."
            )
    page.heading(f"Each event's own outputs ({len(reports)})")
    page.table(
        [
            "event",
            "detail-type",
            "job",
            "functions",
            "metrics",
            "messages",
            "actions",
            "own events",
            "errors",
        ],
        _event_rows(reports[:_MAX_EVENT_ROWS]),
        caption="What each event caused (the functions' own counters left out); what a batch did "
        "as a whole is labelled as the batch's in the messages and errors",
    )
    if len(reports) > _MAX_EVENT_ROWS:
        page.paragraph(
            f"... and {len(reports) - _MAX_EVENT_ROWS} more events (the text report lists them all)."
        )
    errors = [(_label(o), e) for o in outputs for e in o.errors]
    if errors:
        page.heading(f"Errors ({len(errors)})")
        page.table(["event", "error"], errors[:200])
    return page.render()


def write_report(
    path: str | os.PathLike[str],
    reports: Sequence[EventReport],
    summary: Summary,
    *,
    template: AppTemplate | None = None,
    deployment: Sequence[str] = (),
) -> None:
    """Write :func:`build_report` to ``path`` atomically (a temporary file beside it, then a rename):
    a failure leaves no half-written file.

    Raises:
        OSError: the file cannot be written.
    """
    namespace = "BatchPilot"
    if template is not None:
        namespace = next(
            (
                s.environment["POWERTOOLS_METRICS_NAMESPACE"]
                for s in template.functions.values()
                if s.environment.get("POWERTOOLS_METRICS_NAMESPACE")
            ),
            namespace,
        )
    text = build_report(reports, summary, template=template, namespace=namespace, deployment=deployment)
    write_page(path, text)
