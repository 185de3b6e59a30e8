"""The recovery flow end to end: real Recoverer, real adapters, embedded AWS (moto + embedded
Batch/SageMaker); what was submitted and published is read back from the API journal and from
the embedded services themselves."""

from __future__ import annotations

import json
from typing import Any

import pytest
from batchpilot.io.clients import client, session
from batchpilot.io.dynamodb.lineage import DynamoLineageStore
from batchpilot.recovery.lineage import AttemptState
from batchpilot.recovery.naming import ATTEMPT_TAG, LINEAGE_TAG, lineage_id_for
from batchpilot.recovery.policy import Row
from batchpilot.recovery.ports import TagError
from batchpilot.recovery.service import LISTING_SETTLE_SECONDS, Action, RetryLater, RetryReason
from batchpilot.shared.classification import JobKind
from batchpilot.shared.own_events import PublishError, SkipReason
from batchpilot_local.testing.recovery import (
    BUCKET,
    TABLE,
    Harness,
    checkpoint_item,
    container_job_item,
    event_json,
    event_of,
    harness,
    service_job_item,
    training_job_item,
    world,
)
from batchpilot_local.testing.samples import sample
from botocore.config import Config

PREEMPTED = "service-job/failed-preemption-budget-spent"
CAPACITY = "service-job/failed-sagemaker-capacity"
TIME_LIMIT = "service-job/failed-job-state-time-limit"
INTERNAL = "service-job/failed-internal-server-error"
USER = "service-job/failed-user-terminated"
SPOT = "batch-job/failed-spot-reclaim"
ARRAY = "batch-job/array-child-failed"
SM_CAPACITY = "sagemaker/failed-capacity-error"
SM_SPOT = "sagemaker/stopped-max-wait-time-exceeded"
CKPT = f"s3://{BUCKET}/llm/run-12/"
SPOT_CKPT = f"s3://{BUCKET}/llama-ft/run-39/"  # the container job's checkpoint_uri parameter


def full_world() -> dict[str, Any]:
    return world(
        service_jobs=[
            service_job_item(PREEMPTED, checkpoint_uri=CKPT),
            service_job_item(CAPACITY, checkpoint_uri=f"s3://{BUCKET}/mistral/run-18/"),
            service_job_item(TIME_LIMIT, checkpoint_uri=f"s3://{BUCKET}/llama-p5/run-48/"),
            service_job_item(INTERNAL, checkpoint_uri=None),
            service_job_item(USER, checkpoint_uri=CKPT),
        ],
        jobs=[container_job_item(SPOT), container_job_item(ARRAY)],
        training_jobs=[
            training_job_item(SM_CAPACITY, checkpoint_uri=f"s3://{BUCKET}/llama3-70b/"),
            training_job_item(
                SM_SPOT, checkpoint_uri=f"s3://{BUCKET}/llama-spot/run-40/", EnableManagedSpotTraining=True
            ),
        ],
        checkpoints=[
            checkpoint_item(CKPT, "2026-11-21T22:00:00Z", "2026-11-22T00:10:00Z"),
            checkpoint_item(SPOT_CKPT, "2026-11-21T05:00:00Z"),
            checkpoint_item(f"s3://{BUCKET}/llama-spot/run-40/", "2026-11-20T21:30:00Z"),
        ],
    )


@pytest.fixture
def h() -> Any:
    # PREEMPTED's submitter set preemptionRetriesBeforeTermination: these tests resubmit it, so
    # they opt in to extending it (test_administrators_limits_are_respected_by_default: the default).
    # no_checkpoint=proceed: these tests resubmit jobs whose checkpoint prefixes are empty
    # (test_no_checkpoint_refused_by_default_when_the_job_configures_one: the default).
    with harness(full_world(), extend_preemption_retries=True, no_checkpoint="proceed") as opened:
        yield opened


def payload_of_request(entry: Any) -> dict[str, Any]:
    return dict(json.loads(entry.params["serviceRequestPayload"]))


