"""The alerts function's batch work for Powertools' batch utility: one pass over each SQS batch.

Digests need the whole batch, so the work is batch-level, in the shared processor shape
(:class:`batchpilot.shared.processing.SqsProcessor`, ``_prepare``/``_clean``):

- :meth:`AlertsProcessor._prepare` hands every record of the batch to the
  :class:`~batchpilot.alerts.service.AlertService` once (decode, decide, deliver), with the time
  left from the Lambda context ``processor.handle(event, context)`` was given, then counts and
  logs the outcomes;
- :meth:`AlertsProcessor.process_record`, run by Powertools for each record, only raises for a
  record whose fact reached none of the channels it was routed to, so ``ReportBatchItemFailures``
  makes SQS deliver just that record again;
- :meth:`AlertsProcessor._clean` drops the batch's results.

Counters (namespace and ``Function`` dimension from :func:`batchpilot.shared.observability.configure`):
one per record through :func:`~batchpilot.shared.observability.count_outcome`, ``EventsFailed``,
``DuplicateAlertsSuppressed``, ``StaleAlertsSuppressed``, ``DeliveriesNotRecorded`` (channels that
delivered a fact whose delivery record could not be written), ``NotificationsSent`` by ``Channel`` and
``Severity``, ``NotificationsFailed`` by ``Channel`` and ``Reason`` and by ``Channel``. Log lines
carry ids, severities, channels and reasons, never an event; an alarm whose description names no
known severity is said once (``alarm severity not stated``, WARNING), and a message that should
have mentioned its job's owner and did not is said once per owner and reason (``owner not
mentioned``, INFO: the owner, at most 256 characters, and the reason).

Each record's counts and log line are in its scope (its ``messageId`` is the ``correlation_id``), and
every message delivered is logged once (``notification sent``: channel, severity, in the order the
channel received them) in the scope of the record it tells about; a digest is the batch's, with the
``record_ids`` it covers (at most :data:`MAX_LOGGED_RECORDS`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from batchpilot.alerts.service import AlertService, BatchResult, RecordOutcome, SentMessage, Suppressed
from batchpilot.shared.correlation import SENT_MESSAGE
from batchpilot.shared.metrics import dimensions
from batchpilot.shared.observability import (
    correlation_metadata,
    count,
    count_outcome,
    log_field,
    logger,
    metrics,
    record_scope,
)
from batchpilot.shared.processing import SqsProcessor

__all__ = [
    "MAX_LOGGED_RECORDS",
    "NO_CONTEXT_SECONDS",
    "AlertsProcessor",
    "NotificationNotDeliveredError",
    "report",
]

NO_CONTEXT_SECONDS = 60.0
"""Time left assumed when the batch comes without a Lambda context (a local call)."""
MAX_LOGGED_RECORDS = 100
"""Most record ids a digest's ``notification sent`` line lists (AlertsQueue's BatchSize)."""

_SUPPRESSED = {Suppressed.DUPLICATE: "DuplicateAlertsSuppressed", Suppressed.STALE: "StaleAlertsSuppressed"}


class NotificationNotDeliveredError(RuntimeError):
    """Raised for a record whose fact reached no channel it was routed to: SQS retries the record."""


def _count(name: str, value: int, **values: str) -> None:
    # One value with its own dimension set (through the one allow-list), beside the batch's counters.
    with single_metric(
        name=name,
        unit=MetricUnit.Count,
        value=value,
        namespace=metrics.namespace,
        default_dimensions=dict(metrics.default_dimensions),
    ) as metric:
        for key, dimension in dimensions(**values):
            metric.add_dimension(name=key, value=dimension)
        for key, value_ in correlation_metadata(name).items():
            metric.add_metadata(key=key, value=value_)


def _log_record(record: RecordOutcome) -> None:
    if record.rejected is not None:  # malformed, or refused for good by AWS (not retried)
        count_outcome(record.rejected, channels=[c.value for c in record.channels] or None)
        return
    if record.warning:
        # An alarm whose description names no severity: once per alarm and function instance.
        logger.warning(
            "alarm severity not stated",
            extra={"event_id": record.event_id, "warning": log_field(record.warning)},
        )
    if record.owner_note is not None:
        # Once per owner and reason (the service remembers): the message went without a mention.
        owner, reason, channel = record.owner_note
        logger.info(
            "owner not mentioned",
            extra={
                "event_id": record.event_id,
                "owner": log_field(owner) or None,
                "reason": reason,
                "channel": channel.value if channel else None,
            },
        )
    if record.unrecorded:
        # Delivered, but a later copy of the event may send again: never silent.
        count("DeliveriesNotRecorded", len(record.unrecorded))
        logger.error(
            "notification delivered but its delivery record was not written",
            extra={
                "event_id": record.event_id,
                "detail_type": record.detail_type,
                "channels": [c.value for c in record.unrecorded],
                "error": record.error,
            },
        )
    if record.failed:
        count("EventsFailed")
        logger.error(
            "notification not delivered; the event will be retried",
            extra={
                "event_id": record.event_id,
                "detail_type": record.detail_type,
                "severity": record.severity,
                "channels": [c.value for c in record.channels],
                "error": record.error,
            },
        )
        return
    if record.suppressed is not None:
        count(_SUPPRESSED[record.suppressed])
    if not (record.channels or record.suppressed):
        count_outcome(record.outcome)
        return
    count_outcome(
        record.outcome,
        "event handled",
        event_id=record.event_id,
        detail_type=record.detail_type,
        severity=record.severity,
        channels=[c.value for c in record.channels],
        suppressed=record.suppressed,
        error=record.error,
    )


def _owner(message: SentMessage) -> str | None:
    """The record a message is about, or None for a digest (the batch's)."""
    return message.records[0] if len(message.records) == 1 else None


def _log_sent(message: SentMessage) -> None:
    extra: dict[str, Any] = {"channel": message.channel.value, "severity": message.severity.value}
    if len(message.records) > 1:
        extra["records"] = len(message.records)
        extra["record_ids"] = list(message.records[:MAX_LOGGED_RECORDS])
    logger.info(SENT_MESSAGE, extra=extra)


def report(result: BatchResult) -> None:
    """Count and log one batch (see the module docstring)."""
    for record in result.records:
        with record_scope(record.message_id):
            _log_record(record)
    sent: Counter[tuple[str, str, str | None]] = Counter()
    for message in result.messages:
        owner = _owner(message)
        with record_scope(owner):
            _log_sent(message)
        sent[(message.channel.value, message.severity.value, owner)] += 1
    for (channel, severity, owner), n in sent.items():
        with record_scope(owner):
            _count("NotificationsSent", n, Channel=channel, Severity=severity)
    for (channel, reason), n in Counter(result.failed).items():
        logger.warning("notification delivery failed", extra={"channel": channel.value, "reason": reason})
        _count("NotificationsFailed", n, Channel=channel.value, Reason=reason)
    for channel, n in Counter(channel for channel, _ in result.failed).items():
        _count("NotificationsFailed", n, Channel=channel.value)


class AlertsProcessor(SqsProcessor):
    """SQS batch processor of ``AlertsQueue`` whose batch-level work is the alerts service.

    ``functions/alerts/app.py`` returns ``processor.handle(event, context)``.

    Args:
        service: the alerts service (built once, at cold start).
    """

    def __init__(self, service: AlertService) -> None:
        super().__init__(no_context_seconds=NO_CONTEXT_SECONDS)
        self._service = service
        self._results: dict[str, RecordOutcome] = {}

    def _prepare(self) -> None:
        """Start of the batch: every record decided and delivered once, counted and logged."""
        super()._prepare()
        result = self._service.process(self.batch_bodies(), self.time_left)
        report(result)
        self._results = result.by_message_id()

    def _clean(self) -> None:
        """End of the batch: its results dropped, then the partial batch response."""
        self._results = {}
        super()._clean()

    def process_record(self, record: SQSRecord) -> Any:
        """Raise :class:`NotificationNotDeliveredError` when ``record``'s fact was not delivered."""
        outcome = self._results.get(record.message_id)
        if outcome is None or outcome.failed:
            raise NotificationNotDeliveredError(outcome.error if outcome else "record was not processed")
        return outcome.outcome.value
