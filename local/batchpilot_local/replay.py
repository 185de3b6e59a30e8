"""The replay runner: events in, one :class:`~batchpilot_local.report.EventReport` per event out.

For each event, every rule of ``template.yaml`` whose pattern matches (moto's EventBridge matcher)
delivers the event, unchanged, to its SQS queue in the embedded AWS; the message is received and
wrapped as Lambda's SQS event, the real handler runs, and the records it does not report in
``batchItemFailures`` are deleted from the queue.

Each output is reported under the event whose record caused it (see
:mod:`batchpilot_local.report`): the handlers mark each record's work with its ``messageId`` (the
correlation id of :mod:`batchpilot.shared.correlation`), so every metric value, log-reported error,
message sent (matched to the alerts function's ``notification sent`` lines, channel by channel, in
order), API action and own event is tied to its record, and through the record to its event; an
output of the batch as a whole is a :class:`~batchpilot_local.report.BatchReport` on the batch's
last event.

Events a handler publishes itself (``PutEvents`` of batchpilot's own events, source ``batchpilot``)
travel the way they do in AWS: the template's rules also exist in the embedded EventBridge, with
their queues as targets, so moto matches and delivers them. Each belongs to the event whose record
made the ``PutEvents`` call, and so does what the functions it reaches do with it.

Input events are put on the default bus, where AWS services publish, except batchpilot's own events
(source ``batchpilot``, e.g. from a scenario or an archive of batchpilot's bus), which are put on the
bus its functions publish to; ``Replayer.run(..., bus="default")`` replays forged ones instead.

Usage::

    reports = Replayer("template.yaml").run(events)
    for report in reports:
        print(report.to_json())
"""

from __future__ import annotations

import itertools
import json
import sys
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO, cast

from batchpilot.shared.classification import classify
from batchpilot.shared.events import InvalidEventError, parse_event
from batchpilot.shared.own_events import SOURCE as OWN_SOURCE
from pydantic_core import PydanticSerializationError, to_json

from batchpilot_local.clock import ClockScenario, run_clock
from batchpilot_local.embedded_aws import EmbeddedAws, create_tables
from batchpilot_local.lambda_runtime import Invocation, LambdaRuntime, SwitchableStdout
from batchpilot_local.notifications import ALERTS_FUNCTION, LocalAlerts, chat_wiring
from batchpilot_local.report import BatchReport, EventReport, JobSummary, SentNote, parse_attributed
from batchpilot_local.template import (
    DEFAULT_BUS,
    AppTemplate,
    FunctionSpec,
    Route,
    default_template_path,
    load_template,
)
from batchpilot_local.world import JournalEntry

__all__ = ["ACTION_TYPES", "InvocationHook", "Replayer", "Wiring", "actions_from_journal", "job_summary"]

# Failed records stay in flight for the rest of the run instead of coming back after the default
# 30 s and being received with a later event (the replay does not simulate SQS retries).
_QUEUE_ATTRIBUTES = {"VisibilityTimeout": "43200"}
# API calls that change the world, as the report's ``actions`` name them (others are not listed).
ACTION_TYPES = {
    "batch:SubmitServiceJob": "resubmit",
    "batch:SubmitJob": "resubmit",
    "sagemaker:CreateTrainingJob": "resubmit",
    "batch:UpdateServiceEnvironment": "update-capacity",
}
# Own events can trigger functions that publish own events (recovery -> alerts): follow the chain
# this many rounds at most, so a loop in the template cannot hang the replay.
_MAX_CASCADE_ROUNDS = 5

Owner = EventReport | BatchReport
InvocationHook = Callable[[FunctionSpec, int, Invocation], None]
"""``Replayer(on_invocation=...)``: (function spec, records handed to it, the invocation)."""
"""Where an output is reported: its event's report, or a batch's (outputs of no single record)."""


def job_summary(event: Mapping[str, Any]) -> JobSummary | None:
    """The job an event is about, or None when batchpilot cannot parse it as a job event."""
    try:
        facts = classify(parse_event(event))
    except InvalidEventError:
        return None
    return JobSummary(
        kind=facts.kind.value,
        arn=facts.arn,
        name=facts.name,
        queue=facts.queue,
        status=facts.status,
        category=facts.category.value if facts.category else None,
        share_identifier=facts.share_identifier,
        quota_share=facts.quota_share,
        reason=facts.reason,
        stopped_at=facts.stopped_at.isoformat().replace("+00:00", "Z") if facts.stopped_at else None,
    )


def _action(entry: JournalEntry) -> dict[str, Any] | None:
    kind = ACTION_TYPES.get(entry.action)
    if kind is None or not entry.sent:
        return None
    action: dict[str, Any] = {"type": kind, "operation": entry.action, "request": entry.params}
    if not entry.succeeded:
        action["error"] = entry.error_code or "unknown error"
    return action


