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

Files and stdin are read a window of text at a time (:data:`_CHUNK`), so a large archive is never
held whole (one JSON document is: a JSON Lines event, or a whole ``[...]`` array). The items read
are held deflated in memory or, for ``batchpilot replay``, in a temporary file
(:class:`ItemSpool`): the replay's memory does not grow with its input.

Any unreadable input raises :class:`InputError`, whose one-line message names the file (and the
line, for JSON Lines) and never quotes the content.
"""

from __future__ import annotations

import codecs
import itertools
import json
import os
import pickle
import re
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from batchpilot_local.clock import ClockError, ClockScenario, is_clock_scenario, parse_clock_scenario
from batchpilot_local.embedded_aws import EmbeddedAws, WorldError
from batchpilot_local.world import json_type

__all__ = [
    "SCENARIO_KEYS",
    "InputError",
    "InputItem",
    "ItemSpool",
    "Packer",
    "ReplayInput",
    "World",
    "read_inputs",
    "steps_of",
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
    quarter of its compact text: holding a 20,000-event archive in memory costs about 12 MB
    instead of about 40 MB. What :func:`read_inputs` holds in memory (``batchpilot simulate``, the
    test harness); ``batchpilot replay`` spools its input to disk instead (:class:`ItemSpool`).
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
    """An :class:`InputItem`; an object is packed by ``out``'s :class:`Packer`, if it has one."""
    if isinstance(value, dict) and out.packer is not None:
        return InputItem(out.packer.pack(value), origin, scope, out.packer)
    return InputItem(value, origin, scope)


def steps_of(value: Any) -> int:
    """The reports a replay makes of one input item's value: one per tick of a clock scenario
    (:class:`~batchpilot_local.clock.ClockScenario`), one for anything else."""
    return len(value.ticks) if isinstance(value, ClockScenario) else 1


