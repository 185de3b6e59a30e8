"""Every sample event reaches exactly the functions meant to receive it, through the rules
deployed by template.yaml (moto's EventBridge pattern matcher), and no other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from batchpilot_local.template import AppTemplate, load_template
from batchpilot_local.testing.paths import EVENTS_DIR, ROOT
from batchpilot_local.testing.templates import EXPECTED_BY_FOLDER, EXTRA_BY_FILE


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


def test_the_replay_reads_the_template_as_cfn_lint_does(tmp_path: Path) -> None:
    """The replay parses templates with a light loader (PyYAML + aws-sam-translator's intrinsics
    constructor) instead of cfn-lint's, which costs about 90 MB to import: both must read
    template.yaml, and the short forms and an unquoted date, to the same data."""
    from batchpilot_local.template import _parse, _plain
    from cfnlint.decode.cfn_yaml import loads

    extra = tmp_path / "short-forms.yaml"
    extra.write_text(
        "AWSTemplateFormatVersion: 2010-09-09\n"
        "Resources:\n"
        "  Q:\n"
        "    Type: AWS::SQS::Queue\n"
        "    Properties:\n"
        "      QueueName: !Sub '${AWS::StackName}-q'\n"
        "      Tags:\n"
        "        - {Key: a, Value: !GetAtt Other.Arn}\n"
        "        - {Key: b, Value: !Join ['-', [!Ref P, !Select [0, !Split [',', 'x,y']]]]}\n"
        "        - {Key: c, Value: !If [Cond, !FindInMap [M, k, v], !Ref AWS::NoValue]}\n",
        encoding="utf-8",
    )
    for path in (ROOT / "template.yaml", extra):
        assert _parse(path) == _plain(loads(path.read_text(encoding="utf-8"), str(path)))


def test_loading_the_template_for_a_replay_does_not_import_cfn_lint() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from batchpilot_local.replay import Replayer\n"
        "Replayer()\n"
        "print(sorted(m for m in ('cfnlint', 'networkx') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
