"""Exact resume after any stop, in real subprocesses: `kill -9` at named points, SIGTERM, Ctrl-C.

The uninterrupted run is the reference; an interrupted run resumed with --resume auto must give the same
metrics.csv (timing columns aside), the same summary (timings aside) and bit-identical final weights.
The kills come from `BERTBENCH_FAULT` (runtime.faults.fault_point): the process sends itself SIGKILL at a
named point, which is a real `kill -9` at a moment that is the same on every machine.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_pretrain import write_corpus

ROOT = Path(__file__).resolve().parent.parent
TIMING_COLUMNS = {"tokens_per_s", "elapsed_s"}
TIMING_KEYS = {"wall_seconds", "preprocessing_seconds", "tokens_per_second", "date", "run_dir"}
MAX_STEPS = 10


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from bertbench.data.corpus import iter_documents
    from bertbench.model.tokenizer import WordPieceTokenizer

    base = tmp_path_factory.mktemp("faults")
    corpus = write_corpus(base / "docs")
    sentences = (s for d in iter_documents([str(corpus)], None) for s in d)
    WordPieceTokenizer.train(sentences, vocab_size=200, lowercase=True).save(base / "tok")
    return base, corpus


def args(base: Path, corpus: Path, out: Path, *extra: str) -> list[str]:
    return [
        "pretrain", "--corpus", str(corpus), "--tokenizer", str(base / "tok"), "--model-size", "tiny",
        "--max-seq-len", "32", "--batch-size", "8", "--precision", "32", "--max-steps", str(MAX_STEPS),
        "--eval-every", "5", "--checkpoint-every", "1", "--set", "eval_batches=2", "--set", "log_every=1",
        # the step set, not chosen from the step times earlier runs left in the cache (test_gpu_defaults covers
        # the choice and its resume): the reference and the resumed run must not differ by what ran before them
        "--compile", "off", "--out", str(out), *extra,
    ]


def bertbench(argv: list[str], fault: str = "", signal_name: str = "KILL") -> subprocess.CompletedProcess:
    env = dict(os.environ, BERTBENCH_PROGRESS="0", PYTHONPATH=str(ROOT), BERTBENCH_FAULT=fault,
               BERTBENCH_FAULT_SIGNAL=signal_name)
    return subprocess.run([sys.executable, "-m", "bertbench.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=300)


def metrics(run: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in csv.DictReader(open(run / "metrics.csv"))]


def summary(run: Path) -> dict:
    def strip(d):
        if isinstance(d, dict):
            return {k: strip(v) for k, v in d.items() if k not in TIMING_KEYS and not k.endswith("_seconds")}
        return d

    return strip(json.loads((run / "summary.json").read_text()))


@pytest.fixture(scope="module")
def reference(setup):
    base, corpus = setup
    out = base / "reference"
    r = bertbench(args(base, corpus, out))
    assert r.returncode == 0, r.stderr
    return out


def assert_same_run(a: Path, b: Path) -> None:
    assert metrics(a) == metrics(b)
    assert [int(r["step"]) for r in metrics(b)] == list(range(1, MAX_STEPS + 1))
    assert summary(a) == summary(b)
    assert (a / "checkpoint" / "model.safetensors").read_bytes() == (b / "checkpoint" / "model.safetensors").read_bytes()


@pytest.mark.slow
def test_kill_9_anywhere_then_resume_is_bit_identical(setup, reference):
    """One run killed again and again (a checkpoint every step): after step 1, before half (3), inside the
    checkpoint write of step 4 (the new file complete, not yet renamed over the old), at half (5), after
    half (7), right after the last checkpoint (10), during the final eval and between the final weights and
    summary.json; each time resumed from its last good checkpoint."""
    base, corpus = setup
    out = base / "killed"
    faults = ["after_step:1", "after_step:3", "before_rename:4", "after_step:5", "after_step:7", "after_step:10",
              "final_eval", "before_summary"]
    for fault in faults:
        r = bertbench(args(base, corpus, out, "--resume", "auto"), fault)
        assert r.returncode == -9, (fault, r.returncode, r.stderr[-2000:])
        assert not (out / "summary.json").exists()
    ckpt_step = __import__("torch").load(out / "checkpoints" / "last.ckpt", weights_only=False)["global_step"]
    assert ckpt_step == MAX_STEPS
    r = bertbench(args(base, corpus, out, "--resume", "auto"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert_same_run(reference, out)


@pytest.mark.slow
def test_sigterm_and_ctrl_c_checkpoint_at_the_next_step_and_resume_exactly(setup, reference):
    """SIGTERM during step 2's end hooks: step 3 still runs, is checkpointed, exit 143 with the hint; the
    resumed run gets Ctrl-C (SIGINT) during step 6's: checkpoint at 7, exit 130; the last resume finishes."""
    base, corpus = setup
    out = base / "signals"
    for fault, name, code, stop in [("after_step:2", "TERM", 143, 3), ("after_step:6", "INT", 130, 7)]:
        # checkpoint_every=4 (it may change on resume): the checkpoint at `stop` is the signal's, not a periodic one
        r = bertbench(args(base, corpus, out, "--resume", "auto", "--set", "checkpoint_every=4"), fault, name)
        assert r.returncode == code, r.stderr[-2000:]
        assert "Traceback" not in r.stderr
        err = [line for line in r.stderr.splitlines() if line.startswith("error:")]
        assert err == [f"error: interrupted by SIG{name} at step {stop}; checkpoint written at step {stop}; "
                       "rerun the same command with --resume auto to continue"]
        ckpt = __import__("torch").load(out / "checkpoints" / "last.ckpt", weights_only=False)
        assert ckpt["global_step"] == stop
        assert [int(r["step"]) for r in metrics(out)] == list(range(1, stop + 1))
    r = bertbench(args(base, corpus, out, "--resume", "auto"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert_same_run(reference, out)
