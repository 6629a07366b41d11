"""A plain progress bar on stderr: no dependency, silent for runs shorter than a few seconds.

It draws ``[#########.........]  12/40 replays  0:35 elapsed  ~0:58 left`` on one line,
rewritten with a carriage return, and ends the line on ``close()``. The clock is injectable so
tests can drive it without sleeping.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

WIDTH = 30


class Progress:
    """Counts finished units of work; draws only after ``quiet_s`` seconds have passed."""

    def __init__(
        self,
        total: int,
        *,
        unit: str = "replays",
        stream: TextIO | None = None,
        quiet_s: float = 2.0,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.quiet_s = quiet_s
        self.enabled = enabled
        self.clock = clock
        self.started = clock()
        self.done = 0
        self.drawn = False

    def update(self, count: int = 1) -> None:
        """Record ``count`` more finished units and redraw if the run is long enough to show."""
        self.done += count
        elapsed = self.clock() - self.started
        if self.enabled and (self.drawn or elapsed >= self.quiet_s):
            self.stream.write("\r" + self.line(elapsed))
            self.stream.flush()
            self.drawn = True

    def line(self, elapsed: float) -> str:
        """The bar's text for ``elapsed`` seconds into the run."""
        share = self.done / self.total if self.total else 1.0
        filled = round(WIDTH * share)
        left = ""
        if 0 < self.done < self.total:
            left = f"  ~{_clock(elapsed * (self.total - self.done) / self.done)} left"
        bar = "#" * filled + "." * (WIDTH - filled)
        return f"[{bar}] {self.done:>{len(str(self.total))}}/{self.total} {self.unit}  " + (
            f"{_clock(elapsed)} elapsed{left}"
        )

    def close(self) -> None:
        """End the bar's line (only if it was drawn)."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"
