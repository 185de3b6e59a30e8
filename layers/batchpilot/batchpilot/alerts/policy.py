"""The routing policy: which facts are critical, warning or info, and where each severity goes.

A policy is a JSON document validated by pydantic at cold start (unknown keys are errors, so a typo
never silently disables a rule). An empty document (``{}``) is the built-in default, which needs no
editing: see :mod:`batchpilot.alerts.severity` for the default severity table.

How a fact's severity is decided, in order:

1. the default table (:func:`batchpilot.alerts.severity.default_severity`);
2. ``mark_critical``: a fact at ``warning`` whose job queue, share identifier or quota share is
   listed becomes ``critical`` (production queues and shares page);
3. ``never_page``: a fact at ``critical`` whose job queue, share identifier or quota share is listed
   becomes ``warning`` (research shares only post);
4. ``rules``, in order: every rule whose ``match`` holds sets the severity (a later rule sees the
   severity an earlier one set, through ``match.severity``).

``slack_channels`` then may send a fact's Slack message to another channel than the deployment's
(a team's own channel: the last matching route wins; Slack bot token mode only).

``owner_mentions`` says which facts mention the job's owner in chat (the owner comes from a tag
named by the ``OwnerTagKey`` parameter: :mod:`batchpilot.alerts.owners`); left out, the defaults
of :func:`batchpilot.alerts.owners.mentions_owner` apply (their job failed and will not be
recovered, was resubmitted, or is starving); ``[]`` mentions nobody.

``silent`` means "no notification". Then ``channels`` maps the severity to the channels (``sns``:
the on-call topic; ``slack``; ``teams``). When the document leaves ``channels`` out, the chat
channels of the defaults are the ones the deployment configures (:meth:`RoutingPolicy.for_chat`).

Example (the seed use case)::

    {
      "mark_critical": {"share_identifiers": ["prod*"]},
      "never_page": {"share_identifiers": ["research*"]},
      "rules": [
        {"match": {"job_queue": ["ml-training-highpri"], "category": ["TIMEOUT"]}, "severity": "critical"},
        {"match": {"detail_type": ["Batch Job State Change"], "status": ["SUCCEEDED"],
                   "job_queue": ["nightly-eval"]}, "severity": "info"}
      ],
      "slack_channels": [{"match": {"share_identifier": ["nlp*"]}, "slack_channel": "#team-nlp-training"}],
      "channels": {"critical": ["sns", "slack"], "warning": ["slack"], "info": ["slack"]},
      "digest_threshold": 5
    }
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = [
    "SLACK_CHANNEL_PATTERN",
    "Channel",
    "Match",
    "PolicyError",
    "RoutingPolicy",
    "Rule",
    "Selector",
    "Severity",
    "SlackRoute",
    "SnsGrouping",
    "load_policy",
]


class Severity(StrEnum):
    """How urgent a fact is. ``silent`` sends nothing."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"
    SILENT = "silent"


class Channel(StrEnum):
    """Where a notification goes: the on-call SNS topic (``sns``) or a chat channel.

    Each chat channel is delivered by the adapter registered under its name
    (:class:`batchpilot.alerts.registry.ChannelRegistry`, built from the channels that register
    themselves: :func:`batchpilot.alerts.channels.registered`); the on-call topic is also the fallback
    of every chat channel. The value is the policy's name, the ``Channel`` metric dimension and
    the name recorded in the StateTable.
    """

    SNS = "sns"
    SLACK = "slack"
    TEAMS = "teams"

    @property
    def label(self) -> str:
        """The name people read (``Slack``, ``Teams``)."""
        return "on-call topic" if self is Channel.SNS else self.value.capitalize()


class SnsGrouping(StrEnum):
    """How facts routed to the on-call topic are published."""

    EACH = "each"
    """Every fact on its own."""
    GROUP = "group"
    """A burst (a group above ``digest_threshold``) as one message."""
    PAGE_THEN_DIGEST = "page-then-digest"
    """The default: a burst's first fact as its own page, the rest of the burst as one digest; a
    burst is a group of facts with one job queue, category and severity in one batch (the alerts
    queue's batching window)."""


class PolicyError(ValueError):
    """The routing policy document is not valid; the message names the field (``rules.0.severity``)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Patterns = list[str]


def _check_patterns(value: list[str] | None) -> list[str] | None:
    if value is None:
        return None
    if not value:
        raise ValueError("must list at least one pattern (leave the field out to match anything)")
    for item in value:
        if not item.strip():
            raise ValueError("patterns must not be empty")
    return value


def _any(patterns: list[str] | None, value: str | None) -> bool:
    """True when ``patterns`` is None (not given) or one of them matches ``value`` (case-sensitive glob)."""
    if patterns is None:
        return True
    if value is None:
        return False
    return any(fnmatchcase(value, pattern) for pattern in patterns)


_PATTERN_FIELDS = (
    "detail_type",
    "job_kind",
    "status",
    "category",
    "job_queue",
    "share_identifier",
    "quota_share",
    "reason_code",
    "alarm_name",
)
"""The fields of :class:`Match` that hold glob patterns, each matched against the fact's value."""


