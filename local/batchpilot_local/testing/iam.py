"""The IAM conformance test's recordings: every API call the functions make in the fault suite
(``tests/faults``) and in a replay of ``events/``.

The fault suite records itself: ``tests/faults/conftest.py`` opens :func:`recording_faults` for
the whole package and stamps each test's id on the calls it makes (:data:`FAULTS`), so a ``make
test`` run records the suite once, while it tests. The conformance test then takes those calls when
every fault test ran in the same session (:func:`fault_calls`); otherwise (the conformance test run
alone) it runs the fault suite in a child pytest, which writes its calls to the file named by
``$BATCHPILOT_IAM_CALLS`` (:func:`write_fault_calls`, at the end of that session).

:func:`replay_calls` replays ``events/`` as ``batchpilot replay events/`` does, one run of the
replayer per scenario (and one for the plain sample events), and returns each run's calls with
the template parameters it ran with: a scenario's ``parameters`` on top of the base set.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batchpilot_local.embedded_aws import observing
from batchpilot_local.iam.calls import ApiCall, CallRecorder, read_calls, write_calls
from batchpilot_local.testing.paths import EVENTS_DIR, ROOT

__all__ = [
    "CALLS_FILE_VARIABLE",
    "FAULTS",
    "FaultRecording",
    "ReplayRun",
    "fault_calls",
    "recording_faults",
    "replay_calls",
    "write_fault_calls",
]

CALLS_FILE_VARIABLE = "BATCHPILOT_IAM_CALLS"
"""Environment variable: a file the fault suite appends its recorded calls to (JSON Lines)."""
FAULTS_DIR = ROOT / "tests" / "faults"


@dataclass
class FaultRecording:
    """The fault suite's calls in this process.

    Attributes:
        recorder: installed while :func:`recording_faults` is open; ``origin`` is the test's id.
        ran: ids of the fault tests whose calls were recorded (set up and torn down).
    """

    recorder: CallRecorder = field(default_factory=CallRecorder)
    ran: set[str] = field(default_factory=set)

    @contextmanager
    def test(self, nodeid: str) -> Iterator[None]:
        """Stamp ``nodeid`` on the calls made inside the block; count the test as run after it."""
        self.recorder.origin = nodeid
        try:
            yield
        finally:
            self.recorder.origin = None
            self.ran.add(nodeid)


FAULTS = FaultRecording()
"""This process's recording of the fault suite."""


@contextmanager
def recording_faults() -> Iterator[FaultRecording]:
    """Record every call made in an embedded AWS opened inside the block into :data:`FAULTS`."""
    with observing(FAULTS.recorder):
        yield FAULTS


def write_fault_calls() -> int:
    """Append :data:`FAULTS`'s calls to ``$BATCHPILOT_IAM_CALLS`` when it is set; returns how many."""
    target = os.environ.get(CALLS_FILE_VARIABLE)
    if not target:
        return 0
    return write_calls(Path(target), FAULTS.recorder.calls)


def fault_calls(session_fault_tests: Sequence[str]) -> tuple[list[ApiCall], str]:
    """The fault suite's calls, and where they come from.

    ``session_fault_tests`` are the ids of the fault tests this pytest session collected. When the
    session collected the whole suite (every ``tests/faults/test_*.py`` file) and each of those
    tests already ran here, their recording is used; otherwise the suite runs in a child pytest
    (a few minutes) and its recording is read back.

    Raises:
        AssertionError: the child run failed (its output is in the message).
    """
    files = {p.name for p in FAULTS_DIR.glob("test_*.py")}
    collected = {nodeid.split("::", 1)[0].rsplit("/", 1)[-1] for nodeid in session_fault_tests}
    if session_fault_tests and collected == files and set(session_fault_tests) <= FAULTS.ran:
        return list(FAULTS.recorder.calls), f"this session's run of {len(session_fault_tests)} fault tests"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "calls.jsonl"
        env = {**os.environ, CALLS_FILE_VARIABLE: str(out), "BATCHPILOT_REPO_ROOT": str(ROOT)}
        run = subprocess.run(  # noqa: S603 - this interpreter running pytest on the repository's tests
            [sys.executable, "-m", "pytest", str(FAULTS_DIR), "-q", "-p", "no:cacheprovider"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert run.returncode == 0, f"the fault suite failed:\n{run.stdout[-4000:]}\n{run.stderr[-2000:]}"
        calls = list(read_calls(out)) if out.exists() else []
    return calls, "a separate run of tests/faults"


@dataclass(frozen=True)
class ReplayRun:
    """One run of the replayer: what it replayed, with which parameters, and the calls it made."""

    origin: str
    parameters: dict[str, str]
    calls: list[ApiCall]


def replay_calls(base: Mapping[str, str], paths: Sequence[Path] = (EVENTS_DIR,)) -> list[ReplayRun]:
    """Replay ``paths`` (default ``events/``) with the template parameters ``base`` and record every
    call, one :class:`ReplayRun` per scenario (its parameters on top of ``base``) and one for the
    plain sample events. Clock scenarios, schedules and the functions' own events included: the
    replayer's own routing decides which functions run.

    Raises:
        batchpilot_local.inputs.InputError, batchpilot_local.embedded_aws.WorldError: as the replay.
    """
    from batchpilot_local.clock import ClockScenario
    from batchpilot_local.inputs import read_inputs
    from batchpilot_local.replay import Replayer

    replay_input = read_inputs([str(p) for p in paths])
    worlds = {world.origin: world.data for world in replay_input.worlds}
    scope_parameters = {world.origin: dict(world.parameters) for world in replay_input.worlds}
    replayer = Replayer(parameters=dict(base))
    recorder = CallRecorder()
    runs: list[ReplayRun] = []

    def run_of(item: Any) -> tuple[str, dict[str, str]]:
        # A clock scenario carries its own parameters; an event scenario's are its world's.
        if isinstance(item.value, ClockScenario):
            return item.value.origin, dict(item.value.parameters)
        if item.scope is not None:
            return item.scope, scope_parameters.get(item.scope, {})
        return "events/ (the sample events)", {}

    with observing(recorder):
        for (origin, _), group in itertools.groupby(
            replay_input.items, key=lambda i: (run_of(i)[0], i.scope)
        ):
            items = list(group)
            recorder.origin = origin
            replayer.run_items(
                ((item.value, item.origin, item.scope) for item in items),
                scope_worlds=worlds,
                scope_parameters=scope_parameters,
                keep_reports=False,
            )
            runs.append(ReplayRun(origin, {**dict(base), **run_of(items[0])[1]}, recorder.drain()))
    replay_input.close()
    return runs
