"""The pre-training LightningModule: BERT (MLM + NSP, MLM only, or causal LM) with the paper's AdamW.

The model is a plain `BertForPreTraining`; this module only adds the optimiser, the schedule (over steps
or over a wall-clock budget), held-out evaluation and the RNG state that exact resume needs.

With `budget_seconds`, warm-up and linear decay are functions of *training* seconds, read afresh before every
step (the wall-clock schedule: docs/quality-per-minute.md); every step's lr is kept (`lr_trace`).
"""
from __future__ import annotations

import contextlib
import math
import time
from typing import Any, Iterator, Optional

import torch

from bertbench.training.lightning_compat import lightning as L
from bertbench.config import OptimConfig
from bertbench.model.bert import BertForPreTraining
from bertbench.training.batches import LOSS_TOKENS, STEP_LOSS_TOKENS
from bertbench.training.optim import make_adamw
from bertbench.training.step import TrainingStep, fixed_step


def linear_warmup_decay(progress: float, warmup: float) -> float:
    """LR multiplier at `progress` ∈ [0, 1] of the schedule: linear warm-up to 1, then linear decay to 0."""
    if warmup > 0 and progress < warmup:
        return progress / warmup
    return max(0.0, (1.0 - progress) / max(1e-12, 1.0 - warmup))


