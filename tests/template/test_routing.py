"""F11: every sample event reaches exactly the functions meant to receive it, through the rules
deployed by template.yaml (moto's EventBridge pattern matcher), and no other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from batchpilot_local.template import AppTemplate, load_template

from tests.conftest import EVENTS_DIR, ROOT

# Which functions each folder of events/ is meant for. A folder missing here fails the test, so a
# new kind of sample must state where it goes.
EXPECTED_BY_FOLDER: dict[str, set[str]] = {
    "batch-job": {"metrics", "alerts"},
    "batch-job-queue-blocked": {"metrics", "alerts"},
    "service-job": {"metrics", "alerts"},
    "service-job-queue-blocked": {"metrics", "alerts"},
    "service-job-preemption": {"metrics", "alerts"},
    "sagemaker": {"metrics", "alerts"},
    "ignored": set(),
}

# Functions a single file reaches on top of its folder's set (rules that filter on the detail, not
# only on the detail-type). RecoveryRule: terminal FAILED Batch jobs, Failed/Stopped SageMaker
# training jobs not created by AWS Batch.
EXTRA_BY_FILE: dict[str, set[str]] = {
    **{
        f"batch-job/{name}.json": {"recovery"}
        for name in (
            "array-child-failed",
            "failed-application-error",
            "failed-attempt-timeout",
            "failed-before-start-no-attempts",
            "failed-cannot-pull-container",
            "failed-job-state-time-limit",
            "failed-spot-reclaim",
        )
    },
    **{
        f"service-job/{name}.json": {"recovery"}
        for name in (
            "failed-algorithm-error",
            "failed-internal-server-error",
            "failed-job-state-time-limit",
            "failed-preemption-budget-spent",
            "failed-sagemaker-capacity",
            "failed-user-terminated",
            "failed-validation",
        )
    },
    **{
        f"sagemaker/{name}.json": {"recovery"}
        for name in (
            "failed-algorithm-error",
            "failed-capacity-error",
            "failed-ec2-insufficient-capacity",
            "failed-internal-server-error",
            "stopped-by-user",
            "stopped-max-runtime-exceeded",
            "stopped-max-wait-time-exceeded",
        )
    },
    # CapacityRule: service jobs blocked by their service environment's maxCapacity.
    "service-job-queue-blocked/misconfiguration-service-environment-max-resource.json": {"capacity"},
}


@pytest.fixture(scope="module")
def app() -> AppTemplate:
    return load_template(ROOT / "template.yaml")


def single_events() -> list[Path]:
    paths = []
    for path in sorted(EVENTS_DIR.rglob("*.json")):
        if "detail-type" in json.loads(path.read_text()):
            paths.append(path)
    return paths


@pytest.mark.parametrize("path", single_events(), ids=lambda p: str(p.relative_to(EVENTS_DIR)))
def test_sample_reaches_exactly_its_functions(app: AppTemplate, path: Path) -> None:
    folder = path.relative_to(EVENTS_DIR).parts[0]
    assert folder in EXPECTED_BY_FOLDER, f"say which functions events/{folder}/ is meant for"
    event = json.loads(path.read_text())
    reached = {route.function.short_name for route in app.routes_for(event)}
    extra = EXTRA_BY_FILE.get(path.relative_to(EVENTS_DIR).as_posix(), set())
    assert reached == EXPECTED_BY_FOLDER[folder] | extra


def test_a_typo_in_a_pattern_would_be_caught(app: AppTemplate) -> None:
    # The same event with a detail-type one letter off reaches nothing: routing is by real patterns.
    event = json.loads((EVENTS_DIR / "service-job" / "succeeded.json").read_text())
    event["detail-type"] = "Batch Service Job State Changes"
    assert app.routes_for(event) == []
