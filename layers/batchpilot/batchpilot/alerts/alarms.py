"""batchpilot's own CloudWatch alarms as alert facts: which alarms are the stack's, the severity
each one states, and which ones notify an SNS topic themselves. Pure.

Names: every alarm of the stack is named ``batchpilot/<stack name>/<logical id>``
(``template.yaml``). The stack's ``AlertsAlarmsRule`` matches ``CloudWatch Alarm State Change``
events whose ``detail.alarmName`` starts with ``batchpilot/<stack name>/`` (EventBridge prefix
matching), so another stack's or another team's alarms never reach the alerts function; stack
names hold only letters, digits and hyphens, so the closing ``/`` keeps stack ``bp`` from
matching stack ``bp-prod``. The function checks the prefix again (:meth:`AlarmRouting.ours`).

Severity: the alarm's description (``AlarmDescription``, which the event carries as
``detail.configuration.description``) names it in a marker, ``Severity: critical`` (or
``warning``, ``info``, ``silent``), by convention its last sentence. A description without a
marker, or with a value that is not a severity, gets :data:`DEFAULT_ALARM_SEVERITY` (critical: an
alarm pages unless it says otherwise, as every alarm did when it notified the on-call topic
directly), and the function says so once in its log. No API call is needed (a tag would need
``cloudwatch:ListTagsForResource`` per event), and the severity can change without renaming, so
without replacing, the alarm.

Notified directly: the alarms on the alerts path itself (the alerts function's errors, throttles,
dead-letter queue and failed notifications) keep an alarm action to an SNS topic of their own, so
they reach the pager when the alerts function cannot; with ``AlarmActionTopicArn`` every alarm
notifies that topic. The function then posts those alarms to chat only and never publishes them to
the on-call topic, neither as a page nor as a chat fallback: the topic already has CloudWatch's
own notification, and a second page for one alarm would be noise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from batchpilot.alerts.policy import Severity

__all__ = [
    "ALL_ALARMS",
    "DEFAULT_ALARM_SEVERITY",
    "NAME_PREFIX",
    "AlarmRouting",
    "AlarmSeverity",
    "alarm_severity",
    "name_prefix",
    "without_marker",
]

NAME_PREFIX = "batchpilot/{stack}/"
"""The prefix of every alarm name of a stack (``batchpilot/<stack name>/``)."""
DEFAULT_ALARM_SEVERITY = Severity.CRITICAL
"""The severity of an alarm whose description names none (or names something else)."""
ALL_ALARMS = "*"
"""In :attr:`AlarmRouting.notified_directly`: every alarm notifies a topic itself."""

_MARKER = re.compile(r"\bseverity:\s*(?P<value>[A-Za-z0-9][A-Za-z0-9_-]{0,31})\b\.?", re.IGNORECASE)


def name_prefix(stack: str) -> str:
    """The alarm-name prefix of stack ``stack`` (``batchpilot/batchpilot-prod/``)."""
    return NAME_PREFIX.format(stack=stack)


@dataclass(frozen=True, slots=True)
class AlarmSeverity:
    """The severity an alarm's description states.

    Attributes:
        severity: the marker's severity, else :data:`DEFAULT_ALARM_SEVERITY`.
        problem: why the default was used (``no "Severity: ..." marker in its description``,
            ``unknown severity "urgent" in its description``), None when the marker named one.
    """

    severity: Severity
    problem: str | None = None


def alarm_severity(description: str | None) -> AlarmSeverity:
    """The severity ``description`` names in its last ``Severity: <value>`` marker (case
    insensitive), or :data:`DEFAULT_ALARM_SEVERITY` with the reason why."""
    found = list(_MARKER.finditer(description or ""))
    if not found:
        return AlarmSeverity(DEFAULT_ALARM_SEVERITY, 'no "Severity: ..." marker in its description')
    value = found[-1].group("value").lower()
    try:
        return AlarmSeverity(Severity(value))
    except ValueError:
        return AlarmSeverity(DEFAULT_ALARM_SEVERITY, f'unknown severity "{value}" in its description')


def without_marker(description: str | None) -> str:
    """``description`` for people: the severity marker taken out, spaces tidied."""
    return re.sub(r"\s+", " ", _MARKER.sub("", description or "")).strip()


@dataclass(frozen=True, slots=True)
class AlarmRouting:
    """How the deployment wires its alarms (the alerts function's settings).

    Attributes:
        prefix: the names of the stack's alarms start with it (``batchpilot/<stack>/``); empty:
            any alarm the rule delivers is the stack's.
        notified_directly: names of the alarms whose own alarm actions notify an SNS topic
            (:data:`ALL_ALARMS` for every alarm): their facts go to chat only.
    """

    prefix: str = ""
    notified_directly: frozenset[str] = frozenset()

    @classmethod
    def of(cls, prefix: str | None, notified_directly: str | Iterable[str] | None) -> AlarmRouting:
        """From the settings' text: a prefix, and comma-separated names (or ``*``)."""
        names = notified_directly.split(",") if isinstance(notified_directly, str) else notified_directly
        return cls(prefix or "", frozenset(n.strip() for n in names or () if n.strip()))

    def ours(self, name: str) -> bool:
        """True when ``name`` is one of the stack's alarms."""
        return name.startswith(self.prefix)

    def short_name(self, name: str) -> str:
        """``name`` without the stack's prefix (``AlertsErrorsAlarm``): what messages show first."""
        rest = name[len(self.prefix) :] if self.prefix and name.startswith(self.prefix) else name
        return rest or name

    def is_notified_directly(self, name: str) -> bool:
        """True when the alarm's own action notifies an SNS topic (see the module docstring)."""
        return ALL_ALARMS in self.notified_directly or name in self.notified_directly
