"""From one SQS batch of events to notifications, exactly once per fact.

The alerts service talks to the outside only through its ports (:mod:`batchpilot.alerts.ports`):
the state store, the on-call topic and the chat channels of a
:class:`~batchpilot.alerts.registry.ChannelRegistry`. It names no chat channel: digests, threads
and the fallback to the on-call topic are the same for every channel the registry holds.

For one batch (:meth:`AlertService.process`):

1. decode every record (:func:`batchpilot.shared.records.decode_any`: malformed records are
   ``invalid``, other detail-types ``ignored``; neither is retried) into an
   :class:`~batchpilot.alerts.facts.AlertFact` and decide its severity and channels; a channel
   the deployment did not configure is left out, and a fact none of whose chat channels is
   configured goes to the on-call topic instead. A CloudWatch alarm that is not the stack's is
   ``ignored``; one whose own action notifies an SNS topic (:mod:`batchpilot.alerts.alarms`) goes
   to the configured chat channels only, never to the on-call topic;
2. drop copies of one fact within the batch (``duplicate``);
3. record each job's latest state (terminal facts first): a fact older than what is recorded, or a
   non-terminal fact after a terminal one, sends nothing (``stale``);
4. claim each fact to notify with a lease (a two-phase record: ``claimed`` → channels delivered →
   ``sent``); a fact already sent is a duplicate and sends nothing; a crash between claim and send
   leaves a lease that expires, so the redelivered record sends it then;
5. publish to the on-call topic (each fact, or one message per burst when the policy groups);
6. for each chat channel and destination in it (the configured one, or the one a routing rule
   names: :meth:`~batchpilot.alerts.policy.RoutingPolicy.destination`): a burst (more than
   ``digest_threshold`` facts of one job queue, category and severity) as one digest, the rest
   one by one (replies in the job's thread in that destination when the channel threads; an
   alarm entering ALARM opens a new thread, which its resolution replies in);
7. a chat failure (any answer but the channel's success, no time left) falls back to the on-call
   topic only for a fact that no chat channel delivered (another chat channel that delivered it,
   now or in an earlier invocation, stands in for the failed one), and not when the fact went to
   the topic already (or is an alarm that notified its topic itself); one fallback message per
   failed group, whichever channels failed it, and each fact in one fallback message at most;
8. each delivered channel is recorded at once; a record write that fails (after botocore's
   retries) is written again at the end of the batch, and a fact whose delivery still is not
   recorded is reported (``error``, ``unrecorded``) with its claim kept, so no copy of it sends
   again while the lease lives; a fact with a channel neither delivered nor covered by the fallback
   has its claim released and its record fails, so SQS retries just it and only its missing
   channels.

Time: every chat request is bounded by the time left minus :data:`CHAT_RESERVE_SECONDS` (kept for
the on-call fallback and the writes), read again before each request and after each 429 wait; a
channel that timed out (or refused the connection, or ran out of time) gets no more requests in this
batch: its remaining groups fall back to the on-call topic at once (:data:`CHANNEL_DOWN`), so one
hanging chat service costs one request timeout per batch, not one per fact.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any, TypeVar

from pydantic_core import from_json

from batchpilot.alerts.alarms import AlarmRouting
from batchpilot.alerts.channels import MIN_REQUEST_SECONDS
from batchpilot.alerts.facts import AlertFact, FactKind, JobContext, fact_from_event, with_context
from batchpilot.alerts.grouping import burst_key, split_bursts
from batchpilot.alerts.oncall import sns_digest, sns_message
from batchpilot.alerts.owners import OnceEach, OwnerProblem, event_tags, mentions_owner, owner_from_tags
from batchpilot.alerts.policy import Channel, RoutingPolicy, Severity, SnsGrouping
from batchpilot.alerts.ports import (
    AlertStore,
    ClaimState,
    Delivery,
    JobDirectory,
    Notice,
    Notifier,
    OnCallTopic,
    TimeLeft,
)
from batchpilot.alerts.registry import ChannelRegistry
from batchpilot.alerts.render import OnCallFormat, SnsMessage
from batchpilot.alerts.severity import Decision, decide
from batchpilot.shared.classification import JobKind
from batchpilot.shared.clock import Clock
from batchpilot.shared.errors import is_permanent, is_permanent_code
from batchpilot.shared.events import CloudWatchAlarmStateChange
from batchpilot.shared.own_events import OwnEvent
from batchpilot.shared.records import Outcome, Rejected, decode_any, permanently_refused

__all__ = [
    "CHANNEL_DOWN",
    "CHAT_RESERVE_SECONDS",
    "DEFERRED",
    "NOT_CONFIGURED",
    "STORE_CALLS_AFTER_CLAIM",
    "AlertService",
    "BatchResult",
    "RecordOutcome",
    "SentMessage",
    "Suppressed",
]

CHAT_RESERVE_SECONDS = 5.0
"""Seconds of the invocation kept for the on-call fallback and the state writes: a chat channel is
not attempted (nor a 429 waited out) when less than this would remain."""
STORE_CALLS_AFTER_CLAIM = 1
"""State-store calls a claimed fact needs besides one delivery record per requested channel (its
on-call publish, or the release of a claim whose delivery failed)."""
DEFERRED = "deferred: too little time left in the invocation"
"""Error of a record not taken on for lack of time (reported failed, delivered again by SQS)."""
NOT_CONFIGURED = "not_configured"
_PREEMPTION_KINDS = frozenset({FactKind.PREEMPTION_STARTED, FactKind.PREEMPTION_COMPLETED})
"""Facts whose event names only the job's ARN: looked up in the :class:`JobDirectory`."""
"""Reason of a chat channel the deployment did not configure (a fallback, not a failure)."""
DEADLINE = "deadline"
"""Reason of a chat post skipped because the invocation is about to time out."""
CHANNEL_DOWN = "channel_down"
"""Reason of a chat post skipped because the channel timed out (or refused the connection) earlier
in the same batch."""
_DOWN_REASONS = frozenset({"timeout", "connection_error", DEADLINE})
"""Failures after which a channel gets no more requests in the batch."""
_WARNED_MAX = 1024
"""Alarm names whose missing or unknown severity was logged, remembered at most (then forgotten)."""


