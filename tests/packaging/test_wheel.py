"""The wheel is a working tool outside the checkout, and its dependencies install on every Python
and platform batchpilot supports.

* ``uv build --wheel`` of the checkout, installed into a fresh virtual environment in a temporary
  folder at constraints.txt's pins, replays one packaged sample from a folder with no
  ``template.yaml``: the template, the functions' code and the samples come from the wheel
  (hatch_build.py, local/batchpilot_local/bundle.py), nothing from the checkout.
* The wheel's metadata holds ranges, never exact pins (those are constraints.txt's).
* Every pin of constraints.txt has a wheel for Python 3.11 to 3.14 on Linux (x86_64, aarch64) and
  macOS (arm64): ``uv pip compile --only-binary :all:`` for each target, from PyPI's metadata.

Needs uv (a dev dependency; ``make test`` installs it) and PyPI or uv's cache; skips without uv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "constraints.txt"
SAMPLE = "batch-job/failed-spot-reclaim.json"
INSTALL_TIMEOUT = 600  # seconds: a cold uv cache downloads about 100 MB


def uv() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        pytest.skip("uv is not installed (a dev dependency: make test installs it)")
    return str(find_uv_bin())


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything pointing at the checkout or its venv."""
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "BATCHPILOT_REPO_ROOT", "UV_PROJECT_ENVIRONMENT")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def run(*argv: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = run(uv(), "build", "--wheel", "--out-dir", str(out), str(ROOT), cwd=out, timeout=INSTALL_TIMEOUT)
    assert done.returncode == 0, done.stderr[-4000:]
    wheels = sorted(out.glob("batchpilot-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The ``bin`` folder of a fresh venv (outside the checkout) with the wheel installed."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    work = venv.parent
    done = run(uv(), "venv", "--quiet", "--python", sys.executable, str(venv), cwd=work)
    assert done.returncode == 0, done.stderr
    python = venv / "bin" / "python"
    done = run(
        uv(), "pip", "install", "--quiet", "--python", str(python), "-c", str(CONSTRAINTS), str(wheel),
        cwd=work, timeout=INSTALL_TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    yield venv / "bin"


def test_the_wheel_carries_the_application_and_ranges_not_pins(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    app = "batchpilot_local/sam_app/"
    expected = {f"{app}template.yaml", f"{app}samconfig.toml", f"{app}events/{SAMPLE}"} | {
        f"{app}functions/{name}/app.py" for name in ("alerts", "capacity", "ledger", "metrics", "recovery")
    }
    assert expected <= names, sorted(expected - names)
    assert len([n for n in names if n.startswith(f"{app}events/") and n.endswith(".json")]) == len(
        list((ROOT / "events").rglob("*.json"))
    ), "every sample event is packaged"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert requires, "no Requires-Dist read: the check is broken"
    pinned = [
        line
        for line in requires
        if any(spec.operator in ("==", "===") for spec in Requirement(line.split(":", 1)[1]).specifier)
    ]
    assert pinned == [], "exact pins belong in constraints.txt, not the package metadata"
    assert "Requires-Python: >=3.11\n" in metadata + "\n"


def test_the_installed_wheel_replays_a_packaged_sample_outside_the_checkout(
    installed: Path, tmp_path: Path
) -> None:
    assert not (tmp_path / "template.yaml").exists()
    where = run(
        str(installed / "python"), "-c", "import batchpilot, batchpilot_local; "
        "print(batchpilot.__file__); print(batchpilot_local.__file__)", cwd=tmp_path,
    )  # fmt: skip
    assert where.returncode == 0, where.stderr
    assert len(where.stdout.splitlines()) == 2  # the two packages' files
    for line in where.stdout.splitlines():
        assert Path(line).is_relative_to(installed.parent), f"imported from outside the venv: {line}"

    version = run(str(installed / "batchpilot"), "--version", cwd=tmp_path)
    expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert (version.returncode, version.stdout) == (0, f"batchpilot {expected}\n")

    listed = run(str(installed / "batchpilot"), "samples", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    samples = [Path(line) for line in listed.stdout.splitlines()]
    assert samples and all(p.is_relative_to(installed.parent) and p.is_file() for p in samples)
    sample = next(p for p in samples if p.as_posix().endswith(SAMPLE))

    done = run(str(installed / "batchpilot"), "replay", "--format", "json", str(sample), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(reports) == 1
    report = reports[0]
    assert report["errors"] == []
    assert {"alerts", "ledger", "metrics", "recovery"} <= set(report["functions"])
    assert any(m["name"] == "JobsFailed" for m in report["metrics"])
    assert report["notifications"], "the alerts function sent nothing"


def test_a_template_that_is_not_there_is_one_line_and_exit_2(installed: Path, tmp_path: Path) -> None:
    sample = tmp_path / "event.json"
    sample.write_text("{}")
    done = run(str(installed / "batchpilot"), "replay", "--template", "nope.yaml", str(sample), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("batchpilot replay: nope.yaml: cannot read the template")
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("python", ["3.11", "3.12", "3.13", "3.14"])
@pytest.mark.parametrize(
    "platform", ["x86_64-manylinux_2_28", "aarch64-manylinux_2_28", "aarch64-apple-darwin"]
)
def test_every_pin_has_a_wheel_for_each_supported_python(python: str, platform: str, tmp_path: Path) -> None:
    compile_ = (
        uv(), "pip", "compile", str(ROOT / "pyproject.toml"), "--extra", "dev", "--quiet", "--no-header",
        "--python-version", python, "--python-platform", platform, "--only-binary", ":all:",
        "-c", str(CONSTRAINTS), "-o", str(tmp_path / "resolved.txt"),
    )  # fmt: skip
    # From uv's cache when it holds PyPI's pages already (the other cases' run, or the install
    # above); else online. Revalidating every page online takes about 15 s a case.
    done = run(*compile_, "--offline", cwd=tmp_path, timeout=INSTALL_TIMEOUT)
    if done.returncode != 0:
        done = run(*compile_, cwd=tmp_path, timeout=INSTALL_TIMEOUT)
    assert done.returncode == 0, done.stderr[-4000:]
    resolved = (tmp_path / "resolved.txt").read_text()
    assert "moto==" in resolved and "pytest==" in resolved, resolved[:2000]


def test_constraints_txt_is_what_make_constraints_writes(tmp_path: Path) -> None:
    """A dependency added to pyproject.toml without ``make constraints`` fails here: the same
    command (the Makefile's flags) run on a copy gives the same pins."""
    makefile = (ROOT / "Makefile").read_text()
    assert "pip compile pyproject.toml --extra dev --universal --python-version 3.11" in makefile
    copy = tmp_path / "constraints.txt"
    copy.write_text(CONSTRAINTS.read_text())
    compile_ = (
        uv(), "pip", "compile", "pyproject.toml", "--extra", "dev", "--universal",
        "--python-version", "3.11", "--quiet", "--custom-compile-command", "make constraints",
        "-o", str(copy),
    )  # fmt: skip
    done = run(*compile_, "--offline", cwd=ROOT, timeout=INSTALL_TIMEOUT)
    if done.returncode != 0:
        done = run(*compile_, cwd=ROOT, timeout=INSTALL_TIMEOUT)
    assert done.returncode == 0, done.stderr[-4000:]
    assert copy.read_text() == CONSTRAINTS.read_text(), "pyproject.toml changed: run make constraints"
