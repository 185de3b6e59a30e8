"""What batchpilot relies on from the Batch service-job and service-environment APIs, asserted the
same way against the emulator and (opt-in) a real account: answers fit botocore's model, ids and
names round-trip, listings page without repeats, and errors carry the codes the code handles."""

from __future__ import annotations

import json
from typing import Any

import botocore.exceptions
import pytest
from batchpilot_local.testing.contract import ContractTarget, unique_name


def error_code(call: Any, **kwargs: Any) -> tuple[str, int]:
    """(``Error.Code``, HTTP status) of a call that must fail."""
    with pytest.raises(botocore.exceptions.ClientError) as info:
        call(**kwargs)
    response = info.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def all_pages(
    call: Any, key: str, page_size: int, max_pages: int = 20, **kwargs: Any
) -> list[dict[str, Any]]:
    """Every item of a paginated listing, following ``nextToken`` (at most ``max_pages`` pages:
    a real account may hold many), each page at most ``page_size`` long."""
    items: list[dict[str, Any]] = []
    token = None
    for _ in range(max_pages):
        page = call(maxResults=page_size, **kwargs, **({"nextToken": token} if token else {}))
        assert len(page[key]) <= page_size
        items += page[key]
        token = page.get("nextToken")
        if not token:
            break
    return items


def the_environment(target: ContractTarget) -> dict[str, Any]:
    described = target.batch.describe_service_environments(serviceEnvironments=[target.service_environment])
    assert target.problems(target.batch, "DescribeServiceEnvironments", described) == []
    (env,) = described["serviceEnvironments"]
    return dict(env)


# ------------------------------------------------------------------------------ service environments
def test_describe_service_environments_gives_name_arn_state_and_limits(target: ContractTarget) -> None:
    env = the_environment(target)
    assert target.service_environment in (env["serviceEnvironmentName"], env["serviceEnvironmentArn"])
    assert env["serviceEnvironmentArn"].startswith("arn:aws")
    assert ":service-environment/" in env["serviceEnvironmentArn"]
    assert env["state"] in ("ENABLED", "DISABLED")
    assert env["capacityLimits"], "the capacity function needs at least one limit"
    for limit in env["capacityLimits"]:
        assert isinstance(limit["maxCapacity"], int) and limit["maxCapacity"] >= 0
        assert isinstance(limit["capacityUnit"], str) and limit["capacityUnit"]


def test_describe_service_environments_pages_without_repeats(target: ContractTarget) -> None:
    envs = all_pages(target.batch.describe_service_environments, "serviceEnvironments", page_size=1)
    arns = [e["serviceEnvironmentArn"] for e in envs]
    assert len(arns) == len(set(arns))
    assert the_environment(target)["serviceEnvironmentArn"] in arns
    code, status = error_code(target.batch.describe_service_environments, nextToken="not-a-token")
    assert (code, status) == ("ClientException", 400)


def test_update_service_environment_with_its_own_values_changes_nothing(target: ContractTarget) -> None:
    # Read-mostly: the environment's own state and limits are written back unchanged.
    env = the_environment(target)
    answer = target.batch.update_service_environment(
        serviceEnvironment=env["serviceEnvironmentArn"],
        state=env["state"],
        capacityLimits=env["capacityLimits"],
    )
    assert target.problems(target.batch, "UpdateServiceEnvironment", answer) == []
    assert answer["serviceEnvironmentArn"] == env["serviceEnvironmentArn"]
    assert answer["serviceEnvironmentName"] == env["serviceEnvironmentName"]
    after = the_environment(target)
    assert (after["state"], after["capacityLimits"]) == (env["state"], env["capacityLimits"])


def test_an_unknown_service_environment_is_a_client_exception(target: ContractTarget) -> None:
    described = target.batch.describe_service_environments(serviceEnvironments=[unique_name()])
    assert described["serviceEnvironments"] == []
    assert error_code(
        target.batch.update_service_environment, serviceEnvironment=unique_name(), state="ENABLED"
    ) == ("ClientException", 400)


# ------------------------------------------------------------------------------ listing service jobs
def test_list_service_jobs_without_a_status_lists_running_jobs_only(target: ContractTarget) -> None:
    jobs = all_pages(
        target.batch.list_service_jobs, "jobSummaryList", page_size=100, jobQueue=target.job_queue
    )
    assert {j["status"] for j in jobs} <= {"RUNNING"}


@pytest.mark.parametrize("status", ["RUNNABLE", "SUCCEEDED"])
def test_list_service_jobs_by_status_pages_newest_first_without_repeats(
    target: ContractTarget, status: str
) -> None:
    jobs = all_pages(
        target.batch.list_service_jobs,
        "jobSummaryList",
        page_size=2,
        jobQueue=target.job_queue,
        jobStatus=status,
    )
    arns = [j["jobArn"] for j in jobs]
    assert len(arns) == len(set(arns))
    assert {j["status"] for j in jobs} <= {status}
    created = [j["createdAt"] for j in jobs]
    assert created == sorted(created, reverse=True)
    page = target.batch.list_service_jobs(jobQueue=target.job_queue, jobStatus=status, maxResults=1)
    assert target.problems(target.batch, "ListServiceJobs", page) == []