# ------------------------------------------------------------------------ resubmit branches
RESUBMITS = [
    (PREEMPTED, "batch:SubmitServiceJob", "PREEMPTION"),
    (CAPACITY, "batch:SubmitServiceJob", "CAPACITY"),
    (TIME_LIMIT, "batch:SubmitServiceJob", "CAPACITY"),
    (INTERNAL, "batch:SubmitServiceJob", "INTERNAL_ERROR"),
    (SPOT, "batch:SubmitJob", "SPOT_INTERRUPTION"),
    (ARRAY, "batch:SubmitJob", "SPOT_INTERRUPTION"),
    (SM_CAPACITY, "sagemaker:CreateTrainingJob", "CAPACITY"),
    (SM_SPOT, "sagemaker:CreateTrainingJob", "SPOT_INTERRUPTION"),
]


# Administrators' limits are respected by default: these two are resubmitted only when configured
# (test_administrators_limits_are_respected_by_default).
OPTED_IN: dict[str, dict[str, Any]] = {
    TIME_LIMIT: {"resubmit_time_limited": True},
}


def test_administrators_limits_are_respected_by_default(h: Harness) -> None:
    for name, reason in ((PREEMPTED, "PREEMPTION_RETRIES_SPENT"), (TIME_LIMIT, "TIME_LIMIT_ACTION")):
        result = h.recoverer(extend_preemption_retries=False).handle(event_of(sample(name)))
        assert result.action is Action.SKIPPED and result.skip_reason == reason, name
    assert h.submits() == []
    assert [e["skip_reason"] for e in h.published("Recovery Skipped")] == [
        "PREEMPTION_RETRIES_SPENT",
        "TIME_LIMIT_ACTION",
    ]


@pytest.mark.parametrize(("name", "operation", "category"), RESUBMITS, ids=[r[0] for r in RESUBMITS])
def test_each_recoverable_failure_is_resubmitted_once_from_its_checkpoint(
    h: Harness, name: str, operation: str, category: str
) -> None:
    raw = sample(name)
    result = h.recoverer(**OPTED_IN.get(name, {})).handle(event_of(raw))
    assert result.action is Action.RESUBMITTED, result
    assert (result.operation, result.category, result.attempt) == (operation, category, 1)
    (submit,) = h.submits()
    assert submit.action == operation
    (event,) = h.published("Job Resubmitted")
    assert event["new_job_arn"] == result.new_job_arn and event["attempt"] == 1
    assert event["failed_job_arn"] == event["original_job_arn"] == result.job_arn
    assert event["category"] == category and event["dry_run"] is False
    lineage = lineage_id_for(result.job_arn or "")
    assert result.lineage_id == event["lineage_id"] == lineage

    if operation == "batch:SubmitServiceJob":
        described = h.aws.client("batch").describe_service_job(jobId=result.new_job_arn.rsplit("/", 1)[-1])
        original = h.aws.client("batch").describe_service_job(jobId=result.job_arn.rsplit("/", 1)[-1])
        # the same payload byte for byte, hence the same CheckpointConfig.S3Uri
        assert described["serviceRequestPayload"] == original["serviceRequestPayload"]
        assert submit.params["clientToken"]
        for key in (
            "jobQueue",
            "shareIdentifier",
            "quotaShareName",
            "schedulingPriority",
            "retryStrategy",
            "timeoutConfig",
        ):
            assert described.get(key) == original.get(key), key
        tags = described["tags"]
        assert event.get("checkpoint_uri") == (
            json.loads(original["serviceRequestPayload"]).get("CheckpointConfig") or {}
        ).get("S3Uri")
    elif operation == "batch:SubmitJob":
        described = h.aws.client("batch").describe_jobs(jobs=[result.new_job_arn.rsplit("/", 1)[-1]])["jobs"][
            0
        ]
        original = raw["detail"]
        assert described["jobDefinition"] == original["jobDefinition"]
        assert described["parameters"]["checkpoint_uri"] == original["parameters"]["checkpoint_uri"]
        assert event["checkpoint_uri"] == original["parameters"]["checkpoint_uri"]
        assert described["shareIdentifier"] == original["shareIdentifier"]
        assert described["container"]["command"] == original["container"]["command"]
        tags = described["tags"]
        if name == ARRAY:
            assert "arrayProperties" not in submit.params
            env = {e["name"]: e["value"] for e in described["container"]["environment"]}
            assert env["BATCHPILOT_ARRAY_INDEX"] == "7"
    else:
        new_name = submit.params["TrainingJobName"]
        described = h.aws.client("sagemaker").describe_training_job(TrainingJobName=new_name)
        original = h.aws.client("sagemaker").describe_training_job(
            TrainingJobName=raw["detail"]["TrainingJobName"]
        )
        assert described["CheckpointConfig"]["S3Uri"] == original["CheckpointConfig"]["S3Uri"]
        assert described["ResourceConfig"] == original["ResourceConfig"]
        assert described["RoleArn"] == original["RoleArn"]
        tags = {
            t["Key"]: t["Value"]
            for t in h.aws.client("sagemaker").list_tags(ResourceArn=described["TrainingJobArn"])["Tags"]
        }
    assert tags[LINEAGE_TAG] == lineage and tags[ATTEMPT_TAG] == "1"

    # The same failure delivered again (and again): nothing more is submitted or published.
    for _ in range(2):
        again = h.recoverer().handle(event_of(raw))
        assert again.action is Action.DUPLICATE and again.skip_reason is SkipReason.ALREADY_HANDLED
    assert len(h.submits()) == 1 and len(h.published()) == 1
    assert not h.submits(succeeded=False)


