"""Plain data the capacity function reads from AWS Batch, and the pure parsing of service-job payloads.

Everything here is immutable and free of I/O; :mod:`batchpilot.io.batch` builds
these objects from the Batch API, tests build them directly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from batchpilot.shared.resources import UNTYPED

__all__ = [
    "MAX_RESOURCE_REASON",
    "NUM_INSTANCES",
    "CapacityLimit",
    "JobDemand",
    "QueueSnapshot",
    "RunnableJob",
    "ServiceEnvironment",
    "instances",
]

NUM_INSTANCES = UNTYPED
"""The capacity unit of FIFO and fair-share service environments; quota-management environments
use instance types (``ml.p4d.24xlarge``) instead."""

MAX_RESOURCE_REASON = "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"
"""Status-reason prefix of a RUNNABLE service job that needs more instances than the service
environment's ``maxCapacity`` allows (AWS Batch User Guide, "Service job status reasons")."""

JobDemand = Mapping[str, int]
"""Instances one service job asks for, by instance type (from its payload's ``ResourceConfig``)."""


@dataclass(frozen=True, slots=True)
class CapacityLimit:
    """One entry of a service environment's ``capacityLimits`` (DescribeServiceEnvironments).

    Attributes:
        unit: ``capacityUnit``: ``NUM_INSTANCES`` or an instance type (quota management).
        max_capacity: ``maxCapacity`` in instances of that unit.
    """

    unit: str
    max_capacity: int


@dataclass(frozen=True, slots=True)
class ServiceEnvironment:
    """A service environment as ``DescribeServiceEnvironments`` reports it.

    Attributes:
        name, arn: ``serviceEnvironmentName`` / ``serviceEnvironmentArn``.
        state: ``ENABLED`` or ``DISABLED``.
        status: ``CREATING``, ``UPDATING``, ``DELETING``, ``DELETED``, ``VALID`` or ``INVALID``.
        limits: ``capacityLimits``, in the order AWS gave them.
    """

    name: str
    arn: str | None
    state: str | None
    status: str | None
    limits: tuple[CapacityLimit, ...]

    @property
    def actionable(self) -> bool:
        """ENABLED and VALID: the only environments batchpilot ever changes (never DISABLED, never
        mid-update, never INVALID)."""
        return self.state == "ENABLED" and self.status == "VALID"

    def limit(self, unit: str) -> int | None:
        """``maxCapacity`` of ``unit``, or None when the environment has no such limit."""
        return next((limit.max_capacity for limit in self.limits if limit.unit == unit), None)


@dataclass(frozen=True, slots=True)
class RunnableJob:
    """One RUNNABLE service job from ``ListServiceJobs`` (a ``ServiceJobSummary``).

    Attributes:
        arn: ``jobArn`` (jobs are keyed on it).
        created_at: ``createdAt`` (aware UTC), None when absent.
        share_identifier: fair-share queues only.
        quota_share: ``quotaShareName``, quota-management queues only.
        status_reason: why it waits (``MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE ...``).
        job_id: ``jobId`` as the listing gives it (what ``DescribeServiceJob`` takes).
    """

    arn: str
    created_at: datetime | None = None
    share_identifier: str | None = None
    quota_share: str | None = None
    status_reason: str | None = None
    job_id: str | None = None

    @property
    def blocked_by_max_resource(self) -> bool:
        """The job needs more than the service environment's ``maxCapacity`` allows."""
        return bool(self.status_reason) and str(self.status_reason).strip().startswith(MAX_RESOURCE_REASON)


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """Capacity in use by a job queue's dispatched jobs (``GetJobQueueSnapshot.queueUtilization``).

    Quantities are in the unit AWS reports (``capacityUnit``: an instance type, or
    ``NUM_INSTANCES``); instances are whole, so :func:`instances` rounds them up.

    Attributes:
        total: ``totalCapacityUsage``: unit → quantity for the whole queue.
        by_share: ``fairshareUtilization.topCapacityUtilization``: share identifier → unit →
            quantity (the top 20 shares only).
        by_quota_share: ``quotaShareUtilization.topCapacityUtilization``: quota share → unit →
            quantity.
    """

    total: Mapping[str, float] = field(default_factory=dict)
    by_share: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    by_quota_share: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


def instances(quantity: float) -> int:
    """A reported capacity quantity as whole instances (rounded up; NaN and negatives are 0)."""
    if not math.isfinite(quantity) or quantity <= 0:
        return 0
    return math.ceil(quantity - 1e-9)
