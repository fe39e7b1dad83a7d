"""The dynamic step's machinery (bertbench/model/bert.py): packing a padded batch's real tokens, and the
attention mask SDPA takes. Each looks at the batch's values on the host (a sync) unless told not to, which is
why the static step packs nothing and always passes the mask.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

def attention_mask_for_sdpa(attention_mask: Optional[torch.Tensor], T: int, causal: bool, device: torch.device,
                            static: bool = False) -> tuple[Optional[torch.Tensor], bool]:
    """Turn a (B, T) 1/0 padding mask into what SDPA takes: a bool mask (True = may attend) or None.

    Without padding we pass no mask at all (SDPA then picks its fastest kernel); SDPA refuses
    `is_causal` together with a mask, so causal + padding becomes one combined bool mask. `static`: never
    look (finding "no padding" reads a value back to the host); a given mask is always passed.
    """
    if attention_mask is None or (not static and bool(attention_mask.all())):
        return None, causal
    keys = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
    if causal:
        tri = torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)
        keys = keys & tri  # (B, 1, T, T)
    return keys, False


@dataclass
class Bucket:
    """Rows of similar length, attended together on their own (nb, T_b) grid."""

    rows: torch.Tensor  # (nb,) batch rows in this bucket
    T: int  # the grid's length: the furthest real token among these rows, + 1
    src: torch.Tensor  # (n,) packed rows of the bucket's real tokens, in grid order
    dst: torch.Tensor  # (n,) where they go in the flattened (nb·T) grid
    mask: Optional[torch.Tensor]  # attention mask for the grid, as attention_mask_for_sdpa makes it
    is_causal: bool


class Packing:
    """The real tokens of a padded (B, T) batch, so that no work is spent on padding.

    Everything in a layer except attention's QKᵀ and AV acts on each position alone, so it runs on the N
    real tokens packed as (N, H) instead of (B, T, H). On GLUE-like batches (lengths 20–128, padded to the
    longest) that skips ~40% of the FLOPs. For attention the rows are sorted by length into a few buckets,
    and each bucket's q, k, v are scattered onto its own (nb, T_b) grid (zeros at padding, masked as keys):
    the padded QKᵀ, softmax and dropout shrink with T_b². The unpadding idea of FlashAttention's varlen
    kernels and Hugging Face's padding-free path, in plain tensor ops. Outputs at padded positions come back
    as zeros rather than the finite garbage a padded model computes there; nothing reads them (heads and
    losses skip padding). tests/test_packing.py checks outputs and gradients against the padded path and HF.
    """

    MIN_PADDING = 0.1  # below this share of padding the gathers cost more than they save (bench finetune)
    BUCKETS = 4  # attention buckets per batch, each of at least MIN_BUCKET_ROWS rows
    MIN_BUCKET_ROWS = 4

    def __init__(self, attention_mask: torch.Tensor, causal: bool = False):
        self.B, self.T = B, T = attention_mask.shape
        dev = attention_mask.device
        real = attention_mask.bool()
        self.index = real.reshape(-1).nonzero().squeeze(1)  # (N,) flat positions of real tokens
        self.positions = self.index % T  # (N,) position ids of the packed tokens
        n = self.index.numel()
        self.row_of = torch.full((B * T,), -1, dtype=torch.long, device=dev)  # flat position → packed row
        self.row_of[self.index] = torch.arange(n, device=dev)
        extent = (real * torch.arange(1, T + 1, device=dev)).amax(1)  # (B,) last real position + 1
        order = extent.argsort(descending=True)
        groups = max(1, min(self.BUCKETS, B // self.MIN_BUCKET_ROWS))
        self.buckets: list[Bucket] = []
        for rows in order.tensor_split(groups):
            Tb = max(1, int(extent[rows].max()))  # a host sync per bucket, once per forward
            m = attention_mask[rows, :Tb]  # (nb, Tb)
            dst = m.reshape(-1).bool().nonzero().squeeze(1)  # (n_b,)
            src = self.row_of[(rows[:, None] * T + torch.arange(Tb, device=dev)).reshape(-1)[dst]]  # (n_b,)
            mask, is_causal = attention_mask_for_sdpa(m, Tb, causal, dev)
            self.buckets.append(Bucket(rows, Tb, src, dst, mask, is_causal))
        # merge() concatenates the buckets' tokens in bucket order; this puts them back
        self.token_order = self._inverse(torch.cat([b.src for b in self.buckets]))  # (N,)

    @staticmethod
    def _inverse(perm: torch.Tensor) -> torch.Tensor:
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(perm.numel(), device=perm.device)
        return inv

    @staticmethod
    def worth_it(attention_mask: Optional[torch.Tensor]) -> bool:
        if attention_mask is None:
            return False
        return float(attention_mask.float().mean()) <= 1.0 - Packing.MIN_PADDING  # one host sync per forward

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(self.B * self.T, -1).index_select(0, self.index)  # (B, T, C) → (N, C)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        out = x.new_zeros(self.B * self.T, x.size(-1)).index_copy(0, self.index, x)  # (N, C) → (B·T, C)
        return out.view(self.B, self.T, -1)  # (B, T, C)

    def grid(self, x: torch.Tensor, b: Bucket) -> torch.Tensor:
        """(N, C) packed → (nb, T_b, C), zeros at padding."""
        nb, C = b.rows.numel(), x.size(-1)
        picked = x.index_select(0, b.src)  # (n_b, C)
        if b.dst.numel() == nb * b.T:  # no padding in this bucket
            return picked.view(nb, b.T, C)
        return x.new_zeros(nb * b.T, C).index_copy(0, b.dst, picked).view(nb, b.T, C)

    def merge(self, grids: list[torch.Tensor]) -> torch.Tensor:
        """Each bucket's (nb, T_b, C) → the packed (N, C), real tokens only."""
        parts = [g.reshape(-1, g.size(-1)).index_select(0, b.dst) for g, b in zip(grids, self.buckets)]
        return torch.cat(parts).index_select(0, self.token_order)

    def rows_of(self, flat_positions: torch.Tensor) -> torch.Tensor:
        """Where flat padded positions (b·T + t, all real tokens) sit among the N packed rows."""
        return self.row_of[flat_positions]
