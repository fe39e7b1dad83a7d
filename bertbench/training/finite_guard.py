"""Stop at the first non-finite loss or gradient norm (and checkpoints refuse non-finite weights:
`model.checkpoint.check_finite_weights`).

The check stays on the device: `FirstBadStep` keeps the first step whose loss or gradient norm was NaN/inf
in a tensor and is read back where a sync happens anyway — before a metrics row, before a checkpoint, at an
epoch's end — so the error names the exact first step, and nothing written after it (a row, a checkpoint, a
record) can hold a NaN. Checkpoints before that step stay as they were.

No host wait per step: the step number goes in as a Python scalar (`masked_fill_` passes it to the kernel as
an argument; a tensor made from it, `torch.as_tensor(step, device=…)`, is a host-to-device copy and a stream
sync on CUDA), and the gradient norm is the one clipping already computed (`note`), not a second pass.
"""
from __future__ import annotations

from typing import Optional

import torch

from bertbench.errors import BertbenchError


class NonFiniteError(BertbenchError):
    exit_code = 3  # not bad input: the run diverged (lower the lr, add warm-up, check the data)


class FirstBadStep:
    def __init__(self) -> None:
        self._first: Optional[torch.Tensor] = None  # int64 scalar on the device; 0: none so far
        self._what: Optional[torch.Tensor] = None  # 1: loss, 2: gradient norm

    def note(self, value: torch.Tensor, step: int, what: int) -> None:
        """Record `step` if `value` is not finite and no earlier step was (device ops only)."""
        value = value.detach()
        if self._first is None:
            self._first = torch.zeros((), dtype=torch.long, device=value.device)
            self._what = torch.zeros((), dtype=torch.long, device=value.device)
        new = (~torch.isfinite(value).all()) & (self._first == 0)
        self._first.masked_fill_(new, step)
        self._what.masked_fill_(new, what)

    def note_loss(self, loss: torch.Tensor, step: int) -> None:
        self.note(loss, step, 1)

    def note_grads(self, params, step: int) -> None:
        """The gradients' total norm, computed here: only where no clipping computed it (else `note` that one)."""
        grads = [p.grad for p in params if p.grad is not None]
        if grads:
            self.note(torch.nn.utils.get_total_norm(grads), step, 2)

    def check(self, where: str, kept: str = "") -> None:
        """Raise NonFiniteError naming the first bad step, if there was one (one host sync)."""
        if self._first is None:
            return
        step = int(self._first)
        if step:
            what = "loss" if int(self._what) == 1 else "gradient norm"
            raise NonFiniteError(f"{where}: the training {what} became NaN/inf at step {step}; stopped{kept}. "
                                 "Lower the learning rate or add warm-up")
