"""Headlines fit their channel by design, at the limits of the names AWS allows.

Slack's header block holds at most 150 characters (Block Kit reference, header block), the SNS
subject at most 99 ASCII characters (Amazon SNS Publish, ``Subject``: fewer than 100), the Teams
card's title :data:`~batchpilot.alerts.channels.teams.TITLE_MAX`. Job names and job queue names are
up to 128 characters (AWS Batch SubmitJob ``jobName``, CreateJobQueue ``jobQueueName``: letters,
numbers, hyphens and underscores), service environment names too (CreateServiceEnvironment). A
headline says what happened and to what; a name that does not fit keeps its start and its end
(``…`` between); everything else is in the message's fields, which hold the whole name.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from batchpilot.alerts.channels.slack import HEADER_MAX, slack_digest, slack_message
from batchpilot.alerts.channels.teams import TITLE_MAX, teams_digest, teams_message
from batchpilot.alerts.facts import AlertFact, FactKind
from batchpilot.alerts.oncall import sns_digest, sns_message
from batchpilot.alerts.policy import Severity
from batchpilot.alerts.render import TRUNCATION_MARK, digest_headline, elide, headline, title
from batchpilot.shared.classification import Category
from batchpilot.shared.own_events import (
    CapacityAdjusted,
    CapacityLimited,
    CapacityLimitReason,
    GpuIdleReason,
    JobGpuIdle,
    JobResubmitted,
    JobStarving,
    RecoveryFailed,
    RecoverySkipped,
    SkipReason,
    StarvationReason,
)
from batchpilot_local.chat_endpoint import block_kit_problem
from batchpilot_local.testing.alerts import fact_of, own_envelope
from batchpilot_local.testing.samples import ACCOUNT, REGION, batch_job, sample
from hypothesis import given
from hypothesis import strategies as st

NAME_MAX = 128
"""AWS Batch: jobName, jobQueueName and serviceEnvironmentName are up to 128 characters."""
LONG_JOB = ("llama3-70b-pretrain-" + "x" * 200)[: NAME_MAX - 7] + "-run-39"
LONG_QUEUE = ("ml-training-" + "q" * 200)[: NAME_MAX - 8] + "-highpri"
LONG_ENV = ("sm-service-environment-" + "e" * 200)[: NAME_MAX - 4] + "-p5e"
WHEN = datetime(2026, 11, 20, 11, tzinfo=UTC)
LONGEST_CATEGORY = max((c.value for c in Category), key=len)
LONGEST_SKIP = max(SkipReason, key=lambda r: len(r.value))
LONGEST_LIMIT = max(CapacityLimitReason, key=lambda r: len(r.value))
LONGEST_STARVING = max(StarvationReason, key=lambda r: len(r.value))
SERVICE_JOB_ARN = f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/4c7599ae-0a82-49aa-ba5a-4727fcce14a8"


def queue_arn(name: str) -> str:
    return f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/{name}"


def utf16_length(text: str) -> int:
    """Characters as Slack may count them: UTF-16 code units (an emoji is two)."""
    return len(text.encode("utf-16-le")) // 2


def facts(job: str, queue: str, env: str) -> dict[FactKind | str, AlertFact]:
    """One fact of every kind the alerts function renders, with these names and the longest codes."""
    failed = batch_job(
        "FAILED",
        jobName=job,
        jobQueue=queue_arn(queue),
        attempts=[{"container": {"reason": "CannotPullContainerError: manifest unknown"}}],
    )
    retrying = sample("batch-job/runnable-retrying-after-spot-reclaim")
    retrying["detail"] |= {"jobName": job, "jobQueue": queue_arn(queue)}
    blocked = sample("batch-job-queue-blocked/capacity-insufficient-instance-capacity")
    blocked["detail"] |= {"jobName": job, "jobQueue": queue_arn(queue)}
    blocked["resources"] = [blocked["resources"][0], queue_arn(queue)]
    started, completed = sample("service-job-preemption/started"), sample("service-job-preemption/completed")
    for event in (started, completed):
        event["detail"] |= {"jobName": job, "jobQueue": queue_arn(queue)}
    common = {"time": WHEN, "job_kind": "service-job", "job_name": job, "job_queue": queue}
    own = {
        FactKind.JOB_RESUBMITTED: JobResubmitted(
            **common,
            lineage_id="bp0123456789abcdef0123",
            attempt=3,
            original_job_arn=SERVICE_JOB_ARN,
            failed_job_arn=SERVICE_JOB_ARN,
            new_job_arn=SERVICE_JOB_ARN.replace("4c7599ae", "5d8600bf"),
            new_job_name=(job + "-r3-bp0123")[-NAME_MAX:],
            category=LONGEST_CATEGORY,
            operation="batch:SubmitServiceJob",
            checkpoint_uri="s3://ckpt/run-39/",
        ),
        FactKind.RECOVERY_SKIPPED: RecoverySkipped(
            **common,
            job_arn=SERVICE_JOB_ARN,
            category=LONGEST_CATEGORY,
            skip_reason=LONGEST_SKIP,
            message="skipped",
            dry_run=True,
        ),
        FactKind.RECOVERY_FAILED: RecoveryFailed(
            **common,
            job_arn=SERVICE_JOB_ARN,
            lineage_id="bp0123456789abcdef0123",
            attempt=1,
            operation="batch:SubmitServiceJob",
            error_code="ServiceQuotaExceededException",
            error_message="quota",
        ),
        FactKind.CAPACITY_ADJUSTED: CapacityAdjusted(
            time=WHEN,
            service_environment=env,
            capacity_unit="NUM_INSTANCES",
            previous_max=4,
            new_max=8,
            in_use=4,
            runnable_demand=8,
            reason="DEMAND",
        ),
        FactKind.CAPACITY_LIMITED: CapacityLimited(
            time=WHEN,
            service_environment=env,
            capacity_unit="NUM_INSTANCES",
            current_max=8,
            desired=16,
            configured_max=8,
            limit_reason=LONGEST_LIMIT,
            message="limited",
        ),
        FactKind.JOB_STARVING: JobStarving(
            **common,
            job_arn=SERVICE_JOB_ARN,
            share_identifier="LOWPRI",
            scheduling_priority=10,
            reason=LONGEST_STARVING,
            waiting_seconds=7200,
            message="starving",
        ),
        FactKind.JOB_GPU_IDLE: JobGpuIdle(
            **common,
            job_arn=SERVICE_JOB_ARN,
            share_identifier="LOWPRI",
            scheduling_priority=10,
            reason=GpuIdleReason.STALLED,
            instance_type="ml.p5.48xlarge",
            instances=8,
            gpus=64,
            idle_since=WHEN,
            idle_seconds=7200,
            hourly_cost_usd=1234.5,
            message="idle",
        ),
    }
    out: dict[FactKind | str, AlertFact] = {
        "failed": fact_of(failed),
        "retrying": fact_of(retrying),
        FactKind.QUEUE_BLOCKED: fact_of(blocked),
        FactKind.PREEMPTION_STARTED: fact_of(started),
        FactKind.PREEMPTION_COMPLETED: fact_of(completed),
    }
    out |= {kind: fact_of(own_envelope(event)) for kind, event in own.items()}
    return out


def rendered(fact: AlertFact, severity: Severity) -> dict[str, str]:
    """The three length-limited headlines of ``fact``: Slack's header, the SNS subject, the Teams title."""
    slack = slack_message(fact, severity, "why")
    assert block_kit_problem(slack.payload()) is None
    teams = teams_message(fact, severity, "why")
    return {
        "slack": slack.blocks[0]["text"]["text"],
        "sns": sns_message(fact, severity, "why").subject,
        "teams": teams.card["body"][1]["inlines"][0]["text"],
    }


