"""Classification: the table of inputs → (kind, terminal, succeeded, category)."""

from __future__ import annotations

from typing import Any

import pytest
from batchpilot.shared.classification import (
    Category,
    EventKind,
    JobKind,
    NodeRole,
    category_of_reason,
    classify,
    queue_name,
    quota_of_reason,
)
from batchpilot.shared.events import parse_event
from batchpilot_local.testing.samples import batch_job, envelope, service_job, training_job

SPOT = "Host EC2 (instance i-0a1b2c3d4e5f67890) terminated."
TIME_LIMIT_CAPACITY = (
    "Terminated by JobStateTimeLimit action due to reason: CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
)
C = Category

# (id, event, kind, terminal, succeeded, category)
TABLE: list[tuple[str, dict[str, Any], JobKind, bool, bool, Category | None]] = [
    # ---- container jobs
    ("container succeeded", batch_job("SUCCEEDED"), JobKind.CONTAINER_JOB, True, True, None),
    ("container running", batch_job("RUNNING"), JobKind.CONTAINER_JOB, False, False, None),
    (
        "spot reclaim, no exit code",
        batch_job("FAILED", attempts=[{"container": {"logStreamName": "x"}, "statusReason": SPOT}]),
        JobKind.CONTAINER_JOB,
        True,
        False,
        C.SPOT_INTERRUPTION,
    ),
    (
        "spot reclaim while Batch retries",
        batch_job("RUNNABLE", attempts=[{"container": {}, "statusReason": SPOT}]),
        JobKind.CONTAINER_JOB,
        False,
        False,
        C.SPOT_INTERRUPTION,
    ),
    (
        "failed before start, no attempts",
        batch_job("FAILED", statusReason="MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT - needs 16 GPUs"),
        JobKind.CONTAINER_JOB,
        True,
        False,
        C.MISCONFIGURATION,
    ),
    (
        "cannot pull image",
        batch_job(
            "FAILED",
            statusReason="Task failed to start",
            attempts=[
                {"container": {"reason": "CannotPullContainerError: pull image manifest ... not found"}}
            ],
        ),
        JobKind.CONTAINER_JOB,
        True,
        False,
        C.MISCONFIGURATION,
    ),
    (
        "application exit 1",
        batch_job(
            "FAILED",
            statusReason="Essential container in task exited",
            attempts=[{"container": {"exitCode": 1}, "statusReason": "Essential container in task exited"}],
        ),
        JobKind.CONTAINER_JOB,
        True,
        False,
        C.APPLICATION_ERROR,
    ),
    (
        "exit code 0 yet FAILED is not success",
        batch_job("FAILED", attempts=[{"container": {"exitCode": 0}}]),
        JobKind.CONTAINER_JOB,
        True,
        False,
        C.UNKNOWN,
    ),
    (
        "attempt timeout",
        batch_job("FAILED", statusReason="Job attempt duration exceeded timeout"),
        JobKind.CONTAINER_JOB,
        True,
        False,
        C.TIMEOUT,
    ),
    (
        "job state time limit for capacity",
        batch_job("FAILED", statusReason=TIME_LIMIT_CAPACITY),
        JobKind.CONTAINER_JOB,
        True,
        False,
        C.CAPACITY,
    ),
    (
        "container job canceled by job state time limit",
        batch_job("FAILED", statusReason=TIME_LIMIT_CAPACITY.replace("Terminated", "Canceled")),
        JobKind.CONTAINER_JOB,
        True,
        False,
        C.CAPACITY,
    ),
    (
        "terminated by a person",
        batch_job("FAILED", statusReason="Terminated by ml-oncall", isTerminated=True),
        JobKind.CONTAINER_JOB,
        True,
        False,
        C.USER_STOPPED,
    ),
    (
        "container queue blocked, misconfiguration",
        envelope(
            "Batch Job Queue Blocked",
            batch_job("RUNNABLE", statusReason="MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE - x")[
                "detail"
            ],
        ),
        JobKind.CONTAINER_JOB,
        False,
        False,
        C.MISCONFIGURATION,
    ),
    # ---- service jobs
    ("service succeeded", service_job("SUCCEEDED"), JobKind.SERVICE_JOB, True, True, None),
    ("service scheduled", service_job("SCHEDULED"), JobKind.SERVICE_JOB, False, False, None),
    (
        "service runnable for capacity is not a failure",
        service_job("RUNNABLE", statusReason="CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - waiting"),
        JobKind.SERVICE_JOB,
        False,
        False,
        None,
    ),
    (
        "sagemaker capacity error",
        service_job(
            "FAILED", statusReason="Received status from SageMaker: CapacityError: Unable to provision"
        ),
        JobKind.SERVICE_JOB,
        True,
        False,
        C.CAPACITY,
    ),
    (
        "sagemaker internal error",
        service_job(
            "FAILED", statusReason="Received status from SageMaker: InternalServerError: We encountered"
        ),
        JobKind.SERVICE_JOB,
        True,
        False,
        C.INTERNAL_ERROR,
    ),
    (
        "sagemaker algorithm error",
        service_job(
            "FAILED", statusReason="Received status from SageMaker: AlgorithmError: ExecuteUserScriptError"
        ),
        JobKind.SERVICE_JOB,
        True,
        False,
        C.APPLICATION_ERROR,
    ),
    (
        "sagemaker validation",
        service_job("FAILED", statusReason="Received status from SageMaker: ValidationException: bad role"),
        JobKind.SERVICE_JOB,
        True,
        False,
        C.MISCONFIGURATION,
    ),
    (
        "service job state time limit",
        service_job("FAILED", statusReason=TIME_LIMIT_CAPACITY, isTerminated=True),
        JobKind.SERVICE_JOB,
        True,
        False,
        C.CAPACITY,
    ),
    (
        "preemption budget spent (reason)",
        service_job("FAILED", statusReason="PREEMPTION: retries exhausted"),
        JobKind.SERVICE_JOB,
        True,
        False,
        C.PREEMPTION,
    ),
    (
        "preemption budget spent (summary only)",
        service_job("FAILED", preemptionSummary={"preemptedAttemptCount": 3}),
        JobKind.SERVICE_JOB,
        True,
        False,
        C.PREEMPTION,
    ),
    (
        "service terminated by a person",
        service_job("FAILED", statusReason="Terminated by ml-oncall: superseded", isTerminated=True),
        JobKind.SERVICE_JOB,
        True,
        False,
        C.USER_STOPPED,
    ),
    (
        "reason from the latest attempt",
        service_job(
            "FAILED",
            latestAttempt={"statusReason": "Received status from SageMaker: InternalServerError: x"},
        ),
        JobKind.SERVICE_JOB,
        True,
        False,
        C.INTERNAL_ERROR,
    ),
    ("service failed, no reason", service_job("FAILED"), JobKind.SERVICE_JOB, True, False, C.UNKNOWN),
    (
        "blocked: service environment max",
        service_job(
            "RUNNABLE",
            "Batch Service Job Queue Blocked",
            statusReason="MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - needs 8",
        ),
        JobKind.SERVICE_JOB,
        False,
        False,
        C.MISCONFIGURATION,
    ),
    (
        "blocked: capacity",
        service_job(
            "RUNNABLE",
            "Batch Service Job Queue Blocked",
            statusReason="CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
        ),
        JobKind.SERVICE_JOB,
        False,
        False,
        C.CAPACITY,
    ),
    (
        "blocked: undetermined",
        service_job("RUNNABLE", "Batch Service Job Queue Blocked", statusReason="UNDETERMINED"),
        JobKind.SERVICE_JOB,
        False,
        False,
        C.UNKNOWN,
    ),
    (
        "preemption started",
        envelope(
            "Batch Service Job Preemption Started",
            {"preemptedJobArn": "arn:x", "status": "RUNNING", "statusReason": "PREEMPTION_IN_PROGRESS: by y"},
        ),
        JobKind.SERVICE_JOB,
        False,
        False,
        C.PREEMPTION,
    ),
    (
        "preemption completed",
        envelope(
            "Batch Service Job Preemption Completed", {"preemptedJobArn": "arn:x", "status": "RUNNABLE"}
        ),
        JobKind.SERVICE_JOB,
        False,
        False,
        C.PREEMPTION,
    ),
    # ---- training jobs
    ("training completed", training_job("Completed"), JobKind.TRAINING_JOB, True, True, None),
    (
        "training in progress",
        training_job("InProgress", SecondaryStatus="Training"),
        JobKind.TRAINING_JOB,
        False,
        False,
        None,
    ),
    (
        "managed spot interrupted",
        training_job("InProgress", SecondaryStatus="Interrupted"),
        JobKind.TRAINING_JOB,
        False,
        False,
        C.SPOT_INTERRUPTION,
    ),
    (
        "capacity error",
        training_job(
            "Failed",
            SecondaryStatus="Failed",
            FailureReason="CapacityError: Unable to provision requested ML compute capacity.",
        ),
        JobKind.TRAINING_JOB,
        True,
        False,
        C.CAPACITY,
    ),
    (
        "ec2 insufficient capacity",
        training_job(
            "Failed", FailureReason="EC2InsufficientCapacityError: We currently do not have sufficient"
        ),
        JobKind.TRAINING_JOB,
        True,
        False,
        C.CAPACITY,
    ),
    (
        "internal server error",
        training_job("Failed", FailureReason="InternalServerError: We encountered an internal error."),
        JobKind.TRAINING_JOB,
        True,
        False,
        C.INTERNAL_ERROR,
    ),
    (
        "algorithm error",
        training_job("Failed", FailureReason="AlgorithmError: ExecuteUserScriptError"),
        JobKind.TRAINING_JOB,
        True,
        False,
        C.APPLICATION_ERROR,
    ),
    ("failed without reason", training_job("Failed"), JobKind.TRAINING_JOB, True, False, C.UNKNOWN),
    (
        "stopped: max wait (spot starvation)",
        training_job("Stopped", SecondaryStatus="MaxWaitTimeExceeded"),
        JobKind.TRAINING_JOB,
        True,
        False,
        C.SPOT_INTERRUPTION,
    ),
    (
        "stopped: max runtime",
        training_job("Stopped", SecondaryStatus="MaxRuntimeExceeded"),
        JobKind.TRAINING_JOB,
        True,
        False,
        C.TIMEOUT,
    ),
    (
        "stopped by a person is never success",
        training_job("Stopped", SecondaryStatus="Stopped"),
        JobKind.TRAINING_JOB,
        True,
        False,
        C.USER_STOPPED,
    ),
]


