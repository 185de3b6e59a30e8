"""The GPU activity check's items on the StateTable (implements
:class:`batchpilot.gpu.ports.EpisodeStore`), through the one codec.

- ``pk = ledger#gpu-idle``, ``sk = <job ARN>`` (``key_part``): the job's open idle episode (``arn``,
  ``reason``, ``since`` its first idle minute, ``at`` when claimed, ``published`` once its ``Job
  GPU Idle`` was accepted, ``resolving`` when its resolution was claimed), deleted when the
  episode ends; ``expires_at`` (TTL) drops one left by a
  job that ended while the function was not running. One partition: the open episodes are few
  (jobs idle right now), and one Query a run reads them all.

API: DynamoDB ``Query``, ``PutItem`` (conditional), ``UpdateItem`` (conditional for a
resolution's claim), ``DeleteItem``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from batchpilot.gpu.ports import Episode
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
from batchpilot.shared.own_events import GpuIdleReason

__all__ = ["EPISODE_LEASE", "EPISODE_TTL", "GpuEpisodeStore"]

EPISODE_TTL = timedelta(days=14)
"""How long an episode item outlives its last claim when nothing ends it (TTL)."""
EPISODE_LEASE = timedelta(minutes=15)
"""How long a claim not yet marked published holds: longer than the ledger function's timeout, so
only a claim whose invocation died between the claim and the publish is taken over."""
_PK = "ledger#gpu-idle"  # the ledger function's keys: its role may write ledger#* only


class GpuEpisodeStore:
    """Open idle episodes.

    Args:
        client: a boto3 ``dynamodb`` client; ``table``: the ``StateTable`` name.
    """

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def open_episodes(self) -> dict[str, Episode]:
        """Query of ``ledger#gpu-idle``, every page (consistent: a claim made a minute ago is seen)."""
        paginator = self._client.get_paginator("query")
        pages = paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": _PK}},
            ConsistentRead=True,
        )
        out: dict[str, Episode] = {}
        for page in pages:
            for raw in page.get("Items", []):
                item = decode(raw)
                since, at = from_iso(item.get("since")), from_iso(item.get("at"))
                reason = str(item.get("reason", ""))
                if since is None or at is None or reason not in GpuIdleReason.__members__:
                    continue  # not written by this version: the next claim replaces it
                arn = str(item.get("arn", item["sk"]))
                out[arn] = Episode(
                    arn,
                    GpuIdleReason(reason),
                    since,
                    at,
                    bool(item.get("published")),
                    from_iso(item.get("resolving")),
                )
        return out

    def claim(self, arn: str, reason: GpuIdleReason, since: datetime, at: datetime) -> bool:
        """PutItem of the job's episode, conditioned on its absence or on a claim older than
        :data:`EPISODE_LEASE` never marked published."""
        item = {
            "pk": _PK,
            "sk": key_part(arn),
            "arn": arn,
            "reason": reason.value,
            "since": iso(since),
            "at": iso(at),
            "expires_at": int((at + EPISODE_TTL).timestamp()),
        }
        return claim_unpublished(self._client, self._table, item, at - EPISODE_LEASE)

    def confirm(self, arn: str) -> None:
        """UpdateItem marking the episode published."""
        self._client.update_item(
            TableName=self._table,
            Key=key(_PK, key_part(arn)),
            UpdateExpression="SET published = :true",
            ExpressionAttributeValues=encode({":true": True}),
        )

    def claim_resolution(self, arn: str, at: datetime) -> bool:
        """UpdateItem setting ``resolving``, conditioned on a published episode whose resolution
        is unclaimed or claimed more than :data:`EPISODE_LEASE` before ``at`` (its invocation
        died before deleting the episode)."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key(_PK, key_part(arn)),
                UpdateExpression="SET resolving = :at",
                ConditionExpression="published = :true AND "
                "(attribute_not_exists(resolving) OR resolving < :stale)",
                ExpressionAttributeValues=encode(
                    {":at": iso(at), ":true": True, ":stale": iso(at - EPISODE_LEASE)}
                ),
            )
        except ClientError as exc:
            if is_conditional_failure(exc):
                return False
            raise
        return True

    def release_resolution(self, arn: str) -> None:
        """UpdateItem removing ``resolving`` (its resolution could not be published)."""
        self._client.update_item(
            TableName=self._table,
            Key=key(_PK, key_part(arn)),
            UpdateExpression="REMOVE resolving",
        )

    def close(self, arn: str) -> None:
        """DeleteItem of the job's episode."""
        self._client.delete_item(TableName=self._table, Key=key(_PK, key_part(arn)))
