"""Day one: a deploy with the template's default parameters feeds every alarm and dashboard widget.

The samples of ``events/`` are replayed as a default deploy would see them: every plain event and
event scenario with the template's defaults (a scenario's own ``parameters`` are left out), and
the clock scenarios of the schedules a default deploy enables (the ``LedgerSchedule``; the
``CapacitySchedule`` is ``DISABLED`` until capacity is configured), their parameters left out too.
Every metric emitted is collected as ``(namespace, name, dimension names)``; every metric an alarm
or a dashboard widget of template.yaml reads must be among them, except the namespaces AWS
publishes itself (listed here) and the one counter a replay that delivers everything cannot show.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from batchpilot_local.dashboards import MetricRef, dashboard_bodies, metric_references
from batchpilot_local.testing.day_one import Series, default_deploy_series, enabled_schedules
from batchpilot_local.testing.paths import TEMPLATE_PATH
from batchpilot_local.testing.templates import Deployed

# Namespaces AWS publishes itself: a deploy's functions never emit them, AWS does for every
# function and queue (AWS Lambda Developer Guide, "Types of metrics for Lambda functions"; Amazon
# SQS Developer Guide, "Available CloudWatch metrics for Amazon SQS").
AWS_PUBLISHED = {"AWS/Lambda", "AWS/SQS"}
# Emitted only when a chat channel or the on-call topic fails; the replay delivers every message
# (tests/integration/test_alerts_handler.py makes deliveries fail and reads it).
ONLY_ON_FAILURE = {"NotificationsFailed"}


def _namespace(template: dict[str, Any]) -> str:
    return str(template["Parameters"]["MetricsNamespace"]["Default"])


@pytest.fixture(scope="module")
def replayed() -> tuple[set[Series], list[str]]:
    """The series a default deploy emits for ``events/``, and the clock scenarios left out."""
    enabled = enabled_schedules()
    assert "LedgerSchedule" in enabled and "CapacitySchedule" not in enabled
    return default_deploy_series()


def _aws_namespaces_read() -> set[str]:
    """Every ``AWS/...`` namespace a dashboard widget or an alarm of the template reads."""
    text = json.dumps([body for _, body in dashboard_bodies(TEMPLATE_PATH)])
    text += TEMPLATE_PATH.read_text(encoding="utf-8")
    return set(re.findall(r"\bAWS/[A-Za-z0-9]+", text)) - {"AWS/"}


def test_the_default_replay_leaves_out_only_the_capacity_schedule(
    replayed: tuple[set[Series], list[str]],
) -> None:
    series, skipped = replayed
    assert skipped and all("scenarios/capacity/" in origin for origin in skipped)
    assert len(series) > 50


def _deployed_by_default(template: dict[str, Any], translated: dict[str, Any]) -> set[str]:
    """The alarms and dashboards a default deploy creates (their ``Condition`` true at defaults)."""
    deployed = Deployed(translated)
    return {
        name
        for name, resource in template["Resources"].items()
        if resource["Type"] in ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::Dashboard")
        and ("Condition" not in resource or deployed.condition(resource["Condition"]))
    }


def test_every_alarm_and_widget_reads_a_metric_a_default_deploy_emits(
    template: dict[str, Any], translated: dict[str, Any], replayed: tuple[set[Series], list[str]]
) -> None:
    series, _ = replayed
    namespace = _namespace(template)
    emitted = {(name, frozenset(k for k, _ in dims)) for ns, name, dims in series if ns == namespace}
    created = _deployed_by_default(template, translated)
    assert {"CapacityDashboard", "CapacityEnvironmentErrorsAlarm"}.isdisjoint(created)
    references = [(owner, ref) for owner, ref in metric_references(TEMPLATE_PATH) if owner in created]
    assert len(references) > 40
    empty = sorted(
        f"{owner}: {ref}"
        for owner, ref in references
        if ref.name not in ONLY_ON_FAILURE and not any(ref.matches(n, d) for n, d in emitted)
    )
    assert empty == [], "alarms and widgets a default deploy leaves without data:\n" + "\n".join(empty)


def test_the_only_metrics_read_from_other_namespaces_are_the_ones_aws_publishes() -> None:
    assert _aws_namespaces_read() == AWS_PUBLISHED


def test_a_reference_to_a_metric_only_the_capacity_function_emits_is_caught(
    replayed: tuple[set[Series], list[str]],
) -> None:
    series, _ = replayed
    emitted = {(name, frozenset(k for k, _ in dims)) for _, name, dims in series}
    # The capacity function's decisions are opt-in: a default deploy never makes one.
    dims = frozenset({"CapacityUnit", "Decision", "Reason", "ServiceEnvironment", "service"})
    decisions = MetricRef("CapacityDecisions", dims)
    assert not any(decisions.matches(n, d) for n, d in emitted)
    oldest = MetricRef("OldestRunnableAge", frozenset({"JobQueue", "service"}))
    assert any(oldest.matches(n, d) for n, d in emitted)


def test_one_name_per_concept_and_no_per_status_series_by_default(
    replayed: tuple[set[Series], list[str]],
) -> None:
    # The ledger publishes oldest RUNNABLE age, demand, in use and limit under one name each; the
    # names the capacity function used to publish beside them are gone, and state transitions by
    # status are MetricsDetail=detailed only.
    series, _ = replayed
    names = {name for _, name, _ in series}
    assert {"OldestRunnableAge", "RunnableInstances", "InstancesInUse", "CapacityLimit"} <= names
    retired = {"OldestRunnableJobAge", "RunnableInstanceDemand", "CapacityUtilization", "GpuHours"}
    assert names.isdisjoint(retired | {"JobStateTransitions"})


def _rule_value(node: Any, parameters: dict[str, str]) -> Any:
    """A ``Rules`` condition or assertion as CloudFormation evaluates it (the functions used here:
    ``Ref`` to a parameter, ``Fn::Equals``, ``Fn::Not``)."""
    if isinstance(node, dict) and set(node) == {"Ref"}:
        return parameters[node["Ref"]]
    if isinstance(node, dict) and set(node) == {"Fn::Equals"}:
        left, right = node["Fn::Equals"]
        return _rule_value(left, parameters) == _rule_value(right, parameters)
    if isinstance(node, dict) and set(node) == {"Fn::Not"}:
        (inner,) = node["Fn::Not"]
        return not _rule_value(inner, parameters)
    assert isinstance(node, str), node
    return node


def _refused(template: dict[str, Any], overrides: dict[str, str]) -> list[str]:
    """The ``AssertDescription`` of every rule assertion a deploy with ``overrides`` fails."""
    parameters = {name: str(spec.get("Default", "")) for name, spec in template["Parameters"].items()}
    parameters |= overrides
    failed = []
    for rule in template.get("Rules", {}).values():
        if "RuleCondition" in rule and not _rule_value(rule["RuleCondition"], parameters):
            continue
        for assertion in rule["Assertions"]:
            if not _rule_value(assertion["Assert"], parameters):
                failed.append(" ".join(assertion["AssertDescription"].split()))
    return failed


def test_a_capacity_configuration_the_function_would_refuse_is_refused_at_deploy(
    template: dict[str, Any],
) -> None:
    # The capacity function would fail every cold start (ConfigError) before counting anything,
    # leaving CapacityEnvironmentErrorsAlarm and the capacity dashboard without data.
    environment = "arn:aws:batch:us-east-1:111122223333:service-environment/sm-training"
    queue = "arn:aws:batch:us-east-1:111122223333:job-queue/sm-training-highpri"
    policy = '{"service_environments": {"sm-training": {"job_queues": ["sm-training-highpri"], "max": 8}}}'
    assert _refused(template, {}) == []
    complete = {"CapacityServiceEnvironmentArns": environment, "CapacityJobQueueArns": queue}
    assert _refused(template, {**complete, "CapacityPolicy": policy}) == []
    no_queues = _refused(template, {"CapacityServiceEnvironmentArns": environment, "CapacityPolicy": policy})
    assert len(no_queues) == 1 and "CapacityJobQueueArns must name the job queues" in no_queues[0]
    no_policy = _refused(template, complete)
    assert len(no_policy) == 1 and "CapacityPolicy must give each service environment" in no_policy[0]
