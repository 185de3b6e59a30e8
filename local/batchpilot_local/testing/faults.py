"""Faults injected at the HTTP layer, under the real adapters and botocore's own retries.

:class:`HttpFaults` registers one ``before-send`` hook on the adapters' boto3 session
(:func:`batchpilot.io.clients.session`), so every client the code under test makes afterwards sees
it; botocore's retry logic, parsers and error classes run as they do against AWS. Each scripted
:class:`Fault` answers the next ``times`` requests of one operation:

- ``THROTTLE`` / ``SERVER_ERROR``: a 429 / 500 answer; the request never reaches the emulator;
- ``ACCEPTED_SERVER_ERROR`` / ``ACCEPTED_TIMEOUT``: the embedded AWS (moto and the emulated Batch
  and SageMaker) handles the request, then the client sees a 500 / a read timeout instead of the answer,
  as when AWS accepted a request whose answer was lost;
- ``LAGGING_LIST``: Batch's ``ListJobs`` answers an empty page (``jobSummaryList: []``), as a
  listing that does not show a just-made job yet (ListJobs is eventually consistent); the request
  never reaches the emulator;
- ``INVALID``: a 400 ``ValidationException`` (SNS: ``InvalidParameter``; as DynamoDB answers a
  key over 2,048 bytes, SageMaker a 100 KB training-job name); never retried by botocore;
- ``KILL_BEFORE`` / ``KILL_AFTER``: :class:`Killed` is raised before the request is sent / after the
  emulator handled it, as when Lambda ends the invocation (a timeout, an out-of-memory kill) at that
  point. :class:`Killed` derives from ``BaseException``, so no ``except Exception`` in the code
  under test (nor botocore's) catches it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from types import TracebackType
from typing import Any

__all__ = ["Fault", "FaultKind", "HttpFaults", "Killed"]


class Killed(BaseException):
    """The invocation ended here (raised by a ``KILL_*`` fault; not an ``Exception``)."""


class FaultKind(StrEnum):
    """What one injected fault does to a request (see the module docstring)."""

    THROTTLE = "throttle"
    SERVER_ERROR = "server-error"
    ACCEPTED_SERVER_ERROR = "accepted-server-error"
    ACCEPTED_TIMEOUT = "accepted-timeout"
    INVALID = "invalid"
    KILL_BEFORE = "kill-before"
    KILL_AFTER = "kill-after"
    LAGGING_LIST = "lagging-list"


_THROTTLING_CODES = {
    "batch": "TooManyRequestsException",
    "sagemaker": "ThrottlingException",
    "dynamodb": "ThrottlingException",
    "sns": "Throttling",
    "events": "ThrottlingException",
    "cloudwatch": "Throttling",
}
_INVALID_CODES = {"sns": "InvalidParameter"}
"""``INVALID``'s code where a service names it otherwise than ``ValidationException`` (Amazon SNS
API Reference, Publish / PublishBatch errors)."""
_SERVER_CODES = {
    "batch": "ServerException",
    "sagemaker": "InternalFailure",
    "dynamodb": "InternalServerError",
    "sns": "InternalError",
    "events": "InternalException",
}


_SERVICE_IDS = (
    "batch",
    "sagemaker",
    "dynamodb",
    "sns",
    "eventbridge",
    "s3",
    "sqs",
    "secrets-manager",
    "cloudwatch",
    "ecs",
)
_SERVICES = {"eventbridge": "events", "secrets-manager": "secretsmanager"}


def _moto_off() -> None:
    from moto.core.models import botocore_stubber

    botocore_stubber.enabled = False


def _moto_on(**_: Any) -> None:
    """moto answers again (after the response of a request a fault answered)."""
    from moto.core.models import botocore_stubber

    botocore_stubber.enabled = True


@dataclass
class Fault:
    """One scripted fault: ``kind`` for the next ``times`` requests of ``operation`` (None: every
    request), after letting ``skip`` matching requests through untouched."""

    service: str
    operation: str
    kind: FaultKind
    times: int | None = 1
    skip: int = 0
    hits: int = 0

    def take(self) -> bool:
        """True when this request is one the fault answers (counts it)."""
        if self.skip > 0:
            self.skip -= 1
            return False
        if self.times is not None and self.hits >= self.times:
            return False
        self.hits += 1
        return True


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


def _error_response(url: str, service: str, status: int, code: str) -> Any:
    """An AWS error answer in the service's protocol (JSON services, or SNS's query/XML)."""
    from botocore.awsrequest import AWSResponse

    if service == "sns":
        body = (
            f'<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>Sender</Type>'
            f"<Code>{code}</Code><Message>injected</Message></Error><RequestId>r</RequestId></ErrorResponse>"
        ).encode()
        xml: Any = {"Content-Type": "text/xml"}
        return AWSResponse(url, status, xml, _Body(body))
    payload = json.dumps({"__type": code, "message": "injected"}).encode()
    headers: Any = {"x-amzn-ErrorType": f"{code}:", "Content-Type": "application/x-amz-json-1.1"}
    return AWSResponse(url, status, headers, _Body(payload))


@dataclass
class HttpFaults:
    """The fault script (a context manager: the hook is registered while open).

    Attributes:
        faults: the scripted faults, tried in order for each request.
        seen: ``"<service>:<Operation>"`` of every request the hook saw, in order.
        injected: ``(action, kind)`` of every fault injected, in order.
    """

    faults: list[Fault] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    injected: list[tuple[str, FaultKind]] = field(default_factory=list)
    _id: str = field(default="", init=False)

    def add(
        self, service: str, operation: str, kind: FaultKind, *, times: int | None = 1, skip: int = 0
    ) -> HttpFaults:
        """Script one more fault; returns self (chainable)."""
        self.faults.append(Fault(service, operation, kind, times, skip))
        return self

    def __enter__(self) -> HttpFaults:
        from batchpilot.io.clients import session

        self._id = f"batchpilot-faults-{id(self)}"
        events = session().events
        # Per service, so the hook runs before moto's stubber (registered on plain "before-send").
        for service_id in _SERVICE_IDS:
            events.register(f"before-send.{service_id}", self._hook, unique_id=f"{self._id}-{service_id}")
        events.register("response-received", _moto_on, unique_id=f"{self._id}-moto-on")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        from batchpilot.io.clients import session

        events = session().events
        for service_id in _SERVICE_IDS:
            events.unregister(f"before-send.{service_id}", unique_id=f"{self._id}-{service_id}")
        events.unregister("response-received", unique_id=f"{self._id}-moto-on")
        _moto_on()

    def _hook(self, request: Any, event_name: str, **_: Any) -> Any:
        service_id, operation = event_name.split(".", 2)[1:]
        service = _SERVICES.get(service_id, service_id)
        action = f"{service}:{operation}"
        self.seen.append(action)
        for fault in self.faults:
            if fault.service != service or fault.operation != operation or not fault.take():
                continue
            self.injected.append((action, fault.kind))
            # botocore calls every before-send handler: moto's must not answer this request again.
            _moto_off()
            return self._inject(fault, request, event_name)
        return None

    @staticmethod
    def _forward(request: Any, event_name: str) -> Any:
        """Let the embedded AWS handle ``request``: the emulator, for a request on its endpoint
        (it hands what it does not serve to moto), else moto's stubber."""
        from moto.core.models import botocore_stubber

        from batchpilot_local.emulator import Overlay

        _moto_on()
        try:
            overlay = Overlay.active()
            answer = overlay.answer(request, event_name) if overlay is not None else None
            return answer if answer is not None else botocore_stubber(event_name=event_name, request=request)
        finally:
            _moto_off()

    def _inject(self, fault: Fault, request: Any, event_name: str) -> Any:
        from botocore.exceptions import ReadTimeoutError

        kind, service = fault.kind, fault.service
        if kind is FaultKind.KILL_BEFORE:
            raise Killed(f"killed before {fault.operation}")
        if kind in (FaultKind.ACCEPTED_SERVER_ERROR, FaultKind.ACCEPTED_TIMEOUT, FaultKind.KILL_AFTER):
            self._forward(request, event_name)
        if kind is FaultKind.KILL_AFTER:
            raise Killed(f"killed after {fault.operation}")
        if kind is FaultKind.ACCEPTED_TIMEOUT:
            raise ReadTimeoutError(endpoint_url=request.url)
        if kind is FaultKind.INVALID:
            return _error_response(
                request.url, service, 400, _INVALID_CODES.get(service, "ValidationException")
            )
        if kind is FaultKind.LAGGING_LIST:
            from botocore.awsrequest import AWSResponse

            headers: Any = {"Content-Type": "application/json"}
            return AWSResponse(request.url, 200, headers, _Body(json.dumps({"jobSummaryList": []}).encode()))
        if kind is FaultKind.THROTTLE:
            return _error_response(
                request.url,
                service,
                429 if service != "sns" else 400,
                _THROTTLING_CODES.get(service, "ThrottlingException"),
            )
        return _error_response(request.url, service, 500, _SERVER_CODES.get(service, "InternalFailure"))
