"""The ledger function's entry points: an SQS batch of job events, and the scheduled run.

:class:`LedgerProcessor` is the shared processor shape (:class:`batchpilot.shared.processing.SqsProcessor`)
whose batch-level work is the ledger service: ``_prepare`` hands every record of the batch to
:meth:`batchpilot.ledger.service.LedgerService.records` once (one read of the batch's job records,
one write per job); the record work (``process_record``, run by Powertools for each record in its
scope) counts its outcome with ``count_outcome`` or raises the error it must be retried for;
``_clean`` writes the batch's event metrics once and drops its results. Each record's ``messageId``
goes to the service with its body, so its metric values and its ``Job Starving`` are under it (the
correlation id), and its count and log line are in its scope. :func:`run_schedule` runs
:meth:`~batchpilot.ledger.service.LedgerService.run` at the schedule event's ``time``, then the GPU
activity check of the running training jobs (:class:`batchpilot.gpu.service.GpuActivityService`),
whose gauges are flushed with the ledger's.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from batchpilot.gpu.service import GpuActivityService
from batchpilot.ledger.service import LedgerService, RecordResult
from batchpilot.shared.errors import describe
from batchpilot.shared.events import to_datetime_or_none
from batchpilot.shared.observability import count_outcome, log_field, logger
from batchpilot.shared.processing import SqsProcessor

__all__ = ["LedgerProcessor", "run_schedule", "warn_unreadable"]


def warn_unreadable(source: str, consequence: str) -> None:
    """Log (the service calls it once per Lambda instance and source) that something the ledger
    reads cannot be read, and what that costs: a scheduling policy (its ARN) or a queue's quota
    shares (those shares' ``Entitlement``, ``BorrowedInstances`` and ``LentInstances`` omitted),
    a checkpoint bucket (``LostInstanceHours`` measured from the whole attempt). Every other
    metric is still published."""
    fields = {"source": log_field(source), "consequence": log_field(consequence)}
    logger.warning("ledger input cannot be read", extra=fields)


def run_schedule(service: LedgerService, event: Any, gpu: GpuActivityService | None = None) -> dict[str, Any]:
    """A schedule event (EventBridge Scheduler input shaped as a scheduled event) → one run at its
    ``time``, logged; returns the run's summary (with ``gpu``: the GPU activity check's, under
    ``"gpu"``, logged as ``gpu activity``).

    Raises:
        ValueError: the event has no usable ``time``.
    """
    now = to_datetime_or_none(event.get("time")) if isinstance(event, dict) else None
    if now is None:
        raise ValueError("scheduled event without a usable time")
    gpu_summary: dict[str, Any] | None = None
    try:
        summary = service.run(now).as_dict()
        if gpu is not None:
            gpu_summary = gpu.run(now).as_dict()
    finally:
        service.flush()
    logger.info("ledger run", extra=summary)
    if gpu_summary is not None:
        if gpu_summary["unread"]:
            unread = {"unread": gpu_summary["unread"], "errors": gpu_summary["errors"]}
            logger.warning("gpu series unread", extra=unread)
        logger.info("gpu activity", extra=gpu_summary)
        summary["gpu"] = gpu_summary
    return summary


class LedgerProcessor(SqsProcessor):
    """SQS batch processor of ``LedgerQueue`` (every job event).

    Args:
        service: the ledger service, built once per Lambda instance.

    A malformed or unsupported record is counted and logged, never retried, and so is one whose
    request AWS refused for good (``InvalidEvents`` and ``PermanentErrors``, the operation and a
    bounded excerpt of the error in its log line: :mod:`batchpilot.shared.errors`); the records of
    a job whose write failed otherwise (throttling, 5xx, lost races) are logged and raise, so only
    they are retried by SQS (the other jobs of the batch are written).
    """

    def __init__(self, service: LedgerService) -> None:
        super().__init__()
        self.service = service
        self._results: dict[str, RecordResult | Exception] = {}

    def _prepare(self) -> None:
        """Start of the batch: every record applied (per job: one read, one write)."""
        super()._prepare()
        batch = self.batch_bodies()
        ids = [message_id for message_id, _ in batch]
        results = self.service.records([body for _, body in batch], ids)
        self._results = dict(zip(ids, results, strict=True))

    def process_record(self, record: SQSRecord) -> None:
        """One record (in its scope): its outcome counted (``EventsProcessed``, ...), or its error
        raised so SQS delivers it alone again (its job's write failed, lost its races, or its
        ``Job Starving`` could not be published)."""
        result = self._results.get(record.message_id)
        if result is None:  # not in the batch _prepare saw: applied alone
            result = self.service.records([record.body], [record.message_id])[0]
        if isinstance(result, Exception):
            # Transient (throttled, lost races, PutEvents failed): SQS delivers it again. The line
            # names the operation and code, never the event (errors AWS refused for good are
            # results: counted and logged by count_outcome, not retried).
            logger.warning("record failed; retried", extra={"error": log_field(describe(result))})
            raise result
        count_outcome(result.outcome, "ledger event", **result.fields)

    def _clean(self) -> None:
        """End of the batch: write its event metrics once, then the partial batch response."""
        self._results = {}
        try:
            self.service.flush()
        finally:
            super()._clean()
