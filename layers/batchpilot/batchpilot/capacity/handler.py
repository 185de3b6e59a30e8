"""The capacity function's invocations: schedule events and ``Queue Blocked`` SQS batches to runs.

- :func:`run_schedule`: one run of every managed environment at the scheduled time; returns the
  run's summary.
- :class:`CapacityProcessor`: the shared processor shape
  (:class:`batchpilot.shared.processing.SqsProcessor`) for ``CapacityQueue``. ``_prepare`` starts
  each batch with :meth:`~batchpilot.capacity.service.CapacityService.blocked_batch` (no
  environment run in it yet); each record's body goes to its
  :meth:`~batchpilot.capacity.service.BlockedBatch.record` (decoded, screened, its environment run
  at most once per batch: the first run lists every RUNNABLE job, the later records' jobs
  included), and the record handler logs and counts what that returns.

Here only logging and counting happen (:func:`log_run`,
:func:`~batchpilot.shared.observability.count_outcome`); the runs are
:class:`~batchpilot.capacity.service.CapacityService`'s.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from batchpilot.capacity.service import BlockedBatch, CapacityService, RunReport
from batchpilot.capacity.settings import CapacitySettings
from batchpilot.shared.observability import count, count_outcome, log_field, logger
from batchpilot.shared.processing import SqsProcessor
from batchpilot.shared.records import Outcome

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


class CapacityProcessor(SqsProcessor):
    """SQS batch processor of ``CapacityQueue`` (``Batch Service Job Queue Blocked`` events).

    Args:
        service: the run wiring, built once per Lambda instance.

    Malformed and unrelated records (other detail-types, other reasons than
    ``SERVICE_ENVIRONMENT_MAX_RESOURCE``, unmanaged queues) are counted (``InvalidEvents`` /
    ``EventsIgnored``) and logged, never retried; a relevant one counts ``EventsProcessed``.
    """

    def __init__(self, service: CapacityService) -> None:
        super().__init__()
        self.service = service
        self._batch: BlockedBatch = service.blocked_batch()

    def _prepare(self) -> None:
        """Start of a batch: no environment has run in it yet."""
        super()._prepare()
        self._batch = self.service.blocked_batch()

    def process_record(self, record: SQSRecord) -> None:
        """One ``Batch Service Job Queue Blocked`` event: a run for its queue's environment at the
        event's ``time``, unless this batch already ran that environment.

        Everything it causes (log lines, gauges, UpdateServiceEnvironment, own events) is under the
        record's ``messageId`` (its scope).

        Raises:
            RuntimeError: the run failed (its first error), so that only this record is retried;
                not when every failure is permanent (:mod:`batchpilot.shared.errors`): the record
                is then ``invalid`` and ``permanent`` (``InvalidEvents``, ``PermanentErrors``).
        """
        result = self._batch.record(record.body)
        if result.report is not None:
            log_run(result.report, self.service.settings)
        if result.rejected is not None:
            count_outcome(result.rejected, job_queue=result.job_queue)  # None: not logged
            return
        blocked = result.blocked
        if result.skipped is not None and blocked is not None:
            count_outcome(
                Outcome.PROCESSED,
                result.skipped.value,
                event_id=blocked.event_id,
                service_environment=blocked.environment,
            )
            return
        if result.report is not None and result.report.errors:
            raise RuntimeError(result.report.errors[0])
        count_outcome(Outcome.PROCESSED)
