"""The replay report: what each function did with each event, as JSON lines or readable text.

The JSON form (:meth:`EventReport.to_json`) is a stable interface read by tests, benchmarks and
users' own checks: one object per input event, in input order, with the keys
``event_id, detail_type, source, functions, job, metrics, notifications, actions, errors`` and,
added later (keys are only ever added at the end), ``own_events`` and ``batches``.

Each report holds exactly what its event caused: in a batch, an output is tied to the SQS record
that caused it by the record's ``messageId`` (its correlation id, :mod:`batchpilot.shared.correlation`):
log lines carry it as ``correlation_id``, EMF blobs list it per value in ``correlation_ids``, the
alerts function logs each message it sent in its record's scope, and the embedded AWS's API journal
notes it per call. What an invocation did for its batch as a whole (a digest, a flush without a
record) is a :class:`BatchReport`, reported once, on the batch's last event (``batches``).

:func:`parse_attributed` turns what a handler printed (EMF blobs and Powertools JSON log lines) into
:class:`MetricRecord` s, error strings and sent messages, each with its record; :func:`parse_output`
is the same without the records.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from batchpilot.shared.correlation import CORRELATION_KEY, CORRELATION_PROPERTY, SENT_MESSAGE
from pydantic_core import PydanticSerializationError, from_json, to_json

from batchpilot_local.text_table import render_table

__all__ = [
    "OWN_COUNTERS",
    "BatchReport",
    "EventReport",
    "JobSummary",
    "MetricRecord",
    "ParsedOutput",
    "SentNote",
    "event_numbers",
    "parse_attributed",
    "parse_output",
    "render_summary",
    "render_text",
]

OWN_COUNTERS: frozenset[str] = frozenset(
    {
        "EventsProcessed",
        "EventsIgnored",
        "InvalidEvents",
        "EventsFailed",
        "ColdStart",
        "DuplicateEvents",
        "DuplicateAlertsSuppressed",
        "StaleAlertsSuppressed",
        "CapacityRuns",
        "CapacityAdjustedEvents",
        "CapacityLimitedEvents",
        "CapacityErrors",
        "NotificationsSent",
        "NotificationsFailed",
    }
)
"""The functions' own health counters: in the text report with ``verbose`` only (they describe
batchpilot, not the fleet; the JSON report always has them)."""

_ERROR_LEVELS = frozenset({"ERROR", "CRITICAL"})
_WARNING_LEVELS = frozenset({"WARNING", "WARN"})


@dataclass(frozen=True)
class MetricRecord:
    """One metric from one EMF blob.

    Attributes:
        name: the metric name (``JobsFailed``).
        unit: the CloudWatch unit (``Count``, ``Seconds``, ...; ``None`` when the blob gave none).
        value: the value, or the list of values when the blob holds several.
        dimensions: every dimension key of the blob's ``Dimensions`` arrays → its value.
        timestamp: ISO-8601 UTC with milliseconds (``2026-11-24T02:31:49.000Z``) from
            ``_aws.Timestamp``; None when the blob had no valid timestamp.
    """

    name: str
    unit: str
    value: float | list[float]
    dimensions: dict[str, str]
    timestamp: str | None

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "unit", "value", "dimensions", "timestamp"}``."""
        return {
            "name": self.name,
            "unit": self.unit,
            "value": self.value,
            "dimensions": dict(self.dimensions),
            "timestamp": self.timestamp,
        }


