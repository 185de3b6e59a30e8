"""Alerts function: job, own and alarm events (SQS AlertsQueue) in; pages and chat out, once per fact."""

import os
from typing import Any

from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.typing import LambdaContext
from batchpilot.alerts.handler import AlertsProcessor
from batchpilot.alerts.registry import ChannelRegistry
from batchpilot.alerts.service import AlertService
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.io.batch import BatchJobDirectory
from batchpilot.io.clients import LazyClient, client
from batchpilot.io.deadline import bounded
from batchpilot.io.dynamodb.alerts import DynamoAlertStore
from batchpilot.io.secrets import SecretSource
from batchpilot.io.sns import SnsPublisher
from batchpilot.shared.clock import utc_now
from batchpilot.shared.observability import configure, logger, metrics

settings = AlertsSettings.from_environ(os.environ, function="alerts")
configure(settings)
secrets = SecretSource(client("secretsmanager")) if settings.chat_channels else None
channels = ChannelRegistry.configured(settings, secrets)  # every channel that registered itself
store = DynamoAlertStore(client("dynamodb"), settings.state_table)
topic = SnsPublisher(client("sns"), settings.oncall_topic_arn)
jobs = BatchJobDirectory(LazyClient("batch"))  # preemption alerts only: made at their first lookup
service = AlertService(settings.policy, store, topic, channels, jobs, clock=utc_now, **settings.service_args)
processor = AlertsProcessor(service)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
@bounded  # every AWS call ends before the invocation's timeout (io/deadline.py)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """SQS batch in; ``{"batchItemFailures": [...]}`` out (Powertools batch utility)."""
    return process_partial_response(
        event=event, record_handler=processor.record_handler, processor=processor, context=context
    )
