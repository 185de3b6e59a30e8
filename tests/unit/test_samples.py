"""Every sample event in events/ parses and classifies as the field case it stands for."""

from __future__ import annotations

import json

import pytest
from batchpilot.shared.classification import Category as C
from batchpilot.shared.classification import JobKind as K
from batchpilot.shared.classification import classify
from batchpilot.shared.events import UnsupportedEventError, parse_event
from batchpilot_local.testing.paths import EVENTS_DIR
from batchpilot_local.testing.samples import sample, sample_event_paths

# file (under events/, no suffix) → kind, terminal, succeeded, category
EXPECTED = [
    ("batch-job/array-child-failed", K.CONTAINER_JOB, True, False, C.SPOT_INTERRUPTION),
    ("batch-job/failed-application-error", K.CONTAINER_JOB, True, False, C.APPLICATION_ERROR),
    ("batch-job/failed-attempt-timeout", K.CONTAINER_JOB, True, False, C.TIMEOUT),
    ("batch-job/failed-before-start-no-attempts", K.CONTAINER_JOB, True, False, C.MISCONFIGURATION),
    ("batch-job/failed-cannot-pull-container", K.CONTAINER_JOB, True, False, C.MISCONFIGURATION),
    ("batch-job/failed-job-state-time-limit", K.CONTAINER_JOB, True, False, C.CAPACITY),
    ("batch-job/failed-spot-reclaim", K.CONTAINER_JOB, True, False, C.SPOT_INTERRUPTION),
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
    ("sagemaker/failed-algorithm-error", K.TRAINING_JOB, True, False, C.APPLICATION_ERROR),
    ("sagemaker/failed-capacity-error", K.TRAINING_JOB, True, False, C.CAPACITY),
    ("sagemaker/failed-ec2-insufficient-capacity", K.TRAINING_JOB, True, False, C.CAPACITY),
    ("sagemaker/failed-internal-server-error", K.TRAINING_JOB, True, False, C.INTERNAL_ERROR),
    ("sagemaker/in-progress-interrupted", K.TRAINING_JOB, False, False, C.SPOT_INTERRUPTION),
    ("sagemaker/in-progress-training", K.TRAINING_JOB, False, False, None),
    ("sagemaker/stopped-by-user", K.TRAINING_JOB, True, False, C.USER_STOPPED),
    ("sagemaker/stopped-max-runtime-exceeded", K.TRAINING_JOB, True, False, C.TIMEOUT),
    ("sagemaker/stopped-max-wait-time-exceeded", K.TRAINING_JOB, True, False, C.SPOT_INTERRUPTION),
    ("service-job/failed-algorithm-error", K.SERVICE_JOB, True, False, C.APPLICATION_ERROR),
    ("service-job/failed-internal-server-error", K.SERVICE_JOB, True, False, C.INTERNAL_ERROR),
    ("service-job/failed-job-state-time-limit", K.SERVICE_JOB, True, False, C.CAPACITY),
    ("service-job/failed-preemption-budget-spent", K.SERVICE_JOB, True, False, C.PREEMPTION),
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


@pytest.mark.parametrize("name", UNSUPPORTED)
def test_events_batchpilot_does_not_handle(name: str) -> None:
    with pytest.raises(UnsupportedEventError):
        parse_event(sample(name))


def test_every_sample_is_in_this_table() -> None:
    listed = {row[0] for row in EXPECTED} | set(UNSUPPORTED)
    on_disk = {str(p.relative_to(EVENTS_DIR).with_suffix("")) for p in sample_event_paths()}
    assert on_disk == listed


def test_samples_use_the_placeholder_account_only() -> None:
    for path in sample_event_paths():
        text = path.read_text()
        event = json.loads(text)
        assert event["account"] == "111122223333", path
        for token in text.replace('"', " ").replace(":", " ").split():
            if token.isdigit() and len(token) == 12:
                assert token == "111122223333", (path, token)
