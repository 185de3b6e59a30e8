"""Rebuilding submit requests from Describe* responses, names, tokens, tags, checkpoints, pacing.

Requests are checked with botocore's own parameter validation against the real API models, so a
field the API does not accept, or a wrong type, fails here as it would in Lambda.
"""

from __future__ import annotations

import copy
import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
import pytest
from batchpilot.recovery.checkpoint import (
    container_checkpoint,
    lost_instance_hours,
    newest_object,
    parse_s3_uri,
    sagemaker_checkpoint,
)
from batchpilot.recovery.naming import (
    ARRAY_INDEX_ENV,
    ARRAY_INDEX_TAG,
    ATTEMPT_TAG,
    LINEAGE_TAG,
    MAX_TAGS,
    batch_job_name,
    client_token,
    is_valid_batch_name,
    is_valid_training_job_name,
    lineage_id_for,
    merge_tags,
    training_job_name,
)
from batchpilot.recovery.pacing import NotInTime, SubmitPacer, backoff_seconds
from batchpilot.recovery.requests import (
    project,
    rebuild_create_training_job,
    rebuild_submit_job,
    rebuild_submit_service_job,
)
from batchpilot.recovery.settings import CheckpointSource
from batchpilot_local.testing.samples import sample
from botocore.validate import ParamValidator
from hypothesis import given
from hypothesis import strategies as st

_SESSION = botocore.session.get_session()
BATCH = _SESSION.get_service_model("batch")
SAGEMAKER = _SESSION.get_service_model("sagemaker")
SUBMIT_SERVICE_JOB = BATCH.operation_model("SubmitServiceJob").input_shape
SUBMIT_JOB = BATCH.operation_model("SubmitJob").input_shape
CREATE_TRAINING_JOB = SAGEMAKER.operation_model("CreateTrainingJob").input_shape
LINEAGE = lineage_id_for("arn:aws:batch:us-east-1:111122223333:service-job/7ead13ff")
CHECKPOINT = "s3://ml-checkpoints-111122223333/gemma-ft/run-12/"


def assert_valid(request: dict[str, Any], shape: Any) -> None:
    report = ParamValidator().validate(request, shape)
    assert not report.has_errors(), report.generate_report()


# ------------------------------------------------------------------------ names and tokens
@given(st.text(max_size=300), st.integers(min_value=1, max_value=10_000), st.text(min_size=1, max_size=80))
def test_names_are_always_valid_and_deterministic(base: str, attempt: int, arn: str) -> None:
    lineage = lineage_id_for(arn)
    batch_name = batch_job_name(base, lineage, attempt)
    training_name = training_job_name(base, lineage, attempt)
    assert is_valid_batch_name(batch_name) and len(batch_name) <= 128
    assert is_valid_training_job_name(training_name) and len(training_name) <= 63
    assert batch_name == batch_job_name(base, lineage, attempt)
    assert training_name == training_job_name(base, lineage, attempt)
    token = client_token(lineage, attempt)
    assert 1 <= len(token) <= 64 and token == client_token(lineage, attempt)


def test_names_differ_by_attempt_and_lineage() -> None:
    a, b = lineage_id_for("arn:a"), lineage_id_for("arn:b")
    assert a != b and a == lineage_id_for("arn:a") and a.startswith("bp") and len(a) == 22
    assert batch_job_name("run", a, 1) != batch_job_name("run", a, 2) != batch_job_name("run", b, 2)
    assert client_token(a, 1) != client_token(a, 2) != client_token(b, 2)
    assert batch_job_name("llama_pretrain.v2", a, 1).startswith("llama_pretrain-v2-r1-")
    assert training_job_name("-_llama_pretrain--", a, 1).startswith("llama-pretrain-r1-")
    assert training_job_name("", a, 3).startswith("job-r3-")


