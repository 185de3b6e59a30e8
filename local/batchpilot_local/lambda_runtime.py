"""Running the template's Lambda handlers in this process, the way the Lambda runtime would.

- :class:`SwitchableStdout` is the one object that replaces ``sys.stdout`` for a whole replay:
  Powertools' Logger binds its ``StreamHandler`` to the ``sys.stdout`` object that exists when the
  logger is created, so the object itself must stay put while what it writes to changes per
  invocation (:meth:`SwitchableStdout.capture`).
- :class:`LambdaRuntime` loads each function's handler module once (a cold start: the function's
  environment variables are set before the import), then invokes it with a
  :class:`FakeLambdaContext` and returns what it printed and returned as an :class:`Invocation`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import os
import re
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType, TracebackType
from typing import Any, TextIO

from batchpilot_local.template import ACCOUNT_ID, REGION, FunctionSpec

__all__ = ["FakeLambdaContext", "Invocation", "LambdaRuntime", "SwitchableStdout", "describe_exception"]


class SwitchableStdout(io.TextIOBase):
    """A text stream whose destination can be switched: a fresh buffer inside :meth:`capture`.

    Outside :meth:`capture` it writes to whatever ``sys.stdout`` is at the time (``fallback`` while
    it is itself ``sys.stdout``), so a logger still bound to it after a replay behaves like one
    bound to ``sys.stdout``. Install it as ``sys.stdout`` once, before any handler module (or
    Powertools Logger) is created.
    """

    def __init__(self, fallback: TextIO) -> None:
        super().__init__()
        self._fallback = fallback
        self._target: TextIO | None = None

    def _destination(self) -> TextIO:
        if self._target is not None:
            return self._target
        current = sys.stdout
        return self._fallback if current is self or current is None else current

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """Always ``utf-8``: what Lambda's stdout uses."""
        return "utf-8"

    def writable(self) -> bool:
        """Always True."""
        return True

    def isatty(self) -> bool:
        """Always False: handlers must not colour their output."""
        return False

    def write(self, text: str) -> int:
        """Write to the current destination; returns the number of characters written."""
        self._destination().write(text)
        return len(text)

    def flush(self) -> None:
        """Flush the current destination."""
        self._destination().flush()

    @contextmanager
    def capture(self) -> Iterator[io.StringIO]:
        """Send everything written inside the ``with`` block to a new buffer (yielded)."""
        buffer = io.StringIO()
        previous = self._target
        self._target = buffer
        try:
            yield buffer
        finally:
            self._target = previous


@dataclass
class FakeLambdaContext:
    """The ``context`` argument Lambda passes to a handler (the attributes Powertools reads).

    ``get_remaining_time_in_millis`` counts down from the function's timeout.
    """

    function_name: str
    memory_limit_in_mb: int
    timeout_s: int
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    identity: Any = None
    client_context: Any = None
    tenant_id: str | None = None
    _deadline: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_s

    @property
    def invoked_function_arn(self) -> str:
        """``arn:aws:lambda:us-east-1:111122223333:function:<function_name>``."""
        return f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        """``/aws/lambda/<function_name>``."""
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        """A stream name shaped like Lambda's."""
        return f"{time.strftime('%Y/%m/%d')}/[$LATEST]{self.aws_request_id.replace('-', '')}"

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the function's timeout (never negative)."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


@dataclass
class Invocation:
    """The outcome of one handler call.

    Attributes:
        function: the function's short name.
        output: everything the handler (and, on a cold start, its module import) wrote to stdout.
        result: the handler's return value (None when it raised).
        error: a one-line ``Type: message`` when the import or the handler raised, else None.
        init_error: True when the error happened while importing the module (cold start).
        duration_s: wall-clock seconds of the call (import excluded).
        timed_out: the call took longer than the function's ``Timeout``.
    """

    function: str
    output: str
    result: Any = None
    error: str | None = None
    init_error: bool = False
    duration_s: float = 0.0
    timed_out: bool = False


