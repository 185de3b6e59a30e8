"""The capacity state store against DynamoDB (moto): round trips, optimistic locking, the payload cache."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from batchpilot.capacity.policy import EnvironmentState, Notice, UnitClock
from batchpilot.io.dynamodb.capacity import DEMAND_TTL, STATE_TTL, CapacityStateStore
from batchpilot_local.testing.harness import create_state_table
from moto import mock_aws

TABLE = "batchpilot-StateTable"
NOW = datetime(2026, 11, 20, 22, 0, tzinfo=UTC)


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_state_table(dynamodb, TABLE)
        yield dynamodb


def test_a_new_environment_has_a_fresh_state(client: Any) -> None:
    assert CapacityStateStore(client, TABLE).load("sm-training") == EnvironmentState()


def test_state_round_trips_and_expires_after_the_state_ttl(client: Any) -> None:
    store = CapacityStateStore(client, TABLE)
    state = EnvironmentState(
        last_change_at=NOW - timedelta(minutes=2),
        clocks={
            "NUM_INSTANCES": UnitClock(
                below_since=NOW - timedelta(minutes=4),
                history=((NOW - timedelta(minutes=1), 12), (NOW, 10)),
            ),
            "ml.p4d.24xlarge": UnitClock(),
        },
        notices={"limited:NUM_INSTANCES": Notice("AT_MAX:80:", NOW)},
    )
    assert store.save("sm-training", state, NOW) == 1
    loaded = store.load("sm-training")
    assert loaded == EnvironmentState(
        version=1, last_change_at=state.last_change_at, clocks=state.clocks, notices=state.notices
    )
    item = client.get_item(
        TableName=TABLE, Key={"pk": {"S": "capacity#env#sm-training"}, "sk": {"S": "state"}}
    )["Item"]
    assert int(item["expires_at"]["N"]) == int((NOW + STATE_TTL).timestamp())


def test_a_second_writer_with_the_same_version_loses(client: Any) -> None:
    store = CapacityStateStore(client, TABLE)
    first = store.load("sm-training")
    second = store.load("sm-training")
    assert store.save("sm-training", first, NOW) == 1
    assert store.save("sm-training", second, NOW) is None  # created meanwhile: nothing written
    current = store.load("sm-training")
    assert store.save("sm-training", current, NOW) == 2
    assert store.save("sm-training", current, NOW) is None  # stale version
    assert store.load("sm-training").version == 2


def test_the_payload_cache_by_key_and_by_partition(client: Any) -> None:
    store = CapacityStateStore(client, TABLE)
    arn = "arn:aws:batch:us-east-1:111122223333:service-job/{:05d}".format
    demands = {arn(i): {"ml.g5.xlarge": 1 + i % 4} for i in range(450)}
    demands[arn(7)] = {}  # payload read, no usable ResourceConfig
    store.remember_demands("hi", demands, NOW)
    store.remember_demands("lo", {arn(1): {"ml.p4d.24xlarge": 9}}, NOW)
    # A few misses: BatchGetItem by key; jobs never cached are simply absent.
    few = [arn(1), arn(7), arn(9999)]
    assert store.cached_demands("hi", few) == {arn(1): {"ml.g5.xlarge": 2}, arn(7): {}}
    # Many misses: one Query of the queue's partition (other queues' items are not mixed in).
    many = [arn(i) for i in range(0, 900, 2)]
    found = store.cached_demands("hi", many)
    assert found == {a: demands[a] for a in many if a in demands}
    assert len(found) == 225
    item = client.get_item(TableName=TABLE, Key={"pk": {"S": "capacity#demand#hi"}, "sk": {"S": arn(3)}})[
        "Item"
    ]
    assert int(item["expires_at"]["N"]) == int((NOW + DEMAND_TTL).timestamp())
    assert store.cached_demands("hi", []) == {}


def test_load_many_reads_every_environment_state_in_batches_of_100(client: Any) -> None:
    store = CapacityStateStore(client, TABLE)
    saved = EnvironmentState(last_change_at=NOW - timedelta(minutes=5))
    names = [f"env-{i:03d}" for i in range(130)]
    for name in names[::10]:
        assert store.save(name, saved, NOW) == 1
    calls: list[str] = []
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    states = store.load_many(names)
    assert calls == ["BatchGetItem", "BatchGetItem"]  # 100 keys, then 30
    assert set(states) == set(names)
    for name in names:
        expected = store.load(name)
        assert states[name] == expected
        assert (expected.version == 1) == (name in names[::10])
