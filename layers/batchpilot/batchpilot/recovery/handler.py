"""The recovery function's batch work: one SQS record in, its outcome counted and logged.

``functions/recovery/app.py`` builds one :class:`RecoveryProcessor` at cold start (the shared
processor shape, :class:`batchpilot.shared.processing.SqsProcessor`) and returns
``processor.handle(event, context)``. The time left comes from the Lambda context ``handle`` was
given (:meth:`~batchpilot.shared.processing.SqsProcessor.time_left`); nothing of an invocation is
kept between records.

A record handed back (``RetryLater``) is a batch item failure. A batch whose every record is handed
back (one deferred record, say) is a normal outcome, not a function error: the processor reports
the failures instead of raising (``raise_on_entire_batch_failure=False``), so the function's
``Errors`` alarm means a real error.
"""

from __future__ import annotations

import os
import traceback

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from batchpilot.recovery.service import Action, Recoverer, RetryLater
from batchpilot.shared.errors import is_permanent
from batchpilot.shared.observability import count, count_outcome, logger
from batchpilot.shared.processing import SqsProcessor
from batchpilot.shared.records import Rejected, permanently_refused

__all__ = ["RecoveryProcessor"]


class RecoveryProcessor(SqsProcessor):
    """SQS batch processor of ``RecoveryQueue``.

    Args:
        recoverer: the recovery service (its adapters built at cold start).
    """

    def __init__(self, recoverer: Recoverer) -> None:
        super().__init__(raise_on_entire_batch_failure=False)
        self.recoverer = recoverer

    def process_record(self, record: SQSRecord) -> None:
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
        try:
            result = self.recoverer.handle_record(record.body, record.receipt_handle, self.time_left)
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