def describe_exception(exc: BaseException) -> str:
    """``Type: first line of the message``; for Powertools' ``BatchProcessingError`` (raised when
    every record failed) the first record's own exception is described instead."""
    children = getattr(exc, "child_exceptions", None)
    if children:
        first = children[0]
        if isinstance(first, tuple) and len(first) >= 2 and isinstance(first[1], BaseException):
            exc = first[1]
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


@dataclass(frozen=True)
class _ObservabilityState:
    """What a function's cold start set on the layer's shared Powertools ``metrics`` and ``logger``.

    In Lambda each function is its own process; here all share one ``batchpilot.shared.observability``
    module, so each function's settings (namespace, service, the ``Function`` dimension, logger
    keys) are captured after its import and put back before each of its invocations.
    """

    namespace: Any
    service: Any
    default_dimensions: dict[str, str]
    logger_keys: dict[str, Any]

    @classmethod
    def capture(cls) -> _ObservabilityState:
        from batchpilot.shared.observability import logger, metrics

        keys = dict(logger.get_current_keys()) if hasattr(logger, "get_current_keys") else {}
        return cls(metrics.namespace, metrics.service, dict(metrics.default_dimensions), keys)

    @staticmethod
    def clear() -> None:
        """A blank slate, as a new Lambda process has: no default dimensions, no buffered metrics."""
        from batchpilot.shared.observability import metrics

        metrics.clear_default_dimensions()
        metrics.clear_metrics()

    def restore(self) -> None:
        from batchpilot.shared.observability import logger, metrics

        self.clear()
        metrics.namespace = self.namespace
        metrics.service = self.service
        metrics.set_default_dimensions(**self.default_dimensions)
        if self.logger_keys:
            logger.append_keys(**self.logger_keys)


def _module_name(short_name: str) -> str:
    return "batchpilot_fn_" + re.sub(r"\W", "_", short_name)


def _reset_cold_start_flags() -> None:
    """Make Powertools see the next invocation as a cold start (each runtime is a new process)."""
    try:
        from aws_lambda_powertools.logging import logger as pt_logger
        from aws_lambda_powertools.metrics.provider import cold_start
    except ImportError:  # pragma: no cover - Powertools is a runtime dependency
        return
    cold_start.is_cold_start = True
    if hasattr(pt_logger, "is_cold_start"):
        pt_logger.is_cold_start = True


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    # Only what differs is set (and restored): most variables are the same for every function,
    # and each os.environ write is a putenv call.
    environ = os.environ
    saved: dict[str, str | None] = {}
    for name, value in values.items():
        current = environ.get(name)
        if current != value:
            saved[name] = current
            environ[name] = value
    try:
        yield
    finally:
        for name, before in saved.items():
            if before is None:
                environ.pop(name, None)
            else:
                environ[name] = before


