"""Ledger function: job events (``LedgerQueue``) and ``LedgerSchedule`` (reconcile, gauges, GPU activity),
one entry per trigger under ``lambda_handler``. The work: :mod:`batchpilot.ledger.handler`."""

import os

from batchpilot.gpu.service import GpuActivityService
from batchpilot.gpu.settings import GpuSettings
from batchpilot.io import batch, cloudwatch, ecs, emf, eventbridge, s3
from batchpilot.io.clients import LazyClient, client
from batchpilot.io.dynamodb.gpu import GpuEpisodeStore
from batchpilot.io.dynamodb.ledger import LedgerStateStore
from batchpilot.ledger.handler import LedgerProcessor, run_schedule, warn_unreadable
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.clock import utc_now
from batchpilot.shared.observability import configure
from batchpilot.shared.processing import by_trigger, queue_entry, schedule_entry

settings = LedgerSettings.from_environ(os.environ, function="ledger")
gpu_settings = GpuSettings.from_environ(os.environ, function="ledger")
configure(settings)
dynamodb, batch_client, table = client("dynamodb"), client("batch"), settings.state_table
store, sink = LedgerStateStore(dynamodb, table), emf.EmfPublisher(settings.namespace, settings.service)
publisher = eventbridge.EventBridgePublisher(client("events"), settings.event_bus)
ledger_batch, checkpoints = batch.BatchLedgerClient(batch_client), s3.S3Checkpoints(client("s3"))
service = LedgerService(
    settings=settings, store=store, batch=ledger_batch, sink=sink, clock=utc_now,
    warn=warn_unreadable, publisher=publisher, checkpoints=checkpoints,
)  # fmt: skip
gpu = GpuActivityService(  # the cloudwatch and ecs clients are made at their first call (LazyClient)
    jobs=store, sink=sink, publisher=publisher, instances=ecs.EcsContainerInstances(LazyClient("ecs")),
    names=batch.ServiceJobAttempts(batch_client), placements=batch.ContainerJobPlacements(batch_client),
    metrics=cloudwatch.CloudWatchSeries(LazyClient("cloudwatch")), episodes=GpuEpisodeStore(dynamodb, table),
    rules=gpu_settings.rules, prices=gpu_settings.prices, container_source=gpu_settings.container_source,
)  # fmt: skip
processor = LedgerProcessor(service)
queue_handler = queue_entry(processor)  # LedgerQueue batch → {"batchItemFailures": [...]}
gpu_check = gpu if gpu_settings.enabled else None  # BATCHPILOT_GPU_ACTIVITY
schedule_handler = schedule_entry(lambda event: run_schedule(service, event, gpu_check))  # → its summary
lambda_handler = by_trigger(queue=queue_handler, schedule=schedule_handler)
