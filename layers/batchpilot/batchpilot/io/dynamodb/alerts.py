"""The alerts function's records in the shared StateTable (DynamoDB), under the ``alerts#`` prefix.

Items (``pk`` / ``sk``, all with an epoch-seconds ``expires_at`` TTL of 30 days):

- ``alerts#<job ARN>`` / ``latest``: the job's latest state: ``terminal_status`` once the job
  reached SUCCEEDED/FAILED/Completed/Failed/Stopped, and ``progress`` (see
  :attr:`batchpilot.alerts.facts.AlertFact.progress`), ``updated_at``. Written whole (PutItem) with a
  condition, so an older event
  never overwrites a newer state and nothing follows a terminal state (events are delivered at
  least once and in no order: Amazon EventBridge and AWS Batch event documentation).
- ``alerts#<subject>`` / ``fact#<fact id>``: one fact's delivery record: ``state`` (``claimed``
  then ``sent``), ``lease_until`` (epoch seconds), ``delivered`` (string set of channels),
  ``severity``. Claimed with a conditional UpdateItem: nobody else may claim it while the lease
  lives; an expired lease (a crash between claim and send) can be claimed again, keeping the
  channels already delivered.
- ``alerts#<job ARN>`` / ``<channel>-thread`` (``slack-thread``): the chat thread id of a job
  (Slack ``ts`` in bot token mode), or of an alarm's latest time in ALARM (under its ARN).
- ``alerts#incident/<queue|share>/<name>`` / ``incident#<kind>#<severity>``: the incident of that
  kind (:mod:`batchpilot.alerts.incidents`): ``incident_id``, ``opened_at`` (epoch ms), ``count``,
  ``first_fact``, ``timer`` (its summary timer was sent), ``closed`` (its summary claimed it).
  Joined with a conditional UpdateItem; replaced (a new incident) only while it still holds the
  incident the caller saw. Beside it, ``...#<incident id>#first`` (the first fact's SQS body, for
  the summary) and ``...#<incident id>#stage#<n>`` (each stage message's delivery record, claimed
  like a fact's); a member fact's own record is ``sent`` with ``incident`` set.

Times come in as aware datetimes (:mod:`batchpilot.shared.clock`) and are stored as epoch seconds:
DynamoDB TTL reads ``expires_at`` only as a Number of epoch seconds (DynamoDB developer guide,
"Time to Live").

Every call is a single-item operation, so the role needs only GetItem, PutItem (the job's latest
state) and UpdateItem (facts) on the table, with ``dynamodb:LeadingKeys`` limited to ``alerts#*``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from batchpilot.alerts.facts import AlertFact
from batchpilot.alerts.incidents import GRACE_SECONDS, IncidentKey, Membership, Stage, incident_id
from batchpilot.alerts.policy import Channel, Severity
from batchpilot.alerts.ports import Claim, ClaimState
from batchpilot.io.dynamodb.codec import decode, encode, is_conditional_failure, key, key_part
from batchpilot.shared.clock import epoch_ms

__all__ = [
    "KEY_PREFIX",
    "RETENTION_SECONDS",
    "DynamoAlertStore",
    "IncidentContendedError",
    "IncidentOpenError",
]

KEY_PREFIX = "alerts#"
RETENTION_SECONDS = 30 * 24 * 3600
"""How long delivery records and job states are kept (DynamoDB TTL): far beyond EventBridge's
24-hour retries and SQS's 4-day retention, so a late copy still finds its record."""


MAX_FIRST_BYTES = 300_000
"""Largest first-fact body kept beside an incident (DynamoDB items hold at most 400 KB; an SQS
body at most 256 KiB, so every body fits)."""

_CLAIMED = "claimed"
"""``state`` of a fact being delivered (then ``sent``, :attr:`ClaimState.SENT`)."""


class IncidentContendedError(RuntimeError):
    """Two rounds of joining an incident lost their conditions to other invocations (transient:
    the record is retried)."""


class IncidentOpenError(ValueError):
    """An incident's summary was asked for before its window ended."""


def _from_ms(value: Any) -> datetime:
    return datetime.fromtimestamp(int(value) / 1000, UTC)


def _membership(item: dict[str, Any], *, first: bool) -> Membership:
    return Membership(
        str(item["incident_id"]),
        first,
        _from_ms(item["opened_at"]),
        int(item.get("count", 1)),
        timer=bool(item.get("timer")),
    )


def _thread_sk(channel: Channel) -> str:
    return f"{channel.value}-thread"


def _epoch(moment: datetime) -> int:
    """An aware datetime as whole epoch seconds (stored as a DynamoDB Number)."""
    return int(moment.timestamp())


def _expires(now: datetime) -> int:
    """The TTL attribute ``expires_at`` of an item written at ``now``: epoch seconds."""
    return _epoch(now) + RETENTION_SECONDS


