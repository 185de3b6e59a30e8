"""`sam build` of the real template: the layer must carry every runtime dependency, and nothing else.

What these tests catch:

* a layer that misses a dependency: every function is imported and invoked by a bare
  ``python3.13 -I -S`` whose only non-stdlib paths are the built function and the built layer,
  as in Lambda (``/var/task`` + ``/opt/python``), so a module that only the dev venv provides
  fails here instead of at the first cold start in AWS;
* a layer built for the wrong CPU or Python (the functions run on arm64, python3.13);
* tooling (moto, pytest, cfn-lint, the replay runner) leaking into the layer;
* a third-party import in the package or a function that ``layers/batchpilot/requirements.txt``
  does not pin;
* a cold start that compiles: /opt and /var/task are read-only in Lambda, so a module without
  python3.13 bytecode is compiled from source at every cold start. Every ``.py`` of the built layer
  and functions must have its unchecked-hash pyc, and importing and invoking each handler from a
  read-only copy laid out as Lambda does must compile nothing from the layer or the function.

The build needs the SAM CLI (``$SAM_CLI``, else ``.venv-sam/bin/sam``) and a python3.13
interpreter (layers/batchpilot/Makefile and functions/Makefile run it for pip and compileall).
Without either the tests skip with the reason. Everything is built into pytest's temporary
directory, never into the repo.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

import pytest
from batchpilot_local.testing.harness import LAMBDA_CONTEXT_SOURCE
from cfnlint.decode import decode_str

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_PATH = ROOT / "template.yaml"
LAYER_SRC = ROOT / "layers" / "batchpilot"
REQUIREMENTS = LAYER_SRC / "requirements.txt"
EVENTS_DIR = ROOT / "events"
SAMPLE_EVENT = EVENTS_DIR / "batch-job" / "failed-spot-reclaim.json"
FAKE_SECRET = "not-a-real-secret"  # WANDB_API_KEY in SAMPLE_EVENT: must never be printed

BUILD_TIMEOUT = 900  # seconds, per `sam build`
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024  # function + all its layers, unzipped

# Distributions (top-level import names) that are dev/test tooling and must stay out of the layer.
TOOLING = ("moto", "pytest", "_pytest", "cfnlint", "batchpilot_local", "hypothesis", "samtranslator", "mypy")

ELF_MACHINE = {0x3E: "x86_64", 0xB7: "aarch64"}
SAM_ARCH = {"x86_64": "x86_64", "aarch64": "arm64"}
PSEUDO_PARAMETERS = {
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "111122223333",
    "AWS::StackName": "batchpilot",
}


# ---------------------------------------------------------------------------------------- helpers


def load_template(path: Path = TEMPLATE_PATH) -> dict[str, Any]:
    """The template as plain dicts, intrinsics in long form (``{"Ref": ...}``), via cfn-lint."""
    template, problems = decode_str(path.read_text())
    assert template is not None and not problems, f"{path} does not parse: {problems}"
    return json.loads(json.dumps(template))


def python_functions(template: dict[str, Any]) -> list[str]:
    """Logical ids of every AWS::Serverless::Function with a python runtime."""
    runtime_default = template.get("Globals", {}).get("Function", {}).get("Runtime", "")
    return sorted(
        logical_id
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
        and str(resource["Properties"].get("Runtime", runtime_default)).startswith("python")
    )


def layers(template: dict[str, Any]) -> list[str]:
    return sorted(
        logical_id
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] in ("AWS::Serverless::LayerVersion", "AWS::Lambda::LayerVersion")
    )


def host_arch() -> str | None:
    machine = platform.machine().lower()
    return {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(machine)


def elf_machine(path: Path) -> str:
    """CPU an ELF shared object is built for, from its header (e_machine, little-endian)."""
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", f"{path} is not an ELF file"
    code = int.from_bytes(header[18:20], "little")
    return ELF_MACHINE.get(code, hex(code))


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_requirements() -> dict[str, str]:
    """``{canonical name: version}`` of requirements.txt; fails on any unpinned line."""
    pins: dict[str, str] = {}
    for raw in REQUIREMENTS.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(
            r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([A-Za-z0-9.+!_-]+)(\s*;.*)?", line
        )
        assert match, f"{REQUIREMENTS.name}: {raw!r} is not pinned with == (the layer must be reproducible)"
        pins[canonical(match.group(1))] = match.group(3)
    return pins


def tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


# ---------------------------------------------------------------------------------- tool discovery


def find_sam() -> str | None:
    candidates = [os.environ.get("SAM_CLI", ""), str(ROOT / ".venv-sam" / "bin" / "sam")]
    return next((c for c in candidates if c and os.access(c, os.X_OK) and Path(c).is_file()), None)


def _is_python313(executable: str) -> bool:
    try:
        out = subprocess.run(
            [executable, "-c", "import sys; print(sys.version_info[:2] == (3, 13))"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYENV_VERSION": os.environ.get("PYENV_VERSION", "3.13.0")},
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() == "True"


def find_python313() -> str | None:
    """A real python3.13 binary (not a pyenv shim, which fails unless a 3.13 version is selected)."""
    dirs: list[str] = []
    pyenv = shutil.which("pyenv")
    if pyenv:
        try:
            prefix = subprocess.run(
                [pyenv, "prefix", "3.13.0"], capture_output=True, text=True, timeout=60
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            prefix = ""
        if prefix:
            dirs.append(str(Path(prefix) / "bin"))
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    dirs += sorted(glob.glob(f"{pyenv_root}/versions/3.13*/bin"), reverse=True)
    dirs += sorted(glob.glob("/root/.pyenv/versions/3.13*/bin"), reverse=True)
    dirs += os.environ.get("PATH", "").split(os.pathsep)
    for directory in dirs:
        if "shims" in Path(directory).parts:
            continue
        found = shutil.which("python3.13", path=directory)
        if found and _is_python313(found):
            return str(Path(found).resolve())
    return None


# ---------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def sam_cli() -> str:
    sam = find_sam()
    if sam is None:
        pytest.skip(
            "SAM CLI not found: set SAM_CLI=/abs/path/to/sam or create .venv-sam (make validate) "
            "to run the packaging test"
        )
    return sam


@pytest.fixture(scope="session")
def python313() -> str:
    found = find_python313()
    if found is None:
        pytest.skip(
            "python3.13 not found: sam build needs it for the python3.13 runtime; "
            "install it to run the packaging test"
        )
    return found


def sam_build(sam: str, python313: str, template: Path, build_dir: Path, layer_arch: str = "arm64") -> Path:
    """``sam build`` of ``template`` (paths relative to the repo) into ``build_dir``; returns it.

    ``layer_arch`` (``arm64`` or ``x86_64``) is the CPU of the wheels layers/batchpilot/Makefile
    installs: SAM does not tell a makefile build its BuildArchitecture.
    """
    env = {
        **os.environ,
        # The Makefiles and SAM look python3.13 up on PATH: the real binary first (ahead of any shim).
        "PATH": os.pathsep.join([str(Path(python313).parent), os.environ.get("PATH", "")]),
        "SAM_CLI_TELEMETRY": "0",
        "BATCHPILOT_LAYER_ARCH": layer_arch,
    }
    command = [
        sam, "build",
        "--template", str(template),
        "--build-dir", str(build_dir),
        "--base-dir", str(ROOT),
        # samconfig.toml asks for cached builds; a cache is only allowed inside the temp dir, and a
        # fresh one per build (so the arm64 and host-arch builds can never share artifacts).
        "--no-cached", "--cache-dir", str(build_dir.parent / f"{build_dir.name}-cache"),
        "--parallel",
    ]  # fmt: skip
    try:
        result = subprocess.run(
            command, cwd=build_dir.parent, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"sam build of {template} took over {BUILD_TIMEOUT} s: {exc}")
    if result.returncode != 0:
        pytest.fail(
            f"sam build of {template} failed (exit {result.returncode}):\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    assert (build_dir / "template.yaml").is_file(), f"sam build wrote no template:\n{result.stdout[-2000:]}"
    return build_dir


@pytest.fixture(scope="session")
def arm64_build(sam_cli: str, python313: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real template, as deployed (arm64)."""
    return sam_build(sam_cli, python313, TEMPLATE_PATH, tmp_path_factory.mktemp("arm64") / "build")


