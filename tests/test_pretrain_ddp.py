"""Two processes (Lightning DDP over gloo, on CPU) train what one process trains with the same global batch.

Each rank collates the whole global batch and keeps its half (the masks one process would draw), weights
its LM loss by its share of the global loss tokens, DDP averages the gradients, and the run log sums the
ranks' token counts. With dropout off and fp32 the two runs differ only by the order of floating-point sums
(measured: train losses equal to the 5 decimals of metrics.csv, weights within 3e-6 relative after 12
Adam steps); the tolerances below allow 30x that. Any one of the three pieces left out fails this test.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
import torch

from test_pretrain import write_corpus

pytestmark = pytest.mark.slow

COMMON = ["--model-size", "tiny", "--vocab-size", "200", "--max-seq-len", "32", "--max-steps", "12",
          "--precision", "32", "--accelerator", "cpu", "--lr", "3e-3", "--warmup-steps", "2",
          "--eval-every", "6", "--checkpoint-every", "6", "--set", "log_every=1", "--set", "eval_batches=2",
          "--set", "model.dropout=0.0", "--set", "model.attention_dropout=0.0"]


def run(args, tmp_path):
    env = {**os.environ, "BERTBENCH_PROGRESS": "0", "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "bertbench.cli", "pretrain", *COMMON, *args], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def rows(out):
    with open(out / "metrics.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_two_processes_train_what_one_process_trains(tmp_path):
    from bertbench.model.tokenizer import WordPieceTokenizer

    corpus = write_corpus(tmp_path / "docs")
    vocab = tmp_path / "tokenizer"  # one tokenizer for both runs, given the same way: one procedure
    WordPieceTokenizer.train((p.read_text() for p in sorted(corpus.glob("*.txt"))), vocab_size=200).save(vocab)
    one, two = tmp_path / "one", tmp_path / "two"
    run(["--corpus", str(corpus), "--out", str(one), "--batch-size", "8", "--tokenizer", str(vocab)], tmp_path)
    said = run(["--corpus", str(corpus), "--out", str(two), "--batch-size", "4", "--devices", "2",
                "--strategy", "ddp", "--tokenizer", str(vocab)], tmp_path)
    assert said.count("done:") == 1  # rank 0 reports; the other rank is silent
    a, b = json.loads((one / "summary.json").read_text()), json.loads((two / "summary.json").read_text())
    assert b["batch_size"] == a["batch_size"] == 8
    assert b["procedure_fingerprint"] == a["procedure_fingerprint"]  # one procedure: seeds of it may pool
    # global counts: both ranks' tokens, exactly the tokens one process saw (same instances, same masks)
    assert (b["tokens_seen"], b["loss_tokens"]) == (a["tokens_seen"], a["loss_tokens"])
    ra, rb = rows(one), rows(two)
    assert [r["step"] for r in rb] == [str(s) for s in range(1, 13)]  # one writer, no interleaved rows
    assert [r["tokens"] for r in ra] == [r["tokens"] for r in rb]
    loss_a = torch.tensor([float(r["train_loss"]) for r in ra])
    loss_b = torch.tensor([float(r["train_loss"]) for r in rb])
    assert loss_a[-1] < loss_a[0] - 0.5  # it learns: a real curve to compare, not a flat line
    assert (loss_a - loss_b).abs().max() < 1e-3, (loss_a, loss_b)
    wa = torch.load(one / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    wb = torch.load(two / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    for name, w in wa.items():
        rel = ((w.float() - wb[name].float()).norm() / w.float().norm().clamp_min(1e-12)).item()
        assert rel < 1e-4, (name, rel)
