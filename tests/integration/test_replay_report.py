"""What a person reads after `batchpilot replay`: the text report's first screen, its timelines and
per-event detail, and the HTML report loaded in headless Chromium (Playwright driving Debian's
``/usr/bin/chromium``; skipped with the install command when it is absent)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local.cli import main
from batchpilot_local.dashboards import dashboard_bodies
from batchpilot_local.testing.alerts import SLACK_PARAMETER_VALUE
from batchpilot_local.testing.browser import load_in_chromium, require_chromium
from batchpilot_local.testing.paths import repo_root

ROOT = repo_root()
TEMPLATE = ROOT / "template.yaml"
BURST = ROOT / "events/scenarios/capacity/burst.json"
SPOT_RECLAIM = ROOT / "events/scenarios/recovery/container-job-spot-reclaimed.json"
CRITICAL = ROOT / "events/service-job/failed-algorithm-error.json"
INPUTS = [str(BURST), str(SPOT_RECLAIM), str(CRITICAL)]
SLACK = f"SlackWebhookSecretArn={SLACK_PARAMETER_VALUE}"


@pytest.fixture(scope="module")
def text_report() -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # a stack with Slack: the on-call topic gets the pages alone
        code = main(["replay", "--template", str(TEMPLATE), "--parameter-overrides", SLACK, *INPUTS])
    assert code == 0
    return out.getvalue()


def test_the_text_report_opens_with_a_one_screen_summary(text_report: str) -> None:
    lines = text_report.splitlines()
    assert lines[0].startswith("Deployment replayed: ")  # what was replayed, then the summary
    lines = lines[lines.index("") + 1 :]
    first_screen = "\n".join(lines[: lines.index("Events")])
    assert lines[0].startswith("batchpilot replay: ") and lines[0].endswith("0 with errors")
    assert "Pages and chat messages" in first_screen
    sns = next(line.split() for line in lines if line.strip().startswith("sns "))
    assert sns[1:] == ["1", "0", "0", "1"]  # the APPLICATION_ERROR page: critical only
    assert "On-call pages (1)" in first_screen and "phi3-sft-run5" in first_screen
    resubmission = next(line for line in lines if line.strip().startswith("llama3-8b-lora-ft-run-39 "))
    assert "SPOT_INTERRUPTION" in resubmission and "1h 03m" in resubmission and "1.07" in resubmission
    assert "s3://ml-checkpoints-111122223333/llama-ft/run-39/" in resubmission
    assert "Capacity changes (3)" in first_screen
    assert any(line.split()[:4] == ["burst-env", "NUM_INSTANCES", "8", "24"] for line in lines)


def test_one_timeline_per_clock_scenario_a_line_per_tick(text_report: str) -> None:
    lines = text_report.splitlines()
    start = lines.index(f"Timeline: {BURST}")
    header = lines[start + 1].split()
    assert header == ["time", "service", "environment", "in", "use", "demand", "limit", "decision", "reason"]
    ticks = json.loads(BURST.read_text(encoding="utf-8"))["ticks"]
    rows = lines[start + 2 : start + 2 + len(ticks)]
    assert [row.split()[0] for row in rows] == [t["at"] for t in ticks]
    assert rows[1].split()[1:] == ["burst-env", "8", "40", "8", "RAISE", "->", "24", "DEMAND"]


def test_an_environment_with_a_limit_per_instance_type_has_a_labelled_line_per_unit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["replay", "--template", str(TEMPLATE), str(SAMPLE_WORLD)]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index(f"Timeline: {SAMPLE_WORLD}")
    rows = [line.split() for line in lines[start + 2 : lines.index("", start)]]
    labels = [" ".join(row[1:3]) if row[2].startswith("(") else row[1] for row in rows]
    assert labels == [
        "sample-fairshare",
        "sample-fifo",
        "sample-paused",
        "sample-quota (ml.g5.12xlarge)",
        "sample-quota (ml.p4d.24xlarge)",
    ]


def test_per_event_detail_has_the_reason_and_metric_timestamps_and_own_counters_only_when_verbose(
    text_report: str, capsys: pytest.CaptureFixture[str]
) -> None:
    detail = text_report[text_report.index("\nEvents\n") :]
    assert "reason     Received status from SageMaker: AlgorithmError" in detail
    assert "timestamp" in detail and "2026-11-22T19:51:00.000Z" in detail
    assert "EventsProcessed" not in text_report and "ColdStart" not in text_report

    assert main(["replay", "--verbose", "--template", str(TEMPLATE), str(CRITICAL)]) == 0
    verbose = capsys.readouterr().out
    assert "EventsProcessed" in verbose and "ColdStart" in verbose


@pytest.mark.parametrize("detail", ["basic", "detailed"])
def test_each_jobs_queue_wait_counts_once_for_its_share_whatever_the_metrics_detail(
    detail: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # CRITICAL's job waited 3m 32s; a second job of the same share was created 10 minutes earlier.
    # MetricsDetail=detailed publishes each wait twice (per job queue and per share): one sample each.
    first = json.loads(CRITICAL.read_text(encoding="utf-8"))
    second = json.loads(CRITICAL.read_text(encoding="utf-8"))
    second["id"] = "0c6f1f3e-5d0e-4a55-9a57-2f1b7c1d9e01"
    job_id = "7d2c8a4e-1b3f-4c6d-8e9a-0f1e2d3c4b5a"
    second["detail"]["jobId"] = job_id
    second["detail"]["jobArn"] = second["resources"][0] = (
        second["resources"][0].rsplit("/", 1)[0] + f"/{job_id}"
    )
    second["detail"]["jobName"] = "phi3-sft-run6"
    second["detail"]["createdAt"] -= 10 * 60 * 1000
    events = tmp_path / "two-waits.json"
    events.write_text(json.dumps([first, second]), encoding="utf-8")
    assert (
        main(
            [
                "replay",
                "--template",
                str(TEMPLATE),
                "--parameter-overrides",
                f"MetricsDetail={detail}",
                str(events),
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    row = lines[lines.index("Shares (1)") + 2].split()
    # Nearest-rank p50 of the two waits is the second; with every wait counted twice it would be the first.
    assert row == ["sm-training-research", "research", "-", "-", "-", "13m", "32s", "13m", "32s"]


QUIET_NIGHT = ROOT / "events/scenarios/capacity/quiet-night.json"  # the next day, 16 ticks
SAMPLE_WORLD = ROOT / "events/scenarios/capacity/sample-world.json"  # a single tick
DRY_RUN = ROOT / "events/scenarios/recovery/container-job-no-queue-named-dry-run.json"
# The job ledger's fleet gauges and share of usage (two environments, five shares). The capacity
# scenarios run the capacity function alone, which publishes no share's gauges: SAMPLE_WORLD's
# shares are in no metric.
LEDGER = [
    ROOT / "events/scenarios/ledger/fair-share-fleet.json",
    ROOT / "events/scenarios/ledger/quota-share-borrowing.json",
]
HTML_INPUTS = [*INPUTS, str(QUIET_NIGHT), str(SAMPLE_WORLD), str(DRY_RUN), *map(str, LEDGER)]
SHARES = {
    # fair-share-fleet.json's and quota-share-borrowing.json's shares: the job ledger's gauges
    ("article-q", "HIGHPRI"),
    ("article-q", "MIDPRI"),
    ("article-q", "LOWPRI"),
    ("quota-q", "prod"),
    ("quota-q", "research"),
    # the job events' shares (SPOT_RECLAIM and DRY_RUN: one job; CRITICAL): their QueueWaitTime
    ("gpu-spot-queue", "research"),
    ("sm-training-research", "research"),
}
"""Every share of :data:`HTML_INPUTS` the replay publishes a metric for."""
TEAMS = "TeamsWebhookSecretArn=arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot-teams-AbCdEf"


@dataclass(frozen=True)
class Loaded:
    """The HTML report of :data:`HTML_INPUTS` (Slack and Teams on), its JSON report and what Chromium
    shows."""

    path: Path
    notes: list[dict[str, Any]]
    shares: set[tuple[str, str]]
    page: dict[str, Any]

    def chart(self, title: str) -> dict[str, Any]:
        """The one chart whose drawn texts include ``title``."""
        charts: list[dict[str, Any]] = [c for c in self.page["charts"] if title in c["texts"]]
        [chart] = charts
        return chart

    def table(self, caption: str) -> dict[str, Any]:
        """The one table whose caption starts with ``caption``."""
        tables: list[dict[str, Any]] = [t for t in self.page["tables"] if t["caption"].startswith(caption)]
        [table] = tables
        return table


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    import contextlib
    import io

    require_chromium()
    report = tmp_path_factory.mktemp("html") / "report.html"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            [
                "replay",
                "--template",
                str(TEMPLATE),
                "--format",
                "json",
                "--parameter-overrides",
                f"{TEAMS} {SLACK}",  # MetricsDetail=basic, as deployed by default
                "--report",
                str(report),
                *HTML_INPUTS,
            ]
        )
    assert code == 0
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    notes = [
        n for event in events for outputs in [event, *event["batches"]] for n in outputs["notifications"]
    ]
    # Every share the replay published: the job ledger's share gauges, and (MetricsDetail=basic: no
    # share dimension on job metrics) the share of each job event that published a QueueWaitTime.
    shares = {
        (m["dimensions"]["JobQueue"], m["dimensions"].get("ShareIdentifier") or m["dimensions"]["QuotaShare"])
        for event in events
        for outputs in [event, *event["batches"]]
        for m in outputs["metrics"]
        if "JobQueue" in m["dimensions"] and {"ShareIdentifier", "QuotaShare"} & set(m["dimensions"])
    } | {
        (event["job"]["queue"], event["job"]["share_identifier"] or event["job"]["quota_share"])
        for event in events
        if event["job"]
        and (event["job"]["share_identifier"] or event["job"]["quota_share"])
        and any(m["name"] == "QueueWaitTime" for m in event["metrics"])
    }
    page = load_in_chromium(
        report,
        selectors=(".msg", ".msg.slack", ".msg.sns", ".msg.teams", ".msg .hdr", "table", "h3"),
        texts_of=(".msg.teams", ".msg.sns"),
        fit=(".msg", ".msg pre", ".msg *"),
    )
    return Loaded(report, notes, shares, page)


def test_the_html_report_renders_in_chromium(loaded: Loaded) -> None:
    page = loaded.page
    assert page["errors"] == []
    assert page["requests"] == [loaded.path.as_uri()]  # the page itself, nothing else
    assert page["title"] == "batchpilot replay"
    counts = page["counts"]
    by_channel = Counter(n["channel"] for n in loaded.notes)
    assert 0 < len(loaded.notes) <= 60  # every message is previewed
    assert counts[".msg"] == len(loaded.notes)
    assert counts[".msg.sns"] == by_channel["sns"] >= 2  # the failure and the dry run's page
    assert counts[".msg.slack"] == by_channel["slack"] and counts[".msg.teams"] == by_channel["teams"] > 0
    assert counts[".msg .hdr"] >= counts[".msg.sns"] + 1  # Slack headers and the SNS subject are drawn
    assert counts["table"] >= 3
    # every dashboard of the template (CapacityDashboard too: the capacity scenarios configure it),
    # its widgets drawn from the replayed metrics
    assert counts["h3"] == len(dashboard_bodies(TEMPLATE)) == 5
    charts = page["charts"]
    assert len(charts) >= 2 + 4  # timelines, queue wait per share, and dashboard widgets with data
    for chart in charts:
        assert chart["width"] > 100 and chart["height"] > 50
        assert chart["drawn"] > 10  # axes, ticks, lines: the chart has content, not an empty box
    html_text = loaded.path.read_text(encoding="utf-8")
    assert "<script" not in html_text and "http://" not in html_text.split("<body>")[0]


def test_every_series_is_drawn_even_a_single_tick(loaded: Loaded) -> None:
    for chart in loaded.page["charts"]:
        assert chart["empty"] == [], chart["texts"][-1]  # a line through a single point shows nothing
    lines = [c for c in loaded.page["charts"] if c["series"]]
    assert len(lines) >= 10
    for chart in lines:
        for series in chart["series"]:  # a line through one point has an empty box: nothing shows
            assert series["width"] > 0 and series["height"] > 0, (chart["texts"][-1], series["id"])
    single = loaded.chart("sample-world.json: sample-fifo (NUM_INSTANCES)")
    assert [(s["id"], s["markers"]) for s in single["series"]] == [
        ("series-in-use", 1),
        ("series-demand-runnable-instances", 1),
        ("series-limit", 1),
    ]
    # One tick: the x axis has a tick at it (0 minutes) alone, not -1 ... 1 around it.
    assert "0" in single["texts"] and not any(t.startswith(("\N{MINUS SIGN}", "-")) for t in single["texts"])


def test_the_limit_stays_visible_where_it_equals_the_instances_in_use(loaded: Loaded) -> None:
    # At burst.json's second tick the limit and the instances in use are both 8 (see the timeline test).
    burst = loaded.chart("burst.json: burst-env (NUM_INSTANCES)")
    ids = [s["id"] for s in burst["series"]]
    assert ids.index("series-limit") > ids.index("series-in-use")  # painted on top of it
    limit = burst["series"][ids.index("series-limit")]
    in_use = burst["series"][ids.index("series-in-use")]
    assert limit["dashed"] and not in_use["dashed"]  # the solid line shows through the dashes
    ticks = len(json.loads(BURST.read_text(encoding="utf-8"))["ticks"])
    assert limit["markers"] == in_use["markers"] == ticks


def _by_environment(chart: dict[str, Any], metric: str) -> dict[str, dict[str, Any]]:
    """The chart's series of ``metric`` (lower case, as in the series ids) by service environment."""
    return {
        s["id"].rsplit("serviceenvironment-", 1)[-1]: s
        for s in chart["series"]
        if s["id"].startswith(f"series-{metric}-")
    }