class PretrainModule(L.LightningModule):
    def __init__(self, model: BertForPreTraining, optim: OptimConfig, max_steps: int,
                 budget_seconds: Optional[float] = None, eval_fn=None, eval_every: int = 0,
                 fused_optimizer: bool = False, dropout_seed: int = 0, step: Optional[TrainingStep] = None,
                 sync_every: int = 1):
        """sync_every: with several processes, the budget's stop is agreed (a collective) every this many steps
        only (the run log's rows: RunLog), so between them no step waits for the others.
        fused_optimizer: fused AdamW, gradients clipped here (optim.grad_clip), not by the Trainer (lightning_compat
        says why: lightning workaround: module-clips-fused-adamw); with no grad scaler there is nothing to unscale.
        step: the step the run chose (training.step): the model's forward with static shapes or not, compiled or
        not; it times the steps. None: the eager dynamic step."""
        super().__init__()
        self.step, self.model = step or fixed_step(static=False), freeze_unread(model)
        self.fused_optimizer, self.dropout_seed, self.optim_cfg = fused_optimizer, dropout_seed, optim
        self.max_steps, self.budget_seconds = max_steps, budget_seconds
        self.eval_fn, self.eval_every, self.sync_every = eval_fn, eval_every, sync_every
        self.elapsed_before = 0.0  # wall seconds of earlier (interrupted) sessions of this run
        self.paused_before = 0.0  # ... of which not training (evaluation, checkpoints)
        self._session_start = time.perf_counter()
        self._paused = 0.0
        self.last_eval: dict[str, float] = {}
        self.lr_trace: list[tuple[int, float, float]] = []  # (step, training seconds at its start, lr it ran at)
        self.last_step_end = 0.0  # training seconds when the last step ended
        self.phased_batches = None  # PhasedBatches whose later phases begin on the clock (attach_phases)
        self.phase_bounds: list[float] = []
        self._step_losses: dict[str, torch.Tensor] = {}  # accumulating: the step's losses so far
        # The last step's losses ("loss", and "mlm_loss"/"nsp_loss" with NSP), this rank's, detached and on the
        # device: read back (and averaged over ranks) by the run log at its rows only, never per step.
        self.step_losses: dict[str, torch.Tensor] = {}
        self.grad_norm: Optional[torch.Tensor] = None  # the norm clipping returned this step (the finite guard's)

    # -- schedule ---------------------------------------------------------------------------
    def elapsed(self) -> float:
        """Wall seconds of this run, earlier sessions included."""
        return self.elapsed_before + time.perf_counter() - self._session_start

    def paused_seconds(self) -> float:
        return self.paused_before + self._paused

    def training_seconds(self) -> float:
        """Wall seconds spent training: what a budget counts (evaluation and checkpoint writes excluded)."""
        return self.elapsed() - self.paused_seconds()

    @contextlib.contextmanager
    def clock_paused(self) -> Iterator[None]:
        """Time inside does not count against the budget (held-out evaluation, checkpoint writes)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._paused += time.perf_counter() - t0

    def progress(self, step: int) -> float:
        """Share of the schedule done: training seconds over the budget when one is set, else steps."""
        if self.budget_seconds:
            return min(1.0, self.training_seconds() / self.budget_seconds)
        return min(1.0, step / max(1, self.max_steps))

    def warmup_share(self) -> float:
        if self.optim_cfg.warmup_steps is not None and not self.budget_seconds:
            return min(1.0, self.optim_cfg.warmup_steps / max(1, self.max_steps))
        return self.optim_cfg.warmup_fraction  # a budget's warm-up is a share of its seconds (config checks)

    def configure_optimizers(self):
        opt = make_adamw(self.model, self.optim_cfg, self.device.type, fused=self.fused_optimizer)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: linear_warmup_decay(self.progress(step),
                                                                                  self.warmup_share()))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # -- steps ------------------------------------------------------------------------------
    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int):
        # the masked LM's labels come in prediction slots; logits=False: the loss from the head fused with it
        # (model.fused_head), no logits to keep
        out = (self.step.forward or self.model)(
            input_ids=batch["input_ids"], token_type_ids=batch.get("token_type_ids"),
            attention_mask=batch.get("attention_mask"), lm_labels=batch["lm_labels"], nsp_labels=batch.get("nsp_labels"),
            lm_positions=batch.get("lm_positions"), static=self.step.static, logits=False)
        # Nothing here reads the device or talks to the other ranks: the losses stay on the device for the run
        # log's rows, and the weights below are host integers the loader counted (training.batches).
        world, accum = self.trainer.world_size, self.trainer.accumulate_grad_batches
        loss, lm_loss = out.loss, out.lm_loss
        if (world > 1 or accum > 1) and lm_loss is not None:
            # DDP averages the ranks' gradients and Lightning divides each micro-batch's loss by `accum`, but
            # each LM loss is a mean over its own micro-batch's loss tokens, and those hold different numbers
            # of them. Weighted by its share of the step's global count, the sum is the mean over the whole
            # global batch: one process's loss and gradient without accumulation. (NSP needs no weight:
            # every micro-batch holds the same number of sequences.)
            lm_loss = lm_loss * (batch[LOSS_TOKENS] * world * accum / max(1, batch[STEP_LOSS_TOKENS]))
            loss = lm_loss if out.nsp_loss is None else lm_loss + out.nsp_loss
        losses = {"loss": loss.detach()}
        if out.nsp_loss is not None:
            losses.update({"mlm_loss": lm_loss.detach(), "nsp_loss": out.nsp_loss.detach()})
        if accum > 1:  # the step's loss: the micro-batches' weighted losses averaged, kept at its last
            micro = batch_idx % accum
            self._step_losses = {k: v / accum + (self._step_losses[k] if micro else 0) for k, v in losses.items()}
            if micro < accum - 1:
                return loss
            losses = self._step_losses
        self.step_losses = losses
        return loss

    def on_train_batch_start(self, batch, batch_idx) -> None:
        micro = batch_idx % self.trainer.accumulate_grad_batches
        # Dropout draws keyed by (seed, rank, micro-step): each rank draws its own masks (one generator on every
        # rank would drop the same units on each rank's rows), and a resumed run draws what the uninterrupted
        # one did with no generator state carried over (on any device count, rank r's draws are rank r's).
        torch.manual_seed(dropout_seed(self.dropout_seed, self.global_rank,
                                       self.trainer.global_step * self.trainer.accumulate_grad_batches + micro))
        if micro == 0:  # the first micro-batch of an optimiser step
            # the lr this step runs at: the scheduler set it when the previous step ended, from the clock then
            lr = self.trainer.optimizers[0].param_groups[0]["lr"]
            self.lr_trace.append((self.trainer.global_step + 1, round(self.training_seconds(), 4), lr))

    def on_before_optimizer_step(self, optimizer) -> None:
        if self.clips_gradients:
            self.grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.optim_cfg.grad_clip)

    @property
    def clips_gradients(self) -> bool:
        """Whether this module clips (and so computes the gradient norm the finite guard notes)."""
        return bool(self.fused_optimizer and self.optim_cfg.grad_clip)

    def on_train_start(self) -> None:
        self._session_start = time.perf_counter()  # wall time counts training, not set-up and imports
        self.step.timer.started(self.training_seconds())

    def attach_phases(self, batches, bounds_seconds: list[float]) -> None:
        """Phases on the clock: when training seconds pass bounds_seconds[k], phase k + 1 begins."""
        self.phased_batches, self.phase_bounds = batches, list(bounds_seconds)

    def _maybe_begin_phase(self) -> None:
        b = self.phased_batches
        if b is None or not self.phase_bounds:
            return
        begun = sum(s is not None for s in b.starts) - 1  # phases after the first that have begun
        if begun < len(self.phase_bounds) and self.training_seconds() >= self.phase_bounds[begun]:
            b.begin_next()

    def budget_spent(self) -> bool:
        return bool(self.budget_seconds) and self.training_seconds() >= self.budget_seconds

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        self.last_step_end = self.training_seconds()
        self._maybe_begin_phase()
        if (batch_idx + 1) % self.trainer.accumulate_grad_batches:
            return  # a step ends at its last micro-batch
        self.step.timer.step_ended(self.last_step_end)  # after the callbacks: their evaluations are paused out
        spent = self.budget_spent()
        if self.trainer.world_size > 1:
            # Ranks' clocks differ by a little: all stop at the same step, or none. Agreed at the run log's
            # rows only (a collective every step would make every step wait for the slowest rank's host): a
            # budget ends at the first row at or after it is spent, the steps since at lr 0 (the schedule's
            # end), so they change no weight.
            step = self.trainer.global_step
            spent = step % self.sync_every == 0 and self.trainer.strategy.reduce_boolean_decision(spent, all=False)
        if spent:
            self.trainer.should_stop = True

    def maybe_evaluate(self, step: int) -> bool:
        """Held-out evaluation every `eval_every` optimiser steps (called by the run log before it writes)."""
        if self.eval_fn is not None and self.eval_every and step % self.eval_every == 0:
            with self.clock_paused():
                self.last_eval = self.eval_fn(self.model)
            return True
        return False

    def schedule_summary(self) -> dict[str, Any]:
        """What the summary records about the schedule: its kind, where warm-up ended, the last step's lr."""
        trace = self.lr_trace
        peak = max((lr for _, _, lr in trace), default=0.0)
        return {"kind": "wall-clock" if self.budget_seconds else "steps", "budget_seconds": self.budget_seconds,
                "training_seconds": round(self.last_step_end, 4), "warmup_share": self.warmup_share(),
                "peak_lr": peak, "peak_step": next((s for s, _, lr in trace if lr == peak), None),
                "last_step": trace[-1][0] if trace else 0, "last_step_lr": trace[-1][2] if trace else None,
                "lr_trace": "lr_schedule.csv",
                "phase_starts": None if self.phased_batches is None else list(self.phased_batches.starts)}

    # -- exact resume -------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["bertbench"] = {
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "elapsed": self.elapsed(), "paused": self.paused_seconds(), "lr_trace": list(self.lr_trace),
            "phase_starts": None if self.phased_batches is None else list(self.phased_batches.starts)}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if not self.model.has_nsp:
            drop_frozen_optimizer_state(checkpoint, self.model)
        pad_vocab_optimizer_state(checkpoint, self.model)  # after the renumbering: indices of the frozen model's
        state = checkpoint.get("bertbench") or {}
        if "torch_rng" in state:
            torch.set_rng_state(state["torch_rng"])
        if state.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.elapsed_before, self.paused_before = float(state.get("elapsed", 0.0)), float(state.get("paused", 0.0))
        self.lr_trace = [tuple(t) for t in state.get("lr_trace", [])]
        if state.get("phase_starts") is not None and self.phased_batches is not None:
            self.phased_batches.starts = list(state["phase_starts"])  # the switches made before the stop
        self._session_start, self._paused = time.perf_counter(), 0.0


