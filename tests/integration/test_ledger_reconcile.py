"""Reconciliation at any size against the embedded AWS (moto DynamoDB + the embedded Batch
backend): a run lists at most its page budget and stops before the invocation's timeout, keeps a
cursor in the state table, the next run resumes from it, every pre-existing job ends up taken in,
and a run killed before its cursor is kept leaves nothing counted twice."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from batchpilot.io.batch import BatchLedgerClient
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.ledger import SEEN_PER_ITEM, LedgerStateStore
from batchpilot.ledger.model import JobDetails, JobStatus, Observation, Source, Transition
from batchpilot.ledger.ports import ListedPage, QueueInfo, ReconcileCursor, ReconcileState
from batchpilot.ledger.service import RECONCILE_RESERVE, LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.classification import JobKind
from batchpilot.shared.deadline import DEADLINE
from batchpilot.shared.records import Outcome
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.testing.harness import aws_with_state_table
from batchpilot_local.testing.ledger import ListSink, stored_and_recounted
from batchpilot_local.testing.samples import service_job

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


# ---------------------------------------------------------------- gone jobs of a pass over runs
ENDED = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/ended"  # ended before the pass, event missed
AGED = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/aged"  # ended and aged out: AWS knows it not
LATE = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/late"  # ends during the pass, event missed
FINISHING = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/finishing"  # ends during the pass, event read


def world_job(arn: str, status: str) -> dict[str, Any]:
    name = arn.rsplit("/", 1)[1]
    return {
        "jobArn": arn,
        "jobId": name,
        "jobName": name,
        "jobQueue": "sm-q",
        "status": status,
        "createdAt": int((T0 - timedelta(hours=2)).timestamp() * 1000),
    }


class Recorded(LedgerStateStore):
    """The state store, counting each job's closings (a write taking it from active to ended);
    ``kill_closing``: the first closing write of these jobs dies before it is made (the invocation
    killed between the describe and the close)."""

    def __init__(self, client: Any, table: str, kill_closing: frozenset[str] = frozenset()) -> None:
        super().__init__(client, table)
        self.closings: Counter[str] = Counter()
        self.kill_closing = set(kill_closing)

    def write(self, change: Transition, now: datetime) -> bool:
        closing = change.new.terminal and (change.old is None or not change.old.terminal)
        if closing and change.new.arn in self.kill_closing:
            self.kill_closing.clear()
            raise TimeoutError("invocation killed between the describe and the close")
        written = super().write(change, now)
        if written and closing:
            self.closings[change.new.arn] += 1
        return written


class KilledListing(BatchLedgerClient):
    """AWS Batch's reads, the ``kill_at``-th listing page dying (the invocation killed between two
    pages)."""

    def __init__(self, batch: Any, kill_at: int) -> None:
        super().__init__(batch)
        self.kill_at, self.listed = kill_at, 0

    def list_page(self, queue: QueueInfo, status: int, token: str | None) -> ListedPage:
        self.listed += 1
        if self.listed == self.kill_at:
            raise TimeoutError("invocation killed between two pages")
        return super().list_page(queue, status, token)


def hold(service: LedgerService, arn: str, status: JobStatus) -> None:
    """The ledger holds ``arn`` as active in sm-q (as a missed-ending job's events left it)."""
    details = JobDetails(queue="sm-q", environment="sm-env", share_identifier="HIGHPRI")
    obs = Observation(arn, JobKind.SERVICE_JOB, status, T0 - timedelta(hours=1), Source.EVENT, details)
    assert service.apply(obs, describe=False) is not None


def event(arn: str, status: str, at: datetime) -> str:
    body = service_job(status, jobArn=arn, jobId=arn.rsplit("/", 1)[1], jobQueue="sm-q")
    body["time"] = at.isoformat().replace("+00:00", "Z")
    return json.dumps(body)


@pytest.mark.parametrize("fault", ["none", "killed between pages", "killed between describe and close"])
def test_a_pass_over_runs_closes_each_gone_job_once_with_what_aws_says(aws: EmbeddedAws, fault: str) -> None:
    dynamodb = aws.client("dynamodb")
    clear_ledger(dynamodb)
    world = [*runnable_jobs(JOBS), world_job(ENDED, "SUCCEEDED")]
    aws.set_world({"service_jobs": [*world, world_job(LATE, "RUNNING"), world_job(FINISHING, "RUNNING")]})
    kill = frozenset({ENDED}) if fault == "killed between describe and close" else frozenset()
    store = Recorded(client("dynamodb"), TABLE, kill)  # the code's client: its calls are journaled
    batch = KilledListing(client("batch"), 3 if fault == "killed between pages" else 0)
    settings = LedgerSettings.from_environ(
        {
            "BATCHPILOT_STATE_TABLE": TABLE,
            "BATCHPILOT_LEDGER_LIST_PAGES_PER_RUN": str(PAGES),
            "BATCHPILOT_LEDGER_DESCRIBES_PER_RUN": "0",
        }
    )
    service = LedgerService(settings, store, batch, ListSink(), lambda: T0)
    hold(service, ENDED, JobStatus.RUNNING)
    hold(service, AGED, JobStatus.RUNNABLE)
    hold(service, LATE, JobStatus.RUNNING)
    hold(service, FINISHING, JobStatus.RUNNING)
    aws.drain_journal()
    summaries, killed, minute = [], 0, 0
    while minute < 15:
        minute += 1
        at = T0 + timedelta(minutes=minute)
        if minute == 2:  # both end in AWS Batch mid-pass; only FINISHING's event arrives
            aws.set_world(
                {"service_jobs": [*world, world_job(LATE, "SUCCEEDED"), world_job(FINISHING, "SUCCEEDED")]}
            )
            assert service.record(event(FINISHING, "SUCCEEDED", at)).outcome is Outcome.PROCESSED
        if minute == 3:  # out of order: an older RUNNING event of a job that ended
            assert service.record(event(FINISHING, "RUNNING", T0)).outcome is Outcome.DUPLICATE
        try:
            summary = service.run(at)
        except TimeoutError:
            killed += 1
            continue
        summaries.append(summary)
        if summary.reconciled:
            break
    calls = Counter(e.action for e in aws.drain_journal())
    assert killed == (0 if fault == "none" else 1)
    assert summaries[-1].reconciled == ["sm-q"]
    assert store.reconcile_state("sm-q").cursor is None
    assert store.closings == {ENDED: 1, AGED: 1, LATE: 1, FINISHING: 1}
    closed = {arn: job.status for arn in (ENDED, AGED, LATE, FINISHING) if (job := store.get(arn))}
    assert closed == {
        ENDED: JobStatus.SUCCEEDED,
        AGED: JobStatus.FAILED,
        LATE: JobStatus.SUCCEEDED,
        FINISHING: JobStatus.SUCCEEDED,
    }
    # AGED (first in ARN order) was closed by the killed run: its LedgerDrift died with that run.
    gone = 2 if fault == "killed between describe and close" else 3
    assert sum(s.drift.get("sm-q:gone", 0) for s in summaries) == gone
    active = store.active("sm-q")
    assert len(active) == JOBS and {e.status for e in active} == {JobStatus.RUNNABLE}
    stored, recounted = stored_and_recounted(dynamodb, TABLE)
    assert stored == recounted
    assert calls["dynamodb:GetItem"] == 0  # markers and records: BatchGetItem
    if fault == "none":
        # 10 listing pages, 2 a run; then the three unseen jobs, one DescribeServiceJob each.
        assert [s.pages for s in summaries] == [2, 2, 2, 2, 2, 0, 0]
        assert [s.checks for s in summaries] == [0, 0, 0, 0, 0, 2, 1]
        assert calls["batch:DescribeServiceJob"] == 3


def test_markers_in_one_batch_get_and_seen_items_written_again_replace(aws: EmbeddedAws) -> None:
    dynamodb = aws.client("dynamodb")
    clear_ledger(dynamodb)
    store = LedgerStateStore(client("dynamodb"), TABLE)  # the code's client: its calls are journaled
    started = T0 - timedelta(minutes=5)
    store.mark_reconciled("a", T0)
    store.save_cursor("b", T0, ReconcileCursor(3, "tok", started))
    store.save_cursor("c", None, ReconcileCursor(0, None, started, checking=True))
    aws.drain_journal()
    states = store.reconcile_states(["a", "b", "c", "never"])
    assert [e.action for e in aws.drain_journal()] == ["dynamodb:BatchGetItem"]
    assert states == {
        "a": ReconcileState(T0, None),
        "b": ReconcileState(T0, ReconcileCursor(3, "tok", started)),
        "c": ReconcileState(None, ReconcileCursor(0, None, started, checking=True)),
        "never": ReconcileState(),
    }
    arns = [f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/s{i:05d}" for i in range(SEEN_PER_ITEM + 5)]
    store.save_seen("b", started, "list#3#tok", arns)
    store.save_seen("b", started, "list#3#tok", arns[:10])  # the same run again (killed before its cursor)
    store.save_seen("b", started, "check#x", arns[-2:])
    assert store.seen("b", started) == set(arns[:10]) | set(arns[-2:]) | set(arns[SEEN_PER_ITEM:])
    assert store.seen("b", T0) == set()  # another pass sees nothing of this one


def test_container_job_statuses_take_one_describe_jobs_per_hundred(aws: EmbeddedAws) -> None:
    arns = [f"arn:aws:batch:us-east-1:{ACCOUNT}:job/c{i:04d}" for i in range(150)]
    known = [
        {
            "jobArn": arn,
            "jobId": arn.rsplit("/", 1)[1],
            "jobName": "c",
            "jobQueue": "sm-q",
            "jobDefinition": "jd",
            "status": status,
        }
        for arn, status in zip(arns[:120], ["RUNNING", "SUCCEEDED", "FAILED"] * 40, strict=True)
    ]
    aws.set_world({"jobs": known})
    aws.drain_journal()
    statuses = BatchLedgerClient(client("batch")).job_statuses(JobKind.CONTAINER_JOB, arns)
    assert [e.action for e in aws.drain_journal()] == ["batch:DescribeJobs"] * 2
    assert Counter(statuses.values()) == {
        JobStatus.RUNNING: 40,
        JobStatus.SUCCEEDED: 40,
        JobStatus.FAILED: 40,
        None: 30,  # AWS Batch no longer knows them
    }
    assert statuses[arns[1]] is JobStatus.SUCCEEDED and statuses[arns[149]] is None
