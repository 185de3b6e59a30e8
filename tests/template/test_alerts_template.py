"""The alerts block of template.yaml: least privilege, the encrypted on-call topic and its key policy,
the rules (job events, own events, the stack's alarms), batching for bursts, alarms and their
routing (which alarms notify a topic directly), and the Slack/Teams/policy/format parameters."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from batchpilot.alerts.alarms import ALL_ALARMS, name_prefix
from batchpilot.alerts.policy import Channel
from batchpilot.alerts.render import OnCallFormat
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.shared.events import ALARM_DETAIL_TYPE, ALARM_SOURCE
from batchpilot.shared.own_events import OWN_DETAIL_TYPES
from batchpilot_local.template import STACK_NAME, resolved_resources
from batchpilot_local.template import load_template as load_app
from batchpilot_local.testing.paths import TEMPLATE_PATH
from batchpilot_local.testing.templates import (
    ALERTS_PATH_ALARMS,
    METRICS_DETAIL_TYPES,
    as_list,
    getatt,
    props,
    ref,
    resource,
)

SECRET_ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot/slack-webhook-AbCdEf"
TOKEN_ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot/slack-bot-XyZ123"
TEAMS_ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot/teams-webhook-QwErTy"
ALARM_TOPIC = "arn:aws:sns:us-east-1:111122223333:team-alarms"
WORKFLOW_URL = (
    "https://prod-01.westus.logic.azure.com:443/workflows/0123/triggers/manual/paths/invoke"
    "?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=abc"
)


def statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for policy in role["Properties"]["Policies"]:
        for statement in as_list(policy["PolicyDocument"]["Statement"]):
            found.append(statement)
    return found


def by_sid(role: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for statement in statements(role):
        if isinstance(statement, dict) and "Fn::If" in statement:
            condition, then, _ = statement["Fn::If"]
            out[then["Sid"]] = {**then, "_condition": condition}
        else:
            out[statement["Sid"]] = statement
    return out


def test_function_environment_names_secrets_never_values(template: dict[str, Any]) -> None:
    fn = props(template, "AlertsFunction", "AWS::Serverless::Function")
    assert fn["CodeUri"] == "functions/alerts/" and fn["Handler"] == "app.lambda_handler"
    assert getatt(fn["Role"], "Arn") == "AlertsFunctionRole" and "Policies" not in fn
    variables = fn["Environment"]["Variables"]
    assert variables == {
        "BATCHPILOT_STATE_TABLE": {"Ref": "StateTable"},
        "BATCHPILOT_ONCALL_TOPIC_ARN": {"Ref": "AlertsOnCallTopic"},
        "BATCHPILOT_SLACK_WEBHOOK_SECRET": {"Ref": "SlackWebhookSecretArn"},
        "BATCHPILOT_SLACK_BOT_TOKEN_SECRET": {"Ref": "SlackBotTokenSecretArn"},
        "BATCHPILOT_SLACK_CHANNEL": {"Ref": "SlackChannel"},
        "BATCHPILOT_TEAMS_WEBHOOK_SECRET": {"Ref": "TeamsWebhookSecretArn"},
        "BATCHPILOT_ALERT_POLICY": {"Ref": "AlertRoutingPolicy"},
        "BATCHPILOT_ONCALL_MESSAGE_FORMAT": {"Ref": "OnCallMessageFormat"},
        "BATCHPILOT_ALARM_NAME_PREFIX": {"Fn::Sub": "batchpilot/${AWS::StackName}/"},
        "BATCHPILOT_ALARMS_NOTIFIED_DIRECTLY": variables["BATCHPILOT_ALARMS_NOTIFIED_DIRECTLY"],
        "BATCHPILOT_QUEUE_VISIBILITY_TIMEOUT": "360",
        "BATCHPILOT_OWNER_TAG_KEY": {"Ref": "OwnerTagKey"},
        "BATCHPILOT_OWNER_DIRECT_MESSAGE": {"Ref": "OwnerDirectMessage"},
    }
    # every variable is one the function reads: a named field, or a channel's webhook secret
    read = set(AlertsSettings._ENV.values()) | {
        AlertsSettings.webhook_variable(channel) for channel in Channel if channel is not Channel.SNS
    }
    assert set(variables) <= read


def test_the_replay_resolves_a_valid_configuration() -> None:
    env = load_app(TEMPLATE_PATH).functions["alerts"].environment
    settings = AlertsSettings.from_environ(env, function="alerts")
    assert settings.oncall_message_format is OnCallFormat.TEXT  # the default: plain text
    assert settings.alarms.prefix == name_prefix(STACK_NAME) == "batchpilot/batchpilot/"
    assert settings.state_table == "StateTable"
    assert settings.oncall_topic_arn.endswith(":AlertsOnCallTopic")
    assert settings.slack_webhook_secret is None and settings.alert_policy == ""
    assert settings.teams_webhook_secret is None and settings.chat_channels == ()


def test_queue_batches_bursts_for_digests(template: dict[str, Any], translated: dict[str, Any]) -> None:
    fn = props(template, "AlertsFunction", "AWS::Serverless::Function")
    (event,) = fn["Events"].values()
    p = event["Properties"]
    assert getatt(p["Queue"], "Arn") == "AlertsQueue"
    assert p["BatchSize"] == 100 and p["MaximumBatchingWindowInSeconds"] == 20
    assert p["ScalingConfig"] == {"MaximumConcurrency": 2}
    assert p["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    queue = props(translated, "AlertsQueue", "AWS::SQS::Queue")
    assert queue["VisibilityTimeout"] >= 6 * fn["Timeout"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 5
    # Claim leases outlive the redelivery they guard: the function is told the queue's timeout.
    visibility = fn["Environment"]["Variables"]["BATCHPILOT_QUEUE_VISIBILITY_TIMEOUT"]
    assert int(visibility) == queue["VisibilityTimeout"]


def test_rules_take_job_events_own_events_and_the_stacks_alarms(template: dict[str, Any]) -> None:
    jobs = props(template, "AlertsRule", "AWS::Events::Rule")
    assert jobs["EventBusName"] == "default"
    assert sorted(jobs["EventPattern"]["detail-type"]) == sorted(METRICS_DETAIL_TYPES)
    assert sorted(jobs["EventPattern"]["source"]) == ["aws.batch", "aws.sagemaker"]
    own = props(template, "AlertsOwnEventsRule", "AWS::Events::Rule")
    assert own["EventBusName"] == {"Ref": "BatchPilotEventBus"}  # batchpilot's own bus, not the default
    assert own["EventPattern"]["source"] == ["batchpilot"] and set(own["EventPattern"]) == {
        "source",
        "detail-type",
    }
    assert sorted(own["EventPattern"]["detail-type"]) == sorted(OWN_DETAIL_TYPES)  # every own event model
    alarms = props(template, "AlertsAlarmsRule", "AWS::Events::Rule")
    assert alarms["EventBusName"] == "default"  # where CloudWatch sends its alarm events
    assert alarms["EventPattern"] == {
        "source": [ALARM_SOURCE],
        "detail-type": [ALARM_DETAIL_TYPE],
        "detail": {"alarmName": [{"prefix": {"Fn::Sub": "batchpilot/${AWS::StackName}/"}}]},
    }
    for rule in (jobs, own, alarms):
        (target,) = rule["Targets"]
        assert getatt(target["Arn"], "Arn") == "AlertsQueue"
        assert getatt(target["DeadLetterConfig"]["Arn"], "Arn") == "AlertsDeadLetterQueue"
        assert target["RetryPolicy"] == {"MaximumRetryAttempts": 10, "MaximumEventAgeInSeconds": 3600}
    policy = props(template, "AlertsQueuePolicy", "AWS::SQS::QueuePolicy")
    (statement,) = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    sources = statement["Condition"]["ArnEquals"]["aws:SourceArn"]
    rules = sorted(getatt(s, "Arn") for s in sources)
    assert rules == ["AlertsAlarmsRule", "AlertsOwnEventsRule", "AlertsRule"]


def alarm_event(name: str) -> dict[str, Any]:
    return {
        "version": "0",
        "id": "a1a1a1a1-0000-4000-8000-000000000001",
        "detail-type": ALARM_DETAIL_TYPE,
        "source": ALARM_SOURCE,
        "account": "111122223333",
        "time": "2026-11-22T19:51:20Z",
        "region": "us-east-1",
        "resources": [f"arn:aws:cloudwatch:us-east-1:111122223333:alarm:{name}"],
        "detail": {
            "alarmName": name,
            "state": {"value": "ALARM", "timestamp": "2026-11-22T19:51:20.123+0000"},
        },
    }


def test_the_alarms_rule_delivers_exactly_the_stacks_alarms_to_the_alerts_function() -> None:
    app = load_app(TEMPLATE_PATH)
    names = [p["AlarmName"] for p in resolved_resources(TEMPLATE_PATH, "AWS::CloudWatch::Alarm").values()]
    assert len(names) >= 20 and len(set(names)) == len(names)
    for name in names:
        assert len(name) <= 255  # CloudWatch's AlarmName limit
        routes = app.routes_for(alarm_event(name))
        assert [(r.rule, r.function.short_name) for r in routes] == [("AlertsAlarmsRule", "alerts")], name
    # Another stack (one whose name starts with this one's), another team's alarm, a near miss.
    for other in (
        f"batchpilot/{STACK_NAME}-prod/AlertsErrorsAlarm",
        "team-gpu/ServerCpuTooHigh",
        f"{STACK_NAME}-AlertsErrorsAlarm",
        f"batchpilot/{STACK_NAME}",
    ):
        assert app.routes_for(alarm_event(other)) == [], other
    configuration = alarm_event(names[0]) | {"detail-type": "CloudWatch Alarm Configuration Change"}
    assert app.routes_for(configuration) == []


@pytest.mark.parametrize("alarm_topic", ["", ALARM_TOPIC])
def test_the_function_knows_which_alarms_notify_a_topic_themselves(alarm_topic: str) -> None:
    """BATCHPILOT_ALARMS_NOTIFIED_DIRECTLY names exactly the alarms the template gives an action:
    the alerts path's four (to AlertsWatchdogTopic) by default, every alarm with AlarmActionTopicArn."""
    parameters = {"AlarmActionTopicArn": alarm_topic} if alarm_topic else {}
    alarms = resolved_resources(TEMPLATE_PATH, "AWS::CloudWatch::Alarm", parameters)
    env = load_app(TEMPLATE_PATH, parameters).functions["alerts"].environment
    routing = AlertsSettings.from_environ(env, function="alerts").alarms
    with_actions = {p["AlarmName"] for p in alarms.values() if p.get("AlarmActions")}
    for p in alarms.values():
        assert p.get("AlarmActions") == p.get("OKActions")
        assert routing.is_notified_directly(p["AlarmName"]) == (p["AlarmName"] in with_actions)
    topics = {topic for p in alarms.values() for topic in p.get("AlarmActions", [])}
    if alarm_topic:
        assert routing.notified_directly == {ALL_ALARMS}
        assert with_actions == {p["AlarmName"] for p in alarms.values()}
        assert topics == {alarm_topic}
    else:
        assert {name.rsplit("/", 1)[-1] for name in with_actions} == ALERTS_PATH_ALARMS
        assert routing.notified_directly == with_actions
        assert topics == {"arn:aws:sns:us-east-1:111122223333:AlertsWatchdogTopic"}  # never the on-call topic


