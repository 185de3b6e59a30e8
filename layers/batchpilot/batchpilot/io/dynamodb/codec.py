"""The one DynamoDB codec for batchpilot's StateTable (``pk`` / ``sk`` string keys).

Every store (alerts, recovery lineage, capacity state) writes through these helpers, so the table
holds one time format (UTC ISO-8601, ``+00:00``), one key style (``"<feature>#<kind>#<id>"``
partition keys, see :func:`key`) and one reading of a failed condition. Types: boto3's
``TypeSerializer`` / ``TypeDeserializer`` (numbers come back as ``Decimal``).
API: DynamoDB ``GetItem``, ``PutItem``, ``UpdateItem``, ``BatchGetItem``, ``Query``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

__all__ = [
    "MAX_KEY_PART",
    "claim_unpublished",
    "decode",
    "encode",
    "from_iso",
    "is_conditional_failure",
    "iso",
    "key",
    "key_part",
]


@cache
def _types() -> tuple[TypeSerializer, TypeDeserializer]:
    # Imported at the first item, not at import: boto3.dynamodb pulls in boto3 (cold start).
    from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

    return TypeSerializer(), TypeDeserializer()


MAX_KEY_PART = 512
"""Longest identifier kept as it is in a key, in characters. DynamoDB allows 2,048 bytes for a
partition key and 1,024 for a sort key; a longer (event-controlled) identifier is hashed."""


def key_part(value: str) -> str:
    """``value`` as it may stand in a key: unchanged when short and encodable; otherwise
    ``"sha256:<hex>"`` of its UTF-8 bytes (lone surrogates escaped), so a key is never rejected
    as too long or not UTF-8 (a permanent error a retry cannot fix)."""
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        raw = value.encode("utf-8", "surrogatepass")
    else:
        if len(value) <= MAX_KEY_PART:
            return value
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def key(pk: str, sk: str) -> dict[str, Any]:
    """The low-level ``Key`` of an item (``{"pk": {"S": ...}, "sk": {"S": ...}}``)."""
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def encode(item: Mapping[str, Any]) -> dict[str, Any]:
    """A plain mapping (str, int, Decimal, bool, None, lists, maps) → DynamoDB attribute values.

    Raises:
        TypeError: a value boto3 cannot serialise (e.g. ``float``: use ``Decimal``).
    """
    serializer = _types()[0]
    return {name: serializer.serialize(value) for name, value in item.items()}


def decode(item: Mapping[str, Any]) -> dict[str, Any]:
    """DynamoDB attribute values → a plain mapping (numbers as ``Decimal``)."""
    deserializer = _types()[1]
    return {name: deserializer.deserialize(value) for name, value in item.items()}


def iso(value: datetime | None) -> str | None:
    """An aware datetime → UTC ISO-8601 text (``2026-11-20T10:15:30+00:00``); naive means UTC."""
    if value is None:
        return None
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat()


def from_iso(value: Any) -> datetime | None:
    """What :func:`iso` wrote → an aware UTC datetime; anything unreadable → ``None``."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)


def is_conditional_failure(exc: BaseException) -> bool:
    """Whether a botocore ``ClientError`` is a failed condition (``ConditionalCheckFailedException``,
    or a ``TransactionCanceledException`` of a conditional transaction): the write lost a race or
    the item already says so, which is an answer, not an error."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return False
    return response.get("Error", {}).get("Code") in (
        "ConditionalCheckFailedException",
        "TransactionCanceledException",
    )


def claim_unpublished(client: Any, table: str, item: Mapping[str, Any], stale_before: datetime) -> bool:
    """PutItem of a once-only marker ``item`` (it must hold ``at``, its claim time, as an ISO UTC
    string), conditioned on no such item, or on a claim made before ``stale_before`` that was
    never marked ``published`` (its claimer died between the claim and the publish; the lease has
    passed). Returns whether this caller holds the claim.

    Raises:
        botocore.exceptions.ClientError: any failure other than the condition (throttling, access).
    """
    try:
        client.put_item(
            TableName=table,
            Item=encode(item),
            # ISO UTC times of one format compare as text.
            ConditionExpression="attribute_not_exists(pk) OR "
            "(attribute_not_exists(published) AND #at < :stale)",
            ExpressionAttributeNames={"#at": "at"},
            ExpressionAttributeValues=encode({":stale": iso(stale_before)}),
        )
    except Exception as exc:
        if is_conditional_failure(exc):
            return False
        raise
    return True
