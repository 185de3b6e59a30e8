"""``batchpilot simulate ...`` run in-process for tests, through the sub-command's own parser and
runner (the wiring into ``batchpilot_local.cli`` has a test of its own)."""

from __future__ import annotations

import argparse
import contextlib
import io

from batchpilot_local.simulate.command import add_parser, run_command

__all__ = ["simulate_cli"]


def simulate_cli(*args: str) -> tuple[int, str, str]:
    """Run ``batchpilot <args>`` (``args[0]`` is ``"simulate"``) and return ``(exit code, stdout,
    stderr)``; a usage error is returned as argparse's exit code with its message, not raised."""
    parser = argparse.ArgumentParser(prog="batchpilot")
    add_parser(parser.add_subparsers(dest="command"))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            namespace = parser.parse_args(list(args))
        except SystemExit as exc:
            return int(exc.code or 0), "", err.getvalue()
    code = run_command(namespace, out, err)
    return code, out.getvalue(), err.getvalue()
