"""The real capacity handler against the embedded AWS (moto + the embedded Batch service-job backend).

Calls are counted with the embedded AWS's API journal; gauges are read from the EMF the handler prints.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from time import sleep
from types import ModuleType
from typing import Any

import botocore.endpoint
import pytest
from batchpilot.io import clients as adapters
from batchpilot.io.dynamodb.capacity import CapacityStateStore
from batchpilot.shared.observability import logger
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.lambda_runtime import FakeLambdaContext
from batchpilot_local.report import MetricRecord, parse_output
from batchpilot_local.testing.harness import aws_with_state_table, load_app, sqs_event
from batchpilot_local.testing.samples import sample, scheduled_event
from botocore.awsrequest import AWSResponse

QUEUE = "batchpilot-CapacityQueue"
ACCOUNT = "111122223333"
TABLE = "batchpilot-StateTable"
T0 = datetime(2026, 11, 20, 22, 0, tzinfo=UTC)
BLOCKED = (
    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - Service environment(s) associated with the job "
    "queue cannot meet the capacity requirement of the job."
)


def arn(kind: str, name: str) -> str:
    return f"arn:aws:batch:us-east-1:{ACCOUNT}:{kind}/{name}"


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def payload(count: int, kind: str = "ml.g5.12xlarge") -> dict[str, Any]:
    return {
        "TrainingJobName": "t",
        "ResourceConfig": {"InstanceType": kind, "InstanceCount": count, "VolumeSizeInGB": 50},
    }


def runnable(
    name: str, queue: str, count: int, *, age: timedelta = timedelta(minutes=5), **extra: Any
) -> dict[str, Any]:
    return {
        "jobName": name,
        "jobQueue": queue,
        "status": "RUNNABLE",
        "createdAt": ms(T0 - age),
        "serviceRequestPayload": payload(count),
        **extra,
    }


def running(name: str, queue: str, count: int, kind: str = "ml.g5.12xlarge", **extra: Any) -> dict[str, Any]:
    return {
        "jobName": name,
        "jobQueue": queue,
        "status": "RUNNING",
        "createdAt": ms(T0 - timedelta(hours=1)),
        "startedAt": ms(T0 - timedelta(minutes=50)),
        "serviceRequestPayload": payload(count, kind),
        "capacityUsage": [{"capacityUnit": kind, "quantity": float(count)}],
        **extra,
    }


def environment(name: str, max_capacity: int, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "capacityLimits": [{"maxCapacity": max_capacity, "capacityUnit": "NUM_INSTANCES"}],
        **extra,
    }


def seed_blocked_job(
    aws: EmbeddedAws, detail: dict[str, Any], *, limit: int, instances: int, **job: Any
) -> None:
    """A fair-share queue ``sm-training-highpri`` on environment ``sm-training`` (capacity limit
    ``limit`` instances) holding the blocked event's job, RUNNABLE, needing ``instances``
    ml.p4d.24xlarge instances; ``job`` adds DescribeServiceJob fields."""
    aws.seed(
        {
            "service_environments": [environment("sm-training", limit)],
            "job_queues": [
                {
                    "name": "sm-training-highpri",
                    "serviceEnvironment": "sm-training",
                    "scheduling": "FAIR_SHARE",
                }
            ],
            "service_jobs": [
                {
                    "jobArn": detail["jobArn"],
                    "jobName": detail["jobName"],
                    "jobQueue": "sm-training-highpri",
                    "status": "RUNNABLE",
                    "shareIdentifier": "prod",
                    "serviceRequestPayload": payload(instances, "ml.p4d.24xlarge"),
                    **job,
                }
            ],
        }
    )


def policy(**envs: dict[str, Any]) -> dict[str, str]:
    queues = [q for config in envs.values() for q in config["job_queues"]]
    return {
        "BATCHPILOT_CAPACITY_SERVICE_ENVIRONMENTS": ",".join(arn("service-environment", e) for e in envs),
        "BATCHPILOT_CAPACITY_JOB_QUEUES": ",".join(arn("job-queue", q) for q in queues),
        "BATCHPILOT_CAPACITY_POLICY": json.dumps({"service_environments": envs}),
    }


def scheduled(moment: datetime) -> dict[str, Any]:
    """What CapacitySchedule's Input becomes for one run."""
    return scheduled_event(
        moment,
        resources=[f"arn:aws:scheduler:us-east-1:{ACCOUNT}:schedule/default/batchpilot-CapacitySchedule"],
    )


