"""Slack through slack-sdk: an incoming webhook (``WebhookClient``) or a bot token
(``WebClient.chat_postMessage``, threaded per job). Never hand-written HTTP.

Secrets: the webhook URL and the bot token live in AWS Secrets Manager and are read with
Powertools' parameters utility (``SecretsProvider``, cached for :data:`SECRET_MAX_AGE_SECONDS`);
the environment only names the secret. Neither value is ever logged: slack-sdk's own logger is
given a logger that drops everything below CRITICAL (its DEBUG lines print the URL and the
``Authorization`` header), and botocore's response-body logging is capped at INFO.

Delivery rules (issue 3, item 5; F9, F10):

- delivered means HTTP 200 with body ``ok`` (webhook) or ``{"ok": true}`` (``chat.postMessage``);
- 429: wait ``Retry-After`` seconds and try again, only while the wait fits in the time the
  function has left (:class:`DeadlineRateLimitRetryHandler`), at most :data:`MAX_RATE_LIMIT_RETRIES`
  times; then the post has failed with reason ``rate_limited``;
- every other answer (400 ``invalid_blocks``, 403 ``action_prohibited``, 404 ``no_service`` /
  ``channel_not_found``, 410 ``channel_is_archived``, 5xx, a timeout, a refused connection) fails
  at once, without a retry: a 5xx or a timeout may have posted already, and the caller's fallback to
  the on-call topic must not be delayed.

Secret values: the webhook secret holds the URL as plain text, or JSON ``{"url": "..."}``; the
bot token secret the token (``xoxb-...``) or JSON ``{"token": "..."}``.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from batchpilot.alerts.dispatch import SlackResult
from batchpilot.alerts.render import SlackMessage

__all__ = [
    "MAX_RATE_LIMIT_RETRIES",
    "SECRET_MAX_AGE_SECONDS",
    "DeadlineRateLimitRetryHandler",
    "SecretSource",
    "SlackNotifier",
    "quiet_logger",
    "reason_code",
]

SECRET_MAX_AGE_SECONDS = 300
"""Powertools cache lifetime of the webhook URL / bot token: a rotated secret is used within 5 minutes."""
MAX_RATE_LIMIT_RETRIES = 3
REQUEST_TIMEOUT_SECONDS = 10
_TOKEN = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def quiet_logger() -> logging.Logger:
    """The logger handed to slack-sdk clients: it never emits (slack-sdk logs the webhook URL and
    request headers at DEBUG whenever its logger's own level is NOTSET or DEBUG)."""
    log = logging.getLogger("batchpilot.slack_sdk")
    log.setLevel(logging.CRITICAL + 10)
    log.propagate = False
    return log


def _protect_secret_logs() -> None:
    # botocore logs whole response bodies (GetSecretValue's SecretString) at DEBUG.
    for name in ("botocore.parsers", "botocore.endpoint", "urllib3.connectionpool"):
        log = logging.getLogger(name)
        if log.getEffectiveLevel() < logging.INFO:
            log.setLevel(logging.INFO)


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


def _retry_after(response: HttpResponse) -> float:
    for name, values in response.headers.items():
        if name.lower() == "retry-after" and values:
            try:
                return max(0.0, float(values[0]))
            except ValueError:
                break
    return 1.0


class DeadlineRateLimitRetryHandler(RateLimitErrorRetryHandler):
    """slack-sdk's rate-limit handler, bounded by the function's remaining time.

    Retries a 429 only when ``Retry-After`` (seconds) fits in ``remaining()`` (seconds left for
    Slack, the caller's reserve already subtracted), sleeps exactly ``Retry-After``, and gives up
    after ``max_retry_count`` retries.
    """

    def __init__(
        self,
        remaining: Callable[[], float],
        *,
        max_retry_count: int = MAX_RATE_LIMIT_RETRIES,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.remaining = remaining
        self.sleep = sleep
        self.retries = 0
        self.waited = 0.0

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
        return _retry_after(response) < self.remaining()

    def prepare_for_next_attempt(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        state.next_attempt_requested = True
        wait = _retry_after(response) if response is not None else 1.0
        self.sleep(wait)
        self.waited += wait
        self.retries += 1
        state.increment_current_attempt()


class SecretSource:
    """Reads secrets with Powertools' ``SecretsProvider`` (cached), from an injected boto3 client.

    Args:
        client: a boto3 Secrets Manager client (``batchpilot.io.clients.client("secretsmanager")``).
        max_age: cache lifetime in seconds.
    """

    def __init__(self, client: Any, max_age: int = SECRET_MAX_AGE_SECONDS) -> None:
        from aws_lambda_powertools.utilities.parameters import SecretsProvider

        _protect_secret_logs()
        self._provider = SecretsProvider(boto3_client=client)
        self.max_age = max_age

    def get(self, secret_id: str) -> str:
        """The secret's string value (``GetSecretValue``; cached).

        Raises:
            aws_lambda_powertools.utilities.parameters.GetParameterError: it cannot be read.
        """
        value = self._provider.get(secret_id, max_age=self.max_age)
        if isinstance(value, bytes):
            return value.decode("utf-8")
        return str(value)


def _secret_field(value: str, key: str) -> str:
    text = value.strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return ""
        found = parsed.get(key) if isinstance(parsed, dict) else None
        return found.strip() if isinstance(found, str) else ""
    return text


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def safe_url(url: str) -> bool:
    """True for an ``https://`` URL, or ``http://`` to a loopback address (the local endpoint)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.scheme == "https" and parts.hostname:
        return True
    return parts.scheme == "http" and _is_loopback(parts.hostname)


class SlackNotifier:
    """:class:`batchpilot.alerts.dispatch.SlackChannel` on slack-sdk.

    With a bot token (and channel) it posts with ``chat.postMessage`` and threads messages about
    one job; otherwise with the incoming webhook; with neither it is not configured.

    Args:
        secrets: where the webhook URL / bot token are read (a :class:`SecretSource`).
        webhook_secret: secret id (ARN or name) of the webhook URL, or None.
        bot_token_secret: secret id of the bot token, or None.
        channel: channel id or name for ``chat.postMessage`` (required with a bot token).
        api_url: Slack Web API base URL (``https://slack.com/api/``; a loopback URL locally).
        sleep: how to wait out a 429 (``time.sleep``).
        timeout: seconds per HTTP request.
    """

    def __init__(
        self,
        secrets: SecretSource | None,
        *,
        webhook_secret: str | None = None,
        bot_token_secret: str | None = None,
        channel: str | None = None,
        api_url: str = "https://slack.com/api/",
        sleep: Callable[[float], None] = time.sleep,
        timeout: int = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        self._secrets = secrets
        self.webhook_secret = webhook_secret or None
        self.bot_token_secret = bot_token_secret or None
        self.channel = channel or None
        self.api_url = api_url if api_url.endswith("/") else api_url + "/"
        self._sleep = sleep
        self._timeout = timeout
        self._logger = quiet_logger()
        self.calls = 0
        """HTTP requests sent to Slack (retries included; for the benchmark)."""

    @property
    def configured(self) -> bool:
        """A webhook, or a bot token with a channel, is configured."""
        return self._secrets is not None and bool(
            self.webhook_secret or (self.bot_token_secret and self.channel)
        )

    @property
    def threads(self) -> bool:
        """Bot token mode: messages about one job go into one thread."""
        return self._secrets is not None and bool(self.bot_token_secret and self.channel)

    def post(
        self, message: SlackMessage, *, thread_ts: str | None = None, remaining: Callable[[], float]
    ) -> SlackResult:
        """Post ``message``; never raises. ``remaining()``: seconds left for waiting out a 429."""
        if not self.configured or self._secrets is None:
            return SlackResult(False, "not_configured")
        handler = DeadlineRateLimitRetryHandler(remaining, sleep=self._sleep)
        try:
            if self.threads:
                return self._post_bot(message, thread_ts, handler)
            return self._post_webhook(message, handler)
        except Exception as exc:  # connection refused, timeout, TLS: may or may not have posted
            return SlackResult(False, _exception_reason(exc))

    def _secret(self, secret_id: str, key: str) -> str | None:
        assert self._secrets is not None
        try:
            return _secret_field(self._secrets.get(secret_id), key) or None
        except Exception:  # GetParameterError (AccessDenied, ResourceNotFound, throttled)
            return None

    def _post_webhook(self, message: SlackMessage, handler: DeadlineRateLimitRetryHandler) -> SlackResult:
        from slack_sdk.webhook import WebhookClient

        assert self.webhook_secret is not None
        url = self._secret(self.webhook_secret, "url")
        if url is None:
            return SlackResult(False, "secret_unavailable")
        if not safe_url(url):
            return SlackResult(False, "secret_invalid")
        client = WebhookClient(url, timeout=self._timeout, logger=self._logger, retry_handlers=[handler])
        response = client.send(
            text=message.text, blocks=message.blocks, unfurl_links=False, unfurl_media=False
        )
        self.calls += 1 + handler.retries
        if response.status_code == 200 and (response.body or "").strip() == "ok":
            return SlackResult(True)
        if response.status_code == 429:
            return SlackResult(False, "rate_limited")
        return SlackResult(False, reason_code(response.status_code, response.body))

    def _post_bot(
        self, message: SlackMessage, thread_ts: str | None, handler: DeadlineRateLimitRetryHandler
    ) -> SlackResult:
        from slack_sdk import WebClient
        from slack_sdk.errors import SlackApiError

        assert self.bot_token_secret is not None and self.channel is not None
        token = self._secret(self.bot_token_secret, "token")
        if token is None:
            return SlackResult(False, "secret_unavailable")
        if not safe_url(self.api_url):
            return SlackResult(False, "api_url_invalid")
        client = WebClient(
            token=token,
            base_url=self.api_url,
            timeout=self._timeout,
            logger=self._logger,
            retry_handlers=[handler],
        )
        try:
            response = client.chat_postMessage(
                channel=self.channel,
                text=message.text,
                blocks=message.blocks,
                thread_ts=thread_ts,
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as exc:
            self.calls += 1 + handler.retries
            status = getattr(exc.response, "status_code", None)
            if status == 429:
                return SlackResult(False, "rate_limited")
            error = exc.response.get("error") if hasattr(exc.response, "get") else None
            return SlackResult(False, reason_code(status, error if isinstance(error, str) else None))
        self.calls += 1 + handler.retries
        if response.status_code == 200 and response.get("ok") is True:
            ts = response.get("ts")
            return SlackResult(True, ts=ts if isinstance(ts, str) else None)
        return SlackResult(False, reason_code(response.status_code, None))


def _exception_reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__} {exc}".lower()
    if "timed out" in text or "timeout" in text:
        return "timeout"
    if "refused" in text or "unreachable" in text or "urlerror" in text or "connection" in text:
        return "connection_error"
    return "client_error"
