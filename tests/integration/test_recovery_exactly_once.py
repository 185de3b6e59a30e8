"""Exactly once: whatever order, duplication and staleness the failure events arrive with, no
lineage ever gets two resubmissions with the same attempt number, nor more than its budget.

Hypothesis draws delivery streams over a small fleet (service jobs and container jobs): which
known failure is delivered next, how many times, whether that delivery read the lineage before an
earlier delivery wrote it (a concurrent Lambda), and how much time passes. Every job recovery
submits fails in turn, so its own failure event joins the stream (the lineage continues). Records
handed back (backoff) are delivered again later, as SQS would.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from batchpilot.recovery.lineage import Lineage, LineageRef
from batchpilot.recovery.naming import ATTEMPT_TAG, LINEAGE_TAG, lineage_id_for
from batchpilot.recovery.service import Action, RetryLater
from batchpilot_local.testing.recovery import (
    BUCKET,
    Harness,
    checkpoint_item,
    container_job_item,
    event_of,
    harness,
    service_job_item,
    world,
)
from batchpilot_local.testing.samples import sample
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CAPACITY = "service-job/failed-sagemaker-capacity"
SPOT = "batch-job/failed-spot-reclaim"
BUDGET = {"CAPACITY": 3, "SPOT_INTERRUPTION": 5}
_ids = itertools.count(1)


@pytest.fixture(scope="module")
def h() -> Iterator[Harness]:
    # The checkpoint bucket exists (empty): a listing that fails is retried, never "no checkpoint".
    seed = world(checkpoints=[checkpoint_item(f"s3://{BUCKET}/fleet/")])
    # no_checkpoint=proceed: the fleet's checkpoint prefixes are empty (exactly once is the point).
    with harness(seed, backoff_base_seconds=60, backoff_max_seconds=600, no_checkpoint="proceed") as opened:
        yield opened


class StaleFirstRead:
    """Wraps the real lineage store: when ``stale`` is set, the first ``load`` of a delivery
    returns the lineage as an earlier delivery first saw it (or nothing), as a concurrent
    invocation that read before the other wrote would. Writes always go to DynamoDB."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.first_seen: dict[str, Lineage | None] = {}
        self.stale = False

    def load(self, lineage_id: str) -> Lineage | None:
        fresh = self.inner.load(lineage_id)
        self.first_seen.setdefault(lineage_id, fresh)
        if self.stale:
            self.stale = False
            return self.first_seen[lineage_id]
        return fresh

    def find_job(self, job_arn: str) -> LineageRef | None:
        return self.inner.find_job(job_arn)

    def reserve(self, lineage: Lineage, previous: Lineage | None) -> bool:
        return bool(self.inner.reserve(lineage, previous))

    def update_attempt(self, lineage_id: str, record: Any) -> None:
        self.inner.update_attempt(lineage_id, record)

    def claim_decision(self, job_arn: str, status: str, reason: str) -> bool:
        return bool(self.inner.claim_decision(job_arn, status, reason))

    def release_decision(self, job_arn: str, status: str) -> None:
        self.inner.release_decision(job_arn, status)


def _fleet(h: Harness) -> list[str]:
    """Two failed service jobs and one failed container job with fresh ids; their event bodies."""
    bodies = []
    for _ in range(2):
        n = next(_ids)
        job_id = f"5e7e0000-0000-4000-8000-{n:012d}"
        arn = f"arn:aws:batch:us-east-1:111122223333:service-job/{job_id}"
        item = service_job_item(
            CAPACITY, checkpoint_uri=f"s3://{BUCKET}/fleet/{n}/", jobArn=arn, jobId=job_id
        )
        h.aws.batch.put_service_job(item)
        event = sample(CAPACITY)
        event["detail"].update(jobArn=arn, jobId=job_id)
        bodies.append(json.dumps(event))
    n = next(_ids)
    job_id = f"c0de0000-0000-4000-8000-{n:012d}"
    arn = f"arn:aws:batch:us-east-1:111122223333:job/{job_id}"
    h.aws.batch.put_job(container_job_item(SPOT, jobArn=arn, jobId=job_id))
    event = sample(SPOT)
    event["detail"].update(jobArn=arn, jobId=job_id)
    bodies.append(json.dumps(event))
    return bodies


