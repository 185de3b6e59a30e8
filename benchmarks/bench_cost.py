"""Monthly cost of a default deploy, counted from what a replay emits and calls.

A synthetic fleet (:class:`Fleet`: job queues, share identifiers, service environments, jobs a
day) is turned into a day of job events (:func:`fleet_day`: container and service jobs walking
SUBMITTED to SUCCEEDED, one in 20 FAILED with a real reason, one in 25 preempted or retried once)
and replayed with the template's default parameters, in the SQS batches Lambda forms
(``Replayer(batch=True)``), with the ledger's schedule ticking once an hour in the same embedded
AWS (the jobs in flight at that moment seeded as AWS Batch lists them). Counted from the replay:

- custom-metric series: every ``(name, dimensions)`` the functions' EMF blobs carry (one
  namespace), and the hours of the day each is published in (CloudWatch bills a metric per
  metric-month, prorated by the hour it is published in: a series published in ``h`` hours of
  every day costs ``h / 24`` metric-months a month). A tick's gauges count for its whole hour (a
  gauge published every minute counts fully when published every hour);
- Lambda invocations, their measured duration (moto included: an upper bound) x the function's
  ``MemorySize`` from template.yaml, and the bytes they print (CloudWatch Logs ingestion);
- every API call the functions make (botocore's ``provide-client-params`` / ``after-call``
  hooks through :func:`batchpilot_local.embedded_aws.observing`): DynamoDB request units from the
  items' sizes (DynamoDB's sizing rules), SNS publishes, EventBridge ``PutEvents`` entries;
- SQS requests: the sends of each event to each queue its rules match, and Lambda's receives and
  deletes of each batch, plus idle long polling (stated);
- dashboards and alarm metrics from template.yaml (resources created with default parameters).

The 10x fleet is not replayed whole: one hour of it (every queue and share gets a job in it) and
the same hour of the reference fleet are replayed, and each count of the reference day is scaled
by the ratio of the two windows (per metric name and dimension set for the series, per quantity
for the rest); the ledger's per-tick work is the 10x window's tick. ``docs/cost.md`` states it.

    .venv/bin/python benchmarks/bench_cost.py               # both fleets: writes cost.json, docs/cost.md
    .venv/bin/python benchmarks/bench_cost.py --render      # docs/cost.md's section from cost.json only

A full run replays about 18,000 events (a few minutes to an hour, with the machine's load).
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (sets BATCHPILOT_REPO_ROOT before batchpilot_local.testing is imported)
from batchpilot_local.template import load_template
from batchpilot_local.testing.cost import RESULTS_JSON, measure, render, variant_summary, write_doc
from batchpilot_local.testing.paths import ROOT


def _variant(args: tuple[int, dict[str, str]]) -> dict[str, Any]:
    window_hour, parameters = args
    return measure(window_hour, parameters)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--render", action="store_true", help="only rewrite docs/cost.md from cost.json")
    parser.add_argument("--window-hour", type=int, default=10, help="the hour of the day both fleets replay")
    parser.add_argument(
        "--variant",
        nargs="*",
        default=None,
        metavar="NAME=VALUE",
        help="also measure the deploy with this template parameter (each alone), summed up in "
        "docs/cost.md (default: MetricsDetail=detailed when the template has that parameter)",
    )
    parser.add_argument(
        "--parameter-overrides",
        nargs="*",
        default=[],
        metavar="NAME=VALUE",
        help="template parameters of the measured deploy; the results then go to --output only",
    )
    parser.add_argument("--output", type=Path, default=None, help="where the JSON goes (default: cost.json)")
    parser.add_argument("--jobs", type=int, default=1, help="replays at once (one process and core each)")
    args = parser.parse_args()
    parameters = dict(pair.split("=", 1) for pair in args.parameter_overrides)
    output = args.output or (RESULTS_JSON if not parameters else None)
    if output is None:
        raise SystemExit("--parameter-overrides measures another deploy than docs/cost.md's: give --output")
    if not args.render:
        declared = load_template(ROOT / "template.yaml").parameters
        wanted = (
            args.variant
            if args.variant is not None
            else (["MetricsDetail=detailed"] if "MetricsDetail" in declared and not parameters else [])
        )
        variants = [dict([pair.split("=", 1)]) for pair in wanted]
        runs = [(args.window_hour, parameters)] + [(args.window_hour, {**parameters, **v}) for v in variants]
        with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            measured = list(pool.map(_variant, runs))
        results = measured[0]
        if variants:
            results["variants"] = {
                " ".join(f"{k}={v}" for k, v in variant.items()): variant_summary(other)
                for variant, other in zip(variants, measured[1:], strict=True)
            }
        output.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    results = json.loads(output.read_text(encoding="utf-8"))
    if output == RESULTS_JSON:
        write_doc(render(results))
    summary = {name: fleet["total"] for name, fleet in results["fleets"].items()}
    print(
        json.dumps(
            {
                "total_dollars_per_month": summary,
                "variants": results.get("variants"),
                "replayed": results["replayed"],
            }
        )
    )


if __name__ == "__main__":
    main()
