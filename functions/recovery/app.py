"""Recovery function: failed Batch / SageMaker job events (via SQS) in, resubmissions out.

Trigger: the ``RecoveryQueue`` SQS queue fed by ``RecoveryRule`` (terminal FAILED / Failed /
Stopped job events only), in batches, with ``ReportBatchItemFailures``. For each record the
:class:`~batchpilot.recovery.service.Recoverer` decides (the README's decision table), and either
resubmits the job from its checkpoint, or publishes why not. A record that must come back later
(backoff not over, no submit slot before the timeout, throttling, PutEvents failed) is reported as
a batch item failure, with its visibility set to when it is due.
"""

import os
from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from batchpilot.io.clients import client
from batchpilot.io.dynamodb.lineage import DynamoLineageStore
from batchpilot.io.emf import EmfPublisher
from batchpilot.io.eventbridge import EventBridgePublisher
from batchpilot.io.recovery_jobs import RecoveryJobs
from batchpilot.io.s3 import S3Checkpoints
from batchpilot.recovery.entry import RecoveryEntry
from batchpilot.recovery.pacing import SubmitPacer
from batchpilot.recovery.service import Recoverer
from batchpilot.recovery.settings import RecoverySettings
from batchpilot.shared.observability import configure, logger, metrics

settings = RecoverySettings.from_environ(os.environ, function="recovery")
configure(settings)
publisher = EmfPublisher(settings.namespace, settings.service)
# A batch whose every record is handed back (e.g. one deferred record) is a normal outcome, not a
# function error: report the failures instead of raising, so the Errors alarm means a real error.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
# One bucket per execution environment: at most `max_concurrency` environments run at once.
pacer = SubmitPacer(rate=settings.per_invocation_rate())


@cache
def recoverer() -> Recoverer:
    """The recoverer and its boto3 clients, made at the first record (after settings validated)."""
    return Recoverer(
        settings,
        jobs=RecoveryJobs(client("batch"), client("sagemaker"), settings.container_checkpoint),
        checkpoints=S3Checkpoints(client("s3"), settings.checkpoint_max_pages),
        lineage=DynamoLineageStore(client("dynamodb"), settings.state_table),
        events=EventBridgePublisher(client("events"), settings.event_bus),
        pacer=pacer,
    )


@cache
def _sqs() -> Any:
    """The SQS client for delaying records (made once, at the first deferral)."""
    return client("sqs")


entry = RecoveryEntry(recoverer, _sqs, settings.queue_url, publisher)


def record_handler(record: SQSRecord) -> None:
    """Handle one SQS record; raising marks only this record as failed (SQS delivers it again)."""
    entry.handle_record(record)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """SQS batch in; ``{"batchItemFailures": [...]}`` out (Powertools batch utility)."""
    with entry.invocation(context):
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
