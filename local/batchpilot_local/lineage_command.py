"""``batchpilot lineage JOB_ARN_OR_NAME``: a job's lineage, as the recovery function recorded it.

Reads, with the caller's own AWS credentials (``--profile``, ``--region``, else the usual boto3
chain): the lineage record in batchpilot's state table (DynamoDB GetItem: the pointer item
``recovery#job#<arn>`` a resubmitted job has, else the lineage the job itself starts), then where
the newest job of the lineage stands now (Batch DescribeJobs / DescribeServiceJob, SageMaker
DescribeTrainingJob). A job name is found by ListJobs / ListServiceJobs with a ``JOB_NAME`` filter
on each job queue (DescribeJobQueues), else DescribeTrainingJob. The table is ``--table``, else
the ``StateTableName`` output of the CloudFormation stack ``--stack`` (default ``batchpilot``).

``--format text`` (the default) prints the lineage for a person; ``--format json`` prints one JSON
object (:func:`lineage_json`: every attempt with its state, category, reason, checkpoint and times,
and where the newest job stands now) for scripts.

Exit status: 0 printed; 1 the job has no lineage (recovery never resubmitted it) or cannot be
found, one line on stderr saying so; 2 usage errors.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

# boto3, botocore and the store are imported when the command runs, not when the CLI builds its
# parser: ``batchpilot --help`` stays instant (tests/unit/test_cli_startup.py).
if TYPE_CHECKING:
    from batchpilot.recovery.lineage import Lineage, LineageRef

__all__ = ["EXIT_NOT_FOUND", "add_parser", "lineage_json", "run_lineage"]

EXIT_NOT_FOUND = 1
"""The job has no lineage, or no job has that name."""
_STATUS_FIELDS = ("status", "TrainingJobStatus")


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add the ``lineage`` subcommand to ``commands`` (argparse's subparsers)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "lineage",
        help="print a job's lineage: every attempt, why it was resubmitted, where it runs now",
        description=(
            "Print the lineage of a job recovery resubmitted (or of its successor): every attempt, "
            "why it was resubmitted, its checkpoint, and where the newest job runs now. Uses your "
            "own AWS credentials."
        ),
    )
    parser.add_argument("job", metavar="JOB_ARN_OR_NAME", help="job ARN, Batch job name or training job name")
    parser.add_argument("--region", default=None, help="AWS region (default: your profile's)")
    parser.add_argument("--profile", default=None, help="AWS profile (default: the boto3 credential chain)")
    parser.add_argument(
        "--table", default=None, help="state table name (default: the stack's StateTableName)"
    )
    parser.add_argument("--stack", default="batchpilot", help="CloudFormation stack (default: batchpilot)")
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text for a person (default), or one JSON object for scripts",
    )
    return parser


class _NotFound(Exception):
    """What the one line on stderr says."""


def _queues(batch: Any) -> Iterator[str]:
    for page in batch.get_paginator("describe_job_queues").paginate():
        for queue in page.get("jobQueues") or []:
            yield str(queue["jobQueueArn"])


def _arn_of(name: str, batch: Any, sagemaker: Any) -> str:
    """The ARN of the job called ``name`` (the newest, when several share it)."""
    from botocore.exceptions import ClientError

    found: list[tuple[int, str]] = []
    for queue in _queues(batch):
        by_name = [{"name": "JOB_NAME", "values": [name]}]
        for item in batch.list_jobs(jobQueue=queue, filters=by_name).get("jobSummaryList") or []:
            found.append((int(item.get("createdAt") or 0), str(item["jobArn"])))
        try:
            listed = batch.list_service_jobs(jobQueue=queue, filters=by_name).get("jobSummaryList") or []
        except ClientError:  # a container-only queue
            listed = []
        for item in listed:
            found.append((int(item.get("createdAt") or 0), str(item["jobArn"])))
    if found:
        return max(found)[1]
    try:
        return str(sagemaker.describe_training_job(TrainingJobName=name)["TrainingJobArn"])
    except ClientError:
        raise _NotFound(f"no job named {name} in Batch or SageMaker") from None


def _table(args: argparse.Namespace, session: Any) -> str:
    if args.table:
        return str(args.table)
    stacks = session.client("cloudformation").describe_stacks(StackName=args.stack)["Stacks"]
    for output in stacks[0].get("Outputs") or []:
        if output.get("OutputKey") == "StateTableName":
            return str(output["OutputValue"])
    raise _NotFound(f"stack {args.stack} has no StateTableName output; pass --table")


_UNKNOWN = "unknown (AWS no longer describes it)"


def _now(arn: str, batch: Any, sagemaker: Any) -> str | None:
    """``RUNNING`` (or the status AWS reports: Batch DescribeJobs / DescribeServiceJob ``status``,
    SageMaker DescribeTrainingJob ``TrainingJobStatus``) of the job ``arn``; None when AWS no longer
    describes it."""
    from batchpilot.shared.arns import resource_name
    from botocore.exceptions import ClientError

    try:
        if ":training-job/" in arn:
            described = sagemaker.describe_training_job(TrainingJobName=resource_name(arn))
        elif ":service-job/" in arn:
            described = batch.describe_service_job(jobId=resource_name(arn))
        else:
            jobs = batch.describe_jobs(jobs=[resource_name(arn)]).get("jobs") or []
            described = jobs[0] if jobs else {}
    except ClientError:
        return None
    for key in _STATUS_FIELDS:
        if described.get(key):
            return str(described[key])
    return None


def _newest(lineage: Lineage) -> str:
    """The ARN of the lineage's newest submitted job (the original when none was submitted)."""
    attempts = sorted(lineage.attempts.values(), key=lambda a: -a.attempt)
    return next((a.new_job_arn for a in attempts if a.new_job_arn), lineage.original_job_arn)


