"""Progress for logs: a plain line every so many seconds saying where a long step of work is.

A progress bar redraws one line in place; written to a file it shows nothing until the run ends, so a
redirected `make demo > log` would stay silent for minutes. Pre-training prints these lines instead of
its bar when the output is not a terminal; fine-tuning, which has no bar, prints them everywhere.
Light on purpose (no torch): `bertbench report` formats durations with `fmt_seconds`.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Optional

DEFAULT_EVERY_SECONDS = 30.0


def every_seconds() -> Optional[float]:
    """Seconds between progress lines: $BERTBENCH_PROGRESS_SECONDS, default 30; None when
    BERTBENCH_PROGRESS=0 turns progress off (the tests' runs)."""
    if os.environ.get("BERTBENCH_PROGRESS", "1") == "0":
        return None
    return float(os.environ.get("BERTBENCH_PROGRESS_SECONDS", DEFAULT_EVERY_SECONDS))


def fmt_seconds(s: Optional[float]) -> str:
    """'45 s', '3.5 min', '2.1 h'; '–' for None."""
    if s is None:
        return "–"
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


class Ticker:
    """`due()` is true once every `every` seconds (never when `every` is None)."""

    def __init__(self, every: Optional[float], clock: Callable[[], float] = time.monotonic):
        self.every, self._clock = every, clock
        self._last = clock()

    def due(self) -> bool:
        if self.every is None:
            return False
        now = self._clock()
        if now - self._last < self.every:
            return False
        self._last = now
        return True


def progress_line(step: int, total: Optional[int], done: float, seconds: float, rate: Optional[str] = None) -> str:
    """'step 120/450 (27%), 4,100 tok/s, ETA 3.1 min': `done` the share of the work done after `seconds`
    of it; the time left assumes the pace so far. `total` None: a wall-clock budget, no step count."""
    where = f"step {step}/{total}" if total else f"step {step}"
    parts = [f"{where} ({100 * done:.0f}%)"] + ([rate] if rate else [])
    if 0 < done < 1:
        parts.append(f"ETA {fmt_seconds(seconds * (1 - done) / done)}")
    return ", ".join(parts)


__all__ = ["DEFAULT_EVERY_SECONDS", "Ticker", "every_seconds", "fmt_seconds", "progress_line"]
