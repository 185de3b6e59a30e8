"""Rules of the repository's layout that no linter checks, each a test."""

from __future__ import annotations

import ast
from pathlib import Path

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


def _import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module → the modules of ``package`` (under ``root``) it imports, ``TYPE_CHECKING`` and nested
    imports included (a circle through a type-only import is still a circle of meaning)."""
    files = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                module = (
                    ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
                    if node.level
                    else node.module or ""
                )
                for alias in node.names:
                    target = f"{module}.{alias.name}"
                    deps.add(target if target in files else module)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each an import circle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for dep in sorted(graph[node]):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_circle_check_sees_a_circle_through_a_type_only_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import B\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import c\n"
    )
    (package / "c.py").write_text("def f():\n    from . import a\n")
    (package / "d.py").write_text("import pkg.a\n")
    assert _circles(_import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_no_import_circles_in_the_layer_or_the_local_tools() -> None:
    # A circle makes import order matter and hides which module owns a type (issue 24: alerts
    # facts/ports/render, local embedded_aws/world). Lower modules name what they need by protocol.
    graphs = {
        "batchpilot": _import_graph(LAYER.parent, "batchpilot"),
        "batchpilot_local": _import_graph(ROOT / "local", "batchpilot_local"),
    }
    assert {package: len(graph) > 20 for package, graph in graphs.items()} == {
        "batchpilot": True,
        "batchpilot_local": True,
    }
    circles = {package: _circles(graph) for package, graph in graphs.items()}
    assert circles == {"batchpilot": [], "batchpilot_local": []}


def test_every_function_runs_the_one_processor_shape_and_reads_no_private_context() -> None:
    # batchpilot.shared.processing: each feature's processor subclasses SqsProcessor, each app.py
    # builds its entries with queue_entry (and schedule_entry), and nothing reads the
    # ``lambda_context`` attribute Powertools sets on a processor for itself.
    handlers = sorted(LAYER.glob("*/handler.py"))
    assert {p.parent.name for p in handlers} == {"alerts", "capacity", "ledger", "metrics", "recovery"}
    processors = {
        p.parent.name: [
            node.name
            for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(node, ast.ClassDef)
            and any(getattr(b, "id", None) == "SqsProcessor" for b in node.bases)
        ]
        for p in handlers
    }
    assert {name: len(found) for name, found in processors.items()} == dict.fromkeys(processors, 1)
    apps = {
        p.parent.name: p.read_text(encoding="utf-8") for p in sorted((ROOT / "functions").glob("*/app.py"))
    }
    assert {name: "queue_entry(processor)" in text for name, text in apps.items()} == dict.fromkeys(
        apps, True
    )
    readers = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted(LAYER.rglob("*.py")) + sorted((ROOT / "functions").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (isinstance(node, ast.Attribute) and node.attr == "lambda_context")
        or (isinstance(node, ast.Constant) and node.value == "lambda_context")
    ]
    assert readers == []
