"""Shared pieces of the recovery tests and benchmark: worlds for the embedded AWS, a fake clock,
and a harness that runs the real :class:`~batchpilot.recovery.service.Recoverer` on the real
adapters against the embedded AWS (moto + the embedded Batch/SageMaker backends), reading back what
it did from the API journal. :func:`event_of` turns a sample event (or an SQS body) into the event
model :meth:`Recoverer.handle` takes, through the same decode step as the Lambda handler.

The worlds here are also what ``events/scenarios/recovery/*.json`` seed;
``tests/integration/test_recovery_support.py`` checks that the embedded AWS accepts them.
"""

from __future__ import annotations

import copy
import json
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from batchpilot.io.batch import BatchJobs
from batchpilot.io.clients import client, session
from batchpilot.io.dynamodb.lineage import DynamoLineageStore
from batchpilot.io.eventbridge import EventBridgePublisher
from batchpilot.io.s3 import S3Checkpoints
from batchpilot.io.sagemaker import TrainingJobs
from batchpilot.io.sqs import SqsDeferrer
from batchpilot.recovery.pacing import SubmitPacer
from batchpilot.recovery.service import Action, Recoverer, RetryLater
from batchpilot.recovery.settings import RecoverySettings
from batchpilot.shared.events import JobEvent
from batchpilot.shared.metrics import MetricPoint
from batchpilot.shared.records import Rejected, decode

from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.testing.harness import create_state_table
from batchpilot_local.testing.samples import sample
from batchpilot_local.world import JournalEntry

ACCOUNT = "111122223333"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingExecutionRole"
BUCKET = f"ml-checkpoints-{ACCOUNT}"
TABLE = "StateTable"
SUBMIT_OPERATIONS = ("batch:SubmitServiceJob", "batch:SubmitJob", "sagemaker:CreateTrainingJob")
START = datetime(2026, 11, 24, 3, 0, tzinfo=UTC)
PREEMPTED = "service-job/failed-preemption-budget-spent"


# ------------------------------------------------------------------------------------ worlds
def payload(
    *, checkpoint_uri: str | None, instance_type: str = "ml.p5.48xlarge", count: int = 8, role: str = ROLE
) -> dict[str, Any]:
    """A CreateTrainingJob request as a service job's ``serviceRequestPayload`` carries it."""
    request: dict[str, Any] = {
        "AlgorithmSpecification": {
            "TrainingImage": f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/ml/sm-llm-train:2026.11.1",
            "TrainingInputMode": "File",
        },
        "RoleArn": role,
        "HyperParameters": {"epochs": "3", "learning_rate": "2e-05"},
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": f"s3://ml-datasets-{ACCOUNT}/llm/train/",
                        "S3DataDistributionType": "FullyReplicated",
                    }
                },
            }
        ],
        "OutputDataConfig": {"S3OutputPath": f"s3://ml-artifacts-{ACCOUNT}/llm/"},
        "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": count, "VolumeSizeInGB": 500},
        "StoppingCondition": {"MaxRuntimeInSeconds": 259200},
    }
    if checkpoint_uri is not None:
        request["CheckpointConfig"] = {"S3Uri": checkpoint_uri, "LocalPath": "/opt/ml/checkpoints"}
    return request


def service_job_item(
    sample_name: str,
    *,
    checkpoint_uri: str | None,
    tags: Mapping[str, str] | None = None,
    role: str = ROLE,
    **changes: Any,
) -> dict[str, Any]:
    """The DescribeServiceJob response of a sample event's service job (payload and tags added)."""
    detail: dict[str, Any] = copy.deepcopy(sample(sample_name)["detail"])
    detail["serviceRequestPayload"] = json.dumps(payload(checkpoint_uri=checkpoint_uri, role=role))
    detail["tags"] = dict(tags if tags is not None else {"team": "ml-platform", "project": "llm"})
    detail.update(changes)
    return detail


