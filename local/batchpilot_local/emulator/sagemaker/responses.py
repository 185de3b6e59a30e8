"""SageMaker's JSON 1.1 wire format for :class:`~.models.EmbeddedTraining`: the operation comes
from ``X-Amz-Target: SageMaker.<Operation>``, the request body's members are named as in the API;
errors are ``{"__type", "Message"}`` bodies."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from moto.core.exceptions import InvalidToken

from batchpilot_local.emulator.core import ApiError, Response, deep, json_response
from batchpilot_local.emulator.sagemaker.exceptions import ValidationException
from batchpilot_local.emulator.sagemaker.models import EmbeddedTraining

__all__ = ["OPERATIONS", "TrainingResponse"]

OPERATIONS = frozenset(
    {
        "CreateTrainingJob",
        "DescribeTrainingJob",
        "StopTrainingJob",
        "ListTrainingJobs",
        "ListTags",
        "AddTags",
        "DeleteTags",
    }
)
"""The SageMaker operations answered here (the tag operations only for training-job ARNs)."""

_CONTENT_TYPE = "application/x-amz-json-1.1"
_SUMMARY_KEYS = (
    "TrainingJobName",
    "TrainingJobArn",
    "CreationTime",
    "TrainingEndTime",
    "LastModifiedTime",
    "TrainingJobStatus",
    "SecondaryStatus",
    "WarmPoolStatus",
)


def _snake(operation: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower()


def _time(value: Any) -> datetime | None:
    # The JSON protocol sends timestamps as epoch seconds.
    return datetime.fromtimestamp(float(value), UTC) if value is not None else None


class TrainingResponse:
    """Answers training-job requests with ``backend`` (one account and region)."""

    def __init__(self, backend: EmbeddedTraining) -> None:
        self.backend = backend

    def dispatch(self, operation: str, body: Mapping[str, Any]) -> Response | None:
        """The HTTP answer to ``operation`` (one of :data:`OPERATIONS`) with request ``body``;
        None when moto should answer (tags of a resource that is not a training job).

        Raises:
            KeyError: ``operation`` is not one of :data:`OPERATIONS`.
        """
        if operation not in OPERATIONS:
            raise KeyError(operation)
        method: Callable[[Mapping[str, Any]], dict[str, Any] | None] = getattr(self, _snake(operation))
        try:
            result = method(body)
        except ApiError as error:
            return _error(error)
        except InvalidToken:
            return _error(ValidationException("Invalid NextToken"))
        return None if result is None else json_response(result, content_type=_CONTENT_TYPE)

    def create_training_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """CreateTrainingJob → ``{TrainingJobArn}``."""
        return {"TrainingJobArn": self.backend.create_training_job(p).detail["TrainingJobArn"]}

    def describe_training_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """DescribeTrainingJob → the job's detail."""
        return self.backend.describe_training_job(p["TrainingJobName"])

    def stop_training_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """StopTrainingJob → ``{}``."""
        self.backend.stop_training_job(p["TrainingJobName"])
        return {}

    def list_training_jobs(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """ListTrainingJobs → ``{TrainingJobSummaries, NextToken?}``."""
        page, token = self.backend.list_training_jobs(
            name_contains=p.get("NameContains"),
            status_equals=p.get("StatusEquals"),
            creation_time_after=_time(p.get("CreationTimeAfter")),
            creation_time_before=_time(p.get("CreationTimeBefore")),
            last_modified_time_after=_time(p.get("LastModifiedTimeAfter")),
            last_modified_time_before=_time(p.get("LastModifiedTimeBefore")),
            sort_by=p.get("SortBy") or "CreationTime",
            sort_order=p.get("SortOrder") or "Ascending",
            max_results=p.get("MaxResults"),
            next_token=p.get("NextToken"),
        )
        out: dict[str, Any] = {
            "TrainingJobSummaries": [{k: d[k] for k in _SUMMARY_KEYS if k in d} for d in page]
        }
        if token:
            out["NextToken"] = token
        return out

    def list_tags(self, p: Mapping[str, Any]) -> dict[str, Any] | None:
        """ListTags of a training job → ``{Tags}``; None for another resource."""
        record = self.backend.owned(p["ResourceArn"])
        return None if record is None else {"Tags": deep(record.tags)}

    def add_tags(self, p: Mapping[str, Any]) -> dict[str, Any] | None:
        """AddTags to a training job → ``{Tags}`` (those added); None for another resource."""
        record = self.backend.owned(p["ResourceArn"])
        if record is None:
            return None
        self.backend.add_tags(record, p["Tags"])
        return {"Tags": deep(p["Tags"])}

    def delete_tags(self, p: Mapping[str, Any]) -> dict[str, Any] | None:
        """DeleteTags of a training job → ``{}``; None for another resource."""
        record = self.backend.owned(p["ResourceArn"])
        if record is None:
            return None
        self.backend.delete_tags(record, p["TagKeys"])
        return {}


def _error(error: ApiError) -> Response:
    return json_response(
        {"__type": error.code, "Message": error.message}, status=error.status, content_type=_CONTENT_TYPE
    )
