"""Fault injection for the resume and kill tests: a named point in a run where the process can be made to die."""
from __future__ import annotations

import os
from typing import Optional


def fault_point(name: str, step: Optional[int] = None) -> None:
    """For the fault tests: BERTBENCH_FAULT=name[:step] kills this process here with SIGKILL (no clean-up of
    any kind, as `kill -9` or a power cut), or with BERTBENCH_FAULT_SIGNAL (TERM, INT) sends that signal.
    Names: after_step:K, before_rename:K, final_eval, before_summary."""
    want = os.environ.get("BERTBENCH_FAULT")
    if want and want == (name if step is None else f"{name}:{step}"):
        import signal

        os.kill(os.getpid(), getattr(signal, "SIG" + os.environ.get("BERTBENCH_FAULT_SIGNAL", "KILL")))
