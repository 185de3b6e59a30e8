"""The one processor shape (batchpilot.shared.processing): the Lambda context passed through
``handle`` reaches batch-level and record work, nothing of an invocation outlives it, a raising
record is the only batch item failure, and a function's one Handler routes each trigger to its
own entry."""

from __future__ import annotations

import math
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from batchpilot.shared.deadline import DEADLINE
from batchpilot.shared.observability import logger, metrics
from batchpilot.shared.processing import SqsProcessor, by_trigger, queue_entry, schedule_entry
from batchpilot_local.testing.harness import sqs_event


class Context:
    """A Lambda context whose time left the test sets (milliseconds)."""

    function_name = "batchpilot-test"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:111122223333:function:batchpilot-test"
    aws_request_id = "52fdfc07-2182-454f-963f-5f0f9a621d72"

    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


class Probe(SqsProcessor):
    """Records what the batch-level and the record work see; fails the body ``fail``."""

    def __init__(self) -> None:
        super().__init__(no_context_seconds=60.0)
        self.prepared: list[tuple[list[tuple[str, str]], float]] = []
        self.seen: list[tuple[str, float, str | None]] = []
        self.cleaned = 0

    def _prepare(self) -> None:
        super()._prepare()
        self.prepared.append((self.batch_bodies(), self.time_left()))

    def process_record(self, record: SQSRecord) -> Any:
        self.seen.append((record.message_id, self.time_left(), logger.get_correlation_id()))
        if record.body == "fail":
            raise RuntimeError("this record only")
        return record.body

    def _clean(self) -> None:
        self.cleaned += 1
        super()._clean()


def test_the_context_given_to_handle_reaches_prepare_and_each_record_and_is_dropped_after() -> None:
    processor = Probe()
    context = Context(12_500)
    response = processor.handle(sqs_event(["a", "fail", "c"], "q"), context)  # type: ignore[arg-type]
    assert response == {"batchItemFailures": [{"itemIdentifier": "msg-1"}]}
    assert processor.prepared == [([("msg-0", "a"), ("msg-1", "fail"), ("msg-2", "c")], 12.5)]
    # Each record in its own scope (its messageId the correlation id), the time left from the context.
    assert processor.seen == [("msg-0", 12.5, "msg-0"), ("msg-1", 12.5, "msg-1"), ("msg-2", 12.5, "msg-2")]
    assert processor.cleaned == 1
    assert processor.context is None
    assert processor.time_left() == 60.0  # outside an invocation: no_context_seconds


def test_time_left_is_asked_of_the_context_at_each_call() -> None:
    context = Context(30_000)

    class Draining(Probe):
        def process_record(self, record: SQSRecord) -> Any:
            context.remaining_ms -= 10_000  # each record spends ten seconds
            return super().process_record(record)

    processor = Draining()
    processor.handle(sqs_event(["a", "b"], "q"), context)  # type: ignore[arg-type]
    assert [left for _, left, _ in processor.seen] == [20.0, 10.0]


def test_a_batch_without_a_context_has_the_processors_default_time() -> None:
    processor = Probe()
    response = process_partial_response(sqs_event(["a"], "q"), processor.record_handler, processor)
    assert response == {"batchItemFailures": []}
    assert processor.seen == [("msg-0", 60.0, "msg-0")]
    assert SqsProcessor().time_left() == math.inf


def test_a_malformed_record_reads_as_empty_fields_in_the_batch() -> None:
    processor = Probe()
    processor.records = [{"messageId": "m-1"}, {"body": "x"}, "not a record"]  # type: ignore[list-item]
    assert processor.batch_bodies() == [("m-1", ""), ("", "x")]


def test_the_one_handler_sends_each_trigger_to_its_own_entry(
    lambda_context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics, "namespace", "batchpilot-test")  # configure() does it at cold start
    processor = Probe()
    runs: list[Any] = []

    def run_schedule(event: Any) -> dict[str, Any]:
        runs.append(event)
        return {"time": event["time"]}

    queue_handler = queue_entry(processor)
    schedule_handler = schedule_entry(run_schedule)
    handler = by_trigger(queue=queue_handler, schedule=schedule_handler)
    scheduled = {"detail-type": "Scheduled Event", "time": "2026-11-20T10:00:00Z"}
    assert handler(scheduled, lambda_context) == {"time": "2026-11-20T10:00:00Z"}
    assert runs == [scheduled]
    assert processor.prepared == []
    assert handler(sqs_event(["a"], "q"), lambda_context) == {"batchItemFailures": []}
    assert runs == [scheduled]
    assert processor.seen == [("msg-0", 30.0, "msg-0")]
    assert schedule_handler(scheduled, lambda_context) == {"time": "2026-11-20T10:00:00Z"}
    with pytest.raises(ValueError, match="no time"):
        schedule_entry(lambda event: (_ for _ in ()).throw(ValueError("no time")))({}, lambda_context)


class DeadlineProbe(SqsProcessor):
    """Records the process-wide deadline (what io/deadline.py's botocore hooks read) per record."""

    def __init__(self) -> None:
        super().__init__()
        self.deadline_seen: list[float] = []

    def process_record(self, record: SQSRecord) -> Any:
        self.deadline_seen.append(DEADLINE.time_left())
        return None


def test_every_queue_batch_and_scheduled_run_bounds_aws_calls_by_its_time_left() -> None:
    processor = DeadlineProbe()
    queue_entry(processor)(sqs_event(["a", "b"], "q"), Context(42_000))
    assert processor.deadline_seen == [42.0, 42.0]
    assert DEADLINE.time_left() == math.inf  # nothing of the invocation outlives it

    seen: list[float] = []

    def run(event: Any) -> dict[str, Any]:
        seen.append(DEADLINE.time_left())
        return {"ran": True}

    assert schedule_entry(run)({"time": "2026-12-01T00:00:00Z"}, Context(7_000)) == {"ran": True}
    assert seen == [7.0]
    assert DEADLINE.time_left() == math.inf
