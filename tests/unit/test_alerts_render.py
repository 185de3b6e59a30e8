"""Messages people read: SNS subject/body/attributes and Slack Block Kit within Slack's limits (Amazon
SNS Publish; Slack Block Kit reference), checked with the same Block Kit rules the local Slack
endpoint applies."""

from __future__ import annotations

import dataclasses
import json
import re

from batchpilot.alerts.channels.slack import payload_size, slack_digest, slack_message
from batchpilot.alerts.facts import AlertFact
from batchpilot.alerts.grouping import burst_key, split_bursts
from batchpilot.alerts.oncall import sns_digest, sns_message
from batchpilot.alerts.policy import RoutingPolicy, Severity
from batchpilot.alerts.render import (
    SNS_BODY_MAX_BYTES,
    TRUNCATION_MARK,
    console_links,
    fit_bytes,
    format_duration,
    sanitize_subject,
    title,
    truncate,
)
from batchpilot.alerts.severity import decide
from batchpilot.shared.own_events import JobStarving, StarvationReason, put_events_entry
from batchpilot_local.chat_endpoint import block_kit_problem
from batchpilot_local.testing.alerts import fact_of
from batchpilot_local.testing.samples import batch_job, sample
from hypothesis import given
from hypothesis import strategies as st

LONG_REASON = "CannotPullContainerError: " + "manifest unknown; " * 300  # > 5,000 characters
LONG_NAME = "llama3-70b-" + "x" * 189  # 200 characters


def long_fact() -> AlertFact:
    event = batch_job(
        "FAILED",
        jobName=LONG_NAME,
        attempts=[{"container": {"reason": LONG_REASON[:5000], "logStreamName": "job/default/abc"}}],
    )
    return fact_of(event)


@given(st.text(max_size=400))
def test_sns_subject_is_always_acceptable(text: str) -> None:
    subject = sanitize_subject(text)
    assert 1 <= len(subject) <= 99
    assert subject.isascii()
    assert not re.search(r"[\x00-\x1f\x7f]", subject)
    assert subject == subject.strip()


def test_subject_folds_accents_drops_newlines_and_marks_cuts() -> None:
    assert sanitize_subject("Échec\n du job\t«naïve»\r") == "Echec du job naive"
    cut = sanitize_subject("[CRITICAL] " + "arn:aws:batch:us-east-1:111122223333:job/" * 5)
    assert len(cut) == 99 and cut.endswith("...")
    assert sanitize_subject("\n\n") == "batchpilot alert"


def test_truncate_marks_the_cut_and_never_splits_an_entity() -> None:
    assert truncate("short", 10) == "short"
    cut = truncate("a" * 50, 20)
    assert len(cut) == 20 and cut.endswith(TRUNCATION_MARK)
    entity = truncate("x" * 6 + "&amp;" + "y" * 40, 6 + 3 + len(TRUNCATION_MARK))
    assert "&am" not in entity and entity.endswith(TRUNCATION_MARK)


def test_sns_message_for_a_5000_character_reason_and_a_200_character_name() -> None:
    fact = long_fact()
    message = sns_message(fact, Severity.CRITICAL, "a terminal failure")
    assert len(message.subject) <= 99 and message.subject.isascii()
    # What happened, then the name's start and end around "...": the whole name is in the body.
    assert message.subject.startswith("[CRITICAL] FAILED (MISCONFIGURATION): container job llama3-70b-...x")
    assert message.subject.endswith("xxx") and "truncated" not in message.subject
    assert LONG_NAME in message.body
    assert "Reason:" in message.body and len(message.body.encode()) < 256 * 1024
    assert message.attributes == {
        "severity": "critical",
        "job_queue": "ml-training-highpri",
        "category": "MISCONFIGURATION",
        "event_kind": "state-change",
    }


def test_slack_message_for_long_fields_stays_within_block_kit_limits() -> None:
    fact = long_fact()
    message = slack_message(fact, Severity.CRITICAL, "a terminal failure")
    payload = message.payload()
    assert block_kit_problem(payload) is None
    header = message.blocks[0]
    assert header["type"] == "header" and len(header["text"]["text"]) <= 150
    text = header["text"]["text"]
    assert text.startswith("🔴 CRITICAL · FAILED (MISCONFIGURATION): container job llama3-70b-")
    assert "…x" in text and TRUNCATION_MARK not in text
    reason = next(b for b in message.blocks if b.get("text", {}).get("text", "").startswith("*Reason*"))
    assert reason["text"]["text"].endswith(TRUNCATION_MARK) and len(reason["text"]["text"]) <= 3000
    assert message.text.startswith("Critical: container job llama3-70b-")
    assert payload_size(message) < 12_000


