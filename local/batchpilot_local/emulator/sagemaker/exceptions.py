"""SageMaker's errors, as its JSON 1.1 protocol sends them: a body ``{"__type": ..., "Message": ...}``."""

from __future__ import annotations

from batchpilot_local.emulator.core import ApiError

__all__ = ["ResourceInUse", "ValidationException"]


class ValidationException(ApiError):
    """SageMaker's answer (HTTP 400) to an invalid request, and to an unknown training job
    (``Requested resource not found.``)."""

    def __init__(self, message: str) -> None:
        super().__init__("ValidationException", message, 400)


class ResourceInUse(ApiError):
    """CreateTrainingJob with the name of an existing training job (HTTP 400)."""

    def __init__(self, message: str) -> None:
        super().__init__("ResourceInUse", message, 400)