class ItemSpool:
    """Input items held in a temporary file (pickled one after another), read back in order as
    often as needed: what ``batchpilot replay`` holds of its input, so its memory does not grow
    with the number of events (about 1 KB of decoded event is a few hundred bytes on disk, and
    nothing in memory).

    Append while reading the input, then :meth:`seal`; iterate after. One iteration at a time
    (each starts from the first item). The file is deleted by :meth:`close` (or when the spool is
    garbage-collected).

    Raises:
        RuntimeError: appending after :meth:`seal`, iterating before it, or iterating twice at once.
    """

    def __init__(self) -> None:
        self._file: BinaryIO = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self._count = 0
        self.steps = 0
        """The reports a replay of the items makes (see :func:`steps_of`)."""
        self._sealed = False
        self._reading = False

    def append(self, item: InputItem) -> None:
        """Add ``item`` (held decoded: :attr:`InputItem.packer` is not kept)."""
        if self._sealed:
            raise RuntimeError("ItemSpool: sealed, nothing more can be appended")
        value = item.value
        pickle.dump((value, item.origin, item.scope), self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self._count += 1
        self.steps += steps_of(value)

    def extend(self, items: Iterable[InputItem]) -> None:
        """:meth:`append` each of ``items``."""
        for item in items:
            self.append(item)

    def seal(self) -> None:
        """End the appending; iteration may start."""
        self._file.flush()
        self._sealed = True

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[InputItem]:
        if not self._sealed:
            raise RuntimeError("ItemSpool: seal() it before reading")
        if self._reading:
            raise RuntimeError("ItemSpool: already being read")
        self._reading = True
        try:
            self._file.seek(0)
            for _ in range(self._count):
                value, origin, scope = pickle.load(self._file)  # noqa: S301 - our own file
                yield InputItem(value, origin, scope)
        finally:
            self._reading = False

    def close(self) -> None:
        """Delete the file. Idempotent."""
        self._file.close()


@dataclass(frozen=True)
class World:
    """A scenario's ``world`` object, the file it came from, and its template ``parameters``
    (name → text, as ``sam deploy --parameter-overrides`` gives them)."""

    data: dict[str, Any]
    origin: str
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass
class ReplayInput:
    """Everything read from the paths: the items in input order (a list, or an
    :class:`ItemSpool`: see :func:`read_inputs`), and the scenario worlds; ``packer`` deflates
    the items of a list (None: items are held as decoded)."""

    items: list[InputItem] | ItemSpool = field(default_factory=list)
    worlds: list[World] = field(default_factory=list)
    packer: Packer | None = field(default_factory=Packer, repr=False, compare=False)

    @property
    def events(self) -> list[Any]:
        """The items' values, in order (all decoded at once)."""
        return [item.value for item in self.items]

    @property
    def steps(self) -> int:
        """The reports a replay of the items makes (see :func:`steps_of`)."""
        if isinstance(self.items, ItemSpool):
            return self.items.steps
        return sum(steps_of(item.payload) for item in self.items)

    def close(self) -> None:
        """Delete the items' file, when they are spooled. Idempotent."""
        if isinstance(self.items, ItemSpool):
            self.items.close()


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


_CHUNK = 1 << 20
"""Characters read from a file at a time: documents are decoded from a window of the text, so a
large file is never held whole (one document is: a JSON value is decoded at once)."""
_TAIL = 16
"""An error this close to the end of the text read so far may be the text's end, not the
document's (``tru`` of ``true``, a ``-`` of a number): more is read before it is reported."""


def _chunks_of(stream: BinaryIO, origin: str) -> Iterator[str]:
    """``stream``'s text, UTF-8 (a byte order mark is dropped), :data:`_CHUNK` bytes at a time.

    Raises:
        InputError: the bytes are not UTF-8, naming the byte (0-based, from the start).
    """
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    consumed = 0
    while True:
        data = stream.read(_CHUNK)
        try:
            text = decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise InputError(f"{origin}: not UTF-8 text (byte {consumed + exc.start})") from None
        consumed += len(data)
        if text:
            yield text
        if not data:
            return


def _documents(chunks: Iterable[str], origin: str) -> Iterator[tuple[Any, int]]:
    """Every JSON document in the text ``chunks`` make, one after another (JSON Lines,
    concatenated pretty-printed objects, or a mix), with the line each starts on; read and
    decoded one at a time as they are taken, so only a window of the text is held.

    Raises:
        InputError: invalid JSON, naming the line.
    """
    source = iter(chunks)
    text = ""
    base = 1  # the line text[0] is on: text is only ever cut at the start of a line
    counted, line = 0, 1  # line is the line of text[counted]
    position = 0
    eof = False

    def more(at_least: int = 1) -> bool:
        """Read on until ``at_least`` characters follow ``position`` (or the text ends), first
        dropping the whole lines before ``position``; False when nothing more was read."""
        nonlocal text, base, counted, line, position, eof
        if eof:
            return False
        cut = text.rfind("\n", 0, position) + 1
        if cut:
            base += text.count("\n", 0, cut)
            text, position, counted = text[cut:], position - cut, max(counted - cut, 0)
            line = base + text.count("\n", 0, counted)
        added = []
        ahead = len(text) - position
        while ahead < at_least:
            chunk = next(source, None)
            if chunk is None:
                eof = True
                break
            added.append(chunk)
            ahead += len(chunk)
        text += "".join(added)
        return bool(added)

    while True:
        position = _SPACE.match(text, position).end()  # type: ignore[union-attr]
        if position == len(text):
            if more():
                continue
            return
        line += text.count("\n", counted, position)
        counted = position
        try:
            value, end = _DECODER.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            lineno = base + exc.lineno - 1  # before more() moves base
            at_end = exc.pos >= len(text) - _TAIL or exc.msg.startswith("Unterminated string")
            # Twice as much text each time: a large document is decoded a few times, not once per chunk.
            if at_end and more(2 * (len(text) - position)):
                continue
            if lineno == line:
                raise _json_error(origin, exc, line) from None
            # Name the document (where it starts) and where the parser stopped in it.
            raise InputError(
                f"{origin}: line {line}: invalid JSON: {exc.msg} (line {lineno}, column {exc.colno})"
            ) from None
        except (ValueError, RecursionError) as exc:
            raise _json_error(origin, exc, line) from None
        if end == len(text) and more(len(text) - position + 1):  # a number may go on
            continue
        yield value, line
        position = end


def parse_text(text: str, origin: str, out: ReplayInput, *, json_lines: bool = False) -> None:
    """Parse one text (a file's or stdin's) into ``out``: see :func:`parse_chunks`."""
    parse_chunks([text], origin, out, json_lines=json_lines)


def parse_chunks(chunks: Iterable[str], origin: str, out: ReplayInput, *, json_lines: bool = False) -> None:
    """Parse one file's (or stdin's) text, given as consecutive pieces, into ``out``.

    The text is one JSON document or several, one after another: JSON Lines, concatenated
    pretty-printed objects (``cat a.json b.json``), pages of ``aws logs filter-log-events`` output.
    Several documents are named ``origin:line`` (the line each starts on); ``json_lines`` (a
    ``.jsonl`` file) names a single document that way too. Wrappers are unwrapped (see
    :func:`_wrapped`): CloudWatch Logs output, Logs Insights results, SQS messages.

    Raises:
        InputError: invalid JSON, an empty document, or a top-level value that is neither an
            object nor an array.
    """
    documents = _documents(chunks, origin)
    first = next(documents, None)
    if first is None:
        if json_lines:
            return
        raise InputError(f"{origin}: empty input: expected a JSON object, an array or JSON Lines")
    second = next(documents, None)
    if second is None and not json_lines:
        _add_top_level(first[0], origin, out)
        return
    for value, line in itertools.chain([first], [second] if second else [], documents):
        _add_top_level(value, f"{origin}:{line}", out, f"{origin}: line {line}")


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
        stream = path.open("rb")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InputError(f"{origin}: cannot read: {reason}") from None
    with stream:
        try:
            parse_chunks(_chunks_of(stream, origin), origin, out, json_lines=path.suffix == ".jsonl")
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise InputError(f"{origin}: cannot read: {reason}") from None


def read_inputs(paths: Sequence[str], stdin: TextIO | None = None, *, spool: bool = False) -> ReplayInput:
    """Read every path (see the module docstring) into one :class:`ReplayInput`, in order.

    Each file (and stdin) is read a window at a time (:data:`_CHUNK`), never whole; what is held
    afterwards is the items: deflated in memory (:class:`Packer`), or, with ``spool``, in a
    temporary file (:class:`ItemSpool`), so memory does not grow with the input.

    Args:
        paths: file paths, directory paths, or ``-`` for ``stdin``.
        stdin: the stream ``-`` reads (default ``sys.stdin``).
        spool: hold the items in an :class:`ItemSpool` (close it, or the :class:`ReplayInput`,
            when done) instead of a list.

    Raises:
        InputError: a path does not exist or cannot be read, ``-`` is given twice, or a file is
            not valid input (see :func:`parse_text`).
    """
    out = ReplayInput(ItemSpool(), packer=None) if spool else ReplayInput()
    try:
        _read_paths(paths, stdin, out)
    except BaseException:
        out.close()
        raise
    if isinstance(out.items, ItemSpool):
        out.items.seal()
    return out


def _read_paths(paths: Sequence[str], stdin: TextIO | None, out: ReplayInput) -> None:
    import sys

    used_stdin = False
    for raw in paths:
        if raw == "-":
            if used_stdin:
                raise InputError("<stdin>: '-' given more than once")
            used_stdin = True
            stream = stdin if stdin is not None else sys.stdin
            buffer = getattr(stream, "buffer", None)
            chunks = (
                _chunks_of(buffer, "<stdin>")
                if buffer is not None
                else iter(partial(stream.read, _CHUNK), "")
            )
            parse_chunks(chunks, "<stdin>", out)
            continue
        path = Path(raw)
        if path.is_dir():
            for file in _directory_files(path):
                _read_file(file, str(file), out)
        elif path.exists():
            _read_file(path, raw, out)
        else:
            raise InputError(f"{raw}: no such file or directory")
