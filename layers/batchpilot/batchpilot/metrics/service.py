"""From one SQS record's body to job metrics in the sink: decode, classify, derive.

The one step of the metrics function (:mod:`batchpilot.metrics.handler` counts and logs its
result). Pure but for the sink it is given; the same path runs in Lambda, in ``batchpilot replay``
and in the tests.
"""

from __future__ import annotations

from batchpilot.metrics.ports import MetricSink
from batchpilot.shared.classification import JobFacts, classify
from batchpilot.shared.clock import Clock
from batchpilot.shared.metrics import MetricsDetail, metric_points
from batchpilot.shared.records import Rejected, decode

__all__ = ["record_metrics"]


def record_metrics(
    body: str | bytes, sink: MetricSink, clock: Clock, detail: MetricsDetail = MetricsDetail.BASIC
) -> JobFacts | Rejected:
    """Derive the job metrics of one SQS body's event and add them to ``sink``'s buffer.

    Args:
        body: the SQS message body: an AWS Batch or SageMaker EventBridge event as JSON.
        sink: where the points go (written when the handler flushes the batch).
        clock: "now" (aware UTC), the fallback timestamp for events CloudWatch would refuse
            (:func:`batchpilot.shared.metrics.metric_timestamp`).
        detail: which dimension sets (:class:`~batchpilot.shared.metrics.MetricsDetail`).

    Returns:
        The event's classification, or a :class:`~batchpilot.shared.records.Rejected` (ignored or
        invalid, with why): malformed and unsupported events are results, not exceptions.

    Raises:
        Whatever the sink raises (a bug): the batch processor then reports the record as a failure
        and SQS delivers it again, up to the queue's redrive limit, then the dead-letter queue.
    """
    event = decode(body)
    if isinstance(event, Rejected):
        return event
    facts = classify(event)
    sink.add(metric_points(facts, event.time, clock(), detail))
    return facts
