"""The pre-training run's Lightning callbacks, each one job: the finite guard, the run log (metrics.csv and
token counts), periodic checkpoints (and signals), Figure 5's snapshots, and `bench quality`'s probe.

`training.pretrain_run` builds them and hands them to the Trainer in the order that matters there (the
guard's note before the row, the snapshot and the checkpoint). Imports Lightning: import this module only
where a run starts. What a step waits for, and when (nothing between the run log's rows, `sync_step`):
docs/scale-ddp.md.
"""
from __future__ import annotations

import csv
import os
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, Optional

import torch

from bertbench.training import lightning_compat
from bertbench.training.lightning_compat import lightning as L
from bertbench.config import PretrainConfig
from bertbench.errors import BertbenchError
from bertbench.runtime.faults import fault_point
from bertbench.training.batches import STEP_LOSS_TOKENS, STEP_TOKENS
from bertbench.training.finite_guard import FirstBadStep

# `*_paper_masking`: the masked LM's held-out scores at the paper's masking (15%, 80/10/10), measured apart
# when the run masks otherwise (else the same as eval_mlm_loss/accuracy). `eval_cross_segment_match` (bertbench.model.diagnostics):
# when a head that compares the two segments forms, if it does; a resumed run's older rows leave it empty.
CSV_FIELDS = [
    "step", "tokens", "loss_tokens", "lr", "train_loss", "train_mlm_loss", "train_nsp_loss", "tokens_per_s",
    "eval_mlm_loss", "eval_mlm_accuracy", "eval_mlm_loss_paper_masking", "eval_mlm_accuracy_paper_masking",
    "eval_nsp_accuracy", "eval_clm_loss", "eval_cross_segment_match", "elapsed_s",
]


def _fmt(v) -> str:
    return "" if v is None else f"{float(v):.5f}"


def step_ends(trainer, batch_idx: int) -> bool:
    """Whether this micro-batch is the last of its optimiser step."""
    return (batch_idx + 1) % trainer.accumulate_grad_batches == 0


def sync_step(cfg: PretrainConfig, step: int) -> bool:
    """A step where the run may wait for the device and the ranks: one with a metrics row (every log_every)."""
    return step % cfg.log_every == 0


def save_lightning_checkpoint(trainer, out_dir: Path) -> None:
    ckpt_dir = out_dir / "checkpoints"
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    tmp = ckpt_dir / ".last.ckpt.tmp"
    try:
        trainer.save_checkpoint(tmp, weights_only=False)  # the full state (optimiser, loops, RNG): resume needs it
    except OSError as err:  # a full disk, say: the previous last.ckpt is untouched, so the run can still resume
        tmp.unlink(missing_ok=True)
        raise BertbenchError(f"{ckpt_dir / 'last.ckpt'}: cannot write the checkpoint of step {trainer.global_step} "
                             f"({err.strerror or err}); the previous one is unchanged: make room and rerun with "
                             "--resume auto") from None
    fault_point("before_rename", trainer.global_step)
    if trainer.is_global_zero:
        os.replace(tmp, ckpt_dir / "last.ckpt")


class FiniteGuard(L.Callback):
    """Notes the first step with a non-finite loss or gradient norm (on the device, see finite_guard);
    `check` (a read of the device) runs before every metrics row and checkpoint."""

    def __init__(self, out_dir: Path, precision: str, saved_step: Optional[int]):
        self.out_dir = out_dir
        # fp16's grad scaler expects inf gradients now and then and skips those steps
        self.notes_grads = precision != "16-mixed"
        self.saved_step = saved_step  # the step of checkpoints/last.ckpt, for messages (PeriodicCheckpoint sets it)
        self.first_bad = FirstBadStep()
        self._step = 0

    def check(self):
        kept = f"; checkpoints/last.ckpt (step {self.saved_step}) is kept" if self.saved_step else "; no checkpoint written"
        self.first_bad.check(str(self.out_dir), kept)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._step = trainer.global_step + 1  # the optimiser step this micro-batch belongs to

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        # where the module clips, it notes the norm clipping returned (on_train_batch_end): no second norm
        if self.notes_grads and not getattr(pl_module, "clips_gradients", False):
            self.first_bad.note_grads(pl_module.parameters(), self._step)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is not None:
            self.first_bad.note_loss(loss, self._step)
        norm = getattr(pl_module, "grad_norm", None)
        if norm is not None:
            if self.notes_grads:
                self.first_bad.note(norm, self._step, 2)
            pl_module.grad_norm = None


