"""docs/permissions.md, produced from template.yaml: what deploying batchpilot needs, what each
function may do, and each ``Resource: "*"`` grant with its reason.

Run ``python -m batchpilot_local.iam.permissions`` to print the page, ``--write`` to write
``docs/permissions.md``, ``--check`` to exit 1 when the file differs (tests/template/
test_permissions_doc.py does the same check).

- **The deployer's permissions.** For every resource type the SAM-translated template creates, the
  actions CloudFormation's handlers call to create, update and delete it (:data:`HANDLER_PERMISSIONS`:
  the ``handlers`` section of each type's CloudFormation resource schema, as ``aws cloudformation
  describe-type --type RESOURCE --type-name <type>`` prints it; no package this project can
  install ships those schemas with their handlers, so the table is kept here and every action in it
  is checked against the Service Authorization Reference), the stack and change-set actions
  ``sam deploy`` and ``sam delete`` call, the artifacts bucket, and the roles CloudFormation hands
  to Lambda and EventBridge Scheduler (``iam:PassRole``, from the template's wiring).
- **Each function's role**, from the template expanded with every optional ARN parameter named
  (``<RecoveryJobQueueArns>`` stands for each ARN of that parameter) so that conditional statements
  show.
- **The ``*`` grants**: each action a role grants on ``Resource: "*"``, with the reason the Service
  Authorization Reference gives (the action has no resource type).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from batchpilot_local.iam import reference
from batchpilot_local.iam.conformance import star_reason
from batchpilot_local.iam.policy import Policy
from batchpilot_local.iam.stack import Stack, expand, translated

__all__ = ["DEPLOY_ACTIONS", "HANDLER_PERMISSIONS", "main", "render"]

HANDLER_PERMISSIONS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "AWS::CloudWatch::Alarm": {
        "create/update": (
            "cloudwatch:PutMetricAlarm",
            "cloudwatch:DescribeAlarms",
            "cloudwatch:TagResource",
            "cloudwatch:UntagResource",
            "cloudwatch:ListTagsForResource",
        ),
        "delete": ("cloudwatch:DeleteAlarms", "cloudwatch:DescribeAlarms"),
    },
    "AWS::CloudWatch::Dashboard": {
        "create/update": ("cloudwatch:PutDashboard", "cloudwatch:GetDashboard"),
        "delete": ("cloudwatch:DeleteDashboards", "cloudwatch:GetDashboard"),
    },
    "AWS::DynamoDB::Table": {
        "create/update": (
            "dynamodb:CreateTable",
            "dynamodb:UpdateTable",
            "dynamodb:DescribeTable",
            "dynamodb:UpdateTimeToLive",
            "dynamodb:DescribeTimeToLive",
            "dynamodb:UpdateContinuousBackups",
            "dynamodb:DescribeContinuousBackups",
            "dynamodb:TagResource",
            "dynamodb:UntagResource",
            "dynamodb:ListTagsOfResource",
            "kms:CreateGrant",
            "kms:DescribeKey",
        ),
        "delete": ("dynamodb:DeleteTable", "dynamodb:DescribeTable"),
    },
    "AWS::Events::EventBus": {
        "create/update": (
            "events:CreateEventBus",
            "events:DescribeEventBus",
            "events:UpdateEventBus",
            "events:PutPermission",
            "events:RemovePermission",
            "events:TagResource",
            "events:UntagResource",
            "events:ListTagsForResource",
        ),
        "delete": ("events:DeleteEventBus", "events:DescribeEventBus"),
    },
    "AWS::Events::Rule": {
        "create/update": (
            "events:PutRule",
            "events:DescribeRule",
            "events:PutTargets",
            "events:RemoveTargets",
            "events:ListTargetsByRule",
        ),
        "delete": (
            "events:DeleteRule",
            "events:DescribeRule",
            "events:RemoveTargets",
            "events:ListTargetsByRule",
        ),
    },
    "AWS::IAM::Role": {
        "create/update": (
            "iam:CreateRole",
            "iam:GetRole",
            "iam:UpdateRole",
            "iam:UpdateRoleDescription",
            "iam:UpdateAssumeRolePolicy",
            "iam:PutRolePolicy",
            "iam:GetRolePolicy",
            "iam:DeleteRolePolicy",
            "iam:ListRolePolicies",
            "iam:ListAttachedRolePolicies",
            "iam:TagRole",
            "iam:UntagRole",
        ),
        "delete": (
            "iam:DeleteRole",
            "iam:DeleteRolePolicy",
            "iam:GetRole",
            "iam:ListRolePolicies",
            "iam:ListAttachedRolePolicies",
            "iam:ListInstanceProfilesForRole",
        ),
    },
    "AWS::KMS::Alias": {
        "create/update": ("kms:CreateAlias", "kms:UpdateAlias", "kms:ListAliases"),
        "delete": ("kms:DeleteAlias", "kms:ListAliases"),
    },
    "AWS::KMS::Key": {
        "create/update": (
            "kms:CreateKey",
            "kms:DescribeKey",
            "kms:GetKeyPolicy",
            "kms:PutKeyPolicy",
            "kms:EnableKeyRotation",
            "kms:GetKeyRotationStatus",
            "kms:UpdateKeyDescription",
            "kms:EnableKey",
            "kms:ListResourceTags",
            "kms:TagResource",
            "kms:UntagResource",
        ),
        "delete": ("kms:ScheduleKeyDeletion", "kms:DescribeKey"),
    },
    "AWS::Lambda::EventInvokeConfig": {
        "create/update": (
            "lambda:PutFunctionEventInvokeConfig",
            "lambda:UpdateFunctionEventInvokeConfig",
            "lambda:GetFunctionEventInvokeConfig",
        ),
        "delete": ("lambda:DeleteFunctionEventInvokeConfig",),
    },
    "AWS::Lambda::EventSourceMapping": {
        "create/update": (
            "lambda:CreateEventSourceMapping",
            "lambda:UpdateEventSourceMapping",
            "lambda:GetEventSourceMapping",
            "lambda:TagResource",
            "lambda:ListTags",
        ),
        "delete": ("lambda:DeleteEventSourceMapping", "lambda:GetEventSourceMapping"),
    },
    "AWS::Lambda::Function": {
        "create/update": (
            "lambda:CreateFunction",
            "lambda:GetFunction",
            "lambda:UpdateFunctionCode",
            "lambda:UpdateFunctionConfiguration",
            "lambda:PutFunctionConcurrency",
            "lambda:DeleteFunctionConcurrency",
            "lambda:GetFunctionCodeSigningConfig",
            "lambda:GetRuntimeManagementConfig",
            "lambda:TagResource",
            "lambda:UntagResource",
            "lambda:ListTags",
            "lambda:GetLayerVersion",
            "s3:GetObject",
            "s3:GetObjectVersion",
        ),
        "delete": ("lambda:DeleteFunction", "lambda:GetFunction"),
    },
    "AWS::Lambda::LayerVersion": {
        "create/update": (
            "lambda:PublishLayerVersion",
            "lambda:GetLayerVersion",
            "s3:GetObject",
            "s3:GetObjectVersion",
        ),
        "delete": ("lambda:DeleteLayerVersion", "lambda:GetLayerVersion"),
    },
    "AWS::Logs::LogGroup": {
        "create/update": (
            "logs:CreateLogGroup",
            "logs:DescribeLogGroups",
            "logs:PutRetentionPolicy",
            "logs:DeleteRetentionPolicy",
            "logs:TagResource",
            "logs:UntagResource",
            "logs:ListTagsForResource",
        ),
        "delete": ("logs:DeleteLogGroup", "logs:DescribeLogGroups"),
    },
    "AWS::Scheduler::Schedule": {
        "create/update": ("scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:GetSchedule"),
        "delete": ("scheduler:DeleteSchedule", "scheduler:GetSchedule"),
    },
    "AWS::SNS::Topic": {
        "create/update": (
            "sns:CreateTopic",
            "sns:GetTopicAttributes",
            "sns:SetTopicAttributes",
            "sns:TagResource",
            "sns:UntagResource",
            "sns:ListTagsForResource",
        ),
        "delete": ("sns:DeleteTopic", "sns:GetTopicAttributes"),
    },
    "AWS::SNS::TopicPolicy": {
        "create/update": ("sns:SetTopicAttributes",),
        "delete": ("sns:SetTopicAttributes",),
    },
    "AWS::SQS::Queue": {
        "create/update": (
            "sqs:CreateQueue",
            "sqs:GetQueueUrl",
            "sqs:GetQueueAttributes",
            "sqs:SetQueueAttributes",
            "sqs:ListQueueTags",
            "sqs:TagQueue",
            "sqs:UntagQueue",
        ),
        "delete": ("sqs:DeleteQueue", "sqs:GetQueueAttributes"),
    },
    "AWS::SQS::QueuePolicy": {
        "create/update": ("sqs:SetQueueAttributes",),
        "delete": ("sqs:SetQueueAttributes",),
    },
}
"""CloudFormation resource type → the actions its handlers call (``create/update``, ``delete``), per
the type's CloudFormation resource schema (see the module docstring)."""