def test_list_service_jobs_refuses_what_it_cannot_do(target: ContractTarget) -> None:
    queue = target.job_queue
    assert error_code(target.batch.list_service_jobs, jobQueue=queue, maxResults=101) == (
        "ClientException",
        400,
    )
    two_filters = [{"name": "JOB_NAME", "values": ["a"]}, {"name": "AFTER_CREATED_AT", "values": ["0"]}]
    assert error_code(target.batch.list_service_jobs, jobQueue=queue, filters=two_filters)[1] == 400
    assert error_code(target.batch.list_service_jobs, jobQueue=queue, nextToken="not-a-token") == (
        "ClientException",
        400,
    )


def test_an_unknown_service_job_is_a_client_exception(target: ContractTarget) -> None:
    unknown = "00000000-0000-4000-8000-000000000000"
    assert error_code(target.batch.describe_service_job, jobId=unknown) == ("ClientException", 400)


def test_job_queue_snapshot_gives_the_front_of_the_queue_and_its_usage(target: ContractTarget) -> None:
    snapshot = target.batch.get_job_queue_snapshot(jobQueue=target.job_queue)
    assert target.problems(target.batch, "GetJobQueueSnapshot", snapshot) == []
    front = snapshot["frontOfQueue"]["jobs"]
    assert len(front) <= 100
    for job in front:
        assert ":service-job/" in job["jobArn"] and isinstance(job["earliestTimeAtPosition"], int)
    if target.name == "emulator":  # a real queue may move between the two calls below
        runnable = target.batch.list_service_jobs(jobQueue=target.job_queue, jobStatus="RUNNABLE")
        assert front and {j["jobArn"] for j in front} == {j["jobArn"] for j in runnable["jobSummaryList"]}


def test_list_quota_shares_gives_each_share_its_limits_or_a_client_exception(target: ContractTarget) -> None:
    # The job ledger (BatchLedgerClient.quota_shares) sums each quota share's maxCapacity for its
    # Entitlement and BorrowedInstances, and treats any error as "unreadable" (both omitted).
    try:
        shares = all_pages(target.batch.list_quota_shares, "quotaShares", 10, jobQueue=target.job_queue)
    except botocore.exceptions.ClientError as error:  # e.g. a queue without quota management
        assert error.response["Error"]["Code"] == "ClientException"
        return
    assert target.problems(target.batch, "ListQuotaShares", {"quotaShares": shares}) == []
    for share in shares:
        assert share["quotaShareName"] and ":job-queue/" in share["jobQueueArn"]
        assert share["capacityLimits"] and all(
            isinstance(limit["maxCapacity"], int) for limit in share["capacityLimits"]
        )
    assert len({s["quotaShareArn"] for s in shares}) == len(shares)  # pages without repeats


# ------------------------------------------------------------------------------ one service job
def test_submit_is_idempotent_then_describe_list_tag_and_terminate(target: ContractTarget) -> None:
    if target.submit_request is None:
        pytest.skip(target.skip_submit)
    batch = target.batch
    name = unique_name()
    token = unique_name("token")
    request = {
        "jobName": name,
        "jobQueue": target.job_queue,
        "serviceJobType": "SAGEMAKER_TRAINING",
        "clientToken": token,
        "tags": {"batchpilot-contract": "1"},
        **target.submit_request,
    }
    submitted = batch.submit_service_job(**request)
    try:
        assert target.problems(batch, "SubmitServiceJob", submitted) == []
        again = batch.submit_service_job(**request)  # a retry with the same clientToken
        assert again["jobId"] == submitted["jobId"] and again["jobArn"] == submitted["jobArn"]
        batch.tag_resource(resourceArn=submitted["jobArn"], tags={"batchpilot-contract-tag": "yes"})
    finally:
        # Terminated at once, whatever happened: the job must never start a training job.
        batch.terminate_service_job(jobId=submitted["jobId"], reason="batchpilot contract test")

    assert submitted["jobName"] == name
    described = batch.describe_service_job(jobId=submitted["jobId"])
    assert target.problems(batch, "DescribeServiceJob", described) == []
    assert (described["jobArn"], described["jobName"]) == (submitted["jobArn"], name)
    assert described["serviceJobType"] == "SAGEMAKER_TRAINING"
    assert json.loads(described["serviceRequestPayload"]) == json.loads(request["serviceRequestPayload"])
    queue_arn = described["jobQueue"]
    assert target.job_queue in (queue_arn, queue_arn.rsplit("/", 1)[-1])
    tags = batch.list_tags_for_resource(resourceArn=submitted["jobArn"])["tags"]
    assert tags == {"batchpilot-contract": "1", "batchpilot-contract-tag": "yes"}

    def listed_once() -> list[dict[str, Any]] | None:
        found = batch.list_service_jobs(
            jobQueue=target.job_queue, filters=[{"name": "JOB_NAME", "values": [name]}]
        )["jobSummaryList"]
        return found or None

    found = target.eventually(listed_once)
    assert found is not None and [j["jobId"] for j in found] == [submitted["jobId"]]  # one job, not two

    def failed() -> dict[str, Any] | None:
        job = batch.describe_service_job(jobId=submitted["jobId"])
        return dict(job) if job["status"] == "FAILED" else None

    stopped = target.eventually(failed)
    assert stopped is not None, "a terminated service job ends FAILED"
    assert stopped["isTerminated"] is True