class Suppressed(StrEnum):
    """Why nothing was sent although the fact is notifiable."""

    DUPLICATE = "duplicate"
    """Sent before, or a copy in the same batch."""
    STALE = "stale"
    """Older than the job's recorded state (or after its terminal state)."""


@dataclass
class RecordOutcome:
    """The result for one SQS record.

    Attributes:
        message_id: the SQS ``messageId``.
        outcome: :class:`~batchpilot.shared.records.Outcome` (``duplicate`` for a fact sent before).
        rejected: the decode result of an ``ignored`` or ``invalid`` record (for counting), or
            the permanent refusal (``Rejected.permanent``) of a record whose state write or
            message AWS refused for good: reported and counted, not retried.
        event_id, detail_type: from the envelope, for logs (never the event itself).
        severity: the decided severity, when the event was a fact.
        suppressed: see :class:`Suppressed`.
        channels: channels that delivered the fact in this invocation (``sns`` also when it stood
            in for a chat channel).
        failed: a notification could not be delivered (or the state store failed): the record must
            be retried, so the handler raises for it.
        error: what went wrong (failed records; set too for partial trouble worth a log line).
        unrecorded: channels that delivered the fact but whose delivery record could not be written
            (even when written again at the end of the batch): a later copy of the event may send
            to them once more (docs/reliability.md).
        warning: something about the event worth one WARNING line (an alarm whose description
            names no known severity: said once per alarm and function instance).
        owner_note: ``(owner, reason, channel)`` when a message that should mention the job's
            owner does not (:class:`~batchpilot.alerts.owners.OwnerProblem` or a channel's lookup
            reason; owner "" when the job has no owner tag; channel None when no channel could):
            said once per owner and reason per function instance; the message went all the same.
    """

    message_id: str
    outcome: Outcome = Outcome.PROCESSED
    rejected: Rejected | None = None
    event_id: str | None = None
    detail_type: str | None = None
    severity: Severity | None = None
    suppressed: Suppressed | None = None
    channels: list[Channel] = field(default_factory=list)
    failed: bool = False
    error: str | None = None
    unrecorded: list[Channel] = field(default_factory=list)
    warning: str | None = None
    owner_note: tuple[str, str, Channel | None] | None = None


@dataclass(frozen=True)
class SentMessage:
    """One message delivered, and the records whose facts it carries.

    Attributes:
        channel: where it went (``sns`` also when it stood in for a chat channel).
        severity: its severity.
        records: the SQS ``messageId`` s of the records it tells about, in batch order: one for a
            single fact, several for a digest (or a fallback message standing in for one).
    """

    channel: Channel
    severity: Severity
    records: tuple[str, ...]


@dataclass
class BatchResult:
    """Everything one batch did.

    Attributes:
        records: one outcome per input record, in input order.
        sent: ``(channel, severity)`` per message delivered (a digest counts once).
        messages: the same messages, in the order each channel received them, with the records
            they tell about (:class:`SentMessage`).
        failed: ``(channel, reason)`` per failed delivery (reason: the channel's short error such
            as ``invalid_blocks``, ``http_500``, ``rate_limited``, ``deadline``, or the SNS error
            code); channels that are not configured are not failures.
    """

    records: list[RecordOutcome]
    sent: list[tuple[Channel, Severity]] = field(default_factory=list)
    failed: list[tuple[Channel, str]] = field(default_factory=list)
    messages: list[SentMessage] = field(default_factory=list)

    def delivered(self, channel: Channel, severity: Severity, entries: Sequence[_Entry]) -> None:
        """Note one message delivered to ``channel`` about ``entries``' facts."""
        self.sent.append((channel, severity))
        self.messages.append(SentMessage(channel, severity, tuple(e.outcome.message_id for e in entries)))

    def by_message_id(self) -> dict[str, RecordOutcome]:
        """``{messageId: outcome}``."""
        return {r.message_id: r for r in self.records}


