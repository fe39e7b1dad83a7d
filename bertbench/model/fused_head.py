"""The vocabulary projection fused with its cross-entropy: loss (and argmax) without the logits of the batch.

`linear_cross_entropy(h, weight, bias, targets, vocab_size)` is `F.cross_entropy(F.linear(h, weight, bias)
[:, :vocab_size].float(), targets, ignore_index=IGNORE_INDEX)` computed a chunk of rows at a time (the idea of
Liger Kernel's fused linear cross-entropy, with torch's own CPU kernels). For a small model the vocabulary head
is most of a pre-training step's non-matrix work: the unfused path copies the (N, V) logits bf16 → fp32, runs
log-softmax forward and backward over them, zero-fills a tensor of their size for the NLL's backward and casts
the gradient back (bench pretrain's profile; docs/performance.md). Here each chunk's logits live only until its
gradients are written:

- the logits in the step's precision (bf16 under autocast, with the bias, as autocast's linear computes them),
  one fp32 copy, log-softmax in fp32 (the loss at the targets read from it), then in place softmax − one-hot
  scaled by each row's weight: the gradient of the logits, cast once to the step's precision;
- the gradients of the hidden states, the decoder weight and the bias are written by the forward (the loss is
  a scalar: the backward only scales them by its incoming gradient). The weight's gradient is accumulated in
  fp32 over the chunks, its padding rows zero (they are never scored: the padded vocabulary's -inf columns);
- nothing of the logits' size is zero-filled, and without a gradient (evaluation) only loss and argmax run.

The padding columns of the padded vocabulary (bert.VOCAB_MULTIPLE) are not computed at all: a softmax over the
real vocabulary is the same as one with -inf padding columns. Rows whose target is IGNORE_INDEX weigh 0 (no host
sync: the static step's unused slots and a causal LM's padding ride along). tests/test_fused_head.py checks
loss, argmax and every gradient against the unfused path, fp32 and bf16, MLM and causal LM.
"""
from __future__ import annotations

from typing import Optional

import torch

from bertbench.data import IGNORE_INDEX

# Logits per chunk (rows × vocabulary): BERT-Mini's ~600 masked rows of a 32 × 128 batch are one chunk, a causal
# LM's 4,096 rows four; chunk buffers stay ~0.5 GB at most (fp32 + bf16 copies) instead of 2 GB at 4,096 rows.
CHUNK_LOGITS = 2**25


def compute_dtype(h: torch.Tensor) -> torch.dtype:
    """The dtype autocast would run the projection in here: its lower precision when enabled, else the input's."""
    device = h.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return h.dtype


def pays_off(h: torch.Tensor) -> bool:
    """Whether a step takes the fused head: not an fp32 step on a CPU. There, on the AVX512-BF16 EPYC this was
    measured on, the fused head came out slower than the unfused one (CPU thread time of the head alone, 608
    rows: 465 against 434 ms; bench_ab's fp32 sides: 0.82x the speed-up over transformers), where in bf16 it
    was not (bench_ab: 1.19x). A GPU (not measured here) takes it: its point there is the logits' memory."""
    return pays_off_on(h.device.type, compute_dtype(h))


def pays_off_on(device_type: str, dtype: torch.dtype) -> bool:
    """pays_off for a step on `device_type` computing its products in `dtype` (what the benchmarks count)."""
    return device_type != "cpu" or dtype != torch.float32


