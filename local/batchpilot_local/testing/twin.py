"""Two clients of one session, one on the HTTP path and one on the direct path: what each caller saw.

The direct-path tests (``tests/integration/test_direct_dynamodb.py``,
``tests/integration/test_direct_emulator_reads.py``) run the same calls on a client whose requests
take botocore's whole HTTP path (moto's stubber, and the emulator in front of it, answer at
``before-send``) and on its twin, answered at ``before-call``
(:func:`batchpilot_local.emulator.direct.direct_calls`), and compare everything a caller
sees. The helpers here say what that is, the same way for both tests:

- :func:`answer_of`: one call's response or raised error, without what is each request's own
  (:func:`plain_response`: the request id and the date);
- :func:`pages_of`: every page of a listing, following its token;
- :func:`wire_recorder`: what ``after-call`` handlers see of each HTTP answer.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ClientError

__all__ = ["MAX_PAGES", "VOLATILE_HEADERS", "answer_of", "pages_of", "plain_response", "wire_recorder"]

VOLATILE_HEADERS = frozenset({"date", "x-amzn-requestid"})
"""The HTTP headers (lower-case) that are each request's own: the only ones two paths' answers to
the same call may differ in."""

MAX_PAGES = 1_000
"""The most pages :func:`pages_of` reads of one listing."""


def plain_response(response: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a parsed response (or a ``ClientError``'s ``response``) without its request
    id and its :data:`VOLATILE_HEADERS`: ``ResponseMetadata`` keeps ``HTTPStatusCode``, the other
    ``HTTPHeaders`` and ``RetryAttempts``.

    Raises:
        AssertionError: ``ResponseMetadata`` has no ``RequestId``, or one that is not its
            ``x-amzn-requestid`` header (every answer, on either path, carries its request id).
    """
    plain = copy.deepcopy(dict(response))
    metadata = plain["ResponseMetadata"]
    headers = dict(metadata["HTTPHeaders"])
    assert metadata.pop("RequestId") == headers["x-amzn-requestid"]
    metadata["HTTPHeaders"] = {k: v for k, v in headers.items() if k not in VOLATILE_HEADERS}
    return plain


def answer_of(client: Any, operation: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What the caller of ``client.<operation>(**kwargs)`` sees (``kwargs`` deep-copied, so the
    call cannot change them):

    - a response: ``{"raised": None, **plain_response(response)}``;
    - a ``ClientError`` (an AWS error, modeled or not):
      ``{"raised": "<its class>", "text": str(error), **plain_response(error.response)}``, so its
      ``Error`` and modeled fields (a Batch ``message``, DynamoDB's ``Item`` or
      ``CancellationReasons``) are compared too;
    - any other exception (botocore's refusals such as ``ParamValidationError``, moto's or the
      emulator's own exceptions): ``{"raised": "<its class>", "text": str(error)}``.
    """
    try:
        response = getattr(client, operation)(**copy.deepcopy(dict(kwargs)))
    except ClientError as error:
        return {"raised": type(error).__name__, "text": str(error), **plain_response(error.response)}
    except Exception as error:  # botocore's refusals (ParamValidationError), moto's or the emulator's own
        return {"raised": type(error).__name__, "text": str(error)}
    return {"raised": None, **plain_response(response)}


def pages_of(
    client: Any, operation: str, kwargs: Mapping[str, Any], token: str, start: str | None = None
) -> list[dict[str, Any]]:
    """Every page of a listing, each :func:`answer_of` the call: the first with ``kwargs``, each
    next one with the argument ``start`` set to the previous page's member ``token``, until a page
    (or an error) has no ``token``.

    ``token``: the member that names the next page (Batch's ``nextToken``, SageMaker's
    ``NextToken``, DynamoDB's ``LastEvaluatedKey``); ``start``: the argument that asks for it
    (DynamoDB's ``ExclusiveStartKey``; ``None``: the same name as ``token``).

    Raises:
        AssertionError: more than :data:`MAX_PAGES` pages (a listing that never ends), or one
            from :func:`plain_response`.
    """
    arguments = dict(kwargs)
    pages = []
    for _ in range(MAX_PAGES):
        page = answer_of(client, operation, arguments)
        pages.append(page)
        if token not in page:
            return pages
        arguments[start or token] = page[token]
    raise AssertionError(f"{operation}: still a {token} after {MAX_PAGES} pages")


def wire_recorder(into: list[dict[str, Any]]) -> Callable[..., None]:
    """An ``after-call`` handler (register it for ``after-call.<service>``) that appends to
    ``into`` what it sees of each HTTP answer, the direct path's included::

        {"operation": "Query", "status": 200, "headers": {...}, "body": b"{...}"}

    ``operation``: the API name; ``headers``: lower-cased names, without the
    :data:`VOLATILE_HEADERS`; ``body``: the bytes botocore parsed.
    """

    def record(http_response: Any, model: Any, **_: Any) -> None:
        headers = {k.lower(): v for k, v in http_response.headers.items()}
        into.append(
            {
                "operation": model.name,
                "status": http_response.status_code,
                "headers": {k: v for k, v in headers.items() if k not in VOLATILE_HEADERS},
                "body": http_response.content,
            }
        )

    return record
