"""Accelerators (GPUs, or AWS Trainium chips) per instance type: pure data, no I/O.

Source: Amazon EC2 User Guide, "Amazon EC2 instance types" → "Accelerated computing" (the
"GPUs" / "Trainium chips" column of each family's specifications table), and the SageMaker
pricing page's instance list, whose ``ml.`` types are the EC2 types of the same name. A SageMaker
type (``ml.p5.48xlarge``) and its EC2 type (``p5.48xlarge``) have the same count.

A type missing here is *unknown*: callers publish instance metrics for it and no GPU metric
(never a guessed count).
"""

from __future__ import annotations

__all__ = ["ACCELERATORS", "accelerators"]

_SMALL_G = ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")


def _g_family(family: str) -> dict[str, int]:
    # g5, g6 and g6e: one GPU up to 16xlarge (and 8xlarge), four at 12xlarge/24xlarge, eight at 48xlarge.
    out = {f"{family}.{size}": 1 for size in _SMALL_G}
    out.update({f"{family}.12xlarge": 4, f"{family}.24xlarge": 4, f"{family}.48xlarge": 8})
    return out


ACCELERATORS: dict[str, int] = {
    # P family (NVIDIA A100 / H100 / H200 / B200)
    "p3.2xlarge": 1,
    "p3.8xlarge": 4,
    "p3.16xlarge": 8,
    "p3dn.24xlarge": 8,
    "p4d.24xlarge": 8,
    "p4de.24xlarge": 8,
    "p5.4xlarge": 1,
    "p5.48xlarge": 8,
    "p5e.48xlarge": 8,
    "p5en.48xlarge": 8,
    "p6-b200.48xlarge": 8,
    "p6-b300.48xlarge": 8,
    "p6e-gb200.36xlarge": 4,
    # G family (NVIDIA T4 / A10G / L4 / L40S)
    "g4dn.xlarge": 1,
    "g4dn.2xlarge": 1,
    "g4dn.4xlarge": 1,
    "g4dn.8xlarge": 1,
    "g4dn.16xlarge": 1,
    "g4dn.12xlarge": 4,
    "g4dn.metal": 8,
    **_g_family("g5"),
    **_g_family("g6"),
    **_g_family("g6e"),
    # Trainium (Trainium chips, counted as accelerators)
    "trn1.2xlarge": 1,
    "trn1.32xlarge": 16,
    "trn1n.32xlarge": 16,
    "trn2.48xlarge": 16,
}
"""EC2 instance type (no ``ml.`` prefix) → accelerators per instance."""


def accelerators(instance_type: str | None) -> int | None:
    """GPUs (or Trainium chips) of one instance of ``instance_type`` (``ml.`` prefix or not).

    Returns:
        The count, or ``None`` for a missing or unknown type (no GPU metric is published for it).
    """
    if not instance_type:
        return None
    name = instance_type.strip().lower()
    if name.startswith("ml."):
        name = name[3:]
    return ACCELERATORS.get(name)
