"""The contract tests' one fixture: ``target``, each test once against the emulator and once
against a real account (marker ``aws``; skipped, saying which variables to set, unless opted in:
see :mod:`batchpilot_local.testing.contract`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from batchpilot_local.testing.contract import (
    ContractTarget,
    emulator_target,
    real_account_skip_reason,
    real_account_target,
)


@pytest.fixture(params=["emulator", pytest.param("aws", marks=pytest.mark.aws)])
def target(request: pytest.FixtureRequest) -> Iterator[ContractTarget]:
    if request.param == "emulator":
        with emulator_target() as emulated:
            yield emulated
        return
    reason = real_account_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    yield real_account_target()
