"""The emulator (:mod:`batchpilot_local.emulator`): the Batch service-job APIs and SageMaker
training jobs, through real boto3 clients.

Every call goes through botocore's serialiser and parameter validation, the moto stubber and the
emulator in front of it, and is parsed by botocore's own parser.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import botocore.exceptions
import pytest
from batchpilot.io import clients as adapters
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.emulator import Overlay
from batchpilot_local.emulator.shapes import service_model, shape_problems
from batchpilot_local.testing.samples import sample
from botocore.config import Config
from botocore.retries.standard import RetryContext, ThrottledRetryableChecker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ACCOUNT = "111122223333"
PAYLOAD = json.dumps(
    {
        "TrainingJobName": "llama-ft",
        "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole",
        "AlgorithmSpecification": {"TrainingImage": "img:1", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://out/"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "CheckpointConfig": {"S3Uri": "s3://ckpt/llama-ft/"},
    }
)
WORLD: dict[str, Any] = {
    "service_environments": [
        {"name": "sm-env", "capacityLimits": [{"maxCapacity": 8, "capacityUnit": "NUM_INSTANCES"}]},
        {"name": "sm-quota-env", "capacityLimits": [{"maxCapacity": 4, "capacityUnit": "ml.p4d.24xlarge"}]},
    ],
    "job_queues": [
        {"name": "fifo", "kind": "service", "serviceEnvironment": "sm-env"},
        {"name": "fair", "kind": "service", "scheduling": "FAIR_SHARE", "serviceEnvironment": "sm-env"},
        {
            "name": "quota",
            "kind": "service",
            "scheduling": "QUOTA_MANAGEMENT",
            "serviceEnvironment": "sm-quota-env",
        },
        {"name": "gpu", "kind": "container", "computeEnvironments": ["gpu-ce"]},
    ],
}


@pytest.fixture
def aws() -> Iterator[EmbeddedAws]:
    with EmbeddedAws() as embedded:
        embedded.seed(WORLD)
        yield embedded


def no_retry_client(aws: EmbeddedAws, service: str = "batch") -> Any:
    session = aws._session
    assert session is not None
    return session.client(service, region_name=aws.region, config=Config(retries={"total_max_attempts": 1}))


def submit(batch: Any, **overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "jobName": "llama-ft",
        "jobQueue": "fifo",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "serviceRequestPayload": PAYLOAD,
    }
    params.update(overrides)
    return dict(batch.submit_service_job(**params))


def error_of(call: Any, **kwargs: Any) -> dict[str, Any]:
    with pytest.raises(botocore.exceptions.ClientError) as info:
        call(**kwargs)
    response = info.value.response
    return {
        "code": response["Error"]["Code"],
        "message": response["Error"]["Message"],
        "status": response["ResponseMetadata"]["HTTPStatusCode"],
        "type_header": response["ResponseMetadata"]["HTTPHeaders"].get("x-amzn-errortype", ""),
    }


# ------------------------------------------------------------------------------ service environments
def test_service_environments_create_describe_update_delete(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    created = batch.create_service_environment(
        serviceEnvironmentName="extra",
        serviceEnvironmentType="SAGEMAKER_TRAINING",
        capacityLimits=[{"maxCapacity": 2, "capacityUnit": "NUM_INSTANCES"}],
        tags={"team": "ml"},
    )
    assert created["serviceEnvironmentArn"] == f"arn:aws:batch:us-east-1:{ACCOUNT}:service-environment/extra"
    every = batch.describe_service_environments()["serviceEnvironments"]
    assert [e["serviceEnvironmentName"] for e in every] == ["sm-env", "sm-quota-env", "extra"]
    by_arn = batch.describe_service_environments(
        serviceEnvironments=[created["serviceEnvironmentArn"], "sm-env"]
    )
    assert {e["serviceEnvironmentName"] for e in by_arn["serviceEnvironments"]} == {"extra", "sm-env"}
    assert batch.describe_service_environments(serviceEnvironments=["nope"])["serviceEnvironments"] == []

    first = batch.describe_service_environments(maxResults=2)
    rest = batch.describe_service_environments(maxResults=2, nextToken=first["nextToken"])
    assert len(first["serviceEnvironments"]) == 2 and len(rest["serviceEnvironments"]) == 1
    assert "nextToken" not in rest
    # moto's paginator ties a token to its query; Batch's own error comes back either way.
    for bad_token in (first["nextToken"], "not-a-token"):
        other_query = error_of(
            batch.describe_service_environments, serviceEnvironments=["sm-env"], nextToken=bad_token
        )
        assert (other_query["code"], other_query["message"]) == ("ClientException", "Invalid nextToken")
    assert error_of(batch.describe_service_environments, maxResults=101)["code"] == "ClientException"

    batch.update_service_environment(
        serviceEnvironment="extra",
        state="DISABLED",
        capacityLimits=[{"maxCapacity": 6, "capacityUnit": "NUM_INSTANCES"}],
    )
    (env,) = batch.describe_service_environments(serviceEnvironments=["extra"])["serviceEnvironments"]
    assert env["state"] == "DISABLED" and env["status"] == "VALID"
    assert env["capacityLimits"] == [{"maxCapacity": 6, "capacityUnit": "NUM_INSTANCES"}]
    assert env["tags"] == {"team": "ml"}

    assert (
        error_of(
            batch.create_service_environment,
            serviceEnvironmentName="extra",
            serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}],
        )["code"]
        == "ClientException"
    )
    assert (
        error_of(batch.delete_service_environment, serviceEnvironment="sm-env")["code"] == "ClientException"
    )
    batch.delete_service_environment(serviceEnvironment="extra")
    assert (
        error_of(batch.update_service_environment, serviceEnvironment="extra", state="ENABLED")["status"]
        == 400
    )


# ---------------------------------------------------------------------------------------- job queues
def test_service_job_queue_through_the_api(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    created = batch.create_job_queue(
        jobQueueName="api-queue",
        priority=10,
        jobQueueType="SAGEMAKER_TRAINING",
        serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "sm-env"}],
    )
    (queue,) = batch.describe_job_queues(jobQueues=[created["jobQueueArn"]])["jobQueues"]
    assert queue["jobQueueType"] == "SAGEMAKER_TRAINING"
    assert queue["serviceEnvironmentOrder"] == [
        {"order": 1, "serviceEnvironment": f"arn:aws:batch:us-east-1:{ACCOUNT}:service-environment/sm-env"}
    ]
    assert queue["state"] == "ENABLED" and queue["status"] == "VALID" and queue["priority"] == 10
    assert submit(batch, jobQueue="api-queue")["jobName"] == "llama-ft"
    batch.update_job_queue(jobQueue="api-queue", state="DISABLED")
    assert (
        "not ENABLED"
        in error_of(
            batch.submit_service_job,
            jobName="x",
            jobQueue="api-queue",
            serviceJobType="SAGEMAKER_TRAINING",
            serviceRequestPayload="{}",
        )["message"]
    )
    batch.delete_job_queue(jobQueue="api-queue")
    assert batch.describe_job_queues(jobQueues=["api-queue"])["jobQueues"] == []
    # one service environment per queue; an unknown one is refused
    assert (
        error_of(
            batch.create_job_queue,
            jobQueueName="bad",
            priority=1,
            jobQueueType="SAGEMAKER_TRAINING",
            serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "missing"}],
        )["code"]
        == "ClientException"
    )


def test_container_job_queue_needs_a_compute_environment_moto_holds(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    iam = aws.client("iam")
    role = iam.create_role(RoleName="batch-service", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    ce = batch.create_compute_environment(
        computeEnvironmentName="ce-1", type="UNMANAGED", state="ENABLED", serviceRole=role
    )
    batch.create_job_queue(
        jobQueueName="cq", priority=1, computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce-1"}]
    )
    (queue,) = batch.describe_job_queues(jobQueues=["cq"])["jobQueues"]
    assert queue["computeEnvironmentOrder"] == [
        {"order": 1, "computeEnvironment": ce["computeEnvironmentArn"]}
    ]
    assert (
        error_of(
            batch.create_job_queue,
            jobQueueName="cq2",
            priority=1,
            computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "nope"}],
        )["code"]
        == "ClientException"
    )


# ---------------------------------------------------------------------------------------- submit
def test_submit_then_describe_returns_everything(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    ids = submit(
        batch,
        jobQueue="fair",
        shareIdentifier="research",
        schedulingPriority=42,
        retryStrategy={"attempts": 3, "evaluateOnExit": [{"action": "RETRY", "onStatusReason": "Received*"}]},
        timeoutConfig={"attemptDurationSeconds": 7200},
        preemptionConfiguration={"preemptionRetriesBeforeTermination": 2},
        tags={"team": "nlp"},
    )
    job = batch.describe_service_job(jobId=ids["jobId"])
    assert job["jobArn"] == f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/{ids['jobId']}"
    assert job["jobQueue"] == f"arn:aws:batch:us-east-1:{ACCOUNT}:job-queue/fair"
    assert (
        job["serviceRequestPayload"] == PAYLOAD and json.loads(job["serviceRequestPayload"])["ResourceConfig"]
    )
    assert job["status"] == "RUNNABLE" and job["isTerminated"] is False and job["attempts"] == []
    assert job["shareIdentifier"] == "research" and job["schedulingPriority"] == 42
    assert job["retryStrategy"]["attempts"] == 3
    assert job["timeoutConfig"] == {"attemptDurationSeconds": 7200}
    assert job["preemptionConfiguration"] == {"preemptionRetriesBeforeTermination": 2}
    assert job["tags"] == {"team": "nlp"}
    assert abs(job["createdAt"] - time.time() * 1000) < 60_000
    assert batch.list_tags_for_resource(resourceArn=ids["jobArn"])["tags"] == {"team": "nlp"}


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"jobQueue": "missing"}, "does not exist"),
        ({"jobQueue": "gpu"}, "not a SAGEMAKER_TRAINING job queue"),
        ({"serviceRequestPayload": "{not json"}, "not valid JSON"),
        ({"serviceRequestPayload": json.dumps({"x": "a" * 10_300})}, "larger than 10240 bytes"),
        ({"jobName": "has space"}, "jobName"),
        ({"jobName": "x" * 129}, "jobName"),
        ({"shareIdentifier": "research"}, "shareIdentifier is not allowed"),
        ({"jobQueue": "fair"}, "shareIdentifier is required"),
        ({"jobQueue": "quota"}, "quotaShareName is required"),
        ({"quotaShareName": "research"}, "quotaShareName is not allowed"),
        ({"schedulingPriority": 10_000}, "between 0 and 9999"),
        ({"tags": {f"k{i}": "v" for i in range(51)}}, "Too many tags"),
        ({"clientToken": "t" * 65}, "clientToken"),
        ({"retryStrategy": {"attempts": 11}}, "between 1 and 10"),
    ],
)
def test_submit_validation(aws: EmbeddedAws, overrides: dict[str, Any], fragment: str) -> None:
    batch = aws.client("batch")
    error = error_of(batch.submit_service_job, **{**_base_submit(), **overrides})
    assert error["code"] == "ClientException" and error["status"] == 400
    assert fragment in error["message"]
    assert error["type_header"].startswith("ClientException")
    assert aws.batch.service_jobs == {}


def _base_submit() -> dict[str, Any]:
    return {
        "jobName": "llama-ft",
        "jobQueue": "fifo",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "serviceRequestPayload": PAYLOAD,
    }


def test_fair_share_and_quota_queues_take_their_share(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    submit(batch, jobQueue="fair", shareIdentifier="a")
    submit(batch, jobQueue="quota", quotaShareName="research")
    assert len(aws.batch.service_jobs) == 2


def test_botocore_rejects_an_invalid_request_before_it_is_sent(aws: EmbeddedAws) -> None:
    batch = adapters.client("batch")
    with pytest.raises(botocore.exceptions.ParamValidationError, match="serviceJobType"):
        batch.submit_service_job(jobName="x", jobQueue="fifo", serviceRequestPayload="{}")
    # botocore does not check enums: a wrong serviceJobType reaches the service, which refuses it
    with pytest.raises(botocore.exceptions.ClientError, match="serviceJobType ECS"):
        batch.submit_service_job(
            jobName="x", jobQueue="fifo", serviceJobType="ECS", serviceRequestPayload="{}"
        )
    assert aws.batch.service_jobs == {}
    rejected, refused = aws.drain_journal()
    assert rejected.action == "batch:SubmitServiceJob" and rejected.sent is False and not rejected.succeeded
    assert refused.sent is True and refused.error_code == "ClientException" and refused.http_status == 400


def test_unknown_ids_answer_client_exception(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    for call, kwargs in [
        (batch.describe_service_job, {"jobId": "nope"}),
        (batch.update_service_job, {"jobId": "nope", "schedulingPriority": 1}),
        (batch.terminate_service_job, {"jobId": "nope", "reason": "x"}),
        (batch.get_job_queue_snapshot, {"jobQueue": "nope"}),
        (batch.list_service_jobs, {"jobQueue": "nope"}),
        (batch.terminate_job, {"jobId": "nope", "reason": "x"}),
    ]:
        error = error_of(call, **kwargs)
        assert error["code"] == "ClientException", call
        assert error["status"] == 400 and error["message"]
        assert error["type_header"].startswith("ClientException:")
    assert batch.describe_jobs(jobs=["nope"])["jobs"] == []  # AWS: unknown ids are left out


# ---------------------------------------------------------------------------------------- idempotency
def test_client_token_returns_the_same_job_for_the_same_request(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    aws.set_submit_rate(None)

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        calls=st.lists(
            st.tuples(st.sampled_from(["t1", "t2", "t3", None]), st.sampled_from(["a", "b"])),
            min_size=1,
            max_size=12,
        )
    )
    def check(calls: list[tuple[str | None, str]]) -> None:
        aws.batch.remove_service_jobs()
        first: dict[str, tuple[str, str]] = {}
        created = 0
        for token, variant in calls:
            extra: dict[str, Any] = {"jobName": f"job-{variant}"}
            if token is not None:
                extra["clientToken"] = token
            if token in first and first[token][1] != variant:
                assert (
                    "different parameters"
                    in error_of(batch.submit_service_job, **{**_base_submit(), **extra})["message"]
                )
                continue
            job_id = submit(batch, **extra)["jobId"]
            if token is None or token not in first:
                created += 1
                if token is not None:
                    first[token] = (job_id, variant)
            else:
                assert job_id == first[token][0]
        assert len(aws.batch.service_jobs) == created

    check()


# ---------------------------------------------------------------------------------------- throttling
def test_submit_is_throttled_at_five_per_second(aws: EmbeddedAws) -> None:
    batch = no_retry_client(aws)
    for _ in range(5):
        submit(batch)
    error = error_of(batch.submit_service_job, **_base_submit())
    assert error["code"] == "TooManyRequestsException" and error["status"] == 429
    throttled = RetryContext(attempt_number=1, parsed_response={"Error": {"Code": error["code"]}})
    assert ThrottledRetryableChecker().is_retryable(throttled)  # botocore: a throttling error
    assert len(aws.batch.service_jobs) == 5
    time.sleep(1.05)
    submit(batch)  # the window slid


def test_standard_retry_mode_rides_out_the_throttle(aws: EmbeddedAws) -> None:
    batch = adapters.client("batch")  # the Lambda code's own client: standard mode, 6 attempts
    results = [submit(batch, jobName=f"job-{i}") for i in range(8)]
    assert len({r["jobId"] for r in results}) == 8
    assert sum(r["ResponseMetadata"]["RetryAttempts"] for r in results) >= 1
    retried = [e for e in aws.journal if e.retries]
    assert retried and all(e.succeeded for e in retried)


def test_throttle_can_be_changed_and_turned_off(aws: EmbeddedAws) -> None:
    batch = no_retry_client(aws)
    aws.set_submit_rate(None)
    for i in range(20):
        submit(batch, jobName=f"j{i}")
    aws.set_submit_rate(2)
    submit(batch)
    submit(batch)
    assert error_of(batch.submit_service_job, **_base_submit())["code"] == "TooManyRequestsException"


# ---------------------------------------------------------------------------------------- list
def _seed_jobs(
    aws: EmbeddedAws, created_at: list[int], status: str = "RUNNABLE", queue: str = "fifo"
) -> set[str]:
    ids = set()
    for index, when in enumerate(created_at):
        job = aws.batch.put_service_job(
            {"jobName": f"job-{index}", "jobQueue": queue, "status": status, "createdAt": when}
        )
        ids.add(str(job.detail["jobArn"]))
    return ids


def _all_pages(batch: Any, **kwargs: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    token = None
    while True:
        page = batch.list_service_jobs(**{**kwargs, **({"nextToken": token} if token else {})})
        assert len(page["jobSummaryList"]) <= kwargs.get("maxResults", 100)
        out.extend(page["jobSummaryList"])
        token = page.get("nextToken")
        if not token:
            return out


def test_list_pages_5000_runnable_jobs_each_exactly_once(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    base = 1_790_000_000_000
    expected = _seed_jobs(aws, [base + (i // 7) * 1000 for i in range(5000)])  # ties of 7
    listed = _all_pages(batch, jobQueue="fifo", jobStatus="RUNNABLE")
    arns = [j["jobArn"] for j in listed]
    assert len(arns) == 5000 and set(arns) == expected
    created = [j["createdAt"] for j in listed]
    assert created == sorted(created, reverse=True)  # most recent first
    assert batch.list_service_jobs(jobQueue="fifo")["jobSummaryList"] == []  # no status: RUNNING only


def test_list_pagination_property(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")

    @settings(max_examples=30, deadline=None)
    @given(
        created=st.lists(st.integers(min_value=0, max_value=20), max_size=250),
        page=st.integers(min_value=1, max_value=100),
    )
    def check(created: list[int], page: int) -> None:
        aws.batch.remove_service_jobs()
        expected = _seed_jobs(aws, [1_790_000_000_000 + c for c in created])
        listed = _all_pages(batch, jobQueue="fifo", jobStatus="RUNNABLE", maxResults=page)
        arns = [j["jobArn"] for j in listed]
        assert len(arns) == len(set(arns)) and set(arns) == expected

    check()


def test_botocore_paginators_walk_the_pages(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    expected = _seed_jobs(aws, [1_790_000_000_000 + i for i in range(250)])
    pages = batch.get_paginator("list_service_jobs").paginate(
        jobQueue="fifo", jobStatus="RUNNABLE", PaginationConfig={"PageSize": 100}
    )
    assert {j["jobArn"] for page in pages for j in page["jobSummaryList"]} == expected
    envs = batch.get_paginator("describe_service_environments").paginate(PaginationConfig={"PageSize": 1})
    assert [e["serviceEnvironmentName"] for page in envs for e in page["serviceEnvironments"]] == [
        "sm-env",
        "sm-quota-env",
    ]


def test_a_job_added_between_pages_does_not_shift_the_rest(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    expected = _seed_jobs(aws, [1_790_000_000_000 + i for i in range(30)])
    first = batch.list_service_jobs(jobQueue="fifo", jobStatus="RUNNABLE", maxResults=10)
    _seed_jobs(aws, [1_790_000_000_000 + 100])  # newer than all: belongs before page 1
    rest = _all_pages(
        batch, jobQueue="fifo", jobStatus="RUNNABLE", maxResults=10, nextToken=first["nextToken"]
    )
    arns = [j["jobArn"] for j in first["jobSummaryList"] + rest]
    assert len(arns) == 30 and set(arns) == expected
    bad = error_of(
        batch.list_service_jobs, jobQueue="fair", jobStatus="RUNNABLE", nextToken=first["nextToken"]
    )
    assert bad["message"] == "Invalid nextToken"


def test_a_job_that_leaves_the_listing_between_pages_does_not_break_the_rest(aws: EmbeddedAws) -> None:
    # Why ListServiceJobs keeps keyset tokens rather than moto's paginator (whose token names the
    # next page's first job and is refused once that job is gone).
    batch = aws.client("batch")
    expected = _seed_jobs(aws, [1_790_000_000_000 + i for i in range(30)])
    first = batch.list_service_jobs(jobQueue="fifo", jobStatus="RUNNABLE", maxResults=10)
    listed = {j["jobArn"] for j in first["jobSummaryList"]}
    started = max(expected - listed, key=lambda arn: aws.batch.service_jobs[arn.rsplit("/", 1)[-1]].sort_key)
    aws.batch.service_jobs[started.rsplit("/", 1)[-1]].detail["status"] = "RUNNING"  # page 2's first job
    rest = _all_pages(
        batch, jobQueue="fifo", jobStatus="RUNNABLE", maxResults=10, nextToken=first["nextToken"]
    )
    arns = [j["jobArn"] for j in first["jobSummaryList"] + rest]
    assert len(arns) == 29 and set(arns) == expected - {started}


def test_list_filters(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    put = aws.batch.put_service_job
    put(
        {
            "jobName": "Train-A",
            "jobQueue": "fair",
            "status": "RUNNING",
            "createdAt": 1000,
            "shareIdentifier": "a",
        }
    )
    put(
        {
            "jobName": "train-b",
            "jobQueue": "fair",
            "status": "FAILED",
            "createdAt": 2000,
            "shareIdentifier": "b",
        }
    )
    put(
        {
            "jobName": "eval",
            "jobQueue": "fair",
            "status": "RUNNABLE",
            "createdAt": 3000,
            "shareIdentifier": "a",
        }
    )
    put(
        {
            "jobName": "q-1",
            "jobQueue": "quota",
            "status": "RUNNABLE",
            "createdAt": 4000,
            "quotaShareName": "r",
        }
    )

    def names(**kwargs: Any) -> list[str]:
        return [j["jobName"] for j in _all_pages(batch, **kwargs)]

    assert names(jobQueue="fair") == ["Train-A"]
    assert names(jobQueue="fair", jobStatus="FAILED") == ["train-b"]
    assert names(jobQueue="fair", filters=[{"name": "JOB_NAME", "values": ["train*"]}]) == [
        "train-b",
        "Train-A",
    ]
    assert names(jobQueue="fair", filters=[{"name": "JOB_NAME", "values": ["TRAIN-A"]}]) == ["Train-A"]
    assert names(jobQueue="fair", filters=[{"name": "BEFORE_CREATED_AT", "values": ["2500"]}]) == [
        "train-b",
        "Train-A",
    ]
    assert names(jobQueue="fair", filters=[{"name": "AFTER_CREATED_AT", "values": ["1500"]}]) == [
        "eval",
        "train-b",
    ]
    assert names(
        jobQueue="fair", jobStatus="RUNNABLE", filters=[{"name": "SHARE_IDENTIFIER", "values": ["a"]}]
    ) == ["eval"]
    assert names(jobQueue="quota", filters=[{"name": "QUOTA_SHARE_NAME", "values": ["r"]}]) == ["q-1"]
    assert (
        error_of(batch.list_service_jobs, jobQueue="fair", filters=[{"name": "NOPE", "values": ["x"]}])[
            "code"
        ]
        == "ClientException"
    )
    assert error_of(batch.list_service_jobs, jobQueue="fair", maxResults=101)["code"] == "ClientException"
    two = [{"name": "JOB_NAME", "values": ["a"]}, {"name": "SHARE_IDENTIFIER", "values": ["a"]}]
    assert "Only one filter" in error_of(batch.list_service_jobs, jobQueue="fair", filters=two)["message"]


# ---------------------------------------------------------------------------------------- update / terminate
def test_update_priority_and_terminate(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    ids = submit(batch, jobQueue="fair", shareIdentifier="a", schedulingPriority=1)
    assert batch.update_service_job(jobId=ids["jobId"], schedulingPriority=77)["jobArn"] == ids["jobArn"]
    assert batch.describe_service_job(jobId=ids["jobId"])["schedulingPriority"] == 77
    batch.terminate_service_job(jobId=ids["jobId"], reason="no longer needed")
    job = batch.describe_service_job(jobId=ids["jobId"])
    assert job["status"] == "FAILED" and job["isTerminated"] is True
    assert job["statusReason"] == "no longer needed" and job["stoppedAt"] >= job["createdAt"]
    assert (
        error_of(batch.update_service_job, jobId=ids["jobId"], schedulingPriority=5)["code"]
        == "ClientException"
    )


# ---------------------------------------------------------------------------------------- snapshot
def test_job_queue_snapshot_front_of_queue_and_usage(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    put = aws.batch.put_service_job
    low = put(
        {
            "jobName": "low",
            "jobQueue": "fair",
            "status": "RUNNABLE",
            "createdAt": 1000,
            "shareIdentifier": "a",
            "schedulingPriority": 1,
        }
    )
    high = put(
        {
            "jobName": "high",
            "jobQueue": "fair",
            "status": "RUNNABLE",
            "createdAt": 2000,
            "shareIdentifier": "b",
            "schedulingPriority": 9,
        }
    )
    for index in range(3):
        put(
            {
                "jobName": f"run-{index}",
                "jobQueue": "fair",
                "status": "RUNNING",
                "createdAt": 10,
                "shareIdentifier": "a" if index else "b",
                "capacityUsage": [{"capacityUnit": "NUM_INSTANCES", "quantity": 2.0}],
            }
        )
    snap = batch.get_job_queue_snapshot(jobQueue="fair")
    assert [j["jobArn"] for j in snap["frontOfQueue"]["jobs"]] == [
        high.detail["jobArn"],
        low.detail["jobArn"],
    ]
    assert snap["frontOfQueue"]["jobs"][1]["earliestTimeAtPosition"] == 1000
    usage = snap["queueUtilization"]
    assert usage["totalCapacityUsage"] == [{"capacityUnit": "NUM_INSTANCES", "quantity": 6.0}]
    assert usage["fairshareUtilization"]["activeShareCount"] == 2
    top = usage["fairshareUtilization"]["topCapacityUtilization"]
    assert top[0] == {
        "shareIdentifier": "a",
        "capacityUsage": [{"capacityUnit": "NUM_INSTANCES", "quantity": 4.0}],
    }

    # FIFO: createdAt order, priorities ignored; at most 100 jobs
    _seed_jobs(aws, [5000 - i for i in range(120)])
    fifo = batch.get_job_queue_snapshot(jobQueue="fifo")["frontOfQueue"]["jobs"]
    assert len(fifo) == 100
    assert [j["earliestTimeAtPosition"] for j in fifo] == sorted(j["earliestTimeAtPosition"] for j in fifo)

    put(
        {
            "jobName": "qa",
            "jobQueue": "quota",
            "status": "RUNNABLE",
            "createdAt": 5,
            "quotaShareName": "research",
        }
    )
    quota = batch.get_job_queue_snapshot(jobQueue="quota")
    assert list(quota["frontOfQuotaShares"]["quotaShares"]) == ["research"]


# ---------------------------------------------------------------------------------------- shapes
def test_every_response_matches_the_botocore_output_shape(aws: EmbeddedAws) -> None:
    """The raw JSON bodies (before botocore's parser, which drops unknown keys) against the model."""
    batch = aws.client("batch")
    raw: list[tuple[str, Any]] = []

    def capture(operation_model: Any, response_dict: dict[str, Any], **_: Any) -> None:
        body = response_dict["body"]
        raw.append((operation_model.name, json.loads(body) if body else {}))

    batch.meta.events.register("before-parse.batch", capture)
    aws.seed(
        {
            "service_jobs": [
                sample("service-job/failed-preemption-budget-spent")["detail"]
                | {
                    "serviceRequestPayload": PAYLOAD,
                    "tags": {"a": "b"},
                    "jobQueue": "quota",
                    "capacityUsage": [{"capacityUnit": "ml.p4d.24xlarge", "quantity": 1.0}],
                }
            ]
        }
    )
    ids = submit(batch, jobQueue="fair", shareIdentifier="x", tags={"k": "v"})
    batch.describe_service_job(jobId=ids["jobId"])
    batch.list_service_jobs(jobQueue="quota", jobStatus="FAILED")
    batch.list_service_jobs(jobQueue="fair", jobStatus="RUNNABLE", maxResults=1)
    batch.update_service_job(jobId=ids["jobId"], schedulingPriority=3)
    batch.get_job_queue_snapshot(jobQueue="fair")
    batch.get_job_queue_snapshot(jobQueue="quota")
    batch.describe_service_environments()
    batch.update_service_environment(serviceEnvironment="sm-env", state="ENABLED")
    batch.describe_job_queues()
    batch.terminate_service_job(jobId=ids["jobId"], reason="r")
    batch.describe_service_job(jobId=ids["jobId"])
    batch.list_tags_for_resource(resourceArn=ids["jobArn"])
    model = service_model("batch")
    assert {name for name, _ in raw} >= {
        "SubmitServiceJob",
        "DescribeServiceJob",
        "ListServiceJobs",
        "UpdateServiceJob",
        "GetJobQueueSnapshot",
        "DescribeServiceEnvironments",
        "UpdateServiceEnvironment",
        "DescribeJobQueues",
        "TerminateServiceJob",
    }
    for name, body in raw:
        shape = model.operation_model(name).output_shape
        problems = [] if shape is None else shape_problems(shape, body, name, check_required=True)
        # startedAt is "required" in the model but a job that never started has none (as in AWS's events)
        problems = [p for p in problems if not p.endswith(".startedAt: required")]
        assert problems == [], problems


# ---------------------------------------------------------------------------------------- container jobs
def test_container_submit_keeps_what_moto_drops(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    aws.seed({"job_queues": [{"name": "gpu-fair", "kind": "container", "scheduling": "FAIR_SHARE"}]})
    job_def = batch.register_job_definition(
        jobDefinitionName="train",
        type="container",
        parameters={"epochs": "3", "lr": "1e-4"},
        containerProperties={
            "image": "img:1",
            "command": ["python", "train.py"],
            "environment": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            "resourceRequirements": [{"type": "VCPU", "value": "4"}, {"type": "MEMORY", "value": "8192"}],
        },
        retryStrategy={"attempts": 2},
    )
    ids = batch.submit_job(
        jobName="train-1",
        jobQueue="gpu-fair",
        jobDefinition=job_def["jobDefinitionArn"],
        shareIdentifier="research",
        schedulingPriorityOverride=7,
        parameters={"lr": "3e-4"},
        containerOverrides={
            "environment": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
            "resourceRequirements": [{"type": "GPU", "value": "1"}],
        },
        timeout={"attemptDurationSeconds": 3600},
        arrayProperties={"size": 3},
        tags={"run": "1"},
    )
    (parent,) = batch.describe_jobs(jobs=[ids["jobId"]])["jobs"]
    assert parent["shareIdentifier"] == "research" and parent["schedulingPriority"] == 7
    assert parent["parameters"] == {"epochs": "3", "lr": "3e-4"}
    assert parent["retryStrategy"] == {"attempts": 2} and parent["timeout"] == {
        "attemptDurationSeconds": 3600
    }
    env = {e["name"]: e["value"] for e in parent["container"]["environment"]}
    assert env == {"A": "1", "B": "20", "C": "3"}
    assert {r["type"] for r in parent["container"]["resourceRequirements"]} == {"VCPU", "MEMORY", "GPU"}
    assert parent["arrayProperties"]["size"] == 3
    assert parent["arrayProperties"]["statusSummary"]["RUNNABLE"] == 3
    children = batch.describe_jobs(jobs=[f"{ids['jobId']}:{i}" for i in range(3)])["jobs"]
    assert [c["arrayProperties"] for c in children] == [{"index": i} for i in range(3)]
    assert children[2]["jobArn"] == f"{ids['jobArn']}:2"
    listed = batch.list_jobs(arrayJobId=ids["jobId"], jobStatus="RUNNABLE")["jobSummaryList"]
    assert len(listed) == 3
    batch.terminate_job(jobId=ids["jobId"], reason="stop")
    assert all(
        j["status"] == "FAILED" for j in batch.describe_jobs(jobs=[c["jobId"] for c in children])["jobs"]
    )
    shape = service_model("batch").shape_for("JobDetail")
    assert shape_problems(shape, parent) == []
    assert (
        "shareIdentifier is required"
        in error_of(batch.submit_job, jobName="x", jobQueue="gpu-fair", jobDefinition="train")["message"]
    )
    assert (
        error_of(batch.submit_job, jobName="x", jobQueue="gpu", jobDefinition="nope")["code"]
        == "ClientException"
    )


def test_batch_tags_of_moto_resources_still_reach_moto(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    job_def = batch.register_job_definition(
        jobDefinitionName="d",
        type="container",
        containerProperties={
            "image": "i",
            "resourceRequirements": [{"type": "MEMORY", "value": "512"}, {"type": "VCPU", "value": "1"}],
        },
        tags={"x": "1"},
    )
    assert batch.list_tags_for_resource(resourceArn=job_def["jobDefinitionArn"])["tags"] == {"x": "1"}
    queue_arn = f"arn:aws:batch:us-east-1:{ACCOUNT}:job-queue/fifo"
    batch.tag_resource(resourceArn=queue_arn, tags={"owner": "ml"})
    batch.untag_resource(resourceArn=queue_arn, tagKeys=["nothing"])
    assert batch.list_tags_for_resource(resourceArn=queue_arn)["tags"] == {"owner": "ml"}
    batch.untag_resource(resourceArn=queue_arn, tagKeys=["owner"])
    assert batch.list_tags_for_resource(resourceArn=queue_arn)["tags"] == {}


# ---------------------------------------------------------------------------------------- sagemaker
TRAINING = {
    "TrainingJobName": "llama-ft-r1",
    "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole",
    "AlgorithmSpecification": {"TrainingImage": "img:1", "TrainingInputMode": "File"},
    "OutputDataConfig": {"S3OutputPath": "s3://out/"},
    "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "VolumeSizeInGB": 100},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200},
    "EnableManagedSpotTraining": True,
    "CheckpointConfig": {"S3Uri": "s3://ckpt/llama-ft/", "LocalPath": "/opt/ml/checkpoints"},
    "HyperParameters": {"epochs": "3"},
    "Tags": [{"Key": "team", "Value": "nlp"}],
}


def test_training_job_create_describe_stop_list(aws: EmbeddedAws) -> None:
    sm = aws.client("sagemaker")
    arn = sm.create_training_job(**TRAINING)["TrainingJobArn"]
    job = sm.describe_training_job(TrainingJobName="llama-ft-r1")
    assert job["TrainingJobArn"] == arn == f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-job/llama-ft-r1"
    assert job["TrainingJobStatus"] == "InProgress" and job["SecondaryStatus"] == "Starting"
    for key in (
        "CheckpointConfig",
        "StoppingCondition",
        "ResourceConfig",
        "HyperParameters",
        "RoleArn",
        "AlgorithmSpecification",
        "OutputDataConfig",
        "EnableManagedSpotTraining",
    ):
        assert job[key] == TRAINING[key], key
    assert "Tags" not in job and sm.list_tags(ResourceArn=arn)["Tags"] == TRAINING["Tags"]
    assert error_of(sm.create_training_job, **TRAINING)["code"] == "ResourceInUse"
    spot_without_wait = {
        **TRAINING,
        "TrainingJobName": "x2",
        "StoppingCondition": {"MaxRuntimeInSeconds": 10},
    }
    assert error_of(sm.create_training_job, **spot_without_wait)["code"] == "ValidationException"
    assert error_of(sm.describe_training_job, TrainingJobName="nope") == {
        "code": "ValidationException",
        "message": "Requested resource not found.",
        "status": 400,
        "type_header": "",
    }
    sm.stop_training_job(TrainingJobName="llama-ft-r1")
    assert sm.describe_training_job(TrainingJobName="llama-ft-r1")["TrainingJobStatus"] == "Stopped"
    summaries = sm.list_training_jobs(StatusEquals="Stopped")["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in summaries] == ["llama-ft-r1"]
    shape = service_model("sagemaker").operation_model("DescribeTrainingJob").output_shape
    described = {
        k: v
        for k, v in sm.describe_training_job(TrainingJobName="llama-ft-r1").items()
        if k != "ResponseMetadata"
    }
    assert shape_problems(shape, described, timestamps="parsed") == []
    # everything else still goes to moto
    sm.create_model(ModelName="m", ExecutionRoleArn=TRAINING["RoleArn"], PrimaryContainer={"Image": "img:1"})
    assert [m["ModelName"] for m in sm.list_models()["Models"]] == ["m"]


def test_list_training_jobs_pages_with_tokens_of_its_own_query(aws: EmbeddedAws) -> None:
    sm = aws.client("sagemaker")
    for n in range(3):
        aws.overlay.clock = lambda n=n: 1_790_000_000.0 + n
        sm.create_training_job(**{**TRAINING, "TrainingJobName": f"job-{n}", "Tags": []})
    first = sm.list_training_jobs(MaxResults=2, SortOrder="Descending")
    rest = sm.list_training_jobs(MaxResults=2, SortOrder="Descending", NextToken=first["NextToken"])
    names = [s["TrainingJobName"] for s in first["TrainingJobSummaries"] + rest["TrainingJobSummaries"]]
    assert names == ["job-2", "job-1", "job-0"] and "NextToken" not in rest
    assert len(sm.list_training_jobs()["TrainingJobSummaries"]) == 3  # default page: 10
    other = error_of(sm.list_training_jobs, StatusEquals="Stopped", NextToken=first["NextToken"])
    assert (other["code"], other["status"]) == ("ValidationException", 400)


# ---------------------------------------------------------------------------------------- installation
def test_one_emulator_at_a_time_and_moto_alone_after_it_closes(aws: EmbeddedAws) -> None:
    with pytest.raises(RuntimeError, match="already installed"):
        Overlay().install()
    batch = aws.client("batch")
    assert batch.describe_service_environments()["serviceEnvironments"]
    aws.overlay.uninstall()
    aws.overlay.uninstall()  # idempotent
    # moto alone does not know the service-job APIs: the emulator is really out of the way.
    with pytest.raises(botocore.exceptions.ClientError) as info:
        no_retry_client(aws).describe_service_environments()
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    aws.overlay.install()
    assert batch.describe_service_environments()["serviceEnvironments"]


def test_a_session_the_emulator_does_not_know_reaches_it_over_its_loopback_endpoint(aws: EmbeddedAws) -> None:
    """A client of a fresh ``boto3.Session()`` (not one the emulator's ``before-send`` handler is
    registered on) is sent to the emulator's endpoint on 127.0.0.1 over HTTP and gets the same
    answers: the emulator's own, and moto's for what the emulator leaves to it."""
    import boto3

    sent: list[str] = []
    stranger = boto3.Session(region_name=aws.region)
    batch, sagemaker = stranger.client("batch"), stranger.client("sagemaker")
    for client in (batch, sagemaker):
        client.meta.events.register("before-send", lambda request, **_: sent.append(str(request.url)))
    names = [
        e["serviceEnvironmentName"] for e in batch.describe_service_environments()["serviceEnvironments"]
    ]
    sagemaker.create_model(
        ModelName="over-loopback",
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole",
        PrimaryContainer={"Image": "img:1"},
    )
    known = aws.client("sagemaker")
    assert names == ["sm-env", "sm-quota-env"]
    assert [m["ModelName"] for m in known.list_models()["Models"]] == ["over-loopback"]
    assert len(sent) == 2 and all(url.startswith("http://127.0.0.1:") for url in sent)
    assert all("/embedded-aws/" in url for url in sent)


def test_an_emulated_request_reads_the_region_it_is_signed_for(aws: EmbeddedAws) -> None:
    """The emulator's endpoint names no region: a request's is the one botocore signed it for."""
    session = adapters.session()
    ireland = session.client("batch", region_name="eu-west-1")
    created = ireland.create_service_environment(
        serviceEnvironmentName="dublin",
        serviceEnvironmentType="SAGEMAKER_TRAINING",
        capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}],
    )
    here = [
        e["serviceEnvironmentName"]
        for e in aws.client("batch").describe_service_environments()["serviceEnvironments"]
    ]
    there = [
        e["serviceEnvironmentName"] for e in ireland.describe_service_environments()["serviceEnvironments"]
    ]
    assert created["serviceEnvironmentArn"] == f"arn:aws:batch:eu-west-1:{ACCOUNT}:service-environment/dublin"
    assert (here, there) == (["sm-env", "sm-quota-env"], ["dublin"])


def test_unsigned_requests_land_in_the_embedded_account_and_s3_batch_sagemaker_stay_signed() -> None:
    signed: dict[str, set[bool]] = {}

    def remember(request: Any, event_name: str, **_: Any) -> None:
        signed.setdefault(event_name.split(".")[1], set()).add("Authorization" in request.headers)

    with EmbeddedAws() as aws:
        sqs, s3, batch = adapters.client("sqs"), adapters.client("s3"), adapters.client("batch")
        for client in (sqs, s3, batch):
            client.meta.events.register("before-send", remember)
        url = sqs.create_queue(QueueName="unsigned")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        s3.create_bucket(Bucket="signed-bucket")
        s3.put_object(Bucket="signed-bucket", Key="k", Body=b"v")
        body = s3.get_object(Bucket="signed-bucket", Key="k")["Body"].read()
        batch.describe_service_environments()
    assert arn == f"arn:aws:sqs:{aws.region}:{ACCOUNT}:unsigned"
    assert body == b"v"
    assert signed == {"sqs": {False}, "s3": {True}, "batch": {True}}


def test_a_closed_embedded_aws_stops_its_endpoint_and_the_next_starts_empty() -> None:
    with EmbeddedAws() as aws:
        aws.seed(WORLD)
        endpoint = adapters.client("batch").meta.endpoint_url
        assert endpoint.startswith("http://127.0.0.1:")
        assert aws.client("batch").describe_service_environments()["serviceEnvironments"]
    port = int(endpoint.split(":")[2].split("/")[0])
    with pytest.raises(ConnectionRefusedError):  # nothing listens there any more
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with EmbeddedAws() as aws:
        assert aws.client("batch").describe_service_environments()["serviceEnvironments"] == []
