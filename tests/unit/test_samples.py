"""Every sample event in events/ parses and classifies as the field case it stands for (the alarm
samples: as the state change of the template's alarm they name)."""

from __future__ import annotations

import json

import pytest
from batchpilot.alerts.alarms import alarm_severity
from batchpilot.alerts.facts import fact_from_alarm_event
from batchpilot.alerts.policy import Severity
from batchpilot.shared.classification import Category as C
from batchpilot.shared.classification import JobKind as K
from batchpilot.shared.classification import NodeRole, classify
from batchpilot.shared.events import AlarmStateValue, UnsupportedEventError, parse_alarm_event, parse_event
from batchpilot_local.template import resolved_resources
from batchpilot_local.testing.paths import EVENTS_DIR, TEMPLATE_PATH
from batchpilot_local.testing.samples import sample, sample_event_paths

# file (under events/, no suffix) → kind, terminal, succeeded, category
EXPECTED = [
    ("batch-job/array-child-failed", K.CONTAINER_JOB, True, False, C.SPOT_INTERRUPTION),
    ("batch-job/failed-application-error", K.CONTAINER_JOB, True, False, C.APPLICATION_ERROR),
    ("batch-job/failed-attempt-timeout", K.CONTAINER_JOB, True, False, C.TIMEOUT),
    ("batch-job/failed-before-start-no-attempts", K.CONTAINER_JOB, True, False, C.MISCONFIGURATION),
    ("batch-job/failed-cannot-pull-container", K.CONTAINER_JOB, True, False, C.MISCONFIGURATION),
    ("batch-job/failed-eks-oom-killed", K.CONTAINER_JOB, True, False, C.OUT_OF_MEMORY),
    ("batch-job/failed-job-state-time-limit", K.CONTAINER_JOB, True, False, C.CAPACITY),
    ("batch-job/failed-out-of-memory", K.CONTAINER_JOB, True, False, C.OUT_OF_MEMORY),
    ("batch-job/failed-spot-reclaim", K.CONTAINER_JOB, True, False, C.SPOT_INTERRUPTION),
    ("batch-job/failed-without-job-arn", K.CONTAINER_JOB, True, False, C.APPLICATION_ERROR),
    ("batch-job/multi-node-node-failed-ecs-properties", K.CONTAINER_JOB, True, False, C.APPLICATION_ERROR),
    ("batch-job/multi-node-parent-failed", K.CONTAINER_JOB, True, False, C.APPLICATION_ERROR),
    ("batch-job/replayed-succeeded", K.CONTAINER_JOB, True, True, None),
    ("batch-job/runnable-retrying-after-spot-reclaim", K.CONTAINER_JOB, False, False, C.SPOT_INTERRUPTION),
    ("batch-job/running", K.CONTAINER_JOB, False, False, None),
    ("batch-job/succeeded", K.CONTAINER_JOB, True, True, None),
    (
        "batch-job-queue-blocked/capacity-insufficient-instance-capacity",
        K.CONTAINER_JOB,
        False,
        False,
        C.CAPACITY,
    ),
    (
        "batch-job-queue-blocked/misconfiguration-job-resource-requirement",
        K.CONTAINER_JOB,
        False,
        False,
        C.MISCONFIGURATION,
    ),
    ("sagemaker/completed", K.TRAINING_JOB, True, True, None),
    ("sagemaker/created-by-batch-failed", K.TRAINING_JOB, True, False, C.CAPACITY),
    ("sagemaker/failed-algorithm-error", K.TRAINING_JOB, True, False, C.OUT_OF_MEMORY),
    ("sagemaker/failed-capacity-error", K.TRAINING_JOB, True, False, C.CAPACITY),
    ("sagemaker/failed-ec2-insufficient-capacity", K.TRAINING_JOB, True, False, C.CAPACITY),
    ("sagemaker/failed-internal-server-error", K.TRAINING_JOB, True, False, C.INTERNAL_ERROR),
    ("sagemaker/failed-resource-limit-exceeded", K.TRAINING_JOB, True, False, C.QUOTA),
    ("sagemaker/in-progress-interrupted", K.TRAINING_JOB, False, False, C.SPOT_INTERRUPTION),
    ("sagemaker/in-progress-training", K.TRAINING_JOB, False, False, None),
    ("sagemaker/stopped-by-user", K.TRAINING_JOB, True, False, C.USER_STOPPED),
    ("sagemaker/stopped-max-runtime-exceeded", K.TRAINING_JOB, True, False, C.TIMEOUT),
    ("sagemaker/stopped-max-wait-time-exceeded", K.TRAINING_JOB, True, False, C.SPOT_INTERRUPTION),
    ("service-job/failed-algorithm-error", K.SERVICE_JOB, True, False, C.OUT_OF_MEMORY),
    ("service-job/failed-internal-server-error", K.SERVICE_JOB, True, False, C.INTERNAL_ERROR),
    ("service-job/failed-job-state-time-limit", K.SERVICE_JOB, True, False, C.CAPACITY),
    ("service-job/failed-preemption-budget-spent", K.SERVICE_JOB, True, False, C.PREEMPTION),
    ("service-job/failed-resource-limit-exceeded", K.SERVICE_JOB, True, False, C.QUOTA),
    ("service-job/failed-sagemaker-capacity", K.SERVICE_JOB, True, False, C.CAPACITY),
    ("service-job/failed-user-terminated", K.SERVICE_JOB, True, False, C.USER_STOPPED),
    ("service-job/failed-validation", K.SERVICE_JOB, True, False, C.MISCONFIGURATION),
    ("service-job/runnable-capacity", K.SERVICE_JOB, False, False, None),
    ("service-job/running", K.SERVICE_JOB, False, False, None),
    ("service-job/scheduled", K.SERVICE_JOB, False, False, None),
    ("service-job/succeeded", K.SERVICE_JOB, True, True, None),
    ("service-job-preemption/completed", K.SERVICE_JOB, False, False, C.PREEMPTION),
    ("service-job-preemption/started", K.SERVICE_JOB, False, False, C.PREEMPTION),
    (
        "service-job-queue-blocked/capacity-insufficient-instance-capacity",
        K.SERVICE_JOB,
        False,
        False,
        C.CAPACITY,
    ),
    (
        "service-job-queue-blocked/misconfiguration-quota-management-limit-exceeded",
        K.SERVICE_JOB,
        False,
        False,
        C.MISCONFIGURATION,
    ),
    (
        "service-job-queue-blocked/misconfiguration-service-environment-max-resource",
        K.SERVICE_JOB,
        False,
        False,
        C.MISCONFIGURATION,
    ),
    ("service-job-queue-blocked/undetermined", K.SERVICE_JOB, False, False, C.UNKNOWN),
]
UNSUPPORTED = ["ignored/batch-compute-environment-state-change", "ignored/ec2-spot-interruption-warning"]

