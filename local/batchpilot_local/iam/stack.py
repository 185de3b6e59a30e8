"""template.yaml as CloudFormation would deploy it, for IAM: the roles, the resource-based policies
and the wiring that makes AWS services act with them.

:func:`translated` runs the SAM transform (aws-sam-translator, the library ``sam deploy`` relies
on) once; :func:`expand` then resolves every intrinsic function the way CloudFormation would for one
set of parameter values (each at its ``Default`` unless given) and returns a :class:`Stack`:

- each function's execution role (its inline policies), log group, event source queues and
  asynchronous-invocation destination, by the function's short name (``functions/<name>/``);
- the resource-based policies: SQS queue policies, SNS topic policies, event bus policies and KMS
  key policies, by the ARN of the resource they guard;
- the EventBridge rules (their target queues and dead-letter queues), the CloudWatch alarms (their
  actions) and the EventBridge Scheduler schedules (their target, role and dead-letter queue), so
  :mod:`batchpilot_local.iam.requests` can derive the requests AWS services make on the stack's
  behalf.

Names follow CloudFormation's return values ("Return values" of each resource type): ``Ref`` of a
queue is its URL, of a topic its ARN, of a table, bus, log group or role its name; ``GetAtt ...Arn``
the ARN (a log group's ends in ``:*``). A resource's physical name is its name property when the
template sets one (``TopicName``, ``Name``, ``LogGroupName``, ...), else its logical id (what
CloudFormation generates, ``<stack>-<logical id>-<suffix>``, is not knowable before a deploy; the
embedded AWS uses the logical id too). Account, region and stack name are the replay's
(:mod:`batchpilot_local.template`).

The resolver is this module's own rather than :mod:`batchpilot_local.template`'s: that one names
resources as the embedded AWS does (a bus after its logical id) and supports what the replay reads;
IAM needs CloudFormation's names and ``Fn::Split``.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batchpilot_local.iam.policy import Policy, PolicyKind
from batchpilot_local.template import ACCOUNT_ID, REGION, STACK_NAME, parse_file

__all__ = [
    "Alarm",
    "FunctionInfo",
    "Role",
    "Rule",
    "Schedule",
    "Stack",
    "StackError",
    "expand",
    "queue_arn",
    "translated",
]

PARTITION = "aws"


class StackError(ValueError):
    """The template cannot be expanded (the message names the resource and the construct)."""


class _NoValue:
    pass


NO_VALUE = _NoValue()

_NAME_PROPERTY = {
    "AWS::SQS::Queue": "QueueName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::Events::EventBus": "Name",
    "AWS::Events::Rule": "Name",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::IAM::Role": "RoleName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::Scheduler::Schedule": "Name",
    "AWS::Lambda::LayerVersion": "LayerName",
    "AWS::KMS::Alias": "AliasName",
}
"""The property that names a resource, by type (CloudFormation resource reference)."""


@dataclass(frozen=True)
class Role:
    """An ``AWS::IAM::Role``: its ARN, inline policies (identity-based) and trust policy."""

    logical_id: str
    arn: str
    policies: tuple[Policy, ...]
    trust: Policy


@dataclass(frozen=True)
class FunctionInfo:
    """One Lambda function as deployed.

    Attributes:
        short_name: the last folder of its code (``functions/recovery/`` → ``recovery``).
        logical_id: its logical id (``RecoveryFunction``).
        arn: its ARN.
        role: its execution role's logical id.
        environment: its environment variables, resolved.
        log_group_arn: the ARN of the log group it writes to (``LoggingConfig.LogGroup``, else
            ``/aws/lambda/<name>``), ending in ``:*``.
        event_source_queues: ARNs of the SQS queues its event source mappings poll.
        on_failure: ARNs of its asynchronous invocations' ``OnFailure`` destinations.
    """

    short_name: str
    logical_id: str
    arn: str
    role: str
    environment: dict[str, str]
    log_group_arn: str
    event_source_queues: tuple[str, ...]
    on_failure: tuple[str, ...]


@dataclass(frozen=True)
class Rule:
    """An ``AWS::Events::Rule``: its ARN, the ARNs of its targets and of their dead-letter queues."""

    logical_id: str
    arn: str
    targets: tuple[str, ...]
    dead_letter_queues: tuple[str, ...]


@dataclass(frozen=True)
class Alarm:
    """An ``AWS::CloudWatch::Alarm``: its ARN and the ARNs its ALARM / OK / INSUFFICIENT_DATA actions name."""

    logical_id: str
    arn: str
    actions: tuple[str, ...]


@dataclass(frozen=True)
class Schedule:
    """An ``AWS::Scheduler::Schedule``: its ARN, target, the role it invokes with, dead-letter queue."""

    logical_id: str
    arn: str
    target: str
    role_arn: str
    dead_letter_queue: str | None
    enabled: bool


@dataclass(frozen=True)
class Stack:
    """The expanded template (see the module docstring).

    Attributes:
        parameters: every parameter's value in this expansion (name → text).
        functions: by short name.
        roles: every ``AWS::IAM::Role``, by logical id.
        resource_policies: resource ARN → the policies attached to it (queue, topic, bus and key
            policies).
        topic_keys: SNS topic ARN → the ARN of its KMS key (``KmsMasterKeyId``), for encrypted topics.
        rules, alarms, schedules: as their classes say.
        physical_names: logical id → physical name, for the resources whose name the template sets.
        tables: DynamoDB table name → its partition key attribute (``dynamodb:LeadingKeys``).
        own_resources: the ``Ref`` value (a name, ARN or URL) of each table, bus, topic and queue
            of the stack → ``(service, resource type, ARN)``.
    """

    parameters: dict[str, str]
    functions: dict[str, FunctionInfo]
    roles: dict[str, Role]
    resource_policies: dict[str, tuple[Policy, ...]]
    topic_keys: dict[str, str]
    rules: tuple[Rule, ...]
    alarms: tuple[Alarm, ...]
    schedules: tuple[Schedule, ...]
    physical_names: dict[str, str] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)
    own_resources: dict[str, tuple[str, str, str]] = field(default_factory=dict)

    def role_of(self, function: str) -> Role:
        """The execution role of the function ``function`` (short name).

        Raises:
            KeyError: no such function.
        """
        return self.roles[self.functions[function].role]

    def role_by_arn(self, arn: str) -> Role | None:
        """The template's role with ARN ``arn``, or None."""
        return next((r for r in self.roles.values() if r.arn == arn), None)