@pytest.mark.parametrize(
    ("event", "kind", "terminal", "succeeded", "category"),
    [row[1:] for row in TABLE],
    ids=[row[0] for row in TABLE],
)
def test_classification_table(
    event: dict[str, Any], kind: JobKind, terminal: bool, succeeded: bool, category: Category | None
) -> None:
    facts = classify(parse_event(event))
    assert (facts.kind, facts.terminal, facts.succeeded, facts.category) == (
        kind,
        terminal,
        succeeded,
        category,
    )


def test_missing_exit_code_is_never_success() -> None:
    facts = classify(parse_event(batch_job("FAILED", attempts=[{"container": {}}])))
    assert not facts.succeeded


def test_most_specific_reason_is_the_last_attempts_container_reason() -> None:
    event = batch_job(
        "FAILED",
        statusReason="Task failed to start",
        attempts=[
            {"container": {"reason": "first attempt"}},
            {"container": {"reason": "CannotPullContainerError: image gone"}, "statusReason": "Task failed"},
        ],
    )
    facts = classify(parse_event(event))
    assert facts.reason == "CannotPullContainerError: image gone"
    assert facts.attempts == 2


def test_queue_name_and_event_kind() -> None:
    facts = classify(
        parse_event(service_job("RUNNABLE", "Batch Service Job Queue Blocked", statusReason="UNDETERMINED"))
    )
    assert facts.queue == "ml-training-highpri"
    assert facts.event_kind is EventKind.QUEUE_BLOCKED
    assert queue_name("arn:aws:batch:us-east-1:111122223333:job-queue/q1") == "q1"
    assert queue_name("q2") == "q2"
    assert queue_name(None) is None


