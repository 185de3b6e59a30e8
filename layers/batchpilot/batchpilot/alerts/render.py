"""Messages people read: SNS subject, plain-text body and attributes; Slack Block Kit. Pure.

Limits honoured (domain.md section 7; Slack Block Kit reference):

- SNS ``Subject``: ASCII, no control characters or line breaks, at most 99 characters (SNS takes
  fewer than 100; moto rejects 100). ``Message`` at most 256 KB: long reasons are truncated.
- Slack: header text at most 150 characters, section text at most 3,000, each section field at
  most 2,000 and at most 10 fields per section, at most 50 blocks, always a top-level ``text``
  (notifications and screen readers use it). Every cut is marked visibly with
  :data:`TRUNCATION_MARK` (``…[truncated]``) so a reader knows text is missing.

The top-level Slack ``text`` and the SNS subject both start with the severity
(``Critical: <title>`` / ``[CRITICAL] <title>``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from batchpilot.alerts.facts import AlertFact
from batchpilot.alerts.policy import Severity

__all__ = [
    "HEADER_MAX",
    "MAX_BLOCKS",
    "SECTION_FIELD_MAX",
    "SECTION_TEXT_MAX",
    "SNS_SUBJECT_MAX",
    "TRUNCATION_MARK",
    "SlackMessage",
    "SnsMessage",
    "console_links",
    "format_duration",
    "sanitize_subject",
    "slack_digest",
    "slack_message",
    "sns_digest",
    "sns_message",
    "title",
    "truncate",
]

SNS_SUBJECT_MAX = 99
SNS_REASON_MAX = 20_000
"""Characters of a failure reason kept in an SNS body (the body stays far below 256 KB)."""
HEADER_MAX = 150
SECTION_TEXT_MAX = 3000
SECTION_FIELD_MAX = 2000
FIELDS_PER_SECTION = 10
MAX_BLOCKS = 50
TOP_TEXT_MAX = 3000
SLACK_REASON_MAX = 2500
"""Characters of a reason shown in one Slack message (below the 3,000 of a section)."""
DIGEST_REASON_MAX = 160
TRUNCATION_MARK = "…[truncated]"
ASCII_TRUNCATION_MARK = "..."

_EMOJI = {Severity.CRITICAL: "🔴", Severity.WARNING: "🟠", Severity.INFO: "🔵", Severity.SILENT: "⚪"}
_KIND_LABEL = {"container-job": "container job", "service-job": "service job", "training-job": "training job"}


@dataclass(frozen=True, slots=True)
class SnsMessage:
    """One SNS ``Publish`` request's content.

    Attributes:
        subject: sanitised subject (ASCII, ≤99 characters).
        body: plain text for email and pager subscribers.
        attributes: SNS ``MessageAttributes`` values (``String``): ``severity``, ``job_queue``,
            ``category``, ``event_kind`` (and ``fallback_from`` when Slack failed); empty values
            are left out (SNS rejects them).
    """

    subject: str
    body: str
    attributes: dict[str, str]


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """A Slack message: ``text`` (top-level, always set) and Block Kit ``blocks`` (≤50)."""

    text: str
    blocks: list[dict[str, Any]]

    def payload(self) -> dict[str, Any]:
        """``{"text", "blocks"}`` as sent to a webhook or ``chat.postMessage``."""
        return {"text": self.text, "blocks": self.blocks}


# ----------------------------------------------------------------------------------- text helpers
def truncate(text: str, limit: int, mark: str = TRUNCATION_MARK) -> str:
    """``text`` if it fits in ``limit`` characters, else its start followed by ``mark`` (total ≤ limit).

    A cut never leaves half of a Slack entity (``&amp;``, ``&lt;``, ``&gt;``) at the end.
    """
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(mark))
    head = re.sub(r"&[a-z]{0,3}$", "", text[:keep])
    return head + mark[: max(0, limit - len(head))]


def sanitize_subject(text: str, limit: int = SNS_SUBJECT_MAX) -> str:
    """An SNS subject SNS accepts: ASCII (accents folded, other characters dropped), control
    characters and line breaks turned into spaces, spaces collapsed, at most ``limit`` (99)
    characters, with ``...`` when cut. Never empty (``batchpilot alert``)."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    cleaned = re.sub(r"[\x00-\x1f\x7f]", " ", folded)
    cleaned = re.sub(r"\s+", " ", cleaned).strip()
    if not cleaned:
        cleaned = "batchpilot alert"
    if len(cleaned) > limit:
        cleaned = cleaned[: limit - len(ASCII_TRUNCATION_MARK)].rstrip() + ASCII_TRUNCATION_MARK
    return cleaned