def _channels(values: Iterable[str]) -> frozenset[Channel]:
    known = {c.value for c in Channel}
    return frozenset(Channel(v) for v in values if v in known)


class DynamoAlertStore:
    """:class:`batchpilot.alerts.ports.AlertStore` on DynamoDB.

    Args:
        client: a boto3 DynamoDB client (``batchpilot.io.clients.client("dynamodb")``).
        table: the StateTable's name (``BATCHPILOT_STATE_TABLE``).

    Raises (from every method): botocore ``ClientError`` other than a failed condition, after
    botocore's own retries; the dispatcher turns it into a failed record that SQS retries.
    """

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self.table = table

    def _key(self, subject: str, sk: str) -> dict[str, Any]:
        return key(KEY_PREFIX + key_part(subject), key_part(sk))

    def _update(self, **kwargs: Any) -> dict[str, Any]:
        return dict(self._client.update_item(TableName=self.table, **kwargs))

    # ------------------------------------------------------------------------ job state
    def observe(self, fact: AlertFact, now: datetime) -> bool:
        """Record the fact as the job's latest state; False when the fact is stale.

        Terminal facts set ``terminal_status`` (only if none or the same is recorded); state
        changes advance ``progress`` (only forward, never after a terminal state); other job facts
        (queue blocked, preemption) are only checked against a terminal state.
        """
        item_key = self._key(fact.subject, "latest")
        times = {"updated_at": _epoch(now), "expires_at": _expires(now)}
        try:
            # The item holds only what is written here, so each write is a whole-item PutItem
            # with a condition (cheaper to evaluate than an UpdateExpression, same one write).
            if fact.terminal:
                self._client.put_item(
                    TableName=self.table,
                    Item={
                        **item_key,
                        **encode(
                            {"terminal_status": fact.status or "?", "progress": fact.progress or "", **times}
                        ),
                    },
                    ConditionExpression="attribute_not_exists(terminal_status) OR terminal_status = :st",
                    ExpressionAttributeValues=encode({":st": fact.status or "?"}),
                )
            elif fact.progress is not None:
                self._client.put_item(
                    TableName=self.table,
                    Item={**item_key, **encode({"progress": fact.progress, **times})},
                    ConditionExpression=(
                        "attribute_not_exists(terminal_status) AND "
                        "(attribute_not_exists(progress) OR progress <= :p)"
                    ),
                    ExpressionAttributeValues=encode({":p": fact.progress}),
                )
            else:
                item = self._client.get_item(TableName=self.table, Key=item_key, ConsistentRead=True).get(
                    "Item"
                )
                return not (item and "terminal_status" in item)
        except Exception as exc:
            if is_conditional_failure(exc):
                return False
            raise
        return True

    # ------------------------------------------------------------------------ facts
    def claim(self, fact: AlertFact, severity: Severity, now: datetime, lease_until: datetime) -> Claim:
        """Claim the fact until ``lease_until``; see :class:`batchpilot.alerts.ports.Claim`."""
        return self._claim(self._key(fact.subject, f"fact#{fact.fact_id}"), severity, now, lease_until)

    def _claim(
        self, item_key: dict[str, Any], severity: Severity, now: datetime, lease_until: datetime
    ) -> Claim:
        """The conditional claim of one delivery record (a fact's, or an incident stage's)."""
        try:
            response = self._update(
                Key=item_key,
                UpdateExpression=(
                    "SET #state = :claimed, lease_until = :lease, severity = :sev, "
                    "expires_at = if_not_exists(expires_at, :exp), claimed_at = :now"
                ),
                ConditionExpression=(
                    "attribute_not_exists(#state) OR (#state = :claimed AND lease_until < :now)"
                ),
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues=encode(
                    {
                        ":claimed": _CLAIMED,
                        ":lease": _epoch(lease_until),
                        ":sev": severity.value,
                        ":exp": _expires(now),
                        ":now": _epoch(now),
                    }
                ),
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if not is_conditional_failure(exc):
                raise
            old = decode(getattr(exc, "response", {}).get("Item") or {})
            if old.get("state") == ClaimState.SENT.value:
                return Claim(ClaimState.SENT)
            return Claim(ClaimState.BUSY, _channels(old.get("delivered", ())))
        old = decode(response.get("Attributes") or {})
        delivered = _channels(old.get("delivered", ()))
        return Claim(ClaimState.RESUMED if old else ClaimState.NEW, delivered)

    def mark_delivered(self, fact: AlertFact, channel: Channel, *, done: bool, now: datetime) -> None:
        """Add ``channel`` to the fact's delivered channels; ``done`` sets ``state = sent``."""
        self._mark(self._key(fact.subject, f"fact#{fact.fact_id}"), channel, done=done, now=now)

    def _mark(self, item_key: dict[str, Any], channel: Channel, *, done: bool, now: datetime) -> None:
        expression = "ADD delivered :ch SET delivered_at = :now"
        values: dict[str, Any] = {":ch": {channel.value}, ":now": _epoch(now)}  # a set: String Set
        names: dict[str, str] = {}
        if done:
            expression += ", #state = :sent"
            values[":sent"] = ClaimState.SENT.value
            names["#state"] = "state"
        self._update(
            Key=item_key,
            UpdateExpression=expression,
            ExpressionAttributeValues=encode(values),
            **({"ExpressionAttributeNames": names} if names else {}),
        )

    def release(self, fact: AlertFact) -> None:
        """End the lease (``lease_until = 0``) of a fact that could not be fully delivered."""
        self._release(self._key(fact.subject, f"fact#{fact.fact_id}"))

    def _release(self, item_key: dict[str, Any]) -> None:
        self._update(
            Key=item_key,
            UpdateExpression="SET lease_until = :zero",
            ConditionExpression="#state = :claimed",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=encode({":zero": 0, ":claimed": _CLAIMED}),
        )

    # ------------------------------------------------------------------------ incidents
    def _head(self, key: IncidentKey) -> dict[str, Any]:
        return self._key(key.subject, f"incident#{key.head}")

    def _stage(self, key: IncidentKey, incident: str, stage: Stage) -> dict[str, Any]:
        return self._key(key.subject, f"incident#{key.head}#{incident}#stage#{stage.value}")

    def join_incident(
        self, key: IncidentKey, member: str, now: datetime, window: timedelta, body: str | bytes
    ) -> Membership:
        """Join the open incident of ``key`` (``count`` + 1), or open one with ``member`` first.

        An incident is open while not ``closed`` (its summary claimed it) and younger than its
        window plus :data:`~batchpilot.alerts.incidents.GRACE_SECONDS`. Opening replaces the
        head item only if it still holds the incident this call saw (a conditional write), so
        concurrent invocations agree on one incident.

        Raises:
            IncidentContendedError: other invocations changed the head twice meanwhile.
        """
        head = self._head(key)
        now_ms = epoch_ms(now)
        cutoff = epoch_ms(now - window - timedelta(seconds=GRACE_SECONDS))
        for _ in range(2):
            try:
                response = self._update(
                    Key=head,
                    UpdateExpression="SET #n = #n + :one, last_at = :now",
                    ConditionExpression=(
                        "attribute_exists(incident_id) AND first_fact <> :me "
                        "AND attribute_not_exists(closed) AND opened_at > :cutoff"
                    ),
                    ExpressionAttributeNames={"#n": "count"},
                    ExpressionAttributeValues=encode(
                        {":one": 1, ":now": now_ms, ":me": member, ":cutoff": cutoff}
                    ),
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return _membership(decode(response["Attributes"]), first=False)
            except Exception as exc:
                if not is_conditional_failure(exc):
                    raise
                old = decode(getattr(exc, "response", {}).get("Item") or {})
            if (
                old.get("first_fact") == member
                and "closed" not in old
                and int(old.get("opened_at", 0)) > cutoff
            ):
                return _membership(old, first=True)  # the first fact, delivered again
            opened = incident_id(now, member)
            seen = old.get("incident_id")
            self._keep_first(key, opened, body, now)
            try:
                self._update(
                    Key=head,
                    UpdateExpression=(
                        "SET incident_id = :id, opened_at = :now, #n = :one, first_fact = :me, "
                        "last_at = :now, expires_at = :exp REMOVE closed, closed_at, timer"
                    ),
                    ConditionExpression="incident_id = :seen"
                    if seen
                    else "attribute_not_exists(incident_id)",
                    ExpressionAttributeNames={"#n": "count"},
                    ExpressionAttributeValues=encode(
                        {
                            ":id": opened,
                            ":now": now_ms,
                            ":one": 1,
                            ":me": member,
                            ":exp": _expires(now),
                            **({":seen": seen} if seen else {}),
                        }
                    ),
                )
            except Exception as exc:
                if not is_conditional_failure(exc):
                    raise
                continue  # another invocation opened it first: join that one
            return Membership(opened, True, _from_ms(now_ms), 1)
        raise IncidentContendedError(f"incident {key.head} of {key.subject}: the head changed twice")

    def _keep_first(self, key: IncidentKey, incident: str, body: str | bytes, now: datetime) -> None:
        """Keep the first fact's SQS body beside the incident (written before the head names the
        incident: a head never names an incident without it; one whose head write then lost a
        race is left to its TTL)."""
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        if len(text.encode("utf-8", "surrogatepass")) > MAX_FIRST_BYTES:
            return  # the summary then counts without naming the first fact
        self._client.put_item(
            TableName=self.table,
            Item={
                **self._key(key.subject, f"incident#{key.head}#{incident}#first"),
                **encode({"body": text, "expires_at": _expires(now)}),
            },
        )

    def first_of(self, key: IncidentKey, incident: str) -> str | None:
        """The first fact's SQS body kept by :meth:`join_incident`, or None."""
        item = self._client.get_item(
            TableName=self.table,
            Key=self._key(key.subject, f"incident#{key.head}#{incident}#first"),
            ConsistentRead=True,
        ).get("Item")
        body = decode(item or {}).get("body")
        return str(body) if body is not None else None

    def start_timer(self, key: IncidentKey, incident: str) -> None:
        """Set ``timer`` on the head while it holds ``incident``."""
        try:
            self._update(
                Key=self._head(key),
                UpdateExpression="SET timer = :yes",
                ConditionExpression="incident_id = :id",
                ExpressionAttributeValues=encode({":yes": True, ":id": incident}),
            )
        except Exception as exc:
            if not is_conditional_failure(exc):  # another incident now: its members time it
                raise

    def absorb(self, fact: AlertFact, incident: str, now: datetime) -> None:
        """Set the claimed fact ``sent`` as a member of ``incident`` (one write)."""
        try:
            self._update(
                Key=self._key(fact.subject, f"fact#{fact.fact_id}"),
                UpdateExpression="SET #state = :sent, incident = :id, delivered_at = :now",
                ConditionExpression="#state = :claimed",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues=encode(
                    {
                        ":sent": ClaimState.SENT.value,
                        ":id": incident,
                        ":now": _epoch(now),
                        ":claimed": _CLAIMED,
                    }
                ),
            )
        except Exception as exc:
            if not is_conditional_failure(exc):  # already sent: nothing to do
                raise

    def claim_stage(
        self, key: IncidentKey, incident: str, stage: Stage, now: datetime, lease_until: datetime
    ) -> Claim:
        """Claim one stage message of ``incident`` (as :meth:`claim`)."""
        return self._claim(self._stage(key, incident, stage), key.severity, now, lease_until)

    def mark_stage_delivered(
        self, key: IncidentKey, incident: str, stage: Stage, channel: Channel, *, done: bool, now: datetime
    ) -> None:
        """Record ``channel`` as delivered for the stage (as :meth:`mark_delivered`)."""
        self._mark(self._stage(key, incident, stage), channel, done=done, now=now)

    def release_stage(self, key: IncidentKey, incident: str, stage: Stage) -> None:
        """End the stage claim's lease (as :meth:`release`)."""
        self._release(self._stage(key, incident, stage))

    def close_incident(
        self, key: IncidentKey, incident: str, now: datetime, window: timedelta
    ) -> Membership | None:
        """Set ``closed`` on the head while it holds ``incident`` and its window has ended;
        returns its final state (the same on a second call), None when the head holds another
        incident or none.

        Raises:
            IncidentOpenError: the window has not ended yet.
        """
        try:
            response = self._update(
                Key=self._head(key),
                UpdateExpression="SET closed = :yes, closed_at = if_not_exists(closed_at, :now)",
                ConditionExpression="incident_id = :id AND opened_at <= :due",
                ExpressionAttributeValues=encode(
                    {":yes": True, ":now": epoch_ms(now), ":id": incident, ":due": epoch_ms(now - window)}
                ),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if not is_conditional_failure(exc):
                raise
            old = decode(getattr(exc, "response", {}).get("Item") or {})
            if old.get("incident_id") == incident:
                raise IncidentOpenError(f"incident {incident}: its window has not ended") from None
            return None
        return _membership(decode(response["Attributes"]), first=False)

    # ------------------------------------------------------------------------ chat threads
    def thread_of(self, channel: Channel, subject: str) -> str | None:
        """The thread id recorded for ``subject`` in ``channel``, or None."""
        item = self._client.get_item(TableName=self.table, Key=self._key(subject, _thread_sk(channel)))
        thread = decode(item.get("Item") or {}).get("ts")
        return str(thread) if thread is not None else None

    def save_thread(
        self, channel: Channel, subjects: Sequence[str], thread: str, now: datetime, *, replace: bool = False
    ) -> None:
        """Record ``thread`` for each subject that has no thread in ``channel`` yet (the first
        wins), or, with ``replace``, whatever was recorded (an alarm's new incident)."""
        condition = {} if replace else {"ConditionExpression": "attribute_not_exists(ts)"}
        for subject in subjects:
            try:
                self._update(
                    Key=self._key(subject, _thread_sk(channel)),
                    UpdateExpression="SET ts = :ts, expires_at = :exp",
                    ExpressionAttributeValues=encode({":ts": thread, ":exp": _expires(now)}),
                    **condition,
                )
            except Exception as exc:
                if not is_conditional_failure(exc):
                    raise
