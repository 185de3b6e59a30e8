"""Fixtures shared by every test. The helpers the tests import live in :mod:`batchpilot_local.testing`
(samples, harness, templates, recovery), never in a test module."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

# Tell the test-support package where the repository is, whatever pytest's working directory.
os.environ.setdefault("BATCHPILOT_REPO_ROOT", str(Path(__file__).resolve().parent.parent))

import pytest
from batchpilot_local.testing.durations import slowest_by_level
from batchpilot_local.testing.moto_range import moto_outside_range
from hypothesis import settings

# Hypothesis profiles, chosen by $HYPOTHESIS_PROFILE. ``ci`` (the default, so `make test` and CI):
# derandomised (each test's examples seeded from the test itself, the same on every run and
# machine; no example database), no deadline (a loaded machine is not a failure), and a failing
# example printed as a reproduction blob (@reproduce_failure). ``dev``: random seeds, for exploring
# new examples locally (`HYPOTHESIS_PROFILE=dev make test`); derandomize=False is spelled out
# because under a CI environment variable Hypothesis' own defaults are derandomised, and a profile
# inherits them. A test's own @settings (max_examples, health checks) still applies on top.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    """Refuse to run against a moto outside the supported range (one clear line, not a
    traceback from deep inside the embedded AWS)."""
    reason = moto_outside_range()
    if reason is not None:
        raise pytest.UsageError(reason)


SLOWEST_PER_LEVEL = 10
"""Tests the run lists, slowest first, for each level (tests/unit, tests/integration, ...)."""
_seconds: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add up each test's set-up, call and tear-down (a module's fixtures count in its first test)."""
    _seconds[report.nodeid] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The slowest tests of each level the run covered, with their whole time (set-up included)."""
    for times in slowest_by_level(_seconds, SLOWEST_PER_LEVEL):
        title = f"slowest {len(times.slowest)} of {times.tests} in {times.level} ({times.total:.1f} s in all)"
        terminalreporter.write_sep("-", title)
        for spent, nodeid in times.slowest:
            terminalreporter.write_line(f"{spent:8.2f}s  {nodeid}")


@pytest.fixture
def lambda_context() -> Any:
    """A fake Lambda context, as Powertools' testing recipes use."""

    class Context:
        function_name = "batchpilot-metrics"
        memory_limit_in_mb = 256
        invoked_function_arn = "arn:aws:lambda:us-east-1:111122223333:function:batchpilot-metrics"
        aws_request_id = "52fdfc07-2182-454f-963f-5f0f9a621d72"

        def get_remaining_time_in_millis(self) -> int:
            return 30_000

    return Context()