@pytest.fixture
def aws() -> Iterator[EmbeddedAws]:
    yield from aws_with_state_table(TABLE)


@pytest.fixture
def lambda_context() -> FakeLambdaContext:
    """A Lambda context of the capacity function: CapacityFunction's Timeout is 60 s (template.yaml)."""
    return FakeLambdaContext(function_name="batchpilot-capacity", memory_limit_in_mb=256, timeout_s=60)


def load_handler(**env: str) -> ModuleType:
    """functions/capacity/app.py after a cold start with the template's kind of environment."""
    return load_app(
        "capacity",
        {
            "POWERTOOLS_SERVICE_NAME": "batchpilot",
            "POWERTOOLS_METRICS_NAMESPACE": "BatchPilot",
            "BATCHPILOT_STATE_TABLE": TABLE,
            "BATCHPILOT_EVENT_BUS": "default",
            **env,
        },
    )


class Run:
    """One invocation's result: return value, printed metrics and errors, journal entries."""

    def __init__(self, result: Any, output: str, journal: list[Any]) -> None:
        self.result = result
        self.metrics, self.errors = parse_output("capacity", output)
        self.logs = [
            json.loads(line) for line in output.splitlines() if line.startswith("{") and '"_aws"' not in line
        ]
        self.journal = journal
        self.calls = Counter(entry.action for entry in journal)

    def gauge(self, name: str, **dims: str) -> float:
        """The one value of ``name`` whose dimensions (besides ``service`` and, when not given,
        ``CapacityUnit``/``Function``) are exactly ``dims``."""
        optional = {"service", "CapacityUnit", "Function"} - set(dims)
        found = [
            m
            for m in self.metrics
            if m.name == name and {k: v for k, v in m.dimensions.items() if k not in optional} == dims
        ]
        assert len(found) == 1, (name, dims, found)
        value = found[0].value
        assert isinstance(value, float)
        return value

    def sample(self, queue: str) -> dict[str, Any]:
        """The ``capacity sample`` log line of ``queue`` (what the run saw of it)."""
        (line,) = [r for r in self.logs if r.get("message") == "capacity sample" and r["job_queue"] == queue]
        return dict(line)

    def count(self, name: str) -> float:
        """The sum of every value of the counter ``name``."""
        values = [m.value for m in self.metrics if m.name == name]
        return sum(sum(v) if isinstance(v, list) else v for v in values)

    def updates(self) -> list[dict[str, Any]]:
        return [e.params for e in self.journal if e.action == "batch:UpdateServiceEnvironment"]

    def own_events(self) -> list[tuple[str, dict[str, Any]]]:
        return [(entry["DetailType"], json.loads(entry["Detail"])) for entry in self.entries()]

    def entries(self) -> list[dict[str, Any]]:
        """The PutEvents entries sent."""
        return [
            entry for e in self.journal if e.action == "events:PutEvents" for entry in e.params["Entries"]
        ]

    def decisions(self) -> list[MetricRecord]:
        return [m for m in self.metrics if m.name == "CapacityDecisions"]


def invoke(
    aws: EmbeddedAws,
    handler: ModuleType,
    event: dict[str, Any],
    context: Any,
    capsys: pytest.CaptureFixture[str],
) -> Run:
    capsys.readouterr()
    aws.drain_journal()
    # Powertools' handler keeps the stream it was created with: point it at this test's stdout.
    stream = logger.registered_handler
    previous = stream.setStream(sys.stdout)
    try:
        result = handler.lambda_handler(event, context)
    finally:
        stream.setStream(previous)
    return Run(result, capsys.readouterr().out, aws.drain_journal())


def max_capacity(aws: EmbeddedAws, name: str) -> int:
    (env,) = aws.client("batch").describe_service_environments(serviceEnvironments=[name])[
        "serviceEnvironments"
    ]
    return int(env["capacityLimits"][0]["maxCapacity"])


# ------------------------------------------------------------------------------------ scheduled runs