# ------------------------------------------------------------------------------------ resolver
class _Resolver:
    def __init__(
        self,
        template: Mapping[str, Any],
        parameters: Mapping[str, str],
        pseudo: Mapping[str, str] | None = None,
    ) -> None:
        self.account = (pseudo or {}).get("AWS::AccountId", ACCOUNT_ID)
        self.region = (pseudo or {}).get("AWS::Region", REGION)
        self.stack_name = (pseudo or {}).get("AWS::StackName", STACK_NAME)
        self.resources: Mapping[str, Any] = template.get("Resources") or {}
        self.conditions: Mapping[str, Any] = template.get("Conditions") or {}
        declared: Mapping[str, Any] = template.get("Parameters") or {}
        unknown = sorted(set(parameters) - set(declared))
        if unknown:
            raise StackError(f"parameters not declared by the template: {', '.join(unknown)}")
        self.parameter_types = {
            name: str((spec or {}).get("Type", "String")) for name, spec in declared.items()
        }
        self.parameters: dict[str, str] = {}
        for name, spec in declared.items():
            if name in parameters:
                self.parameters[name] = str(parameters[name])
            elif isinstance(spec, Mapping) and "Default" in spec:
                default = spec["Default"]
                self.parameters[name] = default if isinstance(default, str) else json.dumps(default)
            else:
                raise StackError(f"parameter {name} has no Default and no value was given")
        self._conditions: dict[str, bool] = {}
        self._names: dict[str, str] = {}

    def kind(self, logical_id: str) -> str:
        resource = self.resources.get(logical_id)
        if not isinstance(resource, Mapping):
            raise StackError(f"no resource {logical_id}")
        return str(resource.get("Type"))

    def props(self, logical_id: str) -> Mapping[str, Any]:
        return self.resources[logical_id].get("Properties") or {}

    def name(self, logical_id: str) -> str:
        if logical_id not in self._names:
            prop = _NAME_PROPERTY.get(self.kind(logical_id))
            raw = self.props(logical_id).get(prop) if prop else None
            self._names[logical_id] = str(self.value(raw, logical_id)) if raw is not None else logical_id
        return self._names[logical_id]

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            if name not in self.conditions:
                raise StackError(f"no condition {name}")
            self._conditions[name] = self.truth(self.conditions[name], f"condition {name}")
        return self._conditions[name]

    def truth(self, node: Any, where: str) -> bool:
        if isinstance(node, Mapping) and len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Condition":
                return self.condition(str(arg))
            if key == "Fn::Equals":
                left, right = (self.value(a, where) for a in arg)
                return bool(str(left) == str(right))
            if key == "Fn::Not":
                return not self.truth(arg[0], where)
            if key == "Fn::And":
                return all(self.truth(a, where) for a in arg)
            if key == "Fn::Or":
                return any(self.truth(a, where) for a in arg)
        raise StackError(f"{where}: unsupported condition {node!r}")

    def ref(self, name: str, where: str) -> Any:
        pseudo = {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::StackName": self.stack_name,
            "AWS::Partition": PARTITION,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackId": f"arn:{PARTITION}:cloudformation:{self.region}:{self.account}:stack/"
            f"{self.stack_name}/expanded",
        }
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            value = self.parameters[name]
            if self.parameter_types.get(name) == "CommaDelimitedList":
                return value.split(",")
            return value
        kind = self.kind(name)
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{self.region}.amazonaws.com/{self.account}/{self.name(name)}"
        if kind == "AWS::SNS::Topic":
            return f"arn:{PARTITION}:sns:{self.region}:{self.account}:{self.name(name)}"
        if kind == "AWS::Lambda::LayerVersion":
            return f"arn:{PARTITION}:lambda:{self.region}:{self.account}:layer:{self.name(name)}:1"
        return self.name(name)

    def get_att(self, logical_id: str, attribute: str, where: str) -> str:
        kind = self.kind(logical_id)
        name = self.name(logical_id)
        head = f"arn:{PARTITION}"
        arns = {
            "AWS::SQS::Queue": f"{head}:sqs:{self.region}:{self.account}:{name}",
            "AWS::SNS::Topic": f"{head}:sns:{self.region}:{self.account}:{name}",
            "AWS::DynamoDB::Table": f"{head}:dynamodb:{self.region}:{self.account}:table/{name}",
            "AWS::Events::EventBus": f"{head}:events:{self.region}:{self.account}:event-bus/{name}",
            "AWS::Logs::LogGroup": f"{head}:logs:{self.region}:{self.account}:log-group:{name}:*",
            "AWS::IAM::Role": f"{head}:iam::{self.account}:role/{name}",
            "AWS::KMS::Key": f"{head}:kms:{self.region}:{self.account}:key/{name}",
            "AWS::Lambda::Function": f"{head}:lambda:{self.region}:{self.account}:function:{name}",
            "AWS::CloudWatch::Alarm": f"{head}:cloudwatch:{self.region}:{self.account}:alarm:{name}",
            "AWS::Scheduler::Schedule": (
                f"{head}:scheduler:{self.region}:{self.account}:schedule/default/{name}"
            ),
        }
        if kind == "AWS::Events::Rule":
            bus = self.value(self.props(logical_id).get("EventBusName", "default"), where)
            bus = str(bus).rsplit("event-bus/", 1)[-1]
            arns[kind] = (
                f"{head}:events:{self.region}:{self.account}:rule/"
                + (f"{bus}/" if bus != "default" else "")
                + name
            )
        if attribute == "Arn" and kind in arns:
            return arns[kind]
        others = {
            ("AWS::SQS::Queue", "QueueName"): name,
            ("AWS::SQS::Queue", "QueueUrl"): f"https://sqs.{self.region}.amazonaws.com/{self.account}/{name}",
            ("AWS::SNS::Topic", "TopicName"): name,
            ("AWS::SNS::Topic", "TopicArn"): arns["AWS::SNS::Topic"],
            ("AWS::Events::EventBus", "Name"): name,
            ("AWS::KMS::Key", "KeyId"): name,
            ("AWS::IAM::Role", "RoleId"): f"AROA{logical_id.upper()[:17]}",
        }
        if (kind, attribute) in others:
            return others[(kind, attribute)]
        raise StackError(f"{where}: !GetAtt {logical_id}.{attribute} ({kind}) is not supported")

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
            raise StackError(f"{where}: malformed Fn::Sub")

        def replace(match: re.Match[str]) -> str:
            token = match.group(1)
            if token.startswith("!"):
                return "${" + token[1:] + "}"
            if token in variables:
                return str(variables[token])
            if "." in token and not token.startswith("AWS::"):
                logical_id, attribute = token.split(".", 1)
                return self.get_att(logical_id, attribute, where)
            value = self.ref(token, where)
            if value is NO_VALUE or isinstance(value, list):
                raise StackError(f"{where}: ${{{token}}} inside Fn::Sub is not a string")
            return str(value)

        return re.sub(r"\$\{([^}]+)\}", replace, text)

    def value(self, node: Any, where: str) -> Any:
        if isinstance(node, list):
            return [v for v in (self.value(item, where) for item in node) if v is not NO_VALUE]
        if not isinstance(node, Mapping):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Ref":
                return self.ref(str(arg), where)
            if key == "Fn::GetAtt":
                parts = arg.split(".", 1) if isinstance(arg, str) else arg
                return self.get_att(str(parts[0]), str(parts[1]), where)
            if key == "Fn::Sub":
                return self.sub(arg, where)
            if key == "Fn::If":
                return self.value(arg[1] if self.condition(str(arg[0])) else arg[2], where)
            if key == "Fn::Join":
                items = self.value(arg[1], where)
                return str(arg[0]).join(str(i) for i in items)
            if key == "Fn::Split":
                return str(self.value(arg[1], where)).split(str(arg[0]))
            if key == "Fn::Select":
                items = self.value(arg[1], where)
                return items[int(self.value(arg[0], where))]
            if key in ("Fn::Equals", "Fn::Not", "Fn::And", "Fn::Or", "Condition"):
                return self.truth(node, where)
            if key.startswith("Fn::"):
                raise StackError(f"{where}: {key} is not supported")
        out = {}
        for key, item in node.items():
            resolved = self.value(item, where)
            if resolved is not NO_VALUE:
                out[key] = resolved
        return out

    def resource(self, logical_id: str) -> dict[str, Any]:
        """The resource's properties, resolved (the resource's own Condition is checked by the caller)."""
        resolved = self.value(self.props(logical_id), logical_id)
        assert isinstance(resolved, dict)
        return resolved

    def exists(self, logical_id: str) -> bool:
        condition = self.resources[logical_id].get("Condition")
        return condition is None or self.condition(str(condition))


