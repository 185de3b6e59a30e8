"""Each output names the SQS record it belongs to: EMF values (a ``correlation_ids`` property, one id
per value), counters, and Powertools log lines (``correlation_id``); and the replay reads them back
(``report.parse_attributed``)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

import pytest
from batchpilot.io.emf import EmfPublisher
from batchpilot.shared.correlation import CORRELATION_PROPERTY, current_record, for_record
from batchpilot.shared.metrics import MetricPoint, dimensions
from batchpilot.shared.observability import count, logger, metrics, record_scope
from batchpilot_local.report import parse_attributed

AT = datetime(2026, 11, 20, 10, 15, 30, tzinfo=UTC)
QUEUE = dimensions(JobQueue="gpu-spot-queue")


def point(name: str, value: float = 1.0, dims: tuple[tuple[str, str], ...] = QUEUE) -> MetricPoint:
    return MetricPoint(name, "Count", value, dims, AT)


def blobs(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_the_current_record_is_scoped_and_restored() -> None:
    assert current_record() is None
    with for_record("a"):
        assert current_record() == "a"
        with for_record(None):  # the batch's own work inside a record's
            assert current_record() is None
        with pytest.raises(RuntimeError), for_record("b"):
            raise RuntimeError("a record failed")
        assert current_record() == "a"
    assert current_record() is None


def test_emf_values_list_their_records_in_value_order(capsys: pytest.CaptureFixture[str]) -> None:
    publisher = EmfPublisher("batchpilot/test", "batchpilot")
    with for_record("m-1"):
        publisher.add([point("JobsFailed", 1.0), point("RunTime", 60.0)])
    publisher.add([point("JobsFailed", 2.0)])  # outside any record: the batch's
    with for_record("m-2"):
        publisher.add([point("JobsFailed", 3.0)])
    assert publisher.flush() == 1
    [blob] = blobs(capsys.readouterr().out)
    assert blob["JobsFailed"] == [1.0, 2.0, 3.0]
    assert blob[CORRELATION_PROPERTY] == {"JobsFailed": ["m-1", None, "m-2"], "RunTime": ["m-1"]}
    assert CORRELATION_PROPERTY not in blob["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]  # no dimension


def test_a_blob_split_at_100_values_keeps_each_value_with_its_record(
    capsys: pytest.CaptureFixture[str],
) -> None:
    publisher = EmfPublisher("batchpilot/test", "batchpilot")
    for i in range(150):
        with for_record(f"m-{i}"):
            publisher.add([point("QueueWaitTime", float(i))])
    assert publisher.flush() == 2
    found = blobs(capsys.readouterr().out)
    values = [v for blob in found for v in blob["QueueWaitTime"]]
    ids = [i for blob in found for i in blob[CORRELATION_PROPERTY]["QueueWaitTime"]]
    assert [len(blob["QueueWaitTime"]) for blob in found] == [100, 50]
    assert ids == [f"m-{int(v)}" for v in values] and len(ids) == 150


def test_a_blob_of_no_record_has_no_property(capsys: pytest.CaptureFixture[str]) -> None:
    publisher = EmfPublisher("batchpilot/test", "batchpilot")
    publisher.publish([point("InstancesInUse", 4.0)])  # a scheduled run's gauge
    [blob] = blobs(capsys.readouterr().out)
    assert CORRELATION_PROPERTY not in blob and blob["InstancesInUse"] == [4.0]


def test_counters_and_log_lines_carry_the_record(capsys: pytest.CaptureFixture[str]) -> None:
    metrics.clear_metrics()
    metrics.namespace, metrics.service = "batchpilot/test", "batchpilot"
    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    previous = handler.setStream(sys.stdout)  # the logger writes where this test reads
    with record_scope("m-1"):
        count("EventsProcessed")
        logger.warning("event not processed", extra={"outcome": "invalid", "error": "bad"})
    count("EventsProcessed")
    with record_scope("m-2"):
        count("EventsProcessed")
    logger.warning("no record")
    metrics.flush_metrics()
    handler.setStream(previous)
    out = capsys.readouterr().out
    lines = blobs(out)
    [counter] = [b for b in lines if "_aws" in b]
    assert counter["EventsProcessed"] == [1.0, 1.0, 1.0]
    assert counter[CORRELATION_PROPERTY] == {"EventsProcessed": ["m-1", None, "m-2"]}
    logged = [b for b in lines if "_aws" not in b]
    assert [b.get("correlation_id") for b in logged] == ["m-1", None]
    assert logger.get_correlation_id() is None

    # What the replay reads back from the same output.
    parsed = parse_attributed("metrics", out)
    assert [(record, m.value) for record, m in parsed.metrics] == [("m-1", 1.0), (None, 1.0), ("m-2", 1.0)]
    assert parsed.errors == [("m-1", "metrics: event not processed: bad")]
    metrics.clear_metrics()


def test_a_property_that_does_not_fit_the_values_makes_them_the_batchs() -> None:
    blob = {
        "_aws": {
            "Timestamp": 1_795_240_980_000,
            "CloudWatchMetrics": [
                {"Namespace": "n", "Dimensions": [["JobQueue"]], "Metrics": [{"Name": "JobsFailed"}]}
            ],
        },
        "JobQueue": "q",
        "JobsFailed": [1.0, 1.0],
        CORRELATION_PROPERTY: {"JobsFailed": ["m-1"]},  # one id for two values
    }
    [(record, metric)] = parse_attributed("metrics", json.dumps(blob)).metrics
    assert record is None and metric.value == [1.0, 1.0]
