"""Progress of long CLI work: a bar with count, rate and time left on a
terminal; elsewhere (a pipe, a log, ``--quiet``) nothing until the one
summary line the command prints itself."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

from memoro.words import plural

__all__ = ["Progress", "duration", "plural"]

WIDTH = 24
MB = 1_000_000
REDRAW_SECONDS = 0.1


def duration(seconds: float) -> str:
    if seconds < 1:
        return "under a second"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, whole = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}:{whole:02d}"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{whole:02d}"


class Progress:
    """``with Progress(total, "Indexing", "turn") as bar: bar.advance(n)``;
    the unit ``"byte"`` shows megabytes."""

    def __init__(
        self, total: int, label: str, unit: str, *, quiet: bool = False, out: TextIO | None = None
    ) -> None:
        self.total = max(total, 0)
        self.label = label
        self.unit = unit
        self.done = 0
        self.out = out or sys.stderr
        self.shown = not quiet and self.out.isatty()
        self.started = time.monotonic()
        self._drawn = 0.0

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def rate(self) -> float:
        """Units per second so far."""
        return self.done / self.elapsed if self.elapsed > 0 else 0.0

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def update(self, done: int) -> None:
        self.done = min(max(done, 0), self.total) if self.total else max(done, 0)
        now = time.monotonic()
        if self.shown and (now - self._drawn >= REDRAW_SECONDS or self.done == self.total):
            self._drawn = now
            self.out.write("\r" + self.line() + "\033[K")
            self.out.flush()

    def line(self) -> str:
        share = self.done / self.total if self.total else 1.0
        filled = int(share * WIDTH)
        if self.unit == "byte":  # sizes as people read them: 1.2/5.1 MB
            count = f"{self.done / MB:,.1f}/{self.total / MB:,.1f} MB"
            rate = f"{self.rate / MB:,.1f} MB/s"
        else:
            count = f"{self.done:,}/{plural(self.total, self.unit)}"
            rate = f"{self.rate:,.1f} {self.unit}s/s"
        parts = [f"{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}]", count]
        if self.done and self.elapsed >= 0.5:
            parts.append(rate)
            if self.done < self.total:
                parts.append(f"{duration((self.total - self.done) / self.rate)} left")
        return "  ".join(parts)

    def __enter__(self) -> Progress:
        if self.shown:
            self.update(self.done)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.shown:
            self.out.write("\r" + self.line() + "\033[K\n")
            self.out.flush()
