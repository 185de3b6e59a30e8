"""Where a job keeps its checkpoint and what a listing of it found: pure, shared by the features
that read checkpoints (recovery before a resubmission, the job ledger for ``LostInstanceHours``).

- SageMaker training jobs and service jobs: ``CheckpointConfig.S3Uri`` of DescribeTrainingJob, of
  a training job's state-change event, or of the service job's ``serviceRequestPayload`` (a
  CreateTrainingJob request; SageMaker API Reference, ``CheckpointConfig``).
- The newest object under the prefix (ListObjectsV2 ``LastModified``, read by
  :class:`batchpilot.io.s3.S3Checkpoints`) is the checkpoint time; a listing that fails raises
  :class:`CheckpointListError`, never "no checkpoint".
- :func:`lost_instance_hours`: the work an attempt lost, from the newest checkpoint when it was
  written during the attempt, else from the attempt's start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = [
    "CheckpointListError",
    "CheckpointLocation",
    "CheckpointState",
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


class CheckpointListError(Exception):
    """Listing a checkpoint location failed (S3 error code or client error name in ``code``).

    Always handled as transient: the record is handed back to SQS and listed again, so an outage
    or a missing permission is never mistaken for "no checkpoint" (and, past the queue's
    ``maxReceiveCount``, the record lands in the dead-letter queue where a person sees it).
    """

    def __init__(self, code: str) -> None:
        super().__init__(f"checkpoint listing failed: {code}")
        self.code = code


@dataclass(frozen=True, slots=True)
class CheckpointState:
    """What listing a checkpoint location found.

    Attributes:
        location: the location listed, or None when the job has no checkpoint configured.
        newest: ``LastModified`` of the newest object that counts as the job's checkpoint (UTC), or
            None when there is none (empty prefix, or the newest object does not count).
        objects: how many objects were seen (the listing stops after the configured page limit).
        newest_key: the key of that newest object (S3 ``Key``), when there is one; kept when it
            does not count, so the message can name it.
        rejected: why the newest object found does not count (foreign, stale), else None.
        age_seconds: the checkpoint's age at the failure, in seconds, once :func:`counted` ran.
    """

    location: CheckpointLocation | None
    newest: datetime | None = None
    objects: int = 0
    newest_key: str | None = None
    rejected: str | None = None
    age_seconds: float | None = None

    @property
    def restarts_from_step_zero(self) -> bool:
        """True when there is no checkpoint the new job can resume from."""
        return self.newest is None

    @property
    def uri(self) -> str | None:
        """The checkpoint URI, or None."""
        return self.location.uri if self.location else None

    @property
    def object_uri(self) -> str | None:
        """``s3://bucket/key`` of the newest object, or None."""
        if self.location is None or self.newest_key is None:
            return None
        return f"s3://{self.location.bucket}/{self.newest_key}"


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
