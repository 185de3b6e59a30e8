"""Pure helpers of the emulated Batch: the documented limits, request checks, ListJobs /
ListServiceJobs filters, summaries and capacity sums. Nothing here holds state."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from batchpilot_local.emulator.batch.exceptions import ClientException
from batchpilot_local.emulator.core import deep

SUBMIT_SERVICE_JOB_RATE = 5
"""SubmitServiceJob calls allowed per second per account (AWS: 5, not adjustable)."""

SERVICE_JOB_STATUSES = (
    "SUBMITTED",
    "PENDING",
    "RUNNABLE",
    "SCHEDULED",
    "STARTING",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
)
"""Every ``status`` of a service job (DescribeServiceJob)."""
JOB_STATUSES = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED", "FAILED")
"""Every ``status`` of a container job (DescribeJobs)."""
TERMINAL = frozenset({"SUCCEEDED", "FAILED"})
DISPATCHED = frozenset({"SCHEDULED", "STARTING", "RUNNING"})
"""Statuses of a service job that holds capacity (GetJobQueueSnapshot sums their usage)."""
NOT_STARTED = frozenset({"SUBMITTED", "PENDING", "RUNNABLE"})
"""Statuses CancelJob acts on."""

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
"""Names of service environments, job queues and service jobs."""
JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
"""Names of container jobs (SubmitJob)."""
PAYLOAD_LIMIT = 10 * 1024
"""Bytes of a SubmitServiceJob ``serviceRequestPayload`` (UTF-8)."""
MAX_TAGS = 50
"""Tags per resource."""
PAGE_LIMIT = 100
"""``maxResults`` ceiling of DescribeServiceEnvironments, DescribeJobQueues, ListServiceJobs, and
ListJobs with a filter (ListJobs without one: :data:`LIST_JOBS_LIMIT`)."""
LIST_JOBS_LIMIT = 1000

SERVICE_FILTERS = frozenset(
    {"JOB_NAME", "BEFORE_CREATED_AT", "AFTER_CREATED_AT", "SHARE_IDENTIFIER", "QUOTA_SHARE_NAME"}
)
"""Filter names ListServiceJobs accepts."""
CONTAINER_FILTERS = frozenset(
    {"JOB_NAME", "JOB_DEFINITION", "BEFORE_CREATED_AT", "AFTER_CREATED_AT", "SHARE_IDENTIFIER"}
)
"""Filter names ListJobs accepts."""


def fingerprint(params: Mapping[str, Any], *drop: str) -> str:
    """A canonical JSON text of ``params`` without the ``drop`` keys: two requests are "the same"
    (clientToken idempotency) when their fingerprints are equal."""
    return json.dumps({k: v for k, v in params.items() if k not in drop}, sort_keys=True, default=str)


def check_max_results(value: int | None, limit: int) -> None:
    """Raises :class:`ClientException` unless ``value`` is None or 1..``limit``."""
    if value is not None and not 1 <= int(value) <= limit:
        raise ClientException(f"maxResults must be between 1 and {limit}")


def check_tags(tags: Mapping[str, str] | None) -> dict[str, str]:
    """A copy of ``tags`` (``{}`` for None) after Batch's tag rules: at most :data:`MAX_TAGS`, keys
    1-128 characters, values at most 256, no ``aws:`` prefix.

    Raises:
        ClientException: a rule is broken.
    """
    if tags is None:
        return {}
    if len(tags) > MAX_TAGS:
        raise ClientException(f"Too many tags: {len(tags)} (at most {MAX_TAGS})")
    for key, value in tags.items():
        if not 1 <= len(key) <= 128 or len(value) > 256:
            raise ClientException(f"Invalid tag {key!r}: keys are 1-128 characters, values at most 256")
        if key.lower().startswith("aws:"):
            raise ClientException(f"Invalid tag {key!r}: the aws: prefix is reserved")
    return dict(tags)


def check_priority(value: int | None, name: str) -> None:
    """Raises :class:`ClientException` unless the scheduling priority ``value`` is None or 0-9999."""
    if value is not None and not 0 <= int(value) <= 9999:
        raise ClientException(f"{name} must be between 0 and 9999")


def check_capacity_limits(limits: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A copy of a service environment's ``capacityLimits`` (``[{maxCapacity, capacityUnit}]``).

    Raises:
        ClientException: empty, a limit without ``maxCapacity``/``capacityUnit``, a negative
            ``maxCapacity``, or a unit given twice.
    """
    if not limits:
        raise ClientException("capacityLimits must contain at least one limit")
    units = [limit.get("capacityUnit") for limit in limits]
    for limit in limits:
        if limit.get("maxCapacity") is None or not limit.get("capacityUnit"):
            raise ClientException("Each capacity limit needs maxCapacity and capacityUnit")
        if int(limit["maxCapacity"]) < 0:
            raise ClientException("maxCapacity must not be negative")
    if len(set(units)) != len(units):
        raise ClientException("capacityLimits has the same capacityUnit twice")
    return [dict(limit) for limit in limits]


