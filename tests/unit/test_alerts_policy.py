"""The routing policy document, its validation, and the alerts function's settings."""

from __future__ import annotations

import json

import pytest
from batchpilot.alerts.policy import Channel, PolicyError, RoutingPolicy, Severity, load_policy
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.alerts.severity import decide
from batchpilot.shared.settings import ConfigError
from batchpilot_local.testing.alerts import fact_of
from batchpilot_local.testing.samples import batch_job, sample, service_job

BASE_ENV = {
    "BATCHPILOT_STATE_TABLE": "StateTable",
    "BATCHPILOT_ONCALL_TOPIC_ARN": "arn:aws:sns:us-east-1:111122223333:batchpilot-oncall",
}


def test_empty_policy_is_the_defaults() -> None:
    for text in (None, "", "   ", "{}"):
        policy = load_policy(text)
        assert policy == RoutingPolicy()
    policy = RoutingPolicy()
    assert policy.channels_for(Severity.CRITICAL) == (Channel.SNS, Channel.SLACK)
    assert policy.channels_for(Severity.WARNING) == (Channel.SLACK,)
    assert policy.channels_for(Severity.INFO) == (Channel.SLACK,)
    assert policy.channels_for(Severity.SILENT) == ()
    # Changed by the safe defaults: a burst pages once, then one digest (was "each").
    assert (policy.digest_threshold, policy.sns_grouping, policy.recovery_expected) == (
        5,
        "page-then-digest",
        True,
    )


@pytest.mark.parametrize(
    ("document", "names"),
    [
        ({"rules": [{"match": {}, "severity": "urgent"}]}, "rules.0.severity"),
        ({"rules": [{"match": {"categroy": ["CAPACITY"]}, "severity": "info"}]}, "rules.0.match.categroy"),
        ({"rules": [{"match": {"job_queue": []}, "severity": "info"}]}, "rules.0.match.job_queue"),
        ({"channels": {"critical": ["pager"], "warning": [], "info": []}}, "channels.critical.0"),
        ({"channels": {"critical": ["sns"]}}, "channels"),
        ({"digest_threshold": 0}, "digest_threshold"),
        ({"digest_max_items": 41}, "digest_max_items"),
        ({"sns_grouping": "sometimes"}, "sns_grouping"),
        ({"mark_critical": {"queues": ["prod"]}}, "mark_critical.queues"),
        ({"version": 2}, "version"),
        ({"unknown_key": 1}, "unknown_key"),
    ],
)
def test_invalid_policy_names_the_field(document: dict[str, object], names: str) -> None:
    with pytest.raises(PolicyError) as error:
        load_policy(json.dumps(document))
    assert names in str(error.value)


def test_policy_that_is_not_a_json_object() -> None:
    with pytest.raises(PolicyError, match="not valid JSON"):
        load_policy("{rules: []")
    with pytest.raises(PolicyError, match="JSON object"):
        load_policy("[]")


def test_settings_reject_an_invalid_policy_naming_variable_and_field() -> None:
    env = {**BASE_ENV, "BATCHPILOT_ALERT_POLICY": json.dumps({"rules": [{"severity": "loud"}]})}
    with pytest.raises(ConfigError) as error:
        AlertsSettings.from_environ(env, function="alerts")
    message = str(error.value)
    assert "BATCHPILOT_ALERT_POLICY" in message and "rules.0.severity" in message


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"BATCHPILOT_STATE_TABLE": ""}, "BATCHPILOT_STATE_TABLE"),
        ({"BATCHPILOT_ONCALL_TOPIC_ARN": "not-an-arn"}, "BATCHPILOT_ONCALL_TOPIC_ARN"),
        ({"BATCHPILOT_SLACK_WEBHOOK_SECRET": "https://hooks.slack.com/x"}, "BATCHPILOT_SLACK_WEBHOOK_SECRET"),
        ({"BATCHPILOT_SLACK_BOT_TOKEN_SECRET": "bot-token"}, "BATCHPILOT_SLACK_CHANNEL"),
        ({"BATCHPILOT_SLACK_API_URL": "http://slack.example.com/api/"}, "BATCHPILOT_SLACK_API_URL"),
    ],
)
def test_settings_errors_name_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        AlertsSettings.from_environ({**BASE_ENV, **env}, function="alerts")


