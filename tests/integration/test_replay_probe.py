"""The replay runner against a small template of its own with probe handlers (in tmp_path).

The probe handlers record exactly what they were given (the SQS event, the Lambda context, the
environment they saw at import), and misbehave on request: raise, report a batch item failure, log
an error, print to stdout. That checks delivery, template reading and error reporting without
depending on the real functions.
"""

from __future__ import annotations

import json
import os
import socket
import textwrap
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local.cli import main
from batchpilot_local.embedded_aws import EmbeddedAws, NetworkBlockedError
from batchpilot_local.inputs import read_inputs
from batchpilot_local.replay import Replayer
from batchpilot_local.report import parse_output
from batchpilot_local.template import TemplateError, load_template

TEMPLATE = """\
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Parameters:
  OutFile:
    Type: String
    Default: {out}
  Namespace:
    Type: String
    Default: ProbeNamespace
Conditions:
  IsProd: !Equals [!Ref Namespace, prod]
Globals:
  Function:
    Timeout: 7
    MemorySize: 512
    Environment:
      Variables:
        GREETING: from-globals
        NAMESPACE: !Ref Namespace
        REGION_VAR: !Ref AWS::Region
        TABLE: !Ref StateTable
        QUEUE_NAME: !GetAtt ProbeQueue.QueueName
        MODE: !If [IsProd, prod, dev]
        DROPPED: !If [IsProd, x, !Ref AWS::NoValue]
        SUBBED: !Sub "${{AWS::StackName}}-${{Namespace}}"
        CAPTURE_FILE: !Ref OutFile
Resources:
  StateTable:
    Type: AWS::DynamoDB::Table
  ProbeFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/probe/
      Handler: app.lambda_handler
      Timeout: 11
      Environment:
        Variables:
          GREETING: from-function
      Events:
        FromQueue:
          Type: SQS
          Properties:
            Queue: !GetAtt ProbeQueue.Arn
            FunctionResponseTypes: [ReportBatchItemFailures]
  ProbeQueue:
    Type: AWS::SQS::Queue
  ProbeRule:
    Type: AWS::Events::Rule
    Properties:
      EventBusName: default
      EventPattern:
        source: [test.probe]
      Targets:
        - Id: probe
          Arn: !GetAtt ProbeQueue.Arn
  DisabledRule:
    Type: AWS::Events::Rule
    Properties:
      State: DISABLED
      EventPattern:
        source: [test.disabled]
      Targets:
        - Id: probe
          Arn: !GetAtt ProbeQueue.Arn
  OwnBusRule:
    Type: AWS::Events::Rule
    Properties:
      EventBusName: own-bus
      EventPattern:
        source: [test.ownbus]
      Targets:
        - Id: probe
          Arn: !GetAtt ProbeQueue.Arn
  OtherFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/other
      Handler: handler.main
      Events:
        FromQueue:
          Type: SQS
          Properties:
            Queue:
              Fn::GetAtt: OtherQueue.Arn
  OtherQueue:
    Type: AWS::SQS::Queue
  OtherRule:
    Type: AWS::Events::Rule
    Properties:
      EventPattern:
        source: [test.probe, test.other]
        detail-type: [{{prefix: Probe}}]
      Targets:
        - Id: other
          Arn:
            Fn::GetAtt: [OtherQueue, Arn]
  BrokenFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/broken/
      Handler: app.lambda_handler
      Events:
        FromQueue:
          Type: SQS
          Properties:
            Queue: !GetAtt BrokenQueue.Arn
  BrokenQueue:
    Type: AWS::SQS::Queue
  BrokenRule:
    Type: AWS::Events::Rule
    Properties:
      EventPattern:
        source: [test.broken]
      Targets:
        - Id: broken
          Arn: !GetAtt BrokenQueue.Arn
"""

