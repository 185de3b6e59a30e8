"""``batchpilot queue``: the ledger's running and waiting jobs with expected starts, against the
embedded AWS: the sample world (three fair shares) replayed by ``--sample``, a scenario whose
scheduling policy cannot be read, and a ledger that is empty, stale or unreachable."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from batchpilot.io.dynamodb.ledger import LedgerStateStore
from batchpilot.ledger.model import JobDetails, JobStatus, Observation, transition
from batchpilot.shared.classification import JobKind
from batchpilot_local.cli import main
from batchpilot_local.embedded_aws import EmbeddedAws
from batchpilot_local.queue_command import EXIT_EMPTY, EXIT_STALE, EXIT_UNREACHABLE, SAMPLE_SCENARIO
from batchpilot_local.testing.harness import aws_with_state_table
from batchpilot_local.testing.paths import ROOT

SAMPLE = ROOT / "events" / SAMPLE_SCENARIO
ARN = "arn:aws:batch:us-east-1:111122223333:service-job/"


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def sample_json() -> dict[str, Any]:
    code, out, err = _run("queue", "--sample", "--format", "json", "--samples", "5")
    assert (code, err) == (0, "")
    parsed: dict[str, Any] = json.loads(out)
    return parsed


def test_the_sample_world_shows_each_share_with_positions_and_expected_starts(
    sample_json: dict[str, Any],
) -> None:
    assert sample_json["now"] == "2026-11-20T22:10:00+00:00"
    assert sample_json["queues"] == [
        {
            "name": "article-q",
            "service_environment": "article-env",
            "scheduling": "FAIR_SHARE",
            "no_forecast": None,
            "running": 3,
            "waiting": 2,
        }
    ]
    jobs = {job["job_name"]: job for job in sample_json["jobs"]}
    assert {name: (j["share"], j["status"]) for name, j in jobs.items()} == {
        "hi-1": ("HIGHPRI", "RUNNING"),
        "hi-2": ("HIGHPRI", "RUNNING"),
        "mid-1": ("MIDPRI", "RUNNING"),
        "mid-2": ("MIDPRI", "RUNNABLE"),
        "low-1": ("LOWPRI", "RUNNABLE"),
    }
    mid = jobs["mid-2"]
    assert (mid["position"], mid["scheduling_priority"], mid["instances"]) == (1, 50, 2)
    assert mid["waiting_since"] == "2026-11-20T21:40:00+00:00"
    # low-1 was requeued at 22:05: its wait restarts then (the RUNNABLE index's key).
    assert jobs["low-1"]["waiting_since"] == "2026-11-20T22:05:00+00:00"
    assert jobs["hi-1"]["started_at"] == "2026-11-20T21:10:00+00:00"
    assert jobs["hi-1"]["expected_start"] is None
    for name in ("mid-2", "low-1"):
        expected = jobs[name]["expected_start"]
        assert 0 <= expected["p10_s"] <= expected["median_s"] <= expected["p90_s"], name
        assert expected["basis"] == "no finished jobs: assumed median 1 h"
    assert jobs["mid-2"]["recoveries"] == 0


def test_the_text_view_and_its_filters() -> None:
    code, out, err = _run("queue", "--sample", "--share", "MID*", "--samples", "3")
    assert (code, err) == (0, "batchpilot queue: the filters show 2 of 5 running and waiting jobs\n")
    assert "job queue article-q (service environment article-env, FAIR_SHARE): 1 running, 1 waiting" in out
    assert "mid-2" in out
    assert "hi-1" not in out
    assert "Expected starts: median and p90 of simulated runs from now" in out
    lines = [line for line in out.splitlines() if "mid-2" in line]
    assert len(lines) == 1
    assert lines[0].split()[:5] == ["MIDPRI", "1", "mid-2", "RUNNABLE", "50"]
    assert "11-20 21:40 (30m ago)" in lines[0]


def test_a_filter_that_hides_every_job_says_so() -> None:
    code, out, err = _run("queue", "--sample", "--share", "NOPE", "--samples", "3")
    assert code == 0
    assert "no running or waiting jobs" in out
    assert err == "batchpilot queue: the filters show 0 of 5 running and waiting jobs\n"


def test_owner_needs_tags_and_watch_needs_an_account() -> None:
    code, out, err = _run("queue", "--sample", "--owner", "someone@example.com")
    assert (code, out) == (2, "")
    assert "--owner needs owner tags, which the ledger does not keep yet" in err
    code, out, err = _run("queue", "--sample", "--watch", "5")
    assert (code, out) == (2, "")
    assert "--watch reads an account" in err


def _unreadable_policy(tmp_path: Path) -> Path:
    """The sample with no scheduling policy behind its queue's ARN, and reasons on its waiting jobs."""
    data = json.loads(SAMPLE.read_text())
    data = copy.deepcopy(data)
    data["world"]["scheduling_policies"] = []
    for world in [data["world"], *(tick.get("world", {}) for tick in data["ticks"])]:
        for job in world.get("service_jobs", []):
            if job["status"] == "RUNNABLE":
                job["statusReason"] = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - waiting for instances"
    path = tmp_path / "unreadable-policy.json"
    path.write_text(json.dumps(data))
    return path