def chunk_rows(vocab_size: int, chunk_logits: int = CHUNK_LOGITS) -> int:
    return max(1, chunk_logits // max(1, vocab_size))


class _LinearCrossEntropy(torch.autograd.Function):
    """Loss and gradients in one pass over the chunks (see the module's docstring); backward scales them."""

    @staticmethod
    def forward(ctx, h, weight, bias, targets, vocab_size: int, dtype: torch.dtype, rows: int, want_argmax: bool):
        with torch.autocast(h.device.type, enabled=False):
            x_all, w, b = h.to(dtype), weight[:vocab_size].to(dtype), bias[:vocab_size].to(dtype)  # each cast once
            valid = targets != IGNORE_INDEX
            inv_count = 1.0 / valid.sum()  # a tensor: no host sync (inf without a labelled row: the loss is nan)
            safe = targets.masked_fill(~valid, 0)  # a readable column at ignored rows, weighted 0 below
            grads = ctx.needs_input_grad[0] or ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
            grad_h = torch.empty_like(h) if grads else None
            grad_w = torch.empty_like(weight) if grads else None
            grad_b = torch.zeros(vocab_size, dtype=torch.float32, device=h.device) if grads else None
            losses = torch.empty(h.size(0), dtype=torch.float32, device=h.device)
            argmax = torch.empty(h.size(0), dtype=torch.long, device=h.device) if want_argmax else None
            for start in range(0, h.size(0), rows):
                sl = slice(start, start + rows)
                x, t = x_all[sl], safe[sl]
                logits = torch.addmm(b, x, w.t())  # (r, V) in the step's precision
                if argmax is not None:
                    argmax[sl] = logits.argmax(-1)
                logp = torch.log_softmax(logits, -1, dtype=torch.float32)  # (r, V) fp32 from the rounded logits
                losses[sl] = -logp.gather(1, t[:, None]).squeeze(1)
                if not grads:
                    continue
                # softmax − one-hot in the step's precision, as the unfused backward casts it; the row weights
                # (1/labelled rows, 0 at ignored rows) are applied to the (r, H) operands and outputs, not to it
                dl = logp.exp_().to(dtype)  # (exp into a bf16 out= runs in fp32 and copies: slower, measured)
                del logp
                keep = valid[sl].to(dtype)[:, None]  # (r, 1): 0/1, exact in any dtype
                dl.view(-1).index_add_(0, torch.arange(t.numel(), device=t.device) * dl.size(1) + t,
                                       keep.squeeze(1).neg())
                grad_b += (keep.t() @ dl).squeeze(0)
                grad_h[sl] = (dl @ w) * (keep * inv_count)
                part = dl.t() @ (x * keep)  # (V, H)
                if start == 0:
                    torch.mul(part, inv_count, out=grad_w[:vocab_size])
                else:
                    grad_w[:vocab_size].addcmul_(part, inv_count)
            # the mean over labelled rows (ignored rows' numbers are not read); 0/0 = nan without one, as F.cross_entropy
            loss = losses.masked_fill(~valid, 0.0).sum() * inv_count if h.size(0) else losses.sum() / 0.0
        if grads:
            grad_w[vocab_size:].zero_()  # the padding rows: never scored, no gradient
            grad_b = torch.cat([grad_b * inv_count, grad_b.new_zeros(bias.numel() - vocab_size)]).to(bias.dtype)
        ctx.save_for_backward(grad_h, grad_w, grad_b)
        if argmax is not None:
            ctx.mark_non_differentiable(argmax)
        return loss, argmax

    @staticmethod
    def backward(ctx, grad_loss, _grad_argmax):
        # scaled by the incoming gradient on the device, always: reading it back to skip the usual factor 1 would be
        # a host sync on a GPU, and the CPU dry run of the GPU check counts syncs on the CPU's path as the GPU's
        grads = tuple(g * grad_loss.to(g.dtype) for g in ctx.saved_tensors)
        return (*grads, None, None, None, None, None)


def linear_cross_entropy(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, targets: torch.Tensor,
                         vocab_size: int, want_argmax: bool = False,
                         chunk_logits: int = CHUNK_LOGITS) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """(mean cross-entropy over the rows whose target is not IGNORE_INDEX (fp32 scalar), argmax per row or None).

    h: (..., H) final hidden states; weight: (V_padded, H) decoder (the word embeddings), bias: (V_padded,);
    targets: h's leading shape; vocab_size: the real vocabulary (columns beyond it are never scored)."""
    h2, t = h.reshape(-1, h.size(-1)), targets.reshape(-1)
    loss, argmax = _LinearCrossEntropy.apply(h2, weight, bias, t, vocab_size, compute_dtype(h), chunk_rows(vocab_size, chunk_logits),
                                             want_argmax)
    return loss, None if argmax is None else argmax.view(targets.shape)