def assert_fits(shown: dict[str, str]) -> None:
    assert utf16_length(shown["slack"]) <= HEADER_MAX, shown["slack"]
    assert len(shown["sns"]) <= 99 and shown["sns"].isascii(), shown["sns"]
    assert len(shown["teams"]) <= TITLE_MAX, shown["teams"]
    for text in shown.values():
        assert TRUNCATION_MARK not in text and "truncated" not in text, text


def test_the_names_are_at_the_limit() -> None:
    assert len(LONG_JOB) == len(LONG_QUEUE) == len(LONG_ENV) == NAME_MAX
    assert len(LONGEST_CATEGORY) >= len("SPOT_INTERRUPTION")


@pytest.mark.parametrize("severity", [Severity.CRITICAL, Severity.WARNING, Severity.INFO])
def test_every_kind_fits_with_128_character_names(severity: Severity) -> None:
    made = facts(LONG_JOB, LONG_QUEUE, LONG_ENV)
    assert len(made) == 12
    for kind, fact in made.items():
        shown = rendered(fact, severity)
        assert_fits(shown)
        # The name is elided in its middle: its start and its end are both shown, in every channel.
        if kind in (FactKind.CAPACITY_ADJUSTED, FactKind.CAPACITY_LIMITED):
            name = LONG_ENV
        elif kind is FactKind.QUEUE_BLOCKED:
            name = LONG_QUEUE
        elif kind in (FactKind.PREEMPTION_STARTED, FactKind.PREEMPTION_COMPLETED):
            # Preemption events name the job by its ARN only: its id (36 characters) is shown whole.
            job_id = fact.subject.rsplit("/", 1)[1]
            assert fact.job_name is None and len(job_id) == 36
            assert all(f"service job {job_id}" in text for text in shown.values()), shown
            continue
        else:
            name = LONG_JOB
        assert name not in shown["sns"], "128 characters never fit a 99-character subject whole"
        for channel, text in shown.items():
            mark = "..." if channel == "sns" else "…"
            if name not in text:
                assert name[:6] in text and mark in text, (kind, channel, text)
                assert text.endswith(name[-3:]), (kind, channel, text)
        # Nothing is lost: the whole name is in the message (fields, body, the one-line text).
        assert name in sns_message(fact, severity, "why").body
        assert name in str(slack_message(fact, severity, "why").blocks)


