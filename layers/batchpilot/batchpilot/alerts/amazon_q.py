"""The on-call topic's messages as Amazon Q Developer in chat applications custom notifications. Pure.

Amazon Q Developer in chat applications (formerly AWS Chatbot), subscribed to an SNS topic, posts
to Slack or Microsoft Teams only the messages it understands: AWS services' own notifications and
custom notifications, JSON in the schema of its administrator guide ("Custom notifications using
Amazon Q Developer in chat applications",
https://docs.aws.amazon.com/chatbot/latest/adminguide/custom-notifs.html); a plain-text message is
dropped. With ``OnCallMessageFormat=amazon-q`` every message the alerts function publishes to the
on-call topic is such a notification (:func:`custom_notification`)::

    {"version": "1.0", "source": "custom", "id": "...",
     "content": {"textType": "client-markdown", "title": "...", "description": "...",
                 "nextSteps": ["..."], "keywords": ["..."]},
     "metadata": {"threadId": "...", "summary": "...", "eventType": "...",
                  "relatedResources": ["arn:..."], "additionalContext": {"severity": "critical"}}}

Limits from that page, kept with a visible ``…[truncated]``: ``title`` 250 characters,
``description`` 8,000, each of ``nextSteps`` 350, each of ``keywords`` 75. ``client-markdown`` is
rendered in the chat platform's Markdown, so text from events (job names, reasons) is shown as code
(inside backticks, its own backticks removed) with ``&``, ``<`` and ``>`` escaped (Slack's
escaping rules), so an event cannot mention a channel, link or format the message. ``threadId`` is
the fact's thread (the job, or the alarm): Amazon Q Developer threads the updates of one job or
alarm when the channel's preferences allow it. ``additionalContext`` carries the SNS message
attributes (``severity``, ``job_queue``, ...), whose subject and attributes are unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from batchpilot.alerts.facts import AlertFact
from batchpilot.alerts.policy import Severity
from batchpilot.alerts.render import (
    TRUNCATION_MARK,
    console_links,
    facts_table,
    hint,
    plain,
    truncate,
)

__all__ = [
    "DESCRIPTION_MAX",
    "KEYWORD_MAX",
    "NEXT_STEP_MAX",
    "TITLE_MAX",
    "custom_notification",
]

TITLE_MAX = 250
"""Characters of ``content.title``."""
DESCRIPTION_MAX = 8000
"""Characters of ``content.description``."""
NEXT_STEP_MAX = 350
"""Characters of each ``content.nextSteps`` item."""
KEYWORD_MAX = 75
"""Characters of each ``content.keywords`` item."""
REASON_MAX = 3000
"""Characters of one fact's reason in a description."""
_DIGEST_LINES = 40
"""Jobs a digest's description lists by name; the rest are counted."""
_MARK = {Severity.CRITICAL: ":red_circle:", Severity.WARNING: ":large_orange_circle:"}


def _escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """Event text as inline code: one line, no backticks, escaped."""
    shown = _escaped(plain(text).replace("`", "'")) or " "
    return f"`{shown}`"


def _block(text: str) -> str:
    """Event text as a code block (line breaks kept), escaped."""
    body = _escaped(truncate(text.strip(), REASON_MAX).replace("`", "'"))
    return f"```\n{body}\n```"


def _fact_lines(fact: AlertFact) -> list[str]:
    lines = [f"*{label}:* {_code(value)}" for label, value in facts_table(fact)]
    lines.append(f"*ARN:* {_code(fact.subject)}")
    if fact.reason:
        lines += ["*Reason:*", _block(fact.reason)]
    return lines


def _links(fact: AlertFact) -> tuple[list[str], list[str]]:
    """``(next steps, description lines)``: each console link as a next step when it fits in
    :data:`NEXT_STEP_MAX`, else in the description (a cut URL would be a broken link)."""
    steps: list[str] = []
    lines: list[str] = []
    for label, url in console_links(fact):
        text = f"{label}: {url}"
        (steps if len(text) <= NEXT_STEP_MAX else lines).append(text)
    return steps, lines


def _keywords(facts: Sequence[AlertFact], severity: Severity) -> list[str]:
    first = facts[0]
    values = [
        severity.value,
        first.category.value if first.category else None,
        first.job_queue,
        first.share_identifier or first.quota_share,
        first.alarm.short_name if first.alarm else None,
        first.status,
    ]
    seen: list[str] = []
    for value in values:
        if value and plain(value) and truncate(plain(value), KEYWORD_MAX) not in seen:
            seen.append(truncate(plain(value), KEYWORD_MAX))
    return seen


def custom_notification(
    facts: Sequence[AlertFact],
    severity: Severity,
    why: str,
    headline: str,
    attributes: dict[str, str],
    notes: Sequence[str] = (),
) -> str:
    """One on-call message as Amazon Q Developer custom notification JSON (see the module docstring).

    Args:
        facts: the fact, or a burst's facts (a digest: one line per job).
        severity: their severity.
        why: the sentence saying which rule decided.
        headline: the message's headline (:func:`batchpilot.alerts.render.title` or
            :func:`~batchpilot.alerts.render.group_headline`).
        attributes: the SNS message attributes (copied to ``metadata.additionalContext``).
        notes: lines said first (why this message stands in for a chat channel).
    """
    first = facts[0]
    mark = _MARK.get(severity, ":large_blue_circle:")
    lines = [_escaped(plain(note)) for note in notes if plain(note)]
    steps: list[str] = []
    if len(facts) == 1:
        lines += _fact_lines(first)
        advice = hint(first)
        steps += [truncate(advice, NEXT_STEP_MAX)] if advice else []
        link_steps, link_lines = _links(first)
        steps += link_steps
        lines += link_lines
    else:
        for fact in facts[:_DIGEST_LINES]:
            reason = plain(fact.reason or "")
            name = fact.job_name or (fact.alarm.name if fact.alarm else fact.subject)
            because = f": {_code(truncate(reason, 200))}" if reason else ""
            lines.append(f"• {_code(name)} {fact.status or ''}{because}")
        if len(facts) > _DIGEST_LINES:
            lines.append(f"…and {len(facts) - _DIGEST_LINES} more")
    event = f"{first.detail_type} at {first.event_time.isoformat()}"
    lines += ["", _escaped(f"Why {severity.value}: {why}."), _escaped(event)]
    resources = [first.subject, *(f.subject for f in facts[1:20])]
    if first.training_job_arn and first.training_job_arn not in resources:
        resources.append(first.training_job_arn)
    resources += [arn for arn in first.related_subjects if arn not in resources]
    message = {
        "version": "1.0",
        "source": "custom",
        "id": truncate(f"{first.subject}#{first.fact_id}", 256, ""),
        "content": {
            "textType": "client-markdown",
            "title": truncate(f"{mark} {severity.value.upper()}: {_escaped(plain(headline))}", TITLE_MAX),
            "description": truncate("\n".join(lines), DESCRIPTION_MAX, TRUNCATION_MARK),
            **({"nextSteps": steps} if steps else {}),
            "keywords": _keywords(facts, severity),
        },
        "metadata": {
            "threadId": first.thread_subject or first.subject,
            "summary": truncate(f"{severity.value.upper()}: {plain(headline)}", TITLE_MAX),
            "eventType": first.detail_type,
            "relatedResources": resources,
            "additionalContext": dict(attributes),
        },
    }
    return json.dumps(message, ensure_ascii=False)
