"""Ledger reconciliation of a fleet already running at the deploy, at any size: the real
:class:`batchpilot.ledger.service.LedgerService` against in-memory ports that count the AWS
requests the real adapters would make.

Why not the embedded AWS (``bench_reconcile.py``): moto's TransactWriteItems copies the whole
table on every call and the emulator's ListServiceJobs filters every stored job for each page, so
50 queues x 10,000 jobs (500,000 writes, 5,250 pages) would take days there. Here the DynamoDB port
is :class:`batchpilot_local.testing.ledger.MemoryLedgerStore` (same items, same all-or-nothing
writes) and the AWS Batch port a paged listing of 100 summaries per page in the order of the
statuses the adapter lists; each port method counts the requests its adapter makes for it
(:class:`batchpilot.io.dynamodb.ledger.LedgerStateStore`, :class:`batchpilot.io.batch.BatchLedgerClient`):
``get_many`` one BatchGetItem per 100 keys, ``write`` one TransactWriteItems, ``active`` one Query
per 1 MB page of index items (about 250 bytes each), ``reconcile_states`` one BatchGetItem per 100
queues, ``save_seen`` one PutItem per 1,000 ARNs, ``list_page`` one ListServiceJobs,
``job_statuses`` one DescribeServiceJob per job, ``describe`` one DescribeServiceJob. The counts
for 1 x 3,000 match the embedded AWS's journal (benchmarks/README.md). CPU is the service's own
plus the fakes' (``time.process_time``; AWS latency not included).

``--queues`` job queues of ``--jobs`` RUNNABLE service jobs exist before the ledger has any record,
and ``--gone`` more per queue that the ledger holds as RUNNING but AWS Batch no longer lists (half
ended and still described as SUCCEEDED, half aged out). Scheduled runs one simulated minute apart
with the default settings (``--pages`` as ``BATCHPILOT_LEDGER_LIST_PAGES_PER_RUN``, ``--minutes``
as ``BATCHPILOT_LEDGER_RECONCILE_MINUTES``) until every queue is reconciled once. Prints one JSON
object as its last line; ``--write`` records it in RESULTS.md.

    .venv/bin/python benchmarks/bench_reconcile_scale.py --queues 50 --jobs 10000 --gone 100 [--write]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from _common import ROOT, now, pin_to_one_core, write_section

sys.path[0:0] = [str(ROOT / "layers" / "batchpilot"), str(ROOT / "local")]

from batchpilot.io.dynamodb.ledger import SEEN_PER_ITEM  # noqa: E402
from batchpilot.ledger.model import JobDetails, JobStatus, LedgerJob, Observation, Source, Transition  # noqa: E402
from batchpilot.ledger.ports import (  # noqa: E402
    ActiveEntry,
    Aggregate,
    ListedJob,
    ListedPage,
    QueueInfo,
    QuotaShareLimit,
    ReconcileState,
)
from batchpilot.ledger.runnable import RunnableEntry, runnable_changes  # noqa: E402
from batchpilot.shared.classification import JobKind  # noqa: E402
from batchpilot_local.testing.ledger import ListSink, MemoryLedgerStore, recount  # noqa: E402

ACCOUNT = "111122223333"
T0 = datetime(2026, 11, 20, 22, 0, tzinfo=UTC)
STATUSES = ("SUBMITTED", "PENDING", "RUNNABLE", "SCHEDULED", "STARTING", "RUNNING")  # ListServiceJobs'
PAGE = 100
QUERY_PAGE_ITEMS = 4_000  # 1 MB of index items of about 250 bytes


class CountedStore(MemoryLedgerStore):
    """The DynamoDB port in memory, counting the requests LedgerStateStore makes for each call."""

    def __init__(self, calls: Counter[str]) -> None:
        super().__init__()
        self.calls = calls
        # Per-queue indexes (the DynamoDB partitions), so a read costs what the partition holds,
        # not a scan of every job: the base class's scans are fine for tests, not for 500,000 jobs.
        self.by_queue: dict[str, dict[str, LedgerJob]] = {}
        self.runnable_by: dict[tuple[str, str], dict[str, datetime]] = {}

    def get(self, arn: str) -> LedgerJob | None:
        self.calls["dynamodb:GetItem"] += 1
        return super().get(arn)

    def get_many(self, arns: Sequence[str]) -> dict[str, LedgerJob | None]:
        self.calls["dynamodb:BatchGetItem"] += math.ceil(len(set(arns)) / 100)
        return super().get_many(arns)

    def write(self, change: Transition, now: datetime) -> bool:
        self.calls["dynamodb:TransactWriteItems"] += 1
        if not super().write(change, now):
            return False
        old, new = change.old, self.jobs[change.new.arn]
        if old is not None:
            self.by_queue.get(old.details.queue, {}).pop(old.arn, None)
        if not new.terminal:
            self.by_queue.setdefault(new.details.queue, {})[new.arn] = new
        gone, added = runnable_changes(change)
        if gone is not None:
            self.runnable_by.get((gone.queue, gone.share), {}).pop(gone.arn, None)
        if added is not None:
            self.runnable_by.setdefault((added.queue, added.share), {})[added.arn] = added.since
        return True

    def aggregates(self, queue: str) -> list[Aggregate]:
        self.calls["dynamodb:Query"] += 1
        return super().aggregates(queue)

    def queues(self) -> dict[str, str]:
        self.calls["dynamodb:Query"] += 1
        return super().queues()

    def active(self, queue: str) -> list[ActiveEntry]:
        entries = [
            ActiveEntry(j.arn, j.kind, j.status, j.details.sized, j.runnable_since, j.share)
            for j in self.by_queue.get(queue, {}).values()
        ]
        self.calls["dynamodb:Query"] += max(1, math.ceil(len(entries) / QUERY_PAGE_ITEMS))
        return entries

    def oldest_runnable(self, queue: str, share: str) -> RunnableEntry | None:
        self.calls["dynamodb:Query"] += 1
        entries = self.runnable_by.get((queue, share))
        if not entries:
            return None
        arn = min(entries, key=lambda a: (entries[a], a))
        return RunnableEntry(queue, share, entries[arn], arn)

    def reconcile_states(self, queues: Sequence[str]) -> dict[str, ReconcileState]:
        self.calls["dynamodb:BatchGetItem"] += math.ceil(len(queues) / 100)
        return {queue: self.reconcile_state(queue) for queue in queues}

    def mark_reconciled(self, queue: str, at: datetime) -> None:
        self.calls["dynamodb:PutItem"] += 1
        super().mark_reconciled(queue, at)

    def save_cursor(self, queue: str, at: datetime | None, cursor: Any) -> None:
        self.calls["dynamodb:PutItem"] += 1
        super().save_cursor(queue, at, cursor)

    def seen(self, queue: str, started: datetime) -> set[str]:
        found = super().seen(queue, started)
        self.calls["dynamodb:Query"] += max(1, math.ceil(len(found) * 100 / 1_000_000))
        return found

    def save_seen(self, queue: str, started: datetime, part: str, arns: Sequence[str]) -> None:
        self.calls["dynamodb:PutItem"] += math.ceil(len(set(arns)) / SEEN_PER_ITEM)
        super().save_seen(queue, started, part, arns)


class PagedBatch:
    """The AWS Batch port over a fixed fleet: ListServiceJobs pages of 100 per status, counted."""

    def __init__(self, calls: Counter[str], queues: Sequence[str], jobs: dict[str, list[ListedJob]]) -> None:
        self.calls = calls
        self.queues = [QueueInfo(name, True, "env", None) for name in queues]
        self.by_status = {
            (name, status): [j for j in jobs.get(name, []) if j.status.value == status]
            for name in queues
            for status in STATUSES
        }
        self.ended: dict[str, JobStatus] = {}

    def describe(self, arn: str, kind: JobKind) -> JobDetails | None:
        self.calls["batch:DescribeServiceJob"] += 1
        queue = arn.rsplit("/", 1)[1].split("-", 1)[0]
        return JobDetails(queue=queue, environment="env", instances=1, sized=True)

    def job_statuses(self, kind: JobKind, arns: Sequence[str]) -> dict[str, JobStatus | None]:
        self.calls["batch:DescribeServiceJob"] += len(arns)
        return {arn: self.ended.get(arn) for arn in arns}

    def job_queues(self) -> list[QueueInfo]:
        self.calls["batch:DescribeJobQueues"] += 1
        return list(self.queues)

    def list_active(self, queue: QueueInfo) -> list[ListedJob]:
        raise NotImplementedError

    def list_page(self, queue: QueueInfo, status: int, token: str | None) -> ListedPage:
        self.calls["batch:ListServiceJobs"] += 1
        jobs = self.by_status[(queue.name, STATUSES[status])]
        start = int(token or 0)
        following = start + PAGE
        return ListedPage(
            jobs[start:following], str(following) if following < len(jobs) else None, len(STATUSES)
        )

    def capacity_limits(self, environments: Sequence[str]) -> dict[str, int]:
        self.calls["batch:DescribeServiceEnvironments"] += 1
        return dict.fromkeys(environments, 64)

    def quota_shares(self, queue: str) -> dict[str, QuotaShareLimit] | None:
        return None

    def share_weights(self, policy_arn: str) -> dict[str, float] | None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=10_000, help="RUNNABLE jobs per queue")
    parser.add_argument(
        "--gone", type=int, default=0, help="jobs per queue the ledger holds, AWS no longer lists"
    )
    parser.add_argument("--pages", type=int, default=100, help="BATCHPILOT_LEDGER_LIST_PAGES_PER_RUN")
    parser.add_argument("--minutes", type=int, default=15, help="BATCHPILOT_LEDGER_RECONCILE_MINUTES")
    parser.add_argument("--max-runs", type=int, default=2_000)
    parser.add_argument("--write", action="store_true", help="record the result in RESULTS.md")
    args = parser.parse_args()
    from batchpilot.ledger.service import LedgerService
    from batchpilot.ledger.settings import LedgerSettings

    pinning = pin_to_one_core()
    names = [f"q{n:02d}" for n in range(args.queues)]
    created = T0 - timedelta(hours=1)
    listed = {
        name: [
            ListedJob(
                arn=f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/{name}-{i:05d}",
                job_id=f"{name}-{i:05d}",
                kind=JobKind.SERVICE_JOB,
                status=JobStatus.RUNNABLE,
                share_identifier=["HIGHPRI", "LOWPRI"][i % 2],
                created_at=created,
            )
            for i in range(args.jobs)
        ]
        for name in names
    }
    calls: Counter[str] = Counter()
    store = CountedStore(calls)
    batch = PagedBatch(calls, names, listed)
    settings = LedgerSettings.from_environ(
        {
            "BATCHPILOT_STATE_TABLE": "batchpilot-StateTable",
            "BATCHPILOT_LEDGER_LIST_PAGES_PER_RUN": str(args.pages),
            "BATCHPILOT_LEDGER_RECONCILE_MINUTES": str(args.minutes),
        }
    )
    service = LedgerService(settings, store, batch, ListSink(), lambda: T0)
    for name in names:  # jobs whose end the ledger missed before the deploy's first pass
        details = JobDetails(queue=name, environment="env", instances=1, sized=True)
        for i in range(args.gone):
            arn = f"arn:aws:batch:us-east-1:{ACCOUNT}:service-job/{name}-gone{i:05d}"
            obs = Observation(arn, JobKind.SERVICE_JOB, JobStatus.RUNNING, created, Source.EVENT, details)
            service.apply(obs, describe=False)
            if i % 2:
                batch.ended[arn] = JobStatus.SUCCEEDED
    calls.clear()
    done: set[str] = set()
    per_run_cpu: list[float] = []
    per_run_batch: list[int] = []
    missing = gone = 0
    while len(done) < len(names) and len(per_run_cpu) < args.max_runs:
        before = sum(v for k, v in calls.items() if k.startswith("batch:"))
        t = time.process_time()
        summary = service.run(T0 + timedelta(minutes=len(per_run_cpu)))
        per_run_cpu.append(time.process_time() - t)
        per_run_batch.append(sum(v for k, v in calls.items() if k.startswith("batch:")) - before)
        done.update(summary.reconciled)
        missing += sum(v for k, v in summary.drift.items() if k.endswith(":missing"))
        gone += sum(v for k, v in summary.drift.items() if k.endswith(":gone"))
    runs = len(per_run_cpu)
    recount_ok = store.aggregate_map() == recount(store.jobs.values())
    busiest = max(per_run_batch)
    out = {
        "queues": args.queues,
        "jobs_per_queue": args.jobs,
        "gone_per_queue": args.gone,
        "pages_per_run": args.pages,
        "reconcile_minutes": args.minutes,
        "runs_needed": runs,
        "all_taken_in": missing == args.jobs * args.queues and len(done) == len(names),
        "gone_closed": gone,
        "aggregates_equal_recount": recount_ok,
        "aws_calls": sum(calls.values()),
        "aws_calls_per_job": round(sum(calls.values()) / max(1, args.jobs * args.queues), 3),
        "calls": dict(sorted(calls.items())),
        "batch_requests_max_run": busiest,
        "batch_requests_per_s_max_run": round(busiest / 60, 2),
        "cpu_s_total": round(sum(per_run_cpu), 2),
        "cpu_s_max_run": round(max(per_run_cpu), 3),
        "cpu": pinning,
    }
    if args.write:
        body = (
            f"Ledger reconciliation at scale ({now()}; `benchmarks/bench_reconcile_scale.py --queues "
            f"{args.queues} --jobs {args.jobs} --gone {args.gone} --pages {args.pages}`: the real "
            "service, in-memory ports counting the requests the adapters make, CPU the service's "
            f"own):\n\n```json\n{json.dumps(out, indent=1)}\n```\n"
        )
        write_section(f"reconcile-scale-{args.queues}x{args.jobs}", body)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
