"""AWS Batch's errors, as its REST-JSON protocol sends them: the error type in the
``x-amzn-ErrorType`` header (``<type>:<namespace>``) and a JSON body ``{"message": ...}``."""

from __future__ import annotations

from batchpilot_local.emulator.core import ApiError

__all__ = ["BATCH_ERROR_NAMESPACE", "ClientException", "TooManyRequestsException"]

BATCH_ERROR_NAMESPACE = "http://internal.amazon.com/coral/com.amazonaws.batch.v20160810/"
"""What follows the error type in Batch's ``x-amzn-ErrorType`` header."""


class ClientException(ApiError):
    """Batch's answer (HTTP 400) to every request it refuses: unknown ids, invalid values, a
    resource in the wrong state, an invalid ``nextToken``."""

    def __init__(self, message: str) -> None:
        super().__init__("ClientException", message, 400)


class TooManyRequestsException(ApiError):
    """Over a rate limit (HTTP 429); botocore's ``standard`` retry mode retries it as throttling."""

    def __init__(self, message: str = "Too Many Requests") -> None:
        super().__init__("TooManyRequestsException", message, 429)
