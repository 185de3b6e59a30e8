"""Metrics function: AWS Batch and SageMaker job events (via SQS) in, CloudWatch EMF metrics out.

Trigger: the ``MetricsQueue`` SQS queue fed by the ``MetricsRule`` EventBridge rule, in batches,
with ``ReportBatchItemFailures``. Calls no AWS API. The batch work is
:class:`batchpilot.metrics.handler.MetricsProcessor`.
"""

import os

from batchpilot.io.emf import EmfPublisher
from batchpilot.metrics.handler import MetricsProcessor
from batchpilot.shared.observability import configure
from batchpilot.shared.processing import queue_entry
from batchpilot.shared.settings import MetricsSettings

settings = MetricsSettings.from_environ(os.environ, function="metrics")
configure(settings)
sink = EmfPublisher(settings.namespace, settings.service)
processor = MetricsProcessor(sink, detail=settings.metrics_detail)

lambda_handler = queue_entry(processor)  # SQS batch → {"batchItemFailures": [...]}
