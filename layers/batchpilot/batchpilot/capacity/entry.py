"""The capacity function's entry logic: schedule events and ``Queue Blocked`` SQS records to runs.

The handler (``functions/capacity/app.py``) builds the clients and the :class:`CapacityEntry` at
cold start, and makes one call per record (:meth:`CapacityEntry.handle_record`) or per schedule
invocation (:meth:`CapacityEntry.run_schedule`). Logs and counters go to
:mod:`batchpilot.shared.observability`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from batchpilot.capacity.model import MAX_RESOURCE_REASON
from batchpilot.capacity.service import CapacityService, RunReport, published
from batchpilot.capacity.settings import CapacitySettings
from batchpilot.io.emf import EmfPublisher
from batchpilot.metrics.service import decode_record
from batchpilot.shared.classification import queue_name
from batchpilot.shared.events import (
    BatchServiceJobQueueBlocked,
    InvalidEventError,
    UnsupportedEventError,
    to_datetime,
)
from batchpilot.shared.metrics import metric_timestamp
from batchpilot.shared.observability import logger, metrics

__all__ = ["CapacityEntry", "log_run", "scheduled_time"]


def scheduled_time(event: Any) -> datetime:
    """The run's "now": the event's ``time`` (the schedule's scheduled time), aware UTC.

    Args:
        event: the invocation's event; a ``dict`` with an ISO-8601 ``time`` string is expected.

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


def log_run(report: RunReport, trigger: str, settings: CapacitySettings) -> None:
    """Log a run's decisions, conflicts and errors, and count it.

    One ``capacity decision`` INFO line per capacity unit decided (``trigger`` is ``"schedule"`` or
    ``"queue-blocked"``), a WARNING per state conflict, an ERROR per failed environment; then the
    counters ``CapacityRuns`` (1), ``CapacityAdjustedEvents``, ``CapacityLimitedEvents`` and
    ``CapacityErrors`` (all ``Count``). ``settings`` gives ``dry_run`` and ``describe_budget``
    for the log lines. Raises nothing of its own.
    """
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


class CapacityEntry:
    """One Lambda instance's entry point into capacity runs.

    Args:
        settings: the validated cold-start settings.
        service: returns the run wiring (called at each run, so it may build it lazily).
        publisher: where each run's EMF gauges go.

    Holds which service environments already ran in the current invocation (see
    :meth:`start_invocation`): a batch of records runs each environment at most once.
    """

    def __init__(
        self,
        settings: CapacitySettings,
        service: Callable[[], CapacityService],
        publisher: EmfPublisher,
    ) -> None:
        self.settings = settings
        self.service = service
        self.publisher = publisher
        self.ran_this_invocation: set[str] = set()

    def start_invocation(self) -> None:
        """Forget the environments run by the previous invocation (call once per invocation)."""
        self.ran_this_invocation.clear()

    def run(self, now: datetime, trigger: str, **kwargs: Any) -> RunReport:
        """One run at ``now`` (aware UTC): gauges published, decisions logged and counted.

        ``kwargs`` go to :meth:`CapacityService.run` (``environments``, ``blocked``). Errors of a
        service environment are in the report, not raised; whatever the service or the publisher
        raises otherwise propagates.
        """
        report = self.service().run(now, timestamp=metric_timestamp(now, datetime.now(UTC)), **kwargs)
        self.publisher.publish(report.gauges)
        log_run(report, trigger, self.settings)
        return report

    def run_schedule(self, event: Any) -> dict[str, Any]:
        """A schedule event → a run of every managed environment at the event's ``time``.

        Returns:
            ``{"time": ISO-8601 str, "service_environments": int, "updated": [names],
            "errors": [str]}``.

        Raises:
            ValueError: the event has no usable ``time`` (see :func:`scheduled_time`).
        """
        report = self.run(scheduled_time(event), "schedule")
        return {
            "time": report.now.isoformat(),
            "service_environments": len(report.outcomes),
            "updated": [o.name for o in report.outcomes if o.updated],
            "errors": report.errors,
        }

    def handle_record(self, body: str) -> None:
        """One ``Batch Service Job Queue Blocked`` event (an SQS body): a run for its queue's
        environment, at the event's ``time``, once per invocation per environment.

        Malformed and unrelated events (other detail-types, other reasons than
        ``MAX_RESOURCE_REASON``, unmanaged queues) are logged and counted (``EventsIgnored`` /
        ``InvalidEvents``), never raised; a relevant one counts ``EventsProcessed``.

        Raises:
            RuntimeError: the run failed (its first error), so that only this record is retried.
        """
        try:
            event = decode_record(body)
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
        environment = self.settings.policy.environment_of(queue) if queue else None
        if not isinstance(event, BatchServiceJobQueueBlocked) or not reason.startswith(MAX_RESOURCE_REASON):
            metrics.add_metric(name="EventsIgnored", unit=MetricUnit.Count, value=1)
            logger.info("event not for the capacity function", extra={"event_id": event.id})
            return
        if environment is None:
            metrics.add_metric(name="EventsIgnored", unit=MetricUnit.Count, value=1)
            logger.info("job queue not managed", extra={"event_id": event.id, "job_queue": queue})
            return
        metrics.add_metric(name="EventsProcessed", unit=MetricUnit.Count, value=1)
        if environment in self.ran_this_invocation:
            return  # this batch already ran it: the run listed every RUNNABLE job, this one included
        self.ran_this_invocation.add(environment)
        report = self.run(
            event.time,
            "queue-blocked",
            environments=[environment],
            blocked={queue: [event.detail.jobArn]} if queue else {},
        )
        if report.errors:
            raise RuntimeError(report.errors[0])
