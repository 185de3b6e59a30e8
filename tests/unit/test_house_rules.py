"""Rules of the repository's layout that no linter checks, each a test."""

from __future__ import annotations

import ast

from batchpilot_local.testing.paths import ROOT


def _imports_from_tests(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of the ``tests`` package (``import tests.x``, ``from tests.x
    import y``, ``from tests import x``) anywhere in ``source``, nested imports included, and of every
    relative import (under ``tests/`` one resolves inside the ``tests`` package)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "tests"]
        elif isinstance(node, ast.ImportFrom) and (
            node.level > 0 or (node.module or "").split(".")[0] == "tests"
        ):
            found.append((node.lineno, "." * node.level + (node.module or "")))
    return sorted(found)


def test_the_import_check_sees_every_form_of_import() -> None:
    source = (
        "import tests.conftest\nfrom tests import conftest\ndef f():\n    from tests.x import y\n"
        "from .test_x import z\nimport os, tests\n"
    )
    assert [line for line, _ in _imports_from_tests(source)] == [1, 2, 4, 5, 6]
    assert _imports_from_tests("import testsuite\nfrom batchpilot_local.testing import samples\n") == []


def test_no_test_or_benchmark_imports_from_the_tests_package() -> None:
    # Shared helpers live in batchpilot_local.testing: a test module imported by another test
    # module is collected twice, and its helpers break whenever it is moved or split.
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: imports {module}"
        for folder in ("tests", "benchmarks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, module in _imports_from_tests(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "import from batchpilot_local.testing instead:\n" + "\n".join(offenders)


LAYER = ROOT / "layers" / "batchpilot" / "batchpilot"
ADAPTER_DIRS = (LAYER / "io", LAYER / "alerts" / "channels")
"""Where the outside world is reached: AWS adapters (one module per service) and chat channels."""
OUTSIDE_WORLD = {"boto3", "botocore", "slack_sdk", "urllib3", "requests", "httpx", "http", "urllib"}
"""Top-level packages that talk to AWS or HTTP (``urllib.parse`` is pure and allowed)."""
PURE_SUBMODULES = {"urllib.parse", "http.HTTPStatus"}


def _outside_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of an :data:`OUTSIDE_WORLD` package in ``source``, nested
    imports included; ``TYPE_CHECKING``-only imports count too (keep them in adapters)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported = [f"{node.module}.{a.name}" for a in node.names]
            pure = node.module in PURE_SUBMODULES or all(n in PURE_SUBMODULES for n in imported)
            names = [] if pure else [node.module]
        else:
            continue
        found += [(node.lineno, n) for n in names if n.split(".")[0] in OUTSIDE_WORLD]
    return sorted(found)


def test_the_outside_world_check_sees_every_form_of_import() -> None:
    source = (
        "import boto3\nfrom botocore.exceptions import ClientError\ndef f():\n    import slack_sdk\n"
        "from urllib.parse import quote\nimport urllib.request\nfrom http import HTTPStatus\n"
        "from urllib3 import PoolManager\n"
    )
    assert [line for line, _ in _outside_imports(source)] == [1, 2, 4, 6, 8]


def test_only_adapters_import_aws_sdks_chat_sdks_or_http_clients() -> None:
    # The house rule (ARCHITECTURE.md): features reach AWS and chat services only through their
    # ports, implemented in batchpilot.io (one module per AWS service) and batchpilot.alerts.channels.
    sources = sorted(LAYER.rglob("*.py")) + sorted((ROOT / "functions").rglob("*.py"))
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: imports {module}"
        for path in sources
        if not any(path.is_relative_to(folder) for folder in ADAPTER_DIRS)
        for line, module in _outside_imports(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "move these calls behind a port, into an adapter:\n" + "\n".join(offenders)


def test_each_functions_app_is_wiring_of_at_most_40_lines() -> None:
    apps = sorted((ROOT / "functions").glob("*/app.py"))
    assert {p.parent.name for p in apps} >= {"metrics", "alerts", "recovery", "capacity"}
    too_long = {str(p.relative_to(ROOT)): n for p in apps if (n := len(p.read_text().splitlines())) > 40}
    assert too_long == {}, "app.py is wiring only: move the work into the feature's handler.py"


def test_code_cites_nothing_outside_the_repository() -> None:
    # Sources are AWS documentation, API operations or files in this repository.
    import re

    pattern = re.compile(
        r"domain\.md|field-cases|architecture\.md|shared/docs|\bF1[0-2]?\b|\bF[2-9]\b|issue \d+,? item"
    )
    sources = [
        p
        for folder in ("layers", "functions", "local", "tests", "benchmarks")
        for p in sorted((ROOT / folder).rglob("*.py"))
    ] + [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "template.yaml"]
    sources += sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "benchmarks").glob("*.md"))
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sources
        if path.exists() and path.name != "test_house_rules.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line) and "test_code_cites_nothing_outside" not in line and "pattern = " not in line
    ]
    assert offenders == []