def arn_parts(arn: str) -> tuple[str, str] | None:
    """``arn:aws:batch:R:A:service-job/ID`` → ``("service-job", "ID")``; None if not a Batch ARN."""
    match = re.match(r"^arn:aws[a-z-]*:batch:[^:]*:[^:]*:([a-z-]+)/(.+)$", arn)
    return (match.group(1), match.group(2)) if match else None


def ids(detail: Mapping[str, Any]) -> dict[str, Any]:
    """``{jobArn, jobName, jobId}`` of a job: what SubmitJob, SubmitServiceJob and UpdateServiceJob
    answer."""
    return {"jobArn": detail["jobArn"], "jobName": detail["jobName"], "jobId": detail["jobId"]}


def is_array_parent(detail: Mapping[str, Any]) -> bool:
    """True for the parent of an array job (its ``arrayProperties`` has ``size``, a child's ``index``)."""
    return "size" in (detail.get("arrayProperties") or {})


def terminate(detail: dict[str, Any], reason: str, now_ms: int, key: str = "isTerminated") -> None:
    """Make a job FAILED now (TerminateJob, TerminateServiceJob, CancelJob with ``key="isCancelled"``):
    ``statusReason``, ``key`` = True, ``stoppedAt`` on the job and its last attempt. A job already
    SUCCEEDED or FAILED is left alone, as Batch does."""
    if detail.get("status") in TERMINAL:
        return
    detail["status"] = "FAILED"
    detail["statusReason"] = reason
    detail[key] = True
    detail["stoppedAt"] = now_ms
    attempts = detail.get("attempts") or []
    if attempts and "stoppedAt" not in attempts[-1]:
        attempts[-1]["stoppedAt"] = now_ms


def job_filter(flt: Mapping[str, Any], allowed: frozenset[str]) -> Callable[[Mapping[str, Any]], bool]:
    """A ListJobs / ListServiceJobs ``filters`` item (``{name, values}``) as a predicate on a job's
    detail. JOB_NAME is case-insensitive, a trailing ``*`` a prefix match; BEFORE_/AFTER_CREATED_AT
    take epoch milliseconds (strict comparison); JOB_DEFINITION matches an ARN, ``name:revision``
    or ``name``. Only the first value counts, as in Batch.

    Raises:
        ClientException: a name outside ``allowed``, no value, or a non-numeric time.
    """
    name = flt.get("name")
    if name not in allowed:
        raise ClientException(f"Unknown filter name {name}; valid names: {', '.join(sorted(allowed))}")
    values = list(flt.get("values") or [])
    if not values:
        raise ClientException(f"Filter {name} needs a value")
    value = str(values[0])
    if name == "JOB_NAME":
        wanted = value.lower()
        if wanted.endswith("*"):
            return lambda d: str(d.get("jobName", "")).lower().startswith(wanted[:-1])
        return lambda d: str(d.get("jobName", "")).lower() == wanted
    if name in ("BEFORE_CREATED_AT", "AFTER_CREATED_AT"):
        try:
            moment = int(value)
        except ValueError:
            raise ClientException(f"Filter {name} takes epoch milliseconds") from None
        if name == "BEFORE_CREATED_AT":
            return lambda d: int(d.get("createdAt") or 0) < moment
        return lambda d: int(d.get("createdAt") or 0) > moment
    if name == "SHARE_IDENTIFIER":
        return lambda d: d.get("shareIdentifier") == value
    if name == "QUOTA_SHARE_NAME":
        return lambda d: d.get("quotaShareName") == value

    def job_definition(d: Mapping[str, Any]) -> bool:  # JOB_DEFINITION: name, name:revision or ARN
        arn = str(d.get("jobDefinition", ""))
        name_revision = arn.split("job-definition/", 1)[-1]
        return value in (arn, name_revision, name_revision.split(":", 1)[0])

    return job_definition


