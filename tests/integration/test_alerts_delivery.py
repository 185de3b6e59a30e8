"""Delivery rules of the alerts function (alerts/service.py, docs/alerts.md), against moto's SNS,
DynamoDB and Secrets Manager and the local chat endpoint (a real HTTP server on 127.0.0.1 answering
like Slack and like a Teams Workflows webhook).

The service and the real adapters run as in Lambda; only the clock and (where said) the sleep
between 429 retries are injected.
"""

from __future__ import annotations

import copy
import json
import logging
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from batchpilot.alerts.policy import RoutingPolicy, Severity, load_policy
from batchpilot.alerts.ports import ClaimState
from batchpilot.alerts.registry import ChannelRegistry
from batchpilot.alerts.render import TRUNCATION_MARK
from batchpilot.alerts.service import AlertService
from batchpilot.io.dynamodb.alerts import DynamoAlertStore
from batchpilot.io.sns import SnsPublisher
from batchpilot.shared.own_events import RecoverySkipped, SkipReason
from batchpilot.shared.records import Outcome
from batchpilot_local.chat_endpoint import LocalChatEndpoint, block_kit_problem
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.notifications import LocalAlerts
from batchpilot_local.testing.alerts import (
    ENV,
    START,
    Clock,
    Rig,
    capacity_resubmission,
    fact_of,
    failed_fleet,
    open_rig,
    own_envelope,
)
from batchpilot_local.testing.samples import batch_job, sample, service_job
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@pytest.fixture
def rig() -> Iterator[Rig]:
    yield from open_rig()


@pytest.fixture
def bot_rig() -> Iterator[Rig]:
    yield from open_rig(bot=True)


CRITICAL = "service-job/failed-validation"  # MISCONFIGURATION: critical → sns + slack
INFO = "batch-job/failed-spot-reclaim"  # recovery resubmits: info → slack
WARNING = "batch-job/failed-attempt-timeout"  # TIMEOUT: warning → slack


# ------------------------------------------------------------------------------------ channels
def test_critical_goes_to_the_on_call_topic_and_slack(rig: Rig) -> None:
    result = rig.run(sample(CRITICAL))
    assert [r.outcome for r in result.records] == [Outcome.PROCESSED]
    assert result.records[0].channels == ["sns", "slack"]
    assert sorted(result.sent) == [("slack", "critical"), ("sns", "critical")]
    [message] = rig.sns()
    assert (
        message["Subject"]
        == "[CRITICAL] FAILED (MISCONFIGURATION): service job llama-spot-run47 on sm-training-highpri"
    )
    attributes = {k: v["Value"] for k, v in message["MessageAttributes"].items()}
    assert attributes == {
        "severity": "critical",
        "job_queue": "sm-training-highpri",
        "category": "MISCONFIGURATION",
        "event_kind": "state-change",
        # added for per-team SNS filter policies (docs/alerts.md, "The on-call topic")
        "share_identifier": "prod",
        "priority": "50",
    }
    assert "ValidationException" in message["Message"]
    [payload] = rig.slack_delivered()
    assert payload["text"].startswith("Critical: service job llama-spot-run47 FAILED")
    assert block_kit_problem(payload) is None


def test_info_and_warning_go_to_slack_only_and_successes_are_silent(rig: Rig) -> None:
    result = rig.run(
        sample(INFO), sample(WARNING), sample("batch-job/succeeded"), sample("service-job/running")
    )
    assert [r.severity for r in result.records] == ["info", "warning", "silent", "silent"]
    assert rig.sns() == []
    assert [p["text"].split(":", 1)[0] for p in rig.slack_delivered()] == ["Info", "Warning"]


def test_sns_subscribers_can_filter_on_severity(rig: Rig) -> None:
    sns, sqs = rig.aws.client("sns"), rig.aws.client("sqs")
    pager = sqs.create_queue(QueueName="pager")["QueueUrl"]
    sns.subscribe(
        TopicArn=rig.local.topic_arn,
        Protocol="sqs",
        Endpoint=rig.aws.queue_arn("pager"),
        Attributes={"FilterPolicy": json.dumps({"severity": ["critical"]})},
    )
    rig.slack.fail_always("no_service")  # info and warning fall back to the topic too
    rig.run(sample(INFO), sample(CRITICAL), sample(WARNING))
    assert len(rig.sns()) == 3
    paged = sqs.receive_message(QueueUrl=pager, MaxNumberOfMessages=10).get("Messages", [])
    assert [json.loads(m["Body"])["MessageAttributes"]["severity"]["Value"] for m in paged] == ["critical"]


