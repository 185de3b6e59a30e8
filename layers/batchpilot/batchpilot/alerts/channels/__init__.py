"""Chat channel adapters (:class:`batchpilot.alerts.ports.Notifier`): one module per channel, each
with its renderer and its poster (:mod:`.slack`, :mod:`.teams`), and the rules they share.

A channel's client library (slack_sdk, urllib3) is imported when the channel first posts, never
when this package or an adapter module is imported: a deployment without that channel never loads
it. Secrets (webhook URLs, tokens) are read through :class:`batchpilot.alerts.ports.SecretReader`
and never logged.

Shared delivery rules: only the channel's documented success answer counts as delivered; a 429 is
waited out (``Retry-After``) only while the wait fits in the time left, at most
:data:`MAX_RATE_LIMIT_RETRIES` times; every other failure is final at once (a 5xx or a timeout may
have posted already, and the fallback to the on-call topic must not be delayed).
"""

from __future__ import annotations

import ipaddress
import json
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from batchpilot.alerts.ports import TimeLeft

__all__ = [
    "MAX_RATE_LIMIT_RETRIES",
    "MIN_REQUEST_SECONDS",
    "REQUEST_TIMEOUT_SECONDS",
    "request_timeout",
    "retry_after_seconds",
    "safe_url",
    "secret_field",
]

MAX_RATE_LIMIT_RETRIES = 3
"""429 answers waited out per post, at most."""
REQUEST_TIMEOUT_SECONDS = 10.0
"""Longest wait for one HTTP request (less when the invocation has less time left)."""
MIN_REQUEST_SECONDS = 0.5
"""A request is not started (nor a 429 waited out) with less time left than this: it could not
finish, and the on-call fallback needs the time."""


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


def secret_field(value: str, key: str) -> str:
    """A secret's value as stored: plain text, or JSON ``{key: "..."}``; empty when unusable."""
    text = value.strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return ""
        found = parsed.get(key) if isinstance(parsed, dict) else None
        return found.strip() if isinstance(found, str) else ""
    return text


def retry_after_seconds(value: str | None, default: float = 1.0) -> float:
    """A ``Retry-After`` header in seconds: delay-seconds or an HTTP-date (RFC 9110, section
    10.2.3); ``default`` when missing or unreadable; never negative."""
    if not value:
        return default
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime  # rare: Slack and Workflows send seconds

    try:
        return max(0.0, parsedate_to_datetime(text).timestamp() - time.time())
    except (TypeError, ValueError):
        return default


def request_timeout(time_left: TimeLeft, cap: float = REQUEST_TIMEOUT_SECONDS) -> Any:
    """Seconds one request may take: the time left, at most ``cap``, at least 0.1 (never rounded up:
    a request must not outlive the time left; urllib3 refuses 0). Typed ``Any``: slack-sdk annotates
    its ``timeout`` as ``int`` but hands it to ``urllib.request.urlopen``, which takes float seconds."""
    return max(0.1, min(cap, time_left()))