def _switch_architecture(node: Any, arch: str) -> Iterator[str]:
    """Set every Architectures / CompatibleArchitectures / BuildArchitecture to ``arch``; yield paths."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("Architectures", "CompatibleArchitectures"):
                node[key] = [arch]
                yield key
            elif key == "BuildArchitecture":
                node[key] = arch
                yield key
            else:
                yield from _switch_architecture(value, arch)
    elif isinstance(node, list):
        for item in node:
            yield from _switch_architecture(item, arch)


@pytest.fixture(scope="session")
def host_build(
    arm64_build: Path, sam_cli: str, python313: str, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A build whose native code this machine can load, to import and invoke the functions.

    On an aarch64 host that is the arm64 build itself. On x86_64 it is a copy of the template with
    the architectures switched to x86_64 (same requirements, same sources), built separately:
    x86_64 cannot import the aarch64 pydantic_core of the real build.
    """
    arch = host_arch()
    if arch == "aarch64":
        return arm64_build
    if arch is None:
        pytest.skip(
            f"host architecture {platform.machine()!r} is neither x86_64 nor aarch64: cannot import the layer"
        )
    template = load_template()
    switched = list(_switch_architecture(template, SAM_ARCH[arch]))
    assert "BuildArchitecture" in switched, "the layer's Metadata has no BuildArchitecture to switch"
    workdir = tmp_path_factory.mktemp("hostarch")
    copy = workdir / "template.json"  # JSON is valid template syntax; paths stay relative to --base-dir
    copy.write_text(json.dumps(template, indent=1))
    return sam_build(sam_cli, python313, copy, workdir / "build", layer_arch=SAM_ARCH[arch])