# ------------------------------------------------------------------------------------ reading
@functools.cache
def _translated_text(path: str, mtime_ns: int) -> str:
    from batchpilot_local.testing.templates import translate

    return json.dumps(translate(parse_file(Path(path))))


def translated(path: Path) -> dict[str, Any]:
    """The SAM-translated template at ``path`` (plain CloudFormation, intrinsics unresolved); the
    transform runs once per file version, the result is a fresh copy each call.

    Raises:
        batchpilot_local.template.TemplateError: the file cannot be read.
        samtranslator.model.exceptions.InvalidDocumentException: the transform failed.
    """
    loaded: dict[str, Any] = json.loads(_translated_text(str(path.resolve()), path.stat().st_mtime_ns))
    return loaded


def _of_type(resolver: _Resolver, kind: str) -> list[str]:
    return [
        logical_id
        for logical_id, resource in resolver.resources.items()
        if isinstance(resource, Mapping) and resource.get("Type") == kind and resolver.exists(logical_id)
    ]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def queue_arn(url_or_arn: str) -> str:
    """An SQS queue URL (``https://sqs.<region>.amazonaws.com/<account>/<name>``) as its ARN."""
    if url_or_arn.startswith("arn:"):
        return url_or_arn
    host, account, name = url_or_arn.split("://", 1)[-1].rstrip("/").split("/")[-3:]
    region = host.split(".")[1] if host.count(".") >= 2 else REGION
    return f"arn:{PARTITION}:sqs:{region}:{account}:{name}"


