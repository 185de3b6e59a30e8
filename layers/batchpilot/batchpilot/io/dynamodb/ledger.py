"""The job ledger in the shared DynamoDB ``StateTable``, through an injected boto3 client and the
one codec (:mod:`batchpilot.io.dynamodb.codec`).

Items (``pk``/``sk`` strings; ``expires_at`` epoch seconds is the table's TTL attribute):

- ``pk = ledger#job#<job ARN>``, ``sk = job``: the job's record (:class:`LedgerJob`), with
  ``version`` (optimistic lock). A terminal record expires 7 days after it ended (late events
  for it are still recognised until then).
- ``pk = ledger#agg#<job queue>``, ``sk = <environment>#<share>#<status>``: ``jobs``, ``sized``,
  ``instances``, ``gpus``, ``vcpus`` of the queue's active jobs of that share and status, and one
  ``instances#<instance type>`` counter per instance type those jobs ask for (what a
  quota-management service environment's capacity units count), kept in the same ``ADD``.
- ``pk = ledger#active#<job queue>``, ``sk = <job ARN>`` (``key_part``: hashed when too long for
  a 1,024-byte sort key; the ARN itself in ``arn``): the queue's active jobs (what reconciliation
  compares with AWS Batch's listings).
- ``pk = ledger#queues``, ``sk = <job queue>`` (``key_part``; the name in ``job_queue``): the
  queues the ledger has seen, with their service environment.
- ``pk = ledger#runnable#<job queue>#<share>``, ``sk = <epoch ms, 15 digits>#<job ARN>``: the
  share's RUNNABLE jobs by when they last became RUNNABLE (:mod:`batchpilot.ledger.runnable`);
  the first item is the oldest.
- ``pk = ledger#reconcile#<job queue>``, ``sk = state``: when the queue was last reconciled and,
  while a pass spans runs, its cursor (``cursor_status``, ``cursor_token``, ``cursor_started``,
  ``cursor_checking``). Every queue's marker is read with one ``BatchGetItem`` per run.
- ``pk = ledger#reconcile-seen#<job queue>#<pass start, epoch ms>``, ``sk = <part>#<n>``: the
  ARNs (string set ``arns``) a reconciliation pass that spans runs listed in each run, or checked
  and found active; the pass's jobs held as active and never seen are checked with DescribeJobs /
  DescribeServiceJob before they are closed. Expires :data:`SEEN_TTL` after the pass began.
- ``pk = ledger#starving#<job ARN>``, ``sk = <reason>``: the job's ``Job Starving`` for that
  reason was claimed (``at``) and, once PutEvents answered, ``published``; expires after
  :data:`STARVING_TTL`. A claim not marked published within :data:`STARVING_LEASE` (the function
  was killed between the claim and the publish) can be claimed again.

An SQS batch's job records are read with one ``BatchGetItem`` (:meth:`LedgerStateStore.get_many`).
A transition (or the fold of one job's records of a batch, first to final state) is one
``TransactWriteItems`` (DynamoDB Developer Guide, "Amazon DynamoDB Transactions"): the record's
conditional put, one ``ADD`` update per changed aggregate, the index item's put or delete, and,
for a job entering or leaving RUNNABLE, its RUNNABLE entry's put or delete. All succeed or none
does, so aggregates stay equal to a recount.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from batchpilot.capacity.model import NUM_INSTANCES
from batchpilot.capacity.sampling import QueueSample
from batchpilot.io.dynamodb.codec import (
    claim_unpublished,
    decode,
    encode,
    from_iso,
    is_conditional_failure,
    iso,
    key,
    key_part,
)
from batchpilot.ledger.demand import ledger_sample
from batchpilot.ledger.model import (
    AggregateKey,
    Delta,
    JobDetails,
    JobStatus,
    LedgerJob,
    Transition,
    type_counts,
    typed_instances,
)
from batchpilot.ledger.ports import ActiveEntry, Aggregate, ReconcileCursor, ReconcileState
from batchpilot.ledger.runnable import RunnableEntry, runnable_changes
from batchpilot.shared.classification import JobKind
from batchpilot.shared.clock import epoch_ms
from batchpilot.shared.own_events import StarvationReason

__all__ = [
    "SEEN_PER_ITEM",
    "SEEN_TTL",
    "STARVING_LEASE",
    "STARVING_TTL",
    "TERMINAL_TTL",
    "LedgerDemandReader",
    "LedgerStateStore",
    "aggregate_from_item",
    "job_from_item",
]

TERMINAL_TTL = timedelta(days=7)
"""How long a finished job's record is kept (to recognise late events for it)."""

