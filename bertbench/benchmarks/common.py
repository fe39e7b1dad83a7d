"""What every benchmark shares: sides timed in alternating rounds, medians of ratios, the matmul peak,
the machine description and the allocator check.

A *side* is one way of running a training step (bertbench or transformers, at one precision). Each
round runs every side once on the same batch, in an order that rotates from round to round, so a noisy
neighbour slows all sides alike; ratios are taken within a round, then their median is reported.
"""
from __future__ import annotations

import glob
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from bertbench.errors import BertbenchError

TCMALLOC_GLOB = "/usr/lib/*/libtcmalloc_minimal.so.4"
TCMALLOC_DEFAULT = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
PRECISION_LABEL = {"32-true": "fp32", "bf16-mixed": "bf16"}


def parse_precision(precision: str, device_type: str = "cpu") -> str:
    """auto | 32 | bf16-mixed (and the aliases fp32, bf16) → '32-true' or 'bf16-mixed' on this device."""
    from bertbench.runtime.provenance import resolve_precision

    resolved = resolve_precision(precision, device_type)
    if resolved not in PRECISION_LABEL:
        raise BertbenchError(f"--precision {precision!r}: expected auto, 32 or bf16-mixed")
    return resolved


# ----------------------------------------------------------------------------------------------
# Machine facts.


from bertbench.runtime.allocator import allocator_name, tcmalloc_preloaded  # noqa: E402  (re-exported)


def tcmalloc_library() -> Optional[str]:
    return min(glob.glob(TCMALLOC_GLOB), default=None)


def allocator_hint() -> Optional[str]:
    """How to enable tcmalloc, or None when it is preloaded or glibc malloc is tuned (allocator.py)."""
    if allocator_name() != "glibc":
        return None
    found = tcmalloc_library()
    lib = found or TCMALLOC_DEFAULT
    install = "" if found else "apt-get install -y libtcmalloc-minimal4, then "
    return (
        "tcmalloc is not preloaded: glibc malloc maps and frees the large activation buffers every step "
        f"(tcmalloc made steps 1.3-1.7x faster here). {install}run with LD_PRELOAD={lib} bertbench …"
    )


def set_threads(threads: Optional[int]) -> int:
    import torch

    if threads is not None:
        if threads < 1:
            raise BertbenchError(f"--threads {threads}: expected at least 1")
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def machine() -> dict[str, Any]:
    import torch

    from bertbench.runtime.provenance import code_version, hardware, library_versions

    versions = library_versions()
    return {
        "hardware": hardware(),
        "torch": torch.__version__,
        "transformers": versions.get("transformers"),
        "python": versions.get("python"),
        "threads": torch.get_num_threads(),
        "tcmalloc": tcmalloc_preloaded(),
        "allocator": allocator_name(),
        "code": code_version(),
    }


def device_type(accelerator: str) -> str:
    """cpu | cuda (gpu) | auto → the torch device type; asking for a GPU where there is none is one line."""
    import torch

    if accelerator not in ("cpu", "cuda", "gpu", "auto"):
        raise BertbenchError(f"--accelerator {accelerator!r}: expected cpu, cuda or auto")
    if accelerator in ("cuda", "gpu") and not torch.cuda.is_available():
        raise BertbenchError(f"--accelerator {accelerator}: no CUDA GPU is available here; use cpu")
    return "cuda" if accelerator != "cpu" and torch.cuda.is_available() else "cpu"


def device_name(device_type: str) -> str:
    import torch

    return torch.cuda.get_device_name(0) if device_type == "cuda" else "cpu"


class PeakMeter:
    """Best GFLOP/s of an n×n×n `torch.matmul` in fp32 and bf16: the roof MFU is measured against.

    Sampled at the start and again after every round, and the best kept: one burst from a neighbour
    would otherwise lower the roof (and raise every MFU) for the whole run.

    A CPU without native bf16 (no AVX512-BF16/AMX: provenance.bf16_native) emulates it at well under 1 GFLOP/s
    (measured on an AVX2-only AMD EPYC: 0.4-0.5 GFLOP/s at n = 256, 512 and 2048 alike), so one 2048³ product
    took 30-100 s and every `run` paid four of them before its first stage. There the bf16 roof is measured on a
    BF16_EMULATED_N³ product: the same rate, in about a second.
    """

    BF16_EMULATED_N = 384

    def __init__(self, n: int = 2048, device_type: str = "cpu"):
        import torch

        from bertbench.runtime.provenance import bf16_native

        self.device_type = device_type
        if device_type == "cuda":
            n = 8192  # a GPU needs a larger product to approach its peak
        gen = torch.Generator().manual_seed(0)
        a, b = torch.randn(n, n, generator=gen).to(device_type), torch.randn(n, n, generator=gen).to(device_type)
        m = n if bf16_native(device_type) else min(n, self.BF16_EMULATED_N)
        self.operands = {"fp32": (a, b), "bf16": (a[:m, :m].bfloat16(), b[:m, :m].bfloat16())}
        self.flops = {name: 2.0 * x.shape[0] ** 3 for name, (x, _) in self.operands.items()}
        self.best = {name: 0.0 for name in self.operands}
        self.sample(reps=3)

    def sample(self, reps: int = 1) -> None:
        import torch

        sync = torch.cuda.synchronize if self.device_type == "cuda" else (lambda: None)
        for name, (a, b) in self.operands.items():
            torch.matmul(a, b)  # warm caches and kernel selection
            sync()
            for _ in range(reps):
                t0 = time.perf_counter()
                torch.matmul(a, b)
                sync()
                self.best[name] = max(self.best[name], self.flops[name] / (time.perf_counter() - t0) / 1e9)

    def result(self) -> dict[str, float]:
        return {name: round(v, 1) for name, v in self.best.items()}