def test_merge_tags_keeps_ours_drops_reserved_and_stays_within_50() -> None:
    own = {LINEAGE_TAG: "bp1", ATTEMPT_TAG: "2"}
    tags, dropped = merge_tags({"team": "ml", "aws:batch:x": "y", LINEAGE_TAG: "old"}, own)
    assert tags == {"team": "ml", LINEAGE_TAG: "bp1", ATTEMPT_TAG: "2"} and dropped == []
    many = {f"k{i:02d}": str(i) for i in range(50)}
    tags, dropped = merge_tags(many, own)
    assert len(tags) == MAX_TAGS and tags[LINEAGE_TAG] == "bp1"
    assert dropped == ["k48", "k49"]


# ------------------------------------------------------------------------ projection
def test_project_keeps_only_what_the_shape_accepts_recursively() -> None:
    described = {
        "TrainingJobName": "x",
        "TrainingJobArn": "arn:read-only",
        "ResourceConfig": {
            "InstanceType": "ml.p5.48xlarge",
            "InstanceCount": 2,
            "VolumeSizeInGB": 10,
            "Bogus": 1,
        },
        "InputDataConfig": [{"ChannelName": "train", "Unknown": True, "DataSource": {"S3DataSource": {}}}],
        "HyperParameters": {"epochs": "3"},
        "CheckpointConfig": None,
    }
    out = project(described, CREATE_TRAINING_JOB)
    assert "TrainingJobArn" not in out and "CheckpointConfig" not in out
    assert "Bogus" not in out["ResourceConfig"] and out["ResourceConfig"]["InstanceCount"] == 2
    assert out["InputDataConfig"] == [{"ChannelName": "train", "DataSource": {"S3DataSource": {}}}]
    assert out["HyperParameters"] == {"epochs": "3"}


# ------------------------------------------------------------------------ SubmitServiceJob
def described_service_job(**extra: Any) -> dict[str, Any]:
    detail = copy.deepcopy(sample("service-job/failed-preemption-budget-spent")["detail"])
    payload = {
        "TrainingJobName": "gemma-ft-run12",
        "AlgorithmSpecification": {"TrainingImage": "img:1", "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::111122223333:role/SageMakerTrainingExecutionRole",
        "OutputDataConfig": {"S3OutputPath": "s3://out/"},
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 8, "VolumeSizeInGB": 500},
        "StoppingCondition": {"MaxRuntimeInSeconds": 259200},
        "CheckpointConfig": {"S3Uri": CHECKPOINT, "LocalPath": "/opt/ml/checkpoints"},
    }
    detail.update(
        serviceRequestPayload=json.dumps(payload, separators=(",", ":")),
        tags={"team": "research", "aws:batch:internal": "x"},
        capacityUsage=[{"capacityUnit": "ml.p5.48xlarge", "quantity": 8}],
        **extra,
    )
    return detail


def test_submit_service_job_keeps_payload_queue_share_priority_retry_timeout_and_preemption() -> None:
    described = described_service_job()
    rebuilt = rebuild_submit_service_job(
        described, input_shape=SUBMIT_SERVICE_JOB, lineage_id=LINEAGE, attempt=1, base_name="gemma-ft-run12"
    )
    request = rebuilt.request
    assert_valid(request, SUBMIT_SERVICE_JOB)
    assert rebuilt.operation == "batch:SubmitServiceJob"
    assert request["serviceRequestPayload"] == described["serviceRequestPayload"]  # byte for byte
    assert json.loads(request["serviceRequestPayload"])["CheckpointConfig"]["S3Uri"] == CHECKPOINT
    for key in (
        "jobQueue",
        "quotaShareName",
        "schedulingPriority",
        "retryStrategy",
        "timeoutConfig",
        "preemptionConfiguration",
        "serviceJobType",
    ):
        assert request[key] == described[key], key
    assert "shareIdentifier" not in request  # a quota-management queue: no share identifier
    assert request["jobName"] == rebuilt.new_job_name == batch_job_name("gemma-ft-run12", LINEAGE, 1)
    assert request["clientToken"] == rebuilt.client_token == client_token(LINEAGE, 1)
    assert request["tags"] == {"team": "research", LINEAGE_TAG: LINEAGE, ATTEMPT_TAG: "1"}
    for read_only in ("jobArn", "jobId", "status", "attempts", "preemptionSummary", "capacityUsage"):
        assert read_only not in request


