"""Reading ``template.yaml``: which function each EventBridge rule feeds, and how each function runs.

The replay runner follows the template's own wiring, never a hand-kept list::

    AWS::Events::Rule (EventPattern, EventBusName: default, or !Ref <a bus of the template>)
      └─ target Arn: !GetAtt <Queue>.Arn          (an AWS::SQS::Queue)
           └─ AWS::Serverless::Function whose Events has an SQS event with Queue: !GetAtt <Queue>.Arn

A function's short name is the last folder of its ``CodeUri`` (``functions/metrics/`` → ``metrics``).
Its timeout, memory size and environment come from the function, falling back to
``Globals.Function`` (environment variables are merged, the function's own winning).

Intrinsic functions are resolved the way CloudFormation would with every parameter at its
``Default``, or at the value given to :func:`load_template` (as ``sam deploy
--parameter-overrides`` would give it; a parameter the template does not declare is an error):
``Ref`` (parameters, pseudo parameters, resources), ``Fn::GetAtt``, ``Fn::Sub``,
``Fn::Join``, ``Fn::Select``, ``Fn::If`` and the condition functions. Resources resolve to the
physical names the embedded AWS gives them (a queue is named after its logical id).

Entry points: :func:`load_template` (→ :class:`AppTemplate`) and :func:`default_template_path`.
Every error is a :class:`TemplateError` whose message names the file and the resource.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml
from moto.events.models import EventPattern
from samtranslator.yaml_helper import intrinsics_multi_constructor

from batchpilot_local.bundle import application_dir

__all__ = [
    "ACCOUNT_ID",
    "DEFAULT_BUS",
    "REGION",
    "STACK_NAME",
    "STATE_TABLE",
    "AppTemplate",
    "FunctionSpec",
    "Route",
    "TemplateError",
    "created_resources",
    "default_template_path",
    "load_template",
    "parse_file",
    "resolved_resources",
]

REGION = "us-east-1"
"""Region of the embedded AWS; ``!Ref AWS::Region`` resolves to it."""
ACCOUNT_ID = "111122223333"
"""Account id of the embedded AWS (the placeholder account of the docs and sample events; moto is
told to use it through ``MOTO_ACCOUNT_ID``); ``!Ref AWS::AccountId`` resolves to it."""
STACK_NAME = "batchpilot"
"""Stack name assumed for ``!Ref AWS::StackName``."""
STATE_TABLE = "StateTable"
"""Logical id of the table every function's ``BATCHPILOT_STATE_TABLE`` names (``!Ref StateTable``)."""

DEFAULT_BUS = "default"
"""Name of the account's default event bus, where AWS services send their events."""
OWN_BUS_VARIABLE = "BATCHPILOT_EVENT_BUS"
"""The functions' environment variable naming the bus batchpilot publishes its own events to."""

_LAMBDA_DEFAULT_TIMEOUT = 3  # seconds, Lambda's own default
_LAMBDA_DEFAULT_MEMORY = 128  # MB, Lambda's own default

_PSEUDO = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT_ID,
    "AWS::StackName": STACK_NAME,
    "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT_ID}:stack/{STACK_NAME}/replay",
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
}


class TemplateError(ValueError):
    """``template.yaml`` cannot be read, or its wiring is not what the replay runner understands."""


class _NoValue:
    """``!Ref AWS::NoValue``: the property is removed."""


NO_VALUE = _NoValue()


@dataclass(frozen=True)
class FunctionSpec:
    """One ``AWS::Serverless::Function`` as the replay runner runs it.

    Attributes:
        logical_id: the function's logical id (``MetricsFunction``).
        short_name: last folder of ``CodeUri`` (``metrics``); also the report's function name.
        code_dir: absolute path of the ``CodeUri`` folder.
        handler: the ``Handler`` string (``app.lambda_handler``).
        module_file: absolute path of the handler's module (``<code_dir>/app.py``).
        handler_name: the handler's attribute name in that module (``lambda_handler``).
        timeout: seconds (function, else ``Globals.Function``, else Lambda's default 3).
        memory_size: MB (function, else ``Globals.Function``, else Lambda's default 128).
        environment: the environment variables, resolved to strings (Globals merged with the
            function's own).
        queues: logical ids of the SQS queues that trigger the function, in template order.
    """

    logical_id: str
    short_name: str
    code_dir: Path
    handler: str
    module_file: Path
    handler_name: str
    timeout: int
    memory_size: int
    environment: dict[str, str]
    queues: tuple[str, ...]

    @property
    def lambda_name(self) -> str:
        """The deployed-looking function name used in the fake Lambda context: ``batchpilot-<short>``."""
        return f"{STACK_NAME}-{self.short_name}"


