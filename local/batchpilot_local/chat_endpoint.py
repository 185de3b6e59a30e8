"""A local chat service: one real HTTP server on 127.0.0.1 that answers like Slack (an incoming
webhook and the Web API's ``chat.postMessage``), like a Microsoft Teams Workflows webhook, and like
the incoming webhook of any registered channel (:meth:`LocalChatEndpoint.webhook`: the generic
sink), records every request, and can be told to fail.

The generic sink (:class:`LocalWebhook`) serves one webhook per channel at
``/hooks/<channel>/<token>`` (the token is the URL's secret part) and answers a post with the
answer the channel's registration documents (``Registration.accepted``: Teams 202 and an empty
body, Slack 200 ``ok``), or, per failure mode (:data:`WEBHOOK_FAILURE_MODES`), ``rate_limited``
429 with ``Retry-After``, ``bad_request`` 400, ``unauthorized`` 401, ``not_found`` 404,
``server_error`` 500 (each with an empty body: a channel reads the status), ``timeout`` (the
accepted answer after ``delay`` seconds) and ``hang`` (no answer); a post with another token is
401. It knows nothing of a channel's message format: the channel contract test and every webhook
channel's local run use it as is.

Used by the replay runner, the tests and the benchmarks instead of Slack and Teams (nothing leaves
the machine)::

    with LocalChatEndpoint() as chat:
        chat.slack.webhook_url       # http://127.0.0.1:<port>/services/T0LOCAL/B0LOCAL/<secret>
        chat.slack.api_url           # http://127.0.0.1:<port>/api/  (WebClient base_url)
        chat.teams.webhook_url       # http://127.0.0.1:<port>/powerautomate/.../invoke?...&sig=<secret>
        chat.slack.fail_next("rate_limited", times=2, retry_after=1)
        chat.teams.fail_next("server_error")
        ...
        chat.slack.delivered()       # the requests Slack would have shown
        chat.teams.delivered()       # the requests the workflow accepted (202)

Slack answers, per failure mode (:data:`FAILURE_MODES`), as Slack gives them:

=====================  ===========================  =========================================
mode                   incoming webhook             ``chat.postMessage``
=====================  ===========================  =========================================
(none)                 200 ``ok``                   200 ``{"ok": true, "ts": ..., "channel"}``
``rate_limited``       429 ``rate_limited``,        429 ``{"ok": false, "error": "ratelimited"}``,
                       ``Retry-After``              ``Retry-After``
``invalid_blocks``     400 ``invalid_blocks``       200 ``{"ok": false, "error": "invalid_blocks"}``
``action_prohibited``  403 ``action_prohibited``    200 ``{"ok": false, "error": "restricted_action"}``
``no_service``         404 ``no_service``           200 ``{"ok": false, "error": "channel_not_found"}``
``channel_not_found``  404 ``channel_not_found``    200 ``{"ok": false, "error": "channel_not_found"}``
``channel_is_archived`` 410 ``channel_is_archived`` 200 ``{"ok": false, "error": "is_archived"}``
``server_error``       500, empty body              500, empty body
``timeout``            200 ``ok`` after ``delay`` s  200 ``{"ok": true, ...}`` after ``delay`` s
``hang``               no answer for ``delay`` s    no answer for ``delay`` s
=====================  ===========================  =========================================

``timeout`` takes the message (Slack shows it) but answers late, so a client with a shorter timeout
gives up on a message that was posted; ``hang`` never takes it: the connection stays open without
an answer for ``delay`` seconds (``fail_next``) or until the endpoint stops, then closes (the
request is recorded with status 0, not delivered).

Besides the scripted failures, the Slack side checks each message against Block Kit's limits (a
top-level ``text`` or blocks, at most 50 blocks, header ≤150, section text ≤3,000, ≤10 fields of
≤2,000, context elements ≤3,000) and answers ``invalid_blocks`` the way Slack does when one is
broken, so truncation is tested against the same rule Slack applies. ``chat.postMessage`` also
checks the bot token (``invalid_auth``).

``users.lookupByEmail`` (GET or POST, ``email``) answers from :attr:`LocalSlack.users` (e-mail →
user id; :data:`LOCAL_USERS`, the sample events' owners, to begin with) as Slack does:
``{"ok": true, "user": {"id", ...}}``, ``users_not_found`` for an address it does not know,
``invalid_auth`` for another token, or, per :meth:`LocalSlack.fail_lookups` mode,
``rate_limited`` (429 ``ratelimited`` with ``Retry-After``), ``missing_scope`` (a token without
``users:read.email``), ``server_error`` (500) or ``timeout`` (the answer after ``delay`` seconds).
Lookups are recorded apart from messages (:attr:`LocalSlack.lookups`): they are never "delivered".

The Teams side answers like the trigger of a "Post to a channel when a webhook request is received"
workflow: 202 Accepted with an empty body for a message it takes; 401 when the URL's ``sig`` is not
the workflow's; 400 for a body that is not a message with one Adaptive Card attachment
(:func:`adaptive_card_problem`) or that exceeds Teams' 28 KB message limit; and, per failure mode
(:data:`TEAMS_FAILURE_MODES`): ``rate_limited`` 429 with ``Retry-After``, ``bad_request`` 400,
``unauthorized`` 401, ``not_found`` 404 (a deleted or turned-off workflow), ``server_error`` 500,
``timeout`` (the answer comes only after ``delay`` seconds, so a client with a shorter timeout gives
up), ``hang`` (as Slack's: no answer, not delivered). Error bodies are JSON
``{"error": {"code", "message"}}``; batchpilot reads only the status.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "FAILURE_MODES",
    "LOCAL_USERS",
    "TEAMS_FAILURE_MODES",
    "TEAMS_MAX_MESSAGE_BYTES",
    "WEBHOOK_FAILURE_MODES",
    "LocalChatEndpoint",
    "LocalSlack",
    "LocalTeams",
    "LocalWebhook",
    "LookupRequest",
    "SlackRequest",
    "TeamsRequest",
    "WebhookRequest",
    "adaptive_card_problem",
    "block_kit_problem",
]

FAILURE_MODES = (
    "rate_limited",
    "invalid_blocks",
    "action_prohibited",
    "no_service",
    "channel_not_found",
    "channel_is_archived",
    "server_error",
    "timeout",
    "hang",
)
"""Slack's scripted failure modes."""
TEAMS_FAILURE_MODES = (
    "rate_limited",
    "bad_request",
    "unauthorized",
    "not_found",
    "server_error",
    "timeout",
    "hang",
)
"""The Teams webhook's scripted failure modes."""
WEBHOOK_FAILURE_MODES = TEAMS_FAILURE_MODES
"""The generic webhook sink's scripted failure modes."""
_WEBHOOK_FAILURES: dict[str, int] = {
    "rate_limited": 429,
    "bad_request": 400,
    "unauthorized": 401,
    "not_found": 404,
    "server_error": 500,
}
TEAMS_MAX_MESSAGE_BYTES = 28 * 1024
"""Teams' message size limit (Microsoft Teams platform, "Create Incoming Webhooks")."""

