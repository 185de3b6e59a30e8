"""The invocation's deadline, and the botocore event hooks that bound every AWS call by it.

One process-wide :data:`DEADLINE` holds the time left of the running invocation (the Lambda
context's ``get_remaining_time_in_millis``), set by :func:`bounded` around each ``lambda_handler``
and cleared after it. Every client :func:`batchpilot.io.clients.client` makes carries two hooks
(botocore's documented event system, no retry loop of ours):

- ``before-send``: an attempt is not started when its worst case (the client's ``connect_timeout``
  plus ``read_timeout``) plus :data:`MARGIN_SECONDS` does not fit in the time left; the hook raises
  :class:`DeadlineExceeded`, which botocore's ``standard`` retry mode does not retry (it retries
  only ``HTTPClientError``/``ConnectionError`` and retryable answers: botocore/retries/standard.py),
  so the call fails at once (botocore/endpoint.py ``_do_get_response`` hands it to ``needs-retry``,
  then ``_send`` raises it);
- ``needs-retry``: a failed attempt is not retried when the longest backoff botocore may sleep
  before the next one (``min(2 ** (attempts - 1), 20)`` seconds, botocore ``ExponentialBackoff``)
  plus the next attempt's worst case plus the margin does not fit; the hook raises
  :class:`DeadlineExceeded` (from the attempt's error) instead of letting botocore sleep.

So no call outlives the invocation: the caller sees :class:`DeadlineExceeded` (an ``Exception``,
never ``is_permanent``) where a call would have run past the timeout, and treats it as any
transient failure (the record is reported failed and SQS delivers it again). :func:`guard_record`
makes a record handler refuse a record started with less than a reserve left, so the end-of-batch
writes keep their time. Without a deadline set (local tools, tests that set none) nothing is bounded.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

__all__ = [
    "DEADLINE",
    "MARGIN_SECONDS",
    "MAX_BACKOFF_SECONDS",
    "RECORD_RESERVE_SECONDS",
    "Deadline",
    "DeadlineExceeded",
    "bounded",
    "guard_record",
    "register_hooks",
]

MARGIN_SECONDS = 1.0
"""Seconds kept free after the worst case of the last attempt (the response, logs, metrics flush)."""
MAX_BACKOFF_SECONDS = 20.0
"""botocore ``standard`` mode's longest backoff between attempts (``ExponentialBackoff._MAX_BACKOFF``)."""
RECORD_RESERVE_SECONDS = 10.0
"""A record handler does not start a record with less than this left (:func:`guard_record`)."""


class DeadlineExceeded(Exception):
    """An AWS call (or a record) was not started: it would not end before the invocation's timeout."""