def test_a_duplicate_is_decided_on_the_lineage_alone(h: Harness) -> None:
    # Decision row 11 needs only the lineage: no Describe*, no checkpoint listing, no write.
    assert h.recoverer().handle(event_of(sample(SPOT))).action is Action.RESUBMITTED
    h.aws.drain_journal()
    again = h.recoverer().handle(event_of(sample(SPOT)))
    assert again.action is Action.DUPLICATE and again.row is Row.ALREADY_HANDLED
    assert [e.action for e in h.aws.drain_journal()] == ["dynamodb:GetItem", "dynamodb:GetItem"]


def test_checkpoint_time_and_lost_instance_hours(h: Harness) -> None:
    result = h.recoverer().handle(event_of(sample(PREEMPTED)))
    (event,) = h.published("Job Resubmitted")
    assert event["checkpoint_time"].startswith("2026-11-22T00:10:00")
    assert event["restarts_from_step_zero"] is False
    # 8 instances x (attempt stop 00:19:55.230 - newest checkpoint 00:10:00)
    assert event["lost_instance_hours"] == pytest.approx(8 * (9 * 60 + 55.23) / 3600, rel=1e-3)
    names = {m.name: m for m in result.metrics}
    assert names["LostInstanceHours"].value == pytest.approx(event["lost_instance_hours"], rel=1e-3)
    assert dict(names["Resubmissions"].dimensions) == {
        "JobKind": "service-job",
        "JobQueue": "sm-quota-queue",
        "FailureCategory": "PREEMPTION",
    }


def test_no_checkpoint_proceeds_and_says_it_restarts_from_step_zero(h: Harness) -> None:
    result = h.recoverer().handle(event_of(sample(INTERNAL)))  # its payload has no CheckpointConfig
    assert result.action is Action.RESUBMITTED and result.message == "restarts from step 0 (no checkpoint)"
    (event,) = h.published("Job Resubmitted")
    assert event["restarts_from_step_zero"] is True and "checkpoint_uri" not in event
    # the whole attempt is lost: 8 instances x (stop - start)
    detail = sample(INTERNAL)["detail"]
    attempt = detail["attempts"][-1]
    assert event["lost_instance_hours"] == pytest.approx(
        8 * (attempt["stoppedAt"] - attempt["startedAt"]) / 3.6e6, rel=1e-3
    )


def test_no_checkpoint_refused_by_default_when_the_job_configures_one(h: Harness) -> None:
    default = "refuse-if-configured"
    # CAPACITY's payload configures CheckpointConfig.S3Uri, and nothing is under it: refused, paged.
    result = h.recoverer(no_checkpoint=default).handle(event_of(sample(CAPACITY)))
    assert result.action is Action.SKIPPED and result.skip_reason is SkipReason.NO_CHECKPOINT
    (event,) = h.published("Recovery Skipped")
    assert "the job configures checkpoints" in event["message"] and h.submits() == []
    # INTERNAL configures none: it restarts from step 0 as it would have anyway.
    assert h.recoverer(no_checkpoint=default).handle(event_of(sample(INTERNAL))).action is Action.RESUBMITTED


