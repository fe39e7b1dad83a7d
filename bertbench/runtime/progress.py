"""Progress for logs: a plain line every so many seconds saying where a long step of work is.

A progress bar redraws one line in place; written to a file it shows nothing until the run ends, so a
redirected `make demo > log` would stay silent for minutes. Pre-training prints these lines instead of
its bar when the output is not a terminal; fine-tuning, which has no bar, prints them everywhere.
Light on purpose (no torch): `bertbench report` formats durations with `fmt_seconds`.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, Optional

from bertbench.errors import BertbenchError

DEFAULT_EVERY_SECONDS = 30.0


def every_seconds() -> Optional[float]:
    """Seconds between progress lines: $BERTBENCH_PROGRESS_SECONDS, default 30; None when
    BERTBENCH_PROGRESS=0 turns progress off (the tests' runs)."""
    if os.environ.get("BERTBENCH_PROGRESS", "1") == "0":
        return None
    raw = os.environ.get("BERTBENCH_PROGRESS_SECONDS")
    if raw is None:
        return DEFAULT_EVERY_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")
    if not 0 <= seconds < float("inf"):
        raise BertbenchError(f"BERTBENCH_PROGRESS_SECONDS={raw!r}: expected the seconds between progress lines, a "
                             "number ≥ 0 (BERTBENCH_PROGRESS=0 turns them off)")
    return seconds


def fmt_seconds(s: Optional[float]) -> str:
    """'45 s', '3.5 min', '2.1 h'; '–' for None."""
    if s is None:
        return "–"
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def say(line: str) -> None:
    """Print `line` in one write, flushed: processes that share a terminal or a log (`run --preset`'s workers)
    then never split each other's lines (print writes the text and its newline separately)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


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


# A heartbeat's shortest interval: BERTBENCH_PROGRESS_SECONDS=0 (a line at every training step) must not make
# a line every few milliseconds while a step with no steps of its own runs.
MIN_HEARTBEAT_SECONDS = 0.2


def fmt_lr(lr: float) -> str:
    """A learning rate the way papers write it, the same way everywhere: '5e-5', '1e-4', '2.5e-5' (Python's
    `:g` gave '5e-05' beside '0.0001' in one table)."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


class Heartbeat:
    """`with Heartbeat(every, echo, "tokenizer", status):` a line `label: status() (N s)` every `every` seconds
    while the block runs (never when `every` is None). The lines come from a background thread, so that the
    cadence holds inside one long call that reports nothing (the tokenizer trainer's Rust loop, a datasets.map),
    where a Ticker polled by the caller would wait for the call to end. The thread's timing is a Ticker's."""

    def __init__(self, every: Optional[float], echo: Callable[[str], None], label: str,
                 status: Callable[[], str] = lambda: "", clock: Callable[[], float] = time.monotonic):
        every = None if every is None else max(every, MIN_HEARTBEAT_SECONDS)
        self.every, self.echo, self.label, self.status, self._clock = every, echo, label, status, clock
        self._stop: Optional[threading.Event] = None
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> "Heartbeat":
        if self.every is None:
            return self
        self._t0, self._stop = self._clock(), threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"progress: {self.label}", daemon=True)
        self._thread.start()
        return self

    def _beat(self) -> None:
        ticker = Ticker(self.every, self._clock)
        while not self._stop.wait(min(self.every, 1.0) / 4):  # wake often; a line only when the Ticker says
            if ticker.due():
                status = self.status()
                self.echo(f"{self.label}: {status + ', ' if status else ''}{fmt_seconds(self._clock() - self._t0)}")

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()


def progress_line(step: int, total: Optional[int], done: float, seconds: float, rate: Optional[str] = None) -> str:
    """'step 120/450 (27%), 4,100 tok/s, ETA 3.1 min': `done` the share of the work done after `seconds`
    of it; the time left assumes the pace so far. `total` None: a wall-clock budget, no step count."""
    where = f"step {step}/{total}" if total else f"step {step}"
    parts = [f"{where} ({100 * done:.0f}%)"] + ([rate] if rate else [])
    if 0 < done < 1:
        parts.append(f"ETA {fmt_seconds(seconds * (1 - done) / done)}")
    return ", ".join(parts)


__all__ = ["DEFAULT_EVERY_SECONDS", "Heartbeat", "Ticker", "every_seconds", "fmt_lr", "fmt_seconds", "progress_line", "say"]
