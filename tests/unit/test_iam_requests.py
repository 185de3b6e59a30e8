"""From a recorded API call to what IAM authorises (batchpilot_local.iam.requests), the reference
data behind it (batchpilot_local.iam.reference), the template expansion (batchpilot_local.iam.stack)
and the call recorder's function attribution (batchpilot_local.iam.calls)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from batchpilot_local.embedded_aws import EmbeddedAws, observing
from batchpilot_local.iam import reference
from batchpilot_local.iam.calls import ApiCall, CallRecorder, function_on_stack
from batchpilot_local.iam.conformance import judge, star_reason
from batchpilot_local.iam.requests import Names, UnmodelledCall, auth_requests
from batchpilot_local.iam.stack import Stack, expand, translated
from batchpilot_local.testing.paths import TEMPLATE_PATH

ACCOUNT = "111122223333"
BATCH = f"arn:aws:batch:us-east-1:{ACCOUNT}"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingExecutionRole"
QUEUE = f"{BATCH}:job-queue/sm-quota-queue"


@pytest.fixture(scope="module")
def cfn() -> dict[str, Any]:
    return translated(TEMPLATE_PATH)


@pytest.fixture(scope="module")
def configured(cfn: dict[str, Any]) -> Stack:
    return expand(cfn, {"RecoveryJobQueueArns": QUEUE, "RecoverySageMakerExecutionRoleArns": ROLE_ARN})


def submit_service_job(**changes: Any) -> ApiCall:
    params = {
        "jobName": "llm-r1",
        "jobQueue": QUEUE,
        "serviceType": "SAGEMAKER_TRAINING",
        "quotaShareName": "research",
        "serviceRequestPayload": json.dumps({"RoleArn": ROLE_ARN}),
        "tags": {"team": "ml", "batchpilot:lineage": "bp1", "batchpilot:attempt": "1"},
        **changes,
    }
    return ApiCall(
        "recovery",
        "batch",
        "SubmitServiceJob",
        params,
        {"jobArn": f"{BATCH}:service-job/abc"},
        True,
    )


# ------------------------------------------------------------------------------------ reference
def test_operations_map_to_the_actions_that_authorise_them() -> None:
    assert reference.actions_for_operation("batch", "SubmitServiceJob") == "batch:SubmitServiceJob"
    assert reference.actions_for_operation("s3", "ListObjectsV2") == "s3:ListBucket"  # by its API page
    assert reference.actions_for_operation("sns", "PublishBatch") == "sns:Publish"
    with pytest.raises(reference.ReferenceError):
        reference.actions_for_operation("batch", "NoSuchOperation")


def test_the_reference_marks_required_resource_types_and_their_arns() -> None:
    submit = reference.action("batch:SubmitServiceJob")
    required = {rt.name for rt in submit.resource_types if rt.required}
    assert required == {"job-queue", "service-job"}
    assert (
        submit.resource_type("quota-share") is not None and not submit.resource_type("quota-share").required
    )  # type: ignore[union-attr]
    assert "aws:TagKeys" in submit.request_condition_keys
    share = f"{QUEUE}/quota-share/research"
    assert reference.resource_type_of("batch:SubmitServiceJob", share) == "quota-share"
    assert reference.resource_type_of("batch:SubmitServiceJob", QUEUE) == "job-queue"
    assert reference.tagging_action("batch") == "batch:TagResource"
    assert reference.tagging_action("sagemaker") == "sagemaker:AddTags"
    assert star_reason("batch:DescribeJobs") is not None
    assert star_reason("batch:ListQuotaShares") is None  # it has a resource type: scope it


# ------------------------------------------------------------------------------------ requests
def test_a_service_job_submission_needs_queue_job_share_tags_and_the_role(configured: Stack) -> None:
    requests = auth_requests(submit_service_job(), configured, Names(configured))
    seen = {(r.action, r.resource_type, r.resource) for r in requests}
    assert seen == {
        ("batch:SubmitServiceJob", "job-queue", QUEUE),
        ("batch:SubmitServiceJob", "service-job", f"{BATCH}:service-job/abc"),
        ("batch:SubmitServiceJob", "quota-share", f"{QUEUE}/quota-share/research"),
        ("batch:TagResource", "service-job", f"{BATCH}:service-job/abc"),
        ("iam:PassRole", "role", ROLE_ARN),
    }
    tag = next(r for r in requests if r.action == "batch:TagResource")
    assert set(tag.context["aws:TagKeys"]) == {"team", "batchpilot:lineage", "batchpilot:attempt"}
    passed = next(r for r in requests if r.action == "iam:PassRole")
    assert passed.context == {"iam:PassedToService": ("sagemaker.amazonaws.com",)}
    verdict = judge([submit_service_job()], configured, Names(configured))
    assert verdict.denied == [] and verdict.requests == 5


def test_without_its_lineage_tags_a_submission_may_not_tag(configured: Stack) -> None:
    call = submit_service_job(tags={"team": "ml"})
    verdict = judge([call], configured, Names(configured))
    assert [(f.request.action, f.request.resource_type) for f in verdict.denied] == [
        ("batch:TagResource", "service-job")
    ]
    assert "aws:TagKeys=team" in verdict.denied[0].missing_grant()


def test_a_submission_to_a_queue_not_named_is_refused(configured: Stack) -> None:
    other = f"{BATCH}:job-queue/other"
    verdict = judge([submit_service_job(jobQueue=other, quotaShareName=None)], configured, Names(configured))
    assert {(f.request.action, f.request.resource) for f in verdict.denied} == {
        ("batch:SubmitServiceJob", other)
    }


def test_a_transaction_is_authorised_item_by_item_with_its_partition_keys(configured: Stack) -> None:
    items = [
        {"Put": {"TableName": "StateTable", "Item": {"pk": {"S": "ledger#job#a"}, "sk": {"S": "job"}}}},
        {"Update": {"TableName": "StateTable", "Key": {"pk": {"S": "ledger#agg#q"}, "sk": {"S": "x"}}}},
        {"ConditionCheck": {"TableName": "StateTable", "Key": {"pk": {"S": "recovery#x"}, "sk": {"S": "y"}}}},
    ]
    call = ApiCall("ledger", "dynamodb", "TransactWriteItems", {"TransactItems": items}, {}, True)
    requests = auth_requests(call, configured, Names(configured))
    assert [(r.action, r.context["dynamodb:LeadingKeys"]) for r in requests] == [
        ("dynamodb:PutItem", ("ledger#job#a",)),
        ("dynamodb:UpdateItem", ("ledger#agg#q",)),
        ("dynamodb:ConditionCheckItem", ("recovery#x",)),
    ]
    verdict = judge([call], configured, Names(configured))
    # The ledger may not touch recovery's items.
    assert [f.request.action for f in verdict.denied] == ["dynamodb:ConditionCheckItem"]


def test_a_query_names_its_partition_key_value(configured: Stack) -> None:
    params = {
        "TableName": "StateTable",
        "KeyConditionExpression": "#p = :pk AND begins_with(sk, :s)",
        "ExpressionAttributeNames": {"#p": "pk"},
        "ExpressionAttributeValues": {":pk": {"S": "capacity#env#a"}, ":s": {"S": "x"}},
    }
    (request,) = auth_requests(
        ApiCall("capacity", "dynamodb", "Query", params), configured, Names(configured)
    )
    assert request.context["dynamodb:LeadingKeys"] == ("capacity#env#a",)


def test_publishing_to_the_encrypted_topic_uses_its_key_through_sns(configured: Stack) -> None:
    topic = f"arn:aws:sns:us-east-1:{ACCOUNT}:AlertsOnCallTopic"  # the embedded AWS's name for it
    call = ApiCall("alerts", "sns", "PublishBatch", {"TopicArn": topic, "PublishBatchRequestEntries": []})
    requests = auth_requests(call, configured, Names(configured))
    assert [(r.action, r.resource.rsplit(":", 1)[-1]) for r in requests] == [
        ("sns:Publish", "batchpilot-oncall"),  # CloudFormation's name (TopicName)
        ("kms:GenerateDataKey", "key/AlertsTopicKey"),
        ("kms:Decrypt", "key/AlertsTopicKey"),
    ]
    assert judge([call], configured, Names(configured)).denied == []


def test_fault_suite_names_stand_for_the_functions_own_resources(configured: Stack) -> None:
    call = ApiCall(
        "recovery", "events", "PutEvents", {"Entries": [{"Source": "batchpilot", "DetailType": "x"}]}
    )
    (as_recorded,) = auth_requests(call, configured, Names(configured))
    assert as_recorded.resource.endswith("event-bus/default")
    assert judge([call], configured, Names(configured)).denied
    (rebound,) = auth_requests(call, configured, Names(configured, own_resources=True))
    assert rebound.resource.endswith("event-bus/batchpilot-events")
    assert judge([call], configured, Names(configured, own_resources=True)).denied == []


def test_calls_that_cannot_be_placed_are_reported_not_guessed(configured: Stack) -> None:
    with pytest.raises(UnmodelledCall, match="not a function of the template"):
        auth_requests(ApiCall("nobody", "batch", "DescribeJobs", {}), configured, Names(configured))
    with pytest.raises(UnmodelledCall, match="no locator"):
        auth_requests(
            ApiCall("recovery", "batch", "SubmitServiceJob", {"jobName": "x"}), configured, Names(configured)
        )


# ------------------------------------------------------------------------------------ stack
def test_the_template_expands_as_cloudformation_would(cfn: dict[str, Any], configured: Stack) -> None:
    default = expand(cfn)
    assert [p.name for p in default.role_of("recovery").policies] == [
        "RecoveryFunctionRole/recovery-function"
    ]
    assert len(configured.role_of("recovery").policies) == 2
    assert default.functions["recovery"].log_group_arn.endswith("log-group:/aws/lambda/batchpilot-recovery:*")
    assert (
        default.functions["alerts"].environment["BATCHPILOT_ONCALL_TOPIC_ARN"].endswith(":batchpilot-oncall")
    )
    topic, key = f"arn:aws:sns:us-east-1:{ACCOUNT}:batchpilot-oncall", f"arn:aws:kms:us-east-1:{ACCOUNT}"
    watchdog = f"arn:aws:sns:us-east-1:{ACCOUNT}:batchpilot-alerts-watchdog"
    # both topics (on-call and the alerts path's watchdog) are encrypted with the one alerts key
    assert default.topic_keys == {topic: f"{key}:key/AlertsTopicKey", watchdog: f"{key}:key/AlertsTopicKey"}
    assert default.tables == {"StateTable": "pk"}
    with pytest.raises(ValueError, match="not declared"):
        expand(cfn, {"NoSuchParameter": "x"})


# ------------------------------------------------------------------------------------ recorder
def test_a_call_is_attributed_to_the_outermost_function_package_on_the_stack() -> None:
    namespace: dict[str, Any] = {
        "__name__": "batchpilot.recovery.service",
        "function_on_stack": function_on_stack,
    }
    exec("def who():\n    return function_on_stack()\n", namespace)
    inner: dict[str, Any] = {"__name__": "batchpilot.io.batch", "who": namespace["who"]}
    exec("def via_adapter():\n    return who()\n", inner)
    outer: dict[str, Any] = {"__name__": "batchpilot.ledger.service", "via": inner["via_adapter"]}
    exec("def run():\n    return via()\n", outer)
    assert namespace["who"]() == "recovery"
    assert outer["run"]() == "ledger"  # outermost wins; io/ belongs to no function
    assert function_on_stack() is None


def test_the_recorder_sees_each_call_through_the_embedded_aws_seam() -> None:
    from batchpilot.io.clients import client

    recorder = CallRecorder()
    with observing(recorder), EmbeddedAws() as aws:
        aws.client("sqs").create_queue(QueueName="q")  # the replay's own client: not observed
        client("sqs").list_queues()
    with EmbeddedAws():
        client("sqs").list_queues()  # after observing(): not recorded
    assert [(c.api, c.function, c.succeeded) for c in recorder.calls] == [("sqs:ListQueues", None, True)]