def test_ordinary_names_are_shown_whole_with_the_job_queue() -> None:
    made = facts("llama3-8b-lora-ft-run-39", "gpu-spot-queue", "sm-training-p5")
    resubmitted = made[FactKind.JOB_RESUBMITTED]
    shown = rendered(resubmitted, Severity.WARNING)
    assert_fits(shown)
    what = f"Resubmitted ({LONGEST_CATEGORY}): service job llama3-8b-lora-ft-run-39 on gpu-spot-queue"
    assert shown == {"slack": f"🟠 WARNING · {what}", "sns": f"[WARNING] {what}", "teams": what}
    # The whole title, with the new job and the resubmission number, is the one-line text.
    assert slack_message(resubmitted, Severity.WARNING, "why").text == f"Warning: {title(resubmitted)}"
    assert "(resubmission 3)" in title(resubmitted)
    expected = {
        "failed": "FAILED (MISCONFIGURATION): container job llama3-8b-lora-ft-run-39 on gpu-spot-queue",
        "retrying": "Attempt lost to spot, Batch retrying: container job llama3-8b-lora-ft-run-39"
        " on gpu-spot-queue",
        FactKind.QUEUE_BLOCKED: "Job queue blocked (CAPACITY): gpu-spot-queue",
        FactKind.RECOVERY_SKIPPED: f"[dry run] Recovery skipped ({LONGEST_SKIP.value}): "
        "service job llama3-8b-lora-ft-run-39 on gpu-spot-queue",
        FactKind.CAPACITY_LIMITED: f"Capacity limited ({LONGEST_LIMIT.value}): sm-training-p5",
    }
    for kind, text in expected.items():
        assert headline(made[kind], 200) == text


def test_a_headline_drops_the_job_queue_before_it_elides_the_job() -> None:
    fact = facts("llama3-8b-lora-ft-run-39", LONG_QUEUE, LONG_ENV)["failed"]
    shown = rendered(fact, Severity.CRITICAL)
    assert_fits(shown)
    assert shown["slack"] == "🔴 CRITICAL · FAILED (MISCONFIGURATION): container job llama3-8b-lora-ft-run-39"
    assert LONG_QUEUE in str(slack_message(fact, Severity.CRITICAL, "why").blocks)  # the Job queue field


