"""Where each version is decided: ranges in pyproject.toml, exact pins in constraints.txt, and the
Lambda layer's pins (layers/batchpilot/requirements.txt) equal to constraints.txt's.

pyproject.toml's ranges are what a ``pip install`` of the wheel into someone else's environment
must satisfy; constraints.txt is what ``make`` and CI install (``make constraints`` regenerates
it; tests/packaging/test_wheel.py checks it is current); the layer is what Lambda runs, so the
functions run in AWS on the versions the tests ran on.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONSTRAINTS = ROOT / "constraints.txt"
LAYER = ROOT / "layers" / "batchpilot" / "requirements.txt"


def pins(path: Path) -> dict[str, str]:
    """``{canonical name: version}`` of a requirements-format file (comments and markers dropped)."""
    out: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        specs = list(requirement.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{path.name}: {raw!r} is not an exact pin"
        out[canonicalize_name(requirement.name)] = specs[0].version
    return out


def declared() -> list[tuple[str, Requirement]]:
    """Every requirement of pyproject.toml, with where it is declared."""
    out = [("dependencies", Requirement(text)) for text in PYPROJECT["project"]["dependencies"]]
    for extra, texts in PYPROJECT["project"].get("optional-dependencies", {}).items():
        out += [(f"optional-dependencies.{extra}", Requirement(text)) for text in texts]
    assert len(out) > 10, "read too few requirements: the parse is broken"
    return out


def test_pyproject_declares_ranges_that_hold_the_tested_pins() -> None:
    pinned = pins(CONSTRAINTS)
    problems = []
    for where, requirement in declared():
        name = canonicalize_name(requirement.name)
        operators = {spec.operator for spec in requirement.specifier}
        if operators & {"==", "==="}:
            problems.append(f"{where}: {requirement}: an exact pin (it goes in constraints.txt)")
        if not operators & {">=", "~="}:
            problems.append(f"{where}: {requirement}: no lower bound")
        if name not in pinned:
            problems.append(f"{where}: {requirement}: not pinned in constraints.txt (run make constraints)")
        elif not requirement.specifier.contains(pinned[name], prereleases=True):
            problems.append(f"{where}: {requirement}: constraints.txt pins {pinned[name]}, outside the range")
    assert problems == []


def test_the_layer_pins_what_constraints_txt_pins() -> None:
    layer, pinned = pins(LAYER), pins(CONSTRAINTS)
    assert {"boto3", "botocore", "pydantic", "aws-lambda-powertools"} <= set(layer)
    different = {
        name: (version, pinned.get(name)) for name, version in layer.items() if pinned.get(name) != version
    }
    assert different == {}, (
        "layer pin vs constraints.txt (keep them equal: the functions run what was tested)"
    )


def test_the_layer_pins_every_runtime_dependency_the_functions_share() -> None:
    """The layer's set is the package metadata's runtime set minus the local tools' libraries."""
    local_only = {"moto", "cfn-lint", "aws-sam-translator", "simpy", "pyyaml", "matplotlib", "numpy", "rich"}
    runtime = {canonicalize_name(r.name) for where, r in declared() if where == "dependencies"}
    assert set(pins(LAYER)) == runtime - local_only


def test_constraints_txt_has_no_unpinned_or_loose_line() -> None:
    lines = [
        line for line in CONSTRAINTS.read_text().splitlines() if line and not line.lstrip().startswith("#")
    ]
    assert lines
    for line in lines:
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[^\s;]+( ; .+)?", line), line
    # A marker limits a pin to other platforms only (pywin32 on Windows): what runs here is unconditional.
    here = default_environment()
    active = set()
    for line in lines:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate(here):
            active.add(canonicalize_name(requirement.name))
    assert {"moto", "boto3", "pytest", "uv"} <= active
