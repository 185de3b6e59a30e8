"""Which requests the emulator answers, and with which backend: moto's ``urls.py`` for this package.

A request reaches the emulator on its endpoint (:func:`endpoints`, see :mod:`.overlay`). Its
operation is the one botocore names in the event it hands the request with
(``before-send.batch.SubmitServiceJob``), or, for a request that came over the loopback endpoint,
the one :func:`operation_of` reads from it (Batch: botocore's request URI of the path; SageMaker:
the ``X-Amz-Target`` header). The emulator serves:

- Batch (REST-JSON): the operations of :data:`.batch.responses.OPERATIONS`, and TagResource /
  UntagResource / ListTagsForResource of the resources the emulator owns (the ARN is the path
  after ``/v1/tags/``);
- SageMaker (JSON 1.1): the operations of :data:`.sagemaker.responses.OPERATIONS` (the tag
  operations for training jobs only).

:func:`route` answers None for everything else, which moto answers (:mod:`.overlay` forwards it).
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any, NamedTuple, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from batchpilot_local.emulator.batch import responses as batch_responses
from batchpilot_local.emulator.batch.models import EmbeddedBatch
from batchpilot_local.emulator.core import Response
from batchpilot_local.emulator.sagemaker import responses as sagemaker_responses
from batchpilot_local.emulator.sagemaker.models import EmbeddedTraining
from batchpilot_local.emulator.shapes import service_model

__all__ = [
    "ENDPOINT_PATTERN",
    "PREFIX",
    "SERVICES",
    "Backends",
    "Identity",
    "aws_url",
    "endpoints",
    "operation_of",
    "request_identity",
    "route",
    "service_of",
]

SERVICES = ("batch", "sagemaker")
"""botocore service ids (hyphenated) of the services the emulator stands in front of."""

PREFIX = "/embedded-aws/"
"""The path every emulated service's endpoint begins with: ``<base>/embedded-aws/<service id>``."""

ENDPOINT_PATTERN = re.compile(r"^http://127\.0\.0\.1:\d+" + re.escape(PREFIX))
"""What every URL on an emulator's endpoint matches (any loopback port)."""

_AWS_HOSTS = {"batch": "batch.{region}.amazonaws.com", "sagemaker": "api.sagemaker.{region}.amazonaws.com"}
_TAGS_PREFIX = "/v1/tags/"
_TAG_OPERATIONS = frozenset({"TagResource", "UntagResource", "ListTagsForResource"})
# A SigV4 Authorization header: Credential=<access key>/<date>/<region>/<service>/aws4_request
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/,\s]+)/")


class Identity(NamedTuple):
    """Whose resources a request reads: an account id and a region."""

    account_id: str
    region: str


class Backends(Protocol):
    """Where :func:`route` finds the backend of an account and region."""

    def batch(self, account_id: str, region: str) -> EmbeddedBatch:
        """The emulated Batch of ``account_id`` in ``region``."""
        ...

    def training(self, account_id: str, region: str) -> EmbeddedTraining:
        """The emulated SageMaker training jobs of ``account_id`` in ``region``."""
        ...


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value or "")


def request_identity(request: Any, default_region: str) -> Identity:
    """(account id, region) of a botocore ``AWSPreparedRequest``, by moto's documented rules
    (moto's "Multi-Account support" page), so that the emulator and moto agree on whose resources
    a request reads: the account is ``MOTO_ACCOUNT_ID`` when set, else the ``x-moto-account-id``
    header, else the account moto's IAM issued the access key to (moto's default account for any
    other key); the region is the one the request is signed for (SigV4's credential scope), or
    ``default_region`` for an unsigned request."""
    from moto.iam.models import get_account_id_from

    authorization = _text(request.headers.get("Authorization"))
    credential = _CREDENTIAL.search(authorization)
    region = credential.group(2) if credential else default_region
    account = os.environ.get("MOTO_ACCOUNT_ID") or _text(request.headers.get("x-moto-account-id"))
    if not account:
        account = str(get_account_id_from(credential.group(1) if credential else ""))
    return Identity(account, region)