def test_alarm_descriptions_fit_cloudwatch_and_state_a_severity() -> None:
    alarms = resolved_resources(TEMPLATE_PATH, "AWS::CloudWatch::Alarm")
    assert alarms
    for name, p in alarms.items():
        assert 80 <= len(p["AlarmDescription"]) <= 1024, name  # AlarmDescription: at most 1,024
        assert "${" not in p["AlarmDescription"], name


def test_the_watchdog_topic_is_encrypted_and_only_exists_without_alarm_action_topic(
    template: dict[str, Any],
) -> None:
    topic = resource(template, "AlertsWatchdogTopic", "AWS::SNS::Topic")
    assert topic["Condition"] == "NoAlarmAction"
    assert template["Conditions"]["NoAlarmAction"] == {"Fn::Equals": [{"Ref": "AlarmActionTopicArn"}, ""]}
    assert getatt(topic["Properties"]["KmsMasterKeyId"], "Arn") == "AlertsTopicKey"  # CloudWatch may use it
    policy = resource(template, "AlertsWatchdogTopicPolicy", "AWS::SNS::TopicPolicy")
    assert policy["Condition"] == "NoAlarmAction"
    output = template["Outputs"]["AlertsWatchdogTopicArn"]
    assert output["Condition"] == "NoAlarmAction" and ref(output["Value"]) == "AlertsWatchdogTopic"


