"""Aligned plain-text tables for the replay's text report, drawn by rich (``rich.table.Table``).

:func:`render_table` gives the lines of one table: a header row and one row per item, columns two
spaces apart, numbers right-aligned and text left-aligned (a column is numeric when each of its
cells is a number, a percentage or ``-``), nothing cut or wrapped whatever the terminal's width
(the report is also read in files and pipes), no colour and no trailing spaces. rich is imported at
the first table, not with this module.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["numeric", "render_table"]

_NUMBER = re.compile(r"^[+-]?(\d[\d,]*(\.\d+)?|\.\d+)([eE][+-]?\d+)?( ?%)?$")
_WIDE = 100_000  # characters: no table is ever cut or wrapped to fit a terminal


def numeric(cells: Sequence[str]) -> bool:
    """True when every cell is a number (``12``, ``1,024``, ``0.38``, ``41.7 %``) or ``-``, and at
    least one is a number: such a column is right-aligned."""
    seen = False
    for cell in cells:
        text = cell.strip()
        if text in ("", "-"):
            continue
        if not _NUMBER.match(text):
            return False
        seen = True
    return seen


@cache
def _console() -> Console:
    from rich.console import Console

    # A console of its own, never the terminal: plain text, no colour, no markup read in cells.
    return Console(
        file=io.StringIO(),
        width=_WIDE,
        color_system=None,
        no_color=True,
        highlight=False,
        markup=False,
        emoji=False,
        force_terminal=False,
        force_jupyter=False,
        force_interactive=False,
    )


def render_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, indent: str = "", show_header: bool = True
) -> list[str]:
    """The table's lines (no newlines), each starting with ``indent``.

    Args:
        headers: one per column.
        rows: the cells, as text; each row has ``len(headers)`` cells.
        indent: put before every line.
        show_header: False: rows only (the headers still decide the number of columns).

    Raises:
        ValueError: a row has another number of cells than there are headers.
    """
    from rich.table import Table
    from rich.text import Text

    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"a row has {len(row)} cells for {len(headers)} columns")
    table = Table(
        box=None,
        show_header=show_header,
        show_edge=False,
        pad_edge=False,
        padding=(0, 2, 0, 0),
        header_style=None,
        highlight=False,
    )
    for column, header in enumerate(headers):
        right = numeric([row[column] for row in rows])
        table.add_column(Text(header), justify="right" if right else "left", no_wrap=True)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    console = _console()
    lines = console.render_lines(table, console.options, pad=False)
    return [(indent + "".join(segment.text for segment in line)).rstrip() for line in lines]
