"""Routes that send a share's alerts to its own Slack channel (``slack_channels`` of the policy),
against the local chat endpoint in Slack bot token mode (``chat.postMessage`` records the channel)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from batchpilot.alerts.policy import load_policy
from batchpilot.shared.records import Outcome
from batchpilot_local.testing.alerts import Rig, capacity_resubmission, open_rig, own_envelope
from batchpilot_local.testing.samples import batch_job, sample, service_job

TEAM_CHANNEL = "#team-nlp-training"
POLICY = load_policy(
    json.dumps({"slack_channels": [{"match": {"share_identifier": ["nlp*"]}, "slack_channel": TEAM_CHANNEL}]})
)
SPOT = "Host EC2 (instance i-0abc) terminated."  # recovery resubmits: info → slack


@pytest.fixture
def bot_rig() -> Iterator[Rig]:
    yield from open_rig(bot=True)


@pytest.fixture
def rig() -> Iterator[Rig]:
    yield from open_rig()


def job(index: int, share: str, reason: str = SPOT) -> dict[str, Any]:
    return batch_job(
        "FAILED",
        id=f"event-{share}-{index}",
        jobArn=f"arn:aws:batch:us-east-1:111122223333:job/{index:08d}-2222-4000-8000-000000000000",
        jobId=f"{index:08d}-2222-4000-8000-000000000000",
        jobName=f"{share}-sweep-{index:03d}",
        shareIdentifier=share,
        attempts=[{"container": {"reason": reason}}],
    )


def channels(rig: Rig) -> list[str]:
    return [str(r.payload["channel"]) for r in rig.slack.delivered()]


def test_a_shares_alerts_go_to_its_channel_and_others_to_the_default(bot_rig: Rig) -> None:
    default = bot_rig.slack.channel
    events = [job(1, "nlp-a"), job(2, "research"), job(3, "nlp-b")]
    result = bot_rig.run(*events, policy=POLICY)
    assert [r.outcome for r in result.records] == [Outcome.PROCESSED] * 3
    assert channels(bot_rig) == [TEAM_CHANNEL, default, TEAM_CHANNEL]
    texts = [r.payload["text"] for r in bot_rig.slack.delivered()]
    assert ["nlp-a-sweep-001" in texts[0], "research-sweep-002" in texts[1]] == [True, True]
    assert result.sent == [("slack", "info")] * 3 and bot_rig.sns() == []
    assert bot_rig.run(*events, policy=POLICY).sent == []  # every delivery is recorded once


def test_digests_split_per_channel(bot_rig: Rig) -> None:
    events = [job(i, "nlp-a" if i % 2 else "research") for i in range(12)]  # one queue, category
    result = bot_rig.run(*events, policy=POLICY)
    assert len(result.records) == len(events) == 12
    assert all(r.outcome is Outcome.PROCESSED for r in result.records)
    posts = bot_rig.slack.delivered()
    assert sorted(channels(bot_rig)) == sorted([TEAM_CHANNEL, bot_rig.slack.channel])
    by_channel = {str(p.payload["channel"]): p.payload for p in posts}
    for destination, share in ((TEAM_CHANNEL, "nlp-a"), (bot_rig.slack.channel, "research")):
        digest = json.dumps(by_channel[destination]["blocks"])
        assert by_channel[destination]["text"].startswith("Info: 6 container jobs")
        assert share in digest and ("research" if share == "nlp-a" else "nlp-a") not in digest
    assert result.sent == [("slack", "info")] * 2  # two destinations, two deliveries


def test_threads_are_kept_per_channel(bot_rig: Rig) -> None:
    failed = sample("service-job/failed-sagemaker-capacity")
    new_arn = "arn:aws:batch:us-east-1:111122223333:service-job/99999999-0000-4000-8000-000000000002"
    resubmitted = capacity_resubmission(
        failed, new_arn, "lin-2", job_queue="sm-training-research", checkpoint_uri="s3://ckpt/mistral/"
    )
    new_failed = service_job(
        "FAILED", jobArn=new_arn, jobName="mistral-dpo-run18-r1", statusReason="AlgorithmError: boom"
    )
    own = own_envelope(resubmitted)
    bot_rig.run(failed)  # the default channel: the job's thread starts there
    team = load_policy(json.dumps({"slack_channels": [{"match": {}, "slack_channel": TEAM_CHANNEL}]}))
    bot_rig.run(own, policy=team)
    bot_rig.run(new_failed, policy=team)
    posts = bot_rig.slack.delivered()
    assert channels(bot_rig) == [bot_rig.slack.channel, TEAM_CHANNEL, TEAM_CHANNEL]
    # The default channel's thread id means nothing in the team channel: a new thread there.
    assert [p.payload.get("thread_ts") for p in posts] == [None, None, posts[1].ts]


def test_a_webhook_never_posts_a_message_meant_for_another_channel(rig: Rig) -> None:
    # The settings refuse such a policy at cold start; the adapter refuses too (defence in depth).
    result = rig.run(job(1, "nlp-a"), policy=POLICY)
    assert result.failed == [("slack", "channel_override_needs_bot_token")]
    assert rig.slack.requests == [] and len(rig.sns()) == 1
    assert result.records[0].channels == ["sns"]
