"""The GPU activity check's configuration (batchpilot/gpu/settings.py): defaults, the template's
variables, and errors that name the variable."""

from __future__ import annotations

from datetime import timedelta

import pytest
from batchpilot.gpu.settings import GpuSettings
from batchpilot.shared.settings import ConfigError


def test_defaults_are_the_documented_ones() -> None:
    settings = GpuSettings.from_environ({}, function="ledger")
    assert settings.enabled and settings.prices == {}
    rules = settings.rules
    assert (rules.threshold, rules.window, rules.warmup) == (
        0.10,
        timedelta(minutes=30),
        timedelta(minutes=15),
    )


def test_the_template_variables_are_read() -> None:
    settings = GpuSettings.from_environ(
        {
            "BATCHPILOT_GPU_IDLE_PERCENT": "5",
            "BATCHPILOT_GPU_IDLE_MINUTES": "45",
            "BATCHPILOT_GPU_PRICES": '{"ml.p5.48xlarge": 98.32}',
            "BATCHPILOT_GPU_ACTIVITY": "disabled",
        },
        function="ledger",
    )
    assert settings.rules.threshold == 0.05 and settings.rules.window == timedelta(minutes=45)
    assert settings.prices == {"ml.p5.48xlarge": 98.32} and not settings.enabled


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("BATCHPILOT_GPU_PRICES", '{"ml.p5.48xlarge": "cheap"}'),
        ("BATCHPILOT_GPU_PRICES", "not json"),
        ("BATCHPILOT_GPU_IDLE_PERCENT", "0"),
        ("BATCHPILOT_GPU_IDLE_MINUTES", "2"),
        ("BATCHPILOT_GPU_ACTIVITY", "sometimes"),
    ],
)
def test_a_bad_value_names_its_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        GpuSettings.from_environ({variable: value}, function="ledger")


def test_container_jobs_are_not_covered_by_default() -> None:
    assert GpuSettings.from_environ({}, function="ledger").container_source is None
    blank = GpuSettings.from_environ({"BATCHPILOT_GPU_CONTAINER_METRICS": " "}, function="ledger")
    assert blank.container_source is None


def test_the_container_metric_source_defaults_to_the_agents_names() -> None:
    source = GpuSettings.from_environ(
        {"BATCHPILOT_GPU_CONTAINER_METRICS": "{}"}, function="ledger"
    ).container_source
    assert source is not None
    assert (source.namespace, source.metric, source.memory_metric, source.dimension, source.summed) == (
        "CWAgent",
        "nvidia_smi_utilization_gpu",
        "nvidia_smi_utilization_memory",
        "InstanceId",
        False,
    )
    own = GpuSettings.from_environ(
        {"BATCHPILOT_GPU_CONTAINER_METRICS": '{"namespace": "Team/GPU"}'}, function="ledger"
    ).container_source
    assert own is not None and (own.namespace, own.metric) == ("Team/GPU", "nvidia_smi_utilization_gpu")


@pytest.mark.parametrize(
    "value", ['{"namespce": "CWAgent"}', '{"namespace": ""}', '["CWAgent"]', "CWAgent", '{"metric": 3}']
)
def test_a_bad_container_metric_source_names_its_variable(value: str) -> None:
    with pytest.raises(ConfigError, match="BATCHPILOT_GPU_CONTAINER_METRICS"):
        GpuSettings.from_environ({"BATCHPILOT_GPU_CONTAINER_METRICS": value}, function="ledger")