@dataclass(eq=False)
class _Entry:
    outcome: RecordOutcome
    fact: AlertFact
    decision: Decision
    requested: frozenset[Channel] = frozenset()
    satisfied: set[Channel] = field(default_factory=set)
    done: bool = False
    unrecorded: dict[Channel, str] = field(default_factory=dict)
    """Delivered channels whose record write failed → the error (written again at batch end)."""
    prior: frozenset[Channel] = frozenset()
    """Channels an earlier invocation recorded as delivered (the claim's)."""
    refused: dict[Channel, str] = field(default_factory=dict)
    """Channels whose message AWS refused for good (:func:`batchpilot.shared.errors.is_permanent_code`,
    e.g. SNS ``InvalidParameter``) → what was refused: a retry would be refused again."""

    @property
    def severity(self) -> Severity:
        return self.decision.severity

    def chat_delivered(self) -> set[Channel]:
        """Chat channels that delivered the fact: in this invocation, or recorded by an earlier
        one (``prior``)."""
        now = {c for c in self.outcome.channels if c is not Channel.SNS}
        return now | {c for c in self.prior if c is not Channel.SNS}

    def pending(self, channel: Channel) -> bool:
        return not self.done and channel in self.requested and channel not in self.satisfied


@dataclass(eq=False)
class _Fallback:
    """On-call messages standing in for chat messages of one group of facts."""

    entries: list[_Entry]
    reasons: list[tuple[Channel, str]] = field(default_factory=list)


