"""Slack: Block Kit messages, posted through slack-sdk with an incoming webhook (``WebhookClient``)
or a bot token (``WebClient.chat_postMessage``, threaded per job). Never hand-written HTTP.

slack-sdk is imported on the first post, never with this module: a deployment without Slack never
loads it.

Rendering (Slack Block Kit reference, https://api.slack.com/reference/block-kit/blocks): header
text at most 150 characters (the severity, then :func:`~batchpilot.alerts.render.headline` made to
fit: what happened and to which job, the rest in the fields below it), section text at most
3,000, each section field at most 2,000 and at most 10 fields per section, at most 50 blocks,
always a top-level ``text`` with the whole title (notifications and
screen readers use it); event text is escaped for mrkdwn everywhere, the top-level ``text`` included
(Slack parses it as mrkdwn too: an unescaped ``<!channel>``, ``<@U…>`` or ``<http://…|x>`` in a job
name would notify or link) (``&``, ``<``, ``>``:
https://api.slack.com/reference/surfaces/formatting#escaping). Every cut is marked visibly
(``…[truncated]``).

Secrets: the webhook URL and the bot token live in AWS Secrets Manager
(:class:`batchpilot.io.secrets.SecretSource`); the environment only names the secret. Neither value
is ever logged: slack-sdk's own logger is given a logger that drops everything (its DEBUG lines
print the URL and the ``Authorization`` header). The webhook secret holds the URL as plain text, or
JSON ``{"url": "..."}``; the bot token secret the token (``xoxb-...``) or JSON ``{"token": "..."}``.

Delivery rules (https://api.slack.com/messaging/webhooks#handling_errors,
https://api.slack.com/methods/chat.postMessage, https://api.slack.com/apis/rate-limits):

- delivered means HTTP 200 with body ``ok`` (webhook) or ``{"ok": true}`` (``chat.postMessage``);
- 429: wait ``Retry-After`` seconds and try again, only while the wait fits in the time left, at
  most :data:`~batchpilot.alerts.channels.MAX_RATE_LIMIT_RETRIES` times; then the post has failed
  with reason ``rate_limited``;
- every other answer (400 ``invalid_blocks``, 403 ``action_prohibited``, 404 ``no_service`` /
  ``channel_not_found``, 410 ``channel_is_archived``, 5xx, a timeout, a refused connection) fails
  at once, without a retry.

Owner mentions (:mod:`batchpilot.alerts.owners`): a single-fact message whose fact mentions its
owner (``Owner.mention``, an e-mail address) mentions them as ``<@U123>`` in its ``Owner`` field
and its top-level ``text``, after ``users.lookupByEmail``
(https://api.slack.com/methods/users.lookupByEmail: bot token, scope ``users:read.email``; Web API
Tier 3). Ids are cached per function instance (:class:`SlackUsers`: an hour; an unknown address
too; a failed lookup a minute), so one lookup serves every message about that owner in the
container's life. The lookup gets half the time left, at most :data:`LOOKUP_TIMEOUT_SECONDS`, no
retry; whatever goes wrong (webhook mode has no token, ``users_not_found``, ``ratelimited``,
``missing_scope``, a timeout), the message goes without the mention and
:attr:`~batchpilot.alerts.ports.Delivery.owner_problem` says why. With ``direct_message`` (template
parameter ``OwnerDirectMessage``) the owner also gets the message in the app's direct message
with them (``chat.postMessage`` to the user id), right after the channel took it: only then, so a
message the channel refused (and that the service falls back or retries) never reaches the owner
alone, and a channel message recorded as delivered is never posted again, nor its direct message.
A direct message that fails is an ``owner_problem`` (``direct_message_failed:<reason>``), not a
failed delivery.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from batchpilot.alerts.channels import (
    MAX_RATE_LIMIT_RETRIES,
    MIN_REQUEST_SECONDS,
    REQUEST_TIMEOUT_SECONDS,
    ChannelOptions,
    RenderLimits,
    register_channel,
    request_timeout,
    retry_after_seconds,
    safe_url,
    secret_field,
)
from batchpilot.alerts.facts import AlertFact
from batchpilot.alerts.owners import OwnerProblem
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

if TYPE_CHECKING:
    from batchpilot.alerts.settings import AlertsSettings

__all__ = [
    "HEADER_MAX",
    "MAX_BLOCKS",
    "SECTION_FIELD_MAX",
    "SECTION_TEXT_MAX",
    "SlackMessage",
    "SlackNotifier",
    "SlackUsers",
    "payload_size",
    "quiet_logger",
    "reason_code",
    "request_timeout",
    "slack_digest",
    "slack_message",
    "with_mention",
]

HEADER_MAX = 150
SECTION_TEXT_MAX = 3000
SECTION_FIELD_MAX = 2000
FIELDS_PER_SECTION = 10
MAX_BLOCKS = 50
MAX_BODY_BYTES = 40_000
"""Largest request body, in UTF-8 bytes: Slack truncates a message's text at 40,000 characters
(chat.postMessage, "Truncating content"); batchpilot's messages stay well below it."""
SLACK_REASON_MAX = 2500
"""Characters of a reason shown in one Slack message (below the 3,000 of a section)."""
_TOKEN = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,20}$")
"""A Slack user id (``U0123ABCD``; ``W…`` in Enterprise Grid): what ``<@…>`` mentions."""
LOOKUP_TIMEOUT_SECONDS = 3.0
"""Longest wait for ``users.lookupByEmail`` (less when the invocation has less time left)."""


