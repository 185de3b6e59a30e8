"""Where the contract tests (``tests/aws/``) run: the emulator (always) or a real AWS account
(opt-in). The same test body runs against either, so what it asserts is what batchpilot relies on
from AWS, and the emulator is held to it.

The real-account variant runs only with ``BATCHPILOT_AWS_CONTRACT=1``, the names of an existing
SAGEMAKER_TRAINING job queue and of its service environment, and AWS credentials and a region
boto3 can find. It is read-mostly: it describes and lists, writes a service environment's own
``state`` and ``capacityLimits`` back unchanged, and (only when a training role, image and output
location are given as well) submits one small service job, tags it, and terminates it at once. It
never creates anything else: the CreateTrainingJob it sends is one SageMaker refuses (an invalid
name).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from batchpilot_local.emulator.shapes import service_model, shape_problems

__all__ = [
    "CONTRACT_ENV",
    "JOB_QUEUE_ENV",
    "OUTPUT_ENV",
    "QUOTA_SHARE_ENV",
    "ROLE_ENV",
    "SERVICE_ENVIRONMENT_ENV",
    "SHARE_ENV",
    "TRAINING_IMAGE_ENV",
    "TRAINING_JOB_ENV",
    "ContractTarget",
    "emulator_target",
    "real_account_skip_reason",
    "real_account_target",
    "response_problems",
    "training_request",
    "unique_name",
]

CONTRACT_ENV = "BATCHPILOT_AWS_CONTRACT"
"""``1`` opts in to the real-account variant."""
JOB_QUEUE_ENV = "BATCHPILOT_AWS_JOB_QUEUE"
"""Name or ARN of an existing SAGEMAKER_TRAINING job queue (required)."""
SERVICE_ENVIRONMENT_ENV = "BATCHPILOT_AWS_SERVICE_ENVIRONMENT"
"""Name or ARN of that queue's service environment (required)."""
ROLE_ENV = "BATCHPILOT_AWS_TRAINING_ROLE_ARN"
"""SageMaker execution role of the submitted service job (needed to submit one)."""
TRAINING_IMAGE_ENV = "BATCHPILOT_AWS_TRAINING_IMAGE"
"""Training image URI of the submitted service job (needed to submit one)."""
OUTPUT_ENV = "BATCHPILOT_AWS_OUTPUT_S3_URI"
"""``s3://`` output path of the submitted service job (needed to submit one)."""
SHARE_ENV = "BATCHPILOT_AWS_SHARE_IDENTIFIER"
"""Share identifier to submit with, when the queue is fair-share."""
QUOTA_SHARE_ENV = "BATCHPILOT_AWS_QUOTA_SHARE_NAME"
"""Quota share to submit with, when the queue has quota management."""
TRAINING_JOB_ENV = "BATCHPILOT_AWS_TRAINING_JOB"
"""Name of an existing training job to describe (optional)."""

_SUBMIT_ENVS = (ROLE_ENV, TRAINING_IMAGE_ENV, OUTPUT_ENV)
_OPT_IN = (
    f"real-account contract tests are opt-in: set {CONTRACT_ENV}=1, {JOB_QUEUE_ENV}=<an existing "
    f"SAGEMAKER_TRAINING job queue> and {SERVICE_ENVIRONMENT_ENV}=<its service environment>, with AWS "
    "credentials and a region boto3 can find (AWS_PROFILE or AWS_ACCESS_KEY_ID..., AWS_REGION); "
    f"to submit and at once terminate one service job, also {ROLE_ENV}, {TRAINING_IMAGE_ENV} and "
    f"{OUTPUT_ENV} ({SHARE_ENV} / {QUOTA_SHARE_ENV} for fair-share / quota-management queues); "
    f"{TRAINING_JOB_ENV} to describe an existing training job"
)

# Members the botocore model marks required that AWS leaves out in real answers: a service job
# that never started has no startedAt (its state-change events have none either).
KNOWN_MISSING_REQUIRED = frozenset({"startedAt"})