def test_submit_service_job_copies_a_fair_share_identifier() -> None:
    described = described_service_job(shareIdentifier="research")
    del described["quotaShareName"]
    request = rebuild_submit_service_job(
        described, input_shape=SUBMIT_SERVICE_JOB, lineage_id=LINEAGE, attempt=2, base_name="x"
    ).request
    assert request["shareIdentifier"] == "research" and "quotaShareName" not in request


def test_submit_service_job_needs_the_payload() -> None:
    described = described_service_job()
    del described["serviceRequestPayload"]
    with pytest.raises(ValueError, match="serviceRequestPayload"):
        rebuild_submit_service_job(
            described, input_shape=SUBMIT_SERVICE_JOB, lineage_id=LINEAGE, attempt=1, base_name="x"
        )


# ------------------------------------------------------------------------ SubmitJob
def described_container_job(name: str = "batch-job/failed-spot-reclaim") -> dict[str, Any]:
    detail = copy.deepcopy(sample(name)["detail"])
    detail["container"]["environment"].append({"name": "AWS_BATCH_JOB_ATTEMPT", "value": "2"})
    return detail


def test_submit_job_keeps_definition_parameters_overrides_retry_timeout_share_and_priority() -> None:
    described = described_container_job()
    rebuilt = rebuild_submit_job(
        described, input_shape=SUBMIT_JOB, lineage_id=LINEAGE, attempt=1, base_name="llama3-8b-lora-ft-run-39"
    )
    request = rebuilt.request
    assert_valid(request, SUBMIT_JOB)
    assert request["jobDefinition"] == described["jobDefinition"]
    assert request["jobQueue"] == described["jobQueue"]
    assert request["parameters"] == described["parameters"]
    assert request["retryStrategy"] == described["retryStrategy"]
    assert request["timeout"] == described["timeout"]
    assert request["shareIdentifier"] == "research"
    assert request["schedulingPriorityOverride"] == 20
    assert request["propagateTags"] is True
    overrides = request["containerOverrides"]
    assert overrides["command"] == described["container"]["command"]
    assert overrides["resourceRequirements"] == described["container"]["resourceRequirements"]
    names = [e["name"] for e in overrides["environment"]]
    assert "AWS_BATCH_JOB_ATTEMPT" not in names  # reserved by Batch
    assert {"name": "WANDB_API_KEY", "value": "not-a-real-secret"} in overrides["environment"]
    assert request["tags"] == {**described["tags"], LINEAGE_TAG: LINEAGE, ATTEMPT_TAG: "1"}
    assert "dependsOn" not in request and "arrayProperties" not in request
    assert rebuilt.client_token is None


def test_an_array_child_is_resubmitted_alone_with_its_index() -> None:
    described = described_container_job("batch-job/array-child-failed")
    request = rebuild_submit_job(
        described, input_shape=SUBMIT_JOB, lineage_id=LINEAGE, attempt=1, base_name="llama3-8b-lr-sweep"
    ).request
    assert_valid(request, SUBMIT_JOB)
    assert "arrayProperties" not in request
    assert {"name": ARRAY_INDEX_ENV, "value": "7"} in request["containerOverrides"]["environment"]
    assert request["tags"][ARRAY_INDEX_TAG] == "7"
    # The index also comes from the job id when arrayProperties is missing.
    del described["arrayProperties"]
    request = rebuild_submit_job(
        described, input_shape=SUBMIT_JOB, lineage_id=LINEAGE, attempt=1, base_name="x"
    ).request
    assert request["tags"][ARRAY_INDEX_TAG] == "7"


