"""Which SQS record the work in progress belongs to: its correlation id.

Lambda hands each function a batch of SQS records; what the function emits for one record (a log
line, a metric value, an API call, an own event) belongs to that record, and what it emits for the
batch as a whole (a digest, a flush of gauges) belongs to none. Handlers mark the record being
handled with :func:`batchpilot.shared.observability.record_scope` (which also sets Powertools
Logger's ``correlation_id``); a service that works on a whole batch marks each record's part with
:func:`for_record`. Adapters read :func:`current_record` to tag what they emit: the EMF publisher
lists each metric value's record in the blob's :data:`CORRELATION_PROPERTY` (a property, not a
dimension: CloudWatch keeps no series per record, and the logs become searchable by it).

The id is the record's SQS ``messageId`` (what ``batchItemFailures`` names; it is unique within a
batch, where event ids repeat for a redelivered event). Pure: a :class:`contextvars.ContextVar`,
no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["CORRELATION_KEY", "CORRELATION_PROPERTY", "SENT_MESSAGE", "current_record", "for_record"]

CORRELATION_KEY = "correlation_id"
"""Log key of the record's id: Powertools Logger's own (``Logger.set_correlation_id``)."""
CORRELATION_PROPERTY = "correlation_ids"
"""EMF property of a blob: metric name → one record id (or null) per value, in the values' order."""
SENT_MESSAGE = "notification sent"
"""Log message of each message the alerts function delivered (one INFO line per message, in the
order its channel received them: ``channel``, ``severity``, and the ``correlation_id`` of the record
it tells about, or for a digest ``records`` and ``record_ids``)."""

_RECORD: ContextVar[str | None] = ContextVar("batchpilot_record", default=None)


def current_record() -> str | None:
    """The SQS ``messageId`` of the record being handled, or None outside any record (batch-level
    work: a digest, a flush, a scheduled run)."""
    return _RECORD.get()


@contextmanager
def for_record(record_id: str | None) -> Iterator[None]:
    """Inside the block, :func:`current_record` is ``record_id`` (None: the batch's own work);
    the previous value is restored on exit, also when the block raises."""
    token = _RECORD.set(record_id)
    try:
        yield
    finally:
        _RECORD.reset(token)
