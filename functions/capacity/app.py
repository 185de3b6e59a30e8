"""Capacity function: queue gauges, and service-environment capacity limits that follow demand.

Triggers:

- EventBridge Scheduler, every minute (``CapacitySchedule``): an event shaped like an EventBridge
  scheduled event whose ``time`` is the scheduled time. "Now" is always taken from that ``time``,
  so replaying the same clock gives the same decisions.
- ``CapacityQueue`` (SQS, fed by ``CapacityRule``): ``Batch Service Job Queue Blocked`` events
  whose reason is ``MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE``; the environment of the
  job's queue (when managed) gets a run at once, at the event's ``time``.

Every run emits EMF gauges and, per managed environment, one decision; changes and refusals are
published as ``Capacity Adjusted`` / ``Capacity Limited`` on ``BATCHPILOT_EVENT_BUS``.
"""

import os
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from batchpilot.capacity.entry import CapacityEntry
from batchpilot.capacity.service import CapacityService, DemandMemory
from batchpilot.capacity.settings import CapacitySettings
from batchpilot.io import clients as aws
from batchpilot.io.batch import BatchCapacityClient
from batchpilot.io.dynamodb.capacity import CapacityStateStore
from batchpilot.io.emf import EmfPublisher
from batchpilot.io.eventbridge import EventBridgePublisher
from batchpilot.shared.observability import configure, logger, metrics

settings = CapacitySettings.from_environ(os.environ, function="capacity")
configure(settings)
publisher = EmfPublisher(settings.namespace, settings.service)
processor = BatchProcessor(event_type=EventType.SQS)
memory = DemandMemory()
_service: CapacityService | None = None


def service() -> CapacityService:
    """The run wiring, built once per Lambda instance (boto3 clients with standard retries)."""
    global _service
    if _service is None:
        _service = CapacityService(
            settings,
            BatchCapacityClient(aws.client("batch")),
            CapacityStateStore(aws.client("dynamodb"), settings.state_table),
            EventBridgePublisher(aws.client("events"), settings.event_bus),
            memory,
        )
    return _service


entry = CapacityEntry(settings, service, publisher)


def record_handler(record: SQSRecord) -> None:
    """One ``Batch Service Job Queue Blocked`` event: see :meth:`CapacityEntry.handle_record`."""
    entry.handle_record(record.body)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(
    event: dict[str, Any], context: LambdaContext
) -> PartialItemFailureResponse | dict[str, Any]:
    """SQS batch → ``{"batchItemFailures": [...]}``; schedule event → a run summary.

    Raises:
        ValueError: a schedule event without a usable ``time``.
    """
    entry.start_invocation()
    if isinstance(event, dict) and "Records" in event:
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    return entry.run_schedule(event)