def actions_from_journal(entries: Iterable[JournalEntry]) -> list[dict[str, Any]]:
    """The report's ``actions`` from the embedded AWS's API journal, in call order.

    Each is ``{"type": "resubmit" | "update-capacity", "operation": "batch:SubmitServiceJob" | ...,
    "request": {the parameters given to boto3}}``, plus ``"error": <AWS error code>`` when the call
    failed (after botocore's retries). Calls botocore refused to send are not actions.
    """
    return [action for entry in entries if (action := _action(entry)) is not None]


def _own_events(entry: JournalEntry) -> list[dict[str, Any]]:
    """The own events a successful ``PutEvents`` published, as the report lists them: ``{"id",
    "detail_type", "time", "detail"}`` (the envelope's ``time`` as EventBridge writes it)."""
    if entry.action != "events:PutEvents" or not entry.succeeded:
        return []
    out = []
    for item, event_id in zip(entry.params.get("Entries") or [], entry.event_ids, strict=False):
        if event_id is None or not isinstance(item, Mapping) or item.get("Source") != OWN_SOURCE:
            continue
        moment = item.get("Time")
        if isinstance(moment, datetime):
            aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
            moment = aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            detail = json.loads(item.get("Detail") or "null")
        except ValueError:
            detail = None
        out.append({"id": event_id, "detail_type": item.get("DetailType"), "time": moment, "detail": detail})
    return out


def _report_of(owner: Owner) -> EventReport:
    """The event report an owner is reported on."""
    if isinstance(owner, EventReport):
        return owner
    if owner.report is None:  # pragma: no cover - every batch report is made with its report
        raise RuntimeError("a batch report without its event")
    return owner.report


@dataclass(frozen=True)
class Wiring:
    """What a replay wires: the functions, their batching and the channels, as a deploy of the
    template with the same parameters creates them.

    Attributes:
        functions: per function (short name), its SQS event sources: ``(queue, BatchSize,
            MaximumBatchingWindowInSeconds)``, sorted.
        channels: where messages go: ``sns`` (the on-call topic), then ``slack`` and ``teams`` when
            their parameters are set.
        chat: per chat channel wired, how (``webhook``, ``bot token``).
        overrides: the parameters given (name → value); the rest are at their ``Default``.
    """

    functions: dict[str, list[tuple[str, int, int]]]
    channels: list[str]
    chat: dict[str, str]
    overrides: dict[str, str]


def _receive(aws: EmbeddedAws, queue: str, count: int) -> dict[str, Any]:
    """Up to ``count`` records of ``queue`` as one Lambda SQS event (ReceiveMessage gives 10 at most
    per call, so a batch of 100 takes several calls, as Lambda's pollers do)."""
    records: list[dict[str, Any]] = []
    while len(records) < count:
        received = aws.receive_as_lambda_event(queue, max_records=min(10, count - len(records)))["Records"]
        if not received:
            break
        records.extend(received)
    return {"Records": records}


def _event_id(body: str) -> str | None:
    """The ``id`` of the event an SQS body carries, or None."""
    try:
        event = json.loads(body)
    except ValueError:
        return None
    value = event.get("id") if isinstance(event, dict) else None
    return value if isinstance(value, str) else None


_UNSENDABLE = (
    "not delivered: the event holds a lone UTF-16 surrogate escape (such as \\ud800), which is "
    "not valid UTF-8, so EventBridge and SQS could not carry it"
)
"""The error of an input event whose text cannot be an SQS message body."""


def _not_an_event(item: Any) -> str | None:
    """Why ``item`` is not an EventBridge event, or None when it is one (for routing purposes)."""
    if not isinstance(item, Mapping):
        kind = "an array" if isinstance(item, list) else type(item).__name__
        return f"not an EventBridge event: expected a JSON object, got {kind}"
    missing = [key for key in ("detail-type", "source") if not isinstance(item.get(key), str)]
    if missing:
        return f"not an EventBridge event: {' and '.join(missing)} missing or not a string"
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _shown(value: Any) -> str | None:
    """:func:`_text`, with what UTF-8 cannot hold (lone surrogates) written as ``\\udXXX``."""
    text = _text(value)
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if text is not None else None