def test_a_queue_whose_policy_cannot_be_read_gets_no_forecast_said_once(tmp_path: Path) -> None:
    code, out, err = _run("queue", "--scenario", str(_unreadable_policy(tmp_path)))
    assert (code, err) == (0, "")
    assert out.count("no forecast: its scheduling policy article-shares cannot be read") == 1
    waiting = [line for line in out.splitlines() if "RUNNABLE" in line]
    assert len(waiting) == 2
    assert all("CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY" in line for line in waiting)
    assert "Expected starts" not in out


@pytest.fixture
def aws() -> Iterator[EmbeddedAws]:
    yield from aws_with_state_table()


def _ledger_job(aws: EmbeddedAws, at: datetime) -> None:
    change = transition(
        None,
        Observation(
            arn=f"{ARN}old-1",
            kind=JobKind.SERVICE_JOB,
            status=JobStatus.RUNNABLE,
            at=at,
            details=JobDetails(queue="q", environment="env", share_identifier="A", sized=True, instances=1),
        ),
    )
    assert change is not None
    assert LedgerStateStore(aws.client("dynamodb"), "StateTable").write(change, at)


def test_an_empty_ledger_says_so(aws: EmbeddedAws) -> None:
    code, out, err = _run("queue", "--table", "StateTable", "--region", "us-east-1")
    assert (code, out) == (EXIT_EMPTY, "")
    assert err.startswith("batchpilot queue: the ledger is empty: it has seen no job queue")


def test_a_stale_ledger_is_shown_and_says_how_old(aws: EmbeddedAws) -> None:
    _ledger_job(aws, datetime.now(UTC) - timedelta(hours=3))
    code, out, err = _run("queue", "--table", "StateTable", "--region", "us-east-1", "--no-forecast")
    assert code == EXIT_STALE
    assert "old-1" in out
    assert "no forecast: AWS Batch does not describe this job queue" in out
    assert (
        "the ledger is stale: its last change or reconciliation was 3h00m ago (more than 60 minutes)" in err
    )


def test_an_unreachable_ledger_is_one_line_and_exit_1(aws: EmbeddedAws) -> None:
    code, out, err = _run("queue", "--table", "no-such-table", "--region", "us-east-1")
    assert (code, out) == (EXIT_UNREACHABLE, "")
    assert err.startswith("batchpilot queue: the ledger cannot be read: ")
    assert len(err.splitlines()) == 1


def test_watch_prints_the_view_again(aws: EmbeddedAws) -> None:
    _ledger_job(aws, datetime.now(UTC))
    argv = ("queue", "--table", "StateTable", "--region", "us-east-1", "--no-forecast")
    code, out, err = _run(*argv, "--watch", "0.01", "--watch-count", "2")
    assert (code, err) == (0, "")
    assert out.count("batchpilot queue at ") == 2
