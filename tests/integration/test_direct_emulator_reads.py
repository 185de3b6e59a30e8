"""The direct emulator reads (batchpilot_local.emulator.direct.direct_calls, at botocore's
``before-call``) give exactly the answers botocore's whole HTTP path to the emulator (and to moto)
gives.

Two Batch and two SageMaker clients of one boto3 session (the functions' own,
``batchpilot.io.clients.session()``) talk to one embedded AWS holding one seeded world (the
repository's sample jobs and more, the emulator's clock frozen): the HTTP clients the normal way
(botocore prepares, signs and "sends" each request to the emulator's endpoint, where the emulator's
``before-send`` handler answers it, or hands it to moto), the direct ones with ``direct_calls`` on
their event emitters. Every step of a script of reads runs on an HTTP client and at once on its
direct twin (reads leave the world as it was, but for the emulator's own bookkeeping, which both
calls then see alike), and everything a caller sees is compared: the parsed response (datetimes
included) or the raised error (its class, text, ``Error``, modeled fields such as Batch's
``message``), ``ResponseMetadata`` (status, headers, RetryAttempts) but for the request id and the
date, the HTTP answer ``after-call`` handlers see (status, headers, body bytes) and the exceptions
announced as ``after-call-error``. The direct clients send no read (no ``before-send``), neither
those the emulator answers nor those it leaves to moto (job definitions, compute environments,
scheduling policies, tags of moto's resources, SageMaker models), which moto answers alike.

Also: writes (SubmitServiceJob, SubmitJob, TerminateJob, ...) take the HTTP path on a direct
client, and botocore retries a throttled SubmitServiceJob there; ``EmbeddedAws(direct_calls=True)``
sends no request for the functions' client's emulator reads and journals them (errors and an
emulator exception included) exactly as the HTTP path does; the handler steps aside while moto's
stubber is off; the undo puts a client back on the HTTP path.
"""

from __future__ import annotations

import base64
import datetime
import itertools
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import botocore.endpoint
import pytest
from batchpilot.io import clients as adapters
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.emulator.direct import direct_calls
from batchpilot_local.emulator.routing import route as emulator_route
from batchpilot_local.testing.paths import EVENTS_DIR
from batchpilot_local.testing.twin import answer_of, pages_of, wire_recorder
from botocore.config import Config

ACCOUNT = "111122223333"
REGION = "us-east-1"
NOW = 1_795_600_000.0  # the emulator's frozen clock (epoch seconds): createdAt, snapshot times
SERVICES = ("batch", "sagemaker")
BOOM = "emulator-bug"  # a DescribeServiceJob of this id makes the emulator raise (see _exploding_route)

SERVICE_QUEUES = {  # the sample service jobs' queues, and how they schedule
    "sm-training-research": "FAIR_SHARE",
    "sm-training-highpri": "FIFO",
    "sm-quota-queue": "QUOTA_MANAGEMENT",
}
CONTAINER_QUEUES = ("gpu-spot-queue", "gpu-od-queue", "ml-training-research", "ml-training-highpri")
POLICY_ARN = f"arn:aws:batch:{REGION}:{ACCOUNT}:scheduling-policy/research-shares"
JOB_DEFINITION_ARN = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-definition/sweep:1"
MODEL_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model/moto-model"


def _arn(resource: str, name: str) -> str:
    return f"arn:aws:batch:{REGION}:{ACCOUNT}:{resource}/{name}"


def _details(folder: str) -> list[dict[str, Any]]:
    """The ``detail`` of every sample event in ``events/<folder>``."""
    return [json.loads(p.read_text())["detail"] for p in sorted((EVENTS_DIR / folder).glob("*.json"))]


SERVICE_SAMPLES = _details("service-job")
JOB_SAMPLES = [d for d in _details("batch-job") if d["jobQueue"].rsplit("/", 1)[-1] in CONTAINER_QUEUES]
TRAINING_SAMPLES = _details("sagemaker")


