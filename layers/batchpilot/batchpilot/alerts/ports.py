"""The alerts service's ports: what it needs from the outside world, as ``typing.Protocol`` s.

Implemented by :class:`batchpilot.io.dynamodb.alerts.DynamoAlertStore` (:class:`AlertStore`),
:class:`batchpilot.io.sns.SnsPublisher` (:class:`OnCallTopic`), the chat adapters of
:mod:`batchpilot.alerts.channels` (:class:`Notifier`) and :class:`batchpilot.io.secrets.SecretSource`
(:class:`SecretReader`). Tests implement them too (a recording notifier, a failing store).

Times are timezone-aware UTC datetimes (:mod:`batchpilot.shared.clock`); durations are seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, TypeVar

from batchpilot.alerts.facts import JobContext
from batchpilot.alerts.policy import Channel, Severity

if TYPE_CHECKING:
    from datetime import datetime

    from batchpilot.alerts.facts import AlertFact
    from batchpilot.alerts.render import SnsMessage

__all__ = [
    "AlertStore",
    "Claim",
    "ClaimState",
    "Delivery",
    "JobContext",
    "JobDirectory",
    "Notice",
    "Notifier",
    "OnCallTopic",
    "SecretReader",
    "TimeLeft",
]

TimeLeft = Callable[[], float]
"""Seconds a channel may still spend (waiting out a 429 included), read at each call."""

M = TypeVar("M")


class ClaimState(StrEnum):
    """The result of claiming a fact for delivery."""

    NEW = "new"
    """First time: deliver to every channel."""
    RESUMED = "resumed"
    """An earlier attempt's lease expired: deliver to the channels it did not reach."""
    SENT = "sent"
    """Delivered before: a duplicate."""
    BUSY = "busy"
    """Another invocation holds a live lease: retry later."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A claim's state and, for ``resumed`` (and ``busy``), the channels already delivered."""

    state: ClaimState
    delivered: frozenset[Channel] = frozenset()


@dataclass(frozen=True, slots=True)
class Notice:
    """What one chat message says: one fact, or a burst of facts (a digest).

    Attributes:
        facts: the facts, in batch order; more than one is a digest.
        severity: their severity (a burst shares it).
        why: the sentence saying which rule decided.
        max_items: jobs listed by name in a digest (the rest are counted).
        destination: where in the channel to post instead of its configured destination (a Slack
            channel a route of the policy names: ``RoutingPolicy.slack_channels``), or None. An
            adapter that cannot post elsewhere fails the post (the fact falls back to the on-call
            topic).
    """

    facts: tuple[AlertFact, ...]
    severity: Severity
    why: str
    max_items: int = 20
    destination: str | None = None

    @property
    def digest(self) -> bool:
        """True for a burst of more than one fact."""
        return len(self.facts) > 1


@dataclass(frozen=True, slots=True)
class Delivery:
    """One chat post's result.

    Attributes:
        delivered: the channel accepted the message (its documented success answer only).
        reason: otherwise a short, low-cardinality reason (``rate_limited``, ``http_500``,
            ``timeout``, ``invalid_blocks``, ...): a metric dimension, never free text.
        thread: the posted message's id for replies (Slack ``ts``), when the channel threads.
        owner_problem: why a message that should mention its job's owner did not (a
            :class:`~batchpilot.alerts.owners.OwnerProblem` value, or ``lookup_failed:<reason>``
            with a reason as short as ``reason``), None when it did or had no one to mention.
            Never a failure: the message went (or failed) as it would without an owner.
    """

    delivered: bool
    reason: str | None = None
    thread: str | None = None
    owner_problem: str | None = None


class Notifier(Protocol[M]):
    """A chat channel (Slack, Teams, ...): renders a :class:`Notice` in its own format and posts it.

    ``M`` is the channel's message type. Adapters never raise from :meth:`post`: every failure is a
    :class:`Delivery` with a reason; the service then falls back to the on-call topic.
    """

    @property
    def name(self) -> Channel:
        """The channel this adapter delivers (the routing policy's name for it)."""
        ...

    @property
    def threads(self) -> bool:
        """Single-fact messages about one job can be posted as replies in one thread."""
        ...

    def render(self, notice: Notice) -> M:
        """The message for ``notice``, within the channel's documented size limits."""
        ...

    def post(self, message: M, *, thread: str | None, time_left: TimeLeft) -> Delivery:
        """Post ``message`` (a reply in ``thread`` when given); ``time_left()`` bounds any wait
        (a 429's ``Retry-After``) and the request timeouts. Never raises."""
        ...


class OnCallTopic(Protocol):
    """The on-call SNS topic (:class:`~batchpilot.io.sns.SnsPublisher`)."""

    def publish(self, messages: Sequence[SnsMessage]) -> list[str | None]:
        """Publish (SNS ``PublishBatch``, 10 per call); one entry per message: None when
        published, else the SNS error code (``InvalidParameter``, ``NotFound``, ...)."""
        ...


class AlertStore(Protocol):
    """Per-job state and per-fact delivery records (DynamoDB:
    :class:`~batchpilot.io.dynamodb.alerts.DynamoAlertStore`). Every method may raise the
    store's error (botocore ``ClientError`` after retries); the service turns it into a failed
    record that SQS delivers again."""

    def observe(self, fact: AlertFact, now: datetime) -> bool:
        """Record ``fact`` as the job's latest state; False when it is older than what is recorded
        (or a non-terminal fact after a terminal one)."""
        ...

    def claim(self, fact: AlertFact, severity: Severity, now: datetime, lease_until: datetime) -> Claim:
        """Claim the fact for delivery until ``lease_until``."""
        ...

    def mark_delivered(self, fact: AlertFact, channel: Channel, *, done: bool, now: datetime) -> None:
        """Record one delivered channel; ``done`` marks the fact ``sent``."""
        ...

    def release(self, fact: AlertFact) -> None:
        """End the lease now (delivery failed; the retry may claim it at once)."""
        ...

    def thread_of(self, channel: Channel, subject: str) -> str | None:
        """The thread id of ``subject`` in ``channel``, if a message about it was posted before."""
        ...

    def save_thread(
        self, channel: Channel, subjects: Sequence[str], thread: str, now: datetime, *, replace: bool = False
    ) -> None:
        """Remember ``thread`` for these subjects (a job and the jobs that continue it): for those
        that have none yet, or, with ``replace``, in place of the one recorded (an alarm that
        fires again opens a new thread)."""
        ...


class SecretReader(Protocol):
    """Secrets Manager, cached (:class:`~batchpilot.io.secrets.SecretSource`)."""

    def get(self, secret_id: str) -> str:
        """The secret's string value (``GetSecretValue``). Raises when it cannot be read."""
        ...


class JobDirectory(Protocol):
    """Looks a service job up by ARN (AWS Batch DescribeServiceJob, one call)."""

    def lookup(self, job_arn: str) -> JobContext | None:
        """The job's name, queue, share and priority; None when AWS does not describe it or the
        call fails (the alert then goes out without them). Never raises."""
        ...
