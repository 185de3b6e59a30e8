"""Incidents: alert facts of one kind on one job queue (or share) within a window. Pure.

A fleet-wide failure fails hundreds of jobs of one job queue within a minute; the alerts queue
hands them to the function in batches of up to 100 records (its 20 s batching window), so grouping
within a batch alone (:mod:`batchpilot.alerts.grouping`) still posts once per batch. An incident
groups across batches: it is kept in the StateTable (:class:`batchpilot.alerts.ports.AlertStore`)
under its :class:`IncidentKey` and has three stages, each delivered at most once per channel:

- :attr:`Stage.FIRST`: the incident's first fact, delivered at once as any fact is (a page on the
  on-call topic when its severity pages, a chat post);
- :attr:`Stage.UPDATE`: the facts that joined it in the first batch after the first fact, one
  digest per chat channel (a reply in the first message's thread where the channel threads);
  later facts are only counted;
- :attr:`Stage.SUMMARY`: at the window's end, one summary (every channel of the first fact's
  severity, the on-call topic included) naming how many facts the incident took, when more than
  its first. A delayed message to the alerts queue triggers it (:func:`timer_body`,
  :func:`parse_timer`; SQS ``DelaySeconds`` at most :data:`MAX_DELAY_SECONDS`).

An incident takes facts from its first until its summary is sent (it is then *closed*), or until
its window plus :data:`GRACE_SECONDS` passed (a summary that never came: the next fact opens a new
incident). 1,000 failures of one kind on one job queue within the window: at most 3 chat posts per
channel and 2 on-call messages.

An alarm's state changes are not grouped here: each time an alarm enters ALARM opens its own thread,
which its return to OK (the resolution) replies in (:mod:`batchpilot.alerts.alarms`). AWS Batch
sends no event saying a job queue's trouble is over, so a job incident ends at its window.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import IntEnum, StrEnum

from batchpilot.alerts.facts import AlertFact
from batchpilot.alerts.policy import Severity
from batchpilot.shared.clock import epoch_ms

__all__ = [
    "DEFAULT_WINDOW_MINUTES",
    "GRACE_SECONDS",
    "MAX_DELAY_SECONDS",
    "MAX_WINDOW_MINUTES",
    "IncidentKey",
    "Membership",
    "Scope",
    "Stage",
    "Timer",
    "incident_id",
    "incident_key",
    "member_id",
    "parse_timer",
    "summary_delay",
    "summary_due",
    "summary_why",
    "takes_members",
    "timer_body",
]

DEFAULT_WINDOW_MINUTES = 10
"""The template's ``AlertIncidentWindowMinutes`` default."""
MAX_DELAY_SECONDS = 900
"""SQS's longest ``DelaySeconds`` (Amazon SQS Developer Guide, "Amazon SQS delay queues"): the
summary's timer is one delayed message, so a window is at most this long."""
MAX_WINDOW_MINUTES = MAX_DELAY_SECONDS // 60
GRACE_SECONDS = 900.0
"""Seconds after its window an unclosed incident still takes facts (its timer may come late, e.g.
when the queue's consumers are busy); then the next fact opens a new incident."""
TIMER_MARK = "batchpilot-incident-summary"
"""The key that marks an alerts queue message as an incident's summary timer (never an event:
EventBridge events have ``detail-type``)."""


class Scope(StrEnum):
    """What an incident is about."""

    JOB_QUEUE = "queue"
    SHARE = "share"


class Stage(IntEnum):
    """The messages of one incident (each at most once per channel)."""

    FIRST = 0
    UPDATE = 1
    SUMMARY = 2


@dataclass(frozen=True, slots=True)
class IncidentKey:
    """Which incident a fact belongs to: ``(scope, name, kind, severity)``.

    Attributes:
        scope: job queue, or share identifier when the fact names no job queue.
        name: the job queue's name or the share identifier.
        kind: the failure category (``SPOT_INTERRUPTION``), else the job status or the fact kind.
        severity: the decided severity (a critical and a warning burst are two incidents).
    """

    scope: Scope
    name: str
    kind: str
    severity: Severity

    @property
    def subject(self) -> str:
        """The StateTable subject of the incident's items (``incident/queue/<name>``)."""
        return f"incident/{self.scope.value}/{self.name}"

    @property
    def head(self) -> str:
        """The sort key part naming the incident of this kind and severity."""
        return f"{self.kind}#{self.severity.value}"

    def thread_subject(self, incident: str) -> str:
        """The chat thread key of one incident (its first message's thread)."""
        return f"{self.subject}#{self.head}#{incident}"

    def as_dict(self) -> dict[str, str]:
        return {
            "scope": self.scope.value,
            "name": self.name,
            "kind": self.kind,
            "severity": self.severity.value,
        }