T = TypeVar("T")


@dataclass
class ContractTarget:
    """One place to run the contract against: boto3 ``batch`` and ``sagemaker`` clients, the job
    queue and service environment to use, and how to submit a service job there.

    ``submit_request`` is None when a service job may not be submitted (``skip_submit`` says why);
    ``training_job`` names an existing training job to describe, if any. ``settle_s`` bounds how
    long :meth:`eventually` waits for an eventually consistent answer (0 for the emulator).
    ``known_gaps``: required members this target is known to leave out of its answers.
    """

    name: str
    batch: Any
    sagemaker: Any
    job_queue: str
    service_environment: str
    submit_request: dict[str, Any] | None
    skip_submit: str = ""
    training_job: str | None = None
    settle_s: float = 0.0
    known_gaps: frozenset[str] = frozenset()

    def problems(self, client: Any, operation: str, response: Mapping[str, Any]) -> list[str]:
        """:func:`response_problems`, also passing over the required members in
        :attr:`known_gaps` (what this target is known to leave out)."""
        return [
            p
            for p in response_problems(client, operation, response)
            if not any(p.endswith(f".{member}: required") for member in self.known_gaps)
        ]

    def eventually(self, probe: Callable[[], T | None], interval_s: float = 2.0) -> T | None:
        """``probe()`` until it returns something other than None, for at most :attr:`settle_s`
        seconds (once for the emulator); its last answer."""
        deadline = time.monotonic() + self.settle_s
        while True:
            answer = probe()
            if answer is not None or time.monotonic() >= deadline:
                return answer
            time.sleep(interval_s)


def training_request(role_arn: str, image: str, output_s3_uri: str) -> dict[str, Any]:
    """The smallest CreateTrainingJob request a service job carries (``serviceRequestPayload``):
    one ``ml.m5.large``, 1 GiB of volume, stopped after 60 s, no input channels."""
    return {
        "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File"},
        "RoleArn": role_arn,
        "OutputDataConfig": {"S3OutputPath": output_s3_uri},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
    }


def response_problems(client: Any, operation: str, response: Mapping[str, Any]) -> list[str]:
    """What in a boto3 ``response`` of ``operation`` (e.g. ``"DescribeServiceJob"``) does not fit
    botocore's output shape (required members included, :data:`KNOWN_MISSING_REQUIRED` excepted);
    ``[]`` when it fits."""
    model = service_model(client.meta.service_model.service_name)
    shape = model.operation_model(operation).output_shape
    body = {k: v for k, v in response.items() if k != "ResponseMetadata"}
    problems = shape_problems(shape, body, operation, check_required=True, timestamps="parsed")
    return [p for p in problems if not any(p.endswith(f".{m}: required") for m in KNOWN_MISSING_REQUIRED)]


# ------------------------------------------------------------------------------------ the emulator
_EMULATOR_WORLD: dict[str, Any] = {
    "service_environments": [
        {"name": "contract-env", "capacityLimits": [{"maxCapacity": 4, "capacityUnit": "NUM_INSTANCES"}]},
        {
            "name": "contract-other-env",
            "capacityLimits": [{"maxCapacity": 2, "capacityUnit": "NUM_INSTANCES"}],
        },
    ],
    "job_queues": [{"name": "contract-q", "serviceEnvironment": "contract-env"}],
    # Jobs in several states, so that listings, pages and the snapshot have something to show.
    "service_jobs": [
        {
            "jobName": f"seeded-{status.lower()}-{n}",
            "jobQueue": "contract-q",
            "status": status,
            "createdAt": t,
        }
        for n, (status, t) in enumerate(
            [("RUNNABLE", 1_790_000_000_000 + i) for i in range(3)]
            + [("RUNNING", 1_790_000_100_000 + i) for i in range(2)]
            + [("SUCCEEDED", 1_790_000_200_000 + i) for i in range(5)]
        )
    ],
}