# ------------------------------------------------------------------------------ exactly once
def test_duplicates_with_different_envelope_ids_send_once(rig: Rig) -> None:
    event = sample(CRITICAL)
    copies = [{**event, "id": f"00000000-0000-4000-8000-{i:012d}"} for i in range(3)]
    first = rig.run(copies[0], copies[1])  # a copy inside the batch
    assert [r.suppressed for r in first.records] == [None, "duplicate"]
    second = rig.run(copies[2])  # a copy in a later batch
    assert second.records[0].suppressed == "duplicate" and second.records[0].outcome is Outcome.DUPLICATE
    assert len(rig.sns()) == 1 and len(rig.slack_delivered()) == 1


def test_an_older_event_after_a_terminal_one_sends_nothing(rig: Rig) -> None:
    reclaim = {"container": {}, "statusReason": "Host EC2 (instance i-0abc) terminated."}
    retrying = batch_job(
        "RUNNABLE", attempts=[{**reclaim, "startedAt": 1763633100000, "stoppedAt": 1763633200000}]
    )
    succeeded = batch_job(
        "SUCCEEDED", attempts=[reclaim, {"container": {"exitCode": 0}}], stoppedAt=1763639000000
    )
    rig.run(succeeded)
    late = rig.run(retrying)
    assert late.records[0].suppressed == "stale" and late.records[0].outcome is Outcome.PROCESSED
    assert rig.slack.requests == [] and rig.sns() == []


def test_out_of_order_within_one_batch(rig: Rig) -> None:
    reclaim = {"container": {}, "statusReason": "Host EC2 (instance i-0abc) terminated."}
    retrying = batch_job("RUNNABLE", attempts=[{**reclaim, "stoppedAt": 1763633200000}])
    failed = batch_job(
        "FAILED",
        attempts=[reclaim, {"container": {"reason": "CannotStartContainerError: x"}}],
        stoppedAt=1763639000000,
    )
    result = rig.run(retrying, failed)  # the older RUNNABLE comes first in the batch
    assert [r.suppressed for r in result.records] == ["stale", None]
    assert [p["text"].split(":")[0] for p in rig.slack_delivered()] == ["Critical"]


def test_any_order_of_copies_sends_each_fact_once(rig: Rig) -> None:
    reclaim = {"container": {}, "statusReason": "Host EC2 (instance i-0abc) terminated."}
    stream = [
        batch_job("RUNNABLE", attempts=[{**reclaim, "stoppedAt": 1763633200000}]),
        batch_job("FAILED", attempts=[reclaim, {"container": {"exitCode": 2}}], stoppedAt=1763639000000),
        sample("service-job-queue-blocked/misconfiguration-service-environment-max-resource"),
    ]
    shuffled = [dict(e, id=f"copy-{i}") for i, e in enumerate(stream * 3)]
    random.Random(7).shuffle(shuffled)
    for start in range(0, len(shuffled), 2):
        rig.run(*shuffled[start : start + 2])
    texts = [p["text"] for p in rig.slack_delivered()]
    assert len(texts) == len(set(texts)) and len(texts) <= 3
    assert sum("FAILED" in t for t in texts) == 1 and sum("blocked" in t for t in texts) == 1
    assert len(rig.sns()) == 2  # the two critical facts


def test_a_crash_between_claim_and_send_is_sent_after_the_lease(rig: Rig) -> None:
    store = DynamoAlertStore(rig.aws.client("dynamodb"), "StateTable")
    fact = fact_of(sample(CRITICAL))
    lease = START + timedelta(seconds=90)
    assert store.claim(fact, Severity.CRITICAL, START, lease).state is ClaimState.NEW  # then the process died
    busy = rig.run(sample(CRITICAL))
    assert busy.records[0].failed and "lease" in (busy.records[0].error or "")
    assert rig.sns() == [] and rig.slack.requests == []
    rig.clock.now = START + timedelta(seconds=91)  # the lease ran out; SQS delivers the record again
    again = rig.run(sample(CRITICAL))
    assert again.records[0].outcome is Outcome.PROCESSED and again.records[0].channels == ["sns", "slack"]
    assert len(rig.sns()) == 1 and len(rig.slack_delivered()) == 1