def test_dashboard_widgets_give_each_scenario_room_on_the_time_axis(loaded: Loaded) -> None:
    # The capacity scenarios run the capacity function alone: their environments are in
    # CapacityDashboard's widgets (its CapacityTarget), beside the ledger scenarios' limit and in use.
    chart = loaded.chart("Capacity target beside limit and in use, per service environment")
    assert {"11-25 09:00", "11-25 10:00", "11-26 06:40"} <= set(chart["texts"])  # each burst's first tick
    plot = chart["plot"]["width"]
    targets = _by_environment(chart, "capacitytarget")
    # burst.json's 9 minutes and quiet-night.json's 21, a day apart: each gets a good part of the axis.
    assert targets["burst-env"]["width"] > 0.15 * plot
    assert targets["night-env"]["width"] > 0.15 * plot
    # FleetDashboard's widget: the job ledger's scenarios, fair-share-fleet.json's 10 minutes and
    # quota-share-borrowing.json's 5, four days apart.
    fleet = loaded.chart("Capacity limit, reserved and in use, per service environment")
    assert {"11-20 22:00", "11-25 08:00"} <= set(fleet["texts"])
    plot = fleet["plot"]["width"]
    in_use = _by_environment(fleet, "instancesinuse")
    assert set(in_use) == {"article-env", "quota-env"}
    assert in_use["article-env"]["width"] > 0.15 * plot
    assert in_use["quota-env"]["width"] > 0.15 * plot


