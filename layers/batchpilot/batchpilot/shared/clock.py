"""The one clock convention: aware UTC datetimes, and a clock injected as ``Clock``.

Domain and service code never calls ``datetime.now``: it takes a :data:`Clock` (production wires
:func:`utc_now`; tests and the local replay wire a fixed or scenario clock). AWS timestamps arrive
as epoch milliseconds (AWS Batch ``detail``), numeric strings or ISO-8601 (SageMaker, envelopes);
:func:`batchpilot.shared.events.to_datetime` normalises them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "epoch_ms", "utc_now"]

Clock = Callable[[], datetime]
"""Returns "now" as a timezone-aware UTC datetime."""


def utc_now() -> datetime:
    """The wall clock, aware UTC (the production :data:`Clock`)."""
    return datetime.now(UTC)


def epoch_ms(moment: datetime) -> int:
    """An aware datetime → epoch milliseconds (what AWS Batch puts in ``detail`` timestamps)."""
    return int(moment.timestamp() * 1000)
