"""The one ResourceConfig reader (SageMaker API reference: ResourceConfig, InstanceGroups)."""

import json

import pytest
from batchpilot.shared.resources import UNTYPED, instances_by_type, instances_from_payload, total_instances


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 4}}, {"ml.p4d.24xlarge": 4}),
        (
            {
                "ResourceConfig": {
                    "InstanceGroups": [
                        {"InstanceGroupName": "a", "InstanceType": "ml.g5.xlarge", "InstanceCount": 2},
                        {"InstanceGroupName": "b", "InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
                        {"InstanceGroupName": "c", "InstanceType": "ml.c5.xlarge", "InstanceCount": 3},
                    ]
                }
            },
            {"ml.g5.xlarge": 3, "ml.c5.xlarge": 3},
        ),
        ({"ResourceConfig": {"InstanceCount": 2}}, {UNTYPED: 2}),
        ({"ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 0}}, None),
        ({"ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": True}}, None),
        ({"TrainingJobName": "no-resource-config"}, None),
        ([1, 2], None),
    ],
)
def test_instances_from_payload(payload: object, expected: dict[str, int] | None) -> None:
    assert instances_from_payload(json.dumps(payload)) == expected


def test_demand_from_unusable_payloads() -> None:
    assert instances_from_payload(None) is None
    assert instances_from_payload("") is None
    assert instances_from_payload("{not json") is None


def test_instance_groups_take_precedence_over_instance_count() -> None:
    config = {
        "InstanceType": "ml.p5.48xlarge",
        "InstanceCount": 9,
        "InstanceGroups": [{"InstanceGroupName": "a", "InstanceType": "ml.g5.xlarge", "InstanceCount": 2}],
    }
    assert instances_by_type(config) == {"ml.g5.xlarge": 2}
    assert total_instances(config) == 2


def test_empty_instance_groups_fall_back_to_instance_count() -> None:
    config = {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 4, "InstanceGroups": []}
    assert instances_by_type(config) == {"ml.p5.48xlarge": 4}
    assert total_instances({"nothing": 1}) is None
    assert total_instances("not a mapping") is None
