"""Amazon ECS reads, through an injected boto3 ``ecs`` client: the EC2 instance behind each ECS
container instance a container job runs on (:class:`EcsContainerInstances`, the
:class:`batchpilot.gpu.ports.ContainerInstances` of the GPU activity check).

API: ECS ``DescribeContainerInstances`` (Amazon ECS API Reference): one ``cluster`` and at most
100 ``containerInstances`` a request; each answer's ``ec2InstanceId`` and its ``attributes``
(``ecs.instance-type``, one of the attributes the ECS agent registers: Amazon ECS Developer Guide,
"Amazon ECS container instance attributes"). The cluster is read from the container instance ARN
(``arn:aws:ecs:<region>:<account>:container-instance/<cluster>/<id>``, the long ARN format); an
ARN without a cluster is left out (ECS Developer Guide, "Amazon Resource Names (ARNs) and IDs").
Throttling and transient errors are botocore's standard retries; what still fails raises
:class:`batchpilot.gpu.ports.HostsUnreadable`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batchpilot.gpu.ports import ContainerInstance, HostsUnreadable
from batchpilot.shared.deadline import DeadlineExceeded
from batchpilot.shared.errors import describe

__all__ = ["MAX_CONTAINER_INSTANCES", "EcsContainerInstances", "cluster_of"]

MAX_CONTAINER_INSTANCES = 100
"""``containerInstances`` per DescribeContainerInstances request (the API's limit)."""
_INSTANCE_TYPE = "ecs.instance-type"


def cluster_of(container_instance_arn: str) -> str | None:
    """The ECS cluster named in a container instance ARN (long format), else ``None``."""
    resource = container_instance_arn.split(":", 5)[-1]
    parts = resource.split("/")
    if len(parts) == 3 and parts[0] == "container-instance" and parts[1]:
        return parts[1]
    return None


class EcsContainerInstances:
    """DescribeContainerInstances, per cluster, 100 a request.

    Args:
        client: a boto3 ``ecs`` client (:func:`batchpilot.io.clients.client`).
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def describe(self, arns: Sequence[str]) -> dict[str, ContainerInstance]:
        """Container instance ARN → its EC2 instance ID and instance type (``None`` when the
        instance lacks the ``ecs.instance-type`` attribute). ARNs ECS reports as failures
        (``failures[]``: ``MISSING``) or without a cluster are absent.

        Raises:
            HostsUnreadable: a request failed after botocore's retries (its operation and code).
        """
        by_cluster: dict[str, list[str]] = {}
        for arn in dict.fromkeys(arns):
            cluster = cluster_of(arn)
            if cluster is not None:
                by_cluster.setdefault(cluster, []).append(arn)
        out: dict[str, ContainerInstance] = {}
        for cluster, wanted in sorted(by_cluster.items()):
            for first in range(0, len(wanted), MAX_CONTAINER_INSTANCES):
                chunk = wanted[first : first + MAX_CONTAINER_INSTANCES]
                try:
                    answer = self._client.describe_container_instances(
                        cluster=cluster, containerInstances=chunk
                    )
                except (ClientError, BotoCoreError, DeadlineExceeded) as exc:
                    raise HostsUnreadable(describe(exc, "DescribeContainerInstances")) from None
                for item in answer.get("containerInstances") or []:
                    arn, instance = item.get("containerInstanceArn"), item.get("ec2InstanceId")
                    if not arn or not instance:
                        continue
                    types = [
                        a.get("value")
                        for a in item.get("attributes") or []
                        if a.get("name") == _INSTANCE_TYPE and a.get("value")
                    ]
                    out[str(arn)] = ContainerInstance(str(instance), str(types[0]) if types else None)
        return out
