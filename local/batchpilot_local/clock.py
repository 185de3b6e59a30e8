"""Scenarios with a clock: run a scheduled function (the capacity function) tick by tick.

EventBridge Scheduler invocations are not rule routes, so the replay needs to be told when they
happen. A *clock scenario* is a JSON object with ``ticks``::

    {"name": "burst", "description": "...",
     "parameters": {"CapacityServiceEnvironmentArns": "arn:aws:batch:...:service-environment/x",
                    "CapacityJobQueueArns": "...", "CapacityPolicy": {"service_environments": {...}}},
     "world": {...},                                  # seeded when the scenario starts
     "ticks": [{"at": "2026-11-20T22:00:00Z", "world": {...}, "note": "..."}, ...]}

- ``parameters``: template parameter overrides, as ``sam deploy --parameter-overrides`` would give
  them (an object or array value is passed as its JSON text). They reach the scheduled function's
  environment through its ``Environment.Variables`` that are ``!Ref <Parameter>``; the function is
  cold-started with that environment for this scenario (its own Lambda runtime).
- ``world``: seeded into the embedded AWS when the scenario starts (see
  :mod:`batchpilot_local.world`); a tick's ``world`` then moves it on with
  :meth:`~batchpilot_local.embedded_aws.EmbeddedAws.set_world` (job lists replaced, environments
  and queues updated), so changes the function made (capacity limits) persist unless a tick sets
  them.
- each tick invokes the function that ``schedule`` (default: the template's only
  ``AWS::Scheduler::Schedule``, or :data:`DEFAULT_SCHEDULE` when there are several) targets,
  with that schedule's ``Target.Input`` filled in as Scheduler would,
  ``<aws.scheduler.scheduled-time>`` being the tick's ``at``. Ticks must be in increasing time
  order.

Each tick gives one :class:`~batchpilot_local.report.EventReport` (``detail_type`` ``Scheduled
Event``, ``source`` ``aws.scheduler``) with the metrics and errors the function printed. A
``finish`` callback given by the runner then completes it: the replay delivers the own events the
function published, collects notifications, and turns the API journal into ``actions`` (each
``UpdateServiceEnvironment`` as ``{"type": "update-capacity", "operation":
"batch:UpdateServiceEnvironment", "request": {...}}``).
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.lambda_runtime import Invocation, LambdaRuntime, SwitchableStdout
from batchpilot_local.report import EventReport, parse_output
from batchpilot_local.template import ACCOUNT_ID, REGION, AppTemplate, FunctionSpec
from batchpilot_local.world import WorldError, check_world, parse_time

__all__ = [
    "CLOCK_KEYS",
    "ClockError",
    "ClockScenario",
    "Tick",
    "is_clock_scenario",
    "parse_clock_scenario",
    "run_clock",
]

CLOCK_KEYS: frozenset[str] = frozenset({"name", "description", "parameters", "schedule", "world", "ticks"})
"""Keys a clock scenario may have (``ticks`` is required)."""
_TICK_KEYS = frozenset({"at", "world", "note"})
DEFAULT_SCHEDULE = "CapacitySchedule"
"""The schedule a scenario without ``schedule`` runs when the template has several (the clock
scenarios were written for the capacity function before the ledger got its own schedule)."""
_MAX_TICKS = 10_000


class ClockError(ValueError):
    """A clock scenario is malformed, or does not fit the template (one line, names the field)."""


@dataclass(frozen=True)
class Tick:
    """One scheduled run: at ``at`` (aware UTC), after moving the world on by ``world``."""

    at: datetime
    world: dict[str, Any] = field(default_factory=dict)
    note: str | None = None


@dataclass(frozen=True)
class ClockScenario:
    """A parsed clock scenario (see the module docstring).

    Attributes:
        origin: where it came from (a file name), used in report origins and event ids.
        name, description: free text.
        parameters: template parameter name → value (strings).
        schedule: logical id of the ``AWS::Scheduler::Schedule`` to run, or None for the only one.
        world: seeded at the start.
        ticks: in increasing time order.
    """

    origin: str
    ticks: tuple[Tick, ...]
    name: str | None = None
    description: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    schedule: str | None = None
    world: dict[str, Any] = field(default_factory=dict)


def is_clock_scenario(value: Any) -> bool:
    """True for a top-level object with ``ticks`` and no ``detail-type`` (not an event)."""
    return isinstance(value, Mapping) and "ticks" in value and "detail-type" not in value


def _parameter_text(name: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, Mapping | list):
        return json.dumps(value, separators=(",", ":"))
    raise ClockError(f"parameters.{name}: expected a string, number, boolean, object or array")


def _world(value: Any, where: str) -> dict[str, Any]:
    try:
        check_world(value)
    except WorldError as exc:
        raise ClockError(f"{where}: {exc}") from None
    return dict(value)


def parse_clock_scenario(value: Mapping[str, Any], origin: str) -> ClockScenario:
    """Check a clock scenario's shape (the template-dependent checks happen in :func:`run_clock`).

    Raises:
        ClockError: unknown keys, no ticks, a tick without a valid ``at``, ticks out of order, a
            malformed world or parameter; the message names the field.
    """
    unknown = sorted(str(k) for k in value if k not in CLOCK_KEYS)
    if unknown:
        raise ClockError(f"unknown clock scenario key(s): {', '.join(unknown)}")
    raw_ticks = value["ticks"]
    if not isinstance(raw_ticks, list) or not raw_ticks:
        raise ClockError("ticks must be a non-empty array")
    if len(raw_ticks) > _MAX_TICKS:
        raise ClockError(f"ticks: at most {_MAX_TICKS}")
    ticks: list[Tick] = []
    for i, raw in enumerate(raw_ticks):
        where = f"ticks[{i}]"
        if not isinstance(raw, Mapping):
            raise ClockError(f"{where}: expected an object")
        extra = sorted(str(k) for k in raw if k not in _TICK_KEYS)
        if extra:
            raise ClockError(f"{where}: unknown key(s): {', '.join(extra)}")
        if "at" not in raw:
            raise ClockError(f"{where}.at: required (ISO-8601 time)")
        try:
            at = parse_time(raw["at"])
        except ValueError as exc:
            raise ClockError(f"{where}.at: {exc}") from None
        if ticks and at <= ticks[-1].at:
            raise ClockError(f"{where}.at: ticks must be in increasing time order")
        note = raw.get("note")
        if note is not None and not isinstance(note, str):
            raise ClockError(f"{where}.note: expected a string")
        ticks.append(Tick(at, _world(raw.get("world", {}), f"{where}.world"), note))
    parameters = value.get("parameters", {})
    if not isinstance(parameters, Mapping):
        raise ClockError("parameters must be an object (template parameter name -> value)")
    schedule = value.get("schedule")
    if schedule is not None and not isinstance(schedule, str):
        raise ClockError("schedule must be the logical id of an AWS::Scheduler::Schedule")
    texts = {key: value.get(key) for key in ("name", "description")}
    for key, text in texts.items():
        if text is not None and not isinstance(text, str):
            raise ClockError(f"{key} must be a string")
    return ClockScenario(
        origin=origin,
        ticks=tuple(ticks),
        name=texts["name"],
        description=texts["description"],
        parameters={str(k): _parameter_text(str(k), v) for k, v in parameters.items()},
        schedule=schedule,
        world=_world(value.get("world", {}), "world"),
    )


# ---------------------------------------------------------------------------------------- template
@dataclass(frozen=True)
class _Schedule:
    logical_id: str
    function: FunctionSpec
    input_template: str  # Target.Input with ${AWS::...} resolved; <aws.scheduler.*> left in
    variables: dict[str, str]  # env var -> parameter name, for !Ref parameters


def _raw_template(path: Path) -> dict[str, Any]:
    from cfnlint.decode.cfn_yaml import loads

    data = json.loads(json.dumps(loads(path.read_text(encoding="utf-8"), str(path))))
    if not isinstance(data, dict):
        raise ClockError(f"{path}: not a template")
    return data


def _resolve_sub(node: Any, where: str) -> str:
    if isinstance(node, str):
        text = node
    elif isinstance(node, Mapping) and isinstance(node.get("Fn::Sub"), str):
        text = node["Fn::Sub"]
    else:
        raise ClockError(f"{where}: Target.Input must be a string or !Sub string")
    pseudo = {"AWS::AccountId": ACCOUNT_ID, "AWS::Region": REGION, "AWS::Partition": "aws"}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in pseudo:
            raise ClockError(f"{where}: ${{{name}}} in Target.Input is not supported by the replay")
        return pseudo[name]

    return re.sub(r"\$\{([^}!]+)\}", replace, text)


def _schedule(template: AppTemplate, wanted: str | None) -> _Schedule:
    data = _raw_template(template.path)
    resources: Mapping[str, Any] = data.get("Resources") or {}
    schedules = {
        name: res
        for name, res in resources.items()
        if isinstance(res, Mapping) and res.get("Type") == "AWS::Scheduler::Schedule"
    }
    if wanted is None and len(schedules) > 1 and DEFAULT_SCHEDULE in schedules:
        wanted = DEFAULT_SCHEDULE
    if wanted is None:
        if len(schedules) != 1:
            names = ", ".join(sorted(schedules)) or "none"
            raise ClockError(f"say which schedule to run: the template has {names}")
        wanted = next(iter(schedules))
    if wanted not in schedules:
        raise ClockError(f"schedule {wanted}: no such AWS::Scheduler::Schedule in the template")
    target = (schedules[wanted].get("Properties") or {}).get("Target") or {}
    arn = target.get("Arn")
    getatt = arn.get("Fn::GetAtt") if isinstance(arn, Mapping) else None
    parts = getatt.split(".", 1) if isinstance(getatt, str) else getatt
    if not (isinstance(parts, list) and len(parts) == 2 and parts[1] == "Arn"):
        raise ClockError(f"schedule {wanted}: Target.Arn must be !GetAtt <Function>.Arn")
    spec = next((s for s in template.functions.values() if s.logical_id == parts[0]), None)
    if spec is None:
        raise ClockError(f"schedule {wanted}: {parts[0]} is not a function the replay can run")
    props = (resources[parts[0]].get("Properties") or {}).get("Environment") or {}
    variables = {
        name: value["Ref"]
        for name, value in (props.get("Variables") or {}).items()
        if isinstance(value, Mapping) and set(value) == {"Ref"} and isinstance(value["Ref"], str)
    }
    input_template = _resolve_sub(target.get("Input", "{}"), f"schedule {wanted}")
    return _Schedule(wanted, spec, input_template, variables)


def _spec_with(schedule: _Schedule, parameters: Mapping[str, str], template: AppTemplate) -> FunctionSpec:
    data = _raw_template(template.path)
    known = data.get("Parameters") or {}
    unknown = sorted(p for p in parameters if p not in known)
    if unknown:
        raise ClockError(f"parameters: {', '.join(unknown)}: not parameters of the template")
    environment = dict(schedule.function.environment)
    for variable, parameter in schedule.variables.items():
        if parameter in parameters:
            environment[variable] = parameters[parameter]
    return dataclasses.replace(schedule.function, environment=environment)


def _event(schedule: _Schedule, scenario: ClockScenario, index: int, at: datetime) -> dict[str, Any]:
    execution = str(
        uuid.uuid5(uuid.NAMESPACE_URL, f"batchpilot-clock:{scenario.origin}:{index}:{at.isoformat()}")
    )
    arn = f"arn:aws:scheduler:{REGION}:{ACCOUNT_ID}:schedule/default/batchpilot-{schedule.logical_id}"
    text = (
        schedule.input_template.replace("<aws.scheduler.execution-id>", execution)
        .replace("<aws.scheduler.scheduled-time>", at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        .replace("<aws.scheduler.schedule-arn>", arn)
        .replace("<aws.scheduler.attempt-number>", "1")
    )
    try:
        event = json.loads(text)
    except ValueError as exc:
        raise ClockError(f"schedule {schedule.logical_id}: Target.Input is not JSON: {exc}") from None
    if not isinstance(event, dict):
        raise ClockError(f"schedule {schedule.logical_id}: Target.Input must be a JSON object")
    return event


_DECISION_FIELDS = ("service_environment", "capacity_unit", "in_use", "runnable_demand", "current_max")


def _decisions(output: str) -> list[dict[str, Any]]:
    """The ``capacity decision`` log lines of one run's output (Powertools JSON lines), each cut to
    the figures a timeline shows."""
    out = []
    for line in output.splitlines():
        if not line.startswith("{") or '"capacity decision"' not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("message") == "capacity decision":
            out.append({key: record.get(key) for key in _DECISION_FIELDS})
    return out


def run_clock(
    scenario: ClockScenario,
    template: AppTemplate,
    aws: EmbeddedAws,
    sink: SwitchableStdout,
    *,
    first_index: int = 0,
    finish: Callable[[EventReport], None] | None = None,
    on_invocation: Callable[[FunctionSpec, int, Invocation], None] | None = None,
) -> Iterator[EventReport]:
    """Run a clock scenario in an open embedded AWS; yield one report per tick, as each is ready.

    Args:
        scenario: from :func:`parse_clock_scenario`.
        template: the replay's template.
        aws: the open embedded AWS, with the template's tables already created (the replay does
            that first); state persists across scenarios of one replay.
        sink: the replay's switchable stdout (the function's output is captured through it).
        first_index: ``index`` of the first tick's report (they follow on).
        finish: called with each tick's report after the function ran: the replay delivers the
            own events it published, collects notifications and adds ``actions`` from the API
            journal (the function's calls are still in it).
        on_invocation: called after each tick's invocation with the function's spec, 0 (records)
            and the :class:`~batchpilot_local.lambda_runtime.Invocation`.

    A scenario that does not fit the template (no schedule, unknown parameter) or whose world
    cannot be seeded gives a single report with that error.
    """
    origin = scenario.origin
    try:
        schedule = _schedule(template, scenario.schedule)
        spec = _spec_with(schedule, scenario.parameters, template)
        aws.seed(scenario.world)
    except (ClockError, WorldError) as exc:
        yield EventReport(
            index=first_index,
            event_id=None,
            detail_type="Scheduled Event",
            source="aws.scheduler",
            origin=origin,
            errors=[f"clock: {exc}"],
            is_event=False,
        )
        return
    with LambdaRuntime(sink) as runtime:  # a cold start with this scenario's parameters
        for i, tick in enumerate(scenario.ticks):
            event = _event(schedule, scenario, i, tick.at)
            where = f"{origin} ticks[{i}] {tick.at.strftime('%Y-%m-%dT%H:%M:%SZ')}"
            report = EventReport(
                index=first_index + i,
                event_id=str(event.get("id")) if event.get("id") is not None else None,
                detail_type=str(event.get("detail-type", "Scheduled Event")),
                source=str(event.get("source", "aws.scheduler")),
                origin=f"{where} ({tick.note})" if tick.note else where,
                functions=[spec.short_name],
            )
            try:
                aws.set_world(tick.world)
            except WorldError as exc:
                report.errors.append(f"clock: {where}: world: {exc}")
                yield report
                continue
            invocation = runtime.invoke(spec, event)
            if on_invocation is not None:
                on_invocation(spec, 0, invocation)
            metrics, errors = parse_output(spec.short_name, invocation.output)
            report.metrics.extend(metrics)
            report.errors.extend(errors)
            report.decisions.extend(_decisions(invocation.output))
            if invocation.error is not None:
                stage = "init failed" if invocation.init_error else "failed"
                report.errors.append(f"{spec.short_name}: {stage}: {invocation.error}")
            elif invocation.timed_out:
                report.errors.append(
                    f"{spec.short_name}: ran {invocation.duration_s:.1f} s, longer than its timeout"
                )
            if finish is not None:
                finish(report)
            yield report
