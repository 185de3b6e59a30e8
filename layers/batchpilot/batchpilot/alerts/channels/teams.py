"""Microsoft Teams: Adaptive Cards posted to an incoming webhook created with Teams Workflows.

Setup (Microsoft: "Create incoming webhooks with Workflows for Microsoft Teams",
https://support.microsoft.com/office/create-incoming-webhooks-with-workflows-for-microsoft-teams-8ae491c7-0394-4861-ba59-055e33f75498):
in the channel, Workflows → "Post to a channel when a webhook request is received"; the workflow's
trigger ("When a Teams webhook request is received") gives an HTTPS URL whose ``sig`` query
parameter is its credential. That URL lives in AWS Secrets Manager (plain text, or JSON
``{"url": "..."}``), read through :class:`batchpilot.io.secrets.SecretSource`; it is never logged
(the shared transport holds urllib3's request lines at INFO), and a failed request is reported by
its kind only (``timeout``, ``connection_error``, ``http_<status>``).

Message (Microsoft Teams platform, "Send Adaptive Cards using an Incoming Webhook",
https://learn.microsoft.com/microsoftteams/platform/webhooks-and-connectors/how-to/connectors-using#send-adaptive-cards-using-an-incoming-webhook):
``{"type": "message", "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive",
"content": <AdaptiveCard 1.4>}]}``. Workflows post Adaptive Cards only (not the older message
cards). A message may be at most 28 KB and a webhook takes a few requests per second before it
answers 429 ("Create Incoming Webhooks", limits:
https://learn.microsoft.com/microsoftteams/platform/webhooks-and-connectors/how-to/add-incoming-webhook):
cards are kept below :data:`MAX_PAYLOAD_BYTES`.

Escaping: Teams renders Markdown in ``TextBlock`` and ``FactSet`` text and no HTML ("Format cards
in Teams": https://learn.microsoft.com/microsoftteams/platform/task-modules-and-cards/cards/cards-format);
``TextRun`` text is never Markdown (Adaptive Cards schema, TextRun:
https://learn.microsoft.com/adaptive-cards/schema-explorer/text-run). So every value that comes
from an event (names, reasons, queues) is a ``TextRun`` of a ``RichTextBlock``, with control
characters removed and ``{{`` broken (the card's ``{{DATE()}}``/``{{TIME()}}`` functions);
``TextBlock`` s carry only batchpilot's own words, and an owner's mention.

Owner mentions (:mod:`batchpilot.alerts.owners`): a single fact that mentions its owner (an e-mail
address, which Teams takes as the user's UPN) shows its ``Owner`` line as a ``TextBlock``
``Owner: <at>address</at>`` with the card's ``msteams.entities`` entry ``{"type": "mention",
"text": "<at>address</at>", "mentioned": {"id": address, "name": address}}`` ("Format cards in
Microsoft Teams", mention support within Adaptive Cards:
https://learn.microsoft.com/microsoftteams/platform/task-modules-and-cards/cards/cards-format#mention-support-within-adaptive-cards).
Mentions need a ``TextBlock`` (a ``TextRun`` cannot hold one); the address is safe there: an
owner's e-mail address has no Markdown or tag character (:func:`batchpilot.alerts.owners.is_email`).
No lookup is needed, so nothing but a non-e-mail tag keeps a Teams card from mentioning its owner.

Delivery rules, the same as Slack's (:mod:`batchpilot.alerts.channels`): the Workflows trigger
accepts a request with 202 Accepted and runs the flow after answering, so any 2xx counts as
delivered and nothing else does; 429 honours ``Retry-After`` while it fits in the time left (at
most 3 times); every other answer, a timeout or a refused connection fails at once and the service
falls back to the on-call topic. HTTP goes through the shared webhook transport
(:mod:`batchpilot.io.webhook`: urllib3, imported on the first post; the 429 retries are urllib3's
own ``Retry``, bounded by the time left).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from batchpilot.alerts.channels import RenderLimits, register_channel
from batchpilot.alerts.channels.webhook import WebhookNotifier
from batchpilot.alerts.facts import AlertFact
from batchpilot.alerts.policy import Channel, Severity
from batchpilot.alerts.ports import Notice
from batchpilot.alerts.render import (
    DIGEST_REASON_MAX,
    EMOJI,
    console_links,
    digest_headline,
    facts_table,
    group_headline,
    headline,
    plain,
    subject_name,
    title,
    top_text,
    truncate,
)

__all__ = [
    "ADAPTIVE_CARD",
    "CARD_VERSION",
    "MAX_PAYLOAD_BYTES",
    "TITLE_MAX",
    "TeamsMessage",
    "TeamsNotifier",
    "card_text",
    "markdown_escaped",
    "teams_digest",
    "teams_message",
]

ADAPTIVE_CARD = "application/vnd.microsoft.card.adaptive"
"""The attachment ``contentType`` of an Adaptive Card."""
CARD_VERSION = "1.4"
"""Adaptive Card schema version: ``RichTextBlock``/``TextRun`` (1.2) and ``Action.OpenUrl`` are in it."""
MAX_PAYLOAD_BYTES = 24_000
"""Largest request body sent, in UTF-8 bytes: below Teams' 28 KB message limit, with room for the
envelope the workflow adds."""
REASON_MAX = 2000
"""Characters of a reason shown in one card (shortened further if the card would be too large)."""
VALUE_MAX = 500
"""Characters of one fact value (a job name, a queue)."""
TITLE_MAX = 150
"""Characters of the card's title (:func:`~batchpilot.alerts.render.headline`, made to fit). Adaptive
Cards set no limit; 150, Slack's header limit, keeps it to one line on a desktop and two on a phone,
with the rest of the title's facts in the card's fact lines."""

_COLOR = {
    Severity.CRITICAL: "Attention",
    Severity.WARNING: "Warning",
    Severity.INFO: "Accent",
    Severity.SILENT: "Default",
}
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


# ------------------------------------------------------------------------------------- render
@dataclass(frozen=True, slots=True)
class TeamsMessage:
    """A Teams message: ``text`` (the one-line summary, also the card's ``fallbackText``) and the
    Adaptive Card ``card`` (the attachment's ``content``)."""

    text: str
    card: dict[str, Any]

    def payload(self) -> dict[str, Any]:
        """The request body the Workflows webhook receives."""
        return {
            "type": "message",
            "attachments": [{"contentType": ADAPTIVE_CARD, "contentUrl": None, "content": self.card}],
        }

    def body(self) -> bytes:
        """:meth:`payload` as UTF-8 JSON."""
        return json.dumps(self.payload(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def summary(self) -> str:
        """The card's ``fallbackText`` (:attr:`text`, Markdown-escaped)."""
        return str(self.card.get("fallbackText", ""))

    def headline(self) -> str:
        """The card's title (its second body element, the first after the severity line)."""
        title_block = self.card["body"][1]
        return "".join(str(run.get("text", "")) for run in title_block.get("inlines", []))


def card_text(text: str) -> str:
    """Event text as it may stand in a ``TextRun``: control characters (but line breaks) removed,
    and ``{{`` broken with a zero-width space so no card function (``{{DATE(...)}}``) runs."""
    return _CONTROL.sub(" ", text).replace("{{", "{\u200b{").replace("}}", "}\u200b}")


_MARKDOWN = re.compile(r"([\\\[\]<>])")


def markdown_escaped(text: str) -> str:
    """``text`` with the characters of Markdown links and of tags backslash-escaped (``\\ [ ] < >``):
    for ``fallbackText``, which Teams may render as Markdown (Adaptive Cards schema,
    AdaptiveCard.fallbackText), so a job name such as ``[x](https://evil)`` or ``<at>all</at>``
    stays text. Emphasis characters are left alone: they cannot link or mention."""
    return _MARKDOWN.sub(r"\\\1", text)


def _run(text: str, **style: Any) -> dict[str, Any]:
    return {"type": "TextRun", "text": card_text(text), **style}


def _rich(*inlines: dict[str, Any], **style: Any) -> dict[str, Any]:
    return {"type": "RichTextBlock", "inlines": list(inlines), **style}


def _header(severity: Severity, headline: str) -> list[dict[str, Any]]:
    """The severity line, then the title (``headline``, already at most :data:`TITLE_MAX`)."""
    return [
        {
            "type": "TextBlock",
            "text": f"{EMOJI[severity]} {severity.value.upper()}",
            "weight": "Bolder",
            "color": _COLOR[severity],
            "wrap": True,
        },
        _rich(_run(truncate(plain(headline), TITLE_MAX), weight="Bolder", size="Medium")),
    ]


def _why(severity: Severity, why: str, event: str | None = None) -> dict[str, Any]:
    text = f"Why {severity.value}: {why}." + (f" {event}" if event else "")
    return _rich(_run(truncate(plain(text), VALUE_MAX), isSubtle=True, size="Small"), separator=True)


def _mention(email: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``Owner`` line mentioning ``email`` and its ``msteams.entities`` entry."""
    tag = f"<at>{email}</at>"
    line = {"type": "TextBlock", "text": f"**Owner:** {tag}", "wrap": True, "spacing": "None"}
    return line, {"type": "mention", "text": tag, "mentioned": {"id": email, "name": email}}


def _card(
    text: str,
    body: list[dict[str, Any]],
    actions: list[dict[str, Any]],
    entities: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    card: dict[str, Any] = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": CARD_VERSION,
        "fallbackText": markdown_escaped(card_text(text)),
        "msteams": {"width": "Full", **({"entities": entities} if entities else {})},
        "body": body,
    }
    if actions:
        card["actions"] = actions
    return card


def _fits(message: TeamsMessage) -> bool:
    return len(message.body()) <= MAX_PAYLOAD_BYTES


def _single(fact: AlertFact, severity: Severity, why: str, reason_max: int) -> TeamsMessage:
    body = _header(severity, headline(fact, TITLE_MAX))
    owner = fact.owner
    mention = owner.email if owner is not None and owner.mention else None
    entities: list[dict[str, Any]] = []
    for label, value in facts_table(fact):
        if label == "Owner" and mention is not None:
            line, entity = _mention(mention)
            body.append(line)
            entities.append(entity)
            continue
        body.append(_rich(_run(f"{label}: ", weight="Bolder"), _run(truncate(plain(value), VALUE_MAX))))
    if fact.reason and reason_max > 0:
        body.append(_rich(_run("Reason", weight="Bolder"), separator=True))
        body.append(_rich(_run(truncate(fact.reason.strip(), reason_max))))
    event = f"{fact.detail_type} at {fact.event_time.isoformat()}"
    body.append(_why(severity, why, event))
    actions = [{"type": "Action.OpenUrl", "title": label, "url": url} for label, url in console_links(fact)]
    text = top_text(severity, title(fact))
    return TeamsMessage(text=text, card=_card(text, body, actions, entities))


def teams_message(fact: AlertFact, severity: Severity, why: str) -> TeamsMessage:
    """The Adaptive Card for one fact: the severity, the headline (at most :data:`TITLE_MAX`
    characters; the whole title is the card's ``fallbackText``), the facts one per line, the
    reason, why this severity, and console links as ``Action.OpenUrl`` buttons. Within
    :data:`MAX_PAYLOAD_BYTES` (the reason is shortened, then left out, when needed)."""
    message = _single(fact, severity, why, REASON_MAX)
    for reason_max in (500, 0):
        if _fits(message):
            break
        message = _single(fact, severity, why, reason_max)
    return message


def _digest(facts: list[AlertFact], severity: Severity, why: str, shown: int) -> TeamsMessage:
    first = facts[0]
    body = _header(severity, digest_headline(facts, TITLE_MAX))
    category = first.category.value if first.category else "-"
    if all(f.alarm for f in facts):
        said = (
            f"{len(facts)} alarms went to {first.status} in one batch of events (severity {severity.value})."
        )
        body.append(_rich(_run(said), separator=True))
    else:
        body.append(
            _rich(
                _run(f"{len(facts)} jobs in one batch of events share job queue "),
                _run(truncate(plain(first.job_queue or "-"), VALUE_MAX), weight="Bolder"),
                _run(f", category {category} and severity {severity.value}."),
                separator=True,
            )
        )
    for fact in facts[:shown]:
        links = console_links(fact)
        name = truncate(plain(fact.job_name or subject_name(fact)), 200)
        link = {"selectAction": {"type": "Action.OpenUrl", "url": links[0][1]}} if links else {}
        attempt = f", attempt {fact.attempts}" if fact.attempts else ""
        reason = truncate(plain(fact.reason or ""), DIGEST_REASON_MAX)
        status = f" {plain(fact.status)}" if fact.status else ""
        body.append(
            _rich(
                _run("• "),
                _run(name, weight="Bolder", **link),
                _run(f"{status}{attempt}" + (f": {reason}" if reason else "")),
            )
        )
    hidden = len(facts) - min(shown, len(facts))
    if hidden > 0:
        body.append(_rich(_run(f"…and {hidden} more (list truncated)", isSubtle=True)))
    body.append(_why(severity, why))
    text = top_text(severity, group_headline(facts))
    return TeamsMessage(text=text, card=_card(text, body, []))


def teams_digest(facts: list[AlertFact], severity: Severity, why: str, max_items: int = 20) -> TeamsMessage:
    """One Adaptive Card for a burst: the severity, the headline, a summary, one line per job for
    the first ``max_items`` jobs (each name opens its console page), then "…and N more". Fewer
    jobs are listed when the card would exceed :data:`MAX_PAYLOAD_BYTES`."""
    shown = max_items
    message = _digest(facts, severity, why, shown)
    while not _fits(message) and shown > 0:
        shown //= 2
        message = _digest(facts, severity, why, shown)
    return message


# --------------------------------------------------------------------------------------- post
@register_channel(
    Channel.TEAMS,
    limits=RenderLimits(headline=TITLE_MAX, body=MAX_PAYLOAD_BYTES),
    escape=lambda text: markdown_escaped(card_text(text)),
    accepted=(202, ""),
)
class TeamsNotifier(WebhookNotifier[TeamsMessage]):
    """The Microsoft Teams channel (:class:`batchpilot.alerts.ports.Notifier` of
    :class:`TeamsMessage`), through a Workflows webhook and the shared webhook transport
    (:class:`~batchpilot.alerts.channels.webhook.WebhookNotifier`). Workflows webhooks cannot reply
    in a thread, so messages are never threaded.

    Args:
        secrets: where the webhook URL is read.
        webhook_secret: secret id (ARN or name) of the Workflows webhook URL.
        sleep: how to wait out a 429 (``time.sleep``).
        timeout: seconds to wait for an answer (less when the invocation has less time left).

    Raises:
        ValueError: no webhook secret.
    """

    channel = Channel.TEAMS

    def render(self, notice: Notice) -> TeamsMessage:
        """One fact's card, or a burst's digest (:func:`teams_message`, :func:`teams_digest`)."""
        if notice.digest:
            return teams_digest(list(notice.facts), notice.severity, notice.why, notice.max_items)
        return teams_message(notice.facts[0], notice.severity, notice.why)
