"""Metrics function: AWS Batch and SageMaker job events (via SQS) in, CloudWatch EMF metrics out.

Trigger: the ``MetricsQueue`` SQS queue fed by the ``MetricsRule`` EventBridge rule, in batches,
with ``ReportBatchItemFailures``. Calls no AWS API. The batch work is
:class:`batchpilot.metrics.handler.MetricsProcessor`.
"""

import os
from typing import Any

from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.typing import LambdaContext
from batchpilot.io.emf import EmfPublisher
from batchpilot.metrics.handler import MetricsProcessor
from batchpilot.shared.observability import configure, logger, metrics
from batchpilot.shared.settings import MetricsSettings

settings = MetricsSettings.from_environ(os.environ, function="metrics")
configure(settings)
sink = EmfPublisher(settings.namespace, settings.service)
processor = MetricsProcessor(sink, detail=settings.metrics_detail)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """SQS batch in; ``{"batchItemFailures": [...]}`` out (Powertools batch utility). The record
    handler needs no Lambda context, so none is passed: Powertools would inspect the handler's
    signature on every batch to see whether it takes one."""
    return process_partial_response(event=event, record_handler=processor.record_handler, processor=processor)