DEPLOY_ACTIONS: Mapping[str, tuple[str, ...]] = {
    "the stack and the SAM transform (`CreateChangeSet` also on "
    "`arn:aws:cloudformation:<region>:aws:transform/Serverless-2016-10-31`)": (
        "cloudformation:CreateChangeSet",
        "cloudformation:DescribeChangeSet",
        "cloudformation:ExecuteChangeSet",
        "cloudformation:DeleteChangeSet",
        "cloudformation:DescribeStacks",
        "cloudformation:DescribeStackEvents",
        "cloudformation:DescribeStackResource",
        "cloudformation:DescribeStackResources",
        "cloudformation:ListStackResources",
        "cloudformation:GetTemplate",
        "cloudformation:GetTemplateSummary",
        "cloudformation:DeleteStack",
    ),
    "the artifacts bucket (sam deploy uploads the code and the layer; sam delete removes them)": (
        "s3:PutObject",
        "s3:GetObject",
        "s3:DeleteObject",
        "s3:ListBucket",
        "s3:GetBucketLocation",
    ),
    "the artifacts bucket's own stack, once (`sam deploy --resolve-s3`: aws-sam-cli-managed-default)": (
        "cloudformation:CreateStack",
        "s3:CreateBucket",
        "s3:PutBucketPolicy",
        "s3:PutBucketVersioning",
        "s3:PutEncryptionConfiguration",
        "s3:PutBucketPublicAccessBlock",
        "s3:PutBucketTagging",
    ),
}
"""What ``sam deploy`` / ``sam delete`` call besides the resources' handlers (AWS SAM developer
guide, "Managing permissions": CloudFormation change sets, the transform
``AWS::Serverless-2016-10-31`` and the S3 bucket of packaged artifacts)."""

