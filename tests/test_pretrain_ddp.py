"""Several processes (Lightning DDP over gloo, on CPU) train the procedure one process trains.

`--batch-size` is the global batch: 1, 2 or 4 processes at batch 8 train the same global batches (each rank
trains on its own rows, with masks keyed per row: tests/test_batches.py checks the data row by row), each rank
weights its LM loss by its share of the global loss tokens (counted by its loader), DDP averages the
gradients, and the run log adds the step's global counts. With dropout off and fp32 the runs differ only by
the order of floating-point sums and the padded widths of the ranks' batches (measured over 8 Adam steps: train
losses equal to the 5 decimals of metrics.csv, weights within 1.3e-6 relative on 2 processes and 1.9e-6 on 4);
the tolerances below, 1e-3 and 1e-4, allow for other machines' float sums.

Every objective also trains with dropout on (each rank draws its own masks, keyed by seed, rank and step),
on the static step a GPU runs (fixed shapes and prediction slots: `--compile on` chooses it; run eagerly by
tests/ddp_collectives.py): before the pooler was frozen for objectives without NSP, "mlm" and "clm" failed
every DDP step with "parameters that were not used in producing the loss". A run killed mid-way resumes
exactly, dropout on; a resume may also change the process count (the same global batches), and is refused
with one line where the count does not divide the batch. The same runs count each rank's blocking
collectives per step: none between the run log's rows beyond DDP's gradient buckets.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ddp_runs import max_rel, rows, weights
from test_pretrain import write_corpus

pytestmark = pytest.mark.slow

TINY = ["--model-size", "tiny", "--vocab-size", "200", "--max-seq-len", "32", "--precision", "32",
        "--accelerator", "cpu", "--lr", "3e-3", "--warmup-steps", "2", "--set", "log_every=1",
        "--set", "eval_batches=2", "--batch-size", "8"]
NO_DROPOUT = ["--set", "model.dropout=0.0", "--set", "model.attention_dropout=0.0"]


def run(args, tmp_path, fault: str = "", expect: int = 0, static: bool = False, collectives=None,
        inductor_graphs=None) -> str:
    """`bertbench pretrain` in its own processes. static: the static step (`--compile on`, run eagerly by
    tests/ddp_collectives.py); collectives: a folder where each rank writes the blocking collectives it made,
    step by step; inductor_graphs: the static step compiled by inductor, as `--compile on` compiles it, and a
    folder where each rank writes how many graphs it compiled."""
    env = {**os.environ, "BERTBENCH_PROGRESS": "0", "OMP_NUM_THREADS": "1", "BERTBENCH_FAULT": fault,
           "BERTBENCH_COLLECTIVES": str(collectives or ""), "BERTBENCH_GRAPHS": str(inductor_graphs or ""),
           "BERTBENCH_COMPILE": "inductor" if inductor_graphs else ""}
    command = [sys.executable, "-m", "bertbench.cli", "pretrain"]
    if static or collectives or inductor_graphs:
        command = [sys.executable, str(Path(__file__).with_name("ddp_collectives.py")), "pretrain", "--compile", "on"]
    r = subprocess.run([*command, *TINY, *args], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == expect, r.stdout + r.stderr
    return r.stdout + r.stderr


def ddp(n: int) -> list[str]:
    return ["--devices", str(n), "--strategy", "ddp"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A corpus and one tokenizer for every run, given the same way: one procedure."""
    from bertbench.model.tokenizer import WordPieceTokenizer

    root = tmp_path_factory.mktemp("ddp")
    corpus = write_corpus(root / "docs")
    vocab = root / "tokenizer"
    WordPieceTokenizer.train((p.read_text() for p in sorted(corpus.glob("*.txt"))), vocab_size=200).save(vocab)
    return ["--corpus", str(corpus), "--tokenizer", str(vocab)]


ONE_PROCEDURE = [*NO_DROPOUT, "--max-steps", "8", "--eval-every", "4", "--checkpoint-every", "8"]


@pytest.fixture(scope="module")
def one_process(data, tmp_path_factory):
    """A 1-process run (eager, dropout off) that the multi-process runs below are compared with."""
    one = tmp_path_factory.mktemp("one") / "one"
    run([*data, *ONE_PROCEDURE, "--out", str(one)], one.parent)
    return one