def _error(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return f"{type(exc).__name__}{f' ({code})' if code else ''}"


def _envelope(body: str | bytes) -> dict[str, Any]:
    """The delivered event as a mapping (an own event's ``id``, ``region``, ``account``)."""
    try:
        raw = from_json(body)
    except ValueError:
        return {}
    return raw if isinstance(raw, dict) else {}


_T = TypeVar("_T")


class _Pace:
    """The longest state-store call of one batch, measured on the invocation's time left."""

    def __init__(self, time_left: TimeLeft) -> None:
        self.time_left = time_left
        self.longest = 0.0

    def timed(self, call: Callable[..., _T], *args: Any) -> _T:
        before = self.time_left()
        try:
            return call(*args)
        finally:
            self.longest = max(self.longest, before - self.time_left())

    def fits(self, calls: int) -> bool:
        return self.time_left() >= self.longest * calls + MIN_REQUEST_SECONDS


class AlertService:
    """Delivers the facts of SQS batches (see the module docstring).

    Args:
        policy: the routing policy.
        store: per-job state and delivery records.
        topic: the on-call SNS topic.
        channels: the configured chat channels.
        clock: "now", aware UTC (:func:`batchpilot.shared.clock.utc_now` in Lambda).
        lease_margin: seconds a claim outlives the redelivery it guards.
        visibility_timeout: seconds, the queue's ``VisibilityTimeout`` (SQS delivers a record the
            invocation did not delete again after it): a claim's lease is ``visibility_timeout +
            lease_margin``, so a copy of the record redelivered while the claiming invocation may
            still be writing finds the claim held. None: the invocation's time left instead.
        reserves: when True, the batch is paced by the time left: a record's state is recorded,
            and a fact claimed, only while the calls it still needs (its claim, one delivery
            record per requested channel, :data:`STORE_CALLS_AFTER_CLAIM`), each as long as the
            longest state-store call of the batch so far, plus ``MIN_REQUEST_SECONDS`` fit
            in the time left; else the record is reported failed (:data:`DEFERRED`) and SQS
            delivers it again, instead of it being claimed and then cut off mid-write.
        directory: looks up the job a preemption event names (name, queue, share, priority:
            DescribeServiceJob); None: preemption alerts name the job by its ARN only.
        alarms: which CloudWatch alarms are the stack's and which notify an SNS topic themselves
            (:class:`~batchpilot.alerts.alarms.AlarmRouting`); default: every alarm the rule
            delivers, none notified directly.
        oncall_format: the on-call topic's message body (plain text, or Amazon Q Developer's
            custom notification JSON).
        owner_tag_key: the tag naming a job's owner (:mod:`batchpilot.alerts.owners`); empty: no
            owners. A service job's tags (its events carry none) are looked up in ``directory``
            only for a fact that mentions its owner.
    """

    def __init__(
        self,
        policy: RoutingPolicy,
        store: AlertStore,
        topic: OnCallTopic,
        channels: ChannelRegistry,
        directory: JobDirectory | None = None,
        *,
        clock: Clock,
        lease_margin: float = 30.0,
        alarms: AlarmRouting | None = None,
        oncall_format: OnCallFormat = OnCallFormat.TEXT,
        visibility_timeout: float | None = None,
        reserves: bool = False,
        owner_tag_key: str = "",
    ) -> None:
        self.policy = policy
        self.store = store
        self.topic = topic
        self.channels = channels
        self.clock = clock
        self.lease_margin = lease_margin
        self.visibility_timeout = visibility_timeout
        self.reserves = reserves
        self.directory = directory
        self.alarms = alarms or AlarmRouting()
        self.oncall_format = oncall_format
        self._warned: set[str] = set()
        self.owner_tag_key = owner_tag_key
        self._owners_said = OnceEach()

    # ------------------------------------------------------------------------------ entry point
    def process(self, records: Sequence[tuple[str, str | bytes]], time_left: TimeLeft) -> BatchResult:
        """Handle one batch of ``(messageId, body)`` records.

        Args:
            records: the SQS records, in order.
            time_left: seconds left in the invocation (from the Lambda context).

        Returns:
            A :class:`BatchResult` (one outcome per record, in order). Never raises for bad input,
            a failing channel or a failing store: those are outcomes.
        """
        result = BatchResult(records=[])
        entries: list[_Entry] = []
        for message_id, body in records:
            outcome = RecordOutcome(message_id)
            result.records.append(outcome)
            entry = self._decode(outcome, body)
            if entry is not None:
                entries.append(entry)

        active = self._drop_in_batch_copies(entries)
        pace = _Pace(time_left)
        active = self._observe(active, pace)
        active = self._claim(active, pace, time_left)
        self._deliver_to_topic(active, result)
        fallbacks: dict[tuple[int, ...], _Fallback] = {}
        for channel in Channel:
            if channel is not Channel.SNS:
                self._deliver_to_chat(channel, active, result, time_left, fallbacks)
        self._publish(
            [
                (fallback.entries, self._fallback_message(fallback), [c for c, _ in fallback.reasons])
                for fallback in self._pages_needed(fallbacks.values())
            ],
            result,
        )
        self._record_again(active)
        for entry in active:
            if entry.done or entry.satisfied >= entry.requested:
                continue
            if entry.requested - entry.satisfied <= set(entry.refused):
                self._refused(entry)
                continue
            entry.outcome.failed = True
            missing = ", ".join(sorted(c.value for c in entry.requested - entry.satisfied))
            entry.outcome.error = entry.outcome.error or f"not delivered to {missing}"
            with contextlib.suppress(Exception):  # else the lease simply runs out
                self.store.release(entry.fact)
        return result

    # ---------------------------------------------------------------------------------- stages
    def _decode(self, outcome: RecordOutcome, body: str | bytes) -> _Entry | None:
        decoded = decode_any(body)
        if isinstance(decoded, Rejected):
            outcome.outcome, outcome.rejected = decoded.outcome, decoded
            outcome.event_id, outcome.detail_type = decoded.event_id, decoded.detail_type
            outcome.error = decoded.error
            return None
        if isinstance(decoded, OwnEvent):
            envelope = _envelope(body)
            event_id = envelope.get("id")
            outcome.event_id = event_id if isinstance(event_id, str) else None
            fact = fact_from_event(decoded, envelope)
            decision = decide(fact, self.policy)
            fact = self._with_owner(outcome, fact, decision, None, None)
        elif isinstance(decoded, CloudWatchAlarmStateChange):
            outcome.event_id, outcome.detail_type = decoded.id, decoded.detail_type
            if not self.alarms.ours(decoded.detail.alarmName):
                outcome.outcome = Outcome.IGNORED
                outcome.rejected = Rejected(
                    Outcome.IGNORED,
                    decoded.id,
                    decoded.detail_type,
                    f"not one of this stack's alarms (its name does not start with {self.alarms.prefix})",
                )
                return None
            fact = fact_from_event(decoded, routing=self.alarms)
            outcome.warning = self._severity_warning(fact)
            decision = decide(fact, self.policy)
        else:
            outcome.event_id = decoded.id
            fact = fact_from_event(decoded)
            context: JobContext | None = None
            if self.directory is not None and fact.event_kind in _PREEMPTION_KINDS:
                context = self.directory.lookup(fact.subject)  # the event names only the ARN
                fact = with_context(fact, context) if context is not None else fact
            decision = decide(fact, self.policy)
            fact = self._with_owner(outcome, fact, decision, event_tags(decoded), context)
        outcome.detail_type, outcome.severity = fact.detail_type, decision.severity
        return _Entry(outcome, fact, decision, self._requested(decision, fact))

    def _with_owner(
        self,
        outcome: RecordOutcome,
        fact: AlertFact,
        decision: Decision,
        tags: Mapping[str, str] | None,
        context: JobContext | None,
    ) -> AlertFact:
        """``fact`` with its job's owner (:mod:`batchpilot.alerts.owners`), when the deployment
        names an owner tag: from the event's ``tags`` (None: the event carries none), else a
        service job's DescribeServiceJob ``tags`` (``context``, or one lookup, only for a fact that
        mentions its owner). A fact that should mention its owner and cannot notes why."""
        key = self.owner_tag_key
        if not key or fact.job_kind is None:
            return fact
        mention = decision.notify and mentions_owner(fact, decision.severity, self.policy)
        if tags is None and context is None and mention and fact.job_kind is JobKind.SERVICE_JOB:
            context = self.directory.lookup(fact.subject) if self.directory is not None else None
        owner = owner_from_tags(tags if tags is not None else (context.tags if context else None), key)
        if owner is None:
            if mention:
                self._note_owner(outcome, "", OwnerProblem.NO_OWNER_TAG, None)
            return fact
        if mention and owner.email is None:
            self._note_owner(outcome, owner.value, OwnerProblem.NOT_AN_EMAIL, None)
        return dataclasses.replace(
            fact, owner=dataclasses.replace(owner, mention=mention and bool(owner.email))
        )

    def _note_owner(self, outcome: RecordOutcome, owner: str, reason: str, channel: Channel | None) -> None:
        """Why ``owner`` was not mentioned, on the record's outcome: once per owner and reason."""
        if outcome.owner_note is None and self._owners_said.first((owner, reason, channel)):
            outcome.owner_note = (owner, reason, channel)

    def _severity_warning(self, fact: AlertFact) -> str | None:
        """Once per alarm (and function instance): why the alarm got the default severity."""
        alarm = fact.alarm
        if alarm is None or alarm.severity_problem is None or alarm.name in self._warned:
            return None
        if len(self._warned) >= _WARNED_MAX:
            self._warned.clear()
        self._warned.add(alarm.name)
        default = alarm.severity.value
        return f"alarm {alarm.name}: {alarm.severity_problem}; it gets the default severity, {default}"

    def _requested(self, decision: Decision, fact: AlertFact) -> frozenset[Channel]:
        """The decision's channels that this deployment can deliver; with no configured chat
        channel among them, the first chat channel stays (its fallback is the on-call topic). An
        alarm that notifies its SNS topic itself goes to the configured chat channels only."""
        chat = [c for c in decision.channels if c is not Channel.SNS]
        configured = [c for c in chat if c in self.channels]
        if fact.notified_directly:
            return frozenset(configured)
        requested = {c for c in decision.channels if c is Channel.SNS} | set(configured)
        if chat and not configured:
            requested.add(chat[0])
        return frozenset(requested)

    def _drop_in_batch_copies(self, entries: list[_Entry]) -> list[_Entry]:
        seen: set[tuple[str, str]] = set()
        kept = []
        for entry in entries:
            if entry.fact.key in seen and entry.decision.notify:
                entry.outcome.outcome, entry.outcome.suppressed = Outcome.DUPLICATE, Suppressed.DUPLICATE
                continue
            seen.add(entry.fact.key)
            kept.append(entry)
        return kept

    def _defer(self, entry: _Entry, pace: _Pace, calls: int) -> bool:
        """True (and ``entry`` failed, :data:`DEFERRED`) when reserves apply and ``calls`` more
        state-store calls for it would not fit in the time left."""
        if not self.reserves or pace.fits(calls):
            return False
        entry.outcome.failed = True
        entry.outcome.error = DEFERRED
        return True

    def _observe(self, entries: list[_Entry], pace: _Pace) -> list[_Entry]:
        """Record job states (terminal and newer first); returns the entries still to notify."""
        watched = [
            e
            for e in entries
            if (e.fact.is_job_event or e.fact.is_alarm)
            and not e.fact.created_by_batch
            and (e.fact.terminal or e.decision.notify)
        ]
        watched.sort(key=lambda e: (e.fact.terminal, e.fact.progress or ""), reverse=True)
        now = self.clock()
        stale: set[int] = set()
        for entry in watched:
            if self._defer(entry, pace, 2 + len(entry.requested) + STORE_CALLS_AFTER_CLAIM):
                stale.add(id(entry))
                continue
            try:
                if not pace.timed(self.store.observe, entry.fact, now):
                    stale.add(id(entry))
                    if entry.decision.notify:
                        entry.outcome.suppressed = Suppressed.STALE
            except Exception as exc:
                stale.add(id(entry))
                self._store_failed(entry, exc)
        # Nothing requested: an alarm that notified its topic itself, with no chat configured.
        return [e for e in entries if e.decision.notify and e.requested and id(e) not in stale]

    def _claim(self, entries: list[_Entry], pace: _Pace, time_left: TimeLeft) -> list[_Entry]:
        now = self.clock()
        guarded = self.visibility_timeout if self.visibility_timeout is not None else max(0.0, time_left())
        lease_until = now + timedelta(seconds=guarded + self.lease_margin)
        claimed = []
        for entry in entries:
            if self._defer(entry, pace, 1 + len(entry.requested) + STORE_CALLS_AFTER_CLAIM):
                continue
            try:
                claim = pace.timed(self.store.claim, entry.fact, entry.severity, now, lease_until)
            except Exception as exc:
                self._store_failed(entry, exc)
                continue
            if claim.state is ClaimState.SENT:
                entry.outcome.outcome, entry.outcome.suppressed = Outcome.DUPLICATE, Suppressed.DUPLICATE
                continue
            if claim.state is ClaimState.BUSY:
                entry.outcome.failed = True
                entry.outcome.error = "being delivered by another invocation (lease held)"
                continue
            entry.satisfied |= set(claim.delivered) & entry.requested
            entry.prior = frozenset(claim.delivered) & entry.requested
            claimed.append(entry)
        return claimed

    def _refused(self, entry: _Entry) -> None:
        """Every channel still missing refused the fact for good: the record is ``invalid`` and
        ``permanent`` (counted, logged with what was refused, not retried: the retry would be
        refused again and end in the dead-letter queue); its claim is given back."""
        outcome = entry.outcome
        error = "; ".join(sorted(set(entry.refused.values())))
        outcome.outcome, outcome.error = Outcome.INVALID, error
        outcome.rejected = Rejected(
            Outcome.INVALID, outcome.event_id, outcome.detail_type, error, permanent=True
        )
        with contextlib.suppress(Exception):  # else the lease simply runs out
            self.store.release(entry.fact)

    @staticmethod
    def _store_failed(entry: _Entry, exc: Exception) -> None:
        """The state store refused ``entry``: retried when transient; an error no retry can fix
        (:func:`batchpilot.shared.errors.is_permanent`) makes the record ``invalid``, not retried."""
        if is_permanent(exc):
            outcome = entry.outcome
            outcome.rejected = permanently_refused(exc, outcome.event_id, outcome.detail_type)
            outcome.outcome, outcome.error = Outcome.INVALID, f"state store: {outcome.rejected.error}"
            return
        entry.outcome.failed = True
        entry.outcome.error = f"state store: {_error(exc)}"

    def _mark(self, entry: _Entry, channel: Channel, actual: Channel) -> None:
        entry.satisfied.add(channel)
        if actual not in entry.outcome.channels:
            entry.outcome.channels.append(actual)
        self._record(entry, channel)

    def _record(self, entry: _Entry, channel: Channel) -> None:
        """Write that ``channel`` delivered ``entry`` (``sent`` once every channel did); a failure
        is kept in ``entry.unrecorded`` for :meth:`_record_again`, never dropped."""
        done = entry.satisfied >= entry.requested
        try:
            self.store.mark_delivered(entry.fact, channel, done=done, now=self.clock())
        except Exception as exc:
            entry.unrecorded[channel] = _error(exc)
            return
        entry.unrecorded.pop(channel, None)
        entry.done = done

    def _record_again(self, entries: list[_Entry]) -> None:
        """Write the delivery records that failed during the batch once more (the store's client
        retries each write too). What still fails is reported on the record's outcome; the claim is
        kept, so its lease keeps other copies of the event from sending again until it runs out."""
        for entry in entries:
            for channel in sorted(entry.unrecorded):
                self._record(entry, channel)
            if entry.unrecorded:
                entry.outcome.unrecorded = sorted(entry.unrecorded)
                errors = ", ".join(f"{c.value}: {e}" for c, e in sorted(entry.unrecorded.items()))
                entry.outcome.error = f"delivered but not recorded ({errors})"
                # Delivered everywhere: neither released nor retried (a retry would send again).
                entry.done = entry.satisfied >= entry.requested

    def _publish(
        self, units: list[tuple[list[_Entry], SnsMessage, list[Channel]]], result: BatchResult
    ) -> None:
        """Publish ``(entries, message, channels it satisfies)`` units in one batched call."""
        if not units:
            return
        try:
            errors = self.topic.publish([message for _, message, _ in units])
        except Exception as exc:  # the adapter reports per message; this is a bug or a crash
            errors = [_error(exc)] * len(units)
        for (group, _, channels), error in zip(units, errors, strict=True):
            if error is None:
                result.delivered(Channel.SNS, group[0].severity, group)
                for entry in group:
                    for channel in (c for c in channels if c in entry.requested):
                        self._mark(entry, channel, Channel.SNS)
            else:
                result.failed.append((Channel.SNS, error))
                for entry in group:
                    entry.outcome.error = f"sns: {error}"
                    if is_permanent_code(error):
                        for channel in (Channel.SNS, *channels):
                            entry.refused[channel] = f"sns: PublishBatch: {error}"

    def _bursts(self, entries: list[_Entry]) -> tuple[list[list[_Entry]], list[_Entry]]:
        return split_bursts(entries, lambda e: burst_key(e.fact, e.severity), self.policy.digest_threshold)

    def _deliver_to_topic(self, entries: list[_Entry], result: BatchResult) -> None:
        wanted = [e for e in entries if e.pending(Channel.SNS)]
        bursts: list[list[_Entry]] = []
        singles = wanted
        if self.policy.sns_grouping is SnsGrouping.GROUP:
            bursts, singles = self._bursts(wanted)
        elif self.policy.sns_grouping is SnsGrouping.PAGE_THEN_DIGEST:
            # The burst's first fact pages on its own; the rest follow as one digest message.
            bursts, singles = self._bursts(wanted)
            paged = {id(group[0]) for group in bursts} | {id(e) for e in singles}
            singles = [e for e in wanted if id(e) in paged]
            bursts = [group[1:] for group in bursts]
        fmt = self.oncall_format
        units = [
            (
                group,
                sns_digest(
                    [e.fact for e in group], group[0].severity, group[0].decision.why, body_format=fmt
                ),
                [Channel.SNS],
            )
            for group in bursts
        ]
        pages = [
            ([e], sns_message(e.fact, e.severity, e.decision.why, body_format=fmt), [Channel.SNS])
            for e in singles
        ]
        # page-then-digest: the page goes out before its digest.
        first = self.policy.sns_grouping is SnsGrouping.PAGE_THEN_DIGEST
        units = [*pages, *units] if first else units + pages
        self._publish(units, result)

    def _deliver_to_chat(
        self,
        channel: Channel,
        entries: list[_Entry],
        result: BatchResult,
        time_left: TimeLeft,
        fallbacks: dict[tuple[int, ...], _Fallback],
    ) -> None:
        wanted = [e for e in entries if e.pending(channel)]
        if not wanted:
            return
        notifier = self.channels.get(channel)
        # A digest or a thread never mixes destinations: facts a routing rule sends to another
        # destination (RoutingPolicy.destination) are grouped apart from the rest.
        by_destination: dict[str | None, list[_Entry]] = {}
        for entry in wanted:
            by_destination.setdefault(self._destination(channel, entry), []).append(entry)
        groups: list[list[_Entry]] = []
        for members in by_destination.values():
            bursts, singles = self._bursts(members)
            groups += [*bursts, *([e] for e in singles)]
        groups.sort(key=lambda group: entries.index(group[0]))

        def budget() -> float:
            return time_left() - CHAT_RESERVE_SECONDS

        down: str | None = None  # the channel timed out earlier in this batch
        for group in groups:
            first = group[0]
            destination = self._destination(channel, first)
            notice = Notice(
                tuple(e.fact for e in group),
                first.severity,
                first.decision.why,
                self.policy.digest_max_items,
                destination,
            )
            thread: str | None = None
            if notifier is None:
                delivery = Delivery(False, NOT_CONFIGURED)
            elif down is not None:
                delivery = Delivery(False, CHANNEL_DOWN)
            elif budget() < MIN_REQUEST_SECONDS:
                delivery = Delivery(False, DEADLINE)
            else:
                threaded = notifier.threads and not notice.digest and not first.fact.starts_thread
                thread = self._thread_for(channel, first, destination) if threaded else None
                delivery = self._post(notifier, notice, thread, budget)
            owner = first.fact.owner
            if delivery.owner_problem and owner is not None and not notice.digest:
                self._note_owner(first.outcome, owner.value, delivery.owner_problem, channel)
            if delivery.delivered:
                result.delivered(channel, first.severity, group)
                for entry in group:
                    self._mark(entry, channel, channel)
                if delivery.thread and notifier is not None and notifier.threads and not notice.digest:
                    self._remember_thread(channel, first, destination, thread, delivery.thread)
                continue
            if delivery.reason in _DOWN_REASONS:
                down = delivery.reason
            self._fall_back(channel, group, delivery.reason or "unknown", result, fallbacks)

    @staticmethod
    def _post(notifier: Notifier[Any], notice: Notice, thread: str | None, budget: TimeLeft) -> Delivery:
        try:
            return notifier.post(notifier.render(notice), thread=thread, time_left=budget)
        except Exception as exc:  # adapters report failures as results; keep the batch alive
            return Delivery(False, type(exc).__name__)

    def _fall_back(
        self,
        channel: Channel,
        group: list[_Entry],
        reason: str,
        result: BatchResult,
        fallbacks: dict[tuple[int, ...], _Fallback],
    ) -> None:
        """The on-call topic stands in for ``channel``, except for facts it already carries (and
        alarms whose own action notified their topic: that notification stands in)."""
        if reason != NOT_CONFIGURED:
            result.failed.append((channel, reason))
        for entry in (e for e in group if e.fact.notified_directly):
            said = f"{channel.value}: {reason} (the alarm notified its topic)"
            entry.outcome.error = entry.outcome.error or said
            entry.satisfied.add(channel)
            self._record(entry, channel)
        group = [e for e in group if not e.fact.notified_directly]
        for entry in (e for e in group if Channel.SNS in e.requested):
            if Channel.SNS in entry.satisfied:
                self._mark(entry, channel, Channel.SNS)
            else:
                entry.outcome.error = entry.outcome.error or f"{channel.value}: {reason}"
                if Channel.SNS in entry.refused:  # its stand-in, the topic, refused it for good
                    entry.refused[channel] = entry.refused[Channel.SNS]
        rest = [e for e in group if Channel.SNS not in e.requested]
        if rest:
            fallback = fallbacks.setdefault(tuple(id(e) for e in rest), _Fallback(rest))
            fallback.reasons.append((channel, reason))

    def _pages_needed(self, fallbacks: Iterable[_Fallback]) -> list[_Fallback]:
        """The fallbacks still to publish once every chat channel had its turn: a fact another of
        its chat channels delivered (in this invocation, or recorded by an earlier one) is not
        paged; that channel stands in for the ones that failed. A fact several channels failed in
        different groups is paged once, in the first of them (which then names every failure)."""
        pages: list[_Fallback] = []
        paged: dict[int, _Fallback] = {}
        for fallback in fallbacks:
            kept: list[_Entry] = []
            for entry in fallback.entries:
                failed = [c for c, _ in fallback.reasons]
                delivered = entry.chat_delivered()
                if delivered:
                    said = ", ".join(f"{c.value}: {r}" for c, r in fallback.reasons)
                    stand_in = ", ".join(sorted(c.value for c in delivered))
                    entry.outcome.error = entry.outcome.error or f"{said} (delivered to {stand_in})"
                    for channel in failed:
                        self._mark(entry, channel, next(iter(sorted(delivered))))
                elif id(entry) in paged:
                    first = paged[id(entry)]
                    first.reasons += [r for r in fallback.reasons if r not in first.reasons]
                else:
                    kept.append(entry)
            if kept:
                page = _Fallback(kept, list(fallback.reasons))
                paged.update((id(e), page) for e in kept)
                pages.append(page)
        return pages

    def _fallback_message(self, fallback: _Fallback) -> SnsMessage:
        first, fmt = fallback.entries[0], self.oncall_format
        if len(fallback.entries) > 1:
            facts = [e.fact for e in fallback.entries]
            return sns_digest(
                facts, first.severity, first.decision.why, fallback=fallback.reasons, body_format=fmt
            )
        return sns_message(
            first.fact, first.severity, first.decision.why, fallback=fallback.reasons, body_format=fmt
        )

    def _destination(self, channel: Channel, entry: _Entry) -> str | None:
        """Where in ``channel`` the entry goes when a route of the policy overrides the channel's
        configured destination, else None."""
        return self.policy.destination(channel, entry.fact.match_values(), entry.severity)

    @staticmethod
    def _thread_subject(subject: str, destination: str | None) -> str:
        """The key of ``subject``'s thread: per destination, since a thread id (a message id)
        only exists in the destination it was posted to; the configured channel keeps the bare
        subject (threads recorded before overrides existed stay valid)."""
        return subject if destination is None else f"{subject} in {destination}"

    def _thread_for(self, channel: Channel, entry: _Entry, destination: str | None) -> str | None:
        try:
            return self.store.thread_of(channel, self._thread_subject(entry.fact.thread_subject, destination))
        except Exception:  # a missing thread is only cosmetic: post at top level
            return None

    def _remember_thread(
        self, channel: Channel, entry: _Entry, destination: str | None, thread: str | None, posted: str
    ) -> None:
        # A new top-level message starts the job's thread; a reply only links the jobs that
        # continue it (the new job of a resubmission) to the existing thread. An alarm entering
        # ALARM replaces its previous thread: its resolution replies in this one.
        subjects = list(entry.fact.related_subjects)
        if thread is None:
            subjects.insert(0, entry.fact.thread_subject)
        if not subjects:
            return
        keys = [self._thread_subject(subject, destination) for subject in subjects]
        with contextlib.suppress(Exception):  # cosmetic: later messages start a new thread
            self.store.save_thread(
                channel, keys, thread or posted, self.clock(), replace=entry.fact.starts_thread
            )
