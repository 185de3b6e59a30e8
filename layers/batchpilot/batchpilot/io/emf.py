"""Writes :class:`~batchpilot.shared.metrics.MetricPoint` values as CloudWatch Embedded Metric Format.

Powertools' EMF provider serialises every blob (namespace, dimensions, metric definitions, the
``_aws`` envelope); Lambda forwards stdout to CloudWatch Logs, which extracts the metrics. No AWS
API call is made.

Points are buffered with :meth:`EmfPublisher.add` and written with :meth:`EmfPublisher.flush`, one
blob per dimension set and minute for a whole SQS batch, so ten events of one job queue cost one
blob, not thirty. Timestamps are truncated to the minute: batchpilot's metrics are standard
resolution (60 s), so CloudWatch keeps nothing finer anyway.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider
from pydantic_core import to_json

from batchpilot.shared.metrics import MetricPoint

__all__ = ["EmfPublisher"]

_MAX_METRICS_PER_BLOB = 100  # EMF: at most 100 metric definitions per blob
_MAX_VALUES_PER_METRIC = 100  # EMF: at most 100 values per metric per blob
_MINUTE_MS = 60_000

_GroupKey = tuple[tuple[tuple[str, str], ...], int]


class EmfPublisher:
    """Buffers metric points and prints them as EMF blobs on stdout (Powertools serialisation):
    the metrics function's :class:`~batchpilot.metrics.ports.MetricSink` (``add``, ``flush``) and
    the capacity function's :class:`~batchpilot.capacity.ports.GaugeSink` (``publish``).

    Every blob carries the points' dimensions plus ``service``. A blob holds at most 100 metrics
    with at most 100 values each (larger groups are split).

    Raises (from :meth:`flush`):
        aws_lambda_powertools.metrics.exceptions.SchemaValidationError: a blob breaks EMF's rules
            (a bug, not bad input: points are validated when they are made).
    """

    def __init__(self, namespace: str, service: str) -> None:
        self._provider = AmazonCloudWatchEMFProvider(namespace=namespace, service=service)
        self._service = service
        self._pending: dict[_GroupKey, dict[str, dict[str, Any]]] = {}

    def add(self, points: Iterable[MetricPoint]) -> None:
        """Buffer points until :meth:`flush`."""
        pending = self._pending
        for point in points:
            minute = int(point.timestamp.timestamp() * 1000) // _MINUTE_MS * _MINUTE_MS
            group = pending.setdefault((point.dimensions, minute), {})
            metric = group.get(point.name)
            if metric is None:
                group[point.name] = {"Unit": point.unit, "StorageResolution": 60, "Value": [point.value]}
            else:
                metric["Value"].append(point.value)

    def flush(self) -> int:
        """Print every buffered group as EMF; returns the number of blobs printed."""
        pending, self._pending = self._pending, {}
        blobs = 0
        provider = self._provider
        write = sys.stdout.write
        current: int | None = None
        for (dimensions, timestamp_ms), metrics in pending.items():
            dims = dict(dimensions)
            dims["service"] = self._service
            if timestamp_ms != current:  # Powertools checks each timestamp it is given: once is enough
                provider.set_timestamp(timestamp_ms)
                current = timestamp_ms
            for chunk in _chunks(metrics):
                blob = provider.serialize_metric_set(metrics=chunk, dimensions=dims, metadata={})
                # Compact UTF-8 JSON; pydantic-core's encoder is several times faster than json's.
                write(to_json(blob).decode() + "\n")
                blobs += 1
        return blobs

    def publish(self, points: Iterable[MetricPoint]) -> int:
        """Buffer and flush at once; returns the number of blobs printed."""
        self.add(points)
        return self.flush()


def _chunks(metrics: dict[str, dict[str, Any]]) -> Iterable[dict[str, dict[str, Any]]]:
    """Split one group so no blob has more than 100 metrics or 100 values per metric."""
    current: dict[str, dict[str, Any]] = {}
    for name, metric in metrics.items():
        values = metric["Value"]
        for start in range(0, len(values), _MAX_VALUES_PER_METRIC):
            if len(current) == _MAX_METRICS_PER_BLOB or name in current:
                yield current
                current = {}
            current[name] = {**metric, "Value": values[start : start + _MAX_VALUES_PER_METRIC]}
    if current:
        yield current
