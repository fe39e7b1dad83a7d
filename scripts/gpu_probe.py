"""Host syncs per training step and the attention kernel a step runs, for scripts/gpu_check.sh.

    python scripts/gpu_probe.py [--model-size base] [--batch-size 64] [--seq-len 128] [--steps 3] [--compile]

For our pre-training step (the static step on a GPU: fixed prediction slots, bertbench/model/bert.py) and the
dynamic one, at bf16 autocast with make_adamw and gradient clipping, as `bench pretrain` runs them:
- syncs: torch.cuda.set_sync_debug_mode("warn") warns at every operation that waits for the GPU; the warnings
  of one step (after a warm-up step) are counted. The static step's target is 0.
- attention: the CUDA kernels of one step whose names say which SDPA backend ran (flash, memory-efficient,
  cuDNN, or the math fallback's plain GEMMs and softmax), from torch.profiler.
On CPU (--dry-run of the check) it runs the same code at the given size and says that sync counting needs CUDA.
"""
from __future__ import annotations

import argparse
import json
import time
import warnings

import torch

from bertbench.benchmarks.pretrain import ours_forward, synthetic_batches
from bertbench.config import ModelConfig, OptimConfig
from bertbench.model.bert import BertForPreTraining, compile_step
from bertbench.training.optim import make_adamw

BACKENDS = {"flash": "flash", "efficient": "mem-efficient", "fmha": "mem-efficient", "cudnn": "cudnn"}


def unsynced_step(model, opt, forward, batches, bf16: bool, device_type: str):
    """bench pretrain's train_step without its closing synchronize(): forward, loss, backward, clipping, AdamW."""
    params = [p for p in model.parameters() if p.requires_grad]

    def step(i: int):
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=bf16):
            loss = forward(model, batches[i])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def count_syncs(step, i: int) -> int:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step(i)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in seen)


def attention_kernels(step, i: int) -> dict[str, int]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(i)
    found: dict[str, int] = {}
    for e in prof.key_averages():
        name = e.key.lower()
        for key, backend in BACKENDS.items():
            if key in name and ("attention" in name or "fmha" in name or "flash" in name):
                found[backend] = found.get(backend, 0) + e.count
    return found or {"math (no fused attention kernel seen)": 0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-size", default="base")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--compile", action="store_true", help="also the compiled static step")
    args = ap.parse_args()
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    cfg = ModelConfig.from_size(args.model_size)
    batches = [{k: v.to(dev) for k, v in b.items()} for b in synthetic_batches(cfg, 3, args.batch_size, args.seq_len)]
    torch.manual_seed(0)
    static = lambda model, b: ours_forward(model, b, static=True)  # noqa: E731
    variants = [("dynamic", ours_forward, False), ("static", static, False)]
    if args.compile:
        variants.append(("static, compiled", static, True))
    report = {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "model_size": args.model_size,
              "batch_size": args.batch_size, "seq_len": args.seq_len, "steps": {}}
    for name, forward, compiled in variants:
        model = BertForPreTraining(cfg).train().to(dev)
        opt = make_adamw(model, OptimConfig(), dev)
        if compiled:
            forward = lambda _, b, call=compile_step(model): ours_forward(call, b, static=True)  # noqa: E731
        step = unsynced_step(model, opt, forward, batches, bf16=cuda, device_type=dev)
        t0 = time.perf_counter()
        step(0)  # warm-up (and the compile)
        if cuda:
            torch.cuda.synchronize()
        first = time.perf_counter() - t0
        row = {"first_step_s": round(first, 2)}
        if cuda:
            row["syncs_per_step"] = count_syncs(step, 1)
            row["attention"] = attention_kernels(step, 2)
        else:
            row["syncs_per_step"] = "needs CUDA"
            row["attention"] = "explicit matmuls (CPU)"
        report["steps"][name] = row
        print(f"{name:<18} first step {row['first_step_s']:>7.2f} s   syncs/step {row['syncs_per_step']}   "
              f"attention {row['attention']}", flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
