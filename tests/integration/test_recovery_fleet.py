"""A fleet-wide reclaim: 200 service jobs fail at once and recovery resubmits every one of them
without ever passing SubmitServiceJob's 5 calls per second per account.

Time is fake (one clock for the pacers, the embedded backend's timestamps and its throttle), so
the 200 resubmissions that take ~50 s of fake time run in seconds. The rate is measured on what
the embedded Batch recorded: the ``createdAt`` of each new service job. The embedded backend
throttles at 5 calls per second like AWS, so going over would also show as
TooManyRequestsException in the journal.
"""

from __future__ import annotations

import json
from collections import deque

from batchpilot.recovery.service import Action, RetryLater

from tests.conftest import sample
from tests.integration.test_recovery_support import BUCKET, checkpoint_item, harness, service_job_item, world

FLEET = 200
BATCH_SIZE = 10  # the event source mapping's BatchSize
CONCURRENCY = 2  # its MaximumConcurrency (and the function's reserved concurrency)
TIMEOUT_S = 60.0  # the function's Timeout
PREEMPTED = "service-job/failed-preemption-budget-spent"


def _max_in_window(times_ms: list[int], window_ms: int = 1000) -> int:
    """The most events in any half-open window of ``window_ms``."""
    best, recent = 0, deque[int]()
    for t in sorted(times_ms):
        recent.append(t)
        while recent[0] <= t - window_ms:
            recent.popleft()
        best = max(best, len(recent))
    return best


def test_a_200_job_fleet_reclaim_is_resubmitted_under_5_submits_per_second() -> None:
    checkpoint = f"s3://{BUCKET}/fleet/"
    with harness(world(checkpoints=[checkpoint_item(checkpoint, "2026-11-22T00:00:00Z")])) as h:
        bodies = []
        for n in range(FLEET):
            job_id = f"f1ee7000-0000-4000-8000-{n:012d}"
            arn = f"arn:aws:batch:us-east-1:111122223333:service-job/{job_id}"
            h.aws.batch.put_service_job(
                service_job_item(
                    PREEMPTED, checkpoint_uri=checkpoint, jobArn=arn, jobId=job_id, jobName=f"fleet-{n}"
                )
            )
            event = sample(PREEMPTED)
            event["detail"].update(jobArn=arn, jobId=job_id, jobName=f"fleet-{n}")
            bodies.append(json.dumps(event))
        created_before = set(h.aws.batch.service_jobs)

        # Two execution environments, each with its own pacer, running one batch of 10 each at the
        # same time: their records are interleaved on the one (fake) clock.
        environments = [h.recoverer() for _ in range(CONCURRENCY)]
        started = h.time.monotonic()
        pending = list(bodies)
        resubmitted = 0
        while pending:
            batches = [pending[i * BATCH_SIZE : (i + 1) * BATCH_SIZE] for i in range(CONCURRENCY)]
            pending = pending[CONCURRENCY * BATCH_SIZE :]
            deadline = h.time.monotonic() + TIMEOUT_S
            for turn in range(BATCH_SIZE):
                for recoverer, batch in zip(environments, batches, strict=True):
                    if turn >= len(batch):
                        continue
                    try:
                        result = recoverer.handle(
                            batch[turn], time_left=lambda d=deadline: d - h.time.monotonic()
                        )
                    except RetryLater:
                        pending.append(batch[turn])  # a batch item failure: SQS delivers it again
                        continue
                    assert result.action is Action.RESUBMITTED
                    resubmitted += 1
        elapsed = h.time.monotonic() - started

        new_jobs = [j.detail for k, j in h.aws.batch.service_jobs.items() if k not in created_before]
        assert resubmitted == len(new_jobs) == FLEET  # nothing dropped, nothing doubled
        assert len({j["jobName"] for j in new_jobs}) == FLEET
        assert _max_in_window([int(j["createdAt"]) for j in new_jobs]) <= 5
        throttled = [e for e in h.calls("batch:SubmitServiceJob") if e.error_code or e.retries]
        assert throttled == []
        # paced, not serialised to a crawl: 4 submits per second for the whole function
        assert FLEET / elapsed > 3.5
        assert all(
            json.loads(j["serviceRequestPayload"])["CheckpointConfig"]["S3Uri"] == checkpoint
            for j in new_jobs
        )


def test_the_window_counter() -> None:
    assert _max_in_window([0, 100, 999, 1000, 1999, 2000]) == 3
    assert _max_in_window([]) == 0
