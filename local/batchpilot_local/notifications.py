"""The alerts function's surroundings for a local run, and what people would have been told.

:class:`LocalAlerts` sets up, inside an open :class:`~batchpilot_local.embedded_aws.EmbeddedAws`,
what the alerts function's environment in ``template.yaml`` points at:

- the on-call SNS topic named by ``BATCHPILOT_ONCALL_TOPIC_ARN`` (``!Ref AlertsOnCallTopic``),
  with an SQS "inbox" subscribed to it (how email/pager subscribers would see each message);
- the StateTable named by ``BATCHPILOT_STATE_TABLE``, as the template defines it (the replay's
  template, else the repository's), unless it exists (the replay creates it first);
- a :class:`~batchpilot_local.chat_endpoint.LocalChatEndpoint` (local Slack and Teams) and Secrets
  Manager secrets holding its webhook URLs and bot token, for exactly the chat channels the
  deployment configures, as a deploy would: Slack when the environment names a Slack secret (the
  template's ``SlackWebhookSecretArn``, or ``SlackBotTokenSecretArn`` for the bot-token mode:
  ``chat.postMessage`` with threads), Teams when it names a Teams secret
  (``TeamsWebhookSecretArn``). Each named secret is replaced by a local one holding the local
  endpoint's URL or token (the deployment's own secret is not in the embedded AWS); a channel whose
  parameter is empty stays off, as in a stack deployed with the parameters' empty defaults, and its
  messages go to the on-call topic. ``slack=``, ``bot=`` and ``teams=`` force a channel on or off
  (tests, benchmarks);
- for every other registered channel (``batchpilot.alerts.channels.registered``) whose
  ``BATCHPILOT_<CHANNEL>_WEBHOOK_SECRET`` the environment names (or that ``webhooks=`` names), a
  local secret holding the URL of its generic webhook at the same endpoint
  (:meth:`~batchpilot_local.chat_endpoint.LocalChatEndpoint.webhook`): a new webhook channel needs
  nothing here.

:meth:`LocalAlerts.spec_for` gives the alerts function's spec with that environment;
:meth:`LocalAlerts.collect` returns what was delivered since the previous call, as the replay
report's ``notifications`` entries ``{"channel": "sns"|"slack"|"teams", "severity", "title"}``;
:meth:`LocalAlerts.deliveries` returns the same with each message as sent (:class:`Delivery`: the
SNS subject and text, the Slack Block Kit payload, the Teams Adaptive Card), for previews.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from batchpilot.alerts.channels import Registration, registered
from batchpilot.alerts.policy import Channel
from batchpilot.alerts.settings import AlertsSettings

from batchpilot_local.chat_endpoint import (
    LocalChatEndpoint,
    LocalWebhook,
    SlackRequest,
    TeamsRequest,
    WebhookRequest,
)
from batchpilot_local.embedded_aws import EmbeddedAws, create_tables
from batchpilot_local.template import (
    STATE_TABLE,
    AppTemplate,
    FunctionSpec,
    default_template_path,
    load_template,
)

__all__ = [
    "ALERTS_FUNCTION",
    "INBOX_QUEUE",
    "Delivery",
    "LocalAlerts",
    "chat_wiring",
    "markdown_shown",
    "notification_from_slack",
    "notification_from_sns",
    "notification_from_teams",
    "notification_from_webhook",
]

ALERTS_FUNCTION = "alerts"
"""Short name of the alerts function (``functions/alerts/``)."""
INBOX_QUEUE = "batchpilot-local-oncall-inbox"
"""SQS queue subscribed to the on-call topic during a local run."""
WEBHOOK_SECRET_NAME = "batchpilot/local/slack-webhook"  # noqa: S105 - a secret's name, not a value
BOT_TOKEN_SECRET_NAME = "batchpilot/local/slack-bot-token"  # noqa: S105 - a secret's name, not a value
TEAMS_SECRET_NAME = "batchpilot/local/teams-webhook"  # noqa: S105 - a secret's name, not a value
TEAMS_VARIABLE = "BATCHPILOT_TEAMS_WEBHOOK_SECRET"
"""The alerts function's variable that names the Teams webhook secret (``!Ref TeamsWebhookSecretArn``)."""
SLACK_WEBHOOK_VARIABLE = "BATCHPILOT_SLACK_WEBHOOK_SECRET"
"""The alerts function's variable that names the Slack webhook secret (``!Ref SlackWebhookSecretArn``)."""
SLACK_BOT_VARIABLE = "BATCHPILOT_SLACK_BOT_TOKEN_SECRET"
"""The alerts function's variable that names the Slack bot token secret (``!Ref SlackBotTokenSecretArn``)."""


