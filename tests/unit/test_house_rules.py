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
