"""From one SQS batch of events to notifications, exactly once per fact.

The seam between the alerts handler and the pure domain. It talks to the outside only through the
three protocols below (implemented by :mod:`batchpilot.io.dynamodb.alerts`,
:mod:`batchpilot.io.sns` and :mod:`batchpilot.alerts.channels.slack`), so tests can run it against
moto and the local Slack endpoint, and the handler stays a few lines.

For one batch (:meth:`AlertDispatcher.process`):

1. decode every record into an :class:`~batchpilot.alerts.facts.AlertFact` (malformed: reported,
   counted, not retried; an unsupported detail-type: ignored) and decide its severity;
2. drop copies of one fact within the batch;
3. record each job's latest state (terminal facts first): a fact older than what is recorded, or a
   non-terminal fact after a terminal one, sends nothing (F3);
4. claim each fact to notify with a lease (a two-phase record: ``claimed`` → channels delivered →
   ``sent``); a fact already sent is a duplicate and sends nothing; a crash between claim and send
   leaves a lease that expires, so the redelivered record sends it then;
5. publish to the on-call topic (each fact, or one message per burst when the policy groups);
6. post to Slack: a burst (more than ``digest_threshold`` facts of one job queue, category and
   severity) as one digest, the rest one by one (threaded per job with a bot token);
7. a Slack failure (any answer but HTTP 200 ``ok``, no time left, not configured) falls back to
   the on-call topic, unless the fact went there already;
8. each delivered channel is recorded at once; a fact with a channel neither delivered nor
   covered by the fallback has its claim released and its record fails, so SQS retries just it and
   only its missing channels.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, Protocol

from batchpilot.alerts.facts import AlertFact, fact_from_job_event, fact_from_own_event
from batchpilot.alerts.grouping import burst_key, split_bursts
from batchpilot.alerts.policy import Channel, RoutingPolicy, Severity
from batchpilot.alerts.render import (
    SlackMessage,
    SnsMessage,
    slack_digest,
    slack_message,
    sns_digest,
    sns_message,
)
from batchpilot.alerts.severity import Decision, decide
from batchpilot.shared.events import InvalidEventError, UnsupportedEventError, parse_event
from batchpilot.shared.own_events import SOURCE as OWN_SOURCE
from batchpilot.shared.own_events import parse_own_event

__all__ = [
    "SLACK_RESERVE_SECONDS",
    "AlertDispatcher",
    "AlertStore",
    "BatchResult",
    "Claim",
    "OnCallTopic",
    "Outcome",
    "RecordOutcome",
    "SlackChannel",
    "SlackResult",
    "fact_from_body",
    "fact_from_raw",
]

SLACK_RESERVE_SECONDS = 5.0
"""Seconds of the invocation kept for the on-call fallback and the state writes: Slack is not
attempted (nor a 429 waited out) when less than this would remain."""

_JOB_EVENT_KINDS = frozenset({"state-change", "queue-blocked", "preemption-started", "preemption-completed"})


class Outcome(StrEnum):
    """What happened to one record. Only ``failed`` makes SQS deliver it again."""

    PROCESSED = "processed"
    IGNORED = "ignored"  # a detail-type the alerts function does not handle
    INVALID = "invalid"  # malformed: reported and counted, not retried (it would fail again)
    FAILED = "failed"  # a notification could not be delivered (or the state store failed): retried


@dataclass
class RecordOutcome:
    """The result for one SQS record.

    Attributes:
        message_id: the SQS ``messageId``.
        outcome: see :class:`Outcome`.
        event_id, detail_type: from the envelope, for logs (never the event itself).
        severity: the decided severity, when the event was a fact.
        suppressed: why nothing was sent although the fact is notifiable: ``duplicate`` (sent
            before, or a copy in the same batch) or ``stale`` (older than the job's recorded state).
        channels: channels that delivered the fact in this invocation (``sns``, ``slack``;
            ``sns`` also when it stood in for Slack).
        error: what went wrong (invalid, ignored or failed records).
    """

    message_id: str
    outcome: Outcome
    event_id: str | None = None
    detail_type: str | None = None
    severity: Severity | None = None
    suppressed: str | None = None
    channels: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class BatchResult:
    """Everything one batch did.

    Attributes:
        records: one outcome per input record, in input order.
        sent: ``(channel, severity)`` per message delivered (a digest counts once).
        failed: ``(channel, reason)`` per failed delivery (reason: Slack's error such as
            ``invalid_blocks``, ``http_500``, ``rate_limited``, ``deadline``, or the SNS error code).
    """

    records: list[RecordOutcome]
    sent: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    def by_message_id(self) -> dict[str, RecordOutcome]:
        """``{messageId: outcome}``."""
        return {r.message_id: r for r in self.records}


@dataclass(frozen=True, slots=True)
class Claim:
    """The result of claiming a fact: ``new`` (first time), ``resumed`` (an earlier attempt's lease
    expired; ``delivered`` lists the channels it already delivered), ``sent`` (delivered before:
    a duplicate), ``busy`` (another invocation holds a live lease)."""

    state: Literal["new", "resumed", "sent", "busy"]
    delivered: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class SlackResult:
    """One Slack post: ``delivered`` only for HTTP 200 ``ok``; ``reason`` a short error code
    otherwise; ``ts`` the message timestamp (bot token mode, for threads)."""

    delivered: bool
    reason: str | None = None
    ts: str | None = None


class AlertStore(Protocol):
    """Per-job state and per-fact delivery records (DynamoDB:
    :class:`~batchpilot.io.dynamodb.alerts.DynamoAlertStore`)."""

    def observe(self, fact: AlertFact, now: float) -> bool:
        """Record ``fact`` as the job's latest state; False when it is older than what is recorded
        (or a non-terminal fact after a terminal one)."""
        ...

    def claim(self, fact: AlertFact, severity: Severity, now: float, lease_until: float) -> Claim:
        """Claim the fact for delivery until ``lease_until`` (epoch seconds)."""
        ...

    def mark_delivered(self, fact: AlertFact, channel: str, *, done: bool, now: float) -> None:
        """Record one delivered channel; ``done`` marks the fact ``sent``."""
        ...

    def release(self, fact: AlertFact) -> None:
        """End the lease now (delivery failed; the retry may claim it at once)."""
        ...

    def thread_of(self, subject: str) -> str | None:
        """The Slack thread ``ts`` of a job, if a message about it was posted before."""
        ...

    def save_thread(self, subjects: Sequence[str], thread_ts: str, now: float) -> None:
        """Remember the thread of these jobs (a job and the jobs that continue it)."""
        ...


class OnCallTopic(Protocol):
    """The on-call SNS topic (:class:`~batchpilot.io.sns.SnsPublisher`)."""

    def publish(self, messages: Sequence[SnsMessage]) -> list[str | None]:
        """Publish; one entry per message: None when published, else the error code."""
        ...


class SlackChannel(Protocol):
    """Slack (:class:`~batchpilot.alerts.channels.slack.SlackNotifier`)."""

    @property
    def configured(self) -> bool:
        """A webhook or a bot token is configured."""
        ...

    @property
    def threads(self) -> bool:
        """Messages can be threaded (bot token with ``chat.postMessage``)."""
        ...

    def post(
        self, message: SlackMessage, *, thread_ts: str | None, remaining: Callable[[], float]
    ) -> SlackResult:
        """Post one message; ``remaining()`` is the seconds left for waiting out a 429."""
        ...


def fact_from_body(body: str) -> AlertFact:
    """Decode an SQS body (an EventBridge event as JSON) into its fact: a job event from AWS or one
    of batchpilot's own events (``source: batchpilot``).

    Raises:
        UnsupportedEventError: a detail-type the alerts function does not handle.
        InvalidEventError: not JSON, or not a valid event.
    """
    return fact_from_raw(_json(body))


def _json(body: str) -> object:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise InvalidEventError("SQS message body is not valid JSON") from None


def fact_from_raw(raw: object) -> AlertFact:
    """:func:`fact_from_body` for an already decoded event."""
    if isinstance(raw, dict) and raw.get("source") == OWN_SOURCE:
        return fact_from_own_event(parse_own_event(raw), raw)
    return fact_from_job_event(parse_event(raw))


@dataclass(eq=False)
class _Entry:
    outcome: RecordOutcome
    fact: AlertFact
    decision: Decision
    requested: frozenset[str] = frozenset()
    satisfied: set[str] = field(default_factory=set)
    done: bool = False

    @property
    def severity(self) -> Severity:
        return self.decision.severity

    def pending(self, channel: str) -> bool:
        return not self.done and channel in self.requested and channel not in self.satisfied


def _error(exc: BaseException) -> str:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code") if hasattr(exc, "response") else None
    return f"{type(exc).__name__}{f' ({code})' if code else ''}"


class AlertDispatcher:
    """Delivers the facts of SQS batches (see the module docstring).

    Args:
        policy: the routing policy.
        store: per-job state and delivery records.
        topic: the on-call SNS topic.
        slack: Slack (may be unconfigured: everything then goes to the topic).
        clock: epoch seconds (``time.time``).
        lease_margin: seconds a claim outlives the invocation's remaining time.
    """

    def __init__(
        self,
        policy: RoutingPolicy,
        store: AlertStore,
        topic: OnCallTopic,
        slack: SlackChannel,
        *,
        clock: Callable[[], float] = time.time,
        lease_margin: float = 30.0,
    ) -> None:
        self.policy = policy
        self.store = store
        self.topic = topic
        self.slack = slack
        self.clock = clock
        self.lease_margin = lease_margin

    # ------------------------------------------------------------------------------ entry point
    def process(self, records: Sequence[tuple[str, str]], remaining: Callable[[], float]) -> BatchResult:
        """Handle one batch of ``(messageId, body)`` records.

        Args:
            records: the SQS records, in order.
            remaining: seconds left in the invocation (``context.get_remaining_time_in_millis() / 1000``).

        Returns:
            A :class:`BatchResult` (one outcome per record, in order). Never raises for bad input
            or a failing channel: those are outcomes.
        """
        result = BatchResult(records=[])
        entries: list[_Entry] = []
        for message_id, body in records:
            outcome = RecordOutcome(message_id, Outcome.PROCESSED)
            result.records.append(outcome)
            try:
                raw = _json(body)
                if isinstance(raw, dict) and isinstance(raw.get("id"), str):
                    outcome.event_id = raw["id"]
                fact = fact_from_raw(raw)
            except UnsupportedEventError as exc:
                outcome.outcome, outcome.error = Outcome.IGNORED, str(exc)
                outcome.event_id, outcome.detail_type = exc.event_id or outcome.event_id, exc.detail_type
                continue
            except InvalidEventError as exc:
                outcome.outcome, outcome.error = Outcome.INVALID, str(exc)
                outcome.event_id, outcome.detail_type = exc.event_id or outcome.event_id, exc.detail_type
                continue
            decision = decide(fact, self.policy)
            outcome.detail_type, outcome.severity = fact.detail_type, decision.severity
            entries.append(_Entry(outcome, fact, decision, frozenset(c.value for c in decision.channels)))

        active = self._drop_in_batch_copies(entries)
        active = self._observe(active)
        active = self._claim(active, remaining)
        self._deliver_sns(active, result)
        self._deliver_slack(active, result, remaining)
        for entry in active:
            if entry.done or entry.satisfied >= entry.requested:
                continue
            entry.outcome.outcome = Outcome.FAILED
            missing = ", ".join(sorted(entry.requested - entry.satisfied))
            entry.outcome.error = entry.outcome.error or f"not delivered to {missing}"
            with contextlib.suppress(Exception):  # else the lease simply runs out
                self.store.release(entry.fact)
        return result

    # ---------------------------------------------------------------------------------- stages
    def _drop_in_batch_copies(self, entries: list[_Entry]) -> list[_Entry]:
        seen: set[tuple[str, str]] = set()
        kept = []
        for entry in entries:
            if entry.fact.key in seen and entry.decision.notify:
                entry.outcome.suppressed = "duplicate"
                continue
            seen.add(entry.fact.key)
            kept.append(entry)
        return kept

    def _observe(self, entries: list[_Entry]) -> list[_Entry]:
        """Record job states (terminal and newer first); returns the entries still to notify."""
        watched = [
            e
            for e in entries
            if e.fact.event_kind in _JOB_EVENT_KINDS
            and not e.fact.created_by_batch
            and (e.fact.terminal or e.decision.notify)
        ]
        watched.sort(key=lambda e: (e.fact.terminal, e.fact.progress or ""), reverse=True)
        now = self.clock()
        stale: set[int] = set()
        for entry in watched:
            try:
                if not self.store.observe(entry.fact, now):
                    stale.add(id(entry))
                    if entry.decision.notify:
                        entry.outcome.suppressed = "stale"
            except Exception as exc:
                stale.add(id(entry))
                entry.outcome.outcome = Outcome.FAILED
                entry.outcome.error = f"state store: {_error(exc)}"
        return [e for e in entries if e.decision.notify and id(e) not in stale]

    def _claim(self, entries: list[_Entry], remaining: Callable[[], float]) -> list[_Entry]:
        now = self.clock()
        lease_until = now + max(0.0, remaining()) + self.lease_margin
        claimed = []
        for entry in entries:
            try:
                claim = self.store.claim(entry.fact, entry.severity, now, lease_until)
            except Exception as exc:
                entry.outcome.outcome = Outcome.FAILED
                entry.outcome.error = f"state store: {_error(exc)}"
                continue
            if claim.state == "sent":
                entry.outcome.suppressed = "duplicate"
                continue
            if claim.state == "busy":
                entry.outcome.outcome = Outcome.FAILED
                entry.outcome.error = "being delivered by another invocation (lease held)"
                continue
            entry.satisfied |= set(claim.delivered) & entry.requested
            claimed.append(entry)
        return claimed

    def _mark(self, entry: _Entry, channel: str, actual: str) -> None:
        entry.satisfied.add(channel)
        if actual not in entry.outcome.channels:
            entry.outcome.channels.append(actual)
        done = entry.satisfied >= entry.requested
        try:
            self.store.mark_delivered(entry.fact, channel, done=done, now=self.clock())
        except Exception as exc:  # delivered but not recorded: a retry may repeat it; say so
            entry.outcome.error = f"delivered but not recorded: {_error(exc)}"
        entry.done = done

    def _publish(
        self,
        units: list[tuple[list[_Entry], SnsMessage, str]],
        result: BatchResult,
    ) -> None:
        """Publish ``(entries, message, channel satisfied)`` units in one batched call."""
        if not units:
            return
        try:
            errors = self.topic.publish([message for _, message, _ in units])
        except Exception as exc:  # the adapter reports per message; this is a bug or a crash
            errors = [_error(exc)] * len(units)
        for (group, message, channel), error in zip(units, errors, strict=True):
            severity = message.attributes.get("severity", "unknown")
            if error is None:
                result.sent.append((Channel.SNS.value, severity))
                for entry in group:
                    self._mark(entry, channel, Channel.SNS.value)
            else:
                result.failed.append((Channel.SNS.value, error))
                for entry in group:
                    entry.outcome.error = f"sns: {error}"

    def _deliver_sns(self, entries: list[_Entry], result: BatchResult) -> None:
        wanted = [e for e in entries if e.pending(Channel.SNS.value)]
        bursts: list[list[_Entry]] = []
        singles = wanted
        if self.policy.sns_grouping == "group":
            bursts, singles = split_bursts(
                wanted, lambda e: burst_key(e.fact, e.severity), self.policy.digest_threshold
            )
        units = [
            (group, sns_digest([e.fact for e in group], group[0].severity, group[0].decision.why), "sns")
            for group in bursts
        ]
        units += [([e], sns_message(e.fact, e.severity, e.decision.why), "sns") for e in singles]
        self._publish(units, result)

    def _deliver_slack(
        self, entries: list[_Entry], result: BatchResult, remaining: Callable[[], float]
    ) -> None:
        wanted = [e for e in entries if e.pending(Channel.SLACK.value)]
        if not wanted:
            return
        bursts, singles = split_bursts(
            wanted, lambda e: burst_key(e.fact, e.severity), self.policy.digest_threshold
        )
        fallbacks: list[tuple[list[_Entry], SnsMessage, str]] = []
        units: list[list[_Entry]] = [*bursts, *([e] for e in singles)]
        units.sort(key=lambda group: entries.index(group[0]))

        def budget() -> float:
            return remaining() - SLACK_RESERVE_SECONDS

        for group in units:
            first = group[0]
            digest = len(group) > 1
            if digest:
                message = slack_digest(
                    [e.fact for e in group], first.severity, first.decision.why, self.policy.digest_max_items
                )
            else:
                message = slack_message(first.fact, first.severity, first.decision.why)
            thread_ts: str | None = None
            if not self.slack.configured:
                outcome = SlackResult(False, "not_configured")
            elif budget() <= 0:
                outcome = SlackResult(False, "deadline")
            else:
                thread_ts = self._thread_for(first) if not digest and self.slack.threads else None
                try:
                    outcome = self.slack.post(message, thread_ts=thread_ts, remaining=budget)
                except Exception as exc:  # adapters report failures as results; keep the batch alive
                    outcome = SlackResult(False, type(exc).__name__)
            if outcome.delivered:
                result.sent.append((Channel.SLACK.value, first.severity.value))
                for entry in group:
                    self._mark(entry, Channel.SLACK.value, Channel.SLACK.value)
                if outcome.ts and not digest and self.slack.threads:
                    self._remember_thread(first, thread_ts, outcome.ts)
                continue
            reason = outcome.reason or "unknown"
            if reason != "not_configured":
                result.failed.append((Channel.SLACK.value, reason))
            # The on-call topic stands in for Slack, except for facts it already carries.
            covered = [e for e in group if Channel.SNS.value in e.requested]
            for entry in covered:
                if Channel.SNS.value in entry.satisfied:
                    self._mark(entry, Channel.SLACK.value, Channel.SNS.value)
                else:
                    entry.outcome.error = entry.outcome.error or f"slack: {reason}"
            rest = [e for e in group if Channel.SNS.value not in e.requested]
            if not rest:
                continue
            if len(rest) > 1:
                fallback = sns_digest(
                    [e.fact for e in rest], rest[0].severity, rest[0].decision.why, fallback_reason=reason
                )
            else:
                fallback = sns_message(
                    rest[0].fact, rest[0].severity, rest[0].decision.why, fallback_reason=reason
                )
            fallbacks.append((rest, fallback, Channel.SLACK.value))
        self._publish(fallbacks, result)

    def _thread_for(self, entry: _Entry) -> str | None:
        try:
            return self.store.thread_of(entry.fact.thread_subject)
        except Exception:  # a missing thread is only cosmetic: post at top level
            return None

    def _remember_thread(self, entry: _Entry, thread_ts: str | None, ts: str) -> None:
        # A new top-level message starts the job's thread; a reply only links the jobs that
        # continue it (the new job of a resubmission) to the existing thread.
        subjects = list(entry.fact.related_subjects)
        if thread_ts is None:
            subjects.insert(0, entry.fact.thread_subject)
        if not subjects:
            return
        with contextlib.suppress(Exception):  # cosmetic: later messages start a new thread
            self.store.save_thread(subjects, thread_ts or ts, self.clock())
