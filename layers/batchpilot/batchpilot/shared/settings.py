"""Configuration models, validated once at cold start. Domain code never reads ``os.environ``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from batchpilot.shared.metrics import MetricsDetail

__all__ = ["ConfigError", "FunctionSettings", "MetricsSettings"]


class ConfigError(RuntimeError):
    """The function's configuration is invalid. The message names the variable and the rule."""


class FunctionSettings(BaseModel):
    """Settings every batchpilot function has; each function's settings extend this model.

    Attributes:
        namespace: CloudWatch namespace of every metric (env ``POWERTOOLS_METRICS_NAMESPACE``,
            default ``BatchPilot``; 1-255 characters of ``[A-Za-z0-9.\\-_/#:]``).
        service: value of the ``service`` dimension (env ``POWERTOOLS_SERVICE_NAME``, default
            ``batchpilot``).
        function: value of the ``Function`` dimension on the function's own counters.
        metrics_detail: which dimension sets to publish (env ``BATCHPILOT_METRICS_DETAIL``,
            ``basic`` or ``detailed``, default ``basic``; template parameter ``MetricsDetail``).
    """

    model_config = ConfigDict(frozen=True)

    namespace: str = Field(
        default="BatchPilot", min_length=1, max_length=255, pattern=r"^[A-Za-z0-9.\-_/#:]+$"
    )
    service: str = Field(default="batchpilot", min_length=1, max_length=1024)
    function: str = Field(default="metrics", min_length=1, max_length=64)
    metrics_detail: MetricsDetail = MetricsDetail.BASIC

    _ENV: ClassVar[dict[str, str]] = {
        "namespace": "POWERTOOLS_METRICS_NAMESPACE",
        "service": "POWERTOOLS_SERVICE_NAME",
        "metrics_detail": "BATCHPILOT_METRICS_DETAIL",
    }

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *, function: str = "metrics") -> Self:
        """Build the settings from environment variables (names in ``_ENV``).

        Raises:
            ConfigError: a variable is set but invalid; the message names the variable.
        """
        values: dict[str, str] = {"function": function}
        for field, var in cls._ENV.items():
            if environ.get(var, "").strip():
                values[field] = environ[var].strip()
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise ConfigError(f"invalid {function} function configuration: {cls._problems(exc)}") from None

    @classmethod
    def _problems(cls, exc: ValidationError) -> str:
        """The validation errors for :class:`ConfigError`, each named by its variable."""
        return "; ".join(
            f"{cls._ENV.get(str(e['loc'][0]), str(e['loc'][0]))}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )


class MetricsSettings(FunctionSettings):
    """Settings of the metrics function: only what :class:`FunctionSettings` has."""
