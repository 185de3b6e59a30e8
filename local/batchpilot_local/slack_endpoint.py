"""A local Slack: a real HTTP server on 127.0.0.1 that answers like an incoming webhook and like the
Web API's ``chat.postMessage``, records every request, and can be told to fail.

Used by the replay runner and the tests instead of Slack (nothing leaves the machine)::

    with LocalSlackEndpoint() as slack:
        slack.webhook_url            # http://127.0.0.1:<port>/services/T0LOCAL/B0LOCAL/<secret>
        slack.api_url                # http://127.0.0.1:<port>/api/  (WebClient base_url)
        slack.fail_next("rate_limited", times=2, retry_after=1)
        ...
        slack.delivered()            # the requests answered 200 ok

Answers, per failure mode (:data:`FAILURE_MODES`), as Slack gives them:

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
=====================  ===========================  =========================================

Besides the scripted failures, the endpoint checks each message against Block Kit's limits (a
top-level ``text`` or blocks, at most 50 blocks, header ≤150, section text ≤3,000, ≤10 fields of
≤2,000, context elements ≤3,000) and answers ``invalid_blocks`` the way Slack does when one is
broken, so truncation is tested against the same rule Slack applies. ``chat.postMessage`` also
checks the bot token (``invalid_auth``).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs

__all__ = ["FAILURE_MODES", "LocalSlackEndpoint", "SlackRequest", "block_kit_problem"]

FAILURE_MODES = (
    "rate_limited",
    "invalid_blocks",
    "action_prohibited",
    "no_service",
    "channel_not_found",
    "channel_is_archived",
    "server_error",
)

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


@dataclass(frozen=True)
class SlackRequest:
    """One request the endpoint received, and what it answered.

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


@dataclass
class _Script:
    mode: str
    remaining: int | None  # None: until cleared
    retry_after: int = 1


