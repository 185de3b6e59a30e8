"""What batchpilot relies on from SageMaker's training-job APIs, asserted the same way against the
emulator and (opt-in) a real account. Nothing is created in a real account: the CreateTrainingJob
sent there is one SageMaker refuses."""

from __future__ import annotations

import json

import botocore.exceptions
import pytest
from batchpilot_local.emulator.shapes import service_model, shape_problems
from batchpilot_local.testing.contract import ContractTarget, unique_name


def test_an_unknown_training_job_is_a_validation_exception(target: ContractTarget) -> None:
    # The recovery function tells "gone" from other failures by this code and message.
    with pytest.raises(botocore.exceptions.ClientError) as info:
        target.sagemaker.describe_training_job(TrainingJobName=unique_name())
    error = info.value.response["Error"]
    assert (error["Code"], error["Message"]) == ("ValidationException", "Requested resource not found.")


def test_create_training_job_refuses_an_invalid_name_and_creates_nothing(target: ContractTarget) -> None:
    if target.submit_request is None:
        pytest.skip(target.skip_submit)
    request = json.loads(target.submit_request["serviceRequestPayload"])
    name = unique_name() + "_not_allowed"  # "_" is outside ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}
    with pytest.raises(botocore.exceptions.ClientError) as info:
        target.sagemaker.create_training_job(TrainingJobName=name, **request)
    assert info.value.response["Error"]["Code"] == "ValidationException"
    with pytest.raises(botocore.exceptions.ClientError):
        target.sagemaker.describe_training_job(TrainingJobName=name)


def test_a_service_job_payload_is_a_create_training_job_request(target: ContractTarget) -> None:
    if target.submit_request is None:
        pytest.skip(target.skip_submit)
    shape = service_model("sagemaker").operation_model("CreateTrainingJob").input_shape
    request = {
        "TrainingJobName": "named-by-batch",
        **json.loads(target.submit_request["serviceRequestPayload"]),
    }
    assert shape_problems(shape, request, check_required=True) == []


def test_describe_training_job_fits_the_model(target: ContractTarget) -> None:
    sm = target.sagemaker
    if target.name == "emulator":
        # Created here only: in a real account a training job is what the contract must not start.
        assert target.submit_request is not None
        request = json.loads(target.submit_request["serviceRequestPayload"])
        created = sm.create_training_job(TrainingJobName="contract-training", **request)
        assert target.problems(sm, "CreateTrainingJob", created) == []
        name = "contract-training"
    elif target.training_job:
        name = target.training_job
    else:
        pytest.skip("no training job to describe: set BATCHPILOT_AWS_TRAINING_JOB to an existing one")
    described = sm.describe_training_job(TrainingJobName=name)
    assert target.problems(sm, "DescribeTrainingJob", described) == []
    assert described["TrainingJobName"] == name
    assert described["TrainingJobArn"].endswith(f":training-job/{name.lower()}")
    assert described["TrainingJobStatus"] in ("InProgress", "Completed", "Failed", "Stopping", "Stopped")
