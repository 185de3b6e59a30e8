"""One SQS record's body → an event, or why not: the one decode step every function shares.

Every batchpilot function receives EventBridge events wrapped in SQS records. Each record ends in
exactly one :class:`Outcome`; only an exception makes SQS deliver the record again, so malformed
and unsupported events are *results* here, never exceptions (a permanent error is not retried).
Counting and logging outcomes is :func:`batchpilot.shared.observability.count_outcome`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic_core import from_json

from batchpilot.shared.events import (
    ALARM_SOURCE,
    CloudWatchAlarmStateChange,
    InvalidEventError,
    JobEvent,
    UnsupportedEventError,
    parse_alarm_event,
    parse_event,
    unreadable,
)

if TYPE_CHECKING:
    from batchpilot.shared.own_events import OwnEvent

__all__ = ["Outcome", "Rejected", "decode", "decode_any", "permanently_refused"]


class Outcome(StrEnum):
    """What happened to one record. A record that must be retried raises instead."""

    PROCESSED = "processed"
    """The event was handled (whatever the feature decided about it)."""
    DUPLICATE = "duplicate"
    """The same fact was handled before (idempotency): nothing was done again."""
    IGNORED = "ignored"
    """Well-formed but not for this function (detail-type, reason or queue it does not handle)."""
    INVALID = "invalid"
    """Malformed: reported and counted, never retried (it would fail again)."""


@dataclass(frozen=True, slots=True)
class Rejected:
    """A record that carries no event this function can use.

    Attributes:
        outcome: :attr:`Outcome.IGNORED` or :attr:`Outcome.INVALID`.
        event_id: the envelope's ``id`` when it had one.
        detail_type: the envelope's ``detail-type`` when it had one.
        error: why, naming fields, never their values (events can carry secrets); for a
            permanent AWS error, :func:`batchpilot.shared.errors.describe` (operation, code,
            bounded excerpt).
        permanent: AWS (or botocore) refused the record's request for good
            (:func:`batchpilot.shared.errors.is_permanent`): also counted as ``PermanentErrors``.
    """

    outcome: Outcome
    event_id: str | None
    detail_type: str | None
    error: str
    permanent: bool = False


def permanently_refused(
    exc: BaseException, event_id: str | None, detail_type: str | None, operation: str | None = None
) -> Rejected:
    """The :class:`Rejected` (``invalid``, ``permanent``) of a record whose AWS request failed with
    an error no retry can fix (:func:`batchpilot.shared.errors.is_permanent`): reported, counted
    and never retried. ``error`` is :func:`batchpilot.shared.errors.describe` of ``exc``."""
    from batchpilot.shared.errors import describe

    return Rejected(Outcome.INVALID, event_id, detail_type, describe(exc, operation), permanent=True)


def _rejected(exc: InvalidEventError) -> Rejected:
    outcome = Outcome.IGNORED if isinstance(exc, UnsupportedEventError) else Outcome.INVALID
    return Rejected(outcome, exc.event_id, exc.detail_type, str(exc))


def decode(body: str | bytes) -> JobEvent | Rejected:
    """An SQS message body (an AWS Batch or SageMaker EventBridge event as JSON) → its model.

    Returns:
        One of the job-event models of :data:`batchpilot.shared.events.DETAIL_TYPES`, or a
        :class:`Rejected` (ignored: a detail-type batchpilot does not handle; invalid: not JSON,
        not an object, fields missing or mistyped). Never raises.
    """
    try:
        raw = from_json(body)
    except ValueError as exc:
        return Rejected(Outcome.INVALID, None, None, unreadable(exc))
    try:
        return parse_event(raw)
    except InvalidEventError as exc:
        return _rejected(exc)


def decode_any(body: str | bytes) -> JobEvent | OwnEvent | CloudWatchAlarmStateChange | Rejected:
    """Like :func:`decode`, and an event whose ``source`` is ``batchpilot`` becomes one of
    batchpilot's own events (:mod:`batchpilot.shared.own_events`), one whose ``source`` is
    ``aws.cloudwatch`` a :class:`~batchpilot.shared.events.CloudWatchAlarmStateChange` (other
    CloudWatch detail-types are ignored; an alarm event without ``alarmName`` or ``state`` is
    invalid). Never raises."""
    from batchpilot.shared.own_events import SOURCE, parse_own_event

    try:
        raw = from_json(body)
    except ValueError as exc:
        return Rejected(Outcome.INVALID, None, None, unreadable(exc))
    try:
        if isinstance(raw, dict) and raw.get("source") == SOURCE:
            return parse_own_event(raw)
        if isinstance(raw, dict) and raw.get("source") == ALARM_SOURCE:
            return parse_alarm_event(raw)
        return parse_event(raw)
    except InvalidEventError as exc:
        return _rejected(exc)
