"""The one place that creates Powertools' Logger and Metrics for every function, and the one way
to count and log a record's outcome.

Handlers import ``logger`` and ``metrics`` from here. The logger never logs whole events (Batch
events carry container environments and commands): ids, detail-types and reasons only, each
event-controlled string cut to :data:`MAX_LOG_FIELD` characters. Tracer is left out of the metrics
path on purpose: the X-Ray SDK would double its cold start.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from batchpilot.shared.records import Outcome, Rejected
from batchpilot.shared.settings import FunctionSettings

__all__ = ["COUNTERS", "MAX_LOG_FIELD", "configure", "count_outcome", "log_field", "logger", "metrics"]

logger = Logger(log_uncaught_exceptions=True)
"""JSON logger; ``service`` and level come from POWERTOOLS_SERVICE_NAME / POWERTOOLS_LOG_LEVEL."""

metrics = Metrics()
"""The function's own counters (events processed, ignored, invalid). Handlers set ``namespace`` and
``service`` from their validated settings at cold start (:func:`configure`)."""

COUNTERS = {
    Outcome.PROCESSED: "EventsProcessed",
    Outcome.DUPLICATE: "DuplicateEvents",
    Outcome.IGNORED: "EventsIgnored",
    Outcome.INVALID: "InvalidEvents",
}
"""The function counter (unit ``Count``) each record :class:`Outcome` adds 1 to."""

MAX_LOG_FIELD = 256
"""Longest event-controlled string a log line carries, in characters (longer ones are cut)."""


def log_field(value: Any) -> Any:
    """``value`` for a log line: strings cut to :data:`MAX_LOG_FIELD` characters with a mark."""
    if isinstance(value, str) and len(value) > MAX_LOG_FIELD:
        return value[: MAX_LOG_FIELD - 1] + "…"
    return value


def configure(settings: FunctionSettings) -> None:
    """Apply validated settings at cold start: namespace, ``service`` and ``Function`` dimensions."""
    metrics.namespace = settings.namespace
    metrics.service = settings.service
    metrics.set_default_dimensions(Function=settings.function)
    logger.append_keys(service=settings.service, function=settings.function)


def count_outcome(outcome: Outcome | Rejected, message: str = "event handled", **fields: Any) -> None:
    """Count one record (:data:`COUNTERS`) and log it: a :class:`Rejected` record at WARNING with
    its reason, anything else at INFO when ``fields`` say something. ``fields`` must be ids,
    names, enums or numbers, never an event; ``None`` values are dropped and strings cut."""
    if isinstance(outcome, Rejected):
        metrics.add_metric(name=COUNTERS[outcome.outcome], unit=MetricUnit.Count, value=1)
        extra = {
            "outcome": outcome.outcome.value,
            "event_id": outcome.event_id,
            "detail_type": outcome.detail_type,
            "error": outcome.error,
            **fields,
        }
        logger.warning("event not processed", extra=_clean(extra))
        return
    metrics.add_metric(name=COUNTERS[outcome], unit=MetricUnit.Count, value=1)
    if fields:
        logger.info(message, extra=_clean({"outcome": outcome.value, **fields}))


def _clean(fields: dict[str, Any]) -> dict[str, Any]:
    return {key: log_field(value) for key, value in fields.items() if value is not None}
