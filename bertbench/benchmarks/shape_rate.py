"""The host's matrix rate at a step's own matrix shapes: the roof a step's executed FLOPs are measured against
(docs/performance.md, "The step against the host's rate at its own shapes"). One step of a side runs under a
dispatch mode that records every matrix product it executes; each distinct product is then timed alone, on fresh
operands of the same shapes and strides, best of a few.
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable

# aten product → its FLOPs from the operand shapes (the bias add of addmm aside: O(mn), not O(mkn))
_FLOPS: dict[str, Callable[[list[tuple[int, ...]]], int]] = {
    "mm": lambda s: 2 * s[0][0] * s[0][1] * s[1][1],
    "addmm": lambda s: 2 * s[1][0] * s[1][1] * s[2][1],
    "bmm": lambda s: 2 * s[0][0] * s[0][1] * s[0][2] * s[1][2],
    "baddbmm": lambda s: 2 * s[1][0] * s[1][1] * s[1][2] * s[2][2],
}


def record_products(step: Callable[[int], Any], i: int) -> Counter:
    """Counter of (op, ((shape, stride), …), dtype) → times one call `step(i)` ran it."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: Counter = Counter()

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if name in _FLOPS:
                tensors = tuple((tuple(a.shape), tuple(a.stride())) for a in args if isinstance(a, torch.Tensor))
                dtype = [a for a in args if isinstance(a, torch.Tensor)][-1].dtype
                seen[(name, tensors, str(dtype).removeprefix("torch."))] += 1
            return func(*args, **(kwargs or {}))

    with Recorder():
        step(i)
    return seen


def time_alone(key: tuple, reps: int = 3) -> float:
    """Best seconds of one product of `key` (record_products' key) on fresh operands of its shapes and strides."""
    import torch

    name, tensors, dtype = key
    gen = torch.Generator().manual_seed(0)
    ops = []
    for shape, stride in tensors:
        size = 1 + sum((n - 1) * s for n, s in zip(shape, stride))  # the storage the strides span
        ops.append(torch.randn(size, generator=gen).to(getattr(torch, dtype)).as_strided(shape, stride))
    fn = getattr(torch, name)
    fn(*ops)  # kernel selection and caches, as the step's own first call
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*ops)
        best = min(best, time.perf_counter() - t0)
    return best


def measure(step: Callable[[int], Any], i: int, step_seconds: float) -> dict[str, Any]:
    """One more call of `step(i)` recorded, its products timed alone. step_seconds: the side's median step."""
    seen = record_products(step, i)
    flops = sum(_FLOPS[k[0]]([s for s, _ in k[1]]) * n for k, n in seen.items())
    alone = sum(time_alone(k) * n for k, n in seen.items())
    return {
        "matmul_gflop_per_step": round(flops / 1e9, 3),
        "matmul_gflops_per_s": round(flops / step_seconds / 1e9, 1),  # the step's executed product FLOPs per second
        "shape_rate_gflops_per_s": round(flops / alone / 1e9, 1) if alone else None,  # the host's, at those shapes
        "share_of_shape_rate": round(alone / step_seconds, 4),
        "distinct_products": len(seen),
    }