def test_role_is_least_privilege(template: dict[str, Any]) -> None:
    role = resource(template, "AlertsFunctionRole", "AWS::IAM::Role")
    assert not role["Properties"].get("ManagedPolicyArns")
    sids = by_sid(role)
    assert set(sids) == {
        "PollOwnQueue",
        "WriteOwnLogs",
        "PublishToOnCallTopic",
        "OwnAlertRecords",
        "DescribePreemptedServiceJobs",
        "ReadSlackSecrets",
        "ReadTeamsSecret",
    }
    # preemption events name only the job's ARN: one read-only describe for the alert
    describe = sids["DescribePreemptedServiceJobs"]
    assert as_list(describe["Action"]) == ["batch:DescribeServiceJob"] and describe["Resource"] == "*"
    assert getatt(sids["PollOwnQueue"]["Resource"], "Arn") == "AlertsQueue"
    assert getatt(sids["WriteOwnLogs"]["Resource"], "Arn") == "AlertsLogGroup"
    publish = sids["PublishToOnCallTopic"]
    assert as_list(publish["Action"]) == ["sns:Publish"]
    topic_name = props(template, "AlertsOnCallTopic", "AWS::SNS::Topic")["TopicName"]["Fn::Sub"]
    assert publish["Resource"]["Fn::Sub"].endswith(":" + topic_name)  # this topic only
    records = sids["OwnAlertRecords"]
    assert sorted(as_list(records["Action"])) == [
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
    ]
    assert getatt(records["Resource"], "Arn") == "StateTable"
    assert records["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["alerts#*"]}}
    secrets = sids["ReadSlackSecrets"]
    assert secrets["_condition"] == "HasSlackSecret"
    assert as_list(secrets["Action"]) == ["secretsmanager:GetSecretValue"]
    assert secrets["Resource"] == [
        {"Fn::If": ["HasSlackWebhook", {"Ref": "SlackWebhookSecretArn"}, {"Ref": "AWS::NoValue"}]},
        {"Fn::If": ["HasSlackBotToken", {"Ref": "SlackBotTokenSecretArn"}, {"Ref": "AWS::NoValue"}]},
    ]
    teams = sids["ReadTeamsSecret"]
    assert teams["_condition"] == "HasTeamsWebhook"
    assert as_list(teams["Action"]) == ["secretsmanager:GetSecretValue"]
    assert teams["Resource"] == {"Ref": "TeamsWebhookSecretArn"}  # that secret only
    for sid, statement in sids.items():
        if sid == "DescribePreemptedServiceJobs":  # read-only; Batch's describes take no resource ARN
            continue
        assert statement["Effect"] == "Allow" and "*" not in as_list(statement["Resource"])


def test_secret_statement_disappears_without_slack(template: dict[str, Any]) -> None:
    conditions = template["Conditions"]
    assert conditions["HasSlackWebhook"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "SlackWebhookSecretArn"}, ""]}]
    }
    assert conditions["HasSlackSecret"] == {
        "Fn::Or": [{"Condition": "HasSlackWebhook"}, {"Condition": "HasSlackBotToken"}]
    }
    assert conditions["HasTeamsWebhook"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "TeamsWebhookSecretArn"}, ""]}]
    }


