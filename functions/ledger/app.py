"""Ledger function: every job event (SQS) updates the job ledger; a schedule reconciles and publishes.

Triggers: ``LedgerQueue`` and ``LedgerSchedule``; publishes ``Job Starving`` on batchpilot's bus;
lists checkpoint prefixes (``LostInstanceHours``). The work is in :mod:`batchpilot.ledger.handler`."""

import os
from typing import Any

from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.typing import LambdaContext
from batchpilot.io.batch import BatchLedgerClient
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.ledger import LedgerStateStore
from batchpilot.io.emf import EmfPublisher
from batchpilot.io.eventbridge import EventBridgePublisher
from batchpilot.io.s3 import S3Checkpoints
from batchpilot.ledger.handler import LedgerProcessor, run_schedule, warn_unreadable
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.clock import utc_now
from batchpilot.shared.observability import configure, logger, metrics

settings = LedgerSettings.from_environ(os.environ, function="ledger")
configure(settings)
store = LedgerStateStore(client("dynamodb"), settings.state_table)
sink = EmfPublisher(settings.namespace, settings.service)
events = EventBridgePublisher(client("events"), settings.event_bus)
batch, checkpoints = BatchLedgerClient(client("batch")), S3Checkpoints(client("s3"))
service = LedgerService(settings, store, batch, sink, utc_now, warn_unreadable, events, checkpoints)
processor = LedgerProcessor(service)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: Any, context: LambdaContext) -> PartialItemFailureResponse | dict[str, Any]:
    """SQS batch → ``{"batchItemFailures": [...]}``; schedule event → run summary."""
    if isinstance(event, dict) and "Records" in event:
        return process_partial_response(event, processor.record_handler, processor, context)
    return run_schedule(service, event)
