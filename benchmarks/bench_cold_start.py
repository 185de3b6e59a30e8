"""Cold start of each function (import + first batch), with and without bytecode, against ``import boto3``.

One Lambda cold start, as measured here: a fresh python3.13 imports the handler (``app`` from the
function's code, then the layer, the way Lambda lays them out: /var/task first, then /opt/python)
and handles its first SQS batch of 10 real sample records from events/ (the samples the template's
rules route to that function, in path order, repeated when fewer than 10 exist). The reference is
``import boto3``: what a plain boto3 function pays before its first line runs.

How:

* The code is built here, for this machine's CPU, by the same Makefiles ``sam build`` runs
  (layers/batchpilot/Makefile, functions/Makefile): the "bytecode" tree is what ships (python3.13
  unchecked-hash pyc for every module); the "no bytecode" tree is the same without any
  ``__pycache__``, which is what SAM's python3.13 build method shipped before (Lambda's /opt and
  /var/task are read-only, so every cold start compiled every module it imported).
* Every program is a fresh ``python3.13 -I -S -B``: only the stdlib, the function and the layer are
  importable, and nothing writes bytecode. Programs alternate, in rotating order, for ``--rounds``
  rounds after two warm-up rounds (page cache); medians are reported.
* Times are taken inside the child with ``perf_counter`` (wall) and ``process_time`` (CPU), around
  the import and around the first batch. The parent also times the whole process (wall time minus
  that of an empty interpreter), as a cross-check that includes interpreter start and exit.
* The functions that call AWS talk to a fake AWS endpoint on 127.0.0.1 served by this process
  (``AWS_ENDPOINT_URL``): DynamoDB writes succeed, SNS accepts, EventBridge accepts, Batch and
  SageMaker know no job (as for a plain replay). botocore's whole client path runs (models,
  signing, HTTP, parsing); network latency to AWS does not, so real first batches are slower by
  the round trips (the call counts are reported).

Ratios are against ``import boto3`` *with* bytecode, for both trees: the Lambda runtime's own boto3
has bytecode, so that is what a plain boto3 function pays. Goals (benchmarks/README.md, "Goals"): metrics <=
0.75x, alerts <= 1.5x. Then ``-X importtime`` of each handler (bytecode tree) shows where the time
goes. Reported, never asserted. Lambda runs arm64 (Graviton): read ratios, not milliseconds.

    .venv/bin/python benchmarks/bench_cold_start.py [--rounds 21] [--functions metrics,alerts]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import xml.sax.saxutils
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from _common import (
    ROOT,
    machine,
    machine_markdown,
    now,
    pin_to_one_core,
    shown,
    source_tree,
    sqs_record,
    write_section,
)
from batchpilot_local.template import FunctionSpec, load_template
from batchpilot_local.testing.harness import LAMBDA_CONTEXT_SOURCE

GOALS = {"metrics": 0.75, "alerts": 1.5}  # cold start / `import boto3` (benchmarks/README.md, "Goals")
BATCH_SIZE = 10  # the first batch: the template's BatchSize for metrics, recovery and capacity
TOP = 12
CHAT_LIBRARIES = ("slack_sdk", "slack", "pymsteams", "msteams", "teams")
TREES = ("bytecode", "no bytecode")
TABLE_HEADER = (
    "| function | tree | import ms | first batch ms | total ms | total / boto3 | CPU ms | CPU / boto3 "
    "| whole process ms | process / boto3 |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
)

# Runs in `python3.13 -I -S -B -c`. argv: mode (empty | boto3 | handler), code dir, layer python dir,
# handler ("app.lambda_handler"), SQS event file, result file. Writes {"import": [wall s, cpu s],
# "first_batch": [...], "failures": n, "chat": [...]} (only "import" for boto3; nothing for empty).
CHILD = (
    r"""
import json, os, sys, time

