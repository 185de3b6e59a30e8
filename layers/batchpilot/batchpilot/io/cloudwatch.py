"""Amazon CloudWatch reads, through an injected boto3 ``cloudwatch`` client: metric series for the
GPU activity of running training jobs (:class:`CloudWatchSeries`, the
:class:`batchpilot.gpu.ports.MetricReader` of the ledger's schedule).

API: CloudWatch ``GetMetricData`` (Amazon CloudWatch API Reference): at most 500 ``MetricDataQueries``
per request, results paged by ``NextToken`` (through boto3's documented ``get_metric_data``
paginator), billed per metric requested whatever the number of datapoints. Throttling and
transient errors are retried by botocore's standard retry mode, each attempt bounded by the
invocation's deadline (:mod:`batchpilot.io.clients`). A request that still fails is not retried
here: its queries are reported as unread (:attr:`batchpilot.gpu.ports.SeriesRead.failed`), the
others are kept, so a throttled run publishes what it read.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batchpilot.gpu.ports import MetricQuery, SeriesRead
from batchpilot.shared.deadline import DeadlineExceeded
from batchpilot.shared.errors import describe

__all__ = ["MAX_QUERIES", "CloudWatchSeries"]

MAX_QUERIES = 500
"""``MetricDataQueries`` per GetMetricData request (the API's limit)."""


class CloudWatchSeries:
    """GetMetricData, 500 queries a request.

    Args:
        client: a boto3 ``cloudwatch`` client (:func:`batchpilot.io.clients.client`).
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def read(self, queries: Sequence[MetricQuery], start: datetime, end: datetime) -> SeriesRead:
        """Every query's datapoints between ``start`` and ``end`` (aware UTC; ``EndTime``
        exclusive), oldest first.

        Returns:
            ``values``: query id → ``[(timestamp, value), ...]`` (aware UTC, the statistic's value:
            percent for SageMaker's ``GPUUtilization``); a query without datapoints maps to ``[]``.
            ``failed``: ids of the queries whose request failed after botocore's retries (or was
            not started for want of time), ``errors`` one line per failed request (operation, code,
            a bounded excerpt; never the queries). ``requests``: GetMetricData calls made.
            Never raises for AWS errors.
        """
        read = SeriesRead()
        for first in range(0, len(queries), MAX_QUERIES):
            chunk = queries[first : first + MAX_QUERIES]
            try:
                got = self._chunk(chunk, start, end, read)
            except (ClientError, BotoCoreError, DeadlineExceeded) as exc:
                read.failed.extend(q.id for q in chunk)
                read.errors.append(describe(exc, "GetMetricData"))
                continue
            for query in chunk:
                read.values[query.id] = sorted(got.get(query.id, []))
        return read

    def _chunk(
        self, chunk: Sequence[MetricQuery], start: datetime, end: datetime, read: SeriesRead
    ) -> dict[str, list[tuple[datetime, float]]]:
        paginator = self._client.get_paginator("get_metric_data")
        pages = paginator.paginate(
            MetricDataQueries=[_query(q) for q in chunk],
            StartTime=start,
            EndTime=end,
            ScanBy="TimestampAscending",
        )
        got: dict[str, list[tuple[datetime, float]]] = {}
        for page in pages:
            read.requests += 1
            for result in page.get("MetricDataResults", []):
                points = got.setdefault(str(result.get("Id")), [])
                for stamp, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                    points.append((_utc(stamp), float(value)))
        return got


def _query(query: MetricQuery) -> dict[str, Any]:
    return {
        "Id": query.id,
        "MetricStat": {
            "Metric": {
                "Namespace": query.namespace,
                "MetricName": query.metric,
                "Dimensions": [{"Name": name, "Value": value} for name, value in query.dimensions],
            },
            "Period": query.period,
            "Stat": query.stat,
        },
        "ReturnData": True,
    }


def _utc(stamp: Any) -> datetime:
    if isinstance(stamp, datetime):
        return stamp.astimezone(UTC) if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(stamp)).astimezone(UTC)