def test_legends_fit_inside_their_charts_and_labels_are_whole(loaded: Loaded) -> None:
    assert loaded.page["charts"]
    assert any(chart["legend"] for chart in loaded.page["charts"])
    for chart in loaded.page["charts"]:
        assert chart["outside"] == [], chart["texts"][-1]
        assert all(label and not label.endswith("=") for label in chart["legend"])
    # Widgets of several metrics: each label has the metric and every dimension but service.
    capacity = loaded.chart("Capacity target beside limit and in use, per service environment")
    assert "CapacityTarget CapacityUnit=NUM_INSTANCES ServiceEnvironment=burst-env" in capacity["legend"]
    assert "CapacityTarget CapacityUnit=ml.p4d.24xlarge ServiceEnvironment=sample-quota" in capacity["legend"]
    assert "InstancesInUse ServiceEnvironment=quota-env" in capacity["legend"]
    fleet = loaded.chart("Capacity limit, reserved and in use, per service environment")
    assert "CapacityLimit ServiceEnvironment=article-env" in fleet["legend"]
    assert "ReservedInstances ServiceEnvironment=quota-env" in fleet["legend"]


def test_teams_titles_read_as_teams_shows_them(loaded: Loaded) -> None:
    teams = [n["title"] for n in loaded.notes if n["channel"] == "teams"]
    dry_runs = [t for t in teams if t.startswith("[dry run] ")]
    assert dry_runs and not any("\\" in t for t in teams)  # fallbackText's Markdown escapes undone
    previews = loaded.page["texts"][".msg.teams"]
    # A card's title is its headline made to fit (batchpilot.alerts.render.headline); the whole
    # title is the fallbackText the report lists.
    assert any("[dry run] " in text for text in previews)
    assert not any("\\[" in text or "\\]" in text for text in previews)


