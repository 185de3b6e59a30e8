"""template.yaml as CloudFormation sees it: parsed with cfn-lint's YAML decoder (short-form
intrinsics such as ``!Ref``, ``!GetAtt``, ``!Sub``), translated by aws-sam-translator (the library
``sam deploy`` relies on), and small readers of the result; plus which sample events each function
is meant to receive.

Needs the dev extras (aws-sam-translator, cfn-lint, pytest).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from samtranslator.translator.transform import transform

from batchpilot_local.testing.paths import ROOT

SAMCONFIG_PATH = ROOT / "samconfig.toml"
REGION = "us-east-1"

# The detail-types the metrics rule (and the alerts rule) match.
METRICS_DETAIL_TYPES = [
    "Batch Job State Change",
    "Batch Job Queue Blocked",
    "Batch Service Job State Change",
    "Batch Service Job Queue Blocked",
    "Batch Service Job Preemption Started",
    "Batch Service Job Preemption Completed",
    "SageMaker Training Job State Change",
]


# Which functions each folder of events/ is meant for. A folder missing here fails the test, so a
# new kind of sample must state where it goes.
EXPECTED_BY_FOLDER: dict[str, set[str]] = {
    "batch-job": {"metrics", "alerts", "ledger"},
    "batch-job-queue-blocked": {"metrics", "alerts", "ledger"},
    "service-job": {"metrics", "alerts", "ledger"},
    "service-job-queue-blocked": {"metrics", "alerts", "ledger"},
    "service-job-preemption": {"metrics", "alerts", "ledger"},
    "sagemaker": {"metrics", "alerts", "ledger"},
    "ignored": set(),
    # The stack's own alarms (batchpilot/<stack>/...): AlertsAlarmsRule only.
    "cloudwatch-alarm": {"alerts"},
}

# Functions a single file reaches on top of its folder's set (rules that filter on the detail, not
# only on the detail-type). RecoveryRule: terminal FAILED Batch jobs, Failed/Stopped SageMaker
# training jobs not created by AWS Batch.
EXTRA_BY_FILE: dict[str, set[str]] = {
    **{
        f"batch-job/{name}.json": {"recovery"}
        for name in (
            "array-child-failed",
            "failed-application-error",
            "failed-attempt-timeout",
            "failed-before-start-no-attempts",
            "failed-cannot-pull-container",
            "failed-eks-oom-killed",
            "failed-job-state-time-limit",
            "failed-out-of-memory",
            "failed-spot-reclaim",
            "failed-without-job-arn",
            "multi-node-node-failed-ecs-properties",
            "multi-node-parent-failed",
        )
    },
    **{
        f"service-job/{name}.json": {"recovery"}
        for name in (
            "failed-algorithm-error",
            "failed-internal-server-error",
            "failed-job-state-time-limit",
            "failed-preemption-budget-spent",
            "failed-resource-limit-exceeded",
            "failed-sagemaker-capacity",
            "failed-user-terminated",
            "failed-validation",
        )
    },
    **{
        f"sagemaker/{name}.json": {"recovery"}
        for name in (
            "failed-algorithm-error",
            "failed-capacity-error",
            "failed-ec2-insufficient-capacity",
            "failed-internal-server-error",
            "failed-resource-limit-exceeded",
            "stopped-by-user",
            "stopped-max-runtime-exceeded",
            "stopped-max-wait-time-exceeded",
        )
    },
    # CapacityRule: service jobs blocked by their service environment's maxCapacity.
    "service-job-queue-blocked/misconfiguration-service-environment-max-resource.json": {"capacity"},
}


# The alarms on the alerts path: their own action notifies AlertsWatchdogTopic (or
# AlarmActionTopicArn), so they reach people when the alerts function cannot.
ALERTS_PATH_ALARMS = frozenset(
    {"AlertsDeadLetterAlarm", "AlertsErrorsAlarm", "AlertsThrottlesAlarm", "AlertsNotificationFailuresAlarm"}
)
# AlarmActions and OKActions of the other alarms: only the topic AlarmActionTopicArn names, when
# it names one (the alerts function gets their state changes through AlertsAlarmsRule).
ROUTED_ALARM_ACTIONS = {
    "Fn::If": ["HasAlarmAction", [{"Ref": "AlarmActionTopicArn"}], {"Ref": "AWS::NoValue"}]
}
# ... and of the alerts path's alarms.
DIRECT_ALARM_ACTIONS = {
    "Fn::If": ["HasAlarmAction", [{"Ref": "AlarmActionTopicArn"}], [{"Ref": "AlertsWatchdogTopic"}]]
}


class ManagedPolicyMap:
    """Stand-in for samtranslator's ManagedPolicyLoader (which calls IAM): `load()` maps
    AWS managed policy names to ARNs. Only used when a function's Policies name one."""

    def load(self) -> dict[str, str]:
        """AWS managed policy name → ARN, for the two policies SAM itself may attach."""
        names = ["service-role/AWSLambdaBasicExecutionRole", "service-role/AWSLambdaSQSQueueExecutionRole"]
        return {name.rsplit("/", 1)[-1]: f"arn:aws:iam::aws:policy/{name}" for name in names}


