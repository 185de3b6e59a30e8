"""Rebuilding a job's submit request from what AWS says about it (pure).

- ``DescribeServiceJob`` → ``SubmitServiceJob``: the same ``serviceRequestPayload`` (byte for byte,
  so ``CheckpointConfig.S3Uri`` stays identical), job queue, share identifier or quota share,
  scheduling priority, retry strategy, timeout and preemption configuration, the failed job's tags
  plus the lineage tags, a new deterministic name and a ``clientToken``.
- ``DescribeJobs`` → ``SubmitJob``: the same job definition, parameters, retry strategy, timeout,
  share identifier, scheduling priority and ``propagateTags``; the job's effective command,
  environment and resource requirements as overrides (container, ECS or EKS properties); an array
  child alone, with its index in ``BATCHPILOT_ARRAY_INDEX`` and a tag.
- ``DescribeTrainingJob`` (+ ``ListTags``) → ``CreateTrainingJob``: every field CreateTrainingJob
  accepts, found by walking botocore's input shape (:func:`project`), never a hand-kept list.

The caller passes botocore shapes (``client.meta.service_model.operation_model(op).input_shape``);
this module never imports botocore or boto3.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from batchpilot.recovery.naming import (
    ARRAY_INDEX_ENV,
    batch_job_name,
    client_token,
    lineage_tags,
    merge_tags,
    training_job_name,
)

__all__ = [
    "RESERVED_ENV_PREFIX",
    "Operation",
    "RebuiltRequest",
    "Shape",
    "array_index_of",
    "payload_of",
    "project",
    "rebuild_create_training_job",
    "rebuild_submit_job",
    "rebuild_submit_service_job",
    "tag_map",
]


class Operation(StrEnum):
    """The AWS API operation that resubmits a job, as ``<service>:<OperationName>``."""

    SUBMIT_SERVICE_JOB = "batch:SubmitServiceJob"  # AWS Batch SubmitServiceJob (service jobs)
    SUBMIT_JOB = "batch:SubmitJob"  # AWS Batch SubmitJob (container jobs)
    CREATE_TRAINING_JOB = "sagemaker:CreateTrainingJob"  # SageMaker CreateTrainingJob

    @property
    def service(self) -> str:
        """The boto3 service name (``batch`` or ``sagemaker``)."""
        return self.value.partition(":")[0]

    @property
    def name_in_api(self) -> str:
        """The operation's name in the service's API model (``SubmitServiceJob`` ...)."""
        return self.value.partition(":")[2]


RESERVED_ENV_PREFIX = "AWS_BATCH"
"""Batch rejects environment variables starting with this (it sets them itself)."""


class Shape(Protocol):
    """The part of ``botocore.model.Shape`` that :func:`project` reads.

    ``type_name`` is ``structure``, ``list``, ``map`` or a scalar type; structures have
    ``members`` (name → Shape), lists ``member``, maps ``value``.
    """

    @property
    def type_name(self) -> str: ...


@dataclass(frozen=True)
class RebuiltRequest:
    """A submit request ready for boto3, and what the notification needs to say about it.

    Attributes:
        operation: the API operation that sends it.
        request: keyword arguments of the boto3 call (plain JSON data).
        new_job_name: the deterministic name of the new job.
        client_token: SubmitServiceJob's ``clientToken``; None for the other operations.
        dropped_tags: tag keys of the failed job left off to stay within 50 tags.
    """

    operation: Operation
    request: dict[str, Any]
    new_job_name: str
    client_token: str | None = None
    dropped_tags: list[str] = field(default_factory=list)


def project(value: Any, shape: Any) -> Any:
    """Keep only what ``shape`` (a botocore input shape) accepts, recursively.

    Structures keep their known members (None values dropped), lists and maps are walked, scalars
    pass through; ``datetime`` values stay datetimes (botocore serialises them). Used so a
    Describe* response can be sent back as a Create*/Submit* request without the read-only fields.
    """
    kind = getattr(shape, "type_name", None)
    if kind == "structure":
        if not isinstance(value, Mapping):
            return value
        members: Mapping[str, Any] = shape.members
        out = {}
        for name, member_shape in members.items():
            if name in value and value[name] is not None:
                out[name] = project(value[name], member_shape)
        return out
    if kind == "list":
        if not isinstance(value, Sequence) or isinstance(value, str | bytes):
            return value
        return [project(item, shape.member) for item in value]
    if kind == "map":
        if not isinstance(value, Mapping):
            return value
        return {key: project(item, shape.value) for key, item in value.items()}
    return value


def payload_of(service_job: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``serviceRequestPayload`` of a DescribeServiceJob response, decoded (a CreateTrainingJob
    request), or None when missing or not a JSON object."""
    text = service_job.get("serviceRequestPayload")
    if not isinstance(text, str):
        return None
    try:
        payload = json.loads(text)
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def tag_map(value: Any) -> dict[str, str]:
    """Batch ``tags`` (a map) or SageMaker ``Tags`` (a list of Key/Value) as a dict."""
    if isinstance(value, Mapping):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if isinstance(value, list):
        return {
            str(item["Key"]): "" if item.get("Value") is None else str(item["Value"])
            for item in value
            if isinstance(item, Mapping) and "Key" in item
        }
    return {}


