"""The cost model behind ``benchmarks/bench_cost.py``: a synthetic fleet, its replay, and what the
replay emitted and called turned into a month of AWS charges (docs/cost.md).

- :class:`Fleet`, :func:`fleet_world`, :func:`replay_items`: the fleet's day of job events (container
  and service jobs walking SUBMITTED to SUCCEEDED, one in 20 FAILED with a sample's reason, one in 25
  preempted or retried once) and the ledger's schedule ticking once an hour (a clock scenario of one
  tick, the jobs in flight at that moment as AWS Batch lists them);
- :func:`replay`: the template with its default parameters through
  :class:`~batchpilot_local.replay.Replayer` (SQS batches as Lambda forms them), counted in a
  :class:`Tally`: metric series and the hours they are published in, Lambda invocations (the
  replay's ``on_invocation`` hook), every API call (:class:`CostObserver`, through
  :func:`~batchpilot_local.embedded_aws.observing`) and DynamoDB request units;
- :func:`series_table`, :func:`month`: a month at the list prices of :data:`PRICES`;
- :func:`render`: docs/cost.md's generated section from ``benchmarks/cost.json``.
"""

from __future__ import annotations

import copy
import functools
import math
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from batchpilot_local.testing.paths import ROOT
from batchpilot_local.testing.samples import sample
from batchpilot_local.testing.sections import read_section, write_section

SeriesKey = tuple[str, tuple[tuple[str, str], ...]]
Schema = tuple[str, tuple[str, ...]]

RESULTS_JSON = ROOT / "benchmarks" / "cost.json"
"""What ``benchmarks/bench_cost.py`` measured (the table of docs/cost.md is rendered from it)."""
DOC = ROOT / "docs" / "cost.md"
SECTION = "cost"
"""The key of docs/cost.md's generated section (:mod:`batchpilot_local.testing.sections`)."""

HOURS_PER_MONTH = 730  # AWS's month for per-hour proration (CloudWatch, Lambda, ...)
DAYS_PER_MONTH = HOURS_PER_MONTH / 24
TICKS_PER_MONTH = HOURS_PER_MONTH * 60  # rate(1 minute)

PRICES_DATE = "2026-12-02"
"""The date of the list prices below (AWS's public pricing pages, us-east-1, no free tier unless
a line says so)."""
PRICES: dict[str, dict[str, Any]] = {
    "cloudwatch_metrics": {"unit": "metric-month", "price": 0.30, "note": "first 10,000 metrics"},
    "cloudwatch_dashboards": {"unit": "dashboard-month", "price": 3.00, "free": 3},
    "cloudwatch_alarms": {"unit": "alarm metric-month", "price": 0.10, "note": "standard resolution"},
    "cloudwatch_logs": {"unit": "GB ingested", "price": 0.50},
    "lambda_requests": {"unit": "million requests", "price": 0.20},
    "lambda_compute": {"unit": "GB-second", "price": 0.0000133334, "note": "arm64 (template.yaml)"},
    "dynamodb_writes": {"unit": "million write request units", "price": 0.625, "note": "on-demand"},
    "dynamodb_reads": {"unit": "million read request units", "price": 0.125, "note": "on-demand"},
    "sqs_requests": {"unit": "million requests", "price": 0.40, "note": "standard queues, 64 KB chunks"},
    "sns_publishes": {"unit": "million requests", "price": 0.50, "note": "64 KB chunks"},
    "eventbridge_custom": {"unit": "million events", "price": 1.00, "note": "own events (PutEvents)"},
    "scheduler": {"unit": "million invocations", "price": 1.00, "free_millions": 14},
    "kms_keys": {"unit": "key-month", "price": 1.00, "note": "the on-call topics' key"},
    "kms_requests": {"unit": "million requests", "price": 3.00, "note": "one per SNS publish, at most"},
}

IDLE_POLLERS = 5  # Lambda's SQS event source mapping: five long-polling connections at rest
LONG_POLL_S = 20  # each ReceiveMessage waits up to 20 s
PLATFORM_LOG_BYTES = 600  # Lambda's START, END and REPORT lines (JSON log format), per invocation
EVERY_HOUR = frozenset({"ColdStart"})
"""Series counted in every hour whatever the replay saw: Powertools' ``ColdStart`` is published at
each cold start, and Lambda starts new execution environments all day (the replay starts each
function once)."""
FLEET_KEYS = frozenset({"JobQueue", "ShareIdentifier", "QuotaShare", "ServiceEnvironment"})
"""Dimension keys whose values grow with the fleet (queues, shares, environments)."""

ACCOUNT = "111122223333"
REGION = "us-east-1"
STATUSES = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING")
FAILING_EVERY = 20  # one job in 20 (5 %) ends FAILED
PREEMPTED_EVERY = 25  # one job in 25 (4 %) is preempted (service) or retried (container) once
FAILURES = {
    "service-job": ("failed-algorithm-error", "failed-sagemaker-capacity", "failed-internal-server-error"),
    "batch-job": ("failed-application-error", "failed-out-of-memory", "failed-spot-reclaim"),
}