def test_settings_accept_secret_arns_and_the_defaults() -> None:
    arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot/slack-webhook-AbCdEf"
    settings = AlertsSettings.from_environ(
        {**BASE_ENV, "BATCHPILOT_SLACK_WEBHOOK_SECRET": arn}, function="alerts"
    )
    assert settings.slack_webhook_secret == arn
    assert settings.slack_bot_token_secret is None
    assert settings.policy == RoutingPolicy()
    assert settings.function == "alerts"


# ------------------------------------------------------------------------------- rule semantics
def test_seed_use_case_production_shares_page_research_shares_only_post() -> None:
    policy = load_policy(
        json.dumps(
            {
                "mark_critical": {"share_identifiers": ["prod*"]},
                "never_page": {"share_identifiers": ["research*"]},
            }
        )
    )
    timeout = {"attempts": [{"container": {"reason": "Job attempt duration exceeded timeout"}}]}
    prod_timeout = fact_of(batch_job("FAILED", shareIdentifier="prod-llm", **timeout))
    research_timeout = fact_of(batch_job("FAILED", shareIdentifier="research-vision", **timeout))
    assert decide(prod_timeout, RoutingPolicy()).severity is Severity.WARNING
    assert decide(prod_timeout, policy).severity is Severity.CRITICAL
    assert decide(prod_timeout, policy).channels == (Channel.SNS, Channel.SLACK)
    assert decide(research_timeout, policy).severity is Severity.WARNING

    pull = {"attempts": [{"container": {"reason": "CannotPullContainerError: pull access denied"}}]}
    research_misconfig = fact_of(batch_job("FAILED", shareIdentifier="research-vision", **pull))
    assert decide(research_misconfig, RoutingPolicy()).severity is Severity.CRITICAL
    decision = decide(research_misconfig, policy)
    assert decision.severity is Severity.WARNING and decision.channels == (Channel.SLACK,)
    assert "never pages" in decision.why

    # A preemption on a production share stays info: mark_critical only raises warnings.
    preempted = fact_of(sample("service-job-preemption/started"))
    assert decide(preempted, policy).severity is Severity.INFO


def test_rules_apply_in_order_and_see_the_severity_so_far() -> None:
    policy = load_policy(
        json.dumps(
            {
                "rules": [
                    {"match": {"job_queue": ["nightly-*"], "status": ["SUCCEEDED"]}, "severity": "info"},
                    {"match": {"category": ["CAPACITY"], "job_kind": ["service-job"]}, "severity": "warning"},
                    {
                        "match": {"severity": ["warning"], "job_queue": ["*-highpri"]},
                        "severity": "critical",
                        "description": "high-priority queues page on warnings",
                    },
                ]
            }
        )
    )
    nightly = batch_job("SUCCEEDED", jobQueue="arn:aws:batch:us-east-1:111122223333:job-queue/nightly-eval")
    assert decide(fact_of(nightly), RoutingPolicy()).severity is Severity.SILENT
    assert decide(fact_of(nightly), policy).severity is Severity.INFO

    capacity = service_job(
        "FAILED", statusReason="Received status from SageMaker: CapacityError: no capacity"
    )
    decision = decide(fact_of(capacity), policy)  # default: info (recovery resubmits it)
    assert decision.severity is Severity.CRITICAL  # rule 1 → warning, rule 2 sees warning → critical
    assert decision.why == "routing policy rule 2 (high-priority queues page on warnings)"


def test_a_given_field_never_matches_a_fact_without_that_value() -> None:
    policy = load_policy(json.dumps({"rules": [{"match": {"quota_share": ["*"]}, "severity": "silent"}]}))
    pull = {"attempts": [{"container": {"reason": "CannotPullContainerError: x"}}]}
    assert decide(fact_of(batch_job("FAILED", **pull)), policy).severity is Severity.CRITICAL


def test_channels_can_route_a_severity_nowhere_or_elsewhere() -> None:
    policy = load_policy(
        json.dumps({"channels": {"critical": ["sns"], "warning": ["sns", "slack"], "info": []}})
    )
    spot = fact_of(sample("batch-job/runnable-retrying-after-spot-reclaim"))
    decision = decide(spot, policy)
    assert decision.severity is Severity.INFO and decision.channels == () and not decision.notify