def _time(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value is not None else None


def lineage_json(lineage: Lineage, asked: LineageRef, now: str | None) -> dict[str, Any]:
    """The lineage as ``batchpilot lineage --format json`` prints it.

    Shape: ``lineage_id``; ``job_kind`` (``service-job``, ``container-job``, ...); ``job_queue``
    (ARN or null); ``original`` (``job_name``, ``job_arn``, ``first_started_at``); ``attempts``, in
    order, each with ``attempt`` (1 for the first resubmission), ``state`` (``SUBMITTING``,
    ``SUBMITTED``, ``FAILED``, ``DRY_RUN``), ``job_name`` and ``job_arn`` of the new job (null until
    AWS accepted it), ``failed_job_arn``, ``category``, ``reason`` (AWS's text, at most 500
    characters), ``checkpoint`` (``uri``, ``object``, ``time``, ``age_seconds``; null when the
    attempt restarts from step 0), ``restarts_from_step_zero``, ``lost_instance_hours``
    (instance-hours), ``decided_at``, ``error_code``; ``newest`` (``job_arn``, ``status`` as AWS
    reports it now, null when AWS no longer describes the job); ``asked_attempt`` (which attempt
    the job asked about was: 0 for the original). Times are ISO 8601 UTC to the second.
    """
    attempts = []
    for a in sorted(lineage.attempts.values(), key=lambda a: a.attempt):
        checkpoint = None
        if not a.restarts_from_step_zero and (a.checkpoint_uri or a.checkpoint_object):
            checkpoint = {
                "uri": a.checkpoint_uri,
                "object": a.checkpoint_object,
                "time": _time(a.checkpoint_time),
                "age_seconds": a.checkpoint_age_seconds,
            }
        attempts.append(
            {
                "attempt": a.attempt,
                "state": a.state.value,
                "job_name": a.new_job_name,
                "job_arn": a.new_job_arn,
                "failed_job_arn": a.failed_job_arn,
                "category": a.category.value,
                "reason": a.reason,
                "checkpoint": checkpoint,
                "restarts_from_step_zero": a.restarts_from_step_zero,
                "lost_instance_hours": a.lost_instance_hours,
                "decided_at": _time(a.decided_at),
                "error_code": a.error_code,
            }
        )
    return {
        "lineage_id": lineage.lineage_id,
        "job_kind": lineage.job_kind.value,
        "job_queue": lineage.job_queue,
        "original": {
            "job_name": lineage.original_job_name,
            "job_arn": lineage.original_job_arn,
            "first_started_at": _time(lineage.first_started_at),
        },
        "attempts": attempts,
        "newest": {"job_arn": _newest(lineage), "status": now},
        "asked_attempt": asked.attempt,
    }


def _lines(lineage: Lineage, asked: LineageRef, now: str | None) -> list[str]:
    attempts = sorted(lineage.attempts.values(), key=lambda a: a.attempt)
    lines = [
        f"lineage {lineage.lineage_id}: {lineage.job_kind.value}, {len(attempts)} resubmission(s)",
        f"  0  original   {lineage.original_job_name}  {lineage.original_job_arn}",
    ]
    if lineage.first_started_at:
        lines[-1] += f"  first started {lineage.first_started_at.isoformat(timespec='seconds')}"
    for a in attempts:
        checkpoint = "from step 0 (no checkpoint)" if a.restarts_from_step_zero else (a.checkpoint_uri or "-")
        if a.checkpoint_object:
            checkpoint = a.checkpoint_object
        if a.checkpoint_time and not a.restarts_from_step_zero:
            checkpoint += f" ({a.checkpoint_time.isoformat(timespec='seconds')})"
        new_arn = a.new_job_arn or "(not submitted)"
        lines += [
            f"  {a.attempt}  {a.state.value.lower():<10} {a.new_job_name}  {new_arn}",
            f"     why: {a.category.value}: {(a.reason or '').splitlines()[0][:160] if a.reason else '-'}",
            f"     failed job: {a.failed_job_arn}",
            f"     checkpoint: {checkpoint}",
            f"     decided {a.decided_at.isoformat(timespec='seconds')}",
        ]
    lines.append(f"now: {_newest(lineage)} is {now or _UNKNOWN}")
    if asked.attempt:
        lines.append(f"(you asked about attempt {asked.attempt} of this lineage)")
    return lines


def run_lineage(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """Print the lineage of ``args.job``; returns the exit status (see the module docstring)."""
    import boto3
    from batchpilot.io.dynamodb.lineage import DynamoLineageStore
    from batchpilot.recovery.lineage import LineageRef
    from batchpilot.recovery.naming import lineage_id_for
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        session = boto3.Session(profile_name=args.profile, region_name=args.region)
        batch, sagemaker = session.client("batch"), session.client("sagemaker")
        arn = args.job if str(args.job).startswith("arn:") else _arn_of(args.job, batch, sagemaker)
        store = DynamoLineageStore(session.client("dynamodb"), _table(args, session))
        ref = store.find_job(arn) or LineageRef(lineage_id_for(arn), 0)
        lineage = store.load(ref.lineage_id)
        if lineage is None:
            raise _NotFound(f"{args.job} has no lineage: recovery never resubmitted it")
        now = _now(_newest(lineage), batch, sagemaker)
        if args.format == "json":
            stdout.write(json.dumps(lineage_json(lineage, ref, now), ensure_ascii=False) + "\n")
        else:
            for line in _lines(lineage, ref, now):
                stdout.write(line + "\n")
        return 0
    except _NotFound as exc:
        stderr.write(f"batchpilot lineage: {exc}\n")
        return EXIT_NOT_FOUND
    except (ClientError, BotoCoreError) as exc:
        stderr.write(f"batchpilot lineage: AWS error: {exc}\n")
        return EXIT_NOT_FOUND
