"""Ledger function: job events (``LedgerQueue``) update the job ledger; ``LedgerSchedule`` reconciles
and publishes. Each trigger has its own entry; ``lambda_handler`` (the template's ``Handler``: one
per Lambda function) hands each event to its entry. The work: :mod:`batchpilot.ledger.handler`."""

import os

from batchpilot.io import batch, emf, eventbridge, s3
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.ledger import LedgerStateStore
from batchpilot.ledger.handler import LedgerProcessor, run_schedule, warn_unreadable
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.clock import utc_now
from batchpilot.shared.observability import configure
from batchpilot.shared.processing import by_trigger, queue_entry, schedule_entry

settings = LedgerSettings.from_environ(os.environ, function="ledger")
configure(settings)
service = LedgerService(
    settings=settings,
    store=LedgerStateStore(client("dynamodb"), settings.state_table),
    batch=batch.BatchLedgerClient(client("batch")),
    sink=emf.EmfPublisher(settings.namespace, settings.service),
    clock=utc_now,
    warn=warn_unreadable,
    publisher=eventbridge.EventBridgePublisher(client("events"), settings.event_bus),
    checkpoints=s3.S3Checkpoints(client("s3")),
)
processor = LedgerProcessor(service)
queue_handler = queue_entry(processor)  # LedgerQueue batch → {"batchItemFailures": [...]}
schedule_handler = schedule_entry(lambda event: run_schedule(service, event))  # → the run's summary
lambda_handler = by_trigger(queue=queue_handler, schedule=schedule_handler)
