"""Publishing the capacity function's own events (``Capacity Adjusted``, ``Capacity Limited``) with
EventBridge ``PutEvents``, through an injected boto3 ``events`` client."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from batchpilot.own_events import OwnEvent, put_events_entry

__all__ = ["EventBridgePublisher"]

_PER_REQUEST = 10  # PutEvents takes at most 10 entries


class EventBridgePublisher:
    """Puts own events on one bus.

    Args:
        client: a boto3 ``events`` client (``batchpilot.adapters.aws.client("events")``).
        bus: the event bus name or ARN (``BATCHPILOT_EVENT_BUS``).
    """

    def __init__(self, client: Any, bus: str) -> None:
        self._client = client
        self._bus = bus

    def publish(self, events: Sequence[OwnEvent], resources: Sequence[str] = ()) -> list[str]:
        """Publish ``events`` (10 per ``PutEvents`` request).

        Args:
            events: the events, in order.
            resources: ARNs for the envelope's ``resources`` (the service environment).

        Returns:
            One line per entry EventBridge rejected (``"<detail-type>: <ErrorCode>"``); empty when
            all were accepted.

        Raises:
            botocore.exceptions.ClientError: the request itself failed (throttling already retried).
        """
        failures: list[str] = []
        for start in range(0, len(events), _PER_REQUEST):
            chunk = events[start : start + _PER_REQUEST]
            entries = [put_events_entry(event, self._bus, list(resources)) for event in chunk]
            response = self._client.put_events(Entries=entries)
            if not response.get("FailedEntryCount"):
                continue
            for event, result in zip(chunk, response.get("Entries", []), strict=False):
                if result.get("ErrorCode"):
                    failures.append(f"{event.detail_type}: {result['ErrorCode']}")
        return failures