def _short_name(code: Any, logical_id: str) -> str:
    key = code.get("S3Key") if isinstance(code, Mapping) else None
    if not isinstance(key, str) or not key.strip("/"):
        raise StackError(f"{logical_id}: Code.S3Key does not name the function's folder")
    return key.rstrip("/").rsplit("/", 1)[-1]


def _roles(resolver: _Resolver) -> dict[str, Role]:
    roles = {}
    for logical_id in _of_type(resolver, "AWS::IAM::Role"):
        props = resolver.resource(logical_id)
        if props.get("ManagedPolicyArns"):
            raise StackError(f"{logical_id}: ManagedPolicyArns cannot be evaluated (inline policies only)")
        policies = tuple(
            Policy(f"{logical_id}/{p['PolicyName']}", PolicyKind.IDENTITY, p["PolicyDocument"])
            for p in props.get("Policies", [])
        )
        trust = Policy(f"{logical_id}/trust", PolicyKind.RESOURCE, props["AssumeRolePolicyDocument"])
        roles[logical_id] = Role(logical_id, resolver.get_att(logical_id, "Arn", logical_id), policies, trust)
    return roles


def _resource_policies(resolver: _Resolver) -> tuple[dict[str, tuple[Policy, ...]], dict[str, str]]:
    policies: dict[str, list[Policy]] = {}

    def add(arn: str, policy: Policy) -> None:
        policies.setdefault(arn, []).append(policy)

    for logical_id in _of_type(resolver, "AWS::SQS::QueuePolicy"):
        props = resolver.resource(logical_id)
        for queue in _list(props["Queues"]):
            add(queue_arn(str(queue)), Policy(logical_id, PolicyKind.RESOURCE, props["PolicyDocument"]))
    for logical_id in _of_type(resolver, "AWS::SNS::TopicPolicy"):
        props = resolver.resource(logical_id)
        for topic in _list(props["Topics"]):
            add(str(topic), Policy(logical_id, PolicyKind.RESOURCE, props["PolicyDocument"]))
    for logical_id in _of_type(resolver, "AWS::Events::EventBus"):
        props = resolver.resource(logical_id)
        if props.get("Policy"):
            add(
                resolver.get_att(logical_id, "Arn", logical_id),
                Policy(logical_id, PolicyKind.RESOURCE, props["Policy"]),
            )
    for logical_id in _of_type(resolver, "AWS::Events::EventBusPolicy"):
        raise StackError(f"{logical_id}: AWS::Events::EventBusPolicy is not supported (use the bus's Policy)")
    for logical_id in _of_type(resolver, "AWS::KMS::Key"):
        props = resolver.resource(logical_id)
        add(
            resolver.get_att(logical_id, "Arn", logical_id),
            Policy(logical_id, PolicyKind.KEY, props["KeyPolicy"]),
        )
    keys: dict[str, str] = {}
    aliases = {
        resolver.name(a): resolver.resource(a)["TargetKeyId"] for a in _of_type(resolver, "AWS::KMS::Alias")
    }
    for logical_id in _of_type(resolver, "AWS::SNS::Topic"):
        key = resolver.resource(logical_id).get("KmsMasterKeyId")
        if not key:
            continue
        key = str(aliases.get(str(key), key))
        if not key.startswith("arn:"):
            key = f"arn:{PARTITION}:kms:{resolver.region}:{resolver.account}:key/{key}"
        keys[resolver.ref(logical_id, logical_id)] = key
    return {arn: tuple(found) for arn, found in policies.items()}, keys


