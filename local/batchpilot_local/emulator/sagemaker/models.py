"""The emulated SageMaker training jobs, for one account and region.

moto 5.2 marks every training job ``Completed`` the moment it is created; here a created job stays
``InProgress``/``Starting`` until a world moves it, and StopTrainingJob stops it at once.
:class:`EmbeddedTraining` implements CreateTrainingJob, DescribeTrainingJob, StopTrainingJob,
ListTrainingJobs and ListTags/AddTags/DeleteTags on training-job ARNs; every other SageMaker call
goes to moto. Timestamps are timezone-aware ``datetime`` values (what boto3 returns).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from moto.utilities.paginator import paginate

from batchpilot_local.emulator.core import Clock, deep
from batchpilot_local.emulator.sagemaker.exceptions import ResourceInUse, ValidationException
from batchpilot_local.emulator.shapes import service_model

__all__ = ["PAGINATION_MODEL", "EmbeddedTraining", "TrainingRecord"]

_TRAINING_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_NOT_FOUND = "Requested resource not found."

# moto's paginator, as moto's SageMaker backend uses it (token: the next page's first job).
PAGINATION_MODEL: dict[str, dict[str, Any]] = {
    "list_training_jobs": {
        "input_token": "next_token",
        "limit_key": "max_results",
        "limit_default": 10,  # SageMaker's default MaxResults
        "unique_attribute": "TrainingJobArn",
    },
}

_SORT_KEYS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "Name": lambda d: str(d["TrainingJobName"]),
    "CreationTime": lambda d: d.get("CreationTime") or datetime.min.replace(tzinfo=UTC),
    "Status": lambda d: str(d.get("TrainingJobStatus")),
}


@dataclass
class TrainingRecord:
    """A training job: ``detail`` is its DescribeTrainingJob response (timestamps as aware
    datetimes), ``tags`` what ListTags returns (``[{Key, Value}]``)."""

    detail: dict[str, Any]
    tags: list[dict[str, str]] = field(default_factory=list)


@dataclass
class EmbeddedTraining:
    """SageMaker training jobs for one account and region; ``clock`` (epoch seconds) stamps
    creation, modification and stop times. ``jobs`` is keyed by training job name."""

    account_id: str
    region: str
    clock: Clock = time.time
    jobs: dict[str, TrainingRecord] = field(default_factory=dict)

    def arn(self, name: str) -> str:
        """The training job's ARN (SageMaker lowercases the name in it)."""
        return f"arn:aws:sagemaker:{self.region}:{self.account_id}:training-job/{name.lower()}"

    def now(self) -> datetime:
        """The clock as an aware UTC datetime."""
        return datetime.fromtimestamp(self.clock(), UTC)

    def put_training_job(
        self, detail: Mapping[str, Any], tags: Sequence[Mapping[str, str]] = ()
    ) -> TrainingRecord:
        """Add or replace a training job from its DescribeTrainingJob shape (timestamps as
        datetimes; ``TrainingJobArn`` derived when missing)."""
        data = dict(deep(detail))
        name = str(data["TrainingJobName"])
        data.setdefault("TrainingJobArn", self.arn(name))
        record = TrainingRecord(data, [dict(t) for t in tags])
        self.jobs[name] = record
        return record

    def _job(self, name: str) -> TrainingRecord:
        record = self.jobs.get(name)
        if record is None:
            raise ValidationException(_NOT_FOUND)
        return record

    def create_training_job(self, request: Mapping[str, Any]) -> TrainingRecord:
        """CreateTrainingJob: ``request`` is the request as sent (API member names); the members
        DescribeTrainingJob also has are kept, the job is InProgress/Starting, ``Tags`` become its
        tags. ``StoppingCondition`` defaults to one day.

        Raises:
            ValidationException: invalid name; managed spot training without a
                ``MaxWaitTimeInSeconds`` ≥ ``MaxRuntimeInSeconds``, or a wait time without spot
                training; a checkpoint URI that is not ``s3://``.
            ResourceInUse: a training job of that name exists.
        """
        name = str(request["TrainingJobName"])
        if not _TRAINING_NAME_RE.match(name):
            raise ValidationException(
                f"1 validation error detected: Value '{name}' at 'trainingJobName' failed to satisfy "
                "constraint: Member must satisfy regular expression pattern: "
                "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
            )
        if name in self.jobs:
            raise ResourceInUse(
                f"Training job names must be unique within an AWS account and region, and a training job "
                f"with this name already exists ({self.jobs[name].detail['TrainingJobArn']})"
            )
        stopping = dict(request.get("StoppingCondition") or {"MaxRuntimeInSeconds": 86400})
        if request.get("EnableManagedSpotTraining"):
            wait = stopping.get("MaxWaitTimeInSeconds")
            if wait is None or int(wait) < int(stopping.get("MaxRuntimeInSeconds", 86400)):
                raise ValidationException(
                    "Invalid MaxWaitTimeInSeconds. It must be present and be greater than or equal to "
                    "MaxRuntimeInSeconds"
                )
        elif stopping.get("MaxWaitTimeInSeconds") is not None:
            raise ValidationException("MaxWaitTimeInSeconds is only allowed with EnableManagedSpotTraining")
        checkpoint = request.get("CheckpointConfig")
        if checkpoint is not None and not re.match(
            r"^(https|s3)://([^/]+)/?(.*)$", str(checkpoint.get("S3Uri"))
        ):
            raise ValidationException("CheckpointConfig.S3Uri must be an s3:// URI")
        output_members = (
            service_model("sagemaker").operation_model("DescribeTrainingJob").output_shape.members
        )
        detail: dict[str, Any] = {k: deep(v) for k, v in request.items() if k in output_members}
        now = self.now()
        detail.update(
            TrainingJobName=name,
            TrainingJobArn=self.arn(name),
            TrainingJobStatus="InProgress",
            SecondaryStatus="Starting",
            StoppingCondition=stopping,
            CreationTime=now,
            LastModifiedTime=now,
            SecondaryStatusTransitions=[
                {"Status": "Starting", "StartTime": now, "StatusMessage": "Starting the training job"}
            ],
        )
        for flag in (
            "EnableNetworkIsolation",
            "EnableInterContainerTrafficEncryption",
            "EnableManagedSpotTraining",
        ):
            detail.setdefault(flag, False)
        return self.put_training_job(detail, request.get("Tags") or [])

    def describe_training_job(self, name: str) -> dict[str, Any]:
        """DescribeTrainingJob: a copy of the job's detail.

        Raises:
            ValidationException: ``Requested resource not found.``
        """
        detail: dict[str, Any] = deep(self._job(name).detail)
        return detail

    def stop_training_job(self, name: str) -> None:
        """StopTrainingJob: an InProgress job is Stopped at once (``TrainingEndTime`` now).

        Raises:
            ValidationException: unknown job, or not InProgress.
        """
        detail = self._job(name).detail
        if detail.get("TrainingJobStatus") != "InProgress":
            status = detail.get("TrainingJobStatus")
            raise ValidationException(
                f"The request was rejected because the training job is in status {status}."
            )
        now = self.now()
        detail.update(
            TrainingJobStatus="Stopped", SecondaryStatus="Stopped", LastModifiedTime=now, TrainingEndTime=now
        )
        transitions = detail.setdefault("SecondaryStatusTransitions", [])
        if transitions and "EndTime" not in transitions[-1]:
            transitions[-1]["EndTime"] = now
        transitions.append(
            {"Status": "Stopped", "StartTime": now, "EndTime": now, "StatusMessage": "Stopped"}
        )

    @paginate(pagination_model=PAGINATION_MODEL)
    def list_training_jobs(
        self,
        *,
        name_contains: str | None = None,
        status_equals: str | None = None,
        creation_time_after: datetime | None = None,
        creation_time_before: datetime | None = None,
        last_modified_time_after: datetime | None = None,
        last_modified_time_before: datetime | None = None,
        sort_by: str = "CreationTime",
        sort_order: str = "Ascending",
    ) -> list[dict[str, Any]]:
        """ListTrainingJobs: the details of the matching jobs (bounds exclusive, name match
        case-insensitive), sorted by ``sort_by`` (Name, CreationTime, Status). Paginated by moto's
        paginator (``max_results`` default 10, ``next_token``; returns ``(page, next_token)``).

        Raises:
            moto.core.exceptions.InvalidToken: a ``next_token`` of another query or a job gone.
        """
        selected = []
        for record in self.jobs.values():
            d = record.detail
            created, modified = d.get("CreationTime"), d.get("LastModifiedTime") or d.get("CreationTime")
            if (
                (name_contains and name_contains.lower() not in str(d["TrainingJobName"]).lower())
                or (status_equals and d.get("TrainingJobStatus") != status_equals)
                or (creation_time_after and (created is None or created <= creation_time_after))
                or (creation_time_before and (created is None or created >= creation_time_before))
                or (last_modified_time_after and (modified is None or modified <= last_modified_time_after))
                or (last_modified_time_before and (modified is None or modified >= last_modified_time_before))
            ):
                continue
            selected.append(d)
        selected.sort(key=_SORT_KEYS[sort_by], reverse=sort_order == "Descending")
        return selected

    def owned(self, arn: str) -> TrainingRecord | None:
        """The training job ``arn`` names; None when ``arn`` is not a training job's (moto's).

        Raises:
            ValidationException: a training-job ARN, but no such job.
        """
        if ":training-job/" not in arn:
            return None
        record = next((r for r in self.jobs.values() if r.detail.get("TrainingJobArn") == arn), None)
        if record is None:
            raise ValidationException(_NOT_FOUND)
        return record

    def add_tags(self, record: TrainingRecord, tags: Sequence[Mapping[str, str]]) -> None:
        """AddTags: ``tags`` replace those of the same key, the others are kept."""
        by_key = {t["Key"]: t for t in record.tags}
        by_key.update({t["Key"]: dict(t) for t in tags})
        record.tags = list(by_key.values())

    def delete_tags(self, record: TrainingRecord, keys: Sequence[str]) -> None:
        """DeleteTags: the tags with those keys go."""
        record.tags = [t for t in record.tags if t["Key"] not in set(keys)]
