"""The opt-in plumbing of the contract tests: when the real-account variant is skipped (and that
the message names every variable), and that the real-account target is built from those variables
only (checked inside the embedded AWS, which then stands in for the account)."""

from __future__ import annotations

import os

import pytest
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.testing.contract import (
    CONTRACT_ENV,
    JOB_QUEUE_ENV,
    OUTPUT_ENV,
    QUOTA_SHARE_ENV,
    ROLE_ENV,
    SERVICE_ENVIRONMENT_ENV,
    SHARE_ENV,
    TRAINING_IMAGE_ENV,
    TRAINING_JOB_ENV,
    real_account_skip_reason,
    real_account_target,
)

NAMES = {CONTRACT_ENV: "1", JOB_QUEUE_ENV: "real-q", SERVICE_ENVIRONMENT_ENV: "real-env"}


def test_without_opt_in_the_message_names_every_variable() -> None:
    reason = real_account_skip_reason({JOB_QUEUE_ENV: "q", SERVICE_ENVIRONMENT_ENV: "e"})
    assert reason is not None
    for name in (
        f"{CONTRACT_ENV}=1",
        JOB_QUEUE_ENV,
        SERVICE_ENVIRONMENT_ENV,
        ROLE_ENV,
        TRAINING_IMAGE_ENV,
        OUTPUT_ENV,
        SHARE_ENV,
        QUOTA_SHARE_ENV,
        TRAINING_JOB_ENV,
    ):
        assert name in reason


def test_opted_in_without_names_says_which_are_missing() -> None:
    reason = real_account_skip_reason({CONTRACT_ENV: "1", JOB_QUEUE_ENV: "q"})
    assert reason is not None and f"(missing: {SERVICE_ENVIRONMENT_ENV})" in reason


def test_opted_in_without_credentials_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    reason = real_account_skip_reason(NAMES)
    assert reason is not None and "no AWS credentials" in reason


def test_the_real_account_target_comes_from_the_variables_only() -> None:
    with EmbeddedAws() as aws:  # fake credentials and a region, and an account that answers
        aws.seed(
            {
                "service_environments": [
                    {
                        "name": "real-env",
                        "capacityLimits": [{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}],
                    }
                ],
                "job_queues": [
                    {"name": "real-q", "serviceEnvironment": "real-env", "scheduling": "FAIR_SHARE"}
                ],
            }
        )
        assert real_account_skip_reason(NAMES) is None
        read_only = real_account_target(NAMES)
        assert read_only.submit_request is None
        assert all(name in read_only.skip_submit for name in (ROLE_ENV, TRAINING_IMAGE_ENV, OUTPUT_ENV))
        assert (read_only.job_queue, read_only.service_environment) == ("real-q", "real-env")
        (env,) = read_only.batch.describe_service_environments(serviceEnvironments=["real-env"])[
            "serviceEnvironments"
        ]
        assert env["capacityLimits"] == [{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}]

        submitting = real_account_target(
            {
                **NAMES,
                ROLE_ENV: "arn:aws:iam::111122223333:role/Training",
                TRAINING_IMAGE_ENV: "img:1",
                OUTPUT_ENV: "s3://out/",
                SHARE_ENV: "research",
                TRAINING_JOB_ENV: "some-job",
            }
        )
        assert submitting.submit_request is not None and submitting.skip_submit == ""
        assert submitting.submit_request["shareIdentifier"] == "research"
        assert submitting.training_job == "some-job"
        ids = submitting.batch.submit_service_job(
            jobName="plumbing",
            jobQueue="real-q",
            serviceJobType="SAGEMAKER_TRAINING",
            **submitting.submit_request,
        )
        assert aws.batch.service_jobs[ids["jobId"]].detail["shareIdentifier"] == "research"
