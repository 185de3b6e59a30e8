"""Accelerators (GPUs, or Trainium chips) per SageMaker training instance type.

Source: Amazon EC2 instance types, "Accelerated computing" (https://aws.amazon.com/ec2/instance-types/)
and the Amazon EC2 User Guide, "Specifications for Amazon EC2 accelerated computing instances"
(https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html). A SageMaker ``ml.<type>`` training
instance has the accelerators of the EC2 ``<type>`` it runs on (Amazon SageMaker pricing, "Instance
details"); EC2's ``DescribeInstanceTypes`` (``GpuInfo.Gpus[].Count``, ``NeuronInfo``) gives the same
numbers. A scenario can add or override a type with ``instance_types.<type>.accelerators``.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ACCELERATORS", "accelerators"]


def _family(family: str, counts: Mapping[str, int]) -> dict[str, int]:
    return {f"ml.{family}.{size}": count for size, count in counts.items()}


# G5 (NVIDIA A10G), G6 (NVIDIA L4) and G6e (NVIDIA L40S) share one size ladder: 1 GPU up to
# 16xlarge, 4 GPUs at 12xlarge and 24xlarge, 8 at 48xlarge.
_G_SIZES = {
    "xlarge": 1,
    "2xlarge": 1,
    "4xlarge": 1,
    "8xlarge": 1,
    "16xlarge": 1,
    "12xlarge": 4,
    "24xlarge": 4,
    "48xlarge": 8,
}

ACCELERATORS: dict[str, int] = {
    "ml.p4d.24xlarge": 8,  # 8 NVIDIA A100 (40 GB)
    "ml.p4de.24xlarge": 8,  # 8 NVIDIA A100 (80 GB)
    "ml.p5.48xlarge": 8,  # 8 NVIDIA H100
    "ml.p5e.48xlarge": 8,  # 8 NVIDIA H200
    "ml.p5en.48xlarge": 8,  # 8 NVIDIA H200
    "ml.p6-b200.48xlarge": 8,  # 8 NVIDIA B200
    **_family("g5", _G_SIZES),
    **_family("g6", _G_SIZES),
    **_family("g6e", _G_SIZES),
    "ml.trn1.2xlarge": 1,  # 1 AWS Trainium chip
    "ml.trn1.32xlarge": 16,  # 16 AWS Trainium chips
    "ml.trn1n.32xlarge": 16,
    "ml.trn2.48xlarge": 16,  # 16 AWS Trainium2 chips
}
"""SageMaker instance type → accelerators per instance (see the module docstring for the source)."""


def accelerators(instance_type: str, overrides: Mapping[str, int | None] | None = None) -> int | None:
    """Accelerators per instance of ``instance_type``: the scenario's override, else the table.

    Returns None for a type neither knows (the scenario must then give ``accelerators``).
    """
    if overrides is not None:
        value = overrides.get(instance_type)
        if value is not None:
            return value
    return ACCELERATORS.get(instance_type)
