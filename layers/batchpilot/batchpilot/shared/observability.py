"""The one place that creates Powertools' Logger and Metrics for every function, and the one way
to count and log a record's outcome.

Handlers import ``logger`` and ``metrics`` from here. The logger never logs whole events (Batch
events carry container environments and commands): ids, detail-types and reasons only, each
event-controlled string cut to :data:`MAX_LOG_FIELD` characters. Tracer is left out of the metrics
path on purpose: the X-Ray SDK would double its cold start.

Each record's work runs inside :func:`record_scope` (its SQS ``messageId``): every log line then
carries it as Powertools' ``correlation_id``, and every counter value (:func:`count`) and EMF
value (:mod:`batchpilot.io.emf`) is listed under it in the blob's ``correlation_ids`` property
(:mod:`batchpilot.shared.correlation`), so CloudWatch Logs Insights finds everything one record
caused (``filter correlation_id = "<messageId>" or @message like "<messageId>"``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from batchpilot.shared.correlation import CORRELATION_PROPERTY, current_record, for_record
from batchpilot.shared.records import Outcome, Rejected
from batchpilot.shared.settings import FunctionSettings

__all__ = [
    "COUNTERS",
    "MAX_LOG_FIELD",
    "PERMANENT_ERRORS",
    "configure",
    "correlation_metadata",
    "count",
    "count_outcome",
    "entry",
    "log_field",
    "logger",
    "metrics",
    "record_scope",
]

_R = TypeVar("_R")

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

PERMANENT_ERRORS = "PermanentErrors"
"""The counter (unit ``Count``) of records AWS refused for good (:mod:`batchpilot.shared.errors`):
reported and not retried."""

MAX_LOG_FIELD = 256
"""Longest event-controlled string a log line carries, in characters (longer ones are cut)."""


def log_field(value: Any) -> Any:
    """``value`` for a log line: strings cut to :data:`MAX_LOG_FIELD` characters with a mark."""
    if isinstance(value, str) and len(value) > MAX_LOG_FIELD:
        return value[: MAX_LOG_FIELD - 1] + "…"
    return value


def entry(handler: Callable[[Any, Any], _R]) -> Callable[[Any, Any], _R]:
    """A Lambda entry (``(event, context)``) with Powertools' Logger context (the event never
    logged: ``log_event=False``) and the function's counters written once per invocation, with the
    cold start metric: what every ``functions/<name>/app.py`` entry is decorated with."""
    with_metrics = metrics.log_metrics(handler, capture_cold_start_metric=True)
    return logger.inject_lambda_context(with_metrics, log_event=False)


def configure(settings: FunctionSettings) -> None:
    """Apply validated settings at cold start: namespace, ``service`` and ``Function`` dimensions."""
    metrics.namespace = settings.namespace
    metrics.service = settings.service
    metrics.set_default_dimensions(Function=settings.function)
    logger.append_keys(service=settings.service, function=settings.function)


@contextmanager
def record_scope(record_id: str | None) -> Iterator[None]:
    """Inside the block, the work is the SQS record ``record_id``'s (its ``messageId``; None: the
    batch's own): log lines carry ``correlation_id`` (Powertools ``Logger.set_correlation_id``),
    and counters and EMF values are listed under it (:func:`batchpilot.shared.correlation.for_record`).
    The previous correlation id is put back on exit."""
    previous = logger.get_correlation_id()
    logger.set_correlation_id(record_id)
    try:
        with for_record(record_id):
            yield
    finally:
        logger.set_correlation_id(previous)


def count(name: str, value: float = 1) -> None:
    """Add ``value`` (unit ``Count``) to the function counter ``name`` on the shared ``metrics``
    (written by ``log_metrics`` at the end of the invocation), and list the current record (None
    outside :func:`record_scope`) for that value in the blob's ``correlation_ids`` property."""
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    ids = metrics.metadata_set.get(CORRELATION_PROPERTY)
    if not isinstance(ids, dict):  # the first value since Powertools last wrote (and cleared) the set
        ids = {}
        metrics.add_metadata(key=CORRELATION_PROPERTY, value=ids)
    ids.setdefault(name, []).append(current_record())


def correlation_metadata(name: str) -> dict[str, Any]:
    """The ``correlation_ids`` property of a one-value blob of metric ``name`` (Powertools
    ``single_metric``): ``{"correlation_ids": {name: [current record or None]}}``."""
    return {CORRELATION_PROPERTY: {name: [current_record()]}}


def count_outcome(outcome: Outcome | Rejected, message: str = "event handled", **fields: Any) -> None:
    """Count one record (:data:`COUNTERS`) and log it: a :class:`Rejected` record at WARNING with
    its reason, anything else at INFO when ``fields`` say something. ``fields`` must be ids,
    names, enums or numbers, never an event; ``None`` values are dropped and strings cut. A
    permanent refusal (``Rejected.permanent``) also adds 1 to ``PermanentErrors`` and is logged
    with ``permanent: true``."""
    if isinstance(outcome, Rejected):
        count(COUNTERS[outcome.outcome])
        if outcome.permanent:
            count(PERMANENT_ERRORS)
        extra = {
            "outcome": outcome.outcome.value,
            "permanent": True if outcome.permanent else None,
            "event_id": outcome.event_id,
            "detail_type": outcome.detail_type,
            "error": outcome.error,
            **fields,
        }
        logger.warning("event not processed", extra=_clean(extra))
        return
    count(COUNTERS[outcome])
    if fields:
        logger.info(message, extra=_clean({"outcome": outcome.value, **fields}))


def _clean(fields: dict[str, Any]) -> dict[str, Any]:
    return {key: log_field(value) for key, value in fields.items() if value is not None}
