"""``PreemptingShare``: the quota share a preemption's reason names, read by one parser
(``shared.classification.preempting_share_of_reason``) for the alerts, the metrics function and
the job ledger; the dimension is emitted only when a reason names a share, never as a placeholder."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from batchpilot.ledger.model import JobDetails
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.classification import Category, classify, preempting_share_of_reason
from batchpilot.shared.metrics import metric_points
from batchpilot.shared.records import decode
from batchpilot_local.testing.ledger import FakeBatch, ListSink, MemoryLedgerStore
from batchpilot_local.testing.samples import envelope, sample, service_job

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
PREEMPTED = "arn:aws:batch:us-east-1:111122223333:service-job/fc9b254c-bd98-41d4-876d-e7f8d19e2413"
# The AWS Batch User Guide's example ("Service job preemption events") names no share.
DOCUMENTED = "PREEMPTION_IN_PROGRESS: Cross-share preemption triggered to reclaim borrowed capacity"


@pytest.mark.parametrize(
    ("reasons", "share"),
    [
        ((DOCUMENTED,), None),
        ((None, "", "PREEMPTION_IN_PROGRESS"), None),
        (
            ("PREEMPTION_IN_PROGRESS: Preempted by job arn:...:service-job/x from quota share prod",),
            "prod",
        ),
        (("Preempted by job arn from share team-a.v2",), "team-a.v2"),
        # the first reason that names a share
        ((DOCUMENTED, "Preempted by job x from quota share research"), "research"),
        (("... from quota share " + "s" * 300,), "s" * 255),  # bounded like a dimension value
    ],
)
def test_the_parser_reads_a_named_share_and_nothing_else(
    reasons: tuple[str | None, ...], share: str | None
) -> None:
    assert preempting_share_of_reason(*reasons) == share


def _event(name: str) -> Any:
    event = decode(json.dumps(sample(name)))
    assert not hasattr(event, "outcome")
    return event


def test_started_completed_and_a_failed_job_name_the_share_their_reasons_name() -> None:
    assert classify(_event("service-job-preemption/started")).preempting_share == "research"
    # Completed has no statusReason of its own: the latest preempted attempt's reason names it.
    assert classify(_event("service-job-preemption/completed")).preempting_share == "research"
    failed = classify(_event("service-job/failed-preemption-budget-spent"))
    assert failed.category is Category.PREEMPTION and failed.preempting_share == "prod"
    assert classify(_event("service-job/running")).preempting_share is None


def _started(reason: str) -> dict[str, Any]:
    return envelope(
        "Batch Service Job Preemption Started",
        {"statusReason": reason, "preemptedJobArn": PREEMPTED, "status": "RUNNING"},
        time="2026-11-24T11:26:56Z",
    )


def test_the_metrics_function_leaves_preemptions_to_the_ledger() -> None:
    # One series per concept: the ledger's Preemptions carries the queue and share the
    # Preemption Started event lacks (and PreemptingShare when the reason names it).
    named = decode(json.dumps(sample("service-job-preemption/started")))
    assert metric_points(classify(named), named.time, NOW) == []  # type: ignore[union-attr, arg-type]


def _ledger() -> tuple[LedgerService, ListSink]:
    details = JobDetails(queue="quota-q", environment="quota-env", quota_share="low", instances=4, sized=True)
    sink = ListSink()
    settings = LedgerSettings.from_environ({"BATCHPILOT_STATE_TABLE": "t"})
    service = LedgerService(settings, MemoryLedgerStore(), FakeBatch({PREEMPTED: details}), sink, lambda: NOW)
    running = service_job(
        "RUNNING",
        jobArn=PREEMPTED,
        jobQueue="arn:aws:batch:us-east-1:111122223333:job-queue/quota-q",
        quotaShareName="low",
        startedAt=1795510840337,
    )
    running["time"] = "2026-11-24T09:00:41Z"
    service.record(json.dumps(running))
    return service, sink


def _preemptions(sink: ListSink) -> list[dict[str, str]]:
    sink.flush()
    return [dict(p.dimensions) for p in sink.points if p.name == "Preemptions"]


@pytest.mark.parametrize(
    ("reason", "dims"),
    [
        (
            "PREEMPTION_IN_PROGRESS: Preempted by job arn:aws:batch:us-east-1:111122223333:service-job/p "
            "from quota share prod",
            {"JobQueue": "quota-q", "QuotaShare": "low", "PreemptingShare": "prod"},
        ),
        (DOCUMENTED, {"JobQueue": "quota-q", "QuotaShare": "low"}),
    ],
)
def test_the_ledger_counts_a_started_preemption_with_the_share_its_reason_names(
    reason: str, dims: dict[str, str]
) -> None:
    service, sink = _ledger()
    service.record(json.dumps(_started(reason)))
    assert _preemptions(sink) == [dims]


def test_the_ledger_names_the_share_when_only_completed_is_seen_and_counts_once() -> None:
    service, sink = _ledger()
    completed = sample("service-job-preemption/completed")
    service.record(json.dumps(completed))
    service.record(json.dumps(completed))  # a duplicate changes nothing
    assert _preemptions(sink) == [{"JobQueue": "quota-q", "QuotaShare": "low", "PreemptingShare": "research"}]