def test_topic_is_encrypted_with_a_key_whose_policy_lets_the_function_publish(
    template: dict[str, Any],
) -> None:
    topic = props(template, "AlertsOnCallTopic", "AWS::SNS::Topic")
    assert getatt(topic["KmsMasterKeyId"], "Arn") == "AlertsTopicKey"
    key = props(template, "AlertsTopicKey", "AWS::KMS::Key")
    assert key["EnableKeyRotation"] is True
    sids = {s["Sid"]: s for s in key["KeyPolicy"]["Statement"]}
    function = sids["AlertsFunctionPublishesThroughSns"]
    assert getatt(function["Principal"]["AWS"], "Arn") == "AlertsFunctionRole"
    assert sorted(function["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert function["Condition"] == {
        "StringEquals": {"kms:ViaService": {"Fn::Sub": "sns.${AWS::Region}.amazonaws.com"}}
    }
    alarms = sids["CloudWatchAlarmsPublish"]
    assert alarms["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert sorted(alarms["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    admin = sids["AccountAdministersTheKey"]
    assert admin["Principal"]["AWS"] == {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}


def test_alarms(translated: dict[str, Any]) -> None:
    dlq = props(translated, "AlertsDeadLetterAlarm", "AWS::CloudWatch::Alarm")
    assert getatt(dlq["Dimensions"][0]["Value"], "QueueName") == "AlertsDeadLetterQueue"
    for name, metric in (("AlertsErrorsAlarm", "Errors"), ("AlertsThrottlesAlarm", "Throttles")):
        p = props(translated, name, "AWS::CloudWatch::Alarm")
        assert (p["Namespace"], p["MetricName"]) == ("AWS/Lambda", metric)
        assert p["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": "AlertsFunction"}}]
    failures = props(translated, "AlertsNotificationFailuresAlarm", "AWS::CloudWatch::Alarm")
    stats = {m["Id"]: m["MetricStat"]["Metric"] for m in failures["Metrics"] if "MetricStat" in m}
    assert stats
    for channel, metric in stats.items():
        assert (
            metric["MetricName"] == "NotificationsFailed" and ref(metric["Namespace"]) == "MetricsNamespace"
        )
        assert {d["Name"]: d["Value"] for d in metric["Dimensions"]} == {
            "Channel": channel,
            "Function": "alerts",
            "service": "batchpilot",
        }
    assert set(stats) == {channel.value for channel in Channel} == {"slack", "sns", "teams"}


