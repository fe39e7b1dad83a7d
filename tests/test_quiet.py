"""A quiet terminal: a pre-training (fresh and resumed) prints bertbench's lines only; --verbose shows the rest."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.test_pretrain import write_corpus

# What bertbench itself may print on stderr in a run without a progress bar: nothing, or its own lines.
OURS = ("stopped at step", "done:", "checkpoint:", "interrupted", "error:")
# What the libraries printed before (each was seen here); none of it may come back.
NOISE = ("GPU available", "TPU available", "Automatic Mixed Precision", "litlogger", "LeafSpec", "weights_only",
         "max_epochs", "Warning", "warn(")


def _bertbench(args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"} | {"BERTBENCH_PROGRESS": "0"} | (env_extra or {})
    return subprocess.run([sys.executable, "-m", "bertbench.cli", *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("quiet") / "docs", n_docs=10)


PT = ["pretrain", "--model-size", "tiny", "--vocab-size", "150", "--max-seq-len", "32", "--batch-size", "4",
      "--max-steps", "4", "--checkpoint-every", "2", "--eval-every", "2", "--precision", "bf16-mixed"]


@pytest.mark.slow
def test_pretraining_and_its_resume_print_no_library_lines(tmp_path, corpus):
    out = tmp_path / "run"
    first = _bertbench([*PT, "--corpus", str(corpus), "--out", str(out), "--stop-at-step", "2"])
    assert first.returncode == 0, first.stderr
    resumed = _bertbench([*PT, "--corpus", str(corpus), "--out", str(out), "--resume", "auto"])
    assert resumed.returncode == 0, resumed.stderr
    for r in (first, resumed):
        lines = [ln for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
        foreign = [ln for ln in lines if not ln.startswith(OURS)]
        assert not foreign, foreign
        assert not [ln for ln in lines if any(n in ln for n in NOISE)]


@pytest.mark.slow
def test_verbose_shows_the_library_notices(tmp_path, corpus):
    r = _bertbench(["--verbose", *PT, "--corpus", str(corpus), "--out", str(tmp_path / "run")])
    assert r.returncode == 0, r.stderr
    assert "GPU available" in r.stderr  # the switch is real: the same run, its notices back
