"""Reconciliation at any size against the embedded AWS (moto DynamoDB + the embedded Batch
backend): a run lists at most its page budget and stops before the invocation's timeout, keeps a
cursor in the state table, the next run resumes from it, every pre-existing job ends up taken in,
and a run killed before its cursor is kept leaves nothing counted twice."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from batchpilot.io.batch import BatchLedgerClient
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.ledger import LedgerStateStore
from batchpilot.ledger.ports import ReconcileCursor
from batchpilot.ledger.service import RECONCILE_RESERVE, LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.deadline import DEADLINE
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.testing.harness import aws_with_state_table
from batchpilot_local.testing.ledger import ListSink, stored_and_recounted

TABLE = "batchpilot-StateTable"
ACCOUNT = "111122223333"
T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
JOBS = 450  # 5 RUNNABLE pages + one page of each other active status (6 for ListServiceJobs)
PAGES = 2  # BATCHPILOT_LEDGER_LIST_PAGES_PER_RUN of these tests


@pytest.fixture(scope="module")
def aws() -> Iterator[EmbeddedAws]:
    yield from aws_with_state_table(
        TABLE,
        world={
            "service_environments": [
                {"name": "sm-env", "capacityLimits": [{"maxCapacity": 32, "capacityUnit": "NUM_INSTANCES"}]}
            ],
            "job_queues": [{"name": "sm-q", "serviceEnvironment": "sm-env", "scheduling": "FAIR_SHARE"}],
        },
    )


def clear_ledger(dynamodb: Any) -> None:
    for page in dynamodb.get_paginator("scan").paginate(TableName=TABLE):
        for item in page.get("Items", []):
            dynamodb.delete_item(TableName=TABLE, Key={"pk": item["pk"], "sk": item["sk"]})


def runnable_jobs(count: int) -> list[dict[str, Any]]:
    return [
        {
            "jobArn": f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/r{i:05d}",
            "jobId": f"r{i:05d}",
            "jobName": f"r{i}",
            "jobQueue": "sm-q",
            "status": "RUNNABLE",
            "shareIdentifier": ["HIGHPRI", "LOWPRI"][i % 2],
            "createdAt": int((T0 - timedelta(hours=1)).timestamp() * 1000),
        }
        for i in range(count)
    ]


class KilledOnce(LedgerStateStore):
    """The state store whose second cursor write dies (the invocation killed between writes)."""

    saves = 0

    def save_cursor(self, queue: str, at: datetime | None, cursor: ReconcileCursor) -> None:
        self.saves += 1
        if self.saves == 2:
            raise TimeoutError("invocation killed before the cursor was kept")
        super().save_cursor(queue, at, cursor)


def ledger(store: LedgerStateStore, sink: ListSink) -> LedgerService:
    settings = LedgerSettings.from_environ(
        {
            "BATCHPILOT_STATE_TABLE": TABLE,
            "BATCHPILOT_LEDGER_LIST_PAGES_PER_RUN": str(PAGES),
            "BATCHPILOT_LEDGER_DESCRIBES_PER_RUN": "0",
        }
    )
    return LedgerService(settings, store, BatchLedgerClient(client("batch")), sink, lambda: T0)


def test_fleet_is_taken_in_over_runs_within_the_page_budget(aws: EmbeddedAws) -> None:
    dynamodb = aws.client("dynamodb")
    clear_ledger(dynamodb)
    aws.set_world({"service_jobs": runnable_jobs(JOBS)})
    store = LedgerStateStore(dynamodb, TABLE)
    sink = ListSink()
    service = ledger(store, sink)
    aws.drain_journal()
    runs, missing, pending = 0, 0, []
    while runs < 10:
        summary = service.run(T0 + timedelta(minutes=runs))
        runs += 1
        calls = [e.action for e in aws.drain_journal()]
        assert calls.count("batch:ListServiceJobs") == summary.pages <= PAGES
        missing += summary.drift.get("sm-q:missing", 0)
        pending.append(summary.pending)
        if summary.reconciled:
            break
        assert summary.unfinished == ["sm-q"]
        assert store.reconcile_state("sm-q").cursor is not None  # kept for the next run
    # 5 RUNNABLE pages and 5 one-page statuses: 10 pages at 2 a run.
    assert runs == 5
    assert pending == [1, 1, 1, 1, 0]
    assert sink.values("ReconcilePending") == [1.0, 1.0, 1.0, 1.0, 0.0]
    assert missing == JOBS
    assert store.reconcile_state("sm-q").cursor is None
    assert sink.values("RunnableJobs", JobQueue="sm-q")[-1] == JOBS  # the last run's gauge
    stored, recounted = stored_and_recounted(dynamodb, TABLE)
    assert stored == recounted


def test_run_killed_before_its_cursor_is_kept_counts_nothing_twice(aws: EmbeddedAws) -> None:
    dynamodb = aws.client("dynamodb")
    clear_ledger(dynamodb)
    aws.set_world({"service_jobs": runnable_jobs(JOBS)})
    store = KilledOnce(dynamodb, TABLE)
    service = ledger(store, ListSink())
    first = service.run(T0)  # SUBMITTED and PENDING (one empty page each): cursor kept
    assert first.unfinished == ["sm-q"]
    kept = store.reconcile_state("sm-q").cursor
    with pytest.raises(TimeoutError):
        service.run(T0 + timedelta(minutes=1))  # two RUNNABLE pages applied, then killed
    assert store.reconcile_state("sm-q").cursor == kept  # it resumes before the killed run's pages
    runs, missing = 0, 0
    while runs < 10:
        summary = service.run(T0 + timedelta(minutes=2 + runs))
        runs += 1
        missing += summary.drift.get("sm-q:missing", 0)
        if summary.reconciled:
            break
    assert runs == 4  # the killed run's two pages again, then the six left
    assert missing == JOBS - 200  # the killed run's 200 jobs were taken in once, not again
    stored, recounted = stored_and_recounted(dynamodb, TABLE)
    assert stored == recounted
    runnable = [d.jobs for k, d in stored.items() if k.queue == "sm-q" and k.status.value == "RUNNABLE"]
    assert runnable and sum(runnable) == JOBS


def test_no_page_is_listed_close_to_the_timeout(aws: EmbeddedAws) -> None:
    dynamodb = aws.client("dynamodb")
    clear_ledger(dynamodb)
    aws.set_world({"service_jobs": runnable_jobs(10)})
    store = LedgerStateStore(dynamodb, TABLE)
    service = ledger(store, ListSink())
    aws.drain_journal()
    DEADLINE.start(lambda: RECONCILE_RESERVE - 1)  # a request still fits (io/deadline.py)
    try:
        summary = service.run(T0)
    finally:
        DEADLINE.clear()
    calls = [e.action for e in aws.drain_journal()]
    assert "batch:ListServiceJobs" not in calls
    assert summary.unfinished == ["sm-q"] and summary.pending == 1
    # Time enough: the listing resumes from the cursor kept; 6 one-page statuses at 2 pages a run.
    summaries = [service.run(T0 + timedelta(minutes=minute)) for minute in (1, 2, 3)]
    assert [s.resumed for s in summaries] == [["sm-q"]] * 3
    assert [s.reconciled for s in summaries] == [[], [], ["sm-q"]]
    assert sum(s.drift.get("sm-q:missing", 0) for s in summaries) == 10


def test_a_refused_cursor_starts_the_listing_over(aws: EmbeddedAws) -> None:
    dynamodb = aws.client("dynamodb")
    clear_ledger(dynamodb)
    aws.set_world({"service_jobs": runnable_jobs(10)})
    store = LedgerStateStore(dynamodb, TABLE)
    # A cursor whose nextToken AWS Batch no longer accepts (expired, or from another listing).
    store.save_cursor("sm-q", None, ReconcileCursor(2, "not-a-token", T0 - timedelta(hours=1)))
    service = ledger(store, ListSink())
    summaries = [service.run(T0 + timedelta(minutes=minute)) for minute in range(4)]
    assert summaries[0].restarted == ["sm-q"]
    # The refused request and 6 one-page statuses at 2 pages a run.
    assert [s.reconciled for s in summaries] == [[], [], [], ["sm-q"]]
    assert sum(s.drift.get("sm-q:missing", 0) for s in summaries) == 10