PLACEHOLDERS = {"AWS::AccountId": "<account>", "AWS::Region": "<region>", "AWS::StackName": "<stack>"}


def _documented_parameters(template: Mapping[str, Any]) -> dict[str, str]:
    """Every optional ARN-list parameter named by a placeholder (``<RecoveryJobQueueArns>``), so
    that the statements it turns on show."""
    out = {}
    for name, spec in (template.get("Parameters") or {}).items():
        pattern = str((spec or {}).get("AllowedPattern", ""))
        if ("arn:aws" in pattern or name.endswith("Prefixes")) and name != "AlarmActionTopicArn":
            out[name] = f"<{name}>"
    return out


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _code(values: Iterable[Any]) -> str:
    return ", ".join(f"`{v}`" for v in values)


def _condition(statement: Mapping[str, Any]) -> str:
    block = statement.get("Condition")
    if not block:
        return ""
    parts = []
    for operator, keys in block.items():
        for key, values in keys.items():
            parts.append(f"{operator} `{key}` {_code(_list(values))}")
    return "; ".join(parts)


def _statements(policies: Sequence[Policy]) -> list[tuple[str, Mapping[str, Any]]]:
    return [(p.name.rsplit("/", 1)[-1], s) for p in policies for s in p.statements]


def _role_section(stack: Stack, name: str) -> list[str]:
    role = stack.role_of(name)
    lines = [
        f"### {name} (`{role.logical_id}`)",
        "",
        "| Policy | Statement | Actions | Resources | Condition |",
        "| --- | --- | --- | --- | --- |",
    ]
    for policy, statement in _statements(role.policies):
        lines.append(
            f"| {policy} | {statement.get('Sid', '')} | {_code(_list(statement['Action']))} | "
            f"{_code(_list(statement['Resource']))} | {_condition(statement)} |"
        )
    return [*lines, ""]


def _star_section(stack: Stack) -> list[str]:
    rows: dict[str, set[str]] = {}
    for role in stack.roles.values():
        for _, statement in _statements(role.policies):
            if "*" in _list(statement.get("Resource", [])):
                for action in _list(statement["Action"]):
                    rows.setdefault(str(action), set()).add(role.logical_id)
    lines = ["| Action | Granted by | Why `*` |", "| --- | --- | --- |"]
    for action in sorted(rows):
        reason = star_reason(action) or "NOT JUSTIFIED: the action has resource types; scope the grant"
        lines.append(f"| `{action}` | {', '.join(sorted(rows[action]))} | {reason} |")
    return lines


