"""From an API call to what IAM authorises: each action on each resource, with its request context.

One recorded call (:class:`~batchpilot_local.iam.calls.ApiCall`) becomes one :class:`AuthRequest`
per IAM action and resource AWS checks:

- the action of the operation (:func:`batchpilot_local.iam.reference.actions_for_operation`; a
  transaction is split into its items, each authorised as its own action);
- one request per resource type of the action that the reference marks required (``*``) or that
  the call names (a quota share, a job definition, an index), the ARN built from the call's
  parameters in the reference's ARN format; ``*`` for an action with no resource type;
- the condition keys the request sets: ``aws:RequestTag/<key>`` and ``aws:TagKeys`` for tags,
  ``s3:prefix``, ``dynamodb:LeadingKeys`` (every partition key value the call touches),
  ``batch:ShareIdentifier``, ``iam:PassedToService``, ``events:source`` / ``events:detail-type``,
  ``sagemaker:TaggingAction``, ``kms:ViaService``, ``secretsmanager:SecretId``;
- the dependent authorisations: ``iam:PassRole`` on the role a request hands to SageMaker (a
  CreateTrainingJob's ``RoleArn``, a service job payload's), the service's tagging action on the
  new resource when a create request carries tags (AWS Batch user guide, "Tag your resources":
  tags on create are authorised as ``batch:TagResource``; SageMaker lists ``sagemaker:AddTags`` as
  CreateTrainingJob's dependent action, with ``sagemaker:TaggingAction``), and
  ``kms:GenerateDataKey`` / ``kms:Decrypt`` on the key of an encrypted topic a call publishes to
  (Amazon SNS developer guide, "Encryption at rest": the publisher needs both, through SNS).

:func:`platform_requests` adds what AWS services do with the stack's roles or to its resources
on the functions' behalf, from the template alone: Lambda polling each event source queue
(``sqs:ReceiveMessage``, ``sqs:DeleteMessage``, ``sqs:GetQueueAttributes``: Lambda developer
guide, "Using Lambda with Amazon SQS"), writing the function's logs (``logs:CreateLogStream``,
``logs:PutLogEvents``) and sending failed asynchronous invocations to their ``OnFailure`` queue
(``sqs:SendMessage``); EventBridge delivering each rule's events and dead letters to its queues
(``events.amazonaws.com``, with ``aws:SourceArn`` the rule); CloudWatch publishing alarm
notifications to the stack's topic and using its key (``cloudwatch.amazonaws.com``); EventBridge
Scheduler invoking its target and dead-lettering with the schedule's role.

:class:`Names` maps the names a recording used to the stack's: the embedded AWS names a topic or
a bus after its logical id where CloudFormation uses the template's ``TopicName`` / ``Name``; a
fault test names its own table, bus, topic and queue, which stand for the function's own (the ones
its environment names); a secret's random 6-character suffix differs between accounts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from batchpilot_local.iam import reference
from batchpilot_local.iam.calls import ApiCall
from batchpilot_local.iam.policy import Principal
from batchpilot_local.iam.stack import PARTITION, Stack, queue_arn
from batchpilot_local.template import ACCOUNT_ID, REGION

__all__ = ["AuthRequest", "Names", "UnmodelledCall", "auth_requests", "platform_requests"]


class UnmodelledCall(ValueError):
    """A call this module cannot turn into requests (the message says what to add)."""


@dataclass(frozen=True)
class AuthRequest:
    """One authorisation AWS makes.

    Attributes:
        function: the function whose role makes it, or ``None`` for an AWS service's own request.
        action: ``service:Action``.
        resource: the resource's ARN, or ``*`` when the action has no resource type.
        resource_type: the reference's resource type, None with ``*``.
        principal: who makes it (the function's role, a service principal, a schedule's role).
        context: condition key → values.
        because: why AWS checks it (``SubmitServiceJob names job queue ...``).
        api: the API call it comes from (``batch:SubmitServiceJob``), or the service behaviour.
        origin: where the call was recorded.
    """

    function: str | None
    action: str
    resource: str
    resource_type: str | None
    principal: Principal
    context: Mapping[str, tuple[str, ...]]
    because: str
    api: str
    origin: str | None = None

    def key(self) -> tuple[Any, ...]:
        """What makes two requests the same authorisation (for de-duplication)."""
        return (
            self.function,
            self.action,
            self.resource,
            self.principal,
            tuple(sorted((k, tuple(v)) for k, v in self.context.items())),
        )


# ------------------------------------------------------------------------------------ naming
_SECRET_SUFFIX = re.compile(r"-[A-Za-z0-9]{6}$")


@dataclass
class Names:
    """How a recording's names map to the stack's (see the module docstring).

    Attributes:
        stack: the expanded template.
        own_resources: True for a fault-suite recording: any table, event bus, topic or SQS queue a
            function names is taken for the function's own one (the one its environment names).
        secrets: secret ARNs the stack's parameters name; a recorded secret with the same name and
            another random suffix is taken for it.
    """

    stack: Stack
    own_resources: bool = False
    secrets: Sequence[str] = field(default_factory=tuple)

    def arn(self, service: str, resource_type: str, arn: str, function: str | None) -> str:
        """``arn`` as the deployed stack would name it."""
        if self.own_resources and function is not None:
            own = self._function_resource(function, service, resource_type)
            if own is not None:
                return own
        for logical_id, physical in self.stack.physical_names.items():
            for sep in ("/", ":"):
                if arn.endswith(sep + logical_id):
                    return arn[: -len(logical_id)] + physical
        if service == "secretsmanager":
            base = _SECRET_SUFFIX.sub("", arn)
            for configured in self.secrets:
                if _SECRET_SUFFIX.sub("", configured) == base:
                    return configured
        return arn

    def _function_resource(self, function: str, service: str, resource_type: str) -> str | None:
        info = self.stack.functions.get(function)
        if info is None:
            return None
        for value in info.environment.values():
            found = self.stack.own_resources.get(value)
            if found is not None and found[:2] == (service, resource_type):
                return found[2]
        return None


# ------------------------------------------------------------------------------------ ARNs
def _fill(service: str, resource_type: str, **fields: str) -> str:
    arn = reference.arn_format(service, resource_type)
    values = {"Partition": PARTITION, "Region": REGION, "Account": ACCOUNT_ID, **fields}

    def put(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise UnmodelledCall(f"no value for ${{{name}}} of {service} {resource_type} ({arn})")
        return values[name]

    return re.sub(r"\$\{([A-Za-z0-9]+)\}", put, arn)


def _named(value: Any, service: str, resource_type: str, placeholder: str) -> str:
    text = str(value)
    return text if text.startswith("arn:") else _fill(service, resource_type, **{placeholder: text})


NEW = "new-resource"
"""Stands for the id of a resource a failed create call did not get to make."""


def _created(call: ApiCall, service: str, resource_type: str, placeholder: str) -> list[str]:
    for arn in call.response_arns.values():
        if reference.resource_type_of(f"{service}:{call.operation}", arn) == resource_type:
            return [arn]
    return [_fill(service, resource_type, **{placeholder: NEW})]


def _job_definition(call: ApiCall, revision: bool) -> list[str]:
    value = call.params.get("jobDefinition")
    if value is None:
        return []
    text = str(value)
    name_part = text.rsplit("job-definition/", 1)[-1]
    has_revision = ":" in name_part
    if has_revision != revision:
        return []
    if text.startswith("arn:"):
        return [text]
    if revision:
        name, rev = name_part.rsplit(":", 1)
        return [_fill("batch", "job-definition-revision", JobDefinitionName=name, Revision=rev)]
    return [_fill("batch", "job-definition", JobDefinitionName=name_part)]


def _quota_share(call: ApiCall) -> list[str]:
    share = call.params.get("quotaShareName")
    if not share:
        return []
    queue = str(call.params["jobQueue"]).rsplit("job-queue/", 1)[-1]
    return [_fill("batch", "quota-share", JobQueueName=queue, QuotaShareName=str(share))]


def _tables(call: ApiCall) -> list[str]:
    names: list[str] = []
    if "TableName" in call.params:
        names.append(str(call.params["TableName"]))
    names += [str(t) for t in (call.params.get("RequestItems") or {})]
    return [_named(n, "dynamodb", "table", "TableName") for n in names]


def _event_buses(call: ApiCall) -> list[str]:
    buses = {str(e.get("EventBusName") or "default") for e in call.params.get("Entries") or []}
    return [_named(b, "events", "event-bus", "EventBusName") for b in sorted(buses)]


def _training_plan(call: ApiCall) -> list[str]:
    plan = (call.params.get("ResourceConfig") or {}).get("TrainingPlanArn")
    return [str(plan)] if plan else []


def _by_arn_parameter(call: ApiCall, action: str, resource_type: str) -> list[str]:
    for key in ("resourceArn", "ResourceArn"):
        arn = call.params.get(key)
        if isinstance(arn, str) and reference.resource_type_of(action, arn) == resource_type:
            return [arn]
    return []


def _param(key: str, service: str, resource_type: str, placeholder: str) -> Callable[[ApiCall], list[str]]:
    def locate(call: ApiCall) -> list[str]:
        value = call.params.get(key)
        return [_named(value, service, resource_type, placeholder)] if value else []

    return locate


_LOCATORS: dict[tuple[str, str], Callable[[ApiCall], list[str]]] = {
    ("batch", "job-queue"): _param("jobQueue", "batch", "job-queue", "JobQueueName"),
    ("batch", "service-environment"): _param(
        "serviceEnvironment", "batch", "service-environment", "ServiceEnvironmentName"
    ),
    ("batch", "job"): lambda c: _created(c, "batch", "job", "JobId") if c.operation == "SubmitJob" else [],
    ("batch", "service-job"): lambda c: (
        _created(c, "batch", "service-job", "JobId") if c.operation == "SubmitServiceJob" else []
    ),
    ("batch", "job-definition"): lambda c: _job_definition(c, revision=False),
    ("batch", "job-definition-revision"): lambda c: _job_definition(c, revision=True),
    ("batch", "quota-share"): _quota_share,
    ("dynamodb", "table"): _tables,
    # DescribeContainerInstances names its container instances by ARN (the long format) or ID.
    ("ecs", "container-instance"): lambda c: [
        str(a) for a in c.params.get("containerInstances") or [] if str(a).startswith("arn:")
    ],
    ("events", "event-bus"): _event_buses,
    ("s3", "bucket"): _param("Bucket", "s3", "bucket", "BucketName"),
    ("sagemaker", "training-job"): _param("TrainingJobName", "sagemaker", "training-job", "TrainingJobName"),
    ("sagemaker", "training-plan"): _training_plan,
    ("sns", "topic"): _param("TopicArn", "sns", "topic", "TopicName"),
    ("sqs", "queue"): lambda c: [queue_arn(str(c.params["QueueUrl"]))] if c.params.get("QueueUrl") else [],
    ("secretsmanager", "Secret"): _param("SecretId", "secretsmanager", "Secret", "SecretId"),
}
"""(service, resource type) → the ARNs a call names of that type (parameter names from the
service's API reference)."""

_UNSUPPORTED = {
    ("batch", "consumable-resource"): ("consumableResourcePropertiesOverride",),
    ("sagemaker", "reserved-capacity"): (),
    ("dynamodb", "index"): ("IndexName",),
}
"""Resource types a call could name through these parameters, which no locator reads yet: a call
that uses one is refused (:class:`UnmodelledCall`) rather than evaluated without it."""


# ------------------------------------------------------------------------------------ context
def _tags(params: Mapping[str, Any]) -> dict[str, str] | None:
    tags = params.get("tags", params.get("Tags"))
    if tags is None:
        return None
    if isinstance(tags, Mapping):
        return {str(k): str(v) for k, v in tags.items()}
    return {str(t["Key"]): str(t.get("Value", "")) for t in tags}


def _tag_context(tags: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    context: dict[str, tuple[str, ...]] = {f"aws:RequestTag/{k}": (v,) for k, v in tags.items()}
    context["aws:TagKeys"] = tuple(tags)
    return context


def _attribute_text(value: Mapping[str, Any]) -> str:
    ((_, inner),) = value.items()
    return str(inner)


_KEY_CONDITION = re.compile(r"(#?[A-Za-z0-9_]+)\s*=\s*(:[A-Za-z0-9_]+)")


def _leading_keys(item_params: Mapping[str, Any], table: str, stack: Stack) -> tuple[str, ...]:
    """Every partition key value the (single-table) request touches."""
    hash_key = stack.tables.get(table)
    if hash_key is None:
        return ()
    values: list[str] = []
    for holder in ("Key", "Item"):
        if isinstance(item_params.get(holder), Mapping) and hash_key in item_params[holder]:
            values.append(_attribute_text(item_params[holder][hash_key]))
    for key in item_params.get("Keys") or []:
        values.append(_attribute_text(key[hash_key]))
    for write in item_params.get("Writes") or []:
        body = write.get("PutRequest", {}).get("Item") or write.get("DeleteRequest", {}).get("Key")
        values.append(_attribute_text(body[hash_key]))
    expression = item_params.get("KeyConditionExpression")
    if expression:
        names = item_params.get("ExpressionAttributeNames") or {}
        found = [
            item_params["ExpressionAttributeValues"][placeholder]
            for name, placeholder in _KEY_CONDITION.findall(str(expression))
            if names.get(name, name) == hash_key
        ]
        if not found:
            raise UnmodelledCall(f"KeyConditionExpression {expression!r} names no value of {hash_key}")
        values += [_attribute_text(v) for v in found]
    return tuple(dict.fromkeys(values))


def _request_context(call: ApiCall, action: str) -> dict[str, tuple[str, ...]]:
    params = call.params
    context: dict[str, tuple[str, ...]] = {}
    tags = _tags(params)
    if tags:
        context.update(_tag_context(tags))
    if call.service == "s3" and "Prefix" in params:
        context["s3:prefix"] = (str(params["Prefix"]),)
    if call.service == "batch":
        if params.get("shareIdentifier"):
            context["batch:ShareIdentifier"] = (str(params["shareIdentifier"]),)
        priority = params.get("schedulingPriority", params.get("schedulingPriorityOverride"))
        if priority is not None:
            context["batch:SchedulingPriority"] = (str(priority),)
    if action == "events:PutEvents":
        entries = params.get("Entries") or []
        context["events:source"] = tuple(dict.fromkeys(str(e.get("Source")) for e in entries))
        context["events:detail-type"] = tuple(dict.fromkeys(str(e.get("DetailType")) for e in entries))
    if call.service == "secretsmanager" and "SecretId" in params:
        context["secretsmanager:SecretId"] = (str(params["SecretId"]),)
    return context


# ------------------------------------------------------------------------------------ splitting
@dataclass(frozen=True)
class _Part:
    """One IAM action of a call, with the parameters that concern it (a transaction's one item)."""

    action: str
    params: dict[str, Any]
    label: str


_TRANSACT = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Get": "dynamodb:GetItem",
}


def _parts(call: ApiCall) -> list[_Part]:
    if call.service == "dynamodb" and call.operation in ("TransactWriteItems", "TransactGetItems"):
        parts = []
        for index, item in enumerate(call.params.get("TransactItems") or []):
            ((kind, body),) = item.items()
            parts.append(_Part(_TRANSACT[kind], dict(body), f"{call.operation} item {index} ({kind})"))
        return parts
    if call.service == "dynamodb" and call.operation == "BatchWriteItem":
        return [
            _Part("dynamodb:BatchWriteItem", {"TableName": table, "Writes": writes}, call.operation)
            for table, writes in (call.params.get("RequestItems") or {}).items()
        ]
    if call.service == "dynamodb" and call.operation == "BatchGetItem":
        return [
            _Part(
                "dynamodb:BatchGetItem", {"TableName": table, "Keys": body.get("Keys") or []}, call.operation
            )
            for table, body in (call.params.get("RequestItems") or {}).items()
        ]
    action = reference.actions_for_operation(call.service, call.operation)
    if not re.fullmatch(r"[a-z0-9-]+:[A-Za-z0-9]+", action):
        raise UnmodelledCall(f"{call.api} is authorised {action}: split it into its items")
    return [_Part(action, dict(call.params), call.operation)]


# ------------------------------------------------------------------------------------ requests
def _role_principal(stack: Stack, function: str) -> Principal:
    return Principal(stack.role_of(function).arn, ACCOUNT_ID)


def _payload_roles(call: ApiCall) -> list[str]:
    roles = []
    if isinstance(call.params.get("RoleArn"), str):
        roles.append(call.params["RoleArn"])
    payload = call.params.get("serviceRequestPayload")
    if isinstance(payload, str):
        try:
            decoded = json.loads(payload)
        except ValueError:
            decoded = {}
        if isinstance(decoded, Mapping) and isinstance(decoded.get("RoleArn"), str):
            roles.append(decoded["RoleArn"])
    return roles


def _resources(
    call: ApiCall, part: _Part, info: reference.ActionInfo, names: Names
) -> Iterator[tuple[str, str | None, str]]:
    """(ARN or ``*``, resource type, why) for each resource AWS authorises ``part`` on."""
    if not info.resource_types:
        yield "*", None, f"{info.name} supports no resource-level permissions"
        return
    scoped = replace(call, params=part.params)
    found_any = False
    for rt in info.resource_types:
        for parameter in _UNSUPPORTED.get((info.service, rt.name), ()):
            if part.params.get(parameter):
                raise UnmodelledCall(f"{call.api} names a {rt.name} ({parameter}), which no locator reads")
        locator = _LOCATORS.get((info.service, rt.name))
        arns = locator(scoped) if locator is not None else []
        if not arns:
            arns = _by_arn_parameter(scoped, info.qualified, rt.name)
        if not arns:
            if rt.required:
                raise UnmodelledCall(
                    f"{call.api}: no locator gives the {rt.name}* resource of {info.qualified}; add one to "
                    "batchpilot_local.iam.requests._LOCATORS"
                )
            continue
        for arn in arns:
            found_any = True
            yield (
                names.arn(info.service, rt.name, arn, call.function),
                rt.name,
                f"{part.label} names this {rt.name}",
            )
    if not found_any:
        raise UnmodelledCall(f"{call.api}: the call names no resource of {info.qualified}")


def auth_requests(call: ApiCall, stack: Stack, names: Names) -> list[AuthRequest]:
    """Every authorisation AWS makes for ``call`` (made by ``call.function``'s role).

    Raises:
        UnmodelledCall: the call's function is not in the stack, or the call names a resource this
            module cannot place (the message says what to add).
    """
    function = call.function
    if function is None or function not in stack.functions:
        raise UnmodelledCall(f"{call.api} was made by {function!r}, not a function of the template")
    principal = _role_principal(stack, function)
    out: list[AuthRequest] = []

    def add(
        action: str,
        resource: str,
        resource_type: str | None,
        context: Mapping[str, tuple[str, ...]],
        why: str,
    ) -> None:
        out.append(
            AuthRequest(
                function, action, resource, resource_type, principal, context, why, call.api, call.origin
            )
        )

    for part in _parts(call):
        info = reference.action(part.action)
        tagger = reference.tagging_action(call.service)
        unmodelled = [d for d in info.dependent_actions if d not in ("iam:PassRole", tagger)]
        if unmodelled:
            raise UnmodelledCall(f"{info.qualified} has dependent actions no rule here derives: {unmodelled}")
        context = _request_context(replace(call, params=part.params), part.action)
        if call.service == "dynamodb":
            table = str(part.params.get("TableName", ""))
            leading = _leading_keys(
                part.params, names.arn("dynamodb", "table", table, function).rsplit("/", 1)[-1], stack
            )
            if leading:
                context["dynamodb:LeadingKeys"] = leading
        created: list[str] = []
        for arn, resource_type, why in _resources(call, part, info, names):
            add(info.qualified, arn, resource_type, context, why)
            if resource_type is not None and resource_type == _created_type(call):
                created.append(arn)
        # Tags on create: the service's tagging action on the new resource, with the same tags.
        tags = _tags(part.params)
        if tags and created and tagger is not None and tagger != info.qualified:
            tag_context = _tag_context(tags)
            if tagger == "sagemaker:AddTags":
                tag_context["sagemaker:TaggingAction"] = (info.name,)
            for arn in created:
                rt = reference.resource_type_of(tagger, arn)
                add(tagger, arn, rt, tag_context, f"{info.name} passes tags: {tagger} on the new {rt}")
        # A role handed to SageMaker (a training job's execution role).
        for role in _payload_roles(call):
            add(
                "iam:PassRole",
                role,
                "role",
                {"iam:PassedToService": ("sagemaker.amazonaws.com",)},
                f"{info.name} hands this role to SageMaker",
            )
        # Publishing to an encrypted topic: SNS uses the topic's key as the publisher.
        if info.qualified == "sns:Publish":
            topic = names.arn("sns", "topic", str(part.params.get("TopicArn", "")), function)
            key = stack.topic_keys.get(topic)
            if key is not None:
                kms_context = {
                    "kms:ViaService": (f"sns.{REGION}.amazonaws.com",),
                    "kms:CallerAccount": (ACCOUNT_ID,),
                }
                for action in ("kms:GenerateDataKey", "kms:Decrypt"):
                    add(
                        action,
                        key,
                        "key",
                        kms_context,
                        f"{call.operation} to a topic encrypted with this key",
                    )
    return out


def _created_type(call: ApiCall) -> str | None:
    """The resource type a create call makes (the type of the ARN its answer names, or of the name
    it gives the new resource)."""
    created = {
        "batch:SubmitJob": "job",
        "batch:SubmitServiceJob": "service-job",
        "sagemaker:CreateTrainingJob": "training-job",
    }
    return created.get(call.api)


# ------------------------------------------------------------------------------------ platform
def platform_requests(stack: Stack) -> list[AuthRequest]:
    """What AWS services authorise on the stack's behalf (see the module docstring), from the
    template alone."""
    out: list[AuthRequest] = []
    for name, function in stack.functions.items():
        principal = _role_principal(stack, name)
        api = f"lambda ({function.logical_id})"

        def add(
            action: str,
            resource: str,
            resource_type: str,
            why: str,
            *,
            name: str = name,
            principal: Principal = principal,
            api: str = api,
        ) -> None:
            out.append(
                AuthRequest(name, action, resource, resource_type, principal, {}, why, api, "template.yaml")
            )

        for queue in function.event_source_queues:
            for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"):
                add(action, queue, "queue", "Lambda's event source mapping polls this queue with the role")
        stream = (
            function.log_group_arn.removesuffix(":*") + ":log-stream:2026/01/01/[$LATEST]0123456789abcdef"
        )
        for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
            add(action, stream, "log-stream", "Lambda writes the function's logs with the role")
        for destination in function.on_failure:
            add("sqs:SendMessage", destination, "queue", "Lambda sends failed asynchronous invocations here")
    events = Principal("", ACCOUNT_ID, "events.amazonaws.com")
    for rule in stack.rules:
        source = {"aws:SourceArn": (rule.arn,), "aws:SourceAccount": (ACCOUNT_ID,)}
        for target in rule.targets + rule.dead_letter_queues:
            if target.startswith(f"arn:{PARTITION}:sqs:"):
                out.append(
                    AuthRequest(
                        None,
                        "sqs:SendMessage",
                        target,
                        "queue",
                        events,
                        source,
                        f"EventBridge delivers {rule.logical_id}'s events (or dead letters) here",
                        f"events ({rule.logical_id})",
                        "template.yaml",
                    )
                )
    cloudwatch = Principal("", ACCOUNT_ID, "cloudwatch.amazonaws.com")
    for alarm in stack.alarms:
        source = {"aws:SourceArn": (alarm.arn,), "aws:SourceAccount": (ACCOUNT_ID,)}
        for topic in alarm.actions:
            if topic not in stack.resource_policies and topic not in stack.topic_keys:
                continue  # a topic outside the stack (AlarmActionTopicArn): its own policies decide
            out.append(
                AuthRequest(
                    None,
                    "sns:Publish",
                    topic,
                    "topic",
                    cloudwatch,
                    source,
                    f"{alarm.logical_id} notifies this topic",
                    f"cloudwatch ({alarm.logical_id})",
                    "template.yaml",
                )
            )
            key = stack.topic_keys.get(topic)
            if key is not None:
                for action in ("kms:GenerateDataKey", "kms:Decrypt"):
                    out.append(
                        AuthRequest(
                            None,
                            action,
                            key,
                            "key",
                            cloudwatch,
                            source,
                            f"{alarm.logical_id} publishes to a topic encrypted with this key",
                            f"cloudwatch ({alarm.logical_id})",
                            "template.yaml",
                        )
                    )
    for schedule in stack.schedules:
        role = stack.role_by_arn(schedule.role_arn)
        if role is None:
            continue
        principal = Principal(role.arn, ACCOUNT_ID)
        api = f"scheduler ({schedule.logical_id})"
        out.append(
            AuthRequest(
                None,
                "lambda:InvokeFunction",
                schedule.target,
                "function",
                principal,
                {},
                f"{schedule.logical_id} invokes its target with {role.logical_id}",
                api,
                "template.yaml",
            )
        )
        if schedule.dead_letter_queue:
            out.append(
                AuthRequest(
                    None,
                    "sqs:SendMessage",
                    schedule.dead_letter_queue,
                    "queue",
                    principal,
                    {},
                    f"{schedule.logical_id} sends runs it could not start here",
                    api,
                    "template.yaml",
                )
            )
    return out
