"""Which errors are permanent: retrying the record cannot help, so it is reported and counted, never
handed back to SQS (where it would only reach the dead-letter queue after every retry).

Pure: an AWS error is recognised by the ``response`` mapping botocore's ``ClientError`` carries
(``{"Error": {"Code": ..., "Message": ...}, "ResponseMetadata": {"HTTPStatusCode": ...}}``) and its
``operation_name``, so services can ask without importing botocore. Every feature asks the same
two questions here: :func:`is_permanent` (is it final?) and :func:`describe` (what to log: the
operation, the code and a bounded excerpt of AWS's message, :data:`MAX_EXCERPT` characters).

What counts as permanent (the decision):

- Requests AWS refuses as invalid, which the same request can never pass: ``ValidationException``
  (DynamoDB: a key over 2,048 / 1,024 bytes, an item over 400 KB; SageMaker; AWS Batch),
  ``ValidationError`` (query-protocol services), ``InvalidParameterValue``,
  ``InvalidParameterException``, ``SerializationException`` (AWS API references, "Common Errors"),
  Amazon SNS ``InvalidParameter`` (SNS API Reference, Publish / PublishBatch "Errors": a message
  over 256 KB, a subject with line breaks) and botocore's own ``ParamValidationError``; text no
  codec can encode (``UnicodeError``).
- ``AccessDenied`` / ``AccessDeniedException`` (AWS API references, "Common Errors": "You do not
  have sufficient access to perform this action") and SNS's ``AuthorizationError`` (SNS API
  Reference, Publish "Errors": "the user has been denied access to the requested resource"). Every
  resource a function calls is either one template.yaml configures and grants (a refusal is a
  deployment fault: a redeploy mends it, the record's five receives within minutes do not) or one
  an event names (a job queue, a checkpoint bucket the role cannot be granted): either way retrying
  the record cannot change the answer, so it is reported (``InvalidEvents`` and
  ``PermanentErrors``, logged with the operation) rather than looping to the dead-letter queue.
- Not permanent: the ``KMS*`` codes of SNS (``KMSThrottling``, a key being enabled), throttling,
  5xx, ``ConditionalCheckFailedException`` (an answer, not an error) and every error without a code
  (timeouts, connection errors).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "MAX_EXCERPT",
    "PERMANENT_ERROR_CODES",
    "describe",
    "error_code",
    "is_permanent",
    "is_permanent_code",
]

PERMANENT_ERROR_CODES = frozenset(
    {
        "ValidationException",  # DynamoDB (key over 2,048 / 1,024 bytes, item over 400 KB), SageMaker
        "ValidationError",  # query protocol services
        "SerializationException",  # a request botocore could not encode for the service
        "InvalidParameterException",
        "InvalidParameterValue",
        "InvalidParameter",  # Amazon SNS Publish / PublishBatch (a message over 256 KB)
        "ParamValidationError",  # botocore's own check of a request against the API model
        "AccessDenied",  # AWS "Common Errors": a resource template.yaml configures and grants
        "AccessDeniedException",
        "AuthorizationError",  # Amazon SNS: denied access to the requested resource
    }
)
"""AWS error codes that say the request itself is wrong, or is refused on a configured resource
(AWS API references, "Common Errors": ``ValidationError``, ``InvalidParameterValue``,
``AccessDeniedException``; SNS ``InvalidParameter``; botocore's ``ParamValidationError``)."""

MAX_EXCERPT = 200
"""Characters of an AWS error message :func:`describe` keeps (messages can quote request values)."""


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of ``exc`` (botocore ``ClientError``), else None."""
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        error = response.get("Error")
        if isinstance(error, Mapping) and isinstance(error.get("Code"), str):
            return str(error["Code"])
    return None


def is_permanent_code(code: str | None) -> bool:
    """True for an AWS error code of :data:`PERMANENT_ERROR_CODES` (an adapter that reports codes,
    such as SNS ``PublishBatch``'s per-entry ``Failed[].Code``)."""
    return code in PERMANENT_ERROR_CODES


def is_permanent(exc: BaseException) -> bool:
    """True for an error no retry can fix: a request AWS (or botocore) refused as invalid or denied
    (:data:`PERMANENT_ERROR_CODES`), or text that cannot be encoded (a lone surrogate,
    ``UnicodeError``)."""
    if isinstance(exc, UnicodeError):
        return True
    if type(exc).__name__ == "ParamValidationError":
        return True
    return is_permanent_code(error_code(exc))


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_EXCERPT else flat[: MAX_EXCERPT - 1] + "…"


def describe(exc: BaseException, operation: str | None = None) -> str:
    """``"<Operation>: <Code>: <message excerpt>"`` for a log line: the API operation (botocore's
    ``operation_name``, else ``operation``), the error code (else the exception's type) and at most
    :data:`MAX_EXCERPT` characters of AWS's message, whitespace collapsed. Never raises."""
    op = getattr(exc, "operation_name", None) or operation
    code = error_code(exc) or type(exc).__name__
    response = getattr(exc, "response", None)
    message = ""
    if isinstance(response, Mapping) and isinstance(response.get("Error"), Mapping):
        message = str(response["Error"].get("Message") or "")
    elif not hasattr(exc, "response"):
        message = str(exc)
    parts = [p for p in (op, code, _excerpt(message)) if p]
    return ": ".join(parts)