def _mrkdwn(text: str) -> str:
    """Escape the three characters Slack mrkdwn reserves (``&``, ``<``, ``>``)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _plain(text: str) -> str:
    """One line of plain text: control characters become spaces."""
    return re.sub(r"\s+", " ", re.sub(r"[\x00-\x1f\x7f]", " ", text)).strip()


def format_duration(seconds: float | None) -> str | None:
    """``3725`` → ``1h 02m 05s``; ``65`` → ``1m 05s``; ``7`` → ``7s``; None/negative → None."""
    if seconds is None or seconds < 0:
        return None
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def _span(start: datetime | None, end: datetime | None) -> str | None:
    if start is None or end is None:
        return None
    return format_duration((end - start).total_seconds())


# ----------------------------------------------------------------------------------------- title
def _job_label(fact: AlertFact) -> str:
    kind = _KIND_LABEL.get(fact.job_kind or "", "job")
    name = fact.job_name or (fact.subject.rsplit("/", 1)[-1] if fact.subject else "unknown")
    return f"{kind} {name}"


def title(fact: AlertFact) -> str:
    """A one-line headline, e.g. ``service job llama-pretrain FAILED (CAPACITY) on ml-training-highpri``."""
    queue = f" on {fact.job_queue}" if fact.job_queue else ""
    category = f" ({fact.category})" if fact.category else ""
    job = _job_label(fact)
    match fact.event_kind:
        case "queue-blocked":
            return f"job queue {fact.job_queue or '?'} blocked{category}: {job} cannot start"
        case "preemption-started":
            return f"{job} is being preempted{queue}"
        case "preemption-completed":
            return f"{job} was preempted and requeued{queue}"
        case "job-resubmitted":
            how = "from step 0" if fact.reason_code == "RESTARTS_FROM_STEP_ZERO" else "from its checkpoint"
            return f"{job} resubmitted {how} (resubmission {fact.attempts}){category}{queue}"
        case "recovery-skipped":
            return f"recovery skipped for {job}: {fact.reason_code}{queue}"
        case "recovery-failed":
            return f"resubmission of {job} failed: {fact.reason_code}{queue}"
        case "capacity-adjusted":
            return f"capacity adjusted: {fact.subject.rsplit('/', 1)[-1]}"
        case "capacity-limited":
            return f"capacity limited ({fact.reason_code}): {fact.subject.rsplit('/', 1)[-1]}"
    status = fact.status or "?"
    if fact.secondary_status and fact.secondary_status != status:
        status = f"{status}/{fact.secondary_status}"
    if not fact.terminal and fact.category == "SPOT_INTERRUPTION":
        return f"{job} lost an attempt to a spot interruption; AWS is retrying{queue}"
    return f"{job} {status}{category}{queue}"


# ----------------------------------------------------------------------------------------- links
def _logs_fragment(value: str) -> str:
    # The CloudWatch console double-encodes path parts in its fragment: "/" → "%2F" → "$252F".
    return quote(value, safe="").replace("%", "$25")


def console_links(fact: AlertFact) -> list[tuple[str, str]]:
    """``[(label, url)]``: the Batch job, the SageMaker training job and its CloudWatch logs in the
    AWS console of the event's region (nothing without a region)."""
    region = fact.region
    if not region:
        return []
    base = f"https://{region}.console.aws.amazon.com"
    links: list[tuple[str, str]] = []
    if fact.job_kind in {"container-job", "service-job"} and fact.job_id:
        links.append(
            ("Batch job", f"{base}/batch/home?region={region}#jobs/detail/{quote(fact.job_id, safe='')}")
        )
    if fact.training_job_name:
        links.append(
            (
                "Training job",
                f"{base}/sagemaker/home?region={region}#/jobs/{quote(fact.training_job_name, safe='')}",
            )
        )
    if fact.log_group and fact.log_stream:
        group = _logs_fragment(fact.log_group)
        if fact.log_stream.endswith("/"):  # a stream prefix: the group's streams, filtered
            url = f"{base}/cloudwatch/home?region={region}#logsV2:log-groups/log-group/{group}"
            url += "$3FlogStreamNameFilter$3D" + _logs_fragment(fact.log_stream)
        else:
            url = (
                f"{base}/cloudwatch/home?region={region}#logsV2:log-groups/log-group/{group}"
                f"/log-events/{_logs_fragment(fact.log_stream)}"
            )
        links.append(("Logs", url))
    return links


