"""What every emulated service shares: the AWS error type, the HTTP answer a handler returns, the
clock that stamps records, and request ids."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

__all__ = ["ApiError", "Clock", "Response", "deep", "http_response", "json_response", "request_id"]

Response = tuple[int, dict[str, str], str]
"""An HTTP answer as moto's stubber hands it to botocore: status, headers, body."""
Clock = Callable[[], float]
"""Seconds since the epoch (``time.time``-like), or monotonic seconds where a docstring says so."""

T = TypeVar("T")


class ApiError(Exception):
    """An AWS error response: ``code`` (the error type botocore puts in ``Error.Code``),
    ``message`` and HTTP ``status``. Each service's ``responses`` module turns it into that
    service's wire format."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


def deep(value: T) -> T:
    """A deep copy: records are never shared with callers (a caller mutating a response must not
    change the stored job)."""
    return copy.deepcopy(value)


def request_id() -> str:
    """A fresh ``x-amzn-RequestId``."""
    return str(uuid.uuid4())


def _json_default(value: Any) -> Any:
    # botocore's JSON parsers read timestamps as epoch seconds.
    if isinstance(value, datetime):
        return value.timestamp()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def json_response(
    body: Any, *, status: int = 200, content_type: str = "application/json", **headers: str
) -> Response:
    """``body`` as a JSON HTTP answer (``datetime`` values as epoch seconds) with a request id;
    ``headers`` are added as given (e.g. ``**{"x-amzn-ErrorType": ...}``)."""
    all_headers = {"Content-Type": content_type, "x-amzn-RequestId": request_id(), **headers}
    return status, all_headers, json.dumps(body, default=_json_default)


class _Body:
    """A response body as botocore's ``AWSResponse`` reads it (``stream``, ``read``)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, *_: Any) -> bytes:
        data, self.data = self.data, b""
        return data

    def stream(self, **_: Any) -> Any:
        yield self.read()


def http_response(url: str, status: int, headers: dict[str, str], body: str | bytes) -> Any:
    """An HTTP answer as the ``AWSResponse`` a botocore ``before-send`` handler returns (what
    botocore's endpoint would have read from the wire)."""
    from botocore.awsrequest import AWSResponse, HTTPHeaders

    data = body.encode("utf-8") if isinstance(body, str) else body
    http_headers = HTTPHeaders()
    for name, value in headers.items():
        http_headers[name] = value
    return AWSResponse(url, status, http_headers, _Body(data))