A, OK, NO_DATA = AlarmStateValue.ALARM, AlarmStateValue.OK, AlarmStateValue.INSUFFICIENT_DATA
# file → the template's alarm (logical id), new state, previous state, the severity its description states
ALARMS = [
    ("cloudwatch-alarm/alerts-errors-alarm", "AlertsErrorsAlarm", A, OK, Severity.CRITICAL),
    (
        "cloudwatch-alarm/idle-while-queued-ok-after-insufficient-data",
        "IdleWhileQueuedAlarm",
        OK,
        NO_DATA,
        Severity.WARNING,
    ),
    ("cloudwatch-alarm/job-failure-rate-alarm", "JobQueueFailureRateAlarm", A, OK, Severity.CRITICAL),
    ("cloudwatch-alarm/job-failure-rate-copy", "JobQueueFailureRateAlarm", A, OK, Severity.CRITICAL),
    ("cloudwatch-alarm/job-failure-rate-ok", "JobQueueFailureRateAlarm", OK, A, Severity.CRITICAL),
    ("cloudwatch-alarm/lost-instance-hours-alarm", "LostInstanceHoursAlarm", A, OK, Severity.WARNING),
]


@pytest.mark.parametrize(
    ("name", "kind", "terminal", "succeeded", "category"), EXPECTED, ids=[r[0] for r in EXPECTED]
)
def test_sample_classifies_as_its_case(
    name: str, kind: K, terminal: bool, succeeded: bool, category: C | None
) -> None:
    facts = classify(parse_event(sample(name)))
    assert (facts.kind, facts.terminal, facts.succeeded, facts.category) == (
        kind,
        terminal,
        succeeded,
        category,
    )


# file → (arn, exit code, log stream, stopped_at epoch ms, node role, created by Batch): the shapes
# whose exit code, stop time and ARN live somewhere other than the top-level container and jobArn.
SHAPES: list[tuple[str, str, int | None, str | None, int | None, NodeRole | None, bool]] = [
    (
        "batch-job/multi-node-node-failed-ecs-properties",
        "arn:aws:batch:us-east-1:111122223333:job/3f6d2b1e-8c4a-4e7b-9d2f-5a1c7e9b0d42#1",
        1,
        "llama3-mnp/default/8c1f0a2b3d4e5f60718293a4b5c6d7e8",
        1795507800000,
        NodeRole.NODE,
        True,
    ),
    (
        "batch-job/multi-node-parent-failed",
        "arn:aws:batch:us-east-1:111122223333:job/3f6d2b1e-8c4a-4e7b-9d2f-5a1c7e9b0d42",
        1,
        "llama3-mnp/default/0a9b8c7d6e5f40312233445566778899",
        1795507810000,
        NodeRole.PARENT,
        False,
    ),
    (
        "batch-job/failed-eks-oom-killed",
        "arn:aws:batch:us-east-1:111122223333:job/a1c3e5f7-2b4d-4f6a-9c8e-3d5f7a9c1e24",
        137,
        None,
        1795505500000,
        None,
        False,
    ),
    (
        "batch-job/failed-without-job-arn",
        "arn:aws:batch:us-east-1:111122223333:job/b2d4f6a8-3c5e-4a7b-8d9f-4e6a8c0e2f35",
        2,
        "resnet-nightly/default/5e6f708192a3b4c5d6e7f80123456789",
        1795503900000,
        None,
        False,
    ),
]