def test_a_failed_topic_retries_only_what_was_not_delivered(rig: Rig) -> None:
    sns = rig.aws.client("sns")
    sns.delete_topic(TopicArn=rig.local.topic_arn)
    first = rig.run(sample(CRITICAL))
    assert first.records[0].failed  # SQS will deliver it again
    assert ("sns", "NotFound") in first.failed
    assert len(rig.slack_delivered()) == 1  # Slack got it (and that is recorded)
    sns.create_topic(Name=rig.local.topic_arn.rsplit(":", 1)[-1])
    sns.subscribe(
        TopicArn=rig.local.topic_arn,
        Protocol="sqs",
        Endpoint=rig.aws.queue_arn("batchpilot-local-oncall-inbox"),
    )
    second = rig.run(sample(CRITICAL))  # the retry (the claim was released at once)
    assert second.records[0].outcome is Outcome.PROCESSED and second.records[0].channels == ["sns"]
    assert len(rig.sns()) == 1 and len(rig.slack_delivered()) == 1  # Slack was not posted twice


# ------------------------------------------------------------------------- Slack failure modes
@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("invalid_blocks", "invalid_blocks"),
        ("no_service", "no_service"),
        ("channel_is_archived", "channel_is_archived"),
        ("action_prohibited", "action_prohibited"),
        ("server_error", "http_500"),
    ],
)
def test_slack_failures_are_not_retried_and_fall_back_to_the_topic(rig: Rig, mode: str, reason: str) -> None:
    rig.slack.fail_next(mode)
    result = rig.run(sample(INFO))
    assert len(rig.slack.requests) == 1  # no retry
    assert result.failed == [("slack", reason)]
    assert result.records[0].outcome is Outcome.PROCESSED and result.records[0].channels == ["sns"]
    [message] = rig.sns()
    assert f"Slack delivery failed: {reason}" in message["Message"]
    assert message["MessageAttributes"]["fallback_from"]["Value"] == "slack"
    assert message["MessageAttributes"]["severity"]["Value"] == "info"
    retry = rig.run(sample(INFO))  # the fallback counts as delivered: nothing is sent twice
    assert retry.records[0].suppressed == "duplicate" and rig.sns() == []
    assert retry.records[0].outcome is Outcome.DUPLICATE


def test_a_failed_slack_post_of_a_critical_fact_is_not_paged_twice(rig: Rig) -> None:
    rig.slack.fail_next("channel_is_archived")
    result = rig.run(sample(CRITICAL))
    assert result.failed == [("slack", "channel_is_archived")]
    assert result.records[0].outcome is Outcome.PROCESSED
    assert len(rig.sns()) == 1  # the page itself; no second copy as a fallback


def test_slack_unreachable_falls_back(rig: Rig) -> None:
    rig.slack.stop()
    result = rig.run(sample(WARNING))
    assert result.failed == [("slack", "connection_error")]
    assert len(rig.sns()) == 1


def test_429_is_waited_out_when_the_function_has_time(rig: Rig) -> None:
    rig.slack.fail_next("rate_limited", times=1, retry_after=1)
    result = rig.run(sample(INFO), real_sleep=True)
    assert [r.status for r in rig.slack.requests] == [429, 200]
    assert result.failed == [] and result.sent == [("slack", "info")]
    assert rig.sns() == []


def test_429_beyond_the_time_left_falls_back_without_waiting(rig: Rig) -> None:
    rig.slack.fail_next("rate_limited", times=1, retry_after=30)
    rig.remaining = 20.0  # less than Retry-After + the reserve for the fallback
    result = rig.run(sample(INFO))
    assert rig.sleeps == [] and len(rig.slack.requests) == 1
    assert result.failed == [("slack", "rate_limited")] and len(rig.sns()) == 1


def test_429_retries_are_bounded(rig: Rig) -> None:
    rig.slack.fail_always("rate_limited", retry_after=2)
    result = rig.run(sample(INFO))
    assert rig.sleeps == [2.0, 2.0, 2.0] and len(rig.slack.requests) == 4
    assert result.failed == [("slack", "rate_limited")] and len(rig.sns()) == 1