STARVING_TTL = timedelta(days=30)
"""How long a ``Job Starving`` claim is kept (a job still starving after that is reported again)."""

STARVING_LEASE = timedelta(minutes=15)
"""How long a claim not yet marked published holds: longer than the ledger function's timeout
(60 s) and its queue's visibility timeout, so only a claim whose invocation died is taken over."""

SEEN_TTL = timedelta(days=2)
"""How long a reconciliation pass's record of the jobs it listed is kept (a pass spans minutes to
hours; the record of a pass that was abandoned goes on its own)."""

SEEN_PER_ITEM = 1_000
"""ARNs one seen item holds (an ARN is at most about 200 bytes: 200 KB, under DynamoDB's 400 KB)."""

_QUEUES_PK = "ledger#queues"
_BATCH_GET = 100
"""BatchGetItem's maximum keys per request."""
_TYPE_PREFIX = "instances#"
"""Aggregate attribute ``instances#<instance type>``: instances of that type (sized jobs)."""


def _job_key(arn: str) -> dict[str, Any]:
    return key(f"ledger#job#{key_part(arn)}", "job")


def _agg_pk(queue: str) -> str:
    return f"ledger#agg#{key_part(queue or '-')}"


def _agg_sk(k: AggregateKey) -> str:
    return f"{key_part(k.environment)}#{key_part(k.share)}#{k.status.value}"


def _active_pk(queue: str) -> str:
    return f"ledger#active#{key_part(queue or '-')}"


def _reconcile_pk(queue: str) -> str:
    return f"ledger#reconcile#{key_part(queue)}"


def _seen_pk(queue: str, started: datetime) -> str:
    return f"ledger#reconcile-seen#{key_part(queue)}#{epoch_ms(started)}"


def _reconcile_state(item: dict[str, Any]) -> ReconcileState:
    started = from_iso(item.get("cursor_started"))
    status = _int(item.get("cursor_status"))
    cursor = None
    if started is not None and status is not None:
        token = item.get("cursor_token")
        checking = bool(item.get("cursor_checking", False))
        cursor = ReconcileCursor(status, str(token) if token else None, started, checking)
    return ReconcileState(from_iso(item.get("at")), cursor)


def _starving_pk(arn: str) -> str:
    return f"ledger#starving#{key_part(arn)}"


def _runnable_pk(queue: str, share: str) -> str:
    return f"ledger#runnable#{key_part(queue or '-')}#{key_part(share)}"


def _runnable_key(entry: RunnableEntry) -> dict[str, Any]:
    # Zero-padded epoch milliseconds sort as the times do: the partition's first item is the oldest.
    return key(_runnable_pk(entry.queue, entry.share), f"{epoch_ms(entry.since):015d}#{key_part(entry.arn)}")


def _num(value: float) -> Decimal:
    return Decimal(str(round(value, 3)))


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _job_item(job: LedgerJob, version: int, now: datetime) -> dict[str, Any]:
    d = job.details
    item: dict[str, Any] = {
        "arn": job.arn,
        "kind": job.kind.value,
        "queue": d.queue,
        "environment": d.environment,
        "share_identifier": d.share_identifier,
        "quota_share": d.quota_share,
        "priority": d.priority,
        "instance_type": d.instance_type,
        "instances": d.instances,
        "vcpus": None if d.vcpus is None else _num(d.vcpus),
        "gpus": d.gpus,
        "sized": d.sized,
        "by_type": None if d.by_type is None else dict(d.by_type),
        "job_name": d.name,
        "checkpoint": d.checkpoint,
        "status": job.status.value,
        "status_at": iso(job.status_at),
        "runnable_since": iso(job.runnable_since),
        "attempt_started_at": iso(job.attempt_started_at),
        "first_started_at": iso(job.first_started_at),
        "last_started_at": iso(job.last_started_at),
        "created_at": iso(job.created_at),
        "attempts": job.attempts,
        "preemptions": job.preemptions,
        "preempted_attempt": job.preempted_attempt,
        "preempting_attempt": job.preempting_attempt,
        "describe_failures": job.describe_failures,
        "version": version,
        "updated_at": iso(now),
    }
    if job.terminal:
        item["expires_at"] = int((now + TERMINAL_TTL).timestamp())
    return {k: v for k, v in item.items() if v is not None}


