"""Incidents end to end in the real alerts service and adapters (the StateTable, the on-call topic
and SNS in the embedded AWS; Slack and Teams at the local chat endpoint): one incident per kind of
fact, job queue and window, at most one message per channel per incident stage, whatever the order,
the batching, the duplicates and the redeliveries (docs/alerts.md, "Incidents")."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from batchpilot.alerts.service import AlertService, BatchResult
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.io.dynamodb.alerts import DynamoAlertStore
from batchpilot.io.sns import SnsPublisher
from batchpilot_local.testing.alerts import Rig, failed_fleet, open_rig
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

WINDOW = 600.0  # AlertIncidentWindowMinutes' default, in seconds
REASON = "CannotPullContainerError: pull access denied"  # critical: the on-call topic and chat
FACTS = 8


@dataclass
class RecordingTimer:
    """The :class:`batchpilot.alerts.ports.IncidentTimer` port, keeping what it was asked to send
    (SQS would deliver each body after its delay: the test delivers it when it is due)."""

    sent: list[tuple[str, int]] = field(default_factory=list)

    def send_later(self, body: str, delay_seconds: int) -> None:
        self.sent.append((body, delay_seconds))


def incident_service(rig: Rig, timer: RecordingTimer) -> AlertService:
    """The alerts service as functions/alerts/app.py builds it, with incidents on."""
    env = rig.local.environment
    settings_ = AlertsSettings.from_environ(env, function="alerts")
    args = settings_.service_args
    args["incident_window"] = WINDOW
    return AlertService(
        settings_.policy,
        DynamoAlertStore(rig.aws.client("dynamodb"), env["BATCHPILOT_STATE_TABLE"]),
        SnsPublisher(rig.aws.client("sns"), env["BATCHPILOT_ONCALL_TOPIC_ARN"]),
        rig.channels(),
        clock=rig.clock,
        **args,
        timer=timer,
    )


def run(rig: Rig, timer: RecordingTimer, bodies: list[str]) -> list[BatchResult]:
    """One batch, then its failed records again (as SQS delivers them) until none fails."""
    results, pending = [], [(f"m-{i}", b) for i, b in enumerate(bodies)]
    for _ in range(6):
        if not pending:
            break
        result = incident_service(rig, timer).process(pending, lambda: 60.0)
        results.append(result)
        failed = {r.message_id for r in result.records if r.failed}
        pending = [(m, b) for m, b in pending if m in failed]
    return results


def stage_of(text: str, first_job: str) -> str:
    """Which stage a message is: the summary says so; the first names the incident's first job
    alone; the update is a digest (or one job, when one fact joined in its batch)."""
    if "incident summary" in text:
        return "summary"
    if "in one batch of events" in text or first_job not in text:
        return "update"
    return "first"


def stages(rig: Rig, sns: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    """``(channel, stage)`` → messages delivered. The on-call topic gets no update: its one
    message that is not the summary is the first fact's page, which names the first job."""
    pages = [m for m in sns if "incident summary" not in m["Message"]]
    named = re.search(r"sweep-lr-\d{3}", pages[0]["Subject"]) if pages else None
    first_job = named.group(0) if named else "?"
    out: Counter[tuple[str, str]] = Counter()
    for message in sns:
        out[("sns", stage_of(message["Message"], first_job))] += 1
    for slack in rig.slack.delivered():
        out[("slack", stage_of(json.dumps(slack.payload), first_job))] += 1
    for teams in rig.teams.delivered():
        out[("teams", stage_of(json.dumps(teams.payload), first_job))] += 1
    return out


STEP = st.tuples(
    st.lists(st.integers(min_value=0, max_value=FACTS - 1), min_size=1, max_size=10),  # a batch
    st.integers(min_value=0, max_value=60),  # seconds until the next batch
    st.booleans(),  # a summary timer delivered early (SQS never does; a forged or replayed one)
)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=5), last=st.permutations(list(range(FACTS))))
def test_any_interleaving_gives_one_incident_and_one_message_per_channel_per_stage(
    steps: list[tuple[list[int], int, bool]], last: list[int]
) -> None:
    for rig in open_rig(teams=True):
        timer = RecordingTimer()
        events = [json.dumps(e) for e in failed_fleet(FACTS, REASON, series="3131")]
        results: list[BatchResult] = []
        # The facts in any order and batching, with copies (EventBridge duplicates), then every
        # fact once more (an archive replay); all within the window.
        for batch, seconds, early in [*steps, (last, 0, False)]:
            early_timers = [body for body, _ in timer.sent] if early else []
            results += run(rig, timer, [events[i] for i in batch] + early_timers)
            rig.clock.now += timedelta(seconds=seconds)
        # The window ends: every timer sent arrives (SQS delivers at least once: twice here).
        rig.clock.now += timedelta(seconds=WINDOW + 60)
        for body, _ in timer.sent * 2:
            results += run(rig, timer, [body])
        incidents = {r.incident for result in results for r in result.records if r.incident}
        assert len(incidents) == 1  # the facts of one kind on one job queue: one incident
        assert {json.loads(body)["incident"] for body, _ in timer.sent} == incidents
        delays = [delay for _, delay in timer.sent]
        assert delays and min(delays) > 0 and max(delays) <= WINDOW
        delivered = stages(rig, rig.sns())
        # At most one message per channel and stage; the first page and post, and the summary,
        # always (several facts); the update when a batch held more than the first fact.
        assert max(delivered.values()) == 1, delivered
        expected = {(c, s) for c in ("sns", "slack", "teams") for s in ("first", "summary")}
        assert expected <= set(delivered) <= expected | {("slack", "update"), ("teams", "update")}
        # Nothing left failing: every record handled, each fact delivered or counted once.
        assert not any(r.failed for r in results[-1].records)


def test_facts_of_another_kind_or_job_queue_are_incidents_of_their_own() -> None:
    for rig in open_rig():
        timer = RecordingTimer()
        fleet = failed_fleet(6, REASON, series="3132")
        other_queue = failed_fleet(6, REASON, series="3133")
        for event in other_queue:
            event["detail"]["jobQueue"] = event["detail"]["jobQueue"] + "-eval"
        other_kind = failed_fleet(6, "OutOfMemoryError: Container killed due to memory usage", series="3134")
        results = run(rig, timer, [json.dumps(e) for e in [*fleet, *other_queue, *other_kind]])
        incidents = {r.incident for result in results for r in result.records if r.incident}
        assert len(incidents) == 3
        # Three first pages at once; each incident's summary comes from its own timer.
        assert len(rig.sns()) == 3 and len(timer.sent) == 3


def test_in_slack_bot_mode_the_update_and_the_summary_reply_in_the_first_message_thread() -> None:
    for rig in open_rig(bot=True):
        timer = RecordingTimer()
        events = [json.dumps(e) for e in failed_fleet(30, REASON, series="3135")]
        run(rig, timer, events[:10])  # the first fact, and nine that are the update
        run(rig, timer, events[10:])  # counted only
        rig.clock.now += timedelta(seconds=WINDOW + 60)
        [(body, _)] = timer.sent
        run(rig, timer, [body])
        posts = rig.slack.delivered()
        assert len(posts) == 3
        root = json.loads(posts[0].answer)["ts"]
        assert posts[0].payload.get("thread_ts") is None
        assert [p.payload.get("thread_ts") for p in posts[1:]] == [root, root]
        assert "30 " in posts[2].payload["text"]  # the summary counts the whole incident
