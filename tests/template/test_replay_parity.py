"""The replay is the deployment: with the same parameters, `batchpilot replay` wires exactly the
functions, event source mappings and message channels that a deploy of template.yaml creates.

The deploy side is the CloudFormation aws-sam-translator makes from the template (the Lambda
functions and event source mappings SAM generates), its conditions evaluated at the parameters'
values (:class:`batchpilot_local.testing.templates.Deployed`); the replay side is what the replay
wires (``Replayer.wiring``) and, run on real events, where its messages actually went.
"""

from __future__ import annotations

from typing import Any

import pytest
from batchpilot_local.replay import Replayer
from batchpilot_local.testing.alerts import SLACK_PARAMETER_VALUE, TEAMS_PARAMETER_VALUE
from batchpilot_local.testing.paths import TEMPLATE_PATH
from batchpilot_local.testing.samples import sample
from batchpilot_local.testing.templates import Deployed

BOT_TOKEN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot/slack-bot-AbCdEf"
STACKS: dict[str, dict[str, str]] = {
    "default": {},
    "slack webhook": {"SlackWebhookSecretArn": SLACK_PARAMETER_VALUE},
    "teams": {"TeamsWebhookSecretArn": TEAMS_PARAMETER_VALUE},
    "slack bot and teams": {
        "SlackBotTokenSecretArn": BOT_TOKEN,
        "SlackChannel": "C0TEAM00001",
        "TeamsWebhookSecretArn": TEAMS_PARAMETER_VALUE,
    },
    "slack set empty": {"SlackWebhookSecretArn": ""},  # as --parameter-overrides 'SlackWebhookSecretArn=""'
}
# One event of each severity the default routes send somewhere: critical pages, warning and info
# go to chat (to the on-call topic when no chat channel is configured).
EVENTS = (
    "service-job/failed-validation",
    "batch-job/failed-attempt-timeout",
    "batch-job/failed-spot-reclaim",
)


@pytest.mark.parametrize("stack", list(STACKS))
def test_the_replay_wires_the_functions_and_batching_a_deploy_creates(
    translated: dict[str, Any], stack: str
) -> None:
    deployed = Deployed(translated, STACKS[stack])
    wiring = Replayer(TEMPLATE_PATH, STACKS[stack]).wiring
    assert (
        set(deployed.functions().values())
        == set(wiring.functions)
        == {
            "alerts",
            "capacity",
            "ledger",
            "metrics",
            "recovery",
        }
    )
    assert wiring.functions == deployed.event_sources()
    assert wiring.functions["alerts"] == [("AlertsQueue", 100, 20)]  # not cut to another function's 10


@pytest.mark.parametrize("stack", list(STACKS))
def test_the_replay_sends_messages_only_where_a_deploy_would(translated: dict[str, Any], stack: str) -> None:
    expected = Deployed(translated, STACKS[stack]).channels()
    replayer = Replayer(TEMPLATE_PATH, STACKS[stack])
    assert replayer.wiring.channels == expected

    reports = replayer.run([sample(name) for name in EVENTS])

    assert [r.errors for r in reports] == [[]] * len(EVENTS)
    sent = {n["channel"] for r in reports for o in r.outputs() for n in o.notifications}
    assert sent == set(expected)  # every channel wired received something, and no other did


def test_a_default_stack_sends_every_message_to_the_on_call_topic(translated: dict[str, Any]) -> None:
    assert Deployed(translated).channels() == ["sns"]
    assert Deployed(translated, STACKS["slack set empty"]).channels() == ["sns"]
