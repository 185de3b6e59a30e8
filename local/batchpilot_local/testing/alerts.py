"""Alerts test support: facts from sample events, decoded the way the alerts service decodes an SQS
body (:func:`fact_of`); a rig that runs the real alerts service and adapters against the embedded
AWS and the local chat endpoint (:class:`Rig`, :func:`open_rig`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from batchpilot.alerts.channels import ChannelOptions
from batchpilot.alerts.facts import AlertFact, fact_from_event
from batchpilot.alerts.policy import RoutingPolicy
from batchpilot.alerts.registry import ChannelRegistry
from batchpilot.alerts.service import AlertService, BatchResult
from batchpilot.alerts.settings import AlertsSettings
from batchpilot.io.batch import BatchJobDirectory
from batchpilot.io.dynamodb.alerts import DynamoAlertStore
from batchpilot.io.secrets import SecretSource
from batchpilot.io.sns import SnsPublisher
from batchpilot.shared.own_events import JobResubmitted, OwnEvent, put_events_entry
from batchpilot.shared.records import Rejected, decode_any

from batchpilot_local.chat_endpoint import LocalChatEndpoint, LocalSlack, LocalTeams
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.notifications import LocalAlerts
from batchpilot_local.testing.samples import batch_job, envelope

__all__ = [
    "ENV",
    "SLACK_PARAMETERS",
    "SLACK_PARAMETER_VALUE",
    "START",
    "TEAMS_PARAMETER_VALUE",
    "Clock",
    "Rig",
    "StaticSecrets",
    "capacity_resubmission",
    "fact_of",
    "failed_fleet",
    "open_rig",
    "own_envelope",
]


def failed_fleet(count: int, reason: str, series: str = "1111") -> list[dict[str, Any]]:
    """A burst: ``count`` container jobs (``sweep-lr-000``, ...) FAILED with the same ``reason``;
    ``series`` is a group of the job ids, so that two test files' fleets have distinct ids."""
    return [
        batch_job(
            "FAILED",
            id=f"burst-{i}",
            jobArn=f"arn:aws:batch:us-east-1:111122223333:job/{i:08d}-{series}-4000-8000-000000000000",
            jobId=f"{i:08d}-{series}-4000-8000-000000000000",
            jobName=f"sweep-lr-{i:03d}",
            attempts=[{"container": {"reason": reason}}],
        )
        for i in range(count)
    ]


def own_envelope(event: OwnEvent) -> dict[str, Any]:
    """``event`` as the alerts function receives it: the EventBridge envelope of the PutEvents
    entry batchpilot publishes (``source`` ``batchpilot``, the event's own ``time``)."""
    entry = put_events_entry(event, "default")
    detail = json.loads(entry["Detail"])
    return envelope(entry["DetailType"], detail, source="batchpilot", time=event.time.isoformat())


def capacity_resubmission(
    failed: Mapping[str, Any], new_arn: str, lineage_id: str, **extra: Any
) -> JobResubmitted:
    """The ``Job Resubmitted`` recovery publishes for the service job ``failed`` (the sample
    ``service-job/failed-sagemaker-capacity``): attempt 1, CAPACITY, as ``mistral-dpo-run18-r1``
    (``new_arn``) at 2026-11-20 11:00 UTC; ``extra`` sets other fields."""
    job_arn = failed["detail"]["jobArn"]
    fields: dict[str, Any] = {
        "time": datetime(2026, 11, 20, 11, tzinfo=UTC),
        "lineage_id": lineage_id,
        "attempt": 1,
        "job_kind": "service-job",
        "original_job_arn": job_arn,
        "failed_job_arn": job_arn,
        "new_job_arn": new_arn,
        "new_job_name": "mistral-dpo-run18-r1",
        "category": "CAPACITY",
        "operation": "batch:SubmitServiceJob",
    }
    return JobResubmitted(**{**fields, **extra})


def fact_of(event: Mapping[str, Any]) -> AlertFact:
    """The fact of an EventBridge event (a job event or one of batchpilot's own events).

    Raises:
        ValueError: the event is ignored or invalid (the message says why).
    """
    decoded = decode_any(json.dumps(event))
    if isinstance(decoded, Rejected):
        raise ValueError(f"{decoded.outcome.value}: {decoded.error}")
    return fact_from_event(decoded, event)


ENV = {
    "BATCHPILOT_STATE_TABLE": "StateTable",
    "BATCHPILOT_ONCALL_TOPIC_ARN": "arn:aws:sns:us-east-1:111122223333:batchpilot-oncall",
}
START = datetime.fromtimestamp(1_800_000_000, UTC)


@dataclass
class StaticSecrets:
    """A :class:`batchpilot.alerts.ports.SecretReader` over a dict (secret id → value); an unknown
    id raises ``KeyError``, as a missing secret makes ``SecretSource.get`` raise."""

    values: dict[str, str] = field(default_factory=dict)

    def get(self, secret_id: str) -> str:
        """The value stored under ``secret_id``."""
        return self.values[secret_id]


