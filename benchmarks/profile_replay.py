"""Where a replay's time goes: py-spy samples one `batchpilot replay --format json` of the
benchmark's archive (``bench_replay.archive``: plain job events, one a second of event time) and
this script sorts the samples by function and by layer. It prints a table, then one JSON line,
and writes its section of ``benchmarks/RESULTS.md``.

    .venv/bin/python benchmarks/profile_replay.py                  # 8,000 events, 250 samples/s
    .venv/bin/python benchmarks/profile_replay.py --events 20000 --raw out.txt

py-spy (a dev dependency) starts the replay as its child, which Linux lets a user trace. Samples
of the chat endpoint's server thread (waiting in ``select``) are left out: it holds no CPU.

A sample counts for the function whose feature package is on its stack (``batchpilot/ledger/``,
``alerts``, ``metrics``, ``recovery``, ``capacity``), and for one layer, the first of these that
its stack shows:

- ``aws call: moto DynamoDB work``: inside moto's DynamoDB action (the emulated DynamoDB itself);
- ``aws call: moto request and response``: the rest of moto's handling of a botocore request
  (on the replay's direct paths, under ``_announced``: the request read into moto, or the
  emulator's answer to a Batch or SageMaker read);
- ``aws call: botocore``: the rest of a botocore client call (validation, serialisation, hooks,
  the response parser, on the direct path too);
- ``powertools and logging``: log records, EMF metrics and pydantic parsing, inside a function;
- ``function code``: anything else inside an invocation (``LambdaRuntime.invoke``);
- ``sqs event source mapping``: the replay's sends, receives and deletes (moto's SQS backend);
- ``replay: routing, reports, input``: the rest of the replay loop;
- ``start-up and other``: imports, the template, the embedded AWS, the summary.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from _common import ROOT, machine, machine_markdown, now, write_section
from bench_replay import archive

FUNCTIONS = re.compile(r"\(batchpilot/(ledger|alerts|metrics|recovery|capacity)/")
LAYERS: list[tuple[str, re.Pattern[str]]] = [
    ("aws call: moto DynamoDB work", re.compile(r"DynamoHandler\.call_action")),
    ("aws call: botocore", re.compile(r"parsed_answer")),  # botocore's parser on the direct path
    (
        "aws call: moto request and response",
        re.compile(r"BotocoreStubber|process_request|emulator/direct\.py"),
    ),
    ("aws call: botocore", re.compile(r"botocore/client\.py")),
    (
        "powertools and logging",
        re.compile(
            r"logging/__init__|Logger\.(info|warning|debug)|pydantic|add_metric|flush_metrics|EmfPublisher"
        ),
    ),
    ("function code", re.compile(r"LambdaRuntime\.invoke")),
    (
        "sqs event source mapping",
        re.compile(r"EmbeddedAws\.(send|receive_as_lambda_event|delete_processed|has_messages)"),
    ),
    ("replay: routing, reports, input", re.compile(r"Replayer\.(run_items|_run_segment)")),
]
OTHER = "start-up and other"


def categorise(raw: str) -> dict[str, Counter[str]]:
    """``{"layer": Counter, "function": Counter}`` of sample counts from py-spy's ``--format raw``
    output (one ``frame;frame;... count`` line per distinct stack)."""
    layers: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit() or "selectors.py" in stack:
            continue
        samples = int(count)
        in_call = "botocore/client.py" in stack  # inside a client's API call
        layer = OTHER
        for name, pattern in LAYERS:
            if name.startswith("aws call") and not in_call:
                continue
            if name == "powertools and logging" and "LambdaRuntime.invoke" not in stack:
                continue
            if pattern.search(stack):
                layer = name
                break
        layers[layer] += samples
        found = FUNCTIONS.search(stack)
        functions[found.group(1).lower() if found else "(no function)"] += samples
    return {"layer": layers, "function": functions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=8_000)
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--raw", type=Path, help="keep py-spy's raw output here")
    parser.add_argument("--section", default="replay_profile", help="the RESULTS.md section to write")
    args = parser.parse_args()
    info = machine()
    py_spy = Path(sys.executable).with_name("py-spy")
    spy = str(py_spy) if py_spy.exists() else shutil.which("py-spy")
    if spy is None:
        raise SystemExit("py-spy is not installed: make test installs it into .venv (a dev dependency)")
    with tempfile.TemporaryDirectory() as folder:
        events = Path(folder) / "archive.jsonl"
        events.write_text("\n".join(json.dumps(e) for e in archive(args.events)) + "\n", encoding="utf-8")
        raw = args.raw or Path(folder) / "raw.txt"
        code = (
            "import sys\nfrom batchpilot_local.cli import main\n"
            "main(['replay', '--format', 'json', sys.argv[1]])"
        )
        command = [spy, "record", "-r", str(args.rate), "-f", "raw", "-o", str(raw), "--"]
        done = subprocess.run(
            [*command, sys.executable, "-c", code, str(events)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"py-spy or the replay failed: {done.stderr[-2000:]}")
        counts = categorise(raw.read_text(encoding="utf-8"))
    total = sum(counts["layer"].values()) or 1
    for kind in ("function", "layer"):
        print(f"by {kind}:")
        for name, samples in counts[kind].most_common():
            print(f"  {100 * samples / total:5.1f} %  {name}")
    shares = {
        kind: {name: round(100 * samples / total, 1) for name, samples in counter.most_common()}
        for kind, counter in counts.items()
    }
    print(json.dumps({"events": args.events, "samples": total, "percent": shares}))
    lines = [
        f"## Replay: where the time goes ({args.events:,} events, py-spy at {args.rate} samples/s)",
        "",
        f"`benchmarks/profile_replay.py --events {args.events}`, {now()}, {total:,} samples (the",
        "script's docstring says how a sample is sorted).",
        "",
    ]
    for kind in ("function", "layer"):
        lines += [f"| by {kind} | share |", "|---|---:|"]
        lines += [f"| {name} | {share:g} % |" for name, share in shares[kind].items()]
        lines.append("")
    lines += ["Machine:", "", machine_markdown(info)]
    write_section(args.section, "\n".join(lines))


if __name__ == "__main__":
    main()
