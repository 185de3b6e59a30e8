"""What every webhook channel shares: the secret that holds its URL, the shared transport
(:class:`batchpilot.io.webhook.WebhookTransport`: deadline, 429 retries through urllib3's
``Retry``, error reasons) and the meaning of its answers. A webhook channel is a subclass that
renders (:meth:`WebhookNotifier.render`) and names its channel; :mod:`.teams` is one.

The URL lives in AWS Secrets Manager (plain text, or JSON ``{"url": "..."}``), named by the alerts
function's ``BATCHPILOT_<NAME>_WEBHOOK_SECRET`` (``AlertsSettings.webhook_secrets``); it is read on
each post (cached by :class:`batchpilot.io.secrets.SecretSource`) and never logged. It must be
``https://`` (or ``http://`` to a loopback address, the local sink): anything else is
``secret_invalid``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from batchpilot.alerts.channels import (
    REQUEST_TIMEOUT_SECONDS,
    ChannelOptions,
    Rendered,
    safe_url,
    secret_field,
)
from batchpilot.alerts.ports import Delivery, Notice, SecretReader, TimeLeft
from batchpilot.io.webhook import WebhookReply, WebhookTransport

if TYPE_CHECKING:
    from typing import Self

    from batchpilot.alerts.policy import Channel
    from batchpilot.alerts.settings import AlertsSettings

__all__ = ["WebhookNotifier", "webhook_delivery"]

M = TypeVar("M", bound=Rendered)


def webhook_delivery(reply: WebhookReply, *, delivered: bool) -> Delivery:
    """The :class:`Delivery` of a webhook ``reply``: delivered when the channel says so (its
    documented success answer); else ``rate_limited`` for a 429 still there after the retries (or
    whose wait did not fit in the time left), ``http_<status>`` for any other answer, or the
    transport's reason without one (``deadline``, ``timeout``, ``connection_error``)."""
    if reply.status is None:
        return Delivery(False, reply.reason or "client_error")
    if delivered:
        return Delivery(True)
    if reply.status == 429:
        return Delivery(False, "rate_limited")
    return Delivery(False, f"http_{reply.status}")


class WebhookNotifier(Generic[M]):
    """A chat channel posted through an incoming webhook (:class:`batchpilot.alerts.ports.Notifier`
    of ``M``). Webhooks post new messages only: never threaded.

    Subclasses set :attr:`channel` and implement :meth:`render`; they may override
    :meth:`accepted` (default: any 2xx is delivered).

    Args:
        secrets: where the webhook URL is read.
        webhook_secret: secret id (ARN or name) of the webhook URL.
        sleep: how to wait out a 429 (``time.sleep``).
        timeout: seconds to wait for an answer (less when the invocation has less time left).

    Raises:
        ValueError: no webhook secret.
    """

    channel: ClassVar[Channel]

    def __init__(
        self,
        secrets: SecretReader,
        *,
        webhook_secret: str,
        sleep: Callable[[float], None] = time.sleep,
        timeout: float = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        if not webhook_secret:
            raise ValueError(f"{self.channel.label} needs the secret of its webhook URL")
        self._secrets = secrets
        self.webhook_secret = webhook_secret
        self._transport = WebhookTransport(sleep=sleep, timeout=timeout)

    @classmethod
    def configured(
        cls, settings: AlertsSettings, secrets: SecretReader | None, options: ChannelOptions | None = None
    ) -> Self | None:
        """The notifier the function's settings configure (its ``webhook_secrets`` entry), or None."""
        secret = settings.webhook_secrets.get(cls.channel)
        if secrets is None or not secret:
            return None
        options = options or ChannelOptions()
        return cls(secrets, webhook_secret=secret, sleep=options.sleep, timeout=options.timeout)

    @property
    def name(self) -> Channel:
        """The channel this notifier delivers."""
        return self.channel

    @property
    def threads(self) -> bool:
        """False: a webhook posts new messages only."""
        return False

    def render(self, notice: Notice) -> M:
        """The channel's message for ``notice``, within its documented limits."""
        raise NotImplementedError

    def accepted(self, reply: WebhookReply) -> bool:
        """The channel's documented success answer (default: any 2xx)."""
        return reply.status is not None and 200 <= reply.status < 300

    def post(self, message: M, *, thread: str | None, time_left: TimeLeft) -> Delivery:
        """POST ``message.body()`` to the webhook; never raises (``thread`` is ignored)."""
        try:
            secret = self._secrets.get(self.webhook_secret)
        except Exception:  # GetParameterError (AccessDenied, ResourceNotFound, throttled)
            return Delivery(False, "secret_unavailable")
        url = secret_field(secret, "url")
        if not url:
            return Delivery(False, "secret_unavailable")
        if not safe_url(url):
            return Delivery(False, "secret_invalid")
        reply = self._transport.post(url, message.body(), time_left=time_left)
        return webhook_delivery(reply, delivered=self.accepted(reply))
