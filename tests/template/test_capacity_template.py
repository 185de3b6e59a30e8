"""The capacity block of template.yaml: schedule, rule, least-privilege roles, alarms, parameters."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from batchpilot.capacity.settings import CapacitySettings
from batchpilot_local.template import load_template as load_routes
from batchpilot_local.testing.paths import EVENTS_DIR, ROOT, TEMPLATE_PATH
from batchpilot_local.testing.templates import as_list, getatt, props, ref, resource

READ_ACTIONS_WITHOUT_RESOURCE_TYPES = {
    "batch:DescribeServiceEnvironments",
    "batch:ListServiceJobs",
    "batch:DescribeServiceJob",
}


def statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    """Every statement of the role's inline policies; conditional ones (Fn::If) unwrapped with the
    condition they depend on recorded under ``_condition``."""
    out = []
    for policy in role["Properties"]["Policies"]:
        for statement in as_list(policy["PolicyDocument"]["Statement"]):
            if "Fn::If" in statement:
                condition, then, otherwise = statement["Fn::If"]
                assert otherwise == {"Ref": "AWS::NoValue"}
                out.append({**then, "_condition": condition})
            else:
                out.append(statement)
    return out


def test_the_function(template: dict[str, Any], translated: dict[str, Any]) -> None:
    p = props(template, "CapacityFunction", "AWS::Serverless::Function")
    assert (p["CodeUri"], p["Handler"], p["Timeout"]) == ("functions/capacity/", "app.lambda_handler", 60)
    assert (ROOT / p["CodeUri"] / "app.py").is_file()
    assert getatt(p["Role"], "Arn") == "CapacityFunctionRole"
    assert p["Environment"]["Variables"] == {
        "BATCHPILOT_STATE_TABLE": {"Ref": "StateTable"},
        "BATCHPILOT_EVENT_BUS": {"Ref": "BatchPilotEventBus"},
        "BATCHPILOT_CAPACITY_DRY_RUN": {"Ref": "CapacityDryRun"},
        "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS": {"Ref": "CapacityServiceEnvironmentArns"},
        "BATCHPILOT_CAPACITY_JOB_QUEUES": {"Ref": "CapacityJobQueueArns"},
        "BATCHPILOT_CAPACITY_POLICY": {"Ref": "CapacityPolicy"},
    }
    # Scheduled (asynchronous) runs are not retried by Lambda; failures go to the dead-letter queue.
    invoke = props(translated, "CapacityFunctionEventInvokeConfig", "AWS::Lambda::EventInvokeConfig")
    assert (invoke["MaximumRetryAttempts"], invoke["MaximumEventAgeInSeconds"]) == (0, 120)
    assert getatt(invoke["DestinationConfig"]["OnFailure"]["Destination"], "Arn") == "CapacityDeadLetterQueue"
    (event,) = p["Events"].values()
    assert event["Type"] == "SQS" and getatt(event["Properties"]["Queue"], "Arn") == "CapacityQueue"


def test_the_schedule_runs_every_minute_at_the_minute_with_retries_and_a_dead_letter_queue(
    template: dict[str, Any],
) -> None:
    p = props(template, "CapacitySchedule", "AWS::Scheduler::Schedule")
    assert p["ScheduleExpression"] == "rate(1 minute)"
    assert p["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert p["State"] == {"Fn::If": ["CapacityConfigured", "ENABLED", "DISABLED"]}
    target = p["Target"]
    assert getatt(target["Arn"], "Arn") == "CapacityFunction"
    assert getatt(target["RoleArn"], "Arn") == "CapacityScheduleRole"
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 120}
    assert getatt(target["DeadLetterConfig"]["Arn"], "Arn") == "CapacityDeadLetterQueue"


def test_the_schedule_input_is_a_scheduled_event_whose_time_the_handler_reads(
    template: dict[str, Any],
) -> None:
    text = props(template, "CapacitySchedule", "AWS::Scheduler::Schedule")["Target"]["Input"]["Fn::Sub"]
    filled = (
        text.replace("${AWS::AccountId}", "111122223333")
        .replace("${AWS::Region}", "us-east-1")
        .replace("<aws.scheduler.execution-id>", "7c5a1f8e-0000-4000-8000-000000000001")
        .replace("<aws.scheduler.scheduled-time>", "2026-11-20T22:05:00Z")
        .replace(
            "<aws.scheduler.schedule-arn>", "arn:aws:scheduler:us-east-1:111122223333:schedule/default/x"
        )
        .replace("<aws.scheduler.attempt-number>", "1")
    )
    assert "<aws." not in filled and "${" not in filled
    event = json.loads(filled)
    assert (event["source"], event["detail-type"], event["time"]) == (
        "aws.scheduler",
        "Scheduled Event",
        "2026-11-20T22:05:00Z",
    )
    assert "Records" not in event  # the handler tells the schedule from SQS batches by this


def test_the_schedule_role_may_only_invoke_the_function_and_dead_letter(template: dict[str, Any]) -> None:
    role = resource(template, "CapacityScheduleRole", "AWS::IAM::Role")
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    granted = {
        (action, getatt(r, "Arn"))
        for s in statements(role)
        for action in as_list(s["Action"])
        for r in as_list(s["Resource"])
    }
    assert granted == {
        ("lambda:InvokeFunction", "CapacityFunction"),
        ("sqs:SendMessage", "CapacityDeadLetterQueue"),
    }


def test_the_function_role_is_least_privilege(template: dict[str, Any]) -> None:
    role = resource(template, "CapacityFunctionRole", "AWS::IAM::Role")
    by_action: dict[str, dict[str, Any]] = {}
    ledger: list[dict[str, Any]] = []
    for statement in statements(role):
        assert statement["Effect"] == "Allow"
        if statement.get("Sid") == "ReadLedgerAggregatesAndJobs":
            ledger.append(statement)  # the same read actions on other keys: checked below
            continue
        for action in as_list(statement["Action"]):
            assert action not in by_action, f"{action} granted twice"
            by_action[action] = statement
    (read_ledger,) = ledger
    assert as_list(read_ledger["Action"]) == ["dynamodb:GetItem", "dynamodb:Query"]
    assert getatt(read_ledger["Resource"], "Arn") == "StateTable"
    leading = read_ledger["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    assert leading == ["ledger#agg#*", "ledger#job#*"]
    assert set(by_action) == {
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "sqs:ChangeMessageVisibility",
        "sqs:SendMessage",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        *READ_ACTIONS_WITHOUT_RESOURCE_TYPES,
        "batch:GetJobQueueSnapshot",
        "batch:UpdateServiceEnvironment",
        "events:PutEvents",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:BatchGetItem",
        "dynamodb:BatchWriteItem",
    }
    # "*" only where AWS allows nothing else.
    star = {a for a, s in by_action.items() if "*" in as_list(s["Resource"])}
    assert star == READ_ACTIONS_WITHOUT_RESOURCE_TYPES
    snapshot = by_action["batch:GetJobQueueSnapshot"]
    assert snapshot["Resource"] == {"Fn::Split": [",", {"Ref": "CapacityJobQueueArns"}]}
    assert snapshot["_condition"] == "CapacityJobQueuesConfigured"
    update = by_action["batch:UpdateServiceEnvironment"]
    assert update["Resource"] == {"Fn::Split": [",", {"Ref": "CapacityServiceEnvironmentArns"}]}
    assert update["_condition"] == "CapacityConfigured"
    assert getatt(by_action["sqs:ReceiveMessage"]["Resource"], "Arn") == "CapacityQueue"
    assert getatt(by_action["sqs:SendMessage"]["Resource"], "Arn") == "CapacityDeadLetterQueue"
    assert getatt(by_action["logs:PutLogEvents"]["Resource"], "Arn") == "CapacityLogGroup"
    assert by_action["events:PutEvents"]["Resource"]["Fn::Sub"].endswith(
        ":event-bus/${AWS::StackName}-events"
    )
    table = by_action["dynamodb:GetItem"]
    assert getatt(table["Resource"], "Arn") == "StateTable"
    assert table["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["capacity#*"]}}
    assert template["Conditions"]["CapacityConfigured"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "CapacityServiceEnvironmentArns"}, ""]}]
    }


def test_the_state_store_keys_are_inside_the_granted_prefix() -> None:
    from batchpilot.io.dynamodb import capacity as capacity_state

    source = Path(capacity_state.__file__).read_text()
    keys = set(re.findall(r'f?"(capacity#[a-z]+#)', source))
    assert keys == {"capacity#env#", "capacity#demand#"}


def test_the_rule_takes_only_the_blocked_reason_capacity_can_fix(template: dict[str, Any]) -> None:
    p = props(template, "CapacityRule", "AWS::Events::Rule")
    assert p["EventPattern"] == {
        "source": ["aws.batch"],
        "detail-type": ["Batch Service Job Queue Blocked"],
        "detail": {"statusReason": [{"prefix": "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"}]},
    }
    (target,) = p["Targets"]
    assert getatt(target["Arn"], "Arn") == "CapacityQueue"
    assert getatt(target["DeadLetterConfig"]["Arn"], "Arn") == "CapacityDeadLetterQueue"
    routes = load_routes(TEMPLATE_PATH)
    reached = {}
    for path in sorted((EVENTS_DIR / "service-job-queue-blocked").glob("*.json")):
        event = json.loads(path.read_text())
        reached[path.stem] = "capacity" in {r.function.short_name for r in routes.routes_for(event)}
    assert reached == {
        "capacity-insufficient-instance-capacity": False,
        "misconfiguration-quota-management-limit-exceeded": False,
        "misconfiguration-service-environment-max-resource": True,
        "undetermined": False,
    }


def test_only_the_capacity_rule_may_send_to_its_queues(template: dict[str, Any]) -> None:
    p = props(template, "CapacityQueuePolicy", "AWS::SQS::QueuePolicy")
    assert sorted(ref(q) for q in p["Queues"]) == ["CapacityDeadLetterQueue", "CapacityQueue"]
    (statement,) = [s for s in p["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert getatt(statement["Condition"]["ArnEquals"]["aws:SourceArn"], "Arn") == "CapacityRule"


def test_alarms_include_per_environment_failures_as_the_function_counts_them(
    template: dict[str, Any],
) -> None:
    p = props(template, "CapacityEnvironmentErrorsAlarm", "AWS::CloudWatch::Alarm")
    assert (p["Namespace"], p["MetricName"]) == ({"Ref": "MetricsNamespace"}, "CapacityErrors")
    # The dimensions Powertools gives the function's own counters: service + Function.
    assert {d["Name"]: d["Value"] for d in p["Dimensions"]} == {
        "Function": "capacity",
        "service": "batchpilot",
    }
    assert (
        template["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == "batchpilot"
    )
    for name in ("CapacityDeadLetterAlarm", "CapacityErrorsAlarm", "CapacityThrottlesAlarm"):
        resource(template, name, "AWS::CloudWatch::Alarm")


def test_parameters_default_to_capacity_management_off(template: dict[str, Any]) -> None:
    params = template["Parameters"]
    defaults = {
        "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS": params["CapacityServiceEnvironmentArns"]["Default"],
        "BATCHPILOT_CAPACITY_JOB_QUEUES": params["CapacityJobQueueArns"]["Default"],
        "BATCHPILOT_CAPACITY_POLICY": params["CapacityPolicy"]["Default"],
        "BATCHPILOT_CAPACITY_DRY_RUN": params["CapacityDryRun"]["Default"],
        "BATCHPILOT_STATE_TABLE": "batchpilot-StateTable",
    }
    settings = CapacitySettings.from_environ(defaults)
    assert settings.policy.service_environments == {}
    assert settings.dry_run is False


@pytest.mark.parametrize(
    ("parameter", "good", "bad"),
    [
        (
            "CapacityServiceEnvironmentArns",
            [
                "",
                "arn:aws:batch:us-east-1:111122223333:service-environment/sm-training",
                "arn:aws:batch:us-east-1:111122223333:service-environment/a,arn:aws:batch:us-east-1:111122223333:service-environment/b",
            ],
            [
                "*",
                "sm-training",
                "arn:aws:batch:us-east-1:111122223333:job-queue/q",
                "arn:aws:batch:us-east-1:111122223333:service-environment/a, "  # a space
                "arn:aws:batch:us-east-1:111122223333:service-environment/b",
            ],
        ),
        (
            "CapacityJobQueueArns",
            ["", "arn:aws:batch:us-east-1:111122223333:job-queue/sm-training-highpri"],
            ["*", "arn:aws:batch:us-east-1:111122223333:service-environment/x"],
        ),
    ],
)
def test_arn_parameters_accept_only_their_kind(
    template: dict[str, Any], parameter: str, good: list[str], bad: list[str]
) -> None:
    pattern = re.compile(template["Parameters"][parameter]["AllowedPattern"])
    assert good and bad
    assert all(pattern.fullmatch(value) for value in good)
    assert not any(pattern.fullmatch(value) for value in bad)