def test_recovery_not_expected_makes_recoverable_failures_critical() -> None:
    policy = load_policy(json.dumps({"recovery_expected": False}))
    spot = fact_of(sample("batch-job/failed-spot-reclaim"))
    assert decide(spot, RoutingPolicy()).severity is Severity.INFO
    assert decide(spot, policy).severity is Severity.CRITICAL


# ------------------------------------------------------------------ per-share Slack channels
TEAM_POLICY = {
    "slack_channels": [
        {"match": {"share_identifier": ["nlp*"]}, "slack_channel": "#team-nlp-training"},
        {"match": {"quota_share": ["vision-*"]}, "slack_channel": "C0VISION01"},
    ]
}


def test_slack_channel_routes_are_validated() -> None:
    policy = load_policy(json.dumps(TEAM_POLICY))
    assert [r.slack_channel for r in policy.slack_channels] == ["#team-nlp-training", "C0VISION01"]


@pytest.mark.parametrize(
    ("route", "names"),
    [
        ({"match": {"share_identifier": ["nlp*"]}}, "slack_channels.0.slack_channel"),
        ({"match": {}, "slack_channel": "#team nlp"}, "slack_channels.0.slack_channel"),
        ({"match": {}, "slack_channel": ""}, "slack_channels.0.slack_channel"),
        ({"match": {}, "slack_channel": "#" + "x" * 81}, "slack_channels.0.slack_channel"),
        (
            {"match": {"share_identifier": []}, "slack_channel": "#x"},
            "slack_channels.0.match.share_identifier",
        ),
        ({"slack_channel": "#x", "severity": "info"}, "slack_channels.0.severity"),
    ],
)
def test_invalid_routes_name_the_field(route: dict[str, object], names: str) -> None:
    with pytest.raises(PolicyError) as error:
        load_policy(json.dumps({"slack_channels": [route]}))
    assert names in str(error.value)


def test_a_route_keeps_the_severity_and_the_last_matching_route_wins() -> None:
    policy = load_policy(
        json.dumps(
            {
                "slack_channels": [
                    {"match": {"share_identifier": ["prod*"]}, "slack_channel": "#team-prod"},
                    {"match": {"job_queue": ["sm-training-*"]}, "slack_channel": "#sm-training"},
                    {"match": {"severity": ["info"]}, "slack_channel": "#info-only"},
                ]
            }
        )
    )
    fact = fact_of(sample("service-job/failed-validation"))  # share "prod", critical by default
    decision = decide(fact, policy)
    assert decision == decide(fact, RoutingPolicy())  # severity and channels untouched
    values = fact.match_values()
    assert policy.destination(Channel.SLACK, values, decision.severity) == "#sm-training"
    assert policy.destination(Channel.SLACK, values, Severity.INFO) == "#info-only"  # final severity
    assert policy.destination(Channel.TEAMS, values, decision.severity) is None
    assert policy.destination(Channel.SNS, values, decision.severity) is None
    other = fact_of(batch_job("FAILED", shareIdentifier="research"))
    assert policy.destination(Channel.SLACK, other.match_values(), Severity.WARNING) is None


def test_settings_refuse_slack_routes_without_a_bot_token_naming_them() -> None:
    webhook = "arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot/slack-webhook-AbCdEf"
    env = {
        **BASE_ENV,
        "BATCHPILOT_SLACK_WEBHOOK_SECRET": webhook,
        "BATCHPILOT_ALERT_POLICY": json.dumps(TEAM_POLICY),
    }
    with pytest.raises(ConfigError) as error:
        AlertsSettings.from_environ(env, function="alerts")
    message = str(error.value)
    assert "BATCHPILOT_ALERT_POLICY" in message
    assert "slack_channels.0, slack_channels.1" in message
    assert "BATCHPILOT_SLACK_BOT_TOKEN_SECRET" in message
    bot = {**env, "BATCHPILOT_SLACK_BOT_TOKEN_SECRET": "bot-token", "BATCHPILOT_SLACK_CHANNEL": "C0DEFAULT1"}
    settings = AlertsSettings.from_environ(bot, function="alerts")
    assert len(settings.policy.slack_channels) == 2
