"""``batchpilot --help``, ``--version`` and each subcommand's ``--help`` import nothing heavy.

The replay's embedded AWS (moto, boto3, botocore, aws-sam-translator) and the simulator's engine
and charts (SimPy, matplotlib, numpy) cost seconds to import; the CLI imports them only when a
subcommand runs (``local/batchpilot_local/cli.py``). Each case runs the CLI in a fresh interpreter
with ``python -X importtime`` and reads every module it imported from stderr. How long start-up
takes is measured by ``benchmarks/bench_cli_startup.py``, not here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("moto", "boto3", "botocore", "samtranslator", "matplotlib", "simpy", "numpy", "cfnlint", "yaml")


def imported_modules(*args: str, cwd: Path) -> tuple[int, str, set[str]]:
    """Exit status, stdout and every module imported by ``python -X importtime ARGS``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPROFILEIMPORTTIME"}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )
    modules = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line: "self [us] | cumulative | imported package"
                modules.add(name)
    return done.returncode, done.stdout, modules


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(name for name in modules if name.split(".")[0] in HEAVY)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["replay", "--help"],
        ["simulate", "--help"],
        ["lineage", "--help"],
        ["queue", "--help"],
        ["samples", "--help"],
        ["samples"],
    ],
    ids=" ".join,
)
def test_help_version_and_samples_import_neither_moto_nor_boto3(argv: list[str], tmp_path: Path) -> None:
    code, out, modules = imported_modules("-m", "batchpilot_local.cli", *argv, cwd=tmp_path)
    assert code == 0, out
    assert out.strip(), "printed nothing"
    # The scan reads the CLI's own imports (else an empty set would pass anything).
    assert {"argparse", "batchpilot_local.lineage_command", "batchpilot_local.bundle"} <= modules
    assert heavy_in(modules) == []


def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    from importlib.metadata import version

    code, out, _ = imported_modules("-m", "batchpilot_local.cli", "--version", cwd=tmp_path)
    assert (code, out) == (0, f"batchpilot {version('batchpilot')}\n")


def test_the_scan_sees_heavy_imports_when_there_are_some(tmp_path: Path) -> None:
    """The replay itself does import moto and boto3: the check above can fail."""
    code, _, modules = imported_modules("-c", "import batchpilot_local.replay", cwd=tmp_path)
    assert code == 0
    assert {"moto", "boto3", "botocore", "samtranslator"} <= {name.split(".")[0] for name in modules}


def test_replay_without_paths_is_a_one_line_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "batchpilot_local.cli", "replay"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "batchpilot replay: give one or more PATHs ('-' for stdin), or --samples for the sample events\n"
    )
