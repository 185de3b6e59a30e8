"""Reading replay input: event files, arrays, JSON Lines, CloudWatch Logs exports, Logs Insights
exports, directories, stdin and scenarios.

Each path given to ``batchpilot replay`` is one of:

- a file, recognised by its content, not its name (gzip data, by its magic bytes ``1f 8b``, is
  decompressed first, whatever the file is called; ``000000.gz`` that a browser already
  decompressed is read as the text it holds):

  - JSON: one event object, an array of events, or several JSON documents one after another
    (JSON Lines, or pretty-printed objects concatenated, ``cat a.json b.json``), read with
    :meth:`json.JSONDecoder.raw_decode` document by document;
  - a CloudWatch Logs export to Amazon S3 (``aws logs create-export-task``): lines of
    ``<ISO 8601 timestamp> <message>`` (a line that does not start with a timestamp continues the
    message before it);
  - a Logs Insights export in CSV (the console's *Export results*, *Download table (CSV)*): a
    header row naming an ``@message`` column, then one row per log event (standard CSV quoting);

- a directory, read recursively in sorted path order (compared folder by folder): its files named
  ``*.json``, ``*.jsonl``, ``*.ndjson``, ``*.gz`` or ``*.csv`` (read as above, and refused when
  unreadable), and its files with no suffix at all, such as a gunzipped export's ``000000``
  (read when their content is one of the above, otherwise skipped, e.g. the
  ``aws-logs-write-test`` object an export leaves in the bucket). Everything else is skipped and
  counted in one line per folder: files with another suffix; non-regular files (FIFOs, sockets,
  devices: never opened, so a FIFO without a writer cannot block the replay); symlinks to
  folders (not followed: no loops, no file read twice) and broken symlinks. A symlink to a file is
  read as that file. Hidden files and folders (names starting with ``.``) are skipped silently.
- ``-`` for standard input (at most once), recognised by content as a file is.

A path named on the command line is read whatever its name; a symlink is followed; a FIFO (a
pipe, such as bash's ``<(zcat export.gz)``) is opened without waiting for a writer (one that has
none reads as empty); a socket or device is refused, never opened.

Events arrive as users have them: wrapped values are unwrapped wherever they appear (a document,
an array element, a log message), recursively:

- ``aws logs filter-log-events`` / ``get-log-events`` output (``{"events": [{"timestamp",
  "message"}], "nextToken" ...}``, pages concatenated): each event's ``message``;
- Logs Insights results: ``aws logs get-query-results`` (``results`` rows of ``{"field",
  "value"}``) or a console JSON export (rows with ``@message``), and the CSV export above;
- SQS messages: ``aws sqs receive-message`` output (``Messages[].Body``), a Lambda SQS event
  (``Records[].body``), or one message.

A log message (in any of the log formats above) is the event's JSON text as an EventBridge rule
with a CloudWatch Logs target writes it, or a line a Lambda function logged: the runtime's text
format (``[INFO]\\t<time>\\t<request id>\\t<message>``, or ``<time>\\t<request id>\\tINFO\\t<message>``),
whose message is read when it is JSON, or Lambda's JSON log format and Powertools' (``{"level",
"message", "timestamp" ...}``: the ``message``, text or object). Lambda's platform lines
(``START``, ``END``, ``REPORT``, ``INIT_START`` ..., or ``platform.*`` records) and log lines of a
Lambda that hold no JSON are skipped and counted, one line per file.

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

Bad input is *refused* with a one-line message that names the file and the one line it starts on
and never quotes the content: a line that is not JSON (or a JSON Lines line cut short), a
document that is not an object or array, bytes that are not UTF-8, a gzip file that is corrupt or
cut short (what came before is kept), a file that is none of the formats above, and an event
EventBridge would refuse (:func:`oversize`: its PutEvents entry over
:data:`PUT_EVENTS_ENTRY_LIMIT`) or could not deliver to an SQS queue (over
:data:`SQS_MESSAGE_LIMIT`). By default the first refusal raises :class:`InputError`; with
``read_inputs(..., tolerant=True)`` (``batchpilot replay``) each is recorded
(:attr:`ReplayInput.refused`), the reader moves on to the next line that starts a document (the
next line of a ``.jsonl`` file, the next one starting with ``{`` or ``[`` of any other), and the
rest is read.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import gzip
import io
import itertools
import json
import os
import pickle
import re
import stat
import tempfile
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from pydantic_core import PydanticSerializationError, to_json

from batchpilot_local.clock import ClockError, ClockScenario, is_clock_scenario, parse_clock_scenario
from batchpilot_local.embedded_aws import EmbeddedAws, WorldError
from batchpilot_local.world import json_type

__all__ = [
    "PUT_EVENTS_ENTRY_LIMIT",
    "SCENARIO_KEYS",
    "SQS_MESSAGE_LIMIT",
    "InputError",
    "InputItem",
    "ItemSpool",
    "Packer",
    "ReplayInput",
    "World",
    "entry_size",
    "oversize",
    "parse_chunks",
    "parse_text",
    "read_inputs",
    "steps_of",
]

SCENARIO_KEYS: frozenset[str] = frozenset({"world", "events", "description", "name", "parameters"})
"""Keys a scenario object may have (``events`` is required)."""

PUT_EVENTS_ENTRY_LIMIT = 1_048_576
"""Bytes: the largest PutEvents entry EventBridge accepts, 1 MiB, measured as the EventBridge User
Guide's "Calculating PutEvents event entry size" says (see :func:`entry_size`). AWS raised it from
256 KB to 1 MB for event buses on 2026-01-29 (AWS Compute Blog, "More room to build: serverless
services now support payloads up to 1 MB"); an event over it never reaches a rule."""

SQS_MESSAGE_LIMIT = 1_048_576
"""Bytes: the largest SQS message body (Amazon SQS quotas: 1 MiB, the default ``MaximumMessageSize``
of the template's queues). EventBridge delivers each event to a function's queue as one message,
its whole JSON text, a few hundred bytes more than its PutEvents entry."""

_SUFFIXES = (".json", ".jsonl", ".ndjson", ".gz", ".csv")
"""Names a directory's files are read by (files with no suffix at all are read by content)."""
_JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")
_GZIP_MAGIC = b"\x1f\x8b"  # RFC 1952, section 2.3.1: ID1, ID2
_KEPT_REFUSALS = 1_000
"""Refusal messages a :class:`ReplayInput` keeps (the rest are only counted)."""
_LISTED_REFUSALS = 50
"""Refusal lines :meth:`ReplayInput.notices` shows (the rest are counted in one line)."""
_LISTED_PER_FILE = 5
"""Refusals of one file listed one by one (the rest are counted in one line per file)."""


class InputError(Exception):
    """Input that cannot be read: a missing path, invalid JSON, a value that is not an object or
    an array, a malformed scenario, an event EventBridge would refuse. The message is one line,
    names the file (and the one line the bad input starts on) and never quotes the content."""


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
    the items of a list (None: items are held as decoded).

    ``tolerant``: a refusal is recorded (:attr:`refused`, :attr:`refused_count`) and reading goes
    on; otherwise it raises :class:`InputError`. ``skipped`` holds one line per folder or file
    whose content was left out on purpose (files not read by name or type, Lambda platform lines).
    """

    items: list[InputItem] | ItemSpool = field(default_factory=list)
    worlds: list[World] = field(default_factory=list)
    packer: Packer | None = field(default_factory=Packer, repr=False, compare=False)
    tolerant: bool = False
    refused: list[str] = field(default_factory=list)
    """One-line messages of the input refused, in input order (the first :data:`_KEPT_REFUSALS`)."""
    refused_count: int = 0
    """How many pieces of input were refused (lines, documents, files, events)."""
    skipped: list[str] = field(default_factory=list)
    """One-line notes of what was skipped on purpose (see the module docstring)."""
    _file_skips: Counter[str] = field(default_factory=Counter, init=False, repr=False, compare=False)
    _file_refused: int = field(default=0, init=False, repr=False, compare=False)
    _file_hidden: int = field(default=0, init=False, repr=False, compare=False)
    _source_chars: int | None = field(default=None, init=False, repr=False, compare=False)

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

    def refuse(self, message: str, *, final: bool = False) -> None:
        """Refuse one piece of input, ``message`` (one line) saying which and why. Of one file's
        refusals the first :data:`_LISTED_PER_FILE` are kept, and a ``final`` one (the file could
        not be read on), the others counted in one line (see :meth:`_end_file`).

        Raises:
            InputError: ``message``, unless :attr:`tolerant`.
        """
        if not self.tolerant:
            raise InputError(message)
        self.refused_count += 1
        self._file_refused += 1
        if self._file_refused > _LISTED_PER_FILE and not final:
            self._file_hidden += 1
        elif len(self.refused) < _KEPT_REFUSALS:
            self.refused.append(message)

    def notices(self) -> list[str]:
        """What to tell the user before replaying, one line each: the refusals (the first
        :data:`_LISTED_REFUSALS`, then how many more), then the skip notes; when nothing was read,
        the skip notes are in a last line saying there is nothing to replay (an error)."""
        if not len(self.items) and self.refused_count == 1:
            return [self.nothing_to_replay()]  # one line: the refusal is the reason
        lines = [f"{message}; not replayed" for message in self.refused[:_LISTED_REFUSALS]]
        if len(self.refused) > _LISTED_REFUSALS:
            lines.append(f"... and more: {self.refused_count:,} refused in all")
        if len(self.items):
            return lines + self.skipped
        return [*lines, self.nothing_to_replay()]

    def nothing_to_replay(self) -> str:
        """Why there is nothing to replay, in one line (for a read that gave no items)."""
        if self.refused_count == 1 and self.refused:
            why = self.refused[0]
        elif self.refused_count:
            why = f"every input was refused ({self.refused_count:,}, listed above)"
        else:
            why = "no event input found"
        if self.skipped:
            why += f": {_cut('; '.join(self.skipped), 400)}"
        return f"nothing to replay: {why}"

    def refused_summary(self) -> str | None:
        """One line for the end of a replay when some input was refused (else None)."""
        if not self.refused_count:
            return None
        count = self.refused_count
        plural = "s" if count > 1 else ""
        return f"{count:,} input{plural} refused (listed before the replay); the rest was replayed"

    def _count_skip(self, what: str) -> None:
        self._file_skips[what] += 1

    def _end_file(self, label: str) -> None:
        """Turn the refusals and skips counted while reading one file into its lines."""
        if self._file_hidden and len(self.refused) < _KEPT_REFUSALS:
            self.refused.append(f"{label}: {self._file_hidden:,} more refused (not listed)")
        self._file_refused = self._file_hidden = 0
        if self._file_skips:
            parts = [_count(count, what, _PLURALS.get(what)) for what, count in self._file_skips.items()]
            self.skipped.append(f"{label}: skipped {' and '.join(parts)} (not events)")
            self._file_skips.clear()

    def close(self) -> None:
        """Delete the items' file, when they are spooled. Idempotent."""
        if isinstance(self.items, ItemSpool):
            self.items.close()


def _count(count: int, noun: str, plural: str | None = None) -> str:
    """``1 file``, ``2 files`` (``plural``: default ``noun`` + ``s``)."""
    return f"1 {noun}" if count == 1 else f"{count:,} {plural or noun + 's'}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_SPACE = re.compile(r"[ \t\n\r]*")
_NOT_UTF8 = re.compile("[\udc80-\udcff]")
"""What a byte that is not UTF-8 becomes when decoded with ``surrogateescape``."""


def _loads(text: str) -> Any:
    return _DECODER.decode(text)


def _json_reason(exc: Exception, within: str | None = None) -> str:
    """Why a JSON text is invalid, in a few words: the parser's message and where (the column in
    the file's line, or the character ``within`` a text a file holds: ``"the message"``); never
    the text itself."""
    if isinstance(exc, json.JSONDecodeError):
        if within is not None:
            return f"invalid JSON: {exc.msg} (character {exc.pos + 1} of {within})"
        return f"invalid JSON: {exc.msg} (column {exc.colno})"
    if isinstance(exc, RecursionError):
        return "invalid JSON: nested too deeply"
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"invalid JSON: {reason}"


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))  # a lone surrogate counts as the 3 bytes it takes


