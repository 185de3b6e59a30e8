"""The IAM policy evaluator (batchpilot_local.iam.policy): statement matching and the decision, as
AWS's "Policy evaluation logic" and "IAM JSON policy elements" pages describe them."""

from __future__ import annotations

from typing import Any

import pytest
from batchpilot_local.iam.policy import (
    Policy,
    PolicyError,
    PolicyKind,
    Principal,
    Request,
    evaluate,
    wildcard_match,
)

ACCOUNT = "111122223333"
ROLE = Principal(f"arn:aws:iam::{ACCOUNT}:role/recovery", ACCOUNT)
OTHER = Principal(f"arn:aws:iam::{ACCOUNT}:role/someone-else", ACCOUNT)
EVENTS = Principal("", ACCOUNT, "events.amazonaws.com")
QUEUE = f"arn:aws:batch:us-east-1:{ACCOUNT}:job-queue/gpu"


def identity(*statements: dict[str, Any]) -> Policy:
    return Policy(
        "role/policy", PolicyKind.IDENTITY, {"Version": "2012-10-17", "Statement": list(statements)}
    )


def resource(*statements: dict[str, Any], kind: PolicyKind = PolicyKind.RESOURCE) -> Policy:
    return Policy("resource", kind, {"Statement": list(statements)})


def allow(action: Any, resource_: Any = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource_, **extra}


def request(action: str = "batch:SubmitJob", resource_: str = QUEUE, **context: tuple[str, ...]) -> Request:
    return Request(
        action, resource_, {k.replace("__", ":").replace("_slash_", "/"): v for k, v in context.items()}
    )


def test_wildcards_match_as_iam_does() -> None:
    assert wildcard_match("job-queue/*", "job-queue/a/quota-share/b")
    assert wildcard_match("job?", "jobs") and not wildcard_match("job?", "job")
    assert wildcard_match("BATCH:submit*", "batch:SubmitJob", ignore_case=True)
    assert not wildcard_match("BATCH:submit*", "batch:SubmitJob")
    with pytest.raises(PolicyError, match="policy variables"):
        wildcard_match("${aws:username}", "x")


def test_action_and_resource_must_both_match() -> None:
    policy = identity(allow(["batch:Submit*"], f"arn:aws:batch:us-east-1:{ACCOUNT}:job-queue/*"))
    assert evaluate(request(), ROLE, [policy]).allowed
    assert not evaluate(request("batch:TagResource"), ROLE, [policy]).allowed
    job = f"arn:aws:batch:us-east-1:{ACCOUNT}:job/1"
    decision = evaluate(request(resource_=job), ROLE, [policy])
    assert not decision.allowed and decision.reason == "no statement allows it"


def test_not_action_and_not_resource() -> None:
    policy = identity({"Effect": "Allow", "NotAction": "iam:*", "NotResource": f"{QUEUE}-secret"})
    assert evaluate(request(), ROLE, [policy]).allowed
    assert not evaluate(request("iam:PassRole"), ROLE, [policy]).allowed
    assert not evaluate(request(resource_=f"{QUEUE}-secret"), ROLE, [policy]).allowed


def test_an_explicit_deny_wins_over_any_allow() -> None:
    policies = [
        identity(allow("batch:*")),
        resource({"Effect": "Deny", "Principal": "*", "Action": "batch:*", "Resource": "*"}),
    ]
    decision = evaluate(request(), ROLE, policies)
    assert not decision.allowed and decision.denied_by and "explicitly denied" in decision.reason