def built_resource_dir(build_dir: Path, logical_id: str) -> Path:
    """Where sam build put a resource's artifacts (the built template's CodeUri/ContentUri)."""
    built = load_template(build_dir / "template.yaml")
    properties = built["Resources"][logical_id]["Properties"]
    uri = properties.get("CodeUri") or properties.get("ContentUri")
    assert isinstance(uri, str), f"{logical_id}: built template has no local CodeUri/ContentUri: {uri!r}"
    path = (build_dir / uri).resolve()
    assert path.is_dir(), f"{logical_id}: {path} was not built"
    return path


def layer_python_dir(build_dir: Path, logical_id: str = "BatchPilotLayer") -> Path:
    path = built_resource_dir(build_dir, logical_id) / "python"
    assert path.is_dir(), f"layer {logical_id} has no python/ folder (layers/batchpilot/Makefile makes it)"
    return path


# ----------------------------------------------------------------------------- the arm64 artifact


TEMPLATE = load_template()
FUNCTIONS = python_functions(TEMPLATE)


def test_template_has_functions_and_layer() -> None:
    assert FUNCTIONS, "no python AWS::Serverless::Function in template.yaml"
    assert "BatchPilotLayer" in layers(TEMPLATE)


def test_arm64_layer_has_runtime_dependencies(arm64_build: Path) -> None:
    python = layer_python_dir(arm64_build)
    missing = [
        name
        for name in ("batchpilot", "aws_lambda_powertools", "pydantic", "pydantic_core", "boto3", "botocore")
        if not (python / name / "__init__.py").is_file()
    ]
    assert not missing, (
        f"layer python/ misses packages {missing}; it has {sorted(p.name for p in python.iterdir())}"
    )

    # The package itself, complete: every module of layers/batchpilot/batchpilot/.
    src = LAYER_SRC / "batchpilot"
    sources = sorted(str(p.relative_to(src)) for p in src.rglob("*.py"))
    built = sorted(str(p.relative_to(python / "batchpilot")) for p in (python / "batchpilot").rglob("*.py"))
    assert built == sources

    # Every pinned requirement at its pinned version.
    installed = {}
    for dist_info in python.glob("*.dist-info"):
        name, _, version = dist_info.name.removesuffix(".dist-info").rpartition("-")
        installed[canonical(name)] = version
    pinned = pinned_requirements()
    assert pinned
    for name, version in pinned.items():
        assert installed.get(name) == version, (
            f"layer has {name} {installed.get(name)!r}, requirements pin {version}"
        )


def test_arm64_layer_native_code_is_aarch64_cpython313(arm64_build: Path) -> None:
    python = layer_python_dir(arm64_build)
    core = list((python / "pydantic_core").glob("_pydantic_core*.so"))
    assert core, "pydantic_core has no compiled extension in the layer"
    for so in python.rglob("*.so"):
        assert elf_machine(so) == "aarch64", (
            f"{so.relative_to(python)} is {elf_machine(so)}, the functions run on arm64"
        )
        tag = re.search(r"\.(cpython-\d+)", so.name)
        assert tag is None or tag.group(1) == "cpython-313", f"{so.name} is not built for CPython 3.13"
    assert any("aarch64" in so.name for so in core), [so.name for so in core]


