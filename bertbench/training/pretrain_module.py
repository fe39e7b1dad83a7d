"""The pre-training LightningModule: BERT (MLM + NSP, MLM only, or causal LM) with the paper's AdamW.

The model is a plain `BertForPreTraining`; this module only adds the optimiser, the schedule (over steps
or over a wall-clock budget), held-out evaluation and the RNG state that exact resume needs.
"""
from __future__ import annotations

import math
import time
from typing import Any, Optional

import lightning as L
import torch

from bertbench.config import OptimConfig
from bertbench.model import BertForPreTraining
from bertbench.training.optim import make_adamw


def linear_warmup_decay(progress: float, warmup: float) -> float:
    """LR multiplier at `progress` ∈ [0, 1] of the schedule: linear warm-up to 1, then linear decay to 0."""
    if warmup > 0 and progress < warmup:
        return progress / warmup
    return max(0.0, (1.0 - progress) / max(1e-12, 1.0 - warmup))


class PretrainModule(L.LightningModule):
    def __init__(
        self,
        model: BertForPreTraining,
        optim: OptimConfig,
        max_steps: int,
        budget_seconds: Optional[float] = None,
        eval_fn=None,
        eval_every: int = 0,
        fused_optimizer: bool = False,
    ):
        """fused_optimizer: fused AdamW, gradients clipped here (optim.grad_clip) rather than by the Trainer,
        whose precision plugin refuses to clip for any fused optimizer, bf16 included (Lightning issue
        #21435). Without a grad scaler nothing needs unscaling first, so clipping here is the same clip."""
        super().__init__()
        self.fused_optimizer = fused_optimizer
        self.model = model
        self.optim_cfg = optim
        self.max_steps = max_steps
        self.budget_seconds = budget_seconds
        self.eval_fn = eval_fn
        self.eval_every = eval_every
        self.elapsed_before = 0.0  # training seconds of earlier (interrupted) sessions of this run
        self._session_start = time.perf_counter()
        self.last_eval: dict[str, float] = {}

    # -- schedule ---------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self._session_start

    def progress(self, step: int) -> float:
        """Share of the schedule done: by steps, or by wall-clock time when a budget is set."""
        p = step / max(1, self.max_steps)
        if self.budget_seconds:
            p = max(p, self.elapsed() / self.budget_seconds)
        return min(1.0, p)

    def warmup_share(self) -> float:
        if self.optim_cfg.warmup_steps is not None:
            return min(1.0, self.optim_cfg.warmup_steps / max(1, self.max_steps))
        return self.optim_cfg.warmup_fraction

    def configure_optimizers(self):
        opt = make_adamw(self.model, self.optim_cfg, self.device.type, fused=self.fused_optimizer)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda step: linear_warmup_decay(self.progress(step), self.warmup_share())
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # -- steps ------------------------------------------------------------------------------
    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int):
        out = self.model(
            input_ids=batch["input_ids"],
            token_type_ids=batch.get("token_type_ids"),
            attention_mask=batch.get("attention_mask"),
            mlm_labels=batch["mlm_labels"],
            nsp_labels=batch.get("nsp_labels"),
        )
        # Logged as tensors: no host sync per step; the CSV logger reads them every log_every steps.
        self.log("train/loss", out.loss, prog_bar=True, on_step=True, on_epoch=False)
        if out.nsp_loss is not None:
            self.log("train/mlm_loss", out.mlm_loss, on_step=True, on_epoch=False)
            self.log("train/nsp_loss", out.nsp_loss, on_step=True, on_epoch=False)
        return out.loss

    def on_before_optimizer_step(self, optimizer) -> None:
        if self.fused_optimizer and self.optim_cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.optim_cfg.grad_clip)

    def on_train_start(self) -> None:
        self._session_start = time.perf_counter()  # wall time counts training, not set-up and imports

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        if self.budget_seconds and self.elapsed() >= self.budget_seconds:
            self.trainer.should_stop = True

    def maybe_evaluate(self, step: int) -> bool:
        """Held-out evaluation every `eval_every` optimiser steps (called by the run log before it writes)."""
        if self.eval_fn is not None and self.eval_every and step % self.eval_every == 0:
            self.last_eval = self.eval_fn(self.model)
            return True
        return False

    # -- exact resume -------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["bertbench"] = {
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "elapsed": self.elapsed(),
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get("bertbench") or {}
        if "torch_rng" in state:
            torch.set_rng_state(state["torch_rng"])
        if state.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.elapsed_before = float(state.get("elapsed", 0.0))
        self._session_start = time.perf_counter()


def perplexity(loss: float) -> float:
    return math.exp(min(loss, 50.0))