@dataclass(frozen=True)
class Route:
    """One path an event can take: a rule's pattern, the queue it targets, the function that reads it.

    Attributes:
        rule: logical id of the ``AWS::Events::Rule``.
        event_bus: the rule's bus name (``default`` unless ``EventBusName`` says otherwise).
        event_pattern: the rule's ``EventPattern`` (plain JSON data).
        queue: logical id of the target ``AWS::SQS::Queue``.
        function: the function whose SQS event source is that queue.
        batch_size: the event source mapping's ``BatchSize`` (Lambda's default 10).
        batching_window_s: its ``MaximumBatchingWindowInSeconds`` (default 0): how long Lambda
            gathers records into one batch.
    """

    rule: str
    event_bus: str
    event_pattern: dict[str, Any]
    queue: str
    function: FunctionSpec
    batch_size: int = 10
    batching_window_s: int = 0
    _matcher: EventPattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            matcher = EventPattern.load(json.dumps(self.event_pattern))
        except Exception as exc:  # moto's InvalidEventPatternException and friends
            raise TemplateError(f"{self.rule}: invalid EventPattern: {_short(exc)}") from None
        object.__setattr__(self, "_matcher", matcher)

    def matches(self, event: Mapping[str, Any]) -> bool:
        """True when the rule's pattern matches the event (moto's EventBridge matcher)."""
        return bool(self._matcher.matches_event(cast(Any, dict(event))))


@dataclass(frozen=True)
class AppTemplate:
    """What the replay runner needs from one template.

    Attributes:
        path: the template file.
        routes: every rule → queue → function path, in template order.
        functions: every routed function, by short name.
        tables: every ``AWS::DynamoDB::Table`` by logical id (its physical name in the embedded AWS)
            → the ``CreateTable`` arguments that matter locally (``AttributeDefinitions``,
            ``KeySchema``, ``GlobalSecondaryIndexes``) and ``TimeToLiveAttribute`` when set.
        parameters: the names of the template's ``Parameters``, in template order.
        overrides: the parameter values it was loaded with (name → text); the others are at
            their ``Default``.
    """

    path: Path
    routes: tuple[Route, ...]
    functions: dict[str, FunctionSpec]
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    parameters: tuple[str, ...] = ()
    overrides: dict[str, str] = field(default_factory=dict)

    def routes_for(
        self, event: Mapping[str, Any], bus: str = DEFAULT_BUS, *, decoded: bool = False
    ) -> list[Route]:
        """The routes on ``bus`` whose pattern matches the event, in template order (moto's
        EventBridge matcher, :meth:`Route.matches`). ``decoded`` (the event is fresh from
        ``json.loads``) is accepted for callers that say so; the matcher copies the event anyway."""
        return [route for route in self.routes if route.event_bus == bus and route.matches(event)]

    @property
    def own_event_bus(self) -> str:
        """The bus batchpilot's functions publish their own events to (their ``BATCHPILOT_EVENT_BUS``,
        an ARN reduced to its name), or the default bus when no routed function names one."""
        names = sorted(
            {
                spec.environment[OWN_BUS_VARIABLE].rsplit("event-bus/", 1)[-1]
                for spec in self.functions.values()
                if spec.environment.get(OWN_BUS_VARIABLE)
            }
        )
        return names[0] if names else DEFAULT_BUS


