"""The on-call topic's SNS messages: one fact (:func:`sns_message`) or a burst (:func:`sns_digest`),
plain text or Amazon Q Developer's custom notification (:mod:`batchpilot.alerts.amazon_q`), built
from :mod:`batchpilot.alerts.render`'s pieces. Pure.

SNS limits honoured (Amazon SNS ``Publish`` API reference): the subject through
:func:`~batchpilot.alerts.render.sanitize_subject`; long reasons truncated with a visible mark.
This module sits above both :mod:`~batchpilot.alerts.render` and :mod:`~batchpilot.alerts.amazon_q`
(which reads render's helpers), so neither imports the other's caller.
"""

from __future__ import annotations

from collections.abc import Sequence

from batchpilot.alerts.amazon_q import custom_notification
from batchpilot.alerts.facts import AlertFact
from batchpilot.alerts.policy import Channel, Severity
from batchpilot.alerts.render import (
    ASCII_TRUNCATION_MARK,
    SNS_BODY_MAX_BYTES,
    SNS_REASON_MAX,
    SNS_SUBJECT_MAX,
    TRUNCATION_MARK,
    OnCallFormat,
    SnsMessage,
    console_links,
    digest_headline,
    facts_table,
    fit_bytes,
    group_headline,
    headline,
    plain,
    sanitize_subject,
    title,
    truncate,
)

__all__ = ["Fallback", "sns_digest", "sns_message"]

Fallback = Sequence[tuple[Channel, str]]
"""``[(chat channel, reason)]``: why a message stands in for chat messages that were not delivered."""


def _attributes(
    severity: Severity, fact: AlertFact | None, fallback: Fallback, **extra: str | None
) -> dict[str, str]:
    values: dict[str, str | None] = {"severity": severity.value}
    if fact is not None:
        values |= {
            "job_queue": fact.job_queue,
            "category": fact.category.value if fact.category else None,
            "event_kind": fact.event_kind.value,
            "share_identifier": fact.share_identifier,
            "priority": str(fact.priority) if fact.priority is not None else None,
            "alarm_name": fact.alarm.name if fact.alarm else None,
        }
    values["fallback_from"] = ",".join(channel.value for channel, _ in fallback) or None
    values |= extra
    return {k: v for k, v in values.items() if v}


def _fallback_lines(fallback: Fallback) -> list[str]:
    if not fallback:
        return []
    return [
        *(f"(Sent here because {channel.label} delivery failed: {reason}.)" for channel, reason in fallback),
        "",
    ]


def sns_message(
    fact: AlertFact,
    severity: Severity,
    why: str,
    *,
    fallback: Fallback = (),
    body_format: OnCallFormat = OnCallFormat.TEXT,
) -> SnsMessage:
    """The on-call topic message for one fact.

    Args:
        fact: the fact.
        severity: its decided severity.
        why: the sentence saying which rule decided.
        fallback: set when the message goes to SNS because chat channels failed (``[(slack,
            "rate_limited")]``): the body says so and ``fallback_from=slack`` (channels
            comma-separated) is added.
        body_format: plain text, or Amazon Q Developer's custom notification JSON
            (:func:`batchpilot.alerts.amazon_q.custom_notification`); subject and attributes
            are the same.
    """
    lines = [f"{severity.value.upper()}: {plain(title(fact))}", "", *_fallback_lines(fallback)]
    table = facts_table(fact)
    width = max((len(label) for label, _ in table), default=0)
    width = max(width, len("Training job")) + 2
    for label, value in table:
        lines.append(f"{label + ':':<{width}}{plain(value)}")
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
    attributes = _attributes(severity, fact, fallback)
    body = fit_bytes("\n".join(lines), SNS_BODY_MAX_BYTES)
    if body_format is OnCallFormat.AMAZON_Q:
        body = custom_notification([fact], severity, why, title(fact), attributes, _fallback_lines(fallback))
    prefix = f"[{severity.value.upper()}] "
    short = headline(fact, SNS_SUBJECT_MAX - len(prefix), ASCII_TRUNCATION_MARK)
    return SnsMessage(subject=sanitize_subject(prefix + short), body=body, attributes=attributes)


def sns_digest(
    facts: Sequence[AlertFact],
    severity: Severity,
    why: str,
    *,
    fallback: Fallback = (),
    body_format: OnCallFormat = OnCallFormat.TEXT,
    total: int | None = None,
) -> SnsMessage:
    """One on-call message for a burst (same job queue, category and severity), listing every job
    (up to 500 lines; the rest counted). ``fallback`` and ``body_format``: as for
    :func:`sns_message`; ``total``: facts it stands for when more than it lists (an incident's
    summary)."""
    count = max(total or 0, len(facts))
    headline = group_headline(facts, total)
    lines = [f"{severity.value.upper()}: {plain(headline)}", "", *_fallback_lines(fallback)]
    shown = list(facts)[:500]
    for fact in shown:
        reason = truncate(plain(fact.reason or ""), 300, ASCII_TRUNCATION_MARK)
        lines.append(f"- {fact.job_name or fact.subject} [{fact.status}] {reason}".rstrip())
        lines.append(f"  {fact.subject}")
    if count > len(shown):
        lines.append(f"... and {count - len(shown)} more")
    lines += ["", f"Why {severity.value}: {why}.", "-- batchpilot alerts"]
    attributes = _attributes(severity, facts[0], fallback, group_size=str(count))
    body = fit_bytes("\n".join(lines), SNS_BODY_MAX_BYTES)
    if body_format is OnCallFormat.AMAZON_Q:
        notes = _fallback_lines(fallback)
        body = custom_notification(list(facts), severity, why, headline, attributes, notes)
    prefix = f"[{severity.value.upper()}] "
    short = digest_headline(facts, SNS_SUBJECT_MAX - len(prefix), ASCII_TRUNCATION_MARK, total)
    return SnsMessage(subject=sanitize_subject(prefix + short), body=body, attributes=attributes)
