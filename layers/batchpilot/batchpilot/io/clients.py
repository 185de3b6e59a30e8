"""boto3 clients for the adapters: one session per process, botocore's standard retry mode.

Only adapters call :func:`client`. boto3 is imported lazily so the metrics function, which
calls no AWS API, never pays for it at cold start. Throttling and transient errors are retried
by botocore itself (``standard`` mode: exponential backoff with jitter, throttling errors
included), never by a hand-written loop. Every client is bounded by the invocation's deadline
(:mod:`batchpilot.io.deadline`): no attempt, and no retry with its backoff, starts unless it can end
before the Lambda timeout, so an invocation is never killed mid-call by AWS being slow or down.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3

from batchpilot.io.deadline import register_hooks

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "READ_TIMEOUT_SECONDS",
    "RETRY_ATTEMPTS",
    "LazyClient",
    "client",
    "session",
]

RETRY_ATTEMPTS = 6
"""Total attempts per call (first try included) in botocore's ``standard`` retry mode."""
CONNECT_TIMEOUT_SECONDS = 3
"""botocore ``Config.connect_timeout`` of every client (seconds)."""
READ_TIMEOUT_SECONDS = 10
"""botocore ``Config.read_timeout`` of every client (seconds). With the connect timeout this is the
longest one attempt may take, so a call is not started with less than that (plus
:data:`batchpilot.shared.deadline.MARGIN_SECONDS`) left: kept well under the shortest function timeout
(30 s, template.yaml) so most of an invocation can call AWS."""


@cache
def session() -> boto3.Session:
    """The process-wide boto3 session (region and credentials from the Lambda environment).

    Local tools (the replay runner, tests) register botocore event hooks on ``session().events``
    before a handler creates its clients.
    """
    import boto3

    return boto3.Session()


def client(service: str, *, max_attempts: int = RETRY_ATTEMPTS, **kwargs: Any) -> Any:
    """A new boto3 client for ``service`` with standard-mode retries and bounded timeouts, its
    calls bounded by the invocation's deadline (:func:`batchpilot.io.deadline.register_hooks`;
    a call that cannot end in time raises :class:`~batchpilot.shared.deadline.DeadlineExceeded`).

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
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
        user_agent_appid="batchpilot",
    )
    made = session().client(service, config=config, **kwargs)  # type: ignore[call-overload]
    service_id = made.meta.service_model.service_id.hyphenize()
    register_hooks(made.meta.events, service_id, CONNECT_TIMEOUT_SECONDS + READ_TIMEOUT_SECONDS, max_attempts)
    return made


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