def container_job_item(sample_name: str, **changes: Any) -> dict[str, Any]:
    """The DescribeJobs entry of a sample event's container job."""
    detail: dict[str, Any] = copy.deepcopy(sample(sample_name)["detail"])
    detail.update(changes)
    return detail


def training_job_item(sample_name: str, *, checkpoint_uri: str | None, **changes: Any) -> dict[str, Any]:
    """The DescribeTrainingJob response (plus ``Tags``) of a sample event's training job."""
    detail: dict[str, Any] = copy.deepcopy(sample(sample_name)["detail"])
    detail.setdefault("Tags", [])
    if isinstance(detail["Tags"], dict):
        detail["Tags"] = [{"Key": k, "Value": v} for k, v in detail["Tags"].items()]
    if checkpoint_uri is not None:
        detail["CheckpointConfig"] = {"S3Uri": checkpoint_uri, "LocalPath": "/opt/ml/checkpoints"}
    detail.update(changes)
    return detail


def checkpoint_item(uri: str, *times: str) -> dict[str, Any]:
    """Checkpoint objects under ``uri``, one per time (ISO-8601), named by step."""
    return {
        "uri": uri,
        "objects": [
            {"key": f"step-{1000 * (i + 1)}/model.pt", "last_modified": t, "size": 1024}
            for i, t in enumerate(times)
        ],
    }


def job_definition(name: str, revision: int) -> dict[str, Any]:
    """A RegisterJobDefinition request (container) registered as revision ``revision``."""
    return {
        "jobDefinitionName": name,
        "type": "container",
        "revision": revision,
        "containerProperties": {
            "image": f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/ml/llama-train:v2.3.0-cu124",
            "command": ["python", "train.py"],
            "resourceRequirements": [{"type": "VCPU", "value": "8"}, {"type": "MEMORY", "value": "65536"}],
        },
    }


BASE_WORLD: dict[str, Any] = {
    "service_environments": [
        {"name": "sm-training", "capacityLimits": [{"maxCapacity": 64, "capacityUnit": "NUM_INSTANCES"}]},
        {"name": "sm-quota", "capacityLimits": [{"maxCapacity": 32, "capacityUnit": "ml.p5.48xlarge"}]},
    ],
    "job_queues": [
        {"name": "sm-training-highpri", "serviceEnvironment": "sm-training", "scheduling": "FAIR_SHARE"},
        {"name": "sm-training-research", "serviceEnvironment": "sm-training", "scheduling": "FAIR_SHARE"},
        {"name": "sm-quota-queue", "serviceEnvironment": "sm-quota", "scheduling": "QUOTA_MANAGEMENT"},
        {"name": "gpu-spot-queue", "kind": "container", "scheduling": "FAIR_SHARE"},
    ],
    "job_definitions": [job_definition("llama-ft-train", 7), job_definition("hparam-sweep", 5)],
}
"""Job queues and job definitions every sample event's job refers to."""


def world(**items: list[dict[str, Any]]) -> dict[str, Any]:
    """:data:`BASE_WORLD` plus ``service_jobs``, ``jobs``, ``training_jobs``, ``checkpoints``."""
    out = copy.deepcopy(BASE_WORLD)
    out.update({key: list(value) for key, value in items.items() if value})
    return out


