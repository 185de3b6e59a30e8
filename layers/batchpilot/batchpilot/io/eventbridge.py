"""EventBridge adapter: batchpilot's own events (``source: batchpilot``) onto its bus.

One publisher for every feature (recovery, capacity), with one error contract: every event is
accepted or :class:`~batchpilot.shared.own_events.PublishError` is raised, so the caller can hand
its record back to SQS or report the run as failed. Throttling is retried by botocore's standard
retry mode (:mod:`batchpilot.io.clients`). API: EventBridge ``PutEvents`` (at most 10 entries).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batchpilot.shared.own_events import OwnEvent, PublishError, put_events_entry

__all__ = ["EventBridgePublisher"]

_MAX_ENTRIES = 10  # PutEvents: at most 10 entries per call


class EventBridgePublisher:
    """PutEvents to one bus.

    Args:
        client: a boto3 ``events`` client (:func:`batchpilot.io.clients.client`).
        bus: the bus name or ARN (``BATCHPILOT_EVENT_BUS``).
    """

    def __init__(self, client: Any, bus: str) -> None:
        self.client = client
        self.bus = bus

    def publish(self, events: Sequence[OwnEvent], resources: Sequence[str] | None = None) -> None:
        """Put every event on the bus, in order, 10 per request.

        Args:
            events: the events.
            resources: ARNs for each envelope's ``resources`` (a service environment); ``None``
                uses the event's own job ARN (``new_job_arn``, ``failed_job_arn`` or ``job_arn``).

        Raises:
            PublishError: the request failed or EventBridge rejected an entry (the message names
                the detail-types and error codes, never the details).
        """
        entries = [
            put_events_entry(e, self.bus, list(resources) if resources is not None else _resources(e))
            for e in events
        ]
        for start in range(0, len(entries), _MAX_ENTRIES):
            chunk = entries[start : start + _MAX_ENTRIES]
            try:
                response = self.client.put_events(Entries=chunk)
            except (ClientError, BotoCoreError) as exc:
                raise PublishError(f"PutEvents failed: {type(exc).__name__}") from None
            failed = int(response.get("FailedEntryCount") or 0)
            if failed:
                rejected = sorted(
                    {
                        f"{entry['DetailType']}: {result.get('ErrorCode')}"
                        for entry, result in zip(chunk, response.get("Entries", []), strict=False)
                        if result.get("ErrorCode")
                    }
                )
                raise PublishError(
                    f"PutEvents rejected {failed} of {len(chunk)} entries: {', '.join(rejected)}"
                )


def _resources(event: OwnEvent) -> list[str]:
    for name in ("new_job_arn", "failed_job_arn", "job_arn"):
        value = getattr(event, name, None)
        if isinstance(value, str) and value.startswith("arn:"):
            return [value]
    return []