def _counts(raw: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in raw.items()} if isinstance(raw, dict) else {}


def aggregate_from_item(item: dict[str, Any]) -> Aggregate:
    """A decoded aggregate item → :class:`Aggregate` (also used by tests to compare with a recount)."""
    agg_key = AggregateKey(
        str(item.get("environment", "")),
        str(item.get("job_queue", "")),
        str(item.get("share", "")),
        JobStatus(str(item["job_status"])),
    )
    types = {name[len(_TYPE_PREFIX) :]: int(v) for name, v in item.items() if name.startswith(_TYPE_PREFIX)}
    total = Delta(
        int(item.get("jobs", 0)),
        int(item.get("sized", 0)),
        int(item.get("instances", 0)),
        int(item.get("gpus", 0)),
        float(item.get("vcpus", 0)),
        type_counts(types),
    )
    return Aggregate(agg_key, total, bool(item.get("quota", False)))


def job_from_item(item: dict[str, Any]) -> LedgerJob:
    """A decoded job item → :class:`LedgerJob` (also used by tests to recount)."""
    status_at = from_iso(item.get("status_at"))
    assert status_at is not None
    return LedgerJob(
        arn=str(item["arn"]),
        kind=JobKind(str(item["kind"])),
        details=JobDetails(
            queue=str(item.get("queue", "")),
            environment=str(item.get("environment", "")),
            share_identifier=item.get("share_identifier"),
            quota_share=item.get("quota_share"),
            priority=_int(item.get("priority")),
            instance_type=item.get("instance_type"),
            instances=_int(item.get("instances")),
            vcpus=None if item.get("vcpus") is None else float(item["vcpus"]),
            gpus=_int(item.get("gpus")),
            sized=bool(item.get("sized", False)),
            name=item.get("job_name"),
            checkpoint=item.get("checkpoint"),
            by_type=None if item.get("by_type") is None else type_counts(_counts(item["by_type"])),
        ),
        status=JobStatus(str(item["status"])),
        status_at=status_at,
        runnable_since=from_iso(item.get("runnable_since")),
        attempt_started_at=from_iso(item.get("attempt_started_at")),
        first_started_at=from_iso(item.get("first_started_at")),
        last_started_at=from_iso(item.get("last_started_at")),
        created_at=from_iso(item.get("created_at")),
        attempts=int(item.get("attempts", 0)),
        preemptions=int(item.get("preemptions", 0)),
        preempted_attempt=int(item.get("preempted_attempt", -1)),
        preempting_attempt=int(item.get("preempting_attempt", -1)),
        describe_failures=int(item.get("describe_failures", 0)),
        version=int(item.get("version", 0)),
    )