PROBE_APP = """
import json
import os

NAMES = ("GREETING", "NAMESPACE", "REGION_VAR", "TABLE", "QUEUE_NAME", "MODE", "DROPPED", "SUBBED",
         "AWS_LAMBDA_FUNCTION_NAME", "AWS_ACCESS_KEY_ID", "AWS_DEFAULT_REGION")
SEEN_AT_IMPORT = {name: os.environ.get(name) for name in NAMES}
print("probe: cold start output")


def lambda_handler(event, context):
    record = event["Records"][0]
    body = json.loads(record["body"])
    seen = {
        "event": event,
        "import_env": SEEN_AT_IMPORT,
        "context": {
            "function_name": context.function_name,
            "memory": context.memory_limit_in_mb,
            "arn": context.invoked_function_arn,
            "request_id": context.aws_request_id,
            "remaining": context.get_remaining_time_in_millis(),
        },
    }
    with open(os.environ["CAPTURE_FILE"], "a", encoding="utf-8") as out:
        out.write(json.dumps(seen) + "\\n")
    print("LEAK: probe handler stdout")
    mode = body.get("detail", {}).get("probe", "ok")
    if mode == "raise":
        raise RuntimeError("probe exploded\\nsecond line")
    if mode == "fail":
        return {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    if mode == "error-log":
        print(json.dumps({"level": "ERROR", "message": "probe broke", "error": "bad thing"}))
    if mode == "invalid-log":
        print(json.dumps({"level": "WARNING", "message": "event not processed", "outcome": "invalid",
                          "error": "detail.status: Field required"}))
    if mode == "warning-log":
        print(json.dumps({"level": "WARNING", "message": "just a warning", "outcome": "ignored"}))
    if mode in ("raise-capacity", "bad-capacity"):
        import boto3
        limits = [12] if mode == "raise-capacity" else ["twelve", -1]  # invalid type, then rejected value
        batch = boto3.client("batch")
        batch.describe_service_environments()  # a read: never an action
        for limit in limits:
            try:
                batch.update_service_environment(
                    serviceEnvironment="gpu-env",
                    capacityLimits=[{"maxCapacity": limit, "capacityUnit": "NUM_INSTANCES"}],
                )
            except Exception:
                pass
    if mode in ("publish", "loop"):
        import boto3
        source, detail = ("test.other", {}) if mode == "publish" else ("test.probe", {"probe": "loop"})
        boto3.client("events").put_events(
            Entries=[{"Source": source, "DetailType": "Probe Published", "Detail": json.dumps(detail)}]
        )
    print(json.dumps({
        "_aws": {"Timestamp": 1795487509000, "CloudWatchMetrics": [{
            "Namespace": "Probe", "Dimensions": [["Kind", "service"]],
            "Metrics": [{"Name": "ProbeCount", "Unit": "Count"}, {"Name": "ProbeValues", "Unit": "Seconds"}],
        }]},
        "Kind": mode, "service": "probe", "ProbeCount": [1.0], "ProbeValues": [1.5, 2.5],
    }))
    return {"batchItemFailures": []}
"""

OTHER_HANDLER = """
import json


def main(event, context):
    print(json.dumps({
        "_aws": {"Timestamp": 1795487509000, "CloudWatchMetrics": [{
            "Namespace": "Probe",
            "Dimensions": [["service"]],
            "Metrics": [{"Name": "OtherCount", "Unit": "Count"}],
        }]},
        "service": "other", "OtherCount": 1,
    }))
"""

