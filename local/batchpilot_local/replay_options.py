"""Options of ``batchpilot replay`` that shape what is replayed and how it ends.

- Template parameters, so a user replays with their own settings: ``--parameter-overrides``
  (``Key=Value`` pairs in ``sam deploy``'s syntax, quoted values allowed) and ``--config-env``
  (the ``parameter_overrides`` of a ``samconfig.toml`` environment, as ``sam deploy --config-env``
  reads them); :func:`parse_overrides`, :func:`samconfig_overrides`.
- Filters (``--job``, ``--queue``, ``--share``, ``--category``): :class:`Filters` keeps the input
  events about matching jobs; a value that matches nothing in the input is an error.
- ``--fail-on critical|warning``: :func:`failed_on` says whether a notification of that severity
  (or worse) was sent.

Every problem is an :class:`OptionError` with a one-line message.
"""

from __future__ import annotations

import fnmatch
import shlex
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batchpilot.shared.classification import Category, JobFacts, classify
from batchpilot.shared.events import InvalidEventError, parse_event

from batchpilot_local.clock import ClockScenario

__all__ = [
    "SEVERITY_RANK",
    "Filters",
    "OptionError",
    "failed_on",
    "parse_overrides",
    "samconfig_overrides",
]

SEVERITY_RANK: dict[str, int] = {"critical": 3, "warning": 2, "info": 1}
"""Order of the alerts function's severities (``silent`` facts send nothing)."""


class OptionError(ValueError):
    """A bad option value (one line, names the option)."""


def parse_overrides(texts: Iterable[str], where: str = "--parameter-overrides") -> dict[str, str]:
    """``Key=Value`` pairs separated by spaces, as ``sam deploy --parameter-overrides`` takes them
    (shell quoting: ``AlertRoutingPolicy='{"never_page": ...}'``); later pairs win.

    Raises:
        OptionError: a pair without ``=`` or with an empty key, or unbalanced quotes.
    """
    out: dict[str, str] = {}
    for text in texts:
        try:
            tokens = shlex.split(text)
        except ValueError as exc:
            raise OptionError(f"{where}: {exc}") from None
        for token in tokens:
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise OptionError(f"{where}: {token!r} is not Key=Value")
            out[key] = value
    return out


