"""A reader that goes away (``batchpilot samples | head -1``) ends every command quietly: no
traceback, for samples as for replay (local/batchpilot_local/cli.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_samples_into_a_closed_pipe_ends_without_a_traceback() -> None:
    code = (
        "import io, sys\n"
        "from batchpilot_local import cli\n"
        "class Closed(io.StringIO):\n"
        "    def write(self, text):\n"
        "        raise BrokenPipeError(32, 'Broken pipe')\n"
        "    def fileno(self):\n"
        "        return sys.__stdout__.fileno()\n"
        "sys.stdout = Closed()\n"
        "sys.exit(cli.main(['samples']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == 1