def test_arm64_layer_has_no_tooling(arm64_build: Path) -> None:
    python = layer_python_dir(arm64_build)
    present = [
        name for name in TOOLING if (python / name).exists() or list(python.glob(f"{name}-*.dist-info"))
    ]
    assert not present, (
        f"tooling in the layer: {present} (only runtime dependencies belong in requirements.txt)"
    )
    # Console scripts (jmespath's jp.py, ...): nothing in Lambda runs them, and their shebang
    # names the build machine's python.
    assert not (python / "bin").exists(), sorted(p.name for p in (python / "bin").iterdir())


@pytest.mark.parametrize("function", FUNCTIONS)
def test_arm64_function_fits_lambda_size_limit(arm64_build: Path, function: str) -> None:
    code = built_resource_dir(arm64_build, function)
    handler = TEMPLATE["Resources"][function]["Properties"]["Handler"]
    module = handler.rsplit(".", 1)[0].replace(".", "/")
    assert (code / f"{module}.py").is_file(), f"{function}: {module}.py not in the built code {code}"
    size = tree_size(code) + sum(
        tree_size(built_resource_dir(arm64_build, layer)) for layer in layers(TEMPLATE)
    )
    assert size < LAMBDA_UNZIPPED_LIMIT, (
        f"{function} + layers = {size / 2**20:.1f} MiB unzipped (limit 250 MiB)"
    )


# Runs in python3.13 (the bytecode must be its own): argv = folders; prints {"checked": n, "problems": [...]}.
CHECK_BYTECODE = r"""
import importlib.util, json, os, sys

checked, problems = 0, []
for top in sys.argv[1:]:
    for folder, subfolders, files in os.walk(top):
        subfolders[:] = [d for d in subfolders if d != "__pycache__"]
        for name in (f for f in files if f.endswith(".py")):
            source = os.path.join(folder, name)
            where = os.path.relpath(source, top)
            checked += 1
            try:
                with open(importlib.util.cache_from_source(source), "rb") as f:
                    header = f.read(16)
            except OSError:
                problems.append(f"{where}: no {sys.implementation.cache_tag} pyc")
                continue
            with open(source, "rb") as f:
                digest = importlib.util.source_hash(f.read())
            flags = int.from_bytes(header[4:8], "little")
            if header[:4] != importlib.util.MAGIC_NUMBER:
                problems.append(f"{where}: pyc of another Python (magic {header[:4].hex()})")
            elif flags != 0b01:  # PEP 552: bit 0 hash-based, bit 1 check_source
                problems.append(f"{where}: not an unchecked-hash pyc (flags {flags:#04b})")
            elif header[8:16] != digest:
                problems.append(f"{where}: stale pyc (made from another version of the source)")
print(json.dumps({"checked": checked, "problems": problems}))
"""


