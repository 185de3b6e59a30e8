"""Where a job's checkpoint lives, how fresh it is, and how much work a failure lost (pure).

- SageMaker training jobs and service jobs: ``CheckpointConfig.S3Uri`` of DescribeTrainingJob or of
  the service job's ``serviceRequestPayload`` (a CreateTrainingJob request). A resubmission keeps
  it identical, so SageMaker restores it into ``LocalPath`` when the new job starts.
- Container jobs: the first configured source that has a value: a job parameter, an environment
  variable of the (container / ECS / EKS) container, or a tag (``BATCHPILOT_RECOVERY_CONTAINER_CHECKPOINT``).

Before a resubmission the checkpoint prefix is listed (an adapter calls ListObjectsV2) and the
newest object's ``LastModified`` is the checkpoint time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from batchpilot.recovery.settings import CheckpointSource

__all__ = [
    "CheckpointLocation",
    "CheckpointState",
    "container_checkpoint",
    "lost_instance_hours",
    "newest_object",
    "parse_s3_uri",
    "sagemaker_checkpoint",
]


@dataclass(frozen=True, slots=True)
class CheckpointLocation:
    """A checkpoint S3 location.

    Attributes:
        uri: exactly as the job has it (``s3://bucket/prefix/``), never rewritten.
        bucket: the bucket name.
        prefix: the key prefix to list (may be empty: the whole bucket).
        source: where it was found (``CheckpointConfig.S3Uri``, ``parameter:checkpoint_uri``, ...).
    """

    uri: str
    bucket: str
    prefix: str
    source: str


@dataclass(frozen=True, slots=True)
class CheckpointState:
    """What listing a checkpoint location found.

    Attributes:
        location: the location listed, or None when the job has no checkpoint configured.
        newest: ``LastModified`` of the newest object under the prefix (UTC), or None when the
            prefix is empty, missing or could not be listed.
        objects: how many objects were seen (the listing stops after the configured page limit).
        error: the S3 error code when the listing failed (e.g. ``AccessDenied``), else None.
    """

    location: CheckpointLocation | None
    newest: datetime | None = None
    objects: int = 0
    error: str | None = None

    @property
    def restarts_from_step_zero(self) -> bool:
        """True when there is no checkpoint the new job can resume from."""
        return self.newest is None

    @property
    def uri(self) -> str | None:
        """The checkpoint URI, or None."""
        return self.location.uri if self.location else None


def parse_s3_uri(uri: str | None, source: str) -> CheckpointLocation | None:
    """``s3://bucket/some/prefix/`` → a :class:`CheckpointLocation`; None for anything else."""
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        return None
    rest = uri[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        return None
    return CheckpointLocation(uri=uri, bucket=bucket, prefix=prefix, source=source)


def sagemaker_checkpoint(request_or_description: Mapping[str, Any] | None) -> CheckpointLocation | None:
    """``CheckpointConfig.S3Uri`` of a DescribeTrainingJob response or a CreateTrainingJob request
    (a service job's decoded ``serviceRequestPayload``)."""
    if not request_or_description:
        return None
    config = request_or_description.get("CheckpointConfig")
    if not isinstance(config, Mapping):
        return None
    return parse_s3_uri(config.get("S3Uri"), "CheckpointConfig.S3Uri")


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


def newest_object(objects: Iterable[Mapping[str, Any]]) -> tuple[datetime | None, int]:
    """The newest ``LastModified`` among ListObjectsV2 ``Contents`` items, and how many there were."""
    newest: datetime | None = None
    count = 0
    for item in objects:
        count += 1
        modified = item.get("LastModified")
        if isinstance(modified, datetime) and (newest is None or modified > newest):
            newest = modified
    return newest, count


def lost_instance_hours(
    instances: int | float,
    attempt_started: datetime | None,
    stopped: datetime | None,
    newest_checkpoint: datetime | None,
) -> float:
    """Instance-hours of work the failed attempt lost.

    ``instances x (stop - max(newest checkpoint, attempt start)) / 3600``: the work since the
    newest checkpoint, or the whole attempt when there is no checkpoint or the checkpoint is older
    than the attempt. 0 when the attempt never started or the times are missing.
    """
    if attempt_started is None or stopped is None or instances <= 0:
        return 0.0
    since = attempt_started
    if newest_checkpoint is not None and newest_checkpoint > since:
        since = newest_checkpoint
    seconds = (stopped - since).total_seconds()
    return max(0.0, seconds) * float(instances) / 3600.0