class RunLog(L.Callback):
    """tokens/s, cumulative tokens and metrics.csv; its counters travel in the Lightning checkpoint. `shown` is
    what a progress display shows (the last row's loss and tokens/s), host numbers read without touching the device."""

    def __init__(self, cfg: PretrainConfig, out_dir: Path, guard: FiniteGuard, last_step: Optional[int]):
        self.cfg, self.out_dir, self.guard = cfg, out_dir, guard
        self.last_step = last_step  # the step cap (a budget may end the run before it)
        self.tokens = 0
        self.loss_tokens = 0
        self._t0 = time.perf_counter()
        self._tokens_at_t0 = 0
        self.last_train_loss: Optional[float] = None
        self.shown: dict[str, float] = {}
        self._fh = None  # metrics.csv, open from on_train_start (never reached when resumed at max_steps)
        self._last_row_step = 0

    def state_dict(self):
        # last_train_loss too: a run resumed from its final checkpoint trains no step, yet its summary needs it
        return {"tokens": self.tokens, "loss_tokens": self.loss_tokens, "last_train_loss": self.last_train_loss}

    def load_state_dict(self, state):
        self.tokens, self.loss_tokens = int(state["tokens"]), int(state["loss_tokens"])
        self.last_train_loss = state.get("last_train_loss")
        self._tokens_at_t0 = self.tokens

    def on_train_start(self, trainer, pl_module):  # after a resumed run's loop state is restored
        self._t0 = time.perf_counter()
        self._tokens_at_t0 = self.tokens
        self._last_row_step = trainer.global_step
        if not trainer.is_global_zero:  # one writer: the counts are global, so rank 0's rows say it all
            return
        path = self.out_dir / "metrics.csv"
        rows = []
        if path.is_file():  # resumed: keep the rows up to the restored step, drop any written after it
            with open(path, newline="") as fh:
                rows = [r for r in csv.DictReader(fh) if int(r["step"]) <= trainer.global_step]
        self._fh = open(path, "w", newline="")
        self._csv = csv.DictWriter(self._fh, fieldnames=CSV_FIELDS)
        self._csv.writeheader()
        self._csv.writerows(rows)
        self._fh.flush()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not step_ends(trainer, batch_idx):
            return
        self.tokens += batch[STEP_TOKENS]  # the step's, every rank's and micro-batch's: the same on every rank
        self.loss_tokens += batch[STEP_LOSS_TOKENS]
        step = trainer.global_step
        cfg = self.cfg
        if sync_step(cfg, step) or (cfg.eval_every and step % cfg.eval_every == 0):
            self.guard.check()  # never a NaN row or a NaN eval
        evaluated = pl_module.maybe_evaluate(step)
        # Every rank decides alike (a row holds a collective): the budget's own end, on one process only; with
        # several, the module agrees on it at rows (PretrainModule.on_train_batch_end), so that step has one.
        ending = trainer.should_stop or step == self.last_step or (trainer.world_size == 1 and pl_module.budget_spent())
        if sync_step(cfg, step) or evaluated or ending:
            self._write_row(trainer, pl_module, step, evaluated)

    def _step_losses(self, trainer, pl_module) -> dict[str, float]:
        """The last step's losses, averaged over ranks (each rank's is on its share of the global batch)."""
        losses = pl_module.step_losses
        if not losses:
            return {}
        values = torch.stack([v.float() for v in losses.values()])
        if trainer.world_size > 1:
            values = trainer.strategy.reduce(values, reduce_op="mean")
        return dict(zip(losses, values.tolist()))

    def _write_row(self, trainer, pl_module, step: int, evaluated: bool) -> None:
        self.guard.check()
        losses = self._step_losses(trainer, pl_module)
        elapsed = time.perf_counter() - self._t0
        tps = (self.tokens - self._tokens_at_t0) / elapsed if elapsed > 0 else 0.0
        row = {
            "step": step, "tokens": self.tokens, "loss_tokens": self.loss_tokens,
            "lr": f"{trainer.optimizers[0].param_groups[0]['lr']:.6g}",
            "train_loss": _fmt(losses.get("loss")), "train_mlm_loss": _fmt(losses.get("mlm_loss")),
            "train_nsp_loss": _fmt(losses.get("nsp_loss")), "tokens_per_s": f"{tps:.1f}",
            "elapsed_s": f"{pl_module.elapsed():.1f}",
        }
        self.last_train_loss = losses.get("loss")
        if evaluated:
            row.update({f"eval_{k}": f"{v:.5f}" for k, v in pl_module.last_eval.items() if f"eval_{k}" in CSV_FIELDS})
            pl_module.last_eval = {}
        if self._fh is not None:
            self._csv.writerow(row)
            self._fh.flush()
        self._last_row_step = step
        self.shown = {"loss": losses["loss"], "tok/s": tps} if "loss" in losses else {"tok/s": tps}

    def on_fit_end(self, trainer, pl_module):
        # One process: the budget's stop check (the module's, after this callback's) may end a step this log let
        # pass. (With several, the budget ends only at a row: PretrainModule.on_train_batch_end.)
        if trainer.world_size == 1 and pl_module.budget_spent() and trainer.global_step > self._last_row_step:
            self._write_row(trainer, pl_module, trainer.global_step, evaluated=False)
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class PeriodicCheckpoint(L.Callback):
    """Every N steps, at `--stop-at-step` and after a SIGINT/SIGTERM: write checkpoints/last.ckpt atomically
    (tmp file, then rename). A signal stops the run at the step boundary, right after that checkpoint."""

    def __init__(self, cfg: PretrainConfig, out_dir: Path, guard: FiniteGuard, signals, stop_at_step: Optional[int]):
        self.cfg, self.out_dir, self.guard, self.signals, self.stop_at_step = cfg, out_dir, guard, signals, stop_at_step
        self.signal_step: Optional[int] = None  # the step a signal stopped the run at

    def on_train_start(self, trainer, pl_module):
        self.signals.defer()  # after Lightning's own handlers are in place (see stop_signals)
        lightning_compat.quiet_lightning_sigterm(trainer, self.signals)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        cfg = self.cfg
        if not step_ends(trainer, batch_idx):
            return
        step = trainer.global_step
        signalled = self.signals.received is not None
        if trainer.world_size > 1:  # a signal reaches one rank; every rank must stop at the same step
            # agreed at rows only (no collective per step): a signal stops the run at the next row
            signalled = sync_step(cfg, step) and trainer.strategy.reduce_boolean_decision(signalled, all=False)
        if (cfg.checkpoint_every and step % cfg.checkpoint_every == 0) or step == self.stop_at_step or signalled:
            self.guard.check()  # never a NaN checkpoint: the last good one stays
            with pl_module.clock_paused():  # writing a checkpoint is not training time
                save_lightning_checkpoint(trainer, self.out_dir)
            self.guard.saved_step = step
        if step == self.stop_at_step:
            trainer.should_stop = True  # simulated pre-emption (tests, and `--stop-at-step`)
        if signalled:
            self.signal_step = step
            trainer.should_stop = True
        fault_point("after_step", step, stop_noted=lambda: self.signals.received is not None)


