"""Configuration of the GPU activity check (run by the ledger function's schedule), validated at
cold start (errors name the variable). Every variable is optional:

- ``BATCHPILOT_GPU_ACTIVITY``: ``enabled`` (default) or ``disabled``: read no GPU series at all.
- ``BATCHPILOT_GPU_IDLE_PERCENT``: activity below which a job's GPUs are idle (default 10; 1-100).
- ``BATCHPILOT_GPU_IDLE_MINUTES``: how long they must stay idle before ``Job GPU Idle`` (default
  30; 5-1440).
- ``BATCHPILOT_GPU_WARMUP_MINUTES``: minutes after an attempt starts during which nothing is
  judged (default 15; 0-1440).
- ``BATCHPILOT_GPU_PRICES``: JSON ``{"<instance type>": <USD per instance-hour>}``, the list prices
  an idle job's hourly cost is stated with (default none: the cost is left out). batchpilot ships
  no price table: prices change and differ by region (SageMaker pricing page).
- ``BATCHPILOT_EVENT_BUS``: batchpilot's own bus, where ``Job GPU Idle`` is published.
"""

from __future__ import annotations

import json
from datetime import timedelta
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field, field_validator

from batchpilot.gpu.policy import GpuRules
from batchpilot.shared.settings import FunctionSettings

__all__ = ["GpuActivitySwitch", "GpuSettings"]


class GpuActivitySwitch(StrEnum):
    """``BATCHPILOT_GPU_ACTIVITY``."""

    ENABLED = "enabled"
    DISABLED = "disabled"


class GpuSettings(FunctionSettings):
    """Settings of the GPU activity check (see the module docstring for the variables).

    Attributes:
        activity: enabled or disabled.
        idle_percent: idle threshold, percent of the GPUs' capacity.
        idle_minutes: idle window, minutes; ``warmup_minutes``: warm-up, minutes.
        prices: instance type → USD per instance-hour.
        event_bus: bus of ``Job GPU Idle``.
    """

    activity: GpuActivitySwitch = GpuActivitySwitch.ENABLED
    idle_percent: float = Field(default=10.0, ge=1.0, le=100.0)
    idle_minutes: int = Field(default=30, ge=5, le=1440)
    warmup_minutes: int = Field(default=15, ge=0, le=1440)
    prices: dict[str, float] = Field(default_factory=dict)
    event_bus: str = Field(default="default", min_length=1, max_length=1600)

    _ENV: ClassVar[dict[str, str]] = {
        **FunctionSettings._ENV,
        "activity": "BATCHPILOT_GPU_ACTIVITY",
        "idle_percent": "BATCHPILOT_GPU_IDLE_PERCENT",
        "idle_minutes": "BATCHPILOT_GPU_IDLE_MINUTES",
        "warmup_minutes": "BATCHPILOT_GPU_WARMUP_MINUTES",
        "prices": "BATCHPILOT_GPU_PRICES",
        "event_bus": "BATCHPILOT_EVENT_BUS",
    }

    @property
    def enabled(self) -> bool:
        """GPU series are read."""
        return self.activity is GpuActivitySwitch.ENABLED

    @property
    def rules(self) -> GpuRules:
        """The thresholds as :class:`~batchpilot.gpu.policy.GpuRules`."""
        return GpuRules(
            threshold=self.idle_percent / 100.0,
            window=timedelta(minutes=self.idle_minutes),
            warmup=timedelta(minutes=self.warmup_minutes),
        )

    @field_validator("prices", mode="before")
    @classmethod
    def _prices(cls, value: Any) -> Any:
        if isinstance(value, str):
            parsed = json.loads(value) if value.strip() else {}
            if not isinstance(parsed, dict) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in parsed.values()
            ):
                raise ValueError('expected a JSON object {"<instance type>": <USD per hour>}')
            return parsed
        return value