BROKEN_APP = """
import os

with open(os.environ["CAPTURE_FILE"] + ".imports", "a", encoding="utf-8") as out:
    out.write("import\\n")
raise ValueError("broken at import")
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """A project folder with the probe template and handlers; returns the template path."""
    out = tmp_path / "seen.jsonl"
    for folder, name, code in (
        ("probe", "app.py", PROBE_APP),
        ("other", "handler.py", OTHER_HANDLER),
        ("broken", "app.py", BROKEN_APP),
    ):
        (tmp_path / "functions" / folder).mkdir(parents=True)
        (tmp_path / "functions" / folder / name).write_text(textwrap.dedent(code), encoding="utf-8")
    template = tmp_path / "template.yaml"
    template.write_text(TEMPLATE.format(out=out), encoding="utf-8")
    return template


def probe_event(event_id: str, mode: str = "ok", source: str = "test.probe") -> dict[str, Any]:
    return {
        "version": "0",
        "id": event_id,
        "detail-type": "Probe Happened",
        "source": source,
        "account": "111122223333",
        "time": "2026-11-24T02:31:49Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {"probe": mode, "text": "naïve ✓"},
    }


def seen(app: Path) -> list[dict[str, Any]]:
    path = app.parent / "seen.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ------------------------------------------------------------------------------------ template
def test_template_routes_and_function_specs(app: Path) -> None:
    template = load_template(app)

    assert [(r.rule, r.event_bus, r.queue, r.function.short_name) for r in template.routes] == [
        ("ProbeRule", "default", "ProbeQueue", "probe"),
        ("OwnBusRule", "own-bus", "ProbeQueue", "probe"),
        ("OtherRule", "default", "OtherQueue", "other"),
        ("BrokenRule", "default", "BrokenQueue", "broken"),
    ]
    probe = template.functions["probe"]
    assert probe.logical_id == "ProbeFunction"
    assert probe.handler == "app.lambda_handler" and probe.handler_name == "lambda_handler"
    assert probe.module_file == app.parent / "functions" / "probe" / "app.py"
    assert (probe.timeout, probe.memory_size) == (11, 512)
    assert template.functions["other"].timeout == 7
    assert template.functions["other"].module_file.name == "handler.py"
    assert probe.environment == {
        "GREETING": "from-function",
        "NAMESPACE": "ProbeNamespace",
        "REGION_VAR": "us-east-1",
        "TABLE": "StateTable",
        "QUEUE_NAME": "ProbeQueue",
        "MODE": "dev",
        "SUBBED": "batchpilot-ProbeNamespace",
        "CAPTURE_FILE": str(app.parent / "seen.jsonl"),
    }


def test_real_template_routes_job_events_to_the_metrics_function() -> None:
    template = load_template(Path(__file__).resolve().parents[2] / "template.yaml")
    metrics = template.functions["metrics"]

    assert metrics.logical_id == "MetricsFunction" and metrics.queues == ("MetricsQueue",)
    assert metrics.environment["POWERTOOLS_METRICS_NAMESPACE"] == "BatchPilot"
    assert metrics.environment["POWERTOOLS_SERVICE_NAME"] == "batchpilot"
    assert {r.queue for r in template.routes if r.function is metrics} == {"MetricsQueue"}


def test_invalid_template_is_a_template_error(tmp_path: Path) -> None:
    bad = tmp_path / "template.yaml"
    bad.write_text("Resources: [\n", encoding="utf-8")
    with pytest.raises(TemplateError, match=r"template\.yaml"):
        load_template(bad)


# ------------------------------------------------------------------------------------ delivery
def test_event_is_delivered_unchanged_in_the_lambda_sqs_shape(app: Path) -> None:
    event = probe_event("7e40434a-a184-4b17-8e0c-a487d9d23777")

    [report] = Replayer(app).run([event])

    assert report.errors == []
    assert report.functions == ["other", "probe"]
    [call] = seen(app)
    [record] = call["event"]["Records"]
    assert json.loads(record["body"]) == event
    assert json.loads(record["body"])["id"] == "7e40434a-a184-4b17-8e0c-a487d9d23777"
    assert set(record) == {
        "messageId",
        "receiptHandle",
        "body",
        "attributes",
        "messageAttributes",
        "md5OfBody",
        "eventSource",
        "eventSourceARN",
        "awsRegion",
    }
    assert set(record["attributes"]) == {
        "ApproximateReceiveCount",
        "SentTimestamp",
        "SenderId",
        "ApproximateFirstReceiveTimestamp",
    }
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"] == "arn:aws:sqs:us-east-1:111122223333:ProbeQueue"
    assert record["awsRegion"] == "us-east-1"
    assert record["messageAttributes"] == {}
    assert len(record["md5OfBody"]) == 32


def test_handler_sees_its_environment_at_import_and_a_lambda_context(app: Path) -> None:
    before = dict(os.environ)

    Replayer(app).run([probe_event("a"), probe_event("b")])

    first, second = seen(app)
    assert first["import_env"] == {
        "GREETING": "from-function",
        "NAMESPACE": "ProbeNamespace",
        "REGION_VAR": "us-east-1",
        "TABLE": "StateTable",
        "QUEUE_NAME": "ProbeQueue",
        "MODE": "dev",
        "DROPPED": None,
        "SUBBED": "batchpilot-ProbeNamespace",
        "AWS_LAMBDA_FUNCTION_NAME": "batchpilot-probe",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    assert second["import_env"] == first["import_env"]  # imported once per run
    context = first["context"]
    assert context["function_name"] == "batchpilot-probe"
    assert context["memory"] == 512
    assert context["arn"] == "arn:aws:lambda:us-east-1:111122223333:function:batchpilot-probe"
    assert 0 < context["remaining"] <= 11_000
    assert first["context"]["request_id"] != second["context"]["request_id"]
    assert dict(os.environ) == before


def test_rules_that_are_disabled_or_on_another_bus_do_not_route(app: Path) -> None:
    events = [
        probe_event("other-only", source="test.other"),
        probe_event("disabled", source="test.disabled"),
        probe_event("own-bus", source="test.ownbus"),
        probe_event("nobody", source="aws.ec2"),
    ]

    reports = Replayer(app).run(events)

    assert [r.functions for r in reports] == [["other"], [], [], []]
    assert [r.ignored for r in reports] == [False, True, True, True]
    assert all(r.errors == [] for r in reports)


# ------------------------------------------------------------------------------ errors, output
def test_handler_errors_are_reported_per_event_and_the_run_goes_on(app: Path) -> None:
    events = [
        probe_event("raise", "raise"),
        probe_event("fail", "fail"),
        probe_event("error-log", "error-log"),
        probe_event("invalid-log", "invalid-log"),
        probe_event("warning-log", "warning-log"),
        probe_event("ok", "ok"),
    ]

    reports = {r.event_id: r for r in Replayer(app).run(events)}

    assert reports["raise"].errors == ["probe: record failed: RuntimeError: probe exploded"]
    assert reports["fail"].errors == ["probe: record failed: reported in batchItemFailures"]
    assert reports["error-log"].errors == ["probe: probe broke: bad thing"]
    assert reports["invalid-log"].errors == ["probe: event not processed: detail.status: Field required"]
    assert reports["warning-log"].errors == []
    assert reports["ok"].errors == []
    assert [m.name for m in reports["ok"].metrics] == ["OtherCount", "ProbeCount", "ProbeValues"]


def test_a_module_that_fails_to_import_is_reported_for_every_event_and_imported_once(app: Path) -> None:
    reports = Replayer(app).run(
        [probe_event("b1", source="test.broken"), probe_event("b2", source="test.broken")]
    )

    assert len(reports) == 2
    for report in reports:
        assert report.functions == ["broken"]
        assert report.errors == ["broken: init failed: ValueError: broken at import"]
    imports = (app.parent / "seen.jsonl.imports").read_text(encoding="utf-8").splitlines()
    assert imports == ["import"]


def test_emf_is_parsed_into_metrics(app: Path) -> None:
    [report] = Replayer(app).run([probe_event("m", source="test.probe")])

    by_name = {m.name: m.to_dict() for m in report.metrics}
    assert by_name["ProbeCount"] == {
        "name": "ProbeCount",
        "unit": "Count",
        "value": 1.0,
        "dimensions": {"Kind": "ok", "service": "probe"},
        "timestamp": "2026-11-24T02:31:49.000Z",
    }
    assert by_name["ProbeValues"]["value"] == [1.5, 2.5]
    assert by_name["OtherCount"]["value"] == 1.0


def test_parse_output_ignores_plain_lines_and_flags_malformed_blobs() -> None:
    output = "\n".join(
        [
            "plain text",
            "{not json",
            json.dumps({"level": "INFO", "message": "fine"}),
            json.dumps({"level": "CRITICAL", "message": "down"}),
            json.dumps({"_aws": {"Timestamp": 0, "CloudWatchMetrics": [{"Metrics": [{"Name": "X"}]}]}}),
        ]
    )

    metrics, errors = parse_output("fn", output)

    assert metrics == []
    assert errors == ["fn: down", "fn: EMF metric X has no numeric value"]


def test_parse_output_skips_quiet_log_lines_unread_but_keeps_their_metrics_and_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """INFO/DEBUG lines as Powertools' Logger writes them are skipped without parsing; a quiet line
    that carries EMF, or whose last ``level`` key says ERROR, is still read."""
    import io
    import logging

    from aws_lambda_powertools import Logger
    from batchpilot_local import report

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = Logger(service="parse-output-probe", level="DEBUG", logger_handler=handler)
    try:
        logger.info("fine", extra={"outcome": "invalid"})
        logger.debug("detail")
    finally:
        logger.removeHandler(handler)
    written = stream.getvalue().splitlines()
    assert len(written) == 2 and all(line.startswith(report._QUIET_PREFIXES) for line in written)
    emf = {
        "_aws": {
            "Timestamp": 0,
            "CloudWatchMetrics": [{"Namespace": "N", "Dimensions": [[]], "Metrics": [{"Name": "X"}]}],
        },
        "X": 2,
    }
    output = "\n".join(
        [
            *written,
            '{"level":"INFO","message":"with metrics",' + json.dumps(emf)[1:],
            '{"level":"INFO","message":"overridden","level":"ERROR"}',
        ]
    )

    decoded: list[str] = []
    decode = report._decoded

    def counting(text: str) -> Any:
        decoded.append(text)
        return decode(text)

    monkeypatch.setattr(report, "_decoded", counting)
    metrics, errors = parse_output("fn", output)
    monkeypatch.undo()

    assert [(m.name, m.value) for m in metrics] == [("X", 2.0)]
    assert errors == ["fn: overridden"]
    assert decoded == output.splitlines()[2:]  # Powertools' two quiet lines were never decoded


def test_probe_stdout_never_reaches_the_report_stream(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = app.parent / "events.json"
    path.write_text(json.dumps([probe_event("x"), probe_event("y", "raise")]), encoding="utf-8")

    # --one-by-one: the probe handler looks at its first record only.
    code = main(["replay", "--format", "json", "--one-by-one", "--template", str(app), str(path)])

    out = capsys.readouterr().out
    assert code == 1
    assert "LEAK" not in out and "cold start output" not in out and "_aws" not in out
    assert [json.loads(line)["event_id"] for line in out.splitlines()] == ["x", "y"]


# ---------------------------------------------------------------------------------- embedded AWS
def test_embedded_aws_fakes_credentials_and_restores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "outer-key")
    monkeypatch.setenv("AWS_PROFILE", "outer-profile")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "http://example.invalid")

    with EmbeddedAws() as aws:
        assert os.environ["AWS_ACCESS_KEY_ID"] == "testing"
        assert os.environ["AWS_DEFAULT_REGION"] == "us-east-1"
        assert "AWS_PROFILE" not in os.environ and "AWS_ENDPOINT_URL_SQS" not in os.environ
        url = aws.create_queue("Q")
        assert url.endswith("/111122223333/Q")

    assert os.environ["AWS_ACCESS_KEY_ID"] == "outer-key"
    assert os.environ["AWS_PROFILE"] == "outer-profile"
    assert os.environ["AWS_ENDPOINT_URL_SQS"] == "http://example.invalid"


def test_embedded_aws_blocks_the_network_but_not_loopback() -> None:
    with EmbeddedAws():
        outside = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            with pytest.raises(NetworkBlockedError):
                outside.connect(("203.0.113.10", 443))  # TEST-NET-3: never reached either way
        finally:
            outside.close()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            with socket.create_connection(server.getsockname(), timeout=5):
                pass
    assert socket.socket.connect.__qualname__ != "_network_guard.<locals>.connect"


def test_processed_records_are_deleted_and_failed_ones_stay() -> None:
    with EmbeddedAws() as aws:
        aws.create_queue("Q", attributes={"VisibilityTimeout": "600"})
        aws.send("Q", '{"n": 1}')
        aws.send("Q", '{"n": 2}')
        records = aws.receive_as_lambda_event("Q")["Records"]
        assert sorted(json.loads(r["body"])["n"] for r in records) == [1, 2]

        deleted = aws.delete_processed("Q", records, failed_ids={records[0]["messageId"]})

        assert deleted == 1
        assert aws.approximate_depth("Q") == 1


# ---------------------------------------------------------------------------- own-event cascade
def test_events_a_handler_publishes_reach_the_functions_whose_rules_match(app: Path) -> None:
    [plain, publishing] = Replayer(app).run([probe_event("e-ok"), probe_event("e-pub", mode="publish")])

    def other_count(report: Any) -> int:
        return sum(1 for m in report.metrics if m.name == "OtherCount")

    assert plain.functions == ["other", "probe"]
    assert other_count(plain) == 1  # the input event itself matches OtherRule
    # The published event (source test.other, detail-type "Probe Published") reaches OtherRule only.
    assert publishing.functions == ["other", "probe"]
    assert other_count(publishing) == 2
    assert publishing.errors == []
    assert len(seen(app)) == 2  # the probe ran once per input event, not for the published one


def test_a_rule_loop_is_cut_off_and_reported(app: Path) -> None:
    [report] = Replayer(app).run([probe_event("e-loop", mode="loop")])
    assert any("still queued after" in error for error in report.errors)
    assert 2 <= len(seen(app)) <= 7  # bounded, not forever


# ------------------------------------------------------------------------------------ actions
def test_world_changing_calls_become_actions_in_call_order(app: Path) -> None:
    world = {
        "service_environments": [
            {"name": "gpu-env", "capacityLimits": [{"maxCapacity": 4, "capacityUnit": "NUM_INSTANCES"}]}
        ]
    }
    [raised, plain] = Replayer(app).run(
        [probe_event("e-cap", mode="raise-capacity"), probe_event("e-plain")], worlds=[world]
    )
    assert raised.actions == [
        {
            "type": "update-capacity",
            "operation": "batch:UpdateServiceEnvironment",
            "request": {
                "serviceEnvironment": "gpu-env",
                "capacityLimits": [{"maxCapacity": 12, "capacityUnit": "NUM_INSTANCES"}],
            },
        }
    ]
    assert plain.actions == []  # each event lists only its own calls


def test_refused_calls_are_not_actions_and_failed_ones_carry_their_error(app: Path) -> None:
    world = {
        "service_environments": [
            {"name": "gpu-env", "capacityLimits": [{"maxCapacity": 4, "capacityUnit": "NUM_INSTANCES"}]}
        ]
    }
    [report] = Replayer(app).run([probe_event("e-bad", mode="bad-capacity")], worlds=[world])
    # "twelve" fails botocore's parameter validation (never sent); -1 is sent and rejected by Batch.
    assert [(a["request"]["capacityLimits"][0]["maxCapacity"], a.get("error")) for a in report.actions] == [
        (-1, "ClientException")
    ]


def test_each_scenario_runs_in_an_embedded_aws_of_its_own(app: Path, tmp_path: Path) -> None:
    env = {"name": "gpu-env", "capacityLimits": [{"maxCapacity": 4, "capacityUnit": "NUM_INSTANCES"}]}
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "a.json").write_text(
        json.dumps(
            {"world": {"service_environments": [env]}, "events": [probe_event("in-a", mode="raise-capacity")]}
        )
    )
    (scenarios / "b.json").write_text(
        json.dumps({"world": {}, "events": [probe_event("in-b", mode="raise-capacity")]})
    )
    replay_input = read_inputs([str(scenarios)])
    reports = Replayer(app).run(
        replay_input.events,
        scopes=[item.scope for item in replay_input.items],
        scope_worlds={world.origin: world.data for world in replay_input.worlds},
    )
    in_a, in_b = reports
    assert [a.get("error") for a in in_a.actions] == [None]  # a's world has the environment
    assert [a.get("error") for a in in_b.actions] == ["ClientException"]  # b's world does not


def test_the_cli_keeps_scenarios_apart(app: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"name": "gpu-env", "capacityLimits": [{"maxCapacity": 4, "capacityUnit": "NUM_INSTANCES"}]}
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "a.json").write_text(
        json.dumps(
            {"world": {"service_environments": [env]}, "events": [probe_event("in-a", mode="raise-capacity")]}
        )
    )
    (tmp_path / "s" / "b.json").write_text(
        json.dumps({"events": [probe_event("in-b", mode="raise-capacity")]})
    )
    assert main(["replay", "--format", "json", "--template", str(app), str(tmp_path / "s")]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [[a.get("error") for a in line["actions"]] for line in lines] == [[None], ["ClientException"]]


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    return isinstance(value, list) and any(_has_float(v) for v in value)


def test_a_reports_json_line_reads_back_as_its_values() -> None:
    """``EventReport.to_json`` (pydantic-core's encoder) is one line of compact JSON that reads
    back as the report's values, for any JSON values, lone surrogates (from a world's tags, say)
    and nesting deeper than pydantic-core goes included: byte for byte what ``json.dumps(...,
    ensure_ascii=False, separators=(",", ":"))`` wrote when it holds no float (a float may be
    spelt otherwise: ``1e-5`` or ``0.00001`` for ``1e-05``)."""
    from batchpilot_local.report import EventReport
    from hypothesis import given, settings
    from hypothesis import strategies as st

    text = st.text() | st.text(st.characters(categories=["Cs", "L"]), max_size=4)  # Cs: surrogates
    values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
        lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
        max_leaves=12,
    )

    @settings(max_examples=300, deadline=None)
    @given(detail=values, words=text)
    def check(detail: Any, words: str) -> None:
        report = EventReport(index=0, event_id=words, detail_type=None, source="s", errors=[words])
        report.own_events.append({"id": words, "detail_type": "d", "time": None, "detail": detail})
        line = report.to_json()
        assert "\n" not in line
        assert json.loads(line) == report.to_dict()
        written = json.dumps(report.to_dict(), ensure_ascii=False, separators=(",", ":"))
        if not _has_float(detail) and not any("\ud800" <= c <= "\udfff" for c in written):
            assert line == written  # with a surrogate, the fallback (json, ASCII) writes \\udXXX

    check()
    deep: Any = "bottom"
    for _ in range(300):
        deep = [deep]
    report = EventReport(index=0, event_id="deep", detail_type=None, source="s")
    report.own_events.append({"id": "x", "detail_type": "d", "time": None, "detail": deep})
    assert json.loads(report.to_json()) == report.to_dict()