# ----------------------------------------------------------------------------------------- facts
def _facts_table(fact: AlertFact) -> list[tuple[str, str]]:
    """``[(label, value)]`` in display order, without empty values (reason excluded)."""
    rows: list[tuple[str, str | None]] = [
        ("Job", fact.job_name),
        ("Job queue", fact.job_queue),
        ("Share", fact.share_identifier),
        ("Quota share", fact.quota_share),
        ("Status", f"{fact.status}/{fact.secondary_status}" if fact.secondary_status else fact.status),
        ("Category", fact.category),
        ("Attempts", str(fact.attempts) if fact.attempts else None),
        ("Wait time", _span(fact.created_at, fact.started_at)),
        ("Run time", _span(fact.started_at, fact.stopped_at)),
        (
            "Instances",
            f"{fact.instance_type} x {fact.instance_count}"
            if fact.instance_type and fact.instance_count
            else fact.instance_type,
        ),
        *fact.extra,
    ]
    return [(label, value) for label, value in rows if value]


# ----------------------------------------------------------------------------------------- SNS
def _attributes(severity: Severity, fact: AlertFact | None, **extra: str | None) -> dict[str, str]:
    values: dict[str, str | None] = {"severity": severity.value}
    if fact is not None:
        values |= {"job_queue": fact.job_queue, "category": fact.category, "event_kind": fact.event_kind}
    values |= extra
    return {k: v for k, v in values.items() if v}


def sns_message(
    fact: AlertFact, severity: Severity, why: str, *, fallback_reason: str | None = None
) -> SnsMessage:
    """The on-call topic message for one fact.

    Args:
        fact: the fact.
        severity: its decided severity.
        why: the sentence saying which rule decided.
        fallback_reason: set when the message goes to SNS because Slack failed (``rate_limited``,
            ``channel_is_archived``, ...): the body says so and ``fallback_from=slack`` is added.
    """
    headline = title(fact)
    lines = [f"{severity.value.upper()}: {_plain(headline)}", ""]
    if fallback_reason:
        lines += [f"(Sent here because Slack delivery failed: {fallback_reason}.)", ""]
    table = _facts_table(fact)
    width = max((len(label) for label, _ in table), default=0)
    width = max(width, len("Training job")) + 2
    for label, value in table:
        lines.append(f"{label + ':':<{width}}{_plain(value)}")
    lines.append(f"{'ARN:':<{width}}{fact.subject}")
    if fact.training_job_arn and fact.training_job_arn != fact.subject:
        lines.append(f"{'Training job:':<{width}}{fact.training_job_arn}")
    if fact.reason:
        lines += ["", "Reason:", truncate(fact.reason.strip(), SNS_REASON_MAX, TRUNCATION_MARK)]
    links = console_links(fact)
    if links:
        lines += ["", *[f"{label}: {url}" for label, url in links]]
    where = " ".join(x for x in (fact.account and f"account {fact.account}", fact.region) if x)
    lines += [
        "",
        f"Why {severity.value}: {why}.",
        f"Event: {fact.detail_type} at {fact.event_time.isoformat()}" + (f" ({where})" if where else ""),
        "-- batchpilot alerts",
    ]
    return SnsMessage(
        subject=sanitize_subject(f"[{severity.value.upper()}] {headline}"),
        body="\n".join(lines),
        attributes=_attributes(severity, fact, fallback_from="slack" if fallback_reason else None),
    )


def _group_headline(facts: Sequence[AlertFact]) -> str:
    first = facts[0]
    kinds = {f.job_kind for f in facts}
    noun = _KIND_LABEL.get(first.job_kind or "", "job") + "s" if len(kinds) == 1 else "jobs"
    what = first.category or first.status or first.event_kind
    queue = f" on {first.job_queue}" if first.job_queue else ""
    return f"{len(facts)} {noun}: {what}{queue}"


def sns_digest(
    facts: Sequence[AlertFact], severity: Severity, why: str, *, fallback_reason: str | None = None
) -> SnsMessage:
    """One on-call message for a burst (same job queue, category and severity), listing every job
    (up to 500 lines; the rest counted)."""
    headline = _group_headline(facts)
    lines = [f"{severity.value.upper()}: {headline}", ""]
    if fallback_reason:
        lines += [f"(Sent here because Slack delivery failed: {fallback_reason}.)", ""]
    shown = list(facts)[:500]
    for fact in shown:
        reason = truncate(_plain(fact.reason or ""), 300, ASCII_TRUNCATION_MARK)
        lines.append(f"- {fact.job_name or fact.subject} [{fact.status}] {reason}".rstrip())
        lines.append(f"  {fact.subject}")
    if len(facts) > len(shown):
        lines.append(f"... and {len(facts) - len(shown)} more")
    lines += ["", f"Why {severity.value}: {why}.", "-- batchpilot alerts"]
    return SnsMessage(
        subject=sanitize_subject(f"[{severity.value.upper()}] {headline}"),
        body="\n".join(lines),
        attributes=_attributes(
            severity,
            facts[0],
            fallback_from="slack" if fallback_reason else None,
            group_size=str(len(facts)),
        ),
    )


