"""The ledger function's entry points: an SQS batch of job events, and the scheduled run.

:class:`LedgerProcessor` is a Powertools ``BatchProcessor``: each record goes through
:meth:`batchpilot.ledger.service.LedgerService.record` and is counted with ``count_outcome``; its
``_clean`` writes the batch's event metrics once. :func:`run_schedule` runs
:meth:`~batchpilot.ledger.service.LedgerService.run` at the schedule event's ``time``.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from batchpilot.ledger.service import LedgerService
from batchpilot.shared.events import to_datetime_or_none
from batchpilot.shared.observability import count_outcome, log_field, logger

__all__ = ["LedgerProcessor", "run_schedule", "warn_unreadable"]


def warn_unreadable(source: str, consequence: str) -> None:
    """Log (the service calls it once per Lambda instance and source) that something the ledger
    reads cannot be read, and what that costs: a scheduling policy (its ARN) or a queue's quota
    shares (those shares' ``Entitlement`` and ``BorrowedInstances`` omitted), a checkpoint bucket
    (``LostInstanceHours`` measured from the whole attempt). Every other metric is still
    published."""
    fields = {"source": log_field(source), "consequence": log_field(consequence)}
    logger.warning("ledger input cannot be read", extra=fields)


def run_schedule(service: LedgerService, event: Any) -> dict[str, Any]:
    """A schedule event (EventBridge Scheduler input shaped as a scheduled event) → one run at its
    ``time``, logged; returns the run's summary.

    Raises:
        ValueError: the event has no usable ``time``.
    """
    now = to_datetime_or_none(event.get("time")) if isinstance(event, dict) else None
    if now is None:
        raise ValueError("scheduled event without a usable time")
    try:
        summary = service.run(now).as_dict()
    finally:
        service.flush()
    logger.info("ledger run", extra=summary)
    return summary


class LedgerProcessor(BatchProcessor):
    """SQS batch processor of ``LedgerQueue`` (every job event).

    Args:
        service: the ledger service, built once per Lambda instance.

    A malformed or unsupported record is counted and logged, never retried; a record whose write
    failed (DynamoDB error, lost races) raises, so only it is retried by SQS.
    """

    def __init__(self, service: LedgerService) -> None:
        super().__init__(event_type=EventType.SQS)
        self.service = service

    def record_handler(self, record: SQSRecord, lambda_context: LambdaContext | None = None) -> None:
        """One record: the ledger updated, the outcome counted (``EventsProcessed``, ...)."""
        result = self.service.record(record.body)
        count_outcome(result.outcome, "ledger event", **result.fields)

    def _prepare(self) -> None:
        """Start of the batch: the records of every job it names, read at once."""
        super()._prepare()  # type: ignore[no-untyped-call]  # Powertools leaves it unannotated
        bodies = [str(r.get("body", "")) for r in self.records if isinstance(r, dict)]
        self.service.prefetch(bodies)

    def _clean(self) -> None:
        """End of the batch: write its event metrics once, then the partial batch response."""
        try:
            self.service.flush()
        finally:
            self.service.forget()
            super()._clean()  # type: ignore[no-untyped-call]  # Powertools leaves it unannotated
