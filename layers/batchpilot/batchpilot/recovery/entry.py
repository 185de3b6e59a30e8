"""The recovery function's entry logic: one SQS record in, one recovery decision logged and counted.

The handler (``functions/recovery/app.py``) builds the clients and the :class:`RecoveryEntry` at
cold start, and makes one call per record (:meth:`RecoveryEntry.handle_record`) inside
:meth:`RecoveryEntry.invocation`. Logs and counters go to :mod:`batchpilot.shared.observability`.
"""

from __future__ import annotations

import math
import os
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from batchpilot.io.emf import EmfPublisher
from batchpilot.recovery.service import Action, Recoverer, RetryLater
from batchpilot.shared.observability import logger, metrics

__all__ = ["COUNTERS", "MAX_VISIBILITY_S", "RecoveryEntry"]

MAX_VISIBILITY_S = 43_200
"""SQS's longest visibility timeout, in seconds (12 hours)."""

COUNTERS = {
    Action.RESUBMITTED: "EventsProcessed",
    Action.DRY_RUN: "EventsProcessed",
    Action.SKIPPED: "EventsProcessed",
    Action.FAILED: "EventsProcessed",
    Action.DUPLICATE: "DuplicateEvents",
    Action.IGNORED: "EventsIgnored",
    Action.INVALID: "InvalidEvents",
}
"""The counter (``Count``, +1) each record's :class:`Action` adds."""


class RecoveryEntry:
    """One Lambda instance's entry point into recovery.

    Args:
        recoverer: returns the recoverer (called at each record, inside the error handling, so it
            may build it lazily).
        sqs: returns the SQS client used to delay handed-back records (called at a deferral only).
        queue_url: the queue whose records are delayed; ``None`` leaves them to the queue's
            visibility timeout.
        publisher: where a record's job metrics (EMF) go.
    """

    def __init__(
        self,
        recoverer: Callable[[], Recoverer],
        sqs: Callable[[], Any],
        queue_url: str | None,
        publisher: EmfPublisher,
    ) -> None:
        self.recoverer = recoverer
        self.sqs = sqs
        self.queue_url = queue_url
        self.publisher = publisher
        self.context: LambdaContext | None = None

    @contextmanager
    def invocation(self, context: LambdaContext) -> Iterator[None]:
        """Within it, :meth:`time_left` follows ``context``; outside, time is unbounded."""
        self.context = context
        try:
            yield
        finally:
            self.context = None

    def time_left(self) -> float:
        """Seconds before the function times out (``inf`` outside an :meth:`invocation`)."""
        if self.context is None:
            return float("inf")
        return self.context.get_remaining_time_in_millis() / 1000.0

    def defer(self, record: SQSRecord, delay: float | None) -> None:
        """Make a handed-back record visible again in ``delay`` seconds (rounded up, clamped to
        0..``MAX_VISIBILITY_S``). Best effort: does nothing without a delay or a queue URL, and an
        SQS error is logged (WARNING), not raised."""
        if delay is None or self.queue_url is None:
            return
        seconds = max(0, min(MAX_VISIBILITY_S, math.ceil(delay)))
        try:
            self.sqs().change_message_visibility(
                QueueUrl=self.queue_url, ReceiptHandle=record.receipt_handle, VisibilityTimeout=seconds
            )
        except Exception as exc:  # the record still comes back, after the queue's visibility timeout
            logger.warning("could not delay the record", extra={"error": type(exc).__name__})

    def handle_record(self, record: SQSRecord) -> None:
        """Handle one SQS record: decide, count (:data:`COUNTERS`), publish job metrics, log.

        Raises:
            RetryLater: the record must come back later (counted ``RecordsRetried``; its
                visibility is set to when it is due, see :meth:`defer`).
            Exception: anything else the recoverer raises (counted ``RecordErrors``, logged at
                ERROR with the exception's type and last frames, never its message).
        """
        try:
            result = self.recoverer().handle(record.body, self.time_left)
        except RetryLater as exc:
            metrics.add_metric(name="RecordsRetried", unit=MetricUnit.Count, value=1)
            logger.info(
                "record handed back to SQS",
                extra={"message_id": record.message_id, "reason": exc.reason, "delay_s": exc.delay_seconds},
            )
            self.defer(record, exc.delay_seconds)
            raise
        except Exception as exc:
            # A bug or an AWS outage: logged at ERROR (without the event), counted, and retried by SQS
            # up to the queue's redrive limit, then the dead-letter queue and its alarm.
            metrics.add_metric(name="RecordErrors", unit=MetricUnit.Count, value=1)
            # Not logger.exception: an error message can quote request values (environment, payload).
            frames = traceback.extract_tb(exc.__traceback__)[-3:]
            logger.error(
                "record failed",
                extra={
                    "message_id": record.message_id,
                    "error": type(exc).__name__,
                    "where": [f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in frames],
                },
            )
            raise
        metrics.add_metric(name=COUNTERS[result.action], unit=MetricUnit.Count, value=1)
        if result.metrics:
            self.publisher.publish(result.metrics)
        details = {
            "action": result.action.value,
            "event_id": result.event_id,
            "detail_type": result.detail_type,
            "job_arn": result.job_arn,
            "job_kind": result.job_kind,
            "category": result.category,
            "skip_reason": result.skip_reason.value if result.skip_reason else None,
            "decision": result.message,
            "lineage_id": result.lineage_id,
            "attempt": result.attempt,
            "operation": result.operation,
            "new_job_name": result.new_job_name,
            "new_job_arn": result.new_job_arn,
            "error": result.error,
            "dropped_tags": result.dropped_tags or None,  # keys only: over the 50-tag limit
        }
        details = {k: v for k, v in details.items() if v is not None}
        if result.action is Action.INVALID:
            logger.warning("event not processed", extra={"outcome": "invalid", **details})
        elif result.action is Action.FAILED:
            logger.warning("resubmission refused by AWS", extra={"outcome": "recovery-failed", **details})
        else:
            logger.info("recovery decision", extra=details)