def test_slack_message_shows_the_facts_links_and_why() -> None:
    fact = fact_of(sample("service-job/failed-sagemaker-capacity"))
    message = slack_message(fact, Severity.INFO, "a CAPACITY failure the recovery function resubmits")
    assert block_kit_problem(message.payload()) is None
    fields = [f["text"] for b in message.blocks if b["type"] == "section" for f in b.get("fields", [])]
    labels = {text.split("\n", 1)[0] for text in fields}
    assert {
        "*Job*",
        "*Job queue*",
        "*Status*",
        "*Category*",
        "*Attempts*",
        "*Wait time*",
        "*Run time*",
    } <= labels
    links = " ".join(b["text"]["text"] for b in message.blocks if b["type"] == "section" and "text" in b)
    assert "|Batch job>" in links and "|Training job>" in links and "|Logs>" in links
    assert "console.aws.amazon.com/batch/home?region=us-east-1#jobs/detail/" in links
    context = message.blocks[-1]
    assert context["type"] == "context" and "Why info" in context["elements"][0]["text"]


def test_mrkdwn_is_escaped() -> None:
    event = batch_job("FAILED", attempts=[{"container": {"reason": "CannotStartContainerError: <b>&co</b>"}}])
    message = slack_message(fact_of(event), Severity.CRITICAL, "x")
    text = json.dumps(message.blocks)
    assert "&lt;b&gt;&amp;co&lt;/b&gt;" in text and "<b>" not in text


def test_console_links() -> None:
    container = fact_of(sample("batch-job/failed-spot-reclaim"))
    labels = dict(console_links(container))
    assert set(labels) == {"Batch job", "Logs"}
    assert "#logsV2:log-groups/log-group/$252Faws$252Fbatch$252Fjob/log-events/" in labels["Logs"]
    training = fact_of(sample("sagemaker/failed-algorithm-error"))
    labels = dict(console_links(training))
    assert set(labels) == {"Training job", "Logs"}
    assert "$3FlogStreamNameFilter$3D" in labels["Logs"]
    assert console_links(dataclasses.replace(training, region=None)) == []


def test_durations() -> None:
    assert format_duration(3725) == "1h 02m 05s"
    assert format_duration(65) == "1m 05s"
    assert format_duration(7) == "7s"
    assert format_duration(None) is None and format_duration(-1) is None


def burst(count: int, *, category_reason: str = "Host EC2 (instance i-0abc) terminated.") -> list[AlertFact]:
    facts = []
    for i in range(count):
        event = batch_job(
            "FAILED",
            jobArn=f"arn:aws:batch:us-east-1:111122223333:job/{i:08d}-0000-4000-8000-000000000000",
            jobId=f"{i:08d}-0000-4000-8000-000000000000",
            jobName=f"sweep-{i:03d}-" + "n" * 180,
            attempts=[{"container": {}, "statusReason": category_reason + " " + "detail " * 200}],
        )
        facts.append(fact_of(event))
    return facts


def test_digest_of_60_jobs_fits_in_50_blocks_and_says_how_many_are_hidden() -> None:
    facts = burst(60)
    message = slack_digest(facts, Severity.INFO, "spot interruptions", max_items=40)
    assert block_kit_problem(message.payload()) is None
    assert len(message.blocks) <= 50
    text = json.dumps(message.blocks, ensure_ascii=False)
    assert "…and 20 more (list truncated)" in text
    assert message.text == "Info: 60 container jobs: SPOT_INTERRUPTION on ml-training-highpri"
    assert payload_size(message) < 40_000


def test_sns_digest_lists_every_job() -> None:
    facts = burst(40)
    message = sns_digest(facts, Severity.CRITICAL, "x")
    assert len(facts) == 40
    assert all(f.subject in message.body for f in facts)
    assert message.attributes["group_size"] == "40"
    assert message.subject == "[CRITICAL] 40 container jobs: SPOT_INTERRUPTION on ml-training-highpri"


def test_a_digest_of_long_arns_fits_what_sns_publish_takes() -> None:
    # 500 jobs with 3,000-character ARNs and 300-character reasons of 3-byte characters: over 1 MB
    # before the cut; SNS refuses a message over 256 KB (InvalidParameter).
    prefix = "arn:aws:batch:us-east-1:111122223333:job/"
    facts = [
        fact_of(
            batch_job(
                "FAILED",
                id=f"e-{i}",
                jobArn=prefix + f"{i:04d}" + "j" * (3000 - len(prefix) - 4),
                jobId=f"{i:04d}",
                attempts=[{"container": {"reason": "漢" * 300}}],
            )
        )
        for i in range(500)
    ]
    body = sns_digest(facts, Severity.CRITICAL, "x").body
    assert len(body.encode("utf-8")) <= SNS_BODY_MAX_BYTES
    assert body.endswith(TRUNCATION_MARK) and facts[0].subject in body


@given(st.text(max_size=300), st.integers(min_value=20, max_value=400))
def test_fit_bytes_cuts_at_whole_characters_within_the_limit(text: str, limit: int) -> None:
    cut = fit_bytes(text, limit)
    assert len(cut.encode("utf-8", "replace")) <= limit
    assert cut == text or (cut.endswith(TRUNCATION_MARK) and text.startswith(cut[: -len(TRUNCATION_MARK)]))