class Replayer:
    """Replays events through the functions of one template.

    Args:
        template_path: the SAM template; default :func:`~batchpilot_local.template.default_template_path`.
        parameters: template parameter overrides for every event (name → text, as ``sam deploy
            --parameter-overrides`` gives them); a scenario's own ``parameters`` win over these.
        batch: hand records to each function in SQS batches, as Lambda's event source mapping
            does (see :class:`_Batcher`): digests and threads appear; each output is still
            reported on the event whose record caused it, and what an invocation did for its batch
            as a whole on the batch's last event. False: one record per invocation.
        direct_calls: answer the functions' DynamoDB calls and the emulator's Batch and SageMaker
            reads without botocore's HTTP hop (see :class:`~batchpilot_local.embedded_aws.EmbeddedAws`;
            the same answers, in less time). False: every call takes botocore's whole path to moto.
        on_invocation: called after every handler invocation the replay makes (SQS batches and
            clock ticks) with the function's spec, the number of records it was handed (0 for a
            scheduled tick) and the :class:`~batchpilot_local.lambda_runtime.Invocation` (its
            ``duration_s`` and the ``output`` it printed): what a tool such as the cost benchmark
            counts Lambda requests, GB-seconds and log bytes from.

    Raises:
        batchpilot_local.template.TemplateError: the template cannot be read or routed, or a
            parameter is not declared by it.
    """

    def __init__(
        self,
        template_path: str | Path | None = None,
        parameters: Mapping[str, str] | None = None,
        *,
        batch: bool = False,
        direct_calls: bool = True,
        on_invocation: InvocationHook | None = None,
    ) -> None:
        self.on_invocation = on_invocation
        path = Path(template_path) if template_path is not None else default_template_path()
        self._parameters = dict(parameters or {})
        self.template: AppTemplate = load_template(path, self._parameters)
        self._default_template = self.template  # self.template changes per scenario while running
        self.batch = batch
        self.direct_calls = direct_calls
        self._templates: dict[tuple[tuple[str, str], ...], AppTemplate] = {}
        self._alerts: LocalAlerts | None = None  # the alerts function's topic, table and chat
        self._bus: str | None = None  # run(bus=...): the bus input events are put on
        # Own events published and not yet taken from their queues: event id -> (owner, record).
        self._own_owners: dict[str, tuple[Owner, str | None]] = {}

    @property
    def wiring(self) -> Wiring:
        """What this replay wires with its parameters (scenarios' own parameters aside)."""
        functions: dict[str, set[tuple[str, int, int]]] = {}
        for route in self.template.routes:
            functions.setdefault(route.function.short_name, set()).add(
                (route.queue, route.batch_size, route.batching_window_s)
            )
        alerts = self.template.functions.get(ALERTS_FUNCTION)
        chat = chat_wiring(alerts.environment if alerts else None)
        channels = (["sns"] if alerts else []) + list(chat)  # Slack, Teams, other registered channels
        return Wiring(
            {name: sorted(sources) for name, sources in sorted(functions.items())},
            channels,
            chat,
            dict(self.template.overrides),
        )

    def run(
        self,
        events: Iterable[Any],
        *,
        worlds: Sequence[Mapping[str, Any]] = (),
        origins: Sequence[str | None] | None = None,
        on_report: Callable[[EventReport], None] | None = None,
        scopes: Sequence[str | None] | None = None,
        scope_worlds: Mapping[str, Mapping[str, Any]] | None = None,
        bus: str | None = None,
        scope_parameters: Mapping[str, Mapping[str, str]] | None = None,
        keep_reports: bool = True,
    ) -> list[EventReport]:
        """Replay the events, in order, in a fresh embedded AWS (one cold start per function).

        Args:
            events: decoded JSON values; each should be an EventBridge event object. An item
                that is not (not an object, no string ``detail-type``/``source``) gets a report
                with an error and is not delivered.
            worlds: worlds seeded before the first event (for callers that pass no ``scopes``).
            origins: where each event came from (shown in the text report), same length as events.
            on_report: called with each report as soon as it is ready; anything it prints goes to
                the real stdout (the handlers' stdout is captured separately).
            scopes: per event, the scenario it belongs to (its file), or None for a plain event.
                Each run of consecutive events of one scenario is replayed in an embedded AWS of
                its own, seeded with ``scope_worlds[scope]``: one scenario's world, jobs and
                de-duplication state never leak into another's. Consecutive plain events share one.
            scope_worlds: the world of each scenario, by scope.
            bus: the event bus every input event is put on. None: where it comes from in AWS,
                the default bus for AWS services' events and, for batchpilot's own events
                (source ``batchpilot``), the bus its functions publish to
                (:attr:`~batchpilot_local.template.AppTemplate.own_event_bus`), as if batchpilot
                had published them. ``"default"`` replays a forged own event: it reaches nothing.
            scope_parameters: per scenario, its template parameter overrides (on top of the
                replayer's own): its functions run with that configuration.
            keep_reports: False: each report goes to ``on_report`` only and the returned list is
                empty, so a long archive's memory does not grow with its reports.

        Returns:
            One report per event, in input order (none when ``keep_reports`` is False).

        Raises:
            batchpilot_local.embedded_aws.WorldError: a world cannot be seeded.
        """

        def origin(i: int) -> str | None:
            return origins[i] if origins is not None and i < len(origins) else None

        def scope(i: int) -> str | None:
            return scopes[i] if scopes is not None else None

        triples = ((event, origin(i), scope(i)) for i, event in enumerate(events))
        # Without scopes, every event is plain and ``worlds`` is seeded; with them, plain events get none.
        plain_worlds = worlds if scopes is None else ()
        return self.run_items(
            triples,
            plain_worlds=plain_worlds,
            on_report=on_report,
            scope_worlds=scope_worlds,
            bus=bus,
            scope_parameters=scope_parameters,
            keep_reports=keep_reports,
        )

    def run_items(
        self,
        items: Iterable[tuple[Any, str | None, str | None]],
        *,
        plain_worlds: Sequence[Mapping[str, Any]] = (),
        on_report: Callable[[EventReport], None] | None = None,
        scope_worlds: Mapping[str, Mapping[str, Any]] | None = None,
        bus: str | None = None,
        scope_parameters: Mapping[str, Mapping[str, str]] | None = None,
        keep_reports: bool = True,
        at_end: Callable[[EmbeddedAws], None] | None = None,
    ) -> list[EventReport]:
        """:meth:`run` over ``(event, origin, scope)`` triples, taken one at a time as they are
        replayed (an :class:`~batchpilot_local.inputs.ItemSpool` is read once, never held).

        ``plain_worlds`` are seeded in the embedded AWS of each run of plain (scope None) events;
        ``at_end`` is called with each segment's embedded AWS once its events are replayed, before
        it closes (what ``batchpilot queue --scenario`` reads the replayed ledger through); the
        other arguments are :meth:`run`'s.

        Raises:
            batchpilot_local.embedded_aws.WorldError: a world cannot be seeded.
        """
        reports = _Reports(keep_reports)
        self._bus = bus
        default = self._default_template = self.template
        try:
            for scope, segment in itertools.groupby(items, key=lambda item: item[2]):
                if scope is None:
                    segment_worlds: list[Mapping[str, Any]] = list(plain_worlds)
                    parameters: Mapping[str, str] = {}
                else:
                    world = (scope_worlds or {}).get(scope)
                    segment_worlds = [world] if world else []
                    parameters = (scope_parameters or {}).get(scope, {})
                self.template = self._template_with(parameters)
                self._run_segment(
                    ((event, origin) for event, origin, _ in segment),
                    segment_worlds,
                    reports,
                    on_report,
                    at_end,
                )
        finally:
            self.template = default
        return reports.kept

    def _template_with(self, parameters: Mapping[str, str]) -> AppTemplate:
        """The template loaded with the replayer's parameters and then ``parameters`` (cached)."""
        if not parameters:
            return self._default_template
        merged = {**self._parameters, **parameters}
        key = tuple(sorted(merged.items()))
        if key not in self._templates:
            self._templates[key] = load_template(self._default_template.path, merged)
        return self._templates[key]

    def _run_segment(
        self,
        events: Iterable[tuple[Any, str | None]],
        worlds: Sequence[Mapping[str, Any]],
        reports: _Reports,
        on_report: Callable[[EventReport], None] | None,
        at_end: Callable[[EmbeddedAws], None] | None = None,
    ) -> None:
        """Replay ``(event, origin)`` pairs in one fresh embedded AWS seeded with ``worlds``;
        append to ``reports``; then ``at_end(aws)``."""
        real_stdout = sys.stdout
        sink = SwitchableStdout(real_stdout)
        sys.stdout = cast(TextIO, sink)
        try:
            with EmbeddedAws(direct_calls=self.direct_calls) as aws, LambdaRuntime(sink) as runtime:
                # The template's tables first: the StateTable that LocalAlerts needs is then the
                # template's (keys and TTL), created once.
                create_tables(aws.client("dynamodb"), self.template.tables)
                with LocalAlerts(aws, self.template) as alerts:
                    self._alerts = alerts
                    for world in worlds:
                        aws.seed(world)
                    for queue in sorted({route.queue for route in self.template.routes}):
                        aws.create_queue(queue, attributes=_QUEUE_ATTRIBUTES)
                    self._install_rules(aws)
                    aws.drain_journal()  # calls made while seeding are no event's actions
                    alerts.deliveries()
                    batcher = _Batcher(self, aws, runtime, on_report) if self.batch else None
                    for event, origin in events:
                        if isinstance(event, ClockScenario):  # scheduled runs, tick by tick (clock.py)
                            if batcher is not None:
                                batcher.flush_all()

                            def finish(tick: EventReport) -> None:
                                # The tick's invocation is the clock's: its journal and messages are
                                # the tick's, then its own events run through their functions.
                                self._settle_calls(aws, lambda record: tick, tick)
                                self._drain_own_events(aws, runtime, tick)

                            for tick in run_clock(
                                event,
                                self.template,
                                aws,
                                sink,
                                first_index=reports.count,
                                finish=finish,
                                on_invocation=self.on_invocation,
                            ):
                                reports.append(tick)
                                if on_report is not None:
                                    on_report(tick)
                            continue
                        if batcher is not None:
                            batcher.add(event, origin, reports)
                            continue
                        report = self._replay_one(aws, runtime, reports.count, event, origin)
                        reports.append(report)
                        if on_report is not None:
                            on_report(report)
                    if batcher is not None:
                        batcher.flush_all()
                    if at_end is not None:
                        sys.stdout = real_stdout  # what it prints is the caller's, not a handler's
                        at_end(aws)
        finally:
            sys.stdout = real_stdout
            self._alerts = None
            self._own_owners.clear()

    def _report_for(self, index: int, event: Any, origin: str | None) -> tuple[EventReport, str]:
        """A new report for an input event, and the event as an SQS message body.

        An item that is not an EventBridge event, or whose text UTF-8 cannot hold (a lone
        surrogate escape), gets a report holding the error (``is_event`` False) and body ``""``.
        """
        problem = _not_an_event(event)
        body = ""
        if problem is None:
            try:
                # Compact, as EventBridge writes an SQS body; pydantic-core's encoder is about
                # four times faster than json.dumps here.
                body = to_json(event).decode()
            except PydanticSerializationError as exc:
                if "surrogates not allowed" in str(exc):  # json.loads took "\\ud800"; UTF-8 cannot
                    problem = _UNSENDABLE
                else:  # nested deeper than pydantic-core goes (255 levels): json's encoder does
                    body = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
        if problem is not None:
            mapping = event if isinstance(event, Mapping) else {}
            return (
                EventReport(
                    index=index,
                    event_id=_shown(mapping.get("id")) if problem is _UNSENDABLE else None,
                    detail_type=_shown(mapping.get("detail-type")),
                    source=_shown(mapping.get("source")),
                    origin=origin,
                    errors=[problem],
                    is_event=False,
                ),
                body,
            )
        report = EventReport(
            index=index,
            event_id=_text(event.get("id")),
            detail_type=event["detail-type"],
            source=event["source"],
            origin=origin,
            job=job_summary(event),
        )
        return report, body

    def _replay_one(
        self, aws: EmbeddedAws, runtime: LambdaRuntime, index: int, event: Any, origin: str | None
    ) -> EventReport:
        report, body = self._report_for(index, event, origin)
        if not report.is_event:
            return report
        routes = self._routes_of(event, report)
        for route in routes:
            self._deliver(aws, runtime, route, body, report)
        self._drain_own_events(aws, runtime, report)
        return report

    def _routes_of(self, event: Mapping[str, Any], report: EventReport) -> list[Route]:
        """The routes an input event takes (by function, then rule), recorded in
        ``report.functions``."""
        routes = sorted(
            # Input events are JSON values (read from JSON text), so no defensive copy to match.
            self.template.routes_for(event, self._input_bus(event), decoded=True),
            key=lambda r: (r.function.short_name, r.rule),
        )
        report.functions = sorted({route.function.short_name for route in routes})
        return routes

    def _input_bus(self, event: Mapping[str, Any]) -> str:
        """The bus an input event is put on (see :meth:`run`'s ``bus``)."""
        if self._bus is not None:
            return self._bus
        return self.template.own_event_bus if event.get("source") == OWN_SOURCE else DEFAULT_BUS

    def _install_rules(self, aws: EmbeddedAws) -> None:
        """Create the template's rules in the embedded EventBridge, each targeting its queue.

        Input events are still delivered by the runner itself (so they keep their ids); these
        rules carry the events that handlers publish with ``PutEvents``.
        """
        events = aws.client("events")
        buses = {"default"}
        for route in self.template.routes:
            if route.event_bus not in buses:
                events.create_event_bus(Name=route.event_bus)
                buses.add(route.event_bus)
            events.put_rule(
                Name=route.rule,
                EventBusName=route.event_bus,
                EventPattern=json.dumps(route.event_pattern),
                State="ENABLED",
            )
            events.put_targets(
                Rule=route.rule,
                EventBusName=route.event_bus,
                Targets=[{"Id": route.queue, "Arn": aws.queue_arn(route.queue)}],
            )

    def _drain_own_events(self, aws: EmbeddedAws, runtime: LambdaRuntime, owner: Owner) -> None:
        """Run the functions whose queues received own events published while handling ``owner``'s
        event (one record per event, or a tick), round after round for chains such as recovery →
        alerts: each record is its own event's (the one whose record published it), the
        invocations' batch-level outputs ``owner``'s."""
        readers = {route.queue: route for route in self.template.routes}
        report = _report_of(owner)
        try:
            for _ in range(_MAX_CASCADE_ROUNDS):
                delivered = False
                for queue in sorted(readers):
                    if not aws.has_messages(queue):
                        continue
                    sqs_event = _receive(aws, queue, readers[queue].batch_size if self.batch else 10)
                    if not sqs_event["Records"]:
                        continue
                    delivered = True
                    route = readers[queue]
                    owners = {
                        r["messageId"]: self._own_owners.get(
                            _event_id(r.get("body") or "") or "", (owner, None)
                        )[0]
                        for r in sqs_event["Records"]
                    }
                    for each in {id(o): o for o in owners.values()}.values():
                        _add_function(_report_of(each), route.function.short_name)
                    self._invoke(aws, runtime, route, sqs_event, owners, owner)
                if not delivered:
                    return
            report.errors.append(
                f"replay: own events were still queued after {_MAX_CASCADE_ROUNDS} rounds (a rule loop?)"
            )
        finally:
            self._own_owners.clear()

    def _deliver(
        self, aws: EmbeddedAws, runtime: LambdaRuntime, route: Route, body: str, report: EventReport
    ) -> None:
        name = route.function.short_name
        message_id = aws.send(route.queue, body)
        sqs_event = aws.receive_as_lambda_event(route.queue, max_records=1)
        records = sqs_event["Records"]
        if [r["messageId"] for r in records] != [message_id]:
            report.errors.append(f"{name}: record failed: the queued message was not received back")
            return
        self._invoke(aws, runtime, route, sqs_event, {message_id: report}, report)

    def _invoke(
        self,
        aws: EmbeddedAws,
        runtime: LambdaRuntime,
        route: Route,
        sqs_event: dict[str, Any],
        owners: Mapping[str, Owner],
        batch: Owner,
    ) -> set[str]:
        """Run the route's handler on ``sqs_event``; report each output under the owner of the
        record that caused it (``owners``: messageId → owner), the rest under ``batch``; settle the
        queue. Returns the ids of the records that failed (left on the queue)."""
        records = sqs_event["Records"]
        spec = self._alerts.spec_for(route.function) if self._alerts is not None else route.function
        invocation = runtime.invoke(spec, sqs_event)
        if self.on_invocation is not None:
            self.on_invocation(route.function, len(records), invocation)
        parsed = parse_attributed(route.function.short_name, invocation.output)

        def owner_of(record: str | None) -> Owner:
            return owners.get(record, batch) if record is not None else batch

        for record, metric in parsed.metrics:
            owner_of(record).metrics.append(metric)
        for record, error in parsed.errors:
            owner_of(record).errors.append(error)
        self._settle_calls(aws, owner_of, batch, parsed.sent, owners)
        failed = self._failures(invocation, records, owners, batch)
        aws.delete_processed(route.queue, records, failed)
        return failed

    def _settle_calls(
        self,
        aws: EmbeddedAws,
        owner_of: Callable[[str | None], Owner],
        batch: Owner,
        sent: Sequence[SentNote] = (),
        owners: Mapping[str, Owner] | None = None,
    ) -> None:
        """After an invocation: its API calls (the journal: actions and own events, each under the
        record that made it) and the messages people received (each matched to its ``notification
        sent`` line, channel by channel in order: under the record it tells about; a digest, or a
        message no line explains, under ``batch``)."""
        for entry in aws.drain_journal():
            owner = owner_of(entry.record)
            action = _action(entry)
            if action is not None:
                owner.actions.append(action)
            for own in _own_events(entry):
                owner.own_events.append(own)
                self._own_owners[own["id"]] = (owner, entry.record)
        if self._alerts is None:
            return
        notes: dict[str, deque[SentNote]] = {}
        for each in sent:
            notes.setdefault(each.channel, deque()).append(each)
        for delivery in self._alerts.deliveries():
            queue = notes.get(str(delivery.note.get("channel")))
            note = queue.popleft() if queue else None
            target = owner_of(note.record) if note is not None else batch
            if note is not None and note.records and isinstance(target, BatchReport) and owners:
                covered = {_report_of(owners[r]).number for r in note.records if r in owners}
                delivery.note["events"] = sorted(covered)
            target.notifications.append(delivery.note)
            target.deliveries.append(delivery)

    @staticmethod
    def _failures(
        invocation: Invocation, records: list[dict[str, Any]], owners: Mapping[str, Owner], batch: Owner
    ) -> set[str]:
        """Record ids Lambda would leave on the queue; each failed record's owner gets the error."""
        name = invocation.function
        all_ids = {r["messageId"] for r in records}

        def fail(ids: Iterable[str], text: str) -> None:
            told: set[int] = set()
            for message_id in sorted(ids):
                owner = owners.get(message_id, batch)
                if id(owner) not in told:
                    told.add(id(owner))
                    owner.errors.append(text)

        if invocation.error is not None:
            stage = "init failed" if invocation.init_error else "record failed"
            fail(all_ids, f"{name}: {stage}: {invocation.error}")
            return all_ids
        if invocation.timed_out:
            fail(
                all_ids, f"{name}: record failed: ran {invocation.duration_s:.1f} s, longer than its timeout"
            )
            return all_ids
        # Lambda's rules for ReportBatchItemFailures: null or {} is success; an unusable response or
        # an identifier that is not in the batch fails the whole batch.
        result = invocation.result
        if result is None or (isinstance(result, Mapping) and result.get("batchItemFailures") in (None, [])):
            return set()
        failures = result.get("batchItemFailures") if isinstance(result, Mapping) else None
        if not isinstance(failures, list):
            fail(all_ids, f"{name}: record failed: the handler did not return a batch response")
            return all_ids
        failed = {f.get("itemIdentifier") if isinstance(f, Mapping) else None for f in failures}
        chosen = all_ids if not failed <= all_ids else {str(f) for f in failed}
        fail(chosen, f"{name}: record failed: reported in batchItemFailures")
        return chosen