def samconfig_overrides(path: Path, environment: str) -> dict[str, str]:
    """The template parameters a ``samconfig.toml`` environment deploys with: its
    ``deploy.parameters.parameter_overrides`` (a string or a list of strings), else
    ``global.parameters.parameter_overrides``; empty when the environment sets none.

    Raises:
        OptionError: the file cannot be read or is not TOML, or has no such environment.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise OptionError(
            f"--config-env: {path}: cannot read: {exc.strerror or type(exc).__name__}"
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise OptionError(f"--config-env: {path}: not TOML: {str(exc).splitlines()[0]}") from None
    section = data.get(environment)
    if not isinstance(section, Mapping):
        known = ", ".join(sorted(k for k, v in data.items() if isinstance(v, Mapping))) or "none"
        raise OptionError(f"--config-env: {path}: no environment {environment!r} (it has: {known})")
    for command in ("deploy", "global"):
        parameters = (section.get(command) or {}).get("parameters") or {}
        raw = parameters.get("parameter_overrides") if isinstance(parameters, Mapping) else None
        if raw is None:
            continue
        texts = [raw] if isinstance(raw, str) else [str(item) for item in raw]
        return parse_overrides(texts, f"--config-env {environment}: {path}")
    return {}


def _facts(event: Any) -> JobFacts | None:
    if not isinstance(event, Mapping):
        return None
    try:
        return classify(parse_event(event))
    except InvalidEventError:
        return None


def _queues_of(scenario: ClockScenario) -> set[str]:
    queues = scenario.world.get("job_queues") or []
    return {str(q.get("name")) for q in queues if isinstance(q, Mapping) and q.get("name")}


@dataclass(frozen=True)
class Filters:
    """What to replay: each list holds glob patterns (``*``, ``?``); an event passes when, for every
    list given, one of its patterns matches.

    Attributes:
        jobs: job names, ARNs or ids (the last part of the ARN).
        queues: job queue names. A clock scenario passes when its world has a matching queue.
        shares: share identifiers or quota share names.
        categories: failure/blocked categories (``CAPACITY``, ...; the closed set of
            ``batchpilot.shared.classification.Category``).

    With any filter given, only job events (and, for ``queues`` alone, clock scenarios) pass:
    events that are not about a job are left out.
    """

    jobs: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()
    shares: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        """True when any filter is given."""
        return bool(self.jobs or self.queues or self.shares or self.categories)

    @staticmethod
    def _match(patterns: Sequence[str], values: Iterable[str | None]) -> bool:
        present = [v for v in values if v]
        return any(fnmatch.fnmatchcase(v, p) for p in patterns for v in present)

    def _job_values(self, facts: JobFacts) -> list[str | None]:
        return [facts.name, facts.arn, facts.arn.rsplit("/", 1)[-1]]

    def keep(self, item: Any) -> bool:
        """True when ``item`` (an input event, or a clock scenario) passes every given filter."""
        if not self.active:
            return True
        if isinstance(item, ClockScenario):
            if self.jobs or self.shares or self.categories:
                return False
            return self._match(self.queues, _queues_of(item))
        facts = _facts(item)
        if facts is None:
            return False
        category = facts.category.value if facts.category else None
        checks = (
            (self.jobs, self._job_values(facts)),
            (self.queues, [facts.queue]),
            (self.shares, [facts.share_identifier, facts.quota_share]),
            (self.categories, [category]),
        )
        return all(self._match(patterns, values) for patterns, values in checks if patterns)

    def check(self, items: Iterable[Any]) -> None:
        """Fail when a given value matches nothing in the input (a typo would silently replay
        nothing).

        Raises:
            OptionError: ``--queue X: no input event has it (job queues in the input: a, b)``, or a
                category outside the closed set.
        """
        for category in self.categories:
            if not any(fnmatch.fnmatchcase(c.value, category) for c in Category):
                known = ", ".join(c.value for c in Category)
                raise OptionError(f"--category {category}: not a category (one of: {known})")
        if not self.active:
            return  # nothing to look for: the input is not read (decoding it costs)
        seen: dict[str, set[str]] = {"--job": set(), "--queue": set(), "--share": set(), "--category": set()}
        names: set[str] = set()  # job names: what the message lists (ARNs and ids match too)
        for item in items:
            if isinstance(item, ClockScenario):
                seen["--queue"] |= _queues_of(item)
                continue
            facts = _facts(item)
            if facts is None:
                continue
            seen["--job"].update(v for v in self._job_values(facts) if v)
            names.update(v for v in [facts.name] if v)
            seen["--queue"].update(v for v in [facts.queue] if v)
            seen["--share"].update(v for v in [facts.share_identifier, facts.quota_share] if v)
            if facts.category:
                seen["--category"].add(facts.category.value)
        nouns = {"--job": "jobs", "--queue": "job queues", "--share": "shares", "--category": "categories"}
        given = {
            "--job": self.jobs,
            "--queue": self.queues,
            "--share": self.shares,
            "--category": self.categories,
        }
        for option, patterns in given.items():
            for pattern in patterns:
                if any(fnmatch.fnmatchcase(v, pattern) for v in seen[option]):
                    continue
                values = sorted(names if option == "--job" else seen[option])
                shown = ", ".join(values[:10]) + (", ..." if len(values) > 10 else "")
                raise OptionError(
                    f"{option} {pattern}: no input event has it "
                    f"({nouns[option]} in the input: {shown or 'none'})"
                )


def failed_on(level: str | None, notifications: Iterable[Mapping[str, Any]]) -> bool:
    """True when ``level`` (``critical`` or ``warning``) is given and a notification of that
    severity or worse was sent."""
    if level is None:
        return False
    threshold = SEVERITY_RANK[level]
    return any(SEVERITY_RANK.get(str(n.get("severity")), 0) >= threshold for n in notifications)