class LedgerStateStore:
    """The ledger's items (see the module docstring).

    Args:
        client: a boto3 ``dynamodb`` client (``batchpilot.io.clients.client("dynamodb")``).
        table: the ``StateTable`` name.

    Errors: ``botocore.exceptions.ClientError`` for everything but a lost conditional
    transaction, which :meth:`write` reports as ``False``.
    """

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def get(self, arn: str) -> LedgerJob | None:
        """GetItem (strongly consistent) of the job's record."""
        response = self._client.get_item(TableName=self._table, Key=_job_key(arn), ConsistentRead=True)
        raw = response.get("Item")
        return job_from_item(decode(raw)) if raw else None

    def get_many(self, arns: Sequence[str]) -> dict[str, LedgerJob | None]:
        """The records of ``arns`` (each once) in one strongly consistent BatchGetItem per 100 (the
        API's maximum): ARN → record, ``None`` when the ledger has none. Keys DynamoDB returns
        unprocessed (throughput exceeded) are read one by one with :meth:`get`, whose botocore
        retries back off, not re-requested in a loop."""
        unique = list(dict.fromkeys(arns))
        found: dict[str, LedgerJob | None] = dict.fromkeys(unique)
        by_pk = {_job_key(arn)["pk"]["S"]: arn for arn in unique}
        for start in range(0, len(unique), _BATCH_GET):
            keys = [_job_key(arn) for arn in unique[start : start + _BATCH_GET]]
            response = self._client.batch_get_item(
                RequestItems={self._table: {"Keys": keys, "ConsistentRead": True}}
            )
            for raw in response.get("Responses", {}).get(self._table, []):
                arn = by_pk.get(raw.get("pk", {}).get("S", ""))
                if arn is not None:
                    found[arn] = job_from_item(decode(raw))
            for unprocessed in response.get("UnprocessedKeys", {}).get(self._table, {}).get("Keys", []):
                arn = by_pk.get(unprocessed.get("pk", {}).get("S", ""))
                if arn is not None:
                    found[arn] = self.get(arn)
        return found

    def write(self, change: Transition, now: datetime) -> bool:
        """One TransactWriteItems: record (conditional), aggregates (ADD), index (put/delete).

        Returns:
            ``False`` when the condition failed or the transaction conflicted with another
            writer (nothing written; read again and retry).
        """
        old, new = change.old, change.new
        version = (old.version if old else 0) + 1
        record: dict[str, Any] = {
            "TableName": self._table,
            "Item": {**_job_key(new.arn), **encode(_job_item(new, version, now))},
        }
        if old is None:
            record["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            record["ConditionExpression"] = "version = :v"
            record["ExpressionAttributeValues"] = {":v": {"N": str(old.version)}}
        items: list[dict[str, Any]] = [{"Put": record}]
        quota = bool(new.details.quota_share)
        for agg_key, delta in sorted(change.deltas.items()):
            items.append({"Update": self._aggregate_update(agg_key, delta, quota)})
        queue = new.details.queue
        was_active = old is not None and not old.terminal
        if not new.terminal:
            entry = {
                "pk": _active_pk(queue),
                "sk": key_part(new.arn),
                "arn": new.arn,
                "kind": new.kind.value,
                "status": new.status.value,
                "sized": new.details.sized,
                "runnable_since": iso(new.runnable_since),
                "share": new.share,
            }
            items.append({"Put": {"TableName": self._table, "Item": encode(entry)}})
        if old is not None and was_active and (new.terminal or old.details.queue != queue):
            # Finished, or its queue became known (a describe): the old index item goes.
            items.append(
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": key(_active_pk(old.details.queue), key_part(new.arn)),
                    }
                }
            )
        gone, added = runnable_changes(change)
        if gone is not None:
            items.append({"Delete": {"TableName": self._table, "Key": _runnable_key(gone)}})
        if added is not None:
            entry_item = {"arn": added.arn, "since": iso(added.since)}
            item = {**_runnable_key(added), **encode(entry_item)}
            items.append({"Put": {"TableName": self._table, "Item": item}})
        if queue and (old is None or old.details.queue != queue):
            registry = {
                "pk": _QUEUES_PK,
                "sk": key_part(queue),
                "job_queue": queue,
                "environment": new.details.environment,
            }
            items.append({"Put": {"TableName": self._table, "Item": encode(registry)}})
        try:
            self._client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if is_conditional_failure(exc):
                return False
            raise
        return True

    def _aggregate_update(self, agg_key: AggregateKey, delta: Delta, quota: bool) -> dict[str, Any]:
        values = {
            ":j": delta.jobs,
            ":s": delta.sized,
            ":i": delta.instances,
            ":g": delta.gpus,
            ":c": _num(delta.vcpus),
            ":env": agg_key.environment,
            ":q": agg_key.queue,
            ":sh": agg_key.share,
            ":st": agg_key.status.value,
            ":quota": quota,
        }
        # Every attribute through a placeholder: several (``share``, ``status``) are DynamoDB
        # reserved words.
        names = {
            "#jobs": "jobs",
            "#sized": "sized",
            "#inst": "instances",
            "#gpus": "gpus",
            "#vcpus": "vcpus",
            "#env": "environment",
            "#queue": "job_queue",
            "#share": "share",
            "#status": "job_status",
            "#quota": "quota",
        }
        # Per instance type, one more counter on the same item (never another item per write).
        added = ""
        for i, (kind, count) in enumerate(delta.types):
            names[f"#t{i}"] = f"{_TYPE_PREFIX}{kind}"
            values[f":t{i}"] = count
            added += f", #t{i} :t{i}"
        return {
            "TableName": self._table,
            "Key": key(_agg_pk(agg_key.queue), _agg_sk(agg_key)),
            "UpdateExpression": (
                f"ADD #jobs :j, #sized :s, #inst :i, #gpus :g, #vcpus :c{added} "
                "SET #env = :env, #queue = :q, #share = :sh, #status = :st, #quota = :quota"
            ),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": encode(values),
        }

    def _query(self, pk: str, **extra: Any) -> list[dict[str, Any]]:
        paginator = self._client.get_paginator("query")
        pages = paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
            ConsistentRead=True,
            **extra,
        )
        return [decode(raw) for page in pages for raw in page.get("Items", [])]

    def aggregates(self, queue: str) -> list[Aggregate]:
        """One Query of the queue's aggregate partition."""
        return [aggregate_from_item(item) for item in self._query(_agg_pk(queue))]

    def queues(self) -> dict[str, str]:
        """Query of ``ledger#queues``."""
        return {
            str(item.get("job_queue", item["sk"])): str(item.get("environment", ""))
            for item in self._query(_QUEUES_PK)
        }

    def active(self, queue: str) -> list[ActiveEntry]:
        """Query of the queue's index partition, every page."""
        return [
            ActiveEntry(
                arn=str(item.get("arn", item["sk"])),  # items written before ``arn``: the key
                kind=JobKind(str(item["kind"])),
                status=JobStatus(str(item["status"])),
                sized=bool(item.get("sized", False)),
                runnable_since=from_iso(item.get("runnable_since")),
                share=str(item.get("share", "")),
            )
            for item in self._query(_active_pk(queue))
        ]

    def oldest_runnable(self, queue: str, share: str) -> RunnableEntry | None:
        """One Query (``Limit=1``, eventually consistent: a gauge) of the share's RUNNABLE index."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": _runnable_pk(queue, share)}},
            Limit=1,
        )
        for raw in response.get("Items", []):
            item = decode(raw)
            since = from_iso(item.get("since"))
            if since is not None:
                return RunnableEntry(queue, share, since, str(item.get("arn", "")))
        return None

    def reconcile_state(self, queue: str) -> ReconcileState:
        """The queue's reconciliation marker (:meth:`reconcile_states` of one queue)."""
        return self.reconcile_states([queue])[queue]

    def reconcile_states(self, queues: Sequence[str]) -> dict[str, ReconcileState]:
        """The reconciliation markers of ``queues`` (their last finished pass and, while a pass is
        unfinished, its cursor: ``cursor_status``, ``cursor_token``, ``cursor_started``,
        ``cursor_checking``) in one strongly consistent BatchGetItem per 100 queues; keys DynamoDB
        returns unprocessed are read with GetItem (botocore's retries back off)."""
        unique = list(dict.fromkeys(queues))
        found = {queue: ReconcileState() for queue in unique}
        by_pk = {_reconcile_pk(queue): queue for queue in unique}
        for start in range(0, len(unique), _BATCH_GET):
            keys = [key(_reconcile_pk(queue), "state") for queue in unique[start : start + _BATCH_GET]]
            response = self._client.batch_get_item(
                RequestItems={self._table: {"Keys": keys, "ConsistentRead": True}}
            )
            for raw in response.get("Responses", {}).get(self._table, []):
                queue = by_pk.get(raw.get("pk", {}).get("S", ""))
                if queue is not None:
                    found[queue] = _reconcile_state(decode(raw))
            for unprocessed in response.get("UnprocessedKeys", {}).get(self._table, {}).get("Keys", []):
                queue = by_pk.get(unprocessed.get("pk", {}).get("S", ""))
                if queue is None:
                    continue
                item = self._client.get_item(
                    TableName=self._table, Key=key(_reconcile_pk(queue), "state"), ConsistentRead=True
                ).get("Item")
                found[queue] = _reconcile_state(decode(item)) if item else ReconcileState()
        return found

    def mark_reconciled(self, queue: str, at: datetime) -> None:
        """PutItem of the queue's reconciliation marker (no cursor: the pass finished)."""
        item = {"pk": _reconcile_pk(queue), "sk": "state", "at": iso(at)}
        self._client.put_item(TableName=self._table, Item=encode(item))

    def save_cursor(self, queue: str, at: datetime | None, cursor: ReconcileCursor) -> None:
        """PutItem of the queue's reconciliation marker with its unfinished pass's cursor (a
        ``nextToken`` is opaque and bounded by the API; it is stored as given)."""
        item: dict[str, Any] = {
            "pk": _reconcile_pk(queue),
            "sk": "state",
            "cursor_status": cursor.status,
            "cursor_started": iso(cursor.started),
        }
        if at is not None:
            item["at"] = iso(at)
        if cursor.token:
            item["cursor_token"] = cursor.token
        if cursor.checking:
            item["cursor_checking"] = True
        self._client.put_item(TableName=self._table, Item=encode(item))

    def seen(self, queue: str, started: datetime) -> set[str]:
        """Query of the pass's seen partition, every page: the union of its items' ``arns``."""
        return {str(arn) for item in self._query(_seen_pk(queue, started)) for arn in item.get("arns", ())}

    def save_seen(self, queue: str, started: datetime, part: str, arns: Sequence[str]) -> None:
        """PutItem of one seen item (``sk`` = ``part``; ``arns`` a string set, at most
        :data:`SEEN_PER_ITEM` ARNs an item: a longer list is written as ``part#1``, ``part#2``, ...,
        each well under DynamoDB's 400 KB item limit); it expires :data:`SEEN_TTL` after the pass
        began."""
        unique = sorted(set(arns))
        expires = int((started + SEEN_TTL).timestamp())
        for index, start in enumerate(range(0, len(unique), SEEN_PER_ITEM)):
            item = {
                "pk": {"S": _seen_pk(queue, started)},
                "sk": {"S": f"{key_part(part)}#{index}"},
                "arns": {"SS": unique[start : start + SEEN_PER_ITEM]},
                "expires_at": {"N": str(expires)},
            }
            self._client.put_item(TableName=self._table, Item=item)

    def claim_starvation(self, arn: str, reason: StarvationReason, at: datetime) -> bool:
        """PutItem of the job's starvation marker, conditioned on its absence or on a claim older
        than :data:`STARVING_LEASE` that was never marked published."""
        item = {
            "pk": _starving_pk(arn),
            "sk": reason.value,
            "arn": arn,
            "at": iso(at),
            "expires_at": int((at + STARVING_TTL).timestamp()),
        }
        return claim_unpublished(self._client, self._table, item, at - STARVING_LEASE)

    def confirm_starvation(self, arn: str, reason: StarvationReason) -> None:
        """UpdateItem marking the job's claimed ``Job Starving`` published (kept until its TTL)."""
        self._client.update_item(
            TableName=self._table,
            Key=key(_starving_pk(arn), reason.value),
            UpdateExpression="SET published = :true",
            ExpressionAttributeValues=encode({":true": True}),
        )

    def release_starvation(self, arn: str, reason: StarvationReason) -> None:
        """DeleteItem of the job's starvation marker."""
        self._client.delete_item(TableName=self._table, Key=key(_starving_pk(arn), reason.value))