def _add_function(report: EventReport, name: str) -> None:
    if name not in report.functions:
        report.functions = sorted({*report.functions, name})


def _event_time(event: Mapping[str, Any]) -> datetime | None:
    """The envelope's ``time`` (aware UTC), or None when missing or not ISO-8601."""
    text = event.get("time")
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class _Reports:
    """The reports of a run, in input order: kept (``keep``), or only counted, for a caller that
    takes each report through ``on_report`` and needs no list (memory flat in the events)."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.count = 0
        self.kept: list[EventReport] = []

    def append(self, report: EventReport) -> None:
        self.count += 1
        if self.keep:
            self.kept.append(report)


@dataclass
class _Item:
    """One record waiting in a queue: its body, whose it is, and how many own events led to it."""

    body: str
    owner: Owner
    depth: int = 0


@dataclass
class _Pending:
    """A queue's batch being gathered: its records and when its first one arrived."""

    route: Route
    first: datetime
    items: list[_Item] = field(default_factory=list)

    @property
    def closes(self) -> datetime:
        """When the batching window ends (``MaximumBatchingWindowInSeconds`` after the first)."""
        return self.first + timedelta(seconds=self.route.batching_window_s)


class _Batcher:
    """Hands records to each function in the batches its SQS event source mapping forms.

    Per queue, independently of the other queues, records gather until the mapping's
    ``BatchSize`` is reached or its ``MaximumBatchingWindowInSeconds`` has passed since the first
    (both from the template): then the function is invoked with the batch. Time is the events'
    own clock (an archive replays as it happened): a record arrives at its event's ``time``, never
    before the previous arrival (events arrive in input order), and each batch whose window ended
    before an arrival runs first, earliest first. Own events a function publishes arrive in their
    queues when its batch runs and join those queues' batches like any record (so a failure's
    alert and its resubmission's are gathered by the alerts function's own window). At the end of
    the input every batch runs when its window ends.

    Each record's outputs go to its owner (its event's report; an own event's, the owner of the
    record that published it); an invocation's outputs of no single record go to its batch: the
    records' single owner, or a :class:`~batchpilot_local.report.BatchReport` on the batch's last
    event. Reports are passed to ``on_report`` in input order, each once every record it owns
    has run.
    """

    def __init__(
        self,
        replayer: Replayer,
        aws: EmbeddedAws,
        runtime: LambdaRuntime,
        on_report: Callable[[EventReport], None] | None,
    ) -> None:
        self._replayer = replayer
        self._aws = aws
        self._runtime = runtime
        self._on_report = on_report
        self._pending: dict[str, _Pending] = {}
        self._waiting: dict[int, int] = {}  # id(report) -> records it owns still to run
        self._unsent: deque[EventReport] = deque()
        self._now: datetime | None = None

    def add(self, event: Any, origin: str | None, reports: _Reports) -> None:
        """Queue one input event for the functions its rules route it to; append its report."""
        replayer = self._replayer
        report, body = replayer._report_for(reports.count, event, origin)
        reports.append(report)
        self._unsent.append(report)
        if report.is_event:
            moment = _event_time(event) or self._now or datetime.now(UTC)
            now = max(moment, self._now) if self._now is not None else moment
            self._advance(now)
            for route in replayer._routes_of(event, report):
                self._enqueue(route, _Item(body, report), now)
        self._emit_ready()

    def flush_all(self) -> None:
        """Run every pending batch, each when its window ends (end of input, or before a clock
        scenario runs), own events they publish included."""
        while self._pending:
            pending = min(self._pending.values(), key=lambda p: (p.closes, p.route.queue))
            self._now = max(pending.closes, self._now) if self._now is not None else pending.closes
            self._run(pending.route.queue, pending.closes)
        self._emit_ready()

    def _advance(self, now: datetime) -> None:
        """Run the batches whose window ended before ``now``, earliest first."""
        while True:
            due = [
                p
                for p in self._pending.values()
                if (now - p.first).total_seconds() > p.route.batching_window_s
            ]
            if not due:
                break
            first = min(due, key=lambda p: (p.closes, p.route.queue))
            self._run(first.route.queue, first.closes)
        self._now = now

    def _enqueue(self, route: Route, item: _Item, at: datetime) -> None:
        pending = self._pending.get(route.queue)
        if pending is None:
            pending = self._pending[route.queue] = _Pending(route, at)
        pending.items.append(item)
        key = id(_report_of(item.owner))
        self._waiting[key] = self._waiting.get(key, 0) + 1
        if len(pending.items) >= route.batch_size:
            self._run(route.queue, at)

    def _batch_owner(self, pending: _Pending) -> Owner:
        owners = {id(item.owner): item.owner for item in pending.items}
        if len(owners) == 1:
            return next(iter(owners.values()))
        reports = {id(r): r for r in (_report_of(o) for o in owners.values())}.values()
        last = max(reports, key=lambda r: r.index)
        return BatchReport(
            function=pending.route.function.short_name,
            records=len(pending.items),
            events=sorted(r.number for r in reports),
            report=last,
        )

    def _run(self, queue: str, at: datetime) -> None:
        pending = self._pending.pop(queue, None)
        if pending is None:
            return
        aws, replayer = self._aws, self._replayer
        name = pending.route.function.short_name
        by_id = {aws.send(queue, item.body): item for item in pending.items}
        sqs_event = _receive(aws, queue, len(by_id))
        received = {r["messageId"] for r in sqs_event["Records"]}
        for message_id, item in by_id.items():
            if message_id not in received:
                item.owner.errors.append(f"{name}: record failed: the queued message was not received back")
        batch = self._batch_owner(pending)
        if sqs_event["Records"]:
            owners = {message_id: item.owner for message_id, item in by_id.items()}
            replayer._invoke(aws, self._runtime, pending.route, sqs_event, owners, batch)
        depth = {message_id: item.depth for message_id, item in by_id.items()}
        self._take_own_events(at, batch, depth, max(depth.values(), default=0))
        if isinstance(batch, BatchReport) and not batch.empty and batch.report is not None:
            batch.report.batches.append(batch)
        for item in pending.items:
            self._waiting[id(_report_of(item.owner))] -= 1

    def _take_own_events(
        self, at: datetime, batch: Owner, depth: Mapping[str, int], batch_depth: int
    ) -> None:
        """Take the own events a run published off their queues and queue them again as records of
        their queues' batches, arriving at ``at``, each owned as its publisher's record was."""
        aws, replayer = self._aws, self._replayer
        readers = {route.queue: route for route in replayer.template.routes}
        arrived: list[tuple[Route, _Item]] = []
        for queue in sorted(readers):
            while aws.has_messages(queue):
                records = aws.receive_as_lambda_event(queue, max_records=10)["Records"]
                if not records:
                    break
                aws.delete_processed(queue, records, set())
                for record in records:
                    body = str(record.get("body") or "")
                    owner, source = replayer._own_owners.get(_event_id(body) or "", (batch, None))
                    level = (depth.get(source, batch_depth) if source is not None else batch_depth) + 1
                    arrived.append((readers[queue], _Item(body, owner, level)))
        replayer._own_owners.clear()
        for route, item in arrived:
            if item.depth > _MAX_CASCADE_ROUNDS:
                message = (
                    f"replay: own events were still being published after {_MAX_CASCADE_ROUNDS} "
                    "rounds (a rule loop?)"
                )
                if message not in item.owner.errors:
                    item.owner.errors.append(message)
                continue
            _add_function(_report_of(item.owner), route.function.short_name)
            self._enqueue(route, item, at)

    def _emit_ready(self) -> None:
        while self._unsent and self._waiting.get(id(self._unsent[0]), 0) == 0:
            report = self._unsent.popleft()
            self._waiting.pop(id(report), None)
            if self._on_report is not None:
                self._on_report(report)