def generic_channels() -> tuple[Registration, ...]:
    """The registered channels served by the generic webhook sink: all but Slack and Teams, which
    have their own local services (their API rules and answers)."""
    return tuple(r for r in registered() if r.channel not in (Channel.SLACK, Channel.TEAMS))


def chat_wiring(environment: Mapping[str, str] | None) -> dict[str, str]:
    """The chat channels an alerts function with ``environment`` has, as a deploy gives them:
    ``{"slack": "webhook" | "bot token" | "webhook and bot token", "teams": "webhook", <other
    registered channel>: "webhook"}``, only the channels whose secret variable is set (empty:
    on-call topic only)."""
    env = environment or {}
    wiring: dict[str, str] = {}
    slack = [
        mode
        for mode, variable in (("webhook", SLACK_WEBHOOK_VARIABLE), ("bot token", SLACK_BOT_VARIABLE))
        if env.get(variable)
    ]
    if slack:
        wiring["slack"] = " and ".join(slack)
    if env.get(TEAMS_VARIABLE):
        wiring["teams"] = "webhook"
    for registration in generic_channels():
        if env.get(AlertsSettings.webhook_variable(registration.channel)):
            wiring[registration.channel.value] = "webhook"
    return wiring


_SUBJECT_PREFIX = re.compile(r"^\[(CRITICAL|WARNING|INFO)\]\s*")
# CommonMark's backslash escape: a backslash before ASCII punctuation
# (https://spec.commonmark.org/0.31.2/#backslash-escapes)
_MARKDOWN_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_TEXT_PREFIX = re.compile(r"^(Critical|Warning|Info):\s*")
_BODY_PREFIX = re.compile(r"^(CRITICAL|WARNING|INFO):\s*")
_OWNER_LINE = re.compile(r"^Owner:\s+(\S.*)$", re.MULTILINE)
"""The owner line of a plain-text on-call message (``batchpilot.alerts.oncall.sns_message``)."""


@dataclasses.dataclass(frozen=True)
class Delivery:
    """One message people would have received.

    Attributes:
        note: the report's notification entry ``{"channel", "severity", "title"}``.
        payload: what was sent: for ``sns`` ``{"Subject", "Message", "MessageAttributes"}`` of the
            SNS envelope; for ``slack`` the webhook or ``chat.postMessage`` JSON body (``text``,
            ``blocks``, ``thread_ts``); for ``teams`` the webhook body (``attachments`` holding the
            Adaptive Card).
    """

    note: dict[str, Any]
    payload: dict[str, Any]