def test_the_failure_rate_widget_draws_the_rate_the_jobs_ended_and_the_alarm_threshold(
    loaded: Loaded,
) -> None:
    # FailuresDashboard's widget: JobFailureRate's Average (the rate) on the left axis, its
    # SampleCount (jobs ended) on the right, the alarm's JobFailureRateAlarmPercent as a dashed line.
    chart = loaded.chart(
        "Failure rate per job queue, % of the jobs that ended (JobQueueFailureRateAlarm's query), "
        "and jobs ended"
    )
    assert "alarm threshold" in chart["legend"]
    assert {"percent failed", "jobs ended"} <= set(chart["texts"])
    labels = [label for label in chart["legend"] if label != "alarm threshold"]
    assert labels and all(
        label.startswith(("JobFailureRate Average", "JobFailureRate SampleCount")) for label in labels
    )
    html_text = loaded.path.read_text(encoding="utf-8")
    assert "Average, SampleCount per 5 min." in html_text


def test_the_summary_has_the_fleet_and_every_share(loaded: Loaded) -> None:
    fleet = loaded.table("Fleet: utilisation against reserved capacity")
    assert fleet["headers"] == [
        "service environment",
        "reserved",
        "in use",
        "limit",
        "utilisation",
        "idle while queued",
        "GPUs",
    ]
    # fair-share-fleet.json's last tick: 10 of 24 reserved instances in use, 16 the limit, 8 idle;
    # quota-share-borrowing.json's: all 12 reserved in use.
    assert fleet["rows"] == [
        ["article-env", "24", "10", "16", "41.7 %", "8", "80"],
        ["quota-env", "12", "12", "12", "100.0 %", "0", "96"],
    ]
    shares = loaded.table("Shares (")
    assert shares["headers"] == [
        "job queue",
        "share",
        "in use",
        "share of usage",
        "entitlement",
        "wait p50",
        "wait max",
    ]
    assert loaded.shares == SHARES  # every share the replay published, and no other
    assert sorted((row[0], row[1]) for row in shares["rows"]) == sorted(SHARES)  # a row each
    rows = {(row[0], row[1]): row[2:] for row in shares["rows"]}
    # The ledger scenarios' jobs reach the ledger by reconciliation alone (no job event): no wait.
    assert rows[("article-q", "HIGHPRI")] == ["8", "80.0 %", "65.2 %", "-", "-"]
    assert rows[("quota-q", "research")][:3] == ["6", "50.0 %", "33.3 %"]
    # The metrics function's QueueWaitTime per job queue, counted for the share of the event's job:
    # the spot-reclaimed job and its dry-run replay (createdAt -> its first attempt's start, not the
    # event's startedAt, which is its 2nd attempt's), and failed-algorithm-error.json's service job.
    assert rows[("gpu-spot-queue", "research")] == ["-", "-", "-", "7m 23s", "7m 23s"]
    assert rows[("sm-training-research", "research")] == ["-", "-", "-", "3m 32s", "3m 32s"]