@dataclass
class Clock:
    """A settable "now" (aware UTC), the service's :data:`batchpilot.shared.clock.Clock`."""

    now: datetime = START

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Rig:
    """The alerts service with its real adapters (DynamoDB, SNS, Secrets Manager in the embedded
    AWS; Slack and Teams at the local chat endpoint). :meth:`run` processes one batch; the clock,
    the time left, the sleep between 429 retries (recorded in ``sleeps``) and every channel's
    request timeout (``chat_timeout``) are injected."""

    aws: EmbeddedAws
    chat: LocalChatEndpoint
    local: LocalAlerts
    clock: Clock = field(default_factory=Clock)
    sleeps: list[float] = field(default_factory=list)
    remaining: float = 60.0
    chat_timeout: float = 10.0

    @property
    def slack(self) -> LocalSlack:
        return self.chat.slack

    @property
    def teams(self) -> LocalTeams:
        return self.chat.teams

    def channels(self, *, real_sleep: bool = False) -> ChannelRegistry:
        """Every registered channel this run's environment configures, as the function builds them
        (:meth:`ChannelRegistry.configured`), with the rig's sleep and timeout."""
        settings = AlertsSettings.from_environ(self.local.environment, function="alerts")
        secrets = SecretSource(self.aws.client("secretsmanager"))
        sleep = time.sleep if real_sleep else self.sleeps.append
        return ChannelRegistry.configured(settings, secrets, ChannelOptions(sleep, self.chat_timeout))

    def service(
        self,
        policy: RoutingPolicy | None = None,
        *,
        real_sleep: bool = False,
        channels: ChannelRegistry | None = None,
    ) -> AlertService:
        env = self.local.environment
        settings = AlertsSettings.from_environ(env, function="alerts")
        # The deployed policy: the defaults routed to the chat channels this environment configures.
        policy = policy or settings.policy
        return AlertService(
            policy,
            DynamoAlertStore(self.aws.client("dynamodb"), env["BATCHPILOT_STATE_TABLE"]),
            SnsPublisher(self.aws.client("sns"), env["BATCHPILOT_ONCALL_TOPIC_ARN"]),
            channels if channels is not None else self.channels(real_sleep=real_sleep),
            BatchJobDirectory(self.aws.client("batch")),  # as functions/alerts/app.py wires it
            clock=self.clock,
            **settings.service_args,  # alarm routing and the on-call format, from the environment
        )

    def run(
        self,
        *events: Any,
        policy: RoutingPolicy | None = None,
        real_sleep: bool = False,
        channels: ChannelRegistry | None = None,
    ) -> BatchResult:
        records = [(f"m-{i}", e if isinstance(e, str) else json.dumps(e)) for i, e in enumerate(events)]
        service = self.service(policy, real_sleep=real_sleep, channels=channels)
        return service.process(records, time_left=lambda: self.remaining)

    def sns(self) -> list[dict[str, Any]]:
        return self.local.sns_messages()

    def slack_delivered(self) -> list[dict[str, Any]]:
        return [r.payload for r in self.slack.delivered()]


def open_rig(
    bot: bool = False,
    teams: bool = False,
    environment: Mapping[str, str] | None = None,
    *,
    slack: bool = True,
) -> Iterator[Rig]:
    """A :class:`Rig` in a fresh embedded AWS and chat endpoint (Slack configured with ``slack``,
    in bot mode with ``bot``; Teams configured with ``teams``; the function's ``environment``,
    default :data:`ENV`), closed when the generator ends."""
    with EmbeddedAws() as aws, LocalChatEndpoint() as chat:
        env = dict(environment if environment is not None else ENV)
        local = LocalAlerts(aws, environment=env, chat=chat, slack=slack, bot=bot, teams=teams).open()
        yield Rig(aws, chat, local)


SLACK_PARAMETER_VALUE = "arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot/slack-webhook-AbCdEf"
"""A placeholder ``SlackWebhookSecretArn``: any non-empty value wires Slack (its webhook) in a
replay, as in a deployed stack (the local run points the variable at its own secret)."""
SLACK_PARAMETERS = {"SlackWebhookSecretArn": SLACK_PARAMETER_VALUE}
"""``Replayer(parameters=...)`` of a stack with Slack."""
TEAMS_PARAMETER_VALUE = "arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot/teams-webhook-AbCdEf"
"""A placeholder ``TeamsWebhookSecretArn`` (``Replayer(parameters=...)``, ``batchpilot replay
--parameter-overrides``): any non-empty value turns Teams on in a replay (the local run points the
variable at its own secret, :class:`batchpilot_local.notifications.LocalAlerts`)."""