@pytest.mark.parametrize(
    ("name", "arn", "exit_code", "stream", "stopped_ms", "role", "by_batch"),
    SHAPES,
    ids=[r[0] for r in SHAPES],
)
def test_sample_shapes_give_exit_code_stop_time_and_arn(
    name: str,
    arn: str,
    exit_code: int | None,
    stream: str | None,
    stopped_ms: int | None,
    role: NodeRole | None,
    by_batch: bool,
) -> None:
    facts = classify(parse_event(sample(name)))
    stopped = int(facts.stopped_at.timestamp() * 1000) if facts.stopped_at else None
    assert (
        facts.arn,
        facts.exit_code,
        facts.log_stream,
        stopped,
        facts.node_role,
        facts.created_by_batch,
    ) == (
        arn,
        exit_code,
        stream,
        stopped_ms,
        role,
        by_batch,
    )


def test_quota_samples_name_their_quota() -> None:
    assert classify(parse_event(sample("sagemaker/failed-resource-limit-exceeded"))).quota == (
        "ml.p5.48xlarge for training job usage"
    )
    assert classify(parse_event(sample("service-job/failed-resource-limit-exceeded"))).quota == (
        "ml.p4d.24xlarge for training job usage"
    )


@pytest.mark.parametrize("name", UNSUPPORTED)
def test_events_batchpilot_does_not_handle(name: str) -> None:
    with pytest.raises(UnsupportedEventError):
        parse_event(sample(name))


@pytest.mark.parametrize(
    ("name", "alarm", "state", "previous", "severity"), ALARMS, ids=[r[0] for r in ALARMS]
)
def test_alarm_sample_is_a_state_change_of_the_templates_alarm(
    name: str, alarm: str, state: AlarmStateValue, previous: AlarmStateValue, severity: Severity
) -> None:
    event = parse_alarm_event(sample(name))
    template_alarm = resolved_resources(TEMPLATE_PATH, "AWS::CloudWatch::Alarm")[alarm]
    assert event.detail.alarmName == template_alarm["AlarmName"] == f"batchpilot/batchpilot/{alarm}"
    assert event.resources == [f"arn:aws:cloudwatch:us-east-1:111122223333:alarm:{event.detail.alarmName}"]
    assert event.detail.previousState is not None
    assert (event.detail.state.value, event.detail.previousState.value) == (state, previous)
    assert (
        event.detail.previousState.timestamp
        < event.detail.state.timestamp
        <= event.time.replace(microsecond=999_999)
    )
    stated = alarm_severity(event.detail.configuration.description)
    assert stated == alarm_severity(template_alarm["AlarmDescription"]) and stated.severity is severity
    assert stated.problem is None
    with pytest.raises(UnsupportedEventError):  # not a job event: only the alerts function reads it
        parse_event(sample(name))


def test_the_alarm_copy_is_one_fact_and_the_ok_resolves_the_alarm() -> None:
    fire, copy, resolve = (
        fact_from_alarm_event(parse_alarm_event(sample(f"cloudwatch-alarm/job-failure-rate-{n}")))
        for n in ("alarm", "copy", "ok")
    )
    assert (
        sample("cloudwatch-alarm/job-failure-rate-alarm")["id"]
        != sample("cloudwatch-alarm/job-failure-rate-copy")["id"]
    )
    assert fire.key == copy.key != resolve.key
    assert resolve.alarm is not None and fire.alarm is not None
    assert resolve.alarm.resolved and resolve.alarm.previous_changed_at == fire.alarm.changed_at


def test_every_sample_is_in_this_table() -> None:
    listed = {row[0] for row in EXPECTED} | set(UNSUPPORTED) | {row[0] for row in ALARMS}
    on_disk = {str(p.relative_to(EVENTS_DIR).with_suffix("")) for p in sample_event_paths()}
    assert on_disk == listed


def test_samples_use_the_placeholder_account_only() -> None:
    paths = sample_event_paths()
    assert len(paths) > 40
    for path in paths:
        text = path.read_text()
        event = json.loads(text)
        assert event["account"] == "111122223333", path
        for token in text.replace('"', " ").replace(":", " ").split():
            if token.isdigit() and len(token) == 12:
                assert token == "111122223333", (path, token)
