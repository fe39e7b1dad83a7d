"""Where Slurm is installed (a login node, a job's own steps): one rule for which process speaks, and a terminal
with bertbench's lines only. Lightning's hint that `srun` is "available but not used" and DDP's "Initializing
distributed" lines stay out of it (they come back with --verbose). `srun` here is a stand-in on PATH: Lightning
only asks whether one is there."""
from __future__ import annotations

import os
import stat

import pytest

from tests.test_quiet import _bertbench, corpus, foreign_lines  # noqa: F401 (corpus: the module's fixture)

DDP = ["pretrain", "--model-size", "tiny", "--vocab-size", "150", "--max-seq-len", "32", "--batch-size", "4",
       "--max-steps", "2", "--precision", "32", "--devices", "2", "--accelerator", "cpu", "--strategy", "ddp"]
LIBRARY = ("srun", "Initializing distributed")


@pytest.mark.parametrize("variable", ["RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "SLURM_PROCID"])
def test_one_rule_says_which_process_speaks(monkeypatch, variable):
    """runtime.devices.first_process is the one definition: the run folder's lock and the data path's progress
    ask it, and srun's SLURM_PROCID counts as Lightning's and torchrun's variables do."""
    from bertbench.data import corpus as corpus_module
    from bertbench.runtime import devices, run_dir

    for name in devices.RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BERTBENCH_PROGRESS_SECONDS", "1")
    assert devices.first_process() and not run_dir.is_spawned_rank()
    assert corpus_module.progress_echo() is not None and not hasattr(corpus_module, "first_process")
    monkeypatch.setenv(variable, "1")
    assert not devices.first_process() and run_dir.is_spawned_rank() and corpus_module.progress_echo() is None


def test_a_ddp_pretraining_where_slurm_is_installed_prints_our_lines_only(tmp_path, corpus):  # noqa: F811
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text("#!/bin/sh\nexit 1\n")
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    quiet = _bertbench([*DDP, "--corpus", str(corpus), "--out", str(tmp_path / "quiet")], env_extra=env)
    assert quiet.returncode == 0, quiet.stderr
    output = quiet.stderr + quiet.stdout
    ours = "note: --devices 2: accelerator cpu, so 2 CPU processes will be used\n"  # said once, by rank 0
    assert output.count(ours) == 1
    assert not foreign_lines(output.replace(ours, "")) and not [ln for ln in output.splitlines() if any(x in ln for x in LIBRARY)], output
    # the same run with --verbose: both notices are there to be kept out (else the check above proves nothing)
    loud = _bertbench(["--verbose", *DDP, "--corpus", str(corpus), "--out", str(tmp_path / "loud")], env_extra=env)
    assert loud.returncode == 0, loud.stderr
    assert "The `srun` command is available" in loud.stderr + loud.stdout
    assert (loud.stderr + loud.stdout).count("Initializing distributed: GLOBAL_RANK") == 2


def test_a_slurm_job_of_ntasks_alone_is_one_error_line(monkeypatch):
    """`sbatch --ntasks=2` (no tasks per node): Lightning would raise a RuntimeError deep in the Trainer (a
    traceback, seen under srun); it is one line before anything runs."""
    from bertbench.errors import BertbenchError
    from bertbench.runtime.devices import plan_devices

    monkeypatch.delenv("SLURM_NTASKS_PER_NODE", raising=False)
    monkeypatch.setenv("SLURM_JOB_NAME", "wrap")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    with pytest.raises(BertbenchError, match=r"^this Slurm job has --ntasks=2; .* --nodes and --ntasks-per-node"):
        plan_devices("cpu", "2")
    monkeypatch.setenv("SLURM_NTASKS_PER_NODE", "2")  # as Slurm sets it for --ntasks-per-node=2
    assert plan_devices("cpu", "2").count == 2
    monkeypatch.setenv("SLURM_NTASKS", "1")
    monkeypatch.delenv("SLURM_NTASKS_PER_NODE")
    assert plan_devices("cpu", "1").count == 1  # one task: nothing to join