def rebuild_submit_service_job(
    described: Mapping[str, Any],
    *,
    input_shape: Any,
    lineage_id: str,
    attempt: int,
    base_name: str,
) -> RebuiltRequest:
    """SubmitServiceJob request that resubmits a service job.

    Args:
        described: one ``jobs``-style DescribeServiceJob response (``jobName``, ``jobQueue``,
            ``serviceRequestPayload``, ``tags``, ...).
        input_shape: botocore's SubmitServiceJob input shape.
        lineage_id, attempt: the lineage and resubmission number (1 = first).
        base_name: the lineage's original job name, the stem of the new name.

    Raises:
        ValueError: the description has no ``jobQueue``, ``serviceJobType`` or
            ``serviceRequestPayload`` (nothing to resubmit).
    """
    for required in ("jobQueue", "serviceJobType", "serviceRequestPayload"):
        if not described.get(required):
            raise ValueError(f"DescribeServiceJob returned no {required}")
    request = project(dict(described), input_shape)
    name = batch_job_name(base_name, lineage_id, attempt)
    token = client_token(lineage_id, attempt)
    tags, dropped = merge_tags(tag_map(described.get("tags")), lineage_tags(lineage_id, attempt))
    request.update(jobName=name, clientToken=token, tags=tags)
    # Exactly one of shareIdentifier (fair-share queue) / quotaShareName (quota-management queue)
    # is meaningful; both are copied as AWS reported them.
    return RebuiltRequest(Operation.SUBMIT_SERVICE_JOB, request, name, token, dropped)


def _env_list(env: Any, extra: Mapping[str, str]) -> list[dict[str, str]]:
    """A ``[{name, value}]`` environment without Batch's reserved names, plus ``extra``."""
    out: list[dict[str, str]] = []
    seen = set(extra)
    for item in env if isinstance(env, list) else []:
        if not isinstance(item, Mapping):
            continue
        name = item.get("name")
        if not isinstance(name, str) or name.startswith(RESERVED_ENV_PREFIX) or name in seen:
            continue
        out.append({"name": name, "value": "" if item.get("value") is None else str(item["value"])})
    out.extend({"name": k, "value": v} for k, v in extra.items())
    return out


