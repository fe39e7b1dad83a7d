"""Two "nodes" of one process each (Lightning DDP over gloo, on CPU, on this one machine) train what one
process trains with the same global batch (`--batch-size` is global), count tokens over both, and resume
exactly after both are killed; every objective trains on them with dropout on.

Each node is its own `bertbench pretrain --num-nodes 2 --devices 1 --strategy ddp` process, started the way a
cluster starts one per node: NODE_RANK 0 or 1, MASTER_ADDR=localhost, MASTER_PORT a free port; Lightning
derives the global rank (node rank × devices + local rank) and the world size (nodes × devices) from them,
so rank → shard of the global batch is the mapping a real two-node run uses.

Tolerance against one process, as in test_pretrain_ddp (fp32, dropout off; the runs differ only in the order
of floating-point sums): train losses within 1e-3 of each other at every step, weights within 1e-4
relative. The resumed run must equal the uninterrupted two-node run: the same metrics.csv (timings aside)
and the same weights to 1e-6 relative.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import torch

from ddp_runs import max_rel, rows, weights
from test_pretrain import write_corpus

pytestmark = pytest.mark.slow

STEPS = 8
DROPOUT_ON = ["--model-size", "tiny", "--vocab-size", "200", "--max-seq-len", "32", "--max-steps", str(STEPS),
              "--precision", "32", "--accelerator", "cpu", "--lr", "3e-3", "--warmup-steps", "2",
              "--eval-every", "4", "--checkpoint-every", "3", "--set", "log_every=1", "--set", "eval_batches=2"]
COMMON = [*DROPOUT_ON, "--set", "model.dropout=0.0", "--set", "model.attention_dropout=0.0"]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "BERTBENCH_PROGRESS": "0", "OMP_NUM_THREADS": "1", **extra}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _pretrain(args: list[str], env: dict[str, str], cwd, common: list[str] = COMMON) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bertbench.cli", "pretrain", *common, *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(procs: list[subprocess.Popen], timeout: float = 240) -> list[tuple[int, str]]:
    out = []
    try:
        for p in procs:
            text, _ = p.communicate(timeout=timeout)
            out.append((p.returncode, text))
    finally:
        for p in procs:  # one node hanging in a collective after the other failed: end it too
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


def two_nodes(args: list[str], tmp_path, fault: str = "", common: list[str] = COMMON) -> list[tuple[int, str]]:
    port = str(_free_port())
    procs = [_pretrain([*args, "--num-nodes", "2", "--devices", "1", "--strategy", "ddp"],
                       _env(NODE_RANK=str(rank), MASTER_ADDR="localhost", MASTER_PORT=port, BERTBENCH_FAULT=fault),
                       tmp_path, common)
             for rank in (0, 1)]
    return _finish(procs)


def test_two_nodes_match_one_process_and_resume_after_a_kill(tmp_path):
    corpus = write_corpus(tmp_path / "docs")
    one, two, killed = tmp_path / "one", tmp_path / "two", tmp_path / "killed"
    [(rc, text)] = _finish([_pretrain(["--corpus", str(corpus), "--out", str(one), "--batch-size", "8"], _env(), tmp_path)])
    assert rc == 0, text
    node_args = ["--corpus", str(corpus), "--batch-size", "8", "--tokenizer", str(one / "tokenizer")]
    said = two_nodes([*node_args, "--out", str(two)], tmp_path)
    assert [rc for rc, _ in said] == [0, 0], said
    assert said[0][1].count("done:") == 1 and "done:" not in said[1][1]  # node 0 reports; node 1 is silent

    a, b = json.loads((one / "summary.json").read_text()), json.loads((two / "summary.json").read_text())
    assert b["batch_size"] == a["batch_size"] == 8  # the global batch: 2 nodes x 1 process x 4 rows
    # global counts: both nodes' tokens, exactly what one process saw (the same instances and masks)
    assert (b["tokens_seen"], b["loss_tokens"]) == (a["tokens_seen"], a["loss_tokens"])
    ra, rb = rows(one), rows(two)
    assert [r["step"] for r in rb] == [str(s) for s in range(1, STEPS + 1)]
    assert [r["tokens"] for r in ra] == [r["tokens"] for r in rb]
    loss_a = torch.tensor([float(r["train_loss"]) for r in ra])
    loss_b = torch.tensor([float(r["train_loss"]) for r in rb])
    assert loss_a[-1] < loss_a[0] - 0.3  # it learns: a real curve to compare
    assert (loss_a - loss_b).abs().max() < 1e-3, (loss_a, loss_b)
    assert max_rel(weights(one), weights(two)) < 1e-4

    # both nodes killed (SIGKILL) after step 5; the last checkpoint is step 3; both resumed
    dead = two_nodes([*node_args, "--out", str(killed)], tmp_path, fault="after_step:5")
    assert [rc for rc, _ in dead] == [-9, -9], dead
    assert not (killed / "summary.json").exists()
    resumed = two_nodes([*node_args, "--out", str(killed), "--resume", "auto"], tmp_path)
    assert [rc for rc, _ in resumed] == [0, 0], resumed
    assert "resuming" in resumed[0][1] and "step 3" in resumed[0][1]
    assert rows(killed) == rows(two)
    c = json.loads((killed / "summary.json").read_text())
    assert (c["tokens_seen"], c["loss_tokens"], c["steps"]) == (b["tokens_seen"], b["loss_tokens"], STEPS)
    assert max_rel(weights(two), weights(killed)) < 1e-6


@pytest.mark.parametrize("objective", ["mlm+nsp", "mlm", "clm"])
def test_every_objective_trains_on_two_nodes_with_dropout(tmp_path, objective):
    """"mlm" and "clm" have no NSP head: their pooler feeds no loss and is frozen, or DDP fails every step."""
    corpus = write_corpus(tmp_path / "docs")
    out = tmp_path / "run"
    said = two_nodes(["--corpus", str(corpus), "--batch-size", "8", "--objective", objective, "--max-steps", "3",
                      "--out", str(out)], tmp_path, common=DROPOUT_ON)
    assert [rc for rc, _ in said] == [0, 0], said
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["objective"], summary["steps"], summary["batch_size"]) == (objective, 3, 8)
    assert len(rows(out)) == 3 and all(torch.isfinite(torch.tensor(float(r["train_loss"]))) for r in rows(out))
