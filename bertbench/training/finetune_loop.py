"""The fine-tuning loop shared by every task type: AdamW, 10% warm-up then linear decay, dropout 0.1,
batches padded to the longest sequence in the batch (not to max length), evaluation each epoch.

Plain PyTorch on purpose: a fine-tuning step of a small model is milliseconds, and the loop is
short enough to read in one screen; precision follows the same `auto` rule as pre-training.
"""
from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import torch

from bertbench.data import IGNORE_INDEX
from bertbench.training.optim import adamw

MODEL_KEYS = ("input_ids", "token_type_ids", "attention_mask", "labels", "start_positions", "end_positions")
PAD_VALUE = {"input_ids": 0, "token_type_ids": 0, "attention_mask": 0, "labels": IGNORE_INDEX}


def _round_up(n: int, multiple: int = 8) -> int:
    return ((n + multiple - 1) // multiple) * multiple


def pad_collate(features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Pad sequence fields to the longest in the batch (rounded up to 8 for tensor-core friendly shapes); a
    multiple-choice feature holds a list of C sequences per field and becomes (B, C, T)."""
    out: dict[str, torch.Tensor] = {}
    first = features[0]
    keys = [k for k in MODEL_KEYS if k in first]
    if "attention_mask" not in first:
        keys.append("attention_mask")
    nested = isinstance(first["input_ids"][0], list)
    T = _round_up(max(max(map(len, f["input_ids"])) if nested else len(f["input_ids"]) for f in features))
    for key in keys:
        sample = first.get(key)
        if key != "attention_mask" and not isinstance(sample, list):  # a scalar per example
            dtype = torch.float32 if isinstance(sample, float) else torch.long
            out[key] = torch.tensor([f[key] for f in features], dtype=dtype)
            continue
        pad = PAD_VALUE.get(key, 0)

        def row(seq):
            return list(seq) + [pad] * (T - len(seq))

        if key == "attention_mask" and key not in first:
            seqs = [[[1] * len(s) for s in f["input_ids"]] if nested else [1] * len(f["input_ids"]) for f in features]
        else:
            seqs = [f[key] for f in features]
        data = [[row(s) for s in item] for item in seqs] if nested else [row(s) for s in seqs]
        out[key] = torch.tensor(data, dtype=torch.long)
    return out


@dataclass
class FinetuneHParams:
    lr: float = 2e-5
    epochs: float = 3.0
    batch_size: int = 32
    weight_decay: float = 0.01
    warmup_fraction: float = 0.1
    max_steps: Optional[int] = None  # cap for CPU budgets (recorded in the result)
    grad_clip: float = 1.0
    # length-grouped batches: the same epoch contents with 2.2x fewer padded tokens on GLUE-5 here (SST-2
    # 16 tokens on average, padded to its batch's longest); every variant gets the same batches
    group_by_length: bool = True
    eval_batch_size: int = 64
    adam_eps: float = 1e-8  # torch's default, as HF's Trainer; pre-training keeps BERT's 1e-6 (OptimConfig)


def make_optimizer(model, hp: FinetuneHParams, device_type: str, fused: bool = True):
    """Fine-tuning's AdamW (also what `bench finetune` times, so both measure the same optimiser)."""
    return adamw(model, device_type, lr=hp.lr, weight_decay=hp.weight_decay, eps=hp.adam_eps, fused=fused)


@dataclass
class LoopResult:
    eval_outputs: Any  # the task's raw outputs on the eval set after training (numpy)
    history: list[dict[str, Any]] = field(default_factory=list)  # per-epoch metrics
    steps: int = 0
    train_seconds: float = 0.0
    final_train_loss: Optional[float] = None


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def epoch_batches(n: int, batch_size: int, rng: np.random.Generator, lengths: Optional[Sequence[int]] = None) -> list[list[int]]:
    """An epoch's batches: a fresh random permutation of the n examples, cut in order; with `lengths`, sorted
    by length within chunks of 50 batches first, then the batches shuffled (HF's group_by_length)."""
    order = rng.permutation(n)
    if lengths is not None:
        chunk = 50 * batch_size
        order = np.concatenate([sorted(order[i:i + chunk], key=lambda j: -lengths[j]) for i in range(0, n, chunk)])
    batches = [order[i:i + batch_size].tolist() for i in range(0, n, batch_size)]
    if lengths is not None:
        rng.shuffle(batches)
    return batches


@torch.no_grad()
def predict(model, features: Sequence[dict], batch_size: int, device: torch.device, bf16: bool) -> np.ndarray:
    """Raw logits for every feature, in order (padded positions included for per-token outputs)."""
    model.eval()
    # Sort by length so each batch pads little; restore the order at the end.
    order = sorted(range(len(features)), key=lambda i: _length(features[i]))
    chunks: dict[int, np.ndarray] = {}
    for i in range(0, len(order), batch_size):
        idx = order[i:i + batch_size]
        batch = {k: v.to(device) for k, v in pad_collate([features[j] for j in idx]).items() if k in ("input_ids", "token_type_ids", "attention_mask")}
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits, _ = model(batch)
        chunks.update(zip(idx, logits.float().cpu().numpy()))
    return [chunks[j] for j in range(len(features))]  # a list: rows may differ in length (per-token outputs)


def _length(feature: dict) -> int:
    ids = feature["input_ids"]
    return sum(len(s) for s in ids) if ids and isinstance(ids[0], list) else len(ids)


def _schedule(opt, hp: FinetuneHParams, n: int) -> tuple[Any, int]:
    """(the lr schedule, its total steps): `epochs` passes over `n` examples (capped at max_steps), linear warm-up
    for warmup_fraction of them, then linear decay to 0."""
    total = math.ceil(math.ceil(n / hp.batch_size) * hp.epochs)
    total = max(1, total if hp.max_steps is None else min(total, hp.max_steps))
    warmup = int(hp.warmup_fraction * total)
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / max(1, warmup) if s < warmup
                                             else max(0.0, (total - s) / max(1, total - warmup))), total


def train(model, train_features: Sequence[dict], eval_features: Sequence[dict], hp: FinetuneHParams, seed: int,
          device: torch.device, bf16: bool, progress: Optional[Callable[[str], None]] = None,
          on_epoch: Optional[Callable[[dict[str, Any], Any], None]] = None) -> LoopResult:
    """Fine-tune `model` (a TaskModel) and return its eval-set outputs after the last epoch. `progress`
    gets a line (step/total, time left) every `bertbench.runtime.progress.every_seconds()`; `on_epoch` gets each
    epoch's history entry as the epoch ends, with the model as it is then (epoch selection scores it there), and
    the eval-set outputs when this epoch computed them (the last one does), else None.

    Raises NonFiniteError at the end of the epoch in which the loss or gradient norm first became NaN/inf."""
    from bertbench.errors import BertbenchError
    from bertbench.runtime.progress import Ticker, every_seconds, progress_line
    from bertbench.training.finite_guard import FirstBadStep

    if len(train_features) == 0:  # else `while step < total` below would never advance
        raise BertbenchError("no training examples to fine-tune on")
    seed_everything(seed)
    model.to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(model, hp, device.type)
    n = len(train_features)
    sched, total = _schedule(opt, hp, n)
    rng = np.random.default_rng(seed)
    lengths = [_length(f) for f in train_features] if hp.group_by_length else None
    result = LoopResult(eval_outputs=None)
    step, epoch, t0 = 0, 0, time.perf_counter()
    loss_sum = torch.zeros((), device=device)
    loss_count = 0
    guard = FirstBadStep()
    ticker = Ticker(every_seconds() if progress is not None else None)
    while step < total:
        model.train()
        for idx in epoch_batches(n, hp.batch_size, rng, lengths):
            batch = {k: v.to(device, non_blocking=True) for k, v in pad_collate([train_features[i] for i in idx]).items()}
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                _, loss = model(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            guard.note_loss(loss, step + 1)
            if hp.grad_clip:
                guard.note(torch.nn.utils.clip_grad_norm_(params, hp.grad_clip), step + 1, 2)
            else:
                guard.note_grads(params, step + 1)
            opt.step()
            sched.step()
            loss_sum += loss.detach()
            loss_count += 1
            step += 1
            if ticker.due():
                progress(progress_line(step, total, step / total, time.perf_counter() - t0))
            if step >= total:
                break
        epoch += 1
        guard.check("fine-tuning", "; no record written")
        mean_loss = float(loss_sum) / max(1, loss_count)  # one host sync per epoch
        loss_sum.zero_()
        loss_count = 0
        entry: dict[str, Any] = {"epoch": epoch, "step": step, "train_loss": round(mean_loss, 5)}
        outputs = None
        if step >= total:  # the last epoch
            outputs = result.eval_outputs = predict(model, eval_features, hp.eval_batch_size, device, bf16)
        if on_epoch is not None:
            on_epoch(entry, outputs)
        result.history.append(entry)
        result.final_train_loss = mean_loss
    result.steps, result.train_seconds = step, time.perf_counter() - t0
    return result
