"""The capacity function's invocations: schedule events and ``Queue Blocked`` SQS batches to runs.

- :func:`run_schedule`: one run of every managed environment at the scheduled time; returns the
  run's summary.
- :class:`CapacityProcessor`: a Powertools ``BatchProcessor`` (SQS, partial batch responses) for
  ``CapacityQueue``. Each record is decoded (:func:`batchpilot.shared.records.decode`) and screened
  (:func:`batchpilot.capacity.service.blocked_run`); a relevant one runs its environment at once,
  at most once per environment per batch (``_prepare`` starts each batch with none run: the first
  run lists every RUNNABLE job, the later records' jobs included).

Here only logging and counting happen (:func:`log_run`,
:func:`~batchpilot.shared.observability.count_outcome`); the runs are
:class:`~batchpilot.capacity.service.CapacityService`'s.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from batchpilot.capacity.service import CapacityService, RunReport, blocked_run
from batchpilot.capacity.settings import CapacitySettings
from batchpilot.shared.arns import resource_name
from batchpilot.shared.observability import count, count_outcome, log_field, logger, record_scope
from batchpilot.shared.records import Outcome, Rejected, decode

__all__ = ["CapacityProcessor", "log_run", "run_schedule"]


def log_run(report: RunReport, settings: CapacitySettings) -> None:
    """Log a run's decisions, conflicts and errors, and count it.

    One ``capacity sample`` INFO line per job queue sampled (RUNNABLE jobs and instances, the
    oldest RUNNABLE job's age in seconds, instances in use, blocked jobs), one ``capacity
    decision`` INFO line per capacity unit decided (with the run's ``trigger``), a
    WARNING per state conflict, an ERROR per failed environment; then the counters
    ``CapacityRuns`` (1), ``CapacityAdjustedEvents``, ``CapacityLimitedEvents`` and
    ``CapacityErrors`` (all ``Count``). ``settings`` gives ``dry_run`` and ``describe_budget`` for
    the log lines. Raises nothing of its own.
    """
    for sample in report.samples:
        # What the run saw of each queue: structured log fields, not gauges (the job ledger
        # publishes the fleet's gauges; a second series of the same figures would be billed twice).
        logger.info(
            "capacity sample",
            extra={
                "trigger": report.trigger,
                "job_queue": log_field(sample.queue),
                "service_environment": log_field(sample.environment),
                "runnable_jobs": sample.runnable.jobs,
                "runnable_instances": sample.runnable.total_instances,
                "oldest_runnable_seconds": sample.runnable.age_seconds(report.now)
                if sample.runnable.oldest is not None
                else None,
                "instances_in_use": sample.instances_in_use,
                "blocked_jobs": len(sample.blocked),
            },
        )
    for outcome in report.outcomes:
        if outcome.decision is not None:
            for unit in outcome.decision.units:
                logger.info(
                    "capacity decision",
                    extra={
                        "trigger": report.trigger,
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
    adjusted, limited = report.published
    count("CapacityRuns")
    count("CapacityAdjustedEvents", adjusted)
    count("CapacityLimitedEvents", limited)
    count("CapacityErrors", len(report.errors))
    if report.unknown_demand:
        logger.info(
            "RUNNABLE jobs whose payload is not read yet count as 1 instance",
            extra={"jobs": report.unknown_demand, "describe_budget": settings.describe_budget},
        )


def run_schedule(service: CapacityService, event: Any) -> dict[str, Any]:
    """A schedule event → a run of every managed environment at the event's ``time``, logged and
    counted.

    Returns:
        :meth:`RunReport.summary`: ``{"time", "service_environments", "updated", "errors"}``.

    Raises:
        ValueError: the event has no usable ``time``.
    """
    report = service.run_schedule(event)
    log_run(report, service.settings)
    return report.summary()


class CapacityProcessor(BatchProcessor):
    """SQS batch processor of ``CapacityQueue`` (``Batch Service Job Queue Blocked`` events).

    Args:
        service: the run wiring, built once per Lambda instance.

    Malformed and unrelated records (other detail-types, other reasons than
    ``SERVICE_ENVIRONMENT_MAX_RESOURCE``, unmanaged queues) are counted (``InvalidEvents`` /
    ``EventsIgnored``) and logged, never retried; a relevant one counts ``EventsProcessed``.
    """

    def __init__(self, service: CapacityService) -> None:
        super().__init__(event_type=EventType.SQS)
        self.service = service
        self._ran: set[str] = set()

    def _prepare(self) -> None:
        """Start of a batch: no environment has run in it yet."""
        super()._prepare()  # type: ignore[no-untyped-call]  # Powertools leaves it unannotated
        self._ran = set()

    def record_handler(self, record: SQSRecord, lambda_context: LambdaContext | None = None) -> None:
        """One ``Batch Service Job Queue Blocked`` event: a run for its queue's environment at the
        event's ``time``, unless this batch already ran that environment.

        Everything it causes (log lines, gauges, UpdateServiceEnvironment, own events) is under the
        record's ``messageId`` (its scope).

        Raises:
            RuntimeError: the run failed (its first error), so that only this record is retried;
                not when every failure is permanent (:mod:`batchpilot.shared.errors`): the record
                is then ``invalid`` and ``permanent`` (``InvalidEvents``, ``PermanentErrors``).
        """
        with record_scope(record.message_id):
            self._handle(record)

    def _handle(self, record: SQSRecord) -> None:
        event = decode(record.body)
        if isinstance(event, Rejected):
            count_outcome(event)
            return
        blocked = blocked_run(event, self.service.settings.policy)
        if isinstance(blocked, Rejected):
            count_outcome(blocked, job_queue=resource_name(getattr(event.detail, "jobQueue", None)))
            return
        if blocked.environment in self._ran:
            # The batch's run of this environment listed every RUNNABLE job, this one included.
            count_outcome(
                Outcome.PROCESSED,
                "service environment already run in this batch",
                event_id=blocked.event_id,
                service_environment=blocked.environment,
            )
            return
        self._ran.add(blocked.environment)
        report = self.service.run_blocked(blocked)
        if report is None:
            count_outcome(
                Outcome.PROCESSED,
                "service environment already woken this minute",
                event_id=blocked.event_id,
                service_environment=blocked.environment,
            )
            return
        log_run(report, self.service.settings)
        if report.errors and report.only_permanent_errors:
            # AWS would refuse the same requests again: reported and counted, not retried.
            error = report.errors[0]
            count_outcome(
                Rejected(Outcome.INVALID, blocked.event_id, event.detail_type, error, permanent=True)
            )
            return
        if report.errors:
            raise RuntimeError(report.errors[0])
        count_outcome(Outcome.PROCESSED)
