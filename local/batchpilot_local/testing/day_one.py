"""The metric series a default deploy emits for the samples of ``events/`` (the day-one replay).

:func:`default_deploy_series` replays ``events/`` as a deploy with the template's default
parameters would see it: plain events and event scenarios with the defaults (a scenario's own
``parameters`` left out), and only the clock scenarios of the schedules that deploy enables (a
schedule whose ``State`` resolves to ``ENABLED``: the ledger's, not the capacity function's until
it is configured), their parameters left out too. ``tests/template/test_day_one.py`` checks that
every alarm and widget of such a deploy reads a series it emits.

``python -m batchpilot_local.testing.day_one`` prints the number of series (name + dimension
names and values) per metric name, the default deploy's and, for comparison, those of
``batchpilot replay events/`` (every scenario with its own parameters).
"""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from batchpilot_local.clock import DEFAULT_SCHEDULE, ClockScenario
from batchpilot_local.inputs import read_inputs
from batchpilot_local.replay import Replayer
from batchpilot_local.report import EventReport
from batchpilot_local.testing.paths import TEMPLATE_PATH, repo_root
from batchpilot_local.testing.templates import Deployed, parse_template, translate

__all__ = ["Series", "default_deploy_series", "enabled_schedules", "series_of"]

Series = tuple[str, str, tuple[tuple[str, str], ...]]
"""``(namespace, metric name, sorted (dimension, value) pairs)``: one billed CloudWatch metric."""


def enabled_schedules(template_path: Path = TEMPLATE_PATH) -> set[str]:
    """Logical ids of the ``AWS::Scheduler::Schedule`` resources whose ``State`` is ``ENABLED``
    with the template's default parameters (conditions evaluated on the SAM-translated template)."""
    translated = translate(parse_template(template_path.read_text(encoding="utf-8")))
    deployed = Deployed(translated)
    return {
        name
        for name, resource in translated["Resources"].items()
        if resource["Type"] == "AWS::Scheduler::Schedule"
        and deployed.resolve(resource["Properties"].get("State", "ENABLED")) == "ENABLED"
    }


def series_of(reports: Sequence[EventReport], namespace: str) -> set[Series]:
    """Every series the reports' metrics name (each event's own outputs and its batches')."""
    return {
        (namespace, metric.name, tuple(sorted(metric.dimensions.items())))
        for report in reports
        for outputs in report.outputs()
        for metric in outputs.metrics
    }


def _namespace(template_path: Path) -> str:
    template = parse_template(template_path.read_text(encoding="utf-8"))
    return str(template["Parameters"]["MetricsNamespace"]["Default"])


def default_deploy_series(
    events: Path | None = None, template_path: Path = TEMPLATE_PATH
) -> tuple[set[Series], list[str]]:
    """The series a default deploy emits for the samples under ``events`` (default: the
    checkout's ``events/``), and the origins of the clock scenarios left out (their schedule is
    not enabled by default).

    Raises:
        batchpilot_local.inputs.InputError: a sample cannot be read.
    """
    enabled = enabled_schedules(template_path)
    replay_input = read_inputs([str(events or repo_root() / "events")])
    skipped: list[str] = []

    def items() -> Iterator[tuple[Any, str | None, str | None]]:
        for item in replay_input.items:
            value = item.value
            if isinstance(value, ClockScenario):
                if (value.schedule or DEFAULT_SCHEDULE) not in enabled:
                    skipped.append(value.origin)
                    continue
                value = dataclasses.replace(value, parameters={})
            yield value, item.origin, item.scope

    reports = Replayer(template_path).run_items(
        items(), scope_worlds={world.origin: world.data for world in replay_input.worlds}
    )
    return series_of(reports, _namespace(template_path)), skipped


def _full_replay_series(events: Path, template_path: Path) -> set[Series]:
    replay_input = read_inputs([str(events)])
    reports = Replayer(template_path).run_items(
        ((item.value, item.origin, item.scope) for item in replay_input.items),
        scope_worlds={world.origin: world.data for world in replay_input.worlds},
        scope_parameters={world.origin: world.parameters for world in replay_input.worlds},
    )
    return series_of(reports, _namespace(template_path))


def main(argv: Sequence[str] | None = None) -> int:
    """Print the series counts (see the module docstring); returns 0."""
    del argv
    events = repo_root() / "events"
    default, _ = default_deploy_series(events)
    full = _full_replay_series(events, TEMPLATE_PATH)
    by_name = Counter(name for _, name, _ in default)
    print(f"default deploy: {len(default)} series")
    print(f"replay of events/ with its scenarios' parameters: {len(full)} series")
    for name, count in by_name.most_common():
        print(f"  {count:4d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
