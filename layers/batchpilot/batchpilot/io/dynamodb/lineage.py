"""Lineage records and decision markers in the shared DynamoDB table (injected client).

Implements :class:`batchpilot.recovery.ports.LineageStore`. Items (``pk``/``sk`` strings):

- ``recovery#lineage#<lineage id>`` / ``LINEAGE``: the lineage (original job, each resubmission, budgets
  used, version); no TTL, it is the audit trail of every resubmission.
- ``recovery#job#<job arn>`` / ``LINEAGE``: pointer from a job batchpilot submitted to its lineage
  and attempt; TTL 400 days.
- ``recovery#job#<job arn>`` / ``SKIP#<status>``: a ``Recovery Skipped`` for this job and status
  was published; TTL 30 days.

Every write that decides something is conditional: a lineage is written only if its ``version``
and ``last_attempt`` are still the ones read (``attribute_not_exists(pk)`` for a new lineage), so
of two deliveries of one failure only one can reserve the next attempt. Reads are strongly
consistent.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from batchpilot.io.dynamodb.codec import decode, encode, from_iso, is_conditional_failure, iso, key, key_part
from batchpilot.recovery.lineage import AttemptRecord, AttemptState, Lineage, LineageRef
from batchpilot.recovery.requests import Operation
from batchpilot.shared.classification import Category, JobKind
from batchpilot.shared.clock import Clock, utc_now
from batchpilot.shared.own_events import SkipReason

__all__ = [
    "DynamoLineageStore",
    "attempt_from_item",
    "attempt_to_item",
    "lineage_from_item",
    "lineage_to_item",
]

_POINTER_TTL = timedelta(days=400)
_SKIP_TTL = timedelta(days=30)


def _lineage_pk(lineage_id: str) -> str:
    return f"recovery#lineage#{key_part(lineage_id)}"


def _lineage_key(lineage_id: str) -> dict[str, Any]:
    return key(_lineage_pk(lineage_id), "LINEAGE")


def _job_key(job_arn: str, sk: str) -> dict[str, Any]:
    return key(f"recovery#job#{key_part(job_arn)}", sk)


def _skip_sk(status: str) -> str:
    return f"SKIP#{key_part(status)}"


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def attempt_to_item(record: AttemptRecord) -> dict[str, Any]:
    """An :class:`AttemptRecord` as a DynamoDB map (plain Python, numbers as Decimal)."""
    return _drop_none(
        {
            "attempt": record.attempt,
            "failed_job_arn": record.failed_job_arn,
            "category": record.category.value,
            "reason": record.reason,
            "decided_at": iso(record.decided_at),
            "operation": record.operation.value,
            "new_job_name": record.new_job_name,
            "state": record.state.value,
            "new_job_arn": record.new_job_arn,
            "client_token": record.client_token,
            "checkpoint_uri": record.checkpoint_uri,
            "checkpoint_time": iso(record.checkpoint_time),
            "checkpoint_object": record.checkpoint_object,
            "checkpoint_age_seconds": (
                None
                if record.checkpoint_age_seconds is None
                else Decimal(str(round(record.checkpoint_age_seconds, 3)))
            ),
            "restarts_from_step_zero": record.restarts_from_step_zero,
            "lost_instance_hours": Decimal(str(round(record.lost_instance_hours, 6))),
            "published": record.published,
            "failure_published": record.failure_published,
            "error_code": record.error_code,
            "successor_tagged": record.successor_tagged or None,
        }
    )


def attempt_from_item(item: Mapping[str, Any]) -> AttemptRecord:
    """The inverse of :func:`attempt_to_item`."""
    decided = from_iso(item.get("decided_at"))
    return AttemptRecord(
        attempt=int(item["attempt"]),
        failed_job_arn=str(item["failed_job_arn"]),
        category=Category(item["category"]),
        reason=item.get("reason"),
        decided_at=decided or datetime.fromtimestamp(0, UTC),
        operation=Operation(item["operation"]),
        new_job_name=str(item["new_job_name"]),
        state=AttemptState(item["state"]),
        new_job_arn=item.get("new_job_arn"),
        client_token=item.get("client_token"),
        checkpoint_uri=item.get("checkpoint_uri"),
        checkpoint_time=from_iso(item.get("checkpoint_time")),
        checkpoint_object=item.get("checkpoint_object"),
        checkpoint_age_seconds=(
            float(item["checkpoint_age_seconds"]) if item.get("checkpoint_age_seconds") is not None else None
        ),
        restarts_from_step_zero=bool(item.get("restarts_from_step_zero", False)),
        lost_instance_hours=float(item.get("lost_instance_hours", 0)),
        published=bool(item.get("published", False)),
        failure_published=bool(item.get("failure_published", False)),
        error_code=item.get("error_code"),
        successor_tagged=bool(item.get("successor_tagged", False)),
    )


def lineage_to_item(lineage: Lineage, now: datetime) -> dict[str, Any]:
    """A :class:`Lineage` as the DynamoDB item (plain Python)."""
    return _drop_none(
        {
            "pk": _lineage_pk(lineage.lineage_id),
            "sk": "LINEAGE",
            "lineage_id": lineage.lineage_id,
            "job_kind": lineage.job_kind.value,
            "original_job_arn": lineage.original_job_arn,
            "original_job_name": lineage.original_job_name,
            "job_queue": lineage.job_queue,
            "created_at": iso(lineage.created_at),
            "updated_at": iso(now),
            "last_attempt": lineage.last_attempt,
            "used": {category.value: count for category, count in lineage.used.items()},
            "last_submitted_at": iso(lineage.last_submitted_at),
            "attempts": {str(n): attempt_to_item(r) for n, r in lineage.attempts.items()},
            "version": lineage.version,
            "first_started_at": iso(lineage.first_started_at),
        }
    )


def lineage_from_item(item: Mapping[str, Any]) -> Lineage:
    """The inverse of :func:`lineage_to_item`."""
    attempts = {int(n): attempt_from_item(v) for n, v in (item.get("attempts") or {}).items()}
    return Lineage(
        lineage_id=str(item["lineage_id"]),
        job_kind=JobKind(item["job_kind"]),
        original_job_arn=str(item["original_job_arn"]),
        original_job_name=str(item["original_job_name"]),
        job_queue=item.get("job_queue"),
        created_at=from_iso(item.get("created_at")) or datetime.fromtimestamp(0, UTC),
        last_attempt=int(item.get("last_attempt", 0)),
        used={Category(k): int(v) for k, v in (item.get("used") or {}).items()},
        last_submitted_at=from_iso(item.get("last_submitted_at")),
        attempts=attempts,
        version=int(item.get("version", 0)),
        first_started_at=from_iso(item.get("first_started_at")),
    )


class DynamoLineageStore:
    """Lineage store on the StateTable.

    Args:
        client: a boto3 ``dynamodb`` client.
        table: the table name (``BATCHPILOT_STATE_TABLE``).
        clock: aware UTC clock for ``updated_at``, ``decided_at`` and TTLs (epoch seconds for
            DynamoDB's TTL attribute ``expires_at`` are made here, at the adapter edge).
    """

    def __init__(self, client: Any, table: str, clock: Clock = utc_now) -> None:
        self.client = client
        self.table = table
        self.clock = clock

    def _get(self, item_key: dict[str, Any]) -> dict[str, Any] | None:
        response = self.client.get_item(TableName=self.table, Key=item_key, ConsistentRead=True)
        item = response.get("Item")
        return decode(item) if item else None

    def find_job(self, job_arn: str) -> LineageRef | None:
        """The lineage of a job batchpilot submitted (pointer item), or None."""
        item = self._get(_job_key(job_arn, "LINEAGE"))
        if item is None:
            return None
        return LineageRef(str(item["lineage_id"]), int(item["attempt"]))

    def load(self, lineage_id: str) -> Lineage | None:
        """The lineage record, or None (strongly consistent read)."""
        item = self._get(_lineage_key(lineage_id))
        return lineage_from_item(item) if item else None

    def reserve(self, lineage: Lineage, previous: Lineage | None) -> bool:
        """Write the whole lineage if the stored one is still ``previous`` (same ``version`` and
        ``last_attempt``), or absent when ``previous`` is None. Returns False when it is not."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "Item": encode(lineage_to_item(lineage, self.clock())),
        }
        if previous is None:
            kwargs["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            kwargs["ConditionExpression"] = "#v = :v AND last_attempt = :last"
            kwargs["ExpressionAttributeNames"] = {"#v": "version"}
            kwargs["ExpressionAttributeValues"] = encode(
                {":v": previous.version, ":last": previous.last_attempt}
            )
        try:
            self.client.put_item(**kwargs)
        except ClientError as exc:
            if is_conditional_failure(exc):
                return False
            raise
        return True

    def update_attempt(self, lineage_id: str, record: AttemptRecord) -> None:
        """Replace attempt ``record.attempt`` of the lineage; with a ``new_job_arn``, also write the
        pointer from that job to the lineage (one transaction).

        Raises:
            botocore.exceptions.ClientError: the attempt does not exist, or DynamoDB failed.
        """
        update = {
            "TableName": self.table,
            "Key": _lineage_key(lineage_id),
            "UpdateExpression": "SET attempts.#a = :rec, #v = #v + :one, updated_at = :now",
            "ConditionExpression": "attribute_exists(attempts.#a)",
            "ExpressionAttributeNames": {"#a": str(record.attempt), "#v": "version"},
            "ExpressionAttributeValues": encode(
                {":rec": attempt_to_item(record), ":one": 1, ":now": iso(self.clock())}
            ),
        }
        if record.new_job_arn is None:
            self.client.update_item(**update)
            return
        expires = int((self.clock() + _POINTER_TTL).timestamp())
        pointer = {
            "TableName": self.table,
            "Item": {
                **_job_key(record.new_job_arn, "LINEAGE"),
                **encode({"lineage_id": lineage_id, "attempt": record.attempt, "expires_at": expires}),
            },
        }
        self.client.transact_write_items(TransactItems=[{"Update": update}, {"Put": pointer}])

    def claim_decision(self, job_arn: str, status: str, reason: SkipReason) -> bool:
        """Mark that a skip of this job in this status is being published; False if it already was."""
        expires = int((self.clock() + _SKIP_TTL).timestamp())
        try:
            self.client.put_item(
                TableName=self.table,
                Item={
                    **_job_key(job_arn, _skip_sk(status)),
                    **encode(
                        {"reason": reason.value, "decided_at": iso(self.clock()), "expires_at": expires}
                    ),
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as exc:
            if is_conditional_failure(exc):
                return False
            raise
        return True

    def release_decision(self, job_arn: str, status: str) -> None:
        """Forget a claimed decision (its event could not be published)."""
        self.client.delete_item(
            TableName=self.table,
            Key=_job_key(job_arn, _skip_sk(status)),
        )