_SERVICE_SUMMARY_KEYS = (
    "latestAttempt",
    "capacityUsage",
    "createdAt",
    "jobArn",
    "jobId",
    "jobName",
    "scheduledAt",
    "serviceJobType",
    "shareIdentifier",
    "quotaShareName",
    "status",
    "statusReason",
    "startedAt",
    "stoppedAt",
)


def service_summary(detail: Mapping[str, Any]) -> dict[str, Any]:
    """A ListServiceJobs ``jobSummaryList`` item from a DescribeServiceJob detail (a copy)."""
    return {k: deep(detail[k]) for k in _SERVICE_SUMMARY_KEYS if k in detail}


def job_summary(detail: Mapping[str, Any]) -> dict[str, Any]:
    """A ListJobs ``jobSummaryList`` item from a DescribeJobs detail."""
    keys = ("jobArn", "jobId", "jobName", "createdAt", "shareIdentifier", "status", "statusReason")
    out: dict[str, Any] = {k: detail[k] for k in keys if k in detail}
    out.update({k: detail[k] for k in ("startedAt", "stoppedAt", "jobDefinition") if k in detail})
    container = detail.get("container") or {}
    summary = {k: container[k] for k in ("exitCode", "reason") if k in container}
    if container:
        out["container"] = summary
    array = detail.get("arrayProperties")
    if array:
        out["arrayProperties"] = {k: array[k] for k in ("size", "index") if k in array}
    return out


def usage(details: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The jobs' ``capacityUsage`` summed per ``capacityUnit``: ``[{capacityUnit, quantity}]``."""
    totals: dict[str, float] = {}
    for detail in details:
        for item in detail.get("capacityUsage") or []:
            unit = str(item.get("capacityUnit"))
            totals[unit] = totals.get(unit, 0.0) + float(item.get("quantity") or 0)
    return [{"capacityUnit": unit, "quantity": quantity} for unit, quantity in totals.items()]


def share_usage(
    in_queue: Iterable[Mapping[str, Any]], dispatched: Sequence[Mapping[str, Any]], key: str
) -> dict[str, Any]:
    """GetJobQueueSnapshot's per-share utilisation: ``activeShareCount`` (shares with a job not
    finished in ``in_queue``) and the 20 shares using most capacity among ``dispatched``. ``key``:
    ``shareIdentifier`` (fair share) or ``quotaShareName`` (quota management)."""
    by_share: dict[str, list[Mapping[str, Any]]] = {}
    for detail in dispatched:
        if detail.get(key):
            by_share.setdefault(str(detail[key]), []).append(detail)
    ranked = sorted(
        ((share, usage(details)) for share, details in by_share.items()),
        key=lambda item: -sum(u["quantity"] for u in item[1]),
    )[:20]
    active = {str(d[key]) for d in in_queue if d.get(key) and d.get("status") not in TERMINAL}
    return {
        "activeShareCount": len(active),
        "topCapacityUtilization": [{key: share, "capacityUsage": used} for share, used in ranked],
    }


def apply_overrides(properties: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """A job definition's containerProperties with SubmitJob's containerOverrides applied: command
    and instanceType replace, environment merges by name, resourceRequirements replace by type."""
    container: dict[str, Any] = deep(dict(properties))
    if not overrides:
        return container
    for key in ("command", "instanceType", "vcpus", "memory"):
        if overrides.get(key) is not None:
            container[key] = deep(overrides[key])
    if overrides.get("environment"):
        env = {e["name"]: dict(e) for e in container.get("environment") or []}
        for item in overrides["environment"]:
            env[item["name"]] = dict(item)
        container["environment"] = list(env.values())
    if overrides.get("resourceRequirements"):
        reqs = {r["type"]: dict(r) for r in container.get("resourceRequirements") or []}
        for item in overrides["resourceRequirements"]:
            reqs[item["type"]] = dict(item)
        container["resourceRequirements"] = list(reqs.values())
    return container
