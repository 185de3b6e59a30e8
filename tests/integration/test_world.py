"""Scenario worlds (schema, seeding, set_world), describe-back fidelity, checkpoints, the API journal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from batchpilot.io import clients as adapters
from batchpilot_local.embedded_aws import EmbeddedAws, WorldError
from batchpilot_local.emulator.shapes import service_model
from batchpilot_local.replay import Replayer
from batchpilot_local.world import WORLD_KEYS, parse_time

ACCOUNT = "111122223333"
EVENTS = Path(__file__).resolve().parents[2] / "events"


def detail(name: str) -> dict[str, Any]:
    return dict(json.loads((EVENTS / f"{name}.json").read_text())["detail"])


def strip(response: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


@pytest.fixture
def aws() -> Iterator[EmbeddedAws]:
    with EmbeddedAws() as embedded:
        yield embedded


# ---------------------------------------------------------------------------------------- schema
@pytest.mark.parametrize(
    ("world", "message"),
    [
        ([], "world must be a JSON object"),
        ({"trainingJobs": []}, "unknown world key(s): trainingJobs"),
        (
            {"job_queues": [{"name": "q", "scheduling": "LIFO"}]},
            "world.job_queues[0].scheduling: Input should be",
        ),
        (
            {"job_queues": [{"name": "q", "kind": "service"}]},
            "world.job_queues[0]: a service job queue needs",
        ),
        ({"job_queues": {"name": "q"}}, "world.job_queues: Input should be a valid list"),
        (
            {"service_environments": [{"name": "e"}]},
            "world.service_environments[0].capacityLimits: Field required",
        ),
        (
            {
                "service_environments": [
                    {"name": "e", "capacityLimits": [{"maxCapacity": -1, "capacityUnit": "X"}]}
                ]
            },
            "world.service_environments[0].capacityLimits[0].maxCapacity",
        ),
        (
            {"service_jobs": [{"jobQueue": "q", "status": "RUNNING"}]},
            "world.service_jobs[0].jobName: required",
        ),
        (
            {"service_jobs": [{"jobName": "a", "jobQueue": "q", "status": "DONE"}]},
            "world.service_jobs[0].status: 'DONE' is not one of SUBMITTED",
        ),
        (
            {"service_jobs": [{"jobName": "a", "jobQueue": "q", "status": "RUNNING", "bogus": 1}]},
            "world.service_jobs[0].bogus: not a field of DescribeServiceJobResponse",
        ),
        (
            {
                "service_jobs": [
                    {
                        "jobName": "a",
                        "jobQueue": "q",
                        "status": "RUNNING",
                        "attempts": [{"startedAt": "yesterday"}],
                    }
                ]
            },
            "world.service_jobs[0].attempts[0].startedAt: 'yesterday' is neither ISO-8601 nor epoch",
        ),
        (
            {
                "service_jobs": [
                    {"jobName": "a", "jobQueue": "q", "status": "RUNNING", "schedulingPriority": "9"}
                ]
            },
            "world.service_jobs[0].schedulingPriority: expected an integer, got a string",
        ),
        (
            {"jobs": [{"jobName": "a", "jobQueue": "q", "status": "FAILED"}]},
            "world.jobs[0].jobDefinition: required",
        ),
        (
            {"training_jobs": [{"TrainingJobName": "t", "TrainingJobStatus": "Broken"}]},
            "world.training_jobs[0].TrainingJobStatus: 'Broken' is not one of",
        ),
        (
            {"job_definitions": [{"jobDefinitionName": "d", "type": "container", "revision": 0}]},
            "world.job_definitions[0].revision: expected a positive integer",
        ),
        ({"checkpoints": [{"uri": "http://x/y"}]}, "world.checkpoints[0].uri: String should match pattern"),
        (
            {"checkpoints": [{"uri": "s3://b/p/", "objects": [{"key": "k", "last_modified": "soon"}]}]},
            "world.checkpoints[0].objects[0].last_modified",
        ),
    ],
)
def test_malformed_worlds_name_the_field(world: Any, message: str) -> None:
    with pytest.raises(WorldError) as info:
        EmbeddedAws.check_world(world)
    assert message in str(info.value)


def test_world_keys_are_the_documented_ones() -> None:
    assert {
        "service_environments",
        "job_queues",
        "service_jobs",
        "job_definitions",
        "jobs",
        "training_jobs",
        "checkpoints",
        "scheduling_policies",
        "quota_shares",
        "gpu_metrics",
    } == WORLD_KEYS
    readme = (Path(__file__).resolve().parents[2] / "local/batchpilot_local/README.md").read_text()
    assert all(f"`{key}`" in readme for key in WORLD_KEYS)


def test_scheduling_policies_are_created_and_described(aws: EmbeddedAws) -> None:
    policy = {
        "name": "shares",
        "fairsharePolicy": {"shareDistribution": [{"shareIdentifier": "HIGHPRI", "weightFactor": 0.5}]},
    }
    aws.seed({"scheduling_policies": [policy]})
    aws.seed({"scheduling_policies": [policy]})  # seeding again updates, never duplicates
    arn = "arn:aws:batch:us-east-1:111122223333:scheduling-policy/shares"
    (found,) = aws.client("batch").describe_scheduling_policies(arns=[arn])["schedulingPolicies"]
    distribution = found["fairsharePolicy"]["shareDistribution"]
    assert distribution == [{"shareIdentifier": "HIGHPRI", "weightFactor": 0.5}]


def test_a_queue_on_a_missing_service_environment_is_refused(aws: EmbeddedAws) -> None:
    with pytest.raises(WorldError, match=r"world.job_queues\[0\].serviceEnvironment: no service environment"):
        aws.seed({"job_queues": [{"name": "q", "serviceEnvironment": "missing"}]})


def test_parse_time_accepts_iso_and_epoch_milliseconds() -> None:
    moment = datetime(2026, 11, 20, 12, 0, 3, 550000, tzinfo=UTC)
    assert parse_time("2026-11-20T12:00:03.550Z") == moment
    assert parse_time("2026-11-20T12:00:03.550") == moment
    assert parse_time(1795176003550) == moment
    assert parse_time("1795176003550") == moment


# ---------------------------------------------------------------------------------------- describe back
SERVICE_WORLD: dict[str, Any] = {
    "service_environments": [
        {"name": "sm-env", "capacityLimits": [{"maxCapacity": 8, "capacityUnit": "NUM_INSTANCES"}]},
        {
            "name": "sm-quota-env",
            "state": "DISABLED",
            "capacityLimits": [{"maxCapacity": 4, "capacityUnit": "ml.p4d.24xlarge"}],
        },
    ],
    "job_queues": [
        {"name": "sm-quota-queue", "scheduling": "QUOTA_MANAGEMENT", "serviceEnvironment": "sm-quota-env"},
        {
            "name": "gpu-spot-queue",
            "kind": "container",
            "scheduling": "FAIR_SHARE",
            "computeEnvironments": ["ce"],
        },
    ],
}


@pytest.mark.parametrize("name", sorted(p.stem for p in (EVENTS / "service-job").glob("*.json")))
def test_seeded_service_jobs_describe_back_exactly(aws: EmbeddedAws, name: str) -> None:
    job = detail(f"service-job/{name}")
    job["serviceRequestPayload"] = json.dumps(
        {"TrainingJobName": "x", "CheckpointConfig": {"S3Uri": "s3://c/x/"}}
    )
    job["tags"] = {"team": "nlp"}
    aws.seed({**SERVICE_WORLD, "service_jobs": [job]})
    described = strip(aws.client("batch").describe_service_job(jobId=job["jobId"]))
    assert described == job


def test_service_job_defaults_and_iso_times(aws: EmbeddedAws) -> None:
    aws.seed(
        {
            **SERVICE_WORLD,
            "service_jobs": [
                {
                    "jobName": "a",
                    "jobQueue": "sm-quota-queue",
                    "status": "RUNNABLE",
                    "quotaShareName": "r",
                    "createdAt": "2026-01-11T23:36:40.058Z",
                    "serviceRequestPayload": {"TrainingJobName": "a"},
                },
            ],
        }
    )
    batch = aws.client("batch")
    (summary,) = batch.list_service_jobs(jobQueue="sm-quota-queue", jobStatus="RUNNABLE")["jobSummaryList"]
    job = batch.describe_service_job(jobId=summary["jobId"])
    assert job["jobArn"] == f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/{summary['jobId']}"
    assert job["jobQueue"] == f"arn:aws:batch:us-east-1:{ACCOUNT}:job-queue/sm-quota-queue"
    assert job["createdAt"] == 1768174600058
    assert job["serviceJobType"] == "SAGEMAKER_TRAINING"
    assert json.loads(job["serviceRequestPayload"]) == {"TrainingJobName": "a"}
    envs = batch.describe_service_environments()["serviceEnvironments"]
    assert [(e["serviceEnvironmentName"], e["state"], e["status"]) for e in envs] == [
        ("sm-env", "ENABLED", "VALID"),
        ("sm-quota-env", "DISABLED", "VALID"),
    ]
    (queue,) = batch.describe_job_queues(jobQueues=["gpu-spot-queue"])["jobQueues"]
    assert queue["computeEnvironmentOrder"] == [
        {"order": 1, "computeEnvironment": f"arn:aws:batch:us-east-1:{ACCOUNT}:compute-environment/ce"}
    ]
    assert queue["schedulingPolicyArn"].startswith(f"arn:aws:batch:us-east-1:{ACCOUNT}:scheduling-policy/")


@pytest.mark.parametrize("name", sorted(p.stem for p in (EVENTS / "batch-job").glob("*.json")))
def test_seeded_container_jobs_describe_back_exactly(aws: EmbeddedAws, name: str) -> None:
    job = detail(f"batch-job/{name}")
    aws.seed({"jobs": [job]})
    (described,) = aws.client("batch").describe_jobs(jobs=[job["jobId"]])["jobs"]
    if "jobArn" not in job:  # an event from before jobArn existed: DescribeJobs always has it
        job = {**job, "jobArn": described["jobArn"]}
    assert described == job
    assert aws.client("batch").describe_jobs(jobs=[job["jobArn"]])["jobs"] == [job]


@pytest.mark.parametrize("name", sorted(p.stem for p in (EVENTS / "sagemaker").glob("*.json")))
def test_seeded_training_jobs_describe_back_exactly(aws: EmbeddedAws, name: str) -> None:
    job = detail(f"sagemaker/{name}")
    aws.seed({"training_jobs": [job]})
    sm = aws.client("sagemaker")
    described = strip(sm.describe_training_job(TrainingJobName=job["TrainingJobName"]))
    tags = job.pop("Tags", [])
    shape = service_model("sagemaker").operation_model("DescribeTrainingJob").output_shape
    assert described == _expected_times(shape, job)
    assert sm.list_tags(ResourceArn=job["TrainingJobArn"])["Tags"] == (
        [{"Key": k, "Value": v} for k, v in tags.items()] if isinstance(tags, dict) else tags
    )


def _expected_times(shape: Any, value: Any) -> Any:
    """``value`` with its SageMaker timestamps as the datetimes botocore parses them into."""
    if shape.type_name == "structure":
        return {k: _expected_times(shape.members[k], v) for k, v in value.items()}
    if shape.type_name == "list":
        return [_expected_times(shape.member, v) for v in value]
    if shape.type_name == "timestamp":
        return parse_time(value)
    return value


# ---------------------------------------------------------------------------------------- recovery flows
def test_a_failed_array_child_can_be_described_and_resubmitted(aws: EmbeddedAws) -> None:
    failed = detail("batch-job/array-child-failed")  # job-definition/hparam-sweep:5, share "research"
    aws.seed(
        {
            **SERVICE_WORLD,
            "job_definitions": [
                {
                    "jobDefinitionName": "hparam-sweep",
                    "type": "container",
                    "revision": 5,
                    "containerProperties": {
                        "image": failed["container"]["image"],
                        "command": failed["container"]["command"],
                        "resourceRequirements": failed["container"]["resourceRequirements"],
                    },
                }
            ],
            "jobs": [failed],
        }
    )
    batch = adapters.client("batch")  # what the recovery function uses
    (old,) = batch.describe_jobs(jobs=[failed["jobArn"]])["jobs"]
    assert old == failed
    new = batch.submit_job(
        jobName=old["jobName"],
        jobQueue=old["jobQueue"],
        jobDefinition=old["jobDefinition"],
        parameters=old["parameters"],
        containerOverrides={
            "environment": old["container"]["environment"],
            "command": old["container"]["command"],
        },
        retryStrategy=old["retryStrategy"],
        shareIdentifier=old["shareIdentifier"],
        schedulingPriorityOverride=old["schedulingPriority"],
        timeout={"attemptDurationSeconds": 86400},
        tags={"batchpilot:resubmitted-from": old["jobId"]},
    )
    (job,) = batch.describe_jobs(jobs=[new["jobId"]])["jobs"]
    assert job["jobDefinition"] == failed["jobDefinition"]
    assert job["parameters"] == failed["parameters"]
    assert job["container"]["environment"] == failed["container"]["environment"]
    assert job["shareIdentifier"] == "research" and job["schedulingPriority"] == 0
    assert job["retryStrategy"] == failed["retryStrategy"] and job["status"] == "RUNNABLE"
    assert job["tags"] == {"batchpilot:resubmitted-from": failed["jobId"]}
    assert [e.action for e in aws.drain_journal()] == [
        "batch:DescribeJobs",
        "batch:SubmitJob",
        "batch:DescribeJobs",
    ]


def test_a_stopped_spot_training_job_can_be_resubmitted_from_its_checkpoint(aws: EmbeddedAws) -> None:
    stopped = detail("sagemaker/stopped-max-wait-time-exceeded")
    checkpoint = {"S3Uri": "s3://ml-checkpoints-111122223333/llama3-8b/", "LocalPath": "/opt/ml/checkpoints"}
    aws.seed(
        {"training_jobs": [{**stopped, "CheckpointConfig": checkpoint, "EnableManagedSpotTraining": True}]}
    )
    sm = adapters.client("sagemaker")
    old = sm.describe_training_job(TrainingJobName=stopped["TrainingJobName"])
    assert old["TrainingJobStatus"] == "Stopped" and old["SecondaryStatus"] == "MaxWaitTimeExceeded"
    assert old["CheckpointConfig"] == checkpoint
    tags = sm.list_tags(ResourceArn=old["TrainingJobArn"])["Tags"]
    keep = (
        "AlgorithmSpecification",
        "RoleArn",
        "InputDataConfig",
        "OutputDataConfig",
        "ResourceConfig",
        "StoppingCondition",
        "HyperParameters",
        "CheckpointConfig",
        "EnableManagedSpotTraining",
    )
    request = {k: old[k] for k in keep if k in old}
    request["AlgorithmSpecification"] = {
        k: v for k, v in request["AlgorithmSpecification"].items() if k != "MetricDefinitions"
    }
    sm.create_training_job(TrainingJobName="llama3-8b-spot-r1", Tags=tags, **request)
    new = sm.describe_training_job(TrainingJobName="llama3-8b-spot-r1")
    assert new["TrainingJobStatus"] == "InProgress"
    for key in keep:
        assert new[key] == request[key], key
    assert [e.action for e in aws.journal] == [
        "sagemaker:DescribeTrainingJob",
        "sagemaker:ListTags",
        "sagemaker:CreateTrainingJob",
        "sagemaker:DescribeTrainingJob",
    ]
    create = aws.journal[2]
    assert create.params["CheckpointConfig"] == checkpoint and create.succeeded


def test_checkpoint_objects_list_with_their_seeded_times_and_sizes(aws: EmbeddedAws) -> None:
    aws.seed(
        {
            "checkpoints": [
                {
                    "uri": "s3://ml-checkpoints-111122223333/llama3-8b/",
                    "objects": [
                        {"key": "step-1000/model.pt", "last_modified": "2026-11-20T14:00:00Z", "size": 2048},
                        {"key": "step-2000/model.pt", "last_modified": 1795190400000, "size": 30_000_000_000},
                        {"key": "llama3-8b/latest", "last_modified": "2026-11-20T18:00:00+00:00"},
                    ],
                }
            ]
        }
    )
    s3 = adapters.client("s3")
    listed = s3.list_objects_v2(Bucket="ml-checkpoints-111122223333", Prefix="llama3-8b/")["Contents"]
    got = {o["Key"]: (o["LastModified"], o["Size"]) for o in listed}
    assert got == {
        "llama3-8b/step-1000/model.pt": (datetime(2026, 11, 20, 14, tzinfo=UTC), 2048),
        "llama3-8b/step-2000/model.pt": (datetime(2026, 11, 20, 16, tzinfo=UTC), 30_000_000_000),
        "llama3-8b/latest": (datetime(2026, 11, 20, 18, tzinfo=UTC), 0),
    }
    body = s3.get_object(Bucket="ml-checkpoints-111122223333", Key="llama3-8b/step-1000/model.pt")[
        "Body"
    ].read()
    assert len(body) == 2048


# ---------------------------------------------------------------------------------------- set_world
def test_set_world_replaces_the_job_set_and_updates_environments(aws: EmbeddedAws) -> None:
    aws.seed(SERVICE_WORLD)
    tick1 = {
        "service_jobs": [
            {"jobName": f"a{i}", "jobQueue": "sm-quota-queue", "status": "RUNNING", "quotaShareName": "r"}
            for i in range(3)
        ],
        "jobs": [detail("batch-job/running")],
    }
    aws.set_world(tick1)
    batch = aws.client("batch")
    assert len(batch.list_service_jobs(jobQueue="sm-quota-queue")["jobSummaryList"]) == 3
    tick2 = {
        "service_environments": [
            {
                "name": "sm-quota-env",
                "capacityLimits": [{"maxCapacity": 6, "capacityUnit": "ml.p4d.24xlarge"}],
            }
        ],
        "service_jobs": [
            {"jobName": "b", "jobQueue": "sm-quota-queue", "status": "RUNNING", "quotaShareName": "r"}
        ],
    }
    aws.set_world(tick2)
    assert [j["jobName"] for j in batch.list_service_jobs(jobQueue="sm-quota-queue")["jobSummaryList"]] == [
        "b"
    ]
    (env,) = batch.describe_service_environments(serviceEnvironments=["sm-quota-env"])["serviceEnvironments"]
    assert env["capacityLimits"] == [{"maxCapacity": 6, "capacityUnit": "ml.p4d.24xlarge"}]
    assert env["state"] == "ENABLED"
    assert len(batch.describe_jobs(jobs=[tick1["jobs"][0]["jobId"]])["jobs"]) == 1  # "jobs" not in tick2
    aws.set_world({"service_jobs": []})
    assert batch.list_service_jobs(jobQueue="sm-quota-queue")["jobSummaryList"] == []


def test_seeding_adds_up_and_replaces_by_id(aws: EmbeddedAws) -> None:
    job = detail("service-job/running")
    aws.seed({**SERVICE_WORLD, "service_jobs": [job]})
    aws.seed({"service_jobs": [{**job, "status": "SUCCEEDED"}]})
    aws.seed({"service_jobs": [{"jobName": "other", "jobQueue": "sm-quota-queue", "status": "RUNNING"}]})
    assert len(aws.batch.service_jobs) == 2
    assert aws.client("batch").describe_service_job(jobId=job["jobId"])["status"] == "SUCCEEDED"


# ---------------------------------------------------------------------------------------- journal
def test_journal_records_clients_created_after_open(aws: EmbeddedAws) -> None:
    aws.seed(SERVICE_WORLD)
    aws.client("batch").describe_job_queues()  # the replay's own calls are not recorded
    assert aws.journal == []
    batch = adapters.client("batch")  # created after the journal was installed, like a handler's
    params = {
        "jobName": "resubmit-1",
        "jobQueue": "sm-quota-queue",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "serviceRequestPayload": json.dumps({"TrainingJobName": "x"}),
        "quotaShareName": "research",
        "tags": {"a": "b"},
    }
    batch.submit_service_job(**params)
    with pytest.raises(batch.exceptions.ClientException):
        batch.describe_service_job(jobId="missing")
    boto3.client("batch").update_service_environment(serviceEnvironment="sm-env", state="DISABLED")
    submit, failed, update = aws.drain_journal()
    assert submit.action == "batch:SubmitServiceJob" and submit.params == params
    assert submit.sent and submit.succeeded and submit.http_status == 200 and submit.error_code is None
    assert failed.action == "batch:DescribeServiceJob" and not failed.succeeded
    assert failed.error_code == "ClientException" and failed.http_status == 400
    assert update.action == "batch:UpdateServiceEnvironment" and update.params["state"] == "DISABLED"
    assert aws.journal == []
    params["tags"]["a"] = "changed"
    assert submit.params["tags"] == {"a": "b"}  # a copy


def test_journal_hooks_are_removed_on_close() -> None:
    default_before = boto3.DEFAULT_SESSION
    with EmbeddedAws() as first:
        pass
    with EmbeddedAws() as second:
        adapters.client("sqs").list_queues()
        boto3.client("sqs").list_queues()
    assert first.journal == []
    assert [e.action for e in second.journal] == ["sqs:ListQueues", "sqs:ListQueues"]
    model = service_model("sqs").operation_model("ListQueues")
    adapters.session().events.emit("provide-client-params.sqs.ListQueues", params={}, model=model, context={})
    assert len(second.journal) == 2  # closed: its handlers are gone
    assert boto3.DEFAULT_SESSION is default_before  # a default session it created is dropped again


def test_replayer_seeds_a_scenario_world() -> None:
    reports = Replayer().run([], worlds=[{**SERVICE_WORLD, "service_jobs": [detail("service-job/running")]}])
    assert reports == []


def test_gpu_metrics_are_put_in_the_embedded_cloudwatch(aws: EmbeddedAws) -> None:
    series = {"host": "tj/algo-1", "from": "2026-11-20T22:00:00Z", "to": "2026-11-20T22:03:00Z", "value": 40}
    aws.seed({"gpu_metrics": [series]})
    answer = aws.client("cloudwatch").get_metric_data(
        MetricDataQueries=[
            {
                "Id": "q0",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "/aws/sagemaker/TrainingJobs",
                        "MetricName": "GPUUtilization",
                        "Dimensions": [{"Name": "Host", "Value": "tj/algo-1"}],
                    },
                    "Period": 60,
                    "Stat": "Average",
                },
            }
        ],
        StartTime=datetime(2026, 11, 20, 21, 0, tzinfo=UTC),
        EndTime=datetime(2026, 11, 20, 23, 0, tzinfo=UTC),
    )
    assert answer["MetricDataResults"][0]["Values"] == [40.0, 40.0, 40.0]


def test_a_gpu_series_must_end_after_it_starts() -> None:
    with pytest.raises(WorldError, match="to must be after from"):
        at = "2026-11-20T22:00:00Z"
        EmbeddedAws.check_world({"gpu_metrics": [{"host": "h", "from": at, "to": at, "value": 1}]})