def test_training_job_created_by_batch_is_marked() -> None:
    event = training_job("Failed", TrainingJobName="AWSBatchllama-pretrain88b610a69aa8380ca5b0a7aba3f81cb8")
    assert classify(parse_event(event)).created_by_batch
    assert not classify(parse_event(training_job("Failed"))).created_by_batch


@pytest.mark.parametrize(
    ("reason", "category"),
    [
        ("Received status from SageMaker: Training job completed", None),
        (
            "Terminated by JobStateTimeLimit action due to reason: MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT",
            C.MISCONFIGURATION,
        ),
        ("something Host EC2 (instance i-1) terminated.", None),  # prefixes only, never substrings
        ("OutOfMemoryError: Container killed due to memory usage", C.OUT_OF_MEMORY),
        ("OOMKilled", C.OUT_OF_MEMORY),
        (
            "Received status from SageMaker: AlgorithmError: CUDA out of memory. Tried to allocate",
            C.OUT_OF_MEMORY,
        ),
        ("ClientError: Please use an instance type with more memory", C.OUT_OF_MEMORY),
        ("AlgorithmError: ExecuteUserScriptError: ExitCode 1", C.APPLICATION_ERROR),
        ("ClientError: Data download failed", C.MISCONFIGURATION),
        ("Essential container in task exited: out of memory", None),  # markers only behind a known prefix
        ("ResourceLimitExceeded: The account-level service limit 'x' is 0 Instances", C.QUOTA),
        ("Received status from SageMaker: ResourceLimitExceeded: limit 'y'", C.QUOTA),
        ("VcpuLimitExceeded: You have requested more vCPU capacity than your current vCPU limit", C.QUOTA),
        ("InstanceLimitExceeded: Your quota allows for 0 more running instance(s)", C.QUOTA),
        ("MaxSpotInstanceCountExceeded", C.QUOTA),
        ("", None),
        (None, None),
    ],
)
def test_category_of_reason_matches_prefixes_only(reason: str | None, category: Category | None) -> None:
    assert category_of_reason(reason) == category