def test_no_checkpoint_refused_when_configured(h: Harness) -> None:
    result = h.recoverer(no_checkpoint="refuse").handle(event_of(sample(INTERNAL)))
    assert result.action is Action.SKIPPED and result.skip_reason is SkipReason.NO_CHECKPOINT
    assert h.submits() == []
    (event,) = h.published("Recovery Skipped")
    assert event["skip_reason"] == "NO_CHECKPOINT"


# ------------------------------------------------------------------------ skip branches
def test_a_user_stopped_job_is_left_alone_with_its_reason(h: Harness) -> None:
    result = h.recoverer().handle(event_of(sample(USER)))
    assert result.action is Action.SKIPPED and result.skip_reason is SkipReason.NOT_RECOVERABLE
    assert result.category == "USER_STOPPED"
    assert h.submits() == []
    (event,) = h.published("Recovery Skipped")
    assert event["skip_reason"] == "NOT_RECOVERABLE" and event["category"] == "USER_STOPPED"
    assert event["message"].startswith("USER_STOPPED:") and event["critical"] is False
    assert [m.name for m in result.metrics] == ["RecoverySkipped"]
    # Decided once: the duplicate publishes nothing.
    assert h.recoverer().handle(event_of(sample(USER))).action is Action.DUPLICATE
    assert len(h.published()) == 1


@pytest.mark.parametrize(
    "name",
    [
        "sagemaker/stopped-by-user",
        "sagemaker/stopped-max-runtime-exceeded",
        "batch-job/failed-application-error",
    ],
)
def test_never_recovered_categories_call_no_aws_api_but_the_event(h: Harness, name: str) -> None:
    result = h.recoverer().handle(event_of(sample(name)))
    assert result.action is Action.SKIPPED and result.skip_reason is SkipReason.NOT_RECOVERABLE
    assert {e.action for e in h.calls()} == {"dynamodb:PutItem", "events:PutEvents"}


def test_a_job_aws_no_longer_knows(h: Harness) -> None:
    raw = sample(CAPACITY)
    raw["detail"]["jobArn"] = (
        "arn:aws:batch:us-east-1:111122223333:service-job/00000000-0000-4000-8000-000000000000"
    )
    result = h.recoverer().handle(event_of(raw))
    assert result.skip_reason is SkipReason.NOT_FOUND and h.submits() == []


def test_queue_and_role_scope(h: Harness) -> None:
    other_queue = "arn:aws:batch:us-east-1:111122223333:job-queue/somewhere-else"
    result = h.recoverer(job_queues=other_queue).handle(event_of(sample(CAPACITY)))
    assert result.skip_reason is SkipReason.QUEUE_NOT_MANAGED
    assert {e.action for e in h.calls()} == {"dynamodb:PutItem", "events:PutEvents"}  # no Describe
    other_role = "arn:aws:iam::111122223333:role/AnotherRole"
    result = h.recoverer(execution_roles=other_role).handle(event_of(sample(SM_CAPACITY)))
    assert result.skip_reason is SkipReason.ROLE_NOT_ALLOWED
    assert h.submits() == []


def test_budget_exhausted_is_a_critical_skip() -> None:
    lineage = "bp0123456789abcdef0123"
    tagged = service_job_item(
        PREEMPTED, checkpoint_uri=CKPT, tags={LINEAGE_TAG: lineage, ATTEMPT_TAG: "3", "team": "x"}
    )
    with harness(
        world(service_jobs=[tagged], checkpoints=[checkpoint_item(CKPT, "2026-11-22T00:00:00Z")]),
        extend_preemption_retries=True,
    ) as h:
        result = h.recoverer().handle(event_of(sample(PREEMPTED)))
        assert result.action is Action.SKIPPED and result.skip_reason is SkipReason.BUDGET_EXHAUSTED
        (event,) = h.published("Recovery Skipped")
        assert event["critical"] is True and event["lineage_id"] == lineage
        assert (event["budget_used"], event["budget_limit"]) == (3, 3)
        assert h.submits() == []


def test_dry_run_decides_records_and_publishes_but_submits_nothing(h: Harness) -> None:
    result = h.recoverer(dry_run=True).handle(event_of(sample(SPOT)))
    assert result.action is Action.DRY_RUN and result.new_job_arn is None
    assert h.submits() == [] and h.submits(succeeded=False) == []
    (event,) = h.published("Job Resubmitted")
    assert event["dry_run"] is True and "new_job_arn" not in event and event["new_job_name"]
    record = DynamoLineageStore(client("dynamodb"), TABLE).load(result.lineage_id or "")
    assert record is not None and record.attempts[1].state is AttemptState.DRY_RUN
    assert h.recoverer(dry_run=True).handle(event_of(sample(SPOT))).action is Action.DUPLICATE


