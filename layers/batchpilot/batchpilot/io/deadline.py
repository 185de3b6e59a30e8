"""The invocation's deadline, and the botocore event hooks that bound every AWS call by it.

The process-wide :data:`~batchpilot.shared.deadline.DEADLINE` holds the time left of the running
invocation (set by the SQS processor and the scheduled entries, cleared after). Every client
:func:`batchpilot.io.clients.client` makes carries two hooks (botocore's documented event system,
no retry loop of ours):

- ``before-send``: an attempt is not started when its worst case (the client's ``connect_timeout``
  plus ``read_timeout``) plus ``MARGIN_SECONDS`` (:mod:`batchpilot.shared.deadline`) does not fit
  in the time left; the hook raises :class:`DeadlineExceeded`, which botocore's ``standard`` retry
  mode does not retry (it retries only ``HTTPClientError``/``ConnectionError`` and retryable
  answers: botocore/retries/standard.py), so the call fails at once (botocore/endpoint.py
  ``_do_get_response`` hands it to ``needs-retry``, then ``_send`` raises it);
- ``needs-retry``: a failed attempt is not retried when the longest backoff botocore may sleep
  before the next one (``min(2 ** (attempts - 1), 20)`` seconds, botocore ``ExponentialBackoff``)
  plus the next attempt's worst case plus the margin does not fit; the hook raises
  :class:`DeadlineExceeded` (from the attempt's error) instead of letting botocore sleep.

So no call outlives the invocation: the caller sees :class:`DeadlineExceeded` (an ``Exception``,
never ``is_permanent``) where a call would have run past the timeout, and treats it as any
transient failure (the record is reported failed and SQS delivers it again). Without a deadline
set (local tools, tests that set none) nothing is bounded.
"""

from __future__ import annotations

from typing import Any

from batchpilot.shared.deadline import DEADLINE, Deadline, DeadlineExceeded

__all__ = ["MAX_BACKOFF_SECONDS", "register_hooks"]

MAX_BACKOFF_SECONDS = 20.0
"""botocore ``standard`` mode's longest backoff between attempts (``ExponentialBackoff._MAX_BACKOFF``)."""


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
        deadline: the deadline to follow (its ``call_seconds`` raised to ``attempt_seconds``).
    """

    from botocore.retries.standard import RetryEventAdapter, StandardRetryConditions

    deadline.call_seconds = max(deadline.call_seconds, attempt_seconds)

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
