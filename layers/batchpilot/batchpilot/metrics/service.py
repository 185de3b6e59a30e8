"""From one SQS record to published job metrics: decode, parse, classify, derive, publish.

The seam between the metrics handler and the pure domain: handler code stays a few lines, and the
same path runs in Lambda, in ``batchpilot replay`` and in the tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from batchpilot.shared.classification import JobFacts, classify
from batchpilot.shared.events import InvalidEventError, JobEvent, UnsupportedEventError, parse_event_json
from batchpilot.shared.metrics import MetricPoint, metric_points

__all__ = ["Outcome", "RecordResult", "decode_record", "handle_metrics_record"]


class Outcome(StrEnum):
    """What happened to one record. Only a raised exception makes SQS deliver it again."""

    PROCESSED = "processed"
    IGNORED = "ignored"  # a detail-type batchpilot does not handle: not retried
    INVALID = "invalid"  # malformed: reported and counted, not retried (it would fail again)


@dataclass(frozen=True, slots=True)
class RecordResult:
    """Outcome of one record, with what the logs may say about it (never the event itself)."""

    outcome: Outcome
    event_id: str | None = None
    detail_type: str | None = None
    facts: JobFacts | None = None
    error: str | None = None


class Publisher(Protocol):
    """Anything that buffers metric points (see :class:`batchpilot.io.emf.EmfPublisher`)."""

    def add(self, points: list[MetricPoint]) -> None: ...


def decode_record(body: str) -> JobEvent:
    """Decode an SQS message body (the EventBridge event as JSON text) and parse it.

    Raises:
        InvalidEventError: the body is not JSON or not a valid event.
        UnsupportedEventError: a detail-type batchpilot does not handle.
    """
    return parse_event_json(body)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def handle_metrics_record(
    body: str, publisher: Publisher, now: Callable[[], datetime] = _utcnow
) -> RecordResult:
    """Derive the job metrics of one SQS record's event and hand them to the publisher's buffer.

    Returns:
        A :class:`RecordResult`; malformed and unsupported events are results, not exceptions.

    Raises:
        Whatever the publisher raises (a bug): the batch processor then reports the record as a
        failure and SQS retries it, up to the queue's redrive limit, then the dead-letter queue.
    """
    try:
        event = decode_record(body)
    except UnsupportedEventError as exc:
        return RecordResult(Outcome.IGNORED, exc.event_id, exc.detail_type, error=str(exc))
    except InvalidEventError as exc:
        return RecordResult(Outcome.INVALID, exc.event_id, exc.detail_type, error=str(exc))
    facts = classify(event)
    publisher.add(metric_points(facts, event.time, now()))
    return RecordResult(Outcome.PROCESSED, event.id, event.detail_type, facts)
