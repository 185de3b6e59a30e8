"""The recovery scenarios in events/scenarios/recovery/: one per branch of the decision table that
the template's default configuration can show, each replayed through ``batchpilot replay``'s own
runner (template routes, real handlers, embedded AWS) and checked against what it must do.

The files are generated from :func:`build_scenarios` (the same helpers the other recovery tests
use); ``python -m tests.integration.test_recovery_scenarios`` rewrites them, and
:func:`test_scenario_files_are_up_to_date` fails when they drift.

Branches that need another configuration (QUEUE_NOT_MANAGED, ROLE_NOT_ALLOWED, NO_CHECKPOINT with
``refuse``, dry-run) are covered by tests/integration/test_recovery_flow.py instead.
"""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

import pytest
from batchpilot_local.replay import Replayer
from batchpilot_local.testing.paths import EVENTS_DIR, ROOT
from batchpilot_local.testing.recovery import (
    BASE_WORLD,
    BUCKET,
    checkpoint_item,
    container_job_item,
    job_definition,
    service_job_item,
    training_job_item,
)
from batchpilot_local.testing.samples import sample

SCENARIO_DIR = EVENTS_DIR / "scenarios" / "recovery"
_NAMESPACE = uuid.UUID("5ce9a410-9e0a-4b1d-8c3e-000000000000")


def _uuid(name: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, name))


def _service(sample_name: str, key: str, **changes: Any) -> tuple[dict[str, Any], str]:
    """A sample service-job event given its own job id; returns (event, job id)."""
    event = copy.deepcopy(sample(sample_name))
    job_id = _uuid(f"service-job:{key}")
    arn = f"arn:aws:batch:us-east-1:111122223333:service-job/{job_id}"
    event["id"] = _uuid(f"event:{key}")
    event["resources"] = [arn]
    event["detail"].update(jobArn=arn, jobId=job_id, **changes)
    return event, job_id


def _container(sample_name: str, key: str, index: int | None = None) -> dict[str, Any]:
    event = copy.deepcopy(sample(sample_name))
    job_id = _uuid(f"job:{key}") + (f":{index}" if index is not None else "")
    arn = f"arn:aws:batch:us-east-1:111122223333:job/{job_id}"
    event["id"] = _uuid(f"event:{key}")
    event["resources"] = [arn]
    event["detail"].update(jobArn=arn, jobId=job_id)
    return event


def _training(sample_name: str, key: str, name: str) -> dict[str, Any]:
    event = copy.deepcopy(sample(sample_name))
    arn = f"arn:aws:sagemaker:us-east-1:111122223333:training-job/{name}"
    event["id"] = _uuid(f"event:{key}")
    event["resources"] = [arn]
    event["detail"].update(TrainingJobName=name, TrainingJobArn=arn)
    return event


def _world(*definitions: tuple[str, int], **items: Any) -> dict[str, Any]:
    """Environments and queues of :data:`BASE_WORLD` (seeding them again only updates them), the
    given job definitions, and ``items``. Worlds of all scenarios are seeded into one embedded
    AWS, so a job definition revision appears in one scenario only."""
    out = {k: copy.deepcopy(v) for k, v in BASE_WORLD.items() if k != "job_definitions"}
    if definitions:
        out["job_definitions"] = [job_definition(name, revision) for name, revision in definitions]
    out.update({k: v for k, v in items.items() if v})
    return out


def _service_item(event: dict[str, Any], sample_name: str, **kw: Any) -> dict[str, Any]:
    d = event["detail"]
    return service_job_item(sample_name, jobArn=d["jobArn"], jobId=d["jobId"], jobName=d["jobName"], **kw)