def parse_template(text: str) -> dict[str, Any]:
    """Parse CloudFormation YAML (short-form intrinsics included) into plain dicts/lists
    (intrinsics in their long form, e.g. ``{"Fn::GetAtt": [...]}``).

    Raises:
        AssertionError: cfn-lint's decoder reported errors (listed in the message).
    """
    from cfnlint.decode import decode_str  # imported here: cfn-lint takes seconds to import

    parsed, errors = decode_str(text)
    assert not errors, [str(error) for error in errors]
    # A JSON round trip turns cfn-lint's node subclasses into plain dicts, lists and strings.
    plain: dict[str, Any] = json.loads(json.dumps(parsed))
    return plain


def translate(template: dict[str, Any]) -> dict[str, Any]:
    """Run the SAM transform as `sam deploy` would after `sam package`: local CodeUri /
    ContentUri folders are replaced by S3 URIs, because the translator accepts only those.
    ``template`` is not changed; returns plain CloudFormation (no ``Transform``).

    Raises:
        samtranslator.model.exceptions.InvalidDocumentException: the transform failed.
    """
    sam = copy.deepcopy(template)
    for resource in sam.get("Resources", {}).values():
        properties = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if isinstance(properties.get(key), str) and not properties[key].startswith("s3://"):
                properties[key] = f"s3://batchpilot-artifacts/{properties[key]}"
    with pytest.MonkeyPatch.context() as env:
        # samtranslator insists on a boto3 session region even when AWS::Region is given.
        env.setenv("AWS_DEFAULT_REGION", REGION)
        env.delenv("AWS_PROFILE", raising=False)
        translated: dict[str, Any] = transform(
            sam, {"AWS::Region": REGION, "AWS::AccountId": "111122223333"}, ManagedPolicyMap()
        )
        return translated