# ------------------------------------------------------------------------------------ time
class FakeTime:
    """One fake clock for everything: UTC wall time (lineage, backoff), monotonic seconds (the
    pacer, the embedded throttle), epoch seconds (the embedded backends' timestamps); ``sleep``
    moves it forward instead of sleeping."""

    def __init__(self, start: datetime = START) -> None:
        """Start the clock at ``start`` (UTC)."""
        self.wall = start
        self.slept = 0.0

    def now(self) -> datetime:
        """UTC wall time."""
        return self.wall

    def monotonic(self) -> float:
        """Monotonic seconds (here: the wall time's epoch seconds)."""
        return self.wall.timestamp()

    def epoch(self) -> float:
        """Epoch seconds."""
        return self.wall.timestamp()

    def sleep(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward and count them as slept."""
        self.slept += seconds
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward."""
        self.wall += timedelta(seconds=seconds)


# ------------------------------------------------------------------------------------ harness
def event_of(raw: Mapping[str, Any] | str) -> JobEvent:
    """A sample event (a dict) or an SQS body as the job-event model, decoded as the Lambda handler
    decodes it (:func:`batchpilot.shared.records.decode`).

    Raises:
        ValueError: the body is not a job event recovery can take (ignored or invalid).
    """
    decoded = decode(raw if isinstance(raw, str) else json.dumps(raw))
    if isinstance(decoded, Rejected):
        raise ValueError(f"not a job event: {decoded.outcome.value}: {decoded.error}")
    return decoded


class MetricsKept:
    """A :class:`batchpilot.recovery.ports.MetricSink` that keeps the points (``points``)."""

    def __init__(self) -> None:
        self.points: list[MetricPoint] = []

    def publish(self, points: Sequence[MetricPoint]) -> int:
        """Keep ``points``; returns 1 (one "blob")."""
        self.points.extend(points)
        return 1


@dataclass
class Harness:
    """An open embedded AWS with the recovery function's table, and a way to build recoverers."""

    aws: EmbeddedAws
    time: FakeTime
    settings_values: dict[str, Any] = field(default_factory=dict)

    def settings(self, **values: Any) -> RecoverySettings:
        """Recovery settings on the harness's table, recovery turned on for every job queue (the
        deployed default names none: dry-run), the harness's values, then ``values``."""
        base = {"state_table": TABLE, "job_queues": "*"}
        return RecoverySettings.from_mapping({**base, **self.settings_values, **values})

    def recoverer(
        self, *, batch: Any = None, sagemaker: Any = None, rate: float | None = None, **values: Any
    ) -> Recoverer:
        """A recoverer on the real adapters and the fake clock; ``batch``/``sagemaker`` replace the
        clients (e.g. with failing stand-ins), ``rate`` the pacer's submits per second."""
        settings = self.settings(**values)
        return Recoverer(
            settings,
            jobs=[
                BatchJobs(
                    batch or client("batch"),
                    settings.container_checkpoint,
                    submit_client=batch or client("batch", max_attempts=1),
                    sleep=self.time.sleep,
                ),
                TrainingJobs(sagemaker or client("sagemaker")),
            ],
            checkpoints=S3Checkpoints(client("s3"), settings.checkpoint_max_pages),
            lineage=DynamoLineageStore(client("dynamodb"), settings.state_table, clock=self.time.now),
            events=EventBridgePublisher(client("events"), settings.event_bus),
            metrics=MetricsKept(),
            deferrer=SqsDeferrer(client("sqs"), settings.queue_url),
            pacer=SubmitPacer(
                rate or settings.per_invocation_rate(), clock=self.time.monotonic, sleep=self.time.sleep
            ),
            clock=self.time.now,
        )

    # ---- what happened, from the journal
    def calls(self, action: str | None = None) -> list[JournalEntry]:
        """The journaled API calls so far, all or those of ``action`` (e.g. ``batch:SubmitJob``)."""
        return [e for e in self.aws.journal if action is None or e.action == action]

    def submits(self, *, succeeded: bool = True) -> list[JournalEntry]:
        """The journaled submissions (any of :data:`SUBMIT_OPERATIONS`) that succeeded, or failed."""
        return [e for e in self.aws.journal if e.action in SUBMIT_OPERATIONS and e.succeeded == succeeded]

    def published(self, detail_type: str | None = None) -> list[dict[str, Any]]:
        """Details of the own events accepted by PutEvents, with ``detail-type`` added."""
        out = []
        for entry in self.calls("events:PutEvents"):
            if not entry.succeeded:
                continue
            for item in entry.params["Entries"]:
                if detail_type is None or item["DetailType"] == detail_type:
                    out.append({"detail-type": item["DetailType"], **json.loads(item["Detail"])})
        return out


@contextmanager
def harness(seed: Mapping[str, Any] | None = None, **settings_values: Any) -> Iterator[Harness]:
    """Open an embedded AWS on fake time, seed ``seed`` (default :data:`BASE_WORLD`), create the
    StateTable; yield a :class:`Harness`."""
    time = FakeTime()
    with EmbeddedAws() as aws:
        aws.overlay.clock = time.epoch
        aws.seed(seed if seed is not None else BASE_WORLD)
        aws.batch.throttle.clock = time.monotonic
        create_state_table(aws.client("dynamodb"), TABLE)
        session()  # the adapters' session exists (and is journaled) before clients are made
        yield Harness(aws, time, dict(settings_values))


# ------------------------------------------------------------------------------------ fleets
def fleet(h: Harness, size: int, checkpoint: str, id_prefix: str) -> list[str]:
    """Put ``size`` preempted service jobs (checkpoints under ``checkpoint``) in the embedded Batch;
    return their failure events as SQS bodies. Job ids are ``<id_prefix>-0000-4000-8000-<n>``
    (``id_prefix``: 8 hex digits, so that fleets of one world do not collide)."""
    bodies = []
    for n in range(size):
        job_id = f"{id_prefix}-0000-4000-8000-{n:012d}"
        arn = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/{job_id}"
        h.aws.batch.put_service_job(
            service_job_item(
                PREEMPTED, checkpoint_uri=checkpoint, jobArn=arn, jobId=job_id, jobName=f"fleet-{n}"
            )
        )
        event = sample(PREEMPTED)
        event["detail"].update(jobArn=arn, jobId=job_id, jobName=f"fleet-{n}")
        bodies.append(json.dumps(event))
    return bodies


def run_fleet(
    recoverers: Sequence[Recoverer],
    bodies: Sequence[str],
    clock: Callable[[], float],
    *,
    batch_size: int,
    timeout_s: float,
) -> tuple[int, int]:
    """Deliver ``bodies`` as the event source mapping does: one batch of ``batch_size`` per execution
    environment (one recoverer each, its own pacer) at a time, their records interleaved on the one
    ``clock``; a record handed back (``RetryLater``) is delivered again later. Every record handled
    must be resubmitted. Returns (resubmitted, handed back)."""
    pending, resubmitted, handed_back = list(bodies), 0, 0
    while pending:
        batches = [pending[i * batch_size : (i + 1) * batch_size] for i in range(len(recoverers))]
        pending = pending[len(recoverers) * batch_size :]
        deadline = clock() + timeout_s

        def time_left(deadline: float = deadline) -> float:
            return deadline - clock()

        for turn in range(batch_size):
            for recoverer, batch in zip(recoverers, batches, strict=True):
                if turn >= len(batch):
                    continue
                try:
                    result = recoverer.handle(event_of(batch[turn]), time_left=time_left)
                except RetryLater:
                    pending.append(batch[turn])  # a batch item failure: SQS delivers it again
                    handed_back += 1
                    continue
                assert result.action is Action.RESUBMITTED, result
                resubmitted += 1
    return resubmitted, handed_back


def max_in_window(times_ms: list[int], window_ms: int = 1000) -> int:
    """The most events in any half-open window of ``window_ms``."""
    best, recent = 0, deque[int]()
    for t in sorted(times_ms):
        recent.append(t)
        while recent[0] <= t - window_ms:
            recent.popleft()
        best = max(best, len(recent))
    return best


def event_json(raw: Mapping[str, Any], **detail_changes: Any) -> str:
    """A sample event as an SQS body, with ``detail`` fields changed."""
    event = copy.deepcopy(dict(raw))
    event["detail"].update(detail_changes)
    return json.dumps(event)
