"""The optimiser both pre-training and fine-tuning use: AdamW with decay on weight matrices only.

No Lightning import here, so the plain fine-tuning loop and the benchmarks can use it cheaply.
"""
from __future__ import annotations

from typing import Any

import torch

from bertbench.config import OptimConfig


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on matrices only: not on LayerNorm weights, biases (as the original BERT)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue  # frozen (feature-based) encoders are not optimised
        (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_adamw(model: torch.nn.Module, cfg: OptimConfig, device_type: str) -> torch.optim.Optimizer:
    # fused AdamW on CUDA; foreach (multi-tensor) elsewhere — both avoid a Python loop per parameter.
    extra = {"fused": True} if device_type == "cuda" else {"foreach": True}
    return torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, **extra)
