"""Checks of the real template.yaml and samconfig.toml, before and after the SAM transform.

The template is read with cfn-lint's YAML decoder (it understands !Ref, !GetAtt, !Sub ...)
and translated to plain CloudFormation with aws-sam-translator, the same library
`sam deploy` relies on. Generic tests loop over every AWS::Serverless::Function so that the
blocks added later (alerts, recovery, capacity) are held to the same rules as metrics.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

import pytest
from batchpilot.alerts.alarms import alarm_severity
from batchpilot_local.testing.paths import ROOT, TEMPLATE_PATH
from batchpilot_local.testing.templates import (
    ALERTS_PATH_ALARMS,
    DIRECT_ALARM_ACTIONS,
    METRICS_DETAIL_TYPES,
    ROUTED_ALARM_ACTIONS,
    SAMCONFIG_PATH,
    alarms_on,
    as_list,
    effective_timeout,
    function_short_name,
    getatt,
    props,
    ref,
    resource,
    resources_of_type,
    sqs_events,
)

POWERTOOLS_VARIABLES = {
    "POWERTOOLS_SERVICE_NAME": "batchpilot",
    "POWERTOOLS_METRICS_NAMESPACE": {"Ref": "MetricsNamespace"},
    "POWERTOOLS_LOG_LEVEL": {"Ref": "LogLevel"},
    "POWERTOOLS_LOGGER_LOG_EVENT": "false",
}

# What SAM may give a role that polls SQS and writes logs, and nothing else.
SQS_POLLING_AND_LOGGING_ACTIONS = {
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:ChangeMessageVisibility",
    "logs:CreateLogGroup",
    "logs:CreateLogStream",
    "logs:PutLogEvents",
}


# ----------------------------------------------------------------------------- transform


def test_sam_translation_succeeds(template: dict[str, Any], translated: dict[str, Any]) -> None:
    assert template["Transform"] == "AWS::Serverless-2016-10-31"
    assert "Transform" not in translated
    assert "Globals" not in translated
    leftovers = [n for n, r in translated["Resources"].items() if r["Type"].startswith("AWS::Serverless::")]
    assert leftovers == []
    assert resources_of_type(translated, "AWS::Lambda::Function").keys() >= {"MetricsFunction"}


def test_cfn_lint_reports_nothing() -> None:
    from cfnlint.api import lint_file

    matches = lint_file(TEMPLATE_PATH)
    assert [f"{m.rule.id} {m.message} (line {m.linenumber})" for m in matches] == []


# ----------------------------------------------------------------------------- globals, parameters


def test_globals_set_runtime_architecture_logging_and_layer(template: dict[str, Any]) -> None:
    fn = template["Globals"]["Function"]
    assert fn["Runtime"] == "python3.13"
    assert fn["Architectures"] == ["arm64"]
    assert fn["MemorySize"] == 256
    assert fn["Timeout"] == 30
    assert fn["LoggingConfig"]["LogFormat"] == "JSON"
    assert fn["Layers"] == [{"Ref": "BatchPilotLayer"}]


def test_globals_carry_the_powertools_variables(template: dict[str, Any], translated: dict[str, Any]) -> None:
    global_variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert {k: global_variables.get(k) for k in POWERTOOLS_VARIABLES} == POWERTOOLS_VARIABLES
    assert global_variables["PYDANTIC_DISABLE_PLUGINS"] == "1"
    functions = resources_of_type(translated, "AWS::Lambda::Function")
    assert functions
    for name, function in functions.items():
        variables = function["Properties"]["Environment"]["Variables"]
        assert {k: variables.get(k) for k in POWERTOOLS_VARIABLES} == POWERTOOLS_VARIABLES, name


def test_lambda_log_filter_is_never_above_info(template: dict[str, Any]) -> None:
    # EMF blobs have no "level" key; with JSON logs Lambda counts them as INFO, so an
    # ApplicationLogLevel of WARN/ERROR would drop every metric. DEBUG is allowed through.
    level = template["Globals"]["Function"]["LoggingConfig"]["ApplicationLogLevel"]
    assert level == {"Fn::If": ["IsDebugLogLevel", "DEBUG", {"Ref": "AWS::NoValue"}]}
    assert template["Conditions"]["IsDebugLogLevel"] == {"Fn::Equals": [{"Ref": "LogLevel"}, "DEBUG"]}
    functions = resources_of_type(template, "AWS::Serverless::Function")
    assert functions
    for name, function in functions.items():
        local = function["Properties"].get("LoggingConfig", {})
        assert local.get("ApplicationLogLevel", level) in ("INFO", "DEBUG", level), name


def test_parameters(template: dict[str, Any]) -> None:
    params = template["Parameters"]

    namespace = params["MetricsNamespace"]
    assert (namespace["Type"], namespace["Default"]) == ("String", "BatchPilot")
    pattern = re.compile(namespace["AllowedPattern"])
    for good in ["BatchPilot", "Team/ML Training", "a", "ml.batch_pilot-2#x:y", "x" * 255]:
        assert pattern.fullmatch(good), good
    for bad in ["", "AWS/Batch", ":x", "   ", "x" * 256, "bad*char", "naïve"]:
        assert not pattern.fullmatch(bad), bad

    retention = params["LogRetentionInDays"]
    assert (retention["Type"], retention["Default"]) == ("Number", 30)
    assert {1, 7, 14, 30, 90, 365, 3653} <= set(retention["AllowedValues"])
    assert not {0, 2, 31, 1000} & set(retention["AllowedValues"])

    level = params["LogLevel"]
    assert level["Default"] == "INFO"
    assert level["AllowedValues"] == ["DEBUG", "INFO", "WARNING", "ERROR"]

    topic = params["AlarmActionTopicArn"]
    assert (topic["Type"], topic["Default"]) == ("String", "")
    topic_pattern = re.compile(topic["AllowedPattern"])
    assert topic_pattern.fullmatch("")
    assert topic_pattern.fullmatch("arn:aws:sns:us-east-1:111122223333:batchpilot-oncall")
    assert not topic_pattern.fullmatch("arn:aws:sqs:us-east-1:111122223333:queue")
    assert template["Conditions"]["HasAlarmAction"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmActionTopicArn"}, ""]}]
    }


def test_layer_is_built_for_python313_arm64(template: dict[str, Any], translated: dict[str, Any]) -> None:
    layer = resource(template, "BatchPilotLayer", "AWS::Serverless::LayerVersion")
    p = layer["Properties"]
    assert p["ContentUri"] == "layers/batchpilot/"
    assert p["CompatibleRuntimes"] == ["python3.13"]
    assert p["CompatibleArchitectures"] == ["arm64"]
    assert p["RetentionPolicy"] == "Delete"
    # layers/batchpilot/Makefile installs arm64 wheels for CPython 3.13 and compiles the bytecode.
    assert layer["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": "arm64"}
    assert "build-BatchPilotLayer:" in (ROOT / p["ContentUri"] / "Makefile").read_text()
    assert (ROOT / p["ContentUri"]).is_dir()
    versions = resources_of_type(translated, "AWS::Lambda::LayerVersion")
    assert len(versions) == 1
    ((layer_id, version),) = versions.items()
    assert version["DeletionPolicy"] == "Delete"
    assert translated["Resources"]["MetricsFunction"]["Properties"]["Layers"] == [{"Ref": layer_id}]


# ----------------------------------------------------------------------------- the metrics block


def test_metrics_function_runtime_and_handler(template: dict[str, Any], translated: dict[str, Any]) -> None:
    source = props(template, "MetricsFunction", "AWS::Serverless::Function")
    assert source["CodeUri"] == "functions/metrics/"
    assert source["Handler"] == "app.lambda_handler"
    assert (ROOT / source["CodeUri"] / "app.py").is_file()
    p = props(translated, "MetricsFunction", "AWS::Lambda::Function")
    assert p["Runtime"] == "python3.13"
    assert p["Architectures"] == ["arm64"]
    assert p["Handler"] == "app.lambda_handler"
    assert (p["MemorySize"], p["Timeout"]) == (256, 30)


def test_metrics_queue_feeds_the_function_in_partial_batches(translated: dict[str, Any]) -> None:
    mappings = [
        m["Properties"]
        for m in resources_of_type(translated, "AWS::Lambda::EventSourceMapping").values()
        if getatt(m["Properties"]["EventSourceArn"], "Arn") == "MetricsQueue"
    ]
    assert len(mappings) == 1
    (mapping,) = mappings
    assert ref(mapping["FunctionName"]) == "MetricsFunction"
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == 10
    assert mapping["MaximumBatchingWindowInSeconds"] == 5


def test_metrics_rule_targets_the_queue_with_retry_and_dead_letter(translated: dict[str, Any]) -> None:
    p = props(translated, "MetricsRule", "AWS::Events::Rule")
    assert p["EventBusName"] == "default"
    assert p["State"] == "ENABLED"
    (target,) = p["Targets"]
    assert target["Id"] == "MetricsQueue"
    assert getatt(target["Arn"], "Arn") == "MetricsQueue"
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 10, "MaximumEventAgeInSeconds": 3600}
    assert getatt(target["DeadLetterConfig"]["Arn"], "Arn") == "MetricsDeadLetterQueue"


def test_metrics_rule_matches_exactly_the_seven_detail_types(template: dict[str, Any]) -> None:
    pattern = props(template, "MetricsRule", "AWS::Events::Rule")["EventPattern"]
    assert set(pattern) == {"source", "detail-type"}
    assert sorted(pattern["source"]) == ["aws.batch", "aws.sagemaker"]
    assert len(pattern["detail-type"]) == len(set(pattern["detail-type"])) == 7
    assert sorted(pattern["detail-type"]) == sorted(METRICS_DETAIL_TYPES)


def test_metrics_queue_redrives_to_its_dead_letter_queue(
    template: dict[str, Any], translated: dict[str, Any]
) -> None:
    queue = props(translated, "MetricsQueue", "AWS::SQS::Queue")
    dlq = props(translated, "MetricsDeadLetterQueue", "AWS::SQS::Queue")
    assert getatt(queue["RedrivePolicy"]["deadLetterTargetArn"], "Arn") == "MetricsDeadLetterQueue"
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 5
    assert queue["SqsManagedSseEnabled"] is True and dlq["SqsManagedSseEnabled"] is True
    assert queue["MessageRetentionPeriod"] == 4 * 24 * 3600
    assert dlq["MessageRetentionPeriod"] == 14 * 24 * 3600
    function = resource(template, "MetricsFunction", "AWS::Serverless::Function")
    assert queue["VisibilityTimeout"] >= 6 * effective_timeout(template, function)


def test_only_the_metrics_rule_may_send_to_the_metrics_queues(translated: dict[str, Any]) -> None:
    p = props(translated, "MetricsQueuePolicy", "AWS::SQS::QueuePolicy")
    assert sorted(ref(q) for q in p["Queues"]) == ["MetricsDeadLetterQueue", "MetricsQueue"]
    statements = p["PolicyDocument"]["Statement"]
    # The Denies: any other sender (but the redrive role), and any request without TLS.
    assert [s["Effect"] for s in statements] == ["Allow", "Deny", "Deny"]
    statement = statements[0]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert as_list(statement["Action"]) == ["sqs:SendMessage"]
    assert sorted(getatt(r, "Arn") for r in statement["Resource"]) == [
        "MetricsDeadLetterQueue",
        "MetricsQueue",
    ]
    assert getatt(statement["Condition"]["ArnEquals"]["aws:SourceArn"], "Arn") == "MetricsRule"


def test_metrics_dead_letter_alarm_watches_the_dead_letter_queue(translated: dict[str, Any]) -> None:
    p = props(translated, "MetricsDeadLetterAlarm", "AWS::CloudWatch::Alarm")
    assert (p["Namespace"], p["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    (dimension,) = p["Dimensions"]
    assert dimension["Name"] == "QueueName"
    assert getatt(dimension["Value"], "QueueName") == "MetricsDeadLetterQueue"
    assert p["Statistic"] == "Maximum"
    assert (p["Period"], p["EvaluationPeriods"], p["Threshold"]) == (300, 1, 1)
    assert p["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert p["TreatMissingData"] == "notBreaching"


@pytest.mark.parametrize(
    ("alarm", "metric"), [("MetricsErrorsAlarm", "Errors"), ("MetricsThrottlesAlarm", "Throttles")]
)
def test_metrics_function_alarms(translated: dict[str, Any], alarm: str, metric: str) -> None:
    p = props(translated, alarm, "AWS::CloudWatch::Alarm")
    assert (p["Namespace"], p["MetricName"], p["Statistic"]) == ("AWS/Lambda", metric, "Sum")
    assert p["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": "MetricsFunction"}}]
    assert (p["Threshold"], p["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert p["TreatMissingData"] == "notBreaching"


def test_every_alarm_is_named_for_the_alarms_rule_states_its_severity_and_says_what_to_do(
    translated: dict[str, Any],
) -> None:
    alarms = resources_of_type(translated, "AWS::CloudWatch::Alarm")
    assert len(alarms) >= 20
    for name, alarm in alarms.items():
        p = alarm["Properties"]
        # batchpilot/<stack>/<logical id>: what AlertsAlarmsRule's prefix matches.
        assert p["AlarmName"] == {"Fn::Sub": f"batchpilot/${{AWS::StackName}}/{name}"}, name
        description = p["AlarmDescription"]
        text = description["Fn::Sub"] if isinstance(description, dict) else description
        assert isinstance(text, str) and len(text) >= 80, name
        stated = alarm_severity(text)
        assert stated.problem is None, (name, stated.problem)
        assert text.rstrip().endswith(f"Severity: {stated.severity.value}."), name


def test_only_the_alerts_paths_alarms_notify_a_topic_directly_unless_alarm_action_topic_is_set(
    translated: dict[str, Any],
) -> None:
    alarms = resources_of_type(translated, "AWS::CloudWatch::Alarm")
    assert set(alarms) >= ALERTS_PATH_ALARMS
    for name, alarm in alarms.items():
        p = alarm["Properties"]
        expected = DIRECT_ALARM_ACTIONS if name in ALERTS_PATH_ALARMS else ROUTED_ALARM_ACTIONS
        assert p["AlarmActions"] == expected == p["OKActions"], name
        assert "InsufficientDataActions" not in p, name


def test_metrics_log_group_has_retention_and_is_the_functions_log_group(
    template: dict[str, Any], translated: dict[str, Any]
) -> None:
    group = resource(translated, "MetricsLogGroup", "AWS::Logs::LogGroup")
    assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionInDays"}
    assert group["DeletionPolicy"] in {"Delete", "Retain"}
    assert group["UpdateReplacePolicy"] == group["DeletionPolicy"]
    logging_config = props(translated, "MetricsFunction", "AWS::Lambda::Function")["LoggingConfig"]
    assert logging_config["LogGroup"] == {"Ref": "MetricsLogGroup"}
    assert logging_config["LogFormat"] == "JSON"
    assert "FunctionName" not in props(template, "MetricsFunction", "AWS::Serverless::Function")


def test_metrics_role_only_polls_its_queue_and_writes_its_logs(
    template: dict[str, Any], translated: dict[str, Any]
) -> None:
    source = props(template, "MetricsFunction", "AWS::Serverless::Function")
    assert "Policies" not in source  # an explicit role: SAM's managed policies allow every queue
    role_id = getatt(props(translated, "MetricsFunction", "AWS::Lambda::Function")["Role"], "Arn")
    assert role_id == "MetricsFunctionRole"
    role = props(translated, role_id, "AWS::IAM::Role")
    assert not role.get("ManagedPolicyArns")

    actions: set[str] = set()
    for policy in role.get("Policies", []):
        for statement in as_list(policy["PolicyDocument"]["Statement"]):
            assert statement.get("Effect") == "Allow"
            statement_actions = set(as_list(statement["Action"]))
            actions |= statement_actions
            resources = as_list(statement["Resource"])
            assert "*" not in resources
            targets = {getatt(r, "Arn") for r in resources}
            if any(a.startswith("sqs:") for a in statement_actions):
                assert targets == {"MetricsQueue"}
            else:
                assert targets == {"MetricsLogGroup"}
    assert actions <= SQS_POLLING_AND_LOGGING_ACTIONS
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "logs:PutLogEvents"} <= actions
    assert not [a for a in actions if a.split(":")[0] in {"batch", "sagemaker", "cloudwatch", "iam", "sns"}]


def test_outputs(template: dict[str, Any]) -> None:
    outputs = {name: output["Value"] for name, output in template["Outputs"].items()}
    assert getatt(outputs["MetricsFunctionArn"], "Arn") == "MetricsFunction"
    assert ref(outputs["MetricsQueueUrl"]) == "MetricsQueue"
    assert ref(outputs["MetricsDeadLetterQueueUrl"]) == "MetricsDeadLetterQueue"
    assert ref(outputs["BatchPilotLayerArn"]) == "BatchPilotLayer"


# ----------------------------------------------------------------------------- every function


def test_every_function_has_log_group_queue_dead_letter_queue_and_alarms(template: dict[str, Any]) -> None:
    functions = resources_of_type(template, "AWS::Serverless::Function")
    assert functions
    for function_id, function in functions.items():
        assert function_id.endswith("Function"), function_id
        name = function_id.removesuffix("Function")
        p = function["Properties"]

        log_group_id = ref(p.get("LoggingConfig", {}).get("LogGroup"))
        assert log_group_id == f"{name}LogGroup", f"{function_id}: LoggingConfig.LogGroup"
        group = props(template, log_group_id, "AWS::Logs::LogGroup")
        assert "RetentionInDays" in group, log_group_id
        assert "FunctionName" not in p, f"{function_id}: let CloudFormation name the function"

        events = sqs_events(function)
        # A function fed by something else (e.g. EventBridge Scheduler) needs its own
        # dead-letter checks here before this assertion is relaxed for it.
        assert events, f"{function_id} has no SQS event"
        for event_name, event in events.items():
            queue_id = getatt(event["Queue"], "Arn")
            assert queue_id == f"{name}Queue", f"{function_id}.{event_name}"
            assert "ReportBatchItemFailures" in event.get("FunctionResponseTypes", []), event_name
            queue = props(template, queue_id, "AWS::SQS::Queue")
            dlq_id = getatt(queue.get("RedrivePolicy", {}).get("deadLetterTargetArn"), "Arn")
            assert dlq_id == f"{name}DeadLetterQueue", f"{queue_id} has no dead-letter queue"
            resource(template, dlq_id, "AWS::SQS::Queue")
            assert queue["VisibilityTimeout"] >= 6 * effective_timeout(template, function), queue_id
            dims = {"Fn::GetAtt": [dlq_id, "QueueName"]}
            assert alarms_on(
                template, "AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", dims
            ) == [f"{name}DeadLetterAlarm"]

        fn_dim = {"Ref": function_id}
        assert alarms_on(template, "AWS/Lambda", "Errors", "FunctionName", fn_dim), (
            f"{function_id}: Errors alarm"
        )
        assert alarms_on(template, "AWS/Lambda", "Throttles", "FunctionName", fn_dim), (
            f"{function_id}: Throttles"
        )


def test_every_rule_routes_to_exactly_one_function_through_its_queue(template: dict[str, Any]) -> None:
    """The replay runner's route: Rule -> target queue -> function with that SQS event."""
    functions = resources_of_type(template, "AWS::Serverless::Function")
    consumers: dict[str, list[str]] = {}
    for function_id, function in functions.items():
        for event in sqs_events(function).values():
            consumers.setdefault(getatt(event["Queue"], "Arn"), []).append(function_id)

    rules = resources_of_type(template, "AWS::Events::Rule")
    assert rules
    short_names = set()
    for rule_id, rule in rules.items():
        assert rule_id.endswith("Rule"), rule_id
        assert rule["Properties"]["Targets"], rule_id
        for target in rule["Properties"]["Targets"]:
            queue_id = getatt(target["Arn"], "Arn")
            assert queue_id and queue_id.endswith("Queue"), f"{rule_id} must target !GetAtt <Name>Queue.Arn"
            resource(template, queue_id, "AWS::SQS::Queue")
            name = queue_id.removesuffix("Queue")
            # <Name>Rule, or <Name><Something>Rule when one function has several rules.
            assert rule_id.startswith(name), (rule_id, queue_id)
            assert consumers.get(queue_id) == [f"{name}Function"], queue_id
            assert "DeadLetterConfig" in target and "RetryPolicy" in target, rule_id
            code_uri = functions[f"{name}Function"]["Properties"]["CodeUri"]
            short = function_short_name(code_uri)
            assert short == name.lower(), (rule_id, code_uri)
            short_names.add(short)
    assert "metrics" in short_names