# ------------------------------------------------------------------------ lineage continues
def test_the_new_jobs_own_failure_continues_the_same_lineage_after_the_backoff(h: Harness) -> None:
    first = h.recoverer().handle(event_of(sample(CAPACITY)))
    assert first.attempt == 1
    new_id = (first.new_job_arn or "").rsplit("/", 1)[-1]
    # Batch fails the new job the same way 30 s later.
    stored = h.aws.batch.service_jobs[new_id].detail
    failure = sample(CAPACITY)["detail"]
    stored.update(status="FAILED", statusReason=failure["statusReason"], attempts=failure["attempts"])
    h.time.advance(30)
    body = event_json(sample(CAPACITY), jobArn=first.new_job_arn, jobId=new_id, jobName=stored["jobName"])
    with pytest.raises(RetryLater) as deferred:
        h.recoverer().handle(event_of(body))
    assert deferred.value.delay_seconds == pytest.approx(30)  # 60 s backoff, 30 s already passed
    assert len(h.submits()) == 1
    h.time.advance(31)
    second = h.recoverer().handle(event_of(body))
    assert second.action is Action.RESUBMITTED and second.attempt == 2
    assert second.lineage_id == first.lineage_id
    assert second.new_job_name and second.new_job_name.endswith(f"-r2-{first.lineage_id[-6:]}")
    events = h.published("Job Resubmitted")
    assert [e["attempt"] for e in events] == [1, 2]
    assert events[1]["original_job_arn"] == first.job_arn and events[1]["failed_job_arn"] == first.new_job_arn
    assert events[1]["budget_used"] == 2 and events[1]["budget_limit"] == 3
    record = DynamoLineageStore(client("dynamodb"), TABLE).load(first.lineage_id or "")
    assert record is not None and record.used == {"CAPACITY": 2} and record.last_attempt == 2
    # The older failure, late: nothing happens.
    assert h.recoverer().handle(event_of(sample(CAPACITY))).action is Action.DUPLICATE
    assert len(h.submits()) == 2


# ------------------------------------------------------------------------ failing submits
def test_throttling_is_retried_by_sqs_with_one_alert_and_one_job_in_the_end(h: Harness) -> None:
    no_retries = session().client(
        "batch", config=Config(retries={"mode": "standard", "total_max_attempts": 1})
    )
    h.aws.set_submit_rate(0)  # every SubmitServiceJob is throttled (TooManyRequestsException)
    body = json.dumps(sample(PREEMPTED))
    for _ in range(2):
        with pytest.raises(RetryLater, match="will retry: TooManyRequestsException"):
            h.recoverer(batch=no_retries).handle(event_of(body))
    (failed,) = h.published("Recovery Failed")  # one alert, not one per delivery
    assert failed["will_retry"] is True and failed["error_code"] == "TooManyRequestsException"
    h.aws.set_submit_rate(5)
    result = h.recoverer(batch=no_retries).handle(event_of(body))
    assert result.action is Action.RESUBMITTED
    tokens = {e.params["clientToken"] for e in h.calls("batch:SubmitServiceJob")}
    assert len(tokens) == 1  # every try used the same clientToken
    assert len(h.submits()) == 1 and len(h.aws.batch.service_jobs) == len(full_world()["service_jobs"]) + 1