def test_no_time_left_skips_slack_for_the_topic(rig: Rig) -> None:
    rig.remaining = 3.0
    result = rig.run(sample(INFO))
    assert rig.slack.requests == [] and result.failed == [("slack", "deadline")] and len(rig.sns()) == 1


def test_a_missing_secret_falls_back(rig: Rig) -> None:
    rig.aws.client("secretsmanager").delete_secret(
        SecretId=rig.local.environment["BATCHPILOT_SLACK_WEBHOOK_SECRET"], ForceDeleteWithoutRecovery=True
    )
    result = rig.run(sample(INFO))
    assert result.failed == [("slack", "secret_unavailable")] and len(rig.sns()) == 1


def test_without_slack_everything_goes_to_the_topic_and_is_not_a_failure() -> None:
    with EmbeddedAws() as aws, LocalChatEndpoint() as chat:
        local = LocalAlerts(aws, environment=ENV, chat=chat).open()
        service = AlertService(
            RoutingPolicy(),
            DynamoAlertStore(aws.client("dynamodb"), "StateTable"),
            SnsPublisher(aws.client("sns"), local.environment["BATCHPILOT_ONCALL_TOPIC_ARN"]),
            ChannelRegistry(),  # no chat channel configured
            clock=Clock(),
        )
        result = service.process([("a", json.dumps(sample(INFO)))], time_left=lambda: 60.0)
        assert result.failed == [] and result.sent == [("sns", "info")]
        assert [m["MessageAttributes"]["severity"]["Value"] for m in local.sns_messages()] == ["info"]


# ------------------------------------------------------------------------------------ bursts
def test_a_40_job_spot_reclaim_is_one_slack_digest(rig: Rig) -> None:
    events = failed_fleet(40, "Host EC2 (instance i-0abc) terminated.")
    result = rig.run(*events)
    assert len(result.records) == len(events) == 40
    assert all(r.outcome is Outcome.PROCESSED for r in result.records)
    [digest] = rig.slack_delivered()
    assert block_kit_problem(digest) is None and len(digest["blocks"]) <= 50
    assert digest["text"] == "Info: 40 container jobs: SPOT_INTERRUPTION on ml-training-highpri"
    assert "…and 20 more (list truncated)" in json.dumps(digest["blocks"], ensure_ascii=False)
    assert rig.sns() == []
    assert result.sent == [("slack", "info")]
    assert rig.run(*events).sent == []  # every fact of the digest is recorded


def test_a_critical_burst_pages_once_then_one_digest_by_default(rig: Rig) -> None:
    result = rig.run(*failed_fleet(40, "CannotPullContainerError: manifest unknown"))
    first, digest = rig.sns()
    assert (
        first["Subject"].startswith("[CRITICAL] FAILED (MISCONFIGURATION): container job")
        and "group_size" not in first["MessageAttributes"]
    )
    assert digest["Subject"] == "[CRITICAL] 39 container jobs: MISCONFIGURATION on ml-training-highpri"
    assert digest["MessageAttributes"]["group_size"]["Value"] == "39"
    assert len(rig.slack_delivered()) == 1
    assert result.sent.count(("slack", "critical")) == 1
    assert rig.run(*failed_fleet(40, "CannotPullContainerError: manifest unknown")).sent == []  # all recorded


def test_a_critical_burst_pages_each_fact_and_posts_one_digest(rig: Rig) -> None:
    policy = load_policy(json.dumps({"sns_grouping": "each"}))
    result = rig.run(*failed_fleet(40, "CannotPullContainerError: manifest unknown"), policy=policy)
    assert len(rig.sns()) == 40  # each critical fact (PublishBatch, 10 per call)
    assert len(rig.slack_delivered()) == 1
    assert result.sent.count(("sns", "critical")) == 40 and result.sent.count(("slack", "critical")) == 1


def test_the_policy_can_group_a_burst_on_the_topic_too(rig: Rig) -> None:
    policy = load_policy(json.dumps({"sns_grouping": "group", "digest_threshold": 10}))
    rig.run(*failed_fleet(40, "CannotPullContainerError: manifest unknown"), policy=policy)
    [message] = rig.sns()
    assert message["Subject"] == "[CRITICAL] 40 container jobs: MISCONFIGURATION on ml-training-highpri"
    assert message["MessageAttributes"]["group_size"]["Value"] == "40"


