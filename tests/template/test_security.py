"""Who may speak as batchpilot, send to its queues and page through its topic: the resource policies of
template.yaml, read the way AWS evaluates them.

A small evaluator decides requests against each policy: an explicit Deny wins; otherwise a principal of
this account is allowed when its own IAM policy or the resource policy allows it, a service principal
or another account's principal only when the resource policy does. Intrinsic functions are resolved
with the replay's account, region and stack name; a role's ARN is ``role/<logical id>``.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from batchpilot.shared.own_events import SOURCE as OWN_SOURCE
from batchpilot_local.template import load_template
from batchpilot_local.testing.paths import ROOT, TEMPLATE_PATH
from batchpilot_local.testing.templates import (
    as_list,
    getatt,
    props,
    ref,
    resources_of_type,
    sqs_events,
)

ACCOUNT, REGION, STACK = "111122223333", "us-east-1", "batchpilot"
OTHER_ACCOUNT = "444455556666"
PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::StackName": STACK,
    "AWS::Partition": "aws",
}
BUS_ARN = f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{STACK}-events"


# ---------------------------------------------------------------------- resolving the template
def resolve(node: Any, template: dict[str, Any]) -> Any:
    """Ref / Fn::GetAtt (Arn) / Fn::Sub resolved the way CloudFormation would for this stack."""
    resources = template["Resources"]

    def arn(logical_id: str) -> str:
        kind = resources[logical_id]["Type"]
        if kind == "AWS::IAM::Role":
            return f"arn:aws:iam::{ACCOUNT}:role/{logical_id}"
        if kind == "AWS::Events::Rule":
            bus = resolve(resources[logical_id]["Properties"].get("EventBusName", "default"), template)
            prefix = "" if bus == "default" else f"{bus}/"
            return f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{prefix}{logical_id}"
        if kind == "AWS::SQS::Queue":
            return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{logical_id}"
        raise AssertionError(f"no ARN for {kind}")

    def ref_of(name: str) -> str:
        if name in PSEUDO:
            return PSEUDO[name]
        if name in template.get("Parameters", {}):
            return str(template["Parameters"][name]["Default"])
        kind = resources[name]["Type"]
        if kind == "AWS::SNS::Topic":
            topic_name = resolve(resources[name]["Properties"]["TopicName"], template)
            return f"arn:aws:sns:{REGION}:{ACCOUNT}:{topic_name}"
        if kind == "AWS::Events::EventBus":
            return f"{STACK}-events"
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
        raise AssertionError(f"no Ref for {kind}")

    if isinstance(node, list):
        return [resolve(item, template) for item in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {"Ref"}:
        return ref_of(node["Ref"])
    if set(node) == {"Fn::GetAtt"}:
        target, attribute = (
            node["Fn::GetAtt"] if isinstance(node["Fn::GetAtt"], list) else node["Fn::GetAtt"].split(".")
        )
        assert attribute == "Arn"
        return arn(target)
    if set(node) == {"Fn::Sub"}:
        return re.sub(r"\$\{([^}]+)\}", lambda m: ref_of(m.group(1)), node["Fn::Sub"])
    return {key: resolve(value, template) for key, value in node.items()}


# ---------------------------------------------------------------------- evaluating a policy
@dataclass(frozen=True)
class Request:
    """One request. ``principal`` is an IAM principal ARN (a role's ARN for its sessions), a service
    principal (``cloudwatch.amazonaws.com``) or None (anonymous). ``iam_allows``: the principal's own
    IAM policies allow the action (only counts for principals of this account)."""

    principal: str | None
    action: str
    resource: str
    iam_allows: bool = False
    tls: bool = True
    context: dict[str, str] = field(default_factory=dict)

    @property
    def is_service(self) -> bool:
        return self.principal is not None and self.principal.endswith(".amazonaws.com")

    def keys(self) -> dict[str, str]:
        keys = {"aws:SecureTransport": "true" if self.tls else "false", **self.context}
        if self.principal is not None:
            keys["aws:PrincipalIsAWSService"] = "true" if self.is_service else "false"
            if not self.is_service:
                keys["aws:PrincipalArn"] = self.principal
        return keys


def _principal_matches(principal: Any, request: Request) -> bool:
    if principal == "*":
        return True
    if request.principal is None:
        return False
    if request.is_service:
        return request.principal in as_list(principal.get("Service", []))
    return request.principal in as_list(principal.get("AWS", []))


def _condition_holds(operator: str, key: str, values: Any, keys: dict[str, str]) -> bool:
    expected = [str(v).lower() if isinstance(v, bool) else str(v) for v in as_list(values)]
    if_exists = operator.endswith("IfExists")
    base = operator.removesuffix("IfExists")
    if key not in keys:
        return if_exists or base.startswith(("ArnNot", "StringNot"))
    actual = keys[key]
    if base in ("ArnEquals", "StringEquals", "Bool"):
        return actual in expected
    if base in ("ArnNotEquals", "StringNotEquals"):
        return actual not in expected
    if base in ("ArnLike", "StringLike"):
        return any(fnmatch.fnmatchcase(actual, pattern) for pattern in expected)
    if base in ("ArnNotLike", "StringNotLike"):
        return not any(fnmatch.fnmatchcase(actual, pattern) for pattern in expected)
    raise AssertionError(f"the evaluator does not know {operator}")


def _applies(statement: dict[str, Any], request: Request) -> bool:
    actions = as_list(statement["Action"])
    if not any(fnmatch.fnmatchcase(request.action, a) for a in actions):
        return False
    if not any(fnmatch.fnmatchcase(request.resource, r) for r in as_list(statement["Resource"])):
        return False
    if not _principal_matches(statement["Principal"], request):
        return False
    keys = request.keys()
    return all(
        _condition_holds(operator, key, values, keys)
        for operator, block in (statement.get("Condition") or {}).items()
        for key, values in block.items()
    )


def allowed(policy: dict[str, Any], request: Request) -> bool:
    statements = [s for s in as_list(policy["Statement"]) if _applies(s, request)]
    if any(s["Effect"] == "Deny" for s in statements):
        return False
    same_account = request.principal is not None and f":{ACCOUNT}:" in request.principal
    return any(s["Effect"] == "Allow" for s in statements) or (same_account and request.iam_allows)


def role(name: str, account: str = ACCOUNT) -> str:
    return f"arn:aws:iam::{account}:role/{name}"


ADMIN = role("Admin")  # any principal of the account whose IAM policies allow everything
ROOT_USER = f"arn:aws:iam::{ACCOUNT}:root"


def test_the_evaluator_knows_explicit_deny_iam_allow_and_missing_keys() -> None:
    deny_others = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "x:*",
        "Resource": "r",
        "Condition": {"ArnNotEquals": {"aws:PrincipalArn": role("Me")}},
    }
    allow_service = {
        "Effect": "Allow",
        "Principal": {"Service": "s.amazonaws.com"},
        "Action": "x:Do",
        "Resource": "r",
    }
    policy = {"Statement": [allow_service, deny_others]}
    assert allowed(policy, Request(role("Me"), "x:Do", "r", iam_allows=True))
    assert not allowed(policy, Request(role("Me"), "x:Do", "r"))  # neither IAM nor the policy allows it
    assert not allowed(policy, Request(ADMIN, "x:Do", "r", iam_allows=True))  # the explicit Deny wins
    assert not allowed(policy, Request(None, "x:Do", "r"))
    # A service principal has no aws:PrincipalArn: ArnNotEquals holds on a missing key, so it is denied ...
    assert not allowed(policy, Request("s.amazonaws.com", "x:Do", "r"))
    # ... unless the Deny spares service principals.
    deny_others["Condition"]["BoolIfExists"] = {"aws:PrincipalIsAWSService": "false"}
    assert allowed(policy, Request("s.amazonaws.com", "x:Do", "r"))
    assert not allowed(policy, Request("t.amazonaws.com", "x:Do", "r"))  # spared, but never allowed
    assert not allowed(policy, Request(None, "x:Do", "r"))
    assert not allowed(policy, Request(role("Me", OTHER_ACCOUNT), "x:Do", "r", iam_allows=True))


# ---------------------------------------------------------------------- the bus
def bus_policy(template: dict[str, Any]) -> dict[str, Any]:
    return resolve(props(template, "BatchPilotEventBus", "AWS::Events::EventBus")["Policy"], template)


def test_own_events_travel_on_a_bus_the_stack_creates(template: dict[str, Any]) -> None:
    bus = props(template, "BatchPilotEventBus", "AWS::Events::EventBus")
    assert bus["Name"] == {"Fn::Sub": "${AWS::StackName}-events"}  # one per stack, like the layer
    assert "EventBusName" not in template["Parameters"]  # no longer configurable: it is batchpilot's
    # Every rule that takes batchpilot's own events reads that bus, and only such rules do.
    rules = resources_of_type(template, "AWS::Events::Rule")
    assert rules
    for name, rule in rules.items():
        own = OWN_SOURCE in rule["Properties"]["EventPattern"]["source"]
        expected = {"Ref": "BatchPilotEventBus"} if own else "default"
        assert rule["Properties"]["EventBusName"] == expected, name
    assert (
        ref(props(template, "AlertsOwnEventsRule", "AWS::Events::Rule")["EventBusName"])
        == "BatchPilotEventBus"
    )
    # The publishers send there and may put events on it (named: the bus policy names their roles).
    for function, role_id in (
        ("RecoveryFunction", "RecoveryFunctionRole"),
        ("CapacityFunction", "CapacityFunctionRole"),
        ("LedgerFunction", "LedgerFunctionRole"),  # Job Starving
    ):
        variables = props(template, function, "AWS::Serverless::Function")["Environment"]["Variables"]
        assert variables["BATCHPILOT_EVENT_BUS"] == {"Ref": "BatchPilotEventBus"}, function
        # The first, unconditional policy (recovery's submit policy exists only with job queues named).
        policy = props(template, role_id, "AWS::IAM::Role")["Policies"][0]
        puts = [
            s for s in policy["PolicyDocument"]["Statement"] if "events:PutEvents" in as_list(s.get("Action"))
        ]
        assert [resolve(s["Resource"], template) for s in puts] == [BUS_ARN], role_id
    assert {s["Resource"] for s in bus_policy(template)["Statement"]} == {BUS_ARN}


def test_forged_own_events_are_refused_by_the_bus_policy(template: dict[str, Any]) -> None:
    policy = bus_policy(template)
    allowed_roles = {role("RecoveryFunctionRole"), role("CapacityFunctionRole"), role("LedgerFunctionRole")}
    (allow,) = [s for s in policy["Statement"] if s["Effect"] == "Allow"]
    assert set(allow["Principal"]["AWS"]) == allowed_roles and allow["Action"] == "events:PutEvents"

    def put(principal: str | None, *, iam_allows: bool = True) -> bool:
        return allowed(policy, Request(principal, "events:PutEvents", BUS_ARN, iam_allows=iam_allows))

    assert put(role("RecoveryFunctionRole")) and put(role("CapacityFunctionRole"))
    assert put(role("LedgerFunctionRole"))  # Job Starving
    assert put(role("RecoveryFunctionRole"), iam_allows=False)  # the bus policy alone would do
    # Everyone else is refused, even with an IAM policy allowing events:PutEvents on "*":
    for forger in (
        role("AlertsFunctionRole"),
        role("MetricsFunctionRole"),
        ADMIN,
        ROOT_USER,
        role("CapacityFunctionRole", OTHER_ACCOUNT),  # same name, another account
        f"arn:aws:iam::{ACCOUNT}:user/someone",
        "events.amazonaws.com",  # e.g. a rule of another bus forwarding here
        None,
    ):
        assert not put(forger), forger


def test_the_replay_routes_own_events_on_that_bus_only() -> None:
    app = load_template(TEMPLATE_PATH)
    assert app.own_event_bus == "BatchPilotEventBus"  # what the functions' BATCHPILOT_EVENT_BUS names
    own_event = {"source": OWN_SOURCE, "detail-type": "Recovery Skipped", "detail": {}}
    assert [r.rule for r in app.routes_for(own_event, app.own_event_bus)] == ["AlertsOwnEventsRule"]
    starving = {"source": OWN_SOURCE, "detail-type": "Job Starving", "detail": {}}
    assert [r.rule for r in app.routes_for(starving, app.own_event_bus)] == ["AlertsOwnEventsRule"]
    assert app.routes_for(own_event, "default") == []  # a forged one on the default bus reaches nothing


# ---------------------------------------------------------------------- the queues
def queue_policies(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return resources_of_type(template, "AWS::SQS::QueuePolicy")


def rules_sending_to(template: dict[str, Any], queues: set[str]) -> set[str]:
    """Rules whose target, or target's dead-letter queue, is one of ``queues``."""
    found = set()
    for name, rule in resources_of_type(template, "AWS::Events::Rule").items():
        for target in rule["Properties"]["Targets"]:
            arns = [target["Arn"], (target.get("DeadLetterConfig") or {}).get("Arn")]
            if {getatt(a, "Arn") for a in arns if a} & queues:
                found.add(name)
    return found


def test_every_queue_has_exactly_one_policy(template: dict[str, Any]) -> None:
    covered = [ref(q) for p in queue_policies(template).values() for q in p["Properties"]["Queues"]]
    assert sorted(covered) == sorted(resources_of_type(template, "AWS::SQS::Queue"))


QUEUE_POLICIES = [
    "MetricsQueuePolicy",
    "RecoveryQueuePolicy",
    "AlertsQueuePolicy",
    "CapacityQueuePolicy",
    "LedgerQueuePolicy",
]
REDRIVE_ROLE = role("batchpilot-redrive")  # QueueRedriveRoleName's default


def test_every_queue_policy_is_checked(template: dict[str, Any]) -> None:
    assert sorted(queue_policies(template)) == sorted(QUEUE_POLICIES)


@pytest.mark.parametrize("name", QUEUE_POLICIES)
def test_queue_policies_deny_non_tls_and_admit_only_eventbridge_from_their_rules(
    template: dict[str, Any], name: str
) -> None:
    p = props(template, name, "AWS::SQS::QueuePolicy")
    queues = {ref(q) for q in p["Queues"]}
    assert len(queues) == 2  # a queue and its dead-letter queue
    expected_rules = rules_sending_to(template, queues)
    assert expected_rules, name
    statements = p["PolicyDocument"]["Statement"]
    allows = [s for s in statements if s["Effect"] == "Allow"]
    denies = [s for s in statements if s["Effect"] == "Deny"]
    assert allows
    for allow in allows:
        assert allow["Principal"] == {"Service": "events.amazonaws.com"}
        assert as_list(allow["Action"]) == ["sqs:SendMessage"]
        assert set(allow["Condition"]) == {"ArnEquals"}
        assert {
            getatt(a, "Arn") for a in as_list(allow["Condition"]["ArnEquals"]["aws:SourceArn"])
        } == expected_rules
    deny, _ = sorted(denies, key=lambda d: d["Action"] != "sqs:*")  # the TLS Deny, then the senders'
    assert deny["Principal"] == "*" and deny["Action"] == "sqs:*"
    assert {getatt(r, "Arn") for r in deny["Resource"]} == queues
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}

    # Evaluated: EventBridge from its rules over TLS, and nothing without TLS.
    policy = resolve(p["PolicyDocument"], template)
    rule_arns = [resolve({"Fn::GetAtt": [r, "Arn"]}, template) for r in sorted(expected_rules)]
    for queue in sorted(queues):
        queue_arn = resolve({"Fn::GetAtt": [queue, "Arn"]}, template)

        def send(
            principal: str,
            *,
            tls: bool = True,
            source: str | None = None,
            action: str = "sqs:SendMessage",
            queue_arn: str = queue_arn,
        ) -> bool:
            context = {"aws:SourceArn": source} if source else {}
            return allowed(
                policy, Request(principal, action, queue_arn, iam_allows=True, tls=tls, context=context)
            )

        for rule_arn in rule_arns:
            assert send("events.amazonaws.com", source=rule_arn), (queue, rule_arn)
            assert not send("events.amazonaws.com", source=rule_arn, tls=False), (queue, rule_arn)
        other_rule = f"arn:aws:events:{REGION}:{ACCOUNT}:rule/SomeoneElsesRule"
        assert not send("events.amazonaws.com", source=other_rule), queue  # the confused deputy
        assert not send("sns.amazonaws.com"), queue
        assert not send(role("SomeoneElse", OTHER_ACCOUNT)), queue
        for action in ("sqs:SendMessage", "sqs:ReceiveMessage", "sqs:PurgeQueue"):
            assert not send(ADMIN, tls=False, action=action), (queue, action)
        # The function polling its queue over TLS is not in the policy's way (its role allows it).
        assert send(role("Poller"), action="sqs:ReceiveMessage"), queue
        # No principal of the account may post its own text, whatever its IAM policies allow
        # (same account: an identity policy alone would be enough without the explicit Deny) ...
        senders = [ADMIN, ROOT_USER, f"arn:aws:iam::{ACCOUNT}:user/someone"]
        if name != "AlertsQueuePolicy":
            senders.append(role("AlertsFunctionRole"))
        for sender in senders:
            assert not send(sender), (queue, sender)
            assert not send(sender, source=rule_arns[0]), (queue, sender)  # a forged aws:SourceArn
        # ... except the redrive role, which StartMessageMoveTask sends as (docs/operations.md),
        # and the alerts function to its own queue: an incident's summary timer (docs/alerts.md,
        # "Incidents"; its role grants sqs:SendMessage on AlertsQueue alone: test_alerts_template.py).
        assert send(REDRIVE_ROLE), queue
        if name == "AlertsQueuePolicy":
            assert send(role("AlertsFunctionRole")), queue
        assert not send(role("batchpilot-redrive", OTHER_ACCOUNT)), queue  # same name, other account


