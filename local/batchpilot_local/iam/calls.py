"""What each function asks of AWS: every API call recorded through botocore's event hooks.

:class:`CallRecorder` registers handlers for botocore's documented events (``provide-client-params``
for the operation and its parameters as the caller gave them, ``after-call`` /
``after-call-error`` for the outcome and the ARNs the answer names) on the event emitters it is
given. Hand it to :func:`batchpilot_local.embedded_aws.observing` and every embedded AWS opened
meanwhile installs it next to its own API journal (the adapters' session and boto3's default
session), so it sees every call the functions make in a replay, a fault test or a benchmark
without being told which calls to expect.

Each :class:`ApiCall` names the function that made it: the one whose code is outermost on the call
stack when the call starts, ``functions/<name>/app.py`` or a module of the feature package
``batchpilot.<name>`` (the layout ARCHITECTURE.md describes: one package per function; ``shared``
and ``io`` belong to none). A call made by test code or a tool, outside any function, has
``function`` None.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ApiCall", "CallRecorder", "function_on_stack", "read_calls", "write_calls"]

_SHARED_PACKAGES = frozenset({"shared", "io"})
_FEATURE_MODULE = re.compile(r"^batchpilot\.([a-z_]+)(?:\.|$)")
_RUNS_IN = {"gpu": "ledger"}
"""Feature packages that run inside another function (the GPU activity check: the ledger's schedule)."""
_CONTEXT_KEY = "batchpilot_iam_call"


@dataclass
class ApiCall:
    """One API call.

    Attributes:
        function: the function that made it (short name, ``recovery``), None outside any function.
        service: botocore's service name (``batch``, ``dynamodb``, ``events``, ``s3``, ...).
        operation: the API operation (``SubmitServiceJob``).
        params: the parameters as given to the boto3 method (a JSON-shaped copy).
        response_arns: top-level ``...Arn`` strings of a successful answer (``jobArn`` of a
            submission: the resource it created).
        succeeded: AWS answered with 2xx (False also when botocore never sent it).
        error_code: the AWS error code, or the exception's name, when it did not succeed.
        origin: where it was recorded (a sample file, a test id), set by the caller.
    """

    function: str | None
    service: str
    operation: str
    params: dict[str, Any]
    response_arns: dict[str, str] = field(default_factory=dict)
    succeeded: bool = False
    error_code: str | None = None
    origin: str | None = None

    @property
    def api(self) -> str:
        """``service:Operation`` as the API names it (``s3:ListObjectsV2``; not an IAM action)."""
        return f"{self.service}:{self.operation}"


def _plain(value: Any) -> Any:
    """A JSON-shaped copy (bytes and datetimes as text)."""
    return json.loads(json.dumps(value, default=str))


def function_on_stack(frame: Any = None) -> str | None:
    """The function whose code is outermost on the stack from ``frame`` (default: the caller's):
    the ``<name>`` of ``functions/<name>/app.py`` or of a ``batchpilot.<name>`` package other than
    ``shared`` and ``io`` (``batchpilot.gpu``: the ledger function, whose schedule runs it); None
    when no function's code is on the stack."""
    current = frame if frame is not None else inspect.currentframe()
    found: str | None = None
    while current is not None:
        path = Path(current.f_code.co_filename)
        if path.name == "app.py" and path.parent.parent.name == "functions":
            found = path.parent.name
        else:
            match = _FEATURE_MODULE.match(str(current.f_globals.get("__name__", "")))
            if match and match.group(1) not in _SHARED_PACKAGES:
                found = _RUNS_IN.get(match.group(1), match.group(1))
        current = current.f_back
    return found


class CallRecorder:
    """Records every API call made through the clients of the emitters it is installed on.

    The interface is :class:`~batchpilot_local.world.ApiJournal`'s (``install`` / ``uninstall``),
    so an embedded AWS installs it the same way. ``calls`` grows until :meth:`drain`.
    ``origin`` is stamped on each call recorded while it is set.
    """

    def __init__(self) -> None:
        self.calls: list[ApiCall] = []
        self.origin: str | None = None
        self._emitters: list[Any] = []
        self._ids = {
            name: f"batchpilot-iam-{name}-{id(self)}"
            for name in ("provide-client-params", "after-call", "after-call-error")
        }

    def install(self, emitters: Iterable[Any]) -> None:
        """Register the handlers on each emitter (once per emitter)."""
        handlers = {
            "provide-client-params": self._before,
            "after-call": self._after,
            "after-call-error": self._after_error,
        }
        for emitter in emitters:
            if any(emitter is known for known in self._emitters):
                continue
            for event, handler in handlers.items():
                emitter.register(event, handler, unique_id=self._ids[event])
            self._emitters.append(emitter)

    def uninstall(self) -> None:
        """Unregister the handlers from every emitter."""
        for emitter in self._emitters:
            for event, unique_id in self._ids.items():
                emitter.unregister(event, unique_id=unique_id)
        self._emitters.clear()

    def drain(self) -> list[ApiCall]:
        """The calls recorded so far, removed from the recorder."""
        calls, self.calls = self.calls, []
        return calls

    def _before(self, params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        call = ApiCall(
            function=function_on_stack(),
            service=str(model.service_model.service_name),
            operation=str(model.name),
            params=_plain(dict(params)),
            origin=self.origin,
        )
        self.calls.append(call)
        context[_CONTEXT_KEY] = call

    def _after(
        self, http_response: Any, parsed: Mapping[str, Any], context: dict[str, Any], **_: Any
    ) -> None:
        call = context.get(_CONTEXT_KEY)
        if not isinstance(call, ApiCall):
            return
        status = int(http_response.status_code)
        call.succeeded = status < 300
        if call.succeeded:
            call.response_arns = {
                k: v for k, v in parsed.items() if isinstance(v, str) and k.lower().endswith("arn")
            }
        else:
            call.error_code = str((parsed.get("Error") or {}).get("Code") or status)

    def _after_error(self, exception: BaseException, context: dict[str, Any], **_: Any) -> None:
        call = context.get(_CONTEXT_KEY)
        if isinstance(call, ApiCall):
            call.succeeded = False
            call.error_code = type(exception).__name__


def write_calls(path: Path, calls: Iterable[ApiCall]) -> int:
    """Append ``calls`` to ``path`` as JSON Lines; returns how many."""
    count = 0
    with path.open("a", encoding="utf-8") as out:
        for call in calls:
            out.write(json.dumps(asdict(call), default=str) + "\n")
            count += 1
    return count


def read_calls(path: Path) -> Iterator[ApiCall]:
    """The calls :func:`write_calls` wrote to ``path``.

    Raises:
        OSError: the file cannot be read.
        ValueError: a line is not a call.
    """
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield ApiCall(**json.loads(line))