def test_one_two_and_four_processes_train_one_procedure(tmp_path, data, one_process):
    common = [*data, *ONE_PROCEDURE]
    one = one_process
    a = json.loads((one / "summary.json").read_text())
    ra = rows(one)
    loss_a = torch.tensor([float(r["train_loss"]) for r in ra])
    assert loss_a[-1] < loss_a[0] - 0.3  # it learns: a real curve to compare, not a flat line
    for n in (2, 4):
        out = tmp_path / f"p{n}"
        said = run([*common, "--out", str(out), *ddp(n)], tmp_path)
        assert said.count("done:") == 1  # rank 0 reports; the other ranks are silent
        assert said.count("CPU processes") == 1 and f"accelerator cpu, so {n} CPU processes will be used" in said
        b = json.loads((out / "summary.json").read_text())
        assert b["batch_size"] == a["batch_size"] == 8  # the global batch, however many processes share it
        assert b["procedure_fingerprint"] == a["procedure_fingerprint"]  # one procedure: seeds of it may pool
        # global counts: every rank's tokens, exactly the tokens one process saw (the same rows, the same masks)
        assert (b["tokens_seen"], b["loss_tokens"]) == (a["tokens_seen"], a["loss_tokens"])
        rb = rows(out)
        assert [r["step"] for r in rb] == [str(s) for s in range(1, 9)]  # one writer, no interleaved rows
        assert [(r["tokens"], r["loss_tokens"]) for r in ra] == [(r["tokens"], r["loss_tokens"]) for r in rb]
        loss_b = torch.tensor([float(r["train_loss"]) for r in rb])
        print(f"{n} processes: losses within {(loss_a - loss_b).abs().max():.2e}, "
              f"weights within {max_rel(weights(one), weights(out)):.2e} relative")  # shown with pytest -s
        assert (loss_a - loss_b).abs().max() < 1e-3, (n, loss_a, loss_b)
        assert max_rel(weights(one), weights(out)) < 1e-4


def test_two_processes_train_the_inductor_compiled_step_as_one_process_trains(tmp_path, data, one_process):
    """The static step compiled whole (fullgraph, inductor: C++ built in each process) under DDP on gloo: Lightning
    calls it inside DDP's forward, where dynamo's DDPOptimizer splits the traced graph at the gradient buckets
    and inductor compiles each piece. Two processes train what one process trains eagerly, within the bounds
    above (dropout off: compiled, dropout draws from inductor's RNG). Each rank counts the graphs inductor
    was given: a step that fell back to eager, or to another backend, fails here."""
    out, graphs = tmp_path / "compiled", tmp_path / "graphs"
    said = run([*data, *ONE_PROCEDURE, "--out", str(out), *ddp(2)], tmp_path, inductor_graphs=graphs)
    assert said.count("compiled the training step") == 1  # rank 0 says it
    for rank in (0, 1):
        counted = json.loads((graphs / f"rank-{rank}.json").read_text())
        assert counted["dynamo_graphs"] == 1 and counted["inductor_graphs"] >= 1, (rank, counted)  # one phase, one trace
    summary = json.loads((out / "summary.json").read_text())
    assert summary["step"]["compiled"] and summary["step"]["static"]
    ra, rb = rows(one_process), rows(out)
    assert [(r["step"], r["tokens"], r["loss_tokens"]) for r in ra] == [(r["step"], r["tokens"], r["loss_tokens"]) for r in rb]
    loss_a, loss_b = (torch.tensor([float(r["train_loss"]) for r in rs]) for rs in (ra, rb))
    print(f"2 processes compiled: {counted['inductor_graphs']} inductor graphs per rank, losses within "
          f"{(loss_a - loss_b).abs().max():.2e}, weights within {max_rel(weights(one_process), weights(out)):.2e} relative")
    assert (loss_a - loss_b).abs().max() < 1e-3, (loss_a, loss_b)
    assert max_rel(weights(one_process), weights(out)) < 1e-4


STEPS, LOG_EVERY = 6, 2
# rows at 2, 4, 6 (and 3, an evaluation); checkpoints at 3 and 6: steps 1 and 5 are neither
DROPOUT_ON = ["--max-steps", str(STEPS), "--eval-every", "3", "--checkpoint-every", "3", "--set", f"log_every={LOG_EVERY}"]
SYNC_STEPS = {2, 3, 4, 6}


