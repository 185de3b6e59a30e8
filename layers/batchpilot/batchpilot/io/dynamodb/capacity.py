"""The capacity function's state in the shared DynamoDB ``StateTable``, through an injected boto3 client.

Items (keys ``pk``/``sk`` strings; ``expires_at`` epoch seconds is the table's TTL attribute):

- ``pk = capacity#env#<service environment>``, ``sk = state``: ``version`` (optimistic lock),
  ``last_change_at`` (ISO-8601, the cooldown clock), ``clocks`` (unit → ``below_since`` and the
  ``history`` of ``[time, target]`` within the stabilisation window), ``notices`` (the last own
  event of each kind per unit). Refreshed every run; expires 30 days after the last.
- ``pk = capacity#demand#<job queue>``, ``sk = <job ARN>``: ``demand`` (instance type →
  instances, from the job's payload ``ResourceConfig``; empty when the payload had none). A job's
  payload never changes, so it is read once; the item expires 14 days after it was written.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from batchpilot.capacity.policy import EnvironmentState, Notice, UnitClock
from batchpilot.io.dynamodb.codec import decode, encode, from_iso, is_conditional_failure, iso, key, key_part

__all__ = ["DEMAND_TTL", "STATE_TTL", "CapacityStateStore"]

STATE_TTL = timedelta(days=30)
"""How long an environment's state outlives its last run (an environment dropped from the
configuration leaves no state behind)."""
DEMAND_TTL = timedelta(days=14)
"""How long a job's cached demand is kept (a job RUNNABLE for longer is simply read again)."""

_BATCH_GET = 100  # BatchGetItem's maximum keys per request
_QUERY_ABOVE = 300  # more misses than this: one Query of the queue's partition beats BatchGetItems


def _ttl(now: datetime, ttl: timedelta) -> int:
    return int((now + ttl).timestamp())


def _env_pk(environment: str) -> str:
    return f"capacity#env#{key_part(environment)}"


def _state_key(environment: str) -> dict[str, Any]:
    return key(_env_pk(environment), "state")


WAKE_TTL = timedelta(hours=1)
"""How long a wake-up claim is kept (it only matters within its minute)."""


def _wake_key(environment: str, minute: datetime) -> dict[str, Any]:
    return key(_env_pk(environment), f"wake#{minute.strftime('%Y-%m-%dT%H:%M')}")


def _demand_pk(queue: str) -> str:
    return f"capacity#demand#{key_part(queue)}"


def _clock_from(raw: Any) -> UnitClock:
    if not isinstance(raw, Mapping):
        return UnitClock()
    history: list[tuple[datetime, int]] = []
    for entry in raw.get("history") or []:
        if isinstance(entry, list | tuple) and len(entry) == 2:
            when = from_iso(entry[0])
            if when is not None:
                history.append((when, int(entry[1])))
    return UnitClock(below_since=from_iso(raw.get("below_since")), history=tuple(history))


def _state_from(item: Mapping[str, Any]) -> EnvironmentState:
    clocks = {str(u): _clock_from(c) for u, c in (item.get("clocks") or {}).items()}
    notices = {str(k): n for k, v in (item.get("notices") or {}).items() if (n := _notice_from(v))}
    return EnvironmentState(
        version=int(item.get("version", 0)),
        last_change_at=from_iso(item.get("last_change_at")),
        clocks=clocks,
        notices=notices,
    )


def _notice_from(raw: Any) -> Notice | None:
    if not isinstance(raw, Mapping):
        return None
    when = from_iso(raw.get("at"))
    return Notice(str(raw.get("key", "")), when) if when is not None else None


def _demand_from(raw: Any) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): int(v) for k, v in raw.items() if int(v) > 0}