def build_scenarios() -> dict[str, dict[str, Any]]:
    """File name → scenario object."""
    scenarios: dict[str, dict[str, Any]] = {}

    # -- resubmitted ------------------------------------------------------------------
    name = "service-job/failed-preemption-budget-spent"
    event, _ = _service(name, "preempted")
    ckpt = f"s3://{BUCKET}/gemma-ft/run-12/"
    scenarios["service-job-preempted-then-failed.json"] = {
        "name": "preempted, then failed",
        "description": (
            "A service job on a quota-management queue was preempted 3 times and its "
            "preemptionRetriesBeforeTermination ran out, so Batch failed it. Recovery rebuilds "
            "SubmitServiceJob from DescribeServiceJob (same payload, so the same "
            "CheckpointConfig.S3Uri; same quota share, priority, retry, timeout and preemption "
            "settings) and resubmits it once; it resumes from step-2000. Extending a limit its "
            "submitter set is opt-in: RecoveryExtendPreemptionRetries=true."
        ),
        "parameters": {"RecoveryExtendPreemptionRetries": "true"},
        "world": _world(
            service_jobs=[_service_item(event, name, checkpoint_uri=ckpt)],
            checkpoints=[checkpoint_item(ckpt, "2026-11-21T23:40:00Z", "2026-11-22T00:10:00Z")],
        ),
        "events": [event],
    }

    name = "batch-job/failed-spot-reclaim"
    event = _container(name, "spot")
    scenarios["container-job-spot-reclaimed.json"] = {
        "name": "spot reclaim, retries spent",
        "description": (
            "A container job lost its spot instance on both of its 2 attempts, so Batch failed "
            "it. Recovery resubmits it with SubmitJob from DescribeJobs: same job definition, "
            "parameters (checkpoint_uri included, so the same checkpoint), command, environment, "
            "retry strategy, timeout, share identifier and priority."
        ),
        "world": _world(
            ("llama-ft-train", 7),
            jobs=[container_job_item(name, jobArn=event["detail"]["jobArn"], jobId=event["detail"]["jobId"])],
            checkpoints=[checkpoint_item(f"s3://{BUCKET}/llama-ft/run-39/", "2026-11-21T05:00:00Z")],
        ),
        "events": [event],
    }

    name = "batch-job/array-child-failed"
    event = _container(name, "array-child", index=7)
    scenarios["array-child-spot-reclaimed.json"] = {
        "name": "array child lost to a spot reclaim",
        "description": (
            "Child 7 of an array job failed on a spot reclaim. It is resubmitted alone as a "
            "single job; its index goes in BATCHPILOT_ARRAY_INDEX and the batchpilot:array-index "
            "tag (Batch reserves AWS_BATCH_JOB_ARRAY_INDEX)."
        ),
        "world": _world(
            ("hparam-sweep", 5),
            jobs=[container_job_item(name, jobArn=event["detail"]["jobArn"], jobId=event["detail"]["jobId"])],
            # its own checkpoint, under its index (shared-prefix objects would not count)
            checkpoints=[
                checkpoint_item(f"s3://{BUCKET}/lr-sweep/sweep-2026-11-23/7/", "2026-11-23T03:30:00Z")
            ],
        ),
        "events": [event],
    }

    name = "service-job/failed-sagemaker-capacity"
    event, _ = _service(name, "capacity")
    ckpt = f"s3://{BUCKET}/mistral-dpo/run-18/"
    scenarios["service-job-capacity-error.json"] = {
        "name": "SageMaker CapacityError on a fair-share queue",
        "description": "Failed with CapacityError: resubmitted with the same share identifier.",
        "world": _world(
            service_jobs=[_service_item(event, name, checkpoint_uri=ckpt)],
            checkpoints=[checkpoint_item(ckpt, "2026-11-24T02:20:00Z")],
        ),
        "events": [event],
    }

    name = "service-job/failed-job-state-time-limit"
    event, _ = _service(name, "time-limit")
    ckpt = f"s3://{BUCKET}/llama-p5/run-48/"
    scenarios["service-job-capacity-time-limit.json"] = {
        "name": "no capacity until the JobStateTimeLimit: an administrator's limit",
        "description": (
            "Batch gave up waiting for capacity (Terminated by JobStateTimeLimit ... "
            "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY): the job queue's jobStateTimeLimitActions "
            "is an administrator's choice, so it is left alone by default (Recovery Skipped, "
            "TIME_LIMIT_ACTION, critical); RecoveryResubmitTimeLimitedJobs=true resubmits it."
        ),
        "world": _world(
            service_jobs=[_service_item(event, name, checkpoint_uri=ckpt)],
            checkpoints=[checkpoint_item(ckpt, "2026-11-22T20:00:00Z")],
        ),
        "events": [event],
    }

    name = "service-job/failed-internal-server-error"
    event, _ = _service(name, "internal")
    scenarios["service-job-internal-error-no-checkpoint.json"] = {
        "name": "InternalServerError, no checkpoint",
        "description": (
            "Failed with InternalServerError; the training request has no CheckpointConfig. "
            "BATCHPILOT_RECOVERY_NO_CHECKPOINT=proceed (the default): resubmitted, and the Job "
            "Resubmitted event says it restarts from step 0."
        ),
        # Its owner's tag: the alerts function reads it with DescribeServiceJob and mentions
        # them in the Job Resubmitted message (docs/alerts.md, "Mentioning the job's owner").
        "world": _world(
            service_jobs=[
                _service_item(
                    event,
                    name,
                    checkpoint_uri=None,
                    tags={"owner": "priya.nair@example.com", "team": "ml-platform", "project": "llm"},
                )
            ]
        ),
        "events": [event],
    }

    name = "sagemaker/failed-capacity-error"
    event = _training(name, "sm-capacity", "llama3-70b-sft-scenario-capacity")
    ckpt = f"s3://{BUCKET}/llama3-70b-sft/"
    item = training_job_item(name, checkpoint_uri=ckpt)
    item.update(
        TrainingJobName=event["detail"]["TrainingJobName"], TrainingJobArn=event["detail"]["TrainingJobArn"]
    )
    scenarios["training-job-capacity-error.json"] = {
        "name": "standalone training job, CapacityError",
        "description": (
            "A SageMaker training job (not created by Batch) failed with CapacityError: "
            "CreateTrainingJob with every field CreateTrainingJob accepts, copied from "
            "DescribeTrainingJob, under a new deterministic name."
        ),
        "world": _world(training_jobs=[item], checkpoints=[checkpoint_item(ckpt, "2026-11-23T10:05:00Z")]),
        "events": [event],
    }

    name = "sagemaker/stopped-max-wait-time-exceeded"
    event = _training(name, "sm-spot", "llama3-8b-spot-scenario-maxwait")
    ckpt = f"s3://{BUCKET}/llama-spot/run-40/"
    item = training_job_item(name, checkpoint_uri=ckpt, EnableManagedSpotTraining=True)
    item.update(
        TrainingJobName=event["detail"]["TrainingJobName"], TrainingJobArn=event["detail"]["TrainingJobArn"]
    )
    scenarios["training-job-max-wait-time-exceeded.json"] = {
        "name": "managed spot starved: MaxWaitTimeExceeded",
        "description": "Stopped with MaxWaitTimeExceeded: recreated with the same CheckpointConfig.S3Uri.",
        "world": _world(training_jobs=[item], checkpoints=[checkpoint_item(ckpt, "2026-11-20T20:40:00Z")]),
        "events": [event],
    }

    # -- lineage, duplicates, budget --------------------------------------------------
    name = "service-job/failed-sagemaker-capacity"
    event, _ = _service(name, "failed-again", jobName="mistral-dpo-run18-r1-0c0ffe")
    ckpt = f"s3://{BUCKET}/mistral-dpo/run-19/"
    tags = {"batchpilot:lineage": "bp0000000000000c0c0ffe", "batchpilot:attempt": "1", "team": "ml-platform"}
    scenarios["service-job-resubmission-failed-again.json"] = {
        "name": "a resubmitted job fails again",
        "description": (
            "The job recovery submitted earlier (tags batchpilot:lineage and batchpilot:attempt=1) "
            "fails the same way. The same lineage continues: attempt 2, named -r2-, counted "
            "against the same CAPACITY budget."
        ),
        "world": _world(
            service_jobs=[_service_item(event, name, checkpoint_uri=ckpt, tags=tags)],
            checkpoints=[checkpoint_item(ckpt, "2026-11-24T02:25:00Z")],
        ),
        "events": [event],
    }

    name = "service-job/failed-preemption-budget-spent"
    event, _ = _service(name, "budget", jobName="gemma-ft-run13-r3-0b0d9e")
    tags = {"batchpilot:lineage": "bp00000000000000b0d9e7", "batchpilot:attempt": "3"}
    scenarios["service-job-budget-exhausted.json"] = {
        "name": "preemption budget exhausted",
        "description": (
            "The 3rd resubmission of a lineage was preempted out again. The PREEMPTION budget "
            "(3) is used up: no resubmission, a critical Recovery Skipped (BUDGET_EXHAUSTED). "
            "(Resubmitting after preemptionRetriesBeforeTermination is opt-in.)"
        ),
        "parameters": {"RecoveryExtendPreemptionRetries": "true"},
        "world": _world(
            service_jobs=[_service_item(event, name, checkpoint_uri=f"s3://{BUCKET}/gemma/13/", tags=tags)]
        ),
        "events": [event],
    }

    name = "batch-job/failed-spot-reclaim"
    first = _container(name, "duplicates")
    definition = "arn:aws:batch:us-east-1:111122223333:job-definition/llama-ft-train-nightly:1"
    first["detail"]["jobDefinition"] = definition
    second = copy.deepcopy(first)
    second["id"] = _uuid("event:duplicates:2")
    late = copy.deepcopy(first)
    late["id"] = _uuid("event:duplicates:late")
    late["detail"].update(status="RUNNING", attempts=late["detail"]["attempts"][:1])
    late["detail"].pop("stoppedAt", None)
    scenarios["container-job-duplicate-and-late-events.json"] = {
        "name": "the same failure twice, then a late RUNNING",
        "description": (
            "EventBridge delivers the FAILED event twice (different envelope ids) and an older "
            "RUNNING event arrives last. One resubmission; the duplicate changes nothing; the "
            "RUNNING event never reaches recovery."
        ),
        "world": _world(
            ("llama-ft-train-nightly", 1),
            jobs=[
                container_job_item(
                    name,
                    jobArn=first["detail"]["jobArn"],
                    jobId=first["detail"]["jobId"],
                    jobDefinition=definition,
                )
            ],
            checkpoints=[checkpoint_item(f"s3://{BUCKET}/llama-ft/run-39/", "2026-11-21T05:00:00Z")],
        ),
        "events": [first, second, late],
    }

    # -- left alone ---------------------------------------------------------------------
    name = "service-job/failed-user-terminated"
    event, _ = _service(name, "user-stopped")
    scenarios["service-job-user-stopped.json"] = {
        "name": "terminated by a person",
        "description": (
            "Someone terminated the job (isTerminated, 'Terminated by ml-oncall: ...'): left "
            "alone. Recovery Skipped says NOT_RECOVERABLE with category USER_STOPPED."
        ),
        "world": _world(
            service_jobs=[_service_item(event, name, checkpoint_uri=f"s3://{BUCKET}/llama-sft/42/")]
        ),
        "events": [event],
    }

    name = "service-job/failed-validation"
    event, _ = _service(name, "validation")
    scenarios["service-job-validation-error.json"] = {
        "name": "ValidationException",
        "description": "MISCONFIGURATION: would fail the same way again. Left alone (NOT_RECOVERABLE).",
        "world": _world(service_jobs=[_service_item(event, name, checkpoint_uri=None)]),
        "events": [event],
    }

    name = "batch-job/failed-application-error"
    event = _container(name, "app-error")
    scenarios["container-job-application-error.json"] = {
        "name": "the training code exited 1",
        "description": "APPLICATION_ERROR: left alone (NOT_RECOVERABLE), no Describe call made.",
        "world": _world(),
        "events": [event],
    }

    for key, sample_name, reason in (
        ("stopped-by-user", "sagemaker/stopped-by-user", "a person stopped it: USER_STOPPED"),
        ("max-runtime", "sagemaker/stopped-max-runtime-exceeded", "MaxRuntimeExceeded: TIMEOUT"),
    ):
        event = _training(sample_name, f"sm-{key}", f"scenario-{key}")
        scenarios[f"training-job-{key}.json"] = {
            "name": f"training job {key.replace('-', ' ')}",
            "description": f"Stopped, {reason}: left alone (NOT_RECOVERABLE).",
            "world": _world(),
            "events": [event],
        }

    name = "service-job/failed-sagemaker-capacity"
    event, _ = _service(name, "not-found")
    scenarios["service-job-not-found.json"] = {
        "name": "a failure AWS no longer describes",
        "description": (
            "An old (replayed) failure of a job DescribeServiceJob no longer knows: nothing to "
            "rebuild the request from. Recovery Skipped, NOT_FOUND."
        ),
        "world": _world(),
        "events": [event],
    }

    name = "service-job/failed-resource-limit-exceeded"
    event, _ = _service(name, "quota")
    scenarios["service-job-quota-exceeded.json"] = {
        "name": "an account service quota (ResourceLimitExceeded)",
        "description": (
            "SageMaker refused the training job: the account-level service limit for "
            "ml.p4d.24xlarge training is reached. QUOTA: never resubmitted (the same quota would "
            "refuse it again); the alert is critical at once and names the quota."
        ),
        "world": _world(service_jobs=[_service_item(event, name, checkpoint_uri=None)]),
        "events": [event],
    }

    # -- checkpoints that do not count ---------------------------------------------------
    name = "service-job/failed-sagemaker-capacity"
    event, _ = _service(name, "stale-checkpoint", jobName="mistral-dpo-run21-r1-0d0a7e")
    ckpt = f"s3://{BUCKET}/mistral-dpo/run-21/"
    tags = {"batchpilot:lineage": "bp00000000000000d0a7e1", "batchpilot:attempt": "1"}
    scenarios["service-job-stale-checkpoint.json"] = {
        "name": "a stale checkpoint",
        "description": (
            "A resubmitted job fails again; the newest checkpoint object was written 26 hours "
            "before this failure, more than RecoveryCheckpointMaxAgeSeconds (24 h): it does not "
            "count. The payload configures checkpoints, so the default RecoveryNoCheckpoint "
            "refuses to restart from step 0 (Recovery Skipped, NO_CHECKPOINT, critical, saying "
            "which object was set aside and why)."
        ),
        "world": _world(
            service_jobs=[_service_item(event, name, checkpoint_uri=ckpt, tags=tags)],
            checkpoints=[checkpoint_item(ckpt, "2026-11-23T00:30:00Z")],
        ),
        "events": [event],
    }

    event, _ = _service(name, "foreign-checkpoint")
    ckpt = f"s3://{BUCKET}/mistral-dpo/run-22/"
    scenarios["service-job-foreign-checkpoint.json"] = {
        "name": "a foreign checkpoint",
        "description": (
            "The checkpoint prefix holds an object from two months before the job's first attempt "
            "started (another job or an earlier run wrote it): it does not count, and the "
            "default RecoveryNoCheckpoint refuses to restart from step 0 (NO_CHECKPOINT)."
        ),
        "world": _world(
            service_jobs=[_service_item(event, name, checkpoint_uri=ckpt)],
            checkpoints=[checkpoint_item(ckpt, "2026-09-24T02:00:00Z")],
        ),
        "events": [event],
    }

    name = "batch-job/array-child-failed"
    event = _container(name, "array-child-per-index", index=7)
    sweep = f"s3://{BUCKET}/lr-sweep/sweep-2026-11-23-b/"
    event["detail"]["parameters"] = {"checkpoint_uri": sweep}
    item = container_job_item(name, jobArn=event["detail"]["jobArn"], jobId=event["detail"]["jobId"])
    item["parameters"] = {"checkpoint_uri": sweep}
    scenarios["array-child-per-index-checkpoints.json"] = {
        "name": "array child with per-index checkpoints",
        "description": (
            "Children of one array job write their checkpoints under <prefix>/<index>/ "
            "(AWS_BATCH_JOB_ARRAY_INDEX). Child 7 failed on a spot reclaim: only objects under "
            "7/ count (child 3's newer writes do not vouch for it); it resumes from 7/step-1000."
        ),
        "world": _world(
            ("hparam-sweep", 5),
            jobs=[item],
            checkpoints=[
                checkpoint_item(f"{sweep}7/", "2026-11-23T03:40:00Z"),
                checkpoint_item(f"{sweep}3/", "2026-11-23T03:58:00Z"),
            ],
        ),
        "events": [event],
    }

    name = "batch-job/failed-spot-reclaim"
    event = _container(name, "dry-run-default")
    definition = "arn:aws:batch:us-east-1:111122223333:job-definition/llama-ft-train-dry:1"
    event["detail"]["jobDefinition"] = definition
    scenarios["container-job-no-queue-named-dry-run.json"] = {
        "name": "the deployed default: no job queue named, dry-run",
        "description": (
            "RecoveryJobQueueArns is empty (the template's default): recovery decides as it "
            "would, records and publishes Job Resubmitted with dry_run: true, submits nothing, and "
            "every message says why (no job queue is named). The alert pages: the job stays failed."
        ),
        "world": _world(
            ("llama-ft-train-dry", 1),
            jobs=[
                container_job_item(
                    name,
                    jobArn=event["detail"]["jobArn"],
                    jobId=event["detail"]["jobId"],
                    jobDefinition=definition,
                )
            ],
            checkpoints=[checkpoint_item(f"s3://{BUCKET}/llama-ft/run-39/", "2026-11-21T05:00:00Z")],
        ),
        "events": [event],
    }

    # Recovery turned on for the scenarios that resubmit: their job queue is named (docs/deploy.md,
    # "Turning recovery on, queue by queue"); standalone training jobs have none: "*".
    for file_name in (*EXPECTED_RESUBMIT, "container-job-duplicate-and-late-events.json"):
        scenario = scenarios[file_name]
        queue = scenario["events"][0]["detail"].get("jobQueue")
        scenario.setdefault("parameters", {})["RecoveryJobQueueArns"] = queue or "*"

    # -- never delivered to recovery (RecoveryRule filters them) -----------------------
    scenarios["not-delivered-to-recovery.json"] = {
        "name": "what the rule keeps away",
        "description": (
            "Batch still retrying a container job (RUNNABLE after a spot reclaim: RETRIES_LEFT), a "
            "preempted service job requeued by Batch (NOT_TERMINAL), and a training job AWS Batch "
            "created for a service job (CREATED_BY_BATCH: its service job's FAILED decides). "
            "RecoveryRule does not send them; the policy would skip them with those reasons."
        ),
        "world": _world(),
        "events": [
            sample("batch-job/runnable-retrying-after-spot-reclaim"),
            sample("service-job-preemption/completed"),
            sample("sagemaker/created-by-batch-failed"),
        ],
    }
    return scenarios