def test_only_a_capacity_and_ledger_schedule_and_function_may_dead_letter_their_runs(
    template: dict[str, Any],
) -> None:
    for fn in ("Capacity", "Ledger"):
        policy = resolve(
            props(template, f"{fn}QueuePolicy", "AWS::SQS::QueuePolicy")["PolicyDocument"], template
        )
        dead_letter = resolve({"Fn::GetAtt": [f"{fn}DeadLetterQueue", "Arn"]}, template)

        def send(principal: str, dead_letter: str = dead_letter, policy: dict[str, Any] = policy) -> bool:
            return allowed(policy, Request(principal, "sqs:SendMessage", dead_letter, iam_allows=True))

        assert send(role(f"{fn}ScheduleRole")), fn  # EventBridge Scheduler's DeadLetterConfig
        assert send(role(f"{fn}FunctionRole")), fn  # the function's EventInvokeConfig OnFailure
        assert not send(role("MetricsFunctionRole")), fn


def test_every_queue_is_encrypted(template: dict[str, Any]) -> None:
    # checkov's CKV_AWS_27 reads only KmsMasterKeyId, so it is skipped in .checkov.yaml; this holds instead.
    queues = resources_of_type(template, "AWS::SQS::Queue")
    assert queues
    for name, queue in queues.items():
        p = queue["Properties"]
        assert p.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in p, name


