"""Capacity function: service-environment limits that follow demand (from the job ledger).

Triggers, each with its own entry: ``CapacitySchedule`` (``schedule_handler``) and ``CapacityQueue``
(``queue_handler``); ``lambda_handler`` (the template's ``Handler``: one per Lambda function) hands
each event to its entry. The work: :mod:`batchpilot.capacity.handler`."""

import os

from batchpilot.capacity.handler import CapacityProcessor, run_schedule
from batchpilot.capacity.service import CapacityService
from batchpilot.capacity.settings import CapacitySettings
from batchpilot.io.batch import BatchCapacityClient
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.capacity import CapacityStateStore
from batchpilot.io.dynamodb.ledger import LedgerDemandReader
from batchpilot.io.emf import EmfPublisher
from batchpilot.io.eventbridge import EventBridgePublisher
from batchpilot.shared.observability import configure
from batchpilot.shared.processing import by_trigger, queue_entry, schedule_entry

settings = CapacitySettings.from_environ(os.environ, function="capacity")
configure(settings)
service = CapacityService(
    settings=settings,
    batch=BatchCapacityClient(client("batch")),
    store=CapacityStateStore(client("dynamodb"), settings.state_table),
    events=EventBridgePublisher(client("events"), settings.event_bus),
    gauges=EmfPublisher(settings.namespace, settings.service),
    ledger=LedgerDemandReader(client("dynamodb"), settings.state_table),
)
processor = CapacityProcessor(service)
queue_handler = queue_entry(processor)  # CapacityQueue batch → {"batchItemFailures": [...]}
schedule_handler = schedule_entry(lambda event: run_schedule(service, event))  # → RunReport.summary()
lambda_handler = by_trigger(queue=queue_handler, schedule=schedule_handler)