def test_usage_per_share_draws_what_was_published_and_says_so(loaded: Loaded) -> None:
    usage = loaded.chart("Share of usage beside entitlement")
    # Only the shares with the ledger's ShareOfUsage: none drawn as 0 % for want of a value.
    ledger = {"article-q/HIGHPRI", "article-q/LOWPRI", "article-q/MIDPRI", "quota-q/prod", "quota-q/research"}
    assert {t for t in usage["texts"] if "/" in t} == ledger
    # The job ledger's per-share InstancesInUse alone (the capacity function publishes none): the
    # same shares; the job events' shares have a queue wait and no gauge.
    in_use = loaded.chart("Instances in use per share")
    assert {t for t in in_use["texts"] if "/" in t} == ledger
    html_text = loaded.path.read_text(encoding="utf-8")
    left_out = len(SHARES) - len(ledger)
    assert left_out == 2
    assert f"{left_out} of {len(SHARES)} shares had no ShareOfUsage" in html_text
    assert f"{left_out} of {len(SHARES)} shares had no such gauge and are left out" in html_text


def test_every_preview_fits_in_its_box(loaded: Loaded) -> None:
    words = [w for text in loaded.page["texts"][".msg.sns"] for w in text.split()]
    assert max(len(w) for w in words) > 150  # a CloudWatch Logs URL, wider than a preview's box
    assert loaded.page["overflowing"] == {".msg": [], ".msg pre": [], ".msg *": []}