class Match(_Strict):
    """Conditions of a rule. Every given field must hold; each is a list of glob patterns
    (``*``, ``?``, ``[...]``, case-sensitive), any of which may match. A field that is given never
    matches a fact without that value (e.g. ``quota_share`` on a FIFO queue's job).

    Attributes:
        detail_type: the event's ``detail-type`` (``Batch Service Job State Change``,
            ``Recovery Skipped``, ...).
        job_kind: ``container-job``, ``service-job`` or ``training-job``.
        status: Batch status (``FAILED``), SageMaker ``TrainingJobStatus`` (``Failed``) or a
            CloudWatch alarm's new state (``ALARM``, ``OK``, ``INSUFFICIENT_DATA``).
        category: ``CAPACITY``, ``SPOT_INTERRUPTION``, ... (the closed set of
            :class:`batchpilot.shared.classification.Category`).
        job_queue: the job queue *name*.
        share_identifier: the fair-share identifier.
        quota_share: the quota share name.
        reason_code: ``skip_reason`` of Recovery Skipped, ``limit_reason`` of Capacity Limited,
            ``error_code`` of Recovery Failed.
        alarm_name: a CloudWatch alarm's name (``batchpilot/<stack>/JobQueueFailureRateAlarm``).
        severity: the severity decided so far (``critical``, ``warning``, ``info``, ``silent``).
    """

    detail_type: Patterns | None = None
    job_kind: Patterns | None = None
    status: Patterns | None = None
    category: Patterns | None = None
    job_queue: Patterns | None = None
    share_identifier: Patterns | None = None
    quota_share: Patterns | None = None
    reason_code: Patterns | None = None
    alarm_name: Patterns | None = None
    severity: list[Severity] | None = None

    _check = field_validator(*_PATTERN_FIELDS)(_check_patterns)

    def holds(self, values: dict[str, str | None], severity: Severity) -> bool:
        """True when every given condition holds for the fact's ``values`` (keys as the fields)."""
        if self.severity is not None and severity not in self.severity:
            return False
        return all(_any(getattr(self, name), values.get(name)) for name in _PATTERN_FIELDS)


SLACK_CHANNEL_PATTERN = r"^#?[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$"
"""A Slack channel id (``C0123ABCD``) or name (``#team-nlp-training``): what ``chat.postMessage``
takes as ``channel``."""


class Rule(_Strict):
    """``match`` → ``severity``. ``description`` is for people reading the policy."""

    match: Match = Field(default_factory=Match)
    severity: Severity
    description: str | None = Field(default=None, max_length=500)


class SlackRoute(_Strict):
    """``match`` → the Slack channel a fact is posted to instead of ``BATCHPILOT_SLACK_CHANNEL``.

    Attributes:
        match: the conditions (:class:`Match`); ``match.severity`` is the fact's final severity
            (routes apply after ``rules``).
        slack_channel: a channel id (``C0123ABCD``) or name (``#team-nlp-training``), as
            ``chat.postMessage`` takes it. Slack bot token mode only: an incoming webhook posts to
            the one channel it was created for, so the alerts settings refuse a policy with routes
            when no bot token is configured.
        description: free text.
    """

    match: Match = Field(default_factory=Match)
    slack_channel: str = Field(pattern=SLACK_CHANNEL_PATTERN)
    description: str | None = Field(default=None, max_length=500)


class Selector(_Strict):
    """Job queues, share identifiers or quota shares (glob patterns); a fact is selected when any
    list has a pattern matching its value."""

    job_queues: Patterns = Field(default_factory=list)
    share_identifiers: Patterns = Field(default_factory=list)
    quota_shares: Patterns = Field(default_factory=list)

    def selects(self, job_queue: str | None, share_identifier: str | None, quota_share: str | None) -> bool:
        """True when one of the three values matches one of its patterns."""
        return (
            (bool(self.job_queues) and _any(self.job_queues, job_queue))
            or (bool(self.share_identifiers) and _any(self.share_identifiers, share_identifier))
            or (bool(self.quota_shares) and _any(self.quota_shares, quota_share))
        )


def _default_channels() -> dict[Severity, list[Channel]]:
    return {
        Severity.CRITICAL: [Channel.SNS, Channel.SLACK],
        Severity.WARNING: [Channel.SLACK],
        Severity.INFO: [Channel.SLACK],
    }