# ----------------------------------------------------------------------------------------------
# Timing.


@dataclass
class Side:
    """One way of running a training step. `step(i)` trains on batch i and returns the loss (a tensor)."""

    name: str
    impl: str  # "bertbench" | "transformers"
    precision: str  # "32-true" | "bf16-mixed"
    step: Callable[[int], Any]
    tokens: Sequence[int]  # tokens counted as work in batch i (padding excluded where there is some)
    extra: dict[str, Any] = field(default_factory=dict)  # reported as they are (padding, optimizer, …)
    seconds: list[float] = field(default_factory=list)  # timed rounds only
    rates: list[float] = field(default_factory=list)  # tokens/s of each timed round
    losses: list[float] = field(default_factory=list)  # every round, warm-up included


def run_rounds(
    sides: list[Side],
    warmup: int,
    steps: int,
    progress: Optional[Callable[[str], None]] = None,
    after_round: Optional[Callable[[], None]] = None,
) -> None:
    """`warmup` untimed rounds, then `steps` timed ones; each round runs every side once on the same batch.

    The order rotates every round (A B C, B C A, …) so no side always runs right after another.
    Losses are read back only after the last round: no host sync inside the timed region.
    `after_round` runs between rounds, outside the timed region (e.g. `PeakMeter.sample`).
    """
    if steps < 1 or warmup < 0:
        raise BertbenchError(f"--steps {steps} / --warmup {warmup}: expected steps ≥ 1 and warmup ≥ 0")
    losses: dict[str, list[Any]] = {s.name: [] for s in sides}
    for r in range(warmup + steps):
        k = r % len(sides)
        for side in sides[k:] + sides[:k]:
            t0 = time.perf_counter()
            loss = side.step(r)
            dt = time.perf_counter() - t0
            losses[side.name].append(loss)
            if r >= warmup:
                side.seconds.append(dt)
                side.rates.append(side.tokens[r] / dt)
        if after_round is not None:
            after_round()
        if progress is not None:
            timed = f"timed {r - warmup + 1}/{steps}" if r >= warmup else f"warm-up {r + 1}/{warmup}"
            progress(f"round {r + 1}/{warmup + steps} ({timed})")
    for side in sides:
        side.losses = [float(x) for x in losses[side.name]]


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def compare(ours: Side, theirs: Side) -> dict[str, Any]:
    """Speed-up of `ours` over `theirs`: per-round ratios of tokens/s (ours / theirs) and their median.

    In a round both sides train on the same examples (or, with length-grouped batches, on as many
    batches of the same pool), so the ratio is one of useful work per second.
    """
    ratios = [o / t for o, t in zip(ours.rates, theirs.rates)]
    return {
        "ours": ours.name,
        "theirs": theirs.name,
        "speedup_median": round(median(ratios), 3),
        "speedup_min": round(min(ratios), 3),
        "speedup_max": round(max(ratios), 3),
    }


def progress_to_stderr(quiet: bool) -> Optional[Callable[[str], None]]:
    return None if quiet else lambda msg: print(msg, file=sys.stderr, flush=True)


def variant_names(only: list[str], known: dict[str, Any]) -> list[str]:
    """An ablation's variants to run: `default` first, then those of `only` (empty: every one of `known`)."""
    names = ["default", *[n for n in (only or known) if n != "default"]]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise BertbenchError(f"unknown variants {unknown}; known: {', '.join(known)}")
    return names


def variant_summary(sides: list[Side]) -> dict[str, Any]:
    """An ablation's result: each variant's medians and its speed against the first side (`default`)."""
    return {s.name: {
        "tokens_per_s": round(median(s.rates), 1),
        "step_ms": round(1000 * median(s.seconds), 1),
        "speed_vs_default": compare(s, sides[0])["speedup_median"],  # > 1: faster than default
        "loss_last": round(s.losses[-1], 4),
    } for s in sides}
