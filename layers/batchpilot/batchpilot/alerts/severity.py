"""Severity of a fact: the default table, then the routing policy. Pure.

Default table, for job events (docs/alerts.md, "What pages and what posts", shows the same table):

================================================================  ==========
fact                                                              severity
================================================================  ==========
terminal success (SUCCEEDED, Completed)                           silent
terminal failure recovery will resubmit (``recovery_will_handle``) info [#]_
terminal failure, category QUOTA (an account service quota)      critical, always
terminal failure, category TIMEOUT                                warning
terminal failure, category USER_STOPPED (a person stopped it)     info
any other terminal failure (recovery will not handle it)          critical
queue blocked, MISCONFIGURATION or QUOTA                          critical
queue blocked, CAPACITY or UNKNOWN (UNDETERMINED)                 warning
spot interruption Batch/SageMaker is retrying (RUNNABLE, Interrupted) info
preemption started                                                info
preemption completed (Batch requeued the job)                     silent
any other non-terminal state, Batch-created training jobs         silent
================================================================  ==========

.. [#] critical when the policy says ``recovery_expected: false``.

Own events (``source: batchpilot``):

=============================================================================  ==========
Job Resubmitted                                                                info
Job Resubmitted in dry-run, for a failure announced as "recovery will handle"  critical
Recovery Skipped BUDGET_EXHAUSTED                                              critical
Recovery Skipped QUEUE_NOT_MANAGED, NO_CHECKPOINT, NOT_RECOVERABLE,
ROLE_NOT_ALLOWED, TIME_LIMIT_ACTION, PREEMPTION_RETRIES_SPENT, for a category
the job event announced as "recovery will handle" (so it was info)             critical
Recovery Skipped NOT_FOUND, same categories (AWS no longer knows the job)      warning
Recovery Skipped DRY_RUN                                                       info
other Recovery Skipped (already paged by the job event, or nothing to do)      silent
Recovery Failed                                                                warning
Capacity Adjusted                                                              info
Capacity Limited BLOCKED_JOB_EXCEEDS_MAX                                       critical
Capacity Limited AT_MAX, NOT_VALID, UPDATE_FAILED                              warning
Capacity Limited COOLDOWN                                                      silent
Job Starving (PREEMPTED_REPEATEDLY, WAITING_BELOW_ENTITLEMENT)                 warning
Job GPU Idle (IDLE, STALLED)                                                   warning
Job GPU Idle ACTIVE (the episode's resolution: its GPUs work again)            info
=============================================================================  ==========

The stack's CloudWatch alarms (:mod:`batchpilot.alerts.alarms`):

=================================================================  ======================================
ALARM                                                              its description's ``Severity: ...``,
                                                                   else critical
OK after ALARM (the alarm resolved)                                info
OK after INSUFFICIENT_DATA (a new alarm's first evaluation)        silent
INSUFFICIENT_DATA                                                  silent
=================================================================  ======================================
"""

from __future__ import annotations

from dataclasses import dataclass

from batchpilot.alerts.facts import AlertFact, FactKind, recovery_will_handle
from batchpilot.alerts.policy import Channel, RoutingPolicy, Severity
from batchpilot.shared.classification import Category
from batchpilot.shared.events import AlarmStateValue
from batchpilot.shared.own_events import CapacityLimitReason, GpuIdleReason, SkipReason

__all__ = ["Decision", "decide", "default_severity"]

