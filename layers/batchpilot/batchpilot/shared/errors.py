"""Which errors are permanent: retrying the record cannot help, so it is reported and counted, never
handed back to SQS (where it would only reach the dead-letter queue after every retry).

Pure: an AWS error is recognised by the ``response`` mapping botocore's ``ClientError`` carries
(``{"Error": {"Code": ...}, "ResponseMetadata": {"HTTPStatusCode": ...}}``), so services can ask
without importing botocore.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["PERMANENT_ERROR_CODES", "error_code", "is_permanent"]

PERMANENT_ERROR_CODES = frozenset(
    {
        "ValidationException",  # DynamoDB (a key over 2,048 bytes, an item over 400 KB), SageMaker, Batch
        "ValidationError",  # query protocol services
        "SerializationException",  # a request botocore could not encode for the service
        "InvalidParameterException",
        "InvalidParameterValue",
        "ParamValidationError",  # botocore's own check of a request against the API model
    }
)
"""AWS error codes that say the request itself is wrong (AWS API references, "Common Errors":
``ValidationException``, ``InvalidParameterValue``; botocore's ``ParamValidationError``)."""


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of ``exc`` (botocore ``ClientError``), else None."""
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        error = response.get("Error")
        if isinstance(error, Mapping) and isinstance(error.get("Code"), str):
            return str(error["Code"])
    return None


def is_permanent(exc: BaseException) -> bool:
    """True for an error no retry can fix: a request AWS (or botocore) refused as invalid, or text
    that cannot be encoded (a lone surrogate, ``UnicodeError``)."""
    if isinstance(exc, UnicodeError):
        return True
    if type(exc).__name__ == "ParamValidationError":
        return True
    return error_code(exc) in PERMANENT_ERROR_CODES
