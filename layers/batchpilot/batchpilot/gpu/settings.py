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
- ``BATCHPILOT_GPU_CONTAINER_METRICS``: where container jobs' GPU series are: empty (default) means
  container jobs are not covered; else a JSON object naming the CloudWatch agent's NVIDIA metrics
  (Amazon CloudWatch User Guide, "Collect NVIDIA GPU metrics"), every key optional:
  ``{"namespace": "CWAgent", "metric": "nvidia_smi_utilization_gpu", "memory_metric":
  "nvidia_smi_utilization_memory", "dimension": "InstanceId"}`` (those are the defaults, so ``{}``
  reads the agent's defaults). The series must be aggregated per ``dimension`` alone.
- ``BATCHPILOT_EVENT_BUS``: batchpilot's own bus, where ``Job GPU Idle`` is published.
"""

from __future__ import annotations

import json
from datetime import timedelta
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field, field_validator

from batchpilot.gpu.policy import GpuRules, MetricSource
from batchpilot.shared.settings import FunctionSettings

__all__ = ["AGENT_DEFAULTS", "GpuActivitySwitch", "GpuSettings"]

AGENT_DEFAULTS: dict[str, str] = {
    "namespace": "CWAgent",
    "metric": "nvidia_smi_utilization_gpu",
    "memory_metric": "nvidia_smi_utilization_memory",
    "dimension": "InstanceId",
}
"""The CloudWatch agent's defaults: its namespace, its NVIDIA metric names, and the dimension
``append_dimensions`` adds (``"InstanceId": "${aws:InstanceId}"``)."""


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
        container_metrics: the container jobs' metric source keys (``None``: not covered).
    """

    activity: GpuActivitySwitch = GpuActivitySwitch.ENABLED
    idle_percent: float = Field(default=10.0, ge=1.0, le=100.0)
    idle_minutes: int = Field(default=30, ge=5, le=1440)
    warmup_minutes: int = Field(default=15, ge=0, le=1440)
    prices: dict[str, float] = Field(default_factory=dict)
    event_bus: str = Field(default="default", min_length=1, max_length=1600)
    container_metrics: dict[str, str] | None = None

    _ENV: ClassVar[dict[str, str]] = {
        **FunctionSettings._ENV,
        "activity": "BATCHPILOT_GPU_ACTIVITY",
        "idle_percent": "BATCHPILOT_GPU_IDLE_PERCENT",
        "idle_minutes": "BATCHPILOT_GPU_IDLE_MINUTES",
        "warmup_minutes": "BATCHPILOT_GPU_WARMUP_MINUTES",
        "prices": "BATCHPILOT_GPU_PRICES",
        "event_bus": "BATCHPILOT_EVENT_BUS",
        "container_metrics": "BATCHPILOT_GPU_CONTAINER_METRICS",
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

    @property
    def container_source(self) -> MetricSource | None:
        """The container jobs' :class:`~batchpilot.gpu.policy.MetricSource` (the agent's mean
        over an instance's GPUs), or ``None``: container jobs are not covered."""
        if self.container_metrics is None:
            return None
        keys = {**AGENT_DEFAULTS, **self.container_metrics}
        return MetricSource(
            keys["namespace"], keys["metric"], keys["memory_metric"], keys["dimension"], summed=False
        )

    @field_validator("container_metrics", mode="before")
    @classmethod
    def _container_metrics(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if not value.strip():
            return None
        parsed = json.loads(value)
        if (
            not isinstance(parsed, dict)
            or set(parsed) - set(AGENT_DEFAULTS)
            or not all(isinstance(v, str) and 0 < len(v) <= 255 for v in parsed.values())
        ):
            raise ValueError(
                'expected "" or a JSON object with any of "namespace", "metric", "memory_metric",'
                ' "dimension" (non-empty strings)'
            )
        return parsed

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