def test_two_long_names_that_differ_at_the_end_get_different_headlines() -> None:
    first, second = LONG_JOB, LONG_JOB[:-2] + "40"
    a = rendered(facts(first, LONG_QUEUE, LONG_ENV)["failed"], Severity.CRITICAL)
    b = rendered(facts(second, LONG_QUEUE, LONG_ENV)["failed"], Severity.CRITICAL)
    assert set(a) == set(b) == {"slack", "sns", "teams"}
    assert all(a[channel] != b[channel] for channel in a)


def test_digests_fit_with_the_longest_queue_name() -> None:
    burst = [
        fact_of(batch_job("FAILED", jobName=f"run-{i}", jobQueue=queue_arn(LONG_QUEUE))) for i in range(40)
    ]
    slack = slack_digest(burst, Severity.CRITICAL, "why")
    teams = teams_digest(burst, Severity.CRITICAL, "why")
    sns = sns_digest(burst, Severity.CRITICAL, "why")
    assert block_kit_problem(slack.payload()) is None
    shown = {
        "slack": slack.blocks[0]["text"]["text"],
        "sns": sns.subject,
        "teams": teams.card["body"][1]["inlines"][0]["text"],
    }
    assert_fits(shown)
    for channel, text in shown.items():
        assert "40 container jobs: UNKNOWN on ml-training-" in text and text.endswith("-highpri"), channel
    assert digest_headline(burst[:3], 200) == f"3 container jobs: UNKNOWN on {LONG_QUEUE}"


def test_elide_keeps_both_ends_at_word_boundaries() -> None:
    assert elide("short-name", 20) == "short-name"
    name = "llama3-8b-lora-ft-with-a-much-longer-experiment-tag-run-39"
    cut = elide(name, 30)
    assert len(cut) <= 30 and cut.startswith("llama3-8b-lora-") and cut.endswith("-run-39") and "…" in cut
    assert elide("x" * 50, 10) == "x" * 6 + "…" + "x" * 3
    assert elide("abcdef", 1) == "a"


BATCH_NAME = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}", fullmatch=True)


@given(job=BATCH_NAME, queue=BATCH_NAME)
def test_any_name_aws_accepts_fits_every_channel(job: str, queue: str) -> None:
    fact = fact_of(batch_job("FAILED", jobName=job, jobQueue=queue_arn(queue)))
    for severity in (Severity.CRITICAL, Severity.INFO):
        shown = rendered(fact, severity)
        assert_fits(shown)
        for channel, text in shown.items():
            mark = "..." if channel == "sns" else "…"
            if mark not in text[len("[CRITICAL] FAILED") :]:
                assert f"container job {job}" in text, (channel, text)
            else:
                assert text.endswith(job[-1]) and f"container job {job[:4]}" in text, (channel, text)


@pytest.mark.parametrize("name", ["job-failure-rate-alarm", "job-failure-rate-ok"])
def test_an_alarm_with_the_longest_name_keeps_its_state(name: str) -> None:
    """CloudWatch alarm names have up to 255 characters (PutMetricAlarm ``AlarmName``)."""
    event = sample(f"cloudwatch-alarm/{name}")
    long_name = ("batchpilot/prod/" + "a" * 300)[:251] + "Rate"
    assert len(long_name) == 255
    event["detail"]["alarmName"] = long_name
    event["resources"] = [f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{long_name}"]
    fact = fact_of(event)
    assert fact.alarm is not None
    shown = rendered(fact, Severity.CRITICAL)
    assert_fits(shown)
    state = " is OK again" if fact.alarm.resolved else f" is in {fact.alarm.state.value}"
    assert set(shown) == {"slack", "sns", "teams"}
    for channel, text in shown.items():
        assert text.endswith("Rate" + state) and "batchpilot/prod/" in text, (channel, text)
    assert long_name in sns_message(fact, Severity.CRITICAL, "why").body
