"""Instances a SageMaker training job asks for: the one ``ResourceConfig`` reader.

Source: SageMaker API reference, ``ResourceConfig`` (CreateTrainingJob, DescribeTrainingJob, and
the ``serviceRequestPayload`` of an AWS Batch service job, which is a CreateTrainingJob request).
A homogeneous cluster sets ``InstanceType`` and ``InstanceCount``; a heterogeneous cluster sets
``InstanceGroups`` (``[{InstanceType, InstanceCount, InstanceGroupName}]``) *instead*.

Precedence, everywhere in batchpilot (classification, capacity, recovery): a non-empty
``InstanceGroups`` wins; otherwise ``InstanceType`` + ``InstanceCount``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["UNTYPED", "instances_by_type", "instances_from_payload", "total_instances"]

UNTYPED = "NUM_INSTANCES"
"""The key instances without an ``InstanceType`` are counted under (AWS Batch's capacity unit of
FIFO and fair-share service environments)."""


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    count = int(value)
    return count if count >= 1 else None


def instances_by_type(config: Any) -> dict[str, int] | None:
    """``ResourceConfig`` (a mapping) → instance type → instances (see the module's precedence).

    Returns:
        A non-empty mapping, or ``None`` when ``config`` is not a mapping or names no instance
        count of at least 1 (non-integers are truncated; booleans, NaN and infinities ignored).
    """
    if not isinstance(config, Mapping):
        return None
    out: dict[str, int] = {}
    groups = config.get("InstanceGroups")
    if isinstance(groups, list) and groups:
        for group in groups:
            count = _count(group.get("InstanceCount")) if isinstance(group, Mapping) else None
            if count is not None:
                kind = str(group.get("InstanceType") or UNTYPED)
                out[kind] = out.get(kind, 0) + count
    else:
        count = _count(config.get("InstanceCount"))
        if count is not None:
            out[str(config.get("InstanceType") or UNTYPED)] = count
    return out or None


def total_instances(config: Any) -> int | None:
    """All instances ``config`` asks for, whatever their type (``None`` as in :func:`instances_by_type`)."""
    by_type = instances_by_type(config)
    return sum(by_type.values()) if by_type else None


def instances_from_payload(payload: str | None) -> dict[str, int] | None:
    """A service job's ``serviceRequestPayload`` (DescribeServiceJob: a CreateTrainingJob request
    as JSON text) → :func:`instances_by_type` of its ``ResourceConfig``; ``None`` when the payload
    is missing or not a JSON object."""
    if not payload:
        return None
    try:
        request = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    return instances_by_type(request.get("ResourceConfig")) if isinstance(request, Mapping) else None