def notification_from_sns(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """A report entry from an SNS notification as an SQS subscriber receives it (the JSON
    envelope with ``Subject``, ``Message``, ``MessageAttributes``). The title is the message's
    first line (``CRITICAL: <title>``), whole: the subject holds the title made to fit 99
    characters; a message not shaped so keeps its subject."""
    attributes = envelope.get("MessageAttributes") or {}
    severity = (attributes.get("severity") or {}).get("Value")
    subject = _SUBJECT_PREFIX.sub("", str(envelope.get("Subject") or ""), count=1)
    first = str(envelope.get("Message") or "").split("\n", 1)[0]
    headline = _BODY_PREFIX.match(first)
    entry = {
        "channel": "sns",
        "severity": severity if isinstance(severity, str) else None,
        "title": first[headline.end() :] if headline and first[headline.end() :].strip() else subject,
    }
    owner = _OWNER_LINE.search(str(envelope.get("Message") or ""))
    if owner:  # the job's owner, named in the message (OwnerTagKey)
        entry["owner"] = owner.group(1).strip()
    return entry


def _chat_note(channel: str, text: str) -> dict[str, Any]:
    match = _TEXT_PREFIX.match(text)
    return {
        "channel": channel,
        "severity": match.group(1).lower() if match else None,
        "title": text[match.end() :] if match else text,
    }


def notification_from_slack(request: SlackRequest) -> dict[str, Any]:
    """A report entry from a message the local Slack endpoint accepted: severity and title come from
    the top-level ``text`` (``Critical: <title>``)."""
    return _chat_note("slack", request.text)


def markdown_shown(text: str) -> str:
    """Markdown text as Teams shows it, as far as backslash escapes go: ``\\[dry run\\]`` →
    ``[dry run]``. Teams renders ``fallbackText`` and ``TextBlock`` text as Markdown ("Format cards
    in Teams"), where a backslash before ASCII punctuation makes that character literal and is not
    shown; the alerts function escapes event text that way
    (``batchpilot.alerts.channels.teams.markdown_escaped``)."""
    return _MARKDOWN_ESCAPE.sub(r"\1", text)


def notification_from_teams(request: TeamsRequest) -> dict[str, Any]:
    """A report entry from a message the local Teams webhook accepted: severity and title come from
    the Adaptive Card's ``fallbackText`` (``Critical: <title>``), as Teams shows it
    (:func:`markdown_shown`: ``[dry run] ...``, not the escaped ``\\[dry run\\] ...`` sent)."""
    entry = _chat_note("teams", markdown_shown(request.text))
    msteams = request.card.get("msteams")
    entities = msteams.get("entities") if isinstance(msteams, Mapping) else None
    mentioned = [
        str(e["mentioned"]["id"])
        for e in entities or []
        if isinstance(e, Mapping) and isinstance(e.get("mentioned"), Mapping) and e["mentioned"].get("id")
    ]
    if mentioned:  # the job's owner, mentioned (OwnerTagKey)
        entry["owner"] = ", ".join(f"@{m}" for m in mentioned)
    return entry


def notification_from_webhook(request: WebhookRequest) -> dict[str, Any]:
    """A report entry from a message a generic webhook accepted: severity and title come from the
    first string of the body that reads ``Critical: <title>`` (every channel's one-line summary is
    ``batchpilot.alerts.render.top_text``), searched depth-first in the body's own order, shown as
    a Markdown reader shows it (:func:`markdown_shown`: webhook channels backslash-escape event
    text)."""
    stack: list[Any] = [request.payload]
    while stack:
        value = stack.pop(0)
        if isinstance(value, str) and _TEXT_PREFIX.match(value):
            return _chat_note(request.channel, markdown_shown(value))
        if isinstance(value, Mapping):
            stack[:0] = list(value.values())
        elif isinstance(value, list):
            stack[:0] = value
    return {"channel": request.channel, "severity": None, "title": ""}


class LocalAlerts:
    """The alerts function's topic, table, chat endpoint and secrets in an embedded AWS.

    Args:
        aws: an open embedded AWS.
        template: the application; without an ``alerts`` function (and without
            ``environment``) nothing is set up and :meth:`collect` returns nothing.
        environment: the alerts function's environment, instead of the template's.
        chat: a started endpoint to use (else one is started and stopped here).
        slack: configure Slack (True), or not (False); None: when the environment names a Slack
            webhook or bot token secret (the template's ``SlackWebhookSecretArn`` or
            ``SlackBotTokenSecretArn`` is set).
        bot: Slack's bot-token mode (``chat.postMessage``, threads) instead of the webhook (True),
            or the webhook (False); None: the mode the environment names (both when it names both).
        teams: configure Teams (True), or not (False); None: when the environment names a Teams
            secret (the template's ``TeamsWebhookSecretArn`` is set).
        webhooks: other registered channels to configure at the generic webhook sink, whatever
            the environment names (each also on when the environment names its webhook secret).

    Raises (from :meth:`open`):
        ValueError: the environment lacks ``BATCHPILOT_ONCALL_TOPIC_ARN`` or ``BATCHPILOT_STATE_TABLE``,
            or the template has no ``StateTable`` to create it from.
    """

    def __init__(
        self,
        aws: EmbeddedAws,
        template: AppTemplate | None = None,
        *,
        environment: Mapping[str, str] | None = None,
        chat: LocalChatEndpoint | None = None,
        slack: bool | None = None,
        bot: bool | None = None,
        teams: bool | None = None,
        webhooks: tuple[Channel, ...] = (),
    ) -> None:
        self.aws = aws
        self._template = template
        spec = template.functions.get(ALERTS_FUNCTION) if template is not None else None
        base = environment if environment is not None else (spec.environment if spec else None)
        self._base = dict(base) if base is not None else None
        self._own_chat = chat is None
        self.chat = chat or LocalChatEndpoint()
        self.slack = self.chat.slack
        self.teams = self.chat.teams
        wiring = chat_wiring(self._base)
        self.slack_on = bool(slack) if slack is not None else ("slack" in wiring or bool(bot))
        mode = wiring.get("slack", "")
        self.bot = self.slack_on and (bool(bot) if bot is not None else "bot token" in mode)
        self.webhook = self.slack_on and (not bot if bot is not None else ("webhook" in mode or not mode))
        self.teams_on = bool(teams) if teams is not None else "teams" in wiring
        self.hooks: dict[Channel, LocalWebhook] = {
            r.channel: self.chat.webhook(r.channel.value, r.accepted)
            for r in generic_channels()
            if r.channel in webhooks or r.channel.value in wiring
        }
        """The generic webhooks of the other registered channels this run configures."""
        self._hook_marks: dict[Channel, int] = dict.fromkeys(self.hooks, 0)
        self._bot_forced = bot is True
        self.environment: dict[str, str] = {}
        """The alerts function's environment for this run (set by :meth:`open`)."""
        self.topic_arn: str | None = None
        self._inbox_url: str | None = None
        self._mark = 0
        self._teams_mark = 0

    @property
    def active(self) -> bool:
        """True when there is an alerts function to serve."""
        return self._base is not None

    @property
    def channels(self) -> list[str]:
        """The channels wired for this run: ``sns`` (the on-call topic), then ``slack`` and
        ``teams`` when configured; empty without an alerts function."""
        if not self.active:
            return []
        chat = [*(["slack"] if self.slack_on else []), *(["teams"] if self.teams_on else [])]
        return ["sns", *chat, *(channel.value for channel in self.hooks)]

    def __enter__(self) -> LocalAlerts:
        return self.open()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def open(self) -> LocalAlerts:
        """Create the topic, inbox, table and secrets, and start the chat endpoint."""
        if self._base is None:
            return self
        env = dict(self._base)
        topic_arn = env.get("BATCHPILOT_ONCALL_TOPIC_ARN", "")
        table = env.get("BATCHPILOT_STATE_TABLE", "")
        if not topic_arn or not table:
            raise ValueError(
                "the alerts function needs BATCHPILOT_ONCALL_TOPIC_ARN and BATCHPILOT_STATE_TABLE"
            )
        sns = self.aws.client("sns")
        self.topic_arn = sns.create_topic(Name=topic_arn.rsplit(":", 1)[-1])["TopicArn"]
        env["BATCHPILOT_ONCALL_TOPIC_ARN"] = self.topic_arn
        self._inbox_url = self.aws.create_queue(INBOX_QUEUE)
        sns.subscribe(TopicArn=self.topic_arn, Protocol="sqs", Endpoint=self.aws.queue_arn(INBOX_QUEUE))
        self._ensure_table(table)

        self.chat.start()
        self._mark = self.slack.mark()
        self._teams_mark = self.teams.mark()
        secrets = self.aws.client("secretsmanager")
        if self.bot:
            token_arn = secrets.create_secret(
                Name=BOT_TOKEN_SECRET_NAME, SecretString=json.dumps({"token": self.slack.bot_token})
            )["ARN"]
            env[SLACK_BOT_VARIABLE] = token_arn
            # The deployment's channel (SlackChannel; an empty one fails the function's settings at
            # cold start, as in AWS); the local endpoint's when the caller forced the bot mode.
            if self._bot_forced:
                env["BATCHPILOT_SLACK_CHANNEL"] = self.slack.channel
            env["BATCHPILOT_SLACK_API_URL"] = self.slack.api_url
        else:
            env.pop(SLACK_BOT_VARIABLE, None)
        if self.webhook:
            env[SLACK_WEBHOOK_VARIABLE] = secrets.create_secret(
                Name=WEBHOOK_SECRET_NAME, SecretString=self.slack.webhook_url
            )["ARN"]
        else:
            env.pop(SLACK_WEBHOOK_VARIABLE, None)
        if self.teams_on:
            env[TEAMS_VARIABLE] = secrets.create_secret(
                Name=TEAMS_SECRET_NAME, SecretString=json.dumps({"url": self.teams.webhook_url})
            )["ARN"]
        else:
            env.pop(TEAMS_VARIABLE, None)
        for channel, hook in self.hooks.items():
            self._hook_marks[channel] = hook.mark()
            env[AlertsSettings.webhook_variable(channel)] = secrets.create_secret(
                Name=f"batchpilot/local/{channel.value}-webhook",
                SecretString=json.dumps({"url": hook.webhook_url}),
            )["ARN"]
        self.environment = env
        return self

    def _ensure_table(self, name: str) -> None:
        """Create the template's StateTable as ``name`` unless a table of that name exists."""
        template = self._template or load_template(default_template_path())
        spec = template.tables.get(STATE_TABLE)
        if spec is None:
            raise ValueError(f"{template.path}: no {STATE_TABLE} to create {name} from")
        create_tables(self.aws.client("dynamodb"), {name: spec})

    def close(self) -> None:
        """Stop the chat endpoint if this object started it."""
        if self._own_chat:
            self.chat.stop()

    def spec_for(self, spec: FunctionSpec) -> FunctionSpec:
        """``spec`` with this run's environment when it is the alerts function, else ``spec``."""
        if not self.active or spec.short_name != ALERTS_FUNCTION or not self.environment:
            return spec
        return dataclasses.replace(spec, environment=dict(self.environment))

    def sns_messages(self) -> list[dict[str, Any]]:
        """Drain the on-call inbox: the SNS envelopes published since the last call, in order."""
        if self._inbox_url is None:
            return []
        out: list[dict[str, Any]] = []
        while self.aws.has_messages(INBOX_QUEUE):  # most invocations page nobody: skip the receive
            records = self.aws.receive_as_lambda_event(INBOX_QUEUE)["Records"]
            if not records:
                return out
            out.extend(json.loads(record["body"]) for record in records)
            self.aws.delete_processed(INBOX_QUEUE, records, set())
        return out

    def collect(self) -> list[dict[str, Any]]:
        """Notifications delivered since the previous call: on-call topic messages, then the Slack
        messages and the Teams messages the endpoint accepted (failed attempts are not
        notifications)."""
        return [delivery.note for delivery in self.deliveries()]

    def deliveries(self) -> list[Delivery]:
        """:meth:`collect`'s notifications with the messages as sent (see :class:`Delivery`);
        the two share one position: call one or the other."""
        if not self.active:
            return []
        out = [
            Delivery(
                notification_from_sns(envelope),
                {key: envelope.get(key) for key in ("Subject", "Message", "MessageAttributes")},
            )
            for envelope in self.sns_messages()
        ]
        if self._own_chat:
            # Nobody else reads this endpoint's log: what is reported is forgotten, so a long
            # replay's memory does not grow with the messages it posted.
            requests, posts = self.slack.take(), self.teams.take()
        else:
            requests = self.slack.since(self._mark)
            self._mark += len(requests)
            posts = self.teams.since(self._teams_mark)
            self._teams_mark += len(posts)
        out += [Delivery(notification_from_slack(r), dict(r.payload)) for r in requests if r.delivered]
        out += [Delivery(notification_from_teams(p), dict(p.payload)) for p in posts if p.delivered]
        for channel, hook in self.hooks.items():
            if self._own_chat:
                hooked = hook.take()
            else:
                hooked = hook.since(self._hook_marks[channel])
                self._hook_marks[channel] += len(hooked)
            out += [Delivery(notification_from_webhook(h), dict(h.payload)) for h in hooked if h.delivered]
        return out