# --------------------------------------------------------------------------------------- Slack
def _header(severity: Severity, text: str) -> dict[str, Any]:
    label = f"{_EMOJI[severity]} {severity.value.upper()} · {_plain(text)}"
    return {
        "type": "header",
        "text": {"type": "plain_text", "text": truncate(label, HEADER_MAX), "emoji": True},
    }


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": truncate(text, SECTION_TEXT_MAX)}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": truncate(text, SECTION_FIELD_MAX)}]}


def _top_text(severity: Severity, headline: str) -> str:
    return truncate(f"{severity.value.capitalize()}: {_plain(headline)}", TOP_TEXT_MAX)


def _link(label: str, url: str) -> str:
    # Slack link syntax <url|label>: the URL must not contain '|' or '>'; ours are percent-encoded.
    return f"<{url.replace('|', '%7C').replace('>', '%3E')}|{_mrkdwn(label)}>"


def slack_message(fact: AlertFact, severity: Severity, why: str) -> SlackMessage:
    """The Block Kit message for one fact: header, the facts as fields, the reason, console links,
    and a context line saying why this severity."""
    headline = title(fact)
    blocks: list[dict[str, Any]] = [_header(severity, headline)]
    fields = [
        {"type": "mrkdwn", "text": truncate(f"*{label}*\n{_mrkdwn(_plain(value))}", SECTION_FIELD_MAX)}
        for label, value in _facts_table(fact)
    ]
    for start in range(0, len(fields), FIELDS_PER_SECTION):
        blocks.append({"type": "section", "fields": fields[start : start + FIELDS_PER_SECTION]})
    if fact.reason:
        blocks.append(_section("*Reason*\n" + truncate(_mrkdwn(fact.reason.strip()), SLACK_REASON_MAX)))
    links = console_links(fact)
    if links:
        blocks.append(_section(" · ".join(_link(label, url) for label, url in links)))
    blocks.append(
        _context(_mrkdwn(f"Why {severity.value}: {why}. {fact.detail_type} at {fact.event_time.isoformat()}"))
    )
    return SlackMessage(text=_top_text(severity, headline), blocks=blocks[:MAX_BLOCKS])


def slack_digest(
    facts: Sequence[AlertFact], severity: Severity, why: str, max_items: int = 20
) -> SlackMessage:
    """One Block Kit digest for a burst: header, a summary, one line per job for the first
    ``max_items`` jobs (linked to the console), then "…and N more". Always ≤50 blocks."""
    headline = _group_headline(facts)
    first = facts[0]
    blocks: list[dict[str, Any]] = [_header(severity, headline)]
    summary = (
        f"*{len(facts)}* jobs in one batch of events share job queue *{_mrkdwn(first.job_queue or '-')}*"
    )
    summary += f", category *{_mrkdwn(first.category or '-')}* and severity *{severity.value}*."
    blocks.append(_section(summary))
    lines = []
    for fact in list(facts)[:max_items]:
        links = console_links(fact)
        name = _mrkdwn(_plain(fact.job_name or fact.subject.rsplit("/", 1)[-1]))
        label = _link(fact.job_name or "job", links[0][1]) if links else f"*{name}*"
        reason = truncate(_mrkdwn(_plain(fact.reason or "")), DIGEST_REASON_MAX)
        attempt = f", attempt {fact.attempts}" if fact.attempts else ""
        lines.append(truncate(f"• {label} {_mrkdwn(fact.status or '')}{attempt}: {reason}".rstrip(": "), 600))
    chunk: list[str] = []
    for line in lines:
        if chunk and len("\n".join([*chunk, line])) > SECTION_TEXT_MAX:
            blocks.append(_section("\n".join(chunk)))
            chunk = []
        chunk.append(line)
    if chunk:
        blocks.append(_section("\n".join(chunk)))
    hidden = len(facts) - len(lines)
    if hidden > 0:
        blocks.append(_context(f"…and {hidden} more (list truncated)"))
    blocks.append(_context(_mrkdwn(f"Why {severity.value}: {why}.")))
    if len(blocks) > MAX_BLOCKS:  # only with absurd settings: keep the header, summary and the end
        blocks = [*blocks[: MAX_BLOCKS - 2], _context("…list truncated to fit Slack's 50 blocks"), blocks[-1]]
    return SlackMessage(text=_top_text(severity, headline), blocks=blocks)


def payload_size(message: SlackMessage) -> int:
    """Characters of the JSON payload (what Slack's ~12k-character message budget counts against)."""
    return len(json.dumps(message.payload(), ensure_ascii=False))
