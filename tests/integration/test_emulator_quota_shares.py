"""Quota shares in the emulator (CreateQuotaShare, ListQuotaShares) and in a scenario's world,
through real boto3 clients: what the job ledger reads for a quota share's ``Entitlement`` and
``BorrowedInstances`` and ``LentInstances`` (``BatchLedgerClient.quota_shares``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import botocore.exceptions
import pytest
from batchpilot.io.batch import BatchLedgerClient
from batchpilot.ledger.ports import QuotaShareLimit
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.emulator.shapes import service_model, shape_problems
from batchpilot_local.world import WorldError

WORLD: dict[str, Any] = {
    "service_environments": [
        {"name": "quota-env", "capacityLimits": [{"maxCapacity": 12, "capacityUnit": "NUM_INSTANCES"}]},
    ],
    "job_queues": [
        {"name": "quota-q", "serviceEnvironment": "quota-env", "scheduling": "QUOTA_MANAGEMENT"},
        {"name": "fifo-q", "serviceEnvironment": "quota-env"},
    ],
    "quota_shares": [
        {
            "quotaShareName": "research",
            "jobQueue": "quota-q",
            "capacityLimits": [
                {"maxCapacity": 4, "capacityUnit": "ml.p5.48xlarge"},
                {"maxCapacity": 2, "capacityUnit": "ml.p4d.24xlarge"},
            ],
            "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 200},
        }
    ],
}


@pytest.fixture
def aws() -> Iterator[EmbeddedAws]:
    with EmbeddedAws() as embedded:
        embedded.seed(WORLD)
        yield embedded


def _create(batch: Any, name: str, **overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "quotaShareName": name,
        "jobQueue": "quota-q",
        "capacityLimits": [{"maxCapacity": 8, "capacityUnit": "ml.p5.48xlarge"}],
        "resourceSharingConfiguration": {"strategy": "LEND"},
        "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
    }
    params.update(overrides)
    return dict(batch.create_quota_share(**params))


def test_seeded_and_created_quota_shares_are_listed_as_the_api_shapes_them(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    raw: list[tuple[str, Any]] = []

    def capture(operation_model: Any, response_dict: dict[str, Any], **_: Any) -> None:
        raw.append((operation_model.name, json.loads(response_dict["body"] or b"{}")))

    batch.meta.events.register("before-parse.batch", capture)
    created = _create(batch, "prod", tags={"team": "prod"})
    assert created["quotaShareName"] == "prod"
    shares = {s["quotaShareName"]: s for s in batch.list_quota_shares(jobQueue="quota-q")["quotaShares"]}
    assert set(shares) == {"research", "prod"}
    research = shares["research"]
    assert research["jobQueueArn"] == "arn:aws:batch:us-east-1:111122223333:job-queue/quota-q"
    assert research["resourceSharingConfiguration"] == {"strategy": "LEND_AND_BORROW", "borrowLimit": 200}
    assert research["preemptionConfiguration"] == {"inSharePreemption": "DISABLED"}  # the world's default
    assert (research["state"], research["status"]) == ("ENABLED", "VALID")
    assert shares["prod"]["quotaShareArn"] == created["quotaShareArn"]
    assert batch.list_quota_shares(jobQueue="fifo-q")["quotaShares"] == []
    model = service_model("batch")
    assert raw  # the answers were captured
    for name, body in raw:
        problems = shape_problems(model.operation_model(name).output_shape, body, name, check_required=True)
        assert problems == [], problems


def test_list_quota_shares_pages_each_share_once(aws: EmbeddedAws) -> None:
    batch = aws.client("batch")
    for index in range(5):
        _create(batch, f"team-{index}")
    pages = batch.get_paginator("list_quota_shares").paginate(
        jobQueue="quota-q", PaginationConfig={"PageSize": 2}
    )
    names = [s["quotaShareName"] for page in pages for s in page["quotaShares"]]
    assert sorted(names) == sorted(["research", *(f"team-{i}" for i in range(5))])


def test_the_ledger_reads_each_quota_shares_summed_limit_and_whether_it_lends(aws: EmbeddedAws) -> None:
    ledger = BatchLedgerClient(aws.client("batch"))
    assert ledger.quota_shares("quota-q") == {"research": QuotaShareLimit(6, lends=True)}
    _create(aws.client("batch"), "keeps", resourceSharingConfiguration={"strategy": "RESERVE"})
    _create(aws.client("batch"), "lends")  # LEND
    shares = ledger.quota_shares("quota-q")
    assert shares is not None and {name: s.lends for name, s in shares.items()} == {
        "research": True,  # LEND_AND_BORROW
        "keeps": False,
        "lends": True,
    }
    assert ledger.quota_shares("no-such-queue") is None  # ClientException: unreadable, not empty


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"jobQueue": "fifo-q"}, "has no quota-management scheduling policy"),
        ({"jobQueue": "missing"}, "Job queue missing does not exist"),
        ({"quotaShareName": "research"}, "already exists in job queue quota-q"),
        ({"quotaShareName": "bad name"}, "quotaShareName must be"),
        (
            {"capacityLimits": [{"maxCapacity": 1, "capacityUnit": f"ml.t{i}.large"} for i in range(6)]},
            "at most 5 capacity limits",
        ),
    ],
)
def test_create_quota_share_refuses_what_batch_refuses(
    aws: EmbeddedAws, overrides: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(botocore.exceptions.ClientError) as info:
        _create(aws.client("batch"), overrides.pop("quotaShareName", "new"), **overrides)
    assert info.value.response["Error"]["Code"] == "ClientException"
    assert fragment in info.value.response["Error"]["Message"]


def test_a_world_quota_share_needs_a_quota_management_queue_and_api_shaped_fields(aws: EmbeddedAws) -> None:
    share = {
        "quotaShareName": "x",
        "jobQueue": "fifo-q",
        "capacityLimits": [{"maxCapacity": 1, "capacityUnit": "u"}],
    }
    with pytest.raises(WorldError, match=r"world.quota_shares\[0\].jobQueue: no QUOTA_MANAGEMENT job queue"):
        aws.seed({"quota_shares": [share]})
    with pytest.raises(WorldError, match=r"world.quota_shares\[0\].capacityLimits\[0\].maxCapacity"):
        EmbeddedAws.check_world(
            {"quota_shares": [share | {"capacityLimits": [{"maxCapacity": "1", "capacityUnit": "u"}]}]}
        )
    with pytest.raises(WorldError, match=r"world.quota_shares\[0\].capacityLimits: required"):
        EmbeddedAws.check_world({"quota_shares": [{"quotaShareName": "x", "jobQueue": "quota-q"}]})


def test_seeding_again_replaces_a_quota_share_never_duplicates_it(aws: EmbeddedAws) -> None:
    again = dict(
        WORLD["quota_shares"][0], capacityLimits=[{"maxCapacity": 9, "capacityUnit": "ml.p5.48xlarge"}]
    )
    aws.seed({"quota_shares": [again]})
    (share,) = aws.client("batch").list_quota_shares(jobQueue="quota-q")["quotaShares"]
    assert share["capacityLimits"] == [{"maxCapacity": 9, "capacityUnit": "ml.p5.48xlarge"}]