def test_a_digest_slack_refuses_goes_to_the_topic_as_one_message(rig: Rig) -> None:
    rig.slack.fail_next("channel_is_archived")
    result = rig.run(*failed_fleet(12, "Host EC2 (instance i-0abc) terminated."))
    [message] = rig.sns()
    assert (
        message["Subject"].startswith("[INFO] 12 container jobs")
        and "channel_is_archived" in message["Message"]
    )
    assert len(result.records) == 12 and all(r.outcome is Outcome.PROCESSED for r in result.records)


def test_small_groups_are_posted_one_by_one(rig: Rig) -> None:
    rig.run(*failed_fleet(5, "Host EC2 (instance i-0abc) terminated."))
    assert len(rig.slack_delivered()) == 5


# ------------------------------------------------------------------------------- message size
def test_long_reason_and_long_job_name_are_delivered_truncated(rig: Rig) -> None:
    event = batch_job(
        "FAILED",
        jobName="llama3-70b-" + "x" * 189,
        attempts=[{"container": {"reason": ("CannotPullContainerError: " + "y" * 5000)[:5000]}}],
    )
    result = rig.run(event)
    assert result.failed == []
    [payload] = rig.slack_delivered()  # the endpoint applies Block Kit's limits, like Slack
    rendered = json.dumps(payload["blocks"], ensure_ascii=False)
    # The header is made to fit (the name elided in its middle); the reason is cut and marked.
    header = payload["blocks"][0]["text"]["text"]
    assert header.startswith("🔴 CRITICAL · FAILED (MISCONFIGURATION): container job llama3-70b-")
    assert "…x" in header and TRUNCATION_MARK not in header
    assert rendered.count(TRUNCATION_MARK) >= 1
    assert "llama3-70b-" + "x" * 189 in rendered, "the whole name is in the Job field"
    [message] = rig.sns()
    assert len(message["Subject"]) <= 99 and "llama3-70b-..." in message["Subject"]


# ------------------------------------------------------------------------------------ bad input
def test_a_malformed_event_never_hides_another_events_alert(rig: Rig) -> None:
    broken = sample(CRITICAL)
    del broken["detail"]["status"]
    result = rig.run("{not json", broken, sample("ignored/ec2-spot-interruption-warning"), sample(WARNING))
    assert [r.outcome for r in result.records] == [
        Outcome.INVALID,
        Outcome.INVALID,
        Outcome.IGNORED,
        Outcome.PROCESSED,
    ]
    assert result.records[1].event_id == broken["id"] and "status" in (result.records[1].error or "")
    assert len(rig.slack_delivered()) == 1


# ------------------------------------------------------------------------------- own events
def test_budget_exhausted_pages(rig: Rig) -> None:
    skipped = RecoverySkipped(
        time=datetime(2026, 11, 20, 11, tzinfo=UTC),
        job_arn="arn:aws:batch:us-east-1:111122223333:service-job/abc",
        job_kind="service-job",
        job_name="gemma-ft-run12",
        job_queue="sm-quota-queue",
        category="PREEMPTION",
        skip_reason=SkipReason.BUDGET_EXHAUSTED,
        message="3 of 3 preemption resubmissions used",
        budget_used=3,
        budget_limit=3,
        critical=True,
    )
    rig.run(own_envelope(skipped), own_envelope(skipped))
    [message] = rig.sns()
    assert (
        message["Subject"]
        == "[CRITICAL] Recovery skipped (BUDGET_EXHAUSTED): service job gemma-ft-run12 on sm-quota-queue"
    )
    assert "Budget used:" in message["Message"] and "3/3" in message["Message"]


# ----------------------------------------------------------------------------- bot token mode
def test_bot_mode_threads_failure_resubmission_and_the_new_jobs_failure(bot_rig: Rig) -> None:
    failed = sample("service-job/failed-sagemaker-capacity")
    new_arn = "arn:aws:batch:us-east-1:111122223333:service-job/99999999-0000-4000-8000-000000000001"
    resubmitted = capacity_resubmission(
        failed, new_arn, "lin-1", job_queue="sm-training-research", checkpoint_uri="s3://ckpt/mistral/"
    )
    new_failed = service_job(
        "FAILED",
        jobArn=new_arn,
        jobName="mistral-dpo-run18-r1",
        statusReason="Received status from SageMaker: AlgorithmError: boom",
    )
    bot_rig.run(failed)
    bot_rig.run(own_envelope(resubmitted))
    bot_rig.run(new_failed)
    posts = bot_rig.slack.delivered()
    assert [r.kind for r in posts] == ["chat.postMessage"] * 3 and all(r.authorized for r in posts)
    root = posts[0].ts
    assert posts[0].payload.get("thread_ts") is None
    assert [p.payload.get("thread_ts") for p in posts[1:]] == [root, root]


