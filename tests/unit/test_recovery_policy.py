"""Recovery's decision table (batchpilot.recovery.policy.decide), row by row, and its settings."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from batchpilot.recovery import policy
from batchpilot.recovery.checkpoint import CheckpointState, counted, for_array_index, parse_s3_uri
from batchpilot.recovery.lineage import (
    AttemptRecord,
    AttemptState,
    Lineage,
    LineageRef,
    LineageView,
    base_name,
    ref_from_tags,
)
from batchpilot.recovery.naming import ATTEMPT_TAG, LINEAGE_TAG, lineage_id_for
from batchpilot.recovery.policy import UNKNOWN, Case, Decision, Need, Row, Step, decide
from batchpilot.recovery.requests import Operation
from batchpilot.recovery.settings import DEFAULT_BUDGETS, CheckpointSource, NoCheckpoint, RecoverySettings
from batchpilot.recovery.snapshot import JobSnapshot
from batchpilot.shared.classification import Category, JobFacts, JobKind, classify
from batchpilot.shared.events import parse_event
from batchpilot.shared.own_events import SkipReason
from batchpilot.shared.settings import ConfigError
from batchpilot_local.testing.paths import ROOT
from batchpilot_local.testing.samples import batch_job, sample, service_job, training_job

SPOT = "Host EC2 (instance i-0a1b2c3d4e5f67890) terminated."
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
ROLE = "arn:aws:iam::111122223333:role/SageMakerTrainingExecutionRole"
OTHER_ROLE = "arn:aws:iam::111122223333:role/SomethingElse"
QUEUE = "arn:aws:batch:us-east-1:111122223333:job-queue/sm-training-research"
LOCATION = parse_s3_uri("s3://ckpt/run/", "CheckpointConfig.S3Uri")
FOUND = CheckpointState(LOCATION, newest=NOW - timedelta(hours=1), objects=3)
PREEMPTED = "service-job/failed-preemption-budget-spent"


def facts_of(raw: dict[str, Any]) -> JobFacts:
    return classify(parse_event(raw))


def settings(**values: Any) -> RecoverySettings:
    """Recovery turned on for every job queue (the deployed default, none named, is dry-run:
    test_with_no_job_queue_named_every_decision_is_a_dry_run)."""
    return RecoverySettings.from_mapping({"state_table": "StateTable", "job_queues": "*", **values})


def snapshot_of(
    raw: dict[str, Any] | JobFacts,
    *,
    role: str | None = ROLE,
    queue: str | None = None,
    tags: dict[str, str] | None = None,
) -> JobSnapshot:
    """The job of a sample event as Describe* would describe it: the same facts."""
    facts = raw if isinstance(raw, JobFacts) else facts_of(raw)
    return JobSnapshot(
        kind=facts.kind,
        arn=facts.arn,
        name=facts.name or "job",
        facts=facts,
        described={},
        tags=tags or {},
        role_arn=None if facts.kind is JobKind.CONTAINER_JOB else role,
        checkpoint=LOCATION,
        job_queue=queue if queue is not None else facts.queue_arn,
    )


def row_of(outcome: Decision | Need) -> Row | None:
    return outcome.row if isinstance(outcome, Decision) else None


# ------------------------------------------------------------------------ rows 1-5: the job's facts
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
    ("service job preemption budget spent", sample(PREEMPTED), None),
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


def first_rows(raw: dict[str, Any]) -> Decision | None:
    """The decision of rows 1-5 on the described job (same facts as its event); None when the job
    passes them."""
    decided = decide(Case(facts_of(raw), job=snapshot_of(raw)), settings(), NOW)
    return (
        decided
        if isinstance(decided, Decision) and decided.row.number <= Row.NOT_RECOVERABLE.number
        else None
    )


@pytest.mark.parametrize(("name", "raw", "expected"), SCREEN_TABLE, ids=[row[0] for row in SCREEN_TABLE])
def test_rows_1_to_5(name: str, raw: dict[str, Any], expected: SkipReason | None) -> None:
    decided = first_rows(raw)
    assert (decided.row.skip_reason if decided else None) == expected
    if decided is not None:
        assert decided.message and not decided.row.critical and decided.step is Step.SKIP


def test_a_user_stopped_job_is_left_alone_with_its_reason() -> None:
    decided = first_rows(sample("service-job/failed-user-terminated"))
    assert decided is not None and decided.row.skip_reason is SkipReason.NOT_RECOVERABLE
    assert decided.message.startswith("USER_STOPPED:")


def test_service_jobs_wait_for_describe_before_row_5() -> None:
    # The event of a service job often lacks what decides its category: row 5 waits.
    facts = facts_of(service_job("FAILED", statusReason="something new"))
    assert decide(Case(facts), settings(), NOW) is Need.LINEAGE  # cheapest input first
    empty = LineageView(LineageRef(lineage_id_for(facts.arn), 0), None)
    assert decide(Case(facts, lineage=empty), settings(), NOW) is Need.DESCRIPTION
    described = Case(facts, job=snapshot_of(facts), lineage=empty)
    assert row_of(decide(described, settings(), NOW)) is Row.NOT_RECOVERABLE
    # A service job Describe* no longer knows is NOT_FOUND, whatever its event says (row 5 needs it).
    assert row_of(decide(Case(facts, job=None, lineage=empty), settings(), NOW)) is Row.NOT_FOUND
    # Rows 1-4 need no description.
    assert row_of(decide(Case(facts_of(sample("service-job/succeeded"))), settings(), NOW)) is Row.SUCCEEDED


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


def test_training_job_facts_come_from_the_event_until_described() -> None:
    facts = facts_of(training_job("Stopped", SecondaryStatus="MaxWaitTimeExceeded"))
    assert (
        facts.category is Category.SPOT_INTERRUPTION and decide(Case(facts), settings(), NOW) is Need.LINEAGE
    )
    facts = facts_of(batch_job("FAILED", attempts=[{"container": {}, "statusReason": SPOT}]))
    assert decide(Case(facts), settings(), NOW) is Need.LINEAGE


# ------------------------------------------------------------------------ rows 7-9: scope, Describe*
def scope_row(raw: dict[str, Any], s: RecoverySettings, **kw: Any) -> Row | None:
    """The row rows 7-9 decide for the described job; None when it passes them."""
    decided = row_of(decide(Case(facts_of(raw), job=snapshot_of(raw, **kw)), s, NOW))
    return decided if decided in (Row.QUEUE_NOT_MANAGED, Row.ROLE_NOT_ALLOWED, Row.NOT_FOUND) else None


def test_row_6_queue_not_managed() -> None:
    raw = sample("service-job/failed-sagemaker-capacity")
    assert scope_row(raw, settings()) is None  # * manages every queue
    assert scope_row(raw, settings(job_queues=QUEUE)) is None
    assert scope_row(raw, settings(job_queues="sm-training-research,other")) is None
    other = settings(job_queues="arn:aws:batch:us-east-1:111122223333:job-queue/other")
    assert scope_row(raw, other) is Row.QUEUE_NOT_MANAGED
    decided = decide(Case(facts_of(raw), job=snapshot_of(raw)), other, NOW)
    assert isinstance(decided, Decision) and "sm-training-research" in decided.message
    assert decided.row.skip_reason is SkipReason.QUEUE_NOT_MANAGED
    # Decided on the event's queue already: no lineage read, no Describe call.
    assert row_of(decide(Case(facts_of(raw)), other, NOW)) is Row.QUEUE_NOT_MANAGED
    # A training job has no queue: the queue setting never skips it.
    training = sample("sagemaker/failed-capacity-error")
    assert scope_row(training, settings(job_queues=QUEUE, execution_roles=ROLE)) is None


def test_row_7_role_not_allowed() -> None:
    training = sample("sagemaker/failed-capacity-error")
    assert scope_row(training, settings(execution_roles=ROLE), role=OTHER_ROLE) is Row.ROLE_NOT_ALLOWED
    assert scope_row(training, settings(), role=OTHER_ROLE) is None
    # Container jobs pass no SageMaker role.
    assert scope_row(sample("batch-job/failed-spot-reclaim"), settings(execution_roles=ROLE)) is None
    # A service job's role comes from its payload.
    service = sample("service-job/failed-sagemaker-capacity")
    assert scope_row(service, settings(execution_roles=ROLE), role=None) is Row.ROLE_NOT_ALLOWED


def test_row_8_not_found() -> None:
    facts = facts_of(sample("batch-job/failed-spot-reclaim"))
    decided = decide(Case(facts, job=None), settings(), NOW)
    assert isinstance(decided, Decision) and decided.row is Row.NOT_FOUND
    assert decided.row.skip_reason is SkipReason.NOT_FOUND and "no longer describes" in decided.message


# ------------------------------------------------------------------------ rows 11-15: the lineage
def attempt(n: int, failed: str, state: AttemptState = AttemptState.SUBMITTED, **kw: Any) -> AttemptRecord:
    return AttemptRecord(
        attempt=n,
        failed_job_arn=failed,
        category=kw.pop("category", Category.PREEMPTION),
        reason=None,
        decided_at=kw.pop("decided_at", NOW - timedelta(hours=5)),
        operation=Operation.SUBMIT_SERVICE_JOB,
        new_job_name=f"job-r{n}-abcdef",
        state=state,
        new_job_arn=kw.pop("new_job_arn", f"arn:new-{n}" if state is AttemptState.SUBMITTED else None),
        published=kw.pop("published", True),
        **kw,
    )


def lineage(*records: AttemptRecord, used: dict[Category, int] | None = None) -> Lineage:
    base = Lineage("bpabc", JobKind.SERVICE_JOB, "arn:orig", "job", None, NOW - timedelta(days=1))
    for record in records:
        base = base.with_attempt(record)
    if used is not None:
        base = replace(base, used=used)
    return base


def do_plan(record: Lineage | None, failed: str, failed_attempt: int, **kw: Any) -> Decision:
    """The decision for the failure of ``failed`` (resubmission ``failed_attempt`` of lineage
    ``record``), with everything else letting it through (found checkpoint, default scope)."""
    facts = replace(facts_of(sample(PREEMPTED)), arn=failed, category=kw.get("category", Category.PREEMPTION))
    case = Case(
        facts,
        job=snapshot_of(facts),
        lineage=LineageView(LineageRef("bpabc", failed_attempt), record),
        checkpoint=kw.get("checkpoint", FOUND),
    )
    values: dict[str, Any] = {
        "budgets": {k.value: v for k, v in kw.get("budgets", DEFAULT_BUDGETS).items()},
        "backoff_base_seconds": kw.get("base", 60.0),
        "backoff_max_seconds": kw.get("cap", 3600.0),
    }
    decided = decide(case, settings(**values, **kw.get("settings", {})), kw.get("now", NOW))
    assert isinstance(decided, Decision), decided
    return decided


def test_first_failure_plans_attempt_1() -> None:
    decided = do_plan(None, "arn:orig", 0)
    assert (decided.row, decided.attempt, decided.used, decided.limit) == (Row.RESUBMIT, 1, 0, 3)


def test_row_9_duplicates_and_older_events() -> None:
    record = lineage(attempt(1, "arn:orig"))
    assert do_plan(record, "arn:orig", 0).row is Row.ALREADY_HANDLED  # the same failure again
    record2 = record.with_attempt(attempt(2, "arn:new-1"))
    assert do_plan(record2, "arn:orig", 0).row is Row.ALREADY_HANDLED  # an older failure, late
    assert do_plan(record2, "arn:new-1", 1).row is Row.ALREADY_HANDLED
    assert do_plan(record2, "arn:new-2", 2).row is Row.RESUBMIT
    # An attempt number already taken by another job's failure.
    assert do_plan(lineage(attempt(1, "arn:other")), "arn:orig", 0).row is Row.ALREADY_HANDLED


def test_a_failure_already_answered_is_decided_before_describe() -> None:
    facts = facts_of(sample(PREEMPTED))
    answered = lineage(attempt(1, facts.arn))
    known = LineageView(LineageRef("bpabc", 0), answered)
    decided = decide(Case(facts, lineage=known), settings(), NOW)
    assert (
        isinstance(decided, Decision) and decided.row is Row.ALREADY_HANDLED and decided.step is Step.NOTHING
    )
    # Not answered yet: the description comes next.
    assert decide(Case(facts, lineage=LineageView(LineageRef("bpabc", 0), None)), settings(), NOW) is (
        Need.DESCRIPTION
    )


def test_rows_10_and_11_unconfirmed_attempts_are_resumed_and_unpublished_ones_published() -> None:
    submitting = lineage(attempt(1, "arn:orig", AttemptState.SUBMITTING, published=False))
    decided = do_plan(submitting, "arn:orig", 0, checkpoint=UNKNOWN)  # no checkpoint listing needed
    assert decided.row is Row.SUBMIT_NOT_CONFIRMED and decided.record is not None and decided.attempt == 1
    assert decided.step is Step.RESUME
    unpublished = lineage(attempt(1, "arn:orig", published=False))
    assert do_plan(unpublished, "arn:orig", 0, checkpoint=UNKNOWN).row is Row.NOT_PUBLISHED
    failed = lineage(attempt(1, "arn:orig", AttemptState.FAILED, error_code="ResourceLimitExceeded"))
    assert do_plan(failed, "arn:orig", 0).row is Row.ALREADY_HANDLED


def test_row_12_budget_per_category() -> None:
    record = lineage(*(attempt(n, f"arn:new-{n - 1}" if n > 1 else "arn:orig") for n in (1, 2, 3)))
    decided = do_plan(record, "arn:new-3", 3)
    assert decided.row is Row.BUDGET_EXHAUSTED and decided.row.critical
    assert (decided.used, decided.limit) == (3, 3)
    assert "PREEMPTION budget exhausted: 3 of 3" in decided.message
    # Budgets are separate: the same lineage may still use its spot budget.
    assert do_plan(record, "arn:new-3", 3, category=Category.SPOT_INTERRUPTION).row is Row.RESUBMIT
    # A budget of 0 turns recovery off for that category.
    assert (
        do_plan(None, "arn:orig", 0, budgets={**DEFAULT_BUDGETS, Category.PREEMPTION: 0}).row
        is Row.BUDGET_EXHAUSTED
    )


def test_a_lost_record_counts_the_tagged_attempts_against_the_budget() -> None:
    assert do_plan(None, "arn:new-3", 3).row is Row.BUDGET_EXHAUSTED
    assert do_plan(None, "arn:new-2", 2).row is Row.RESUBMIT


def test_row_13_exponential_backoff_between_resubmissions() -> None:
    first = lineage(attempt(1, "arn:orig", decided_at=NOW - timedelta(seconds=30)))
    decided = do_plan(first, "arn:new-1", 1)
    assert decided.row is Row.BACKOFF and decided.defer_seconds == pytest.approx(30)
    assert decided.step is Step.DEFER
    assert do_plan(first, "arn:new-1", 1, now=NOW + timedelta(seconds=30)).row is Row.RESUBMIT
    second = first.with_attempt(attempt(2, "arn:new-1", decided_at=NOW))
    assert do_plan(second, "arn:new-2", 2, now=NOW + timedelta(seconds=119)).row is Row.BACKOFF  # 2 x 60
    assert do_plan(second, "arn:new-2", 2, now=NOW + timedelta(seconds=120)).row is Row.RESUBMIT
    capped = do_plan(second, "arn:new-2", 2, base=60, cap=90, now=NOW + timedelta(seconds=89))
    assert capped.row is Row.BACKOFF and capped.defer_seconds == pytest.approx(1)


def test_base_name_strips_our_own_suffix() -> None:
    assert base_name("llama-pretrain-r3-abc123") == "llama-pretrain"
    assert base_name("llama-pretrain") == "llama-pretrain"
    assert base_name("run-r2") == "run-r2"


def test_the_lineage_of_a_job_comes_from_its_tags_else_its_arn() -> None:
    assert ref_from_tags("arn:x", {LINEAGE_TAG: "bp1", ATTEMPT_TAG: "2"}) == LineageRef("bp1", 2)
    assert ref_from_tags("arn:x", {LINEAGE_TAG: "bp1", ATTEMPT_TAG: "two"}) == LineageRef(
        lineage_id_for("arn:x"), 0
    )
    assert ref_from_tags("arn:x", {}) == LineageRef(lineage_id_for("arn:x"), 0)


# ------------------------------------------------------------------------ rows 16-18: checkpoint
def test_row_14_no_checkpoint() -> None:
    empty = CheckpointState(LOCATION)
    refuse = {"no_checkpoint": "refuse"}
    assert do_plan(None, "arn:orig", 0, checkpoint=FOUND, settings=refuse).row is Row.RESUBMIT
    decided = do_plan(None, "arn:orig", 0, checkpoint=empty, settings=refuse)
    assert decided.row is Row.NO_CHECKPOINT and decided.row.skip_reason is SkipReason.NO_CHECKPOINT
    assert "s3://ckpt/run/" in decided.message
    proceed = do_plan(None, "arn:orig", 0, checkpoint=empty, settings={"no_checkpoint": "proceed"})
    assert proceed.row is Row.RESUBMIT and proceed.message == "restarts from step 0 (no checkpoint)"
    # The default (refuse-if-configured): a job that configures checkpoints is not restarted from
    # step 0, and the page says why; a job that configures none restarts as it always would.
    default = do_plan(None, "arn:orig", 0, checkpoint=empty)
    assert default.row is Row.NO_CHECKPOINT and "the job configures checkpoints" in default.message
    unconfigured = do_plan(None, "arn:orig", 0, checkpoint=CheckpointState(None))
    assert unconfigured.row is Row.RESUBMIT and unconfigured.message == "restarts from step 0 (no checkpoint)"
    assert (
        do_plan(None, "arn:orig", 0, checkpoint=CheckpointState(None), settings=refuse).row
        is Row.NO_CHECKPOINT
    )
    # A listing that failed is no longer a state: the adapter raises CheckpointListError and the
    # record is retried (tests/integration/test_recovery_flow.py). A checkpoint that does not count
    # says why in the skip message.
    stale = CheckpointState(LOCATION, newest_key="run/step-10.pt", rejected="stale: 30.0 h old")
    refused = do_plan(None, "arn:orig", 0, checkpoint=stale, settings=refuse)
    assert refused.row is Row.NO_CHECKPOINT and "stale: 30.0 h old" in refused.message
    restarted = do_plan(None, "arn:orig", 0, checkpoint=stale, settings={"no_checkpoint": "proceed"})
    assert restarted.row is Row.RESUBMIT and "stale" in restarted.message


# ------------------------------------------------------------------------ which checkpoint counts
_START = NOW - timedelta(hours=10)


@pytest.mark.parametrize(
    ("written", "not_before", "counts", "why"),
    [
        (NOW - timedelta(hours=1), _START, True, None),
        (_START - timedelta(days=60), _START, False, "foreign"),  # before the lineage's first attempt
        (NOW - timedelta(hours=30), NOW - timedelta(days=3), False, "stale"),  # older than 24 h
        (NOW - timedelta(hours=30), None, False, "stale"),
        (NOW - timedelta(hours=23), None, True, None),
    ],
)
def test_a_checkpoint_counts_when_written_after_the_first_attempt_and_fresh(
    written: datetime, not_before: datetime | None, counts: bool, why: str | None
) -> None:
    listed = CheckpointState(LOCATION, newest=written, objects=4, newest_key="run/step-10.pt")
    state = counted(listed, not_before=not_before, failed_at=NOW, max_age_seconds=86_400)
    assert (state.newest is not None) is counts
    assert state.age_seconds == (NOW - written).total_seconds()
    assert state.object_uri == "s3://ckpt/run/step-10.pt"
    if why:
        assert state.rejected is not None and state.rejected.startswith(why)
        assert "s3://ckpt/run/step-10.pt" in state.rejected
    else:
        assert state.rejected is None


def test_an_array_child_looks_under_its_own_index() -> None:
    assert for_array_index(LOCATION, 7).uri == "s3://ckpt/run/7/"
    assert for_array_index(LOCATION, 7).prefix == "run/7/"
    no_slash = parse_s3_uri("s3://ckpt/run", "parameter:checkpoint_uri")
    assert no_slash is not None and for_array_index(no_slash, 0).prefix == "run/0/"
    templated = parse_s3_uri("s3://ckpt/sweep/${AWS_BATCH_JOB_ARRAY_INDEX}/ckpt/", "parameter:checkpoint_uri")
    assert templated is not None
    assert for_array_index(templated, 3).prefix == "sweep/3/ckpt/"


def test_the_checkpoint_is_listed_last_and_only_for_a_resubmission() -> None:
    facts = facts_of(sample(PREEMPTED))
    lineage_view = LineageView(LineageRef("bpabc", 0), None)
    assert (
        decide(Case(facts, job=snapshot_of(facts), lineage=lineage_view), settings(), NOW) is Need.CHECKPOINT
    )
    exhausted = settings(budgets="PREEMPTION=0")
    decided = decide(Case(facts, job=snapshot_of(facts), lineage=lineage_view), exhausted, NOW)
    assert row_of(decided) is Row.BUDGET_EXHAUSTED


def test_rows_15_and_16_dry_run_or_resubmit() -> None:
    dry = do_plan(None, "arn:orig", 0, settings={"dry_run": True})
    assert (dry.row, dry.step, dry.attempt) == (Row.DRY_RUN, Step.DRY_RUN, 1)
    real = do_plan(None, "arn:orig", 0)
    assert (real.row, real.step, real.attempt) == (Row.RESUBMIT, Step.RESUBMIT, 1)


# ------------------------------------------------------------------------ the table, one test per row
def _row_case(row: Row) -> tuple[Case, RecoverySettings]:
    """A case the row decides (with the settings it needs)."""
    spot = sample("batch-job/failed-spot-reclaim")
    cases: dict[Row, Callable[[], tuple[Case, RecoverySettings]]] = {
        Row.CREATED_BY_BATCH: lambda: (
            Case(facts_of(sample("sagemaker/created-by-batch-failed"))),
            settings(),
        ),
        Row.RETRIES_LEFT: lambda: (
            Case(facts_of(sample("batch-job/runnable-retrying-after-spot-reclaim"))),
            settings(),
        ),
        Row.NOT_TERMINAL: lambda: (Case(facts_of(sample("batch-job/running"))), settings()),
        Row.SUCCEEDED: lambda: (Case(facts_of(sample("sagemaker/completed"))), settings()),
        Row.NOT_RECOVERABLE: lambda: (
            Case(facts_of(sample("batch-job/failed-application-error"))),
            settings(),
        ),
        Row.TIME_LIMIT_ACTION: lambda: (
            Case(
                facts_of(sample("service-job/failed-job-state-time-limit")),
                job=snapshot_of(sample("service-job/failed-job-state-time-limit")),
            ),
            settings(),
        ),
        Row.QUEUE_NOT_MANAGED: lambda: (Case(facts_of(spot)), settings(job_queues="elsewhere")),
        Row.ROLE_NOT_ALLOWED: lambda: (
            Case(
                facts_of(sample("sagemaker/failed-capacity-error")),
                job=snapshot_of(sample("sagemaker/failed-capacity-error"), role=OTHER_ROLE),
            ),
            settings(execution_roles=ROLE),
        ),
        Row.NOT_FOUND: lambda: (Case(facts_of(spot), job=None), settings()),
        Row.PREEMPTION_RETRIES_SPENT: lambda: (
            Case(facts_of(sample(PREEMPTED)), job=_with_preemption_retries(sample(PREEMPTED), 2)),
            settings(),
        ),
        Row.ALREADY_HANDLED: lambda: (
            Case(
                facts_of(spot),
                lineage=LineageView(LineageRef("bpabc", 0), lineage(attempt(1, facts_of(spot).arn))),
            ),
            settings(),
        ),
        Row.SUBMIT_NOT_CONFIRMED: lambda: _described(
            spot, lineage(attempt(1, facts_of(spot).arn, AttemptState.SUBMITTING, published=False))
        ),
        Row.NOT_PUBLISHED: lambda: _described(spot, lineage(attempt(1, facts_of(spot).arn, published=False))),
        Row.BUDGET_EXHAUSTED: lambda: _described(spot, None, budgets="SPOT_INTERRUPTION=0"),
        Row.BACKOFF: lambda: _described(
            spot, lineage(attempt(1, "arn:orig", decided_at=NOW)), ref=LineageRef("bpabc", 1)
        ),
        Row.NO_CHECKPOINT: lambda: _described(spot, None, CheckpointState(LOCATION), no_checkpoint="refuse"),
        Row.DRY_RUN: lambda: _described(spot, None, FOUND, dry_run=True),
        Row.RESUBMIT: lambda: _described(spot, None, FOUND),
    }
    return cases[row]()


def _with_preemption_retries(raw: dict[str, Any], retries: int) -> JobSnapshot:
    """The described service job with ``preemptionConfiguration.preemptionRetriesBeforeTermination``."""
    job = snapshot_of(raw)
    return replace(
        job, described={"preemptionConfiguration": {"preemptionRetriesBeforeTermination": retries}}
    )


def test_administrators_limits_are_respected_unless_configured() -> None:
    # A service job its queue's jobStateTimeLimitActions terminated (a container job's CAPACITY
    # failure is not recovered at all: row 5 comes first).
    for name in ("service-job/failed-job-state-time-limit",):
        facts = facts_of(sample(name))
        decided = decide(Case(facts, job=snapshot_of(facts)), settings(), NOW)
        assert row_of(decided) is Row.TIME_LIMIT_ACTION, name
        assert isinstance(decided, Decision) and "jobStateTimeLimitActions" in decided.message
        opted_in = decide(Case(facts, job=snapshot_of(facts)), settings(resubmit_time_limited=True), NOW)
        assert row_of(opted_in) is not Row.TIME_LIMIT_ACTION, name
    # A service job Batch failed after its preemptionRetriesBeforeTermination.
    facts = facts_of(sample(PREEMPTED))
    view = LineageView(LineageRef("bpabc", 0), None)
    limited = Case(facts, job=_with_preemption_retries(sample(PREEMPTED), 2), lineage=view)
    decided = decide(limited, settings(), NOW)
    assert row_of(decided) is Row.PREEMPTION_RETRIES_SPENT
    assert isinstance(decided, Decision) and "2 preemption retries" in decided.message
    assert decide(limited, settings(extend_preemption_retries=True), NOW) is Need.CHECKPOINT
    unlimited = Case(facts, job=snapshot_of(sample(PREEMPTED)), lineage=view)  # Batch requeues forever
    assert decide(unlimited, settings(), NOW) is Need.CHECKPOINT


def _described(
    raw: dict[str, Any],
    record: Lineage | None,
    checkpoint: CheckpointState | None = None,
    *,
    ref: LineageRef | None = None,
    **values: Any,
) -> tuple[Case, RecoverySettings]:
    facts = facts_of(raw)
    view = LineageView(ref or LineageRef("bpabc", 0), record)
    return Case(facts, snapshot_of(raw), view, checkpoint or UNKNOWN), settings(**values)


@pytest.mark.parametrize("row", list(Row), ids=[f"{r.number}-{r.name}" for r in Row])
def test_each_row_decides(row: Row) -> None:
    case, s = _row_case(row)
    decided = decide(case, s, NOW)
    assert isinstance(decided, Decision) and decided.row is row, decided
    assert decided.step is row.step
    assert (row.step is Step.SKIP) == (row.skip_reason is not None and row is not Row.ALREADY_HANDLED)


def test_the_rows_are_numbered_in_order() -> None:
    assert [row.number for row in Row] == list(range(1, len(Row) + 1))
    assert {row.skip_reason for row in Row if row.skip_reason} <= set(SkipReason)
    assert [row for row in Row if row.critical] == [Row.BUDGET_EXHAUSTED]


def test_the_docs_table_is_the_code_s_table() -> None:
    # docs/recovery.md, "When it acts: the decision table", has the rows of batchpilot.recovery.policy.Row.
    page = (ROOT / "docs" / "recovery.md").read_text(encoding="utf-8")
    section = page[page.index("## When it acts: the decision table") :]
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| # |"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    assert table == policy.table_markdown(), "\n".join(policy.table_markdown())
    assert re.search(r"batchpilot/recovery/policy\.py", section.split("\n\n| job |")[0])


# ------------------------------------------------------------------------ settings
def test_settings_defaults_and_environment() -> None:
    s = RecoverySettings.from_environ({"BATCHPILOT_STATE_TABLE": "StateTable"}, function="recovery")
    assert s.budgets == DEFAULT_BUDGETS
    # Changed by the safe defaults: no job queue named (so dry-run), and no step-0 restart for
    # jobs that configure checkpoints.
    assert s.job_queues == () and s.execution_roles == ("*",)
    assert s.dry_run_reason == "no job queue is named in BATCHPILOT_RECOVERY_JOB_QUEUES"
    assert s.no_checkpoint is NoCheckpoint.REFUSE_IF_CONFIGURED and s.dry_run is False
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


def test_with_no_job_queue_named_every_decision_is_a_dry_run() -> None:
    none_named = RecoverySettings.from_mapping({"state_table": "StateTable"})
    spot = sample("batch-job/failed-spot-reclaim")
    view = LineageView(LineageRef("bpabc", 0), None)
    facts = facts_of(spot)
    # A failure that would be resubmitted is decided as dry-run, and the message says why.
    decided = decide(Case(facts, snapshot_of(spot), view, FOUND), none_named, NOW)
    assert isinstance(decided, Decision) and decided.row is Row.DRY_RUN
    assert "no job queue is named" in decided.message and "nothing is submitted" in decided.message
    # Skips say so too.
    skipped = decide(Case(facts_of(sample("batch-job/failed-application-error"))), none_named, NOW)
    assert isinstance(skipped, Decision) and skipped.row is Row.NOT_RECOVERABLE
    assert skipped.message.endswith(
        "dry run (no job queue is named in BATCHPILOT_RECOVERY_JOB_QUEUES): nothing is submitted"
    )
    # Naming queues turns it on for those only.
    named = settings(job_queues="gpu-spot-queue")
    assert row_of(decide(Case(facts, snapshot_of(spot), view, FOUND), named, NOW)) is Row.RESUBMIT
    other = settings(job_queues="ml-training-highpri")
    assert row_of(decide(Case(facts), other, NOW)) is Row.QUEUE_NOT_MANAGED