@pytest.mark.parametrize(
    ("reason", "quota"),
    [
        (
            "ResourceLimitExceeded: The account-level service limit 'ml.p4d.24xlarge for training job usage'"
            " is 0 Instances, with current utilization of 0 Instances",
            "ml.p4d.24xlarge for training job usage",
        ),
        ("VcpuLimitExceeded: You have requested more vCPU capacity", "VcpuLimitExceeded"),
        ("CapacityError: Unable to provision requested ML compute capacity", None),
        (None, None),
    ],
)
def test_quota_of_reason_names_the_quota(reason: str | None, quota: str | None) -> None:
    assert quota_of_reason(reason) == quota


ECS_NODE = {
    "taskProperties": [{"containers": [{"name": "trainer", "exitCode": 3, "logStreamName": "s/1"}]}],
    "startedAt": 1763633100000,
    "stoppedAt": 1763636700000,
    "statusReason": "Essential container in task exited",
}


@pytest.mark.parametrize(
    ("detail", "category", "exit_code", "stopped_ms", "role", "by_batch"),
    [
        # ECS properties: exit code under taskProperties[].containers[], no stoppedAt on the job
        ({"attempts": [ECS_NODE]}, C.APPLICATION_ERROR, 3, 1763636700000, None, False),
        # EKS: eksAttempts[].containers[]
        (
            {
                "eksAttempts": [
                    {"containers": [{"exitCode": 137, "reason": "OOMKilled"}], "stoppedAt": 1763636000000}
                ]
            },
            C.OUT_OF_MEMORY,
            137,
            1763636000000,
            None,
            False,
        ),
        # the job-level ecsProperties when the attempt says nothing
        (
            {"ecsProperties": {"taskProperties": [{"containers": [{"exitCode": 0}, {"exitCode": 9}]}]}},
            C.APPLICATION_ERROR,
            9,
            None,
            None,
            False,
        ),
        # a multi-node node (jobId UUID#N): classified, but created by Batch for its parent
        (
            {"jobId": "6d1c0c4e-6b7f-4b8a-9f0e-1f2a3b4c5d6e#2", "attempts": [ECS_NODE]},
            C.APPLICATION_ERROR,
            3,
            1763636700000,
            NodeRole.NODE,
            True,
        ),
        (
            {"nodeDetails": {"nodeIndex": 0, "isMainNode": True}, "attempts": [ECS_NODE]},
            C.APPLICATION_ERROR,
            3,
            1763636700000,
            NodeRole.MAIN_NODE,
            True,
        ),
        (
            {"nodeProperties": {"numNodes": 2, "mainNode": 0}, "attempts": [ECS_NODE]},
            C.APPLICATION_ERROR,
            3,
            1763636700000,
            NodeRole.PARENT,
            False,
        ),
    ],
)
def test_container_job_shapes(
    detail: dict[str, Any],
    category: Category,
    exit_code: int | None,
    stopped_ms: int | None,
    role: NodeRole | None,
    by_batch: bool,
) -> None:
    facts = classify(
        parse_event(batch_job("FAILED", statusReason="Essential container in task exited", **detail))
    )
    stopped = int(facts.stopped_at.timestamp() * 1000) if facts.stopped_at else None
    assert (facts.category, facts.exit_code, stopped, facts.node_role, facts.created_by_batch) == (
        category,
        exit_code,
        stopped_ms,
        role,
        by_batch,
    )


def test_job_arn_from_resources_when_the_event_has_none() -> None:
    event = batch_job("FAILED")
    arn = event["detail"].pop("jobArn")
    event["resources"] = [arn]
    assert classify(parse_event(event)).arn == arn
    event["resources"] = []
    assert classify(parse_event(event)).arn == event["detail"]["jobId"]


def test_time_limit_action_is_noted() -> None:
    reason = "Canceled by JobStateTimeLimit action due to reason: CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
    facts = classify(parse_event(batch_job("FAILED", statusReason=reason)))
    assert facts.time_limit_action and facts.category is C.CAPACITY
    assert not classify(parse_event(batch_job("FAILED", statusReason="CAPACITY:X"))).time_limit_action
