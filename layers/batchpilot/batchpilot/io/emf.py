"""Writes :class:`~batchpilot.shared.metrics.MetricPoint` values as CloudWatch Embedded Metric Format.

Powertools' EMF provider serialises every blob (namespace, dimensions, metric definitions, the
``_aws`` envelope); Lambda forwards stdout to CloudWatch Logs, which extracts the metrics. No AWS
API call is made.

Points are buffered with :meth:`EmfPublisher.add` and written with :meth:`EmfPublisher.flush`, one
blob per dimension set and minute for a whole SQS batch, so ten events of one job queue cost one
blob, not thirty. Timestamps are truncated to the minute: batchpilot's metrics are standard
resolution (60 s), so CloudWatch keeps nothing finer anyway.

Each value remembers the SQS record it was added for
(:func:`batchpilot.shared.correlation.current_record`): a blob whose values came from records lists
them in its ``correlation_ids`` property, ``{"<metric name>": ["<messageId>" or null, ...]}``, one
per value in the order of the metric's ``Value`` array. A property, not a dimension: CloudWatch
keeps no series per record, and the log line stays searchable by the record's id.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider
from pydantic_core import to_json

from batchpilot.shared.correlation import CORRELATION_PROPERTY, current_record
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

    Every blob carries the points' dimensions plus ``service``, and ``correlation_ids`` when any
    value was added inside a record's scope (see the module docstring). A blob holds at most 100
    metrics with at most 100 values each (larger groups are split).

    Raises (from :meth:`flush`):
        aws_lambda_powertools.metrics.exceptions.SchemaValidationError: a blob breaks EMF's rules
            (a bug, not bad input: points are validated when they are made).
    """

    def __init__(self, namespace: str, service: str) -> None:
        self._provider = AmazonCloudWatchEMFProvider(namespace=namespace, service=service)
        self._service = service
        self._pending: dict[_GroupKey, dict[str, dict[str, Any]]] = {}
        self._records: dict[tuple[_GroupKey, str], list[str | None]] = {}

    def add(self, points: Iterable[MetricPoint]) -> None:
        """Buffer points until :meth:`flush`, each under the current record (its correlation id)."""
        pending, records = self._pending, self._records
        record = current_record()
        for point in points:
            minute = int(point.timestamp.timestamp() * 1000) // _MINUTE_MS * _MINUTE_MS
            key = (point.dimensions, minute)
            group = pending.setdefault(key, {})
            metric = group.get(point.name)
            if metric is None:
                group[point.name] = {"Unit": point.unit, "StorageResolution": 60, "Value": [point.value]}
                records[(key, point.name)] = [record]
            else:
                metric["Value"].append(point.value)
                records[(key, point.name)].append(record)

    def flush(self) -> int:
        """Print every buffered group as EMF; returns the number of blobs printed."""
        pending, self._pending = self._pending, {}
        records, self._records = self._records, {}
        blobs = 0
        provider = self._provider
        write = sys.stdout.write
        current: int | None = None
        for key, metrics in pending.items():
            dimensions, timestamp_ms = key
            dims = dict(dimensions)
            dims["service"] = self._service
            if timestamp_ms != current:  # Powertools checks each timestamp it is given: once is enough
                provider.set_timestamp(timestamp_ms)
                current = timestamp_ms
            ids = {name: records[(key, name)] for name in metrics}
            for chunk, chunk_ids in _chunks(metrics, ids):
                known = any(r is not None for values in chunk_ids.values() for r in values)
                metadata = {CORRELATION_PROPERTY: chunk_ids} if known else {}
                blob = provider.serialize_metric_set(metrics=chunk, dimensions=dims, metadata=metadata)
                # Compact UTF-8 JSON; pydantic-core's encoder is several times faster than json's.
                write(to_json(blob).decode() + "\n")
                blobs += 1
        return blobs

    def publish(self, points: Iterable[MetricPoint]) -> int:
        """Buffer and flush at once; returns the number of blobs printed."""
        self.add(points)
        return self.flush()


def _chunks(
    metrics: dict[str, dict[str, Any]], records: dict[str, list[str | None]]
) -> Iterable[tuple[dict[str, dict[str, Any]], dict[str, list[str | None]]]]:
    """Split one group so no blob has more than 100 metrics or 100 values per metric; each chunk
    with its values' records (cut the same way)."""
    current: dict[str, dict[str, Any]] = {}
    current_ids: dict[str, list[str | None]] = {}
    for name, metric in metrics.items():
        values = metric["Value"]
        for start in range(0, len(values), _MAX_VALUES_PER_METRIC):
            if len(current) == _MAX_METRICS_PER_BLOB or name in current:
                yield current, current_ids
                current, current_ids = {}, {}
            end = start + _MAX_VALUES_PER_METRIC
            current[name] = {**metric, "Value": values[start:end]}
            current_ids[name] = records[name][start:end]
    if current:
        yield current, current_ids
