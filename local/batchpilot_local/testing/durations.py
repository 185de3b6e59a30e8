"""The slowest tests of each level of a pytest run (tests/unit, tests/integration, ...), for the
summary ``tests/conftest.py`` prints at the end of every run."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LevelTimes:
    """One level's times.

    Attributes:
        level: the folder under ``tests/`` (``tests/unit``), else the test file's folder.
        tests: how many tests of the level ran.
        total: their seconds, added up.
        slowest: ``(seconds, node id)`` of the slowest, slowest first.
    """

    level: str
    tests: int
    total: float
    slowest: list[tuple[float, str]]


def level(nodeid: str) -> str:
    """``tests/unit`` for ``tests/unit/test_x.py::test_y``; ``tests`` for ``tests/test_x.py::t``;
    ``.`` for a file at the root."""
    parts = nodeid.split("::")[0].split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else "/".join(parts[:-1]) or "."


def slowest_by_level(seconds: Mapping[str, float], count: int = 10) -> list[LevelTimes]:
    """The ``count`` slowest tests of each level, levels in name order.

    Args:
        seconds: node id → the test's seconds (set-up, call and tear-down added up).
        count: tests listed per level (at least 1).

    Raises:
        ValueError: ``count`` is below 1.
    """
    if count < 1:
        raise ValueError(f"count must be at least 1, not {count}")
    by_level: defaultdict[str, list[tuple[float, str]]] = defaultdict(list)
    for nodeid, spent in seconds.items():
        by_level[level(nodeid)].append((spent, nodeid))
    return [
        LevelTimes(name, len(times), sum(spent for spent, _ in times), sorted(times, reverse=True)[:count])
        for name, times in sorted(by_level.items())
    ]
