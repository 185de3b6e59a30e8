"""Every test under tests/faults is marked ``faults`` (``pytest -m faults`` runs just them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import botocore.endpoint
import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)


@pytest.fixture(autouse=True)
def no_retry_sleep(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """botocore's backoff between its own retries does not sleep (the retries still happen)."""
    monkeypatch.setattr(botocore.endpoint.time, "sleep", lambda seconds: None)
    yield