def _dump(scenario: dict[str, Any]) -> str:
    return json.dumps(scenario, indent=2, ensure_ascii=False) + "\n"


def write_scenarios() -> None:
    SCENARIO_DIR.mkdir(parents=True, exist_ok=True)
    for name, scenario in build_scenarios().items():
        (SCENARIO_DIR / name).write_text(_dump(scenario), encoding="utf-8")


# ------------------------------------------------------------------------------------ tests
def test_scenario_files_are_up_to_date() -> None:
    built = build_scenarios()
    on_disk = {p.name for p in SCENARIO_DIR.glob("*.json")}
    assert built and on_disk == set(built), "run: python -m tests.integration.test_recovery_scenarios"
    for name, scenario in built.items():
        assert (SCENARIO_DIR / name).read_text(encoding="utf-8") == _dump(scenario), name


@pytest.fixture(scope="module")
def reports() -> dict[str, list[dict[str, Any]]]:
    """Every recovery scenario replayed together, as ``batchpilot replay events/scenarios/recovery/``
    does (one embedded AWS, every world seeded first)."""
    built = build_scenarios()
    names = sorted(built)
    events, owners = [], []
    for name in names:
        for event in built[name]["events"]:
            events.append(event)
            owners.append(name)
    replayed = Replayer(ROOT / "template.yaml").run(
        events,
        scopes=owners,
        scope_worlds={name: built[name]["world"] for name in names},
        scope_parameters={name: built[name].get("parameters", {}) for name in names},
    )
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for owner, report in zip(owners, replayed, strict=True):
        out[owner].append(report.to_dict())
    return out


