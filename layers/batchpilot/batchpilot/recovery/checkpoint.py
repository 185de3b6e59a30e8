"""Where a job's checkpoint lives, whether it counts for a resubmission, and how much work a
failure lost (pure). The location and listing types and the lost-work formula are
:mod:`batchpilot.shared.checkpoints` (the job ledger reads them too), re-exported here.

- SageMaker training jobs and service jobs: ``CheckpointConfig.S3Uri`` of DescribeTrainingJob or of
  the service job's ``serviceRequestPayload`` (a CreateTrainingJob request). A resubmission keeps
  it identical, so SageMaker restores it into ``LocalPath`` when the new job starts.
- Container jobs: the first configured source that has a value: a job parameter, an environment
  variable of the (container / ECS / EKS) container, or a tag (``BATCHPILOT_RECOVERY_CONTAINER_CHECKPOINT``).

Before a resubmission the checkpoint prefix is listed (an adapter calls ListObjectsV2) and the
newest object's ``LastModified`` is the checkpoint time. That object counts (:func:`counted`) only
when it was written after the lineage's first attempt started (older objects belong to another job
or an earlier run: "foreign") and is no older than the configured maximum age at the failure
("stale"); anything else is "no checkpoint". An array child counts only objects under its own index
(:func:`for_array_index`): array children share their parent's parameters and environment, so one
child's writes must not vouch for another. A listing that fails raises
:class:`CheckpointListError`: the record is retried, never read as "no checkpoint".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from batchpilot.recovery.settings import CheckpointSource
from batchpilot.shared.checkpoints import (
    CheckpointListError,
    CheckpointLocation,
    CheckpointState,
    lost_instance_hours,
    newest_object,
    parse_s3_uri,
    sagemaker_checkpoint,
)

__all__ = [
    "ARRAY_INDEX_VARIABLES",
    "CheckpointListError",
    "CheckpointLocation",
    "CheckpointState",
    "container_checkpoint",
    "counted",
    "for_array_index",
    "lost_instance_hours",
    "newest_object",
    "parse_s3_uri",
    "sagemaker_checkpoint",
]


ARRAY_INDEX_VARIABLES = ("${AWS_BATCH_JOB_ARRAY_INDEX}", "$AWS_BATCH_JOB_ARRAY_INDEX")
"""How a checkpoint URI can name the array index the job substitutes at run time (AWS Batch User
Guide, "Array jobs": each child gets ``AWS_BATCH_JOB_ARRAY_INDEX``)."""


def for_array_index(location: CheckpointLocation, index: int) -> CheckpointLocation:
    """The location an array child with ``index`` writes to: the URI with
    ``${AWS_BATCH_JOB_ARRAY_INDEX}`` replaced by the index when it names it, else
    ``<prefix>/<index>/`` (the per-index layout; a job that does not write per index has no
    checkpoint of its own there)."""
    text = str(index)
    for variable in ARRAY_INDEX_VARIABLES:
        if variable in location.uri:
            uri = location.uri.replace(variable, text)
            found = parse_s3_uri(uri, location.source)
            if found is not None:
                return found
    prefix = location.prefix
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    prefix += f"{text}/"
    return CheckpointLocation(
        uri=f"s3://{location.bucket}/{prefix}", bucket=location.bucket, prefix=prefix, source=location.source
    )


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def counted(
    state: CheckpointState,
    *,
    not_before: datetime | None,
    failed_at: datetime,
    max_age_seconds: float,
) -> CheckpointState:
    """``state`` with its newest object kept only when it counts as the failed job's checkpoint.

    Args:
        state: what the listing found.
        not_before: when the lineage's first attempt started (aware UTC); an object written before
            belongs to another job or an earlier run. None: not known, not checked.
        failed_at: when the failed attempt stopped (aware UTC).
        max_age_seconds: the oldest a checkpoint may be at ``failed_at``, in seconds.

    Returns:
        The same state with ``age_seconds`` set, or with ``newest`` None and ``rejected`` saying
        why (the object's key and time are kept).
    """
    if state.newest is None:
        return state
    age = max(0.0, (failed_at - state.newest).total_seconds())
    where = state.object_uri or state.uri or "the checkpoint location"
    written = state.newest.isoformat(timespec="seconds")
    if not_before is not None and state.newest < not_before:
        started = not_before.isoformat(timespec="seconds")
        why = f"foreign: the newest object {where} ({written}) predates the job's first attempt ({started})"
        return replace(state, newest=None, rejected=why, age_seconds=age)
    if age > max_age_seconds:
        limit = _hours(max_age_seconds)
        why = f"stale: the newest object {where} was {_hours(age)} old at the failure (max {limit})"
        return replace(state, newest=None, rejected=why, age_seconds=age)
    return replace(state, age_seconds=age)


def _environments(described: Mapping[str, Any]) -> Iterable[Any]:
    container = described.get("container")
    if isinstance(container, Mapping):
        yield container.get("environment")
    ecs = described.get("ecsProperties")
    if isinstance(ecs, Mapping):
        for task in ecs.get("taskProperties") or []:
            for item in task.get("containers") or []:
                yield item.get("environment")
    eks = described.get("eksProperties")
    if isinstance(eks, Mapping):
        for item in (eks.get("podProperties") or {}).get("containers") or []:
            yield item.get("env")


def container_checkpoint(
    described: Mapping[str, Any], sources: Iterable[tuple[CheckpointSource, str]]
) -> CheckpointLocation | None:
    """The checkpoint location of a Batch container job (DescribeJobs ``JobDetail``): the first of
    ``sources`` that holds an ``s3://`` URI."""
    for kind, name in sources:
        value: Any = None
        if kind is CheckpointSource.PARAMETER:
            value = (described.get("parameters") or {}).get(name)
        elif kind is CheckpointSource.TAG:
            value = (described.get("tags") or {}).get(name)
        elif kind is CheckpointSource.ENVIRONMENT:
            for env in _environments(described):
                for item in env if isinstance(env, list) else []:
                    if isinstance(item, Mapping) and item.get("name") == name:
                        value = item.get("value")
                        break
                if value:
                    break
        location = parse_s3_uri(value, f"{kind.value}:{name}")
        if location is not None:
            return location
    return None
