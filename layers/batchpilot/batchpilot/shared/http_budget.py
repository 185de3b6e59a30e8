"""Time budgets of one outgoing HTTP request (chat posts and webhooks), shared by the chat
channels (:mod:`batchpilot.alerts.channels`) and the webhook transport
(:mod:`batchpilot.io.webhook`). Pure: no I/O, no client library.

Lives in ``shared`` because the transport (an adapter) and the channels (alerts) both need it, and
an adapter must not import a feature package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MAX_RATE_LIMIT_RETRIES = 3
"""429 answers waited out per post, at most."""
REQUEST_TIMEOUT_SECONDS = 10.0
"""Longest wait for one HTTP request (less when the invocation has less time left)."""
MIN_REQUEST_SECONDS = 0.5
"""A request is not started (nor a 429 waited out) with less time left than this: it could not
finish, and the on-call fallback needs the time."""


def request_timeout(time_left: Callable[[], float], cap: float = REQUEST_TIMEOUT_SECONDS) -> Any:
    """Seconds one request may take: ``time_left()`` (seconds), at most ``cap``, at least 0.1
    (never rounded up: a request must not outlive the time left; urllib3 refuses 0). Typed ``Any``:
    slack-sdk annotates its ``timeout`` as ``int`` but hands it to ``urllib.request.urlopen``,
    which takes float seconds."""
    return max(0.1, min(cap, time_left()))
