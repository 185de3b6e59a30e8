"""IAM policy evaluation for one request, as AWS's policy evaluation logic describes it (pure).

AWS Identity and Access Management user guide, "Policy evaluation logic" and "IAM JSON policy
elements": a request is denied by an explicit ``Deny`` in any policy; otherwise, within one
account, it is allowed when an identity-based policy of the principal or a resource-based policy
naming the principal allows it. AWS KMS is the exception: a key's key policy must allow the
request, either naming the principal or naming the account (which hands the decision to the
principal's IAM policies) ("Key policies in AWS KMS", "Default key policy").

What this evaluator understands (everything else raises :class:`PolicyError`, so a policy that
uses more fails its test instead of being misread):

- ``Effect``, ``Action`` / ``NotAction`` (case-insensitive, ``*`` and ``?`` wildcards),
  ``Resource`` / ``NotResource`` (case-sensitive wildcards), ``Principal`` (``*``, ``AWS``: role
  or account ARNs and account ids, ``Service``) in resource-based policies;
- ``Condition`` with the operators ``String(Not)Equals(IgnoreCase)``, ``String(Not)Like``,
  ``Arn(Not)Equals``, ``Arn(Not)Like``, ``Bool``, ``Null``, ``Numeric*``, each optionally with
  ``...IfExists`` and the set qualifiers ``ForAllValues:`` / ``ForAnyValue:``; condition keys
  are case-insensitive, several keys in one operator must all match, several values of one key
  are alternatives. A key missing from the request matches only ``Null: true``, ``...IfExists``,
  the negated operators and ``ForAllValues:`` ("Condition operators", "Single-valued and
  multivalued condition keys").

Policy variables (``${aws:username}``) are not supported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import Any

__all__ = [
    "Decision",
    "Grant",
    "Policy",
    "PolicyError",
    "PolicyKind",
    "Principal",
    "Request",
    "evaluate",
    "wildcard_match",
]


class PolicyError(ValueError):
    """A policy uses an element, operator or value this evaluator does not understand."""


class PolicyKind(StrEnum):
    """Where a policy is attached."""

    IDENTITY = "identity"  # an IAM role's inline or managed policy
    RESOURCE = "resource"  # a queue, topic, bus or secret policy
    KEY = "key"  # an AWS KMS key policy (must allow, see the module docstring)


@dataclass(frozen=True)
class Principal:
    """Who makes the request.

    Attributes:
        arn: the IAM role's ARN (``aws:PrincipalArn``), or ``""`` for a service principal.
        account: the principal's account id.
        service: the service principal (``events.amazonaws.com``) when an AWS service acts on its
            own behalf; None for a role.
    """

    arn: str
    account: str
    service: str | None = None


@dataclass(frozen=True)
class Request:
    """One authorisation: an action on one resource with its request context.

    Attributes:
        action: ``service:Action``.
        resource: the resource's ARN, or ``*`` for an action without resource types.
        context: condition key → the request's values for it (a multivalued key such as
            ``aws:TagKeys`` has several); a key not in the map is absent from the request.
            Global keys (``aws:PrincipalArn``, ``aws:SecureTransport``, ...) are added by
            :func:`evaluate` from the principal.
    """

    action: str
    resource: str
    context: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Policy:
    """A policy document and where it comes from.

    Attributes:
        name: a label for messages (``RecoveryFunctionRole/recovery-function``).
        kind: see :class:`PolicyKind`.
        document: the JSON document (``{"Statement": [...]}``; one statement or a list).
    """

    name: str
    kind: PolicyKind
    document: Mapping[str, Any]

    @property
    def statements(self) -> list[Mapping[str, Any]]:
        """The statements (a single statement object as a one-item list)."""
        statement = self.document.get("Statement", [])
        if isinstance(statement, Mapping):
            return [statement]
        if not isinstance(statement, list):
            raise PolicyError(f"{self.name}: Statement is neither an object nor a list")
        return list(statement)


@dataclass(frozen=True)
class Grant:
    """A statement that matched.

    Attributes:
        policy: the policy's name.
        sid: the statement's ``Sid`` (``#<index>`` when it has none).
        effect: ``Allow`` or ``Deny``.
        resource_pattern: the ``Resource`` pattern that matched (``""`` for ``NotResource``).
        direct: for a resource-based policy, the statement names the principal itself (its ARN, its
            service or ``*``) rather than its account.
    """

    policy: str
    sid: str
    effect: str
    resource_pattern: str
    direct: bool = True

    @property
    def through_star(self) -> bool:
        """The statement matched only because its ``Resource`` is ``*`` (any resource)."""
        return self.resource_pattern == "*"

    def __str__(self) -> str:
        return f"{self.policy}:{self.sid}"


@dataclass(frozen=True)
class Decision:
    """The outcome of :func:`evaluate`.

    Attributes:
        allowed: True when AWS would allow the request.
        denied_by: the explicit ``Deny`` statements that matched (a deny wins).
        allowed_by: the ``Allow`` statements of identity-based policies that matched.
        resource_allowed_by: the ``Allow`` statements of resource-based (and key) policies that matched.
        reason: one sentence saying why (``allowed by ...``, ``explicitly denied by ...``,
            ``no statement allows it``, ...).
    """

    allowed: bool
    denied_by: tuple[Grant, ...]
    allowed_by: tuple[Grant, ...]
    resource_allowed_by: tuple[Grant, ...]
    reason: str

    @property
    def only_through_star(self) -> bool:
        """Allowed by identity-based statements alone, each of them through ``Resource: "*"``
        (a resource-based policy's ``*`` means the resource itself and does not count)."""
        if not self.allowed or not self.allowed_by or any(g.direct for g in self.resource_allowed_by):
            return False
        return all(g.through_star for g in self.allowed_by)


# ------------------------------------------------------------------------------------ matching
@cache
def _wildcard(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(f"^{regex}$", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def wildcard_match(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM's wildcard match: ``*`` any run of characters (none included), ``?`` one character."""
    if "${" in pattern:
        raise PolicyError(f"policy variables are not supported: {pattern!r}")
    return bool(_wildcard(pattern, ignore_case).match(value))


def _arn_like(pattern: str, value: str) -> bool:
    # "ArnLike": each of the six colon-separated parts is matched on its own (wildcards do not
    # cross a colon, except in the last part, the resource, which may itself hold colons).
    p_parts, v_parts = pattern.split(":", 5), value.split(":", 5)
    if len(p_parts) != 6 or len(v_parts) != 6:
        return (
            pattern == value if "*" not in pattern and "?" not in pattern else wildcard_match(pattern, value)
        )
    return all(wildcard_match(p, v) for p, v in zip(p_parts, v_parts, strict=True))


def _as_list(value: Any, where: str) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, str | bool | int | float):
        return [value]
    raise PolicyError(f"{where}: expected a string or a list, got {type(value).__name__}")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _action_matches(statement: Mapping[str, Any], action: str, where: str) -> bool:
    if "Action" in statement:
        return any(
            wildcard_match(_text(p), action, ignore_case=True) for p in _as_list(statement["Action"], where)
        )
    if "NotAction" in statement:
        return not any(
            wildcard_match(_text(p), action, ignore_case=True)
            for p in _as_list(statement["NotAction"], where)
        )
    raise PolicyError(f"{where}: neither Action nor NotAction")


def _resource_match(statement: Mapping[str, Any], resource: str, where: str) -> str | None:
    """The matching ``Resource`` pattern, ``""`` for a ``NotResource`` match, or None."""
    if "Resource" in statement:
        for pattern in _as_list(statement["Resource"], where):
            text = _text(pattern)
            if wildcard_match(text, resource):
                return text
        return None
    if "NotResource" in statement:
        if any(wildcard_match(_text(p), resource) for p in _as_list(statement["NotResource"], where)):
            return None
        return ""
    raise PolicyError(f"{where}: neither Resource nor NotResource")


def _principal_match(statement: Mapping[str, Any], principal: Principal, where: str) -> bool | None:
    """True: names the principal itself; False: names its account; None: does not apply to it."""
    if "NotPrincipal" in statement:
        raise PolicyError(f"{where}: NotPrincipal is not supported")
    given = statement.get("Principal")
    if given is None:
        raise PolicyError(f"{where}: a resource-based policy statement needs a Principal")
    if given == "*":
        return True
    if not isinstance(given, Mapping):
        raise PolicyError(f"{where}: Principal must be * or an object")
    unknown = set(given) - {"AWS", "Service"}
    if unknown:
        raise PolicyError(f"{where}: Principal {sorted(unknown)} is not supported")
    for value in _as_list(given.get("Service", []), where):
        if principal.service is not None and _text(value) == principal.service:
            return True
    account_match = False
    for value in _as_list(given.get("AWS", []), where):
        text = _text(value)
        if text == "*":
            return True
        if principal.service is not None:
            continue
        if text == principal.arn:
            return True
        if text in (principal.account, f"arn:aws:iam::{principal.account}:root"):
            account_match = True
    return False if account_match else None


# ------------------------------------------------------------------------------------ conditions
_BASE_OPERATORS = {
    "StringEquals",
    "StringNotEquals",
    "StringEqualsIgnoreCase",
    "StringNotEqualsIgnoreCase",
    "StringLike",
    "StringNotLike",
    "ArnEquals",
    "ArnNotEquals",
    "ArnLike",
    "ArnNotLike",
    "Bool",
    "Null",
    "NumericEquals",
    "NumericNotEquals",
    "NumericLessThan",
    "NumericLessThanEquals",
    "NumericGreaterThan",
    "NumericGreaterThanEquals",
}
_NEGATED = {
    "StringNotEquals",
    "StringNotEqualsIgnoreCase",
    "StringNotLike",
    "ArnNotEquals",
    "ArnNotLike",
    "NumericNotEquals",
}


def _one(base: str, expected: str, actual: str) -> bool:
    """Whether one request value satisfies one policy value under the positive form of ``base``."""
    positive = base.replace("Not", "", 1) if base in _NEGATED else base
    if positive == "StringEquals":
        return actual == expected
    if positive == "StringEqualsIgnoreCase":
        return actual.lower() == expected.lower()
    if positive == "StringLike":
        return wildcard_match(expected, actual)
    if positive in ("ArnEquals", "ArnLike"):
        return _arn_like(expected, actual)
    if positive == "Bool":
        return actual.lower() == expected.lower()
    if positive.startswith("Numeric"):
        a, e = float(actual), float(expected)
        return {
            "NumericEquals": a == e,
            "NumericLessThan": a < e,
            "NumericLessThanEquals": a <= e,
            "NumericGreaterThan": a > e,
            "NumericGreaterThanEquals": a >= e,
        }[positive]
    raise PolicyError(f"operator {base} is not supported")


def _condition_holds(
    operator: str, key: str, expected: Sequence[str], context: Mapping[str, tuple[str, ...]]
) -> bool:
    qualifier, _, base = operator.rpartition(":")
    if qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise PolicyError(f"condition qualifier {qualifier} is not supported")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    if base not in _BASE_OPERATORS:
        raise PolicyError(f"condition operator {operator} is not supported")
    values = context.get(key.lower())
    if base == "Null":
        wanted = {e.lower() for e in expected}
        present = values is not None and len(values) > 0
        return ("false" in wanted and present) or ("true" in wanted and not present)
    negated = base in _NEGATED
    if values is None or len(values) == 0:
        if qualifier == "ForAllValues":
            return True
        if qualifier == "ForAnyValue":
            return False
        return if_exists or negated

    def positive(actual: str) -> bool:
        return any(_one(base, e, actual) for e in expected)

    if qualifier == "ForAllValues":
        return all((not positive(v)) if negated else positive(v) for v in values)
    if qualifier == "ForAnyValue":
        return any((not positive(v)) if negated else positive(v) for v in values)
    # A single-valued operator on a request value (or values): any value satisfying it counts;
    # a negated operator holds when no value matches.
    return not any(positive(v) for v in values) if negated else any(positive(v) for v in values)


def _conditions_hold(
    statement: Mapping[str, Any], context: Mapping[str, tuple[str, ...]], where: str
) -> bool:
    block = statement.get("Condition")
    if block is None:
        return True
    if not isinstance(block, Mapping):
        raise PolicyError(f"{where}: Condition must be an object")
    for operator, keys in block.items():
        if not isinstance(keys, Mapping):
            raise PolicyError(f"{where}: {operator} must map condition keys to values")
        for key, expected in keys.items():
            values = [_text(v) for v in _as_list(expected, f"{where}: {operator} {key}")]
            if any("${" in v for v in values):
                raise PolicyError(f"{where}: policy variables are not supported ({key})")
            if not _condition_holds(str(operator), str(key), values, context):
                return False
    return True


# ------------------------------------------------------------------------------------ evaluation
def _context(request: Request, principal: Principal) -> dict[str, tuple[str, ...]]:
    context = {k.lower(): tuple(v) for k, v in request.context.items()}
    context.setdefault("aws:principalaccount", (principal.account,))
    context.setdefault("aws:securetransport", ("true",))  # the SDKs call AWS over TLS
    context.setdefault("aws:principalisawsservice", ("true" if principal.service else "false",))
    if principal.service is None:
        context.setdefault("aws:principalarn", (principal.arn,))
    else:
        context.setdefault("aws:principalservicename", (principal.service,))
    return context


def _matches(
    policy: Policy, principal: Principal, request: Request, context: Mapping[str, tuple[str, ...]]
) -> list[Grant]:
    found = []
    for index, statement in enumerate(policy.statements):
        where = f"{policy.name}:{statement.get('Sid', f'#{index}')}"
        effect = statement.get("Effect")
        if effect not in ("Allow", "Deny"):
            raise PolicyError(f"{where}: Effect must be Allow or Deny")
        direct = True
        if policy.kind is not PolicyKind.IDENTITY:
            named = _principal_match(statement, principal, where)
            if named is None:
                continue
            direct = named
        elif "Principal" in statement:
            raise PolicyError(f"{where}: an identity-based policy statement has no Principal")
        if not _action_matches(statement, request.action, where):
            continue
        pattern = _resource_match(statement, request.resource, where)
        if pattern is None:
            continue
        if not _conditions_hold(statement, context, where):
            continue
        found.append(Grant(policy.name, str(statement.get("Sid", f"#{index}")), str(effect), pattern, direct))
    return found


def evaluate(request: Request, principal: Principal, policies: Iterable[Policy]) -> Decision:
    """Whether AWS would allow ``request`` by ``principal`` under ``policies`` (the principal's
    identity-based policies and the resource's policy, if any), within one account.

    Raises:
        PolicyError: a policy uses something this evaluator does not understand.
    """
    context = _context(request, principal)
    denies: list[Grant] = []
    identity_allows: list[Grant] = []
    resource_allows: list[Grant] = []
    # AWS KMS: the key policy decides (a key without one, here, opens to nobody).
    key_policy = request.action.lower().startswith("kms:")
    for policy in policies:
        if policy.kind is PolicyKind.IDENTITY and principal.service is not None:
            continue  # a service principal has no identity-based policies
        for grant in _matches(policy, principal, request, context):
            if grant.effect == "Deny":
                denies.append(grant)
            elif policy.kind is PolicyKind.IDENTITY:
                identity_allows.append(grant)
            else:
                resource_allows.append(grant)
    allowed_by, resource_allowed_by = tuple(identity_allows), tuple(resource_allows)
    if denies:
        names = ", ".join(str(g) for g in denies)
        return Decision(
            False, tuple(denies), allowed_by, resource_allowed_by, f"explicitly denied by {names}"
        )
    direct = [g for g in resource_allows if g.direct]
    delegated = [g for g in resource_allows if not g.direct]
    if key_policy:
        allowed = bool(direct) or (bool(delegated) and bool(identity_allows))
        if allowed:
            via = direct or delegated + identity_allows
            return Decision(
                True, (), allowed_by, resource_allowed_by, "allowed by " + ", ".join(map(str, via))
            )
        if delegated:
            reason = "the key policy hands the decision to IAM, and no identity-based statement allows it"
        else:
            reason = "no statement of the key policy allows it"
        return Decision(False, (), allowed_by, resource_allowed_by, reason)
    if identity_allows or direct:
        via = identity_allows + direct
        return Decision(True, (), allowed_by, resource_allowed_by, "allowed by " + ", ".join(map(str, via)))
    return Decision(False, (), allowed_by, resource_allowed_by, "no statement allows it")