# ----------------------------------------------------------------------------- readers
def resources_of_type(tpl: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """The resources of ``tpl`` of type ``resource_type`` (e.g. ``AWS::SQS::Queue``), by logical id."""
    return {name: res for name, res in tpl["Resources"].items() if res["Type"] == resource_type}


def resource(tpl: dict[str, Any], name: str, resource_type: str) -> dict[str, Any]:
    """The resource ``name`` of ``tpl``.

    Raises:
        AssertionError: it is missing or not of type ``resource_type``.
    """
    assert name in tpl["Resources"], f"{name} missing"
    assert tpl["Resources"][name]["Type"] == resource_type, f"{name} is not {resource_type}"
    found: dict[str, Any] = tpl["Resources"][name]
    return found


def props(tpl: dict[str, Any], name: str, resource_type: str) -> dict[str, Any]:
    """The ``Properties`` of :func:`resource` (``{}`` when it has none)."""
    properties: dict[str, Any] = resource(tpl, name, resource_type).get("Properties", {})
    return properties


def getatt(value: Any, attribute: str) -> str | None:
    """Logical id X if value is {"Fn::GetAtt": [X, attribute]} (or "X.attribute")."""
    if isinstance(value, dict) and list(value) == ["Fn::GetAtt"]:
        target = value["Fn::GetAtt"]
        if isinstance(target, str):
            target = target.split(".", 1)
        if len(target) == 2 and target[1] == attribute:
            return str(target[0])
    return None


def ref(value: Any) -> str | None:
    """Logical id or parameter X if value is ``{"Ref": X}``."""
    if isinstance(value, dict) and list(value) == ["Ref"]:
        return str(value["Ref"])
    return None


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a list, else ``[value]`` (CloudFormation accepts either in many places)."""
    return value if isinstance(value, list) else [value]


def sqs_events(function: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A function resource's SQS event sources' ``Properties``, by event name."""
    events = function.get("Properties", {}).get("Events", {}) or {}
    return {name: event.get("Properties", {}) for name, event in events.items() if event.get("Type") == "SQS"}


def effective_timeout(template: dict[str, Any], function: dict[str, Any]) -> int:
    """A function's ``Timeout`` in seconds, from ``Globals.Function`` when it sets none."""
    return int(function["Properties"].get("Timeout", template["Globals"]["Function"]["Timeout"]))


def alarms_on(tpl: dict[str, Any], namespace: str, metric: str, dimension: str, value: Any) -> list[str]:
    """Logical ids of the CloudWatch alarms on ``namespace``/``metric`` with ``dimension`` = ``value``."""
    found = []
    for name, alarm in resources_of_type(tpl, "AWS::CloudWatch::Alarm").items():
        p = alarm["Properties"]
        dims = {d["Name"]: d["Value"] for d in p.get("Dimensions", [])}
        if p.get("Namespace") == namespace and p.get("MetricName") == metric and dims.get(dimension) == value:
            found.append(name)
    return found


def function_short_name(code_uri: str) -> str:
    """functions/metrics/ -> "metrics" (the replay runner's naming rule)."""
    return Path(code_uri.rstrip("/")).name


# --------------------------------------------------------------- a deploy, as CloudFormation makes it
_NO_VALUE = object()


class Deployed:
    """A translated template (:func:`translate`) as CloudFormation deploys it with ``parameters``
    (the rest at their ``Default``): its conditions evaluated, and ``Ref`` to a parameter,
    ``Fn::If`` and ``AWS::NoValue`` resolved in what :meth:`resolve` is given.

    Independent of the replay's own template reader (``batchpilot_local.template``): it reads the
    CloudFormation that aws-sam-translator makes (the Lambda functions and event source mappings SAM
    creates), not the SAM template.

    Raises (from the constructor):
        AssertionError: a parameter is not declared, or a condition uses a function this reader
            does not evaluate.
    """

    def __init__(self, translated: dict[str, Any], parameters: dict[str, str] | None = None) -> None:
        self.template = translated
        declared = translated.get("Parameters", {})
        given = dict(parameters or {})
        assert set(given) <= set(declared), sorted(set(given) - set(declared))
        self.parameters = {
            name: given.get(name, str(spec.get("Default", ""))) for name, spec in declared.items()
        }
        self._conditions: dict[str, bool] = {}
        for name in translated.get("Conditions", {}):
            self.condition(name)

    def condition(self, name: str) -> bool:
        """The value of condition ``name``."""
        if name not in self._conditions:
            self._conditions[name] = self._truth(self.template["Conditions"][name])
        return self._conditions[name]

    def _truth(self, node: Any) -> bool:
        (function, argument), *_ = node.items()
        if function == "Condition":
            return self.condition(argument)
        if function == "Fn::Equals":
            left, right = (self.resolve(a) for a in argument)
            return bool(str(left) == str(right))
        if function == "Fn::Not":
            return not self._truth(argument[0])
        if function == "Fn::Or":
            return any(self._truth(a) for a in argument)
        if function == "Fn::And":
            return all(self._truth(a) for a in argument)
        raise AssertionError(f"condition function {function} is not evaluated here")

    def resolve(self, node: Any) -> Any:
        """``node`` with ``Ref`` to parameters, ``Fn::If`` and ``AWS::NoValue`` resolved (other
        intrinsics are kept as they are)."""
        value = self._resolve(node)
        return None if value is _NO_VALUE else value

    def _resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (self._resolve(item) for item in node) if v is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if list(node) == ["Ref"] and node["Ref"] == "AWS::NoValue":
            return _NO_VALUE
        if list(node) == ["Ref"] and node["Ref"] in self.parameters:
            return self.parameters[node["Ref"]]
        if list(node) == ["Fn::If"]:
            name, when_true, when_false = node["Fn::If"]
            return self._resolve(when_true if self.condition(name) else when_false)
        resolved = {key: self._resolve(value) for key, value in node.items()}
        return {key: value for key, value in resolved.items() if value is not _NO_VALUE}

    def functions(self) -> dict[str, str]:
        """Every ``AWS::Lambda::Function`` SAM creates (and its resource has no false
        ``Condition``): logical id → short name (the last folder of its code's S3 key)."""
        out = {}
        for name, res in resources_of_type(self.template, "AWS::Lambda::Function").items():
            if "Condition" in res and not self.condition(res["Condition"]):
                continue
            key = res["Properties"]["Code"]["S3Key"]
            out[name] = function_short_name(str(key))
        return out

    def event_sources(self) -> dict[str, list[tuple[str, int, int]]]:
        """Per function short name, its SQS event source mappings as Lambda runs them: ``(queue
        logical id, BatchSize, MaximumBatchingWindowInSeconds)``, Lambda's defaults (10, 0) where
        the mapping sets none; sorted."""
        functions = self.functions()
        out: dict[str, list[tuple[str, int, int]]] = {}
        for res in resources_of_type(self.template, "AWS::Lambda::EventSourceMapping").values():
            props = self.resolve(res["Properties"])
            queue = getatt(props["EventSourceArn"], "Arn")
            function = ref(props["FunctionName"])
            if queue is None or function not in functions:
                continue
            source = (
                queue,
                int(props.get("BatchSize", 10)),
                int(props.get("MaximumBatchingWindowInSeconds", 0)),
            )
            out.setdefault(functions[function], []).append(source)
        return {name: sorted(sources) for name, sources in sorted(out.items())}

    def environment(self, short_name: str) -> dict[str, Any]:
        """The resolved environment variables of the function ``short_name``."""
        [logical_id] = [k for k, v in self.functions().items() if v == short_name]
        props = self.resolve(self.template["Resources"][logical_id]["Properties"])
        variables: dict[str, Any] = props.get("Environment", {}).get("Variables", {})
        return variables

    def allowed_secrets(self, role: str) -> set[str]:
        """The secrets ``secretsmanager:GetSecretValue`` is allowed on by the role's policies."""
        props = self.resolve(self.template["Resources"][role]["Properties"])
        allowed: set[str] = set()
        for policy in props.get("Policies", []):
            for statement in as_list(policy["PolicyDocument"]["Statement"]):
                actions = as_list(statement.get("Action", []))
                if statement.get("Effect") == "Allow" and "secretsmanager:GetSecretValue" in actions:
                    allowed |= {str(r) for r in as_list(statement.get("Resource", []))}
        return allowed

    def channels(self) -> list[str]:
        """Where the alerts function's messages go: ``sns``, then ``slack`` and ``teams`` when the
        function names their secret and its role may read it."""
        env = self.environment("alerts")
        [role] = [
            getatt(self.template["Resources"][k]["Properties"]["Role"], "Arn")
            for k, v in self.functions().items()
            if v == "alerts"
        ]
        assert role is not None
        allowed = self.allowed_secrets(role)
        out = ["sns"] if env.get("BATCHPILOT_ONCALL_TOPIC_ARN") else []
        slack = [env.get(v) for v in ("BATCHPILOT_SLACK_WEBHOOK_SECRET", "BATCHPILOT_SLACK_BOT_TOKEN_SECRET")]
        if any(slack) and all(s in allowed for s in slack if s):
            out.append("slack")
        teams = env.get("BATCHPILOT_TEAMS_WEBHOOK_SECRET")
        if teams and teams in allowed:
            out.append("teams")
        return out