def dropout_seed(seed: int, rank: int, micro_step: int) -> int:
    """The torch seed of one rank's micro-step: a function of (seed, rank, step) alone."""
    import numpy as np

    return int(np.random.SeedSequence([seed, 2, rank, micro_step]).generate_state(1)[0])


def freeze_unread(model: BertForPreTraining) -> BertForPreTraining:
    """Freeze what no loss of the model's objective reads: without the NSP head, the pooler (its output feeds
    NSP only). DDP registers only parameters that require a gradient, so a frozen pooler is one it does not wait
    for (a trainable one fails every step with "parameters that were not used in producing the loss"; the search
    for unused ones, find_unused_parameters, would cost a pass over the graph per step). The optimiser leaves it
    out too, as it did in effect before (it never had a gradient). It stays built and in every checkpoint at its
    initial weights: fine-tuning reads it (a fresh model, trainable), and HF export and loading are unchanged."""
    if not model.has_nsp:
        model.bert.pooler.requires_grad_(False)
    return model


def drop_frozen_optimizer_state(checkpoint: dict[str, Any], model: BertForPreTraining) -> None:
    """A last.ckpt of a run without NSP written before the pooler was frozen numbers the pooler among the
    optimiser's parameters (with no state: it never had a gradient); renumber its groups as the frozen
    model's optimiser numbers them, so such a run still resumes."""
    from bertbench.training.optim import param_group_names

    with torch.device("meta"):
        names = [n for group in param_group_names(BertForPreTraining(model.cfg, nsp=False)) for n in group]
    _drop_optimizer_entries(checkpoint, names, {i for i, n in enumerate(names) if n.startswith("bert.pooler.")})


