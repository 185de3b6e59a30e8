"""Reading replay input: event files, arrays, JSON Lines, directories, stdin and scenarios.

Each path given to ``batchpilot replay`` is one of:

- a file holding one JSON event object, a JSON array of events, or several JSON documents one
  after another: JSON Lines, or pretty-printed objects concatenated (``cat a.json b.json``), read
  with :meth:`json.JSONDecoder.raw_decode` document by document;
- a directory, read recursively: its ``*.json`` and ``*.jsonl`` files in sorted path order
  (compared folder by folder; hidden files and folders, whose names start with ``.``, and all
  other files are skipped);
- ``-`` for standard input (at most once).

Events arrive as users have them: wrapped values are unwrapped wherever they appear (a document,
an array element), recursively:

- ``aws logs filter-log-events`` / ``get-log-events`` output (``{"events": [{"timestamp",
  "message"}], "nextToken" ...}``, pages concatenated): each event's ``message`` is parsed;
- Logs Insights results: ``aws logs get-query-results`` (``results`` rows of ``{"field",
  "value"}``) or a console JSON export (rows with ``@message``);
- SQS messages: ``aws sqs receive-message`` output (``Messages[].Body``), a Lambda SQS event
  (``Records[].body``), or one message.

A top-level object with an ``events`` list and no ``detail-type`` (and not CloudWatch Logs output)
is a *scenario*: ``{"world": {...}, "parameters": {...}, "events": [...]}``; its events are
replayed, its world is handed to :meth:`batchpilot_local.embedded_aws.EmbeddedAws.seed`, and its
``parameters`` (template parameter name → value) configure the functions for its events.
One with ``ticks`` is a *clock scenario* (:mod:`batchpilot_local.clock`): its item is a
``ClockScenario`` that the replay runs tick by tick.

Any unreadable input raises :class:`InputError`, whose one-line message names the file (and the
line, for JSON Lines) and never quotes the content.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, overload

from batchpilot_local.clock import ClockError, is_clock_scenario, parse_clock_scenario
from batchpilot_local.embedded_aws import EmbeddedAws, WorldError
from batchpilot_local.world import json_type

__all__ = [
    "SCENARIO_KEYS",
    "InputError",
    "InputItem",
    "Packer",
    "ReplayInput",
    "Values",
    "World",
    "read_inputs",
]

SCENARIO_KEYS: frozenset[str] = frozenset({"world", "events", "description", "name", "parameters"})
"""Keys a scenario object may have (``events`` is required)."""

_SUFFIXES = (".json", ".jsonl")


class InputError(Exception):
    """Input that cannot be read: a missing path, invalid JSON, a value that is not an object or
    an array, a malformed scenario. The message is one line and names the file."""


class Packer:
    """Packs the event objects of one input read: compact JSON text, deflated (zlib, level 1)
    against a preset dictionary that is the compact text of the first object packed.

    Events of one archive repeat most of their text (keys, sources, queue ARNs, container
    settings), so against that dictionary a 2 KB Batch job event keeps about 0.6 KB, a
    quarter of its compact text: what holding a 20,000-event archive costs drops from about 40 MB
    to about 12 MB (``benchmarks/bench_replay.py``).
    """

    __slots__ = ("_zdict",)

    def __init__(self) -> None:
        self._zdict = b""

    def pack(self, value: Any) -> bytes:
        """``value`` (JSON data) as deflated compact JSON text."""
        text = json.dumps(value, separators=(",", ":")).encode("utf-8")
        if not self._zdict:
            self._zdict = text[-32768:]  # zlib uses at most the last 32 KiB of a dictionary
        deflate = zlib.compressobj(1, zdict=self._zdict)
        return deflate.compress(text) + deflate.flush()

    def unpack(self, data: bytes) -> str:
        """The JSON text that :meth:`pack` deflated into ``data``."""
        inflate = zlib.decompressobj(zdict=self._zdict)
        return (inflate.decompress(data) + inflate.flush()).decode("utf-8")


@dataclass(frozen=True, slots=True)
class InputItem:
    """One input item, meant to be an EventBridge event (it is not checked here).

    Attributes:
        payload: the decoded JSON value; or, when ``packer`` is set, that value (an object) as
            deflated compact JSON text (:class:`Packer`): an archive of many events is held as
            about a tenth of the memory of the decoded objects, and each event is decoded again
            only when it is used.
        origin: where it came from: ``path`` (a single event), ``path[i]`` (array element,
            0-based), ``path:line`` (JSON Lines, 1-based), ``path:line[i]``; ``<stdin>`` for stdin.
        scope: the scenario it belongs to (the scenario's origin, which is also its
            :class:`World`'s), or None for a plain event; the replay gives each scenario an
            embedded AWS of its own.
        packer: the :class:`Packer` that packed ``payload``, or None when it is held decoded.
    """

    payload: Any
    origin: str
    scope: str | None = None
    packer: Packer | None = field(default=None, repr=False, compare=False)

    @property
    def packed(self) -> bool:
        """``payload`` is packed text (see ``packer``)."""
        return self.packer is not None

    @property
    def value(self) -> Any:
        """The decoded JSON value (a new object on each call when packed)."""
        return json.loads(self.packer.unpack(self.payload)) if self.packer is not None else self.payload


def _item(value: Any, origin: str, out: ReplayInput, scope: str | None = None) -> InputItem:
    """An :class:`InputItem`; an object is packed by ``out``'s :class:`Packer`."""
    if isinstance(value, dict):
        return InputItem(out.packer.pack(value), origin, scope, out.packer)
    return InputItem(value, origin, scope)


@dataclass(frozen=True)
class World:
    """A scenario's ``world`` object, the file it came from, and its template ``parameters``
    (name → text, as ``sam deploy --parameter-overrides`` gives them)."""

    data: dict[str, Any]
    origin: str
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass
class ReplayInput:
    """Everything read from the paths: the items in input order, and the scenario worlds."""

    items: list[InputItem] = field(default_factory=list)
    worlds: list[World] = field(default_factory=list)
    packer: Packer = field(default_factory=Packer, repr=False, compare=False)

    @property
    def events(self) -> list[Any]:
        """The items' values, in order (all decoded at once: see :class:`Values` for a view that
        decodes one at a time)."""
        return [item.value for item in self.items]


class Values(Sequence[Any]):
    """The values of ``items``, decoded one at a time as they are read (``values[i]`` is
    ``items[i].value``): what the replay iterates, so a packed archive is never decoded whole."""

    def __init__(self, items: Sequence[InputItem]) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [item.value for item in self._items[index]]
        return self._items[index].value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_SPACE = re.compile(r"[ \t\n\r]*")


def _loads(text: str) -> Any:
    return _DECODER.decode(text)


def _json_error(origin: str, exc: Exception, line: int | None = None) -> InputError:
    if isinstance(exc, json.JSONDecodeError):
        where = line if line is not None else exc.lineno
        return InputError(f"{origin}: line {where}: invalid JSON: {exc.msg} (column {exc.colno})")
    if isinstance(exc, RecursionError):
        reason = "nested too deeply"
    else:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    prefix = f"{origin}: line {line}" if line is not None else origin
    return InputError(f"{prefix}: invalid JSON: {reason}")


# ------------------------------------------------------------------------------- wrappers
# Keys of `aws logs filter-log-events` and `aws logs get-log-events` output beside `events`.
_LOGS_KEYS = frozenset({"nextToken", "searchedLogStreams", "nextForwardToken", "nextBackwardToken"})
_MAX_WRAPPING = 4  # a log line holding an SQS body holding an event is 2 levels: 4 is plenty


def _is_log_events(value: Mapping[str, Any]) -> bool:
    """``{"events": [{"timestamp", "message", ...}], "nextToken"?: ...}``: CloudWatch Logs output."""
    events = value.get("events")
    if not isinstance(events, list) or "detail-type" in value:
        return False
    if any(key in value for key in _LOGS_KEYS):
        return True
    return bool(events) and all(
        isinstance(e, Mapping) and isinstance(e.get("message"), str) and "timestamp" in e for e in events
    )


def _insights_message(row: Any) -> str | None:
    """The ``@message`` of one Logs Insights result: a ``get-query-results`` row (a list of
    ``{"field", "value"}``) or a console export row (``{"@timestamp", "@message", ...}``)."""
    if isinstance(row, list):
        for cell in row:
            if isinstance(cell, Mapping) and cell.get("field") == "@message":
                value = cell.get("value")
                return value if isinstance(value, str) else None
        return None
    if isinstance(row, Mapping) and "detail-type" not in row:
        value = row.get("@message")
        return value if isinstance(value, str) else None
    return None


def _sqs_body(message: Any, record: bool = False) -> str | None:
    """The body of an SQS message as ``aws sqs receive-message`` (``Body``) or a Lambda SQS event
    record (``body``, ``eventSource: aws:sqs``) shows it; None for anything else. ``record``: the
    message is an element of a ``Records`` list, where a record cut down to its ``body`` (no
    ``eventSource``, as in a hand-written test event) is read too; another service's record (an
    S3 one says ``eventSource: aws:s3``) is not."""
    if not isinstance(message, Mapping) or "detail-type" in message:
        return None
    if isinstance(message.get("Body"), str) and ("MessageId" in message or "ReceiptHandle" in message):
        return str(message["Body"])
    source = message.get("eventSource")
    if isinstance(message.get("body"), str) and (source == "aws:sqs" or (record and source is None)):
        return str(message["body"])
    return None


def _wrapped(value: Any) -> list[tuple[str, str]] | None:
    """The texts wrapped in ``value`` as ``(where, text)`` pairs, or None when it wraps nothing.

    Understood: CloudWatch Logs ``filter-log-events``/``get-log-events`` output (each event's
    ``message``), Logs Insights results (``get-query-results``' ``results`` or a console export's
    rows: ``@message``), SQS messages (``receive-message`` output ``{"Messages": [...]}``, a Lambda
    SQS event ``{"Records": [...]}``, or one message) whose body is the event.
    """
    if isinstance(value, Mapping):
        if _is_log_events(value):
            return [(f"events[{i}].message", str(e.get("message"))) for i, e in enumerate(value["events"])]
        results = value.get("results")
        if isinstance(results, list) and "detail-type" not in value and "status" in value:
            rows = [(i, _insights_message(row)) for i, row in enumerate(results)]
            return [(f"results[{i}].@message", text) for i, text in rows if text is not None]
        for key in ("Messages", "Records"):
            messages = value.get(key)
            if isinstance(messages, list) and messages and "detail-type" not in value:
                bodies = [(i, _sqs_body(m, record=key == "Records")) for i, m in enumerate(messages)]
                if all(body is not None for _, body in bodies):
                    return [(f"{key}[{i}].body", str(body)) for i, body in bodies]
        body = _sqs_body(value)
        if body is not None:
            return [("body", body)]
        message = _insights_message(value)
        if message is not None and set(value) <= {"@timestamp", "@message", "@logStream", "@log", "@ptr"}:
            return [("@message", message)]
        return None
    if isinstance(value, list) and value and all(_insights_message(row) is not None for row in value):
        return [(f"[{i}].@message", str(_insights_message(row))) for i, row in enumerate(value)]
    return None


def _unwrap(value: Any, origin: str, label: str, depth: int = 0) -> list[tuple[Any, str]] | None:
    """The values wrapped in ``value`` (see :func:`_wrapped`), unwrapped recursively, as
    ``(value, origin)``; None when ``value`` wraps nothing.

    Raises:
        InputError: a wrapped text is not JSON, naming where it is.
    """
    texts = _wrapped(value) if depth < _MAX_WRAPPING else None
    if texts is None:
        return None
    out: list[tuple[Any, str]] = []
    for where, text in texts:
        try:
            inner = _loads(text)
        except (ValueError, RecursionError) as exc:
            raise _json_error(f"{label} {where}", exc) from None
        deeper = _unwrap(inner, f"{origin} {where}", f"{label} {where}", depth + 1)
        out.extend(deeper if deeper is not None else [(inner, f"{origin} {where}")])
    return out


def _add_top_level(value: Any, origin: str, out: ReplayInput, label: str | None = None) -> None:
    """Add one top-level JSON value (a whole file, or one of several concatenated documents).

    ``origin`` names the items; ``label`` (default ``origin``) starts error messages.
    """
    label = label or origin
    unwrapped = _unwrap(value, origin, label)
    if unwrapped is not None:
        for inner, where in unwrapped:
            if isinstance(inner, list):
                out.items.extend(_item(v, f"{where}[{i}]", out) for i, v in enumerate(inner))
            else:
                out.items.append(_item(inner, where, out))
        return
    if isinstance(value, list):
        for i, element in enumerate(value):
            inner_items = _unwrap(element, f"{origin}[{i}]", f"{label}[{i}]")
            if inner_items is None:
                out.items.append(_item(element, f"{origin}[{i}]", out))
            else:
                out.items.extend(_item(v, where, out) for v, where in inner_items)
        return
    if not isinstance(value, Mapping):
        raise InputError(f"{label}: expected a JSON object or array, got {json_type(value)}")
    if is_clock_scenario(value):  # {"world", "parameters", "ticks": [...]}: see clock.py
        try:
            out.items.append(InputItem(parse_clock_scenario(value, origin), origin, scope=origin))
        except ClockError as exc:
            raise InputError(f"{label}: {exc}") from None
        return
    if "events" in value and "detail-type" not in value:
        _add_scenario(value, origin, out, label)
        return
    out.items.append(_item(value, origin, out))


def _parameters(value: Any, label: str) -> dict[str, str]:
    """A scenario's ``parameters`` object as template parameter name → text (objects and arrays
    as their JSON text, booleans as ``true``/``false``, as ``sam deploy`` would pass them)."""
    if not isinstance(value, Mapping):
        raise InputError(f"{label}: scenario 'parameters' must be an object, got {json_type(value)}")
    out: dict[str, str] = {}
    for name, raw in value.items():
        if isinstance(raw, bool):
            out[str(name)] = "true" if raw else "false"
        elif isinstance(raw, str | int | float):
            out[str(name)] = str(raw)
        elif isinstance(raw, Mapping | list):
            out[str(name)] = json.dumps(raw, separators=(",", ":"))
        else:
            raise InputError(
                f"{label}: parameters.{name}: expected a string, number, boolean, object or array"
            )
    return out


def _add_scenario(value: Mapping[str, Any], origin: str, out: ReplayInput, label: str) -> None:
    unknown = sorted(str(k) for k in value if k not in SCENARIO_KEYS)
    if unknown:
        raise InputError(f"{label}: unknown scenario key(s): {', '.join(unknown)}")
    events = value["events"]
    if not isinstance(events, list):
        raise InputError(f"{label}: scenario 'events' must be an array, got {json_type(events)}")
    world = value.get("world", {})
    try:
        EmbeddedAws.check_world(world)
    except WorldError as exc:
        raise InputError(f"{label}: {exc}") from None
    parameters = _parameters(value.get("parameters", {}), label)
    out.worlds.append(World(dict(world), origin, parameters))
    out.items.extend(_item(v, f"{origin} events[{i}]", out, scope=origin) for i, v in enumerate(events))


def _documents(text: str, origin: str) -> Iterator[tuple[Any, int]]:
    """Every JSON document in ``text``, one after another (JSON Lines, concatenated pretty-printed
    objects, or a mix), with the line each starts on; decoded one at a time as they are taken.

    Raises:
        InputError: invalid JSON, naming the line.
    """
    position = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    line = text.count("\n", 0, position) + 1
    counted = position
    while position < len(text):
        line += text.count("\n", counted, position)
        counted = position
        try:
            value, end = _DECODER.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            if exc.lineno == line:
                raise _json_error(origin, exc) from None
            # Name the document (where it starts) and where the parser stopped in it.
            raise InputError(
                f"{origin}: line {line}: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from None
        except (ValueError, RecursionError) as exc:
            raise _json_error(origin, exc, line) from None
        yield value, line
        position = _SPACE.match(text, end).end()  # type: ignore[union-attr]


def parse_text(text: str, origin: str, out: ReplayInput, *, json_lines: bool = False) -> None:
    """Parse one file's (or stdin's) text into ``out``.

    The text is one JSON document or several, one after another: JSON Lines, concatenated
    pretty-printed objects (``cat a.json b.json``), pages of ``aws logs filter-log-events`` output.
    Several documents are named ``origin:line`` (the line each starts on); ``json_lines`` (a
    ``.jsonl`` file) names a single document that way too. Wrappers are unwrapped (see
    :func:`_wrapped`): CloudWatch Logs output, Logs Insights results, SQS messages.

    Raises:
        InputError: invalid JSON, an empty document, or a top-level value that is neither an
            object nor an array.
    """
    if not text.strip():
        if json_lines:
            return
        raise InputError(f"{origin}: empty input: expected a JSON object, an array or JSON Lines")
    documents = _documents(text, origin)
    first = next(documents)
    second = next(documents, None)
    if second is None and not json_lines:
        _add_top_level(first[0], origin, out)
        return
    for value, line in itertools.chain([first], [second] if second else [], documents):
        _add_top_level(value, f"{origin}:{line}", out, f"{origin}: line {line}")


def _decode(data: bytes, origin: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{origin}: not UTF-8 text (byte {exc.start})") from None


def _directory_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.startswith(".") and name.endswith(_SUFFIXES):
                found.append(Path(folder) / name)
    return sorted(found, key=lambda p: p.relative_to(root).parts)


def _read_file(path: Path, origin: str, out: ReplayInput) -> None:
    try:
        data = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InputError(f"{origin}: cannot read: {reason}") from None
    parse_text(_decode(data, origin), origin, out, json_lines=path.suffix == ".jsonl")


def read_inputs(paths: Sequence[str], stdin: TextIO | None = None) -> ReplayInput:
    """Read every path (see the module docstring) into one :class:`ReplayInput`, in order.

    Args:
        paths: file paths, directory paths, or ``-`` for ``stdin``.
        stdin: the stream ``-`` reads (default ``sys.stdin``).

    Raises:
        InputError: a path does not exist or cannot be read, ``-`` is given twice, or a file is
            not valid input (see :func:`parse_text`).
    """
    import sys

    out = ReplayInput()
    used_stdin = False
    for raw in paths:
        if raw == "-":
            if used_stdin:
                raise InputError("<stdin>: '-' given more than once")
            used_stdin = True
            stream = stdin if stdin is not None else sys.stdin
            buffer = getattr(stream, "buffer", None)
            text = _decode(buffer.read(), "<stdin>") if buffer is not None else stream.read()
            parse_text(text, "<stdin>", out)
            continue
        path = Path(raw)
        if path.is_dir():
            for file in _directory_files(path):
                _read_file(file, str(file), out)
        elif path.exists():
            _read_file(path, raw, out)
        else:
            raise InputError(f"{raw}: no such file or directory")
    return out
