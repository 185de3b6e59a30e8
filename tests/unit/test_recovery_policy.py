"""Recovery's decision table, row by row (pure code: policy, lineage plan, settings)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from batchpilot.recovery import policy
from batchpilot.recovery.checkpoint import CheckpointState, parse_s3_uri
from batchpilot.recovery.lineage import AttemptRecord, AttemptState, Lineage, Step, base_name, plan
from batchpilot.recovery.settings import DEFAULT_BUDGETS, CheckpointSource, NoCheckpoint, RecoverySettings
from batchpilot.recovery.snapshot import JobSnapshot
from batchpilot.shared.classification import Category, JobKind, classify
from batchpilot.shared.events import parse_event
from batchpilot.shared.own_events import SkipReason
from batchpilot.shared.settings import ConfigError
from batchpilot_local.testing.samples import batch_job, sample, service_job, training_job

SPOT = "Host EC2 (instance i-0a1b2c3d4e5f67890) terminated."
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def facts_of(raw: dict[str, Any]) -> Any:
    return classify(parse_event(raw))


def settings(**values: Any) -> RecoverySettings:
    return RecoverySettings.from_mapping({"state_table": "StateTable", **values})


# ------------------------------------------------------------------------ rows 1-5: screen
SCREEN_TABLE: list[tuple[str, dict[str, Any], SkipReason | None]] = [
    # row 1
    ("batch-created training job", sample("sagemaker/created-by-batch-failed"), SkipReason.CREATED_BY_BATCH),
    # row 2: Batch is retrying the container job
    (
        "spot reclaim while Batch retries",
        sample("batch-job/runnable-retrying-after-spot-reclaim"),
        SkipReason.RETRIES_LEFT,
    ),
    # row 3: not terminal (preempted and requeued, running, queue blocked)
    ("preempted and requeued", sample("service-job-preemption/completed"), SkipReason.NOT_TERMINAL),
    ("preemption started", sample("service-job-preemption/started"), SkipReason.NOT_TERMINAL),
    ("service job RUNNABLE after capacity", sample("service-job/runnable-capacity"), SkipReason.NOT_TERMINAL),
    ("container job running", sample("batch-job/running"), SkipReason.NOT_TERMINAL),
    ("training job interrupted (spot)", sample("sagemaker/in-progress-interrupted"), SkipReason.NOT_TERMINAL),
    (
        "queue blocked",
        sample("service-job-queue-blocked/capacity-insufficient-instance-capacity"),
        SkipReason.NOT_TERMINAL,
    ),
    # row 4
    ("service job succeeded", sample("service-job/succeeded"), SkipReason.SUCCEEDED),
    ("training job completed", sample("sagemaker/completed"), SkipReason.SUCCEEDED),
    # row 5: categories never recovered
    ("service job validation", sample("service-job/failed-validation"), SkipReason.NOT_RECOVERABLE),
    ("service job algorithm error", sample("service-job/failed-algorithm-error"), SkipReason.NOT_RECOVERABLE),
    ("service job user terminated", sample("service-job/failed-user-terminated"), SkipReason.NOT_RECOVERABLE),
    ("container application error", sample("batch-job/failed-application-error"), SkipReason.NOT_RECOVERABLE),
    ("container attempt timeout", sample("batch-job/failed-attempt-timeout"), SkipReason.NOT_RECOVERABLE),
    ("container cannot pull", sample("batch-job/failed-cannot-pull-container"), SkipReason.NOT_RECOVERABLE),
    (
        "container failed before start",
        sample("batch-job/failed-before-start-no-attempts"),
        SkipReason.NOT_RECOVERABLE,
    ),
    (
        "container capacity is not a spot reclaim",
        sample("batch-job/failed-job-state-time-limit"),
        SkipReason.NOT_RECOVERABLE,
    ),
    ("training job stopped by a person", sample("sagemaker/stopped-by-user"), SkipReason.NOT_RECOVERABLE),
    (
        "training job max runtime",
        sample("sagemaker/stopped-max-runtime-exceeded"),
        SkipReason.NOT_RECOVERABLE,
    ),
    ("training job algorithm error", sample("sagemaker/failed-algorithm-error"), SkipReason.NOT_RECOVERABLE),
    (
        "service job unknown cause",
        service_job("FAILED", statusReason="something new"),
        SkipReason.NOT_RECOVERABLE,
    ),
    # recoverable
    ("service job preemption budget spent", sample("service-job/failed-preemption-budget-spent"), None),
    ("service job CapacityError", sample("service-job/failed-sagemaker-capacity"), None),
    ("service job JobStateTimeLimit capacity", sample("service-job/failed-job-state-time-limit"), None),
    ("service job InternalServerError", sample("service-job/failed-internal-server-error"), None),
    ("container spot reclaim, retries spent", sample("batch-job/failed-spot-reclaim"), None),
    ("array child spot reclaim", sample("batch-job/array-child-failed"), None),
    ("training job CapacityError", sample("sagemaker/failed-capacity-error"), None),
    ("training job EC2InsufficientCapacityError", sample("sagemaker/failed-ec2-insufficient-capacity"), None),
    ("training job InternalServerError", sample("sagemaker/failed-internal-server-error"), None),
    ("training job MaxWaitTimeExceeded", sample("sagemaker/stopped-max-wait-time-exceeded"), None),
    (
        "service job preempted, summary only",
        service_job("FAILED", preemptionSummary={"preemptedAttemptCount": 2}),
        None,
    ),
]


@pytest.mark.parametrize(("name", "raw", "expected"), SCREEN_TABLE, ids=[row[0] for row in SCREEN_TABLE])
def test_screen_rows_1_to_5(name: str, raw: dict[str, Any], expected: SkipReason | None) -> None:
    skip = policy.screen(facts_of(raw))
    assert (skip.reason if skip else None) == expected
    if skip is not None:
        assert skip.message and not skip.critical


def test_a_user_stopped_job_is_left_alone_with_its_reason() -> None:
    skip = policy.screen(facts_of(sample("service-job/failed-user-terminated")))
    assert skip is not None and skip.reason is SkipReason.NOT_RECOVERABLE
    assert skip.message.startswith("USER_STOPPED:")


def test_service_jobs_wait_for_describe_before_row_5() -> None:
    # The event of a service job often lacks what decides its category: row 5 waits.
    facts = facts_of(service_job("FAILED", statusReason="something new"))
    assert policy.screen(facts, with_category=False) is None
    assert policy.screen(facts_of(sample("service-job/succeeded")), with_category=False) is not None


def test_every_kind_has_recoverable_categories_and_never_the_forbidden_ones() -> None:
    forbidden = {
        Category.MISCONFIGURATION,
        Category.USER_STOPPED,
        Category.APPLICATION_ERROR,
        Category.TIMEOUT,
    }
    for kind in JobKind:
        assert policy.RECOVERABLE[kind]
        assert not policy.RECOVERABLE[kind] & forbidden
    assert policy.RECOVERABLE[JobKind.CONTAINER_JOB] == {Category.SPOT_INTERRUPTION}


# ------------------------------------------------------------------------ rows 6-7: scope
def snapshot_of(raw: dict[str, Any], *, role: str | None = None, queue: str | None = None) -> JobSnapshot:
    facts = facts_of(raw)
    return JobSnapshot(
        kind=facts.kind,
        arn=facts.arn,
        name=facts.name or "job",
        facts=facts,
        described={},
        role_arn=role,
        job_queue=queue if queue is not None else facts.queue_arn,
    )


ROLE = "arn:aws:iam::111122223333:role/SageMakerTrainingExecutionRole"
OTHER_ROLE = "arn:aws:iam::111122223333:role/SomethingElse"
QUEUE = "arn:aws:batch:us-east-1:111122223333:job-queue/sm-training-research"


def test_row_6_queue_not_managed() -> None:
    snap = snapshot_of(sample("service-job/failed-sagemaker-capacity"), role=ROLE)
    assert policy.check_scope(snap, settings()) is None  # * manages every queue
    assert policy.check_scope(snap, settings(job_queues=QUEUE)) is None
    assert policy.check_scope(snap, settings(job_queues="sm-training-research,other")) is None
    skip = policy.check_scope(
        snap, settings(job_queues="arn:aws:batch:us-east-1:111122223333:job-queue/other")
    )
    assert skip is not None and skip.reason is SkipReason.QUEUE_NOT_MANAGED
    assert "sm-training-research" in skip.message
    # A training job has no queue: the queue setting never skips it.
    training = snapshot_of(sample("sagemaker/failed-capacity-error"), role=ROLE)
    assert policy.check_scope(training, settings(job_queues=QUEUE, execution_roles=ROLE)) is None


def test_row_7_role_not_allowed() -> None:
    training = snapshot_of(sample("sagemaker/failed-capacity-error"), role=OTHER_ROLE)
    skip = policy.check_scope(training, settings(execution_roles=ROLE))
    assert skip is not None and skip.reason is SkipReason.ROLE_NOT_ALLOWED
    assert policy.check_scope(training, settings()) is None
    # Container jobs pass no SageMaker role.
    container = snapshot_of(sample("batch-job/failed-spot-reclaim"))
    assert policy.check_scope(container, settings(execution_roles=ROLE)) is None
    # A service job's role comes from its payload.
    service = snapshot_of(sample("service-job/failed-sagemaker-capacity"), role=None)
    assert policy.check_scope(service, settings(execution_roles=ROLE)) is not None


# ------------------------------------------------------------------------ rows 8-10: lineage plan
def attempt(n: int, failed: str, state: AttemptState = AttemptState.SUBMITTED, **kw: Any) -> AttemptRecord:
    return AttemptRecord(
        attempt=n,
        failed_job_arn=failed,
        category=kw.pop("category", "PREEMPTION"),
        reason=None,
        decided_at=kw.pop("decided_at", NOW - timedelta(hours=5)),
        operation="batch:SubmitServiceJob",
        new_job_name=f"job-r{n}-abcdef",
        state=state,
        new_job_arn=kw.pop("new_job_arn", f"arn:new-{n}" if state is AttemptState.SUBMITTED else None),
        published=kw.pop("published", True),
        **kw,
    )


def lineage(*records: AttemptRecord, used: dict[str, int] | None = None) -> Lineage:
    base = Lineage("bpabc", "service-job", "arn:orig", "job", None, NOW - timedelta(days=1))
    for record in records:
        base = base.with_attempt(record)
    if used is not None:
        base = Lineage(**{**base.__dict__, "used": used})
    return base


def do_plan(record: Lineage | None, failed: str, failed_attempt: int, **kw: Any) -> Any:
    return plan(
        record,
        failed_job_arn=failed,
        failed_attempt=failed_attempt,
        category=kw.get("category", Category.PREEMPTION),
        budgets=kw.get("budgets", dict(DEFAULT_BUDGETS)),
        backoff_base=kw.get("base", 60.0),
        backoff_max=kw.get("cap", 3600.0),
        now=kw.get("now", NOW),
    )


def test_first_failure_plans_attempt_1() -> None:
    decided = do_plan(None, "arn:orig", 0)
    assert (decided.step, decided.attempt, decided.used, decided.limit) == (Step.NEW, 1, 0, 3)


def test_row_8_duplicates_and_older_events() -> None:
    record = lineage(attempt(1, "arn:orig"))
    assert do_plan(record, "arn:orig", 0).step is Step.DUPLICATE  # the same failure again
    record2 = record.with_attempt(attempt(2, "arn:new-1"))
    assert do_plan(record2, "arn:orig", 0).step is Step.DUPLICATE  # an older failure, late
    assert do_plan(record2, "arn:new-1", 1).step is Step.DUPLICATE
    assert do_plan(record2, "arn:new-2", 2).step is Step.NEW


def test_unconfirmed_attempts_are_resumed_and_unpublished_ones_published() -> None:
    submitting = lineage(attempt(1, "arn:orig", AttemptState.SUBMITTING, published=False))
    decided = do_plan(submitting, "arn:orig", 0)
    assert decided.step is Step.RESUME and decided.record is not None and decided.attempt == 1
    unpublished = lineage(attempt(1, "arn:orig", published=False))
    assert do_plan(unpublished, "arn:orig", 0).step is Step.PUBLISH
    failed = lineage(attempt(1, "arn:orig", AttemptState.FAILED, error_code="ResourceLimitExceeded"))
    assert do_plan(failed, "arn:orig", 0).step is Step.DUPLICATE


def test_row_9_budget_per_category() -> None:
    record = lineage(*(attempt(n, f"arn:new-{n - 1}" if n > 1 else "arn:orig") for n in (1, 2, 3)))
    decided = do_plan(record, "arn:new-3", 3)
    assert decided.step is Step.BUDGET_EXHAUSTED
    assert (decided.used, decided.limit) == (3, 3)
    assert "PREEMPTION budget exhausted: 3 of 3" in decided.message
    # Budgets are separate: the same lineage may still use its spot budget.
    assert do_plan(record, "arn:new-3", 3, category=Category.SPOT_INTERRUPTION).step is Step.NEW
    # A budget of 0 turns recovery off for that category.
    assert (
        do_plan(None, "arn:orig", 0, budgets={**DEFAULT_BUDGETS, Category.PREEMPTION: 0}).step
        is Step.BUDGET_EXHAUSTED
    )


def test_a_lost_record_counts_the_tagged_attempts_against_the_budget() -> None:
    assert do_plan(None, "arn:new-3", 3).step is Step.BUDGET_EXHAUSTED
    assert do_plan(None, "arn:new-2", 2).step is Step.NEW


def test_row_10_exponential_backoff_between_resubmissions() -> None:
    first = lineage(attempt(1, "arn:orig", decided_at=NOW - timedelta(seconds=30)))
    decided = do_plan(first, "arn:new-1", 1)
    assert decided.step is Step.DEFER and decided.defer_seconds == pytest.approx(30)
    assert do_plan(first, "arn:new-1", 1, now=NOW + timedelta(seconds=30)).step is Step.NEW
    second = first.with_attempt(attempt(2, "arn:new-1", decided_at=NOW))
    assert do_plan(second, "arn:new-2", 2, now=NOW + timedelta(seconds=119)).step is Step.DEFER  # 2 x 60
    assert do_plan(second, "arn:new-2", 2, now=NOW + timedelta(seconds=120)).step is Step.NEW
    capped = do_plan(second, "arn:new-2", 2, base=60, cap=90, now=NOW + timedelta(seconds=89))
    assert capped.step is Step.DEFER and capped.defer_seconds == pytest.approx(1)


def test_base_name_strips_our_own_suffix() -> None:
    assert base_name("llama-pretrain-r3-abc123") == "llama-pretrain"
    assert base_name("llama-pretrain") == "llama-pretrain"
    assert base_name("run-r2") == "run-r2"


# ------------------------------------------------------------------------ row 11: checkpoint
def test_row_11_no_checkpoint() -> None:
    location = parse_s3_uri("s3://ckpt/run/", "CheckpointConfig.S3Uri")
    empty = CheckpointState(location)
    found = CheckpointState(location, newest=NOW, objects=3)
    refuse = settings(no_checkpoint="refuse")
    assert policy.check_checkpoint(found, refuse) is None
    skip = policy.check_checkpoint(empty, refuse)
    assert skip is not None and skip.reason is SkipReason.NO_CHECKPOINT and "s3://ckpt/run/" in skip.message
    assert policy.check_checkpoint(empty, settings()) is None  # proceed (default): step 0
    assert policy.check_checkpoint(CheckpointState(None), refuse) is not None
    denied = CheckpointState(location, error="AccessDenied")
    refused = policy.check_checkpoint(denied, refuse)
    assert refused is not None and "AccessDenied" in refused.message


# ------------------------------------------------------------------------ settings
def test_settings_defaults_and_environment() -> None:
    s = RecoverySettings.from_environ({"BATCHPILOT_STATE_TABLE": "StateTable"}, function="recovery")
    assert s.budgets == DEFAULT_BUDGETS
    assert s.job_queues == ("*",) and s.execution_roles == ("*",)
    assert s.no_checkpoint is NoCheckpoint.PROCEED and s.dry_run is False
    assert s.container_checkpoint[0] == (CheckpointSource.PARAMETER, "checkpoint_uri")
    assert all(isinstance(kind, CheckpointSource) for kind, _ in s.container_checkpoint)
    assert s.per_invocation_rate() == 2.0
    s = RecoverySettings.from_environ(
        {
            "BATCHPILOT_STATE_TABLE": "tbl",
            "BATCHPILOT_RECOVERY_DRY_RUN": "true",
            "BATCHPILOT_RECOVERY_BUDGETS": "capacity=1, PREEMPTION=0",
            "BATCHPILOT_RECOVERY_JOB_QUEUES": "a,arn:aws:batch:us-east-1:111122223333:job-queue/b",
            "BATCHPILOT_RECOVERY_CONTAINER_CHECKPOINT": "tag:ckpt,environment:CKPT",
        },
        function="recovery",
    )
    assert s.dry_run is True
    assert s.budgets[Category.CAPACITY] == 1 and s.budgets[Category.PREEMPTION] == 0
    assert s.budgets[Category.SPOT_INTERRUPTION] == 5  # left out: default
    assert s.manages_queue("arn:aws:batch:us-east-1:111122223333:job-queue/a")
    assert s.manages_queue("arn:aws:batch:us-east-1:111122223333:job-queue/b")
    assert not s.manages_queue("arn:aws:batch:us-east-1:999999999999:job-queue/b")
    assert not s.manages_queue(None)
    assert s.container_checkpoint == ((CheckpointSource.TAG, "ckpt"), (CheckpointSource.ENVIRONMENT, "CKPT"))


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({}, "BATCHPILOT_STATE_TABLE"),
        ({"BATCHPILOT_RECOVERY_BUDGETS": "TIMEOUT=3"}, "BATCHPILOT_RECOVERY_BUDGETS"),
        ({"BATCHPILOT_RECOVERY_BUDGETS": "PREEMPTION"}, "BATCHPILOT_RECOVERY_BUDGETS"),
        ({"BATCHPILOT_RECOVERY_BUDGETS": "PREEMPTION=500"}, "BATCHPILOT_RECOVERY_BUDGETS"),
        ({"BATCHPILOT_RECOVERY_JOB_QUEUES": "*,a"}, "BATCHPILOT_RECOVERY_JOB_QUEUES"),
        ({"BATCHPILOT_RECOVERY_JOB_QUEUES": "not a queue!"}, "BATCHPILOT_RECOVERY_JOB_QUEUES"),
        ({"BATCHPILOT_RECOVERY_SAGEMAKER_ROLE_ARNS": "role/x"}, "BATCHPILOT_RECOVERY_SAGEMAKER_ROLE_ARNS"),
        ({"BATCHPILOT_RECOVERY_NO_CHECKPOINT": "maybe"}, "BATCHPILOT_RECOVERY_NO_CHECKPOINT"),
        ({"BATCHPILOT_RECOVERY_SUBMITS_PER_SECOND": "5"}, "BATCHPILOT_RECOVERY_SUBMITS_PER_SECOND"),
        ({"BATCHPILOT_RECOVERY_CONTAINER_CHECKPOINT": "file:x"}, "BATCHPILOT_RECOVERY_CONTAINER_CHECKPOINT"),
        (
            {"BATCHPILOT_RECOVERY_CONTAINER_CHECKPOINT": "parameter"},
            "BATCHPILOT_RECOVERY_CONTAINER_CHECKPOINT",
        ),
        (
            {
                "BATCHPILOT_RECOVERY_BACKOFF_BASE_SECONDS": "600",
                "BATCHPILOT_RECOVERY_BACKOFF_MAX_SECONDS": "60",
            },
            "BATCHPILOT_RECOVERY_BACKOFF_MAX_SECONDS",
        ),
        ({"BATCHPILOT_RECOVERY_DRY_RUN": "perhaps"}, "BATCHPILOT_RECOVERY_DRY_RUN"),
    ],
)
def test_bad_configuration_names_the_variable(env: dict[str, str], variable: str) -> None:
    base = {} if variable == "BATCHPILOT_STATE_TABLE" else {"BATCHPILOT_STATE_TABLE": "StateTable"}
    with pytest.raises(ConfigError) as error:
        RecoverySettings.from_environ({**base, **env}, function="recovery")
    assert variable in str(error.value)
    assert str(error.value).startswith("invalid recovery function configuration")


def test_training_job_facts_come_from_the_event_until_described() -> None:
    facts = facts_of(training_job("Stopped", SecondaryStatus="MaxWaitTimeExceeded"))
    assert facts.category is Category.SPOT_INTERRUPTION and policy.screen(facts) is None
    facts = facts_of(batch_job("FAILED", attempts=[{"container": {}, "statusReason": SPOT}]))
    assert policy.screen(facts) is None
