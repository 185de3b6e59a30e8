"""Values against botocore's service models: :func:`service_model` loads a model once,
:func:`shape_problems` lists what is wrong with a value as an instance of one of its shapes (unknown
keys, wrong types, values outside an enum, optionally missing required members).

The emulator's tests walk every response through it, and :mod:`batchpilot_local.world` uses it to
validate scenario worlds member by member.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import cache
from typing import Any

__all__ = ["service_model", "shape_problems"]


@cache
def service_model(service: str) -> Any:
    """botocore's service model (``botocore.model.ServiceModel``) for ``service`` (e.g. ``"batch"``,
    ``"sagemaker"``), loaded once per process.

    Raises:
        botocore.exceptions.UnknownServiceError: botocore has no such service.
    """
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


def shape_problems(
    shape: Any, value: Any, path: str = "", *, check_required: bool = False, timestamps: str = "number"
) -> list[str]:
    """What is wrong with ``value`` as an instance of the botocore ``shape``.

    Unknown keys, wrong types and values outside an enum are reported as ``"<path>: <problem>"``.
    ``timestamps`` says how ``timestamp`` members are written: ``"number"`` (the JSON wire format:
    epoch seconds) or ``"parsed"`` (a ``datetime``, as boto3 returns them). Required members are
    checked only with ``check_required``. ``path`` prefixes every problem (default: the shape's
    name). Returns ``[]`` when ``value`` fits. Never raises for a bad ``value``.
    """
    problems: list[str] = []
    _walk(shape, value, path or shape.name, problems, check_required, timestamps)
    return problems


def _walk(shape: Any, value: Any, path: str, out: list[str], required: bool, timestamps: str) -> None:
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, Mapping):
            out.append(f"{path}: expected an object, got {type(value).__name__}")
            return
        for key, item in value.items():
            member = shape.members.get(key)
            if member is None:
                out.append(f"{path}.{key}: not a member of {shape.name}")
            else:
                _walk(member, item, f"{path}.{key}", out, required, timestamps)
        if required:
            out.extend(f"{path}.{key}: required" for key in shape.required_members if key not in value)
    elif kind == "list":
        if not isinstance(value, list):
            out.append(f"{path}: expected a list, got {type(value).__name__}")
            return
        for index, item in enumerate(value):
            _walk(shape.member, item, f"{path}[{index}]", out, required, timestamps)
    elif kind == "map":
        if not isinstance(value, Mapping):
            out.append(f"{path}: expected an object, got {type(value).__name__}")
            return
        for key, item in value.items():
            if not isinstance(key, str):
                out.append(f"{path}: key {key!r} is not a string")
            _walk(shape.value, item, f"{path}.{key}", out, required, timestamps)
    elif kind == "string":
        if not isinstance(value, str):
            out.append(f"{path}: expected a string, got {type(value).__name__}")
        elif shape.enum and value not in shape.enum:
            out.append(f"{path}: {value!r} is not one of {', '.join(shape.enum)}")
    elif kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            out.append(f"{path}: expected an integer, got {type(value).__name__}")
    elif kind in ("double", "float"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            out.append(f"{path}: expected a number, got {type(value).__name__}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            out.append(f"{path}: expected a boolean, got {type(value).__name__}")
    elif kind == "timestamp":
        ok = isinstance(value, datetime) if timestamps == "parsed" else isinstance(value, int | float)
        if not ok or isinstance(value, bool):
            out.append(f"{path}: expected a timestamp, got {type(value).__name__}")
    elif kind == "blob" and not isinstance(value, bytes | str):
        out.append(f"{path}: expected bytes, got {type(value).__name__}")
