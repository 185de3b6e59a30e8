"""The metrics function's batch work: each SQS record → job metrics, the batch's EMF written once.

:class:`MetricsProcessor` is the shared processor shape
(:class:`batchpilot.shared.processing.SqsProcessor`) whose record work
(:meth:`~MetricsProcessor.process_record`) runs :func:`batchpilot.metrics.service.record_metrics`
and counts the record's outcome inside the record's scope (its ``messageId`` as the correlation
id: each value is listed under its record in the blob); its ``_clean`` flushes the batch's points
at the end, so ten events of one job queue cost one EMF blob per dimension set and minute, not
thirty.
"""

from __future__ import annotations

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from batchpilot.metrics.ports import MetricSink
from batchpilot.metrics.service import record_metrics
from batchpilot.shared.clock import Clock, utc_now
from batchpilot.shared.metrics import MetricsDetail
from batchpilot.shared.observability import count_outcome
from batchpilot.shared.processing import SqsProcessor
from batchpilot.shared.records import Outcome, Rejected

__all__ = ["MetricsProcessor"]


class MetricsProcessor(SqsProcessor):
    """SQS batch processor of the metrics function.

    Args:
        sink: where job metrics go (:class:`batchpilot.io.emf.EmfPublisher` in Lambda).
        clock: "now" for events whose own time CloudWatch would refuse (default: the wall clock).
        detail: which dimension sets to publish (settings ``metrics_detail``).

    A malformed or unsupported record is counted (``InvalidEvents`` / ``EventsIgnored``) and
    logged, never retried; a record whose metrics cannot be buffered raises, so only that record
    is reported as a batch item failure.
    """

    def __init__(
        self, sink: MetricSink, clock: Clock = utc_now, detail: MetricsDetail = MetricsDetail.BASIC
    ) -> None:
        super().__init__()
        self.sink = sink
        self.clock = clock
        self.detail = detail

    def process_record(self, record: SQSRecord) -> None:
        """One record (in its scope): its job metrics buffered, its outcome counted
        (``EventsProcessed``, ...), both under the record's ``messageId``."""
        result = record_metrics(record.body, self.sink, self.clock, self.detail)
        count_outcome(result if isinstance(result, Rejected) else Outcome.PROCESSED)

    def _clean(self) -> None:
        """End of the batch: write its metrics once, then build the partial batch response."""
        try:
            self.sink.flush()
        finally:
            super()._clean()
