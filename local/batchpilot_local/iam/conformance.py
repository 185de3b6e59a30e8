"""Would IAM allow every call the functions make? The recorded calls judged against the expanded
template with AWS's Service Authorization Reference and policy evaluation logic.

:func:`judge` turns calls into authorisations (:mod:`batchpilot_local.iam.requests`), evaluates
each distinct one once (:func:`batchpilot_local.iam.policy.evaluate`) against the principal's
identity-based policies and the resource's policy, and sorts the outcome into a :class:`Verdict`:
the denied requests (each with the grant that is missing), the requests allowed only through an
identity-based ``Resource: "*"`` grant (with the reference's reason, or flagged when the action has
resource types and so could be scoped), the calls that could not be placed, and the calls made
outside any function.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from batchpilot_local.iam import reference
from batchpilot_local.iam.calls import ApiCall
from batchpilot_local.iam.policy import Decision, Policy, Request, evaluate
from batchpilot_local.iam.requests import AuthRequest, Names, UnmodelledCall, auth_requests
from batchpilot_local.iam.stack import Stack

__all__ = ["Finding", "Verdict", "judge", "policies_for", "star_reason"]


@dataclass(frozen=True)
class Finding:
    """One distinct authorisation, its decision, and how many recorded calls needed it."""

    request: AuthRequest
    decision: Decision
    calls: int = 1

    @property
    def who(self) -> str:
        """The function, or the service principal / role that makes the request."""
        if self.request.function is not None:
            return self.request.function
        return self.request.principal.service or self.request.principal.arn.rsplit("/", 1)[-1]

    def missing_grant(self) -> str:
        """What the request needs that no statement gives (for a denied request)."""
        r = self.request
        if self.decision.denied_by:
            return f"remove or narrow {', '.join(map(str, self.decision.denied_by))}"
        context = "; ".join(f"{k}={','.join(v)}" for k, v in sorted(r.context.items()))
        holder = r.principal.service or r.principal.arn.rsplit("/", 1)[-1]
        where = (
            "the key policy"
            if r.action.startswith("kms:")
            else f"{holder}'s policies or the resource's policy"
        )
        return (
            f"an Allow of {r.action} on {r.resource}"
            + (f" when {context}" if context else "")
            + f" in {where}"
        )

    def describe(self) -> str:
        """One line: who, the API call, the action and resource, why, and the decision."""
        r = self.request
        return (
            f"{self.who}: {r.api} → {r.action} on {r.resource} ({r.because}; {self.calls} call(s), "
            f"e.g. {r.origin}): {self.decision.reason}"
        )


def star_reason(action: str) -> str | None:
    """Why ``Resource: "*"`` is the only resource ``action`` can be granted on, from the reference
    (its action has no resource type); None when it has resource types (and should be scoped)."""
    info = reference.action(action)
    if info.supports_resource_level_permissions:
        return None
    return (
        f"{info.name} supports no resource-level permissions (the Service Authorization Reference "
        f"lists no resource type for {info.qualified})"
    )


@dataclass
class Verdict:
    """The outcome of :func:`judge`.

    Attributes:
        denied: requests IAM would deny.
        star: requests allowed only through an identity-based ``Resource: "*"`` grant.
        unmodelled: calls that could not be turned into requests (what to add, per call kind).
        outside_functions: calls made by test code or tools, not by a function (not judged).
        calls: calls judged.
        requests: distinct authorisations evaluated.
        functions: the functions whose calls were judged.
        apis: ``function service:Operation`` of every call judged.
    """

    denied: list[Finding] = field(default_factory=list)
    star: list[Finding] = field(default_factory=list)
    unmodelled: dict[str, str] = field(default_factory=dict)
    outside_functions: int = 0
    calls: int = 0
    requests: int = 0
    functions: set[str] = field(default_factory=set)
    apis: set[str] = field(default_factory=set)

    @property
    def star_unjustified(self) -> list[Finding]:
        """The ``*``-only requests whose action has resource types: a scoped grant would do."""
        return [f for f in self.star if star_reason(f.request.action) is None]

    def summary(self) -> str:
        """A few lines: counts, every denied request with its missing grant, every ``*`` grant used."""
        lines = [
            f"{self.calls} calls, {self.requests} distinct authorisations, {len(self.denied)} denied, "
            f'{len(self.star)} allowed only through Resource "*"; {self.outside_functions} calls made '
            "outside any function (not judged)"
        ]
        for finding in self.denied:
            lines.append(f"DENIED {finding.describe()}\n    missing: {finding.missing_grant()}")
        for api, problem in sorted(self.unmodelled.items()):
            lines.append(f"NOT PLACED {api}: {problem}")
        for (who, action), calls in self.star_grants().items():
            reason = star_reason(action) or "the action has resource types: scope the grant"
            lines.append(f"* {who}: {action} ({calls} call(s)): {reason}")
        return "\n".join(lines)

    def star_grants(self) -> dict[tuple[str, str], int]:
        """(who, action) → calls, for the requests allowed only through ``Resource: "*"``."""
        grants: dict[tuple[str, str], int] = {}
        for finding in self.star:
            key = (finding.who, finding.request.action)
            grants[key] = grants.get(key, 0) + finding.calls
        return dict(sorted(grants.items()))

    def merge(self, other: Verdict) -> Verdict:
        """This verdict and ``other`` together (e.g. two parameter sets)."""
        return Verdict(
            denied=self.denied + other.denied,
            star=self.star + other.star,
            unmodelled={**other.unmodelled, **self.unmodelled},
            outside_functions=self.outside_functions + other.outside_functions,
            calls=self.calls + other.calls,
            requests=self.requests + other.requests,
            functions=self.functions | other.functions,
            apis=self.apis | other.apis,
        )


def policies_for(request: AuthRequest, stack: Stack) -> list[Policy]:
    """The policies AWS consults for ``request``: the principal's role's inline policies (when it is
    a role of the stack) and the resource's policies (queue, topic, bus or key)."""
    policies: list[Policy] = []
    role = stack.role_by_arn(request.principal.arn) if request.principal.service is None else None
    if role is not None:
        policies += role.policies
    policies += stack.resource_policies.get(request.resource, ())
    return policies