def _functions(resolver: _Resolver) -> dict[str, FunctionInfo]:
    mappings: dict[str, list[str]] = {}
    for logical_id in _of_type(resolver, "AWS::Lambda::EventSourceMapping"):
        props = resolver.resource(logical_id)
        mappings.setdefault(str(props["FunctionName"]), []).append(str(props["EventSourceArn"]))
    destinations: dict[str, list[str]] = {}
    for logical_id in _of_type(resolver, "AWS::Lambda::EventInvokeConfig"):
        props = resolver.resource(logical_id)
        failure = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        if failure:
            destinations.setdefault(str(props["FunctionName"]), []).append(str(failure))
    functions = {}
    for logical_id in _of_type(resolver, "AWS::Lambda::Function"):
        props = resolver.resource(logical_id)
        name = resolver.name(logical_id)
        role = resolver.props(logical_id).get("Role")
        role_id = role.get("Fn::GetAtt", [None])[0] if isinstance(role, Mapping) else None
        if not isinstance(role_id, str):
            raise StackError(f"{logical_id}: Role must be !GetAtt <a role of the template>.Arn")
        log_group = ((props.get("LoggingConfig") or {}).get("LogGroup")) or f"/aws/lambda/{name}"
        short = _short_name(props.get("Code"), logical_id)
        functions[short] = FunctionInfo(
            short_name=short,
            logical_id=logical_id,
            arn=resolver.get_att(logical_id, "Arn", logical_id),
            role=role_id,
            environment={
                k: str(v) for k, v in ((props.get("Environment") or {}).get("Variables") or {}).items()
            },
            log_group_arn=f"arn:{PARTITION}:logs:{resolver.region}:{resolver.account}:log-group:{log_group}:*",
            event_source_queues=tuple(mappings.get(name, [])),
            on_failure=tuple(destinations.get(name, [])),
        )
    return functions