@contextmanager
def emulator_target() -> Iterator[ContractTarget]:
    """The contract's target in the emulator: an open :class:`~batchpilot_local.embedded_aws.
    EmbeddedAws` with a FIFO service queue ``contract-q`` on ``contract-env`` (4 instances), a
    second environment, and a few seeded service jobs."""
    from batchpilot_local.embedded_aws import EmbeddedAws

    with EmbeddedAws() as aws:
        aws.seed(_EMULATOR_WORLD)
        account = aws.account_id
        request = training_request(
            f"arn:aws:iam::{account}:role/SageMakerTrainingExecutionRole",
            f"{account}.dkr.ecr.{aws.region}.amazonaws.com/contract:1",
            f"s3://contract-{account}/out/",
        )
        yield ContractTarget(
            name="emulator",
            batch=aws.client("batch"),
            sagemaker=aws.client("sagemaker"),
            job_queue="contract-q",
            service_environment="contract-env",
            submit_request={"serviceRequestPayload": json.dumps(request)},
            # A documented simplification (local/batchpilot_local/README.md): new training jobs
            # get no ModelArtifacts.
            known_gaps=frozenset({"ModelArtifacts"}),
        )


# ------------------------------------------------------------------------------------ a real account
def real_account_skip_reason(env: Mapping[str, str] | None = None) -> str | None:
    """None when the real-account variant may run; otherwise why not, naming every variable to
    set. Makes no network call (credentials are looked up, not used)."""
    env = os.environ if env is None else env
    missing = [name for name in (JOB_QUEUE_ENV, SERVICE_ENVIRONMENT_ENV) if not env.get(name)]
    if env.get(CONTRACT_ENV) != "1" or missing:
        return _OPT_IN + (f" (missing: {', '.join(missing)})" if env.get(CONTRACT_ENV) == "1" else "")
    import boto3

    session = boto3.Session()
    if session.get_credentials() is None:
        return f"{CONTRACT_ENV}=1 but boto3 finds no AWS credentials: " + _OPT_IN
    if not session.region_name:
        return f"{CONTRACT_ENV}=1 but boto3 finds no region (set AWS_REGION): " + _OPT_IN
    return None


def real_account_target(env: Mapping[str, str] | None = None) -> ContractTarget:
    """The contract's target in the account boto3's default credentials reach, from the
    variables of :func:`real_account_skip_reason` (check it first). Clients use botocore's
    ``standard`` retry mode, as the Lambda functions do."""
    import boto3
    from botocore.config import Config

    env = os.environ if env is None else env
    session = boto3.Session()
    config = Config(retries={"mode": "standard", "max_attempts": 5})
    missing = [name for name in _SUBMIT_ENVS if not env.get(name)]
    submit: dict[str, Any] | None = None
    if not missing:
        request = training_request(env[ROLE_ENV], env[TRAINING_IMAGE_ENV], env[OUTPUT_ENV])
        submit = {"serviceRequestPayload": json.dumps(request)}
        if env.get(SHARE_ENV):
            submit["shareIdentifier"] = env[SHARE_ENV]
        if env.get(QUOTA_SHARE_ENV):
            submit["quotaShareName"] = env[QUOTA_SHARE_ENV]
    return ContractTarget(
        name="aws",
        batch=session.client("batch", config=config),
        sagemaker=session.client("sagemaker", config=config),
        job_queue=env[JOB_QUEUE_ENV],
        service_environment=env[SERVICE_ENVIRONMENT_ENV],
        submit_request=submit,
        skip_submit=f"no service job submitted: set {', '.join(missing)}" if missing else "",
        training_job=env.get(TRAINING_JOB_ENV) or None,
        settle_s=60.0,
    )


def unique_name(prefix: str = "batchpilot-contract") -> str:
    """``<prefix>-<12 hex digits>``: a job name no earlier run used."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