# ----------------------------------------------------------------------------- samconfig.toml


def _overrides(text: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in text.split())


@pytest.mark.parametrize(
    ("env", "stack", "retention"), [("default", "batchpilot", "30"), ("prod", "batchpilot-prod", "90")]
)
def test_samconfig_environments(template: dict[str, Any], env: str, stack: str, retention: str) -> None:
    config = tomllib.loads(SAMCONFIG_PATH.read_text(encoding="utf-8"))
    assert config["version"] == 0.1
    section = config[env]
    assert section["global"]["parameters"]["stack_name"] == stack
    assert section["build"]["parameters"] == {"cached": True, "parallel": True}
    deploy = section["deploy"]["parameters"]
    assert deploy["capabilities"] == "CAPABILITY_IAM"
    assert deploy["confirm_changeset"] is True
    assert deploy["resolve_s3"] is True
    overrides = _overrides(deploy["parameter_overrides"])
    assert overrides["LogRetentionInDays"] == retention
    parameters = template["Parameters"]
    for key, value in overrides.items():
        assert key in parameters, key
        allowed = parameters[key].get("AllowedValues")
        if allowed is not None:
            assert value in {str(v) for v in allowed}, (key, value)
        if "AllowedPattern" in parameters[key]:
            assert re.fullmatch(parameters[key]["AllowedPattern"], value), (key, value)


def test_samconfig_sync_watches_only_outside_prod() -> None:
    config = tomllib.loads(SAMCONFIG_PATH.read_text(encoding="utf-8"))
    assert config["default"]["sync"]["parameters"]["watch"] is True
    assert config["default"]["validate"]["parameters"]["lint"] is True
    assert config.get("prod", {}).get("sync", {}).get("parameters", {}).get("watch", False) is False
