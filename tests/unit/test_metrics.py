"""Metric derivation: names, dimensions from the allow-list, values, timestamps."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aws_lambda_powertools.utilities.batch import process_partial_response
from batchpilot.metrics.handler import MetricsProcessor
from batchpilot.metrics.service import record_metrics
from batchpilot.shared.classification import Category, JobFacts, JobKind, classify
from batchpilot.shared.events import parse_event
from batchpilot.shared.metrics import (
    DIMENSIONS,
    MetricPoint,
    MetricsDetail,
    dimensions,
    metric_points,
    metric_timestamp,
)
from batchpilot.shared.observability import metrics as shared_metrics
from batchpilot.shared.records import Outcome, Rejected
from batchpilot_local.testing.harness import sqs_event
from batchpilot_local.testing.samples import job_event_paths, sample, service_job, training_job
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
EVENT_TIME = datetime(2026, 11, 20, 10, 15, 30, tzinfo=UTC)


def by_name(points: list[MetricPoint]) -> dict[str, MetricPoint]:
    names = [p.name for p in points]
    assert len(names) == len(set(names)), names
    return {p.name: p for p in points}


def test_failed_service_job_on_fair_share_queue() -> None:
    event = service_job(
        "FAILED",
        statusReason="Received status from SageMaker: CapacityError: Unable to provision",
        shareIdentifier="prod",
        createdAt=1763633000000,
        startedAt=1763633060000,
        stoppedAt=1763636660000,
    )
    facts = classify(parse_event(event))
    points = by_name(metric_points(facts, EVENT_TIME, NOW))
    # Basic: the queue, not the share (per-job detail, in the blob's logs, not a dimension).
    base = (("JobKind", "service-job"), ("JobQueue", "ml-training-highpri"))
    assert set(points) == {"JobsFailed", "JobFailureRate", "QueueWaitTime", "RunTime"}
    assert points["JobsFailed"].dimensions == tuple(sorted((*base, ("FailureCategory", "CAPACITY"))))
    assert points["JobFailureRate"] == MetricPoint(
        "JobFailureRate", "Percent", 100.0, (("JobQueue", "ml-training-highpri"),), EVENT_TIME
    )
    assert points["QueueWaitTime"] == MetricPoint("QueueWaitTime", "Seconds", 60.0, base, EVENT_TIME)
    assert points["RunTime"].value == 3600.0
    assert points["RunTime"].unit == "Seconds"

    # Detailed: each point also per share, and the state transition by status.
    detailed = metric_points(facts, EVENT_TIME, NOW, MetricsDetail.DETAILED)
    share = tuple(sorted((*base, ("ShareIdentifier", "prod"))))
    sets = {(p.name, p.dimensions) for p in detailed}
    assert ("QueueWaitTime", base) in sets and ("QueueWaitTime", share) in sets
    assert ("JobsFailed", tuple(sorted((*share, ("FailureCategory", "CAPACITY"))))) in sets
    assert ("JobStateTransitions", tuple(sorted((*share, ("Status", "FAILED"))))) in sets
    assert [p.dimensions for p in detailed if p.name == "JobFailureRate"] == [
        (("JobQueue", "ml-training-highpri"),)
    ]


def _failure_rate_samples(events: Iterable[dict[str, object]]) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {}
    for event in events:
        for point in metric_points(classify(parse_event(event)), EVENT_TIME, NOW):
            if point.name == "JobFailureRate":
                assert point.unit == "Percent"
                assert [k for k, _ in point.dimensions] == ["JobQueue"]
                samples.setdefault(dict(point.dimensions)["JobQueue"], []).append(point.value)
    return samples


def test_job_failure_rate_averages_to_failed_over_ended_per_queue_across_shares() -> None:
    spot = sample("batch-job/succeeded")
    spot["detail"]["jobQueue"] = spot["detail"]["jobQueue"].replace("ml-training-research", "gpu-spot-queue")
    events = [
        service_job(
            "FAILED", statusReason="Received status from SageMaker: AlgorithmError: x", shareIdentifier="a"
        ),
        service_job("SUCCEEDED", shareIdentifier="b"),
        service_job("SUCCEEDED"),
        service_job("SUCCEEDED", shareIdentifier="a"),
        service_job("RUNNING", shareIdentifier="a"),  # not ended: no sample
        sample("batch-job/running"),  # ml-training-highpri too, not ended
        sample("batch-job/failed-spot-reclaim"),  # gpu-spot-queue
        spot,
        sample("batch-job/succeeded"),  # ml-training-research
    ]
    samples = _failure_rate_samples(events)
    # CloudWatch's Average over a period is Sum / SampleCount of these samples: the failure rate
    # of the queue's jobs that ended in it, every share together; SampleCount is how many ended.
    rates = {queue: (len(values), sum(values) / len(values)) for queue, values in samples.items()}
    assert rates == {
        "ml-training-highpri": (4, 25.0),
        "gpu-spot-queue": (2, 50.0),
        "ml-training-research": (1, 0.0),
    }


def test_job_failure_rate_leaves_out_training_jobs_and_blocked_queues() -> None:
    events = [
        sample("sagemaker/failed-algorithm-error"),
        sample("sagemaker/completed"),
        sample("service-job-queue-blocked/misconfiguration-service-environment-max-resource"),
        sample("service-job-preemption/started"),
    ]
    assert _failure_rate_samples(events) == {}


def test_job_queue_dimension_is_the_name_not_the_arn() -> None:
    facts = classify(parse_event(sample("service-job/succeeded")))
    points = metric_points(facts, EVENT_TIME, NOW)
    assert points
    for point in points:
        queue = dict(point.dimensions)["JobQueue"]
        assert not queue.startswith("arn:")
        assert "/" not in queue


def test_succeeded_training_job_instance_hours_by_instance_type() -> None:
    event = training_job(
        "Completed", TrainingStartTime=1763633000000, TrainingEndTime=1763633000000 + 5_400_000
    )
    points = by_name(metric_points(classify(parse_event(event)), EVENT_TIME, NOW))
    assert points["InstanceHours"].value == pytest.approx(3.0)  # 2 instances x 1.5 h
    assert dict(points["InstanceHours"].dimensions) == {
        "JobKind": "training-job",
        "InstanceType": "ml.p4d.24xlarge",
    }
    assert "JobsSucceeded" in points
    assert "JobsFailed" not in points


def test_stopped_training_job_counts_as_failed_never_succeeded() -> None:
    points = by_name(
        metric_points(classify(parse_event(sample("sagemaker/stopped-by-user"))), EVENT_TIME, NOW)
    )
    assert "JobsSucceeded" not in points
    assert dict(points["JobsFailed"].dimensions)["FailureCategory"] == "USER_STOPPED"


def test_queue_blocked_and_preemption() -> None:
    blocked = metric_points(
        classify(
            parse_event(sample("service-job-queue-blocked/misconfiguration-service-environment-max-resource"))
        ),
        EVENT_TIME,
        NOW,
    )
    assert [p.name for p in blocked] == ["QueueBlocked"]
    assert dict(blocked[0].dimensions)["BlockedCategory"] == "MISCONFIGURATION"
    # Preemptions are the job ledger's (it knows the preempted job's queue and share).
    started = metric_points(classify(parse_event(sample("service-job-preemption/started"))), EVENT_TIME, NOW)
    assert started == []
    completed = metric_points(
        classify(parse_event(sample("service-job-preemption/completed"))), EVENT_TIME, NOW
    )
    assert completed == []


def test_spot_interruption_while_batch_retries() -> None:
    facts = classify(parse_event(sample("batch-job/runnable-retrying-after-spot-reclaim")))
    names = [p.name for p in metric_points(facts, EVENT_TIME, NOW)]
    assert names == ["SpotInterruptions"]
    detailed = [p.name for p in metric_points(facts, EVENT_TIME, NOW, MetricsDetail.DETAILED)]
    assert detailed[0] == "JobStateTransitions" and set(detailed) == {
        "JobStateTransitions",
        "SpotInterruptions",
    }


def test_negative_durations_are_left_out_not_clamped() -> None:
    event = service_job(
        "SUCCEEDED", createdAt=1763633060000, startedAt=1763633000000, stoppedAt=1763633100000
    )
    points = by_name(metric_points(classify(parse_event(event)), EVENT_TIME, NOW))
    assert "QueueWaitTime" not in points  # started before created: clock skew
    assert points["RunTime"].value == 100.0


def test_missing_timestamps_emit_no_duration() -> None:
    points = by_name(
        metric_points(
            classify(parse_event(sample("batch-job/failed-before-start-no-attempts"))), EVENT_TIME, NOW
        )
    )
    assert "RunTime" not in points
    assert "JobsFailed" in points


def test_empty_share_identifier_is_not_a_dimension() -> None:
    facts = classify(parse_event(service_job("SUCCEEDED", shareIdentifier="  ")))
    points = metric_points(facts, EVENT_TIME, NOW)
    assert points
    for point in points:
        assert "ShareIdentifier" not in dict(point.dimensions)


@pytest.mark.parametrize(
    ("event_time", "expected"),
    [
        (NOW - timedelta(days=13, hours=23), NOW - timedelta(days=13, hours=23)),
        (NOW - timedelta(days=14, seconds=1), NOW),
        (NOW - timedelta(days=13, hours=23, minutes=59, seconds=30), NOW),  # truncation margin
        (NOW + timedelta(hours=1, minutes=59), NOW + timedelta(hours=1, minutes=59)),
        (NOW + timedelta(hours=2, seconds=1), NOW),
    ],
)
def test_timestamp_is_event_time_inside_cloudwatch_window(event_time: datetime, expected: datetime) -> None:
    assert metric_timestamp(event_time, NOW) == expected


categories = st.none() | st.sampled_from(list(Category))
texts = st.none() | st.text(max_size=1100)
times = st.none() | st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@given(
    st.sampled_from(job_event_paths()),
    categories,
    texts,
    texts,
    texts,
    times,
    times,
    times,
    st.none() | st.integers(min_value=-5, max_value=10_000),
)
def test_every_point_is_well_formed(
    path: Path,
    category: Category | None,
    queue: str | None,
    share: str | None,
    instance_type: str | None,
    created: datetime | None,
    started: datetime | None,
    stopped: datetime | None,
    count: int | None,
) -> None:
    facts: JobFacts = classify(parse_event(json.loads(path.read_text())))
    facts = replace(
        facts,
        category=category,
        queue=queue,
        share_identifier=share,
        instance_type=instance_type,
        created_at=created,
        started_at=started,
        stopped_at=stopped,
        instance_count=count,
    )
    for point in metric_points(facts, EVENT_TIME, NOW):
        assert math.isfinite(point.value)
        assert point.value >= 0
        assert point.dimensions
        for key, value in point.dimensions:
            assert key in DIMENSIONS
            assert value.strip()
            assert 1 <= len(value) <= 1024


class RecordingSink:
    """A metric sink that records what it is given and how often it is flushed."""

    def __init__(self) -> None:
        self.added: list[MetricPoint] = []
        self.flushes = 0

    def add(self, points: Iterable[MetricPoint]) -> None:
        self.added.extend(points)

    def flush(self) -> int:
        self.flushes += 1
        return 0


def test_record_metrics_derives_points_with_the_injected_clock() -> None:
    sink = RecordingSink()
    old = sample("service-job/succeeded")
    old["time"] = "2026-10-01T00:00:00Z"  # older than CloudWatch accepts (14 days): "now" is used
    result = record_metrics(json.dumps(old), sink, lambda: NOW)
    assert isinstance(result, JobFacts) and result.kind is JobKind.SERVICE_JOB
    assert sink.added and {p.timestamp for p in sink.added} == {NOW}
    rejected = record_metrics("{not json", sink, lambda: NOW)
    assert isinstance(rejected, Rejected) and rejected.outcome is Outcome.INVALID


def test_the_processor_flushes_a_batchs_metrics_once_and_counts_every_record() -> None:
    sink = RecordingSink()
    processor = MetricsProcessor(sink, clock=lambda: NOW)
    bodies = [
        json.dumps(sample("service-job/succeeded")),
        "{not json",
        json.dumps(sample("sagemaker/completed")),
    ]
    shared_metrics.clear_metrics()
    try:
        response = process_partial_response(
            sqs_event(bodies, "batchpilot-MetricsQueue"), processor.record_handler, processor
        )
        counted = {name: m["Value"] for name, m in shared_metrics.metric_set.items()}
    finally:
        shared_metrics.clear_metrics()
    assert response == {"batchItemFailures": []}
    assert sink.flushes == 1
    assert {p.name for p in sink.added} >= {"JobsSucceeded"}
    assert counted == {"EventsProcessed": [1.0, 1.0], "InvalidEvents": [1.0]}


def test_dimensions_are_sorted_cleaned_and_refuse_an_unknown_key_every_time() -> None:
    first = dimensions(JobQueue=" q\u00e9 ", JobKind="SERVICE_JOB", ShareIdentifier=None, Status="")
    again = dimensions(JobQueue=" q\u00e9 ", JobKind="SERVICE_JOB", ShareIdentifier=None, Status="")

    assert first == again == (("JobKind", "SERVICE_JOB"), ("JobQueue", "q?"))
    for _ in range(2):  # a cached set must not let a bad key through the second time
        with pytest.raises(ValueError, match="dimension JobName is not in DIMENSIONS"):
            dimensions(JobQueue="q", JobName="secret-job")


def test_a_retried_jobs_queue_wait_ends_at_its_first_start_not_its_latest() -> None:
    # failed-spot-reclaim.json: attempt 1 started 7m 23s after createdAt and was reclaimed; the
    # job's startedAt is attempt 2's, 3h 45m after createdAt. The wait in the queue is the first.
    event = sample("batch-job/failed-spot-reclaim")
    detail = event["detail"]
    first, second = (a["startedAt"] for a in detail["attempts"])
    assert detail["startedAt"] == second > first
    facts = classify(parse_event(event))
    assert facts.first_started_at is not None and facts.started_at is not None
    assert facts.first_started_at < facts.started_at
    points = by_name(metric_points(facts, EVENT_TIME, NOW))
    assert points["QueueWaitTime"].value == (first - detail["createdAt"]) / 1000
    # RunTime stays the latest attempt's run (startedAt to stoppedAt), as before.
    assert points["RunTime"].value == (detail["stoppedAt"] - second) / 1000