def _rules(resolver: _Resolver) -> tuple[Rule, ...]:
    rules = []
    for logical_id in _of_type(resolver, "AWS::Events::Rule"):
        props = resolver.resource(logical_id)
        targets = props.get("Targets") or []
        rules.append(
            Rule(
                logical_id,
                resolver.get_att(logical_id, "Arn", logical_id),
                tuple(str(t["Arn"]) for t in targets),
                tuple(str(t["DeadLetterConfig"]["Arn"]) for t in targets if t.get("DeadLetterConfig")),
            )
        )
    return tuple(rules)


def _alarms(resolver: _Resolver) -> tuple[Alarm, ...]:
    alarms = []
    for logical_id in _of_type(resolver, "AWS::CloudWatch::Alarm"):
        props = resolver.resource(logical_id)
        actions = [
            str(a)
            for key in ("AlarmActions", "OKActions", "InsufficientDataActions")
            for a in _list(props.get(key) or [])
        ]
        alarms.append(
            Alarm(logical_id, resolver.get_att(logical_id, "Arn", logical_id), tuple(dict.fromkeys(actions)))
        )
    return tuple(alarms)


def _schedules(resolver: _Resolver) -> tuple[Schedule, ...]:
    schedules = []
    for logical_id in _of_type(resolver, "AWS::Scheduler::Schedule"):
        props = resolver.resource(logical_id)
        target = props["Target"]
        schedules.append(
            Schedule(
                logical_id,
                resolver.get_att(logical_id, "Arn", logical_id),
                str(target["Arn"]),
                str(target["RoleArn"]),
                str(target["DeadLetterConfig"]["Arn"]) if target.get("DeadLetterConfig") else None,
                props.get("State", "ENABLED") == "ENABLED",
            )
        )
    return tuple(schedules)


def expand(
    template: Mapping[str, Any],
    parameters: Mapping[str, str] | None = None,
    *,
    pseudo: Mapping[str, str] | None = None,
) -> Stack:
    """The translated ``template`` (see :func:`translated`) resolved with ``parameters`` (name → text
    as ``sam deploy --parameter-overrides`` gives them; the others at their ``Default``);
    ``pseudo`` replaces the replay's ``AWS::AccountId``, ``AWS::Region`` and ``AWS::StackName``
    (placeholders, for documentation).

    Raises:
        StackError: a parameter is not declared or has no value; an intrinsic or a construct is not
            supported (the message names the resource).
    """
    resolver = _Resolver(copy.deepcopy(dict(template)), parameters or {}, pseudo)
    policies, keys = _resource_policies(resolver)
    named = {
        logical_id: resolver.name(logical_id)
        for logical_id, resource in resolver.resources.items()
        if isinstance(resource, Mapping)
        and _NAME_PROPERTY.get(str(resource.get("Type"))) in (resource.get("Properties") or {})
    }
    tables = {}
    for logical_id in _of_type(resolver, "AWS::DynamoDB::Table"):
        schema = resolver.resource(logical_id).get("KeySchema") or []
        tables[resolver.name(logical_id)] = next(
            str(k["AttributeName"]) for k in schema if k["KeyType"] == "HASH"
        )
    own: dict[str, tuple[str, str, str]] = {}
    for kind, service, resource_type in (
        ("AWS::DynamoDB::Table", "dynamodb", "table"),
        ("AWS::Events::EventBus", "events", "event-bus"),
        ("AWS::SNS::Topic", "sns", "topic"),
        ("AWS::SQS::Queue", "sqs", "queue"),
    ):
        for logical_id in _of_type(resolver, kind):
            own[str(resolver.ref(logical_id, logical_id))] = (
                service,
                resource_type,
                resolver.get_att(logical_id, "Arn", logical_id),
            )
    return Stack(
        parameters=dict(resolver.parameters),
        functions=_functions(resolver),
        roles=_roles(resolver),
        resource_policies=policies,
        topic_keys=keys,
        rules=_rules(resolver),
        alarms=_alarms(resolver),
        schedules=_schedules(resolver),
        physical_names=named,
        tables=tables,
        own_resources=own,
    )


def parameter_sets_key(parameters: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """A hashable key for a parameter set (sorted items)."""
    return tuple(sorted((str(k), str(v)) for k, v in parameters.items()))


def split_list(value: str) -> Sequence[str]:
    """A comma-separated parameter value as its items (empty: none)."""
    return [item for item in value.split(",") if item]
