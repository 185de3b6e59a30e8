"""Alerts function: job, own and alarm events (SQS AlertsQueue) in; pages and chat out, once per fact."""

import os

from batchpilot.alerts.handler import AlertsProcessor
from batchpilot.alerts.registry import ChannelRegistry
from batchpilot.alerts.service import AlertService
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.io.batch import BatchJobDirectory
from batchpilot.io.clients import LazyClient, client
from batchpilot.io.dynamodb.alerts import DynamoAlertStore
from batchpilot.io.secrets import SecretSource
from batchpilot.io.sns import SnsPublisher
from batchpilot.io.sqs import SqsTimer
from batchpilot.shared.clock import utc_now
from batchpilot.shared.observability import configure
from batchpilot.shared.processing import queue_entry

settings = AlertsSettings.from_environ(os.environ, function="alerts")
configure(settings)
secrets = SecretSource(client("secretsmanager")) if settings.chat_channels else None
channels = ChannelRegistry.configured(settings, secrets)  # every channel that registered itself
service = AlertService(
    policy=settings.policy,
    store=DynamoAlertStore(client("dynamodb"), settings.state_table),
    topic=SnsPublisher(client("sns"), settings.oncall_topic_arn),
    channels=channels,
    directory=BatchJobDirectory(LazyClient("batch")),  # preemption alerts only: made at first lookup
    clock=utc_now,
    timer=SqsTimer(LazyClient("sqs"), settings.alerts_queue_url) if settings.alerts_queue_url else None,
    **settings.service_args,
)
processor = AlertsProcessor(service)

lambda_handler = queue_entry(processor)  # SQS batch → {"batchItemFailures": [...]}