def test_submit_job_maps_ecs_and_eks_properties_to_their_overrides() -> None:
    described = described_container_job()
    container = described.pop("container")
    described["ecsProperties"] = {
        "taskProperties": [
            {
                "containers": [
                    {
                        "name": "trainer",
                        "image": container["image"],
                        "command": container["command"],
                        "environment": container["environment"],
                        "resourceRequirements": container["resourceRequirements"],
                    }
                ]
            }
        ]
    }
    request = rebuild_submit_job(
        described, input_shape=SUBMIT_JOB, lineage_id=LINEAGE, attempt=1, base_name="x"
    ).request
    assert_valid(request, SUBMIT_JOB)
    (task,) = request["ecsPropertiesOverride"]["taskProperties"]
    assert task["containers"][0]["name"] == "trainer"
    assert task["containers"][0]["command"] == container["command"]
    del described["ecsProperties"]
    described["eksProperties"] = {
        "podProperties": {
            "containers": [
                {
                    "name": "trainer",
                    "image": "img:1",
                    "command": ["python"],
                    "args": ["train.py"],
                    "env": [{"name": "X", "value": "1"}, {"name": "AWS_BATCH_JOB_ID", "value": "x"}],
                    "resources": {"limits": {"nvidia.com/gpu": "8"}},
                }
            ],
            "metadata": {"labels": {"team": "ml"}},
        }
    }
    request = rebuild_submit_job(
        described, input_shape=SUBMIT_JOB, lineage_id=LINEAGE, attempt=1, base_name="x"
    ).request
    assert_valid(request, SUBMIT_JOB)
    pod = request["eksPropertiesOverride"]["podProperties"]
    assert pod["containers"][0]["env"] == [{"name": "X", "value": "1"}]
    assert pod["metadata"] == {"labels": {"team": "ml"}}