# ---------------------------------------------------------------------------------- the fleet
@dataclass(frozen=True)
class Fleet:
    """A fleet: ``queues`` job queues (even ones service queues, each on one of ``environments``
    service environments; odd ones container queues), ``shares`` share identifiers spread evenly
    over the queues (fair-share), ``jobs`` jobs a day."""

    name: str
    queues: int
    shares: int
    environments: int
    jobs: int

    def queue(self, q: int) -> str:
        return f"{'sm' if q % 2 == 0 else 'ec2'}-queue-{q:03d}"

    def shares_of(self, q: int) -> list[str]:
        """The share identifiers of queue ``q`` (``shares`` over ``queues``, the remainder first)."""
        per, extra = divmod(self.shares, self.queues)
        first = q * per + min(q, extra)
        return [f"team-{s:03d}" for s in range(first, first + per + (1 if q < extra else 0))]

    def environment(self, q: int) -> str:
        return f"sm-env-{(q // 2) % self.environments:03d}"


REFERENCE = Fleet("reference", queues=20, shares=60, environments=10, jobs=2_000)
TEN_X = Fleet("10x", queues=200, shares=600, environments=100, jobs=20_000)


def fleet_world(fleet: Fleet) -> dict[str, Any]:
    """The fleet as the embedded AWS's world: service environments, one fair-share scheduling
    policy per queue (its shares, weights 1 to 3) and the queues."""
    policies, queues = [], []
    for q in range(fleet.queues):
        name = fleet.queue(q)
        policies.append(
            {
                "name": f"{name}-shares",
                "fairsharePolicy": {
                    "shareDecaySeconds": 3600,
                    "computeReservation": 0,
                    "shareDistribution": [
                        {"shareIdentifier": s, "weightFactor": float(1 + i % 3)}
                        for i, s in enumerate(fleet.shares_of(q))
                    ],
                },
            }
        )
        queue: dict[str, Any] = {
            "name": name,
            "scheduling": "FAIR_SHARE",
            "schedulingPolicyArn": f"arn:aws:batch:{REGION}:{ACCOUNT}:scheduling-policy/{name}-shares",
        }
        if q % 2 == 0:
            queue["serviceEnvironment"] = fleet.environment(q)
        else:
            queue |= {"kind": "container", "computeEnvironments": [f"ec2-ce-{q:03d}"]}
        queues.append(queue)
    environments = [
        {"name": f"sm-env-{e:03d}", "capacityLimits": [{"maxCapacity": 16, "capacityUnit": "NUM_INSTANCES"}]}
        for e in range(fleet.environments)
    ]
    return {"service_environments": environments, "scheduling_policies": policies, "job_queues": queues}


@dataclass
class _Job:
    number: int
    kind: str  # batch-job | service-job
    queue: str
    share: str
    steps: list[tuple[float, str]] = field(default_factory=list)  # (seconds from the day's start, status)
    failure: str | None = None

    @property
    def job_id(self) -> str:
        return f"00000000-0000-4000-8000-{self.number:012d}"

    def status_at(self, t: float) -> str | None:
        status = None
        for at, each in self.steps:
            if at > t:
                break
            status = each
        return status


