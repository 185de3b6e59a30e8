"""Recovery under faults at the HTTP layer: whatever botocore retries and SQS redelivers, each
failure ends with exactly one new job (docs/reliability.md).

The real Recoverer and adapters run against the embedded AWS; :class:`HttpFaults` answers the
scripted requests with throttling, 5xx, "accepted but 5xx / timed out" (the emulator made the job,
the client saw an error) or a kill of the invocation. A record handed back, or an invocation
killed, is delivered again to a fresh Recoverer (a new execution environment), as SQS would.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from batchpilot.recovery.service import LISTING_SETTLE_SECONDS, Action, RecoveryResult, RetryLater
from batchpilot_local.testing.faults import FaultKind, HttpFaults, Killed
from batchpilot_local.testing.recovery import (
    BUCKET,
    Harness,
    checkpoint_item,
    container_job_item,
    event_of,
    harness,
    service_job_item,
    training_job_item,
    world,
)
from batchpilot_local.testing.samples import sample

CAPACITY = "service-job/failed-sagemaker-capacity"
SPOT = "batch-job/failed-spot-reclaim"
SM_CAPACITY = "sagemaker/failed-capacity-error"
CASES = {
    "SubmitServiceJob": (CAPACITY, "batch"),
    "SubmitJob": (SPOT, "batch"),
    "CreateTrainingJob": (SM_CAPACITY, "sagemaker"),
}
CHECKPOINTS = {
    CAPACITY: f"s3://{BUCKET}/llm/run-12/",
    SPOT: f"s3://{BUCKET}/llama-ft/run-39/",  # the container job's checkpoint_uri parameter
    SM_CAPACITY: f"s3://{BUCKET}/llama3-70b/",
}


def fresh_checkpoint(name: str) -> str:
    """A checkpoint written a minute before the failure (resumable whatever the freshness rules)."""
    failed_at = datetime.fromisoformat(sample(name)["time"].replace("Z", "+00:00"))
    return (failed_at - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def fault_world() -> dict[str, Any]:
    return world(
        service_jobs=[service_job_item(CAPACITY, checkpoint_uri=CHECKPOINTS[CAPACITY])],
        jobs=[container_job_item(SPOT)],
        training_jobs=[training_job_item(SM_CAPACITY, checkpoint_uri=CHECKPOINTS[SM_CAPACITY])],
        checkpoints=[checkpoint_item(uri, fresh_checkpoint(name)) for name, uri in CHECKPOINTS.items()],
    )


def jobs(h: Harness) -> int:
    """Every job the embedded AWS holds (seeded and submitted)."""
    return len(h.aws.batch.service_jobs) + len(h.aws.batch.jobs) + len(h.aws.training.jobs)


def deliver(h: Harness, name: str, *, times: int = 8) -> tuple[RecoveryResult, int]:
    """Deliver ``name``'s failure event until it is answered: handed back or killed, it comes back
    (a minute later, to a fresh Recoverer). Returns the result and the deliveries it took."""
    body = sample(name)
    for delivery in range(1, times + 1):
        try:
            return h.recoverer().handle(event_of(body)), delivery
        except (RetryLater, Killed):
            h.time.advance(60)
    raise AssertionError(f"not answered after {times} deliveries")


FAULTS = [
    (FaultKind.THROTTLE, 2),
    (FaultKind.THROTTLE, None),  # throttled for good: handed back until it clears
    (FaultKind.SERVER_ERROR, 2),
    (FaultKind.ACCEPTED_SERVER_ERROR, 1),
    (FaultKind.ACCEPTED_SERVER_ERROR, 6),  # every resend accepted too
    (FaultKind.ACCEPTED_TIMEOUT, 1),
    (FaultKind.ACCEPTED_TIMEOUT, 3),
]


@pytest.mark.parametrize("operation", list(CASES))
@pytest.mark.parametrize(("kind", "times"), FAULTS, ids=[f"{k}-x{t or 'always'}" for k, t in FAULTS])
def test_one_job_per_failure_whatever_the_submit_call_sees(
    operation: str, kind: FaultKind, times: int | None
) -> None:
    name, service = CASES[operation]
    with harness(fault_world()) as h:
        before = jobs(h)
        with HttpFaults() as faults:
            faults.add(service, operation, kind, times=times)
            if times is None:  # clears after four deliveries' worth of attempts
                faults.faults[0].times = 4 * 6
            result, _ = deliver(h, name, times=12)
        assert result.action is Action.RESUBMITTED, result
        assert jobs(h) == before + 1  # exactly one new job
        assert [e["attempt"] for e in h.published("Job Resubmitted")] == [1]
        assert faults.injected  # the fault was met


@pytest.mark.parametrize("kind", [FaultKind.ACCEPTED_SERVER_ERROR, FaultKind.ACCEPTED_TIMEOUT])
@pytest.mark.parametrize("lag", [0.0, 30.0, LISTING_SETTLE_SECONDS])
def test_a_lost_submit_job_answer_and_a_lagging_list_jobs_give_one_job(kind: FaultKind, lag: float) -> None:
    # SubmitJob made the job but its answer was lost, and ListJobs does not list the new job for
    # ``lag`` seconds: the resend waits until the look-up can see it, so one job in the end.
    name, service = CASES["SubmitJob"]
    with harness(fault_world()) as h:
        before = jobs(h)
        with HttpFaults() as faults:
            faults.add(service, "SubmitJob", kind, times=1)
            faults.add(service, "ListJobs", FaultKind.LAGGING_LIST, times=None)
            lagging, made_at = faults.faults[1], h.time.now()
            deliveries: list[str] = []
            for _ in range(12):
                if (h.time.now() - made_at).total_seconds() >= lag:
                    lagging.times = lagging.hits  # the listing has caught up
                try:
                    result = h.recoverer().handle(event_of(sample(name)))
                    break
                except RetryLater as exc:
                    deliveries.append(exc.why.value)
                    h.time.advance(15)
            else:
                raise AssertionError("not answered after 12 deliveries")
        assert result.action is Action.RESUBMITTED, result
        assert jobs(h) == before + 1  # exactly one new job
        assert [e["attempt"] for e in h.published("Job Resubmitted")] == [1]
        assert faults.injected[0] == ("batch:SubmitJob", kind)
        # The lost answer hands the record back; the resend waits LISTING_SETTLE_SECONDS.
        assert deliveries[:2] == ["submit-failed", "listing-settling"], deliveries


def recovery_steps(name: str) -> list[str]:
    """The AWS calls of one undisturbed recovery of ``name``, in order."""
    with harness(fault_world()) as h, HttpFaults() as faults:
        assert deliver(h, name)[0].action is Action.RESUBMITTED
        return list(faults.seen)


@pytest.mark.parametrize("operation", list(CASES))
def test_killed_at_any_step_then_redelivered_gives_one_job(operation: str) -> None:
    name, _ = CASES[operation]
    steps = recovery_steps(name)
    assert len(steps) >= 6
    for index, action in enumerate(steps):
        skip = Counter(steps[:index])[action]
        service, api = action.split(":")
        for kind in (FaultKind.KILL_BEFORE, FaultKind.KILL_AFTER):
            with harness(fault_world()) as h:
                before = jobs(h)
                with HttpFaults() as faults:
                    faults.add(service, api, kind, skip=skip)
                    result, deliveries = deliver(h, name)
                where = f"{kind} step {index} {action}"
                assert faults.injected == [(action, kind)], where
                assert result.action is Action.RESUBMITTED or deliveries > 1, where
                assert jobs(h) == before + 1, where
                published = [e["attempt"] for e in h.published("Job Resubmitted")]
                # PutEvents accepted, then killed before its record: sent again (at most one extra;
                # the alerts function keys Job Resubmitted by lineage and attempt, so one alert).
                published_first = "events:PutEvents" in steps[:index]
                bound = 2 if published_first or (kind is FaultKind.KILL_AFTER and api == "PutEvents") else 1
                assert published and len(published) <= bound and set(published) == {1}, where