# ------------------------------------------------------------------------------------- render
@dataclass(frozen=True, slots=True)
class SlackMessage:
    """A Slack message: ``text`` (top-level, always set) and Block Kit ``blocks`` (≤50);
    ``channel``: the ``chat.postMessage`` channel a policy route chose (``Notice.destination``),
    None for the notifier's configured one."""

    text: str
    blocks: list[dict[str, Any]]
    channel: str | None = None
    owner_email: str | None = None
    """The e-mail address of the owner to mention (looked up when posting), or None."""

    def payload(self) -> dict[str, Any]:
        """``{"text", "blocks"}`` as sent to a webhook or ``chat.postMessage``."""
        return {"text": self.text, "blocks": self.blocks}

    def body(self) -> bytes:
        """:meth:`payload` as UTF-8 JSON (what the webhook receives, without slack-sdk's
        ``unfurl_*`` flags)."""
        return json.dumps(self.payload(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def summary(self) -> str:
        """The top-level ``text`` (mrkdwn-escaped)."""
        return self.text

    def headline(self) -> str:
        """The header block's text (the severity and the headline), or "" without one."""
        first = self.blocks[0] if self.blocks else {}
        text = first.get("text") if first.get("type") == "header" else None
        return str(text.get("text", "")) if isinstance(text, dict) else ""


def _mrkdwn(text: str) -> str:
    """Escape the three characters Slack mrkdwn reserves (``&``, ``<``, ``>``)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _header_prefix(severity: Severity) -> str:
    return f"{EMOJI[severity]} {severity.value.upper()} · "


def _header_room(severity: Severity) -> int:
    """Characters left for the headline in a header of at most :data:`HEADER_MAX`, counting the
    emoji as two (one character outside the Basic Multilingual Plane is two UTF-16 code units)."""
    return HEADER_MAX - len(_header_prefix(severity)) - 1


def _header(severity: Severity, text: str) -> dict[str, Any]:
    """A header block: the severity, then ``text`` (already made to fit :func:`_header_room`)."""
    label = _header_prefix(severity) + plain(text)
    return {
        "type": "header",
        "text": {"type": "plain_text", "text": truncate(label, HEADER_MAX), "emoji": True},
    }


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": truncate(text, SECTION_TEXT_MAX)}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": truncate(text, SECTION_FIELD_MAX)}]}


def _link(label: str, url: str) -> str:
    # Slack link syntax <url|label>: the URL must not contain '|' or '>'; ours are percent-encoded.
    return f"<{url.replace('|', '%7C').replace('>', '%3E')}|{_mrkdwn(label)}>"


def slack_message(fact: AlertFact, severity: Severity, why: str) -> SlackMessage:
    """The Block Kit message for one fact: header (the severity and the fact's
    :func:`~batchpilot.alerts.render.headline`), the facts as fields, the reason, console links,
    and a context line saying why this severity. The top-level ``text`` holds the whole title."""
    blocks: list[dict[str, Any]] = [_header(severity, headline(fact, _header_room(severity)))]
    fields = [
        {"type": "mrkdwn", "text": truncate(f"*{label}*\n{_mrkdwn(plain(value))}", SECTION_FIELD_MAX)}
        for label, value in facts_table(fact)
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
    owner = fact.owner
    return SlackMessage(
        text=_mrkdwn(top_text(severity, title(fact))),
        blocks=blocks[:MAX_BLOCKS],
        owner_email=owner.email if owner is not None and owner.mention else None,
    )


def with_mention(message: SlackMessage, user_id: str) -> SlackMessage:
    """``message`` mentioning the Slack user ``user_id`` (``U0123ABCD``): its ``Owner`` field
    shows ``<@U0123ABCD>`` instead of the address, and its top-level ``text`` ends with it (the
    notification names them). An id that is not a Slack user id leaves the message as it is."""
    if message.owner_email is None or not _USER_ID.match(user_id):
        return message
    mention = f"<@{user_id}>"
    shown = f"*Owner*\n{_mrkdwn(plain(message.owner_email))}"
    blocks = []
    for block in message.blocks:
        fields = block.get("fields")
        if isinstance(fields, list):
            fields = [
                {**f, "text": f"*Owner*\n{mention}"} if isinstance(f, dict) and f.get("text") == shown else f
                for f in fields
            ]
            block = {**block, "fields": fields}
        blocks.append(block)
    return replace(message, text=f"{message.text} · {mention}", blocks=blocks)


def slack_digest(
    facts: Sequence[AlertFact], severity: Severity, why: str, max_items: int = 20
) -> SlackMessage:
    """One Block Kit digest for a burst: header, a summary, one line per job for the first
    ``max_items`` jobs (linked to the console), then "…and N more". Always ≤50 blocks."""
    first = facts[0]
    blocks: list[dict[str, Any]] = [_header(severity, digest_headline(facts, _header_room(severity)))]
    category = first.category.value if first.category else "-"
    summary = (
        f"*{len(facts)}* jobs in one batch of events share job queue *{_mrkdwn(first.job_queue or '-')}*"
    )
    summary += f", category *{_mrkdwn(category)}* and severity *{severity.value}*."
    if all(f.alarm for f in facts):
        summary = f"*{len(facts)}* alarms went to *{first.status}* in one batch of events"
        summary += f" (severity *{severity.value}*)."
    blocks.append(_section(summary))
    lines = []
    for fact in list(facts)[:max_items]:
        links = console_links(fact)
        name = _mrkdwn(plain(fact.job_name or subject_name(fact)))
        label = _link(fact.job_name or ("job" if fact.job else name), links[0][1]) if links else f"*{name}*"
        reason = truncate(_mrkdwn(plain(fact.reason or "")), DIGEST_REASON_MAX)
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
    return SlackMessage(text=_mrkdwn(top_text(severity, group_headline(facts))), blocks=blocks)


def payload_size(message: SlackMessage) -> int:
    """Characters of the JSON payload (what Slack's ~12k-character message budget counts against)."""
    return len(json.dumps(message.payload(), ensure_ascii=False))


# --------------------------------------------------------------------------------------- post
def quiet_logger() -> logging.Logger:
    """The logger handed to slack-sdk clients: it never emits (slack-sdk logs the webhook URL and
    request headers at DEBUG whenever its logger's own level is NOTSET or DEBUG)."""
    log = logging.getLogger("batchpilot.slack_sdk")
    log.setLevel(logging.CRITICAL + 10)
    log.propagate = False
    return log


def reason_code(status: int | None, body: str | None) -> str:
    """A short, low-cardinality failure reason: Slack's own error token (``invalid_blocks``,
    ``channel_is_archived``) when the body is one, else ``http_<status>``."""
    text = (body or "").strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
            text = parsed["error"]
    if _TOKEN.match(text):
        return text
    return f"http_{status}" if status else "unknown"


def _exception_reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__} {exc}".lower()
    if "timed out" in text or "timeout" in text:
        return "timeout"
    if "refused" in text or "unreachable" in text or "urlerror" in text or "connection" in text:
        return "connection_error"
    return "client_error"


def _deadline_retry_handler(
    time_left: TimeLeft, sleep: Callable[[float], None], client: Callable[[], Any]
) -> Any:
    """slack-sdk's rate-limit retry handler, bounded by the time left: retries a 429 only when
    ``Retry-After`` (seconds) plus :data:`MIN_REQUEST_SECONDS` fits in ``time_left()``, sleeps
    exactly ``Retry-After``, gives up after :data:`MAX_RATE_LIMIT_RETRIES` retries, and sets the
    client's timeout for the next attempt to the time then left (``client()``: the slack-sdk client,
    whose ``timeout`` each request reads), so a retry never outlives the deadline."""
    from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
    from slack_sdk.http_retry.request import HttpRequest
    from slack_sdk.http_retry.response import HttpResponse
    from slack_sdk.http_retry.state import RetryState

    def retry_after(response: HttpResponse | None) -> float:
        headers = response.headers if response is not None else {}
        values = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
        return retry_after_seconds(values[0] if values else None)

    class DeadlineRateLimitRetryHandler(RateLimitErrorRetryHandler):
        def _can_retry(
            self,
            *,
            state: RetryState,
            request: HttpRequest,
            response: HttpResponse | None = None,
            error: Exception | None = None,
        ) -> bool:
            if response is None or response.status_code != 429:
                return False
            return retry_after(response) + MIN_REQUEST_SECONDS < time_left()

        def prepare_for_next_attempt(
            self,
            *,
            state: RetryState,
            request: HttpRequest,
            response: HttpResponse | None = None,
            error: Exception | None = None,
        ) -> None:
            state.next_attempt_requested = True
            sleep(retry_after(response))
            client().timeout = request_timeout(time_left)
            state.increment_current_attempt()

    return DeadlineRateLimitRetryHandler(max_retry_count=MAX_RATE_LIMIT_RETRIES)


class SlackUsers:
    """Slack user ids by e-mail address (``users.lookupByEmail``), cached per function instance.

    Args:
        ttl: seconds an id, or an address Slack does not know, is kept.
        failure_ttl: seconds a failed lookup (rate limited, timed out) is kept before trying again.
        limit: addresses kept at most (then all are forgotten).
        clock: monotonic seconds (``time.monotonic``).
    """

    def __init__(
        self,
        *,
        ttl: float = 3600.0,
        failure_ttl: float = 60.0,
        limit: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl, self._failure_ttl, self._limit, self._clock = ttl, failure_ttl, limit, clock
        self._known: dict[str, tuple[float, str | None, str | None]] = {}
        self.lookups = 0
        """``users.lookupByEmail`` requests made (for tests and the docs' numbers)."""

    def resolve(
        self, email: str, lookup: Callable[[str], tuple[str | None, str | None]]
    ) -> tuple[str | None, str | None]:
        """``(user id, None)`` or ``(None, problem)`` for ``email``: from the cache, else
        ``lookup(email)`` (one request, its answer kept)."""
        key = email.lower()
        now = self._clock()
        kept = self._known.get(key)
        if kept is not None and kept[0] > now:
            return kept[1], kept[2]
        self.lookups += 1
        user, problem = lookup(email)
        ttl = (
            self._failure_ttl if problem is not None and problem != OwnerProblem.UNKNOWN_EMAIL else self._ttl
        )
        if len(self._known) >= self._limit:
            self._known.clear()
        self._known[key] = (now + ttl, user, problem)
        return user, problem


def _lookup_failed(reason: str) -> str:
    return f"{OwnerProblem.LOOKUP_FAILED.value}:{reason}"


@register_channel(
    Channel.SLACK,
    limits=RenderLimits(headline=HEADER_MAX, body=MAX_BODY_BYTES),
    escape=_mrkdwn,
    accepted=(200, "ok"),
)
class SlackNotifier:
    """The Slack channel (:class:`batchpilot.alerts.ports.Notifier` of :class:`SlackMessage`).

    With a bot token (and channel) it posts with ``chat.postMessage`` and threads messages about
    one job; otherwise with the incoming webhook.

    Args:
        secrets: where the webhook URL / bot token are read.
        webhook_secret: secret id (ARN or name) of the webhook URL, or None.
        bot_token_secret: secret id of the bot token, or None.
        channel: channel id or name for ``chat.postMessage`` (required with a bot token).
        api_url: Slack Web API base URL (``https://slack.com/api/``; a loopback URL locally).
        sleep: how to wait out a 429 (``time.sleep``).
        timeout: seconds per HTTP request.
        direct_message: also send a mentioned owner the message directly (bot token mode).

    Raises:
        ValueError: neither a webhook nor a bot token with a channel is given.
    """

    def __init__(
        self,
        secrets: SecretReader,
        *,
        webhook_secret: str | None = None,
        bot_token_secret: str | None = None,
        channel: str | None = None,
        api_url: str = "https://slack.com/api/",
        sleep: Callable[[float], None] = time.sleep,
        timeout: float = REQUEST_TIMEOUT_SECONDS,
        direct_message: bool = False,
    ) -> None:
        self._secrets = secrets
        self.direct_message = direct_message
        self.webhook_secret = webhook_secret or None
        self.bot_token_secret = bot_token_secret or None
        self.channel = channel or None
        if not (self.webhook_secret or (self.bot_token_secret and self.channel)):
            raise ValueError("Slack needs a webhook secret, or a bot token secret and a channel")
        self.api_url = api_url if api_url.endswith("/") else api_url + "/"
        self._sleep = sleep
        self._timeout = timeout
        self._logger = quiet_logger()
        self.users = SlackUsers()
        """Owners' Slack user ids, cached for the function instance's life."""

    @classmethod
    def configured(
        cls, settings: AlertsSettings, secrets: SecretReader | None, options: ChannelOptions | None = None
    ) -> SlackNotifier | None:
        """The notifier the function's settings configure, or None without Slack settings."""
        if secrets is None or Channel.SLACK not in settings.chat_channels:
            return None
        options = options or ChannelOptions()
        return cls(
            secrets,
            webhook_secret=settings.slack_webhook_secret,
            bot_token_secret=settings.slack_bot_token_secret,
            channel=settings.slack_channel,
            api_url=settings.slack_api_url,
            sleep=options.sleep,
            timeout=options.timeout,
            direct_message=settings.owner_direct_message,
        )

    @property
    def name(self) -> Channel:
        """:attr:`Channel.SLACK`."""
        return Channel.SLACK

    @property
    def threads(self) -> bool:
        """Bot token mode: messages about one job go into one thread."""
        return bool(self.bot_token_secret and self.channel)

    def render(self, notice: Notice) -> SlackMessage:
        """One fact's message, or a burst's digest (:func:`slack_message`, :func:`slack_digest`),
        addressed to ``notice.destination`` when a policy route chose a channel."""
        if notice.digest:
            message = slack_digest(notice.facts, notice.severity, notice.why, notice.max_items)
        else:
            message = slack_message(notice.facts[0], notice.severity, notice.why)
        return replace(message, channel=notice.destination) if notice.destination else message

    def post(self, message: SlackMessage, *, thread: str | None, time_left: TimeLeft) -> Delivery:
        """Post ``message`` (a reply in ``thread``, bot token mode) to ``message.channel`` or the
        configured channel; never raises. A message addressed to a channel without a bot token
        fails (``channel_override_needs_bot_token``): the webhook could only post it elsewhere."""
        try:
            if self.threads:
                return self._post_bot(message, thread, time_left)
            if message.channel is not None:
                return Delivery(False, "channel_override_needs_bot_token")
            delivery = self._post_webhook(message, time_left)
            if message.owner_email is not None:  # users.lookupByEmail needs a bot token
                return replace(delivery, owner_problem=OwnerProblem.NO_BOT_TOKEN.value)
            return delivery
        except Exception as exc:  # connection refused, timeout, TLS: may or may not have posted
            return Delivery(False, _exception_reason(exc))

    def _secret(self, secret_id: str, key: str) -> str | None:
        try:
            return secret_field(self._secrets.get(secret_id), key) or None
        except Exception:  # GetParameterError (AccessDenied, ResourceNotFound, throttled)
            return None

    def _post_webhook(self, message: SlackMessage, time_left: TimeLeft) -> Delivery:
        from slack_sdk.webhook import WebhookClient

        assert self.webhook_secret is not None
        url = self._secret(self.webhook_secret, "url")
        if url is None:
            return Delivery(False, "secret_unavailable")
        if not safe_url(url):
            return Delivery(False, "secret_invalid")
        if time_left() < MIN_REQUEST_SECONDS:
            return Delivery(False, "deadline")
        handler = _deadline_retry_handler(time_left, self._sleep, lambda: client)
        client = WebhookClient(
            url,
            timeout=request_timeout(time_left, self._timeout),
            logger=self._logger,
            retry_handlers=[handler],
        )
        response = client.send(
            text=message.text, blocks=message.blocks, unfurl_links=False, unfurl_media=False
        )
        if response.status_code == 200 and (response.body or "").strip() == "ok":
            return Delivery(True)
        if response.status_code == 429:
            return Delivery(False, "rate_limited")
        return Delivery(False, reason_code(response.status_code, response.body))

    def _post_bot(self, message: SlackMessage, thread: str | None, time_left: TimeLeft) -> Delivery:
        from slack_sdk import WebClient

        assert self.bot_token_secret is not None and self.channel is not None
        token = self._secret(self.bot_token_secret, "token")
        if token is None:
            return Delivery(False, "secret_unavailable")
        if not safe_url(self.api_url):
            return Delivery(False, "api_url_invalid")
        if time_left() < MIN_REQUEST_SECONDS:
            return Delivery(False, "deadline")
        owner_problem: str | None = None
        user: str | None = None
        if message.owner_email is not None:
            user, owner_problem = self.users.resolve(
                message.owner_email, lambda email: self._lookup(token, email, time_left)
            )
            message = with_mention(message, user) if user is not None else message
        client = WebClient(
            token=token,
            base_url=self.api_url,
            timeout=request_timeout(time_left, self._timeout),
            logger=self._logger,
            retry_handlers=[_deadline_retry_handler(time_left, self._sleep, lambda: client)],
        )
        delivery = self._chat_post(client, message, thread)
        if delivery.delivered and user is not None and self.direct_message:
            owner_problem = self._direct_message(client, message, user, time_left)
        return replace(delivery, owner_problem=owner_problem) if owner_problem else delivery

    def _direct_message(
        self, client: Any, message: SlackMessage, user: str, time_left: TimeLeft
    ) -> str | None:
        """The message in the app's direct message with ``user`` (after the channel took it);
        None when sent, else ``direct_message_failed:<reason>``. Never raises."""
        if time_left() < MIN_REQUEST_SECONDS:
            return "direct_message_failed:deadline"
        client.timeout = request_timeout(time_left, self._timeout)
        try:
            sent = self._chat_post(client, replace(message, channel=user), None)
        except Exception as exc:  # the channel message went: this must not fail it
            return f"direct_message_failed:{_exception_reason(exc)}"
        return None if sent.delivered else f"direct_message_failed:{sent.reason}"

    def _lookup(self, token: str, email: str, time_left: TimeLeft) -> tuple[str | None, str | None]:
        """One ``users.lookupByEmail``: ``(user id, None)`` or ``(None, problem)``; never raises.
        Half the time left at most (the post needs the rest), never retried."""
        from slack_sdk import WebClient
        from slack_sdk.errors import SlackApiError

        room: Any = min(LOOKUP_TIMEOUT_SECONDS, time_left() / 2)  # float seconds: request_timeout
        if room < MIN_REQUEST_SECONDS:
            return None, _lookup_failed("deadline")
        client = WebClient(
            token=token, base_url=self.api_url, timeout=room, logger=self._logger, retry_handlers=[]
        )
        try:
            response = client.users_lookupByEmail(email=email)
        except SlackApiError as exc:
            status = getattr(exc.response, "status_code", None)
            error = exc.response.get("error") if hasattr(exc.response, "get") else None
            if error == "users_not_found":
                return None, OwnerProblem.UNKNOWN_EMAIL.value
            if status == 429:
                return None, _lookup_failed("rate_limited")
            return None, _lookup_failed(reason_code(status, error if isinstance(error, str) else None))
        except Exception as exc:  # a timeout, a refused connection: the message goes without it
            return None, _lookup_failed(_exception_reason(exc))
        user = response.get("user")
        user_id = user.get("id") if isinstance(user, dict) else None
        if isinstance(user_id, str) and _USER_ID.match(user_id):
            return user_id, None
        return None, _lookup_failed("invalid_answer")

    def _chat_post(self, client: Any, message: SlackMessage, thread: str | None) -> Delivery:
        from slack_sdk.errors import SlackApiError

        try:
            response = client.chat_postMessage(
                channel=message.channel or self.channel,
                text=message.text,
                blocks=message.blocks,
                thread_ts=thread,
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as exc:
            status = getattr(exc.response, "status_code", None)
            if status == 429:
                return Delivery(False, "rate_limited")
            error = exc.response.get("error") if hasattr(exc.response, "get") else None
            return Delivery(False, reason_code(status, error if isinstance(error, str) else None))
        if response.status_code == 200 and response.get("ok") is True:
            ts = response.get("ts")
            return Delivery(True, thread=ts if isinstance(ts, str) else None)
        return Delivery(False, reason_code(response.status_code, None))