_WEBHOOK_ANSWERS: dict[str, tuple[int, str]] = {
    "rate_limited": (429, "rate_limited"),
    "invalid_blocks": (400, "invalid_blocks"),
    "action_prohibited": (403, "action_prohibited"),
    "no_service": (404, "no_service"),
    "channel_not_found": (404, "channel_not_found"),
    "channel_is_archived": (410, "channel_is_archived"),
    "server_error": (500, ""),
}
_API_ERRORS: dict[str, str] = {
    "rate_limited": "ratelimited",
    "invalid_blocks": "invalid_blocks",
    "action_prohibited": "restricted_action",
    "no_service": "channel_not_found",
    "channel_not_found": "channel_not_found",
    "channel_is_archived": "is_archived",
}
_TEAMS_ANSWERS: dict[str, tuple[int, str]] = {
    "rate_limited": (429, "TooManyRequests"),
    "bad_request": (400, "InvalidRequestContent"),
    "unauthorized": (401, "Unauthorized"),
    "not_found": (404, "WorkflowNotFound"),
    "server_error": (500, "InternalServerError"),
}
_ADAPTIVE_CARD = "application/vnd.microsoft.card.adaptive"


@dataclass(frozen=True)
class SlackRequest:
    """One request the Slack side received, and what it answered.

    Attributes:
        kind: ``webhook`` or ``chat.postMessage``.
        path: the request path.
        payload: the decoded JSON (or form) body.
        status: the HTTP status answered.
        answer: the body answered (``ok``, an error token, or the JSON text).
        authorized: ``chat.postMessage`` only: the bearer token was the expected one.
        received_at: ``time.time()`` when it arrived.
        ts: the message ``ts`` given to a delivered ``chat.postMessage``.
    """

    kind: str
    path: str
    payload: dict[str, Any]
    status: int
    answer: str
    authorized: bool = True
    received_at: float = 0.0
    ts: str | None = None

    @property
    def delivered(self) -> bool:
        """Slack would have shown the message: HTTP 200 with ``ok`` / ``"ok": true``."""
        if self.status != 200:
            return False
        if self.kind == "webhook":
            return self.answer == "ok"
        try:
            return bool(json.loads(self.answer).get("ok"))
        except ValueError:
            return False

    @property
    def text(self) -> str:
        """The message's top-level ``text`` (empty when missing)."""
        value = self.payload.get("text")
        return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class TeamsRequest:
    """One request the Teams side received, and what it answered.

    Attributes:
        path: the request path (without the query, which holds the signature).
        payload: the decoded JSON body.
        status: the HTTP status answered (202 when the workflow took it).
        answer: the body answered (empty, or the JSON error).
        size: the body's size in bytes.
        authorized: the URL's ``sig`` was the workflow's.
        received_at: ``time.time()`` when it arrived.
        delay: seconds the answer was held back (the ``timeout`` mode; the client may have given
            up before it came, so the message may have posted although the client saw no answer).
    """

    path: str
    payload: dict[str, Any]
    status: int
    answer: str
    size: int = 0
    authorized: bool = True
    received_at: float = 0.0
    delay: float = 0.0

    @property
    def delivered(self) -> bool:
        """The workflow took the message (a 2xx answer: Workflows answer 202 Accepted)."""
        return 200 <= self.status < 300

    @property
    def card(self) -> dict[str, Any]:
        """The first attachment's Adaptive Card (empty when missing)."""
        attachments = self.payload.get("attachments")
        first = attachments[0] if isinstance(attachments, list) and attachments else {}
        content = first.get("content") if isinstance(first, Mapping) else None
        return dict(content) if isinstance(content, Mapping) else {}

    @property
    def text(self) -> str:
        """The card's ``fallbackText`` (batchpilot's one-line summary; empty when missing)."""
        value = self.card.get("fallbackText")
        return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class WebhookRequest:
    """One request a generic webhook (:class:`LocalWebhook`) received, and what it answered.

    Attributes:
        channel: the channel the webhook serves (its ``Channel`` value).
        path: the request path without the token (``/hooks/<channel>``).
        payload: the decoded JSON body.
        status: the HTTP status answered (0: none, the ``hang`` mode).
        answer: the body answered.
        size: the body's size in bytes.
        authorized: the URL's token was the webhook's.
        delivered: the answer was the channel's documented success answer.
        received_at: ``time.time()`` when it arrived.
        delay: seconds the answer was held back.
    """

    channel: str
    path: str
    payload: dict[str, Any]
    status: int
    answer: str
    size: int = 0
    authorized: bool = True
    delivered: bool = False
    received_at: float = 0.0
    delay: float = 0.0


