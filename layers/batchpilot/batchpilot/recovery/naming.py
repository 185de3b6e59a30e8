"""Deterministic names, idempotency tokens and lineage tags for resubmitted jobs (pure).

A resubmission is named from its lineage and attempt number only, so a retried submit (a Lambda
retry, an SQS redelivery, a duplicate event) produces the same name and the same ``clientToken``:
SubmitServiceJob de-duplicates on the token, CreateTrainingJob refuses a second job of the same
name, and SubmitJob is preceded by a look-up of the name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

__all__ = [
    "ARRAY_INDEX_ENV",
    "ARRAY_INDEX_TAG",
    "ATTEMPT_TAG",
    "BATCH_NAME_MAX",
    "CLIENT_TOKEN_MAX",
    "LINEAGE_TAG",
    "MAX_TAGS",
    "SAGEMAKER_NAME_MAX",
    "SUCCESSOR_ARN_TAG",
    "SUCCESSOR_NAME_TAG",
    "batch_job_name",
    "client_token",
    "is_valid_batch_name",
    "is_valid_training_job_name",
    "lineage_id_for",
    "lineage_tags",
    "merge_tags",
    "training_job_name",
]

LINEAGE_TAG = "batchpilot:lineage"
"""Tag on every resubmitted job: the lineage id."""
ATTEMPT_TAG = "batchpilot:attempt"
"""Tag on every resubmitted job: the resubmission number within the lineage (1 = first)."""
SUCCESSOR_ARN_TAG = "batchpilot:successor-arn"
"""Tag recovery adds to a failed job once its resubmission exists: the new job's ARN (Batch
TagResource / SageMaker AddTags), so whoever watches the failed job can follow the work."""
SUCCESSOR_NAME_TAG = "batchpilot:successor-name"
"""Tag recovery adds to a failed job next to :data:`SUCCESSOR_ARN_TAG`: the new job's name."""
_SUCCESSOR_TAGS = frozenset({SUCCESSOR_ARN_TAG, SUCCESSOR_NAME_TAG})
ARRAY_INDEX_TAG = "batchpilot:array-index"
"""Tag on a resubmitted array child: the index it had in its array job."""
ARRAY_INDEX_ENV = "BATCHPILOT_ARRAY_INDEX"
"""Environment variable carrying a resubmitted array child's index (``AWS_BATCH_*`` names are
reserved by Batch, so ``AWS_BATCH_JOB_ARRAY_INDEX`` cannot be set on a new job)."""

BATCH_NAME_MAX = 128  # SubmitJob / SubmitServiceJob jobName: up to 128 of [A-Za-z0-9_-]
SAGEMAKER_NAME_MAX = 63  # CreateTrainingJob TrainingJobName: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}
CLIENT_TOKEN_MAX = 64  # SubmitServiceJob clientToken
MAX_TAGS = 50  # Batch jobs, service jobs and SageMaker training jobs

_BATCH_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_TRAINING_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_RESERVED_TAG_PREFIX = "aws:"


def lineage_id_for(original_job_arn: str) -> str:
    """The lineage id of a job that batchpilot did not create: ``bp`` + 20 hex digits of BLAKE2b
    over its ARN (Batch ``jobArn`` or SageMaker ``TrainingJobArn``). Stable across retries."""
    digest = hashlib.blake2b(original_job_arn.encode("utf-8"), digest_size=10).hexdigest()
    return f"bp{digest}"


def client_token(lineage_id: str, attempt: int) -> str:
    """SubmitServiceJob ``clientToken`` for resubmission ``attempt`` of a lineage (≤ 64 chars)."""
    token = f"{lineage_id}-a{attempt}"
    return token[-CLIENT_TOKEN_MAX:]


def _suffix(lineage_id: str, attempt: int) -> str:
    short = re.sub(r"[^A-Za-z0-9]", "", lineage_id)[-6:] or "0"
    return f"-r{attempt}-{short}"


def batch_job_name(base: str, lineage_id: str, attempt: int) -> str:
    """Name of a resubmitted Batch job or service job: ``<base>-r<attempt>-<6 of lineage>``.

    ``base`` (the original job's name) is cleaned to ``[A-Za-z0-9_-]`` and shortened so the whole
    name fits in 128 characters.
    """
    suffix = _suffix(lineage_id, attempt)
    clean = re.sub(r"[^A-Za-z0-9_-]", "-", base)[: BATCH_NAME_MAX - len(suffix)] or "job"
    return clean + suffix


def training_job_name(base: str, lineage_id: str, attempt: int) -> str:
    """Name of a resubmitted SageMaker training job (≤ 63, ``^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``)."""
    suffix = _suffix(lineage_id, attempt)
    clean = re.sub(r"[^A-Za-z0-9-]", "-", base)
    clean = re.sub(r"^[^A-Za-z0-9]+", "", clean)[: SAGEMAKER_NAME_MAX - len(suffix)].rstrip("-")
    return (clean or "job") + suffix


def is_valid_batch_name(name: str) -> bool:
    """True for a valid Batch ``jobName``."""
    return bool(_BATCH_NAME.match(name))


def is_valid_training_job_name(name: str) -> bool:
    """True for a valid SageMaker ``TrainingJobName``."""
    return bool(_TRAINING_NAME.match(name))


def lineage_tags(lineage_id: str, attempt: int, array_index: int | None = None) -> dict[str, str]:
    """batchpilot's own tags for a resubmitted job."""
    tags = {LINEAGE_TAG: lineage_id, ATTEMPT_TAG: str(attempt)}
    if array_index is not None:
        tags[ARRAY_INDEX_TAG] = str(array_index)
    return tags


def merge_tags(
    user_tags: Mapping[str, str] | None, own: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """The tags of a resubmitted job: the failed job's tags, then batchpilot's, at most 50.

    Keys starting with ``aws:`` are reserved by AWS and dropped; batchpilot's own keys replace any
    earlier values; the successor tags recovery puts on a failed job (:data:`SUCCESSOR_ARN_TAG`,
    :data:`SUCCESSOR_NAME_TAG`) are dropped: they describe the failed job, and a request rebuilt
    after they were added (a redelivery after a crash) must equal the first, or Batch refuses its
    ``clientToken`` ("already used with different parameters"). When the result would pass 50
    tags, user tags are kept in key order and the rest dropped.

    Returns:
        ``(tags, dropped_keys)``.
    """
    kept = {
        str(k): str(v)
        for k, v in sorted((user_tags or {}).items())
        if not str(k).lower().startswith(_RESERVED_TAG_PREFIX) and k not in own and k not in _SUCCESSOR_TAGS
    }
    room = MAX_TAGS - len(own)
    keys = list(kept)
    dropped = keys[room:]
    tags = {k: kept[k] for k in keys[:room]}
    tags.update(own)
    return tags, dropped
