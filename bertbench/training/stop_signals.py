"""SIGINT (Ctrl-C), SIGTERM (a cluster's pre-emption) and SIGUSR2 (Slurm's warning before a time limit) during a
run: stop cleanly, say how to continue.

Outside the training loop a signal stops the command at once (`Interrupted`: exit 130 or 143, one line,
no traceback). Inside it the signal is only noted; the run finishes the optimiser step it is in, writes
checkpoints/last.ckpt at that step boundary and then stops with the same line, so `--resume auto`
continues exactly where it stopped. A second signal while the first is pending stops at once.

Lightning installs its own SIGTERM handler at the start of `fit` (it raises `SIGTERMException`, a
SystemExit with no code, after the current micro-batch: exit 0, no message) and turns Ctrl-C into
`sys.exit(1)`; `defer()` is called from `on_train_start`, after Lightning's handlers are in place, and
replaces them. Lightning's teardown restores the handlers it found, i.e. ours in immediate mode.
# lightning workaround: own-signal-handlers (training.lightning_compat lists them all)
"""
from __future__ import annotations

import signal
import threading
from typing import Optional

from bertbench.errors import BertbenchError

# Slurm's warning before a job's time limit, as bertbench's jobs ask for it (`--signal=USR2@S`: studies.launcher):
# stop at the step with a checkpoint, as for SIGTERM; the job then requeues itself and resumes
WARNING_SIGNAL = signal.SIGUSR2
SIGNALS = (signal.SIGINT, signal.SIGTERM, WARNING_SIGNAL)


class Interrupted(BertbenchError):
    """A run stopped by a signal: exit 128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, signum: int, step: Optional[int] = None, checkpointed: bool = False):
        self.exit_code = 128 + int(signum)
        # what a caller that runs the pre-training as one stage of its own (a study) says instead of the hint
        self.signum, self.step, self.checkpointed = int(signum), step, checkpointed
        where = f" at step {step}" if step is not None else ""
        saved = f"; checkpoint written at step {step}" if checkpointed else ""
        super().__init__(
            f"interrupted by {signal.Signals(signum).name}{where}{saved}; rerun the same command with --resume auto to continue"
        )


class StopSignals:
    def __init__(self) -> None:
        self.received: Optional[int] = None  # the first signal's number
        self.deferred = False
        self._previous: dict[int, object] = {}

    # -- installation (main thread only: elsewhere, e.g. in a library's worker thread, do nothing) ----------
    def install(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                self._previous[s] = signal.signal(s, self._handle)
        return self

    def defer(self) -> None:
        """From here on only note a signal (re-installed: Lightning has put its own SIGTERM handler in place)."""
        self.deferred = True
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                signal.signal(s, self._handle)

    def immediate(self) -> None:
        self.deferred = False

    def restore(self) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}

    def _handle(self, signum: int, frame) -> None:
        first = self.received is None
        if first:
            self.received = signum
        if first and self.deferred:
            return  # the training loop checkpoints at the next step boundary, then stops
        raise Interrupted(signum)
