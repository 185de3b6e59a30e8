"""Every test under tests/faults is marked ``faults`` (``pytest -m faults`` runs just them).

Every API call the functions make here is recorded for the IAM conformance test
(``tests/template/test_iam_conformance.py``, through :mod:`batchpilot_local.testing.iam`), so the
suite runs once per ``make test`` and is checked against the template's roles too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import botocore.endpoint
import pytest
from batchpilot_local.testing.iam import FaultRecording, recording_faults, write_fault_calls

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)


def pytest_sessionfinish(session: pytest.Session) -> None:
    write_fault_calls()  # when $BATCHPILOT_IAM_CALLS names a file (a child run of the suite)


@pytest.fixture(scope="package", autouse=True)
def recorded_calls() -> Iterator[FaultRecording]:
    """Record the API calls of every embedded AWS opened by the fault tests."""
    with recording_faults() as recording:
        yield recording


@pytest.fixture(autouse=True)
def recorded_test(recorded_calls: FaultRecording, request: pytest.FixtureRequest) -> Iterator[None]:
    """Stamp each test's id on the calls it makes."""
    with recorded_calls.test(request.node.nodeid):
        yield


@pytest.fixture(autouse=True)
def no_retry_sleep(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """botocore's backoff between its own retries does not sleep (the retries still happen)."""
    monkeypatch.setattr(botocore.endpoint.time, "sleep", lambda seconds: None)
    yield
