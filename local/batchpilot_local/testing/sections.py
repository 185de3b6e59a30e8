"""Generated sections of a markdown file: text between ``<!-- bench:<key>:start -->`` and
``<!-- bench:<key>:end -->``, rewritten by the script that measures it (benchmarks/RESULTS.md,
docs/cost.md), so each page keeps one current table per benchmark and never a diary of runs."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["markers", "read_section", "write_section"]


def markers(key: str) -> tuple[str, str]:
    """The start and end markers (HTML comments, invisible when rendered) of section ``key``."""
    return f"<!-- bench:{key}:start -->", f"<!-- bench:{key}:end -->"


def write_section(path: Path, key: str, body: str, *, new_file: str | None = None) -> None:
    """Replace the section ``key`` of ``path`` with ``body``, or append it when it is missing.

    Args:
        path: the markdown file.
        key: the section's name in its markers.
        body: the section's text (a trailing newline is added).
        new_file: the text a missing ``path`` starts with; None: ``path`` must exist and already
            hold the section (a page whose section sits inside written prose).

    Raises:
        SystemExit: ``new_file`` is None and ``path`` or its section is missing (one line).
    """
    start, end = markers(key)
    block = f"{start}\n{body.rstrip()}\n{end}\n"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end) + r"\n?", re.DOTALL)
    if path.exists():
        text = path.read_text(encoding="utf-8")
    elif new_file is not None:
        text = new_file
    else:
        raise SystemExit(f"{path}: no such file (it should hold a {start} ... {end} section)")
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    elif new_file is None:
        raise SystemExit(f"{path}: no {start} ... {end} section")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text, encoding="utf-8")


def read_section(path: Path, key: str) -> str:
    """The section ``key`` of ``path`` as it stands (between its markers, without them)."""
    start, end = markers(key)
    return path.read_text(encoding="utf-8").split(start, 1)[1].split(end, 1)[0].strip("\n") + "\n"