def _drop_optimizer_entries(checkpoint: dict[str, Any], names: list[str], dropped: set[int]) -> None:
    """Remove the parameters numbered `dropped` from each optimiser state whose layout is `names`."""
    renumber = {old: new for new, old in enumerate(i for i in range(len(names)) if i not in dropped)}
    for opt in checkpoint.get("optimizer_states") or []:
        groups = opt.get("param_groups") or []
        if sum(len(g["params"]) for g in groups) != len(names):
            continue  # not that layout: leave it to Lightning
        opt["state"] = {renumber[i]: v for i, v in opt.get("state", {}).items() if i not in dropped}
        for g in groups:
            g["params"] = [renumber[i] for i in g["params"] if i not in dropped]


def pad_vocab_optimizer_state(checkpoint: dict[str, Any], model: BertForPreTraining) -> None:
    """A last.ckpt written before the vocabulary was padded inside the model (bert.VOCAB_MULTIPLE) holds AdamW
    moments for the real vocabulary's rows only; the weights are padded on load (a state-dict hook), and so
    are these, with zeros: the padding rows' moments, as they would be (no gradient ever reaches them)."""
    import torch.nn.functional as F

    from bertbench.training.optim import param_group_names

    names = [n for group in param_group_names(model) for n in group]
    shapes = {n: p.shape for n, p in model.named_parameters()}
    for opt in checkpoint.get("optimizer_states") or []:
        for i, state in (opt.get("state") or {}).items():
            want = shapes[names[i]] if isinstance(i, int) and i < len(names) else None
            for key, t in state.items():
                if want is not None and torch.is_tensor(t) and t.dim() and t.shape[1:] == want[1:] and t.size(0) < want[0]:
                    state[key] = F.pad(t, (0, 0) * (t.dim() - 1) + (0, want[0] - t.size(0)))


def perplexity(loss: float) -> float:
    return math.exp(min(loss, 50.0))
