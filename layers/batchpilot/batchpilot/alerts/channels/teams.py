"""Microsoft Teams: Adaptive Cards posted to an incoming webhook created with Teams Workflows.

Setup (Microsoft: "Create incoming webhooks with Workflows for Microsoft Teams",
https://support.microsoft.com/office/create-incoming-webhooks-with-workflows-for-microsoft-teams-8ae491c7-0394-4861-ba59-055e33f75498):
in the channel, Workflows → "Post to a channel when a webhook request is received"; the workflow's
trigger ("When a Teams webhook request is received") gives an HTTPS URL whose ``sig`` query
parameter is its credential. That URL lives in AWS Secrets Manager (plain text, or JSON
``{"url": "..."}``), read through :class:`batchpilot.io.secrets.SecretSource`; it is never logged
(urllib3's request lines, which print the path and query at DEBUG, are held at INFO), and a failed
request is reported by its kind only (``timeout``, ``connection_error``, ``http_<status>``).

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
``TextBlock`` s carry only batchpilot's own words.

Delivery rules, the same as Slack's (:mod:`batchpilot.alerts.channels`): the Workflows trigger
accepts a request with 202 Accepted and runs the flow after answering, so any 2xx counts as
delivered and nothing else does; 429 honours ``Retry-After`` while it fits in the time left (at
most 3 times); every other answer, a timeout or a refused connection fails at once and the service
falls back to the on-call topic. HTTP goes through urllib3 (already in the layer: botocore depends
on it), imported on the first post; the 429 retries are urllib3's own ``Retry``
(``status_forcelist``, ``respect_retry_after_header``), bounded by the time left
(:func:`_deadline_policy`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from batchpilot.alerts.channels import (
    MAX_RATE_LIMIT_RETRIES,
    MIN_REQUEST_SECONDS,
    REQUEST_TIMEOUT_SECONDS,
    request_timeout,
    safe_url,
    secret_field,
)
from batchpilot.alerts.facts import AlertFact
from batchpilot.alerts.policy import Channel, Severity
from batchpilot.alerts.ports import Delivery, Notice, SecretReader, TimeLeft
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
from batchpilot.io.secrets import protect_secret_logs

if TYPE_CHECKING:
    from urllib3 import Timeout
    from urllib3.util.retry import Retry

    from batchpilot.alerts.settings import AlertsSettings

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
CONNECT_TIMEOUT_SECONDS = 5.0
"""Longest wait for the TCP and TLS connection of one request."""
BACKOFF_FACTOR = 0.5
"""urllib3 ``Retry.backoff_factor`` for a 429 without ``Retry-After``: waits 0, 1, 2 seconds."""
BACKOFF_MAX_SECONDS = 4.0
"""urllib3 ``Retry.backoff_max``: the longest backoff between two attempts."""
RETRY_AFTER_MAX_SECONDS = 900
"""urllib3 ``Retry.retry_after_max``: a ``Retry-After`` is read as at most Lambda's longest
timeout; a wait is taken only when it also fits in the time left."""

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


def _card(text: str, body: list[dict[str, Any]], actions: list[dict[str, Any]]) -> dict[str, Any]:
    card: dict[str, Any] = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": CARD_VERSION,
        "fallbackText": markdown_escaped(card_text(text)),
        "msteams": {"width": "Full"},
        "body": body,
    }
    if actions:
        card["actions"] = actions
    return card


def _fits(message: TeamsMessage) -> bool:
    return len(message.body()) <= MAX_PAYLOAD_BYTES


def _single(fact: AlertFact, severity: Severity, why: str, reason_max: int) -> TeamsMessage:
    body = _header(severity, headline(fact, TITLE_MAX))
    for label, value in facts_table(fact):
        body.append(_rich(_run(f"{label}: ", weight="Bolder"), _run(truncate(plain(value), VALUE_MAX))))
    if fact.reason and reason_max > 0:
        body.append(_rich(_run("Reason", weight="Bolder"), separator=True))
        body.append(_rich(_run(truncate(fact.reason.strip(), reason_max))))
    event = f"{fact.detail_type} at {fact.event_time.isoformat()}"
    body.append(_why(severity, why, event))
    actions = [{"type": "Action.OpenUrl", "title": label, "url": url} for label, url in console_links(fact)]
    text = top_text(severity, title(fact))
    return TeamsMessage(text=text, card=_card(text, body, actions))


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
def _exception_reason(exc: BaseException) -> str:
    from urllib3.exceptions import MaxRetryError, NewConnectionError, ProtocolError
    from urllib3.exceptions import TimeoutError as Urllib3Timeout

    if isinstance(exc, MaxRetryError) and exc.reason is not None:  # an error retries=other=0 wrapped
        exc = exc.reason
    # NewConnectionError subclasses ConnectTimeoutError: test it first.
    if isinstance(exc, NewConnectionError | ProtocolError | ConnectionError):
        return "connection_error"
    if isinstance(exc, Urllib3Timeout | TimeoutError):
        return "timeout"
    return "client_error"


def _deadline_policy(
    time_left: TimeLeft, pause: Callable[[float], None], cap: float
) -> tuple[Retry, Timeout]:
    """urllib3's ``Retry`` and ``Timeout`` for one webhook post, bounded by ``time_left()``.

    The retry (urllib3 ``Retry``: ``status_forcelist={429}``, ``allowed_methods={"POST"}``,
    ``respect_retry_after_header``) repeats a 429 at most :data:`MAX_RATE_LIMIT_RETRIES` times,
    waiting ``Retry-After`` seconds (or, without the header, urllib3's exponential backoff:
    :data:`BACKOFF_FACTOR`, at most :data:`BACKOFF_MAX_SECONDS`) through ``pause``; it gives up at
    once (the 429 is the answer) when that wait plus :data:`MIN_REQUEST_SECONDS` does not fit in
    ``time_left()``, so a post never sleeps past the invocation's budget. Anything else is final:
    another status is returned as is, and a timeout or a dropped connection raises (``connect``,
    ``read`` off; ``other`` errors come wrapped in ``MaxRetryError``), since the workflow may have
    run already. The timeout is recomputed for every attempt (``clone``, which urllib3 calls per
    request): at most ``cap`` seconds (connect at most :data:`CONNECT_TIMEOUT_SECONDS`) and never
    past the time then left.

    Returns:
        ``(retries, timeout)`` for ``PoolManager.request``.
    """
    from urllib3 import BaseHTTPResponse
    from urllib3 import Timeout as _Timeout
    from urllib3.exceptions import InvalidHeader, MaxRetryError, ResponseError
    from urllib3.util.retry import Retry as _Retry

    class DeadlineRetry(_Retry):
        def get_retry_after(self, response: BaseHTTPResponse) -> float | None:
            try:
                return super().get_retry_after(response)
            except InvalidHeader:  # neither delay-seconds nor an HTTP-date: back off instead
                return None

        def wait(self, response: BaseHTTPResponse | None) -> float:
            """Seconds :meth:`sleep` waits: Retry-After when given and non-zero, else the backoff."""
            after = self.get_retry_after(response) if response is not None else None
            return after if after and self.respect_retry_after_header else self.get_backoff_time()

        def increment(
            self,
            method: str | None = None,
            url: str | None = None,
            response: BaseHTTPResponse | None = None,
            error: Exception | None = None,
            _pool: Any = None,
            _stacktrace: Any = None,
        ) -> DeadlineRetry:
            retry = super().increment(method, url, response, error, _pool, _stacktrace)
            if response is not None and retry.wait(response) + MIN_REQUEST_SECONDS >= time_left():
                # Exhausted early: with raise_on_status=False urllib3 returns this 429.
                raise MaxRetryError(_pool, url, ResponseError("Retry-After does not fit in the time left"))
            return retry

        def sleep(self, response: BaseHTTPResponse | None = None) -> None:
            seconds = self.wait(response)
            if seconds > 0:
                pause(seconds)

    class DeadlineTimeout(_Timeout):
        def clone(self) -> _Timeout:
            seconds = float(request_timeout(time_left, cap))
            connect = min(CONNECT_TIMEOUT_SECONDS, seconds)
            return _Timeout(total=seconds, connect=connect, read=seconds)

    retries = DeadlineRetry(
        total=MAX_RATE_LIMIT_RETRIES,
        status=MAX_RATE_LIMIT_RETRIES,
        connect=False,
        read=False,
        other=0,
        redirect=False,
        status_forcelist=frozenset({429}),
        allowed_methods=frozenset({"POST"}),
        respect_retry_after_header=True,
        backoff_factor=BACKOFF_FACTOR,
        backoff_max=BACKOFF_MAX_SECONDS,
        retry_after_max=RETRY_AFTER_MAX_SECONDS,
        raise_on_status=False,
    )
    return retries, DeadlineTimeout(total=cap)


class TeamsNotifier:
    """The Microsoft Teams channel (:class:`batchpilot.alerts.ports.Notifier` of
    :class:`TeamsMessage`), through a Workflows webhook. Workflows webhooks cannot reply in a
    thread, so messages are never threaded.

    Args:
        secrets: where the webhook URL is read.
        webhook_secret: secret id (ARN or name) of the Workflows webhook URL.
        sleep: how to wait out a 429 (``time.sleep``).
        timeout: seconds to wait for an answer (less when the invocation has less time left).

    Raises:
        ValueError: no webhook secret.
    """

    def __init__(
        self,
        secrets: SecretReader,
        *,
        webhook_secret: str,
        sleep: Callable[[float], None] = time.sleep,
        timeout: float = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        if not webhook_secret:
            raise ValueError("Teams needs the secret of its Workflows webhook URL")
        self._secrets = secrets
        self.webhook_secret = webhook_secret
        self._sleep = sleep
        self._timeout = timeout
        self._pool: Any = None  # urllib3.PoolManager, made on the first post (keeps connections)

    @classmethod
    def configured(cls, settings: AlertsSettings, secrets: SecretReader | None) -> TeamsNotifier | None:
        """The notifier the function's settings configure, or None without a Teams webhook."""
        if secrets is None or not settings.teams_webhook_secret:
            return None
        return cls(secrets, webhook_secret=settings.teams_webhook_secret)

    @property
    def name(self) -> Channel:
        """:attr:`Channel.TEAMS`."""
        return Channel.TEAMS

    @property
    def threads(self) -> bool:
        """False: a Workflows webhook posts new messages only."""
        return False

    def render(self, notice: Notice) -> TeamsMessage:
        """One fact's card, or a burst's digest (:func:`teams_message`, :func:`teams_digest`)."""
        if notice.digest:
            return teams_digest(list(notice.facts), notice.severity, notice.why, notice.max_items)
        return teams_message(notice.facts[0], notice.severity, notice.why)

    def post(self, message: TeamsMessage, *, thread: str | None, time_left: TimeLeft) -> Delivery:
        """POST the card to the webhook; never raises (``thread`` is ignored: see :attr:`threads`)."""
        try:
            secret = self._secrets.get(self.webhook_secret)
        except Exception:  # GetParameterError (AccessDenied, ResourceNotFound, throttled)
            return Delivery(False, "secret_unavailable")
        url = secret_field(secret, "url")
        if not url:
            return Delivery(False, "secret_unavailable")
        if not safe_url(url):
            return Delivery(False, "secret_invalid")
        try:
            return self._send(url, message.body(), time_left)
        except Exception as exc:  # a timeout or a refused connection: may or may not have posted
            return Delivery(False, _exception_reason(exc))

    def _send(self, url: str, body: bytes, time_left: TimeLeft) -> Delivery:
        import urllib3

        protect_secret_logs()
        if time_left() < MIN_REQUEST_SECONDS:
            return Delivery(False, "deadline")
        if self._pool is None:
            self._pool = urllib3.PoolManager(num_pools=2, maxsize=1)
        retries, timeout = _deadline_policy(time_left, self._sleep, self._timeout)
        response = self._pool.request(
            "POST",
            url,
            body=body,
            headers={"Content-Type": "application/json; charset=utf-8"},
            timeout=timeout,
            retries=retries,
            redirect=False,
        )
        status = int(response.status)
        if 200 <= status < 300:
            return Delivery(True)
        if status == 429:  # still limited after the retries, or the wait did not fit in the time left
            return Delivery(False, "rate_limited")
        return Delivery(False, f"http_{status}")