@pytest.mark.parametrize(
    ("condition", "context", "allowed"),
    [
        (
            {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            {"iam:PassedToService": ("sagemaker.amazonaws.com",)},
            True,
        ),
        (
            {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            {"iam:PassedToService": ("lambda.amazonaws.com",)},
            False,
        ),
        ({"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}, {}, False),  # key missing
        ({"StringNotEquals": {"iam:PassedToService": "lambda.amazonaws.com"}}, {}, True),  # negated, missing
        ({"StringLike": {"s3:prefix": ["llm/*", "runs/*"]}}, {"s3:prefix": ("runs/12/",)}, True),
        ({"StringLike": {"s3:prefix": ["llm/*"]}}, {"s3:prefix": ("other/",)}, False),
        ({"StringEqualsIfExists": {"s3:prefix": "a"}}, {}, True),
        (
            {"Null": {"aws:RequestTag/batchpilot:lineage": "false"}},
            {"aws:RequestTag/batchpilot:lineage": ("bp1",)},
            True,
        ),
        ({"Null": {"aws:RequestTag/batchpilot:lineage": "false"}}, {"aws:RequestTag/team": ("ml",)}, False),
        ({"Null": {"aws:RequestTag/team": "true"}}, {}, True),
        ({"ForAllValues:StringEquals": {"aws:TagKeys": ["a", "b"]}}, {"aws:TagKeys": ("a", "b")}, True),
        ({"ForAllValues:StringEquals": {"aws:TagKeys": ["a", "b"]}}, {"aws:TagKeys": ("a", "team")}, False),
        ({"ForAllValues:StringEquals": {"aws:TagKeys": ["a"]}}, {}, True),  # vacuously true
        ({"ForAnyValue:StringEquals": {"aws:TagKeys": ["a"]}}, {"aws:TagKeys": ("team", "a")}, True),
        ({"ForAnyValue:StringEquals": {"aws:TagKeys": ["a"]}}, {}, False),
        (
            {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["recovery#*"]}},
            {"dynamodb:LeadingKeys": ("recovery#1", "ledger#2")},
            False,
        ),
        (
            {"ArnEquals": {"aws:SourceArn": "arn:aws:events:us-east-1:1:rule/R"}},
            {"aws:SourceArn": ("arn:aws:events:us-east-1:1:rule/R",)},
            True,
        ),
        (
            {"ArnLike": {"aws:SourceArn": "arn:aws:cloudwatch:us-east-1:1:alarm:*"}},
            {"aws:SourceArn": ("arn:aws:cloudwatch:us-east-1:1:alarm:A",)},
            True,
        ),
        (
            {"ArnLike": {"aws:SourceArn": "arn:aws:cloudwatch:*:1:alarm:*"}},
            {"aws:SourceArn": ("arn:aws:cloudwatch:us-east-1:2:alarm:A",)},
            False,
        ),
        ({"Bool": {"aws:SecureTransport": "false"}}, {}, False),  # the SDKs use TLS
        (
            {"NumericLessThanEquals": {"batch:SchedulingPriority": "50"}},
            {"batch:SchedulingPriority": ("20",)},
            True,
        ),
        (
            {"StringEquals": {"IAM:PASSEDTOSERVICE": "x"}},
            {"iam:PassedToService": ("x",)},
            True,
        ),  # keys ignore case
    ],
)
def test_condition_operators(
    condition: dict[str, Any], context: dict[str, tuple[str, ...]], allowed: bool
) -> None:
    policy = identity(allow("*", "*", Condition=condition))
    assert evaluate(Request("batch:SubmitJob", QUEUE, context), ROLE, [policy]).allowed is allowed


def test_every_key_of_a_condition_and_every_operator_must_hold() -> None:
    condition = {
        "Null": {"aws:RequestTag/a": "false", "aws:RequestTag/b": "false"},
        "StringEquals": {"batch:ShareIdentifier": "x"},
    }
    policy = identity(allow("*", "*", Condition=condition))
    full = {"aws:RequestTag/a": ("1",), "aws:RequestTag/b": ("2",), "batch:ShareIdentifier": ("x",)}
    assert evaluate(Request("batch:SubmitJob", QUEUE, full), ROLE, [policy]).allowed
    for drop in full:
        partial = {k: v for k, v in full.items() if k != drop}
        assert not evaluate(Request("batch:SubmitJob", QUEUE, partial), ROLE, [policy]).allowed, drop


def test_unsupported_operators_and_elements_raise() -> None:
    with pytest.raises(PolicyError, match="not supported"):
        evaluate(
            request(), ROLE, [identity(allow("*", "*", Condition={"DateLessThan": {"aws:CurrentTime": "x"}}))]
        )
    with pytest.raises(PolicyError, match="NotPrincipal"):
        evaluate(
            request(),
            ROLE,
            [resource({"Effect": "Allow", "NotPrincipal": "*", "Action": "*", "Resource": "*"})],
        )
    with pytest.raises(PolicyError, match="Effect"):
        evaluate(request(), ROLE, [identity({"Effect": "allow", "Action": "*", "Resource": "*"})])


def test_a_resource_policy_that_names_the_role_allows_without_an_identity_policy() -> None:
    topic = f"arn:aws:sns:us-east-1:{ACCOUNT}:oncall"
    policy = resource(
        {"Effect": "Allow", "Principal": {"AWS": ROLE.arn}, "Action": "sns:Publish", "Resource": topic}
    )
    assert evaluate(Request("sns:Publish", topic), ROLE, [policy]).allowed
    assert not evaluate(Request("sns:Publish", topic), OTHER, [policy]).allowed


def test_service_principals_are_allowed_only_by_the_resource_policy() -> None:
    queue = f"arn:aws:sqs:us-east-1:{ACCOUNT}:q"
    rule = f"arn:aws:events:us-east-1:{ACCOUNT}:rule/R"
    policy = resource(
        {
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": queue,
            "Condition": {"ArnEquals": {"aws:SourceArn": rule}},
        }
    )
    assert evaluate(Request("sqs:SendMessage", queue, {"aws:SourceArn": (rule,)}), EVENTS, [policy]).allowed
    other_rule = {"aws:SourceArn": (f"{rule}2",)}
    assert not evaluate(Request("sqs:SendMessage", queue, other_rule), EVENTS, [policy]).allowed
    assert not evaluate(
        Request("sqs:SendMessage", queue, {"aws:SourceArn": (rule,)}), EVENTS, [identity(allow("*"))]
    ).allowed


def test_the_topic_policy_deny_spares_its_publisher_only() -> None:
    topic = f"arn:aws:sns:us-east-1:{ACCOUNT}:oncall"
    deny = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "sns:Publish",
        "Resource": topic,
        "Condition": {
            "ArnNotEquals": {"aws:PrincipalArn": ROLE.arn},
            "BoolIfExists": {"aws:PrincipalIsAWSService": "false"},
        },
    }
    granted = identity(allow("sns:Publish", topic))
    assert evaluate(Request("sns:Publish", topic), ROLE, [granted, resource(deny)]).allowed
    assert not evaluate(Request("sns:Publish", topic), OTHER, [granted, resource(deny)]).allowed


def test_a_key_policy_must_allow_directly_or_hand_over_to_iam() -> None:
    key = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/k"
    via = {"kms:ViaService": ("sns.us-east-1.amazonaws.com",)}
    direct = resource(
        {
            "Effect": "Allow",
            "Principal": {"AWS": ROLE.arn},
            "Action": "kms:Decrypt",
            "Resource": "*",
            "Condition": {"StringEquals": {"kms:ViaService": "sns.us-east-1.amazonaws.com"}},
        },
        kind=PolicyKind.KEY,
    )
    root = resource(
        {
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
            "Action": "kms:*",
            "Resource": "*",
        },
        kind=PolicyKind.KEY,
    )
    assert evaluate(Request("kms:Decrypt", key, via), ROLE, [direct]).allowed
    assert not evaluate(Request("kms:Decrypt", key, {}), ROLE, [direct]).allowed
    # Through the account: the role's own policy must allow it too.
    assert not evaluate(Request("kms:Decrypt", key, via), ROLE, [root]).allowed
    assert evaluate(
        Request("kms:Decrypt", key, via), ROLE, [root, identity(allow("kms:Decrypt", key))]
    ).allowed
    # An identity policy alone never opens a key.
    assert not evaluate(Request("kms:Decrypt", key, via), ROLE, [identity(allow("kms:*"))]).allowed


def test_only_through_star_tells_a_wildcard_grant_from_a_scoped_one() -> None:
    star = identity(allow("batch:DescribeJobs", "*"))
    scoped = identity(allow("batch:SubmitJob", f"arn:aws:batch:us-east-1:{ACCOUNT}:job-queue/*"))
    assert evaluate(Request("batch:DescribeJobs", "*"), ROLE, [star]).only_through_star
    assert not evaluate(request(), ROLE, [scoped]).only_through_star
    both = evaluate(request(), ROLE, [identity(allow("batch:SubmitJob", "*")), scoped])
    assert both.allowed and not both.only_through_star
