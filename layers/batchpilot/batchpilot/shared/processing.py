"""The one processor shape of batchpilot's five functions (SQS queues, partial batch responses).

Each feature's ``handler.py`` subclasses :class:`SqsProcessor`, a Powertools ``BatchProcessor``
(``EventType.SQS``), and ``functions/<name>/app.py`` builds one at cold start and returns
``processor.handle(event, context)`` from its decorated ``lambda_handler``. The shape:

- **batch-level work** (the whole batch at once: the alerts service's digests, the ledger's one
  read and one write per job, a buffer flushed once) goes in ``_prepare`` / ``_clean``, the
  extension points Powertools documents for a custom processor ("Create your own partial
  processor", Powertools batch processing docs); each override calls ``super()`` first
  (``_prepare``) or last (``_clean``), and reads the batch with :meth:`SqsProcessor.batch_bodies`;
- **record work** goes in :meth:`SqsProcessor.process_record`, which :meth:`record_handler` runs
  inside the record's scope (:func:`batchpilot.shared.observability.record_scope`: its
  ``messageId`` is the correlation id of everything it causes); raising marks only that record
  as a batch item failure (``ReportBatchItemFailures``), so SQS delivers it alone again;
- **the Lambda context** is passed, never read from a processor attribute Powertools sets for
  itself: :meth:`SqsProcessor.handle` keeps the context it is given for the invocation (and hands
  it to ``process_partial_response(..., context=context)`` as Powertools documents), and both the
  batch-level and the record work ask :meth:`SqsProcessor.time_left` (seconds, from the context's
  ``get_remaining_time_in_millis``) or :attr:`SqsProcessor.context`. Nothing of an invocation
  outlives it: ``_clean`` drops the context and the batch's results.

``functions/<name>/app.py`` exposes ``lambda_handler = queue_entry(processor)``; a function with a
schedule as well (ledger, capacity) gives each trigger its own entry, ``queue_handler`` and
``schedule_handler`` (:func:`schedule_entry`), and its one ``Handler`` (a Lambda function has one)
is :func:`by_trigger` of the two. Every entry is decorated once, by
:func:`batchpilot.shared.observability.entry`.

A test or benchmark may also call ``process_partial_response(event, processor.record_handler,
processor)`` without a context: the time left is then the processor's ``no_context_seconds``.

Scheduled triggers do not come through a processor: their own entry runs the feature's
``run_schedule``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from batchpilot.shared.deadline import DEADLINE, bounded
from batchpilot.shared.observability import entry, record_scope

__all__ = [
    "Handler",
    "SqsProcessor",
    "TimeLeft",
    "by_trigger",
    "queue_entry",
    "schedule_entry",
    "time_left_of",
]

TimeLeft = Callable[[], float]
"""Seconds the invocation has left, asked at each call (``LambdaContext.get_remaining_time_in_millis``)."""


def time_left_of(context: LambdaContext | None, default: float = math.inf) -> TimeLeft:
    """Seconds the invocation has left, asked of ``context`` at each call (``default`` without one).

    Args:
        context: the invocation's Lambda context (``get_remaining_time_in_millis``, milliseconds).
        default: seconds returned when there is no context (a direct call: tests, benchmarks).
    """
    if context is None:
        return lambda: default
    return lambda: context.get_remaining_time_in_millis() / 1000.0


class SqsProcessor(BatchProcessor):
    """Powertools' SQS ``BatchProcessor`` in the shape every batchpilot function uses (module docstring).

    Args:
        raise_on_entire_batch_failure: Powertools' option; ``False`` when a batch whose every record
            is handed back is a normal outcome (recovery), so the ``Errors`` alarm means an error.
        no_context_seconds: what :meth:`time_left` answers when the batch came without a Lambda
            context (default ``inf``: no deadline).

    Subclasses implement :meth:`process_record` and may override ``_prepare`` / ``_clean``.
    """

    def __init__(
        self, *, raise_on_entire_batch_failure: bool = True, no_context_seconds: float = math.inf
    ) -> None:
        super().__init__(
            event_type=EventType.SQS, raise_on_entire_batch_failure=raise_on_entire_batch_failure
        )
        self.no_context_seconds = no_context_seconds
        self._context: LambdaContext | None = None

    def handle(self, event: dict[str, Any], context: LambdaContext | None) -> PartialItemFailureResponse:
        """The function's SQS entry: ``event`` (``{"Records": [...]}``) through
        ``process_partial_response`` with this processor; returns ``{"batchItemFailures": [...]}``.

        Raises:
            Powertools' ``BatchProcessingError``: every record failed (unless
                ``raise_on_entire_batch_failure=False``); Lambda then retries the whole batch.
        """
        self._context = context
        DEADLINE.start_from(context)  # every AWS call of the batch ends before the timeout (io/deadline.py)
        try:
            return process_partial_response(
                event=event, record_handler=self.record_handler, processor=self, context=context
            )
        finally:
            self._context = None
            DEADLINE.clear()

    @property
    def context(self) -> LambdaContext | None:
        """The Lambda context :meth:`handle` was given for the running invocation (None outside one)."""
        return self._context

    def time_left(self) -> float:
        """Seconds the running invocation has left (``no_context_seconds`` without a context)."""
        return time_left_of(self._context, self.no_context_seconds)()

    def batch_bodies(self) -> list[tuple[str, str]]:
        """The batch being processed (for ``_prepare``): ``(messageId, body)`` of each record, in
        order (``""`` for a field a malformed record lacks)."""
        return [
            (str(r.get("messageId", "")), str(r.get("body", ""))) for r in self.records if isinstance(r, dict)
        ]

    def record_handler(self, record: SQSRecord) -> Any:
        """Powertools' record handler: :meth:`process_record` inside the record's scope."""
        with record_scope(record.message_id):
            return self.process_record(record)

    def process_record(self, record: SQSRecord) -> Any:
        """One record's work; raise to have SQS deliver it alone again."""
        raise NotImplementedError

    def _prepare(self) -> None:
        super()._prepare()  # type: ignore[no-untyped-call]  # Powertools leaves it unannotated

    def _clean(self) -> None:
        super()._clean()  # type: ignore[no-untyped-call]  # Powertools leaves it unannotated


Handler = Callable[[Any, Any], Any]
"""A Lambda entry: ``(event, context) -> response``."""


def queue_entry(processor: SqsProcessor) -> Handler:
    """The function's SQS entry: ``processor.handle(event, context)`` decorated with
    :func:`batchpilot.shared.observability.entry` (Logger context, counters written once)."""
    return entry(processor.handle)


def schedule_entry(run: Callable[[Any], dict[str, Any]]) -> Handler:
    """A scheduled trigger's own entry (EventBridge Scheduler input shaped as a scheduled event):
    ``run(event)`` (the feature's ``run_schedule``: ValueError without a usable ``time``), decorated
    like :func:`queue_entry` and :func:`~batchpilot.shared.deadline.bounded` (its AWS calls end
    before the timeout); returns the run's summary."""

    def schedule_handler(event: Any, context: Any) -> dict[str, Any]:
        return run(event)

    return entry(bounded(schedule_handler))


def by_trigger(*, queue: Handler, schedule: Handler) -> Handler:
    """The one ``Handler`` of a function with a queue and a schedule (a Lambda function has one):
    an SQS batch (``{"Records": [...]}``) goes to ``queue``, anything else to ``schedule``. Both
    entries are decorated already; this adds nothing of its own."""

    def lambda_handler(event: Any, context: Any) -> Any:
        if isinstance(event, dict) and "Records" in event:
            return queue(event, context)
        return schedule(event, context)

    return lambda_handler