def _container_overrides(container: Mapping[str, Any], extra_env: Mapping[str, str]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if container.get("command"):
        overrides["command"] = list(container["command"])
    environment = _env_list(container.get("environment"), extra_env)
    if environment:
        overrides["environment"] = environment
    if container.get("resourceRequirements"):
        overrides["resourceRequirements"] = list(container["resourceRequirements"])
    return overrides


def _ecs_override(ecs: Mapping[str, Any], extra_env: Mapping[str, str]) -> dict[str, Any]:
    tasks = []
    for task in ecs.get("taskProperties") or []:
        containers = []
        for container in task.get("containers") or []:
            item = _container_overrides(container, extra_env)
            if container.get("name"):
                item["name"] = container["name"]
            containers.append(item)
        tasks.append({"containers": containers})
    return {"taskProperties": tasks}


def _eks_containers(containers: Any, extra_env: Mapping[str, str]) -> list[dict[str, Any]]:
    out = []
    for container in containers if isinstance(containers, list) else []:
        item: dict[str, Any] = {}
        for key in ("name", "image", "command", "args", "resources"):
            if container.get(key):
                item[key] = container[key]
        env = _env_list(container.get("env"), extra_env)
        if env:
            item["env"] = env
        out.append(item)
    return out


def _eks_override(eks: Mapping[str, Any], extra_env: Mapping[str, str]) -> dict[str, Any]:
    pod = eks.get("podProperties") or {}
    override: dict[str, Any] = {"containers": _eks_containers(pod.get("containers"), extra_env)}
    if pod.get("initContainers"):
        override["initContainers"] = _eks_containers(pod.get("initContainers"), {})
    labels = (pod.get("metadata") or {}).get("labels")
    if labels:
        override["metadata"] = {"labels": labels}
    return {"podProperties": override}


def array_index_of(described: Mapping[str, Any]) -> int | None:
    """The array index of an array child (``arrayProperties.index`` or ``jobId`` ``UUID:N``)."""
    props = described.get("arrayProperties") or {}
    index = props.get("index") if isinstance(props, Mapping) else None
    if isinstance(index, int) and not isinstance(index, bool):
        return index
    job_id = str(described.get("jobId") or "")
    head, sep, tail = job_id.rpartition(":")
    if sep and head and tail.isdigit():
        return int(tail)
    return None


def rebuild_submit_job(
    described: Mapping[str, Any],
    *,
    input_shape: Any,
    lineage_id: str,
    attempt: int,
    base_name: str,
) -> RebuiltRequest:
    """SubmitJob request that resubmits a Batch container job (or one array child alone).

    Args:
        described: one ``jobs[]`` item of DescribeJobs (``JobDetail``).
        input_shape: botocore's SubmitJob input shape.
        lineage_id, attempt, base_name: as for :func:`rebuild_submit_service_job`.

    Raises:
        ValueError: the description has no ``jobQueue`` or ``jobDefinition``.
    """
    for required in ("jobQueue", "jobDefinition"):
        if not described.get(required):
            raise ValueError(f"DescribeJobs returned no {required}")
    index = array_index_of(described)
    extra_env = {ARRAY_INDEX_ENV: str(index)} if index is not None else {}
    name = batch_job_name(base_name, lineage_id, attempt)
    tags, dropped = merge_tags(tag_map(described.get("tags")), lineage_tags(lineage_id, attempt, index))
    request: dict[str, Any] = {
        "jobName": name,
        "jobQueue": described["jobQueue"],
        "jobDefinition": described["jobDefinition"],
        "tags": tags,
    }
    for key in ("parameters", "retryStrategy", "timeout", "propagateTags", "shareIdentifier"):
        if described.get(key) is not None and described.get(key) != {}:
            request[key] = described[key]
    if described.get("schedulingPriority") is not None:
        request["schedulingPriorityOverride"] = described["schedulingPriority"]
    if isinstance(described.get("container"), Mapping):
        overrides = _container_overrides(described["container"], extra_env)
        if overrides:
            request["containerOverrides"] = overrides
    if isinstance(described.get("ecsProperties"), Mapping):
        request["ecsPropertiesOverride"] = _ecs_override(described["ecsProperties"], extra_env)
    if isinstance(described.get("eksProperties"), Mapping):
        request["eksPropertiesOverride"] = _eks_override(described["eksProperties"], extra_env)
    nodes = described.get("nodeProperties")
    if isinstance(nodes, Mapping) and nodes.get("numNodes"):
        request["nodeOverrides"] = {"numNodes": nodes["numNodes"]}
    if described.get("consumableResourceProperties"):
        request["consumableResourcePropertiesOverride"] = described["consumableResourceProperties"]
    # dependsOn is left out: the failed job had already passed its dependencies.
    return RebuiltRequest(Operation.SUBMIT_JOB, project(request, input_shape), name, None, dropped)


def rebuild_create_training_job(
    described: Mapping[str, Any],
    tags: Sequence[Mapping[str, Any]] | Mapping[str, str] | None,
    *,
    input_shape: Any,
    lineage_id: str,
    attempt: int,
    base_name: str,
) -> RebuiltRequest:
    """CreateTrainingJob request that resubmits a standalone SageMaker training job.

    Every member of CreateTrainingJob's input shape that DescribeTrainingJob returned is copied
    (recursively projected on its shape); ``TrainingJobName`` is the new name and ``Tags`` the
    job's tags (ListTags, ``aws:`` keys dropped) plus the lineage tags.

    Args:
        described: the DescribeTrainingJob response.
        tags: the job's tags (ListTags ``Tags`` list, or a dict).
        input_shape: botocore's CreateTrainingJob input shape.

    Raises:
        ValueError: the description has no ``RoleArn`` or ``AlgorithmSpecification``.
    """
    for required in ("RoleArn", "AlgorithmSpecification"):
        if not described.get(required):
            raise ValueError(f"DescribeTrainingJob returned no {required}")
    request = project(dict(described), input_shape)
    name = training_job_name(base_name, lineage_id, attempt)
    merged, dropped = merge_tags(tag_map(tags), lineage_tags(lineage_id, attempt))
    request["TrainingJobName"] = name
    request["Tags"] = [{"Key": k, "Value": v} for k, v in merged.items()]
    return RebuiltRequest(Operation.CREATE_TRAINING_JOB, request, name, None, dropped)
