"""Shared by the benchmark scripts: the machine description and the RESULTS.md section writer."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from batchpilot_local.template import load_template
from batchpilot_local.testing import sections

ROOT = Path(__file__).resolve().parent.parent
# The benchmarks share the tests' helpers (batchpilot_local.testing), which find the repository
# through this variable whatever the working directory.
os.environ.setdefault("BATCHPILOT_REPO_ROOT", str(ROOT))
EVENTS_DIR = ROOT / "events"
FUNCTION_DIR = ROOT / "functions" / "metrics"
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
RESULTS_PREAMBLE = (
    "# Benchmark results\n\n"
    "Written by the scripts in this folder (`make bench` runs them with the dev venv); each run\n"
    "replaces its own section (`--section` picks another, e.g. for a python3.13 run against a\n"
    "`sam build` of the layer). Numbers are from one machine and one run: compare runs on the\n"
    "same machine only. No number here is asserted by any test.\n"
)
"""What a new RESULTS.md starts with."""

# What the template's Globals give every function (parameters at their defaults) and what Lambda
# itself sets for a python3.13 function with LogFormat JSON.
LAMBDA_ENV = {
    # What template.yaml gives the metrics function (Globals + its own), then Lambda's own variables.
    **load_template(ROOT / "template.yaml").functions["metrics"].environment,
    "AWS_LAMBDA_LOG_FORMAT": "JSON",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_LAMBDA_FUNCTION_NAME": "batchpilot-metrics",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
    "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
}


def sqs_record(index: int, body: str, queue: str) -> dict[str, Any]:
    """One record of Lambda's SQS event, shaped as SQS delivers it (every attribute Lambda sends),
    the ``index``-th message of the queue named ``queue`` in the test account."""
    return {
        "messageId": f"00000000-0000-4000-8000-{index:012d}",
        "receiptHandle": f"AQEB-receipt-{index}",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1763633000000",
            "SenderId": "AIDAIENQZJOLO23YVJ4VO",
            "ApproximateFirstReceiveTimestamp": "1763633000001",
        },
        "messageAttributes": {},
        "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:us-east-1:111122223333:{queue}",
        "awsRegion": "us-east-1",
    }


def cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    match = re.search(r"^(?:model name|Model|cpu model)\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else "unknown"


def python_build() -> str:
    config = sysconfig.get_config_var("CONFIG_ARGS") or ""
    flags = [f for f in ("--enable-optimizations", "--with-lto") if f in config]
    return " ".join(flags) + " (optimized build)" if flags else "no PGO/LTO (--enable-optimizations not set)"


def machine() -> dict[str, str]:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "python build": python_build(),
        "cpu": cpu_model(),
        "nproc": f"{os.cpu_count()}" + (f" (usable by this process: {affinity})" if affinity else ""),
        "load average at start (1/5/15 min)": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def machine_markdown(info: dict[str, str]) -> str:
    return "\n".join(f"- {key}: `{value}`" for key, value in info.items())


def pin_to_one_core() -> str:
    """Run this process on CPU 0 only (Lambda at 256 MB gets a fraction of one vCPU)."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
        return "pinned to CPU 0 (os.sched_setaffinity)"
    return "not pinned (os.sched_setaffinity unavailable)"


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear interpolation between closest ranks."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def shown(path: str) -> str:
    """A path as the RESULTS text shows it: relative inside the repo, absolute outside."""
    absolute = os.path.abspath(path)
    inside = absolute == str(ROOT) or absolute.startswith(str(ROOT) + os.sep)
    return os.path.relpath(absolute, ROOT) if inside else absolute


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def write_section(key: str, body: str) -> None:
    """Replace (or append) the section of RESULTS.md between this benchmark's markers."""
    sections.write_section(RESULTS, key, body, new_file=RESULTS_PREAMBLE)


LAMBDA_SOURCES = ("template.yaml", "events", "functions", "layers/batchpilot")
"""What a build of the functions needs from the repository (the template, its code, the samples)."""


def source_tree(ref: str | None, workdir: Path, paths: Sequence[str] = LAMBDA_SOURCES) -> Path:
    """Where the sources are: the working tree, or ``paths`` of ``ref`` exported from git into
    ``workdir/src``.

    A ref measures a consistent snapshot while others edit the working tree (their half-done
    changes may not even import).

    Raises:
        SystemExit: ``ref`` is not a commit of this repository.
    """
    if ref is None:
        return ROOT
    src = workdir / "src"
    src.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", ref, *paths], capture_output=True
    )
    if archive.returncode != 0:
        raise SystemExit(f"git archive {ref} failed: {archive.stderr.decode()[-2000:]}")
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    return src