class LedgerDemandReader:
    """The capacity function's view of the ledger (implements
    :class:`batchpilot.capacity.ports.LedgerDemand`): one Query of a queue's aggregates per queue,
    plus one GetItem per job a blocked event named.

    Args:
        client: a boto3 ``dynamodb`` client; ``table``: the ``StateTable`` name.
    """

    def __init__(self, client: Any, table: str) -> None:
        self._store = LedgerStateStore(client, table)

    def sample(
        self, queue: str, environment: str, blocked_arns: Sequence[str], *, by_type: bool = False
    ) -> QueueSample | None:
        """The queue's sample from its aggregates (per instance type with ``by_type``), or ``None``
        when the ledger has none for it."""
        aggregates = self._store.aggregates(queue)
        if not aggregates:
            return None
        blocked: dict[str, dict[str, int] | None] = {}
        for arn in blocked_arns:
            job = self._store.get(arn)
            size = job.details.instances if job and job.details.sized else None
            if not job or not size:
                blocked[arn] = None
                continue
            # Per instance type, the rest (no type named) under NUM_INSTANCES: sums to the size.
            demand = typed_instances(job.details)
            rest = size - sum(demand.values())
            blocked[arn] = {**demand, NUM_INSTANCES: rest} if rest > 0 else demand
        return ledger_sample(queue, environment, aggregates, blocked, by_type=by_type)
