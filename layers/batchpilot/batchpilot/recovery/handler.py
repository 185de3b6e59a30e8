"""The recovery function's batch work: one SQS record in, its outcome counted and logged.

``functions/recovery/app.py`` builds one :class:`RecoveryHandler` at cold start and passes it to
Powertools' ``process_partial_response`` as the record handler. Powertools gives it the Lambda
context of the invocation with each record (the handler has a ``lambda_context`` parameter), which
is where the time left comes from; nothing of an invocation is kept between records.

A record handed back (``RetryLater``) is a batch item failure. A batch whose every record is handed
back (one deferred record, say) is a normal outcome, not a function error: app.py's
``BatchProcessor`` reports the failures instead of raising (``raise_on_entire_batch_failure=False``),
so the function's ``Errors`` alarm means a real error.
"""

from __future__ import annotations

import math
import os
import traceback
from collections.abc import Callable

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from batchpilot.recovery.service import Action, Recoverer, RetryLater
from batchpilot.shared.errors import is_permanent
from batchpilot.shared.observability import count, count_outcome, logger, record_scope
from batchpilot.shared.records import Rejected, permanently_refused

__all__ = ["RecoveryHandler", "time_left_of"]


def time_left_of(context: LambdaContext | None) -> Callable[[], float]:
    """Seconds the invocation has left, asked of ``context`` at each call (``inf`` without one)."""
    if context is None:
        return lambda: math.inf
    return lambda: context.get_remaining_time_in_millis() / 1000.0


class RecoveryHandler:
    """Powertools' record handler for the recovery queue.

    Args:
        recoverer: the recovery service (its adapters built at cold start).
    """

    def __init__(self, recoverer: Recoverer) -> None:
        self.recoverer = recoverer

    def __call__(self, record: SQSRecord, lambda_context: LambdaContext | None = None) -> None:
        """Handle one record (inside its scope: its ``messageId`` is the correlation id of every
        log line, metric value, API call and own event it causes); raising marks only this record
        as failed (SQS delivers it again).

        Counts: ``EventsProcessed`` / ``DuplicateEvents`` / ``EventsIgnored`` / ``InvalidEvents``
        (:func:`~batchpilot.shared.observability.count_outcome`), ``RecordsRetried`` for a record
        handed back, ``PermanentErrors`` (and ``InvalidEvents``) for an error no retry can fix
        (:func:`batchpilot.shared.errors.is_permanent`: not raised, so not retried), ``RecordErrors``
        for anything else raised.

        Raises:
            RetryLater: the record must come back later (its visibility is set to when it is due).
            Exception: anything else the recoverer raises (logged at ERROR with the exception's
                type and last frames, never its message).
        """
        with record_scope(record.message_id):
            self._handle(record, lambda_context)

    def _handle(self, record: SQSRecord, lambda_context: LambdaContext | None) -> None:
        try:
            result = self.recoverer.handle_record(
                record.body, record.receipt_handle, time_left_of(lambda_context)
            )
        except RetryLater as exc:
            count("RecordsRetried")
            logger.info(
                "record handed back to SQS",
                extra={
                    "message_id": record.message_id,
                    "retry": exc.why,
                    "reason": exc.reason,
                    "delay_s": exc.delay_seconds,
                    "deferred": exc.deferred,
                },
            )
            if exc.defer_error is not None:  # it still comes back, after the queue's visibility timeout
                logger.warning("could not delay the record", extra={"error": exc.defer_error})
            raise
        except Exception as exc:
            if is_permanent(exc):
                # AWS refused the request for good (a 100 KB job name, a key DynamoDB rejects): no
                # retry can help. Counted (InvalidEvents, PermanentErrors), logged with the
                # operation and a bounded excerpt, never retried.
                count_outcome(permanently_refused(exc, None, None), message_id=record.message_id)
                return
            # A bug or an AWS outage: logged at ERROR (without the event), counted, and retried by SQS
            # up to the queue's redrive limit, then the dead-letter queue and its alarm.
            count("RecordErrors")
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
        if isinstance(result, Rejected):
            count_outcome(result, message_id=record.message_id)
            return
        message = "resubmission refused by AWS" if result.action is Action.FAILED else "recovery decision"
        count_outcome(result.outcome, message, message_id=record.message_id, **result.log_fields())