def _length(obj: Any) -> int:
    text = obj.get("text") if isinstance(obj, Mapping) else None
    return len(text) if isinstance(text, str) else 0


def block_kit_problem(payload: Mapping[str, Any]) -> str | None:
    """The first Block Kit rule ``payload`` breaks (a short description), or None when it is valid
    as far as the limits batchpilot relies on go."""
    blocks = payload.get("blocks")
    text = payload.get("text")
    if not blocks and not (isinstance(text, str) and text.strip()):
        return "no text and no blocks"
    if blocks is None:
        return None
    if not isinstance(blocks, list):
        return "blocks is not a list"
    if len(blocks) > 50:
        return f"{len(blocks)} blocks (max 50)"
    for index, block in enumerate(blocks):
        if not isinstance(block, Mapping):
            return f"block {index} is not an object"
        kind = block.get("type")
        if kind == "header":
            header = block.get("text")
            if (
                not isinstance(header, Mapping)
                or header.get("type") != "plain_text"
                or not 1 <= _length(header) <= 150
            ):
                return f"block {index}: header text must be plain_text of 1-150 characters"
        elif kind == "section":
            if "text" not in block and "fields" not in block:
                return f"block {index}: section without text or fields"
            if "text" in block and not 1 <= _length(block["text"]) <= 3000:
                return f"block {index}: section text must be 1-3000 characters"
            fields = block.get("fields", [])
            if len(fields) > 10:
                return f"block {index}: {len(fields)} fields (max 10)"
            if any(not 1 <= _length(f) <= 2000 for f in fields):
                return f"block {index}: a field is not 1-2000 characters"
        elif kind == "context":
            elements = block.get("elements", [])
            if not 1 <= len(elements) <= 10 or any(_length(e) > 3000 for e in elements):
                return f"block {index}: context needs 1-10 elements of at most 3000 characters"
        elif kind not in {"divider", "actions", "image", "rich_text"}:
            return f"block {index}: unknown type {kind!r}"
    return None


