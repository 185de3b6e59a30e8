"""The embedded AWS reaches moto and botocore through their public names only: no module imports an
underscore module or name of moto or botocore, or reads an underscore attribute of something it
imported from them, but ``local/batchpilot_local/emulator/moto_fixes.py``, the version-checked
fixes of moto's own inefficiencies (and each of those is offered upstream). And the test run
refuses a moto outside pyproject.toml's range, in one line (``tests/conftest.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIM = ROOT / "local/batchpilot_local/emulator/moto_fixes.py"
LIBRARIES = ("moto", "botocore")


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _library(module: str) -> bool:
    return module.split(".")[0] in LIBRARIES


def private_uses(source: str) -> list[str]:
    """``"<line>: <what>"`` for each private moto or botocore name ``source`` uses: an import of
    an underscore module or name, or an underscore attribute read off a name bound to something
    imported from moto or botocore (``botocore_stubber._x``, ``moto.core._y``)."""
    tree = ast.parse(source)
    bound: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _library(alias.name):
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append(f"{node.lineno}: import {alias.name}")
                    bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and _library(node.module):
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"{node.lineno}: from {node.module}")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                bound.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_checker_finds_private_names() -> None:
    source = (
        "from moto.moto_api._internal import mock_random\n"
        "from botocore.endpoint import _x\n"
        "import moto.core._hidden\n"
        "from moto.core.models import botocore_stubber\n"
        "botocore_stubber._private\n"
        "from moto.dynamodb import models\n"
        "models.Table._helper\n"
        "botocore_stubber.enabled\n"
        "other._fine\n"
        "models.Table.__dict__\n"
    )
    assert [use.split(":")[0] for use in private_uses(source)] == ["1", "2", "3", "5", "7"]


def test_no_private_moto_or_botocore_name_outside_the_version_checked_shim() -> None:
    files = [
        path
        for folder in ("local", "layers", "functions", "benchmarks", "tests")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != SHIM
    ]
    assert len(files) > 100
    uses = {
        str(path.relative_to(ROOT)): found
        for path in files
        if (found := private_uses(path.read_text(encoding="utf-8")))
    }
    assert uses == {}


def test_a_moto_outside_the_supported_range_is_refused_in_one_clear_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from importlib import metadata

    from batchpilot_local.testing.moto_range import moto_outside_range

    assert moto_outside_range() is None  # the venv's own moto is in the range
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "6.0.0" if name == "moto" else real(name))
    reason = moto_outside_range()
    assert reason is not None and "\n" not in reason
    assert reason.startswith("moto 6.0.0 is installed, but batchpilot supports moto")
    assert "pyproject.toml" in reason and "make test-moto-latest" in reason
