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

from batchpilot_local.testing.recovery import (
    BUCKET,
    checkpoint_item,
    fleet,
    harness,
    max_in_window,
    run_fleet,
    world,
)

FLEET = 200
BATCH_SIZE = 10  # the event source mapping's BatchSize
CONCURRENCY = 2  # its MaximumConcurrency (and the function's reserved concurrency)
TIMEOUT_S = 60.0  # the function's Timeout


def test_a_200_job_fleet_reclaim_is_resubmitted_under_5_submits_per_second() -> None:
    checkpoint = f"s3://{BUCKET}/fleet/"
    # the fleet is PREEMPTED jobs whose submitter set preemptionRetriesBeforeTermination: opt in
    with harness(
        world(checkpoints=[checkpoint_item(checkpoint, "2026-11-22T00:00:00Z")]),
        extend_preemption_retries=True,
    ) as h:
        bodies = fleet(h, FLEET, checkpoint, "f1ee7000")
        created_before = set(h.aws.batch.service_jobs)

        # Two execution environments, each with its own pacer, running one batch of 10 each at the
        # same time: their records are interleaved on the one (fake) clock.
        environments = [h.recoverer() for _ in range(CONCURRENCY)]
        started = h.time.monotonic()
        resubmitted, _ = run_fleet(
            environments, bodies, h.time.monotonic, batch_size=BATCH_SIZE, timeout_s=TIMEOUT_S
        )
        elapsed = h.time.monotonic() - started

        new_jobs = [j.detail for k, j in h.aws.batch.service_jobs.items() if k not in created_before]
        assert resubmitted == len(new_jobs) == FLEET  # nothing dropped, nothing doubled
        assert len({j["jobName"] for j in new_jobs}) == FLEET
        assert max_in_window([int(j["createdAt"]) for j in new_jobs]) <= 5
        throttled = [e for e in h.calls("batch:SubmitServiceJob") if e.error_code or e.retries]
        assert throttled == []
        # paced, not serialised to a crawl: 4 submits per second for the whole function
        assert FLEET / elapsed > 3.5
        assert all(
            json.loads(j["serviceRequestPayload"])["CheckpointConfig"]["S3Uri"] == checkpoint
            for j in new_jobs
        )


def test_the_window_counter() -> None:
    assert max_in_window([0, 100, 999, 1000, 1999, 2000]) == 3
    assert max_in_window([]) == 0