# ------------------------------------------------------------------------ CreateTrainingJob
def described_training_job() -> dict[str, Any]:
    detail = copy.deepcopy(sample("sagemaker/stopped-max-wait-time-exceeded")["detail"])
    detail.pop("Tags")
    start = datetime(2026, 11, 20, 12, tzinfo=UTC)
    detail.update(
        CreationTime=start,
        TrainingStartTime=start,
        TrainingEndTime=start + timedelta(hours=10),
        LastModifiedTime=start + timedelta(hours=10),
        SecondaryStatusTransitions=[{"Status": "Starting", "StartTime": start}],
        CheckpointConfig={
            "S3Uri": "s3://ml-checkpoints-111122223333/llama-spot/run-40/",
            "LocalPath": "/opt/ml/checkpoints",
        },
        EnableManagedSpotTraining=True,
        EnableNetworkIsolation=False,
        EnableInterContainerTrafficEncryption=False,
        Environment={"HF_HOME": "/tmp/hf"},
        VpcConfig={"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
        RetryStrategy={"MaximumRetryAttempts": 2},
        BillableTimeInSeconds=3600,
        TrainingTimeInSeconds=7200,
        ModelArtifacts={"S3ModelArtifacts": "s3://out/model.tar.gz"},
        ProfilingStatus="Disabled",
        WarmPoolStatus={"Status": "Terminated"},
    )
    return detail


def test_create_training_job_copies_every_field_create_accepts() -> None:
    described = described_training_job()
    tags = [{"Key": "team", "Value": "ml-platform"}, {"Key": "aws:sagemaker:x", "Value": "y"}]
    rebuilt = rebuild_create_training_job(
        described,
        tags,
        input_shape=CREATE_TRAINING_JOB,
        lineage_id=LINEAGE,
        attempt=1,
        base_name="llama3-8b-spot-2026-11-20-12-00-03-550",
    )
    request = rebuilt.request
    assert_valid(request, CREATE_TRAINING_JOB)
    accepted = set(CREATE_TRAINING_JOB.members)
    copied = (set(described) & accepted) - {"TrainingJobName"}
    assert copied  # the comparison below is not vacuous
    for key in copied:
        assert request[key] == described[key], key
    assert set(request) == copied | {"TrainingJobName", "Tags"}
    assert request["CheckpointConfig"]["S3Uri"] == described["CheckpointConfig"]["S3Uri"]
    assert request["TrainingJobName"] == rebuilt.new_job_name
    assert is_valid_training_job_name(request["TrainingJobName"])
    assert request["TrainingJobName"] != described["TrainingJobName"]
    assert {"Key": "team", "Value": "ml-platform"} in request["Tags"]
    assert {"Key": LINEAGE_TAG, "Value": LINEAGE} in request["Tags"]
    assert not [t for t in request["Tags"] if t["Key"].startswith("aws:")]


# ------------------------------------------------------------------------ checkpoints
def test_checkpoint_locations() -> None:
    assert parse_s3_uri("s3://bucket/a/b/", "x") is not None
    location = parse_s3_uri("s3://bucket/a/b/", "x")
    assert location is not None and (location.bucket, location.prefix) == ("bucket", "a/b/")
    assert parse_s3_uri("s3://bucket", "x") is not None
    for bad in (None, "", "https://bucket/a", "s3:///a", 3):
        assert parse_s3_uri(bad, "x") is None  # type: ignore[arg-type]
    assert sagemaker_checkpoint({"CheckpointConfig": {"S3Uri": CHECKPOINT}}) is not None
    assert sagemaker_checkpoint({"CheckpointConfig": {}}) is None
    assert sagemaker_checkpoint(None) is None
    described = described_container_job()
    found = container_checkpoint(described, [(CheckpointSource.PARAMETER, "checkpoint_uri")])
    assert found is not None and found.uri == described["parameters"]["checkpoint_uri"]
    assert found.source == "parameter:checkpoint_uri"
    described["container"]["environment"].append({"name": "CKPT", "value": "s3://env-bucket/x/"})
    described["tags"]["ckpt"] = "s3://tag-bucket/y/"
    sources = [(CheckpointSource.PARAMETER, "missing"), (CheckpointSource.ENVIRONMENT, "CKPT")]
    env_found = container_checkpoint(described, sources)
    assert env_found is not None and env_found.bucket == "env-bucket"
    tag_found = container_checkpoint(described, [(CheckpointSource.TAG, "ckpt")])
    assert tag_found is not None and tag_found.bucket == "tag-bucket"
    assert container_checkpoint(described, [(CheckpointSource.TAG, "team")]) is None  # not s3://


def test_newest_object_and_lost_instance_hours() -> None:
    t0 = datetime(2026, 11, 22, tzinfo=UTC)
    newest, count = newest_object(
        [{"LastModified": t0}, {"LastModified": t0 + timedelta(hours=2)}, {"Key": "no-time"}]
    )
    assert newest == t0 + timedelta(hours=2) and count == 3
    assert newest_object([]) == (None, 0)
    start, stop = t0, t0 + timedelta(hours=10)
    assert lost_instance_hours(8, start, stop, None) == pytest.approx(80.0)  # the whole attempt
    assert lost_instance_hours(8, start, stop, stop - timedelta(minutes=30)) == pytest.approx(4.0)
    assert lost_instance_hours(8, start, stop, start - timedelta(days=1)) == pytest.approx(80.0)  # older
    assert lost_instance_hours(8, None, stop, None) == 0.0  # never started
    assert lost_instance_hours(8, start, stop, stop + timedelta(minutes=5)) == 0.0


# ------------------------------------------------------------------------ pacing
class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_pacer_spaces_submits_at_its_rate() -> None:
    clock = FakeClock()
    pacer = SubmitPacer(rate=2.0, clock=clock, sleep=clock.sleep)
    times = []
    for _ in range(9):
        pacer.acquire()
        times.append(clock.now)
    assert times[0] == 1000.0  # the first call goes at once
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(gaps) == 8 and all(gap == pytest.approx(0.5) for gap in gaps)
    assert pacer.waited == pytest.approx(4.0)
    clock.now += 10  # idle: the bucket refills up to its burst only
    pacer.acquire()
    assert pacer.acquire() == pytest.approx(0.5)


def test_pacer_refuses_a_wait_longer_than_the_time_left() -> None:
    clock = FakeClock()
    pacer = SubmitPacer(rate=0.5, clock=clock, sleep=clock.sleep)
    pacer.acquire()
    with pytest.raises(NotInTime) as error:
        pacer.acquire(budget=1.0)
    assert error.value.wait == pytest.approx(2.0)
    assert clock.slept == []  # nothing taken, nothing slept
    assert pacer.acquire(budget=2.5) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        SubmitPacer(rate=0)


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [backoff_seconds(n, 60, 3600) for n in range(0, 9)] == [
        0,
        60,
        120,
        240,
        480,
        960,
        1920,
        3600,
        3600,
    ]
    assert backoff_seconds(5, 0, 3600) == 0
    assert backoff_seconds(10_000, 60, 3600) == 3600
