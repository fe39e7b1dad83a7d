"""Issue 47: the pre-training loop never makes the host wait for the device between the run log's rows.

The real `bertbench pretrain` path (the CLI, Lightning, every callback of the run, the terminal's progress bar
and the progress lines, the static step that a GPU runs: `--compile on` chooses it, run eagerly here) runs
under a TorchDispatchMode that counts, per optimiser step, the ops that wait for the device on CUDA:
reading a value back (`aten._local_scalar_dense`: `.item()`, `int()`, `bool()`), ops whose output size
depends on the data (`nonzero`, `masked_select`, `unique`, indexing with a boolean mask) and tensors made
from host scalars (`scalar_tensor`, `lift_fresh`: `torch.tensor(3)`, `torch.as_tensor(step)`, a copy from
the host). On CPU every tensor is on the host, so a tensor made from a scalar counts wherever it is made;
the loader's collation is left out (on a GPU it runs in loader workers, on host tensors), by pausing the
count inside the dataset.

Rows every 4 steps (an evaluation, a checkpoint and a snapshot at rows too) and accumulation over two
micro-batches: steps 1–3 and 5–7 make no such op.
"""
from __future__ import annotations

import sys
import types
from collections import defaultdict

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from test_pretrain import write_corpus

aten = torch.ops.aten
SYNCING = {aten._local_scalar_dense.default, aten.nonzero.default, aten.masked_select.default, aten.equal.default,
           aten.is_nonzero.default, aten._unique2.default, aten.unique_consecutive.default, aten.unique_dim.default,
           aten.scalar_tensor.default, aten.lift_fresh.default, aten.lift_fresh_copy.default}
INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}


def syncs(func, args) -> bool:
    if func in SYNCING:
        return True
    if func in INDEXING:  # x[mask]: its size is the mask's count, read back
        return any(t is not None and t.dtype == torch.bool for t in args[1])
    if func in (aten._to_copy.default, aten.copy_.default):  # host → device
        src = args[1] if func is aten.copy_.default else args[0]
        dst_device = args[0].device if func is aten.copy_.default else None
        return isinstance(src, torch.Tensor) and src.device.type == "cpu" and dst_device not in (None, src.device)
    return False


class SyncCount(TorchDispatchMode):
    """Counts syncing ops per optimiser step (`step`: set as each micro-batch starts; 0 before the first)."""

    def __init__(self):
        super().__init__()
        self.step, self.paused = 0, 0
        self.seen: dict[int, list[str]] = defaultdict(list)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.paused and syncs(func, args):
            self.seen[self.step].append(str(func))
        return func(*args, **(kwargs or {}))


STEPS, LOG_EVERY = 8, 4


@pytest.fixture
def counted_run(tmp_path, monkeypatch):
    """Runs `bertbench pretrain` under SyncCount; returns (the count, the progress lines it printed)."""
    from typer.testing import CliRunner

    from bertbench.training.lightning_compat import lightning as L

    from bertbench.cli import app
    from bertbench.training import pretrain_run
    from bertbench.training.batches import PhasedBatches
    from bertbench.training.progress_lines import ProgressLines

    count, lines = SyncCount(), []

    class StepMark(L.Callback):  # counts from the first step's start to the end of training (set-up is not a step)
        def on_train_start(self, trainer, pl_module):
            count.__enter__()

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            count.step = trainer.global_step + 1

        def on_train_end(self, trainer, pl_module):
            count.__exit__(None, None, None)

    own_callbacks = pretrain_run._all_callbacks

    def callbacks(cfg, out_dir, tokenizer, identity, own, step, extra):
        made, bar = own_callbacks(cfg, out_dir, tokenizer, identity, own, step, extra)
        assert bar  # the terminal's bar (below); the lines beside it, every step
        return [StepMark(), *made, ProgressLines(0.0, cfg.max_steps, lines.append, own[1], step)], bar

    own_item = PhasedBatches.__getitem__

    def collate(self, micro_step):  # the loader's work: on a GPU, in its workers (on host tensors)
        count.paused += 1
        try:
            return own_item(self, micro_step)
        finally:
            count.paused -= 1

    monkeypatch.setattr(pretrain_run, "_all_callbacks", callbacks)
    monkeypatch.setattr(PhasedBatches, "__getitem__", collate)
    monkeypatch.setattr(pretrain_run, "sys", types.SimpleNamespace(stdout=types.SimpleNamespace(isatty=lambda: True)))
    monkeypatch.setattr(torch, "compile", lambda fn, *a, **k: fn)  # --compile on's static step, eagerly (no C++ build)
    monkeypatch.setenv("BERTBENCH_PROGRESS", "1")
    corpus, out = write_corpus(tmp_path / "docs"), tmp_path / "run"
    args = ["pretrain", "--corpus", str(corpus), "--out", str(out), "--model-size", "tiny", "--vocab-size", "200",
            "--max-seq-len", "32", "--batch-size", "8", "--grad-accum", "2", "--precision", "32", "--accelerator", "cpu",
            "--compile", "on", "--max-steps", str(STEPS), "--set", f"log_every={LOG_EVERY}", "--eval-every", "8",
            "--checkpoint-every", "4", "--set", "snapshots=2", "--set", "eval_batches=1"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert "compiled the training step" in r.output  # the static step ran
    assert (out / "snapshots" / "step-4").is_dir() and (out / "checkpoints" / "last.ckpt").is_file()
    return count, lines


def test_no_step_between_rows_waits_for_the_device(counted_run):
    count, lines = counted_run
    between = {step: count.seen.get(step, []) for step in range(1, STEPS) if step % LOG_EVERY}
    assert between == {step: [] for step in between}, between
    assert count.seen[LOG_EVERY]  # a row reads its losses and the finite guard back: the count sees them
    # the progress shows the last row's numbers, read there: a line per micro-batch, with a rate after a row
    assert len(lines) == 2 * STEPS and "tok/s" not in lines[1] and "tok/s" in lines[2 * LOG_EVERY], lines


def test_lightnings_per_batch_sigterm_broadcast_is_off_and_an_early_sigterm_handed_over():
    """Lightning broadcasts a SIGTERM flag from rank 0 before every batch (a collective and a read per step);
    the run switches it off for its own trainer, and a SIGTERM Lightning caught before our handler replaced its
    own becomes ours, so it stops the run at a row with a checkpoint on every rank (PeriodicCheckpoint)."""
    import signal
    from types import SimpleNamespace

    from bertbench.training.lightning_compat import quiet_lightning_sigterm
    from bertbench.training.stop_signals import StopSignals
    from lightning.pytorch.loops.training_epoch_loop import _TrainingEpochLoop  # after bertbench's (lightning_compat)

    assert hasattr(_TrainingEpochLoop, "_broadcast_sigterm_tensor")  # still Lightning's name for it
    loop = SimpleNamespace(_broadcast_sigterm_tensor=lambda: pytest.fail("broadcast"))
    connector = SimpleNamespace(received_sigterm=True)
    trainer = SimpleNamespace(_signal_connector=connector, fit_loop=SimpleNamespace(epoch_loop=loop))
    signals = StopSignals()
    quiet_lightning_sigterm(trainer, signals)
    loop._broadcast_sigterm_tensor()  # a no-op now
    assert signals.received == signal.SIGTERM and not connector.received_sigterm