def _version(value: Any) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in str(value).split("."))
    except ValueError:
        return ()


def adaptive_card_problem(payload: Mapping[str, Any]) -> str | None:
    """The first rule of a Teams Workflows message ``payload`` breaks, or None: a ``message`` with
    exactly one attachment of ``contentType`` ``application/vnd.microsoft.card.adaptive`` whose
    ``content`` is an ``AdaptiveCard`` of version 1.4 or later with a ``body`` list of typed
    elements (Workflows post Adaptive Cards only)."""
    if payload.get("type") != "message":
        return "type must be message"
    attachments = payload.get("attachments")
    if not isinstance(attachments, list) or len(attachments) != 1:
        return "attachments must hold exactly one card"
    attachment = attachments[0]
    if not isinstance(attachment, Mapping) or attachment.get("contentType") != _ADAPTIVE_CARD:
        return f"contentType must be {_ADAPTIVE_CARD}"
    card = attachment.get("content")
    if not isinstance(card, Mapping) or card.get("type") != "AdaptiveCard":
        return "content must be an AdaptiveCard"
    if _version(card.get("version")) < (1, 4):
        return "the card's version must be 1.4 or later"
    body = card.get("body")
    if not isinstance(body, list) or not body:
        return "the card needs a body"
    for index, element in enumerate(body):
        if not isinstance(element, Mapping) or not isinstance(element.get("type"), str):
            return f"body element {index} has no type"
    return _mention_problem(card, body)


def _mention_problem(card: Mapping[str, Any], body: list[Any]) -> str | None:
    """A mention Teams could not show: each ``msteams.entities`` mention needs ``text`` found in a
    ``TextBlock`` of the body and a ``mentioned.id``."""
    msteams = card.get("msteams")
    entities = msteams.get("entities", []) if isinstance(msteams, Mapping) else []
    if not isinstance(entities, list):
        return "msteams.entities must be a list"
    texts = [str(e.get("text", "")) for e in body if isinstance(e, Mapping) and e.get("type") == "TextBlock"]
    for index, entity in enumerate(entities):
        if not isinstance(entity, Mapping) or entity.get("type") != "mention":
            continue
        tag, mentioned = entity.get("text"), entity.get("mentioned")
        if not isinstance(tag, str) or not any(tag in text for text in texts):
            return f"mention {index}: its text is in no TextBlock"
        if not isinstance(mentioned, Mapping) or not mentioned.get("id"):
            return f"mention {index}: mentioned.id is required"
    return None


@dataclass
class _Script:
    mode: str
    remaining: int | None  # None: until cleared
    retry_after: int = 1
    delay: float = 0.0


R = TypeVar("R", SlackRequest, TeamsRequest, WebhookRequest)