def test_parameters(template: dict[str, Any]) -> None:
    params = template["Parameters"]
    for name in ("SlackWebhookSecretArn", "SlackBotTokenSecretArn", "TeamsWebhookSecretArn"):
        pattern = re.compile(params[name]["AllowedPattern"])
        assert params[name]["Default"] == ""
        assert pattern.fullmatch("") and pattern.fullmatch(SECRET_ARN) and pattern.fullmatch(TOKEN_ARN)
        assert pattern.fullmatch(TEAMS_ARN)
        assert not pattern.fullmatch("https://hooks.slack.com/services/T0/B0/xyz")
        assert not pattern.fullmatch(WORKFLOW_URL)  # the URL itself never goes into the stack
    assert params["AlertRoutingPolicy"]["Default"] == "" and params["AlertRoutingPolicy"]["MaxLength"] == 4096
    fmt = params["OnCallMessageFormat"]
    assert fmt["Default"] == OnCallFormat.TEXT.value  # off by default
    assert fmt["AllowedValues"] == [f.value for f in OnCallFormat]
    assert re.fullmatch(params["SlackChannel"]["AllowedPattern"], "C0123ABCD")


def test_outputs(template: dict[str, Any]) -> None:
    outputs = {name: output["Value"] for name, output in template["Outputs"].items()}
    assert ref(outputs["AlertsOnCallTopicArn"]) == "AlertsOnCallTopic"
    assert ref(outputs["AlertsDeadLetterQueueUrl"]) == "AlertsDeadLetterQueue"
    assert json.dumps(outputs)  # plain data
