"""``batchpilot lineage JOB_ARN_OR_NAME``: a job's lineage, as the recovery function recorded it.

Reads, with the caller's own AWS credentials (``--profile``, ``--region``, else the usual boto3
chain): the lineage record in batchpilot's state table (DynamoDB GetItem: the pointer item
``recovery#job#<arn>`` a resubmitted job has, else the lineage the job itself starts), then where
the newest job of the lineage stands now (Batch DescribeJobs / DescribeServiceJob, SageMaker
DescribeTrainingJob). A job name is found by ListJobs / ListServiceJobs with a ``JOB_NAME`` filter
on each job queue (DescribeJobQueues), else DescribeTrainingJob. The table is ``--table``, else
the ``StateTableName`` output of the CloudFormation stack ``--stack`` (default ``batchpilot``).

Exit status: 0 printed; 1 the job has no lineage (recovery never resubmitted it) or cannot be
found, one line on stderr saying so; 2 usage errors.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any, TextIO

import boto3
from batchpilot.io.dynamodb.lineage import DynamoLineageStore
from batchpilot.recovery.lineage import Lineage, LineageRef
from batchpilot.recovery.naming import lineage_id_for
from batchpilot.shared.arns import resource_name
from botocore.exceptions import BotoCoreError, ClientError

__all__ = ["EXIT_NOT_FOUND", "add_parser", "run_lineage"]

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
    return parser


class _NotFound(Exception):
    """What the one line on stderr says."""


def _queues(batch: Any) -> Iterator[str]:
    for page in batch.get_paginator("describe_job_queues").paginate():
        for queue in page.get("jobQueues") or []:
            yield str(queue["jobQueueArn"])


def _arn_of(name: str, batch: Any, sagemaker: Any) -> str:
    """The ARN of the job called ``name`` (the newest, when several share it)."""
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


def _now(arn: str, batch: Any, sagemaker: Any) -> str:
    """``RUNNING`` (or the status AWS reports) of the job ``arn``; ``unknown`` when AWS no longer
    describes it."""
    try:
        if ":training-job/" in arn:
            described = sagemaker.describe_training_job(TrainingJobName=resource_name(arn))
        elif ":service-job/" in arn:
            described = batch.describe_service_job(jobId=resource_name(arn))
        else:
            jobs = batch.describe_jobs(jobs=[resource_name(arn)]).get("jobs") or []
            described = jobs[0] if jobs else {}
    except ClientError:
        return "unknown (AWS no longer describes it)"
    for key in _STATUS_FIELDS:
        if described.get(key):
            return str(described[key])
    return "unknown (AWS no longer describes it)"


def _lines(lineage: Lineage, asked: LineageRef, now: str) -> list[str]:
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
    newest = next((a.new_job_arn for a in reversed(attempts) if a.new_job_arn), lineage.original_job_arn)
    lines.append(f"now: {newest} is {now}")
    if asked.attempt:
        lines.append(f"(you asked about attempt {asked.attempt} of this lineage)")
    return lines


def run_lineage(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """Print the lineage of ``args.job``; returns the exit status (see the module docstring)."""
    try:
        session = boto3.Session(profile_name=args.profile, region_name=args.region)
        batch, sagemaker = session.client("batch"), session.client("sagemaker")
        arn = args.job if str(args.job).startswith("arn:") else _arn_of(args.job, batch, sagemaker)
        store = DynamoLineageStore(session.client("dynamodb"), _table(args, session))
        ref = store.find_job(arn) or LineageRef(lineage_id_for(arn), 0)
        lineage = store.load(ref.lineage_id)
        if lineage is None:
            raise _NotFound(f"{args.job} has no lineage: recovery never resubmitted it")
        newest = next(
            (
                a.new_job_arn
                for a in sorted(lineage.attempts.values(), key=lambda a: -a.attempt)
                if a.new_job_arn
            ),
            lineage.original_job_arn,
        )
        for line in _lines(lineage, ref, _now(newest, batch, sagemaker)):
            stdout.write(line + "\n")
        return 0
    except _NotFound as exc:
        stderr.write(f"batchpilot lineage: {exc}\n")
        return EXIT_NOT_FOUND
    except (ClientError, BotoCoreError) as exc:
        stderr.write(f"batchpilot lineage: AWS error: {exc}\n")
        return EXIT_NOT_FOUND
