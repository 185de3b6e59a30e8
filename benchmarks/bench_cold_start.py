"""Cold start of the metrics handler: importing functions/metrics/app.py in a fresh interpreter.

Measured against ``import boto3`` (what a plain boto3 Lambda pays) the same way, in the same run:

* wall time of ``python -c "<setup>; import app"`` minus the median wall time of ``python -c "<setup>"``
  (an empty interpreter with the same setup), and the same for ``import boto3``;
* ``python -X importtime``: the cumulative time of the top-level ``app`` / ``boto3`` import.

The variants alternate (rotating order) over >= 15 rounds, after two warm-up rounds (pyc files,
page cache); medians are reported. Goal (issue): handler import / boto3 import <= 0.75 (wall-time
ratio). If it is missed, the top modules by cumulative import time of the handler are printed:
they are what to cut or defer. Reported, never asserted.

    .venv/bin/python benchmarks/bench_cold_start.py [--rounds 21]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict

from _common import (
    FUNCTION_DIR,
    LAMBDA_ENV,
    machine,
    machine_markdown,
    now,
    pin_to_one_core,
    shown,
    write_section,
)

GOAL_RATIO = 0.75
TOP = 15
STDLIB_NOTE_MS = 3.0


def variants(extra_path: list[str]) -> dict[str, str]:
    """The three programs: same setup (sys.path as Lambda's: function dir, then layer dirs), one import."""
    setup = f"import sys; sys.path[0:0] = {[str(FUNCTION_DIR), *extra_path]!r}"
    return {"empty": setup, "handler": f"{setup}; import app", "boto3": f"{setup}; import boto3"}


TOP_LEVEL = {"handler": "app", "boto3": "boto3"}


def run_wall(python: str, code: str, env: dict[str, str]) -> float:
    """Wall time (ms) of one fresh interpreter running ``code``."""
    start = time.perf_counter()
    result = subprocess.run([python, "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter() - start) * 1000
    if result.returncode != 0:
        raise SystemExit(f"{code!r} failed:\n{result.stderr.decode()[-2000:]}")
    return elapsed


def run_importtime(python: str, code: str, env: dict[str, str]) -> list[tuple[str, int, int, int]]:
    """``-X importtime`` of ``code``: (module, depth, self us, cumulative us) in output order."""
    result = subprocess.run(
        [python, "-X", "importtime", "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    if result.returncode != 0:
        raise SystemExit(f"{code!r} failed:\n{result.stderr.decode()[-2000:]}")
    rows = []
    for line in result.stderr.decode().splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        prefix, cumulative_us, name = line.split("|")
        self_us = prefix.removeprefix("import time:")
        indent = len(name) - len(name.lstrip(" ")) - 1
        rows.append((name.strip(), indent // 2, int(self_us), int(cumulative_us)))
    return rows


def is_stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


def stdlib_pulled_in(rows: list[tuple[str, int, int, int]]) -> dict[tuple[str, str], int]:
    """Standard-library imports made directly by third-party or project modules: (module, importer) -> cum.

    ``-X importtime`` prints a module after its nested imports, so a row's importer is the next row
    with a smaller depth.
    """
    edges = {}
    for index, (module, depth, _, cumulative) in enumerate(rows):
        if not is_stdlib(module) or depth == 0:
            continue
        importer = next((row[0] for row in rows[index + 1 :] if row[1] < depth), None)
        if importer and not is_stdlib(importer):
            edges[(module, importer)] = cumulative
    return edges


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="alternating rounds (>= 15)")
    parser.add_argument("--python", default=sys.executable, help="interpreter to measure (default: this one)")
    parser.add_argument(
        "--path",
        action="append",
        default=[],
        help="extra sys.path entry after the function dir, e.g. a built layer's python/ (repeatable)",
    )
    parser.add_argument("--section", default="cold_start", help="RESULTS.md section key to replace")
    parser.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    args = parser.parse_args()
    if args.rounds < 15:
        parser.error("--rounds must be at least 15")

    pinning = pin_to_one_core()  # the children inherit the affinity
    info = machine()
    target_version = subprocess.run(
        [args.python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    info["measured interpreter"] = f"{args.python} (Python {target_version})"
    env = {**os.environ, **LAMBDA_ENV}
    for key in [k for k in env if k.startswith("PYTHON")]:
        del env[key]

    programs = variants(args.path)
    names = list(programs)
    wall: dict[str, list[float]] = defaultdict(list)
    cumulative: dict[str, list[int]] = defaultdict(list)  # top-level import, from -X importtime
    per_module: dict[str, list[tuple[int, int]]] = defaultdict(list)  # handler: module -> [(self, cum)]
    handler_only: set[str] = set()
    pulled_in: dict[tuple[str, str], list[int]] = defaultdict(list)  # (stdlib module, importer) -> [cum]
    for round_ in range(args.rounds + 2):
        warm_up = round_ < 2
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            elapsed = run_wall(args.python, programs[name], env)
            if not warm_up:
                wall[name].append(elapsed)
        for name in ("handler", "boto3") if round_ % 2 else ("boto3", "handler"):
            rows = run_importtime(args.python, programs[name], env)
            if warm_up:
                continue
            top = [cum for module, depth, _, cum in rows if depth == 0 and module == TOP_LEVEL[name]]
            cumulative[name].append(top[-1] if top else 0)
            if name == "handler":
                # Rows of the `import app` subtree only (importtime prints children before parents).
                app_index = max(i for i, row in enumerate(rows) if row[1] == 0 and row[0] == "app")
                start = max((i for i, row in enumerate(rows[:app_index]) if row[1] == 0), default=-1) + 1
                seen: dict[str, tuple[int, int]] = {}
                for module, _, self_us, cum in rows[start : app_index + 1]:
                    seen[module] = (self_us, cum)
                    handler_only.add(module)
                for module, value in seen.items():
                    per_module[module].append(value)
                for edge, cum in stdlib_pulled_in(rows[start : app_index + 1]).items():
                    pulled_in[edge].append(cum)

    med = {name: statistics.median(values) for name, values in wall.items()}
    handler_ms = med["handler"] - med["empty"]
    boto3_ms = med["boto3"] - med["empty"]
    ratio = handler_ms / boto3_ms
    it_handler = statistics.median(cumulative["handler"]) / 1000
    it_boto3 = statistics.median(cumulative["boto3"]) / 1000
    it_ratio = it_handler / it_boto3 if it_boto3 else float("nan")
    met = ratio <= GOAL_RATIO
    verdict = f"{'MET' if met else 'NOT MET'}: {ratio:.2f} {'<=' if met else '>'} {GOAL_RATIO}"

    lines = [
        f"cold start, {args.rounds} alternating rounds (+2 warm-up), {args.python} "
        f"(Python {target_version}), {pinning}",
        f"  wall time, median: empty interpreter {med['empty']:.1f} ms, "
        f"import app {med['handler']:.1f} ms, import boto3 {med['boto3']:.1f} ms",
        f"  import cost (minus empty): handler {handler_ms:.1f} ms, boto3 {boto3_ms:.1f} ms, "
        f"ratio {ratio:.2f}",
        f"  -X importtime cumulative, median: app {it_handler:.1f} ms, boto3 {it_boto3:.1f} ms, "
        f"ratio {it_ratio:.2f}",
        f"  goal handler/boto3 <= {GOAL_RATIO}: {verdict}",
    ]
    top_rows: list[tuple[str, float, float]] = []
    self_rows: list[tuple[str, float, float]] = []
    packages: list[tuple[str, float]] = []
    stdlib_edges: list[tuple[float, str, str]] = []
    if not met:
        # Median over the runs of each module's (self, cumulative) us; modules seen in every run only.
        medians = [
            (
                module,
                statistics.median(c for _, c in values) / 1000,
                statistics.median(s for s, _ in values) / 1000,
            )
            for module, values in per_module.items()
            if len(values) == args.rounds and module in handler_only
        ]
        top_rows = sorted(medians, key=lambda row: row[1], reverse=True)[:TOP]
        self_rows = sorted(medians, key=lambda row: row[2], reverse=True)[:TOP]
        by_package: dict[str, float] = defaultdict(float)
        for module, _, self_ms in medians:
            top_name = module.split(".")[0]
            by_package["stdlib" if is_stdlib(top_name) else top_name] += self_ms
        packages = sorted(by_package.items(), key=lambda item: item[1], reverse=True)
        stdlib_edges = sorted(
            (
                (statistics.median(values) / 1000, module, importer)
                for (module, importer), values in pulled_in.items()
                if len(values) == args.rounds
            ),
            reverse=True,
        )
        stdlib_edges = [edge for edge in stdlib_edges if edge[0] >= STDLIB_NOTE_MS]
        if stdlib_edges:
            lines.append(
                f"  stdlib imports >= {STDLIB_NOTE_MS} ms cumulative and who makes them: "
                + ", ".join(f"{module} {ms:.1f} ms <- {importer}" for ms, module, importer in stdlib_edges)
            )
        lines.append(
            "  self time of the handler import by top-level package: "
            + ", ".join(f"{name} {ms:.1f} ms" for name, ms in packages if ms >= 0.5)
        )
        for title, rows in (("cumulative", top_rows), ("self", self_rows)):
            lines.append(
                f"  top {TOP} modules by {title} import time of the handler import (-X importtime, median):"
            )
            lines.append(f"    {'cumulative ms':>13}  {'self ms':>7}  {'% of app':>8}  module")
            for module, cum_ms, self_ms in rows:
                share = (cum_ms if title == "cumulative" else self_ms) / it_handler
                lines.append(f"    {cum_ms:13.1f}  {self_ms:7.1f}  {share:8.0%}  {module}")
    print("\n".join(lines))
    print("\n".join(f"  {k}: {v}" for k, v in info.items()))

    if not args.no_write:
        table = ""
        if packages:
            table += (
                "\nSelf import time of `import app` summed by top-level package (medians, ms): "
                + ", ".join(f"{name} {ms:.1f}" for name, ms in packages if ms >= 0.5)
                + ".\n"
            )
        if stdlib_edges:
            table += (
                f"\nStandard-library imports of >= {STDLIB_NOTE_MS} ms (cumulative) and who imports them: "
                + ", ".join(
                    f"`{module}` {ms:.1f} ms <- `{importer}`" for ms, module, importer in stdlib_edges
                )
                + ".\n"
            )
        for title, rows in (("cumulative", top_rows), ("self", self_rows)):
            if not rows:
                continue
            table += (
                f"\nTop {TOP} modules by **{title}** import time of `import app` (`-X importtime`, median "
                f"over {args.rounds} runs; cumulative includes the nested imports):\n\n"
                f"| cumulative ms | self ms | {title} as % of `app` | module |\n|---:|---:|---:|---|\n"
                + "\n".join(
                    f"| {cum_ms:.1f} | {self_ms:.1f} | "
                    f"{(cum_ms if title == 'cumulative' else self_ms) / it_handler:.0%} | `{module}` |"
                    for module, cum_ms, self_ms in rows
                )
                + "\n"
            )
        extra = (
            " then " + ", ".join(f"`{p}`" for p in args.path) + " (`--path`: a `sam build` layer's python/)"
            if args.path
            else ""
        )
        body = f"""## Metrics handler: cold start (import) vs `import boto3` (Python {target_version})

Run {now()} with `{" ".join([shown(sys.executable), *sys.argv])}`.

- What: a fresh `{shown(args.python)}` per run; `import app` with `functions/metrics` first on
  `sys.path`{extra} and the template's environment, versus `import boto3`, versus the same interpreter with
  the same setup and no import. {args.rounds} alternating rounds after 2 warm-up rounds; medians.
  {pinning[0].upper() + pinning[1:]}.
- Lambda runs python3.13 on arm64 (Graviton) with the layer in `/opt/python`; this run is Python
  {target_version} on {platform.machine()}. The ratio, not the milliseconds, is the point.

| | median wall ms | import cost ms (minus empty) | `-X importtime` cumulative ms |
|---|---:|---:|---:|
| empty interpreter | {med["empty"]:.1f} | - | - |
| `import app` (metrics handler) | {med["handler"]:.1f} | {handler_ms:.1f} | {it_handler:.1f} |
| `import boto3` | {med["boto3"]:.1f} | {boto3_ms:.1f} | {it_boto3:.1f} |
| **ratio handler / boto3** | | **{ratio:.2f}** | {it_ratio:.2f} |

Goal: handler import <= {GOAL_RATIO} x boto3 import. **{verdict}** (wall-time ratio).
{table}
Machine:

{machine_markdown(info)}
"""
        write_section(args.section, body)


if __name__ == "__main__":
    main()