_TERMINAL_FAILURE_STATUSES = frozenset({"FAILED", "Failed", "Stopped"})
"""Batch ``FAILED`` and SageMaker ``Failed``/``Stopped``: the terminal statuses that are not a success."""
# Skips that leave a failed job failed: critical when the job event had deferred to recovery.
_SKIP_CRITICAL_IF_EXPECTED = frozenset(
    {
        SkipReason.QUEUE_NOT_MANAGED,
        SkipReason.NO_CHECKPOINT,
        SkipReason.NOT_RECOVERABLE,
        SkipReason.ROLE_NOT_ALLOWED,
        SkipReason.TIME_LIMIT_ACTION,
        SkipReason.PREEMPTION_RETRIES_SPENT,
    }
)


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a fact.

    Attributes:
        severity: the final severity.
        channels: where it goes (empty when silent or routed nowhere).
        why: one sentence for people: which rule decided (shown in the message).
    """

    severity: Severity
    channels: tuple[Channel, ...]
    why: str

    @property
    def notify(self) -> bool:
        """True when at least one channel receives the fact."""
        return bool(self.channels)


def _name(category: Category | None) -> str:
    return category.value if category else "UNKNOWN"


def _quota(fact: AlertFact) -> str:
    return f" ({fact.quota})" if fact.quota else ""


def _job_default(fact: AlertFact, policy: RoutingPolicy) -> tuple[Severity, str]:
    category = fact.category
    if fact.created_by_batch:
        return Severity.SILENT, "a training job AWS Batch created: its service job's events speak for it"
    match fact.event_kind:
        case FactKind.QUEUE_BLOCKED:
            if category is Category.MISCONFIGURATION:
                return Severity.CRITICAL, "the job queue is blocked by a misconfiguration: it will never run"
            if category is Category.QUOTA:
                return (
                    Severity.CRITICAL,
                    f"the job queue is blocked by an account service quota{_quota(fact)}",
                )
            return Severity.WARNING, f"the job queue is blocked ({_name(category)})"
        case FactKind.PREEMPTION_STARTED:
            return Severity.INFO, "a preemption: Batch requeues the job itself"
        case FactKind.PREEMPTION_COMPLETED:
            return Severity.SILENT, "Batch requeued the preempted job"
    if fact.succeeded:
        return Severity.SILENT, "a success"
    if fact.terminal and fact.status in _TERMINAL_FAILURE_STATUSES:
        if category is Category.QUOTA:  # never resubmitted: only a person can raise the quota
            return Severity.CRITICAL, f"an account service quota{_quota(fact)} stopped the job"
        if policy.recovery_expected and recovery_will_handle(fact.job_kind, category):
            return (
                Severity.INFO,
                f"a {_name(category)} failure the recovery function resubmits; its outcome follows",
            )
        if category is Category.TIMEOUT:
            return Severity.WARNING, "the job ran past its time limit"
        if category is Category.USER_STOPPED:
            return Severity.INFO, "a person stopped the job"
        return Severity.CRITICAL, f"a terminal failure ({_name(category)}) that recovery will not handle"
    if category is Category.SPOT_INTERRUPTION:
        return Severity.INFO, "a spot interruption that AWS is already retrying"
    return Severity.SILENT, "not a failure"


def _own_default(fact: AlertFact, policy: RoutingPolicy) -> tuple[Severity, str]:
    code = fact.reason_code
    match fact.event_kind:
        case FactKind.JOB_RESUBMITTED:
            if (
                fact.dry_run
                and policy.recovery_expected
                and recovery_will_handle(fact.job_kind, fact.category)
            ):
                # The job event deferred to recovery (info); in dry-run nobody restarts the job.
                return Severity.CRITICAL, "dry run: recovery would have resubmitted it; the job stays failed"
            return Severity.INFO, "the recovery function resubmitted the job"
        case FactKind.RECOVERY_FAILED:
            if fact.will_retry:
                return Severity.SILENT, "a transient failure the recovery function retries by itself"
            return Severity.WARNING, "the resubmission itself failed"
        case FactKind.CAPACITY_ADJUSTED:
            return Severity.INFO, "the capacity function changed a capacity limit"
        case FactKind.CAPACITY_LIMITED:
            if code is CapacityLimitReason.BLOCKED_JOB_EXCEEDS_MAX:
                return Severity.CRITICAL, "a job needs more capacity than the configured maximum allows"
            if code is CapacityLimitReason.COOLDOWN:
                return Severity.SILENT, "capacity change deferred by its cooldown"
            return Severity.WARNING, f"capacity could not follow demand ({code})"
        case FactKind.JOB_STARVING:
            return Severity.WARNING, f"the job does not get to run ({code})"
        case FactKind.JOB_GPU_IDLE:
            if code is GpuIdleReason.ACTIVE:
                return Severity.INFO, "the job's GPUs work again: the idle episode is resolved"
            return Severity.WARNING, f"the job holds GPUs that do no work ({code})"
        case FactKind.RECOVERY_SKIPPED:
            if code is SkipReason.BUDGET_EXHAUSTED or fact.producer_critical:
                return Severity.CRITICAL, "the recovery budget is exhausted: the job stays failed"
            if code is SkipReason.DRY_RUN:
                return Severity.INFO, "dry run: the job would have been resubmitted"
            announced_as_handled = policy.recovery_expected and recovery_will_handle(
                fact.job_kind, fact.category
            )
            if code in _SKIP_CRITICAL_IF_EXPECTED and announced_as_handled:
                return (
                    Severity.CRITICAL,
                    f"recovery will not resubmit this failure ({code}): the job stays failed",
                )
            if code is SkipReason.NOT_FOUND and announced_as_handled:
                # AWS no longer describes the job (an archive replay of old jobs, another account's
                # event): nothing to resubmit and nothing a person can do at night; say it in chat.
                return Severity.WARNING, "recovery cannot find this job in AWS any more: it stays failed"
            return Severity.SILENT, f"recovery skipped ({code}); nothing new for people"
    return Severity.SILENT, "not a notifiable event"  # pragma: no cover - every own event kind is above


def _alarm_default(fact: AlertFact) -> tuple[Severity, str]:
    alarm = fact.alarm
    assert alarm is not None
    name = alarm.short_name
    match alarm.state:
        case AlarmStateValue.ALARM:
            if alarm.severity_problem:
                return alarm.severity, f"the alarm {name} is in ALARM ({alarm.severity_problem}: the default)"
            said = alarm.severity.value
            return alarm.severity, f"the alarm {name} is in ALARM (its description says {said})"
        case AlarmStateValue.OK if alarm.resolved:
            return Severity.INFO, f"the alarm {name} is OK again: resolved"
        case AlarmStateValue.OK:
            return Severity.SILENT, f"the alarm {name} is OK and was not in ALARM"
    # Too little data to evaluate (a new alarm, a metric nobody publishes): nothing is known to
    # be wrong; batchpilot's alarms treat missing data as not breaching.
    return Severity.SILENT, f"the alarm {name} has insufficient data"


def default_severity(fact: AlertFact, policy: RoutingPolicy | None = None) -> tuple[Severity, str]:
    """The default table's severity of ``fact`` and why (see the module docstring)."""
    policy = policy or RoutingPolicy()
    if fact.is_alarm:
        return _alarm_default(fact)
    if fact.is_job_event:
        return _job_default(fact, policy)
    return _own_default(fact, policy)


def decide(fact: AlertFact, policy: RoutingPolicy) -> Decision:
    """Severity and channels of ``fact`` under ``policy`` (defaults, mark_critical, never_page, rules)."""
    severity, why = default_severity(fact, policy)
    selector_args = (fact.job_queue, fact.share_identifier, fact.quota_share)
    if severity is Severity.WARNING and policy.mark_critical.selects(*selector_args):
        severity, why = Severity.CRITICAL, f"{why}; its queue or share is marked critical"
    if severity is Severity.CRITICAL and policy.never_page.selects(*selector_args):
        severity, why = Severity.WARNING, f"{why}; its queue or share never pages"
    values = fact.match_values()
    for index, rule in enumerate(policy.rules):
        if rule.match.holds(values, severity):
            severity = rule.severity
            why = f"routing policy rule {index}" + (f" ({rule.description})" if rule.description else "")
    return Decision(severity, policy.channels_for(severity), why)
