"""Which botocore requests the emulator answers, and with which backend: moto's ``urls.py`` for
this package.

- Batch (``batch.<region>.amazonaws.com``, REST-JSON): the operation is found from the request
  path, with the request URIs of botocore's own model (``/v1/submitservicejob`` →
  ``SubmitServiceJob``) for the operations of :data:`.batch.responses.OPERATIONS`; ``/v1/tags/<arn>``
  is TagResource / UntagResource / ListTagsForResource by HTTP method.
- SageMaker (``api.sagemaker.<region>.amazonaws.com``, JSON 1.1): the operation is the
  ``X-Amz-Target: SageMaker.<Operation>`` header, for :data:`.sagemaker.responses.OPERATIONS`.

Everything else (and a tag request on a resource the emulator does not own) is left to moto:
:func:`route` answers None.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from batchpilot_local.emulator.batch import responses as batch_responses
from batchpilot_local.emulator.batch.models import EmbeddedBatch
from batchpilot_local.emulator.core import Response
from batchpilot_local.emulator.sagemaker import responses as sagemaker_responses
from batchpilot_local.emulator.sagemaker.models import EmbeddedTraining
from batchpilot_local.emulator.shapes import service_model

__all__ = ["Backends", "batch_operation", "request_identity", "route"]

BATCH_HOST = re.compile(r"^batch\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$")
SAGEMAKER_HOST = re.compile(r"^api\.sagemaker\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$")
_TAGS_PREFIX = "/v1/tags/"
_SAGEMAKER_TARGET_PREFIX = "SageMaker."


class Backends(Protocol):
    """Where :func:`route` finds the backend of an account and region."""

    def batch(self, account_id: str, region: str) -> EmbeddedBatch:
        """The emulated Batch of ``account_id`` in ``region``."""
        ...

    def training(self, account_id: str, region: str) -> EmbeddedTraining:
        """The emulated SageMaker training jobs of ``account_id`` in ``region``."""
        ...


@cache
def _batch_paths() -> dict[str, str]:
    model = service_model("batch")
    return {
        model.operation_model(name).http["requestUri"].rstrip("/"): name
        for name in batch_responses.OPERATIONS
    }


def batch_operation(path: str) -> str | None:
    """The emulated Batch operation whose request URI is ``path`` (e.g. ``/v1/listservicejobs`` →
    ``ListServiceJobs``); None for any other path."""
    return _batch_paths().get(path.rstrip("/"))


def request_identity(request: Any, service: str) -> tuple[str, str]:
    """(account id, region) of a botocore request, worked out by moto's own response base class,
    so that the emulator and moto agree on whose resources a request reads (``MOTO_ACCOUNT_ID``,
    the access key, the signing region)."""
    from moto.core.responses import BaseResponse

    probe = BaseResponse(service_name=service)
    probe.setup_class(request, request.url, request.headers)
    return str(probe.current_account), str(probe.region)


def _body(request: Any) -> dict[str, Any]:
    raw = request.body
    if hasattr(raw, "read"):
        raw = raw.read()
        request.body = raw  # a stream is read once: keep its bytes for moto, should it answer
    if not raw:
        return {}
    data = json.loads(raw)
    return data if isinstance(data, dict) else {}


def route(request: Any, backends: Backends) -> Response | None:
    """The emulator's answer to a botocore ``AWSPreparedRequest``, or None when moto should answer.

    Header values that botocore left as bytes are decoded in place first, as moto does before
    answering (moto's response classes expect text).
    """
    for header, value in list(request.headers.items()):
        if isinstance(value, bytes):
            request.headers[header] = value.decode("utf-8")
    parts = urlsplit(request.url)
    host = parts.hostname or ""
    if BATCH_HOST.match(host):
        if parts.path.startswith(_TAGS_PREFIX):
            batch = backends.batch(*request_identity(request, "batch"))
            arn = unquote(parts.path.removeprefix(_TAGS_PREFIX))
            tag_keys = parse_qs(parts.query).get("tagKeys", [])
            method = request.method.upper()
            return batch_responses.BatchResponse(batch).tags(method, arn, _body(request), tag_keys)
        operation = batch_operation(parts.path)
        if operation is None:
            return None
        batch = backends.batch(*request_identity(request, "batch"))
        return batch_responses.BatchResponse(batch).dispatch(operation, _body(request))
    if SAGEMAKER_HOST.match(host):
        target = str(request.headers.get("X-Amz-Target") or "")
        operation = target.removeprefix(_SAGEMAKER_TARGET_PREFIX)
        if not target.startswith(_SAGEMAKER_TARGET_PREFIX) or operation not in sagemaker_responses.OPERATIONS:
            return None
        training = backends.training(*request_identity(request, "sagemaker"))
        return sagemaker_responses.TrainingResponse(training).dispatch(operation, _body(request))
    return None