def endpoints(base_url: str) -> dict[str, str]:
    """botocore service id → the endpoint URL its clients are given (``AWS_ENDPOINT_URL_<SERVICE>``)
    for an emulator listening at ``base_url`` (``http://127.0.0.1:<port>``)."""
    return {service_id: f"{base_url}{PREFIX}{service_id}" for service_id in SERVICES}


def service_of(url: str) -> str | None:
    """The service id of a URL on an emulator's endpoint; None for any other URL."""
    match = ENDPOINT_PATTERN.match(url)
    if match is None:
        return None
    service_id = url[match.end() :].split("/", 1)[0].split("?", 1)[0]
    return service_id if service_id in SERVICES else None


def _rest(url: str, service_id: str) -> str:
    """The path and query of ``url`` after its emulator endpoint (``/v1/x?a=b``)."""
    match = ENDPOINT_PATTERN.match(url)
    assert match is not None
    return url[match.end() + len(service_id) :] or "/"


def aws_url(service_id: str, url: str, region: str) -> str:
    """``url`` (on the emulator's endpoint for ``service_id``) on AWS's own endpoint for ``region``:
    ``http://127.0.0.1:<port>/embedded-aws/batch/v1/x?a=b`` → ``https://batch.<region>.amazonaws.com/v1/x?a=b``,
    the URL moto answers."""
    return f"https://{_AWS_HOSTS[service_id].format(region=region)}{_rest(url, service_id)}"


@functools.cache
def _batch_paths() -> dict[str, str]:
    """Batch's request URIs (botocore's model) → operation names, for the paths without labels."""
    model = service_model("batch")
    return {
        model.operation_model(name).http["requestUri"].rstrip("/"): name
        for name in model.operation_names
        if "{" not in model.operation_model(name).http["requestUri"]
    }


def operation_of(service_id: str, request: Any) -> str:
    """The operation of a request on the emulator's endpoint for ``service_id``, read from the
    request itself (for one that came over the loopback endpoint, without botocore's event name):
    Batch by its path (botocore's request URIs; ``/v1/tags/<arn>`` by HTTP method), SageMaker by
    its ``X-Amz-Target: SageMaker.<Operation>`` header. ``""`` when none fits."""
    if service_id == "batch":
        path = urlsplit(_rest(request.url, service_id)).path
        if path.startswith(_TAGS_PREFIX):
            methods = {"GET": "ListTagsForResource", "POST": "TagResource", "DELETE": "UntagResource"}
            return methods.get(str(request.method).upper(), "")
        return _batch_paths().get(path.rstrip("/"), "")
    target = _text(request.headers.get("X-Amz-Target"))
    return target.removeprefix("SageMaker.") if target.startswith("SageMaker.") else ""


def _body(request: Any) -> dict[str, Any]:
    raw = request.body
    if hasattr(raw, "read"):
        raw = raw.read()
        request.body = raw  # a stream is read once: keep its bytes for moto, should it answer
    if not raw:
        return {}
    data = json.loads(raw)
    return data if isinstance(data, dict) else {}


def route(
    service_id: str, operation: str, request: Any, backends: Backends, identity: Identity
) -> Response | None:
    """The emulator's answer to ``operation`` of ``service_id`` (botocore's names: ``batch``,
    ``SubmitServiceJob``) sent as the botocore ``AWSPreparedRequest`` ``request`` for
    ``identity``, or None when moto should answer (an operation the emulator does not serve, or
    the tags of a resource it does not own)."""
    if service_id == "batch":
        if operation in _TAG_OPERATIONS:
            parts = urlsplit(request.url)
            path = unquote(parts.path)
            arn = path[path.index(_TAGS_PREFIX) + len(_TAGS_PREFIX) :] if _TAGS_PREFIX in path else ""
            tag_keys = parse_qs(parts.query).get("tagKeys", [])
            batch = backends.batch(*identity)
            return batch_responses.BatchResponse(batch).tags(
                request.method.upper(), arn, _body(request), tag_keys
            )
        if operation not in batch_responses.OPERATIONS:
            return None
        return batch_responses.BatchResponse(backends.batch(*identity)).dispatch(operation, _body(request))
    if service_id == "sagemaker" and operation in sagemaker_responses.OPERATIONS:
        training = backends.training(*identity)
        return sagemaker_responses.TrainingResponse(training).dispatch(operation, _body(request))
    return None
