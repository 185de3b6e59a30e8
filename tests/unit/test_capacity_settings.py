"""Capacity settings: parsed and cross-checked at cold start, every error naming its variable."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from batchpilot.capacity.model import NUM_INSTANCES
from batchpilot.capacity.settings import CapacitySettings, ScheduledFloor, UnitBounds
from batchpilot.shared.settings import ConfigError


def environ(
    policy: dict[str, Any] | str, envs: str = "sm-training", queues: str = "hi,lo", **extra: str
) -> dict[str, str]:
    return {
        "BATCHPILOT_STATE_TABLE": "batchpilot-StateTable",
        "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS": envs,
        "BATCHPILOT_CAPACITY_JOB_QUEUES": queues,
        "BATCHPILOT_CAPACITY_POLICY": policy if isinstance(policy, str) else json.dumps(policy),
        **extra,
    }


GOOD = {
    "defaults": {"cooldown_minutes": 5},
    "service_environments": {
        "sm-training": {
            "job_queues": ["hi", "lo"],
            "min": 2,
            "max": 64,
            "stabilisation_window_minutes": 20,
            "floors": [{"cron": "0 8 * * MON-FRI", "duration_minutes": 600, "min": 16}],
        }
    },
}


def test_a_valid_configuration() -> None:
    settings = CapacitySettings.from_environ(environ(GOOD, BATCHPILOT_CAPACITY_DRY_RUN="true"))
    assert settings.function == "capacity"
    assert settings.dry_run is True
    assert settings.service_environments == ("sm-training",)
    assert settings.job_queues == ("hi", "lo")
    env = settings.environment("sm-training")
    assert env.bounds() == {NUM_INSTANCES: UnitBounds(min=2, max=64)}
    policy = env.policy(settings.policy.defaults)
    assert (policy.cooldown_minutes, policy.stabilisation_window_minutes, policy.max_step) == (5, 20, 16)
    assert settings.policy.environment_of("lo") == "sm-training"
    assert settings.policy.environment_of("other") is None


def test_nothing_managed_by_default() -> None:
    settings = CapacitySettings.from_environ({})
    assert settings.policy.service_environments == {}
    assert (settings.dry_run, settings.event_bus, settings.describe_budget) == (False, "default", 300)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (environ("{not json"), "BATCHPILOT_CAPACITY_POLICY: Value error, not valid JSON"),
        (
            environ(
                {"service_environments": {"sm-training": {"job_queues": ["hi", "lo"], "min": 9, "max": 4}}}
            ),
            "BATCHPILOT_CAPACITY_POLICY: service_environments.sm-training: Value error, min (9) is greater "
            "than max (4)",
        ),
        (
            environ({"service_environments": {"sm-training": {"job_queues": ["hi", "lo"]}}}),
            "give max (NUM_INSTANCES) or units (quota management)",
        ),
        (
            environ({"service_environments": {"sm-training": {"job_queues": ["hi", "lo"], "max": -1}}}),
            "BATCHPILOT_CAPACITY_POLICY: service_environments.sm-training.max: Input should be greater than "
            "or equal to 0",
        ),
        (
            environ(
                {"service_environments": {"sm-training": {"job_queues": ["hi", "lo"], "max": 4, "maxx": 5}}}
            ),
            "service_environments.sm-training.maxx: Extra inputs are not permitted",
        ),
        (
            environ(GOOD, envs="sm-training,other"),
            "other are in BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS but have no bounds",
        ),
        (environ(GOOD, envs=""), "are not in BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS (the IAM scope)"),
        (environ(GOOD, queues="hi"), "only in the policy lo"),
        (
            environ(GOOD, BATCHPILOT_CAPACITY_DRY_RUN="perhaps"),
            "BATCHPILOT_CAPACITY_DRY_RUN: Input should be a valid boolean",
        ),
        (environ(GOOD, BATCHPILOT_CAPACITY_DESCRIBE_BUDGET="-1"), "BATCHPILOT_CAPACITY_DESCRIBE_BUDGET"),
        (
            {**environ(GOOD), "BATCHPILOT_STATE_TABLE": ""},
            "BATCHPILOT_STATE_TABLE is required when service environments are managed",
        ),
    ],
)
def test_invalid_configuration_is_a_clear_error_naming_the_variable(
    env: dict[str, str], expected: str
) -> None:
    with pytest.raises(ConfigError) as error:
        CapacitySettings.from_environ(env)
    assert expected in str(error.value)
    assert str(error.value).startswith("invalid capacity function configuration: ")


def test_a_queue_belongs_to_one_environment() -> None:
    policy = {
        "service_environments": {
            "a": {"job_queues": ["q"], "max": 4},
            "b": {"job_queues": ["q"], "max": 4},
        }
    }
    with pytest.raises(ConfigError, match="job queue 'q' is listed under 'a' and 'b'"):
        CapacitySettings.from_environ(environ(policy, envs="a,b", queues="q"))


def test_names_are_checked() -> None:
    policy = {"service_environments": {"bad name": {"job_queues": ["q"], "max": 4}}}
    with pytest.raises(ConfigError, match="service environment name 'bad name'"):
        CapacitySettings.from_environ(environ(policy, envs="bad name", queues="q"))


def test_quota_management_units() -> None:
    policy = {
        "service_environments": {
            "sm-quota": {
                "job_queues": ["q"],
                "units": {"ml.p4d.24xlarge": {"max": 8}, "ml.g5.xlarge": {"min": 1, "max": 4}},
                "floors": [
                    {"cron": "0 9 * * *", "duration_minutes": 60, "min": 2, "capacity_unit": "ml.g5.xlarge"}
                ],
            }
        }
    }
    settings = CapacitySettings.from_environ(environ(policy, envs="sm-quota", queues="q"))
    env = settings.environment("sm-quota")
    assert env.bounds() == {"ml.p4d.24xlarge": UnitBounds(max=8), "ml.g5.xlarge": UnitBounds(min=1, max=4)}
    nine = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)
    assert (env.floor("ml.g5.xlarge", nine), env.floor("ml.p4d.24xlarge", nine)) == (2, 0)
    policy["service_environments"]["sm-quota"]["floors"][0]["capacity_unit"] = "ml.x.large"  # type: ignore[index]
    with pytest.raises(ConfigError, match=r"floor for capacity unit 'ml\.x\.large'"):
        CapacitySettings.from_environ(environ(policy, envs="sm-quota", queues="q"))


@pytest.mark.parametrize(
    ("now", "is_open"),
    [
        (datetime(2026, 11, 23, 7, 59, tzinfo=UTC), False),  # Monday, before the window
        (datetime(2026, 11, 23, 8, 0, tzinfo=UTC), True),  # the minute it opens
        (datetime(2026, 11, 23, 17, 59, 59, tzinfo=UTC), True),
        (datetime(2026, 11, 23, 18, 0, tzinfo=UTC), False),  # 600 minutes later: closed
        (datetime(2026, 11, 22, 9, 0, tzinfo=UTC), False),  # Sunday
    ],
)
def test_scheduled_floor_windows(now: datetime, is_open: bool) -> None:
    floor = ScheduledFloor(cron="0 8 * * MON-FRI", duration_minutes=600, min=16)
    assert floor.is_open(now) is is_open


def test_scheduled_floor_in_a_time_zone() -> None:
    floor = ScheduledFloor(cron="0 8 * * *", duration_minutes=60, min=4, timezone="Europe/Berlin")
    assert floor.is_open(datetime(2026, 11, 23, 7, 30, tzinfo=UTC))  # 08:30 in Berlin (UTC+1)
    assert not floor.is_open(datetime(2026, 11, 23, 8, 30, tzinfo=UTC))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cron": "every morning please"}, "invalid cron expression"),
        ({"timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"duration_minutes": 0}, "greater than 0"),
    ],
)
def test_bad_floors_are_rejected(fields: dict[str, Any], message: str) -> None:
    raw = {"cron": "0 8 * * *", "duration_minutes": 60, "min": 1, **fields}
    with pytest.raises(ValueError, match=message):
        ScheduledFloor.model_validate(raw)


def test_the_iam_scopes_may_be_given_as_arns() -> None:
    arn = "arn:aws:batch:us-east-1:111122223333"
    settings = CapacitySettings.from_environ(
        environ(
            GOOD,
            envs=f"{arn}:service-environment/sm-training",
            queues=f"{arn}:job-queue/hi,{arn}:job-queue/lo",
        )
    )
    assert (settings.service_environments, settings.job_queues) == (("sm-training",), ("hi", "lo"))
    with pytest.raises(
        ConfigError,
        match=r"BATCHPILOT_CAPACITY_JOB_QUEUES: Value error, .* is not the ARN of a Batch job-queue",
    ):
        CapacitySettings.from_environ(environ(GOOD, queues=f"{arn}:service-environment/hi,lo"))
