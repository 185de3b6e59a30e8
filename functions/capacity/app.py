"""Capacity function: queue gauges, and service-environment capacity limits that follow demand.

Triggers:

- EventBridge Scheduler, every minute (``CapacitySchedule``): an event shaped like an EventBridge
  scheduled event whose ``time`` is the scheduled time. "Now" is always taken from that ``time``,
  so replaying the same clock gives the same decisions.
- ``CapacityQueue`` (SQS, fed by ``CapacityRule``): ``Batch Service Job Queue Blocked`` events
  whose reason is ``MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE``; the environment of the
  job's queue (when managed) gets a run at once, at the event's ``time``.

Every run emits EMF gauges and, per managed environment, one decision; changes and refusals are
published as ``Capacity Adjusted`` / ``Capacity Limited`` on ``BATCHPILOT_EVENT_BUS``.
"""

import os
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from batchpilot.adapters import aws
from batchpilot.adapters.capacity_batch import BatchCapacityClient
from batchpilot.adapters.capacity_events import EventBridgePublisher
from batchpilot.adapters.capacity_state import CapacityStateStore
from batchpilot.adapters.emf import EmfPublisher
from batchpilot.capacity.model import MAX_RESOURCE_REASON
from batchpilot.capacity.service import CapacityService, DemandMemory, RunReport, published
from batchpilot.capacity.settings import CapacitySettings
from batchpilot.classification import queue_name
from batchpilot.events import (
    BatchServiceJobQueueBlocked,
    InvalidEventError,
    UnsupportedEventError,
    to_datetime,
)
from batchpilot.metrics import metric_timestamp
from batchpilot.observability import configure, logger, metrics
from batchpilot.pipeline import decode_record

settings = CapacitySettings.from_environ(os.environ, function="capacity")
configure(settings)
publisher = EmfPublisher(settings.namespace, settings.service)
processor = BatchProcessor(event_type=EventType.SQS)
memory = DemandMemory()
_service: CapacityService | None = None
_ran_this_invocation: set[str] = set()


def service() -> CapacityService:
    """The run wiring, built once per Lambda instance (boto3 clients with standard retries)."""
    global _service
    if _service is None:
        _service = CapacityService(
            settings,
            BatchCapacityClient(aws.client("batch")),
            CapacityStateStore(aws.client("dynamodb"), settings.state_table),
            EventBridgePublisher(aws.client("events"), settings.event_bus),
            memory,
        )
    return _service


def scheduled_time(event: Any) -> datetime:
    """The run's "now": the event's ``time`` (the schedule's scheduled time), aware UTC.

    Raises:
        ValueError: no usable ``time`` (the message says what the event must carry).
    """
    raw = event.get("time") if isinstance(event, dict) else None
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError(
            "capacity: the event has no 'time': invoke with the schedule's event (ISO-8601 time)"
        )
    try:
        return to_datetime(raw)
    except ValueError as exc:
        raise ValueError(f"capacity: the event's 'time' is not an ISO-8601 time: {exc}") from None


def _log_run(report: RunReport, trigger: str) -> None:
    for outcome in report.outcomes:
        if outcome.decision is not None:
            for unit in outcome.decision.units:
                logger.info(
                    "capacity decision",
                    extra={
                        "trigger": trigger,
                        "service_environment": outcome.name,
                        "capacity_unit": unit.unit,
                        "action": unit.action,
                        "reason": unit.reason,
                        "limit_reason": unit.limit_reason,
                        "current_max": unit.current_max,
                        "new_max": unit.new_max,
                        "in_use": unit.in_use,
                        "runnable_demand": unit.runnable,
                        "dry_run": settings.dry_run,
                        "decision": unit.message,
                    },
                )
        if outcome.conflict:
            logger.warning(
                "capacity state changed by another run", extra={"service_environment": outcome.name}
            )
        if outcome.error:
            logger.error(
                "capacity run failed for a service environment",
                extra={"service_environment": outcome.name, "error": outcome.error},
            )
    adjusted, limited = published(report.outcomes)
    metrics.add_metric(name="CapacityRuns", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="CapacityAdjustedEvents", unit=MetricUnit.Count, value=adjusted)
    metrics.add_metric(name="CapacityLimitedEvents", unit=MetricUnit.Count, value=limited)
    metrics.add_metric(name="CapacityErrors", unit=MetricUnit.Count, value=len(report.errors))
    if report.unknown_demand:
        logger.info(
            "RUNNABLE jobs whose payload is not read yet count as 1 instance",
            extra={"jobs": report.unknown_demand, "describe_budget": settings.describe_budget},
        )


def _run(now: datetime, trigger: str, **kwargs: Any) -> RunReport:
    report = service().run(now, timestamp=metric_timestamp(now, datetime.now(UTC)), **kwargs)
    publisher.publish(report.gauges)
    _log_run(report, trigger)
    return report


def record_handler(record: SQSRecord) -> None:
    """One ``Batch Service Job Queue Blocked`` event: a run for its queue's environment.

    Malformed and unrelated events are reported and counted, never retried; a failed run raises
    so that only this record is retried.
    """
    try:
        event = decode_record(record.body)
    except UnsupportedEventError as exc:
        metrics.add_metric(name="EventsIgnored", unit=MetricUnit.Count, value=1)
        logger.warning("event not processed", extra={"outcome": "ignored", "event_id": exc.event_id})
        return
    except InvalidEventError as exc:
        metrics.add_metric(name="InvalidEvents", unit=MetricUnit.Count, value=1)
        logger.warning(
            "event not processed",
            extra={
                "outcome": "invalid",
                "event_id": exc.event_id,
                "detail_type": exc.detail_type,
                "error": str(exc),
            },
        )
        return
    reason = (getattr(event.detail, "statusReason", None) or "").strip()
    queue = queue_name(getattr(event.detail, "jobQueue", None))
    environment = settings.policy.environment_of(queue) if queue else None
    if not isinstance(event, BatchServiceJobQueueBlocked) or not reason.startswith(MAX_RESOURCE_REASON):
        metrics.add_metric(name="EventsIgnored", unit=MetricUnit.Count, value=1)
        logger.info("event not for the capacity function", extra={"event_id": event.id})
        return
    if environment is None:
        metrics.add_metric(name="EventsIgnored", unit=MetricUnit.Count, value=1)
        logger.info("job queue not managed", extra={"event_id": event.id, "job_queue": queue})
        return
    metrics.add_metric(name="EventsProcessed", unit=MetricUnit.Count, value=1)
    if environment in _ran_this_invocation:
        return  # this batch already ran it: the run listed every RUNNABLE job, this one included
    _ran_this_invocation.add(environment)
    report = _run(
        event.time,
        "queue-blocked",
        environments=[environment],
        blocked={queue: [event.detail.jobArn]} if queue else {},
    )
    if report.errors:
        raise RuntimeError(report.errors[0])


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(
    event: dict[str, Any], context: LambdaContext
) -> PartialItemFailureResponse | dict[str, Any]:
    """SQS batch → ``{"batchItemFailures": [...]}``; schedule event → a run summary.

    Raises:
        ValueError: a schedule event without a usable ``time``.
    """
    _ran_this_invocation.clear()
    if isinstance(event, dict) and "Records" in event:
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    report = _run(scheduled_time(event), "schedule")
    return {
        "time": report.now.isoformat(),
        "service_environments": len(report.outcomes),
        "updated": [o.name for o in report.outcomes if o.updated],
        "errors": report.errors,
    }