@dataclass(frozen=True, slots=True)
class Membership:
    """A fact's place in its incident (the store's answer to joining it).

    Attributes:
        incident: the incident's id (:func:`incident_id`).
        first: the fact opened it (or is the first fact, delivered again).
        opened_at: when the incident was opened (aware UTC).
        count: facts the incident took so far (a fact delivered again may be counted twice).
        timer: its summary timer was sent.
    """

    incident: str
    first: bool
    opened_at: datetime
    count: int
    timer: bool = False


@dataclass(frozen=True, slots=True)
class Timer:
    """A summary timer read off the alerts queue (:func:`parse_timer`).

    Attributes:
        key: the incident's key.
        incident: the incident's id.
    """

    key: IncidentKey
    incident: str


def incident_key(fact: AlertFact, severity: Severity) -> IncidentKey | None:
    """The incident ``fact`` belongs to; None for an alarm, a silent fact or a fact that names
    neither a job queue nor a share identifier (delivered on its own, as before), or for a
    resolution (``Job GPU Idle`` ACTIVE): it replies in its own job's thread, never in a digest
    of other jobs."""
    if fact.is_alarm or severity is Severity.SILENT or fact.is_resolution:
        return None
    if fact.job_queue:
        scope, name = Scope.JOB_QUEUE, fact.job_queue
    elif fact.share_identifier:
        scope, name = Scope.SHARE, fact.share_identifier
    else:
        return None
    kind = fact.category.value if fact.category else (fact.status or fact.event_kind.value)
    if fact.category is None and fact.reason_code is not None:
        # Own facts without a category (Job Starving, Job GPU Idle) differ by reason: an idle
        # notebook and a hung collective are different incidents with different owners to act.
        kind = f"{kind}:{fact.reason_code}"
    return IncidentKey(scope, name, f"{fact.event_kind.value}:{kind}", severity)


def member_id(fact: AlertFact) -> str:
    """The one-line identity of a fact inside an incident (its exactly-once key)."""
    return f"{fact.subject}#{fact.fact_id}"


def incident_id(opened_at: datetime, first: str) -> str:
    """``<epoch ms>-<8 hex>``: when the incident opened and a hash of its first fact (unique per
    key: two incidents of one key never open on the same millisecond with the same first fact)."""
    digest = hashlib.sha256(first.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{epoch_ms(opened_at)}-{digest}"


def summary_due(opened_at: datetime, window: timedelta) -> datetime:
    """When the incident's window ends (its summary is due)."""
    return opened_at + window


def summary_delay(opened_at: datetime, window: timedelta, now: datetime) -> int:
    """The timer's ``DelaySeconds``: whole seconds until the window ends, 0..:data:`MAX_DELAY_SECONDS`."""
    seconds = (summary_due(opened_at, window) - now).total_seconds()
    return max(0, min(MAX_DELAY_SECONDS, math.ceil(seconds)))


def takes_members(opened_at: datetime, window: timedelta, now: datetime, *, closed: bool) -> bool:
    """Whether an incident opened at ``opened_at`` still takes facts at ``now``."""
    return not closed and now < opened_at + window + timedelta(seconds=GRACE_SECONDS)


def summary_why(key: IncidentKey, count: int, opened_at: datetime, window: timedelta) -> str:
    """The summary's sentence: how many facts the incident took and over which window."""
    label = "job queue" if key.scope is Scope.JOB_QUEUE else "share"
    minutes = round(window.total_seconds() / 60)
    return (
        f"incident summary: {count} facts of one kind on {label} {key.name} within {minutes} minutes "
        f"from {opened_at.strftime('%H:%M:%S')} UTC; the first paged at once, the rest are counted here"
    )


def timer_body(key: IncidentKey, incident: str) -> str:
    """The SQS body of an incident's summary timer (its key and id; the store has the rest)."""
    return json.dumps({TIMER_MARK: 1, "key": key.as_dict(), "incident": incident})


def parse_timer(body: str | bytes) -> Timer | None:
    """The timer a body carries, or None when the body is not one (an event). Never raises."""
    if TIMER_MARK not in (body if isinstance(body, str) else body.decode("utf-8", "replace")):
        return None
    try:
        raw = json.loads(body)
        if not isinstance(raw, dict) or raw.get(TIMER_MARK) != 1:
            return None
        key = raw["key"]
        parsed = IncidentKey(
            Scope(key["scope"]), str(key["name"]), str(key["kind"]), Severity(key["severity"])
        )
        return Timer(parsed, str(raw["incident"]))
    except (ValueError, KeyError, TypeError):
        return None
