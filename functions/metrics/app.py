"""Metrics function: AWS Batch and SageMaker job events (via SQS) in, CloudWatch EMF metrics out.

Trigger: the ``MetricsQueue`` SQS queue fed by the ``MetricsRule`` EventBridge rule, in batches,
with ``ReportBatchItemFailures``. Calls no AWS API.
"""

import os
from collections import Counter
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from batchpilot.io.emf import EmfPublisher
from batchpilot.metrics.service import Outcome, handle_metrics_record
from batchpilot.shared.observability import configure, logger, metrics
from batchpilot.shared.settings import MetricsSettings

settings = MetricsSettings.from_environ(os.environ, function="metrics")
publisher = EmfPublisher(settings.namespace, settings.service)
processor = BatchProcessor(event_type=EventType.SQS)
configure(settings)

_COUNTERS = {
    Outcome.PROCESSED: "EventsProcessed",
    Outcome.IGNORED: "EventsIgnored",
    Outcome.INVALID: "InvalidEvents",
}


outcomes: Counter[Outcome] = Counter()


def record_handler(record: SQSRecord) -> None:
    """Handle one SQS record; raising marks only this record as failed."""
    result = handle_metrics_record(record.body, publisher)
    outcomes[result.outcome] += 1
    if result.outcome is not Outcome.PROCESSED:
        logger.warning(
            "event not processed",
            extra={
                "outcome": result.outcome,
                "event_id": result.event_id,
                "detail_type": result.detail_type,
                "error": result.error,
            },
        )


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """SQS batch in; ``{"batchItemFailures": [...]}`` out (Powertools batch utility).

    Job metrics of the whole batch are written once at the end (one EMF blob per dimension set and
    minute), as are the function's own counters.
    """
    outcomes.clear()
    try:
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    finally:
        publisher.flush()
        for outcome, count in outcomes.items():
            metrics.add_metric(name=_COUNTERS[outcome], unit=MetricUnit.Count, value=count)