def _jobs(fleet: Fleet, first_s: float, last_s: float) -> list[_Job]:
    """The jobs submitted in ``[first_s, last_s)`` seconds of the day, each with its lifecycle."""
    every = 86_400 / fleet.jobs
    jobs = []
    for n in range(math.ceil(first_s / every), math.ceil(last_s / every)):
        q = n % fleet.queues
        shares = fleet.shares_of(q)
        job = _Job(
            n,
            "service-job" if q % 2 == 0 else "batch-job",
            fleet.queue(q),
            shares[(n // fleet.queues) % len(shares)],
        )
        submitted = n * every
        run_s = 300 + (n * 7919) % 3000  # 5 to 55 minutes
        offsets = (0, 5, 20, 60, 90)
        job.steps = [(submitted + off, status) for off, status in zip(offsets, STATUSES, strict=True)]
        end = submitted + 90 + run_s
        # Counted per queue (k: the job's number in its queue), so every queue has its failures
        # and preemptions, on every share, with every failure reason.
        k = n // fleet.queues
        if (k + 2 * q) % PREEMPTED_EVERY == PREEMPTED_EVERY - 3:
            mid = submitted + 90 + run_s / 2
            job.steps += [(mid, "RUNNABLE"), (mid + 120, "RUNNING")]
            end += 120
        if (k + q) % FAILING_EVERY == FAILING_EVERY - 1:
            options = FAILURES[job.kind]
            job.failure = options[(k // FAILING_EVERY + q) % len(options)]
        job.steps.append((end, "FAILED" if job.failure else "SUCCEEDED"))
        jobs.append(job)
    return jobs


@functools.cache
def _template(name: str) -> dict[str, Any]:
    """A sample event of ``events/``, read once (each use deep-copies it)."""
    return sample(name)


def _event(job: _Job, step: int, start: datetime) -> dict[str, Any]:
    at, status = job.steps[step]
    final = step == len(job.steps) - 1
    retry = status == "RUNNABLE" and step > 2
    if final and job.failure:
        name = f"{job.kind}/{job.failure}"
    elif retry and job.kind == "batch-job":
        name = "batch-job/runnable-retrying-after-spot-reclaim"
    else:
        name = f"{job.kind}/running"
    event = copy.deepcopy(_template(name))
    detail = event["detail"]
    ms = int(start.timestamp() * 1000)
    detail["status"] = status
    detail["jobId"] = job.job_id
    detail["jobName"] = f"cost-job-{job.number:06d}"
    resource = "service-job" if job.kind == "service-job" else "job"
    detail["jobArn"] = f"arn:aws:batch:{REGION}:{ACCOUNT}:{resource}/{job.job_id}"
    detail["jobQueue"] = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/{job.queue}"
    detail["shareIdentifier"] = job.share
    detail["createdAt"] = ms + int(job.steps[0][0] * 1000)
    started = next((t for t, s in job.steps if s == "RUNNING"), None)
    if started is not None and at >= started:
        detail["startedAt"] = ms + int(started * 1000)
    else:
        detail.pop("startedAt", None)
    if final:
        detail["stoppedAt"] = ms + int(at * 1000)
    elif status != "RUNNABLE" or not retry:
        detail.pop("stoppedAt", None)
        if status not in ("RUNNING",):
            detail["attempts"] = []
    if "statusReason" in detail and not (final and job.failure) and not retry:
        detail.pop("statusReason")
    event["resources"] = [detail["jobArn"]]
    event["id"] = f"cost-{job.number:06d}-{step}"
    event["time"] = (start + timedelta(seconds=at)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return event


def _world_job(job: _Job, status: str, start: datetime) -> dict[str, Any]:
    """The job as AWS Batch lists it in ``status`` (for the ledger's reconciliation)."""
    created = (start + timedelta(seconds=job.steps[0][0])).strftime("%Y-%m-%dT%H:%M:%SZ")
    base: dict[str, Any] = {
        "jobId": job.job_id,
        "jobName": f"cost-job-{job.number:06d}",
        "jobQueue": job.queue,
        "status": status,
        "shareIdentifier": job.share,
        "createdAt": created,
    }
    started = next((t for t, s in job.steps if s == "RUNNING"), None)
    if job.kind == "service-job":
        base["jobArn"] = f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/{job.job_id}"
        base["serviceRequestPayload"] = {
            "TrainingJobName": base["jobName"],
            "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
        }
        if status == "RUNNING" and started is not None:
            base["startedAt"] = (start + timedelta(seconds=started)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return base
    base["jobArn"] = f"arn:aws:batch:{REGION}:{ACCOUNT}:job/{job.job_id}"
    base["jobDefinition"] = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-definition/cost-train:1"
    base["createdAt"] = int((start + timedelta(seconds=job.steps[0][0])).timestamp() * 1000)
    return base


def replay_items(
    fleet: Fleet, start: datetime, first_s: float, last_s: float, tick_minute: int = 30
) -> Iterator[Any]:
    """The events of the jobs submitted in ``[first_s, last_s)`` in time order, with a ledger
    tick (a clock scenario of one tick, the jobs in flight as its world) at minute
    ``tick_minute`` of every hour in the range."""
    from batchpilot_local.clock import parse_clock_scenario

    jobs = _jobs(fleet, first_s, last_s)
    timed: list[tuple[float, int, Any]] = []
    for job in jobs:
        for step in range(len(job.steps)):
            timed.append((job.steps[step][0], 0, (job, step)))
    hour = math.floor(first_s / 3600)
    while hour * 3600 < last_s:
        timed.append((hour * 3600 + tick_minute * 60, 1, None))
        hour += 1
    timed.sort(key=lambda entry: (entry[0], entry[1]))
    for at, kind, item in timed:
        if kind == 0:
            job, step = item
            yield _event(job, step, start)
            continue
        world: dict[str, list[dict[str, Any]]] = {"service_jobs": [], "jobs": []}
        for job in jobs:
            status = job.status_at(at)
            if status is None or status in ("SUCCEEDED", "FAILED"):
                continue
            world["service_jobs" if job.kind == "service-job" else "jobs"].append(
                _world_job(job, status, start)
            )
        moment = (start + timedelta(seconds=at)).strftime("%Y-%m-%dT%H:%M:%SZ")
        yield parse_clock_scenario(
            {"schedule": "LedgerSchedule", "ticks": [{"at": moment, "world": world}]}, f"tick {moment}"
        )


# ---------------------------------------------------------------------------------- counting
def item_size(item: Mapping[str, Any]) -> int:
    """Bytes of a DynamoDB item (AttributeValue JSON) by DynamoDB's sizing rules ("Item sizes and
    formats", DynamoDB Developer Guide): names and strings in UTF-8, numbers about one byte per two
    digits plus one, binary its length, booleans and nulls one byte, lists and maps 3 bytes plus
    one per element."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: Any) -> int:
    if not isinstance(value, Mapping) or len(value) != 1:
        return 1
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(str(inner).encode())
    if kind == "N":
        return len(str(inner).lstrip("-").replace(".", "")) // 2 + 1
    if kind == "B":
        return len(inner) if isinstance(inner, bytes | str) else 1
    if kind in ("SS", "NS", "BS"):
        return sum(_value_size({kind[0]: each}) for each in inner)
    if kind == "L":
        return 3 + sum(1 + _value_size(each) for each in inner)
    if kind == "M":
        return 3 + sum(len(k.encode()) + 1 + _value_size(v) for k, v in inner.items())
    return 1


def _read_units(size: int, consistent: bool, transactional: bool = False) -> float:
    units = max(1, math.ceil(size / 4096))
    return units * (2 if transactional else 1 if consistent else 0.5)


def _write_units(size: int, transactional: bool = False) -> float:
    return max(1, math.ceil(size / 1024)) * (2 if transactional else 1)


@dataclass
class Usage:
    """API calls and what they bill: DynamoDB request units, SNS requests, own events."""

    calls: Counter[str] = field(default_factory=Counter)
    rru: float = 0.0
    wru: float = 0.0
    sns_requests: int = 0
    own_events: int = 0

    def add(self, other: Usage) -> None:
        self.calls.update(other.calls)
        self.rru += other.rru
        self.wru += other.wru
        self.sns_requests += other.sns_requests
        self.own_events += other.own_events


@dataclass
class Tally:
    """Everything counted in one replay: event-driven work (SQS batches) apart from the ledger's
    scheduled ticks."""

    events: int = 0
    series_hours: dict[SeriesKey, set[int]] = field(default_factory=lambda: defaultdict(set))
    tick_series: dict[SeriesKey, set[int]] = field(default_factory=lambda: defaultdict(set))
    invocations: Counter[str] = field(default_factory=Counter)
    records: Counter[str] = field(default_factory=Counter)
    receives: Counter[str] = field(default_factory=Counter)
    seconds: Counter[str] = field(default_factory=Counter)
    log_bytes: Counter[str] = field(default_factory=Counter)
    memory_mb: dict[str, int] = field(default_factory=dict)
    ticks: int = 0
    tick_seconds: float = 0.0
    tick_log_bytes: int = 0
    usage: Usage = field(default_factory=Usage)
    tick_usage: Usage = field(default_factory=Usage)
    pending: Usage = field(default_factory=Usage)  # the calls of the invocation running now
    errors: Counter[str] = field(default_factory=Counter)


class CostObserver:
    """An :class:`~batchpilot_local.embedded_aws.ApiObserver`: counts each API call, DynamoDB
    request units (from the request's items, or the item as stored after an update, read with a
    client of its own session that no observer watches), SNS requests and own events."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self._emitters: list[Any] = []
        self._reader: Any = None

    def install(self, emitters: Iterable[Any]) -> None:
        for emitter in emitters:
            if any(emitter is known for known in self._emitters):
                continue
            emitter.register("provide-client-params", self._before, unique_id=f"cost-before-{id(self)}")
            emitter.register("after-call", self._after, unique_id=f"cost-after-{id(self)}")
            self._emitters.append(emitter)

    def uninstall(self) -> None:
        for emitter in self._emitters:
            emitter.unregister("provide-client-params", unique_id=f"cost-before-{id(self)}")
            emitter.unregister("after-call", unique_id=f"cost-after-{id(self)}")
        self._emitters.clear()
        self._reader = None

    def _before(self, params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        context["batchpilot_cost"] = (
            model.service_model.service_name,
            model.name,
            copy.deepcopy(dict(params)),
        )

    def _after(self, parsed: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        call = context.get("batchpilot_cost")
        if call is None:
            return
        service, operation, params = call
        usage = self.tally.pending
        usage.calls[f"{service}:{operation}"] += 1
        if service == "dynamodb":
            reads, writes = self._units(operation, params, parsed)
            usage.rru += reads
            usage.wru += writes
        elif service == "sns" and operation == "Publish":
            usage.sns_requests += max(1, math.ceil(len(str(params.get("Message", ""))) / 65536))
        elif service == "sns" and operation == "PublishBatch":
            usage.sns_requests += len(params.get("PublishBatchRequestEntries") or [])
        elif service == "events" and operation == "PutEvents":
            usage.own_events += len(params.get("Entries") or [])

    def _stored(self, table: str, key: Mapping[str, Any]) -> int:
        if self._reader is None:
            import boto3

            self._reader = boto3.session.Session().client("dynamodb", region_name=REGION)
        item = self._reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item") or {}
        return item_size(item)

    def _units(
        self, operation: str, params: Mapping[str, Any], parsed: Mapping[str, Any]
    ) -> tuple[float, float]:
        consistent = bool(params.get("ConsistentRead"))
        if operation == "GetItem":
            return _read_units(item_size(parsed.get("Item") or {}), consistent), 0.0
        if operation == "BatchGetItem":
            reads = 0.0
            for table, request in (params.get("RequestItems") or {}).items():
                found = (parsed.get("Responses") or {}).get(table) or []
                strong = bool(request.get("ConsistentRead"))
                reads += sum(_read_units(item_size(i), strong) for i in found)
                reads += _read_units(0, strong) * max(0, len(request.get("Keys") or []) - len(found))
            return reads, 0.0
        if operation in ("Query", "Scan"):
            size = sum(item_size(i) for i in parsed.get("Items") or [])
            return _read_units(size, consistent), 0.0
        if operation == "TransactGetItems":
            found = parsed.get("Responses") or []
            return sum(_read_units(item_size(r.get("Item") or {}), True, True) for r in found), 0.0
        if operation == "PutItem":
            return 0.0, _write_units(item_size(params.get("Item") or {}))
        if operation == "UpdateItem":
            return 0.0, _write_units(self._stored(params["TableName"], params["Key"]))
        if operation == "DeleteItem":
            return 0.0, _write_units(0)
        if operation == "BatchWriteItem":
            writes = 0.0
            for requests in (params.get("RequestItems") or {}).values():
                for request in requests:
                    put = (request.get("PutRequest") or {}).get("Item")
                    writes += _write_units(item_size(put) if put else 0)
            return 0.0, writes
        if operation == "TransactWriteItems":
            reads = writes = 0.0
            for entry in params.get("TransactItems") or []:
                if "Put" in entry:
                    writes += _write_units(item_size(entry["Put"]["Item"]), True)
                elif "Update" in entry:
                    update = entry["Update"]
                    writes += _write_units(self._stored(update["TableName"], update["Key"]), True)
                elif "Delete" in entry:
                    writes += _write_units(0, True)
                elif "ConditionCheck" in entry:
                    reads += _read_units(0, True, True)
            return reads, writes
        return 0.0, 0.0


def _series_key(metric: Any) -> SeriesKey:
    return metric.name, tuple(sorted(metric.dimensions.items()))


def _hour_of(stamp: str, start: datetime) -> int:
    """The hour of the (circular) day ``stamp`` (ISO-8601) falls in, counted from ``start``."""
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return int((moment - start).total_seconds() // 3600) % 24


def replay(
    fleet: Fleet,
    start: datetime,
    first_s: float,
    last_s: float,
    *,
    progress: bool = True,
    reports: list[Any] | None = None,
    parameters: Mapping[str, str] | None = None,
    tick_minute: int = 30,
) -> Tally:
    """Replay the fleet's jobs submitted in ``[first_s, last_s)`` seconds after ``start`` (with
    hourly ledger ticks) through the template's functions at their default parameters; what they
    emitted and called. ``reports``: a list that gets every
    :class:`~batchpilot_local.report.EventReport` (tests); ``progress``: a line on stderr every
    1,000 events; ``parameters``: template parameter overrides (default: none, a default deploy);
    ``tick_minute``: the minute of each hour the ledger's schedule runs at."""
    from batchpilot_local.embedded_aws import observing
    from batchpilot_local.replay import Replayer

    tally = Tally()
    observer = CostObserver(tally)

    def on_invocation(spec: Any, records: int, invocation: Any) -> None:
        tally.memory_mb[spec.short_name] = spec.memory_size
        (tally.tick_usage if records == 0 else tally.usage).add(tally.pending)
        tally.pending = Usage()
        if records == 0:
            tally.ticks += 1
            tally.tick_seconds += invocation.duration_s
            tally.tick_log_bytes += len(invocation.output.encode()) + PLATFORM_LOG_BYTES
            return
        tally.invocations[spec.short_name] += 1
        tally.records[spec.short_name] += records
        tally.receives[spec.short_name] += math.ceil(records / 10)
        tally.seconds[spec.short_name] += invocation.duration_s
        tally.log_bytes[spec.short_name] += len(invocation.output.encode()) + PLATFORM_LOG_BYTES

    began = time.monotonic()

    def on_report(report: Any) -> None:
        if reports is not None:
            reports.append(report)
        tick = report.detail_type == "Scheduled Event"
        counted = report.is_event and not tick
        tally.events += counted
        for error in report.errors:
            tally.errors[re.sub(r"[0-9a-f-]{36}|cost-job-\d+|\d+", "#", error)[:160]] += 1
        # The hour a value is sent in: its event's (or tick's) time. Not the value's timestamp:
        # Powertools stamps its own counters (ColdStart, ...) with the wall clock.
        if tick:
            hour = _hour_of(str(report.origin).rsplit(" ", 1)[-1], start)
        else:
            hour = hours.pop(report.event_id, -1)
        for output in report.outputs():
            for metric in output.metrics:
                (tally.tick_series if tick else tally.series_hours)[_series_key(metric)].add(hour)
        if progress and counted and tally.events % 1000 == 0:
            print(f"  {fleet.name}: {tally.events} events, {time.monotonic() - began:.0f} s", file=sys.stderr)

    hours: dict[str | None, int] = {}

    def items() -> Iterator[tuple[Any, None, None]]:
        for item in replay_items(fleet, start, first_s, last_s, tick_minute):
            if isinstance(item, dict):
                hours[item["id"]] = _hour_of(item["time"], start)
            yield item, None, None

    replayer = Replayer(parameters=parameters, batch=True, on_invocation=on_invocation)
    with observing(observer):
        replayer.run_items(
            items(), plain_worlds=[fleet_world(fleet)], on_report=on_report, keep_reports=False
        )
    return tally


# ---------------------------------------------------------------------------------- the month
def _schema(key: SeriesKey) -> Schema:
    return key[0], tuple(k for k, _ in key[1])


def series_table(tally: Tally) -> dict[Schema, dict[str, float]]:
    """Per metric name and dimension set: distinct series and metric-months a month (event-driven
    series: hours of the day with a value / 24; tick gauges: likewise, from the hourly ticks)."""
    out: dict[Schema, dict[str, float]] = defaultdict(lambda: {"series": 0, "metric_months": 0.0, "gauge": 0})
    hours: dict[SeriesKey, set[int]] = defaultdict(set)
    for source in (tally.series_hours, tally.tick_series):
        for key, seen in source.items():
            hours[key] |= seen
    for key, seen in hours.items():
        row = out[_schema(key)]
        row["series"] += 1
        row["metric_months"] += (24 if key[0] in EVERY_HOUR else len(seen)) / 24
        row["gauge"] = max(row["gauge"], int(key in tally.tick_series and key not in tally.series_hours))
    return dict(out)


def month(
    tally: Tally,
    template: Any,
    ticks: Tally | None = None,
    scale: Mapping[str, float] | None = None,
    series: Mapping[Schema, dict[str, float]] | None = None,
) -> dict[str, Any]:
    """A month of the replayed day: quantities per service. ``ticks``: the replay whose ledger
    ticks give the per-tick work (default ``tally``); ``scale``: per quantity, the factor from the
    day to the fleet measured (10x), default 1; ``series``: the metric table to use."""
    from batchpilot_local.template import created_resources, resolved_resources

    scale = scale or {}
    ticks = tally if ticks is None else ticks
    day = DAYS_PER_MONTH
    per_tick = 1 / max(1, ticks.ticks)
    invocations = sum(tally.invocations.values()) * day * scale.get("invocations", 1)
    tick_invocations = TICKS_PER_MONTH
    memory = tally.memory_mb or {}
    gb_s = (
        sum(tally.seconds[f] * memory.get(f, 256) / 1024 for f in tally.seconds) * day * scale.get("gb_s", 1)
    )
    ledger_mb = memory.get("ledger", 256)
    gb_s += ticks.tick_seconds * per_tick * TICKS_PER_MONTH * ledger_mb / 1024
    log_gb = (
        sum(tally.log_bytes.values()) * day * scale.get("log_bytes", 1)
        + ticks.tick_log_bytes * per_tick * TICKS_PER_MONTH
    ) / 1e9
    rru = tally.usage.rru * day * scale.get("rru", 1) + ticks.tick_usage.rru * per_tick * TICKS_PER_MONTH
    wru = tally.usage.wru * day * scale.get("wru", 1) + ticks.tick_usage.wru * per_tick * TICKS_PER_MONTH
    queues = {route.queue for route in template.routes}
    records = sum(tally.records.values()) * day * scale.get("records", 1)
    receives = sum(tally.receives.values()) * day * scale.get("receives", 1)
    idle = len(queues) * IDLE_POLLERS * HOURS_PER_MONTH * 3600 / LONG_POLL_S
    sqs = records + 2 * receives + idle  # a send per record; a receive and a delete per 10 records
    sns = tally.usage.sns_requests * day * scale.get("sns", 1)
    own = tally.usage.own_events * day * scale.get("own_events", 1)
    table = series if series is not None else series_table(tally)
    metric_months = sum(row["metric_months"] for row in table.values())
    dashboards = len(created_resources(template.path, "AWS::CloudWatch::Dashboard", template.overrides))
    alarms = resolved_resources(template.path, "AWS::CloudWatch::Alarm", template.overrides)
    alarm_metrics = sum(
        max(1, sum(1 for m in (props.get("Metrics") or []) if isinstance(m, Mapping) and "MetricStat" in m))
        for props in alarms.values()
    )
    quantities = {
        "cloudwatch_metrics": metric_months,
        "cloudwatch_dashboards": dashboards,
        "cloudwatch_alarms": alarm_metrics,
        "cloudwatch_logs": log_gb,
        "lambda_requests": (invocations + tick_invocations) / 1e6,
        "lambda_compute": gb_s,
        "dynamodb_writes": wru / 1e6,
        "dynamodb_reads": rru / 1e6,
        "sqs_requests": sqs / 1e6,
        "sns_publishes": sns / 1e6,
        "eventbridge_custom": own / 1e6,
        "scheduler": TICKS_PER_MONTH / 1e6,
        "kms_keys": len(created_resources(template.path, "AWS::KMS::Key", template.overrides)),
        "kms_requests": sns / 1e6,
    }
    lines = {}
    for key, quantity in quantities.items():
        price = PRICES[key]
        billed = max(0.0, quantity - price.get("free", 0) - price.get("free_millions", 0))
        lines[key] = {"quantity": round(quantity, 4), "dollars": round(billed * price["price"], 2)}
    return {
        "lines": lines,
        "total": round(sum(line["dollars"] for line in lines.values()), 2),
        "details": {
            "events_per_day": round(tally.events * scale.get("events", 1)),
            "invocations_per_day": {
                f: round(n * scale.get("invocations", 1)) for f, n in sorted(tally.invocations.items())
            },
            "ledger_ticks_per_month": TICKS_PER_MONTH,
            "ledger_tick_seconds": round(ticks.tick_seconds * per_tick, 3),
            "alarms": len(alarms),
            "sqs_queues_polled": len(queues),
            "api_calls_per_day": {
                k: round(v * scale.get("events", 1)) for k, v in sorted(tally.usage.calls.items())
            },
            "api_calls_per_tick": {
                k: round(v * per_tick, 2) for k, v in sorted(ticks.tick_usage.calls.items())
            },
        },
    }


def _metrics_rows(
    table: Mapping[Schema, dict[str, float]], ratio: Mapping[Any, float] | None = None
) -> list[dict[str, Any]]:
    rows = []
    for (name, keys), row in sorted(table.items()):
        factor = (ratio or {}).get((name, keys), 1.0)
        rows.append(
            {
                "metric": name,
                "dimensions": [k for k in keys],
                "scales_with_fleet": sorted(FLEET_KEYS.intersection(keys)),
                "gauge": bool(row["gauge"]),
                "series": round(row["series"] * factor),
                "metric_months": round(row["metric_months"] * factor, 2),
            }
        )
    return rows


def series_ratios(
    day: Mapping[Schema, Mapping[str, float]],
    small: Mapping[Schema, Mapping[str, float]],
    big: Mapping[Schema, Mapping[str, float]],
    fleet_factor: float = 10.0,
) -> dict[Schema, float]:
    """Per metric name and dimension set of the reference ``day``: how many times more series the
    larger fleet's window (``big``) has than the same window of the reference fleet (``small``).
    A set not seen in both windows grows as the fleet (``fleet_factor``) when one of its dimensions
    is in :data:`FLEET_KEYS`, else not at all (1)."""
    ratio: dict[Schema, float] = {}
    for schema in day:
        if small.get(schema, {}).get("series") and big.get(schema, {}).get("series"):
            ratio[schema] = big[schema]["series"] / small[schema]["series"]
        else:
            ratio[schema] = fleet_factor if FLEET_KEYS.intersection(schema[1]) else 1.0
    return ratio


def measure(
    window_hour: int = 10,
    parameters: Mapping[str, str] | None = None,
    fleets: tuple[Fleet, Fleet] = (REFERENCE, TEN_X),
    *,
    progress: bool = True,
) -> dict[str, Any]:
    """Replay the reference fleet's day, then the hour from ``window_hour`` of each fleet, with the
    template's parameters (``parameters`` over their defaults); what ``benchmarks/cost.json`` holds:
    ``prices``, per fleet its ``lines`` (quantity and dollars per :data:`PRICES` key), ``total``,
    ``metrics`` (one row per metric name and dimension set) and ``details``, and ``replayed``.
    ``fleets``: the reference fleet and the larger one (tests give small ones)."""
    from batchpilot_local.template import load_template

    parameters = dict(parameters or {})
    template = load_template(ROOT / "template.yaml", parameters)
    start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)
    began = time.monotonic()
    small_fleet, big_fleet = fleets
    day = replay(small_fleet, start, 0, 86_400, parameters=parameters, progress=progress)
    w0, w1 = window_hour * 3600, (window_hour + 1) * 3600
    base_window = replay(small_fleet, start, w0, w1, parameters=parameters, progress=progress)
    big_window = replay(big_fleet, start, w0, w1, parameters=parameters, progress=progress)
    elapsed = time.monotonic() - began

    day_table = series_table(day)
    growth = big_fleet.jobs / small_fleet.jobs
    ratio = series_ratios(day_table, series_table(base_window), series_table(big_window), growth)
    scaled = {
        s: {**row, "series": row["series"] * ratio[s], "metric_months": row["metric_months"] * ratio[s]}
        for s, row in day_table.items()
    }

    def factor(get: Any) -> float:
        a, b = get(base_window), get(big_window)
        return b / a if a else growth

    scale = {
        "events": factor(lambda t: t.events),
        "invocations": factor(lambda t: sum(t.invocations.values())),
        "records": factor(lambda t: sum(t.records.values())),
        "receives": factor(lambda t: sum(t.receives.values())),
        "gb_s": factor(lambda t: sum(t.seconds.values())),
        "log_bytes": factor(lambda t: sum(t.log_bytes.values())),
        "rru": factor(lambda t: t.usage.rru),
        "wru": factor(lambda t: t.usage.wru),
        "sns": factor(lambda t: t.usage.sns_requests),
        "own_events": factor(lambda t: t.usage.own_events),
    }
    reference = month(day, template)
    ten_x = month(day, template, ticks=big_window, scale=scale, series=scaled)
    return {
        "prices_date": PRICES_DATE,
        "parameters": parameters,
        "prices": PRICES,
        "fleets": {
            "reference": {**small_fleet.__dict__, **reference, "metrics": _metrics_rows(day_table)},
            "10x": {
                **big_fleet.__dict__,
                **ten_x,
                "metrics": _metrics_rows(day_table, ratio),
                "scale": {k: round(v, 3) for k, v in scale.items()},
            },
        },
        "replayed": {
            "reference_day_events": day.events,
            "reference_window_events": base_window.events,
            "ten_x_window_events": big_window.events,
            "window": f"{window_hour:02d}:00-{window_hour + 1:02d}:00",
            "ticks": {"reference_day": day.ticks, "ten_x_window": big_window.ticks},
            "seconds": round(elapsed),
            "errors": dict(Counter(day.errors + big_window.errors).most_common(10)),
        },
    }


# ---------------------------------------------------------------------------------- the table
LABELS = {
    "cloudwatch_metrics": "CloudWatch custom metrics",
    "cloudwatch_dashboards": "CloudWatch dashboards",
    "cloudwatch_alarms": "CloudWatch alarms",
    "cloudwatch_logs": "CloudWatch Logs ingestion",
    "lambda_requests": "Lambda requests",
    "lambda_compute": "Lambda compute",
    "dynamodb_writes": "DynamoDB writes",
    "dynamodb_reads": "DynamoDB reads",
    "sqs_requests": "SQS requests",
    "sns_publishes": "SNS publishes",
    "eventbridge_custom": "EventBridge own events",
    "scheduler": "EventBridge Scheduler",
    "kms_keys": "KMS keys",
    "kms_requests": "KMS requests",
}


def _quantity(value: float) -> str:
    """A quantity as the table shows it: thousands separated, small values with 4 decimals."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}" if value >= 1 else (f"{value:.4f}".rstrip("0").rstrip(".") or "0")


_SECTION = """\
List prices: us-east-1, {{ r.prices_date }}. Replayed: {{ "{:,}".format(r.replayed.reference_day_events) }} \
job events (the reference fleet's day) and the hour {{ r.replayed.window }} of each fleet \
({{ "{:,}".format(r.replayed.reference_window_events) }} and \
{{ "{:,}".format(r.replayed.ten_x_window_events) }} events).

| service | unit | unit price | reference: quantity | reference: $/month | 10x: quantity | 10x: $/month |
|---|---|---:|---:|---:|---:|---:|
{% for key, label in labels.items() %}{% set p = r.prices[key] %}\
| {{ label }} | {{ p.unit }}{% if p.get("free") %} ({{ p.free }} free){% endif %}\
{% if p.get("free_millions") %} ({{ p.free_millions }} million free){% endif %} | ${{ money(p.price) }} \
| {{ q(ref.lines[key].quantity) }} | {{ "{:,.2f}".format(ref.lines[key].dollars) }} \
| {{ q(big.lines[key].quantity) }} | {{ "{:,.2f}".format(big.lines[key].dollars) }} |
{% endfor %}\
| **total** | | | | **{{ "{:,.2f}".format(ref.total) }}** | | **{{ "{:,.2f}".format(big.total) }}** |

Metric series by name and dimension set (metric-months a month: each series counts the share of \
the month's hours it is published in; *grows with*: the dimensions whose values grow with the fleet; \
*gauge*: published by the ledger's schedule, *event*: by the events):

| metric | dimensions | grows with | kind | reference: series | reference: metric-months \
| 10x: series | 10x: metric-months |
|---|---|---|---|---:|---:|---:|---:|
{% for row in ref.metrics %}{% set other = big_rows[(row.metric, row.dimensions | join(","))] %}\
| {{ row.metric }} | {{ row.dimensions | reject("equalto", "service") | join(", ") or "-" }} \
| {{ row.scales_with_fleet | join(" x ") or "-" }} | {{ "gauge" if row.gauge else "event" }} \
| {{ "{:,}".format(row.series) }} | {{ "{:,.1f}".format(row.metric_months) }} \
| {{ "{:,}".format(other.series) }} | {{ "{:,.1f}".format(other.metric_months) }} |
{% endfor %}\
| **total** | | | | **{{ "{:,}".format(ref.metrics | sum(attribute="series")) }}** \
| **{{ "{:,.1f}".format(ref.metrics | sum(attribute="metric_months")) }}** \
| **{{ "{:,}".format(big.metrics | sum(attribute="series")) }}** \
| **{{ "{:,.1f}".format(big.metrics | sum(attribute="metric_months")) }}** |
{% if r.get("variants") %}
The same fleets with one parameter changed, measured the same way (the tables above are the \
default deploy):

| deploy | reference: metric-months | reference: $/month | 10x: metric-months | 10x: $/month |
|---|---:|---:|---:|---:|
| default | {{ "{:,.1f}".format(ref.lines.cloudwatch_metrics.quantity) }} \
| {{ "{:,.2f}".format(ref.total) }} | {{ "{:,.1f}".format(big.lines.cloudwatch_metrics.quantity) }} \
| {{ "{:,.2f}".format(big.total) }} |
{% for name, v in r.variants.items() %}\
| `{{ name }}` | {{ "{:,.1f}".format(v.reference.metric_months) }} \
| {{ "{:,.2f}".format(v.reference.total) }} | {{ "{:,.1f}".format(v["10x"].metric_months) }} \
| {{ "{:,.2f}".format(v["10x"].total) }} |
{% endfor %}{% endif %}\
"""


def variant_summary(results: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Per fleet of a :func:`measure` result: its ``total`` ($ a month), ``metric_months`` and
    ``custom_metrics`` ($ a month), what docs/cost.md shows of another deploy."""
    return {
        name: {
            "total": fleet["total"],
            "metric_months": round(fleet["lines"]["cloudwatch_metrics"]["quantity"], 1),
            "custom_metrics": fleet["lines"]["cloudwatch_metrics"]["dollars"],
        }
        for name, fleet in results["fleets"].items()
    }


def render(results: Mapping[str, Any]) -> str:
    """docs/cost.md's generated section (markdown, through a jinja2 template) from what
    ``benchmarks/cost.json`` holds: the per-service table of both fleets and the metric series by
    name and dimension set."""
    import jinja2

    fleets = results["fleets"]
    big = fleets["10x"]
    template = jinja2.Environment(  # markdown, not HTML: nothing to escape
        autoescape=False,  # noqa: S701
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    return template.from_string(_SECTION).render(
        r=results,
        ref=fleets["reference"],
        big=big,
        big_rows={(row["metric"], ",".join(row["dimensions"])): row for row in big["metrics"]},
        labels=LABELS,
        q=_quantity,
        money=lambda price: f"{price:.10f}".rstrip("0").rstrip("."),
    )


def write_doc(section: str, doc: Path = DOC) -> None:
    """Replace docs/cost.md's generated section (SystemExit when the page lacks its markers)."""
    write_section(doc, SECTION, section)


def generated_section(doc: Path = DOC) -> str:
    """docs/cost.md's generated section as it stands (between the markers)."""
    return read_section(doc, SECTION)
