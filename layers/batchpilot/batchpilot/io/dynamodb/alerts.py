"""The alerts function's records in the shared StateTable (DynamoDB), under the ``alerts#`` prefix.

Items (``pk`` / ``sk``, all with an epoch-seconds ``expires_at`` TTL of 30 days):

- ``alerts#<job ARN>`` / ``latest``: the job's latest state: ``terminal_status`` once the job
  reached SUCCEEDED/FAILED/Completed/Failed/Stopped, and ``progress`` (see
  :attr:`batchpilot.alerts.facts.AlertFact.progress`). Written with a condition, so an older event
  never overwrites a newer state and nothing follows a terminal state (F3).
- ``alerts#<subject>`` / ``fact#<fact id>``: one fact's delivery record: ``state`` (``claimed``
  then ``sent``), ``lease_until`` (epoch seconds), ``delivered`` (string set of channels),
  ``severity``. Claimed with a conditional UpdateItem: nobody else may claim it while the lease
  lives; an expired lease (a crash between claim and send) can be claimed again, keeping the
  channels already delivered.
- ``alerts#<job ARN>`` / ``slack-thread``: the Slack thread ``ts`` of a job (bot token mode).

Every call is a single-item operation, so the role needs only GetItem, UpdateItem on the table, with
``dynamodb:LeadingKeys`` limited to ``alerts#*``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from batchpilot.alerts.dispatch import Claim
from batchpilot.alerts.facts import AlertFact
from batchpilot.alerts.policy import Severity
from batchpilot.io.dynamodb.codec import is_conditional_failure, key, key_part

__all__ = ["KEY_PREFIX", "RETENTION_SECONDS", "DynamoAlertStore"]

KEY_PREFIX = "alerts#"
RETENTION_SECONDS = 30 * 24 * 3600
"""How long delivery records and job states are kept (DynamoDB TTL): far beyond EventBridge's
24-hour retries and SQS's 4-day retention, so a late copy still finds its record."""