mode, code_dir, layer_dir, handler, event_file, result_file = sys.argv[1:7]
sys.path[0:0] = [code_dir, layer_dir]  # Lambda: /var/task first, then /opt/python
if mode != "empty":
    result = {}
    if mode == "boto3":
        w0, c0 = time.perf_counter(), time.process_time()
        import boto3
        result["import"] = [time.perf_counter() - w0, time.process_time() - c0]
    else:
        with open(event_file) as f:
            event = json.load(f)

"""
    + textwrap.indent(LAMBDA_CONTEXT_SOURCE, " " * 8)
    + r"""
        module_name, attribute = handler.rsplit(".", 1)
        w0, c0 = time.perf_counter(), time.process_time()
        # __import__, not importlib.import_module: only the former shows up in -X importtime.
        function = getattr(__import__(module_name, fromlist=[attribute]), attribute)
        w1, c1 = time.perf_counter(), time.process_time()
        response = function(event, Context())
        w2, c2 = time.perf_counter(), time.process_time()
        result["import"] = [w1 - w0, c1 - c0]
        result["first_batch"] = [w2 - w1, c2 - c1]
        result["failures"] = len((response or {}).get("batchItemFailures") or [])
        result["chat"] = sorted(
            m for m in sys.modules if m.split(".")[0] in CHAT_LIBRARIES
        )
    with open(result_file, "w") as f:
        json.dump(result, f)
"""
).replace("CHAT_LIBRARIES", repr(CHAT_LIBRARIES))


# ------------------------------------------------------------------------------ fake AWS endpoint


class FakeAws(ThreadingHTTPServer):
    """Canned AWS answers on 127.0.0.1 (see the module doc); counts calls by ``service:Operation``."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _FakeAwsHandler)
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def count(self, operation: str) -> None:
        with self.lock:
            self.calls[operation] += 1

    def take_calls(self) -> Counter[str]:
        """The calls counted since the last take, and reset."""
        with self.lock:
            calls, self.calls = self.calls, Counter()
        return calls