def _deployer_section(template: Mapping[str, Any], stack: Stack) -> list[str]:
    counts: dict[str, int] = {}
    for resource in (template.get("Resources") or {}).values():
        counts[str(resource["Type"])] = counts.get(str(resource["Type"]), 0) + 1
    missing = sorted(set(counts) - set(HANDLER_PERMISSIONS))
    if missing:
        raise KeyError(f"HANDLER_PERMISSIONS has no entry for {', '.join(missing)}")
    lines = [
        "| Resource type | In the stack | Create and update | Delete |",
        "| --- | --- | --- | --- |",
    ]
    for kind in sorted(counts):
        entry = HANDLER_PERMISSIONS[kind]
        lines.append(
            f"| `{kind}` | {counts[kind]} | {_code(entry['create/update'])} | {_code(entry['delete'])} |"
        )
    lines += ["", "| For | Actions |", "| --- | --- |"]
    for purpose, actions in DEPLOY_ACTIONS.items():
        lines.append(f"| {purpose} | {_code(actions)} |")
    passed: dict[str, set[str]] = {}
    for function in stack.functions.values():
        passed.setdefault("lambda.amazonaws.com", set()).add(stack.roles[function.role].logical_id)
    for schedule in stack.schedules:
        role = stack.role_by_arn(schedule.role_arn)
        if role is not None:
            passed.setdefault("scheduler.amazonaws.com", set()).add(role.logical_id)
    for service, passed_roles in sorted(passed.items()):
        lines.append(
            f"| `iam:PassRole` to `{service}` (`iam:PassedToService`) | {_code(sorted(passed_roles))} |"
        )
    everything = sorted(
        {a for entry in HANDLER_PERMISSIONS.values() for group in entry.values() for a in group}
        | {a for group in DEPLOY_ACTIONS.values() for a in group}
        | {"iam:PassRole"}
    )
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": everything, "Resource": "*"}],
    }
    lines += [
        "",
        "As one policy for a deployer role (scope `Resource` to the stack's names, `<stack>-*`, where "
        "your organisation requires it; `iam:PassRole` to the roles above):",
        "",
        "```json",
        json.dumps(policy, indent=2),
        "```",
    ]
    return lines


def render(template_path: Path) -> str:
    """The page for the template at ``template_path``.

    Raises:
        KeyError: the template has a resource type :data:`HANDLER_PERMISSIONS` lacks.
        batchpilot_local.iam.reference.ReferenceError: an action of the tables is not in the reference.
    """
    template = translated(template_path)
    for entry in HANDLER_PERMISSIONS.values():
        for group in entry.values():
            for action in group:
                reference.action(action)
    for group in DEPLOY_ACTIONS.values():
        for action in group:
            reference.action(action)
    stack = expand(template, _documented_parameters(template), pseudo=PLACEHOLDERS)
    lines = [
        "# Permissions",
        "",
        "<!-- Generated by `python -m batchpilot_local.iam.permissions --write` from template.yaml and "
        f"AWS's Service Authorization Reference ({reference.data_version()}); "
        "tests/template/test_permissions_doc.py fails when this page and the script disagree. -->",
        "",
        "What deploying batchpilot needs, what each of its functions may do, and every grant on "
        '`Resource: "*"` with its reason. Every call the functions make in a replay of `events/` and in '
        "the fault suite is checked against these roles by `tests/template/test_iam_conformance.py`, "
        "as IAM would evaluate it.",
        "",
        "## The deployer's permissions",
        "",
        "`sam deploy` (and `sam delete`) act through CloudFormation with the deployer's credentials: "
        "for each resource type the stack holds, the actions CloudFormation calls to create, update and "
        "delete it (from each type's CloudFormation resource schema, `handlers`), then what SAM itself "
        "calls.",
        "",
        *_deployer_section(template, stack),
        "",
        "## What each function may do",
        "",
        "Each function's execution role, with every optional parameter that names resources set: "
        "`<RecoveryJobQueueArns>` stands for each ARN in that parameter, `<account>`, `<region>` and "
        "`<stack>` for the stack's. With a parameter left empty its statements are not in the role (no "
        "job queue named: no `recovery-submit` policy at all, recovery runs dry); with `*` the "
        "statement covers every resource of that type in the account and region. A resource the "
        "template does not name (the queues, the table) shows its logical id where CloudFormation "
        "generates `<stack>-<LogicalId>-<suffix>`.",
        "",
    ]
    for name in sorted(stack.functions):
        lines += _role_section(stack, name)
    lines += [
        '## Grants on `Resource: "*"`',
        "",
        "Only read actions for which the Service Authorization Reference lists no resource type: "
        "`*` is the only resource AWS accepts for them.",
        "",
        *_star_section(stack),
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m batchpilot_local.iam.permissions [--write | --check] [--template PATH]``."""
    parser = argparse.ArgumentParser(
        prog="python -m batchpilot_local.iam.permissions", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--template", type=Path, default=Path("template.yaml"))
    parser.add_argument("--output", type=Path, default=Path("docs/permissions.md"))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the page to --output")
    mode.add_argument("--check", action="store_true", help="exit 1 when --output differs from the page")
    args = parser.parse_args(argv)
    page = render(args.template)
    if args.write:
        args.output.write_text(page, encoding="utf-8")
        return 0
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != page:
            print(
                f"{args.output} is out of date: run python -m batchpilot_local.iam.permissions --write",
                file=sys.stderr,
            )
            return 1
        return 0
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