class Snapshots(L.Callback):
    """snapshots/step-N at the given steps, before that step's periodic checkpoint (so a resume from an
    earlier checkpoint passes the step again and rewrites the same snapshot: resume is exact)."""

    def __init__(self, cfg: PretrainConfig, out_dir: Path, tokenizer, identity: Callable[[], dict], run_log: RunLog,
                 steps: Collection[int]):
        self.cfg, self.out_dir, self.tokenizer, self.identity, self.run_log = cfg, out_dir, tokenizer, identity, run_log
        self.steps = set(steps)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if (batch_idx + 1) % self.cfg.grad_accum or step not in self.steps or not trainer.is_global_zero:
            return
        from bertbench.config import to_dict
        from bertbench.model.checkpoint import save_checkpoint
        from bertbench.results import PretrainSummary
        from bertbench.runtime.provenance import now_iso

        with pl_module.clock_paused():  # not training time, as a checkpoint write
            heldout = pl_module.eval_fn(pl_module.model) if pl_module.eval_fn is not None else {}
            summary = PretrainSummary(**self.identity(), steps=step, tokens_seen=self.run_log.tokens,
                                      wall_seconds=round(pl_module.elapsed(), 2), heldout=heldout, snapshot=True,
                                      date=now_iso())
            save_checkpoint(self.out_dir / "snapshots" / f"step-{step}", pl_module.model, self.tokenizer,
                            run_config=to_dict(self.cfg), summary=summary)


class QualityProbe(L.Callback):
    """`bench quality`'s probe: scores the model on held-out data at the start and whenever `probe.due(t)`
    says (t: training seconds), with the clock paused. `probe` has `record(model, t, tokens, step)` and `due(t)`."""

    def __init__(self, probe: Any):
        self.probe = probe
        self.tokens = 0

    def on_train_start(self, trainer, pl_module):
        with pl_module.clock_paused():
            self.probe.record(pl_module.model, 0.0, 0, 0)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not step_ends(trainer, batch_idx):
            return
        self.tokens += batch[STEP_TOKENS]  # a host count (training.batches): no read of the device per step
        t = pl_module.training_seconds()
        if self.probe.due(t) or pl_module.budget_spent():
            with pl_module.clock_paused():
                self.probe.record(pl_module.model, t, self.tokens, trainer.global_step)