class LambdaRuntime:
    """Loads and invokes the handlers of :class:`~batchpilot_local.template.FunctionSpec` s.

    Each function's module is imported at its first invocation, under the module name
    ``batchpilot_fn_<short name>``, with its ``CodeUri`` folder on ``sys.path`` and its environment
    (template variables plus the Lambda runtime's own, e.g. ``AWS_LAMBDA_FUNCTION_NAME``) set
    before the import. Use as a context manager: on exit the modules, ``sys.path`` entries and
    logger streams are put back. A failed import is remembered: later calls report the same error.
    """

    def __init__(self, stdout: SwitchableStdout) -> None:
        self._stdout = stdout
        self._handlers: dict[str, Callable[[Any, Any], Any]] = {}
        self._init_errors: dict[str, str] = {}
        self._modules: list[str] = []
        self._paths: list[str] = []
        self._rebound: list[tuple[logging.StreamHandler[Any], Any]] = []
        self._observability: dict[str, _ObservabilityState] = {}

    def __enter__(self) -> LambdaRuntime:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Unload the handler modules and undo ``sys.path`` and logger-stream changes."""
        for handler, stream in reversed(self._rebound):
            handler.setStream(stream)
        self._rebound.clear()
        for name in self._modules:
            sys.modules.pop(name, None)
        self._modules.clear()
        for path in self._paths:
            if path in sys.path:
                sys.path.remove(path)
        self._paths.clear()
        self._handlers.clear()
        self._init_errors.clear()

    @staticmethod
    def environment(spec: FunctionSpec) -> dict[str, str]:
        """The variables a function sees: Lambda's runtime variables, then the template's."""
        runtime = {
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_LAMBDA_FUNCTION_NAME": spec.lambda_name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_size),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{spec.lambda_name}",
            # What `sam local` sets: Powertools then keeps X-Ray tracing off.
            "AWS_SAM_LOCAL": "true",
        }
        return {**runtime, **spec.environment}

    def _bind_loggers(self) -> None:
        """Point every Powertools logger that writes to a stdout-like stream at the switchable
        stdout (a logger created before this runtime, e.g. by an earlier import, would otherwise
        keep writing to an old stream)."""
        for candidate in list(logging.Logger.manager.loggerDict.values()):
            handler = getattr(candidate, "powertools_handler", None)
            if not isinstance(handler, logging.StreamHandler) or isinstance(handler, logging.FileHandler):
                continue
            stream = handler.stream
            if stream is self._stdout or stream in (sys.stderr, sys.__stderr__):
                continue
            self._rebound.append((handler, stream))
            handler.setStream(self._stdout)

    def _load(self, spec: FunctionSpec) -> None:
        name = _module_name(spec.short_name)
        code_dir = str(spec.code_dir)
        if code_dir not in sys.path:
            sys.path.insert(0, code_dir)
            self._paths.append(code_dir)
        try:
            module_spec = importlib.util.spec_from_file_location(name, spec.module_file)
            if module_spec is None or module_spec.loader is None:
                raise ImportError(f"cannot load {spec.module_file}")
            module: ModuleType = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            self._modules.append(name)
            _ObservabilityState.clear()  # the previous function's cold start must not leak into this one
            module_spec.loader.exec_module(module)
            handler = getattr(module, spec.handler_name, None)
            if not callable(handler):
                raise AttributeError(f"{spec.module_file.name} has no callable {spec.handler_name}")
        except Exception as exc:
            self._init_errors[spec.short_name] = describe_exception(exc)
            return
        self._handlers[spec.short_name] = handler
        self._observability[spec.short_name] = _ObservabilityState.capture()
        _reset_cold_start_flags()

    def invoke(self, spec: FunctionSpec, event: Mapping[str, Any]) -> Invocation:
        """Call the function's handler with ``event`` and a fresh :class:`FakeLambdaContext`.

        Never raises for handler problems: import errors, exceptions and timeouts are reported in
        the returned :class:`Invocation`.
        """
        short = spec.short_name
        with (
            self._stdout.capture() as buffer,
            _environment(self.environment(spec)),
            warnings.catch_warnings(),
        ):
            # In Lambda this goes to the function's log; here it would repeat on the user's terminal
            # for every invocation whose batch had no job metrics (a capacity tick, a skip).
            warnings.filterwarnings("ignore", message="No application metrics to publish")
            if short not in self._handlers and short not in self._init_errors:
                self._load(spec)
            self._bind_loggers()
            if short in self._init_errors:
                return Invocation(short, buffer.getvalue(), error=self._init_errors[short], init_error=True)
            if short in self._observability:
                self._observability[short].restore()
            context = FakeLambdaContext(spec.lambda_name, spec.memory_size, spec.timeout)
            started = time.monotonic()
            result: Any = None
            error: str | None = None
            try:
                result = self._handlers[short](dict(event), context)
            except (Exception, SystemExit) as exc:
                error = describe_exception(exc)
            duration = time.monotonic() - started
            with contextlib.suppress(OSError, ValueError):  # a handler replaced or closed stdout
                sys.stdout.flush()
        return Invocation(
            short,
            buffer.getvalue(),
            result=result,
            error=error,
            duration_s=duration,
            timed_out=duration > spec.timeout,
        )
