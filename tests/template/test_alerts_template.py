"""The alerts block of template.yaml: least privilege, the encrypted on-call topic and its key policy,
both rules, batching for bursts, alarms, and the Slack/Teams/policy parameters."""

from __future__ import annotations

import json
import re
from typing import Any

from batchpilot.alerts.policy import Channel
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.shared.own_events import OWN_DETAIL_TYPES
from batchpilot_local.template import load_template as load_app
from batchpilot_local.testing.paths import TEMPLATE_PATH
from batchpilot_local.testing.templates import METRICS_DETAIL_TYPES, as_list, getatt, props, ref, resource

SECRET_ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot/slack-webhook-AbCdEf"
TOKEN_ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot/slack-bot-XyZ123"
TEAMS_ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot/teams-webhook-QwErTy"
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
    }
    assert set(variables) <= set(AlertsSettings._ENV.values())


def test_the_replay_resolves_a_valid_configuration() -> None:
    env = load_app(TEMPLATE_PATH).functions["alerts"].environment
    settings = AlertsSettings.from_environ(env, function="alerts")
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


def test_rules_take_job_events_and_own_events(template: dict[str, Any]) -> None:
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
    for rule in (jobs, own):
        (target,) = rule["Targets"]
        assert getatt(target["Arn"], "Arn") == "AlertsQueue"
        assert getatt(target["DeadLetterConfig"]["Arn"], "Arn") == "AlertsDeadLetterQueue"
        assert target["RetryPolicy"] == {"MaximumRetryAttempts": 10, "MaximumEventAgeInSeconds": 3600}
    policy = props(template, "AlertsQueuePolicy", "AWS::SQS::QueuePolicy")
    (statement,) = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    sources = statement["Condition"]["ArnEquals"]["aws:SourceArn"]
    assert sorted(getatt(s, "Arn") for s in sources) == ["AlertsOwnEventsRule", "AlertsRule"]


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
    assert re.fullmatch(params["SlackChannel"]["AllowedPattern"], "C0123ABCD")


def test_outputs(template: dict[str, Any]) -> None:
    outputs = {name: output["Value"] for name, output in template["Outputs"].items()}
    assert ref(outputs["AlertsOnCallTopicArn"]) == "AlertsOnCallTopic"
    assert ref(outputs["AlertsDeadLetterQueueUrl"]) == "AlertsDeadLetterQueue"
    assert json.dumps(outputs)  # plain data
