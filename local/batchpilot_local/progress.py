"""Progress of a replay on stderr, never on stdout (the report's stream stays as it was).

On a terminal, a run that lasts longer than :data:`SHOW_AFTER` seconds shows a rich progress bar
(events replayed of the total, elapsed and remaining time), drawn on stderr and erased when the
run ends, then one line saying how many events took how long. rich follows ``NO_COLOR`` and
``TERM=dumb``. Anywhere else (a pipe, a file, CI), no bar is drawn: inputs of more than
:data:`LINES_ABOVE` events get one short line every :data:`LINE_EVERY` events, and nothing else.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["LINES_ABOVE", "LINE_EVERY", "SHOW_AFTER", "Progress"]

SHOW_AFTER = 2.0
"""Seconds a run lasts before its progress bar appears (a shorter run shows none)."""
LINES_ABOVE = 1_000
"""Without a terminal, inputs of more events than this print progress lines."""
LINE_EVERY = 1_000
"""Without a terminal, one progress line per this many events."""
_PREFIX = "batchpilot replay: "


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


class Progress:
    """Counts the events replayed and shows it on ``stream`` (see the module docstring).

    Args:
        stream: stderr.
        total: how many steps the run has (events, and each tick of a clock scenario).
        show_after: seconds before the bar appears on a terminal (default :data:`SHOW_AFTER`).
        clock: monotonic seconds (tests).
        terminal: whether ``stream`` is a terminal; None: ask it (``isatty``).

    Use :meth:`step` per event replayed and :meth:`close` at the end (also when the run fails).
    """

    def __init__(
        self,
        stream: TextIO,
        total: int,
        *,
        show_after: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        terminal: bool | None = None,
    ) -> None:
        self._stream = stream
        self._total = total
        self._done = 0
        self._clock = clock
        self._started = clock()
        self._terminal = _is_terminal(stream) if terminal is None else terminal
        self._lock = threading.Lock()
        self._bar: Any = None  # rich.progress.Progress, once shown
        self._task: Any = None
        self._closed = False
        self._timer: threading.Timer | None = None
        if self._terminal:
            # Shown from a timer: the first events may take a while (cold starts, batching windows).
            delay = SHOW_AFTER if show_after is None else show_after
            self._timer = threading.Timer(delay, self._show)
            self._timer.daemon = True
            self._timer.start()

    @property
    def done(self) -> int:
        """Steps counted so far."""
        return self._done

    @property
    def shown(self) -> bool:
        """Whether the bar was drawn."""
        return self._bar is not None

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as Bar

        with self._lock:
            if self._closed or self._bar is not None:
                return
            # The handlers' stdout is switched per invocation (lambda_runtime.SwitchableStdout):
            # the bar redirects neither stream and writes to stderr alone.
            bar = Bar(
                TextColumn("replaying"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("events"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self._stream, stderr=True),
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._task = bar.add_task("replay", total=self._total or None, completed=self._done)
            bar.start()
            self._bar = bar

    def step(self, count: int = 1) -> None:
        """``count`` more steps replayed."""
        with self._lock:
            self._done += count
            if self._bar is not None:
                self._bar.update(self._task, completed=self._done)
                return
        if self._terminal or self._total <= LINES_ABOVE:
            return
        if self._done % LINE_EVERY < count or self._done == self._total:
            rate = self._done / max(self._clock() - self._started, 1e-9)
            self._stream.write(f"{_PREFIX}replayed {self._done:,}/{self._total:,} events ({rate:,.0f}/s)\n")
            self._stream.flush()

    def close(self) -> None:
        """Stop the bar (erased) and, when it was shown, say how long the run took."""
        with self._lock:
            self._closed = True
            bar, self._bar = self._bar, None
        if self._timer is not None:
            self._timer.cancel()
        if bar is None:
            return
        bar.stop()
        elapsed = self._clock() - self._started
        noun = "event" if self._done == 1 else "events"
        self._stream.write(f"{_PREFIX}replayed {self._done:,} {noun} in {elapsed:,.1f} s\n")
        self._stream.flush()
