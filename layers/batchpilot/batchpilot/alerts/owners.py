"""Owners: who a job belongs to (a tag on the job or training job), and which facts mention them.

Pure. The tag is named by the deployment (template parameter ``OwnerTagKey``,
``BATCHPILOT_OWNER_TAG_KEY``; empty: owners are off). Where its value comes from:

- ``Batch Job State Change`` / ``Batch Job Queue Blocked``: ``detail.tags`` (the job's tags, in
  DescribeJobs' shape; absent when the job has none);
- ``SageMaker Training Job State Change``: ``Tags`` (an object, or a list of ``{Key, Value}``:
  :data:`batchpilot.shared.events.TagMap` accepts both);
- a service job's events carry no tags (they resemble DescribeServiceJob *without* ``tags``), nor do
  batchpilot's own events (``Job Resubmitted``, ``Job Starving``, ...): for a service job the alerts
  service asks DescribeServiceJob (its ``tags``; the :class:`~batchpilot.alerts.ports.JobDirectory`
  it already calls for preemption events), only for a fact that mentions its owner
  (:func:`mentions_owner`). Own events about a container job or a standalone training job are not
  looked up: they name no owner;
- SageMaker Studio tags the jobs it starts with ``sagemaker:user-profile-arn``: with that key the
  owner is the user profile's name, which is never an e-mail address, so it is shown, not mentioned.

A chat channel mentions an owner whose value is an e-mail address (:func:`is_email`): Slack after
``users.lookupByEmail`` (bot token, scope ``users:read.email``), Teams with an Adaptive Card
mention of that address. When it cannot, the message goes as it would without an owner and the
reason (:class:`OwnerProblem`) is reported once per owner (:class:`OnceEach`). Owner lookups never
fail an alert.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from enum import StrEnum

from batchpilot.alerts.facts import AlertFact, FactKind, Owner, recovery_will_handle
from batchpilot.alerts.policy import RoutingPolicy, Severity
from batchpilot.shared.arns import resource_name
from batchpilot.shared.classification import Category
from batchpilot.shared.events import (
    BatchJobQueueBlocked,
    BatchJobStateChange,
    JobEvent,
    SageMakerTrainingJobStateChange,
)

__all__ = [
    "OWNER_VALUE_MAX",
    "STUDIO_PROFILE_TAG",
    "OnceEach",
    "OwnerProblem",
    "event_tags",
    "is_email",
    "mentions_owner",
    "owner_from_tags",
]

OWNER_VALUE_MAX = 256
"""Characters of a tag value (AWS tag values are at most 256 Unicode characters)."""
STUDIO_PROFILE_TAG = "sagemaker:user-profile-arn"
"""The tag SageMaker Studio adds to the jobs it starts (with ``sagemaker:domain-arn``)."""
EMAIL_MAX = 254
"""Characters of an e-mail address (RFC 5321's path limit less its angle brackets)."""
_EMAIL = re.compile(
    r"^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$"
)
"""The addresses people use at work: letters, digits and ``._%+-`` before the ``@``, a dotted
domain after it. Narrower than RFC 5322 on purpose: nothing in it is markup in Slack mrkdwn
(``&<>``) or Teams Markdown (``[]<>``), so it can stand in a mention as it is."""


class OwnerProblem(StrEnum):
    """Why a message that should mention its job's owner does not (the message still goes)."""

    NO_OWNER_TAG = "no_owner_tag"
    """The job carries no tag of that key (or the lookup of a service job's tags found none)."""
    NOT_AN_EMAIL = "not_an_email"
    """The tag's value is not an e-mail address (a team name, a Studio user profile)."""
    UNKNOWN_EMAIL = "unknown_email"
    """Slack knows no user with that address (``users_not_found``)."""
    NO_BOT_TOKEN = "no_bot_token"  # noqa: S105 - a reason, not a token
    """Slack posts through an incoming webhook: ``users.lookupByEmail`` needs a bot token."""
    LOOKUP_FAILED = "lookup_failed"
    """``users.lookupByEmail`` failed (rate limited, timed out, a missing scope, no time left)."""


def is_email(value: str) -> bool:
    """True when ``value`` is an e-mail address as :data:`_EMAIL` reads one (at most 254 characters)."""
    return len(value) <= EMAIL_MAX and _EMAIL.match(value) is not None


def owner_from_tags(tags: Mapping[str, str] | None, key: str) -> Owner | None:
    """The owner a job's ``tags`` name under ``key``, or None (no key, no such tag, an empty value).

    Args:
        tags: the job's tags (event ``tags`` / ``Tags``, or DescribeServiceJob ``tags``).
        key: the deployment's owner tag key (``owner``, ``owner-email``, ``sagemaker:user-profile-arn``).

    The value is stripped and cut to :data:`OWNER_VALUE_MAX`; with :data:`STUDIO_PROFILE_TAG` it is
    the profile's name (the ARN's last part). :attr:`Owner.mention` is left False (the service sets
    it with :func:`mentions_owner`).
    """
    if not key or not tags:
        return None
    raw = tags.get(key)
    if not isinstance(raw, str):
        return None
    value = raw.strip()[:OWNER_VALUE_MAX]
    if key == STUDIO_PROFILE_TAG:
        value = resource_name(value) or ""
    if not value:
        return None
    return Owner(value=value, email=value if is_email(value) else None)


def event_tags(event: JobEvent) -> Mapping[str, str] | None:
    """The job's tags as the event carries them, or None when this kind of event carries none
    (service jobs, preemption events: their owner needs DescribeServiceJob)."""
    match event:
        case BatchJobStateChange() | BatchJobQueueBlocked():
            return event.detail.tags
        case SageMakerTrainingJobStateChange():
            return event.detail.Tags
    return None


_MENTIONS: dict[FactKind, bool] = {
    FactKind.STATE_CHANGE: True,  # only a failure that will not be recovered: mentions_owner
    FactKind.QUEUE_BLOCKED: False,  # the job queue's problem: the platform team's
    FactKind.PREEMPTION_STARTED: False,  # the job is requeued; starvation speaks if it lasts
    FactKind.PREEMPTION_COMPLETED: False,
    FactKind.JOB_RESUBMITTED: True,  # unless a dry run
    FactKind.RECOVERY_SKIPPED: True,  # the failure stays: unless a dry run
    FactKind.RECOVERY_FAILED: True,  # unless the recovery function retries it itself
    FactKind.CAPACITY_ADJUSTED: False,  # a service environment's, no one job's
    FactKind.CAPACITY_LIMITED: False,
    FactKind.JOB_STARVING: True,
    FactKind.JOB_GPU_IDLE: True,  # the job's owner left it idle or it hung: theirs to stop or restart
    FactKind.ALARM_STATE_CHANGE: False,  # the stack's own alarms
}
"""Per fact kind, whether its owner hears of it by default (refined by :func:`mentions_owner`).
A new kind (a job idle on its GPUs or stalled, one forecast to wait too long) says here whether
its owner is mentioned: ``tests/unit/test_exhaustive_tables.py`` fails until it does."""


def mentions_owner(fact: AlertFact, severity: Severity, policy: RoutingPolicy) -> bool:
    """True when ``fact``'s chat message mentions the job's owner (routing policy).

    With ``policy.owner_mentions`` given, any of its matches decides (``[]``: never). Otherwise the
    defaults (:data:`_MENTIONS`): a job that failed for good and that the recovery function will not
    resubmit (:func:`~batchpilot.alerts.facts.recovery_will_handle`; a job its user stopped is
    their own doing, and an ``AWSBatch*`` training job's service job speaks for it), a
    resubmission, a skipped or failed recovery (not the dry runs, nor a failure the recovery
    function retries itself), a starving job, a job whose GPUs are idle or stalled. Nothing
    silent mentions anyone.
    """
    if severity is Severity.SILENT:
        return False
    if policy.owner_mentions is not None:
        values = fact.match_values()
        return any(match.holds(values, severity) for match in policy.owner_mentions)
    if not _MENTIONS[fact.event_kind]:
        return False
    match fact.event_kind:
        case FactKind.STATE_CHANGE:
            if not fact.terminal or fact.succeeded or fact.created_by_batch:
                return False
            if fact.category is Category.USER_STOPPED:
                return False
            handled = recovery_will_handle(fact.job_kind, fact.category)
            return not (policy.recovery_expected and handled)
        case FactKind.JOB_RESUBMITTED | FactKind.RECOVERY_SKIPPED:
            return not fact.dry_run
        case FactKind.RECOVERY_FAILED:
            return not fact.will_retry
    return True


class OnceEach:
    """Remembers keys said once (per function instance), at most ``limit`` of them (then forgets
    them all: a reason said again after many others is acceptable, an unbounded set is not)."""

    def __init__(self, limit: int = 1024) -> None:
        self._limit = limit
        self._seen: set[Hashable] = set()

    def first(self, key: Hashable) -> bool:
        """True the first time ``key`` is seen (then remembered), False after."""
        if key in self._seen:
            return False
        if len(self._seen) >= self._limit:
            self._seen.clear()
        self._seen.add(key)
        return True
