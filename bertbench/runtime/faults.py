"""Fault injection for the resume and kill tests: a named point in a run where the process can be made to die."""
from __future__ import annotations

import os
from typing import Callable, Optional


def fault_point(name: str, step: Optional[int | str] = None, stop_noted: Optional[Callable[[], bool]] = None) -> None:
    """For the fault tests: BERTBENCH_FAULT=name[:step] kills this process here with SIGKILL (no clean-up of
    any kind, as `kill -9` or a power cut), or with BERTBENCH_FAULT_SIGNAL (TERM, INT) sends that signal (PAUSE: waits
    for one from outside, then goes on: where the caller notes stop signals, `stop_noted` says whether one has
    come, and the wait ends at once if it came before the pause began); with
    BERTBENCH_FAULT_TO=session it goes to the process group of the session's leader instead, as a terminal's
    Ctrl-C reaches every process of its foreground group (a study's worker signals the study that way).
    Names: after_step:K, before_rename:K, final_eval, before_summary; finetune:TASK (a study's fine-tuning stage)."""
    want = os.environ.get("BERTBENCH_FAULT")
    if want and want == (name if step is None else f"{name}:{step}"):
        import signal
        import time

        if os.environ.get("BERTBENCH_FAULT_SIGNAL") == "PAUSE":  # wait here for a signal from outside (Slurm's
            if stop_noted is None:  # warning before a time limit: tests/test_run_preset.py), then go on
                signal.pause()
            else:  # not signal.pause(): a signal that came during the step, or just before the pause, would
                while not stop_noted():  # leave it waiting until the job's kill
                    time.sleep(0.05)
            return
        signum = getattr(signal, "SIG" + os.environ.get("BERTBENCH_FAULT_SIGNAL", "KILL"))
        if os.environ.get("BERTBENCH_FAULT_TO") == "session":
            os.killpg(os.getsid(0), signum)
        else:
            os.kill(os.getpid(), signum)