def _fail_new_job(h: Harness, new_arn: str, original_body: str) -> str:
    """Batch fails the job recovery submitted, the same way; returns that failure's event body."""
    job_id = new_arn.rsplit("/", 1)[-1]
    event = json.loads(original_body)
    failure = event["detail"]
    stored = h.aws.batch.service_jobs.get(job_id) or h.aws.batch.jobs[job_id]
    detail = stored.detail
    for key in ("status", "statusReason", "attempts", "stoppedAt", "startedAt"):
        if key in failure:
            detail[key] = copy.deepcopy(failure[key])
    event["detail"].update(jobArn=new_arn, jobId=job_id, jobName=detail["jobName"])
    event["id"] = f"00000000-0000-4000-8000-{next(_ids):012d}"
    return json.dumps(event)


OPS = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=1000),  # which known failure
        st.integers(min_value=1, max_value=3),  # delivered how many times
        st.booleans(),  # that delivery read a stale lineage
        st.sampled_from([0, 0, 20, 90, 700]),  # seconds passing afterwards
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_at_most_one_resubmission_per_lineage_and_attempt(
    h: Harness, ops: list[tuple[int, int, bool, int]]
) -> None:
    h.aws.drain_journal()
    recoverer = h.recoverer()
    store = StaleFirstRead(recoverer.lineage)
    recoverer.lineage = store
    known = _fleet(h)
    origin: dict[str, str] = {}  # failure body -> the fleet body it descends from
    for body in known:
        origin[body] = body
    for pick, times, stale, advance in ops:
        body = known[pick % len(known)]
        for _ in range(times):
            store.stale = stale
            try:
                result = recoverer.handle(event_of(body))
            except RetryLater:
                continue  # SQS delivers it again later: it stays in `known`
            if result.action is Action.RESUBMITTED and result.new_job_arn:
                failed = _fail_new_job(h, result.new_job_arn, origin[body])
                origin[failed] = origin[body]
                known.append(failed)
        h.time.advance(advance)

    submitted = [e for e in h.submits() if e.succeeded]
    per_attempt = Counter((e.params["tags"][LINEAGE_TAG], e.params["tags"][ATTEMPT_TAG]) for e in submitted)
    assert all(count == 1 for count in per_attempt.values()), per_attempt
    per_lineage = Counter(lineage for lineage, _ in per_attempt)
    kinds = {e.params["tags"][LINEAGE_TAG]: e.action for e in submitted}
    for lineage, count in per_lineage.items():
        limit = (
            BUDGET["CAPACITY"] if kinds[lineage] == "batch:SubmitServiceJob" else BUDGET["SPOT_INTERRUPTION"]
        )
        assert count <= limit
        attempts = sorted(int(a) for lin, a in per_attempt if lin == lineage)
        assert attempts == list(range(1, count + 1))  # no gaps, no repeats
    # What AWS holds agrees with the calls: one job per (lineage, attempt).
    created = Counter(
        (job.detail["tags"][LINEAGE_TAG], job.detail["tags"][ATTEMPT_TAG])
        for job in itertools.chain(h.aws.batch.service_jobs.values(), h.aws.batch.jobs.values())
        if LINEAGE_TAG in (job.detail.get("tags") or {})
    )
    assert all(count == 1 for count in created.values()), created


def test_a_concurrent_delivery_that_read_before_the_write_stops_at_the_condition(h: Harness) -> None:
    h.aws.drain_journal()
    body = _fleet(h)[0]
    first, second = h.recoverer(), h.recoverer()
    racing = StaleFirstRead(second.lineage)
    second.lineage = racing
    racing.first_seen[lineage_id_for(json.loads(body)["detail"]["jobArn"])] = None  # read "before"
    assert first.handle(event_of(body)).action is Action.RESUBMITTED
    racing.stale = True
    result = second.handle(event_of(body))  # its conditional write of attempt 1 fails; it re-reads
    assert result.action is Action.DUPLICATE
    assert len(h.submits()) == 1 and len(h.published()) == 1
    assert [e.error_code for e in h.calls("dynamodb:PutItem") if not e.succeeded] == [
        "ConditionalCheckFailedException"
    ]
