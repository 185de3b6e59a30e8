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
