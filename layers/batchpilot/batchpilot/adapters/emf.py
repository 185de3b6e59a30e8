"""Writes :class:`~batchpilot.metrics.MetricPoint` values as CloudWatch Embedded Metric Format.

Uses Powertools' EMF provider (one JSON blob on stdout per dimension set and timestamp); Lambda
forwards stdout to CloudWatch Logs, which extracts the metrics. No AWS API call is made.
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

from batchpilot.metrics import MetricPoint

__all__ = ["EmfPublisher"]


class EmfPublisher:
    """Publishes metric points as EMF blobs on stdout.

    Points that share dimensions and timestamp go into one blob (at most 100 metrics each, as EMF
    requires; Powertools splits larger sets). Every blob also carries the ``service`` dimension.

    Raises (from :meth:`publish`):
        aws_lambda_powertools.metrics.exceptions.SchemaValidationError /
        MetricValueError / MetricUnitError: a point breaks EMF's rules (a bug, not bad input).
    """

    def __init__(self, namespace: str, service: str) -> None:
        self._provider = AmazonCloudWatchEMFProvider(namespace=namespace, service=service)

    def publish(self, points: Iterable[MetricPoint]) -> int:
        """Write the points; returns the number of EMF blobs printed."""
        groups: dict[tuple[tuple[tuple[str, str], ...], int], list[MetricPoint]] = {}
        for point in points:
            key = (point.dimensions, int(point.timestamp.timestamp() * 1000))
            groups.setdefault(key, []).append(point)
        provider = self._provider
        for (dimensions, timestamp_ms), group in groups.items():
            provider.clear_metrics()
            provider.set_timestamp(timestamp_ms)
            for name, value in dimensions:
                provider.add_dimension(name=name, value=value)
            for point in group:
                provider.add_metric(name=point.name, unit=point.unit, value=point.value)
            provider.flush_metrics(raise_on_empty_metrics=True)
        return len(groups)