# ---------------------------------------------------------------------- the on-call topic
def test_only_the_alerts_function_and_this_accounts_alarms_may_publish_to_the_on_call_topic(
    template: dict[str, Any],
) -> None:
    p = props(template, "AlertsOnCallTopicPolicy", "AWS::SNS::TopicPolicy")
    assert [ref(t) for t in p["Topics"]] == ["AlertsOnCallTopic"]
    policy = resolve(p["PolicyDocument"], template)
    topic = resolve({"Ref": "AlertsOnCallTopic"}, template)
    alarm = f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:batchpilot-AlertsErrorsAlarm"

    def publish(principal: str | None, *, tls: bool = True, **context: str) -> bool:
        return allowed(
            policy, Request(principal, "sns:Publish", topic, iam_allows=True, tls=tls, context=context)
        )

    assert publish(role("AlertsFunctionRole"))
    assert publish("cloudwatch.amazonaws.com", **{"aws:SourceAccount": ACCOUNT, "aws:SourceArn": alarm})
    other_alarm = alarm.replace(ACCOUNT, OTHER_ACCOUNT)
    assert not publish(
        "cloudwatch.amazonaws.com", **{"aws:SourceAccount": OTHER_ACCOUNT, "aws:SourceArn": other_alarm}
    )
    assert not publish(role("AlertsFunctionRole"), tls=False)
    for forger in (
        role("RecoveryFunctionRole"),
        role("CapacityFunctionRole"),
        ADMIN,
        ROOT_USER,
        role("AlertsFunctionRole", OTHER_ACCOUNT),
        "events.amazonaws.com",
        None,
    ):
        assert not publish(forger), forger