class CapacityStateStore:
    """Reads and writes capacity state and the payload-demand cache (implements
    :class:`batchpilot.capacity.ports.StateStore`).

    Args:
        client: a boto3 ``dynamodb`` client (``batchpilot.io.clients.client("dynamodb")``).
        table: the ``StateTable`` name.

    Errors from DynamoDB propagate as ``botocore.exceptions.ClientError`` (throttling already
    retried by botocore), except the conditional-write conflict :meth:`save` reports as None.
    """

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    # ------------------------------------------------------------------ environment state
    def load(self, environment: str) -> EnvironmentState:
        """The saved state of ``environment`` (a fresh state when there is none). Strongly consistent."""
        response = self._client.get_item(
            TableName=self._table, Key=_state_key(environment), ConsistentRead=True
        )
        raw = response.get("Item")
        return _state_from(decode(raw)) if raw else EnvironmentState()

    def load_many(self, environments: Sequence[str]) -> dict[str, EnvironmentState]:
        """The saved states of ``environments`` in one strongly consistent ``BatchGetItem`` per 100
        (the API's maximum); a missing item is a fresh state. Keys DynamoDB returns unprocessed
        (throttling) are read one by one with :meth:`load`, not retried in a loop."""
        states = {name: EnvironmentState() for name in environments}
        by_key = {_env_pk(name): name for name in environments}
        names = list(environments)
        for start in range(0, len(names), _BATCH_GET):
            keys = [_state_key(name) for name in names[start : start + _BATCH_GET]]
            response = self._client.batch_get_item(
                RequestItems={self._table: {"Keys": keys, "ConsistentRead": True}}
            )
            for raw in response.get("Responses", {}).get(self._table, []):
                item = decode(raw)
                name = by_key.get(str(item.get("pk")))
                if name is not None:
                    states[name] = _state_from(item)
            for unprocessed in response.get("UnprocessedKeys", {}).get(self._table, {}).get("Keys", []):
                name = by_key.get(str(decode(unprocessed).get("pk")))
                if name is not None:
                    states[name] = self.load(name)
        return states

    def save(self, environment: str, state: EnvironmentState, now: datetime) -> int | None:
        """Write ``state`` if nobody wrote since it was loaded (``version`` still ``state.version``).

        Returns:
            The new version, or None when another run saved first (nothing written).
        """
        version = state.version + 1
        item: dict[str, Any] = {
            "version": version,
            "last_change_at": iso(state.last_change_at),
            "clocks": {
                unit: {
                    "below_since": iso(clock.below_since),
                    "history": [[iso(when), value] for when, value in clock.history],
                }
                for unit, clock in state.clocks.items()
            },
            "notices": {k: {"key": n.key, "at": iso(n.at)} for k, n in state.notices.items()},
            "updated_at": iso(now),
            "expires_at": _ttl(now, STATE_TTL),
        }
        encoded = {**_state_key(environment), **encode(item)}
        try:
            if state.version == 0:
                self._client.put_item(
                    TableName=self._table, Item=encoded, ConditionExpression="attribute_not_exists(pk)"
                )
            else:
                self._client.put_item(
                    TableName=self._table,
                    Item=encoded,
                    ConditionExpression="version = :expected",
                    ExpressionAttributeValues=encode({":expected": state.version}),
                )
        except ClientError as exc:
            if is_conditional_failure(exc):
                return None
            raise
        return version

    # ------------------------------------------------------------------ wake-ups
    def claim_wake(self, environment: str, minute: datetime, now: datetime) -> bool:
        """Claim the one blocked-event run of ``environment`` in ``minute`` (a conditional PutItem
        of ``capacity#env#<name>`` / ``wake#<YYYY-MM-DDTHH:MM>``, kept for :data:`WAKE_TTL`; a
        released claim may be taken again). Each claim carries a random token: when botocore resends
        the PutItem after DynamoDB took it but the answer was lost, the resend finds its own token
        and still counts as claimed; any other invocation (a redelivery of the same event included)
        finds the minute taken.

        Returns:
            True for the first claim of that minute; False when another claim holds it.

        Raises:
            botocore.exceptions.ClientError: any other DynamoDB error (throttling already retried).
        """
        return self._put_wake(environment, minute, now, uuid.uuid4().hex, released=False)

    def release_wake(self, environment: str, minute: datetime, now: datetime) -> None:
        """Give the minute's claim back (its run failed: the retried record may run then). A
        PutItem, as the claim: the role needs no DeleteItem."""
        self._put_wake(environment, minute, now, "", released=True)

    def _put_wake(
        self, environment: str, minute: datetime, now: datetime, claimant: str, *, released: bool
    ) -> bool:
        fields = {"at": iso(now), "by": claimant, "released": released, "expires_at": _ttl(now, WAKE_TTL)}
        item = {**_wake_key(environment, minute), **encode(fields)}
        condition: dict[str, Any] = {}
        if not released:
            condition = {
                "ConditionExpression": "attribute_not_exists(pk) OR released = :yes OR #by = :by",
                "ExpressionAttributeNames": {"#by": "by"},
                "ExpressionAttributeValues": encode({":yes": True, ":by": claimant}),
            }
        try:
            self._client.put_item(TableName=self._table, Item=item, **condition)
        except ClientError as exc:
            if is_conditional_failure(exc):
                return False
            raise
        return True

    # ------------------------------------------------------------------ payload-demand cache
    def cached_demands(self, queue: str, job_arns: Sequence[str]) -> dict[str, dict[str, int]]:
        """The cached demand of those of ``job_arns`` that have one (BatchGetItem by key, or one
        Query of the queue's partition when there are more than 300)."""
        if not job_arns:
            return {}
        wanted = set(job_arns)
        found: dict[str, dict[str, int]] = {}
        if len(wanted) > _QUERY_ABOVE:
            paginator = self._client.get_paginator("query")
            pages = paginator.paginate(
                TableName=self._table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues=encode({":pk": _demand_pk(queue)}),
                ProjectionExpression="sk, demand",
            )
            for page in pages:
                for raw in page.get("Items", []):
                    item = decode(raw)
                    if item.get("sk") in wanted:
                        found[str(item["sk"])] = _demand_from(item.get("demand"))
            return found
        arns = sorted(wanted)
        for start in range(0, len(arns), _BATCH_GET):
            keys = [key(_demand_pk(queue), arn) for arn in arns[start : start + _BATCH_GET]]
            response = self._client.batch_get_item(
                RequestItems={self._table: {"Keys": keys, "ProjectionExpression": "sk, demand"}}
            )
            # Keys DynamoDB left unprocessed are simply misses: the caller reads those jobs again.
            for raw in response.get("Responses", {}).get(self._table, []):
                item = decode(raw)
                found[str(item["sk"])] = _demand_from(item.get("demand"))
        return found

    def remember_demands(self, queue: str, demands: Mapping[str, Mapping[str, int]], now: datetime) -> None:
        """Cache job demands (BatchWriteItem, 25 per request; unprocessed items are resent by
        boto3's ``BatchWriter``)."""
        if not demands:
            return
        expires = _ttl(now, DEMAND_TTL)
        from boto3.dynamodb.table import BatchWriter  # at the first write: boto3 is a cold-start cost

        writer = BatchWriter(self._table, self._client)
        with writer:
            for arn, demand in demands.items():
                item = {"pk": _demand_pk(queue), "sk": arn, "demand": dict(demand), "expires_at": expires}
                writer.put_item(Item=encode(item))
