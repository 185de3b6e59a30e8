"""Backoff between resubmissions of one lineage, and the client-side submit rate limit (pure).

SubmitServiceJob allows 5 calls per second per account, not adjustable, shared with every person
and pipeline submitting in that account. The recovery function paces its own submit calls with a
token bucket (:class:`SubmitPacer`) at ``submits_per_second / max_concurrency`` per invocation;
the event source mapping's ``MaximumConcurrency`` and the function's reserved concurrency cap how
many invocations run at once, so the whole function stays under ``submits_per_second`` (+ one
burst token per running invocation). Throttling that still happens is retried by botocore's
standard retry mode. A record that cannot get a token before the invocation runs out of time is
handed back to SQS (:class:`NotInTime`), never dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["NotInTime", "SubmitPacer", "backoff_seconds"]


def backoff_seconds(resubmissions_so_far: int, base: float, cap: float) -> float:
    """Seconds to wait after the previous resubmission of a lineage before the next one.

    0 before the first resubmission; then ``base``, ``2 x base``, ``4 x base``, ... at most ``cap``.
    """
    if resubmissions_so_far <= 0 or base <= 0:
        return 0.0
    exponent = min(resubmissions_so_far - 1, 40)
    return float(min(cap, base * (2**exponent)))


class NotInTime(Exception):
    """The next submit slot is later than the time the invocation has left (seconds in ``wait``)."""

    def __init__(self, wait: float, budget: float) -> None:
        super().__init__(f"next submit slot in {wait:.2f} s, only {budget:.2f} s left")
        self.wait = wait
        self.budget = budget


class SubmitPacer:
    """A token bucket for submit calls: ``rate`` tokens per second, at most ``burst`` stored.

    Args:
        rate: tokens per second (> 0).
        burst: bucket size (≥ 1); the first ``burst`` calls go at once.
        clock: monotonic seconds (default ``time.monotonic``); tests inject a fake.
        sleep: sleeps that many seconds (default ``time.sleep``); tests inject a fake that
            advances the fake clock.

    Lives for the life of the Lambda execution environment, so consecutive invocations on one
    environment share it.
    """

    def __init__(
        self,
        rate: float,
        burst: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0")
        if burst < 1:
            raise ValueError("burst must be >= 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = burst
        self._updated = clock()
        self.waited = 0.0
        """Total seconds slept so far (for reports and benchmarks)."""

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.rate)
        self._updated = now

    def wait_time(self) -> float:
        """Seconds until a token is available (0 when one is)."""
        self._refill()
        return 0.0 if self._tokens >= 1 else (1 - self._tokens) / self.rate

    def acquire(self, budget: float = float("inf")) -> float:
        """Take one token, sleeping until one is available; returns the seconds slept.

        Raises:
            NotInTime: the wait would be longer than ``budget`` seconds (no token is taken).
        """
        wait = self.wait_time()
        if wait > budget:
            raise NotInTime(wait, budget)
        if wait > 0:
            self._sleep(wait)
            self.waited += wait
            self._refill()
        self._tokens = max(0.0, self._tokens - 1)
        return wait
