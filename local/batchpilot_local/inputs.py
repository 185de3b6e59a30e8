"""Reading replay input: event files, arrays, JSON Lines, directories, stdin and scenarios.

Each path given to ``batchpilot replay`` is one of:

- a file holding one JSON event object, a JSON array of events, or JSON Lines (one JSON value per
  line; files named ``*.jsonl`` are always read as JSON Lines, other files when they are not a
  single JSON document);
- a directory, read recursively: its ``*.json`` and ``*.jsonl`` files in sorted path order
  (compared folder by folder; hidden files and folders, whose names start with ``.``, and all
  other files are skipped);
- ``-`` for standard input (at most once).

A top-level object with an ``events`` list and no ``detail-type`` is a *scenario*:
``{"world": {...}, "events": [...]}``; its events are replayed and its world is handed to
:meth:`batchpilot_local.embedded_aws.EmbeddedAws.seed`. One with ``ticks`` is a *clock scenario*
(:mod:`batchpilot_local.clock`): its item is a ``ClockScenario`` that the replay runs tick by tick.

Any unreadable input raises :class:`InputError`, whose one-line message names the file (and the
line, for JSON Lines) and never quotes the content.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from batchpilot_local.clock import ClockError, is_clock_scenario, parse_clock_scenario
from batchpilot_local.embedded_aws import EmbeddedAws, WorldError
from batchpilot_local.world import json_type

__all__ = ["SCENARIO_KEYS", "InputError", "InputItem", "ReplayInput", "World", "read_inputs"]

SCENARIO_KEYS: frozenset[str] = frozenset({"world", "events", "description", "name"})
"""Keys a scenario object may have (``events`` is required)."""

_SUFFIXES = (".json", ".jsonl")


class InputError(Exception):
    """Input that cannot be read: a missing path, invalid JSON, a value that is not an object or
    an array, a malformed scenario. The message is one line and names the file."""


@dataclass(frozen=True)
class InputItem:
    """One input item, meant to be an EventBridge event (it is not checked here).

    Attributes:
        value: the decoded JSON value.
        origin: where it came from: ``path`` (a single event), ``path[i]`` (array element,
            0-based), ``path:line`` (JSON Lines, 1-based), ``path:line[i]``; ``<stdin>`` for stdin.
        scope: the scenario it belongs to (the scenario's origin, which is also its
            :class:`World`'s), or None for a plain event; the replay gives each scenario an
            embedded AWS of its own.
    """

    value: Any
    origin: str
    scope: str | None = None


@dataclass(frozen=True)
class World:
    """A scenario's ``world`` object and the file it came from."""

    data: dict[str, Any]
    origin: str


@dataclass
class ReplayInput:
    """Everything read from the paths: the items in input order, and the scenario worlds."""

    items: list[InputItem] = field(default_factory=list)
    worlds: list[World] = field(default_factory=list)

    @property
    def events(self) -> list[Any]:
        """The items' values, in order."""
        return [item.value for item in self.items]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


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


def _add_top_level(value: Any, origin: str, out: ReplayInput, label: str | None = None) -> None:
    """Add one top-level JSON value (a whole file, or one JSON Lines line).

    ``origin`` names the items; ``label`` (default ``origin``) starts error messages.
    """
    label = label or origin
    if isinstance(value, list):
        out.items.extend(InputItem(v, f"{origin}[{i}]") for i, v in enumerate(value))
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
    out.items.append(InputItem(value, origin))


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
    out.worlds.append(World(dict(world), origin))
    out.items.extend(InputItem(v, f"{origin} events[{i}]", scope=origin) for i, v in enumerate(events))


def _parse_lines(text: str, origin: str, out: ReplayInput) -> None:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = _loads(line)
        except (ValueError, RecursionError) as exc:
            raise _json_error(origin, exc, number) from None
        _add_top_level(value, f"{origin}:{number}", out, f"{origin}: line {number}")


def parse_text(text: str, origin: str, out: ReplayInput, *, json_lines: bool = False) -> None:
    """Parse one file's (or stdin's) text into ``out``.

    A document that is not one JSON value but whose lines each are is read as JSON Lines.

    Raises:
        InputError: invalid JSON, an empty document, or a top-level value that is neither an
            object nor an array.
    """
    if json_lines:
        _parse_lines(text, origin, out)
        return
    if not text.strip():
        raise InputError(f"{origin}: empty input: expected a JSON object, an array or JSON Lines")
    try:
        value = _loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # several documents: JSON Lines
            _parse_lines(text, origin, out)
            return
        raise _json_error(origin, exc) from None
    except (ValueError, RecursionError) as exc:
        raise _json_error(origin, exc) from None
    _add_top_level(value, origin, out)


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
