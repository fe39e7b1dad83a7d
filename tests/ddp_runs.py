"""What the multi-process pre-training tests compare between runs (tests/test_pretrain_ddp.py, one machine, and
tests/test_pretrain_multinode.py, two nodes): metrics rows without their timings, and the checkpoint's weights."""
from __future__ import annotations

import csv

import torch

TIMING = {"tokens_per_s", "elapsed_s"}  # the columns that differ between any two runs


def rows(out) -> list[dict[str, str]]:
    with open(out / "metrics.csv", newline="") as fh:
        return [{k: v for k, v in r.items() if k not in TIMING} for r in csv.DictReader(fh)]


def weights(out) -> dict[str, torch.Tensor]:
    return torch.load(out / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]


def max_rel(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """The largest relative difference (in norm) between two state dicts' tensors."""
    return max(((w.float() - b[k].float()).norm() / w.float().norm().clamp_min(1e-12)).item() for k, w in a.items())