def test_only_this_stacks_alarms_may_publish_to_the_watchdog_topic(template: dict[str, Any]) -> None:
    p = props(template, "AlertsWatchdogTopicPolicy", "AWS::SNS::TopicPolicy")
    assert [ref(t) for t in p["Topics"]] == ["AlertsWatchdogTopic"]
    policy = resolve(p["PolicyDocument"], template)
    topic = resolve({"Ref": "AlertsWatchdogTopic"}, template)
    assert topic == f"arn:aws:sns:{REGION}:{ACCOUNT}:{STACK}-alerts-watchdog"
    alarm = f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:batchpilot/{STACK}/AlertsErrorsAlarm"

    def publish(principal: str | None, *, tls: bool = True, **context: str) -> bool:
        return allowed(
            policy, Request(principal, "sns:Publish", topic, iam_allows=True, tls=tls, context=context)
        )

    cloudwatch = "cloudwatch.amazonaws.com"
    assert publish(cloudwatch, **{"aws:SourceAccount": ACCOUNT, "aws:SourceArn": alarm})
    assert not publish(cloudwatch, tls=False, **{"aws:SourceAccount": ACCOUNT, "aws:SourceArn": alarm})
    another_stack = alarm.replace(f"/{STACK}/", f"/{STACK}-prod/")
    assert not publish(cloudwatch, **{"aws:SourceAccount": ACCOUNT, "aws:SourceArn": another_stack})
    other_account = alarm.replace(ACCOUNT, OTHER_ACCOUNT)
    assert not publish(cloudwatch, **{"aws:SourceAccount": OTHER_ACCOUNT, "aws:SourceArn": other_account})
    # Not even the alerts function: every message here is CloudWatch's own.
    for forger in (role("AlertsFunctionRole"), ADMIN, ROOT_USER, "events.amazonaws.com", None):
        assert not publish(forger), forger