class DynamoAlertStore:
    """:class:`batchpilot.alerts.dispatch.AlertStore` on DynamoDB.

    Args:
        client: a boto3 DynamoDB client (``batchpilot.io.clients.client("dynamodb")``).
        table: the StateTable's name (``BATCHPILOT_STATE_TABLE``).

    Raises (from every method): botocore ``ClientError`` other than a failed condition, after
    botocore's own retries; the dispatcher turns it into a failed record that SQS retries.
    """

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self.table = table
        self.calls = 0
        """DynamoDB calls made (for the benchmark's calls-per-event count)."""

    def _key(self, subject: str, sk: str) -> dict[str, Any]:
        return key(KEY_PREFIX + key_part(subject), key_part(sk))

    def _update(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        return dict(self._client.update_item(TableName=self.table, **kwargs))

    # ------------------------------------------------------------------------ job state
    def observe(self, fact: AlertFact, now: float) -> bool:
        """Record the fact as the job's latest state; False when the fact is stale.

        Terminal facts set ``terminal_status`` (only if none or the same is recorded); state
        changes advance ``progress`` (only forward, never after a terminal state); other job facts
        (queue blocked, preemption) are only checked against a terminal state.
        """
        key = self._key(fact.subject, "latest")
        expires = {":exp": {"N": str(int(now) + RETENTION_SECONDS)}, ":now": {"N": str(int(now))}}
        try:
            if fact.terminal:
                self._update(
                    Key=key,
                    UpdateExpression=(
                        "SET terminal_status = :st, progress = :p, updated_at = :now, expires_at = :exp"
                    ),
                    ConditionExpression="attribute_not_exists(terminal_status) OR terminal_status = :st",
                    ExpressionAttributeValues={
                        ":st": {"S": fact.status or "?"},
                        ":p": {"S": fact.progress or ""},
                        **expires,
                    },
                )
            elif fact.progress is not None:
                self._update(
                    Key=key,
                    UpdateExpression="SET progress = :p, updated_at = :now, expires_at = :exp",
                    ConditionExpression=(
                        "attribute_not_exists(terminal_status) AND "
                        "(attribute_not_exists(progress) OR progress <= :p)"
                    ),
                    ExpressionAttributeValues={":p": {"S": fact.progress}, **expires},
                )
            else:
                self.calls += 1
                item = self._client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
                return not (item and "terminal_status" in item)
        except Exception as exc:
            if is_conditional_failure(exc):
                return False
            raise
        return True

    # ------------------------------------------------------------------------ facts
    def claim(self, fact: AlertFact, severity: Severity, now: float, lease_until: float) -> Claim:
        """Claim the fact until ``lease_until``; see :class:`batchpilot.alerts.dispatch.Claim`."""
        try:
            response = self._update(
                Key=self._key(fact.subject, f"fact#{fact.fact_id}"),
                UpdateExpression=(
                    "SET #state = :claimed, lease_until = :lease, severity = :sev, "
                    "expires_at = if_not_exists(expires_at, :exp), claimed_at = :now"
                ),
                ConditionExpression=(
                    "attribute_not_exists(#state) OR (#state = :claimed AND lease_until < :now)"
                ),
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={
                    ":claimed": {"S": "claimed"},
                    ":lease": {"N": str(int(lease_until))},
                    ":sev": {"S": severity.value},
                    ":exp": {"N": str(int(now) + RETENTION_SECONDS)},
                    ":now": {"N": str(int(now))},
                },
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if not is_conditional_failure(exc):
                raise
            old = getattr(exc, "response", {}).get("Item") or {}
            if old.get("state", {}).get("S") == "sent":
                return Claim("sent")
            return Claim("busy", frozenset(old.get("delivered", {}).get("SS", [])))
        old = response.get("Attributes") or {}
        delivered = frozenset(old.get("delivered", {}).get("SS", []))
        return Claim("resumed" if old else "new", delivered)

    def mark_delivered(self, fact: AlertFact, channel: str, *, done: bool, now: float) -> None:
        """Add ``channel`` to the fact's delivered channels; ``done`` sets ``state = sent``."""
        expression = "ADD delivered :ch SET delivered_at = :now"
        values: dict[str, Any] = {":ch": {"SS": [channel]}, ":now": {"N": str(int(now))}}
        names: dict[str, str] = {}
        if done:
            expression += ", #state = :sent"
            values[":sent"] = {"S": "sent"}
            names["#state"] = "state"
        self._update(
            Key=self._key(fact.subject, f"fact#{fact.fact_id}"),
            UpdateExpression=expression,
            ExpressionAttributeValues=values,
            **({"ExpressionAttributeNames": names} if names else {}),
        )

    def release(self, fact: AlertFact) -> None:
        """End the lease (``lease_until = 0``) of a fact that could not be fully delivered."""
        self._update(
            Key=self._key(fact.subject, f"fact#{fact.fact_id}"),
            UpdateExpression="SET lease_until = :zero",
            ConditionExpression="#state = :claimed",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={":zero": {"N": "0"}, ":claimed": {"S": "claimed"}},
        )

    # ------------------------------------------------------------------------ Slack threads
    def thread_of(self, subject: str) -> str | None:
        """The thread ``ts`` recorded for ``subject``, or None."""
        self.calls += 1
        item = self._client.get_item(TableName=self.table, Key=self._key(subject, "slack-thread")).get("Item")
        return str(item["ts"]["S"]) if item and "ts" in item else None

    def save_thread(self, subjects: Sequence[str], thread_ts: str, now: float) -> None:
        """Record ``thread_ts`` for each subject that has no thread yet (the first one wins)."""
        for subject in subjects:
            try:
                self._update(
                    Key=self._key(subject, "slack-thread"),
                    UpdateExpression="SET ts = :ts, expires_at = :exp",
                    ConditionExpression="attribute_not_exists(ts)",
                    ExpressionAttributeValues={
                        ":ts": {"S": thread_ts},
                        ":exp": {"N": str(int(now) + RETENTION_SECONDS)},
                    },
                )
            except Exception as exc:
                if not is_conditional_failure(exc):
                    raise
