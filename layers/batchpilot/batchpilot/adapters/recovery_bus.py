"""Publishes batchpilot's own events (``source: batchpilot``) on EventBridge (injected client).

Implements :class:`batchpilot.recovery.service.EventSink`: PutEvents in chunks of 10 entries (the
API's limit); any failed entry or error raises
:class:`~batchpilot.recovery.service.PublishError` so the caller can hand the record back to SQS.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batchpilot.own_events import OwnEvent, put_events_entry
from batchpilot.recovery.service import PublishError

__all__ = ["EventBridgeSink"]

_MAX_ENTRIES = 10  # PutEvents: at most 10 entries per call


class EventBridgeSink:
    """PutEvents to one bus.

    Args:
        client: a boto3 ``events`` client.
        bus: the bus name or ARN (``BATCHPILOT_EVENT_BUS``).
    """

    def __init__(self, client: Any, bus: str) -> None:
        self.client = client
        self.bus = bus
        self.published = 0
        """Entries accepted so far (for reports and benchmarks)."""

    def publish(self, events: Sequence[OwnEvent]) -> None:
        """Put every event on the bus; the event's job ARN goes in ``resources`` when it has one.

        Raises:
            PublishError: the call failed or EventBridge rejected an entry.
        """
        entries = [put_events_entry(e, self.bus, _resources(e)) for e in events]
        for start in range(0, len(entries), _MAX_ENTRIES):
            chunk = entries[start : start + _MAX_ENTRIES]
            try:
                response = self.client.put_events(Entries=chunk)
            except (ClientError, BotoCoreError) as exc:
                raise PublishError(f"PutEvents failed: {type(exc).__name__}: {exc}") from None
            failed = int(response.get("FailedEntryCount") or 0)
            if failed:
                codes = sorted(
                    {str(r.get("ErrorCode")) for r in response.get("Entries", []) if r.get("ErrorCode")}
                )
                raise PublishError(f"PutEvents rejected {failed} of {len(chunk)} entries: {', '.join(codes)}")
            self.published += len(chunk)


def _resources(event: OwnEvent) -> list[str]:
    for name in ("new_job_arn", "failed_job_arn", "job_arn"):
        value = getattr(event, name, None)
        if isinstance(value, str) and value.startswith("arn:"):
            return [value]
    return []