class _Context(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


class Deadline:
    """The running invocation's time left (seconds); ``inf`` when none is set."""

    def __init__(self) -> None:
        self._time_left: Callable[[], float] | None = None

    def start(self, time_left: Callable[[], float]) -> None:
        """Bound calls by ``time_left()`` (seconds) until :meth:`clear`."""
        self._time_left = time_left

    def start_from(self, context: _Context | None) -> None:
        """Bound calls by the Lambda context's remaining time (None: nothing bounded)."""
        if context is None:
            self._time_left = None
            return
        self._time_left = lambda: context.get_remaining_time_in_millis() / 1000.0

    def clear(self) -> None:
        """No deadline (between invocations)."""
        self._time_left = None

    def time_left(self) -> float:
        """Seconds left in the invocation, ``math.inf`` without a deadline."""
        return math.inf if self._time_left is None else self._time_left()

    def require(self, seconds: float, what: str) -> None:
        """Raise :class:`DeadlineExceeded` unless ``seconds`` plus :data:`MARGIN_SECONDS` fit.

        Args:
            seconds: the longest the next step may take.
            what: a short name for the message (``dynamodb:UpdateItem``), never a payload.
        """
        left = self.time_left()
        if left < seconds + MARGIN_SECONDS:
            raise DeadlineExceeded(f"{what}: {left:.1f} s left, needs up to {seconds:.1f} s")


DEADLINE = Deadline()
"""The process's one deadline (a Lambda process runs one invocation at a time)."""

_F = TypeVar("_F", bound=Callable[..., Any])


def bounded(handler: _F) -> _F:
    """Decorate ``lambda_handler(event, context)``: :data:`DEADLINE` follows ``context`` during it."""

    @functools.wraps(handler)
    def wrapper(event: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
        DEADLINE.start_from(context)
        try:
            return handler(event, context, *args, **kwargs)
        finally:
            DEADLINE.clear()

    return wrapper  # type: ignore[return-value]


def guard_record(record_handler: _F, reserve: float = RECORD_RESERVE_SECONDS) -> _F:
    """``record_handler`` that raises :class:`DeadlineExceeded` for a record started with less than
    ``reserve`` seconds left: Powertools reports it in ``batchItemFailures`` and SQS delivers it
    again after the queue's visibility timeout, instead of Lambda killing it mid-write."""

    @functools.wraps(record_handler)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        left = DEADLINE.time_left()
        if left < reserve:
            raise DeadlineExceeded(f"record not started: {left:.1f} s left, reserve {reserve:.1f} s")
        return record_handler(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _operation(event_name: str) -> str:
    parts = event_name.split(".")
    return ":".join(parts[1:3]) if len(parts) >= 3 else event_name


def register_hooks(
    events: Any, service_id: str, attempt_seconds: float, max_attempts: int, deadline: Deadline = DEADLINE
) -> None:
    """Register the ``before-send`` and ``needs-retry`` hooks (module docstring) on a client's
    ``meta.events``, first among their handlers.

    Args:
        events: ``client.meta.events`` (a botocore ``HierarchicalEmitter``).
        service_id: the client's hyphenized service id (``client.meta.service_model.service_id
            .hyphenize()``: ``dynamodb``, ``secrets-manager``).
        attempt_seconds: the longest one attempt may take (``connect_timeout + read_timeout``).
        max_attempts: the client's ``total_max_attempts`` (botocore ``StandardRetryConditions``
            decides, as the client's own retry handler does, whether a failed attempt is retried).
        deadline: the deadline to follow.
    """

    from botocore.retries.standard import RetryEventAdapter, StandardRetryConditions

    def before_send(event_name: str = "", **_: Any) -> None:
        deadline.require(attempt_seconds, _operation(event_name))

    adapter, conditions = RetryEventAdapter(), StandardRetryConditions(max_attempts=max_attempts)

    def needs_retry(
        event_name: str = "", caught_exception: BaseException | None = None, **kwargs: Any
    ) -> None:
        if isinstance(caught_exception, DeadlineExceeded):
            return  # not retried by botocore: raised as it is
        context = adapter.create_retry_context(caught_exception=caught_exception, **kwargs)
        if not conditions.is_retryable(context):
            return  # botocore's standard mode would not retry it either: its answer stands
        attempts = int(kwargs.get("attempts", 1))
        backoff = min(2.0 ** (attempts - 1), MAX_BACKOFF_SECONDS)
        response = kwargs.get("response")
        error = response[1].get("Error", {}).get("Code") if response is not None else None
        last = error or type(caught_exception).__name__
        try:
            deadline.require(backoff + attempt_seconds, f"retry of {_operation(event_name)} after {last}")
        except DeadlineExceeded as exc:
            raise exc from caught_exception

    # On the service's own events (``before-send.dynamodb``): botocore calls the handlers of the
    # most specific event first, so these run before any other hook on the service.
    events.register_first(f"before-send.{service_id}", before_send, unique_id="batchpilot-deadline-send")
    events.register_first(f"needs-retry.{service_id}", needs_retry, unique_id="batchpilot-deadline-retry")