def _world() -> dict[str, Any]:
    """Service environments, queues of every kind, quota shares, a scheduling policy and a job
    definition (moto's), the sample service, container and training jobs, and more jobs of the
    same names, statuses and creation times (ties included) to page through."""
    created = 1_795_500_000_000
    service_jobs = [*SERVICE_SAMPLES]
    for i in range(14):
        queue = list(SERVICE_QUEUES)[i % 3]
        job: dict[str, Any] = {
            "jobId": f"sweep-{i}",
            "jobName": f"Sweep-{i}",
            "jobQueue": queue,
            "status": ["RUNNING", "RUNNABLE", "SCHEDULED", "SUCCEEDED"][i % 4],
            "createdAt": created + (i // 2) * 1000,  # pairs created in the same millisecond
            "schedulingPriority": i % 5,
            "capacityUsage": [{"capacityUnit": "NUM_INSTANCES", "quantity": float(1 + i % 3)}],
            "serviceRequestPayload": {
                "TrainingJobName": f"sweep-{i}",
                "ResourceConfig": {"InstanceCount": 2},
            },
        }
        if i % 2:
            job["tags"] = {"sweep": str(i)}
        if SERVICE_QUEUES[queue] == "FAIR_SHARE":
            job["shareIdentifier"] = ["research", "prod"][i % 2]
        if SERVICE_QUEUES[queue] == "QUOTA_MANAGEMENT":
            job["quotaShareName"] = ["research", "prod"][i % 2]
        if job["status"] != "RUNNABLE":
            job["startedAt"] = job["createdAt"] + 5000
        service_jobs.append(job)
    jobs = [*JOB_SAMPLES]
    for i in range(9):
        jobs.append(
            {
                "jobId": f"eval-{i}",
                "jobName": f"eval-{i}",
                "jobQueue": CONTAINER_QUEUES[i % 2],
                "status": ["RUNNING", "RUNNABLE", "FAILED"][i % 3],
                "jobDefinition": JOB_DEFINITION_ARN,
                "createdAt": created + (i // 3) * 1000,
                "attempts": [],
                "shareIdentifier": "research",
                "schedulingPriority": i,
                "tags": {"eval": str(i)},
            }
        )
    training_jobs = [{**d} for d in TRAINING_SAMPLES]
    for i in range(6):
        training_jobs.append(
            {
                "TrainingJobName": f"probe-{i}",
                "TrainingJobStatus": ["InProgress", "Completed", "Failed"][i % 3],
                "SecondaryStatus": ["Training", "Completed", "Failed"][i % 3],
                "CreationTime": "2026-11-25T10:00:00Z" if i < 2 else created + i * 60_000,
                "LastModifiedTime": "2026-11-25T10:30:00.125Z",
                "Tags": {"probe": str(i)},
            }
        )
    return {
        "service_environments": [
            {
                "name": "sm-env",
                "capacityLimits": [{"maxCapacity": 8, "capacityUnit": "NUM_INSTANCES"}],
                "tags": {"team": "ml"},
            },
            {
                "name": "sm-quota-env",
                "capacityLimits": [{"maxCapacity": 12, "capacityUnit": "ml.p5.48xlarge"}],
            },
            {
                "name": "sm-off",
                "state": "DISABLED",
                "capacityLimits": [{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}],
            },
        ],
        "scheduling_policies": [
            {
                "name": "research-shares",
                "fairsharePolicy": {
                    "shareDecaySeconds": 3600,
                    "shareDistribution": [
                        {"shareIdentifier": "research", "weightFactor": 1.0},
                        {"shareIdentifier": "prod", "weightFactor": 0.5},
                    ],
                },
            }
        ],
        "job_queues": [
            {
                "name": "sm-training-research",
                "serviceEnvironment": "sm-env",
                "scheduling": "FAIR_SHARE",
                "schedulingPolicyArn": POLICY_ARN,
                "tags": {"team": "research"},
            },
            {"name": "sm-training-highpri", "serviceEnvironment": "sm-env", "priority": 10},
            {
                "name": "sm-quota-queue",
                "serviceEnvironment": "sm-quota-env",
                "scheduling": "QUOTA_MANAGEMENT",
            },
            *(
                {"name": name, "kind": "container", "computeEnvironments": ["gpu-ce"], "state": "ENABLED"}
                for name in CONTAINER_QUEUES
            ),
        ],
        "quota_shares": [
            {
                "quotaShareName": name,
                "jobQueue": "sm-quota-queue",
                "capacityLimits": [{"maxCapacity": limit, "capacityUnit": "ml.p5.48xlarge"}],
                "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 200},
            }
            for name, limit in (("research", 4), ("prod", 6), ("infer", 2))
        ],
        "job_definitions": [
            {
                "jobDefinitionName": "sweep",
                "type": "container",
                "containerProperties": {
                    "image": "img:1",
                    "command": ["python", "sweep.py"],
                    "resourceRequirements": [
                        {"type": "VCPU", "value": "4"},
                        {"type": "MEMORY", "value": "8192"},
                    ],
                },
            }
        ],
        "service_jobs": service_jobs,
        "jobs": jobs,
        "training_jobs": training_jobs,
    }


# ---------------------------------------------------------------------------------------------- runs
@dataclass
class Run:
    """What one client pair's callers saw of a run of steps (``answers``, by label); what its
    ``after-call`` handlers saw of each HTTP answer (``wire``) and its ``after-call-error``
    handlers of each exception (``errors``); ``sent``: the operations of its ``before-send`` events
    (requests that took botocore's HTTP path); ``calls``: each call made, and whether it is one
    the emulator leaves to moto."""

    answers: dict[str, Any] = field(default_factory=dict)
    wire: list[dict[str, Any]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    calls: list[tuple[str, bool]] = field(default_factory=list)

    def watch(self, client: Any) -> None:
        """Record ``client``'s HTTP answers, announced exceptions and sent requests here."""

        wire = wire_recorder(self.wire)

        def error(event_name: str, exception: BaseException, **_: Any) -> None:
            self.errors.append((event_name.rsplit(".", 1)[-1], type(exception).__name__))

        def sent(event_name: str, **_: Any) -> None:
            self.sent.append(event_name.rsplit(".", 1)[-1])

        for service in SERVICES:
            client.meta.events.register(f"after-call.{service}", wire)
            client.meta.events.register(f"after-call-error.{service}", error)
            client.meta.events.register(f"before-send.{service}", sent)


def _token(data: Mapping[str, Any]) -> str:
    """A token in the emulator's ListServiceJobs / ListJobs format (base64 JSON)."""
    return base64.urlsafe_b64encode(json.dumps(data, sort_keys=True).encode()).decode()


@dataclass(frozen=True)
class Step:
    """One read: ``operation`` (boto3's method) of ``service``; ``paged``: follow its token;
    ``moto``: the emulator leaves it to moto (so a direct client still sends it)."""

    label: str
    service: str
    operation: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    paged: bool = False
    moto: bool = False


def _run_steps(steps: list[Step], http: Mapping[str, Any], direct: Mapping[str, Any]) -> tuple[Run, Run]:
    """Each step on the HTTP client of its service, then at once on the direct one."""
    runs = (Run(), Run())
    for run, clients in zip(runs, (http, direct), strict=True):
        for client in clients.values():
            run.watch(client)
    for step in steps:
        token = "NextToken" if step.service == "sagemaker" else "nextToken"
        for run, clients in zip(runs, (http, direct), strict=True):
            assert step.label not in run.answers
            client = clients[step.service]
            if step.paged:
                answer: Any = pages_of(client, step.operation, step.kwargs, token=token)
                pages = len(answer)
            else:
                answer, pages = answer_of(client, step.operation, step.kwargs), 1
            run.answers[step.label] = answer
            run.calls += [(client.meta.method_to_api_mapping[step.operation], step.moto)] * pages
    return runs


def _assert_same(http: Run, direct: Run) -> None:
    """The two runs' answers, HTTP answers and announced exceptions are equal; the HTTP clients
    sent every call, the direct ones none (moto's reads included: the emulator hands them to moto
    at ``before-call`` too)."""
    assert direct.answers == http.answers
    assert direct.wire == http.wire
    assert direct.errors == http.errors
    assert direct.calls == http.calls
    assert http.sent == [operation for operation, _ in http.calls]
    assert direct.sent == []
    assert any(moto for _, moto in direct.calls) and len(http.sent) > 0


@contextmanager
def _exploding_route() -> Iterator[None]:
    """The emulator raises (a bug of its own, not an AWS error) for a DescribeServiceJob of
    :data:`BOOM`, on the HTTP path (moto's stubber asks the overlay) and the direct one alike."""

    def route(service_id: str, operation: str, request: Any, backends: Any, identity: Any) -> Any:
        if BOOM.encode() in (request.body or b"") and operation == "DescribeServiceJob":
            raise RuntimeError("the emulator failed")
        return emulator_route(service_id, operation, request, backends, identity)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("batchpilot_local.emulator.overlay.route", route)  # what Overlay.answer calls
        yield


@contextmanager
def _seeded(direct_calls: bool = False) -> Iterator[tuple[EmbeddedAws, str]]:
    """An open embedded AWS with :func:`_world` seeded at the frozen clock, a submitted array
    job (its parent's status summary is computed per DescribeJobs) and a SageMaker model (moto's);
    yields it and the array job's id."""
    with EmbeddedAws(direct_calls=direct_calls) as aws, _exploding_route():
        aws.overlay.clock = lambda: NOW
        aws.seed(_world())
        array_id = aws.client("batch").submit_job(
            jobName="sweep-array",
            jobQueue="gpu-spot-queue",
            jobDefinition="sweep",
            arrayProperties={"size": 3},
        )["jobId"]
        aws.client("sagemaker").create_model(
            ModelName="moto-model",
            ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole",
            PrimaryContainer={"Image": "img:1"},
        )
        yield aws, array_id


@contextmanager
def _http_and_direct_clients() -> Iterator[tuple[EmbeddedAws, str, dict[str, Any], dict[str, Any]]]:
    """The seeded embedded AWS (HTTP path for its own clients), and a Batch and a SageMaker client
    of one session on botocore's HTTP path, and two more on the direct path."""
    with _seeded() as (aws, array_id):
        session = adapters.session()
        http = {"batch": session.client("batch"), "sagemaker": session.client("sagemaker")}
        direct = {"batch": session.client("batch"), "sagemaker": session.client("sagemaker")}
        undo = direct_calls([client.meta.events for client in direct.values()], aws.overlay)
        try:
            yield aws, array_id, http, direct
        finally:
            undo()


# -------------------------------------------------------------------------------- the scripted run
def _script(array_id: str) -> list[Step]:
    """Every Batch and SageMaker read the emulator answers, found and not, with filters, pages and
    bad tokens; and reads it leaves to moto."""
    service_ids = [j["jobId"] for j in SERVICE_SAMPLES]
    job_ids = [j["jobId"] for j in JOB_SAMPLES]
    foreign = _token({"q": "another query", "k": [1_795_500_000_000, 1]})
    steps = [
        # DescribeServiceJob
        *(Step(f"service job {i}", "batch", "describe_service_job", {"jobId": i}) for i in service_ids),
        Step("service job sweep", "batch", "describe_service_job", {"jobId": "sweep-3"}),
        Step("service job sweep-0", "batch", "describe_service_job", {"jobId": "sweep-0"}),
        Step("service job by arn", "batch", "describe_service_job", {"jobId": SERVICE_SAMPLES[0]["jobArn"]}),
        Step("service job unknown", "batch", "describe_service_job", {"jobId": "no-such-job"}),
        Step("service job, emulator fails", "batch", "describe_service_job", {"jobId": BOOM}),
        # DescribeJobs
        Step("jobs", "batch", "describe_jobs", {"jobs": [*job_ids, "eval-1", "eval-5"]}),
        Step(
            "jobs, some unknown", "batch", "describe_jobs", {"jobs": ["nope", job_ids[0], "eval-2", "nope-2"]}
        ),
        Step("jobs, none known", "batch", "describe_jobs", {"jobs": ["nope"]}),
        Step(
            "jobs by arn",
            "batch",
            "describe_jobs",
            {"jobs": [JOB_SAMPLES[1]["jobArn"], _arn("job", "eval-0")]},
        ),
        Step("array job", "batch", "describe_jobs", {"jobs": [array_id, f"{array_id}:1", f"{array_id}:9"]}),
        Step("jobs, too many", "batch", "describe_jobs", {"jobs": [f"j{i}" for i in range(101)]}),
        # ListServiceJobs
        Step("service jobs running", "batch", "list_service_jobs", paged=True),
        Step(
            "service jobs of a queue by status",
            "batch",
            "list_service_jobs",
            {"jobQueue": "sm-training-research", "jobStatus": "FAILED"},
            paged=True,
        ),
        Step(
            "service jobs by name, paged",
            "batch",
            "list_service_jobs",
            {"filters": [{"name": "JOB_NAME", "values": ["sweep*"]}], "maxResults": 3},
            paged=True,
        ),
        Step(
            "service jobs of a share, runnable",
            "batch",
            "list_service_jobs",
            {
                "jobQueue": _arn("job-queue", "sm-training-research"),
                "jobStatus": "RUNNABLE",
                "filters": [{"name": "SHARE_IDENTIFIER", "values": ["research"]}],
            },
            paged=True,
        ),
        Step(
            "service jobs of a quota share, paged",
            "batch",
            "list_service_jobs",
            {
                "jobQueue": "sm-quota-queue",
                "filters": [{"name": "QUOTA_SHARE_NAME", "values": ["research"]}],
                "maxResults": 1,
            },
            paged=True,
        ),
        Step(
            "service jobs after a time",
            "batch",
            "list_service_jobs",
            {"filters": [{"name": "AFTER_CREATED_AT", "values": ["1795500002000"]}], "maxResults": 4},
            paged=True,
        ),
        Step("service jobs, bad token", "batch", "list_service_jobs", {"nextToken": "garbage"}),
        Step("service jobs, foreign token", "batch", "list_service_jobs", {"nextToken": foreign}),
        Step("service jobs, max 101", "batch", "list_service_jobs", {"maxResults": 101}),
        Step(
            "service jobs, two filters",
            "batch",
            "list_service_jobs",
            {
                "filters": [
                    {"name": "JOB_NAME", "values": ["a"]},
                    {"name": "SHARE_IDENTIFIER", "values": ["b"]},
                ]
            },
        ),
        Step("service jobs, unknown queue", "batch", "list_service_jobs", {"jobQueue": "nope"}),
        # ListJobs
        Step("jobs of a queue", "batch", "list_jobs", {"jobQueue": "gpu-spot-queue", "jobStatus": "FAILED"}),
        Step(
            "jobs of a queue, paged",
            "batch",
            "list_jobs",
            {"jobQueue": "gpu-od-queue", "jobStatus": "RUNNABLE", "maxResults": 1},
            paged=True,
        ),
        Step("jobs running", "batch", "list_jobs", {"jobQueue": "ml-training-highpri"}),
        Step("array children", "batch", "list_jobs", {"arrayJobId": array_id, "jobStatus": "RUNNABLE"}),
        Step(
            "multi-node nodes",
            "batch",
            "list_jobs",
            {"multiNodeJobId": "3f6d2b1e-8c4a-4e7b-9d2f-5a1c7e9b0d42", "jobStatus": "FAILED"},
        ),
        Step(
            "jobs by definition, paged",
            "batch",
            "list_jobs",
            {"filters": [{"name": "JOB_DEFINITION", "values": ["sweep"]}], "maxResults": 2},
            paged=True,
        ),
        Step(
            "jobs by name",
            "batch",
            "list_jobs",
            {"jobQueue": "gpu-spot-queue", "filters": [{"name": "JOB_NAME", "values": ["LLAMA*"]}]},
        ),
        Step("jobs, bad token", "batch", "list_jobs", {"jobQueue": "gpu-spot-queue", "nextToken": "%%%"}),
        Step(
            "jobs, foreign token", "batch", "list_jobs", {"jobQueue": "gpu-spot-queue", "nextToken": foreign}
        ),
        Step("jobs, no source", "batch", "list_jobs"),
        Step("jobs, max 1001", "batch", "list_jobs", {"jobQueue": "gpu-spot-queue", "maxResults": 1001}),
        # DescribeJobQueues, DescribeServiceEnvironments
        Step("queues", "batch", "describe_job_queues"),
        Step(
            "queues named",
            "batch",
            "describe_job_queues",
            {"jobQueues": ["sm-quota-queue", _arn("job-queue", "gpu-od-queue"), "nope"]},
        ),
        Step("queues, paged", "batch", "describe_job_queues", {"maxResults": 2}, paged=True),
        Step("queues, bad token", "batch", "describe_job_queues", {"nextToken": "garbage"}),
        Step("queues, max 0", "batch", "describe_job_queues", {"maxResults": 0}),
        Step("environments", "batch", "describe_service_environments"),
        Step(
            "environments named",
            "batch",
            "describe_service_environments",
            {"serviceEnvironments": [_arn("service-environment", "sm-off"), "sm-env", "nope"]},
        ),
        Step("environments, paged", "batch", "describe_service_environments", {"maxResults": 1}, paged=True),
        Step("environments, bad token", "batch", "describe_service_environments", {"nextToken": "garbage"}),
        # GetJobQueueSnapshot
        *(
            Step(f"snapshot {queue}", "batch", "get_job_queue_snapshot", {"jobQueue": queue})
            for queue in [*SERVICE_QUEUES, "gpu-od-queue", "gpu-spot-queue"]
        ),
        Step(
            "snapshot by arn",
            "batch",
            "get_job_queue_snapshot",
            {"jobQueue": _arn("job-queue", "sm-quota-queue")},
        ),
        Step("snapshot unknown", "batch", "get_job_queue_snapshot", {"jobQueue": "nope"}),
        # ListQuotaShares
        Step("quota shares", "batch", "list_quota_shares", {"jobQueue": "sm-quota-queue"}),
        Step(
            "quota shares, paged",
            "batch",
            "list_quota_shares",
            {"jobQueue": _arn("job-queue", "sm-quota-queue"), "maxResults": 1},
            paged=True,
        ),
        Step(
            "quota shares of a fifo queue", "batch", "list_quota_shares", {"jobQueue": "sm-training-highpri"}
        ),
        Step("quota shares, unknown queue", "batch", "list_quota_shares", {"jobQueue": "nope"}),
        Step(
            "quota shares, bad token",
            "batch",
            "list_quota_shares",
            {"jobQueue": "sm-quota-queue", "nextToken": "x"},
        ),
        # ListTagsForResource
        *(
            Step(f"tags of {arn}", "batch", "list_tags_for_resource", {"resourceArn": arn})
            for arn in (
                _arn("service-job", "sweep-1"),
                _arn("service-job", "sweep-0"),  # untagged
                SERVICE_SAMPLES[0]["jobArn"],
                _arn("job", "eval-4"),
                _arn("job-queue", "sm-training-research"),
                _arn("service-environment", "sm-env"),
            )
        ),
        Step(
            "tags of a missing job", "batch", "list_tags_for_resource", {"resourceArn": _arn("job", "nope")}
        ),
        # Batch reads the emulator leaves to moto
        Step(
            "tags of a job definition",
            "batch",
            "list_tags_for_resource",
            {"resourceArn": JOB_DEFINITION_ARN},
            moto=True,
        ),
        Step(
            "job definitions", "batch", "describe_job_definitions", {"jobDefinitionName": "sweep"}, moto=True
        ),
        Step("compute environments", "batch", "describe_compute_environments", moto=True),
        Step(
            "scheduling policies", "batch", "describe_scheduling_policies", {"arns": [POLICY_ARN]}, moto=True
        ),
        Step("scheduling policy list", "batch", "list_scheduling_policies", moto=True),
        # DescribeTrainingJob, ListTrainingJobs, ListTags
        *(
            Step(f"training job {name}", "sagemaker", "describe_training_job", {"TrainingJobName": name})
            for name in [j["TrainingJobName"] for j in TRAINING_SAMPLES] + ["probe-0", "probe-4"]
        ),
        Step("training job missing", "sagemaker", "describe_training_job", {"TrainingJobName": "nope"}),
        Step("training jobs", "sagemaker", "list_training_jobs", paged=True),
        Step(
            "training jobs, paged newest first",
            "sagemaker",
            "list_training_jobs",
            {"MaxResults": 2, "SortOrder": "Descending"},
            paged=True,
        ),
        Step(
            "training jobs by name and status",
            "sagemaker",
            "list_training_jobs",
            {"NameContains": "llama3", "SortBy": "Name", "MaxResults": 3},
            paged=True,
        ),
        Step(
            "training jobs failed",
            "sagemaker",
            "list_training_jobs",
            {"StatusEquals": "Failed", "SortBy": "Status", "SortOrder": "Descending"},
            paged=True,
        ),
        Step(
            "training jobs by time",
            "sagemaker",
            "list_training_jobs",
            {
                "CreationTimeAfter": datetime.datetime(2026, 11, 22, tzinfo=datetime.UTC),
                "LastModifiedTimeBefore": datetime.datetime(2026, 11, 25, 10, 30, 1, tzinfo=datetime.UTC),
                "MaxResults": 4,
            },
            paged=True,
        ),
        Step("training jobs, bad token", "sagemaker", "list_training_jobs", {"NextToken": "garbage"}),
        *(
            Step(f"training tags {name}", "sagemaker", "list_tags", {"ResourceArn": arn})
            for name, arn in (
                (j["TrainingJobName"], j["TrainingJobArn"])
                for j in [*TRAINING_SAMPLES[:3], TRAINING_SAMPLES[-1]]
            )
        ),
        Step(
            "training tags of a probe",
            "sagemaker",
            "list_tags",
            {"ResourceArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/probe-5"},
        ),
        Step(
            "training tags of a missing job",
            "sagemaker",
            "list_tags",
            {"ResourceArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/nope"},
        ),
        # SageMaker reads the emulator leaves to moto
        Step("tags of a model", "sagemaker", "list_tags", {"ResourceArn": MODEL_ARN}, moto=True),
        Step("models", "sagemaker", "list_models", moto=True),
    ]
    # Again, after the first snapshots and tag reads (the emulator remembers queue positions; an
    # untagged resource stays untagged): both paths see that alike.
    again = [
        s
        for s in steps
        if s.operation == "get_job_queue_snapshot"
        or (s.operation == "describe_service_job" and s.kwargs["jobId"] in (service_ids[0], "sweep-0"))
    ]
    return steps + [Step(f"{s.label}, again", s.service, s.operation, s.kwargs) for s in again]


def _code(answer: Mapping[str, Any]) -> tuple[Any, ...]:
    """(exception class, error code, HTTP status) of an answer."""
    return (
        answer["raised"],
        answer.get("Error", {}).get("Code"),
        answer.get("ResponseMetadata", {}).get("HTTPStatusCode"),
    )


def test_every_read_gets_the_http_paths_answer() -> None:
    """Every Batch and SageMaker read the emulator answers (found and unknown ids, filters, pages,
    bad tokens, too many ids, an emulator exception) gets on the direct clients exactly the HTTP
    clients' answers, HTTP answers and announced exceptions, without a request; so do the reads it
    leaves to moto, which moto answers alike."""
    with _http_and_direct_clients() as (_, array_id, http_clients, direct_clients):
        http, direct = _run_steps(_script(array_id), http_clients, direct_clients)
    _assert_same(http, direct)

    # The script covers what it claims: successes, errors of each kind, pages, datetimes.
    answers = direct.answers
    assert _code(answers["service job unknown"]) == ("ClientException", "ClientException", 400)
    assert answers["service job unknown"]["message"] == "Service job no-such-job does not exist."
    assert answers["service job, emulator fails"] == {"raised": "RuntimeError", "text": "the emulator failed"}
    assert direct.errors == [("DescribeServiceJob", "RuntimeError")]
    assert answers["service job sweep"]["capacityUsage"] == [
        {"capacityUnit": "NUM_INSTANCES", "quantity": 1.0}
    ]
    assert [j["jobId"] for j in answers["jobs, some unknown"]["jobs"]] == [JOB_SAMPLES[0]["jobId"], "eval-2"]
    assert answers["array job"]["jobs"][0]["arrayProperties"]["statusSummary"]["RUNNABLE"] == 3
    for label in (
        "jobs, too many",
        "service jobs, max 101",
        "jobs, no source",
        "queues, max 0",
        "snapshot unknown",
    ):
        assert _code(answers[label]) == ("ClientException", "ClientException", 400), label
    for label in (
        "service jobs, bad token",
        "service jobs, foreign token",
        "jobs, bad token",
        "queues, bad token",
    ):
        assert answers[label]["Error"]["Message"] == "Invalid nextToken", label
    assert _code(answers["training job missing"]) == ("ClientError", "ValidationException", 400)
    assert answers["training job missing"]["Error"]["Message"] == "Requested resource not found."
    assert _code(answers["training jobs, bad token"]) == ("ClientError", "ValidationException", 400)
    assert len(answers["service jobs by name, paged"]) == 5  # 14 jobs, 3 a page
    assert sum(len(p["jobSummaryList"]) for p in answers["service jobs by name, paged"]) == 14
    assert len(answers["training jobs, paged newest first"]) == 9  # 18 jobs, 2 a page
    assert len(answers["quota shares, paged"]) == 3 and len(answers["environments, paged"]) == 3
    assert answers["snapshot sm-quota-queue"]["frontOfQuotaShares"]["quotaShares"]
    assert answers["snapshot sm-training-research, again"] == answers["snapshot sm-training-research"]
    # Listing an untagged job's tags leaves it untagged: a read changes no later Describe.
    assert "tags" not in answers["service job sweep-0"]
    assert "tags" not in answers["service job sweep-0, again"]
    assert isinstance(answers["training job probe-4"]["CreationTime"], datetime.datetime)
    assert answers["tags of a job definition"]["raised"] is None
    assert answers["models"]["Models"][0]["ModelName"] == "moto-model"


# ------------------------------------------------------------------------------------------ writes
def _ticking(step: float) -> Callable[[], float]:
    """A clock that moves ``step`` seconds each time it is read, from 0."""
    ticks = itertools.count()
    return lambda: next(ticks) * step


def test_writes_take_the_http_path_and_a_throttled_submit_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a direct client every write (SubmitServiceJob, SubmitJob, UpdateServiceJob,
    TerminateServiceJob, TerminateJob, TagResource) is sent through botocore's HTTP path, and the
    reads between them are not; a SubmitServiceJob over the emulator's rate is answered 429 and
    retried by botocore's standard retry mode (two requests, RetryAttempts 1; its backoff sleep
    patched out), as on an HTTP client."""
    retries = Config(retries={"mode": "standard", "total_max_attempts": 3})
    monkeypatch.setattr(botocore.endpoint.time, "sleep", lambda seconds: None)  # keep the test fast
    with _seeded() as (aws, _):
        session = adapters.session()
        http, direct = session.client("batch", config=retries), session.client("batch", config=retries)
        undo = direct_calls([direct.meta.events], aws.overlay)
        runs = {"http": Run(), "direct": Run()}
        runs["http"].watch(http)
        runs["direct"].watch(direct)
        seen: dict[str, dict[str, Any]] = {}
        try:
            for name, client in (("http", http), ("direct", direct)):
                payload = json.dumps({"TrainingJobName": f"w-{name}"})
                submitted = client.submit_service_job(
                    jobName=f"w-{name}",
                    jobQueue="sm-training-highpri",
                    serviceJobType="SAGEMAKER_TRAINING",
                    serviceRequestPayload=payload,
                )
                job_id = submitted["jobId"]
                client.update_service_job(jobId=job_id, schedulingPriority=7)
                client.describe_service_job(jobId=job_id)
                client.terminate_service_job(jobId=job_id, reason="test")
                ended = client.describe_service_job(jobId=job_id)
                container = client.submit_job(
                    jobName=f"c-{name}", jobQueue="gpu-od-queue", jobDefinition="sweep"
                )
                client.terminate_job(jobId=container["jobId"], reason="test")
                client.tag_resource(resourceArn=container["jobArn"], tags={"k": "v"})
                (job,) = client.describe_jobs(jobs=[container["jobId"]])["jobs"]

                # The throttle: one submit per second, on a clock that moves 0.6 s per submit.
                aws.set_submit_rate(1)
                aws.batch.throttle.clock = _ticking(0.6)
                client.submit_service_job(
                    jobName=f"t1-{name}",
                    jobQueue="sm-training-highpri",
                    serviceJobType="SAGEMAKER_TRAINING",
                    serviceRequestPayload=payload,
                )
                throttled = client.submit_service_job(
                    jobName=f"t2-{name}",
                    jobQueue="sm-training-highpri",
                    serviceJobType="SAGEMAKER_TRAINING",
                    serviceRequestPayload=payload,
                )
                aws.set_submit_rate(None)
                seen[name] = {
                    "service job": (ended["status"], ended["schedulingPriority"], ended["isTerminated"]),
                    "job": (job["status"], job["tags"], job["isTerminated"]),
                    "retries": throttled["ResponseMetadata"]["RetryAttempts"],
                }
        finally:
            undo()
    writes = [
        "SubmitServiceJob",
        "UpdateServiceJob",
        "TerminateServiceJob",
        "SubmitJob",
        "TerminateJob",
        "TagResource",
        "SubmitServiceJob",
        "SubmitServiceJob",  # 429
        "SubmitServiceJob",  # its retry
    ]
    reads = ["DescribeServiceJob", "DescribeServiceJob", "DescribeJobs"]
    assert sorted(runs["http"].sent) == sorted(writes + reads)
    assert runs["direct"].sent == writes
    assert (
        seen["direct"]
        == seen["http"]
        == {
            "service job": ("FAILED", 7, True),
            "job": ("FAILED", {"k": "v"}, True),
            "retries": 1,
        }
    )
    assert [w["status"] for w in runs["direct"].wire if w["operation"] == "SubmitServiceJob"] == [
        200,
        200,
        200,
    ]


# --------------------------------------------------------------------- EmbeddedAws and the handler
def _journalled_reads(direct: bool) -> tuple[list[str], list[Any], list[Any]]:
    """In a seeded ``EmbeddedAws(direct_calls=direct)``: the requests the functions' Batch and
    SageMaker clients (``batchpilot.io.clients``) send, the journal and the answers of reads that
    succeed and fail (an AWS error, an emulator exception), a read moto answers and a write."""
    with _seeded(direct_calls=direct) as (aws, _):
        batch, sagemaker = adapters.client("batch"), adapters.client("sagemaker")
        run = Run()
        run.watch(batch)
        run.watch(sagemaker)
        answers = [
            answer_of(batch, "describe_service_job", {"jobId": "sweep-2"}),
            answer_of(batch, "describe_service_job", {"jobId": "no-such-job"}),
            answer_of(batch, "list_service_jobs", {"jobQueue": "sm-quota-queue", "jobStatus": "RUNNABLE"}),
            answer_of(batch, "describe_service_job", {"jobId": BOOM}),
            answer_of(sagemaker, "describe_training_job", {"TrainingJobName": "nope"}),
            answer_of(sagemaker, "list_tags", {"ResourceArn": MODEL_ARN}),
            answer_of(batch, "describe_job_definitions", {"jobDefinitionName": "sweep"}),
            answer_of(batch, "terminate_job", {"jobId": "eval-1", "reason": "done"}),
        ]
        return run.sent, aws.drain_journal(), answers


def test_embedded_aws_with_direct_calls_sends_no_read_request_and_journals_every_call() -> None:
    """``EmbeddedAws(direct_calls=True)`` answers the functions' clients' emulator reads without a
    request (no ``before-send``: DescribeServiceJob, ListServiceJobs, DescribeTrainingJob, and
    moto's ListTags and DescribeJobDefinitions), still sends the writes, and its API journal records
    every call exactly as with the HTTP path: a ClientException read with its status and error
    code, an emulator exception with its name, the same answers."""
    http_sent, http_journal, http_answers = _journalled_reads(direct=False)
    direct_sent, direct_journal, direct_answers = _journalled_reads(direct=True)
    assert http_sent == [
        "DescribeServiceJob",
        "DescribeServiceJob",
        "ListServiceJobs",
        "DescribeServiceJob",
        "DescribeTrainingJob",
        "ListTags",
        "DescribeJobDefinitions",
        "TerminateJob",
    ]
    assert direct_sent == ["TerminateJob"]
    assert direct_answers == http_answers
    assert direct_journal == http_journal
    assert [
        (e.action, e.sent, e.succeeded, e.http_status, e.error_code, e.retries) for e in direct_journal
    ] == [
        ("batch:DescribeServiceJob", True, True, 200, None, 0),
        ("batch:DescribeServiceJob", True, False, 400, "ClientException", 0),
        ("batch:ListServiceJobs", True, True, 200, None, 0),
        ("batch:DescribeServiceJob", True, False, None, "RuntimeError", 0),
        ("sagemaker:DescribeTrainingJob", True, False, 400, "ValidationException", 0),
        ("sagemaker:ListTags", True, True, 200, None, 0),
        ("batch:DescribeJobDefinitions", True, True, 200, None, 0),
        ("batch:TerminateJob", True, True, 200, None, 0),
    ]


def test_the_direct_reads_step_aside_while_motos_stubber_is_off() -> None:
    """With moto's stubber off (as the HTTP fault hooks turn it off for a faulted request) the
    handler answers nothing and a read takes botocore's HTTP path, where a ``before-send`` hook
    answers it; with the stubber on (before and after), the same hook is never reached."""
    from botocore.awsrequest import AWSResponse, HTTPHeaders
    from moto.core.botocore_stubber import MockRawResponse
    from moto.core.models import botocore_stubber

    def canned(request: Any, **_: Any) -> AWSResponse:
        headers = HTTPHeaders()
        headers["Content-Type"] = "application/json"
        return AWSResponse(request.url, 200, headers, MockRawResponse(b'{"jobName": "from-before-send"}'))

    with _http_and_direct_clients() as (_, _, _, clients):
        direct = clients["batch"]
        run = Run()
        run.watch(direct)
        direct.meta.events.register("before-send.batch", canned, unique_id="test-canned")
        names = [direct.describe_service_job(jobId="sweep-0")["jobName"]]
        was = botocore_stubber.enabled
        botocore_stubber.enabled = False
        try:
            names.append(direct.describe_service_job(jobId="sweep-0")["jobName"])
        finally:
            botocore_stubber.enabled = was
        names.append(direct.describe_service_job(jobId="sweep-0")["jobName"])
        assert run.sent == ["DescribeServiceJob"]
    assert names == ["Sweep-0", "from-before-send", "Sweep-0"]


def test_the_undo_puts_a_client_back_on_the_http_path() -> None:
    """``direct_calls`` answers a client's reads directly until its undo; after it the client
    sends its reads again, and gets the same answers."""
    with _seeded() as (aws, _):
        session = adapters.session()
        batch, sagemaker = session.client("batch"), session.client("sagemaker")
        run = Run()
        run.watch(batch)
        run.watch(sagemaker)
        undo = direct_calls([batch.meta.events, sagemaker.meta.events], aws.overlay)
        before = (
            batch.describe_service_job(jobId="sweep-5")["status"],
            sagemaker.describe_training_job(TrainingJobName="probe-1")["TrainingJobStatus"],
        )
        assert run.sent == []
        undo()
        after = (
            batch.describe_service_job(jobId="sweep-5")["status"],
            sagemaker.describe_training_job(TrainingJobName="probe-1")["TrainingJobStatus"],
        )
        assert run.sent == ["DescribeServiceJob", "DescribeTrainingJob"]
    assert before == after == ("RUNNABLE", "Completed")
