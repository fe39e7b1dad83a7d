"""A pre-training on 2 tasks of one Slurm job (`srun`, CPU, gloo): Lightning joins the ranks from Slurm's variables
(SLURM_PROCID, SLURM_NTASKS, the job's node list and id) instead of launching them, and the run is the run
`--devices 2 --strategy ddp` launches on one machine: the same weights, bit for bit, and one rank speaking.
On the one-node cluster of tests/slurm_cluster.py (skipped, with the reason, where it cannot start)."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest
import torch

from tests.slurm_cluster import cluster_fixture
from tests.test_pretrain_ddp import NO_DROPOUT, TINY, data, weights  # noqa: F401 (data: the corpus and tokenizer)

pytestmark = pytest.mark.slow
slurm = pytest.fixture(scope="module")(cluster_fixture)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_two_task_ddp_pretraining_under_srun_is_the_one_launched_here(slurm, data, tmp_path):  # noqa: F811
    args = [*TINY, *data, *NO_DROPOUT, "--max-steps", "4", "--eval-every", "4", "--checkpoint-every", "4",
            "--devices", "2", "--strategy", "ddp"]
    env = {**slurm.env, "BERTBENCH_PROGRESS": "0", "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}
    here = tmp_path / "here"
    r = subprocess.run([sys.executable, "-m", "bertbench.cli", "pretrain", *args, "--out", str(here)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    on_slurm = tmp_path / "slurm"
    command = shlex.join([sys.executable, "-m", "bertbench.cli", "pretrain", *args, "--out", str(on_slurm)])
    log = tmp_path / "job.log"
    job = subprocess.run(["sbatch", "--wait", "--nodes=1", "--ntasks-per-node=2", "--cpus-per-task=1", "--mem=4G", "--time=3",
                          f"--output={log}", f"--wrap=srun --kill-on-bad-exit=1 {command}"], env=env, capture_output=True, text=True,
                         timeout=300)
    said = log.read_text() if log.exists() else ""
    assert job.returncode == 0, job.stdout + job.stderr + said + slurm.logs()
    assert said.count("done:") == 1 and "Initializing distributed" not in said, said  # rank 0 speaks, quietly
    a, b = weights(here), weights(on_slurm)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_where_slurm_cannot_be_installed_the_tests_skip_with_the_reason_in_one_line(monkeypatch, tmp_path):
    from tests import slurm_cluster

    monkeypatch.setattr(slurm_cluster.shutil, "which", lambda name, path=None: None)  # no Slurm, no apt-get
    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 1000)
    assert slurm_cluster.start(tmp_path / "c") == (
        None, "Slurm is not installed, and installing it (apt-get install slurm-wlm munge) needs root")
    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 0)
    assert slurm_cluster.install() == "Slurm is not installed, and there is no apt-get to install it with"
    assert not (tmp_path / "c").exists()  # nothing started, nothing written
