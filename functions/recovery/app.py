"""Recovery function: failed Batch / SageMaker job events (via SQS) in, resubmissions out.

Trigger: the ``RecoveryQueue`` SQS queue fed by ``RecoveryRule`` (terminal FAILED / Failed /
Stopped job events only), in batches, with ``ReportBatchItemFailures``. For each record the
:class:`~batchpilot.recovery.service.Recoverer` decides (the README's decision table), and either
resubmits the job from its checkpoint, or publishes why not. A record that must come back later
(backoff not over, no submit slot before the timeout, throttling, PutEvents failed) is reported as
a batch item failure, with its visibility set to when it is due.
"""

import math
import os
import traceback
from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from batchpilot.adapters.aws import client
from batchpilot.adapters.emf import EmfPublisher
from batchpilot.adapters.recovery_bus import EventBridgeSink
from batchpilot.adapters.recovery_checkpoints import S3Checkpoints
from batchpilot.adapters.recovery_jobs import RecoveryJobs
from batchpilot.adapters.recovery_lineage import DynamoLineageStore
from batchpilot.observability import configure, logger, metrics
from batchpilot.recovery.pacing import SubmitPacer
from batchpilot.recovery.service import Action, Recoverer, RetryLater
from batchpilot.recovery.settings import RecoverySettings

settings = RecoverySettings.from_environ(os.environ, function="recovery")
configure(settings)
publisher = EmfPublisher(settings.namespace, settings.service)
# A batch whose every record is handed back (e.g. one deferred record) is a normal outcome, not a
# function error: report the failures instead of raising, so the Errors alarm means a real error.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
# One bucket per execution environment: at most `max_concurrency` environments run at once.
pacer = SubmitPacer(rate=settings.per_invocation_rate())
_MAX_VISIBILITY_S = 43_200  # SQS's longest visibility timeout (12 hours)

_COUNTERS = {
    Action.RESUBMITTED: "EventsProcessed",
    Action.DRY_RUN: "EventsProcessed",
    Action.SKIPPED: "EventsProcessed",
    Action.FAILED: "EventsProcessed",
    Action.DUPLICATE: "DuplicateEvents",
    Action.IGNORED: "EventsIgnored",
    Action.INVALID: "InvalidEvents",
}


@cache
def recoverer() -> Recoverer:
    """The recoverer and its boto3 clients, made at the first record (after settings validated)."""
    return Recoverer(
        settings,
        jobs=RecoveryJobs(client("batch"), client("sagemaker"), settings.container_checkpoint),
        checkpoints=S3Checkpoints(client("s3"), settings.checkpoint_max_pages),
        lineage=DynamoLineageStore(client("dynamodb"), settings.state_table),
        events=EventBridgeSink(client("events"), settings.event_bus),
        pacer=pacer,
    )


@cache
def _sqs() -> Any:
    """The SQS client for delaying records (made once, at the first deferral)."""
    return client("sqs")


class _Invocation:
    context: LambdaContext | None = None

    @classmethod
    def time_left(cls) -> float:
        """Seconds before the function times out (unbounded outside Lambda)."""
        if cls.context is None:
            return float("inf")
        return cls.context.get_remaining_time_in_millis() / 1000.0


def _defer(record: SQSRecord, delay: float | None) -> None:
    """Make a handed-back record visible again when it is due (best effort)."""
    if delay is None or settings.queue_url is None:
        return
    seconds = max(0, min(_MAX_VISIBILITY_S, math.ceil(delay)))
    try:
        _sqs().change_message_visibility(
            QueueUrl=settings.queue_url, ReceiptHandle=record.receipt_handle, VisibilityTimeout=seconds
        )
    except Exception as exc:  # the record still comes back, after the queue's visibility timeout
        logger.warning("could not delay the record", extra={"error": type(exc).__name__})


def record_handler(record: SQSRecord) -> None:
    """Handle one SQS record; raising marks only this record as failed (SQS delivers it again)."""
    try:
        result = recoverer().handle(record.body, _Invocation.time_left)
    except RetryLater as exc:
        metrics.add_metric(name="RecordsRetried", unit=MetricUnit.Count, value=1)
        logger.info(
            "record handed back to SQS",
            extra={"message_id": record.message_id, "reason": exc.reason, "delay_s": exc.delay_seconds},
        )
        _defer(record, exc.delay_seconds)
        raise
    except Exception as exc:
        # A bug or an AWS outage: logged at ERROR (without the event), counted, and retried by SQS
        # up to the queue's redrive limit, then the dead-letter queue and its alarm.
        metrics.add_metric(name="RecordErrors", unit=MetricUnit.Count, value=1)
        # Not logger.exception: an error message can quote request values (environment, payload).
        frames = traceback.extract_tb(exc.__traceback__)[-3:]
        logger.error(
            "record failed",
            extra={
                "message_id": record.message_id,
                "error": type(exc).__name__,
                "where": [f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in frames],
            },
        )
        raise
    metrics.add_metric(name=_COUNTERS[result.action], unit=MetricUnit.Count, value=1)
    if result.metrics:
        publisher.publish(result.metrics)
    details = {
        "action": result.action.value,
        "event_id": result.event_id,
        "detail_type": result.detail_type,
        "job_arn": result.job_arn,
        "job_kind": result.job_kind,
        "category": result.category,
        "skip_reason": result.skip_reason.value if result.skip_reason else None,
        "decision": result.message,
        "lineage_id": result.lineage_id,
        "attempt": result.attempt,
        "operation": result.operation,
        "new_job_name": result.new_job_name,
        "new_job_arn": result.new_job_arn,
        "error": result.error,
        "dropped_tags": result.dropped_tags or None,  # keys only: over the 50-tag limit
    }
    details = {k: v for k, v in details.items() if v is not None}
    if result.action is Action.INVALID:
        logger.warning("event not processed", extra={"outcome": "invalid", **details})
    elif result.action is Action.FAILED:
        logger.warning("resubmission refused by AWS", extra={"outcome": "recovery-failed", **details})
    else:
        logger.info("recovery decision", extra=details)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """SQS batch in; ``{"batchItemFailures": [...]}`` out (Powertools batch utility)."""
    _Invocation.context = context
    try:
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    finally:
        _Invocation.context = None
