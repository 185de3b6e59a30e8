"""Rules the tests themselves keep, each a test: property tests that fail the same way everywhere,
assertions that cannot pass on nothing."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from batchpilot_local.testing.paths import ROOT
from hypothesis import settings

TESTS = ROOT / "tests"


def _test_sources() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(TESTS.rglob("*.py"))]


def test_hypothesis_runs_derandomised_unless_the_dev_profile_is_asked_for() -> None:
    ci, dev = settings.get_profile("ci"), settings.get_profile("dev")
    assert ci.derandomize is True and ci.deadline is None and ci.print_blob is True
    assert dev.derandomize is False  # random: new seeds locally
    chosen = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
    current = settings.default
    assert current is not None
    assert current.derandomize is chosen.derandomize
    assert current.deadline == chosen.deadline


def _settings_keywords(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, keyword) of every keyword passed to a call of ``settings(...)`` (hypothesis' decorator
    or object) in ``tree``."""
    return [
        (node.lineno, keyword.arg or "**")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == "settings")
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "settings")
        )
        for keyword in node.keywords
    ]


def test_no_property_test_chooses_its_own_randomness() -> None:
    # The profile decides (tests/conftest.py): derandomised in CI, random with HYPOTHESIS_PROFILE=dev.
    sources = _test_sources()
    assert len(sources) > 100
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: settings({keyword}=...)"
        for path, tree in sources
        if path.name != "conftest.py"
        for line, keyword in _settings_keywords(tree)
        if keyword in {"derandomize", "database", "print_blob"}
    ]
    assert offenders == [], "leave these to the profile in tests/conftest.py:\n" + "\n".join(offenders)
    assert _settings_keywords(ast.parse("@settings(max_examples=3, derandomize=True)\ndef f(): ...")) == [
        (1, "max_examples"),
        (1, "derandomize"),
    ]
