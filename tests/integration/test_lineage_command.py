"""``batchpilot lineage``: a job's lineage from the state table and Batch, against the embedded AWS."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from datetime import datetime

from batchpilot.recovery.service import Action
from batchpilot_local.cli import main
from batchpilot_local.testing.recovery import (
    BUCKET,
    TABLE,
    checkpoint_item,
    container_job_item,
    event_of,
    harness,
    world,
)
from batchpilot_local.testing.samples import sample

SPOT = "batch-job/failed-spot-reclaim"


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_lineage_prints_every_attempt_and_where_it_runs_now() -> None:
    seed = world(
        jobs=[container_job_item(SPOT)],
        checkpoints=[checkpoint_item(f"s3://{BUCKET}/llama-ft/run-39/", "2026-11-21T05:00:00Z")],
    )
    with harness(seed) as h:
        result = h.recoverer().handle(event_of(sample(SPOT)))
        assert result.action is Action.RESUBMITTED and result.new_job_arn
        for asked in (result.job_arn, result.new_job_arn, sample(SPOT)["detail"]["jobName"]):
            code, out, err = _run("lineage", asked, "--table", TABLE, "--region", "us-east-1")
            assert (code, err) == (0, ""), (asked, err)
            assert f"original   llama3-8b-lora-ft-run-39  {result.job_arn}" in out
            assert f"1  submitted  {result.new_job_name}  {result.new_job_arn}" in out
            assert "why: SPOT_INTERRUPTION: Host EC2 (instance" in out
            assert (
                f"checkpoint: s3://{BUCKET}/llama-ft/run-39/step-1000/model.pt (2026-11-21T05:00:00+00:00)"
                in out
            )
            assert f"now: {result.new_job_arn} is " in out


def test_an_unknown_job_is_one_clear_line_and_exit_1() -> None:
    with harness(world(jobs=[container_job_item(SPOT)])):
        arn = sample(SPOT)["detail"]["jobArn"]
        code, out, err = _run("lineage", arn, "--table", TABLE)
        assert (code, out) == (1, "")
        assert err == f"batchpilot lineage: {arn} has no lineage: recovery never resubmitted it\n"
        code, out, err = _run("lineage", "no-such-job", "--table", TABLE)
        assert (code, out) == (1, "")
        assert err == "batchpilot lineage: no job named no-such-job in Batch or SageMaker\n"


def test_lineage_json_is_one_object_with_every_attempt() -> None:
    seed = world(
        jobs=[container_job_item(SPOT)],
        checkpoints=[checkpoint_item(f"s3://{BUCKET}/llama-ft/run-39/", "2026-11-21T05:00:00Z")],
    )
    with harness(seed) as h:
        result = h.recoverer().handle(event_of(sample(SPOT)))
        assert result.action is Action.RESUBMITTED and result.new_job_arn
        text_code, text_out, _ = _run("lineage", result.new_job_arn, "--table", TABLE)
        code, out, err = _run("lineage", result.new_job_arn, "--table", TABLE, "--format", "json")
    assert (code, err, text_code) == (0, "", 0)
    assert out.endswith("\n") and out.count("\n") == 1, "one JSON object on one line"
    data = json.loads(out)
    assert data["lineage_id"].startswith("bp")
    assert data["job_kind"] == "container-job"
    assert data["original"] == {
        "job_name": "llama3-8b-lora-ft-run-39",
        "job_arn": result.job_arn,
        "first_started_at": data["original"]["first_started_at"],
    }
    assert len(data["attempts"]) == 1
    attempt = data["attempts"][0]
    assert attempt["attempt"] == 1
    assert attempt["state"] == "SUBMITTED"
    assert (attempt["job_name"], attempt["job_arn"]) == (result.new_job_name, result.new_job_arn)
    assert attempt["failed_job_arn"] == result.job_arn
    assert attempt["category"] == "SPOT_INTERRUPTION"
    assert attempt["reason"].startswith("Host EC2 (instance")
    assert attempt["restarts_from_step_zero"] is False
    assert attempt["checkpoint"]["object"] == f"s3://{BUCKET}/llama-ft/run-39/step-1000/model.pt"
    assert attempt["checkpoint"]["time"] == "2026-11-21T05:00:00+00:00"
    assert datetime.fromisoformat(attempt["decided_at"]).tzinfo is not None
    # Where the newest job stands: the same status the text format prints.
    assert data["newest"]["job_arn"] == result.new_job_arn
    status = data["newest"]["status"]
    assert status and f"now: {result.new_job_arn} is {status}\n" in text_out
    # Asked about the resubmitted job itself: attempt 1 of the lineage, as the text says.
    assert data["asked_attempt"] == 1
    assert "(you asked about attempt 1 of this lineage)" in text_out


def test_lineage_json_errors_stay_on_stderr() -> None:
    with harness(world(jobs=[container_job_item(SPOT)])):
        code, out, err = _run("lineage", "no-such-job", "--table", TABLE, "--format", "json")
    assert (code, out) == (1, "")
    assert err == "batchpilot lineage: no job named no-such-job in Batch or SageMaker\n"