@pytest.fixture(scope="module")
def two_process_runs(data, tmp_path_factory):
    """objective → (an uninterrupted 2-process run of the static step with dropout on, the folder of its ranks'
    collective counts), made once: the resume test compares with it."""
    made = {}

    def get(objective: str):
        if objective not in made:
            out = tmp_path_factory.mktemp("two") / objective
            said = run([*data, "--objective", objective, *DROPOUT_ON, "--out", str(out), *ddp(2)], out.parent,
                       collectives=out.parent / "collectives")
            assert "compiled the training step" in said  # the static step ran (--compile on's; eager here)
            made[objective] = out
        return made[objective]

    return get


@pytest.mark.parametrize("objective", ["mlm+nsp", "mlm", "clm"])
def test_every_objective_trains_on_two_processes_with_dropout(two_process_runs, objective):
    """The static step (the GPU's: fixed shapes, prediction slots) trains every objective under DDP."""
    out = two_process_runs(objective)
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["objective"], summary["steps"], summary["batch_size"]) == (objective, STEPS, 8)
    logged = rows(out)
    assert [int(r["step"]) for r in logged] == [2, 3, 4, 6]
    losses = [float(r["train_loss"]) for r in logged]
    assert all(torch.isfinite(torch.tensor(losses)))
    import bertbench

    model = bertbench.load_checkpoint(out / "checkpoint").model
    assert (model.nsp is not None) == (objective == "mlm+nsp")
    assert model.bert.pooler.weight.requires_grad  # a loaded model fine-tunes its pooler


def test_a_killed_run_resumes_exactly_or_on_another_process_count(tmp_path, data, two_process_runs):
    """Dropout on: two processes killed (SIGKILL) after step 4, the last checkpoint at step 3. Resumed on two
    processes, the run is the uninterrupted one exactly; resumed on one, it trains the same global batches (the
    same tokens and loss tokens at every step) to the end; on three, which do not divide the batch of 8, it is
    refused with one line that says what to run."""
    common = [*data, "--objective", "mlm", *DROPOUT_ON]
    straight, killed = two_process_runs("mlm"), tmp_path / "killed"
    run([*common, "--out", str(killed), *ddp(2)], tmp_path, fault="after_step:4", expect=-9, static=True)
    assert not (killed / "summary.json").exists()
    on_one, on_three = tmp_path / "on_one", tmp_path / "on_three"
    shutil.copytree(killed, on_one)
    shutil.copytree(killed, on_three)

    said = run([*common, "--out", str(killed), *ddp(2), "--resume", "auto"], tmp_path, static=True)
    assert "resuming" in said and "step 3" in said
    assert rows(killed) == rows(straight)
    assert max_rel(weights(straight), weights(killed)) < 1e-6

    said = run([*common, "--out", str(on_one), "--devices", "1", "--resume", "auto"], tmp_path, static=True)
    assert "resuming" in said and "step 3" in said
    counts = lambda out: [(r["step"], r["tokens"], r["loss_tokens"]) for r in rows(out)]  # noqa: E731
    assert counts(on_one) == counts(straight)
    assert json.loads((on_one / "summary.json").read_text())["steps"] == STEPS

    said = run([*common, "--out", str(on_three), *ddp(3), "--resume", "auto"], tmp_path, expect=2, static=True)
    errors = [line for line in said.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in said, said
    assert "batch_size 8" in errors[0] and "3 process" in errors[0] and "divisible by 3" in errors[0]


@pytest.mark.parametrize("objective", ["mlm+nsp", "clm"])
def test_no_step_between_rows_makes_a_collective_beyond_the_gradients(two_process_runs, objective):
    """Issue 47: between the run log's rows (and evaluations and checkpoints), a DDP step makes no blocking
    collective of its own: the loss-token weights come from the loader, the losses are averaged over ranks
    and the budget and signal are agreed at rows only, and Lightning's per-batch SIGTERM broadcast is off.
    Counted by wrapping torch.distributed's functions in both ranks (tests/ddp_collectives.py); DDP's
    gradient buckets go through its C++ reducer and are not among them."""
    folder = two_process_runs(objective).parent / "collectives"
    for rank in (0, 1):
        per_step = {int(k): v for k, v in json.loads((folder / f"rank-{rank}.json").read_text()).items()}
        between = {step: per_step.get(step, []) for step in range(1, STEPS + 1) if step not in SYNC_STEPS}
        assert between == {1: [], 5: []}, (rank, per_step)
        assert "all_reduce" in per_step[LOG_EVERY]  # seen where they belong: a row averages the ranks' losses
