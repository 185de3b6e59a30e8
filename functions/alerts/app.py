"""Alerts function: job events and batchpilot's own events (via SQS) in; on-call pages (SNS) and
Slack messages out, exactly once per fact.

Trigger: the ``AlertsQueue`` SQS queue fed by ``AlertsRule`` (AWS Batch and SageMaker job events,
default bus) and ``AlertsOwnEventsRule`` (``source: batchpilot`` on the ``EventBusName`` bus), in
batches (bursts become digests), with ``ReportBatchItemFailures``: only records whose notification
could not be delivered are retried.
"""

import os
from collections import Counter
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from batchpilot.alerts.channels.slack import SecretSource, SlackNotifier
from batchpilot.alerts.dispatch import AlertDispatcher, BatchResult, Outcome
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.alerts import DynamoAlertStore
from batchpilot.io.sns import SnsPublisher
from batchpilot.shared.observability import configure, logger, metrics

settings = AlertsSettings.from_environ(os.environ, function="alerts")
configure(settings)
_slack_secrets = (
    SecretSource(client("secretsmanager"))
    if settings.slack_webhook_secret or settings.slack_bot_token_secret
    else None
)
dispatcher = AlertDispatcher(
    settings.policy,
    DynamoAlertStore(client("dynamodb"), settings.state_table),
    SnsPublisher(client("sns"), settings.oncall_topic_arn),
    SlackNotifier(
        _slack_secrets,
        webhook_secret=settings.slack_webhook_secret,
        bot_token_secret=settings.slack_bot_token_secret,
        channel=settings.slack_channel,
        api_url=settings.slack_api_url,
    ),
)
processor = BatchProcessor(event_type=EventType.SQS)

_COUNTERS = {
    Outcome.PROCESSED: "EventsProcessed",
    Outcome.IGNORED: "EventsIgnored",
    Outcome.INVALID: "InvalidEvents",
    Outcome.FAILED: "EventsFailed",
}
_SUPPRESSED = {"duplicate": "DuplicateAlertsSuppressed", "stale": "StaleAlertsSuppressed"}


class NotificationNotDeliveredError(RuntimeError):
    """Raised for a record whose fact reached no channel it was routed to: SQS retries the record."""


def _count(name: str, value: int, **dimensions: str) -> None:
    with single_metric(
        name=name,
        unit=MetricUnit.Count,
        value=value,
        namespace=settings.namespace,
        default_dimensions={"Function": settings.function},
    ) as metric:
        for key, dimension in dimensions.items():
            metric.add_dimension(name=key, value=dimension)


def _report(result: BatchResult) -> None:
    """Counters and log lines for one batch (ids, severities and reasons only, never events)."""
    counters = Counter(_COUNTERS[r.outcome] for r in result.records)
    counters.update(_SUPPRESSED[r.suppressed] for r in result.records if r.suppressed)
    for name, count in counters.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=count)
    for record in result.records:
        context = {
            "outcome": record.outcome,
            "event_id": record.event_id,
            "detail_type": record.detail_type,
            "severity": record.severity,
            "error": record.error,
        }
        if record.outcome is Outcome.FAILED:
            logger.error("notification not delivered; the event will be retried", extra=context)
        elif record.outcome is not Outcome.PROCESSED:
            logger.warning("event not processed", extra=context)
        elif record.channels or record.suppressed:
            logger.info(
                "event handled",
                extra={**context, "channels": record.channels, "suppressed": record.suppressed},
            )
    for (channel, severity), count in Counter(result.sent).items():
        _count("NotificationsSent", count, Channel=channel, Severity=severity)
    for (channel, reason), count in Counter(result.failed).items():
        logger.warning("notification delivery failed", extra={"channel": channel, "reason": reason})
        _count("NotificationsFailed", count, Channel=channel, Reason=reason)
    for channel, count in Counter(channel for channel, _ in result.failed).items():
        _count("NotificationsFailed", count, Channel=channel)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """SQS batch in; ``{"batchItemFailures": [...]}`` out (Powertools batch utility)."""
    records = [r for r in event.get("Records") or [] if isinstance(r, dict)]
    result = dispatcher.process(
        [(str(r.get("messageId", "")), str(r.get("body", ""))) for r in records],
        remaining=lambda: context.get_remaining_time_in_millis() / 1000.0,
    )
    _report(result)
    outcomes = result.by_message_id()

    def record_handler(record: SQSRecord) -> None:
        outcome = outcomes.get(record.message_id)
        if outcome is None or outcome.outcome is Outcome.FAILED:
            raise NotificationNotDeliveredError(outcome.error if outcome else "record was not processed")

    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
