"""The recovery block of template.yaml: least-privilege role, pacing, rule pattern, parameters."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from batchpilot.recovery.settings import (
    DEFAULT_BUDGETS,
    RecoverySettings,
)
from batchpilot_local.template import load_template as load_app
from batchpilot_local.testing.paths import EVENTS_DIR, ROOT
from batchpilot_local.testing.samples import batch_job, sample, service_job, training_job
from batchpilot_local.testing.templates import EXTRA_BY_FILE, as_list, getatt, props, ref
from moto.events.models import EventPattern

REGION, ACCOUNT = "us-east-1", "111122223333"
QUEUE_A = "arn:aws:batch:us-east-1:111122223333:job-queue/a"

ALLOWED_ACTIONS = {
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:ChangeMessageVisibility",
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "batch:SubmitServiceJob",
    "batch:SubmitJob",
    "batch:TagResource",
    "batch:DescribeJobs",
    "batch:DescribeServiceJob",
    "batch:ListJobs",
    "sagemaker:DescribeTrainingJob",
    "sagemaker:ListTags",
    "sagemaker:CreateTrainingJob",
    "sagemaker:AddTags",
    "iam:PassRole",
    "s3:ListBucket",
    "events:PutEvents",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
}
# Read-only actions that support no resource-level permissions (their Resource must be "*").
STAR_ONLY = {"batch:DescribeJobs", "batch:DescribeServiceJob", "batch:ListJobs"}


# ---------------------------------------------------------------------- a tiny evaluator
def evaluate(node: Any, template: dict[str, Any], params: dict[str, str]) -> Any:
    """Resolve Ref / Fn::If / Fn::Split / Fn::Join / Fn::Sub / Fn::GetAtt / Fn::Equals for given parameters
    (others at their Default), the way CloudFormation would for this template's role."""
    values = {name: str(p.get("Default")) for name, p in template["Parameters"].items()}
    values.update(params)
    pseudo = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}

    def cond(name: str) -> bool:
        return bool(walk(template["Conditions"][name]))

    def walk(value: Any) -> Any:
        if isinstance(value, list):
            out = [walk(v) for v in value]
            return [v for v in out if v is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                if arg == "AWS::NoValue":
                    return NO_VALUE
                if arg in pseudo or arg in values:  # an empty parameter value is a value
                    return pseudo.get(arg, values.get(arg))
                return f"<{arg}>"
            if key == "Fn::If":
                return walk(arg[1] if cond(arg[0]) else arg[2])
            if key == "Fn::Equals":
                return walk(arg[0]) == walk(arg[1])
            if key == "Fn::Not":
                return not walk(arg[0])
            if key == "Fn::Split":
                return str(walk(arg[1])).split(arg[0])
            if key == "Fn::GetAtt":
                return f"<{arg[0] if isinstance(arg, list) else arg}>"
            if key == "Fn::Join":
                return str(arg[0]).join(str(v) for v in walk(arg[1]))
            if key == "Fn::Sub":
                text, local = (
                    (arg, {}) if isinstance(arg, str) else (arg[0], {k: walk(v) for k, v in arg[1].items()})
                )
                return re.sub(
                    r"\$\{([^}]+)\}",
                    lambda m: str(local.get(m.group(1)) or pseudo.get(m.group(1)) or values.get(m.group(1))),
                    text,
                )
        out = {k: walk(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not NO_VALUE}

    return walk(node)


NO_VALUE = object()


def statements(template: dict[str, Any], params: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Every statement of the role's policies for ``params``, by Sid (the submit policy exists only
    when a job queue is named)."""
    role = props(template, "RecoveryFunctionRole", "AWS::IAM::Role")
    policies = evaluate(role["Policies"], template, params or {})
    return {s["Sid"]: s for policy in policies for s in policy["PolicyDocument"]["Statement"]}


def policy_names(template: dict[str, Any], params: dict[str, str] | None = None) -> list[str]:
    role = props(template, "RecoveryFunctionRole", "AWS::IAM::Role")
    return [policy["PolicyName"] for policy in evaluate(role["Policies"], template, params or {})]


# ---------------------------------------------------------------------- role
def test_role_allows_only_what_recovery_does(template: dict[str, Any]) -> None:
    fn = props(template, "RecoveryFunction", "AWS::Serverless::Function")
    assert "Policies" not in fn and getatt(fn["Role"], "Arn") == "RecoveryFunctionRole"
    role = props(template, "RecoveryFunctionRole", "AWS::IAM::Role")
    assert not role.get("ManagedPolicyArns")
    actions: set[str] = set()
    # With job queues named (the default names none: no submit permission, see below).
    for sid, statement in statements(template, {"RecoveryJobQueueArns": "*"}).items():
        assert statement["Effect"] == "Allow", sid
        statement_actions = set(as_list(statement["Action"]))
        actions |= statement_actions
        resources = as_list(statement["Resource"])
        if "*" in resources:
            assert resources == ["*"] and statement_actions <= STAR_ONLY, sid
        for action in statement_actions:
            assert "*" not in action, (sid, action)
    assert actions == ALLOWED_ACTIONS


def test_own_queue_own_logs_own_bus_own_items(template: dict[str, Any]) -> None:
    raw = props(template, "RecoveryFunctionRole", "AWS::IAM::Role")["Policies"][0]["PolicyDocument"][
        "Statement"
    ]
    # The submit statement sits inside an Fn::If (none named: no statement); the others have a Sid.
    by_sid = {s["Sid"]: s for s in raw if "Sid" in s}
    assert getatt(by_sid["PollOwnQueue"]["Resource"], "Arn") == "RecoveryQueue"
    assert getatt(by_sid["WriteOwnLogs"]["Resource"], "Arn") == "RecoveryLogGroup"
    tables = by_sid["OwnItemsInStateTable"]
    assert getatt(tables["Resource"], "Arn") == "StateTable"
    # Only its own keys: recovery#... items (lineages, job pointers, skip markers).
    assert tables["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["recovery#*"]}}
    # The bus the stack creates (BatchPilotEventBus), named, not referenced: its policy names this role.
    bus = by_sid["PublishOwnEvents"]["Resource"]["Fn::Sub"]
    assert (
        bus
        == "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/${AWS::StackName}-events"
    )


def test_submit_only_to_the_configured_job_queues(template: dict[str, Any]) -> None:
    # The default names no job queue: recovery runs dry and may submit, create, pass or tag nothing.
    assert policy_names(template) == ["recovery-function"]
    assert policy_names(template, {"RecoveryJobQueueArns": "*"}) == ["recovery-function", "recovery-submit"]
    wildcard = statements(template, {"RecoveryJobQueueArns": "*"})
    assert (
        wildcard["SubmitToConfiguredJobQueues"]["Resource"] == f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/*"
    )
    shares = wildcard["SubmitToQuotaSharesOfConfiguredJobQueues"]
    assert shares["Resource"] == f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/*/quota-share/*"
    prefix = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue"
    queues = f"{prefix}/sm-training,{prefix}/gpu-spot"
    narrowed = statements(template, {"RecoveryJobQueueArns": queues})
    submit = narrowed["SubmitToConfiguredJobQueues"]
    assert submit["Resource"] == queues.split(",")
    assert set(as_list(submit["Action"])) == {"batch:SubmitServiceJob", "batch:SubmitJob"}
    # Quota shares (job-queue/<queue>/quota-share/<share>) of the named queues only.
    assert narrowed["SubmitToQuotaSharesOfConfiguredJobQueues"]["Resource"] == [
        f"{prefix}/sm-training/quota-share/*",
        f"{prefix}/gpu-spot/quota-share/*",
    ]
    # The job a submission creates: resource types job* and service-job*, this account and region.
    created = narrowed["CreateJobsAndServiceJobs"]
    assert created["Resource"] == [
        f"arn:aws:batch:{REGION}:{ACCOUNT}:job/*",
        f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/*",
    ]
    definitions = narrowed["SubmitJobWithItsJobDefinition"]
    assert as_list(definitions["Action"]) == ["batch:SubmitJob"]
    # Tags on submit: only requests that carry batchpilot's lineage tags (Batch has no CreateAction key).
    tagging = narrowed["TagJobsOnSubmit"]
    assert tagging["Condition"] == {
        "Null": {"aws:RequestTag/batchpilot:lineage": "false", "aws:RequestTag/batchpilot:attempt": "false"}
    }
    assert "batch:CreateAction" not in json.dumps(narrowed)


def test_pass_only_the_configured_execution_roles_and_only_to_sagemaker(template: dict[str, Any]) -> None:
    roles = f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingExecutionRole,arn:aws:iam::{ACCOUNT}:role/Other"
    named = {"RecoveryJobQueueArns": "*"}
    assert "PassOnlyConfiguredExecutionRolesToSageMaker" not in statements(template)  # dry-run: none
    for params, expected in (
        (named, f"arn:aws:iam::{ACCOUNT}:role/*"),
        ({**named, "RecoverySageMakerExecutionRoleArns": roles}, roles.split(",")),
    ):
        statement = statements(template, params)["PassOnlyConfiguredExecutionRolesToSageMaker"]
        assert as_list(statement["Action"]) == ["iam:PassRole"]
        assert statement["Resource"] == expected
        assert statement["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    tagging = statements(template, named)["TagOnlyTrainingJobsItCreates"]
    assert tagging["Condition"] == {"StringEquals": {"sagemaker:TaggingAction": "CreateTrainingJob"}}


def test_checkpoints_are_only_listed_under_the_configured_prefixes(template: dict[str, Any]) -> None:
    default = statements(template)["ListCheckpointPrefixes"]
    assert as_list(default["Action"]) == ["s3:ListBucket"]  # no GetObject, no PutObject
    assert default["Resource"] == "arn:aws:s3:::*" and "Condition" not in default
    narrowed = statements(
        template,
        {
            "RecoveryCheckpointBucketArns": "arn:aws:s3:::ckpt-a,arn:aws:s3:::ckpt-b",
            "RecoveryCheckpointKeyPrefixes": "llm/*,runs/*",
        },
    )["ListCheckpointPrefixes"]
    assert narrowed["Resource"] == ["arn:aws:s3:::ckpt-a", "arn:aws:s3:::ckpt-b"]
    assert narrowed["Condition"] == {"StringLike": {"s3:prefix": ["llm/*", "runs/*"]}}


# ---------------------------------------------------------------------- pacing and delivery
def test_concurrency_and_pacing_agree(template: dict[str, Any]) -> None:
    fn = props(template, "RecoveryFunction", "AWS::Serverless::Function")
    (event,) = fn["Events"].values()
    scaling = event["Properties"]["ScalingConfig"]["MaximumConcurrency"]
    assert (
        fn["ReservedConcurrentExecutions"]
        == scaling
        == int(fn["Environment"]["Variables"]["BATCHPILOT_RECOVERY_MAX_CONCURRENCY"])
    )
    assert scaling >= 2  # the smallest MaximumConcurrency Lambda accepts
    assert event["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    rate = template["Parameters"]["RecoverySubmitsPerSecond"]
    assert rate["MaxValue"] < 5 and rate["Default"] < 5
    queue = props(template, "RecoveryQueue", "AWS::SQS::Queue")
    assert queue["VisibilityTimeout"] >= 6 * fn["Timeout"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] >= 5
    policy = props(template, "RecoveryQueuePolicy", "AWS::SQS::QueuePolicy")
    (statement,) = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    assert getatt(statement["Condition"]["ArnEquals"]["aws:SourceArn"], "Arn") == "RecoveryRule"
    assert sorted(ref(q) for q in policy["Queues"]) == ["RecoveryDeadLetterQueue", "RecoveryQueue"]


def test_every_variable_is_a_setting_and_the_defaults_load() -> None:
    environment = load_app(ROOT / "template.yaml").functions["recovery"].environment
    known = set(RecoverySettings._ENV.values())
    ours = {k for k in environment if k.startswith("BATCHPILOT_")}
    assert ours <= known, ours - known
    settings = RecoverySettings.from_environ(environment, function="recovery")
    assert settings.budgets == DEFAULT_BUDGETS
    assert settings.queue_url and settings.queue_url.endswith("/RecoveryQueue")
    assert settings.dry_run is False and settings.state_table == "StateTable"
    defaults = RecoverySettings.from_mapping({"state_table": "StateTable"})
    for name in (
        "container_checkpoint",
        "submits_per_second",
        "max_concurrency",
        "no_checkpoint",
        "backoff_base_seconds",
        "backoff_max_seconds",
    ):
        assert getattr(settings, name) == getattr(defaults, name), name


# ---------------------------------------------------------------------- parameters
@pytest.mark.parametrize(
    ("parameter", "good", "bad"),
    [
        (
            "RecoveryJobQueueArns",
            [
                "",  # the default: none named, dry-run
                "*",
                "arn:aws:batch:us-east-1:111122223333:job-queue/a",
                "arn:aws:batch:us-east-1:111122223333:job-queue/a,arn:aws:batch:eu-west-1:111122223333:job-queue/b_2",
            ],
            [
                "a",
                "*,arn:aws:batch:us-east-1:111122223333:job-queue/a",
                f"{QUEUE_A}, {QUEUE_A}",
            ],
        ),
        (
            "RecoverySageMakerExecutionRoleArns",
            [
                "*",
                "arn:aws:iam::111122223333:role/SageMaker",
                "arn:aws:iam::111122223333:role/path/R1,arn:aws:iam::111122223333:role/R2",
            ],
            ["", "SageMaker", "arn:aws:iam::111122223333:user/x"],
        ),
        (
            "RecoveryCheckpointBucketArns",
            ["*", "arn:aws:s3:::ml-checkpoints", "arn:aws:s3:::a.b-c,arn:aws:s3:::ddd"],
            ["", "ml-checkpoints", "arn:aws:s3:::UPPER"],
        ),
        ("RecoveryCheckpointKeyPrefixes", ["*", "llm/*", "a/*,b/c/*"], ["", "a b"]),
        (
            "RecoveryBudgets",
            [
                DEFAULT_BUDGETS and "PREEMPTION=3,SPOT_INTERRUPTION=5,CAPACITY=3,INTERNAL_ERROR=2",
                "CAPACITY=0",
            ],
            ["", "TIMEOUT=1", "CAPACITY=100", "CAPACITY"],
        ),
        (
            "RecoveryContainerCheckpointSources",
            ["parameter:checkpoint_uri", "tag:ckpt,environment:CKPT"],
            ["", "file:x", "parameter:"],
        ),
    ],
)
def test_parameter_patterns(
    template: dict[str, Any], parameter: str, good: list[str], bad: list[str]
) -> None:
    spec = template["Parameters"][parameter]
    pattern = re.compile(spec["AllowedPattern"])
    assert pattern.fullmatch(str(spec["Default"]))
    assert good and bad
    for value in good:
        assert pattern.fullmatch(value), value
    for value in bad:
        assert not pattern.fullmatch(value), value


def test_budget_and_source_defaults_match_the_settings(template: dict[str, Any]) -> None:
    budgets = RecoverySettings.from_mapping(
        {"state_table": "StateTable", "budgets": template["Parameters"]["RecoveryBudgets"]["Default"]}
    )
    assert budgets.budgets == DEFAULT_BUDGETS


# ---------------------------------------------------------------------- rule
RULE_CASES = [
    (batch_job("FAILED"), True),
    (batch_job("RUNNABLE"), False),
    (batch_job("SUCCEEDED"), False),
    (service_job("FAILED"), True),
    (service_job("RUNNABLE"), False),
    (service_job("FAILED", detail_type="Batch Service Job Queue Blocked"), False),
    (training_job("Failed"), True),
    (training_job("Stopped", SecondaryStatus="MaxWaitTimeExceeded"), True),
    (training_job("Completed"), False),
    (training_job("InProgress"), False),
    (training_job("Failed", TrainingJobName="AWSBatchllama-pretrain0123456789abcdef0123456789abcdef"), False),
    (sample("service-job-preemption/completed"), False),
]


@pytest.mark.parametrize(("event", "expected"), RULE_CASES)
def test_rule_only_sends_terminal_failures_worth_deciding_on(
    template: dict[str, Any], event: dict[str, Any], expected: bool
) -> None:
    pattern = props(template, "RecoveryRule", "AWS::Events::Rule")["EventPattern"]
    matcher = EventPattern.load(json.dumps(pattern))  # raises for an invalid pattern
    assert bool(matcher.matches_event(event)) is expected


def test_rule_pattern_shape(template: dict[str, Any]) -> None:
    rule = props(template, "RecoveryRule", "AWS::Events::Rule")
    pattern = rule["EventPattern"]
    assert sorted(pattern["source"]) == ["aws.batch", "aws.sagemaker"]
    assert sorted(pattern["detail-type"]) == [
        "Batch Job State Change",
        "Batch Service Job State Change",
        "SageMaker Training Job State Change",
    ]
    branches = pattern["detail"]["$or"]
    assert {"status": ["FAILED"]} in branches
    (sagemaker,) = [b for b in branches if "TrainingJobStatus" in b]
    assert sorted(sagemaker["TrainingJobStatus"]) == ["Failed", "Stopped"]
    assert sagemaker["TrainingJobName"] == [{"anything-but": {"prefix": "AWSBatch"}}]
    (target,) = rule["Targets"]
    assert getatt(target["Arn"], "Arn") == "RecoveryQueue"
    assert getatt(target["DeadLetterConfig"]["Arn"], "Arn") == "RecoveryDeadLetterQueue"


def test_routing_overrides_name_real_files() -> None:
    for name, functions in EXTRA_BY_FILE.items():
        assert (EVENTS_DIR / name).is_file(), name
        if "recovery" in functions:
            detail = json.loads((EVENTS_DIR / name).read_text())["detail"]
            assert detail.get("status") == "FAILED" or detail.get("TrainingJobStatus") in {
                "Failed",
                "Stopped",
            }