class _FakeAwsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body are two writes: with Nagle's algorithm on, the client's delayed ACK would
    # add 40 ms to every call.
    disable_nagle_algorithm = True
    server: FakeAws

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: one line per request would drown the benchmark's own output

    def _reply(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amzn-RequestId", "00000000-0000-4000-8000-000000000000")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # S3 (rest-xml): no checkpoint objects anywhere
        self.server.count("s3:" + self.path.split("?")[0])
        body = (
            b'<?xml version="1.0"?><ListBucketResult><IsTruncated>false</IsTruncated>'
            b"<KeyCount>0</KeyCount></ListBucketResult>"
        )
        self._reply(200, body, "application/xml")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        target = self.headers.get("X-Amz-Target")
        if target:  # JSON protocol: DynamoDB, EventBridge, SageMaker, Secrets Manager
            service, operation = target.split(".", 1)
            self.server.count(f"{service}:{operation}")
            self._json(operation, json.loads(body or b"{}"))
        elif body.startswith(b"Action=") or b"&Action=" in body:  # query protocol: SNS
            form = {key: values[0] for key, values in parse_qs(body.decode()).items()}
            self.server.count("sns:" + form["Action"])
            self._query(form)
        else:  # rest-json: Batch
            self.server.count("batch:" + self.path)
            if self.path == "/v1/describeservicejob":  # Batch's answer for an unknown job
                self._reply(
                    400,
                    b'{"message": "Job not found"}',
                    "application/json",
                    {"x-amzn-ErrorType": "ClientException"},
                )
            else:
                self._reply(200, b'{"jobs": []}', "application/json")

    def _json(self, operation: str, request: dict[str, Any]) -> None:
        kind = "application/x-amz-json-1.1"
        if operation == "DescribeTrainingJob":
            body = {"__type": "ValidationException", "message": "Requested resource not found."}
            self._reply(400, json.dumps(body).encode(), kind)
            return
        answers: dict[str, Any] = {
            "PutEvents": {
                "FailedEntryCount": 0,
                "Entries": [{"EventId": f"e-{i}"} for i, _ in enumerate(request.get("Entries", []))],
            },
            "Query": {"Items": [], "Count": 0, "ScannedCount": 0},
            "BatchWriteItem": {"UnprocessedItems": {}},
        }
        self._reply(200, json.dumps(answers.get(operation, {})).encode(), kind)

    def _query(self, form: dict[str, str]) -> None:
        action = form["Action"]
        result = ""
        if action == "PublishBatch":
            ids = [
                v
                for k, v in sorted(form.items())
                if k.startswith("PublishBatchRequestEntries.member.") and k.endswith(".Id")
            ]
            members = "".join(
                f"<member><Id>{xml.sax.saxutils.escape(i)}</Id><MessageId>m-{i}</MessageId></member>"
                for i in ids
            )
            result = f"<Successful>{members}</Successful><Failed/>"
        elif action == "Publish":
            result = "<MessageId>m-0</MessageId>"
        body = (
            f'<{action}Response xmlns="http://sns.amazonaws.com/doc/2010-03-31/">'
            f"<{action}Result>{result}</{action}Result>"
            f"<ResponseMetadata><RequestId>r-0</RequestId></ResponseMetadata></{action}Response>"
        )
        self._reply(200, body.encode(), "text/xml")


# ----------------------------------------------------------------------------------------- set-up


def find_python313() -> str | None:
    """A working python3.13: on the PATH (not a pyenv shim without 3.13), else pyenv's newest 3.13.x."""
    candidates = [shutil.which("python3.13") or ""]
    root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates += sorted(glob.glob(f"{root}/versions/3.13*/bin/python3.13"), reverse=True)
    for candidate in filter(None, candidates):
        check = "import sys; sys.exit(sys.version_info[:2] != (3, 13))"
        if subprocess.run([candidate, "-c", check], capture_output=True).returncode == 0:
            return str(Path(candidate).resolve())
    return None


def host_layer_arch() -> str:
    machine_name = platform.machine().lower()
    if machine_name in ("x86_64", "amd64"):
        return "x86_64"
    if machine_name in ("aarch64", "arm64"):
        return "arm64"
    raise SystemExit(f"cannot build the layer for this CPU ({machine_name})")


def build_trees(
    python313: str, specs: list[FunctionSpec], workdir: Path, source: Path
) -> dict[str, tuple[Path, dict[str, Path]]]:
    """Both trees, from the sources in ``source``: ``{tree: (layer python dir, {function: code dir})}``.

    Raises:
        SystemExit: a Makefile failed (its output is shown).
    """
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(python313).parent), os.environ.get("PATH", "")]),
        "BATCHPILOT_LAYER_ARCH": host_layer_arch(),
    }
    built = workdir / "bytecode"

    def make(makefile: Path, target: str, cwd: Path, artifacts: Path) -> None:
        result = subprocess.run(
            ["make", "--makefile", str(makefile), target],
            cwd=cwd,
            env={**env, "ARTIFACTS_DIR": str(artifacts)},
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise SystemExit(f"make {target} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")

    make(
        source / "layers" / "batchpilot" / "Makefile",
        "build-BatchPilotLayer",
        source / "layers" / "batchpilot",
        built / "opt",
    )
    for spec in specs:
        make(
            source / "functions" / "Makefile",
            f"build-{spec.logical_id}",
            spec.code_dir,
            built / spec.short_name / "task",
        )
    stripped = workdir / "no-bytecode"
    shutil.copytree(built, stripped, ignore=shutil.ignore_patterns("__pycache__"))
    return {
        tree: (root / "opt" / "python", {spec.short_name: root / spec.short_name / "task" for spec in specs})
        for tree, root in (("bytecode", built), ("no bytecode", stripped))
    }


def first_batch(spec: FunctionSpec, template_routes: Any, events_dir: Path) -> tuple[dict[str, Any], int]:
    """The SQS event of the function's first batch and how many distinct samples it holds."""
    samples = []
    for path in sorted(events_dir.rglob("*.json")):
        parts = path.relative_to(events_dir).parts
        if parts[0] in ("ignored", "scenarios"):
            continue
        event = json.loads(path.read_text())
        if isinstance(event, dict) and any(
            r.function.short_name == spec.short_name for r in template_routes(event)
        ):
            samples.append(event)
    if not samples:
        raise SystemExit(f"no sample in events/ is routed to {spec.short_name}")
    records = [
        sqs_record(
            index,
            json.dumps(samples[index % len(samples)], separators=(",", ":")),
            f"batchpilot-{spec.short_name}",
        )
        for index in range(BATCH_SIZE)
    ]
    return {"Records": records}, min(len(samples), BATCH_SIZE)


def lambda_env(spec: FunctionSpec, endpoint: str) -> dict[str, str]:
    """The template's variables for the function, Lambda's own, and fake credentials + endpoint."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        **spec.environment,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
        "AWS_LAMBDA_FUNCTION_NAME": spec.lambda_name,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_size),
        "AWS_LAMBDA_LOG_FORMAT": "JSON",
        "_HANDLER": spec.handler,
        "LANG": "en_US.UTF-8",
        "TZ": ":UTC",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": endpoint,
    }


# ------------------------------------------------------------------------------------ measurement


class Program:
    """One child program: what it runs and where."""

    def __init__(
        self,
        mode: str,
        tree: str,
        code_dir: Path,
        layer_dir: Path,
        handler: str,
        event_file: Path,
        env: dict[str, str],
    ):
        self.mode, self.tree = mode, tree
        self.args = [mode, str(code_dir), str(layer_dir), handler, str(event_file)]
        self.env = env

    def run(
        self, python: str, result_file: Path, importtime: bool = False
    ) -> tuple[float, dict[str, Any], str]:
        """Run once: (parent wall s, the child's result, stderr)."""
        result_file.unlink(missing_ok=True)
        flags = ["-I", "-S", "-B", *(["-X", "importtime"] if importtime else [])]
        start = time.perf_counter()
        proc = subprocess.run(
            [python, *flags, "-c", CHILD, *self.args, str(result_file)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"{self.mode} ({self.tree}) failed:\n{proc.stderr[-3000:]}")
        result = json.loads(result_file.read_text()) if self.mode != "empty" else {}
        return elapsed, result, proc.stderr


def parse_importtime(stderr: str) -> list[tuple[str, int, int, int]]:
    """``-X importtime`` lines: (module, depth, self us, cumulative us), in output order."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        prefix, cumulative, name = line.split("|")
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
        rows.append((name.strip(), depth, int(prefix.removeprefix("import time:")), int(cumulative)))
    return rows


def app_subtree(
    rows: list[tuple[str, int, int, int]],
) -> tuple[list[tuple[str, int, int, int]], list[tuple[str, int, int, int]]]:
    """(rows of the ``import app`` subtree, top-level rows imported after it: during the first batch)."""
    app_index = next(i for i, row in enumerate(rows) if row[1] == 0 and row[0] == "app")
    start = max((i for i, row in enumerate(rows[:app_index]) if row[1] == 0), default=-1) + 1
    return rows[start : app_index + 1], [row for row in rows[app_index + 1 :] if row[1] == 0]


def importer_chain(rows: list[tuple[str, int, int, int]], index: int) -> list[str]:
    """Who imported ``rows[index]``: each next row with a smaller depth (children print first)."""
    chain, depth = [], rows[index][1]
    for module, row_depth, _, _ in rows[index + 1 :]:
        if row_depth < depth:
            chain.append(module)
            depth = row_depth
    return chain


def median_ms(values: list[float]) -> float:
    """Median of seconds, in ms (NaN when there is none)."""
    return statistics.median(values) * 1000 if values else float("nan")


class Measurements:
    """Everything one run collects, and the medians the report needs.

    ``child[(what, tree, stage)]`` holds seconds measured inside the child, stage one of
    ``import wall``, ``import cpu``, ``first_batch wall``, ``first_batch cpu``, ``total wall``,
    ``total cpu``; ``process[(what, tree)]`` the parent's wall seconds for the whole process.
    """

    def __init__(self) -> None:
        self.child: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        self.process: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.calls: dict[str, Counter[str]] = {}
        self.failures: dict[str, int] = {}
        self.chat: dict[str, list[str]] = {}
        self.profiles: dict[str, list[list[tuple[str, int, int, int]]]] = defaultdict(list)

    def add(self, what: str, tree: str, elapsed: float, result: dict[str, Any], calls: Counter[str]) -> None:
        self.process[(what, tree)].append(elapsed)
        for stage in ("import", "first_batch"):
            if stage in result:
                self.child[(what, tree, f"{stage} wall")].append(result[stage][0])
                self.child[(what, tree, f"{stage} cpu")].append(result[stage][1])
        if "first_batch" in result:
            self.child[(what, tree, "total wall")].append(result["import"][0] + result["first_batch"][0])
            self.child[(what, tree, "total cpu")].append(result["import"][1] + result["first_batch"][1])
            if tree == "bytecode":  # the same in every run: keep the last
                self.calls[what], self.failures[what], self.chat[what] = (
                    calls,
                    result["failures"],
                    result["chat"],
                )

    def ms(self, what: str, tree: str, stage: str) -> float:
        """Median of a child measurement, ms."""
        return median_ms(self.child[(what, tree, stage)])

    def process_ms(self, what: str, tree: str) -> float:
        """Median wall time of the whole process minus that of an empty interpreter, ms."""
        return median_ms(self.process[(what, tree)]) - median_ms(self.process[("empty", tree)])

    def ratio(self, what: str, tree: str, kind: str = "wall") -> float:
        """Median over the rounds of (import + first batch) / ``import boto3`` with bytecode.

        Each round runs every program once, so the two runs of a pair are minutes closer in time
        than the runs of two medians: a change in the machine's load (others' tests) cancels out.
        ``kind`` is ``wall`` or ``cpu``; ``process`` pairs the whole processes minus the empty one.
        """
        if kind == "process":
            pairs = zip(
                self.process[(what, tree)],
                self.process[("boto3", "bytecode")],
                self.process[("empty", tree)],
                self.process[("empty", "bytecode")],
                strict=True,
            )
            return statistics.median((a - e) / (b - eb) for a, b, e, eb in pairs)
        totals = self.child[(what, tree, f"total {kind}")]
        references = self.child[("boto3", "bytecode", f"import {kind}")]
        return statistics.median(a / b for a, b in zip(totals, references, strict=True))


def measure(
    programs: dict[tuple[str, str], Program],
    python: str,
    server: FakeAws,
    workdir: Path,
    rounds: int,
    importtime_rounds: int,
    names: list[str],
) -> Measurements:
    """Every program once per round, rotating the order each round. The ``-X importtime`` runs of
    the bytecode tree (``boto3`` and each handler) are spread evenly over the measured rounds, so
    they see the same machine load as the timed runs."""
    data = Measurements()
    keys = list(programs)
    result_file = workdir / "result.json"
    started = time.perf_counter()
    every = max(1, rounds // importtime_rounds)
    for round_ in range(rounds + 2):
        order = keys[round_ % len(keys) :] + keys[: round_ % len(keys)]
        for key in order:
            server.take_calls()
            elapsed, result, _ = programs[key].run(python, result_file)
            calls = server.take_calls()
            if round_ >= 2:  # two warm-up rounds: page cache
                data.add(*key, elapsed, result, calls)
        if round_ >= 2 and (round_ - 2) % every == 0 and len(data.profiles["boto3"]) < importtime_rounds:
            for what in ["boto3", *names]:
                _, _, stderr = programs[(what, "bytecode")].run(python, result_file, importtime=True)
                data.profiles[what].append(parse_importtime(stderr))
        print(f"  round {round_ + 1}/{rounds + 2} ({time.perf_counter() - started:.0f} s)", flush=True)
    return data


def where_the_time_goes(data: Measurements, name: str) -> tuple[str, str]:
    """The ``-X importtime`` analysis of one handler: (console text, markdown)."""
    profiles = data.profiles[name]
    boto3_ms = (
        statistics.median(
            next(cum for module, depth, _, cum in rows if depth == 0 and module == "boto3")
            for rows in data.profiles["boto3"]
        )
        / 1000
    )
    per_module: dict[str, list[tuple[int, int]]] = defaultdict(list)
    lazy: dict[str, list[int]] = defaultdict(list)
    chains: dict[str, list[str]] = {}
    app_totals = []
    for rows in profiles:
        subtree, after = app_subtree(rows)
        app_totals.append(subtree[-1][3])
        for index, (module, _, self_us, cum) in enumerate(subtree):
            per_module[module].append((self_us, cum))
            chains.setdefault(module, importer_chain(subtree, index))
        for module, _, _, cum in after:
            lazy[module].append(cum)
    app_ms = statistics.median(app_totals) / 1000
    medians = [
        (module, statistics.median(c for _, c in v) / 1000, statistics.median(s for s, _ in v) / 1000)
        for module, v in per_module.items()
        if len(v) == len(profiles)
    ]
    by_package: dict[str, float] = defaultdict(float)
    for module, _, self_ms in medians:
        top = module.split(".")[0]
        by_package["stdlib" if top in sys.stdlib_module_names else top] += self_ms
    packages = ", ".join(
        f"{p} {ms:.1f}" for p, ms in sorted(by_package.items(), key=lambda i: i[1], reverse=True) if ms >= 1.0
    )
    top_rows = sorted(medians, key=lambda row: row[1], reverse=True)[:TOP]
    lazy_rows = sorted(
        ((m, statistics.median(v) / 1000) for m, v in lazy.items() if len(v) == len(profiles)),
        key=lambda row: row[1],
        reverse=True,
    )[:TOP]
    lazy_text = ", ".join(f"{m} {ms:.1f}" for m, ms in lazy_rows) or "nothing"

    text = [
        f"  {name}: `import app` {app_ms:.1f} ms (import boto3 {boto3_ms:.1f} ms); "
        f"self ms by package: {packages}"
    ]
    for module, cum_ms, self_ms in top_rows:
        text.append(
            f"    {cum_ms:7.1f} {self_ms:6.1f}  {module}  <- {' <- '.join(chains.get(module, [])[:3])}"
        )
    text.append(f"    imported during the first batch (cumulative ms): {lazy_text}")

    table = "\n".join(
        f"| {cum_ms:.1f} | {self_ms:.1f} | `{module}` | "
        + (" ← ".join(f"`{m}`" for m in chains.get(module, [])[:2]) or "-")
        + " |"
        for module, cum_ms, self_ms in top_rows
    )
    markdown = (
        f"**{name}**: `import app` {app_ms:.1f} ms (`import boto3` {boto3_ms:.1f} ms). "
        f"Self time by top-level package (ms): {packages}. Imported during the first batch "
        f"(cumulative ms): {', '.join(f'`{m}` {ms:.1f}' for m, ms in lazy_rows) or 'nothing'}.\n\n"
        "| cumulative ms | self ms | module | imported by |\n|---:|---:|---|---|\n"
        f"{table}\n"
    )
    return "\n".join(text), markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="alternating rounds (>= 11)")
    parser.add_argument("--importtime-rounds", type=int, default=9, help="-X importtime runs per handler")
    parser.add_argument("--functions", default="metrics,alerts,capacity,recovery", help="comma-separated")
    parser.add_argument("--python", default=None, help="the python3.13 to run (default: PATH, then pyenv)")
    parser.add_argument(
        "--ref", default=None, help="measure this git commit (e.g. HEAD) instead of the working tree"
    )
    parser.add_argument("--section", default="cold_start", help="RESULTS.md section key to replace")
    parser.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    args = parser.parse_args()
    if args.rounds < 11:
        parser.error("--rounds must be at least 11")
    args.importtime_rounds = max(1, min(args.importtime_rounds, args.rounds))
    python = args.python or find_python313()
    if python is None:  # like the packaging tests: skipped with the reason, not failed
        print(
            "bench_cold_start skipped: python3.13 not found (PATH or ~/.pyenv/versions/3.13*); the "
            "layer's bytecode is 3.13's and only 3.13 can load it",
            file=sys.stderr,
        )
        return
    names = [n.strip() for n in args.functions.split(",") if n.strip()]

    pinning = pin_to_one_core()  # the children inherit the affinity
    info = machine()
    version = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    info["measured interpreter"] = f"{python} (Python {version}, -I -S -B)"

    server = FakeAws()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    distinct: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-cold-start-") as tmp:
        workdir = Path(tmp)
        source = source_tree(args.ref, workdir)
        template = load_template(source / "template.yaml")
        unknown = sorted(set(names) - set(template.functions))
        if unknown:
            parser.error(f"unknown functions {unknown}; the template has {sorted(template.functions)}")
        specs = [template.functions[n] for n in names]
        if args.ref:
            commit = subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", "--short", args.ref], capture_output=True, text=True
            ).stdout.strip()
            info["sources"] = f"git {args.ref} ({commit})"
        else:
            info["sources"] = "the working tree"
        print(f"building both trees from {info['sources']} with the Makefiles in {workdir} ...", flush=True)
        trees = build_trees(python, specs, workdir, source)
        programs: dict[tuple[str, str], Program] = {}  # (what, tree) -> program
        first = specs[0]
        for tree, (layer_dir, code_dirs) in trees.items():
            env = lambda_env(first, server.url)
            for mode in ("empty", "boto3"):
                programs[(mode, tree)] = Program(
                    mode, tree, code_dirs[first.short_name], layer_dir, "", Path("-"), env
                )
            for spec in specs:
                event, distinct[spec.short_name] = first_batch(spec, template.routes_for, source / "events")
                event_file = workdir / f"{spec.short_name}-event.json"
                event_file.write_text(json.dumps(event))
                programs[(spec.short_name, tree)] = Program(
                    "handler",
                    tree,
                    code_dirs[spec.short_name],
                    layer_dir,
                    spec.handler,
                    event_file,
                    lambda_env(spec, server.url),
                )
        data = measure(programs, python, server, workdir, args.rounds, args.importtime_rounds, names)
    server.shutdown()
    info["load average at end (1/5/15 min)"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())

    boto3 = data.ms("boto3", "bytecode", "import wall")
    boto3_cpu = data.ms("boto3", "bytecode", "import cpu")
    boto3_process = data.process_ms("boto3", "bytecode")
    console = [
        f"cold start, {args.rounds} alternating rounds (+2 warm-up), {python} (Python {version}), {pinning}",
        f"  reference `import boto3` with bytecode: {boto3:.1f} ms wall, {boto3_cpu:.1f} ms CPU "
        f"(without bytecode: {data.ms('boto3', 'no bytecode', 'import wall'):.1f} ms wall)",
    ]
    rows = []
    verdicts = []
    for name in names:
        for tree in TREES:
            imp, batch = data.ms(name, tree, "import wall"), data.ms(name, tree, "first_batch wall")
            # The median of the per-run totals (not the sum of the two medians).
            total, cpu = data.ms(name, tree, "total wall"), data.ms(name, tree, "total cpu")
            process = data.process_ms(name, tree)
            wall_x, cpu_x = data.ratio(name, tree), data.ratio(name, tree, "cpu")
            process_x = data.ratio(name, tree, "process")
            console.append(
                f"  {name:9} {tree:11}: import {imp:6.1f} + first batch {batch:6.1f} = {total:6.1f} ms "
                f"({wall_x:.2f}x boto3); CPU {cpu:6.1f} ms ({cpu_x:.2f}x); "
                f"whole process {process:6.1f} ms ({process_x:.2f}x)"
            )
            rows.append(
                f"| {name} | {tree} | {imp:.1f} | {batch:.1f} | {total:.1f} | **{wall_x:.2f}** "
                f"| {cpu:.1f} | {cpu_x:.2f} | {process:.1f} | {process_x:.2f} |"
            )
        goal = GOALS.get(name)
        if goal is not None:
            ratio = data.ratio(name, "bytecode")
            verdicts.append(
                f"{name} <= {goal}x: **"
                + (
                    f"MET ({ratio:.2f}x)"
                    if ratio <= goal
                    else f"NOT MET: {ratio:.2f}x, {(ratio - goal) * boto3:.0f} ms over"
                )
                + "**"
            )
    console.append(
        "  goals (bytecode, total wall / boto3): " + "; ".join(v.replace("**", "") for v in verdicts)
    )
    analysis = [where_the_time_goes(data, name) for name in names]
    print("\n".join(console + [text for text, _ in analysis]))
    print("\n".join(f"  {k}: {v}" for k, v in info.items()))
    if args.no_write:
        return

    facts = "\n".join(
        f"- {name}: {distinct[name]} distinct sample(s)"
        + (f" repeated to {BATCH_SIZE}" if distinct[name] < BATCH_SIZE else "")
        + "; AWS calls in the first batch: "
        + (", ".join(f"{op} {n}" for op, n in sorted(data.calls[name].items())) or "none")
        + f"; batch item failures: {data.failures[name]}; chat libraries imported: "
        + (", ".join(f"`{m}`" for m in data.chat[name] if "." not in m) or "none")
        for name in names
    )
    title = "Cold start: import + first batch, with and without bytecode, vs `import boto3`"
    body = f"""## {title} (Python {version})

Run {now()} with `{" ".join([shown(sys.executable), *sys.argv])}`.

- What: per function, a fresh `python3.13 -I -S -B` imports the handler (function code, then the
  layer, as /var/task and /opt/python) and handles one SQS batch of {BATCH_SIZE} sample records that
  the template routes to it; the reference is `import boto3` from the same layer. Two trees, built
  by the Makefiles `sam build` runs: **bytecode** (what ships) and **no bytecode** (the same
  without `__pycache__`: what SAM's python3.13 build method shipped before). {args.rounds}
  alternating rounds after 2 warm-up rounds; medians. {pinning[0].upper() + pinning[1:]}.
- Import and first batch are timed inside the child (wall and CPU). "Whole process" is the
  parent's wall time minus an empty interpreter's, so it adds interpreter exit. AWS calls go to a
  fake endpoint on 127.0.0.1 (canned answers): no network latency is included.
- Ratios are against `import boto3` **with** bytecode (the Lambda runtime's own boto3 has it):
  {boto3:.1f} ms wall, {boto3_cpu:.1f} ms CPU, {boto3_process:.1f} ms whole process (without bytecode:
  {data.ms("boto3", "no bytecode", "import wall"):.1f} ms wall).
- Ratios are medians of per-round ratios (each round runs every program once, so the two runs of
  a pair are close in time and changes in load cancel out); times are medians of all rounds.
- The machine was shared with other engineers' test runs: medians of alternating runs, a few ms of
  noise remain. Lambda runs arm64 (Graviton); this is {platform.machine()}: read the ratios.

{TABLE_HEADER}
{chr(10).join(rows)}

Goals (bytecode, total wall / `import boto3`): {"; ".join(verdicts)}.

{facts}

### Where the time goes (bytecode tree, `-X importtime`, median of {args.importtime_rounds} runs)

Cumulative includes nested imports; "imported by" is the importer, then its importer. Module
bodies count as import time (e.g. `app` self time is the handler's set-up: settings, clients).
`-X importtime` adds its own overhead and runs fewer times than the timed runs: read shares and
rankings here, and the totals in the table above.

{chr(10).join(markdown for _, markdown in analysis)}
Machine:

{machine_markdown(info)}
"""
    write_section(args.section, body)


if __name__ == "__main__":
    main()