class RoutingPolicy(_Strict):
    """The whole routing policy (see the module docstring for how severities are decided).

    Attributes:
        version: always 1.
        rules: applied in order after the defaults, ``mark_critical`` and ``never_page``.
        slack_channels: routes sending matching facts to their own Slack channel
            (:class:`SlackRoute`; the last matching route wins; bot token mode only).
        mark_critical: warning → critical for these job queues / share identifiers / quota shares.
        never_page: critical → warning for these (applied after ``mark_critical``).
        channels: severity → channels. Every severity but ``silent`` must be present (an empty
            list is allowed and sends nothing). A fact routed to a chat channel that fails goes to
            the on-call topic instead, with its ``severity`` message attribute, so pager
            subscriptions should filter on ``severity``; so does a fact none of whose chat
            channels is configured.
        digest_threshold: within one batch, a group of more than this many facts with the same job
            queue, category and severity goes to each chat channel as one digest message (1-1000).
        digest_max_items: jobs listed by name in a digest; the rest are counted ("and N more").
        sns_grouping: ``page-then-digest`` (default) publishes a burst's first fact on its own
            and the rest of the burst as one digest; ``each`` publishes every fact routed to the
            on-call topic on its own; ``group`` publishes a burst (a group above
            ``digest_threshold``) as one message.
        owner_mentions: the facts whose chat message mentions the job's owner: any of these
            matches (:class:`Match`, ``match.severity`` the final severity); None (left out): the
            defaults (:func:`batchpilot.alerts.owners.mentions_owner`); ``[]``: never.
        recovery_expected: the recovery function is deployed: failures it resubmits (see
            :func:`batchpilot.alerts.facts.recovery_will_handle`) are ``info`` and its outcome
            event decides. False makes those failures ``critical`` like any other.
    """

    version: Literal[1] = 1
    rules: list[Rule] = Field(default_factory=list, max_length=200)
    slack_channels: list[SlackRoute] = Field(default_factory=list, max_length=200)
    mark_critical: Selector = Field(default_factory=Selector)
    never_page: Selector = Field(default_factory=Selector)
    channels: dict[Severity, list[Channel]] = Field(default_factory=_default_channels)
    digest_threshold: int = Field(default=5, ge=1, le=1000)
    digest_max_items: int = Field(default=20, ge=1, le=40)
    sns_grouping: SnsGrouping = SnsGrouping.PAGE_THEN_DIGEST
    recovery_expected: bool = True
    owner_mentions: list[Match] | None = Field(default=None, max_length=200)

    @field_validator("channels")
    @classmethod
    def _every_severity_routed(cls, value: dict[Severity, list[Channel]]) -> dict[Severity, list[Channel]]:
        if Severity.SILENT in value:
            raise ValueError("silent sends nothing: leave it out of channels")
        missing = [s.value for s in (Severity.CRITICAL, Severity.WARNING, Severity.INFO) if s not in value]
        if missing:
            raise ValueError(f"missing severities {', '.join(missing)} (use [] to send nothing)")
        for severity, channels in value.items():
            if len(set(channels)) != len(channels):
                raise ValueError(f"{severity.value}: a channel is listed twice")
        return value

    def destination(self, channel: Channel, values: dict[str, str | None], severity: Severity) -> str | None:
        """Where in ``channel`` a fact goes instead of the channel's configured destination: the
        ``slack_channel`` of the last of ``slack_channels`` whose ``match`` holds for the fact's
        ``values`` (keys as :class:`Match`'s fields) and final ``severity``; None for any other
        channel, or when no route matches."""
        if channel is not Channel.SLACK:
            return None
        found: str | None = None
        for route in self.slack_channels:
            if route.match.holds(values, severity):
                found = route.slack_channel
        return found

    def channels_for(self, severity: Severity) -> tuple[Channel, ...]:
        """The channels of ``severity`` (empty for ``silent``)."""
        if severity is Severity.SILENT:
            return ()
        return tuple(self.channels.get(severity, ()))

    def for_chat(self, chat: Sequence[Channel]) -> RoutingPolicy:
        """This policy with the default routes pointed at the chat channels a deployment configures.

        When the document gave no ``channels``, every ``slack`` of the defaults becomes ``chat``
        (in that order): a deployment with Teams only posts to Teams, one with both posts to both.
        An explicit ``channels``, or no chat channel at all, leaves the policy as it is (facts then
        go to the on-call topic: see ``channels``).
        """
        if "channels" in self.model_fields_set or not chat or tuple(chat) == (Channel.SLACK,):
            return self
        routes = {
            severity: [c for channel in channels for c in (chat if channel is Channel.SLACK else (channel,))]
            for severity, channels in self.channels.items()
        }
        return self.model_copy(update={"channels": routes})


def load_policy(text: str | None) -> RoutingPolicy:
    """Parse and validate a routing policy JSON document; empty or None gives the defaults.

    Raises:
        PolicyError: not JSON, not an object, or a field is invalid. The message names each
            failing field by its path (``rules.0.match.category``) and never echoes values.
    """
    if text is None or not text.strip():
        return RoutingPolicy()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise PolicyError(f"not valid JSON (line {getattr(exc, 'lineno', '?')})") from None
    if not isinstance(data, dict):
        raise PolicyError("must be a JSON object")
    try:
        return RoutingPolicy.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<policy>'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)[:8]
        )
        raise PolicyError(problems) from None
