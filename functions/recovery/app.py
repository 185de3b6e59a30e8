"""Recovery function: failed Batch / SageMaker job events (SQS) in, resubmissions out. Wiring only."""

import os

from batchpilot.io import batch, emf, eventbridge, s3, sagemaker, sqs
from batchpilot.io.clients import client as aws
from batchpilot.io.dynamodb.lineage import DynamoLineageStore
from batchpilot.recovery.handler import RecoveryProcessor
from batchpilot.recovery.pacing import SubmitPacer
from batchpilot.recovery.service import Recoverer
from batchpilot.recovery.settings import RecoverySettings
from batchpilot.shared.observability import configure
from batchpilot.shared.processing import queue_entry

settings = RecoverySettings.from_environ(os.environ, function="recovery")
configure(settings)
submit_batch = aws("batch", max_attempts=1)  # SubmitJob has no client token: see io/batch.py
batch_jobs = batch.BatchJobs(aws("batch"), settings.container_checkpoint, submit_client=submit_batch)
processor = RecoveryProcessor(  # built once per execution environment: clients, pacer (see pacing.py)
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

lambda_handler = queue_entry(processor)  # SQS batch → {"batchItemFailures": [...]}