def _compact_size(value: Any) -> int | None:
    """Bytes of ``value`` as compact JSON (as EventBridge and SQS carry it), None when it cannot be
    written (nested deeper than Python's recursion allows)."""
    try:
        return len(to_json(value))  # pydantic-core's encoder: about four times json.dumps' speed
    except PydanticSerializationError:  # a lone surrogate, or deeper than its 255 levels
        try:
            return _utf8_size(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        except RecursionError:
            return None


def entry_size(event: Mapping[str, Any]) -> int:
    """Bytes of ``event`` as a PutEvents entry, as the EventBridge User Guide's "Calculating
    PutEvents event entry size" counts them: 14 for ``Time`` when the event has one, the UTF-8
    bytes of ``Source`` and ``DetailType``, of ``Detail`` (here its compact JSON text, the
    smallest an entry could carry) and of each ``Resources`` entry.

    ``event`` is an EventBridge event object (``source``, ``detail-type``, ``detail``, ``time``,
    ``resources``); fields that are missing or of another type count 0.
    """
    size = 14 if event.get("time") is not None else 0
    for key in ("source", "detail-type"):
        value = event.get(key)
        size += _utf8_size(value) if isinstance(value, str) else 0
    if event.get("detail") is not None:
        size += _compact_size(event["detail"]) or 0
    resources = event.get("resources")
    if isinstance(resources, list):
        size += sum(_utf8_size(r) for r in resources if isinstance(r, str))
    return size


def oversize(event: Any) -> str | None:
    """Why EventBridge would not bring ``event`` to a function, or None when it fits: its
    PutEvents entry (:func:`entry_size`) over :data:`PUT_EVENTS_ENTRY_LIMIT` (PutEvents refuses
    it), or its JSON text over :data:`SQS_MESSAGE_LIMIT` (EventBridge takes it but cannot deliver
    it to an SQS queue). Only objects with a string ``source`` and ``detail-type`` are measured;
    the replay reports anything else as not an event."""
    if not (
        isinstance(event, Mapping)
        and isinstance(event.get("source"), str)
        and isinstance(event.get("detail-type"), str)
    ):
        return None
    whole = _compact_size(event)
    if whole is None or whole <= SQS_MESSAGE_LIMIT:
        return None  # an entry is never larger than its event's whole JSON text
    entry = entry_size(event)
    if entry > PUT_EVENTS_ENTRY_LIMIT:
        return (
            f"event too large: {entry:,} bytes as a PutEvents entry, over EventBridge's "
            f"{PUT_EVENTS_ENTRY_LIMIT:,}-byte (1 MiB) entry limit"
        )
    return (
        f"event too large: {whole:,} bytes of JSON, over SQS's {SQS_MESSAGE_LIMIT:,}-byte (1 MiB) "
        "message limit: EventBridge would take it but could not deliver it to a function's queue"
    )


# ------------------------------------------------------------------------------- wrappers
# Keys of `aws logs filter-log-events` and `aws logs get-log-events` output beside `events`.
_LOGS_KEYS = frozenset({"nextToken", "searchedLogStreams", "nextForwardToken", "nextBackwardToken"})
_MAX_WRAPPING = 4  # a log line holding an SQS body holding an event is 2 levels: 4 is plenty

_PLATFORM = "Lambda platform line"  # START, END, REPORT ...
_NO_JSON = "Lambda log line holding no JSON"
_PLURALS = {_PLATFORM: "Lambda platform lines", _NO_JSON: "Lambda log lines holding no JSON"}
# Lambda's own lines in a function's log stream (Lambda Developer Guide, "Using CloudWatch Logs
# with Lambda": START, END and REPORT per invocation; INIT_START, EXTENSION, TELEMETRY, the
# RESTORE_ lines of SnapStart).
_PLATFORM_LINE = re.compile(
    r"(?:START|END|REPORT) RequestId: |(?:INIT_START|INIT_REPORT|INIT_RUNTIME_DONE|RESTORE_START"
    r"|RESTORE_REPORT|RESTORE_RUNTIME_DONE|EXTENSION|TELEMETRY)\b"
)
# A line of a Lambda runtime's text log format: the Python runtime's ``[LEVEL]\t<time>\t<request
# id>\t<message>`` (no request id outside an invocation; ``[ERROR] Runtime...`` lines have neither),
# or ``<time>\t<request id>\t<LEVEL>\t<message>`` (Node.js, and Lambda's text format elsewhere).
_LAMBDA_TEXT_LINE = re.compile(
    r"(?:\[(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL)\][\t ]"
    r"(?:[^\t\n]+\t)?(?:[0-9a-fA-F-]{36}\t)?"
    r"|\d{4}-\d\d-\d\dT[^\t\n]+\t[0-9a-fA-F-]{36}\t[A-Z]+\t)(?P<message>.*)",
    re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class _Message:
    """What one log message holds: a JSON ``value``, a reason to ``skip`` it, or a ``problem``."""

    value: Any = None
    skip: str | None = None
    problem: str | None = None


def _lambda_record(value: Any) -> Any:
    """The message of a record of Lambda's JSON log format (``{"timestamp", "level", "message",
    "requestId"}``) or of Powertools' logger (``{"level", "message", "timestamp", ...}``, the
    message text or an object); :data:`_PLATFORM` for a Lambda platform record (``{"time",
    "type": "platform.start", "record"}``); None for anything else (an event has a ``detail-type``)."""
    if not isinstance(value, Mapping) or "detail-type" in value:
        return None
    kind = value.get("type")
    if isinstance(kind, str) and kind.startswith("platform.") and "time" in value:
        return _PLATFORM
    if "message" in value and "level" in value and ({"timestamp", "time", "requestId"} & value.keys()):
        return value["message"]
    return None


def _log_message(text: str, *, from_lambda: bool = False, depth: int = 0) -> _Message:
    """Read one log message (see the module docstring): the event's JSON text as an EventBridge
    rule's CloudWatch Logs target writes it, or a line a Lambda function logged.

    ``from_lambda``: the text is a Lambda log line's message, so text that holds no JSON is
    ordinary logging (skipped), not a damaged event (a problem).
    """
    stripped = text.strip()
    line = _LAMBDA_TEXT_LINE.match(text.lstrip("\r\n"))  # before JSON: "[INFO]\t..." starts with "["
    if line is not None and depth < 2:
        return _log_message(line["message"], from_lambda=True, depth=depth + 1)
    if stripped[:1] in ("{", "["):
        try:
            value = _loads(text)
        except (ValueError, RecursionError) as exc:
            hint = ": a Python dict (logged with repr, not json.dumps)" if stripped.startswith("{'") else ""
            return _Message(problem=_json_reason(exc, "the message") + hint)
        inner = _lambda_record(value)
        if inner is _PLATFORM:
            return _Message(skip=_PLATFORM)
        if inner is None:
            return _Message(value=value)
        if isinstance(inner, str) and depth < 2:
            return _log_message(inner, from_lambda=True, depth=depth + 1)
        return _Message(value=inner) if isinstance(inner, Mapping | list) else _Message(skip=_NO_JSON)
    if _PLATFORM_LINE.match(stripped):
        return _Message(skip=_PLATFORM)
    if from_lambda:
        return _Message(skip=_NO_JSON)
    if not stripped:
        return _Message(problem="empty log message")
    return _Message(problem="not JSON: expected an event's JSON text or a Lambda log line holding one")


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


def _wrapped(value: Any) -> list[tuple[str, str, bool]] | None:
    """The texts wrapped in ``value`` as ``(where, text, is_log_message)``, or None when it wraps
    nothing.

    Understood: CloudWatch Logs ``filter-log-events``/``get-log-events`` output (each event's
    ``message``), Logs Insights results (``get-query-results``' ``results`` or a console export's
    rows: ``@message``): log messages (see :func:`_log_message`); SQS messages (``receive-message``
    output ``{"Messages": [...]}``, a Lambda SQS event ``{"Records": [...]}``, or one message) whose
    body is the event's JSON text.
    """
    if isinstance(value, Mapping):
        if _is_log_events(value):
            return [
                (f"events[{i}].message", str(e.get("message")), True) for i, e in enumerate(value["events"])
            ]
        results = value.get("results")
        if isinstance(results, list) and "detail-type" not in value and "status" in value:
            rows = [(i, _insights_message(row)) for i, row in enumerate(results)]
            return [(f"results[{i}].@message", text, True) for i, text in rows if text is not None]
        for key in ("Messages", "Records"):
            messages = value.get(key)
            if isinstance(messages, list) and messages and "detail-type" not in value:
                bodies = [(i, _sqs_body(m, record=key == "Records")) for i, m in enumerate(messages)]
                if all(body is not None for _, body in bodies):
                    return [(f"{key}[{i}].body", str(body), False) for i, body in bodies]
        body = _sqs_body(value)
        if body is not None:
            return [("body", body, False)]
        message = _insights_message(value)
        if message is not None and set(value) <= {"@timestamp", "@message", "@logStream", "@log", "@ptr"}:
            return [("@message", message, True)]
        return None
    if isinstance(value, list) and value and all(_insights_message(row) is not None for row in value):
        return [(f"[{i}].@message", str(_insights_message(row)), True) for i, row in enumerate(value)]
    return None


def _unwrap(
    value: Any, origin: str, label: str, out: ReplayInput, depth: int = 0
) -> list[tuple[Any, str, str]] | None:
    """The values wrapped in ``value`` (see :func:`_wrapped`), unwrapped recursively, as
    ``(value, origin, label)``; None when ``value`` wraps nothing. A wrapped text that cannot be
    read is refused (``out.refuse``, naming where it is) and the others are still taken; a log
    message that is skipped on purpose is counted."""
    texts = _wrapped(value) if depth < _MAX_WRAPPING else None
    if texts is None:
        return None
    found: list[tuple[Any, str, str]] = []
    for where, text, is_log in texts:
        inner_origin, inner_label = f"{origin} {where}", f"{label}: {where}"
        if is_log:
            message = _log_message(text)
            if message.skip is not None:
                out._count_skip(message.skip)
                continue
            if message.problem is not None:
                out.refuse(f"{inner_label}: {message.problem}")
                continue
            inner = message.value
        else:
            try:
                inner = _loads(text)
            except (ValueError, RecursionError) as exc:
                out.refuse(f"{inner_label}: {_json_reason(exc, 'the body')}")
                continue
        deeper = _unwrap(inner, inner_origin, inner_label, out, depth + 1)
        found.extend(deeper if deeper is not None else [(inner, inner_origin, inner_label)])
    return found


def _add_item(value: Any, origin: str, label: str, out: ReplayInput, scope: str | None = None) -> None:
    """Add one input item, or refuse it when it is an event EventBridge would not deliver
    (:func:`oversize`)."""
    # Nothing in a document is larger than 5 bytes of compact JSON per character of its text
    # (UTF-8 takes at most 4 bytes a character; a number written anew at most 4.5 times its text):
    # below that bound an event is not measured.
    bound = out._source_chars
    problem = oversize(value) if bound is None or bound * 5 > SQS_MESSAGE_LIMIT else None
    if problem is not None:
        out.refuse(f"{label}: {problem}")
        return
    out.items.append(_item(value, origin, out, scope))


def _add_top_level(value: Any, origin: str, out: ReplayInput, label: str | None = None) -> None:
    """Add one top-level JSON value (a whole file, one of several concatenated documents, or one
    log message).

    ``origin`` names the items; ``label`` (default ``origin``) starts refusal messages.

    Raises:
        InputError: the value as a whole cannot be read (not an object or array, a malformed
            scenario); what it wraps is refused piece by piece through ``out``.
    """
    label = label or origin
    unwrapped = _unwrap(value, origin, label, out)
    if unwrapped is not None:
        for inner, where, inner_label in unwrapped:
            if isinstance(inner, list):
                for i, v in enumerate(inner):
                    _add_item(v, f"{where}[{i}]", f"{inner_label}[{i}]", out)
            else:
                _add_item(inner, where, inner_label, out)
        return
    if isinstance(value, list):
        for i, element in enumerate(value):
            inner_items = _unwrap(element, f"{origin}[{i}]", f"{label}[{i}]", out)
            if inner_items is None:
                _add_item(element, f"{origin}[{i}]", f"{label}[{i}]", out)
            else:
                for v, where, inner_label in inner_items:
                    _add_item(v, where, inner_label, out)
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
    _add_item(value, origin, label, out)


def _add_value(value: Any, origin: str, label: str, out: ReplayInput, chars: int | None = None) -> None:
    """:func:`_add_top_level`, refusing (not raising) what cannot be read as a whole; ``chars``:
    the length of the text ``value`` was decoded from, when known."""
    out._source_chars = chars
    try:
        _add_top_level(value, origin, out, label)
    except InputError as exc:
        out.refuse(str(exc))
    finally:
        out._source_chars = None


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
    for i, event in enumerate(events):
        _add_item(event, f"{origin} events[{i}]", f"{label}: events[{i}]", out, scope=origin)


# -------------------------------------------------------------------------------- reading
_CHUNK = 1 << 20
"""Characters read from a file at a time: documents are decoded from a window of the text, so a
large file is never held whole (one document is: a JSON value is decoded at once)."""
_TAIL = 16
"""An error this close to the end of the text read so far may be the text's end, not the
document's (``tru`` of ``true``, a ``-`` of a number): more is read before it is reported."""
_SNIFF = 64 * 1024
"""Characters of a text's first line looked at, at most, to tell its format."""
_MAX_MESSAGE = 8 * SQS_MESSAGE_LIMIT
"""Characters one log record or CSV field may hold; past it no event could fit, so it is refused
(and the reader does not hold an unbounded record of a damaged file)."""


class _StreamError(Exception):
    """The bytes of a file stopped being readable (corrupt gzip data, an I/O error); the message
    says why in a few words."""


@dataclass(frozen=True, slots=True)
class _Bad:
    """A document that cannot be read: the one ``line`` to name and why (``reason``)."""

    line: int
    reason: str
    final: bool = False


class _Prepended(io.RawIOBase):
    """``head`` (bytes already read from ``rest``) followed by the rest of ``rest``."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._head:
            taken = self._head[: len(view)]
            self._head = self._head[len(taken) :]
            view[: len(taken)] = taken
            return len(taken)
        data = self._rest.read(len(view))
        view[: len(data)] = data
        return len(data)


def _text_of(stream: BinaryIO) -> Iterator[str]:
    """The text of ``stream``, a window at a time: gzip data (by its magic bytes, whatever the
    file's name) decompressed first, then UTF-8 (a byte order mark dropped; a byte that is not
    UTF-8 becomes a lone surrogate, ``surrogateescape``, refused with the document that holds it).

    Raises:
        _StreamError: the gzip data is corrupt or cut short, or the stream cannot be read.
    """
    head = stream.read(2)
    source: BinaryIO | gzip.GzipFile = stream
    compressed = head == _GZIP_MAGIC
    if compressed:
        source = gzip.GzipFile(fileobj=io.BufferedReader(_Prepended(head, stream)), mode="rb")
    decoder = codecs.getincrementaldecoder("utf-8-sig")("surrogateescape")
    first = not compressed and head
    # read1: what one step decompressed, so the text before damage arrives before the error does
    read = source.read1 if isinstance(source, gzip.GzipFile) else source.read
    while True:
        try:
            data = read(_CHUNK)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            reason = str(exc).split(":")[0] if str(exc) else type(exc).__name__
            raise _StreamError(f"gzip data corrupt or cut short ({reason})") from None
        except OSError as exc:
            raise _StreamError(f"cannot read: {exc.strerror or type(exc).__name__}") from None
        if first:
            data, first = head + data, False
        text = decoder.decode(data, final=not data)
        if text:
            yield text
        if not data:
            return


def _utf8_clean(text: str) -> bool:
    """``text`` holds no lone surrogate (no byte that was not UTF-8): the fast test, in C."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _not_utf8(text: str, start: int, end: int) -> tuple[int, int] | None:
    """``(lines into the span, column)`` of the first byte that was not UTF-8 in ``text[start:end]``."""
    found = _NOT_UTF8.search(text, start, end)
    if found is None:
        return None
    at = found.start()
    return text.count("\n", start, at), at - (text.rfind("\n", 0, at) + 1) + 1


def _documents(chunks: Iterable[str], *, json_lines: bool = False) -> Iterator[tuple[Any, int, int] | _Bad]:
    """Every JSON document in the text ``chunks`` make, one after another (JSON Lines,
    concatenated pretty-printed objects, or a mix), as ``(value, line it starts on, length in
    characters)``, or a :class:`_Bad` for one that cannot be read; read and decoded one at a time
    as they are taken, so only a window of the text is held.

    After a bad document, reading goes on at the next line that starts one: any next line with
    ``json_lines`` (a ``.jsonl`` file), else the next line starting with ``{`` or ``[``. The
    :class:`_Bad` names one line: where the document starts, or, for a document of several lines
    that breaks before its end, where it breaks. A :class:`_StreamError` ends the documents with a
    last :class:`_Bad`.
    """
    starts = re.compile(r"^(?=[^\s])" if json_lines else r"^(?=[\[{])", re.MULTILINE)
    source = iter(chunks)
    text = ""
    base = 1  # the line text[0] is on: text is only ever cut at the start of a line
    counted, line = 0, 1  # line is the line of text[counted]
    position = 0
    eof = False
    not_utf8 = False  # whether a chunk held a byte that was not UTF-8 (most files: never)

    def more(at_least: int = 1) -> bool:
        """Read on until ``at_least`` characters follow ``position`` (or the text ends), first
        dropping the whole lines before ``position``; False when nothing more was read."""
        nonlocal text, base, counted, line, position, eof, not_utf8
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
            not_utf8 = not_utf8 or not _utf8_clean(chunk)
        text += "".join(added)
        return bool(added)

    def resume(after: int) -> None:
        """Move ``position`` to the first line after the one holding ``text[after]`` that starts a
        document (see ``starts``), or to the end of the text."""
        nonlocal position
        newline = text.find("\n", after)
        while newline < 0:  # the line goes on past the window
            position = len(text)
            if not more():
                return
            newline = text.find("\n", position)
        position = newline + 1
        while True:
            found = starts.search(text, position)
            if found is not None:
                position = found.start()
                return
            position = text.rfind("\n", position) + 1 or position  # keep the last, unfinished line
            if not more(len(text) - position + 1):
                position = len(text)
                return

    try:
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
                at_end = exc.pos >= len(text) - _TAIL or exc.msg.startswith("Unterminated string")
                # Twice as much text each time: a large document is decoded a few times, not once
                # per chunk. Decoded again after more() even when the text ended: it may have cut
                # the lines before the document, and exc's offsets are the old text's.
                if at_end and not eof:
                    more(2 * (len(text) - position))
                    continue
                reason, at = _bad_document(text, position, exc, starts)
                bad = _not_utf8(text, position, exc.pos + 1) if not_utf8 else None
                if bad is not None:
                    yield _Bad(line + bad[0], f"not UTF-8 text (column {bad[1]})")
                else:
                    yield _Bad(line + text.count("\n", position, at), reason)
                resume(at)
                continue
            except (ValueError, RecursionError) as exc:
                yield _Bad(line, _json_reason(exc))
                resume(position)
                continue
            if end == len(text) and not eof:  # a number may go on: decode again with more text
                more(len(text) - position + 1)
                continue
            bad = _not_utf8(text, position, end) if not_utf8 else None
            yield (
                _Bad(line + bad[0], f"not UTF-8 text (column {bad[1]})")
                if bad
                else (value, line, end - position)
            )
            position = end
    except _StreamError as exc:
        line += text.count("\n", counted, position)
        yield _Bad(line, f"{exc}: the rest of the file is not read", final=True)


def _bad_document(
    text: str, start: int, exc: json.JSONDecodeError, starts: re.Pattern[str]
) -> tuple[str, int]:
    """Why the document at ``text[start]`` is invalid (``exc``, raised at ``exc.pos``), and an
    offset on the one line to name, after which the next document is looked for."""
    line_end = text.find("\n", start)
    if line_end < 0:
        line_end = len(text)
    if exc.pos < line_end:  # it breaks on its first line
        return f"invalid JSON: {exc.msg} (column {exc.colno})", start
    if exc.pos == line_end or starts.search(text, line_end + 1, exc.pos + 1) or exc.pos >= len(text):
        # Its line ended while it was open, and the parser ran into the next document or the end
        # of the text: a line cut short (a JSON Lines line, or a download that stopped).
        return "invalid JSON: cut short: the document starting on this line never closes", start
    # A document of several lines (pretty-printed) that breaks inside: name where it breaks.
    return f"invalid JSON: {exc.msg} (column {exc.colno})", exc.pos


def _lines(chunks: Iterable[str]) -> Iterator[str]:
    """The lines of the text ``chunks`` make, each with its ``\\n`` (the last one may have none).
    Only ``\\n`` ends a line: a CSV field or a JSON string may hold other line separators."""
    pending = ""
    for chunk in chunks:
        pending += chunk
        start = 0
        while (newline := pending.find("\n", start)) >= 0:
            yield pending[start : newline + 1]
            start = newline + 1
        pending = pending[start:]
    if pending:
        yield pending


# A line of a CloudWatch Logs export to S3: the log event's timestamp (ISO 8601, UTC), one space,
# its message.
_EXPORT_LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) ")


def _add_message(text: str, record_line: int, origin: str, out: ReplayInput) -> None:
    """Add what one log message of a file holds (see :func:`_log_message`); ``record_line`` is
    the line it starts on."""
    label = f"{origin}: line {record_line}"
    bad = None if _utf8_clean(text) else _not_utf8(text, 0, len(text))
    if bad is not None:
        out.refuse(f"{origin}: line {record_line + bad[0]}: not UTF-8 text")
        return
    message = _log_message(text)
    if message.skip is not None:
        out._count_skip(message.skip)
    elif message.problem is not None:
        out.refuse(f"{label}: {message.problem}")
    else:
        _add_value(message.value, f"{origin}:{record_line}", label, out, len(text))


def _parse_log_export(chunks: Iterable[str], origin: str, out: ReplayInput) -> None:
    """A CloudWatch Logs export to S3 (``create-export-task``): lines of ``<timestamp> <message>``;
    a line without a timestamp continues the message before it (a message of several lines)."""
    lineno = record_line = 0
    parts: list[str] = []
    size = 0
    try:
        for raw in _lines(chunks):
            lineno += 1
            text = raw.rstrip("\n").rstrip("\r")
            stamp = _EXPORT_LINE.match(text)
            if stamp is not None:
                if parts:
                    _add_message("\n".join(parts), record_line, origin, out)
                record_line, parts, size = lineno, [text[stamp.end() :]], len(text)
            elif parts:
                size += len(text) + 1
                if size > _MAX_MESSAGE:  # no event is this long: stop holding it
                    out.refuse(f"{origin}: line {record_line}: log message over {_MAX_MESSAGE:,} characters")
                    parts = []
                else:
                    parts.append(text)
            elif record_line == 0 and text.strip():
                out.refuse(f"{origin}: line {lineno}: not a '<timestamp> <message>' line of a Logs export")
        if parts:
            _add_message("\n".join(parts), record_line, origin, out)
    except _StreamError as exc:
        if parts:  # the lines read in full before the damage
            _add_message("\n".join(parts), record_line, origin, out)
        out.refuse(f"{origin}: line {lineno + 1}: {exc}: the rest of the file is not read", final=True)


@contextlib.contextmanager
def _csv_field_limit(limit: int) -> Iterator[None]:
    """Let a CSV field hold ``limit`` characters (the csv module's default, 131,072, is less than
    an event may be) while reading, then restore the limit."""
    saved = csv.field_size_limit(limit)
    try:
        yield
    finally:
        csv.field_size_limit(saved)


def _csv_header(line: str) -> list[str]:
    try:
        return [name.strip() for name in next(csv.reader([line]), [])]
    except csv.Error:
        return []


def _parse_insights_csv(chunks: Iterable[str], origin: str, out: ReplayInput) -> None:
    """A Logs Insights export in CSV (the console's *Download table (CSV)*): a header row with an
    ``@message`` column, then one row per log event, its ``@message`` a log message."""
    reader = csv.reader(_lines(chunks), strict=True)
    header: list[str] | None = None
    column = -1
    with _csv_field_limit(_MAX_MESSAGE):
        while True:
            first = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                out.refuse(f"{origin}: line {first}: not valid CSV: {exc}")
                continue
            except _StreamError as exc:
                out.refuse(f"{origin}: line {first}: {exc}: the rest of the file is not read", final=True)
                return
            if not row:
                continue  # a blank line
            if header is None:
                header = [name.strip() for name in row]
                column = header.index("@message")  # the format was told by this header
                continue
            if len(row) != len(header):
                out.refuse(
                    f"{origin}: line {first}: {_count(len(row), 'CSV field')}, the header names {len(header)}"
                )
                continue
            _add_message(row[column], first, origin, out)


def _format_of(head: str) -> str:
    """The format of a text from its start: ``json``, ``logs`` (a Logs export), ``csv`` (a Logs
    Insights CSV export), ``scalar`` (text starting like a JSON value that is not an object or
    array), ``empty`` or ``unknown``."""
    text = head.lstrip(" \t\r\n")
    if not text:
        return "empty"
    if text[0] in "{[":
        return "json"
    if _EXPORT_LINE.match(text):
        return "logs"
    if "@message" in _csv_header(text.split("\n", 1)[0]):
        return "csv"
    if text[0] in '"-0123456789tfn':
        return "scalar"
    return "unknown"


_NOT_INPUT = (
    "not event input: expected JSON, JSON Lines, a CloudWatch Logs export ('<timestamp> <message>' "
    "lines) or a Logs Insights CSV export (an @message column), gzip-compressed or not"
)


def parse_text(text: str, origin: str, out: ReplayInput, *, json_lines: bool = False) -> None:
    """Parse one text (a file's or stdin's) into ``out``: see :func:`parse_chunks`."""
    parse_chunks([text], origin, out, json_lines=json_lines)


def parse_chunks(
    chunks: Iterable[str],
    origin: str,
    out: ReplayInput,
    *,
    json_lines: bool = False,
    by_content: bool = False,
) -> bool:
    """Parse one file's (or stdin's) text, given as consecutive pieces, into ``out``.

    The format is told from the text's start (see the module docstring): JSON (one document or
    several one after another: JSON Lines, concatenated pretty-printed objects, pages of ``aws logs
    filter-log-events`` output), a CloudWatch Logs export, or a Logs Insights CSV export. Several
    documents, log records and CSV rows are named ``origin:line`` (the line each starts on);
    ``json_lines`` (a ``.jsonl`` file) names a single document that way too, and an empty text is
    then no error. Wrappers are unwrapped (see :func:`_wrapped`).

    ``by_content``: the text was found in a folder under no suffix, so one that is none of the
    formats is not input (False is returned, nothing is refused).

    Returns:
        False when ``by_content`` and the text is none of the formats; True otherwise.

    Raises:
        InputError: what cannot be read (see :meth:`ReplayInput.refuse`), unless ``out`` is
            tolerant: invalid JSON, an empty document, a top-level value that is neither an object
            nor an array, text in none of the formats.
    """
    source = iter(chunks)
    head = ""
    try:
        for chunk in source:
            head += chunk
            started = head.lstrip(" \t\r\n")
            if started and ("\n" in started or len(started) >= _SNIFF):
                break
    except _StreamError as exc:
        out.refuse(f"{origin}: {exc}", final=True)
        return True
    kind = _format_of(head)
    if by_content and kind not in ("json", "logs", "csv"):
        return False
    text = itertools.chain([head], source)
    if kind == "logs":
        _parse_log_export(text, origin, out)
    elif kind == "csv":
        _parse_insights_csv(text, origin, out)
    elif kind == "unknown":
        bad = _not_utf8(head, 0, len(head))
        out.refuse(f"{origin}: {'not UTF-8 text: ' if bad else ''}{_NOT_INPUT}")
    elif kind == "empty" and not json_lines:
        out.refuse(f"{origin}: empty input: expected a JSON object, an array or JSON Lines")
    elif kind != "empty":
        _parse_json(text, origin, out, json_lines=json_lines)
    return True


def _parse_json(chunks: Iterable[str], origin: str, out: ReplayInput, *, json_lines: bool) -> None:
    documents = _documents(chunks, json_lines=json_lines)
    first = next(documents, None)
    if first is None:
        return
    second = next(documents, None)
    if second is None and not json_lines and not isinstance(first, _Bad):
        _add_value(first[0], origin, origin, out, first[2])
        return
    for document in itertools.chain([first], [second] if second is not None else [], documents):
        if isinstance(document, _Bad):
            out.refuse(f"{origin}: line {document.line}: {document.reason}", final=document.final)
        else:
            value, line, chars = document
            _add_value(value, f"{origin}:{line}", f"{origin}: line {line}", out, chars)


# ---------------------------------------------------------------------------------- paths
def _kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in a word or two (for messages)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _json_lines_name(name: str) -> bool:
    name = name.lower().removesuffix(".gz")
    return name.endswith(_JSON_LINES_SUFFIXES)


_FOLDER_PLURALS = {
    "symlink to a folder (not followed)": "symlinks to folders (not followed)",
    **{
        f"{kind} (not a regular file: not opened)": f"{kind}s (not regular files: not opened)"
        for kind in ("FIFO", "socket", "device")
    },
}


@dataclass
class _Folder:
    """What a directory holds for the replay: the files to read (with ``by_content``: found under
    no suffix), and what is skipped, counted by reason."""

    files: list[tuple[Path, bool]] = field(default_factory=list)
    suffixes: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    unrecognised: list[str] = field(default_factory=list)

    def note(self, root: str) -> str | None:
        """One line: what in ``root`` was skipped, and why (None when everything was)."""
        parts = []
        if self.suffixes:
            names = ", ".join(f".{suffix}" for suffix, _ in self.suffixes.most_common(4))
            more = ", ..." if len(self.suffixes) > 4 else ""
            count = self.suffixes.total()
            parts.append(f"{_count(count, 'file')} whose suffix is not an event format ({names}{more})")
        if self.unrecognised:
            count = len(self.unrecognised)
            names = ", ".join(self.unrecognised[:3]) + (", ..." if count > 3 else "")
            parts.append(f"{_count(count, 'file')} without a suffix and not event input ({names})")
        parts.extend(_count(count, what, _FOLDER_PLURALS.get(what)) for what, count in self.skipped.items())
        if not parts:
            return None if self.files else f"{root}: no files to read"
        return f"{root}: skipped {'; '.join(parts)}"


def _directory(root: Path, out: ReplayInput) -> _Folder:
    """The files of ``root`` to read, in sorted path order (compared folder by folder), and what
    is skipped (see the module docstring); a folder that cannot be listed is refused."""
    folder = _Folder()

    def unlisted(exc: OSError) -> None:
        out.refuse(f"{exc.filename}: cannot list the folder: {exc.strerror or type(exc).__name__}")

    for parent, dirs, files in os.walk(root, onerror=unlisted, followlinks=False):
        kept = []
        for name in dirs:
            if name.startswith("."):
                continue
            if os.path.islink(os.path.join(parent, name)):
                folder.skipped["symlink to a folder (not followed)"] += 1
            else:
                kept.append(name)
        dirs[:] = kept
        for name in files:
            if name.startswith("."):
                continue
            path = Path(parent) / name
            try:
                mode = path.stat().st_mode  # follows a symlink: a link to a file is that file
            except FileNotFoundError:
                folder.skipped["broken symlink"] += 1
                continue
            except OSError as exc:
                out.refuse(f"{path}: cannot read: {exc.strerror or type(exc).__name__}")
                continue
            if not stat.S_ISREG(mode):
                folder.skipped[f"{_kind_of(mode).removeprefix('a ')} (not a regular file: not opened)"] += 1
                continue
            suffix = name.rsplit(".", 1)[1].lower() if "." in name else ""
            if f".{suffix}" in _SUFFIXES:
                folder.files.append((path, False))
            elif not suffix:
                folder.files.append((path, True))
            else:
                folder.suffixes[suffix] += 1
    folder.files.sort(key=lambda entry: entry[0].relative_to(root).parts)
    return folder


def _open(path: Path, mode: int) -> BinaryIO:
    """``path`` opened for reading; a FIFO without waiting for a writer (``O_NONBLOCK``, then
    blocking reads: with no writer it reads as empty)."""
    if stat.S_ISFIFO(mode):
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    return path.open("rb")


def _read_file(path: Path, label: str, out: ReplayInput, mode: int, *, by_content: bool = False) -> bool:
    """Read one file into ``out`` (see :func:`parse_chunks`); False when ``by_content`` and it is
    none of the formats."""
    try:
        stream = _open(path, mode)
    except OSError as exc:
        out.refuse(f"{label}: cannot read: {exc.strerror or type(exc).__name__}")
        return True
    try:
        with stream:
            return parse_chunks(
                _text_of(stream),
                label,
                out,
                json_lines=_json_lines_name(path.name),
                by_content=by_content,
            )
    except OSError as exc:  # closing failed
        out.refuse(f"{label}: cannot read: {exc.strerror or type(exc).__name__}")
        return True
    finally:
        out._end_file(label)


def read_inputs(
    paths: Sequence[str], stdin: TextIO | None = None, *, spool: bool = False, tolerant: bool = False
) -> ReplayInput:
    """Read every path (see the module docstring) into one :class:`ReplayInput`, in order.

    Each file (and stdin) is read a window at a time (:data:`_CHUNK`), never whole; what is held
    afterwards is the items: deflated in memory (:class:`Packer`), or, with ``spool``, in a
    temporary file (:class:`ItemSpool`), so memory does not grow with the input.

    Args:
        paths: file paths, directory paths, or ``-`` for ``stdin``.
        stdin: the stream ``-`` reads (default ``sys.stdin``).
        spool: hold the items in an :class:`ItemSpool` (close it, or the :class:`ReplayInput`,
            when done) instead of a list.
        tolerant: record each piece of input that cannot be read (:attr:`ReplayInput.refused`)
            and read on, instead of raising at the first.

    Raises:
        InputError: a path does not exist, ``-`` is given twice; without ``tolerant``, also the
            first piece of input that cannot be read (see :func:`parse_chunks`).
    """
    out = (
        ReplayInput(ItemSpool(), packer=None, tolerant=tolerant) if spool else ReplayInput(tolerant=tolerant)
    )
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
            chunks = _text_of(buffer) if buffer is not None else iter(partial(stream.read, _CHUNK), "")
            parse_chunks(chunks, "<stdin>", out)
            out._end_file("<stdin>")
            continue
        path = Path(raw)
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            broken = " (a broken symlink)" if path.is_symlink() else ""
            raise InputError(f"{raw}: no such file or directory{broken}") from None
        except OSError as exc:
            out.refuse(f"{raw}: cannot read: {exc.strerror or type(exc).__name__}")
            continue
        if stat.S_ISDIR(mode):
            folder = _directory(path, out)
            for file, by_content in folder.files:
                try:
                    file_mode = file.stat().st_mode
                except OSError as exc:
                    out.refuse(f"{file}: cannot read: {exc.strerror or type(exc).__name__}")
                    continue
                if not _read_file(file, str(file), out, file_mode, by_content=by_content):
                    folder.unrecognised.append(file.name)
            note = folder.note(raw)
            if note is not None:
                out.skipped.append(note)
        elif stat.S_ISREG(mode) or stat.S_ISFIFO(mode):
            _read_file(path, raw, out, mode)
        else:
            out.refuse(f"{raw}: {_kind_of(mode)}, not a regular file: not read")
