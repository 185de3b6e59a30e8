"""The default severity table (alerts/severity.py; docs/alerts.md, "What pages and what posts") on
every sample event and on batchpilot's own events, and the facts' de-duplication keys."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from batchpilot.alerts.facts import recovery_will_handle
from batchpilot.alerts.policy import RoutingPolicy, Severity
from batchpilot.alerts.severity import decide, default_severity
from batchpilot.recovery.policy import RECOVERABLE
from batchpilot.shared.own_events import (
    CapacityAdjusted,
    CapacityLimited,
    CapacityLimitReason,
    JobResubmitted,
    JobStarving,
    OwnEvent,
    RecoveryFailed,
    RecoverySkipped,
    SkipReason,
    StarvationReason,
    put_events_entry,
)
from batchpilot_local.testing.alerts import fact_of
from batchpilot_local.testing.samples import batch_job, sample, sample_event_paths, service_job, training_job

C, W, INFO, S = Severity.CRITICAL, Severity.WARNING, Severity.INFO, Severity.SILENT

EXPECTED: dict[str, Severity] = {
    "batch-job/array-child-failed": INFO,  # spot reclaim, retries spent: recovery resubmits
    "batch-job/failed-application-error": C,
    "batch-job/failed-attempt-timeout": W,
    "batch-job/failed-before-start-no-attempts": C,
    "batch-job/failed-cannot-pull-container": C,
    "batch-job/failed-job-state-time-limit": C,  # capacity on a container job: not recovered
    "batch-job/failed-eks-oom-killed": C,  # OUT_OF_MEMORY: not recovered
    "batch-job/failed-out-of-memory": C,
    "batch-job/failed-spot-reclaim": INFO,
    "batch-job/failed-without-job-arn": C,
    "batch-job/multi-node-node-failed-ecs-properties": S,  # a node: its parent's event pages
    "batch-job/multi-node-parent-failed": C,
    "batch-job/replayed-succeeded": S,
    "batch-job/runnable-retrying-after-spot-reclaim": INFO,  # Batch is retrying: no page
    "batch-job/running": S,
    "batch-job/succeeded": S,
    "batch-job-queue-blocked/capacity-insufficient-instance-capacity": W,
    "batch-job-queue-blocked/misconfiguration-job-resource-requirement": C,
    "sagemaker/completed": S,
    "sagemaker/created-by-batch-failed": S,  # its service job speaks for it
    "sagemaker/failed-algorithm-error": C,
    "sagemaker/failed-capacity-error": INFO,
    "sagemaker/failed-ec2-insufficient-capacity": INFO,
    "sagemaker/failed-internal-server-error": INFO,
    "sagemaker/failed-resource-limit-exceeded": C,  # QUOTA: paged at once, never resubmitted
    "sagemaker/in-progress-interrupted": INFO,
    "sagemaker/in-progress-training": S,
    "sagemaker/stopped-by-user": INFO,  # a person stopped it: no page
    "sagemaker/stopped-max-runtime-exceeded": W,  # TIMEOUT alerts
    "sagemaker/stopped-max-wait-time-exceeded": INFO,  # spot starvation: recovery resumes it
    "service-job/failed-algorithm-error": C,
    "service-job/failed-internal-server-error": INFO,
    "service-job/failed-job-state-time-limit": INFO,
    "service-job/failed-preemption-budget-spent": INFO,
    "service-job/failed-resource-limit-exceeded": C,
    "service-job/failed-sagemaker-capacity": INFO,
    "service-job/failed-user-terminated": INFO,
    "service-job/failed-validation": C,
    "service-job/runnable-capacity": S,
    "service-job/running": S,
    "service-job/scheduled": S,
    "service-job/succeeded": S,
    "service-job-preemption/completed": S,
    "service-job-preemption/started": INFO,
    "service-job-queue-blocked/capacity-insufficient-instance-capacity": W,
    "service-job-queue-blocked/misconfiguration-quota-management-limit-exceeded": C,
    "service-job-queue-blocked/misconfiguration-service-environment-max-resource": C,
    "service-job-queue-blocked/undetermined": W,
    # The stack's alarms: the severity their description names; OK after ALARM is a resolution.
    "cloudwatch-alarm/alerts-errors-alarm": C,
    "cloudwatch-alarm/idle-while-queued-ok-after-insufficient-data": S,  # a new alarm's first evaluation
    "cloudwatch-alarm/job-failure-rate-alarm": C,
    "cloudwatch-alarm/job-failure-rate-copy": C,
    "cloudwatch-alarm/job-failure-rate-ok": INFO,
    "cloudwatch-alarm/lost-instance-hours-alarm": W,
}


def test_every_job_sample_has_an_expected_severity() -> None:
    names = {
        str(p.relative_to(p.parents[1])).removesuffix(".json")
        for p in sample_event_paths()
        if p.parent.name not in {"ignored"} and "scenarios" not in p.parts
    }
    assert names == set(EXPECTED)


@pytest.mark.parametrize(("name", "severity"), sorted(EXPECTED.items()))
def test_default_severity_of_sample(name: str, severity: Severity) -> None:
    fact = fact_of(sample(name))
    decision = decide(fact, RoutingPolicy())
    assert decision.severity is severity, decision.why
    assert decision.why


def own(event: OwnEvent) -> dict[str, Any]:
    """The event as EventBridge delivers it (envelope + detail)."""
    entry = put_events_entry(event, "default")
    return {
        "version": "0",
        "id": "f0000000-0000-4000-8000-000000000001",
        "detail-type": entry["DetailType"],
        "source": entry["Source"],
        "account": "111122223333",
        "time": event.time.isoformat(),
        "region": "us-east-1",
        "resources": [],
        "detail": json.loads(entry["Detail"]),
    }


NOW = datetime(2026, 11, 20, 10, 30, tzinfo=UTC)
JOB = "arn:aws:batch:us-east-1:111122223333:service-job/4c7599ae-0a82-49aa-ba5a-4727fcce14a8"


def skipped(reason: SkipReason, category: str = "PREEMPTION", **extra: Any) -> RecoverySkipped:
    return RecoverySkipped(
        time=NOW,
        job_arn=JOB,
        job_kind="service-job",
        job_name="llama-pretrain",
        job_queue="ml-training-highpri",
        category=category,
        skip_reason=reason,
        message="m",
        **extra,
    )


@pytest.mark.parametrize(
    ("event", "severity"),
    [
        (skipped(SkipReason.BUDGET_EXHAUSTED, budget_used=3, budget_limit=3), C),
        (skipped(SkipReason.QUEUE_NOT_MANAGED), C),  # the job event deferred to recovery: now nobody acts
        (skipped(SkipReason.NO_CHECKPOINT), C),
        (skipped(SkipReason.NOT_FOUND), W),  # AWS no longer knows the job: Slack, not a page
        (skipped(SkipReason.NOT_RECOVERABLE, category="APPLICATION_ERROR"), S),  # already paged
        (skipped(SkipReason.QUEUE_NOT_MANAGED, category="MISCONFIGURATION"), S),  # already paged
        (skipped(SkipReason.NOT_TERMINAL), S),
        (skipped(SkipReason.ALREADY_HANDLED), S),
        (skipped(SkipReason.DRY_RUN), INFO),
        (skipped(SkipReason.RETRIES_LEFT, critical=True), C),  # the producer's own flag wins
        (
            JobResubmitted(
                time=NOW,
                lineage_id="lin-1",
                attempt=1,
                job_kind="service-job",
                original_job_arn=JOB,
                failed_job_arn=JOB,
                new_job_arn=JOB + "-r1",
                new_job_name="llama-pretrain-r1",
                category="PREEMPTION",
                operation="batch:SubmitServiceJob",
            ),
            INFO,
        ),
        (
            RecoveryFailed(
                time=NOW,
                job_arn=JOB,
                job_kind="service-job",
                lineage_id="lin-1",
                attempt=1,
                operation="batch:SubmitServiceJob",
                error_code="ResourceLimitExceeded",
                error_message="quota",
            ),
            W,
        ),
        (
            RecoveryFailed(
                time=NOW,
                job_arn=JOB,
                job_kind="service-job",
                lineage_id="lin-1",
                attempt=1,
                operation="batch:SubmitServiceJob",
                error_code="ThrottlingException",
                error_message="slow down",
                will_retry=True,
            ),
            S,
        ),
        (
            CapacityAdjusted(
                time=NOW,
                service_environment="se-p5",
                capacity_unit="NUM_INSTANCES",
                previous_max=4,
                new_max=8,
                in_use=4,
                runnable_demand=4,
                reason="demand",
            ),
            INFO,
        ),
        (
            CapacityLimited(
                time=NOW,
                service_environment="se-p5",
                capacity_unit="NUM_INSTANCES",
                current_max=8,
                desired=16,
                configured_max=8,
                limit_reason=CapacityLimitReason.BLOCKED_JOB_EXCEEDS_MAX,
                message="a job needs 16 instances",
                job_arn=JOB,
            ),
            C,
        ),
        (
            CapacityLimited(
                time=NOW,
                service_environment="se-p5",
                capacity_unit="NUM_INSTANCES",
                current_max=8,
                desired=12,
                configured_max=8,
                limit_reason=CapacityLimitReason.AT_MAX,
                message="at max",
            ),
            W,
        ),
        (
            CapacityLimited(
                time=NOW,
                service_environment="se-p5",
                capacity_unit="NUM_INSTANCES",
                current_max=8,
                desired=12,
                configured_max=16,
                limit_reason=CapacityLimitReason.COOLDOWN,
                message="cooldown",
            ),
            S,
        ),
        *(
            (
                JobStarving(
                    time=NOW,
                    job_arn=JOB,
                    job_kind="service-job",
                    job_name="train-7b",
                    job_queue="q",
                    share_identifier="LOWPRI",
                    scheduling_priority=10,
                    reason=reason,
                    preemptions=3,
                    message="job train-7b is starving",
                ),
                W,
            )
            for reason in StarvationReason
        ),
    ],
)
def test_default_severity_of_own_events(event: OwnEvent, severity: Severity) -> None:
    fact = fact_of(own(event))
    assert default_severity(fact)[0] is severity


def test_recovery_predicate_is_the_recovery_policys_table() -> None:
    assert RECOVERABLE and all(RECOVERABLE.values())
    for kind, categories in RECOVERABLE.items():
        for category in categories:
            assert recovery_will_handle(kind.value, category.value)
    assert not recovery_will_handle("container-job", "CAPACITY")
    assert not recovery_will_handle("service-job", "APPLICATION_ERROR")
    assert not recovery_will_handle("training-job", "CAPACITY", created_by_batch=True)
    assert not recovery_will_handle(None, "CAPACITY")
    assert not recovery_will_handle("service-job", "NOT_A_CATEGORY")


# ------------------------------------------------------------------------------- fact identity
def test_duplicates_with_different_envelope_ids_are_the_same_fact() -> None:
    first = sample("service-job/failed-validation")
    second = {**first, "id": "00000000-0000-4000-8000-00000000ffff", "time": "2026-11-20T11:00:00Z"}
    assert fact_of(first).key == fact_of(second).key


def test_attempts_and_status_make_different_facts() -> None:
    reclaim = {"statusReason": "Host EC2 (instance i-0abc) terminated."}
    one = batch_job("RUNNABLE", attempts=[{"container": {}, **reclaim, "startedAt": 1763633100000}])
    two = batch_job(
        "RUNNABLE",
        attempts=[{"container": {}, **reclaim, "startedAt": 1763633100000}, {"container": {}, **reclaim}],
    )
    failed = batch_job("FAILED", attempts=[{"container": {}, **reclaim}] * 2)
    keys = {fact_of(e).key for e in (one, two, failed)}
    assert len(keys) == 3


def test_progress_orders_terminal_after_everything_and_attempts_before_time() -> None:
    running = fact_of(batch_job("RUNNING", startedAt=1763633900000))
    failed = fact_of(batch_job("FAILED", attempts=[{"container": {"exitCode": 1}}], stoppedAt=1763633000001))
    assert running.progress is not None and failed.progress is not None
    assert failed.progress > running.progress  # terminal wins whatever the timestamps say
    early = fact_of(batch_job("RUNNING", startedAt=1763633100000))
    assert running.progress > early.progress


def test_own_events_use_their_natural_keys() -> None:
    resubmitted = JobResubmitted(
        time=NOW,
        lineage_id="lin-9",
        attempt=2,
        job_kind="service-job",
        original_job_arn=JOB,
        failed_job_arn=JOB + "-r1",
        new_job_arn=JOB + "-r2",
        new_job_name="x-r2",
        category="CAPACITY",
        operation="batch:SubmitServiceJob",
    )
    fact = fact_of(own(resubmitted))
    assert fact.key == (JOB + "-r1", "resubmitted#lin-9#2")
    assert fact.related_subjects == (JOB + "-r2",)
    later = fact_of({**own(resubmitted), "id": "other", "time": "2026-11-21T00:00:00Z"})
    assert later.fact_id == fact.fact_id


def test_training_job_interruptions_are_separate_facts() -> None:
    first = training_job("InProgress", SecondaryStatus="Interrupted", LastModifiedTime="1763633100000")
    second = training_job("InProgress", SecondaryStatus="Interrupted", LastModifiedTime="1763634100000")
    assert fact_of(first).key != fact_of(second).key
    assert fact_of(first).key == fact_of({**first, "id": "x"}).key


def test_service_job_fact_knows_its_training_job() -> None:
    fact = fact_of(sample("service-job/failed-sagemaker-capacity"))
    assert fact.training_job_arn and fact.training_job_arn.startswith("arn:aws:sagemaker:")
    assert fact.training_job_name and fact.log_group == "/aws/sagemaker/TrainingJobs"
    assert fact.job_id == fact.subject.rsplit("/", 1)[-1]
    blocked = fact_of(service_job("RUNNABLE", "Batch Service Job Queue Blocked", statusReason="CAPACITY:X"))
    assert blocked.fact_id.startswith("blocked#CAPACITY")


def test_a_resubmission_is_named_after_the_job_not_its_id() -> None:
    base = {
        "time": NOW,
        "lineage_id": "lin-9",
        "attempt": 1,
        "job_kind": "service-job",
        "original_job_arn": JOB,
        "failed_job_arn": JOB,
        "new_job_arn": JOB + "-r1",
        "new_job_name": "llama-pretrain-r1-abc",
        "category": "PREEMPTION",
        "operation": "batch:SubmitServiceJob",
    }
    named = fact_of(own(JobResubmitted(**base, job_name="llama-pretrain")))
    assert named.job_name == "llama-pretrain"
    unnamed = fact_of(own(JobResubmitted(**base)))  # an older producer: the ARN's last part
    assert unnamed.job_name == JOB.rsplit("/", 1)[-1]


def test_a_resubmission_names_both_jobs_and_links_both() -> None:
    from batchpilot.alerts.oncall import sns_message
    from batchpilot.alerts.render import console_links, title

    new_arn = "arn:aws:batch:us-east-1:111122223333:service-job/0d7a1c2e-1111-4000-8000-000000000001"
    event = JobResubmitted(
        time=NOW,
        lineage_id="lin-9",
        attempt=1,
        job_kind="service-job",
        job_name="llama-pretrain",
        original_job_arn=JOB,
        failed_job_arn=JOB,
        new_job_arn=new_arn,
        new_job_name="llama-pretrain-r1-abc",
        category="CAPACITY",
        operation="batch:SubmitServiceJob",
        checkpoint_uri="s3://ckpt/run/",
        checkpoint_object="s3://ckpt/run/step-1000/model.pt",
        checkpoint_age_seconds=5400,
    )
    fact = fact_of(own(event))
    assert title(fact).startswith("service job llama-pretrain resubmitted as llama-pretrain-r1-abc")
    links = dict(console_links(fact))
    assert links["Failed job"].endswith("#jobs/detail/4c7599ae-0a82-49aa-ba5a-4727fcce14a8")
    assert links["New job"].endswith("#jobs/detail/0d7a1c2e-1111-4000-8000-000000000001")
    body = sns_message(fact, Severity.INFO, "why").body
    assert "s3://ckpt/run/step-1000/model.pt" in body and "1.5 h old at the failure" in body
    # In dry-run nothing was submitted: the title says so, and a failure announced as handled pages.
    dry = fact_of(own(event.model_copy(update={"new_job_arn": None, "dry_run": True})))
    assert title(dry).startswith("[dry run] service job llama-pretrain would be resubmitted")
    assert decide(dry, RoutingPolicy()).severity is Severity.CRITICAL