def resubmits(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in report["actions"] if a["type"] == "resubmit" and "error" not in a]


def recovery_metric(report: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [m for m in report["metrics"] if m["name"] == name]


EXPECTED_RESUBMIT = {
    "service-job-preempted-then-failed.json": "batch:SubmitServiceJob",
    "container-job-spot-reclaimed.json": "batch:SubmitJob",
    "array-child-spot-reclaimed.json": "batch:SubmitJob",
    "service-job-capacity-error.json": "batch:SubmitServiceJob",
    "service-job-internal-error-no-checkpoint.json": "batch:SubmitServiceJob",
    "training-job-capacity-error.json": "sagemaker:CreateTrainingJob",
    "training-job-max-wait-time-exceeded.json": "sagemaker:CreateTrainingJob",
    "service-job-resubmission-failed-again.json": "batch:SubmitServiceJob",
    "array-child-per-index-checkpoints.json": "batch:SubmitJob",
}
EXPECTED_SKIP = {
    "service-job-user-stopped.json": "USER_STOPPED",
    "service-job-validation-error.json": "MISCONFIGURATION",
    "container-job-application-error.json": "APPLICATION_ERROR",
    "training-job-stopped-by-user.json": "USER_STOPPED",
    "training-job-max-runtime.json": "TIMEOUT",
    "service-job-budget-exhausted.json": "PREEMPTION",
    "service-job-not-found.json": "CAPACITY",
    "service-job-capacity-time-limit.json": "CAPACITY",
    "service-job-quota-exceeded.json": "QUOTA",
    "service-job-stale-checkpoint.json": "CAPACITY",
    "service-job-foreign-checkpoint.json": "CAPACITY",
}
SKIP_REASON = {
    "service-job-capacity-time-limit.json": ("TIME_LIMIT_ACTION", "jobStateTimeLimitActions"),
    "service-job-quota-exceeded.json": ("NOT_RECOVERABLE", "QUOTA"),
    "service-job-stale-checkpoint.json": ("NO_CHECKPOINT", "stale"),
    "service-job-foreign-checkpoint.json": ("NO_CHECKPOINT", "foreign"),
}


def test_the_default_decides_and_reports_as_dry_run(reports: dict[str, list[dict[str, Any]]]) -> None:
    (report,) = reports["container-job-no-queue-named-dry-run.json"]
    assert report["errors"] == [] and resubmits(report) == []
    (event,) = [e for e in report["own_events"] if e["detail_type"] == "Job Resubmitted"]
    assert event["detail"]["dry_run"] is True
    titles = [n["title"] for n in report["notifications"]]
    assert any(t.startswith("[dry run]") for t in titles), titles


def test_every_scenario_has_an_expectation() -> None:
    others = {
        "container-job-duplicate-and-late-events.json",
        "not-delivered-to-recovery.json",
        "container-job-no-queue-named-dry-run.json",
    }
    assert set(build_scenarios()) == set(EXPECTED_RESUBMIT) | set(EXPECTED_SKIP) | others


@pytest.mark.parametrize("name", sorted(EXPECTED_RESUBMIT))
def test_resubmitted_with_the_same_checkpoint(reports: dict[str, list[dict[str, Any]]], name: str) -> None:
    (report,) = reports[name]
    assert report["errors"] == [] and "recovery" in report["functions"]
    (action,) = resubmits(report)
    assert action["operation"] == EXPECTED_RESUBMIT[name]
    request = action["request"]
    scenario = build_scenarios()[name]
    world = scenario["world"]
    if action["operation"] == "batch:SubmitServiceJob":
        (job,) = world["service_jobs"]
        assert request["serviceRequestPayload"] == job["serviceRequestPayload"]  # same CheckpointConfig.S3Uri
        assert request["jobQueue"].endswith("/" + job["jobQueue"].rsplit("/", 1)[-1])
        assert request.get("shareIdentifier") == job.get("shareIdentifier")
        assert request.get("quotaShareName") == job.get("quotaShareName")
        assert len(request["clientToken"]) <= 64
    elif action["operation"] == "batch:SubmitJob":
        (job,) = world["jobs"]
        assert request["parameters"]["checkpoint_uri"] == job["parameters"]["checkpoint_uri"]
        assert request["jobDefinition"] == job["jobDefinition"]
    else:
        (job,) = world["training_jobs"]
        assert request["CheckpointConfig"] == job["CheckpointConfig"]
        assert request["TrainingJobName"] != job["TrainingJobName"]
    assert len(recovery_metric(report, "Resubmissions")) == 1
    if name == "service-job-resubmission-failed-again.json":
        assert request["tags"]["batchpilot:lineage"] == "bp0000000000000c0c0ffe"
        assert request["tags"]["batchpilot:attempt"] == "2" and "-r2-" in request["jobName"]


@pytest.mark.parametrize("name", sorted(EXPECTED_SKIP))
def test_left_alone_with_its_reason(reports: dict[str, list[dict[str, Any]]], name: str) -> None:
    (report,) = reports[name]
    assert report["errors"] == [] and "recovery" in report["functions"]
    assert resubmits(report) == []
    (skipped,) = recovery_metric(report, "RecoverySkipped")
    assert skipped["dimensions"]["FailureCategory"] == EXPECTED_SKIP[name]
    if name in SKIP_REASON:
        reason, words = SKIP_REASON[name]
        assert skipped["dimensions"]["SkipReason"] == reason
        (published,) = [e for e in report["own_events"] if e["detail_type"] == "Recovery Skipped"]
        assert words in published["detail"]["message"]


def test_an_array_child_resumes_from_its_own_index(reports: dict[str, list[dict[str, Any]]]) -> None:
    (report,) = reports["array-child-per-index-checkpoints.json"]
    (event,) = [e for e in report["own_events"] if e["detail_type"] == "Job Resubmitted"]
    assert event["detail"]["checkpoint_object"].endswith("/sweep-2026-11-23-b/7/step-1000/model.pt")
    assert event["detail"]["restarts_from_step_zero"] is False


def test_duplicates_make_one_resubmission(reports: dict[str, list[dict[str, Any]]]) -> None:
    first, second, late = reports["container-job-duplicate-and-late-events.json"]
    assert len(resubmits(first)) == 1
    assert resubmits(second) == [] and "recovery" in second["functions"]
    assert "recovery" not in late["functions"]
    assert all(r["errors"] == [] for r in (first, second, late))


def test_the_rule_keeps_batch_s_own_retries_away(reports: dict[str, list[dict[str, Any]]]) -> None:
    assert reports["not-delivered-to-recovery.json"]
    for report in reports["not-delivered-to-recovery.json"]:
        assert "recovery" not in report["functions"] and report["actions"] == []


if __name__ == "__main__":
    write_scenarios()
    print(f"wrote {len(build_scenarios())} scenarios to {SCENARIO_DIR.relative_to(ROOT)}")