def test_bursts_group_by_queue_category_and_severity() -> None:
    facts = burst(7)
    other = fact_of(batch_job("FAILED", attempts=[{"container": {"reason": "CannotPullContainerError: x"}}]))
    items = [(f, Severity.INFO) for f in facts] + [(other, Severity.CRITICAL)]
    bursts, singles = split_bursts(items, lambda item: burst_key(*item), threshold=5)
    assert [len(b) for b in bursts] == [7] and singles == [(other, Severity.CRITICAL)]
    bursts, singles = split_bursts(items, lambda item: burst_key(*item), threshold=7)
    assert bursts == [] and len(singles) == 8


def test_titles_say_what_happened() -> None:
    assert title(fact_of(sample("batch-job/runnable-retrying-after-spot-reclaim"))).endswith(
        "lost an attempt to a spot interruption; AWS is retrying on gpu-spot-queue"
    )
    blocked = title(
        fact_of(sample("service-job-queue-blocked/misconfiguration-quota-management-limit-exceeded"))
    )
    assert blocked.startswith("job queue sm-quota-queue blocked (MISCONFIGURATION)")


def test_out_of_memory_and_quota_alerts_carry_a_hint_and_the_quota() -> None:
    oom = sns_message(fact_of(sample("batch-job/failed-out-of-memory")), Severity.CRITICAL, "why")
    assert "Hint:" in oom.body and "more memory" in oom.body and "larger instance type" in oom.body
    assert oom.attributes["category"] == "OUT_OF_MEMORY"
    quota = sns_message(
        fact_of(sample("service-job/failed-resource-limit-exceeded")), Severity.CRITICAL, "why"
    )
    assert "Quota:" in quota.body and "ml.p4d.24xlarge for training job usage" in quota.body
    assert "Service Quotas" in quota.body and quota.attributes["category"] == "QUOTA"


def test_sns_attributes_carry_share_and_priority() -> None:
    message = sns_message(fact_of(sample("batch-job/multi-node-parent-failed")), Severity.CRITICAL, "why")
    assert message.attributes["share_identifier"] == "pretrain"
    assert message.attributes["priority"] == "50"
    assert "Priority:" in message.body


def test_a_multi_node_node_event_links_its_log_stream() -> None:
    fact = fact_of(sample("batch-job/multi-node-node-failed-ecs-properties"))
    assert fact.log_stream == "llama3-mnp/default/8c1f0a2b3d4e5f60718293a4b5c6d7e8"
    assert [label for label, _ in console_links(fact)] == ["Batch job", "Logs"]


def test_job_starving_names_the_job_share_priority_and_how_long() -> None:
    arn = "arn:aws:batch:us-east-1:111122223333:service-job/4c7599ae"
    event = JobStarving(
        time="2026-11-20T12:00:00Z",
        job_arn=arn,
        job_kind="service-job",
        job_name="train-7b",
        job_queue="ml-training",
        share_identifier="LOWPRI",
        scheduling_priority=10,
        reason=StarvationReason.WAITING_BELOW_ENTITLEMENT,
        preemptions=1,
        waiting_seconds=7200,
        threshold=3600,
        share_usage_percent=0,
        entitlement_percent=20,
        message="job train-7b (share LOWPRI, priority 10) is starving: waiting; RUNNABLE for 2.0 h",
    )
    entry = put_events_entry(event, "bus")
    fact = fact_of(
        {
            "id": "e1",
            "source": entry["Source"],
            "detail-type": entry["DetailType"],
            "time": "2026-11-20T12:00:00Z",
            "region": "us-east-1",
            "account": "111122223333",
            "detail": json.loads(entry["Detail"]),
        }
    )
    assert fact.key == (arn, "starving#WAITING_BELOW_ENTITLEMENT")
    decision = decide(fact, RoutingPolicy())
    assert decision.severity is Severity.WARNING
    assert title(fact) == (
        "service job train-7b is starving (WAITING_BELOW_ENTITLEMENT): share LOWPRI, priority 10,"
        " 2.0 h RUNNABLE on ml-training"
    )
    message = sns_message(fact, decision.severity, decision.why)
    assert message.subject == (
        "[WARNING] Starving (WAITING_BELOW_ENTITLEMENT): service job train-7b on ml-training"
    )
    for pattern in (
        r"Share:\s+LOWPRI",
        r"Priority:\s+10",
        r"Waiting:\s+2.0 h RUNNABLE",
        r"Entitlement:\s+20%",
    ):
        assert re.search(pattern, message.body), pattern
    assert re.search(r"Share of usage:\s+0%", message.body)
    slack = slack_message(fact, decision.severity, decision.why)
    assert block_kit_problem(slack.payload()) is None
    assert "train-7b is starving" in slack.text
    preempted = dataclasses.replace(fact, extra=(("Preemptions", "3"),))
    assert title(preempted).endswith("share LOWPRI, priority 10, 3 preemptions on ml-training")
