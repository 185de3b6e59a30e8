"""Settings of the alerts function, validated at cold start (a bad value names its variable)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, ClassVar, TypedDict

from pydantic import Field, ValidationInfo, field_validator

from batchpilot.alerts.alarms import AlarmRouting
from batchpilot.alerts.policy import Channel, PolicyError, RoutingPolicy, load_policy
from batchpilot.alerts.render import OnCallFormat
from batchpilot.shared.settings import FunctionSettings

__all__ = ["AlertsSettings", "ServiceArgs"]


class ServiceArgs(TypedDict):
    """The keyword arguments of :class:`batchpilot.alerts.service.AlertService` that come from
    the settings (:attr:`AlertsSettings.service_args`)."""

    alarms: AlarmRouting
    oncall_format: OnCallFormat
    visibility_timeout: float
    reserves: bool
    owner_tag_key: str


_TAG_KEY = r"^[\w .:/=+@-]{1,128}$"
"""An AWS tag key: 1-128 Unicode letters, digits, spaces and ``_ . : / = + - @`` (the tagging
rules AWS Batch and SageMaker share: Tag Editor user guide, "Tag naming limits and requirements")."""
_ARN_OR_NAME = r"^(arn:aws[a-zA-Z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:)?[A-Za-z0-9/_+=.@-]{1,512}$"


class AlertsSettings(FunctionSettings):
    """Environment of the alerts function (names in ``_ENV``).

    Attributes:
        state_table: the StateTable's name (``BATCHPILOT_STATE_TABLE``, required).
        oncall_topic_arn: the on-call SNS topic (``BATCHPILOT_ONCALL_TOPIC_ARN``, required).
        webhook_secrets: per chat channel, the ARN or name of the Secrets Manager secret that holds
            its incoming webhook URL (``BATCHPILOT_<CHANNEL>_WEBHOOK_SECRET``, one variable per
            :class:`~batchpilot.alerts.policy.Channel`: ``BATCHPILOT_SLACK_WEBHOOK_SECRET``,
            ``BATCHPILOT_TEAMS_WEBHOOK_SECRET``, ...); a channel without one has no webhook. The
            URL itself is never in the environment. :attr:`slack_webhook_secret` and
            :attr:`teams_webhook_secret` read it.
        slack_bot_token_secret: ARN or name of the secret holding a bot token
            (``BATCHPILOT_SLACK_BOT_TOKEN_SECRET``); with it, ``chat.postMessage`` threads
            messages per job and ``slack_channel`` is required.
        slack_channel: channel id or name for the bot (``BATCHPILOT_SLACK_CHANNEL``).
        slack_api_url: Slack Web API base URL (``BATCHPILOT_SLACK_API_URL``, default
            ``https://slack.com/api/``; https, or http to a loopback address for local runs).
        alert_policy: the routing policy JSON (``BATCHPILOT_ALERT_POLICY``; empty: the defaults). A
            policy with ``slack_channels`` routes requires ``slack_bot_token_secret``.
        alarm_name_prefix: the prefix of the stack's alarm names (``BATCHPILOT_ALARM_NAME_PREFIX``,
            ``batchpilot/<stack>/``); an alarm event without it is ignored. Empty: any alarm.
        alarms_notified_directly: comma-separated names of the alarms whose own action notifies an
            SNS topic, or ``*`` for all (``BATCHPILOT_ALARMS_NOTIFIED_DIRECTLY``): chat only.
        oncall_message_format: ``text`` (default) or ``amazon-q`` (``BATCHPILOT_ONCALL_MESSAGE_FORMAT``):
            the on-call topic's message body (:class:`~batchpilot.alerts.render.OnCallFormat`).
        owner_tag_key: the tag that names a job's owner (``BATCHPILOT_OWNER_TAG_KEY``, template
            parameter ``OwnerTagKey``; ``owner``, ``owner-email``, ``sagemaker:user-profile-arn``);
            empty (the default): owners are off (:mod:`batchpilot.alerts.owners`). A key that
            starts with ``aws:`` is refused: AWS reserves it and puts no owner there.
        owner_direct_message: also send a mentioned owner the Slack message directly
            (``BATCHPILOT_OWNER_DIRECT_MESSAGE``, template parameter ``OwnerDirectMessage``,
            default false); needs ``owner_tag_key`` and the bot token.
        queue_visibility_timeout: seconds, the AlertsQueue's ``VisibilityTimeout``
            (``BATCHPILOT_QUEUE_VISIBILITY_TIMEOUT``, default 360, as template.yaml sets it): a
            claim's lease outlives the redelivery of the record it guards.
    """

    function: str = Field(default="alerts", min_length=1, max_length=64)
    state_table: str = Field(min_length=3, max_length=255, pattern=r"^[A-Za-z0-9_.-]+$")
    oncall_topic_arn: str = Field(
        pattern=r"^arn:aws[a-zA-Z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$"
    )
    webhook_secrets: dict[Channel, Annotated[str, Field(pattern=_ARN_OR_NAME)]] = Field(default_factory=dict)
    slack_bot_token_secret: str | None = Field(default=None, pattern=_ARN_OR_NAME)
    slack_channel: str | None = Field(default=None, min_length=1, max_length=80, validate_default=True)
    slack_api_url: str = Field(
        default="https://slack.com/api/",
        pattern=r"^(https://\S+|http://(127\.0\.0\.1|localhost)(:\d+)?(/\S*)?)$",
    )
    alert_policy: str = Field(default="", max_length=8192)
    alarm_name_prefix: str = Field(default="", max_length=255, pattern=r"^[^\x00-\x1f\x7f]*$")
    alarms_notified_directly: str = Field(default="", max_length=8192, pattern=r"^[^\x00-\x1f\x7f]*$")
    oncall_message_format: OnCallFormat = OnCallFormat.TEXT
    queue_visibility_timeout: int = Field(default=360, ge=0, le=43200)  # SQS VisibilityTimeout range
    owner_tag_key: str = Field(default="")
    owner_direct_message: bool = False

    _ENV: ClassVar[dict[str, str]] = {
        **FunctionSettings._ENV,
        "state_table": "BATCHPILOT_STATE_TABLE",
        "oncall_topic_arn": "BATCHPILOT_ONCALL_TOPIC_ARN",
        "slack_bot_token_secret": "BATCHPILOT_SLACK_BOT_TOKEN_SECRET",
        "slack_channel": "BATCHPILOT_SLACK_CHANNEL",
        "slack_api_url": "BATCHPILOT_SLACK_API_URL",
        "alert_policy": "BATCHPILOT_ALERT_POLICY",
        "alarm_name_prefix": "BATCHPILOT_ALARM_NAME_PREFIX",
        "alarms_notified_directly": "BATCHPILOT_ALARMS_NOTIFIED_DIRECTLY",
        "oncall_message_format": "BATCHPILOT_ONCALL_MESSAGE_FORMAT",
        "queue_visibility_timeout": "BATCHPILOT_QUEUE_VISIBILITY_TIMEOUT",
        "owner_tag_key": "BATCHPILOT_OWNER_TAG_KEY",
        "owner_direct_message": "BATCHPILOT_OWNER_DIRECT_MESSAGE",
    }

    @staticmethod
    def webhook_variable(channel: Channel) -> str:
        """The variable naming ``channel``'s webhook secret: ``BATCHPILOT_<CHANNEL>_WEBHOOK_SECRET``."""
        return f"BATCHPILOT_{channel.value.upper()}_WEBHOOK_SECRET"

    @classmethod
    def _grouped_values(cls, environ: Mapping[str, str]) -> dict[str, object]:
        secrets = {
            channel.value: environ[variable].strip()
            for channel in Channel
            if channel is not Channel.SNS
            and environ.get(variable := cls.webhook_variable(channel), "").strip()
        }
        return {"webhook_secrets": secrets} if secrets else {}

    @classmethod
    def _variable(cls, loc: tuple[int | str, ...]) -> str:
        if loc[0] == "webhook_secrets" and len(loc) > 1 and str(loc[1]) in set(Channel):
            return cls.webhook_variable(Channel(str(loc[1])))
        return super()._variable(loc)

    @property
    def slack_webhook_secret(self) -> str | None:
        """The Slack incoming webhook's secret (``BATCHPILOT_SLACK_WEBHOOK_SECRET``), or None."""
        return self.webhook_secrets.get(Channel.SLACK)

    @property
    def teams_webhook_secret(self) -> str | None:
        """The Teams Workflows webhook's secret (``BATCHPILOT_TEAMS_WEBHOOK_SECRET``), or None."""
        return self.webhook_secrets.get(Channel.TEAMS)

    @field_validator("slack_channel")
    @classmethod
    def _channel_with_bot_token(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("slack_bot_token_secret") and not value:
            raise ValueError("required when BATCHPILOT_SLACK_BOT_TOKEN_SECRET is set")
        return value

    @field_validator("owner_tag_key")
    @classmethod
    def _owner_tag_key(cls, value: str) -> str:
        key = value.strip()
        if not key:
            return ""
        if not re.match(_TAG_KEY, key):
            raise ValueError("not a tag key: 1-128 letters, digits, spaces and _ . : / = + - @")
        if key.lower().startswith("aws:"):
            raise ValueError("tag keys starting with aws: are reserved by AWS")
        return key

    @field_validator("owner_direct_message")
    @classmethod
    def _direct_message_needs_owners(cls, value: bool, info: ValidationInfo) -> bool:
        if value and not info.data.get("owner_tag_key"):
            raise ValueError("direct messages to owners need BATCHPILOT_OWNER_TAG_KEY")
        if value and not info.data.get("slack_bot_token_secret"):
            raise ValueError("direct messages to owners need BATCHPILOT_SLACK_BOT_TOKEN_SECRET")
        return value

    @field_validator("alert_policy")
    @classmethod
    def _policy_is_valid(cls, value: str, info: ValidationInfo) -> str:
        try:
            policy = load_policy(value)
        except PolicyError as exc:
            raise ValueError(str(exc)) from None
        if policy.slack_channels and not info.data.get("slack_bot_token_secret"):
            # An incoming webhook is tied to the one channel it was created for: it cannot post
            # elsewhere, and posting a team's alert to the default channel would be silently wrong.
            names = ", ".join(f"slack_channels.{index}" for index in range(len(policy.slack_channels)))
            raise ValueError(
                f"{names}: a Slack channel override needs BATCHPILOT_SLACK_BOT_TOKEN_SECRET "
                "(chat.postMessage); an incoming webhook posts to one fixed channel"
            )
        return value

    @property
    def chat_channels(self) -> tuple[Channel, ...]:
        """The chat channels this deployment configures, in ``Channel`` order (the order the
        defaults route to them): each with a webhook secret, and Slack with a bot token too."""
        configured = set(self.webhook_secrets)
        if self.slack_bot_token_secret:
            configured.add(Channel.SLACK)
        return tuple(channel for channel in Channel if channel in configured)

    @property
    def policy(self) -> RoutingPolicy:
        """The validated routing policy (defaults when ``alert_policy`` is empty), its default routes
        pointed at :attr:`chat_channels` (:meth:`RoutingPolicy.for_chat`)."""
        return load_policy(self.alert_policy).for_chat(self.chat_channels)

    @property
    def alarms(self) -> AlarmRouting:
        """Which CloudWatch alarms are the stack's and which notify an SNS topic themselves."""
        return AlarmRouting.of(self.alarm_name_prefix, self.alarms_notified_directly)

    @property
    def service_args(self) -> ServiceArgs:
        """What the alerts service takes from the settings besides the policy."""
        return {
            "alarms": self.alarms,
            "oncall_format": self.oncall_message_format,
            "visibility_timeout": float(self.queue_visibility_timeout),
            "reserves": True,
            "owner_tag_key": self.owner_tag_key,
        }
