"""The running invocation's deadline: one process-wide :data:`DEADLINE` (seconds left, from the Lambda
context's ``get_remaining_time_in_millis``), followed by every AWS call through the botocore hooks of
:mod:`batchpilot.io.deadline`.

:class:`batchpilot.shared.processing.SqsProcessor` sets it for each SQS batch and
:func:`bounded` around each scheduled entry; it is cleared after the invocation. Without a deadline
set (local tools, tests that set none) nothing is bounded. Pure: no AWS library is imported here.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

__all__ = ["DEADLINE", "MARGIN_SECONDS", "Deadline", "DeadlineExceeded", "bounded"]

MARGIN_SECONDS = 1.0
"""Seconds kept free after the worst case of the last attempt (the response, logs, metrics flush)."""


class DeadlineExceeded(Exception):
    """An AWS call (or a record) was not started: it would not end before the invocation's timeout."""


class _Context(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


class Deadline:
    """The running invocation's time left (seconds); ``inf`` when none is set."""

    def __init__(self) -> None:
        self._time_left: Callable[[], float] | None = None
        self.call_seconds = 0.0
        """The longest one AWS call attempt may take (seconds): the largest ``connect_timeout +
        read_timeout`` of the clients bounded by this deadline (set by
        :func:`batchpilot.io.deadline.register_hooks`); 0 before any client is made."""

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

    def require_calls(self, calls: int, what: str) -> None:
        """Raise :class:`DeadlineExceeded` unless ``calls`` AWS call attempts of
        :attr:`call_seconds` each (plus :data:`MARGIN_SECONDS`) fit: asked before a step whose
        later calls must not be cut off (a claim written, then the change, then its undo).

        Args:
            calls: how many calls the step makes, at most.
            what: a short name for the message, never a payload.
        """
        self.require(calls * self.call_seconds, what)


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