# ---------------------------------------------------------------------- concurrency
def test_capacity_runs_from_blocked_events_do_not_fan_out(
    template: dict[str, Any], translated: dict[str, Any]
) -> None:
    function = template["Resources"]["CapacityFunction"]
    (event,) = sqs_events(function).values()
    assert event["ScalingConfig"] == {"MaximumConcurrency": 2}  # 2: the least Lambda accepts
    (mapping,) = [
        m["Properties"]
        for m in resources_of_type(translated, "AWS::Lambda::EventSourceMapping").values()
        if getatt(m["Properties"]["EventSourceArn"], "Arn") == "CapacityQueue"
    ]
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 2}


def test_every_function_that_acts_on_aws_or_people_has_a_concurrency_bound(template: dict[str, Any]) -> None:
    # checkov's CKV_AWS_115 (reserved concurrency) is skipped in .checkov.yaml; the bound that matters
    # is the SQS event source's MaximumConcurrency. Only metrics (no API call, no person) scales freely.
    functions = resources_of_type(template, "AWS::Serverless::Function")
    assert set(functions) > {"MetricsFunction"}
    for name, function in functions.items():
        if name == "MetricsFunction":
            continue
        for event_name, event in sqs_events(function).items():
            assert event["ScalingConfig"]["MaximumConcurrency"] >= 2, (name, event_name)


# ---------------------------------------------------------------------- checkov
def test_each_checkov_skip_has_its_reason_and_make_test_runs_checkov() -> None:
    text = (ROOT / ".checkov.yaml").read_text(encoding="utf-8")
    config = yaml.safe_load(text)
    skips = config["skip-check"]
    assert skips and len(skips) == len(set(skips))
    lines = text.splitlines()
    for check in skips:
        (index,) = [i for i, line in enumerate(lines) if line.strip() == f"- {check}"]
        assert lines[index - 1].strip().startswith("#"), f"{check}: no reason above it in .checkov.yaml"
    assert config["framework"] == ["cloudformation"] and config["skip-download"] is True
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^test:.*\bsecurity\b", makefile, re.MULTILINE)
    assert "--config-file .checkov.yaml" in makefile and "-f template.yaml" in makefile
