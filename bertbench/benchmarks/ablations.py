"""What each optimisation of the pre-training step contributes: one variant switched off (or on) at a time.

    bertbench bench ablations --model-size mini [--steps 8] [--only default,fp32,...]
    bertbench bench ablations --model-size mini --compile      # torch.compile, with compile time
    bertbench bench allocator --model-size mini                # glibc, tuned glibc, tcmalloc (fresh processes)

Every variant starts from the same weights and runs the same batches in alternating rounds (see
`common.run_rounds`); the result is each variant's median tokens/s and the median per-round ratio
against `default` (bertbench's default path: bf16 autocast, vocabulary projection at masked positions,
fused AdamW, dropout 0.1 everywhere, torch's thread count).
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable

import torch

from bertbench.benchmarks import common
from bertbench.errors import BertbenchError
from bertbench.benchmarks.pretrain import ours_forward, synthetic_batches, train_step
from bertbench.config import ModelConfig, OptimConfig
from bertbench.data import IGNORE_INDEX


def full_projection_forward(model, b: dict):
    """MLM over every position (as transformers does), loss on the labelled ones only."""
    import torch.nn.functional as F

    out = model(b["input_ids"], b["token_type_ids"], b["attention_mask"])  # (B, T, V) logits, no labels
    mlm = F.cross_entropy(out.lm_logits.flatten(0, 1).float(), b["lm_labels"].flatten(), ignore_index=IGNORE_INDEX)
    return mlm + F.cross_entropy(out.nsp_logits.float(), b["nsp_labels"])


def full_last_layer_forward(model, b: dict):
    """The last layer at every position (as transformers runs it); vocabulary projection still at the masked ones."""
    import torch.nn.functional as F

    enc = model.bert(b["input_ids"], b["token_type_ids"], b["attention_mask"])  # (B, T, H) everywhere
    selected = b["lm_labels"] != IGNORE_INDEX
    logits = model.mlm(enc.last_hidden_state[selected], model.bert.embeddings.word.weight)  # (N, V)
    mlm = F.cross_entropy(logits.float(), b["lm_labels"][selected])
    return mlm + F.cross_entropy(model.nsp(enc.pooled).float(), b["nsp_labels"])


# ----------------------------------------------------------------------------------------------
# Candidate model.py changes, applied to one model instance so they can be timed beside the default.


class FastDropout(torch.autograd.Function):
    """Dropout from 16 random bits per element, four elements per 64-bit draw (torch's CPU dropout draws
    one Bernoulli sample per element). Keep probability 1 − round(p·65536)/65536: p to within 1e-5."""

    @staticmethod
    def forward(ctx, x, p):
        n = x.numel()
        bits = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(2**63), None)
        keep = bits.view(torch.int16)[:n].view(x.shape) >= -32768 + round(p * 65536)  # (…) bool
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - p)
        return x.mul(keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None


def fast_dropout(x, p: float, training: bool = True):
    return FastDropout.apply(x, p) if training and p > 0 else x


def patch(model, dropout: str = "torch", attention: str = "sdpa") -> None:
    """Candidate model.py changes on one model instance.

    dropout="fast": every nn.Dropout uses `fast_dropout`.
    attention="manual": while attention dropout is active (training, p > 0), attention runs as explicit
    matmuls + softmax + dropout (`dropout` picks which) instead of SDPA, whose CPU flash kernel has no
    dropout (it falls back to its unfused math path); "manual_always": explicit matmuls even without dropout.
    """
    import types

    import torch.nn as nn
    import torch.nn.functional as F

    from bertbench.model.bert import SelfAttention

    drop = fast_dropout if dropout == "fast" else (lambda x, p, training=True: F.dropout(x, p, training))
    for m in model.modules():
        if dropout == "fast" and isinstance(m, nn.Dropout):
            m.forward = types.MethodType(lambda self, x: fast_dropout(x, self.p, self.training), m)
        if attention != "sdpa" and isinstance(m, SelfAttention):
            def forward(self, x, mask, is_causal, packing=None):
                p = self.attn_dropout if self.training else 0.0
                if is_causal or packing is not None or (p == 0.0 and attention != "manual_always"):
                    return SelfAttention.forward(self, x, mask, is_causal, packing)
                B, T, H = x.shape
                # 3 × (B, T, H) → 3 × (B, nh, T, hs)
                q, k, v = (t.view(B, T, self.nh, H // self.nh).transpose(1, 2) for t in self.qkv(x).split(H, dim=2))
                scores = (q * (H // self.nh) ** -0.5) @ k.transpose(-2, -1)  # (B, nh, T, T)
                if mask is not None:
                    scores = scores.masked_fill(~mask, float("-inf"))
                probs = drop(torch.softmax(scores, dim=-1), p)
                y = (probs.to(v.dtype) @ v).transpose(1, 2).reshape(B, T, H)  # (B, T, H)
                return self.norm(x + self.dropout(self.out(y)))

            m.forward = types.MethodType(forward, m)


def _with_threads(step: Callable, n: int) -> Callable:
    def run(i: int):
        before = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            return step(i)
        finally:
            torch.set_num_threads(before)

    return run


# name → how the variant differs from the default path
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "full_vocab_projection": {"forward": full_projection_forward},
    "full_last_layer": {"forward": full_last_layer_forward},
    "fp32_full_last_layer": {"bf16": False, "forward": full_last_layer_forward},
    "fp32": {"bf16": False},
    "fp32_full_vocab_projection": {"bf16": False, "forward": full_projection_forward},
    "adamw_plain_loop": {"optimizer": "plain"},
    "adamw_foreach": {"optimizer": "foreach"},
    "one_thread": {"threads": 1},
    "attention_dropout_0": {"cfg": {"attention_dropout": 0.0}},
    "no_dropout": {"cfg": {"attention_dropout": 0.0, "dropout": 0.0}},
    "no_grad_clip": {"clip": 0.0},
    "fast_dropout": {"patch": {"dropout": "fast"}},
    "manual_attention": {"patch": {"attention": "manual"}},
    "fast_dropout_manual_attention": {"patch": {"dropout": "fast", "attention": "manual"}},
    "attention_dropout_0_manual_attention": {"cfg": {"attention_dropout": 0.0}, "patch": {"attention": "manual_always"}},
}


def _optimizer(model, kind: str):
    from bertbench.training.optim import make_adamw, param_groups

    if kind == "default":
        return make_adamw(model, OptimConfig(), "cpu")  # fused
    cfg = OptimConfig()
    flag = {"plain": {"foreach": False}, "foreach": {"foreach": True}}[kind]
    return torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, **flag)


def build(cfg: ModelConfig, base_state: dict, batches: list, name: str, spec: dict[str, Any]) -> common.Side:
    from bertbench.model.bert import BertForPreTraining

    model = BertForPreTraining(dataclasses.replace(cfg, **spec.get("cfg", {}))).train()
    model.load_state_dict(base_state)
    if "patch" in spec:
        patch(model, **spec["patch"])
    opt = _optimizer(model, spec.get("optimizer", "default"))
    bf16 = spec.get("bf16", True)
    step = train_step(model, opt, spec.get("forward", ours_forward), batches, bf16=bf16, clip=spec.get("clip", 1.0))
    if "threads" in spec:
        step = _with_threads(step, spec["threads"])
    if spec.get("compile"):
        model.forward = torch.compile(model.forward)
    tokens = [b["input_ids"].numel() for b in batches]
    return common.Side(name, "bertbench", "bf16-mixed" if bf16 else "32-true", step, tokens)


def _setup(model_size: str, batch_size: int, seq_len: int, n: int):
    from bertbench.model.bert import BertForPreTraining

    cfg = ModelConfig.from_size(model_size)
    torch.manual_seed(0)
    state = BertForPreTraining(cfg).state_dict()
    return cfg, state, synthetic_batches(cfg, n, batch_size, seq_len)


def run_variants(model_size: str, batch_size: int, seq_len: int, steps: int, warmup: int, only: list[str]) -> dict[str, Any]:
    cfg, state, batches = _setup(model_size, batch_size, seq_len, warmup + steps)
    sides = [build(cfg, state, batches, n, VARIANTS[n]) for n in common.variant_names(only, VARIANTS)]
    common.run_rounds(sides, warmup, steps, common.progress_to_stderr(False))
    return {"variants": common.variant_summary(sides)}


def run_compile(model_size: str, batch_size: int, seq_len: int, steps: int, warmup: int) -> dict[str, Any]:
    """Eager vs torch.compile'd forward (default mode); the compiled side's first step is the compile time."""
    from bertbench.runtime.quiet import silence_compiler_notices

    silence_compiler_notices()
    cfg, state, batches = _setup(model_size, batch_size, seq_len, warmup + steps + 1)
    eager = build(cfg, state, batches, "default", {})
    compiled = build(cfg, state, batches, "compiled", {"compile": True})
    t0 = time.perf_counter()
    compiled.step(0)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    eager.step(0)
    eager_first = time.perf_counter() - t0
    shifted = lambda s: (lambda i: s(i + 1))  # noqa: E731  (batch 0 was used for the first step)
    eager.step, compiled.step = shifted(eager.step), shifted(compiled.step)
    eager.tokens, compiled.tokens = eager.tokens[1:], compiled.tokens[1:]
    common.run_rounds([eager, compiled], warmup, steps, common.progress_to_stderr(False))
    out = common.variant_summary([eager, compiled])
    gain = common.median(eager.seconds) - common.median(compiled.seconds)
    out["compiled"]["first_step_s"] = round(first, 2)
    out["default"]["first_step_s"] = round(eager_first, 2)
    out["compiled"]["break_even_steps"] = round((first - eager_first) / gain) if gain > 0 else None
    return {"variants": out}


def run_allocator(model_size: str, batch_size: int, seq_len: int, steps: int, warmup: int, repeats: int) -> dict[str, Any]:
    """The default step in fresh processes, in rotating order: plain glibc malloc, glibc as the CLI tunes it
    (allocator.py), and tcmalloc preloaded where it is installed. Each process reports the allocator it ran."""
    from bertbench.runtime.allocator import DISABLE_ENV

    found = common.tcmalloc_library()
    # through the CLI's entry point, which tunes glibc malloc before torch loads (unless told not to)
    args = [sys.executable, "-m", "bertbench", "bench", "ablations", "--model-size", model_size, "--batch-size", str(batch_size),
            "--seq-len", str(seq_len), "--steps", str(steps), "--warmup", str(warmup), "--only", "default", "--json"]
    env_plain = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", DISABLE_ENV)}
    envs = {"glibc": dict(env_plain, **{DISABLE_ENV: "0"}), "glibc-tuned": env_plain}
    if found is not None:
        envs["tcmalloc"] = dict(env_plain, LD_PRELOAD=found)
    names = list(envs)
    runs: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names):] + names[: r % len(names)]:
            res = json.loads(subprocess.run(args, env=envs[name], capture_output=True, text=True, check=True).stdout)
            if res["machine"]["allocator"] != name:
                raise BertbenchError(f"asked for {name}, the process ran {res['machine']['allocator']}")
            runs[name].append(res["variants"]["default"]["tokens_per_s"])
            print(f"{name}: {runs[name][-1]} tokens/s", file=sys.stderr, flush=True)
    out: dict[str, Any] = {"tokens_per_s": runs, "tcmalloc_installed": found is not None}
    for name in names[1:]:  # each against plain glibc, pairing the processes of one rotation
        out[f"{name}_vs_glibc_median"] = round(common.median([a / b for a, b in zip(runs[name], runs["glibc"])]), 3)
    if found is not None:
        out["glibc-tuned_vs_tcmalloc_median"] = round(
            common.median([a / b for a, b in zip(runs["glibc-tuned"], runs["tcmalloc"])]), 3)
    return {"benchmark": "allocator", "allocator": out}