def default_template_path(cwd: Path | None = None) -> Path:
    """``template.yaml`` in the current directory if there is one, else the checkout's, else the
    copy installed with the package (:mod:`batchpilot_local.bundle`).

    Raises:
        TemplateError: none of them exists (a package installed without its data): the message
            says to pass ``--template``.
    """
    here = (cwd or Path.cwd()) / "template.yaml"
    if here.is_file():
        return here
    folder = application_dir()
    if folder is None:
        raise TemplateError(
            "no template.yaml in the current directory, and none installed with batchpilot: "
            "pass --template PATH (the SAM template of batchpilot, with its functions/ beside it)"
        )
    return folder / "template.yaml"


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class _TemplateLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader plus CloudFormation's short-form intrinsics (``!Ref X`` →
    ``{"Ref": "X"}``, ``!Sub``, ``!GetAtt A.B`` → ``{"Fn::GetAtt": ["A", "B"]}``, ...), through
    aws-sam-translator's constructor. A subclass, so ``yaml.safe_load`` elsewhere is unchanged.
    LibYAML's parser when PyYAML was built with it (the wheels are): the pure-Python one took
    about 0.3 s of every replay's start.
    cfn-lint's loader would also reject duplicate keys, but importing cfn-lint costs a replay
    about 90 MB; ``make validate`` runs cfn-lint on the template."""


_TemplateLoader.add_multi_constructor("!", intrinsics_multi_constructor)


def _plain(node: Any) -> Any:
    """Decoded YAML (dates and other scalars included) → plain JSON-shaped data."""
    if isinstance(node, Mapping):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, str):
        return str(node)
    if isinstance(node, datetime.date):  # an unquoted 2010-09-09: CloudFormation reads text
        return node.isoformat()
    return node


def parse_file(path: Path) -> dict[str, Any]:
    """A SAM/CloudFormation template file as plain JSON-shaped data, short-form intrinsics as
    their long forms (``!Ref X`` → ``{"Ref": "X"}``).

    Raises:
        TemplateError: the file cannot be read, is not YAML, or has no ``Resources`` section.
    """
    return _parse(path)


def _parse(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplateError(f"{path}: cannot read the template: {_short(exc)}") from None
    try:
        data = yaml.load(text, Loader=_TemplateLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise TemplateError(f"{path}: not a valid template: {_short(exc)}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("Resources"), Mapping):
        raise TemplateError(f"{path}: not a valid template: no Resources section")
    return dict(_plain(data))


class _Resolver:
    """Evaluates intrinsic functions with every parameter at its override, else its Default."""

    def __init__(self, template: Mapping[str, Any], path: Path, overrides: Mapping[str, str]) -> None:
        self.path = path
        self.parameters: Mapping[str, Any] = template.get("Parameters") or {}
        self.overrides = dict(overrides)
        self.resources: Mapping[str, Any] = template.get("Resources") or {}
        self.conditions: Mapping[str, Any] = template.get("Conditions") or {}
        self._condition_cache: dict[str, bool] = {}

    def error(self, where: str, message: str) -> TemplateError:
        return TemplateError(f"{self.path}: {where}: {message}")

    def resource_type(self, logical_id: str) -> str | None:
        res = self.resources.get(logical_id)
        if isinstance(res, Mapping) and isinstance(res.get("Type"), str):
            return str(res["Type"])
        return None

    def ref(self, name: str, where: str) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in _PSEUDO:
            return _PSEUDO[name]
        if name in self.parameters and name in self.overrides:
            return self.overrides[name]
        if name in self.parameters:
            param = self.parameters[name]
            if not isinstance(param, Mapping) or "Default" not in param:
                raise self.error(where, f"parameter {name} has no Default")
            default = param["Default"]
            return default if isinstance(default, str) else json.dumps(default)
        kind = self.resource_type(name)
        if kind is None:
            raise self.error(where, f"!Ref {name}: no such parameter or resource")
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT_ID}/{name}"
        if kind == "AWS::SNS::Topic":
            return f"arn:aws:sns:{REGION}:{ACCOUNT_ID}:{name}"
        return name

    def get_att(self, logical_id: str, attribute: str, where: str) -> str:
        kind = self.resource_type(logical_id)
        if kind is None:
            raise self.error(where, f"!GetAtt {logical_id}.{attribute}: no such resource")
        service = {
            "AWS::SQS::Queue": "sqs",
            "AWS::SNS::Topic": "sns",
            "AWS::DynamoDB::Table": "dynamodb",
            "AWS::Serverless::Function": "lambda",
            "AWS::Events::Rule": "events",
        }.get(kind)
        if attribute == "Arn" and service is not None:
            resource = {
                "dynamodb": f"table/{logical_id}",
                "lambda": f"function:{STACK_NAME}-{logical_id}",
                "events": f"rule/{logical_id}",
            }.get(service, logical_id)
            return f"arn:aws:{service}:{REGION}:{ACCOUNT_ID}:{resource}"
        if attribute == "QueueName" and kind == "AWS::SQS::Queue":
            return logical_id
        if attribute == "QueueUrl" and kind == "AWS::SQS::Queue":
            return str(self.ref(logical_id, where))
        if attribute == "TopicName" and kind == "AWS::SNS::Topic":
            return logical_id
        raise self.error(where, f"!GetAtt {logical_id}.{attribute} is not supported by the replay runner")

    def condition(self, name: str, where: str) -> bool:
        if name not in self._condition_cache:
            if name not in self.conditions:
                raise self.error(where, f"no such condition {name}")
            self._condition_cache[name] = self.truth(self.conditions[name], where)
        return self._condition_cache[name]

    def truth(self, node: Any, where: str) -> bool:
        if isinstance(node, Mapping) and len(node) == 1:
            (key, arg), *_ = node.items()
            if key == "Condition" and isinstance(arg, str):
                return self.condition(arg, where)
            if key == "Fn::Equals" and isinstance(arg, list) and len(arg) == 2:
                return bool(self.value(arg[0], where) == self.value(arg[1], where))
            if key == "Fn::Not" and isinstance(arg, list) and len(arg) == 1:
                return not self.truth(arg[0], where)
            if key == "Fn::And" and isinstance(arg, list):
                return all(self.truth(a, where) for a in arg)
            if key == "Fn::Or" and isinstance(arg, list):
                return any(self.truth(a, where) for a in arg)
        raise self.error(where, "unsupported condition expression")

    def sub(self, arg: Any, where: str) -> str:
        if isinstance(arg, str):
            text, variables = arg, {}
        elif (
            isinstance(arg, list)
            and len(arg) == 2
            and isinstance(arg[0], str)
            and isinstance(arg[1], Mapping)
        ):
            text, variables = arg[0], {k: self.value(v, where) for k, v in arg[1].items()}
        else:
            raise self.error(where, "malformed Fn::Sub")

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                logical_id, attribute = name.split(".", 1)
                return self.get_att(logical_id, attribute, where)
            value = self.ref(name, where)
            if value is NO_VALUE:
                raise self.error(where, "AWS::NoValue inside Fn::Sub")
            return str(value)

        return re.sub(r"\$\{([^}]+)\}", replace, text)

    def value(self, node: Any, where: str) -> Any:
        """Resolve every intrinsic function inside ``node``."""
        if isinstance(node, list):
            return [v for v in (self.value(item, where) for item in node) if v is not NO_VALUE]
        if not isinstance(node, Mapping):
            return node
        if len(node) == 1:
            (key, arg), *_ = node.items()
            if key == "Ref" and isinstance(arg, str):
                return self.ref(arg, where)
            if key == "Fn::GetAtt":
                parts = arg.split(".", 1) if isinstance(arg, str) else arg
                if not (
                    isinstance(parts, list) and len(parts) == 2 and all(isinstance(p, str) for p in parts)
                ):
                    raise self.error(where, "malformed Fn::GetAtt")
                return self.get_att(parts[0], parts[1], where)
            if key == "Fn::Sub":
                return self.sub(arg, where)
            if key == "Fn::Join" and isinstance(arg, list) and len(arg) == 2 and isinstance(arg[0], str):
                items = self.value(arg[1], where)
                if not isinstance(items, list):
                    raise self.error(where, "malformed Fn::Join")
                return arg[0].join(str(i) for i in items)
            if key == "Fn::Select" and isinstance(arg, list) and len(arg) == 2:
                items = self.value(arg[1], where)
                index = int(self.value(arg[0], where))
                if not isinstance(items, list) or not 0 <= index < len(items):
                    raise self.error(where, "malformed Fn::Select")
                return items[index]
            if key == "Fn::If" and isinstance(arg, list) and len(arg) == 3 and isinstance(arg[0], str):
                chosen = arg[1] if self.condition(arg[0], where) else arg[2]
                return self.value(chosen, where)
            if key.startswith("Fn::") or key == "Condition":
                raise self.error(where, f"{key} is not supported by the replay runner")
        out: dict[str, Any] = {}
        for key, item in node.items():
            resolved = self.value(item, where)
            if resolved is not NO_VALUE:
                out[key] = resolved
        return out


def _env_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    raise TypeError(type(value).__name__)


def _getatt_arn_target(node: Any) -> str | None:
    """``{"Fn::GetAtt": ["X", "Arn"]}`` or ``{"Fn::GetAtt": "X.Arn"}`` → ``X``; anything else → None."""
    if not isinstance(node, Mapping) or set(node) != {"Fn::GetAtt"}:
        return None
    arg = node["Fn::GetAtt"]
    parts = arg.split(".", 1) if isinstance(arg, str) else arg
    if isinstance(parts, list) and len(parts) == 2 and parts[1] == "Arn" and isinstance(parts[0], str):
        return parts[0]
    return None


def _int_property(props: Mapping[str, Any], globals_fn: Mapping[str, Any], name: str, default: int) -> int:
    value = props.get(name, globals_fn.get(name, default))
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(name)
    return int(value)


def _function_spec(logical_id: str, resource: Mapping[str, Any], template: _Template) -> FunctionSpec:
    resolver = template.resolver
    where = f"{logical_id}"
    props = resource.get("Properties") or {}
    globals_fn = template.globals_function
    code_uri = props.get("CodeUri", globals_fn.get("CodeUri"))
    if not isinstance(code_uri, str) or not code_uri.strip():
        raise resolver.error(where, "CodeUri must be a local folder")
    code_dir = (template.path.parent / code_uri).resolve()
    short_name = Path(code_uri.rstrip("/")).name
    handler = props.get("Handler", globals_fn.get("Handler"))
    if not isinstance(handler, str) or "." not in handler:
        raise resolver.error(where, "Handler must look like module.function")
    module_path, handler_name = handler.rsplit(".", 1)
    module_file = code_dir / (module_path.replace(".", "/") + ".py")
    try:
        timeout = _int_property(props, globals_fn, "Timeout", _LAMBDA_DEFAULT_TIMEOUT)
        memory = _int_property(props, globals_fn, "MemorySize", _LAMBDA_DEFAULT_MEMORY)
    except ValueError as exc:
        raise resolver.error(where, f"{exc} must be a number") from None

    environment: dict[str, str] = {}
    for source, scope in ((globals_fn, "Globals.Function"), (props, logical_id)):
        env = source.get("Environment") or {}
        variables = env.get("Variables") if isinstance(env, Mapping) else None
        if variables is None:
            continue
        if not isinstance(variables, Mapping):
            raise resolver.error(f"{scope}.Environment", "Variables must be a mapping")
        for name, raw in variables.items():
            var_where = f"{scope}.Environment.Variables.{name}"
            value = resolver.value(raw, var_where)
            if value is NO_VALUE:
                environment.pop(name, None)
                continue
            try:
                environment[name] = _env_string(value)
            except TypeError:
                raise resolver.error(var_where, "does not resolve to a string") from None

    queues: list[str] = []
    events = props.get("Events") or {}
    if isinstance(events, Mapping):
        for event in events.values():
            if isinstance(event, Mapping) and event.get("Type") == "SQS":
                queue = _getatt_arn_target((event.get("Properties") or {}).get("Queue"))
                if queue is not None:
                    queues.append(queue)
    return FunctionSpec(
        logical_id=logical_id,
        short_name=short_name,
        code_dir=code_dir,
        handler=handler,
        module_file=module_file,
        handler_name=handler_name,
        timeout=timeout,
        memory_size=memory,
        environment=environment,
        queues=tuple(queues),
    )


@dataclass
class _Template:
    path: Path
    data: dict[str, Any]
    resolver: _Resolver
    globals_function: Mapping[str, Any]


def _bus_name(resolver: _Resolver, rule_id: str, props: Mapping[str, Any]) -> str:
    raw = props.get("EventBusName", DEFAULT_BUS)
    if isinstance(raw, Mapping) and set(raw) == {"Ref"} and resolver.resource_type(str(raw["Ref"])):
        return str(raw["Ref"])  # a bus defined in the template: named by its logical id
    value = resolver.value(raw, f"{rule_id}.EventBusName")
    if value is NO_VALUE:
        return DEFAULT_BUS
    return str(value).rsplit("event-bus/", 1)[-1] or DEFAULT_BUS


def load_template(path: Path, parameters: Mapping[str, str] | None = None) -> AppTemplate:
    """Read ``template.yaml`` and derive its routes and functions.

    ``parameters`` (name → text, as ``sam deploy --parameter-overrides`` gives them) replace the
    parameters' defaults wherever the template refers to them.

    Rules that are disabled, have no ``EventPattern`` or target anything but an SQS queue of the
    template are skipped; so are queues no function reads.

    Raises:
        TemplateError: the file is unreadable or not YAML, a parameter is not one the template
            declares (``<file>: parameter X: not declared by the template``), or a routed
            function's wiring cannot be resolved (missing ``CodeUri``/``Handler``, an unsupported
            intrinsic function in its environment, an invalid event pattern).
    """
    path = Path(path)
    data = _parse(path)
    overrides = dict(parameters or {})
    declared = data.get("Parameters") or {}
    unknown = sorted(name for name in overrides if name not in declared)
    if unknown:
        noun = "parameter" if len(unknown) == 1 else "parameters"
        raise TemplateError(f"{path}: {noun} {', '.join(unknown)}: not declared by the template")
    resolver = _Resolver(data, path, overrides)
    globals_section = data.get("Globals") or {}
    globals_fn = globals_section.get("Function") if isinstance(globals_section, Mapping) else None
    template = _Template(path, data, resolver, globals_fn if isinstance(globals_fn, Mapping) else {})
    resources: Mapping[str, Any] = data["Resources"]

    by_queue: dict[str, list[str]] = {}
    for logical_id, res in resources.items():
        if isinstance(res, Mapping) and res.get("Type") == "AWS::Serverless::Function":
            events = (res.get("Properties") or {}).get("Events") or {}
            for event in events.values() if isinstance(events, Mapping) else ():
                if isinstance(event, Mapping) and event.get("Type") == "SQS":
                    queue = _getatt_arn_target((event.get("Properties") or {}).get("Queue"))
                    if queue is not None:
                        by_queue.setdefault(queue, []).append(logical_id)

    specs: dict[str, FunctionSpec] = {}
    routes: list[Route] = []
    for rule_id, res in resources.items():
        if not isinstance(res, Mapping) or res.get("Type") != "AWS::Events::Rule":
            continue
        props = res.get("Properties") or {}
        if props.get("State", "ENABLED") != "ENABLED" or "EventPattern" not in props:
            continue
        pattern = resolver.value(props["EventPattern"], f"{rule_id}.EventPattern")
        if isinstance(pattern, str):
            try:
                pattern = json.loads(pattern)
            except ValueError:
                raise resolver.error(rule_id, "EventPattern is not JSON") from None
        if not isinstance(pattern, dict):
            raise resolver.error(rule_id, "EventPattern must be an object")
        bus = _bus_name(resolver, rule_id, props)
        for target in props.get("Targets") or []:
            queue = _getatt_arn_target(target.get("Arn") if isinstance(target, Mapping) else None)
            if queue is None or resolver.resource_type(queue) != "AWS::SQS::Queue":
                continue
            for function_id in by_queue.get(queue, []):
                spec = specs.get(function_id) or _function_spec(function_id, resources[function_id], template)
                other = next((s for s in specs.values() if s.short_name == spec.short_name), None)
                if other is not None and other.logical_id != function_id:
                    raise resolver.error(
                        function_id, f"short name {spec.short_name!r} is also used by {other.logical_id}"
                    )
                specs[function_id] = spec
                size, window = _batching(resources[function_id], queue)
                routes.append(Route(rule_id, bus, pattern, queue, spec, size, window))
    return AppTemplate(
        path,
        tuple(routes),
        {s.short_name: s for s in specs.values()},
        _tables(resources),
        tuple(str(name) for name in declared),
        overrides,
    )


def created_resources(path: Path, kind: str, parameters: Mapping[str, str] | None = None) -> list[str]:
    """The logical ids of the resources of type ``kind`` that the template creates with
    ``parameters`` (a resource whose ``Condition`` is false is left out), in template order;
    their properties are not resolved (any intrinsic function may appear in them).

    Raises:
        TemplateError: the file is unreadable, or a condition cannot be evaluated.
    """
    return [logical_id for logical_id, _ in _created(Path(path), kind, parameters)[1]]


def resolved_resources(
    path: Path, kind: str, parameters: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """The ``Properties`` of every resource of type ``kind`` (``AWS::CloudWatch::Alarm``) that the
    template creates with ``parameters`` (a resource whose ``Condition`` is false is left out), every
    intrinsic function resolved as :func:`load_template` resolves them, by logical id.

    Raises:
        TemplateError: the file is unreadable, or a property cannot be resolved.
    """
    resolver, created = _created(Path(path), kind, parameters)
    found: dict[str, dict[str, Any]] = {}
    for logical_id, res in created:
        properties = resolver.value(res.get("Properties") or {}, f"{logical_id}.Properties")
        found[logical_id] = dict(properties) if isinstance(properties, Mapping) else {}
    return found


def _created(
    path: Path, kind: str, parameters: Mapping[str, str] | None
) -> tuple[_Resolver, list[tuple[str, Mapping[str, Any]]]]:
    """The resolver for ``parameters`` and ``(logical id, resource)`` of each resource of type
    ``kind`` the template creates with them (its ``Condition``, if any, true), in template order."""
    data = _parse(path)
    resolver = _Resolver(data, path, dict(parameters or {}))
    created = []
    for logical_id, res in data["Resources"].items():
        if not isinstance(res, Mapping) or res.get("Type") != kind:
            continue
        condition = res.get("Condition")
        if isinstance(condition, str) and not resolver.condition(condition, logical_id):
            continue
        created.append((logical_id, res))
    return resolver, created


def _batching(function: Mapping[str, Any], queue: str) -> tuple[int, int]:
    """``(BatchSize, MaximumBatchingWindowInSeconds)`` of the function's SQS event on ``queue``
    (Lambda's defaults, 10 and 0, when not set or not a plain number)."""
    events = (function.get("Properties") or {}).get("Events") or {}
    for event in events.values() if isinstance(events, Mapping) else ():
        props = (event.get("Properties") or {}) if isinstance(event, Mapping) else {}
        if event.get("Type") == "SQS" and _getatt_arn_target(props.get("Queue")) == queue:
            size, window = props.get("BatchSize", 10), props.get("MaximumBatchingWindowInSeconds", 0)
            return (
                size if isinstance(size, int) and not isinstance(size, bool) else 10,
                window if isinstance(window, int) and not isinstance(window, bool) else 0,
            )
    return 10, 0


def _tables(resources: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The template's DynamoDB tables, as the replay creates them (see :class:`AppTemplate`)."""
    tables: dict[str, dict[str, Any]] = {}
    for logical_id, res in resources.items():
        if not isinstance(res, Mapping) or res.get("Type") != "AWS::DynamoDB::Table":
            continue
        props = res.get("Properties") or {}
        table: dict[str, Any] = {
            key: props[key]
            for key in ("AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes")
            if key in props
        }
        ttl = props.get("TimeToLiveSpecification") or {}
        if isinstance(ttl, Mapping) and ttl.get("Enabled") and ttl.get("AttributeName"):
            table["TimeToLiveAttribute"] = ttl["AttributeName"]
        tables[logical_id] = table
    return tables
