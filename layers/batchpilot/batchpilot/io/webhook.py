"""The one webhook transport: a JSON ``POST`` to a chat service's incoming webhook through urllib3,
bounded by the invocation's time left. Used by every webhook channel in
:mod:`batchpilot.alerts.channels` (Microsoft Teams, and any channel that registers itself as a
webhook channel); Slack's webhook goes through slack-sdk's own ``WebhookClient`` instead.

What it does, and nothing more (the channel decides what its answer means):

- a request is not started with less than :data:`~batchpilot.alerts.channels.MIN_REQUEST_SECONDS`
  left (:attr:`WebhookReply.reason` ``deadline``);
- each attempt's timeout is the time then left, at most the transport's ``timeout`` (connect at
  most :data:`CONNECT_TIMEOUT_SECONDS`), recomputed per attempt (urllib3 ``Timeout.clone``);
- a 429 is retried by urllib3's own ``Retry`` (``status_forcelist={429}``,
  ``respect_retry_after_header``, ``backoff_factor`` without the header), at most
  :data:`~batchpilot.alerts.channels.MAX_RATE_LIMIT_RETRIES` times and only while the wait plus
  ``MIN_REQUEST_SECONDS`` fits in the time left; then the 429 is the answer;
- every other answer is returned as is, once; a timeout or a dropped connection is not retried
  (the service may have posted already) and comes back as a short reason (``timeout``,
  ``connection_error``, ``client_error``), never as an exception nor with the URL.

The URL is a credential (a webhook's path or query is its secret): it is never logged (urllib3's
request lines, which print the path and query at DEBUG, are held at INFO:
:func:`batchpilot.io.secrets.protect_secret_logs`) and never part of a reason. urllib3 is already
in the layer (botocore depends on it) and is imported on the first post.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from batchpilot.io.secrets import protect_secret_logs
from batchpilot.shared.http_budget import (
    MAX_RATE_LIMIT_RETRIES,
    MIN_REQUEST_SECONDS,
    REQUEST_TIMEOUT_SECONDS,
    request_timeout,
)

if TYPE_CHECKING:
    from urllib3 import Timeout
    from urllib3.util.retry import Retry

    from batchpilot.alerts.ports import TimeLeft

__all__ = [
    "BACKOFF_FACTOR",
    "BACKOFF_MAX_SECONDS",
    "CONNECT_TIMEOUT_SECONDS",
    "REPLY_BODY_MAX",
    "RETRY_AFTER_MAX_SECONDS",
    "WebhookReply",
    "WebhookTransport",
    "deadline_policy",
    "exception_reason",
]

CONNECT_TIMEOUT_SECONDS = 5.0
"""Longest wait for the TCP and TLS connection of one request."""
BACKOFF_FACTOR = 0.5
"""urllib3 ``Retry.backoff_factor`` for a 429 without ``Retry-After``: waits 0, 1, 2 seconds."""
BACKOFF_MAX_SECONDS = 4.0
"""urllib3 ``Retry.backoff_max``: the longest backoff between two attempts."""
RETRY_AFTER_MAX_SECONDS = 900
"""urllib3 ``Retry.retry_after_max``: a ``Retry-After`` is read as at most Lambda's longest
timeout; a wait is taken only when it also fits in the time left."""
REPLY_BODY_MAX = 512
"""Characters of an answer's body kept in a :class:`WebhookReply` (error tokens are short)."""


@dataclass(frozen=True, slots=True)
class WebhookReply:
    """What one post came to.

    Attributes:
        status: the HTTP status of the last answer (after any 429 retries), or None when there was
            no answer (then ``reason`` says why).
        body: the answer's body as text, at most :data:`REPLY_BODY_MAX` characters ("" without one).
        reason: ``deadline`` (not started: no time left), ``timeout``, ``connection_error`` or
            ``client_error``; None when an answer came.
    """

    status: int | None
    body: str = ""
    reason: str | None = None


def exception_reason(exc: BaseException) -> str:
    """The short reason for a failed request: ``connection_error`` (refused, reset, DNS),
    ``timeout`` (connect or read), else ``client_error``; never the URL nor the message."""
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


def deadline_policy(time_left: TimeLeft, pause: Callable[[float], None], cap: float) -> tuple[Retry, Timeout]:
    """urllib3's ``Retry`` and ``Timeout`` for one webhook post, bounded by ``time_left()``.

    The retry (urllib3 ``Retry``: ``status_forcelist={429}``, ``allowed_methods={"POST"}``,
    ``respect_retry_after_header``) repeats a 429 at most ``MAX_RATE_LIMIT_RETRIES`` times,
    waiting ``Retry-After`` seconds (or, without the header, urllib3's exponential backoff:
    :data:`BACKOFF_FACTOR`, at most :data:`BACKOFF_MAX_SECONDS`) through ``pause``; it gives up at
    once (the 429 is the answer) when that wait plus ``MIN_REQUEST_SECONDS`` does not fit in
    ``time_left()``, so a post never sleeps past the invocation's budget. Anything else is final:
    another status is returned as is, and a timeout or a dropped connection raises (``connect``,
    ``read`` off; ``other`` errors come wrapped in ``MaxRetryError``), since the service may have
    posted already. The timeout is recomputed for every attempt (``clone``, which urllib3 calls per
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


class WebhookTransport:
    """POSTs JSON bodies to webhook URLs through one urllib3 ``PoolManager`` (made on the first
    post, kept for the connections), as the module docstring says.

    Args:
        sleep: how a 429 is waited out (``time.sleep``; tests record instead).
        timeout: longest seconds one request may take (less when the invocation has less left).
    """

    def __init__(
        self, *, sleep: Callable[[float], None] = time.sleep, timeout: float = REQUEST_TIMEOUT_SECONDS
    ) -> None:
        self._sleep = sleep
        self.timeout = timeout
        self._pool: Any = None

    def post(
        self, url: str, body: bytes, *, time_left: TimeLeft, headers: Mapping[str, str] | None = None
    ) -> WebhookReply:
        """POST ``body`` (UTF-8 JSON) to ``url``; never raises.

        Args:
            url: the webhook URL (a credential: never logged nor returned).
            body: the request body.
            time_left: seconds the invocation has left (Lambda context's remaining time).
            headers: extra request headers (``Content-Type`` is JSON unless given).

        Returns:
            the last answer's status and body, or the reason there was none.
        """
        if time_left() < MIN_REQUEST_SECONDS:
            return WebhookReply(None, reason="deadline")
        try:
            import urllib3

            protect_secret_logs()
            if self._pool is None:
                self._pool = urllib3.PoolManager(num_pools=4, maxsize=1)
            retries, timeout = deadline_policy(time_left, self._sleep, self.timeout)
            response = self._pool.request(
                "POST",
                url,
                body=body,
                headers={"Content-Type": "application/json; charset=utf-8", **(headers or {})},
                timeout=timeout,
                retries=retries,
                redirect=False,
            )
        except Exception as exc:  # a timeout or a refused connection: may or may not have posted
            return WebhookReply(None, reason=exception_reason(exc))
        text = bytes(response.data or b"")[: REPLY_BODY_MAX * 4].decode("utf-8", "replace")
        return WebhookReply(int(response.status), text[:REPLY_BODY_MAX])
