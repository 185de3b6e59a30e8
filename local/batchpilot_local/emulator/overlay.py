"""The emulator as one object: the backends of every account and region, the clock they share,
the SubmitServiceJob rate, and the switch that puts them in front of moto."""

from __future__ import annotations

import time
from typing import Any

from batchpilot_local.emulator import patch
from batchpilot_local.emulator.batch.models import EmbeddedBatch, Throttle
from batchpilot_local.emulator.batch.utils import SUBMIT_SERVICE_JOB_RATE
from batchpilot_local.emulator.core import Clock, Response
from batchpilot_local.emulator.routing import route
from batchpilot_local.emulator.sagemaker.models import EmbeddedTraining

__all__ = ["Overlay"]


class Overlay:
    """The emulated Batch and SageMaker training jobs of every account and region, installed in
    front of moto while open (``with Overlay():`` or :meth:`install` / :meth:`uninstall`).

    Backends are created per (account, region) on first use. ``clock`` (epoch seconds, may be
    replaced at any time, e.g. by a fake clock) stamps every time they record. ``submit_rate`` is
    the SubmitServiceJob limit per second per account (None: off); change it later with
    :meth:`set_submit_rate`.
    """

    def __init__(self, clock: Clock = time.time, submit_rate: int | None = SUBMIT_SERVICE_JOB_RATE) -> None:
        self.clock = clock
        self.submit_rate = submit_rate
        self.batch_backends: dict[tuple[str, str], EmbeddedBatch] = {}
        self.training_backends: dict[tuple[str, str], EmbeddedTraining] = {}
        self._installed = False

    def _clock(self) -> float:
        # Backends hold this method, not ``clock`` itself, so that replacing ``clock`` reaches them.
        return self.clock()

    def batch(self, account_id: str, region: str) -> EmbeddedBatch:
        """The emulated Batch of ``account_id`` in ``region`` (created on first use)."""
        key = (account_id, region)
        if key not in self.batch_backends:
            self.batch_backends[key] = EmbeddedBatch(
                account_id, region, clock=self._clock, throttle=Throttle(self.submit_rate)
            )
        return self.batch_backends[key]

    def training(self, account_id: str, region: str) -> EmbeddedTraining:
        """The emulated SageMaker training jobs of ``account_id`` in ``region`` (created on first use)."""
        key = (account_id, region)
        if key not in self.training_backends:
            self.training_backends[key] = EmbeddedTraining(account_id, region, clock=self._clock)
        return self.training_backends[key]

    def set_submit_rate(self, limit: int | None) -> None:
        """SubmitServiceJob calls allowed per second per account from now on (None: unlimited);
        the calls counted so far are forgotten."""
        self.submit_rate = limit
        for backend in self.batch_backends.values():
            backend.throttle.limit = limit
            backend.throttle.reset()

    def route(self, request: Any) -> Response | None:
        """The emulator's answer to a botocore request, or None when moto should answer it."""
        return route(request, self)

    def install(self) -> None:
        """Put the emulator in front of moto (idempotent; see :mod:`.patch`).

        Raises:
            RuntimeError: another emulator is installed.
        """
        if not self._installed:
            patch.install(self.route)
            self._installed = True

    def uninstall(self) -> None:
        """Give moto its requests back. Idempotent."""
        if self._installed:
            patch.uninstall()
            self._installed = False

    def __enter__(self) -> Overlay:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()
