"""The chat channels a deployment configured, by name: what the alerts service delivers through.

The routing policy names channels (:class:`~batchpilot.alerts.policy.Channel`); the service looks
each one up here and knows nothing else about it. A channel the policy names but nobody registered
is "not configured": its facts go to the on-call topic instead (not a failure).
:meth:`ChannelRegistry.configured` builds it from every channel that registered itself
(:func:`batchpilot.alerts.channels.registered`), so adding a channel changes no wiring.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from batchpilot.alerts.channels import ChannelOptions, registered
from batchpilot.alerts.policy import Channel
from batchpilot.alerts.ports import Notifier

if TYPE_CHECKING:
    from batchpilot.alerts.ports import SecretReader
    from batchpilot.alerts.settings import AlertsSettings

__all__ = ["ChannelRegistry"]


class ChannelRegistry:
    """Notifiers by channel name (at most one per channel; a later registration replaces).

    Args:
        notifiers: the configured chat adapters (``None`` entries, for channels a deployment did
            not configure, are skipped).

    Raises:
        ValueError: a notifier claims the on-call topic's name (``sns``): the topic is not a chat
            channel, it is every channel's fallback.
    """

    def __init__(self, notifiers: Iterable[Notifier[Any] | None] = ()) -> None:
        self._by_name: dict[Channel, Notifier[Any]] = {}
        for notifier in notifiers:
            if notifier is not None:
                self.register(notifier)

    @classmethod
    def configured(
        cls, settings: AlertsSettings, secrets: SecretReader | None, options: ChannelOptions | None = None
    ) -> ChannelRegistry:
        """The notifiers of every registered channel the settings configure (each registration's
        factory; one that returns None is not configured).

        Args:
            settings: the alerts function's settings.
            secrets: where channels read their URLs and tokens (None: no chat channel configured).
            options: how notifiers wait and how long a request may take (tests inject these).
        """
        return cls(registration.factory(settings, secrets, options) for registration in registered())

    def register(self, notifier: Notifier[Any]) -> None:
        """Deliver ``notifier.name`` through ``notifier`` from now on."""
        if notifier.name is Channel.SNS:
            raise ValueError("the on-call topic is not a chat channel")
        self._by_name[notifier.name] = notifier

    def get(self, channel: Channel) -> Notifier[Any] | None:
        """The notifier of ``channel``, or None when it is not configured."""
        return self._by_name.get(channel)

    def __contains__(self, channel: object) -> bool:
        return channel in self._by_name

    def __iter__(self) -> Iterator[Channel]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)
