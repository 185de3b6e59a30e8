"""Recovery function: failed Batch / SageMaker job events (SQS) in, resubmissions out. Wiring only."""

import os

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.typing import LambdaContext
from batchpilot.io import batch, emf, eventbridge, s3, sagemaker, sqs
from batchpilot.io.clients import client as aws
from batchpilot.io.dynamodb.lineage import DynamoLineageStore
from batchpilot.recovery.handler import RecoveryHandler
from batchpilot.recovery.pacing import SubmitPacer
from batchpilot.recovery.service import Recoverer
from batchpilot.recovery.settings import RecoverySettings
from batchpilot.shared.observability import configure, logger, metrics

settings = RecoverySettings.from_environ(os.environ, function="recovery")
configure(settings)
submit_batch = aws("batch", max_attempts=1)  # SubmitJob has no client token: see io/batch.py
batch_jobs = batch.BatchJobs(aws("batch"), settings.container_checkpoint, submit_client=submit_batch)
handler = RecoveryHandler(  # built once per execution environment: clients, pacer (see pacing.py)
    Recoverer(
        settings,
        jobs=[batch_jobs, sagemaker.TrainingJobs(aws("sagemaker"))],
        checkpoints=s3.S3Checkpoints(aws("s3"), settings.checkpoint_max_pages),
        lineage=DynamoLineageStore(aws("dynamodb"), settings.state_table),
        events=eventbridge.EventBridgePublisher(aws("events"), settings.event_bus),
        metrics=emf.EmfPublisher(settings.namespace, settings.service),
        deferrer=sqs.SqsDeferrer(aws("sqs"), settings.queue_url),
        pacer=SubmitPacer(rate=settings.per_invocation_rate()),
    )
)
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)  # see handler.py


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, object], context: LambdaContext) -> PartialItemFailureResponse:
    """SQS batch in; ``{"batchItemFailures": [...]}`` out (Powertools batch utility)."""
    return process_partial_response(event=event, record_handler=handler, processor=processor, context=context)
