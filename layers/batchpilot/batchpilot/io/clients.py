"""boto3 clients for the adapters: one session per process, botocore's standard retry mode.

Only adapters call :func:`client`. boto3 is imported lazily so the metrics function, which
calls no AWS API, never pays for it at cold start. Throttling and transient errors are retried
by botocore itself (``standard`` mode: exponential backoff with jitter, throttling errors
included), never by a hand-written loop.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3

__all__ = ["RETRY_ATTEMPTS", "LazyClient", "client", "session"]

RETRY_ATTEMPTS = 6
"""Total attempts per call (first try included) in botocore's ``standard`` retry mode."""


@cache
def session() -> boto3.Session:
    """The process-wide boto3 session (region and credentials from the Lambda environment).

    Local tools (the replay runner, tests) register botocore event hooks on ``session().events``
    before a handler creates its clients.
    """
    import boto3

    return boto3.Session()


def client(service: str, *, max_attempts: int = RETRY_ATTEMPTS, **kwargs: Any) -> Any:
    """A new boto3 client for ``service`` with standard-mode retries and bounded timeouts.

    Args:
        service: the boto3 service name (``batch``, ``dynamodb``, ...).
        max_attempts: total attempts per call, first try included. ``1`` turns botocore's automatic
            retries off: for a call that is not safe to repeat blindly (``batch:SubmitJob`` has no
            client token; :class:`batchpilot.io.batch.BatchJobs` looks its job up before resending).
        kwargs: passed to ``Session.client`` (``endpoint_url``, ``region_name``).
    """
    from botocore.config import Config

    config = Config(  # type: ignore[call-arg]  # user_agent_appid: botocore-stubs lag botocore
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        connect_timeout=5,
        read_timeout=20,
        user_agent_appid="batchpilot",
    )
    return session().client(service, config=config, **kwargs)  # type: ignore[call-overload]


class LazyClient:
    """A :func:`client` made when one of its attributes is first read (its first call), then kept.

    For a client a function calls only on a rare path (the alerts function's ``batch`` client,
    read for preemption alerts alone): creating a client loads its service model and endpoint
    rules (about 10 ms of python3.13 CPU after the process's first client), which an invocation
    that never calls it then does not pay at cold start. Stands in wherever an adapter takes a
    boto3 client.

    Args:
        service: the boto3 service name.
        kwargs: passed to :func:`client` (``max_attempts``, ``endpoint_url``, ...).
    """

    def __init__(self, service: str, **kwargs: Any) -> None:
        self._service = service
        self._kwargs = kwargs
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        # Only for attributes the proxy itself lacks: every client method and ``meta``.
        if self._client is None:
            self._client = client(self._service, **self._kwargs)
        return getattr(self._client, name)
