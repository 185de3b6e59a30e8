"""The one place that creates Powertools' Logger and Metrics for every function.

Handlers import ``logger`` and ``metrics`` from here. The logger never logs whole events
(Batch events carry container environments and commands): log ids, detail-types and reasons only.
Tracer is left out of the metrics path on purpose: the X-Ray SDK would double its cold start.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics

from batchpilot.shared.settings import FunctionSettings

__all__ = ["configure", "logger", "metrics"]

logger = Logger(log_uncaught_exceptions=True)
"""JSON logger; ``service`` and level come from POWERTOOLS_SERVICE_NAME / POWERTOOLS_LOG_LEVEL."""

metrics = Metrics()
"""The function's own counters (events processed, ignored, invalid). Handlers set ``namespace`` and
``service`` from their validated settings at cold start."""


def configure(settings: FunctionSettings) -> None:
    """Apply validated settings at cold start: namespace, ``service`` and ``Function`` dimensions."""
    metrics.namespace = settings.namespace
    metrics.service = settings.service
    # Start from a clean slate: harmless in Lambda (one function per process), and it keeps a
    # second function configured in the same process (the local replay) from inheriting anything.
    metrics.clear_default_dimensions()
    metrics.clear_metrics()
    metrics.set_default_dimensions(Function=settings.function)
    logger.append_keys(service=settings.service, function=settings.function)
