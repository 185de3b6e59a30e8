"""The one module that touches moto's internals: it puts the emulator in front of moto.

What it patches: moto answers every botocore request through one object,
``moto.core.models.botocore_stubber`` (registered as a ``before-send`` handler on every botocore
session), whose ``__call__`` asks ``self.process_request(request)`` for the answer. :func:`install`
sets an instance attribute ``process_request`` on that object, which shadows the class's method:
the emulator's handler sees each request first and hands what it does not answer to moto's own
method. :func:`uninstall` deletes the attribute, and the method shows through again.

Why: moto 5.2 answers "Not yet implemented" for the Batch service-job APIs, and answering them
here keeps the whole botocore path real (serialisation, parameter validation, retries, the
response parser) for the code under test. A second ``before-send`` handler would not do: botocore
calls every handler, so moto would answer (and act on) the same request too.

Everything else the emulator needs from moto is public: its backend registries (read only), its
response base class (account and region of a request) and its paginator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from batchpilot_local.emulator.core import Response

__all__ = ["Handler", "install", "installed", "uninstall"]

Handler = Callable[[Any], Response | None]
"""Answers a botocore ``AWSPreparedRequest``, or returns None to let moto answer it."""


def _stubber() -> Any:
    from moto.core.models import botocore_stubber

    return botocore_stubber


def installed() -> bool:
    """Whether a handler is in front of moto's."""
    return "process_request" in vars(_stubber())


def install(handler: Handler) -> None:
    """Put ``handler`` in front of moto's request processing.

    Raises:
        RuntimeError: a handler is installed already (one emulator at a time).
    """
    stubber = _stubber()
    if installed():
        raise RuntimeError("an emulator is already installed in front of moto")
    moto_process: Handler = stubber.process_request  # the class's method, bound

    def process_request(request: Any) -> Response | None:
        answer = handler(request)
        return answer if answer is not None else moto_process(request)

    stubber.process_request = process_request


def uninstall() -> None:
    """Remove the handler, if any: moto answers everything again. Idempotent."""
    vars(_stubber()).pop("process_request", None)