def test_bot_mode_api_errors(bot_rig: Rig) -> None:
    bot_rig.slack.fail_next("channel_is_archived")
    result = bot_rig.run(sample(INFO))
    assert result.failed == [("slack", "is_archived")] and len(bot_rig.sns()) == 1
    bot_rig.slack.fail_next("rate_limited", retry_after=1)
    result = bot_rig.run(sample(WARNING))
    assert bot_rig.sleeps == [1.0] and result.sent == [("slack", "warning")]


# --------------------------------------------------------------------------------- secrecy
def test_the_webhook_url_is_never_logged(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # even with every logger at DEBUG (Lambda's LOG_LEVEL=DEBUG)
    rig.slack.fail_next("server_error")
    rig.run(sample(INFO))
    rig.run(sample(WARNING))
    assert len(rig.slack.requests) == 2
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert rig.slack.webhook_path not in logged
    assert "batchpilotlocalwebhook" not in logged
    assert not any("batchpilotlocalwebhook" in v for v in rig.local.environment.values())


# ------------------------------------------------------------------------- property: any order
RECLAIM = {"container": {}, "statusReason": "Host EC2 (instance i-0abc) terminated."}
STREAM = [
    batch_job("RUNNABLE", attempts=[{**RECLAIM, "stoppedAt": 1763633200000}]),  # info, older
    batch_job(
        "FAILED", attempts=[RECLAIM, {"container": {"exitCode": 3}}], stoppedAt=1763639000000
    ),  # critical
    sample("service-job-queue-blocked/misconfiguration-service-environment-max-resource"),  # critical
    sample("batch-job/failed-attempt-timeout"),  # warning
]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    order=st.permutations(list(range(len(STREAM))) * 2),
    cuts=st.lists(st.integers(min_value=1, max_value=8), min_size=1, max_size=4),
)
def test_any_order_and_batching_sends_each_fact_at_most_once_and_every_terminal_fact_once(
    order: list[int], cuts: list[int]
) -> None:
    for rig in open_rig():
        events = [dict(STREAM[i], id=f"copy-{n}") for n, i in enumerate(order)]
        start = 0
        for size in [*cuts, len(events)]:
            if start < len(events):
                rig.run(*events[start : start + size])
                start += size
        texts = [p["text"] for p in rig.slack_delivered()]
        assert len(texts) == len(set(texts))  # no fact twice
        assert sum("FAILED (APPLICATION_ERROR)" in t for t in texts) == 1  # the terminal failure, once
        assert sum("blocked (MISCONFIGURATION)" in t for t in texts) == 1
        assert sum("TIMEOUT" in t for t in texts) == 1
        subjects = [m["Subject"] for m in rig.sns()]
        assert sorted(subjects) == sorted(set(subjects)) and len(subjects) == 2  # the two critical facts


def test_a_preemption_alert_names_the_job_its_queue_share_priority_and_the_preempting_share(
    rig: Rig,
) -> None:
    started = sample("service-job-preemption/started")
    arn = started["detail"]["preemptedJobArn"]
    described = copy.deepcopy(sample("service-job/running")["detail"])
    described.update(
        jobArn=arn,
        jobId=arn.rsplit("/", 1)[-1],
        jobName="gemma-7b-sft-run12",
        jobQueue="arn:aws:batch:us-east-1:111122223333:job-queue/sm-quota-queue",
        quotaShareName="platform",
        schedulingPriority=40,
    )
    rig.aws.batch.put_service_job(described)
    rig.run(started)
    [payload] = rig.slack_delivered()
    text = json.dumps(payload)
    assert payload["text"].startswith(
        "Info: service job gemma-7b-sft-run12 is being preempted on sm-quota-queue"
    )
    for value in ("platform", "40", "Preempted by share", "research"):
        assert value in text, value
