"""Chat channel adapters (:class:`batchpilot.alerts.ports.Notifier`): one module per channel, each
with its renderer and its poster (:mod:`.slack`, :mod:`.teams`), and the rules they share.

Channels register themselves: a channel module decorates its notifier class with
:func:`register_channel` (its :class:`~batchpilot.alerts.policy.Channel`, its documented render
limits, how it escapes event text, the answer its service gives a delivered post), and
:func:`registered` imports every module of this package and returns the registrations, in the
order of ``Channel``. :meth:`batchpilot.alerts.registry.ChannelRegistry.configured` builds the
configured ones from the function's settings, so ``functions/alerts/app.py`` names no channel, and
the channel contract test (``tests/integration/test_channel_contract.py``) runs every registered
channel through the same cases. A webhook channel builds on
:class:`batchpilot.alerts.channels.webhook.WebhookNotifier` (the shared transport,
:mod:`batchpilot.io.webhook`).

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

import importlib
import ipaddress
import json
import pkgutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

from batchpilot.shared.http_budget import (
    MAX_RATE_LIMIT_RETRIES,
    MIN_REQUEST_SECONDS,
    REQUEST_TIMEOUT_SECONDS,
    request_timeout,
)

if TYPE_CHECKING:
    from batchpilot.alerts.policy import Channel
    from batchpilot.alerts.ports import Notifier, SecretReader
    from batchpilot.alerts.settings import AlertsSettings

__all__ = [
    "MAX_RATE_LIMIT_RETRIES",
    "MIN_REQUEST_SECONDS",
    "REQUEST_TIMEOUT_SECONDS",
    "ChannelOptions",
    "Registration",
    "RenderLimits",
    "Rendered",
    "register_channel",
    "registered",
    "request_timeout",
    "retry_after_seconds",
    "safe_url",
    "secret_field",
]


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


# ------------------------------------------------------------------------------- registration
@dataclass(frozen=True, slots=True)
class RenderLimits:
    """A channel's documented message limits, which its renderer keeps.

    Attributes:
        headline: characters of the message's headline (:meth:`Rendered.headline`).
        body: UTF-8 bytes of the request body (:meth:`Rendered.body`).
    """

    headline: int
    body: int


@dataclass(frozen=True, slots=True)
class ChannelOptions:
    """How a configured notifier waits and how long a request may take (tests inject these).

    Attributes:
        sleep: how a 429 is waited out (``time.sleep``).
        timeout: longest seconds of one request (less when the invocation has less left).
    """

    sleep: Callable[[float], None] = field(default=time.sleep)
    timeout: float = REQUEST_TIMEOUT_SECONDS


class Rendered(Protocol):
    """What every channel's message offers besides its own shape: the one-line summary
    (notifications, screen readers), the headline and the request body."""

    def summary(self) -> str:
        """The one-line summary as sent (severity and the whole title, escaped for the channel)."""
        ...

    def headline(self) -> str:
        """The message's headline as the channel shows it."""
        ...

    def body(self) -> bytes:
        """The request body as sent (UTF-8 JSON)."""
        ...


Factory = Callable[["AlertsSettings", "SecretReader | None", "ChannelOptions | None"], "Notifier[Any] | None"]


@dataclass(frozen=True, slots=True)
class Registration:
    """One registered channel.

    Attributes:
        channel: its routing name.
        factory: ``(settings, secrets, options) -> notifier | None`` (None: not configured; the
            notifier class's ``configured``).
        limits: its documented render limits.
        escape: what it does to event text in its summary line (:meth:`Rendered.summary`).
        accepted: the answer its service gives a delivered webhook post, ``(status, body)``.
    """

    channel: Channel
    factory: Factory
    limits: RenderLimits
    escape: Callable[[str], str]
    accepted: tuple[int, str]


class _Configurable(Protocol):
    @classmethod
    def configured(
        cls, settings: AlertsSettings, secrets: SecretReader | None, options: ChannelOptions | None = None
    ) -> Notifier[Any] | None: ...


C = TypeVar("C", bound=_Configurable)
_REGISTERED: dict[str, Registration] = {}


def register_channel(
    channel: Channel, *, limits: RenderLimits, escape: Callable[[str], str], accepted: tuple[int, str]
) -> Callable[[type[C]], type[C]]:
    """Class decorator: register the notifier class as ``channel`` (see :class:`Registration`);
    its ``configured(settings, secrets, options)`` classmethod is the factory. A later
    registration of the same channel replaces the earlier one."""

    def decorate(cls: type[C]) -> type[C]:
        _REGISTERED[channel.value] = Registration(channel, cls.configured, limits, escape, accepted)
        return cls

    return decorate


def registered() -> tuple[Registration, ...]:
    """Every channel registered by the modules of this package (each imported once: cheap, a
    channel imports its client library only when it first posts), in ``Channel`` order."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    from batchpilot.alerts.policy import Channel

    order = list(Channel)
    return tuple(sorted(_REGISTERED.values(), key=lambda r: order.index(r.channel)))
