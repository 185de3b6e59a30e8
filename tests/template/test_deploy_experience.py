"""A deploy a person can answer: the guided questions grouped and in order, the trial section of
samconfig.toml (observe only), the metadata ``sam publish`` needs, and a current stack Description.

``sam deploy --guided`` asks the parameters in template order and the CloudFormation console shows
``AWS::CloudFormation::Interface``'s groups and labels, so both must cover every parameter, in the
same order. The trial must submit nothing and change no capacity limit: a replay of ``events/``
with its parameters (scenarios that name job queues and service environments included) makes no
submit and no UpdateServiceEnvironment call. The ``AWS::ServerlessRepo::Application`` section is
checked offline by the SAM CLI's own packaging and publishing code
(:mod:`batchpilot_local.testing.sar_publish`, run with the SAM CLI's Python) and against the limits
the AWS SAM Developer Guide documents for it ("AWS SAM template Metadata section properties").
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local.iam.conformance import Verdict, judge
from batchpilot_local.iam.requests import Names, platform_requests
from batchpilot_local.iam.stack import expand, translated
from batchpilot_local.replay_options import samconfig_overrides
from batchpilot_local.testing.iam import ReplayRun, replay_calls
from batchpilot_local.testing.paths import ROOT, TEMPLATE_PATH
from batchpilot_local.testing.templates import SAMCONFIG_PATH, Deployed

INTERFACE = "AWS::CloudFormation::Interface"
SAR = "AWS::ServerlessRepo::Application"
SAR_CHECK = ROOT / "local" / "batchpilot_local" / "testing" / "sar_publish.py"
DEPLOY_DOC = ROOT / "docs" / "deploy.md"
# The guided deploy's first questions: where to page, the chat channels, which job queues
# recovery may act on (issue: "a deploy a person can answer").
ESSENTIALS = [
    {"AlarmActionTopicArn", "OnCallMessageFormat"},
    {"SlackWebhookSecretArn", "SlackBotTokenSecretArn", "SlackChannel", "TeamsWebhookSecretArn"},
    {"RecoveryJobQueueArns", "RecoveryDryRun"},
]
# Calls that act on the fleet: a resubmission (and its tags) or a capacity change.
ACTING_CALLS = {
    ("batch", "SubmitJob"),
    ("batch", "SubmitServiceJob"),
    ("batch", "TagResource"),
    ("sagemaker", "CreateTrainingJob"),
    ("batch", "UpdateServiceEnvironment"),
}


def _groups(template: dict[str, Any]) -> list[tuple[str, list[str]]]:
    groups = template["Metadata"][INTERFACE]["ParameterGroups"]
    return [(g["Label"]["default"], list(g["Parameters"])) for g in groups]


def _grouped(template: dict[str, Any]) -> list[str]:
    return [name for _, names in _groups(template) for name in names]


def _trial() -> dict[str, Any]:
    section: dict[str, Any] = tomllib.loads(SAMCONFIG_PATH.read_text(encoding="utf-8"))["trial"]
    return section


def _trial_overrides() -> dict[str, str]:
    return samconfig_overrides(SAMCONFIG_PATH, "trial")


# ------------------------------------------------------------------------ the guided questions
def test_every_parameter_is_in_exactly_one_group_and_has_a_label(template: dict[str, Any]) -> None:
    parameters = list(template["Parameters"])
    grouped = _grouped(template)
    assert len(parameters) >= 38
    ungrouped = [p for p in parameters if p not in grouped]
    assert ungrouped == [], (
        f"parameters in no group of Metadata > {INTERFACE} > ParameterGroups: {ungrouped}. Add each "
        "to the group it belongs to, give it a ParameterLabels entry, and move its block in "
        "Parameters to that place in the groups' order (sam deploy --guided asks in template order)"
    )
    twice = sorted({p for p in grouped if grouped.count(p) > 1})
    assert twice == [], f"parameters in more than one group: {twice}"
    unknown = sorted(set(grouped) - set(parameters))
    assert unknown == [], f"groups name parameters the template does not have: {unknown}"
    assert all(names for _, names in _groups(template)), "an empty group"

    labels = template["Metadata"][INTERFACE]["ParameterLabels"]
    assert sorted(labels) == sorted(parameters), sorted(set(labels) ^ set(parameters))
    texts = {name: label["default"] for name, label in labels.items()}
    assert all(isinstance(t, str) and 10 <= len(t) <= 100 for t in texts.values()), texts
    assert len(set(texts.values())) == len(texts), "two parameters share a label"


def test_the_parameters_are_asked_in_the_groups_order_essentials_first(template: dict[str, Any]) -> None:
    grouped = _grouped(template)
    assert list(template["Parameters"]) == grouped, (
        "Parameters must follow the order of the ParameterGroups (sam deploy --guided asks in "
        f"template order): expected {grouped}"
    )
    groups = _groups(template)
    assert [set(names) for _, names in groups[: len(ESSENTIALS)]] == ESSENTIALS
    assert groups[-1][0].startswith("Advanced")


def test_every_parameter_has_a_default_so_each_question_can_be_skipped(template: dict[str, Any]) -> None:
    parameters = template["Parameters"]
    assert [name for name, p in parameters.items() if "Default" not in p] == []
    # The advanced group keeps its defaults in every section of samconfig.toml.
    advanced = _groups(template)[-1][1]
    config = tomllib.loads(SAMCONFIG_PATH.read_text(encoding="utf-8"))
    environments = [name for name, value in config.items() if isinstance(value, dict)]
    assert set(environments) >= {"default", "trial", "prod"}
    for environment in environments:
        overridden = samconfig_overrides(SAMCONFIG_PATH, environment)
        assert not set(advanced) & set(overridden), (environment, set(advanced) & set(overridden))


def test_the_deploy_doc_lists_the_guided_groups_in_order(template: dict[str, Any]) -> None:
    text = DEPLOY_DOC.read_text(encoding="utf-8")
    section = text.split("## The guided questions", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\d+\. \*\*(.+?)\*\*", section, flags=re.MULTILINE)
    assert listed == [label for label, _ in _groups(template)]


# ----------------------------------------------------------------------------- the trial
def test_the_trial_section_is_complete_and_has_its_own_stack() -> None:
    config = tomllib.loads(SAMCONFIG_PATH.read_text(encoding="utf-8"))
    trial, default = config["trial"], config["default"]
    assert set(trial) == set(default) == {"global", "build", "validate", "deploy", "package", "sync"}
    assert trial["global"]["parameters"]["stack_name"] == "batchpilot-trial"
    stacks = {env["global"]["parameters"]["stack_name"] for env in config.values() if isinstance(env, dict)}
    assert len(stacks) == len([env for env in config.values() if isinstance(env, dict)])
    assert trial["build"] == default["build"] and trial["validate"] == default["validate"]
    deploy = trial["deploy"]["parameters"]
    assert deploy["capabilities"] == "CAPABILITY_IAM"
    assert deploy["confirm_changeset"] is True and deploy["resolve_s3"] is True
    assert deploy["s3_prefix"] == trial["package"]["parameters"]["s3_prefix"] == "batchpilot-trial"


def test_the_trial_submits_nothing_and_changes_no_capacity(template: dict[str, Any]) -> None:
    overrides = _trial_overrides()
    assert overrides["RecoveryDryRun"] == "true"
    assert overrides["RecoveryJobQueueArns"] == ""  # no queue named: the role may submit nowhere
    assert overrides["CapacityDryRun"] == "true"
    assert overrides["LogRetentionInDays"] == "14"
    parameters = template["Parameters"]
    unknown = sorted(set(overrides) - set(parameters))
    assert unknown == [], f"the trial section names parameters template.yaml does not have: {unknown}"
    for name, value in overrides.items():
        allowed = parameters[name].get("AllowedValues")
        if allowed is not None:
            assert value in {str(v) for v in allowed}, (name, value)
        if "AllowedPattern" in parameters[name]:
            assert re.fullmatch(parameters[name]["AllowedPattern"], value), (name, value)


def test_the_trial_deploys_everything_the_default_does(translated: dict[str, Any]) -> None:
    # "Everything else on": the same functions, event sources and channels, the same conditions
    # (so the same roles: the default deploy's IAM conformance covers the trial's), and a recovery
    # role that may submit to no queue.
    trial, default = Deployed(translated, _trial_overrides()), Deployed(translated)
    assert trial.functions() == default.functions()
    assert set(trial.functions().values()) == {"alerts", "capacity", "ledger", "metrics", "recovery"}
    assert trial.event_sources() == default.event_sources()
    assert trial.channels() == default.channels()
    conditions = list(translated.get("Conditions", {}))
    assert "RecoveryNoJobQueues" in conditions
    assert {c: trial.condition(c) for c in conditions} == {c: default.condition(c) for c in conditions}
    assert trial.condition("RecoveryNoJobQueues") is True
    roles = [name for name, r in translated["Resources"].items() if r["Type"] == "AWS::IAM::Role"]
    assert len(roles) >= 5
    assert [trial.resolve(translated["Resources"][r]) for r in roles] == [
        default.resolve(translated["Resources"][r]) for r in roles
    ]


@pytest.fixture(scope="module")
def trial_runs() -> list[ReplayRun]:
    return replay_calls(_trial_overrides())


def test_a_replay_with_the_trial_parameters_makes_no_submit_or_capacity_change(
    trial_runs: list[ReplayRun],
) -> None:
    calls = [call for run in trial_runs for call in run.calls]
    assert len(calls) > 500
    acting = sorted(
        {
            f"{c.function} {c.service}:{c.operation} ({c.origin})"
            for c in calls
            if (c.service, c.operation) in ACTING_CALLS
        }
    )
    assert acting == [], "the trial acted on the fleet:\n" + "\n".join(acting)

    # Scenarios that name job queues and service environments keep the trial's dry runs, and the
    # functions did decide there: recovery and capacity ran, and reported in dry run.
    assert all(r.parameters["RecoveryDryRun"] == r.parameters["CapacityDryRun"] == "true" for r in trial_runs)
    named_queues = [r for r in trial_runs if r.parameters.get("RecoveryJobQueueArns")]
    named_environments = [r for r in trial_runs if r.parameters.get("CapacityServiceEnvironmentArns")]
    assert named_queues and named_environments
    assert any(c.function == "recovery" for r in named_queues for c in r.calls)
    assert any(c.operation == "DescribeServiceEnvironments" for r in named_environments for c in r.calls)
    reported: set[tuple[str, Any]] = set()
    for call in calls:
        if (call.service, call.operation) == ("events", "PutEvents"):
            for entry in call.params["Entries"]:
                reported.add((entry["DetailType"], json.loads(entry["Detail"]).get("dry_run")))
    assert {("Job Resubmitted", True), ("Capacity Adjusted", True)} <= reported
    assert ("Job Resubmitted", False) not in reported and ("Capacity Adjusted", False) not in reported


def test_every_call_of_the_trial_is_allowed(trial_runs: list[ReplayRun]) -> None:
    # The same replay judged as IAM would (tests/template/test_iam_conformance.py's judge), each
    # run against the template expanded with its parameters: the trial's dry runs take paths
    # (a named queue or environment, nothing submitted) the default and configured runs do not.
    cfn = translated(TEMPLATE_PATH)
    by_parameters: dict[tuple[tuple[str, str], ...], list[Any]] = {}
    for run in trial_runs:
        by_parameters.setdefault(tuple(sorted(run.parameters.items())), []).extend(run.calls)
    verdict = Verdict()
    for parameters, calls in by_parameters.items():
        stack = expand(cfn, dict(parameters))
        verdict = verdict.merge(judge(calls, stack, Names(stack), extra=platform_requests(stack)))
    assert verdict.calls > 500
    assert verdict.unmodelled == {}, verdict.summary()
    assert verdict.denied == [], "IAM would deny:\n" + verdict.summary()
    assert [f.describe() for f in verdict.star_unjustified] == [], verdict.summary()


# ----------------------------------------------------------------- the SAR metadata, sam publish
def _sam_python() -> Path | None:
    candidates = [os.environ.get("SAM_CLI", ""), str(ROOT / ".venv-sam" / "bin" / "sam")]
    for sam in candidates:
        if sam and Path(sam).is_file():
            python = Path(sam).parent / "python"
            if python.exists():
                return python
    return None


@pytest.fixture(scope="module")
def sam_python() -> Path:
    python = _sam_python()
    if python is None:
        pytest.skip("SAM CLI not found: set SAM_CLI or create .venv-sam (make .venv-sam/bin/sam)")
    return python


def _publish_offline(python: Path, template: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # the SAM CLI's interpreter on the repository's check script
        [str(python), str(SAR_CHECK), str(template)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "AWS_PROFILE"},  # it signs nothing
    )


def _pyproject() -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project


def test_sam_publish_accepts_the_sar_metadata_offline(sam_python: Path) -> None:
    run = _publish_offline(sam_python, TEMPLATE_PATH)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert result["create"] == ["CREATE_APPLICATION"]
    assert result["update"] == ["UPDATE_APPLICATION", "CREATE_APPLICATION_VERSION"]
    # sam package uploaded the two local files the section names.
    assert set(result["packaged"]) == {"LicenseUrl", "ReadmeUrl"}
    assert all(url.startswith("s3://") for url in result["packaged"].values())
    assert result["template_body_has_metadata"] is False
    assert result["metadata"]["SemanticVersion"] == _pyproject()["version"]


# Each case replaces the section's line that starts with the first text by the second, and names
# what the refusal says.
BROKEN: dict[str, tuple[str, str, str]] = {
    "no author": ("    Author:", "", "author properties not provided"),
    "readme missing": ("    ReadmeUrl:", "    ReadmeUrl: NO-SUCH-README.md\n", "ExportFailedError"),
    "license twice": (
        "    LicenseUrl:",
        "    LicenseUrl: LICENSE\n    LicenseBody: Apache License 2.0\n",
        "provide either LicenseBody or LicenseUrl",
    ),
    "labels not a list": ("    Labels:", "    Labels: aws-batch\n", "Invalid type for parameter Labels"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_the_offline_publish_refuses_a_broken_section(sam_python: Path, tmp_path: Path, case: str) -> None:
    prefix, new, said = BROKEN[case]
    text = TEMPLATE_PATH.read_text(encoding="utf-8")
    at = text.index(prefix, text.index(f"  {SAR}:\n"))
    after = text.index("\n", at) + 1
    (tmp_path / "template.yaml").write_text(text[:at] + new + text[after:], encoding="utf-8")
    for name in ("LICENSE", "README.md"):
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    run = _publish_offline(sam_python, tmp_path / "template.yaml")
    assert run.returncode == 1, run.stdout[-2000:]
    assert said in run.stderr, run.stderr[-2000:]


def test_the_sar_metadata_keeps_the_documented_limits(template: dict[str, Any]) -> None:
    # AWS SAM Developer Guide, "AWS SAM template Metadata section properties" (the limits the
    # service applies on CreateApplication; the SAM CLI does not check them before sending).
    sar = template["Metadata"][SAR]
    known = {"Name", "Description", "Author", "SpdxLicenseId", "LicenseBody", "LicenseUrl", "ReadmeBody"}
    known |= {"ReadmeUrl", "Labels", "HomePageUrl", "SemanticVersion", "SourceCodeUrl"}
    assert set(sar) <= known, f"properties sam publish ignores: {sorted(set(sar) - known)}"
    assert all(isinstance(v, str | list) for v in sar.values()), "no intrinsic functions in this section"
    assert re.fullmatch(r"[a-zA-Z0-9\-]+", sar["Name"]) and 1 <= len(sar["Name"]) <= 140
    assert 1 <= len(sar["Description"]) <= 256
    assert (
        re.fullmatch(r"^[a-z0-9](([a-z0-9]|-(?!-))*[a-z0-9])?$", sar["Author"]) and len(sar["Author"]) <= 127
    )
    assert isinstance(sar["Labels"], list) and 1 <= len(sar["Labels"]) <= 10
    assert all(
        re.fullmatch(r"^[a-zA-Z0-9+\-_:\/@]+$", label) and len(label) <= 127 for label in sar["Labels"]
    )
    project = _pyproject()
    assert sar["SpdxLicenseId"] == project["license"] == "Apache-2.0"
    assert sar["SemanticVersion"] == project["version"], "SemanticVersion must be pyproject.toml's version"
    assert re.fullmatch(
        r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?",
        sar["SemanticVersion"],
    )
    # Local files, uploaded by sam package (at most 5 MB each).
    assert sar["LicenseUrl"] == "LICENSE" and sar["ReadmeUrl"] == "README.md"
    for name in ("LicenseUrl", "ReadmeUrl"):
        path = ROOT / sar[name]
        assert path.is_file() and path.stat().st_size <= 5 * 1024 * 1024, name
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")[:200]
    for name in ("HomePageUrl", "SourceCodeUrl"):
        assert re.fullmatch(r"https://[A-Za-z0-9.-]+/\S+", sar[name]), name


# ------------------------------------------------------------------------ the stack Description
def test_the_stack_description_says_what_it_deploys(template: dict[str, Any]) -> None:
    description = template["Description"]
    assert "later blocks" not in description and "later" not in description
    assert len(description.encode()) <= 1024  # CloudFormation's limit for a template Description
    for feature in ("metrics", "dashboards", "ledger", "alerts", "recovery", "capacity", "Slack", "Teams"):
        assert feature in description, feature
