"""What the metrics function needs from the outside world: one metric sink.

The adapter is :class:`batchpilot.io.emf.EmfPublisher` (CloudWatch Embedded Metric Format on
stdout; Lambda forwards stdout to CloudWatch Logs, which extracts the metrics). No AWS API call is
made.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from batchpilot.shared.metrics import MetricPoint

__all__ = ["MetricSink"]


class MetricSink(Protocol):
    """Buffers :class:`~batchpilot.shared.metrics.MetricPoint` values and writes them in one go.

    Points carry their own name, unit (``Count``, ``Seconds`` or ``Percent``), value (finite, not
    negative), allow-listed dimensions (:func:`batchpilot.shared.metrics.dimensions`) and an aware
    UTC timestamp; the sink adds the ``service`` dimension and the namespace.
    """

    def add(self, points: Iterable[MetricPoint]) -> None:
        """Buffer ``points`` until :meth:`flush`. Raises nothing for well-formed points."""

    def flush(self) -> int:
        """Write every buffered point (one EMF blob per dimension set and minute) and empty the
        buffer; returns the number of blobs written.

        Raises:
            Exception: a blob breaks EMF's rules (a bug, not bad input: points are validated when
                they are made); the buffer is emptied all the same.
        """
        ...