@dataclass(frozen=True)
class JobSummary:
    """The job an event is about, from ``batchpilot.shared.events.parse_event`` + ``classify``.

    Attributes:
        kind: ``container-job``, ``service-job`` or ``training-job``.
        arn: job ARN (training job ARN for SageMaker).
        name: job name, None for preemption events.
        queue: job queue *name*, None for training jobs and preemption events.
        status: Batch status or SageMaker ``TrainingJobStatus``.
        category: failure/blocked/disruption category (``CAPACITY``, ...) or None.
        share_identifier, quota_share: the fair-share identifier / quota share, when the event has one.
        reason: the most specific failure or blocked reason the event gives (free text), or None.
        stopped_at: when the job stopped (ISO-8601 UTC, from the event's detail), or None.
    """

    kind: str
    arn: str
    name: str | None
    queue: str | None
    status: str
    category: str | None
    share_identifier: str | None = None
    quota_share: str | None = None
    reason: str | None = None
    stopped_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"kind", "arn", "name", "queue", "status", "category", "share_identifier",
        "quota_share", "reason", "stopped_at"}``."""
        return {
            "kind": self.kind,
            "arn": self.arn,
            "name": self.name,
            "queue": self.queue,
            "status": self.status,
            "category": self.category,
            "share_identifier": self.share_identifier,
            "quota_share": self.quota_share,
            "reason": self.reason,
            "stopped_at": self.stopped_at,
        }


def event_numbers(numbers: Iterable[int]) -> str:
    """1-based event numbers as the text report shows them: ``[1]-[4], [9]`` (sorted, ranges)."""
    ordered = sorted(set(numbers))
    parts: list[str] = []
    start = previous = None
    for number in [*ordered, None]:
        if number is not None and previous is not None and number == previous + 1:
            previous = number
            continue
        if start is not None and previous is not None:
            parts.append(f"[{start}]" if start == previous else f"[{start}]-[{previous}]")
        start = previous = number
    return ", ".join(parts)


@dataclass
class BatchReport:
    """What one invocation did for its batch as a whole: outputs that belong to no single record
    (a digest about several records, metric values or log lines written outside any record's scope,
    own events and API calls of batch-level work), reported once.

    Attributes:
        function: the function's short name.
        records: how many records the batch had.
        events: 1-based numbers of the input events whose records (or whose own events' records)
            were in the batch, sorted.
        metrics, notifications, actions, errors, own_events, deliveries: as in :class:`EventReport`;
            a digest's notification has ``events`` too: the numbers of the events it tells about.
        report: the report it is attached to (the batch's last event), set by the replay.
    """

    function: str
    records: int
    events: list[int] = field(default_factory=list)
    metrics: list[MetricRecord] = field(default_factory=list)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    own_events: list[dict[str, Any]] = field(default_factory=list)
    deliveries: list[Any] = field(default_factory=list)
    report: EventReport | None = field(default=None, repr=False, compare=False)

    @property
    def empty(self) -> bool:
        """Nothing to report."""
        return not (self.metrics or self.notifications or self.actions or self.errors or self.own_events)

    def to_dict(self) -> dict[str, Any]:
        """``{"function", "records", "events", "metrics", "notifications", "actions", "errors",
        "own_events"}``."""
        return {
            "function": self.function,
            "records": self.records,
            "events": list(self.events),
            "metrics": [m.to_dict() for m in self.metrics],
            "notifications": list(self.notifications),
            "actions": list(self.actions),
            "errors": list(self.errors),
            "own_events": list(self.own_events),
        }


@dataclass
class EventReport:
    """What happened to one input event.

    Attributes:
        index: 0-based position in the input.
        origin: where the event came from (``events/x.json``, ``x.jsonl:3``, ``<stdin>[2]``) or None;
            shown in the text form only.
        event_id, detail_type, source: from the envelope (None when missing or not a string;
            ``event_id`` is None for an item that is not an EventBridge event; for an event that
            could not be sent, lone surrogates are written ``\\udXXX``).
        functions: short names of the functions the event was delivered to, sorted; empty when
            no rule matched (the event is then *ignored*).
        job: the classified job, None for non-job or unparseable events.
        metrics: every metric the functions emitted, in emission order.
        notifications: messages sent to people: ``{"channel": "sns"|"slack"|"teams", "severity", "title"}``
            (and ``owner`` when the message names or mentions the job's owner: the on-call text's
            ``Owner`` line, a Teams mention).
        actions: changes made to the world (resubmissions, capacity); empty until they exist.
        errors: one line each, ``"<function>: <what went wrong>"``, ``"not an EventBridge event: ..."``
            or ``"not delivered: ..."`` (text no SQS body can carry).
        own_events: batchpilot's own events the functions published while handling this event
            (Job Resubmitted, Recovery Skipped, Capacity Adjusted, ...), each ``{"id",
            "detail_type", "time", "detail"}``, in the order they were delivered.
        deliveries: the notifications' messages as sent
            (:class:`batchpilot_local.notifications.Delivery`), for the HTML report's previews; not
            in the JSON report (a Block Kit payload is kilobytes per message).
        decisions: the capacity function's ``capacity decision`` log lines of a scheduled run
            (``service_environment``, ``capacity_unit``, ``in_use``, ``runnable_demand``,
            ``current_max``, ...), for the replay's timelines: the capacity function publishes
            no gauges of these figures (the ledger's are the fleet's); not in the JSON report.
        batches: what the invocations of batches whose last event this is did for the batch as a
            whole (:class:`BatchReport`); each of those outputs is in no event's own lists.
    """

    index: int
    event_id: str | None
    detail_type: str | None
    source: str | None
    origin: str | None = None
    functions: list[str] = field(default_factory=list)
    job: JobSummary | None = None
    metrics: list[MetricRecord] = field(default_factory=list)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    is_event: bool = True
    own_events: list[dict[str, Any]] = field(default_factory=list)
    deliveries: list[Any] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    batches: list[BatchReport] = field(default_factory=list)

    @property
    def number(self) -> int:
        """1-based position in the input (the text report's ``[n]``)."""
        return self.index + 1

    @property
    def routed(self) -> bool:
        """At least one rule matched and the event was delivered."""
        return bool(self.functions)

    @property
    def ignored(self) -> bool:
        """A valid EventBridge event that no rule of the template matches."""
        return self.is_event and not self.functions

    @property
    def ok(self) -> bool:
        """No errors of its own (see :attr:`has_errors` for its batches' too)."""
        return not self.errors

    @property
    def has_errors(self) -> bool:
        """An error of its own, or of a batch reported on it."""
        return bool(self.errors) or any(batch.errors for batch in self.batches)

    def outputs(self) -> list[EventReport | BatchReport]:
        """Itself and its batches: everything reported on this event, each output once."""
        return [self, *self.batches]

    def to_dict(self) -> dict[str, Any]:
        """The JSON report object (exactly the documented keys, in a fixed order)."""
        return {
            "event_id": self.event_id,
            "detail_type": self.detail_type,
            "source": self.source,
            "functions": list(self.functions),
            "job": self.job.to_dict() if self.job else None,
            "metrics": [m.to_dict() for m in self.metrics],
            "notifications": list(self.notifications),
            "actions": list(self.actions),
            "errors": list(self.errors),
            "own_events": list(self.own_events),
            "batches": [batch.to_dict() for batch in self.batches],
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as one line of JSON (no trailing newline)."""
        # pydantic-core's encoder, several times faster than json.dumps (a line per event): the same
        # values, though a float may be spelt otherwise ("1e-5" or "0.00001" for json's "1e-05").
        report = self.to_dict()
        try:
            return to_json(report).decode()
        except PydanticSerializationError:
            # Text UTF-8 cannot hold (a lone surrogate from a world's tags, say) or nesting deeper
            # than pydantic-core goes: json's encoder, with non-ASCII escaped, still writes the line.
            return json.dumps(report, separators=(",", ":"))


# --------------------------------------------------------------------------------- parsing
def _iso(timestamp_ms: Any) -> str | None:
    if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int | float):
        return None
    return _iso_of_number(timestamp_ms)


@functools.lru_cache(maxsize=1024)
def _iso_of_number(timestamp_ms: float) -> str | None:
    # Cached: EMF timestamps are whole minutes (batchpilot/io/emf.py), a few per replay minute.
    try:
        moment = datetime.fromtimestamp(timestamp_ms / 1000.0, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _records_of(blob: dict[str, Any], name: str, count: int) -> list[str | None]:
    """The record of each of metric ``name``'s ``count`` values (the blob's ``correlation_ids``);
    all None when the blob lists none, or not one per value."""
    listed = blob.get(CORRELATION_PROPERTY)
    ids = listed.get(name) if isinstance(listed, dict) else None
    if isinstance(ids, list) and len(ids) == count:
        return [i if isinstance(i, str) else None for i in ids]
    return [None] * count


def _emf_metrics(
    function: str, blob: dict[str, Any], errors: list[str]
) -> list[tuple[str | None, MetricRecord]]:
    """The blob's metrics, one :class:`MetricRecord` per metric and record (its values in order)."""
    aws = blob["_aws"]
    directives = aws.get("CloudWatchMetrics")
    timestamp = _iso(aws.get("Timestamp"))
    if timestamp is None:
        errors.append(f"{function}: EMF blob without a valid _aws.Timestamp")
    out: list[tuple[str | None, MetricRecord]] = []
    if not isinstance(directives, list):
        errors.append(f"{function}: EMF blob whose _aws.CloudWatchMetrics is not a list")
        return out
    for directive in directives:
        if not isinstance(directive, dict):
            errors.append(f"{function}: EMF directive is not an object")
            continue
        keys: list[str] = []
        for dimension_set in directive.get("Dimensions") or []:
            for key in dimension_set if isinstance(dimension_set, list) else []:
                if isinstance(key, str) and key not in keys:
                    keys.append(key)
        dimensions: dict[str, str] = {}
        for key in sorted(keys):
            if key in blob:
                dimensions[key] = str(blob[key])
            else:
                errors.append(f"{function}: EMF dimension {key} has no value")
        for metric in directive.get("Metrics") or []:
            name = metric.get("Name") if isinstance(metric, dict) else None
            if not isinstance(name, str):
                errors.append(f"{function}: EMF metric without a Name")
                continue
            raw = blob.get(name)
            values: list[float]
            if isinstance(raw, int | float) and not isinstance(raw, bool):
                values = [float(raw)]
            elif isinstance(raw, list) and raw and all(_number(v) for v in raw):
                values = [float(v) for v in raw]
            else:
                errors.append(f"{function}: EMF metric {name} has no numeric value")
                continue
            unit = str(metric.get("Unit", "None"))
            by_record: dict[str | None, list[float]] = {}
            for record, value in zip(_records_of(blob, name, len(values)), values, strict=True):
                by_record.setdefault(record, []).append(value)
            for record, own in by_record.items():
                shown = own[0] if len(own) == 1 else own
                out.append((record, MetricRecord(name, unit, shown, dimensions, timestamp)))
    return out


def _log_error(function: str, record: dict[str, Any]) -> str | None:
    level = str(record.get("level", "")).upper()
    is_error = level in _ERROR_LEVELS or (level in _WARNING_LEVELS and record.get("outcome") == "invalid")
    if not is_error:
        return None
    message = str(record.get("message", "")).strip().splitlines()
    text = f"{function}: {message[0] if message else level.lower()}"
    detail = record.get("error")
    if detail is None:
        detail = record.get("exception_name")
    if detail is not None and str(detail).strip():
        text += f": {str(detail).strip().splitlines()[0]}"
    return text


_QUIET_PREFIXES = ('{"level":"INFO"', '{"level":"DEBUG"')
"""How Powertools' Logger starts a JSON log line below WARNING: most of a handler's output, which
:func:`parse_output` skips unread (decoding each line was a few percent of a replay)."""
_SENT_TEXT = f'"{SENT_MESSAGE}"'


def _decoded(text: str) -> Any:
    """One line of JSON, read by pydantic-core (about twice as fast as ``json.loads``); what it
    refuses (a lone surrogate escape, or nesting past about 200 levels, both of which
    ``json.loads`` takes) goes to ``json.loads``.

    Raises:
        ValueError, RecursionError: ``json.loads`` refused it too.
    """
    try:
        return from_json(text)
    except ValueError:
        return json.loads(text)


@dataclass(frozen=True)
class SentNote:
    """One ``notification sent`` line of the alerts function.

    Attributes:
        channel, severity: the message's.
        record: the ``correlation_id`` of the record it tells about; None for a digest.
        records: a digest's records (``record_ids``, as logged), else empty.
    """

    channel: str
    severity: str | None
    record: str | None
    records: tuple[str, ...] = ()


@dataclass
class ParsedOutput:
    """What one invocation printed, each item with the record it belongs to (its ``messageId``,
    None for the batch's).

    Attributes:
        metrics: ``(record, metric)`` in emission order.
        errors: ``(record, error line)`` in order.
        sent: the alerts function's messages, in the order each channel received them.
    """

    metrics: list[tuple[str | None, MetricRecord]] = field(default_factory=list)
    errors: list[tuple[str | None, str]] = field(default_factory=list)
    sent: list[SentNote] = field(default_factory=list)


def _record_of(line: dict[str, Any]) -> str | None:
    value = line.get(CORRELATION_KEY)
    return value if isinstance(value, str) else None


def _sent_note(line: dict[str, Any]) -> SentNote | None:
    if line.get("message") != SENT_MESSAGE or not isinstance(line.get("channel"), str):
        return None
    severity = line.get("severity")
    ids = line.get("record_ids")
    records = tuple(i for i in ids if isinstance(i, str)) if isinstance(ids, list) else ()
    return SentNote(
        str(line["channel"]), severity if isinstance(severity, str) else None, _record_of(line), records
    )


def parse_attributed(function: str, output: str) -> ParsedOutput:
    """Read what a handler wrote to stdout, each output with its record.

    Args:
        function: the function's short name (prefix of every error).
        output: the captured text; one JSON document per line, other lines ignored.

    Returns:
        A metric per name and record in each EMF blob (objects with ``_aws.CloudWatchMetrics``;
        the values a blob's ``correlation_ids`` lists under one record become that record's, the
        rest the batch's), in order; an error per JSON log line whose ``level`` is ERROR/CRITICAL,
        or WARNING with ``"outcome": "invalid"`` (``"<function>: <message>: <error>"``, the line's
        ``correlation_id`` its record), plus one per malformed EMF blob (the batch's); and each
        ``notification sent`` line.
    """
    parsed = ParsedOutput()
    for line in output.splitlines():
        text = line.strip()
        if not text.startswith("{"):
            continue
        if (
            text.startswith(_QUIET_PREFIXES)
            and '"_aws"' not in text
            and text.count('"level"') == 1
            and _SENT_TEXT not in text
        ):
            continue  # an INFO/DEBUG log line without EMF: neither a metric nor an error nor a message
        try:
            record = _decoded(text)
        except (ValueError, RecursionError):
            continue
        if not isinstance(record, dict):
            continue
        if isinstance(record.get("_aws"), dict) and "CloudWatchMetrics" in record["_aws"]:
            errors: list[str] = []
            parsed.metrics.extend(_emf_metrics(function, record, errors))
            parsed.errors.extend((None, error) for error in errors)
            continue
        note = _sent_note(record)
        if note is not None:
            parsed.sent.append(note)
            continue
        error = _log_error(function, record)
        if error is not None:
            parsed.errors.append((_record_of(record), error))
    return parsed


def parse_output(function: str, output: str) -> tuple[list[MetricRecord], list[str]]:
    """:func:`parse_attributed` without the records: ``(metrics, errors)``. A metric whose values
    belong to several records is one :class:`MetricRecord` per record."""
    parsed = parse_attributed(function, output)
    return [m for _, m in parsed.metrics], [e for _, e in parsed.errors]


# ------------------------------------------------------------------------------- rendering
def _format_value(value: float | list[float]) -> str:
    def one(v: float) -> str:
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:.6g}"

    if isinstance(value, list):
        return "[" + ", ".join(one(v) for v in value) + "]"
    return one(value)


def _outputs_lines(
    outputs: EventReport | BatchReport, indent: str, *, verbose: bool, notes_events: bool = False
) -> list[str]:
    """The metrics, notifications, actions, own events and errors of one report or batch."""
    lines: list[str] = []
    inner = indent + "    "
    shown = [m for m in outputs.metrics if verbose or m.name not in OWN_COUNTERS]
    if shown:
        lines.append(f"{indent}metrics")
        rows = []
        for m in shown:
            dims = " ".join(f"{k}={v}" for k, v in m.dimensions.items() if k != "service")
            rows.append([m.name, _format_value(m.value), m.unit, m.timestamp or "-", dims])
        lines.extend(render_table(["name", "value", "unit", "timestamp", "dimensions"], rows, indent=inner))
    if outputs.notifications:
        lines.append(f"{indent}notifications")
        headers = ["channel", "severity", "title"]
        notes = [
            [
                str(n.get("channel")),
                str(n.get("severity")),
                str(n.get("title")) + (f" · owner {n['owner']}" if n.get("owner") else ""),
            ]
            for n in outputs.notifications
        ]
        if notes_events:
            headers.append("events")
            for row, n in zip(notes, outputs.notifications, strict=True):
                row.append(event_numbers(n.get("events") or []) or "-")
        lines.extend(render_table(headers, notes, indent=inner))
    if outputs.actions:
        lines.append(f"{indent}actions")
        acts = [
            [
                str(a.get("type")),
                str(a.get("operation")) + (f" FAILED: {a['error']}" if a.get("error") else ""),
                _request_summary(a.get("request") or {}),
            ]
            for a in outputs.actions
        ]
        lines.extend(render_table(["type", "operation", "request"], acts, indent=inner))
    if outputs.own_events:
        lines.append(f"{indent}batchpilot events")
        for own in outputs.own_events:
            raw = own.get("detail")
            detail: dict[str, Any] = raw if isinstance(raw, dict) else {}
            text = detail.get("message") or detail.get("skip_reason") or detail.get("new_job_name") or ""
            said = " ".join(str(text).split())[:200]
            lines.append(f"{inner}{own.get('detail_type')}: {said}".rstrip())
    if outputs.errors:
        lines.append(f"{indent}errors")
        lines.extend(f"{inner}{error}" for error in outputs.errors)
    return lines


def render_text(report: EventReport, *, verbose: bool = False) -> str:
    """A readable block for one event (several lines, ending with a newline).

    Header ``[n] <detail-type>  <id>``; then the job (kind, queue, share, status, category, name)
    and its failure reason, the functions it went to (or ``no matching rule: ignored``), a metrics
    table (name, value, unit, timestamp, dimensions as ``k=v``; the functions' own counters,
    :data:`OWN_COUNTERS`, only when ``verbose``), notifications, actions and own events when there
    are any, and errors: each only what this event caused. Then, for each batch whose last event
    it is, what the invocation did for the batch as a whole (``batch of <function>: N records,
    events [a]-[b]``), when it did anything. Tables are aligned by rich (numbers to the right).
    """
    indent = "    "
    title = report.detail_type or "(no detail-type)"
    lines = [f"[{report.index + 1}] {title}  {report.event_id or '-'}"]
    if report.origin:
        lines.append(f"{indent}from       {report.origin}")
    if report.job is not None:
        job = report.job
        parts = [job.kind, f"queue={job.queue or '-'}", f"status={job.status}"]
        share = job.share_identifier or job.quota_share
        if share:
            parts.insert(2, f"share={share}")
        if job.category:
            parts.append(f"category={job.category}")
        if job.name:
            parts.append(f"name={job.name}")
        lines.append(f"{indent}job        " + "  ".join(parts))
        if job.reason:
            reason = " ".join(job.reason.split())
            lines.append(f"{indent}reason     " + (reason[:300] + "..." if len(reason) > 300 else reason))
    if report.functions:
        lines.append(f"{indent}functions  " + ", ".join(report.functions))
    elif report.is_event:
        lines.append(f"{indent}functions  no matching rule: ignored")
    lines.extend(_outputs_lines(report, indent, verbose=verbose))
    for batch in report.batches:
        body = _outputs_lines(batch, indent * 2, verbose=verbose, notes_events=True)
        if not body:
            continue  # only own counters, hidden without --verbose
        noun = "record" if batch.records == 1 else "records"
        lines.append(
            f"{indent}batch of {batch.function}: {batch.records} {noun}, events {event_numbers(batch.events)}"
            " (the batch's own outputs, no single event's)"
        )
        lines.extend(body)
    return "\n".join(lines) + "\n"


# Request fields a person checks first; the JSON report has the whole request.
_SUMMARY_FIELDS = (
    "jobName",
    "TrainingJobName",
    "jobQueue",
    "shareIdentifier",
    "quotaShareName",
    "schedulingPriority",
    "serviceEnvironment",
    "capacityLimits",
)


def _request_summary(request: dict[str, Any]) -> str:
    """``k=v`` for the key fields of an API request, plus the checkpoint it resumes from."""
    parts = []
    for key in _SUMMARY_FIELDS:
        if key in request:
            value = request[key]
            if key == "jobQueue" and isinstance(value, str):
                value = value.rsplit("/", 1)[-1]
            if key == "capacityLimits" and isinstance(value, list):
                value = ",".join(f"{c.get('maxCapacity')} {c.get('capacityUnit')}" for c in value)
            parts.append(f"{key}={value}")
    checkpoint = _checkpoint_uri(request)
    if checkpoint:
        parts.append(f"checkpoint={checkpoint}")
    return " ".join(parts)


def _checkpoint_uri(request: dict[str, Any]) -> str | None:
    """``CheckpointConfig.S3Uri`` of a CreateTrainingJob request or of a service job's payload."""
    config = request.get("CheckpointConfig")
    payload = request.get("serviceRequestPayload")
    if config is None and isinstance(payload, str):
        try:
            config = json.loads(payload).get("CheckpointConfig")
        except (ValueError, AttributeError):
            config = None
    uri = config.get("S3Uri") if isinstance(config, dict) else None
    if uri is None:
        uri = (request.get("parameters") or {}).get("checkpoint_uri")
    return uri if isinstance(uri, str) else None


def render_summary(reports: Iterable[EventReport]) -> str:
    """``N events, N routed, N ignored, N with errors`` (one line, with a newline)."""
    items = list(reports)
    routed = sum(1 for r in items if r.routed)
    ignored = sum(1 for r in items if r.ignored)
    failed = sum(1 for r in items if r.has_errors)
    noun = "event" if len(items) == 1 else "events"
    return f"{len(items)} {noun}, {routed} routed, {ignored} ignored, {failed} with errors\n"