def test_a_refused_submit_is_one_recovery_failed_and_a_metric(h: Harness) -> None:
    def refuse(**_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        message = "The account-level service limit 'ml.p5.48xlarge for training job usage' is 0 Instances"
        return AWSResponse("https://sagemaker", 400, {}, None), {
            "Error": {"Code": "ResourceLimitExceeded", "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }

    sagemaker = client("sagemaker")
    sagemaker.meta.events.register("before-call.sagemaker.CreateTrainingJob", refuse)
    result = h.recoverer(sagemaker=sagemaker).handle(event_of(sample(SM_CAPACITY)))
    assert result.action is Action.FAILED and (result.error or "").startswith("ResourceLimitExceeded")
    (failed,) = h.published("Recovery Failed")
    assert failed["will_retry"] is False and failed["error_code"] == "ResourceLimitExceeded"
    assert [m.name for m in result.metrics] == ["RecoveryFailed"]
    record = DynamoLineageStore(client("dynamodb"), TABLE).load(result.lineage_id or "")
    assert record is not None and record.attempts[1].state is AttemptState.FAILED
    # Delivered again: decided already, no second alert, no retry loop.
    assert h.recoverer(sagemaker=sagemaker).handle(event_of(sample(SM_CAPACITY))).action is Action.DUPLICATE
    assert len(h.published("Recovery Failed")) == 1


# ------------------------------------------------------------------------ crashes between steps
class CrashAfterSubmit:
    """Wraps the real job gateway: the submit goes through, then the "Lambda" dies."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def describe(self, *args: Any) -> Any:
        return self.inner.describe(*args)

    def input_shape(self, operation: str) -> Any:
        return self.inner.input_shape(operation)

    def submit(self, request: Any, *, resume: bool) -> str:
        self.inner.submit(request, resume=resume)
        raise SystemError("execution environment lost")


@pytest.mark.parametrize("name", [PREEMPTED, SPOT, SM_SPOT])
def test_a_crash_after_the_submit_never_makes_a_second_job(h: Harness, name: str) -> None:
    crashing = h.recoverer()
    crashing.jobs = {kind: CrashAfterSubmit(gateway) for kind, gateway in crashing.jobs.items()}
    with pytest.raises(SystemError):
        crashing.handle(event_of(sample(name)))
    assert len(h.submits()) == 1 and h.published() == []
    if name == SPOT:  # SubmitJob has no client token: no resend before ListJobs can list the job
        with pytest.raises(RetryLater, match="ListJobs to settle"):
            h.recoverer().handle(event_of(sample(name)))
        h.time.advance(LISTING_SETTLE_SECONDS)
    result = h.recoverer().handle(event_of(sample(name)))  # SQS delivers the record again
    assert result.action is Action.RESUBMITTED
    if name == SPOT:
        assert len(h.submits()) == 1  # found by its name, not sent again (the others resend a client token)
    new_jobs = (
        [j for j in h.aws.batch.service_jobs.values() if j.detail["jobName"] == result.new_job_name]
        + [j for j in h.aws.batch.jobs.values() if j.detail["jobName"] == result.new_job_name]
        + [j for j in h.aws.training.jobs.values() if j.detail["TrainingJobName"] == result.new_job_name]
    )
    assert len(new_jobs) == 1
    assert len(h.published("Job Resubmitted")) == 1


def test_publish_failure_after_the_submit_publishes_later_without_resubmitting(h: Harness) -> None:
    recoverer = h.recoverer()
    real = recoverer.events

    class Down:
        def publish(self, events: Any) -> None:
            raise PublishError("PutEvents failed: EndpointConnectionError")

    recoverer.events = Down()
    with pytest.raises(RetryLater, match="not published"):
        recoverer.handle(event_of(sample(SPOT)))
    recoverer.events = real
    result = recoverer.handle(event_of(sample(SPOT)))
    assert result.action is Action.RESUBMITTED
    assert len(h.submits()) == 1 and len(h.published("Job Resubmitted")) == 1


def test_no_submit_slot_before_the_timeout_hands_the_record_back(h: Harness) -> None:
    recoverer = h.recoverer(rate=0.1)
    assert recoverer.handle(event_of(sample(SPOT))).action is Action.RESUBMITTED
    with pytest.raises(RetryLater, match="no submit slot in time"):
        recoverer.handle(event_of(sample(SM_SPOT)), time_left=lambda: 9.0)  # 10 s to wait, 1 s usable
    assert len(h.submits()) == 1
    result = recoverer.handle(event_of(sample(SM_SPOT)), time_left=lambda: 60.0)  # RESUME, paced
    assert result.action is Action.RESUBMITTED and len(h.submits()) == 2


def test_tags_over_the_limit_are_left_off_and_reported() -> None:
    many = {f"team-tag-{i:02d}": "x" for i in range(50)}
    with harness(world(service_jobs=[service_job_item(CAPACITY, checkpoint_uri=None, tags=many)])) as h:
        result = h.recoverer().handle(event_of(sample(CAPACITY)))
        assert result.action is Action.RESUBMITTED
        assert result.dropped_tags == ["team-tag-48", "team-tag-49"]
        (submit,) = h.submits()
        assert len(submit.params["tags"]) == 50 and submit.params["tags"][LINEAGE_TAG] == result.lineage_id


# ------------------------------------------------------------------------ checkpoints that count
SWEEP = f"s3://{BUCKET}/lr-sweep/sweep-2026-11-23/"  # the array child's checkpoint_uri parameter


def _resubmit_with(checkpoints: list[dict[str, Any]], name: str = PREEMPTED, **settings: Any) -> Any:
    seed = world(
        service_jobs=[service_job_item(PREEMPTED, checkpoint_uri=CKPT)],
        jobs=[container_job_item(ARRAY)],
        checkpoints=checkpoints,
    )
    with harness(seed, extend_preemption_retries=True) as opened:
        result = opened.recoverer(**settings).handle(event_of(sample(name)))
        return result, opened.published(), opened.submits()


def test_a_checkpoint_from_before_the_first_attempt_is_foreign() -> None:
    # The job's first attempt started 2026-11-21T18:06:40Z; the only object is two months older.
    result, published, _ = _resubmit_with(
        [checkpoint_item(CKPT, "2026-09-21T10:00:00Z")], no_checkpoint="proceed"
    )
    assert result.action is Action.RESUBMITTED and "foreign" in (result.message or "")
    (event,) = published
    assert event["restarts_from_step_zero"] is True and "checkpoint_object" not in event
    refused, published, submits = _resubmit_with(
        [checkpoint_item(CKPT, "2026-09-21T10:00:00Z")], no_checkpoint="refuse"
    )
    assert refused.skip_reason is SkipReason.NO_CHECKPOINT and submits == []
    (skip,) = published
    assert "foreign" in skip["message"] and f"{CKPT}step-1000/model.pt" in skip["message"]


def test_a_checkpoint_older_than_the_maximum_age_is_stale() -> None:
    # Newest object 2026-11-22T00:10:00Z, failure at 00:19:55: 10 minutes old.
    fresh, published, _ = _resubmit_with(
        [checkpoint_item(CKPT, "2026-11-22T00:10:00Z")], checkpoint_max_age_seconds=3600
    )
    assert fresh.action is Action.RESUBMITTED
    (event,) = published
    assert event["checkpoint_object"] == f"{CKPT}step-1000/model.pt"
    assert event["checkpoint_age_seconds"] == pytest.approx(9 * 60 + 55.23, abs=0.01)
    stale, published, _ = _resubmit_with(
        [checkpoint_item(CKPT, "2026-11-21T20:00:00Z")],
        checkpoint_max_age_seconds=3600,
        no_checkpoint="proceed",
    )
    assert "stale" in (stale.message or "")
    (event,) = published
    assert event["restarts_from_step_zero"] is True


def test_an_array_child_counts_only_objects_under_its_own_index() -> None:
    # array-child-failed is index 7; its first attempt started 2026-11-23T03:14:27Z.
    own, published, _ = _resubmit_with([checkpoint_item(f"{SWEEP}7/", "2026-11-23T03:50:00Z")], ARRAY)
    assert own.action is Action.RESUBMITTED
    (event,) = published
    assert event["checkpoint_object"] == f"{SWEEP}7/step-1000/model.pt"
    assert event["checkpoint_uri"] == SWEEP and event["restarts_from_step_zero"] is False
    # a sibling's writes (index 3) and objects at the shared prefix do not vouch for index 7
    _, published, _ = _resubmit_with(
        [
            checkpoint_item(f"{SWEEP}3/", "2026-11-23T03:55:00Z"),
            checkpoint_item(SWEEP, "2026-11-23T03:56:00Z"),
        ],
        ARRAY,
        no_checkpoint="proceed",
    )
    (event,) = published
    assert event["restarts_from_step_zero"] is True and "checkpoint_object" not in event


def test_a_checkpoint_listing_that_fails_is_retried_never_no_checkpoint() -> None:
    seed = world(service_jobs=[service_job_item(PREEMPTED, checkpoint_uri=CKPT)])  # no such bucket
    with harness(seed, extend_preemption_retries=True) as opened:
        with pytest.raises(RetryLater) as caught:
            opened.recoverer(no_checkpoint="refuse").handle(event_of(sample(PREEMPTED)))
        assert caught.value.why is RetryReason.CHECKPOINT_UNREADABLE and "NoSuchBucket" in caught.value.reason
        assert opened.submits() == [] and opened.published() == []


def test_with_no_job_queue_named_it_decides_and_reports_as_dry_run(h: Harness) -> None:
    # The deployed default: BATCHPILOT_RECOVERY_JOB_QUEUES empty.
    result = h.recoverer(job_queues="").handle(event_of(sample(SPOT)))
    assert result.action is Action.DRY_RUN and h.submits() == []
    assert "no job queue is named" in (result.message or "")
    (event,) = h.published("Job Resubmitted")
    assert event["dry_run"] is True and "new_job_arn" not in event
    skipped = h.recoverer(job_queues="").handle(event_of(sample(USER)))
    assert skipped.action is Action.SKIPPED
    (skip,) = h.published("Recovery Skipped")
    assert skip["dry_run"] is True and "dry run (no job queue is named" in skip["message"]


# ------------------------------------------------------------------------ following the successor
def _tag_calls(h: Harness) -> list[Any]:
    return [e for e in h.aws.journal if e.action in ("batch:TagResource", "sagemaker:AddTags")]


@pytest.mark.parametrize("name", [SPOT, CAPACITY, SM_SPOT])
def test_the_failed_job_is_tagged_with_its_successor_exactly_once(h: Harness, name: str) -> None:
    h.aws.drain_journal()
    raw = sample(name)
    result = h.recoverer().handle(event_of(raw))
    assert result.action is Action.RESUBMITTED and result.tag_error is None
    for _ in range(3):  # the same failure delivered again: ALREADY_HANDLED, no second tag call
        assert h.recoverer().handle(event_of(raw)).action is Action.DUPLICATE
    (call,) = _tag_calls(h)
    assert call.succeeded
    if call.action == "batch:TagResource":
        assert call.params["resourceArn"] == result.job_arn
        tags = batch_client(h).list_tags_for_resource(resourceArn=result.job_arn)["tags"]
    else:
        assert call.params["ResourceArn"] == result.job_arn
        listed = h.aws.client("sagemaker").list_tags(ResourceArn=result.job_arn)["Tags"]
        tags = {t["Key"]: t["Value"] for t in listed}
    assert tags["batchpilot:successor-arn"] == result.new_job_arn
    assert tags["batchpilot:successor-name"] == result.new_job_name


def batch_client(h: Harness) -> Any:
    return h.aws.client("batch")


def test_a_tag_call_that_fails_leaves_the_resubmission_standing(h: Harness) -> None:
    recoverer = h.recoverer()
    gateway = recoverer.jobs[JobKind.CONTAINER_JOB]

    class NoTags:
        kinds = gateway.kinds

        def __getattr__(self, name: str) -> Any:
            return getattr(gateway, name)

        def tag_successor(self, failed_job_arn: str, tags: Any) -> None:
            raise TagError("AccessDeniedException")

    recoverer.jobs = {**recoverer.jobs, JobKind.CONTAINER_JOB: NoTags()}
    result = recoverer.handle(event_of(sample(SPOT)))
    assert result.action is Action.RESUBMITTED and result.new_job_arn
    assert result.tag_error == "AccessDeniedException"
    assert result.log_fields()["successor_tag_error"] == "AccessDeniedException"
    assert [m.name for m in result.metrics].count("SuccessorTagFailed") == 1
    assert len(h.submits()) == 1 and len(h.published("Job Resubmitted")) == 1


def test_a_redelivery_after_a_failed_publish_does_not_tag_again(h: Harness) -> None:
    h.aws.drain_journal()
    recoverer = h.recoverer()
    real = recoverer.events

    class Down:
        def publish(self, events: Any) -> None:
            raise PublishError("events down")

    recoverer.events = Down()
    with pytest.raises(RetryLater):
        recoverer.handle(event_of(sample(SPOT)))
    recoverer.events = real
    assert recoverer.handle(event_of(sample(SPOT))).action is Action.RESUBMITTED
    assert len(_tag_calls(h)) == 1 and len(h.submits()) == 1
