"""For the replay: DynamoDB calls and the emulator's Batch and SageMaker reads answered at botocore's
``before-call`` event, without the HTTP hop.

A ``before-call`` handler may return ``(http_response, parsed)``: botocore then uses that answer
and makes no request (the seam moto's own "Patching other Services" page points to for calls it
does not serve). :func:`direct_calls` registers one on each given emitter that builds the request
botocore would send (``botocore.awsrequest.create_request_object`` of botocore's own request dict:
botocore has validated and serialised the parameters), has it answered by moto's ``before-send``
handler (``moto.core.models.botocore_stubber``, moto's own entry point) or by the emulator
(:meth:`.Overlay.answer`), and reads the answer with botocore's parser for the protocol, modeled
error fields included, as botocore's endpoint does.

What the HTTP path does and this one skips: the ``before-call`` handlers registered after it, the
``request-created``, ``before-send``, ``needs-retry`` and ``response-received`` events (signing,
the HTTP fault hooks and the retry handler: moto's DynamoDB and the emulator's reads never answer
the throttling or 5xx a retry is for), botocore's history recorder and response checksum, and the
session's own response parser factory. The emulator's writes (SubmitServiceJob, which Batch
throttles) keep the HTTP path, where botocore retries them. An exception raised while answering
(not an AWS error answer) is announced as ``after-call-error`` on the client's emitter, as botocore
does on the HTTP path, and propagates; ``after-call`` handlers run as on the HTTP path.
``tests/integration/test_direct_dynamodb.py`` and ``test_direct_emulator_reads.py`` compare the
answers with the HTTP path's.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from batchpilot_local.emulator.overlay import Overlay
from batchpilot_local.emulator.routing import SERVICES, request_identity

__all__ = ["DIRECT_ID", "READ_OPERATIONS", "direct_calls", "parsed_answer"]

DIRECT_ID = "batchpilot-direct-calls"
"""How the ``unique_id`` of a :func:`direct_calls` handler on an event emitter begins."""

READ_OPERATIONS = ("Describe", "Get", "List")
"""How the names of the Batch and SageMaker operations answered directly begin (the emulator
throttles none of them: only SubmitServiceJob)."""

_SERVICES = ("dynamodb", *SERVICES)
_REGISTRATIONS = itertools.count(1)


def direct_calls(emitters: Iterable[Any], overlay: Overlay) -> Callable[[], None]:
    """Answer, at ``before-call``, the DynamoDB calls and the Batch and SageMaker reads
    (:data:`READ_OPERATIONS`) of every client made from ``emitters`` (boto3 sessions' event
    emitters; a client copies its session's when it is created, and keeps the handler after the
    undo): the emulator's through ``overlay``, the rest through moto. Registered first on
    ``before-call.<service>`` (handlers on ``before-call.<service>.<Operation>`` run before it).
    Nothing is answered while moto's stubber is off (as the HTTP fault hooks turn it). Returns the
    undo, which removes this registration only (each has its own ``unique_id``)."""
    registered = list(emitters)
    unique = f"{DIRECT_ID}-{next(_REGISTRATIONS)}"
    for emitter in registered:
        handler = functools.partial(_answer, emitter, overlay)
        for service_id in _SERVICES:
            emitter.register_first(f"before-call.{service_id}", handler, unique_id=f"{unique}-{service_id}")

    def undo() -> None:
        for emitter in registered:
            for service_id in _SERVICES:
                emitter.unregister(f"before-call.{service_id}", unique_id=f"{unique}-{service_id}")

    return undo


def _answer(
    emitter: Any,
    overlay: Overlay,
    model: Any,
    params: Mapping[str, Any],
    context: Any = None,
    request_signer: Any = None,
    **_: Any,
) -> tuple[Any, dict[str, Any]] | None:
    from botocore.awsrequest import create_request_object
    from moto.core.models import botocore_stubber

    service_id = model.service_model.service_id.hyphenize()
    if not botocore_stubber.enabled:
        return None
    if service_id in SERVICES and not model.name.startswith(READ_OPERATIONS):
        return None  # a write: the HTTP path, where botocore retries a throttled one
    event_name = f"before-send.{service_id}.{model.name}"
    try:
        request = create_request_object(dict(params)).prepare()
        if service_id in SERVICES:
            region = getattr(request_signer, "region_name", None) or overlay.region
            response = overlay.answer(request, event_name, request_identity(request, region))
        else:
            response = botocore_stubber(event_name=event_name, request=request)
        if response is None:
            return None  # nobody answered: the HTTP path says so its own way
        return parsed_answer(model, response)
    except Exception as exc:
        emitter.emit(f"after-call-error.{service_id}.{model.name}", exception=exc, context=context)
        raise


def parsed_answer(model: Any, http_response: Any) -> tuple[Any, dict[str, Any]]:
    """``(http_response, parsed)`` for a botocore ``AWSResponse`` to a call of ``model``, as
    botocore's endpoint builds them: the parser of the service's protocol, then, for an error, the
    fields its modeled error shape adds (``shape_for_error_code``: a ``ConditionalCheckFailed``'s
    ``Item``, a cancelled transaction's ``CancellationReasons``). ``RetryAttempts`` is 0."""
    from botocore.endpoint import convert_to_response_dict

    response_dict = convert_to_response_dict(http_response, model)
    parser = _parser(model.service_model.resolved_protocol)
    parsed: dict[str, Any] = parser.parse(response_dict, model.output_shape)
    if http_response.status_code >= 300:
        code = parsed.get("Error", {}).get("Code")
        error_shape = model.service_model.shape_for_error_code(code) if code else None
        if error_shape is not None:
            parsed.update(parser.parse(response_dict, error_shape))
    if "ResponseMetadata" in parsed:
        parsed["ResponseMetadata"]["RetryAttempts"] = 0
    return http_response, parsed


@functools.cache
def _parser(protocol: str) -> Any:
    from botocore.parsers import create_parser

    return create_parser(protocol)