def judge(
    calls: Iterable[ApiCall], stack: Stack, names: Names, *, extra: Iterable[AuthRequest] = ()
) -> Verdict:
    """Judge ``calls`` and the ``extra`` requests (e.g. those of
    :func:`~batchpilot_local.iam.requests.platform_requests`) against ``stack``; see the module
    docstring."""
    verdict = Verdict()
    counted: dict[tuple[object, ...], list[AuthRequest]] = {}
    for call in calls:
        if call.function is None:
            verdict.outside_functions += 1
            continue
        verdict.calls += 1
        verdict.functions.add(call.function)
        verdict.apis.add(f"{call.function} {call.api}")
        try:
            requests = auth_requests(call, stack, names)
        except UnmodelledCall as exc:
            verdict.unmodelled.setdefault(f"{call.function} {call.api}", str(exc))
            continue
        for request in requests:
            counted.setdefault(request.key(), []).append(request)
    for request in extra:
        counted.setdefault(request.key(), []).append(request)
    for same in counted.values():
        request = same[0]
        as_request = Request(request.action, request.resource, dict(request.context))
        decision = evaluate(as_request, request.principal, policies_for(request, stack))
        finding = Finding(request, decision, len(same))
        verdict.requests += 1
        if not decision.allowed:
            verdict.denied.append(finding)
        elif decision.only_through_star:
            verdict.star.append(finding)
    verdict.denied.sort(key=lambda f: (f.who, f.request.api, f.request.action, f.request.resource))
    verdict.star.sort(key=lambda f: (f.who, f.request.action))
    return verdict


def by_function(findings: Iterable[Finding]) -> Mapping[str, list[Finding]]:
    """``findings`` grouped by who makes the request."""
    grouped: dict[str, list[Finding]] = {}
    for finding in findings:
        grouped.setdefault(finding.who, []).append(finding)
    return grouped
