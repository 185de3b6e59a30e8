"""Alerts handler: per-event cost with local endpoints, and AWS and chat calls per event.

Runs the real ``functions/alerts/app.py`` (imported as Lambda does, with the template's environment)
inside the embedded AWS (moto: SNS, DynamoDB, Secrets Manager) with the local chat endpoint (a real
HTTP server on 127.0.0.1: Slack in webhook mode, and Teams with ``--teams``). AWS calls are counted
with a botocore ``before-call`` hook on the session the handler's clients come from; chat calls are
the requests the endpoint received.

The wall time includes moto answering in-process (no network): it is an upper bound of the
handler's own CPU cost and says nothing about real AWS latency. The call counts are what matter for
cost and rate limits in AWS.

Usage: ``.venv/bin/python benchmarks/bench_alerts.py [--events N] [--teams] [--no-write]``
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
import uuid
from collections import Counter
from typing import Any

from _common import machine, machine_markdown, now, percentile, write_section
from batchpilot.io.clients import session
from batchpilot_local.chat_endpoint import LocalChatEndpoint
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.lambda_runtime import FakeLambdaContext
from batchpilot_local.notifications import LocalAlerts
from batchpilot_local.testing.harness import load_app, sqs_event, template_environment
from batchpilot_local.testing.samples import sample


def with_job(event: dict[str, Any], n: int) -> dict[str, Any]:
    """A copy of a sample about a different job (so each is a new fact), with a new envelope id."""
    copy = json.loads(json.dumps(event))
    copy["id"] = str(uuid.uuid4())
    detail = copy["detail"]
    suffix = f"{n:08d}-bench-4000-8000-000000000000"
    if "jobArn" in detail:
        detail["jobArn"] = detail["jobArn"].rsplit("/", 1)[0] + "/" + suffix
        detail["jobId"] = suffix
    if "TrainingJobArn" in detail:
        detail["TrainingJobArn"] = detail["TrainingJobArn"] + f"-{n}"
    return copy


class Calls:
    def __init__(self) -> None:
        self.counter: Counter[str] = Counter()

    def __call__(self, model: Any, **_: Any) -> None:
        self.counter[f"{model.service_model.service_name}:{model.name}"] += 1


def scenario(
    name: str,
    handler: Any,
    batches: list[list[dict[str, Any]]],
    calls: Calls,
    chat: LocalChatEndpoint,
    local: LocalAlerts,
) -> dict[str, Any]:
    sink = io.StringIO()
    real = sys.stdout
    calls.counter.clear()
    chat_before = len(chat.slack.requests) + len(chat.teams.requests)
    per_event: list[float] = []
    events = 0
    try:
        sys.stdout = sink
        for batch in batches:
            context = FakeLambdaContext("batchpilot-alerts", 256, 60)
            event = sqs_event([json.dumps(e) for e in batch], "AlertsQueue")
            started = time.perf_counter()
            response = handler.lambda_handler(event, context)
            elapsed = time.perf_counter() - started
            assert response == {"batchItemFailures": []}, response
            per_event.append(elapsed / len(batch) * 1000)
            events += len(batch)
    finally:
        sys.stdout = real
    local.sns_messages()  # drain the inbox (not counted: the subscriber's side)
    aws = sum(calls.counter.values())
    return {
        "name": name,
        "events": events,
        "median_ms": statistics.median(per_event),
        "p95_ms": percentile(per_event, 95),
        "aws_per_event": aws / events,
        "chat_per_event": (len(chat.slack.requests) + len(chat.teams.requests) - chat_before) / events,
        "by_operation": {k: v / events for k, v in sorted(calls.counter.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200, help="single-event invocations per scenario")
    parser.add_argument("--teams", action="store_true", help="configure Teams too (Slack and Teams)")
    parser.add_argument("--no-write", action="store_true", help="print only; do not update RESULTS.md")
    args = parser.parse_args(argv)

    results = []
    with EmbeddedAws() as aws, LocalChatEndpoint() as chat:
        local = LocalAlerts(
            aws, environment=template_environment("alerts"), chat=chat, slack=True, teams=args.teams
        ).open()
        calls = Calls()
        session().events.register("before-call.*.*", calls)
        os.environ.update(
            {
                **local.environment,
                "AWS_LAMBDA_FUNCTION_NAME": "batchpilot-alerts",
                "AWS_LAMBDA_LOG_FORMAT": "JSON",
            }
        )
        handler = load_app("alerts")
        from batchpilot.shared.observability import logger

        logger.registered_handler.setStream(io.StringIO())  # its log lines stay out of the report
        n = args.events
        chats = "Slack + Teams" if args.teams else "Slack"
        critical = sample("service-job/failed-validation")
        info = sample("batch-job/failed-spot-reclaim")
        silent = sample("service-job/running")
        succeeded = sample("service-job/succeeded")
        reclaim = sample("batch-job/failed-spot-reclaim")
        pull = sample("batch-job/failed-cannot-pull-container")
        # warm-up: cold start, first secret read (cached 5 minutes afterwards), first clients
        scenario("warm-up", handler, [[with_job(info, 10_000_000 + i)] for i in range(5)], calls, chat, local)
        plan = [
            (
                f"critical failure (SNS + {chats}), 1 event per batch",
                [[with_job(critical, i)] for i in range(n)],
            ),
            (f"info failure ({chats}), 1 event per batch", [[with_job(info, 100_000 + i)] for i in range(n)]),
            ("duplicate of a sent fact, 1 event per batch", [[with_job(critical, i)] for i in range(n)]),
            (
                "terminal success (silent), 1 event per batch",
                [[with_job(succeeded, 2 * 10**5 + i)] for i in range(n)],
            ),
            (
                "running (silent, non-terminal), 1 event per batch",
                [[with_job(silent, 3 * 10**5 + i)] for i in range(n)],
            ),
            (
                "spot reclaim burst: 40 info failures in one batch (1 digest)",
                [[with_job(reclaim, 400_000 + b * 40 + i) for i in range(40)] for b in range(5)],
            ),
            (
                "critical burst: 40 failures in one batch (40 pages, 1 digest)",
                [[with_job(pull, 500_000 + b * 40 + i) for i in range(40)] for b in range(5)],
            ),
        ]
        for name, batches in plan:
            results.append(scenario(name, handler, batches, calls, chat, local))

    rows = ["| scenario | events | median ms/event | p95 ms/event | AWS calls/event | chat calls/event |"]
    rows.append("|---|---|---|---|---|---|")
    for r in results:
        rows.append(
            f"| {r['name']} | {r['events']} | {r['median_ms']:.2f} | {r['p95_ms']:.2f} | "
            f"{r['aws_per_event']:.2f} | {r['chat_per_event']:.2f} |"
        )
    detail = ["AWS calls per event by operation:", ""]
    for r in results:
        ops = ", ".join(f"{op} {v:.2f}" for op, v in r["by_operation"].items()) or "none"
        detail.append(f"- {r['name']}: {ops}")
    body = "\n".join(
        [
            f"## Alerts handler: per-event cost and calls (Python {sys.version.split()[0]})",
            "",
            f"Run {now()} with `.venv/bin/python benchmarks/bench_alerts.py --events {args.events}"
            + (" --teams`." if args.teams else "`."),
            "",
            "- What: `functions/alerts/app.py` with the template's environment, in the embedded AWS (moto",
            "  SNS, DynamoDB, Secrets Manager, in-process) and the local chat endpoint (HTTP on",
            f"  127.0.0.1; {'Slack and Teams webhooks' if args.teams else 'Slack webhook'}).",
            "  Each event is about a new job unless the scenario says duplicate.",
            "- Time per event = wall time of one invocation / events in it; it includes moto and the",
            "  loopback HTTP round trip, so it is an upper bound of the handler's own cost, not AWS latency.",
            "- Calls are counted with a botocore `before-call` hook (AWS) and by the endpoint (chat).",
            "",
            *rows,
            "",
            *detail,
            "",
            "Machine:",
            "",
            machine_markdown(machine()),
        ]
    )
    print(body)
    if not args.no_write:
        write_section("alerts-teams" if args.teams else "alerts", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