def test_a_burst_raises_the_limit_and_says_what_it_saw(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.seed(
        {
            "service_environments": [environment("sm-training", 8)],
            "job_queues": [
                {"name": "hi", "serviceEnvironment": "sm-training", "scheduling": "FAIR_SHARE"},
                {"name": "lo", "serviceEnvironment": "sm-training"},
            ],
            "service_jobs": [
                running("r1", "hi", 4, shareIdentifier="prod"),
                running("r2", "lo", 4),
                runnable("a", "hi", 8, age=timedelta(minutes=42), shareIdentifier="prod"),
                runnable("b", "hi", 8, shareIdentifier="research"),
                runnable("c", "lo", 8, age=timedelta(minutes=3)),
            ],
        }
    )
    handler = load_handler(
        **policy(**{"sm-training": {"job_queues": ["hi", "lo"], "min": 0, "max": 64, "max_step": 16}})
    )
    run = invoke(aws, handler, scheduled(T0), lambda_context, capsys)
    assert run.errors == []
    assert run.result == {
        "time": T0.isoformat(),
        "service_environments": 1,
        "updated": ["sm-training"],
        "errors": [],
    }
    # 8 in use + 24 RUNNABLE = 32 wanted; one step of 16 from 8.
    assert run.updates() == [
        {
            "serviceEnvironment": "sm-training",
            "capacityLimits": [{"maxCapacity": 24, "capacityUnit": "NUM_INSTANCES"}],
        }
    ]
    assert max_capacity(aws, "sm-training") == 24
    # What it saw, per queue, is in its log: the fleet's gauges are the job ledger's.
    hi, lo = run.sample("hi"), run.sample("lo")
    assert (hi["runnable_jobs"], hi["runnable_instances"], hi["instances_in_use"]) == (2, 16, 4)
    assert hi["oldest_runnable_seconds"] == 42 * 60 and lo["oldest_runnable_seconds"] == 3 * 60
    assert {m.name for m in run.metrics if "JobQueue" in m.dimensions} == set()
    assert run.gauge("CapacityTarget", ServiceEnvironment="sm-training") == 32
    (decision,) = run.decisions()
    assert (decision.dimensions["Decision"], decision.dimensions["Reason"]) == ("RAISE", "DEMAND")
    sampled = [m for m in run.metrics if "ServiceEnvironment" in m.dimensions]
    assert len(sampled) == 2 and all(m.timestamp == "2026-11-20T22:00:00.000Z" for m in sampled)
    ((detail_type, detail),) = run.own_events()
    assert detail_type == "Capacity Adjusted"
    assert (detail["previous_max"], detail["new_max"], detail["in_use"], detail["runnable_demand"]) == (
        8,
        24,
        8,
        24,
    )
    assert detail["service_environment_arn"] == arn("service-environment", "sm-training")
    assert run.gauge("CapacityRuns") == 1 and run.gauge("CapacityErrors") == 0
    # The decision, with its reason, is in the log for people.
    (log,) = [r for r in run.logs if r.get("message") == "capacity decision"]
    assert log["decision"].startswith("raised sm-training from 8 to 24 (DEMAND: 8 in use + 24 RUNNABLE")

    # A minute later: cooldown. Three minutes later: the rest of the way.
    run = invoke(aws, handler, scheduled(T0 + timedelta(minutes=1)), lambda_context, capsys)
    assert run.updates() == [] and run.decisions()[0].dimensions["Reason"] == "COOLDOWN"
    run = invoke(aws, handler, scheduled(T0 + timedelta(minutes=3)), lambda_context, capsys)
    assert [u["capacityLimits"][0]["maxCapacity"] for u in run.updates()] == [32]


def test_five_thousand_runnable_jobs_cost_a_bounded_number_of_calls(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = [runnable(f"j{i}", "bulk", 1 + i % 3, age=timedelta(seconds=i)) for i in range(5000)]
    aws.seed(
        {
            "service_environments": [environment("sm-bulk", 64)],
            "job_queues": [{"name": "bulk", "serviceEnvironment": "sm-bulk"}],
            "service_jobs": jobs,
        }
    )
    env = policy(**{"sm-bulk": {"job_queues": ["bulk"], "max": 64}})
    handler = load_handler(**env, BATCHPILOT_CAPACITY_DESCRIBE_BUDGET="6000")
    first = invoke(aws, handler, scheduled(T0), lambda_context, capsys)
    # First sight of each job: its payload is read once and cached.
    assert first.calls["batch:DescribeServiceJob"] == 5000
    assert first.calls["batch:ListServiceJobs"] == 50  # every page of 100 (the API maximum)
    demand = sum(1 + i % 3 for i in range(5000))
    bulk = first.sample("bulk")
    assert (bulk["runnable_jobs"], bulk["runnable_instances"]) == (5000, demand)
    assert bulk["oldest_runnable_seconds"] == 4999

    # The same Lambda instance a minute later: nothing is read again.
    warm = invoke(aws, handler, scheduled(T0 + timedelta(minutes=1)), lambda_context, capsys)
    assert warm.calls == Counter(
        {
            "batch:DescribeServiceEnvironments": 1,
            "batch:ListServiceJobs": 50,
            "batch:GetJobQueueSnapshot": 1,
            "dynamodb:BatchGetItem": 1,  # every environment's state in one read
            "dynamodb:PutItem": 1,
            "dynamodb:Query": 1,  # the job ledger holds nothing for the queue: listed as before
        }
    )
    assert warm.sample("bulk")["runnable_instances"] == demand

    # A new Lambda instance (cold start): the payload cache is read from DynamoDB in one Query.
    cold = invoke(aws, load_handler(**env), scheduled(T0 + timedelta(minutes=2)), lambda_context, capsys)
    assert cold.calls["batch:DescribeServiceJob"] == 0
    assert 1 <= cold.calls["dynamodb:Query"] <= 2
    assert sum(cold.calls.values()) <= 50 + 7
    assert cold.sample("bulk")["runnable_instances"] == demand


def test_payloads_are_read_within_a_budget_per_run_oldest_first(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = [runnable(f"j{i}", "q", 4, age=timedelta(minutes=300 - i)) for i in range(250)]
    aws.seed(
        {
            "service_environments": [environment("sm", 8)],
            "job_queues": [{"name": "q", "serviceEnvironment": "sm"}],
            "service_jobs": jobs,
        }
    )
    handler = load_handler(
        **policy(sm={"job_queues": ["q"], "max": 2000}), BATCHPILOT_CAPACITY_DESCRIBE_BUDGET="100"
    )
    demands = []
    for minute in range(4):
        run = invoke(aws, handler, scheduled(T0 + timedelta(minutes=minute)), lambda_context, capsys)
        demands.append((run.calls["batch:DescribeServiceJob"], run.sample("q")["runnable_instances"]))
    # Unread jobs count as 1 instance each until they are read (100 a run).
    assert demands == [(100, 550.0), (100, 850.0), (50, 1000.0), (0, 1000.0)]


def test_one_environments_error_never_stops_the_others(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.seed(
        {
            "service_environments": [environment("good", 4), environment("broken", 4)],
            "job_queues": [{"name": "good-q", "serviceEnvironment": "good"}],
            "service_jobs": [runnable("a", "good-q", 8)],
        }
    )
    # "broken" is configured with a queue that does not exist: its snapshot call fails.
    handler = load_handler(
        **policy(
            broken={"job_queues": ["missing-q"], "max": 16},
            good={"job_queues": ["good-q"], "max": 16},
        )
    )
    run = invoke(aws, handler, scheduled(T0), lambda_context, capsys)
    assert run.updates() == [
        {
            "serviceEnvironment": "good",
            "capacityLimits": [{"maxCapacity": 8, "capacityUnit": "NUM_INSTANCES"}],
        }
    ]
    assert run.result["updated"] == ["good"]
    (error,) = run.result["errors"]
    assert error.startswith("broken: ClientException: ") and "Job queue missing-q does not exist" in error
    assert run.errors == [
        f"capacity: capacity run failed for a service environment: {error.split(': ', 1)[1]}"
    ]
    assert run.gauge("CapacityErrors") == 1


def test_throttling_is_retried_by_botocore(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    aws.seed(
        {
            "service_environments": [environment("sm", 4)],
            "job_queues": [{"name": "q", "serviceEnvironment": "sm"}],
            "service_jobs": [runnable("a", "q", 8)],
        }
    )
    throttled: Counter[str] = Counter()

    class Body:
        def stream(self, **_: Any) -> Iterator[bytes]:
            yield b'{"message": "Too Many Requests"}'

    def throttle(request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        if operation in ("GetJobQueueSnapshot", "UpdateServiceEnvironment") and throttled[operation] < 2:
            throttled[operation] += 1
            headers = {"x-amzn-ErrorType": "TooManyRequestsException:", "Content-Type": "application/json"}
            return AWSResponse(request.url, 429, headers, Body())
        return None

    # Throttle at the HTTP layer, below the client: the retries are botocore's own. The hook is on
    # the session before the cold start, which makes the handler's clients.
    adapters.session().events.register("before-send.batch", throttle, unique_id="capacity-test-throttle")
    monkeypatch.setattr(botocore.endpoint.time, "sleep", lambda seconds: None)  # keep the test fast
    try:
        handler = load_handler(**policy(sm={"job_queues": ["q"], "max": 16}))
        run = invoke(aws, handler, scheduled(T0), lambda_context, capsys)
    finally:
        adapters.session().events.unregister("before-send.batch", unique_id="capacity-test-throttle")
    assert throttled == Counter({"GetJobQueueSnapshot": 2, "UpdateServiceEnvironment": 2})
    retried = {e.action: e.retries for e in run.journal if e.retries}
    assert retried == {"batch:GetJobQueueSnapshot": 2, "batch:UpdateServiceEnvironment": 2}
    assert run.result["errors"] == [] and run.result["updated"] == ["sm"]
    assert max_capacity(aws, "sm") == 8


@pytest.mark.parametrize(("state", "status"), [("DISABLED", "VALID"), ("ENABLED", "UPDATING")])
def test_environments_that_are_not_enabled_and_valid_are_never_changed(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str], state: str, status: str
) -> None:
    aws.seed(
        {
            "service_environments": [environment("sm", 4, state=state, status=status)],
            "job_queues": [{"name": "q", "serviceEnvironment": "sm"}],
            "service_jobs": [runnable("a", "q", 8)],
        }
    )
    handler = load_handler(**policy(sm={"job_queues": ["q"], "max": 16}))
    run = invoke(aws, handler, scheduled(T0), lambda_context, capsys)
    assert run.updates() == []
    ((detail_type, detail),) = run.own_events()
    assert (detail_type, detail["limit_reason"]) == ("Capacity Limited", "NOT_VALID")
    assert run.sample("q")["runnable_jobs"] == 1  # still sampled


def test_dry_run_decides_and_tells_but_never_updates(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.seed(
        {
            "service_environments": [environment("sm", 4)],
            "job_queues": [{"name": "q", "serviceEnvironment": "sm"}],
            "service_jobs": [runnable("a", "q", 8)],
        }
    )
    handler = load_handler(**policy(sm={"job_queues": ["q"], "max": 16}), BATCHPILOT_CAPACITY_DRY_RUN="true")
    first = invoke(aws, handler, scheduled(T0), lambda_context, capsys)
    second = invoke(aws, handler, scheduled(T0 + timedelta(minutes=1)), lambda_context, capsys)
    assert first.updates() == second.updates() == []
    ((detail_type, detail),) = first.own_events()
    assert detail_type == "Capacity Adjusted" and detail["dry_run"] is True and detail["new_max"] == 8
    assert second.own_events() == []  # the same would-be change is not repeated every minute
    assert max_capacity(aws, "sm") == 4


def test_nothing_configured_means_no_aws_calls(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    run = invoke(aws, load_handler(), scheduled(T0), lambda_context, capsys)
    assert run.journal == [] and run.result["service_environments"] == 0


def test_a_schedule_event_without_time_is_refused(aws: EmbeddedAws, lambda_context: Any) -> None:
    handler = load_handler()
    with pytest.raises(ValueError, match="the event has no 'time'"):
        handler.lambda_handler({"source": "aws.scheduler"}, lambda_context)


# ------------------------------------------------------------------------------------ blocked events


def test_a_blocked_job_wakes_the_function_and_gets_the_limit_it_needs(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    event = sample("service-job-queue-blocked/misconfiguration-service-environment-max-resource")
    detail = event["detail"]
    blocked_at = datetime(2026, 11, 24, 6, 18, 47, tzinfo=UTC)
    seed_blocked_job(aws, detail, limit=8, instances=32, createdAt=detail["createdAt"])
    handler = load_handler(
        **policy(**{"sm-training": {"job_queues": ["sm-training-highpri"], "max": 48, "max_step": 4}})
    )
    other_queue = json.loads(json.dumps(event))
    other_queue["detail"]["jobQueue"] = arn("job-queue", "not-managed")
    run = invoke(
        aws,
        handler,
        sqs_event([json.dumps(event), json.dumps(event), json.dumps(other_queue), "{not json"], QUEUE),
        lambda_context,
        capsys,
    )
    assert run.result == {"batchItemFailures": []}
    # One run for the environment (the duplicate is not run twice), raised straight to the
    # blocked job's 32 instances despite the step bound of 4.
    assert run.updates() == [
        {
            "serviceEnvironment": "sm-training",
            "capacityLimits": [{"maxCapacity": 32, "capacityUnit": "NUM_INSTANCES"}],
        }
    ]
    assert run.calls["batch:DescribeServiceEnvironments"] == 1
    ((detail_type, adjusted),) = run.own_events()
    assert (detail_type, adjusted["reason"], adjusted["job_arn"]) == (
        "Capacity Adjusted",
        "BLOCKED_JOB",
        detail["jobArn"],
    )
    assert run.metrics and all(m.timestamp is not None for m in run.metrics)
    assert (run.count("EventsProcessed"), run.count("EventsIgnored"), run.count("InvalidEvents")) == (2, 1, 1)
    (invalid,) = run.errors  # the malformed body is reported (never its content), not retried
    assert invalid.startswith("capacity: event not processed: ") and "not valid JSON" in invalid
    # The blocked event's time is the run's "now".
    ((entry),) = run.entries()
    assert entry["Time"] == blocked_at and entry["Resources"] == [arn("service-environment", "sm-training")]


def test_each_batch_runs_the_environment_once_and_a_second_batch_that_minute_not_at_all(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    event = sample("service-job-queue-blocked/misconfiguration-service-environment-max-resource")
    seed_blocked_job(aws, event["detail"], limit=8, instances=4)
    handler = load_handler(**policy(**{"sm-training": {"job_queues": ["sm-training-highpri"], "max": 48}}))
    if (second := datetime.now(UTC).second) >= 55:  # both batches in one wall-clock minute
        sleep(61 - second)
    run = invoke(aws, handler, sqs_event([json.dumps(event)] * 3, QUEUE), lambda_context, capsys)
    assert run.result == {"batchItemFailures": []}
    assert run.calls["batch:DescribeServiceEnvironments"] == 1
    assert run.count("EventsProcessed") == 3 and run.gauge("CapacityRuns") == 1
    # Another invocation in the same minute (another batch, or a concurrent execution environment):
    # the environment's wake-up is already claimed in the StateTable, so no second run (no fan-out).
    run = invoke(aws, handler, sqs_event([json.dumps(event)] * 3, QUEUE), lambda_context, capsys)
    assert run.result == {"batchItemFailures": []}
    assert run.calls["batch:DescribeServiceEnvironments"] == 0
    assert run.count("EventsProcessed") == 3


def test_a_blocked_job_larger_than_the_maximum_is_a_critical_refusal(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    event = sample("service-job-queue-blocked/misconfiguration-service-environment-max-resource")
    detail = event["detail"]
    seed_blocked_job(aws, detail, limit=16, instances=64, statusReason=BLOCKED)
    handler = load_handler(**policy(**{"sm-training": {"job_queues": ["sm-training-highpri"], "max": 32}}))
    run = invoke(aws, handler, sqs_event([json.dumps(event)], QUEUE), lambda_context, capsys)
    assert [u["capacityLimits"][0]["maxCapacity"] for u in run.updates()] == [32]
    kinds = {t: d for t, d in run.own_events()}
    assert kinds["Capacity Limited"]["limit_reason"] == "BLOCKED_JOB_EXCEEDS_MAX"
    assert kinds["Capacity Limited"]["job_arn"] == detail["jobArn"]
    assert (kinds["Capacity Limited"]["desired"], kinds["Capacity Limited"]["configured_max"]) == (64, 32)
    assert kinds["Capacity Adjusted"]["new_max"] == 32


def test_state_survives_cold_starts(
    aws: EmbeddedAws, lambda_context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.seed(
        {
            "service_environments": [environment("sm", 32)],
            "job_queues": [{"name": "q", "serviceEnvironment": "sm"}],
            "service_jobs": [running("r", "q", 4)],
        }
    )
    env = policy(sm={"job_queues": ["q"], "max": 64})
    reasons = []
    for minute in range(12):  # a new Lambda instance every run: the clock lives in DynamoDB
        run = invoke(
            aws, load_handler(**env), scheduled(T0 + timedelta(minutes=minute)), lambda_context, capsys
        )
        reasons.append(run.decisions()[0].dimensions["Reason"])
    assert reasons[:10] == ["STABILISING"] * 10
    assert reasons[10] == "DEMAND" and max_capacity(aws, "sm") == 4
    state = CapacityStateStore(aws.client("dynamodb"), TABLE).load("sm")
    assert state.last_change_at == T0 + timedelta(minutes=10)