@pytest.mark.parametrize("resource", ["BatchPilotLayer", *FUNCTIONS])
def test_arm64_artifact_has_python313_bytecode_for_every_module(
    arm64_build: Path, python313: str, resource: str
) -> None:
    """Every ``.py`` of the layer and of each function has its python3.13 unchecked-hash pyc.

    /opt and /var/task are read-only in Lambda: a module without usable bytecode is compiled from
    source at every cold start (the layer's Makefile and functions/Makefile make them).
    """
    folder = built_resource_dir(arm64_build, resource)
    proc = subprocess.run(
        [python313, "-I", "-S", "-c", CHECK_BYTECODE, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    assert report["checked"] > 0, f"{resource}: no .py file in {folder}"
    problems = report["problems"]
    assert not problems, f"{resource}: {len(problems)} of {report['checked']} modules:\n" + "\n".join(
        problems[:40]
    )


# ------------------------------------------------------- the host-arch artifact, imported and invoked


# Runs in `python3.13 -I -S`: no site-packages, no PYTHON* variables, no script dir on sys.path.
# argv: function dir, layer python dir, module, attribute, event file, result file, forbidden roots...
INVOKE = (
    r"""
import json, os, sys

function_dir, layer_dir, module_name, attribute, event_file, result_file, *forbidden = sys.argv[1:]
stdlib = list(sys.path)
leaks = [p for p in stdlib if "site-packages" in p or "dist-packages" in p
         or any(p == f or p.startswith(f + os.sep) for f in forbidden)]
assert not leaks, f"non-stdlib paths on sys.path: {leaks}"
assert "site" not in sys.modules, "site was imported: the interpreter is not isolated"
sys.path[0:0] = [function_dir, layer_dir]  # Lambda: /var/task first, then /opt/python

import importlib
module = importlib.import_module(module_name)
handler = getattr(module, attribute)
assert callable(handler), f"{module_name}.{attribute} is not callable"

allowed = [function_dir, layer_dir, *stdlib]
outside = sorted(
    name for name, mod in list(sys.modules.items())
    if getattr(mod, "__file__", None)
    and not any(os.path.abspath(mod.__file__).startswith(os.path.abspath(root) + os.sep) for root in allowed)
)
assert not outside, f"modules imported from outside the function, the layer and the stdlib: {outside}"

"""
    + LAMBDA_CONTEXT_SOURCE
    + r"""
if event_file == "-":
    body = "{}"  # a malformed record: handled without any AWS call
else:
    with open(event_file) as f:
        body = json.dumps(json.load(f))  # as EventBridge delivers it to SQS: compact JSON
event = {"Records": [{
    "messageId": "059f36b4-87a3-44ab-83d2-661975830a7d",
    "receiptHandle": "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a",
    "body": body,
    "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1763633000000",
                   "SenderId": "AIDAIENQZJOLO23YVJ4VO", "ApproximateFirstReceiveTimestamp": "1763633000001"},
    "messageAttributes": {},
    "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
    "eventSource": "aws:sqs",
    "eventSourceARN": "arn:aws:sqs:us-east-1:111122223333:batchpilot-MetricsQueue",
    "awsRegion": "us-east-1",
}]}
result = handler(event, Context())
sys.stdout.flush()
with open(result_file, "w") as f:
    json.dump(result, f)
"""
)


def resolve(value: Any, template: dict[str, Any], where: str) -> str | None:
    """An environment value with every parameter at its Default (None for AWS::NoValue)."""
    if isinstance(value, str | int | float | bool):
        return str(value).lower() if isinstance(value, bool) else str(value)
    if isinstance(value, dict) and set(value) == {"Ref"}:
        name = value["Ref"]
        if name == "AWS::NoValue":
            return None
        if name in PSEUDO_PARAMETERS:
            return PSEUDO_PARAMETERS[name]
        if name in template.get("Parameters", {}):
            return str(template["Parameters"][name]["Default"])
        if name in template.get("Resources", {}):
            # What Ref returns for the resource type, with the logical id as the physical name
            # (never reached: the functions that call AWS get a record they handle without a call).
            kind = template["Resources"][name]["Type"]
            if kind == "AWS::SNS::Topic":
                return f"arn:aws:sns:us-east-1:111122223333:{name}"
            if kind == "AWS::SQS::Queue":
                return f"https://sqs.us-east-1.amazonaws.com/111122223333/{name}"
            return name
    if isinstance(value, dict) and set(value) == {"Fn::GetAtt"}:
        target = value["Fn::GetAtt"]
        logical_id = target[0] if isinstance(target, list) else str(target).split(".", 1)[0]
        if logical_id in template.get("Resources", {}):
            return f"arn:aws:local:us-east-1:111122223333:{logical_id}"
    if isinstance(value, dict) and set(value) == {"Fn::If"}:
        return resolve(value["Fn::If"][2], template, where)  # conditions at their defaults: false
    if isinstance(value, dict) and set(value) == {"Fn::Sub"} and isinstance(value["Fn::Sub"], str):
        return re.sub(
            r"\$\{([^}!]+)\}", lambda m: resolve({"Ref": m.group(1)}, template, where) or "", value["Fn::Sub"]
        )
    pytest.fail(f"{where}: cannot resolve {value!r} locally; extend resolve() in this test")


def lambda_environment(template: dict[str, Any], function: str) -> dict[str, str]:
    """What Lambda would set: its own variables plus Globals' and the function's, merged."""
    properties = template["Resources"][function]["Properties"]
    globals_ = template.get("Globals", {}).get("Function", {})
    name = f"batchpilot-{function}"
    env = {
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
        "AWS_LAMBDA_FUNCTION_NAME": name,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(properties.get("MemorySize", globals_.get("MemorySize", 128))),
        "AWS_LAMBDA_LOG_FORMAT": properties.get("LoggingConfig", globals_.get("LoggingConfig", {})).get(
            "LogFormat", "Text"
        ),
        "_HANDLER": properties["Handler"],
        "LANG": "en_US.UTF-8",
        "TZ": ":UTC",
        # Functions that call AWS find nothing here: fake credentials, a closed loopback port.
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_MAX_ATTEMPTS": "1",
    }
    variables = {
        **globals_.get("Environment", {}).get("Variables", {}),
        **properties.get("Environment", {}).get("Variables", {}),
    }
    for key, value in variables.items():
        resolved = resolve(value, template, f"{function} Environment {key}")
        if resolved is not None:
            env[key] = resolved
    return env


@pytest.mark.parametrize("function", FUNCTIONS)
def test_function_imports_and_runs_with_only_its_layer(
    host_build: Path, python313: str, function: str, tmp_path: Path
) -> None:
    properties = TEMPLATE["Resources"][function]["Properties"]
    module, attribute = properties["Handler"].rsplit(".", 1)
    layer_refs = properties.get("Layers", TEMPLATE.get("Globals", {}).get("Function", {}).get("Layers", []))
    layer_ids = [ref["Ref"] for ref in layer_refs]
    assert layer_ids == ["BatchPilotLayer"], (
        f"{function}: expected exactly the batchpilot layer, got {layer_ids}"
    )
    code_dir = built_resource_dir(host_build, function)
    layer_dir = layer_python_dir(host_build, layer_ids[0])
    result_file = tmp_path / "result.json"
    # The repo and the venv running pytest must not be on the path (any site-packages is refused anyway).
    forbidden = [str(ROOT), sys.prefix]

    # The metrics function needs no AWS: it gets a real sample and must print its metrics. The
    # others call AWS, so they get a malformed record, which each handles without a call.
    calls_aws = function != "MetricsFunction"
    event_arg = "-" if calls_aws else str(SAMPLE_EVENT)
    proc = subprocess.run(
        [python313, "-I", "-S", "-c", INVOKE, str(code_dir), str(layer_dir), module, attribute,
         event_arg, str(result_file), *forbidden],
        cwd=tmp_path,
        env=lambda_environment(TEMPLATE, function),
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip

    assert proc.returncode == 0, (
        f"{function} failed with only its built code and layer:\n{proc.stderr[-4000:]}"
    )
    assert json.loads(result_file.read_text()) == {"batchItemFailures": []}
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    emf = [line for line in lines if "_aws" in line]
    if calls_aws:
        assert any("InvalidEvents" in blob for blob in emf), f"{function} did not count the bad record"
        return
    assert emf, f"{function} printed no EMF blob:\n{proc.stdout[-2000:]}"
    for blob in emf:
        [directive] = blob["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == TEMPLATE["Parameters"]["MetricsNamespace"]["Default"]
        assert directive["Metrics"] and all(name["Name"] in blob for name in directive["Metrics"])
    assert FAKE_SECRET not in proc.stdout + proc.stderr, f"{function} printed the job's environment"


# ------------------------------------------------ the host-arch artifact, read-only: nothing is compiled


# Prepended to INVOKE: records the path of every module the import system compiles from source,
# which it does only when a module has no usable pyc (missing, another Python's, stale or rejected).
RECORD_COMPILES = r"""
import importlib._bootstrap_external as _external

_compiled = []
_source_to_code = _external.SourceLoader.source_to_code


def _recording_source_to_code(self, data, path, *args, **kwargs):
    _compiled.append(path)
    return _source_to_code(self, data, path, *args, **kwargs)


_external.SourceLoader.source_to_code = _recording_source_to_code
"""

# Appended to INVOKE (after the handler ran): a module without bytecode must be recorded (proof the
# recorder works), then every recorded path goes to <result file>.compiled as JSON.
REPORT_COMPILES = r"""
sys.path.insert(0, _probe_dir)
import bytecode_probe
assert any(p.endswith("bytecode_probe.py") for p in _compiled), "the compile recorder recorded nothing"
_compiled.remove(bytecode_probe.__file__)
with open(result_file + ".compiled", "w") as f:
    json.dump(_compiled, f)
"""


def _make_read_only(root: Path, read_only: bool) -> None:
    """``chmod -R a-w`` (or back to ``u+w``) of ``root``, itself included."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(mode & ~0o222 if read_only else mode | 0o200)


@pytest.fixture(scope="session")
def read_only_lambda_tree(
    host_build: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, dict[str, Path]]]:
    """The host-arch build laid out as Lambda mounts it, read-only like Lambda's /opt and /var/task.

    Yields ``(<root>/opt/python, {function logical id: <root>/<function>/var/task})``: the layer's
    folder is copied to ``opt`` (so its ``python/`` is ``/opt/python``), each function's to its own
    ``var/task``. Permissions are given back at the end so pytest can delete the copy.
    """
    root = tmp_path_factory.mktemp("lambda-fs")
    shutil.copytree(built_resource_dir(host_build, "BatchPilotLayer"), root / "opt")
    tasks = {}
    for function in FUNCTIONS:
        tasks[function] = root / function / "var" / "task"
        shutil.copytree(built_resource_dir(host_build, function), tasks[function])
    _make_read_only(root, read_only=True)
    try:
        yield root / "opt" / "python", tasks
    finally:
        _make_read_only(root, read_only=False)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_cold_start_compiles_nothing_from_the_layer_or_the_function(
    read_only_lambda_tree: tuple[Path, dict[str, Path]], python313: str, function: str, tmp_path: Path
) -> None:
    """Import the handler and handle a first record in a fresh python3.13 with /opt/python and
    /var/task read-only: every module of the layer and of the function code must load from its pyc.

    ``-B`` as well as read-only folders: root ignores permission bits, and a run that wrote pyc
    would hide a missing one from the next. The handler gets the same record as in
    ``test_function_imports_and_runs_with_only_its_layer`` (a real sample for metrics, a malformed
    record for the functions that call AWS).
    """
    layer_dir, tasks = read_only_lambda_tree
    code_dir = tasks[function]
    module, attribute = TEMPLATE["Resources"][function]["Properties"]["Handler"].rsplit(".", 1)
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    (probe_dir / "bytecode_probe.py").write_text("VALUE = 1\n")
    result_file = tmp_path / "result.json"
    event_arg = str(SAMPLE_EVENT) if function == "MetricsFunction" else "-"
    program = RECORD_COMPILES + INVOKE + f"_probe_dir = {str(probe_dir)!r}\n" + REPORT_COMPILES
    proc = subprocess.run(
        [python313, "-I", "-S", "-B", "-c", program, str(code_dir), str(layer_dir), module, attribute,
         event_arg, str(result_file), str(ROOT), sys.prefix],
        cwd=tmp_path,
        env=lambda_environment(TEMPLATE, function),
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip

    assert proc.returncode == 0, f"{function} failed from the read-only tree:\n{proc.stderr[-4000:]}"
    compiled = json.loads(Path(f"{result_file}.compiled").read_text())
    ours = [
        path
        for path in compiled
        if any(Path(path).is_relative_to(folder) for folder in (layer_dir, code_dir))
    ]
    assert not ours, (
        f"{function}: {len(ours)} modules compiled from source at cold start (no usable pyc): "
        + ", ".join(sorted(str(Path(p).relative_to(layer_dir.parent.parent)) for p in ours)[:40])
    )


# ------------------------------------------------------------------------- requirements.txt pins


def _third_party_imports(path: Path) -> set[str]:
    """Top-level names of the absolute imports in ``path``, except those under ``if TYPE_CHECKING:``."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If):
            test = node.test
            if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
            ):
                for child in node.orelse:
                    visit(child)
                return
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return {
        name
        for name in names
        if name not in sys.stdlib_module_names and name not in ("__future__", "batchpilot")
    }


def test_requirements_pin_every_third_party_import() -> None:
    # The package, and the functions (they have no requirements.txt of their own: the layer is theirs).
    sources = sorted((LAYER_SRC / "batchpilot").rglob("*.py")) + sorted((ROOT / "functions").rglob("*.py"))
    function_modules = {p.stem for p in (ROOT / "functions").rglob("*.py")}
    imports: dict[str, list[str]] = {}
    for path in sources:
        for name in _third_party_imports(path) - function_modules:
            imports.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert imports, "found no third-party import at all: the scan is broken"

    pins = pinned_requirements()
    distributions = packages_distributions()
    problems = []
    for module, users in sorted(imports.items()):
        dists = distributions.get(module)
        if not dists:
            problems.append(f"{module} (imported by {users}): no installed distribution provides it")
        elif not any(canonical(dist) in pins for dist in dists):
            problems.append(f"{module} (imported by {users}) comes from {sorted(set(dists))}, not pinned")
    assert not problems, f"{REQUIREMENTS.name} misses:\n" + "\n".join(problems)
