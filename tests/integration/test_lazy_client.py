"""io.clients.LazyClient: a boto3 client made at its first call (the alerts function's ``batch``
client, used for preemption alerts only), against the embedded AWS."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from batchpilot.io.batch import BatchJobDirectory
from batchpilot.io.clients import LazyClient, session
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.testing.samples import sample


@pytest.fixture
def aws() -> Iterator[EmbeddedAws]:
    with EmbeddedAws() as embedded:
        yield embedded


def test_the_client_is_made_at_the_first_call_and_kept(aws: EmbeddedAws) -> None:
    made: list[str] = []

    def count(**kwargs: Any) -> None:  # botocore emits it for every client it creates
        made.append("batch")

    events = session().events
    events.register("creating-client-class.batch", count, unique_id="test-lazy-client")
    try:
        described = copy.deepcopy(sample("service-job/running")["detail"])
        aws.batch.put_service_job(described)
        directory = BatchJobDirectory(LazyClient("batch"))
        assert made == []  # nothing made while wiring (the function's cold start)
        found = directory.lookup(described["jobArn"])
        assert found is not None and found.name == described["jobName"] and made == ["batch"]
        missing = described["jobArn"].rsplit("/", 1)[0] + "/00000000-0000-4000-8000-000000000000"
        assert directory.lookup(missing) is None and made == ["batch"]  # the same client again
    finally:
        events.unregister("creating-client-class.batch", unique_id="test-lazy-client")
