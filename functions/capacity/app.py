"""Capacity function: queue gauges, and service-environment limits that follow demand (from the job
ledger). Triggers: ``CapacitySchedule``, ``CapacityQueue``; the work: :mod:`batchpilot.capacity.handler`."""

import os
from typing import Any

from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.typing import LambdaContext
from batchpilot.capacity.handler import CapacityProcessor, run_schedule
from batchpilot.capacity.service import CapacityService
from batchpilot.capacity.settings import CapacitySettings
from batchpilot.io.batch import BatchCapacityClient
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.capacity import CapacityStateStore
from batchpilot.io.dynamodb.ledger import LedgerDemandReader
from batchpilot.io.emf import EmfPublisher
from batchpilot.io.eventbridge import EventBridgePublisher
from batchpilot.shared.observability import configure, logger, metrics

settings = CapacitySettings.from_environ(os.environ, function="capacity")
configure(settings)
service = CapacityService(
    settings,
    BatchCapacityClient(client("batch")),
    CapacityStateStore(client("dynamodb"), settings.state_table),
    EventBridgePublisher(client("events"), settings.event_bus),
    EmfPublisher(settings.namespace, settings.service),
    ledger=LedgerDemandReader(client("dynamodb"), settings.state_table),
)
processor = CapacityProcessor(service)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: Any, context: LambdaContext) -> PartialItemFailureResponse | dict[str, Any]:
    """SQS batch → ``{"batchItemFailures": [...]}``; schedule event → run summary (ValueError: no time)."""
    if isinstance(event, dict) and "Records" in event:
        return process_partial_response(event, processor.record_handler, processor, context)
    return run_schedule(service, event)