class _Side(Generic[R]):
    """One chat service of the endpoint: its request log and its scripted failures."""

    MODES: tuple[str, ...] = ()

    def __init__(self, endpoint: LocalChatEndpoint) -> None:
        self._endpoint = endpoint
        self._requests: list[R] = []
        self._scripts: list[_Script] = []
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` of the endpoint.

        Raises:
            RuntimeError: not started.
        """
        return self._endpoint.base_url

    def stop(self) -> None:
        """Stop the whole endpoint (every chat service on it): a refused connection from now on."""
        self._endpoint.stop()

    # ----------------------------------------------------------------------- failures
    def fail_next(self, mode: str, *, times: int = 1, retry_after: int = 1, delay: float = 5.0) -> None:
        """Answer the next ``times`` requests with failure ``mode`` (one of ``MODES``);
        ``retry_after``: the 429's header; ``delay``: seconds a ``timeout`` answer waits, or a
        ``hang`` holds the connection without answering.

        Raises:
            ValueError: an unknown mode or ``times`` < 1.
        """
        if mode not in self.MODES or times < 1:
            raise ValueError(f"unknown failure mode {mode!r} or times < 1")
        with self._lock:
            self._scripts.append(_Script(mode, times, retry_after, delay))

    def fail_always(self, mode: str, *, retry_after: int = 1, delay: float = 5.0) -> None:
        """Answer every request with failure ``mode`` until :meth:`recover`."""
        if mode not in self.MODES:
            raise ValueError(f"unknown failure mode {mode!r}")
        with self._lock:
            self._scripts.append(_Script(mode, None, retry_after, delay))

    def recover(self) -> None:
        """Forget every scripted failure: answer like a healthy service again."""
        with self._lock:
            self._scripts.clear()

    def _next_failure(self) -> _Script | None:
        with self._lock:
            while self._scripts:
                script = self._scripts[0]
                if script.remaining is None:
                    return script
                if script.remaining > 0:
                    script.remaining -= 1
                    if script.remaining == 0:
                        self._scripts.pop(0)
                    return script
                self._scripts.pop(0)
        return None

    # ----------------------------------------------------------------------- records
    def _record(self, request: R) -> None:
        with self._lock:
            self._requests.append(request)

    @property
    def requests(self) -> list[R]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def delivered(self) -> list[R]:
        """The requests the service took (see each request's ``delivered``)."""
        return [r for r in self.requests if r.delivered]

    def mark(self) -> int:
        """A position in the request log, for :meth:`since`."""
        with self._lock:
            return len(self._requests)

    def since(self, mark: int) -> list[R]:
        """Requests received after :meth:`mark` returned ``mark``."""
        with self._lock:
            return list(self._requests[mark:])

    def take(self) -> list[R]:
        """The requests recorded so far, in arrival order, forgotten as they are returned (for the
        one reader of an endpoint's log: :meth:`mark` positions of others would move)."""
        with self._lock:
            taken, self._requests = self._requests, []
        return taken

    def clear(self) -> None:
        """Forget the recorded requests (scripted failures are kept)."""
        with self._lock:
            self._requests.clear()


LOCAL_USERS: dict[str, str] = {
    "ana.lima@example.com": "U0ANALIMA1",
    "kenji.sato@example.com": "U0KENJISA2",
    "priya.nair@example.com": "U0PRIYANA3",
}
"""The local Slack workspace's people (e-mail → user id): the owners the sample events tag."""


@dataclass(frozen=True)
class LookupRequest:
    """One ``users.lookupByEmail`` request: the address asked, the status and body answered."""

    email: str
    status: int
    answer: str
    authorized: bool = True


class LocalSlack(_Side[SlackRequest]):
    """The Slack side: an incoming webhook and ``chat.postMessage`` (see the module docstring).

    Attributes:
        bot_token: the token ``chat.postMessage`` accepts.
        channel: the channel id it reports for posted messages.
        webhook_path: the incoming webhook's path (the secret part of a webhook URL).
    """

    MODES = FAILURE_MODES

    def __init__(
        self, endpoint: LocalChatEndpoint, *, bot_token: str, channel: str, webhook_path: str
    ) -> None:
        super().__init__(endpoint)
        self.bot_token = bot_token
        self.channel = channel
        self.webhook_path = webhook_path
        self._next_ts = 0
        self.users: dict[str, str] = dict(LOCAL_USERS)
        """E-mail address (lower case) → user id, what ``users.lookupByEmail`` finds."""
        self.lookups: list[LookupRequest] = []
        """Every ``users.lookupByEmail`` request, in order."""
        self._lookup_failure: tuple[str, int, float] | None = None

    def fail_lookups(self, mode: str | None, *, retry_after: int = 1, delay: float = 5.0) -> None:
        """Answer every ``users.lookupByEmail`` with ``mode`` (``rate_limited``, ``missing_scope``,
        ``server_error``, ``timeout``) from now on; None answers normally again."""
        if mode is not None and mode not in ("rate_limited", "missing_scope", "server_error", "timeout"):
            raise ValueError(f"unknown lookup failure mode: {mode}")
        self._lookup_failure = (mode, retry_after, delay) if mode is not None else None

    def answer_lookup(self, email: str, headers: Any) -> tuple[int, str, dict[str, str], float]:
        """Status, body, headers and delay of a ``users.lookupByEmail`` request (recorded)."""
        authorized = headers.get("Authorization") == f"Bearer {self.bot_token}"
        failure = self._lookup_failure
        delay = 0.0
        answer_headers: dict[str, str] = {}
        if not authorized:
            status, body = 200, {"ok": False, "error": "invalid_auth"}
        elif failure is not None and failure[0] == "rate_limited":
            status, body = 429, {"ok": False, "error": "ratelimited"}
            answer_headers = {"Retry-After": str(failure[1])}
        elif failure is not None and failure[0] == "missing_scope":
            status, body = 200, {"ok": False, "error": "missing_scope", "needed": "users:read.email"}
        elif failure is not None and failure[0] == "server_error":
            status, body = 500, {}
        else:
            delay = failure[2] if failure is not None else 0.0
            user = self.users.get(email.strip().lower())
            if user is None:
                status, body = 200, {"ok": False, "error": "users_not_found"}
            else:
                status, body = 200, {"ok": True, "user": {"id": user, "profile": {"email": email}}}
        text = json.dumps(body) if body else ""
        with self._lock:
            self.lookups.append(LookupRequest(email, status, text, authorized))
        return status, text, answer_headers, delay

    @property
    def webhook_url(self) -> str:
        """The incoming webhook URL (what the webhook secret holds)."""
        return self.base_url + self.webhook_path

    @property
    def api_url(self) -> str:
        """The Web API base URL for ``slack_sdk.WebClient(base_url=...)``."""
        return self.base_url + "/api/"

    def answer_webhook(self, payload: Mapping[str, Any]) -> tuple[int, str, dict[str, str], float]:
        """Status, body, headers and delay (seconds the answer is held back) of an incoming-webhook
        request; status 0 is no answer at all (the ``hang`` mode)."""
        script = self._next_failure()
        if script is not None and script.mode == "hang":
            return 0, "", {}, script.delay
        delay = script.delay if script is not None and script.mode == "timeout" else 0.0
        if script is not None and script.mode != "timeout":
            status, body = _WEBHOOK_ANSWERS[script.mode]
            headers = {"Retry-After": str(script.retry_after)} if status == 429 else {}
            return status, body, headers, 0.0
        if block_kit_problem(payload) is not None:
            return 400, "invalid_blocks", {}, delay
        return 200, "ok", {}, delay

    def answer_api(
        self, path: str, payload: Mapping[str, Any], headers: Any
    ) -> tuple[int, str, dict[str, str], str | None, bool, float]:
        """Status, body, headers, message ``ts``, authorization and delay of a Web API request
        (status 0: no answer, the ``hang`` mode)."""
        authorized = headers.get("Authorization") == f"Bearer {self.bot_token}"
        if path != "/api/chat.postMessage":
            return 200, json.dumps({"ok": False, "error": "unknown_method"}), {}, None, authorized, 0.0
        if not authorized:
            return 200, json.dumps({"ok": False, "error": "invalid_auth"}), {}, None, False, 0.0
        script = self._next_failure()
        if script is not None and script.mode == "hang":
            return 0, "", {}, None, True, script.delay
        delay = script.delay if script is not None and script.mode == "timeout" else 0.0
        if script is not None and script.mode != "timeout":
            if script.mode == "server_error":
                return 500, "", {}, None, True, 0.0
            body = json.dumps({"ok": False, "error": _API_ERRORS[script.mode]})
            if script.mode == "rate_limited":
                return 429, body, {"Retry-After": str(script.retry_after)}, None, True, 0.0
            return 200, body, {}, None, True, 0.0
        if block_kit_problem(payload) is not None:
            return 200, json.dumps({"ok": False, "error": "invalid_blocks"}), {}, None, True, delay
        with self._lock:
            self._next_ts += 1
            ts = f"{1_700_000_000 + self._next_ts}.{self._next_ts:06d}"
        channel = payload.get("channel") or self.channel
        answer = {"ok": True, "channel": self.channel, "ts": ts, "message": {"text": payload.get("text")}}
        if not isinstance(channel, str):
            answer = {"ok": False, "error": "channel_not_found"}
            return 200, json.dumps(answer), {}, None, True, delay
        return 200, json.dumps(answer), {}, ts, True, delay


class LocalTeams(_Side[TeamsRequest]):
    """The Teams side: a Workflows webhook (see the module docstring).

    Attributes:
        workflow_path: the trigger's path (``.../workflows/<id>/triggers/manual/paths/invoke``).
        signature: the URL's ``sig``: the webhook's credential.
    """

    MODES = TEAMS_FAILURE_MODES

    def __init__(self, endpoint: LocalChatEndpoint, *, workflow_path: str, signature: str) -> None:
        super().__init__(endpoint)
        self.workflow_path = workflow_path
        self.signature = signature

    @property
    def webhook_url(self) -> str:
        """The Workflows webhook URL (what the Teams webhook secret holds)."""
        query = f"api-version=1&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={self.signature}"
        return f"{self.base_url}{self.workflow_path}?{query}"

    def answer(
        self, query: str, payload: Mapping[str, Any], size: int
    ) -> tuple[int, str, dict[str, str], bool, float]:
        """Status, body, headers, authorization and delay (seconds to hold the answer back) for a
        webhook request."""
        authorized = parse_qs(query).get("sig", [""])[-1] == self.signature
        if not authorized:
            return (*_teams_error(401, "Unauthorized", "the signature does not match"), False, 0.0)
        script = self._next_failure()
        if script is not None:
            if script.mode == "timeout":
                return 202, "", {}, True, script.delay
            if script.mode == "hang":
                return 0, "", {}, True, script.delay
            status, code = _TEAMS_ANSWERS[script.mode]
            status, body, headers = _teams_error(status, code, f"scripted {script.mode}")
            if status == 429:
                headers["Retry-After"] = str(script.retry_after)
            return status, body, headers, True, 0.0
        problem = adaptive_card_problem(payload)
        if problem is None and size > TEAMS_MAX_MESSAGE_BYTES:
            problem = f"message of {size} bytes exceeds {TEAMS_MAX_MESSAGE_BYTES}"
        if problem is not None:
            return (*_teams_error(400, "InvalidRequestContent", problem), True, 0.0)
        return 202, "", {}, True, 0.0


class LocalWebhook(_Side[WebhookRequest]):
    """A generic incoming webhook for one channel (see the module docstring).

    Attributes:
        channel: the channel's name (``Channel`` value).
        token: the URL's secret part.
        accepted: ``(status, body)`` answered for a post it takes.
    """

    MODES = WEBHOOK_FAILURE_MODES

    def __init__(
        self, endpoint: LocalChatEndpoint, *, channel: str, token: str, accepted: tuple[int, str]
    ) -> None:
        super().__init__(endpoint)
        self.channel = channel
        self.token = token
        self.accepted = accepted

    @property
    def path(self) -> str:
        """``/hooks/<channel>`` (the URL without its token)."""
        return f"/hooks/{self.channel}"

    @property
    def webhook_url(self) -> str:
        """The webhook URL (what the channel's webhook secret holds)."""
        return f"{self.base_url}{self.path}/{self.token}"

    def answer(
        self, token: str, payload: Mapping[str, Any], size: int
    ) -> tuple[WebhookRequest, dict[str, str]]:
        """The answer to a post carrying ``token``, as recorded (status 0: no answer), and the
        answer's headers."""
        status, body, delay = self.accepted[0], self.accepted[1], 0.0
        headers: dict[str, str] = {}
        authorized = token == self.token
        script = self._next_failure() if authorized else None
        if not authorized:
            status, body = 401, "unauthorized"
        elif script is not None and script.mode in _WEBHOOK_FAILURES:
            status, body = _WEBHOOK_FAILURES[script.mode], ""
            if status == 429:
                headers["Retry-After"] = str(script.retry_after)
        elif script is not None:  # timeout: the accepted answer, late; hang: none
            delay = script.delay
            status = 0 if script.mode == "hang" else status
        delivered = authorized and status == self.accepted[0] and (script is None or script.mode == "timeout")
        request = WebhookRequest(
            self.channel,
            self.path,
            dict(payload),
            status,
            body,
            size,
            authorized,
            delivered,
            time.time(),
            delay,
        )
        self._record(request)
        return request, headers


def _teams_error(status: int, code: str, message: str) -> tuple[int, str, dict[str, str]]:
    return status, json.dumps({"error": {"code": code, "message": message}}), {}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the endpoint records requests instead of printing them."""

    def do_GET(self) -> None:
        """``users.lookupByEmail`` (slack-sdk sends it as a GET with the address in the query)."""
        parts = urlsplit(self.path)
        if parts.path != "/api/users.lookupByEmail":
            self._answer(404, "", {}, 0.0)
            return
        email = (parse_qs(parts.query).get("email") or [""])[-1]
        self._answer(*self.server.endpoint.slack.answer_lookup(email, self.headers))

    def _answer(self, status: int, body: str, headers: Mapping[str, str], delay: float) -> None:
        self.server.endpoint.stopping.wait(delay)
        data = body.encode("utf-8")
        with contextlib.suppress(OSError):  # the client may have given up (a timeout)
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    def do_POST(self) -> None:
        endpoint = self.server.endpoint
        length = int(self.headers.get("Content-Length") or 0)
        raw_bytes = self.rfile.read(length) if length else b""
        raw = raw_bytes.decode("utf-8", "replace")
        payload = _decode(raw, self.headers.get("Content-Type") or "")
        parts = urlsplit(self.path)
        path = parts.path
        slack, teams = endpoint.slack, endpoint.teams
        hook = endpoint.hooks.get(path.rsplit("/", 1)[0]) if path.startswith("/hooks/") else None
        if hook is not None:
            request, headers = hook.answer(path.rsplit("/", 1)[-1], payload, len(raw_bytes))
            status, body, delay = request.status, request.answer, request.delay
        elif path == teams.workflow_path:
            status, body, headers, authorized, delay = teams.answer(parts.query, payload, len(raw_bytes))
            size = len(raw_bytes)
            teams._record(TeamsRequest(path, payload, status, body, size, authorized, time.time(), delay))
        else:
            ts: str | None = None
            authorized = True
            delay = 0.0
            if path == "/api/users.lookupByEmail":
                self._answer(*slack.answer_lookup(str(payload.get("email") or ""), self.headers))
                return
            if path.startswith("/api/"):
                status, body, headers, ts, authorized, delay = slack.answer_api(path, payload, self.headers)
                kind = path.removeprefix("/api/")
            elif path == slack.webhook_path:
                status, body, headers, delay = slack.answer_webhook(payload)
                kind = "webhook"
            else:
                status, body, headers = 404, "no_service", {}
                kind = "webhook"
            slack._record(SlackRequest(kind, path, payload, status, body, authorized, time.time(), ts))
        # Recorded first: the client may give up before the answer comes. A stopping endpoint ends
        # the wait, so a hung request never outlives it.
        endpoint.stopping.wait(delay)
        if status == 0:  # hang: close without an answer
            return
        data = body.encode("utf-8")
        with contextlib.suppress(OSError):  # the client may have given up (a timeout)
            self.send_response(status)
            content_type = "application/json; charset=utf-8" if body.startswith("{") else "text/plain"
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)


def _decode(raw: str, content_type: str) -> dict[str, Any]:
    if "json" in content_type or raw.lstrip().startswith("{"):
        try:
            value = json.loads(raw)
        except ValueError:
            return {"_unparsed": raw[:200]}
        return value if isinstance(value, dict) else {"_unparsed": raw[:200]}
    form = {k: v[-1] for k, v in parse_qs(raw).items()}
    if isinstance(form.get("blocks"), str):
        with contextlib.suppress(ValueError):
            form["blocks"] = json.loads(form["blocks"])
    return dict(form)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    endpoint: LocalChatEndpoint

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Silent: a client that gave up (a timeout) is expected here."""


class LocalChatEndpoint:
    """The local Slack and Teams (see the module docstring). Use as a context manager, or
    ``start``/``stop``.

    Args:
        bot_token: the token Slack's ``chat.postMessage`` accepts.
        channel: the Slack channel id it reports for posted messages.
        webhook_path: the Slack incoming webhook's path (the secret part of its URL).
        workflow_path: the Teams workflow trigger's path.
        teams_signature: the Teams webhook URL's ``sig`` (its secret part).
    """

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-local-0000-batchpilot",  # noqa: S107 - a fake token for the local endpoint
        channel: str = "C0LOCAL0001",
        webhook_path: str = "/services/T0LOCAL/B0LOCAL/batchpilotlocalwebhook",
        workflow_path: str = (
            "/powerautomate/automations/direct/workflows/0a1b2c3d4e5f40718293a4b5c6d7e8f9"
            "/triggers/manual/paths/invoke"
        ),
        teams_signature: str = "batchpilotlocalteamssig0000000000000000000000",
    ) -> None:
        self.slack = LocalSlack(self, bot_token=bot_token, channel=channel, webhook_path=webhook_path)
        self.teams = LocalTeams(self, workflow_path=workflow_path, signature=teams_signature)
        self.hooks: dict[str, LocalWebhook] = {}
        """The generic webhooks (:meth:`webhook`), by path."""
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.stopping = threading.Event()
        """Set while the endpoint stops: held answers (``timeout``, ``hang``) end at once."""

    def webhook(self, channel: str, accepted: tuple[int, str] = (200, "")) -> LocalWebhook:
        """The generic webhook of ``channel`` (a ``Channel`` value), made on first use; ``accepted``:
        the answer it gives a post it takes (the channel's ``Registration.accepted``; the first
        call's value is kept)."""
        path = f"/hooks/{channel}"
        if path not in self.hooks:
            token = f"batchpilotlocal{channel}hook{len(self.hooks):04d}secret"
            self.hooks[path] = LocalWebhook(self, channel=channel, token=token, accepted=accepted)
        return self.hooks[path]

    def start(self) -> LocalChatEndpoint:
        """Listen on 127.0.0.1 at an ephemeral port (idempotent)."""
        if self._server is None:
            self.stopping.clear()
            server = _Server(("127.0.0.1", 0), _Handler)
            server.endpoint = self
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="local-chat", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening (idempotent); held answers end."""
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LocalChatEndpoint:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``.

        Raises:
            RuntimeError: not started.
        """
        if self._server is None:
            raise RuntimeError("LocalChatEndpoint is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"
