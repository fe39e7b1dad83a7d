"""The studies package: the scheduler (worker death, the freed core), stage keys (a copied study resumes, one
task's cap re-keys that task only, older folders still count), and pre-training seeds."""
from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from bertbench.errors import BertbenchError
from bertbench.studies.scheduler import Stage, run_stages, thread_shares


# --- scheduler ---------------------------------------------------------------------------------------------
def _kill_self() -> None:  # a stage: module level, so that a worker process can be handed it
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def _threads_once_alone(path: Path, wait_s: float) -> None:
    """Record this worker's torch threads at the start, and once they have grown (or after wait_s)."""
    import torch

    start = torch.get_num_threads()
    deadline = time.monotonic() + wait_s
    while torch.get_num_threads() == start and time.monotonic() < deadline:
        sum(range(10_000))  # Python bytecodes: the safe points at which a new share is taken up
    path.write_text(f"{start} {torch.get_num_threads()}")


def test_thread_shares():
    assert thread_shares(2, 2) == [1, 1] and thread_shares(2, 1) == [2] and thread_shares(5, 2) == [3, 2]
    assert thread_shares(1, 2) == [1, 1] and thread_shares(4, 0) == []


def test_a_killed_worker_is_one_line_naming_the_stage_and_the_signal(tmp_path):
    long = Stage("pretrain mlm_nsp", time.sleep, (60,))
    jobs = [Stage("finetune random rte", _write, (tmp_path / "rte", "done")), long,
            Stage("finetune random stsb", _kill_self)]
    times: dict[str, float] = {}
    t0 = time.monotonic()
    with pytest.raises(BertbenchError) as err:
        run_stages(jobs, 2, lambda message: None, times)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("stage finetune random stsb died (SIGKILL)")
    assert message.endswith("finished stages are kept — rerun the same command to continue")
    assert time.monotonic() - t0 < 30  # the other worker (sleeping 60 s) was stopped, not waited for
    assert set(times) == {"finetune random rte"} and (tmp_path / "rte").read_text() == "done"


def test_the_remaining_stage_takes_the_freed_core(tmp_path):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)  # two workers of one thread each, whatever this machine has
    try:
        jobs = [Stage("short", time.sleep, (1.0,)), Stage("long", _threads_once_alone, (tmp_path / "t", 30.0))]
        run_stages(jobs, 2, lambda message: None, {})
    finally:
        torch.set_num_threads(before)
    start, end = (tmp_path / "t").read_text().split()
    assert (start, end) == ("1", "2")
