"""Fixtures shared by every test. The helpers the tests import live in :mod:`batchpilot_local.testing`
(samples, harness, templates, recovery), never in a test module."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# Tell the test-support package where the repository is, whatever pytest's working directory.
os.environ.setdefault("BATCHPILOT_REPO_ROOT", str(Path(__file__).resolve().parent.parent))

import pytest


def moto_outside_range() -> str | None:
    """Why the installed moto is not one the project supports, or None when it is: the range is
    the moto requirement of pyproject.toml (as the installed ``batchpilot`` distribution states
    it), read by ``packaging``'s requirement parser."""
    from importlib import metadata

    from packaging.requirements import Requirement

    requirement = next(
        Requirement(text)
        for text in metadata.requires("batchpilot") or []
        if Requirement(text).name == "moto" and not Requirement(text).marker
    )
    installed = metadata.version("moto")
    if requirement.specifier.contains(installed, prereleases=True):
        return None
    return (
        f"moto {installed} is installed, but batchpilot supports moto{requirement.specifier} "
        f"(pyproject.toml): the embedded AWS is only checked within that range. Reinstall the venv "
        f"(`make clean test`) or `pip install 'moto{requirement.specifier}'`; to try another moto on "
        f"purpose, widen the range in pyproject.toml and run `make test-moto-latest`."
    )


def pytest_configure(config: pytest.Config) -> None:
    """Refuse to run against a moto outside the supported range (one clear line, not a
    traceback from deep inside the embedded AWS)."""
    reason = moto_outside_range()
    if reason is not None:
        raise pytest.UsageError(reason)


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