@dataclass
class _State:
    requests: list[SlackRequest] = field(default_factory=list)
    scripts: list[_Script] = field(default_factory=list)
    next_ts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the endpoint records requests instead of printing them."""

    def do_POST(self) -> None:
        endpoint = self.server.endpoint
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        payload = _decode(raw, self.headers.get("Content-Type") or "")
        path = self.path.split("?", 1)[0]
        if path.startswith("/api/"):
            status, body, headers, ts, authorized = endpoint._answer_api(path, payload, self.headers)
            kind = path.removeprefix("/api/")
        elif path == endpoint.webhook_path:
            status, body, headers = endpoint._answer_webhook(payload)
            kind, ts, authorized = "webhook", None, True
        else:
            status, body, headers = 404, "no_service", {}
            kind, ts, authorized = "webhook", None, True
        endpoint._record(SlackRequest(kind, path, payload, status, body, authorized, time.time(), ts))
        data = body.encode("utf-8")
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
    endpoint: LocalSlackEndpoint


class LocalSlackEndpoint:
    """The local Slack (see the module docstring). Use as a context manager, or ``start``/``stop``.

    Args:
        bot_token: the token ``chat.postMessage`` accepts.
        channel: the channel id it reports for posted messages.
        webhook_path: the incoming webhook's path (the secret part of a webhook URL).
    """

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-local-0000-batchpilot",  # noqa: S107 - a fake token for the local endpoint
        channel: str = "C0LOCAL0001",
        webhook_path: str = "/services/T0LOCAL/B0LOCAL/batchpilotlocalwebhook",
    ) -> None:
        self.bot_token = bot_token
        self.channel = channel
        self.webhook_path = webhook_path
        self._state = _State()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------------- lifecycle
    def start(self) -> LocalSlackEndpoint:
        """Listen on 127.0.0.1 at an ephemeral port (idempotent)."""
        if self._server is None:
            server = _Server(("127.0.0.1", 0), _Handler)
            server.endpoint = self
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="local-slack", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening (idempotent)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LocalSlackEndpoint:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ----------------------------------------------------------------------- addresses
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``.

        Raises:
            RuntimeError: not started.
        """
        if self._server is None:
            raise RuntimeError("LocalSlackEndpoint is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def webhook_url(self) -> str:
        """The incoming webhook URL (what the webhook secret holds)."""
        return self.base_url + self.webhook_path

    @property
    def api_url(self) -> str:
        """The Web API base URL for ``slack_sdk.WebClient(base_url=...)``."""
        return self.base_url + "/api/"

    # ----------------------------------------------------------------------- failures
    def fail_next(self, mode: str, *, times: int = 1, retry_after: int = 1) -> None:
        """Answer the next ``times`` requests with failure ``mode`` (one of :data:`FAILURE_MODES`).

        Raises:
            ValueError: an unknown mode or ``times`` < 1.
        """
        if mode not in FAILURE_MODES or times < 1:
            raise ValueError(f"unknown failure mode {mode!r} or times < 1")
        with self._state.lock:
            self._state.scripts.append(_Script(mode, times, retry_after))

    def fail_always(self, mode: str, *, retry_after: int = 1) -> None:
        """Answer every request with failure ``mode`` until :meth:`recover`."""
        if mode not in FAILURE_MODES:
            raise ValueError(f"unknown failure mode {mode!r}")
        with self._state.lock:
            self._state.scripts.append(_Script(mode, None, retry_after))

    def recover(self) -> None:
        """Forget every scripted failure: answer like a healthy Slack again."""
        with self._state.lock:
            self._state.scripts.clear()

    def _next_failure(self) -> _Script | None:
        with self._state.lock:
            while self._state.scripts:
                script = self._state.scripts[0]
                if script.remaining is None:
                    return script
                if script.remaining > 0:
                    script.remaining -= 1
                    if script.remaining == 0:
                        self._state.scripts.pop(0)
                    return script
                self._state.scripts.pop(0)
        return None

    # ----------------------------------------------------------------------- answers
    def _answer_webhook(self, payload: Mapping[str, Any]) -> tuple[int, str, dict[str, str]]:
        script = self._next_failure()
        if script is not None:
            status, body = _WEBHOOK_ANSWERS[script.mode]
            headers = {"Retry-After": str(script.retry_after)} if status == 429 else {}
            return status, body, headers
        if block_kit_problem(payload) is not None:
            return 400, "invalid_blocks", {}
        return 200, "ok", {}

    def _answer_api(
        self, path: str, payload: Mapping[str, Any], headers: Any
    ) -> tuple[int, str, dict[str, str], str | None, bool]:
        authorized = headers.get("Authorization") == f"Bearer {self.bot_token}"
        if path != "/api/chat.postMessage":
            return 200, json.dumps({"ok": False, "error": "unknown_method"}), {}, None, authorized
        if not authorized:
            return 200, json.dumps({"ok": False, "error": "invalid_auth"}), {}, None, False
        script = self._next_failure()
        if script is not None:
            if script.mode == "server_error":
                return 500, "", {}, None, True
            body = json.dumps({"ok": False, "error": _API_ERRORS[script.mode]})
            if script.mode == "rate_limited":
                return 429, body, {"Retry-After": str(script.retry_after)}, None, True
            return 200, body, {}, None, True
        if block_kit_problem(payload) is not None:
            return 200, json.dumps({"ok": False, "error": "invalid_blocks"}), {}, None, True
        with self._state.lock:
            self._state.next_ts += 1
            ts = f"{1_700_000_000 + self._state.next_ts}.{self._state.next_ts:06d}"
        channel = payload.get("channel") or self.channel
        answer = {"ok": True, "channel": self.channel, "ts": ts, "message": {"text": payload.get("text")}}
        if not isinstance(channel, str):
            answer = {"ok": False, "error": "channel_not_found"}
            return 200, json.dumps(answer), {}, None, True
        return 200, json.dumps(answer), {}, ts, True

    # ----------------------------------------------------------------------- records
    def _record(self, request: SlackRequest) -> None:
        with self._state.lock:
            self._state.requests.append(request)

    @property
    def requests(self) -> list[SlackRequest]:
        """Every request received so far, in arrival order."""
        with self._state.lock:
            return list(self._state.requests)

    def delivered(self) -> list[SlackRequest]:
        """The requests Slack would have shown (HTTP 200 ``ok``)."""
        return [r for r in self.requests if r.delivered]

    def mark(self) -> int:
        """A position in the request log, for :meth:`since`."""
        with self._state.lock:
            return len(self._state.requests)

    def since(self, mark: int) -> list[SlackRequest]:
        """Requests received after :meth:`mark` returned ``mark``."""
        with self._state.lock:
            return list(self._state.requests[mark:])

    def clear(self) -> None:
        """Forget the recorded requests (scripted failures are kept)."""
        with self._state.lock:
            self._state.requests.clear()
