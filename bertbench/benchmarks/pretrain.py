"""`bench pretrain`: full pre-training steps of bertbench's default path against `transformers.BertForPreTraining`
(docs/performance.md; its two MFU columns: docs/performance-gpu.md, "Measuring it").

A step is forward (MLM + NSP loss), backward, gradient clipping at 1.0, AdamW step, zero_grad: what both trainers
do (Lightning's `gradient_clip_val`, the HF Trainer's `max_grad_norm`), from the same weights on the same batches
(random tokens, no padding, 15% of positions masked). Each side runs as its users run it: ours `BertForPreTraining`
with `make_adamw`; transformers with SDPA attention, labels -100 (every position projected) and fused AdamW (the
Trainer's default since torch 2.8); bf16 is autocast with fp32 master weights on both. Our sides run the step
training runs (on a GPU the static step, on CPU the dynamic one); `compile=True` adds our static step under
torch.compile at the default precision, its compile time (its first step less a steady one) reported.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any, Optional

from bertbench.benchmarks import common
from bertbench.runtime.devices import gpu_peak
from bertbench.config import PAPER_MASK_RATIO, ModelConfig, OptimConfig
from bertbench.data import IGNORE_INDEX
from bertbench.errors import BertbenchError


def synthetic_batches(cfg: ModelConfig, n: int, batch_size: int, seq_len: int, seed: int = 0) -> list[dict[str, Any]]:
    """`n` MLM + NSP batches: random tokens, exactly round(15% · T) masked positions per row, no padding.
    The labels come twice: (B, T) `lm_labels`, and in fixed slots for the static step (`lm_positions`,
    `lm_slot_labels`, (B, k))."""
    import torch

    from bertbench.data.masking import fixed_slots

    gen = torch.Generator().manual_seed(seed)
    V, B, T = cfg.vocab_size, batch_size, seq_len
    k = max(1, round(PAPER_MASK_RATIO * T))
    mask_id = min(103, V - 1)  # [MASK] in the BERT vocabularies; any id serves for random tokens
    out = []
    for _ in range(n):
        tokens = torch.randint(5, V, (B, T), generator=gen)
        picked = torch.rand(B, T, generator=gen).argsort(dim=1)[:, :k]  # (B, k) distinct positions per row
        labels = torch.full((B, T), IGNORE_INDEX, dtype=torch.long).scatter_(1, picked, tokens.gather(1, picked))
        inputs = tokens.scatter(1, picked, mask_id)
        types = (torch.arange(T) >= T // 2).long().expand(B, T).contiguous()
        out.append({
            "input_ids": inputs,
            "token_type_ids": types,
            "attention_mask": torch.ones(B, T, dtype=torch.long),
            "lm_labels": labels,
            "nsp_labels": torch.randint(0, 2, (B,), generator=gen),
        })
        out[-1]["lm_positions"], out[-1]["lm_slot_labels"] = fixed_slots(labels, k)
    return out


def causal_batches(cfg: ModelConfig, n: int, batch_size: int, seq_len: int, seed: int = 0) -> list[dict[str, Any]]:
    """`n` causal-LM batches: random tokens, no padding, each position labelled with the next token (the last
    position with none): what our left-to-right step reads (`clm_labels`); transformers' shifts `input_ids` itself."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        tokens = torch.randint(5, cfg.vocab_size, (batch_size, seq_len), generator=gen)
        labels = torch.cat([tokens[:, 1:], torch.full((batch_size, 1), IGNORE_INDEX, dtype=torch.long)], 1)
        out.append({"input_ids": tokens, "token_type_ids": torch.zeros_like(tokens),
                    "attention_mask": torch.ones_like(tokens), "clm_labels": labels})
    return out


CONFIG_SHAPE = ("num_layers", "hidden_size", "num_heads", "intermediate_size", "vocab_size")  # a result's model shape


def model_flops_per_token(config: dict[str, Any]) -> float:
    """The full model's training FLOPs per token for a result's "config": every position projected onto the
    real vocabulary (transformers' step; the count MFU tables use)."""
    from bertbench.model.bert import flops_per_token

    shape = {k: config[k] for k in CONFIG_SHAPE}
    return flops_per_token(ModelConfig(**shape), config["seq_len"], vocab_padding=False)


def collate_seconds(cfg: ModelConfig, batch_size: int, seq_len: int, reps: int = 3) -> float:
    """Host seconds to collate one batch as training does on a GPU (pad to the phase's length, draw the masks,
    fixed prediction slots, NSP labels): the median of `reps`, on one core, what a loader worker spends."""
    import statistics
    import time

    import torch

    from bertbench.config import DataConfig
    from bertbench.data.masking import MaskingCollator, TokenTables

    V = cfg.vocab_size
    tables = TokenTables(torch.arange(V) < 5, torch.zeros(V, dtype=torch.bool), torch.arange(5, V), 0, min(103, V - 1))
    collate = MaskingCollator(tables, DataConfig(max_seq_len=seq_len), seed=0, nsp=True, static=True)
    gen = torch.Generator().manual_seed(1)
    samples = [{"input_ids": [2, *torch.randint(5, V, (seq_len - 2,), generator=gen).tolist(), 3],
                "token_type_ids": [0] * (seq_len // 2) + [1] * (seq_len - seq_len // 2), "nsp_label": i % 2, "index": i}
               for i in range(batch_size)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a loader worker's share
    try:
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            collate(samples)
            times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return statistics.median(times)


def predicted_share(seq_len: int) -> float:
    return max(1, round(PAPER_MASK_RATIO * seq_len)) / seq_len


def side_flops(cfg: ModelConfig, seq_len: int, impl: str, fused_head: bool = True) -> tuple[float, float]:
    """(the FLOPs per token a side executes, the full model's). Ours, masked LM: the vocabulary projection and
    the last layer at the masked positions (+ [CLS]) only; causal LM: every position but the last projected.
    Our fused head scores the real vocabulary, the unfused one (a compiled step) the padded one. transformers
    executes the full model, every position projected onto the real vocabulary, which is also the count every
    side's model-FLOPs MFU uses."""
    from bertbench.model.bert import flops_per_token

    full = flops_per_token(cfg, seq_len, vocab_padding=False)
    if impl != "bertbench":
        return full, full
    if cfg.causal:
        return flops_per_token(cfg, seq_len, (seq_len - 1) / seq_len, vocab_padding=not fused_head), full
    share = predicted_share(seq_len)
    return flops_per_token(cfg, seq_len, share, share + 1 / seq_len, vocab_padding=not fused_head), full


def hf_config(cfg: ModelConfig):
    from transformers import BertConfig

    from bertbench.model.hf_compat import config_to_hf

    return BertConfig(**config_to_hf(cfg))


def build_hf_pretraining(cfg: ModelConfig, ours_state: dict):
    """transformers' BertForPreTraining (SDPA attention) holding the same weights as our model."""
    from transformers import BertForPreTraining

    from bertbench.model.hf_compat import state_dict_to_hf

    if cfg.causal:  # the left-to-right LM: transformers' BERT decoder, the same weights without NSP and pooler
        from transformers import BertLMHeadModel

        config = hf_config(cfg)
        config.is_decoder = True
        model = BertLMHeadModel._from_config(config, attn_implementation="sdpa")
        hf = {k: v for k, v in state_dict_to_hf(ours_state, cfg).items() if k in model.state_dict()}
        model.load_state_dict(hf)
        return model.train()
    model = BertForPreTraining._from_config(hf_config(cfg), attn_implementation="sdpa")
    model.load_state_dict(state_dict_to_hf(ours_state, cfg))
    return model.train()


def hf_adamw(model, lr: float, weight_decay: float = 0.01, fused: bool = True):
    """The HF Trainer's default: torch AdamW (fused since torch 2.8), no decay on biases and LayerNorm."""
    import torch

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "LayerNorm" not in n]
    ids = {id(p) for p in decay}
    rest = [p for p in model.parameters() if id(p) not in ids]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, **({"fused": True} if fused else {}))


def train_step(model, opt, forward: Callable[[Any, dict], Any], batches: list[dict], bf16: bool, clip: float = 1.0,
               device_type: str = "cpu", wait: bool = True):
    """A closure running one full training step on batch i % len(batches); returns the detached loss. On a GPU
    it waits for the step's kernels before returning (unless `wait` is False: a caller timing many steps between
    two CUDA events), so a host clock around it times the work, not its launch."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]

    def step(i: int):
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=bf16):
            loss = forward(model, batches[i % len(batches)])
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if wait and device_type == "cuda":
            torch.cuda.synchronize()
        return loss.detach()

    return step


def ours_forward(model, b: dict, static: bool = False):
    """The pre-training forward training runs (BertForPreTraining.forward, or compile_step's): the masked LM on
    the slots, or the causal LM; the loss from the fused head, as PretrainModule.training_step asks for it."""
    if "clm_labels" in b:
        return model(b["input_ids"], b["token_type_ids"], b["attention_mask"], b["clm_labels"], static=static,
                     logits=False).loss
    return model(b["input_ids"], b["token_type_ids"], b["attention_mask"], b["lm_slot_labels"], b["nsp_labels"],
                 lm_positions=b["lm_positions"], static=static, logits=False).loss


def static_batch(b: dict) -> dict:
    """A synthetic batch as the static step's collator hands it to the model and to `PretrainModule` (labels in
    fixed slots): the one place that says how the benchmarks call the model's static step."""
    from bertbench.training.batches import LOSS_TOKENS, STEP_LOSS_TOKENS, STEP_TOKENS, loss_tokens, real_tokens

    out = {"input_ids": b["input_ids"], "token_type_ids": b["token_type_ids"], "attention_mask": b["attention_mask"],
           "lm_labels": b["lm_slot_labels"], "nsp_labels": b["nsp_labels"], "lm_positions": b["lm_positions"]}
    # the host-integer counts the training loader carries (one process, no accumulation: the step is this batch)
    return {**out, LOSS_TOKENS: loss_tokens(out), STEP_TOKENS: real_tokens(out), STEP_LOSS_TOKENS: loss_tokens(out)}


class FirstCallTimer:
    """Wraps a side's step: the seconds of its first call (a compiled side compiles there)."""

    def __init__(self, step):
        self.step, self.first = step, None

    def __call__(self, i: int):
        import time

        t0 = time.perf_counter()
        loss = self.step(i)
        if self.first is None:
            self.first = time.perf_counter() - t0
        return loss


def hf_forward(model, b: dict):
    if "clm_labels" in b:  # BertLMHeadModel shifts the labels itself
        return model(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"],
                     labels=b["input_ids"]).loss
    return model(
        input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"],
        labels=b["lm_labels"], next_sentence_label=b["nsp_labels"],
    ).loss


def build_sides(cfg: ModelConfig, batches: list[dict], default_precision: str, seed: int = 0,
                device_type: str = "cpu", compile: bool = False) -> list[common.Side]:
    """bertbench at its default precision, fp32 and bf16 (deduplicated), and compiled at its default precision
    when asked; transformers at fp32 and bf16. A causal `cfg` (the left-to-right LM, no NSP): names end in `_clm`."""
    import torch

    from bertbench.model.bert import BertForPreTraining, compile_step
    from bertbench.training.optim import make_adamw

    torch.manual_seed(seed)
    base = BertForPreTraining(cfg, nsp=not cfg.causal).train()
    suffix = "_clm" if cfg.causal else ""
    state = {k: v.clone() for k, v in base.state_dict().items()}
    optim = OptimConfig()
    tokens = [b["input_ids"].numel() for b in batches]
    precisions = list(dict.fromkeys([default_precision, "32-true", "bf16-mixed"]))
    sides = []
    static = device_type == "cuda"  # the step training runs there (training.step.step_choice)
    variants = [(p, False) for p in precisions] + ([(default_precision, True)] if compile else [])
    for p, compiled in variants:
        model = copy.deepcopy(base).to(device_type)
        opt = make_adamw(model, optim, device_type)
        call = compile_step(model) if compiled else model
        forward = lambda _, b, call=call, s=static or compiled: ours_forward(call, b, s)  # noqa: E731
        step = train_step(model, opt, forward, batches, bf16=p == "bf16-mixed", device_type=device_type)
        name = f"bertbench_{common.PRECISION_LABEL[p]}" + ("_compiled" if compiled else "") + suffix
        sides.append(common.Side(name, "bertbench", p, FirstCallTimer(step) if compiled else step, tokens,
                                 {"optimizer": "AdamW fused (make_adamw)", "objective": objective_name(cfg),
                                  "vocab_projection": "labelled positions",
                                  "step": ("static, compiled" if compiled else "static" if static else "dynamic")}))
    for p in ("32-true", "bf16-mixed"):
        model = build_hf_pretraining(cfg, state).to(device_type)
        opt = hf_adamw(model, optim.lr, optim.weight_decay)
        step = train_step(model, opt, hf_forward, batches, bf16=p == "bf16-mixed", device_type=device_type)
        sides.append(common.Side(f"transformers_{common.PRECISION_LABEL[p]}{suffix}", "transformers", p, step, tokens,
                                 {"optimizer": "AdamW fused (Trainer default)", "objective": objective_name(cfg),
                                  "vocab_projection": "all positions"}))
    return sides


def objective_name(cfg: ModelConfig) -> str:
    return "clm" if cfg.causal else "mlm+nsp"


def side_report(side: common.Side, flops_per_token: float, model_flops_per_token: float, peak: dict[str, float]) -> dict[str, Any]:
    """model_flops_per_token: the full model's (every position projected, the real vocabulary): the same for
    every side, so its MFU column compares speeds; mfu_* at the side's own FLOPs say how busy the device was."""
    tps = common.median(side.rates)
    gflops = flops_per_token * tps / 1e9
    compile_seconds = None
    if isinstance(side.step, FirstCallTimer) and side.step.first is not None:
        compile_seconds = round(max(0.0, side.step.first - common.median(side.seconds)), 2)
    return {
        "impl": side.impl,
        "precision": side.precision,
        "tokens_per_s": round(tps, 1),
        "tokens_per_s_best": round(max(side.rates), 1),  # noise only slows a step: the best round is the least disturbed
        "step_ms": round(1000 * common.median(side.seconds), 2),
        "model_gflops_per_s": round(gflops, 1),
        "flops_per_token": round(flops_per_token),
        "mfu_fp32_peak": round(gflops / peak["fp32"], 4),
        "mfu_bf16_peak": round(gflops / peak["bf16"], 4),
        "flops_per_token_model": round(model_flops_per_token),
        "mfu_bf16_peak_model_flops": round(model_flops_per_token * tps / 1e9 / peak["bf16"], 4),
        **({"compile_seconds": compile_seconds} if compile_seconds is not None else {}),
        "loss_first": round(side.losses[0], 4),
        "loss_last": round(side.losses[-1], 4),
        **side.extra,
    }


def objective_sides(cfg: ModelConfig, objectives: tuple[str, ...], n: int, batch_size: int, seq_len: int,
                    precision: str, device_type: str, compile: bool) -> tuple[list[common.Side], dict[str, ModelConfig]]:
    """Every objective's sides (build_sides on its own batches: `n` of them), and each side's model config."""
    import dataclasses

    sides, cfg_of = [], {}
    for objective in dict.fromkeys(objectives):
        ocfg = dataclasses.replace(cfg, causal=objective == "clm")
        make = causal_batches if ocfg.causal else synthetic_batches
        batches = [{k: v.to(device_type) for k, v in b.items()} for b in make(ocfg, n, batch_size, seq_len)]
        for side in build_sides(ocfg, batches, precision, device_type=device_type, compile=compile):
            sides.append(side)
            cfg_of[side.name] = ocfg
    return sides, cfg_of


def side_reports(sides: list[common.Side], cfg_of: dict[str, ModelConfig], seq_len: int, peak: dict[str, Any],
                 device_type: str, next_index: int, progress: Optional[Callable[[str], None]]) -> dict[str, dict]:
    """side_report of every side, and on a CPU the host's rate at the side's own products (shape_rate: one more
    step of the side, recorded, then its products timed alone; eager sides only)."""
    from bertbench.benchmarks import shape_rate

    import torch

    from bertbench.model.fused_head import pays_off_on

    reports = {}
    for s in sides:
        compiled = "compiled" in s.extra.get("step", "")
        fused = not compiled and pays_off_on(device_type, torch.bfloat16 if s.precision == "bf16-mixed" else torch.float32)
        if s.impl == "bertbench":
            s.extra["vocab_head"] = "fused with the loss" if fused else "unfused"
        reports[s.name] = side_report(s, *side_flops(cfg_of[s.name], seq_len, s.impl, fused_head=fused), peak)
        if device_type == "cpu" and not compiled:  # a compiled graph's products run inside it, unseen by a dispatch mode
            if progress is not None:
                progress(f"{s.name}: its matrix products timed alone")
            reports[s.name].update(shape_rate.measure(s.step, next_index, common.median(s.seconds)))
    return reports


def objective_comparisons(by_name: dict[str, common.Side], objectives: tuple[str, ...], default: str) -> dict[str, Any]:
    """Per objective (the causal LM's prefixed `clm_`): our default and matched precisions against transformers,
    and a compiled side against the eager one when there is one."""
    comparisons: dict[str, Any] = {}
    label = common.PRECISION_LABEL[default]
    for objective in dict.fromkeys(objectives):
        suffix, prefix = ("_clm", "clm_") if objective == "clm" else ("", "")
        ours, theirs = (lambda name: by_name[f"bertbench_{name}{suffix}"]), (lambda name: by_name[f"transformers_{name}{suffix}"])
        comparisons[f"{prefix}headline_default_vs_transformers_fp32"] = common.compare(ours(label), theirs("fp32"))
        comparisons[f"{prefix}matched_fp32"] = common.compare(ours("fp32"), theirs("fp32"))
        comparisons[f"{prefix}matched_bf16"] = common.compare(ours("bf16"), theirs("bf16"))
        compiled = by_name.get(f"bertbench_{label}_compiled{suffix}")
        if compiled is not None:
            comparisons[f"{prefix}compiled_vs_eager"] = common.compare(compiled, ours(label))
            comparisons[f"{prefix}compiled_vs_transformers_matched"] = common.compare(compiled, theirs(label))
    return comparisons


BENCH_OBJECTIVES = ("mlm+nsp", "clm")  # what `bench pretrain --objective` times: the paper's BERT and its LTR baseline


def run(
    model_size: str,
    vocab_size: int = 30522,
    batch_size: int = 32,
    seq_len: int = 128,
    precision: str = "auto",
    steps: int = 8,
    warmup: int = 2,
    threads: Optional[int] = None,
    progress: Optional[Callable[[str], None]] = None,
    accelerator: str = "cpu",
    compile: bool = False,
    objectives: tuple[str, ...] = ("mlm+nsp",),
) -> dict[str, Any]:
    """objectives: mlm+nsp and/or clm, their sides timed side by side in the same rounds."""
    device_type = common.device_type(accelerator)
    default = common.parse_precision(precision, device_type)
    cfg = ModelConfig.from_size(model_size, vocab_size=vocab_size)
    if not 8 <= seq_len <= cfg.max_position_embeddings:
        raise BertbenchError(f"--seq-len {seq_len}: expected 8..{cfg.max_position_embeddings}")
    if batch_size < 1 or vocab_size < 8:
        raise BertbenchError("--batch-size must be ≥ 1 and --vocab-size ≥ 8")
    if not objectives or any(o not in BENCH_OBJECTIVES for o in objectives):
        raise BertbenchError(f"--objective {','.join(objectives)}: expected {' and/or '.join(BENCH_OBJECTIVES)}, e.g. mlm+nsp,clm")
    common.set_threads(threads)
    meter = common.PeakMeter(device_type=device_type)
    sides, cfg_of = objective_sides(cfg, objectives, warmup + steps, batch_size, seq_len, default, device_type, compile)
    common.run_rounds(sides, warmup, steps, progress, after_round=meter.sample)
    peak = meter.result()
    datasheet = gpu_peak(device_type)
    if datasheet is not None:  # on a GPU, MFU is against its datasheet's dense peak, the convention of MFU tables
        peak = {**datasheet, "measured_matmul": peak}

    by_name = {s.name: s for s in sides}
    reports = side_reports(sides, cfg_of, seq_len, peak, device_type, warmup + steps, progress)
    comparisons = objective_comparisons(by_name, objectives, default)
    ours_default = by_name[f"bertbench_{common.PRECISION_LABEL[default]}" + ("" if "mlm+nsp" in objectives else "_clm")]
    collate_ms = 1000 * collate_seconds(cfg, batch_size, seq_len)
    return {
        "benchmark": "pretrain",
        "machine": common.machine(),
        "config": {
            "model_size": model_size,
            **{k: getattr(cfg, k) for k in CONFIG_SHAPE},
            "batch_size": batch_size,
            "seq_len": seq_len,
            "masked_share": round(predicted_share(seq_len), 4),
            "steps": steps,
            "warmup": warmup,
            "lr": OptimConfig().lr,
            "grad_clip": 1.0,
            "compile": compile,
            **({"objectives": list(dict.fromkeys(objectives))} if tuple(objectives) != ("mlm+nsp",) else {}),
        },
        "default_precision": default,
        "device": common.device_name(device_type),
        "peak_gflops_per_s": peak,
        "peak_method": "torch.matmul 2048x2048x2048, best of samples taken before and after every round",
        "sides": reports,
        "comparisons": comparisons,
        # one loader worker's time per batch beside our default step: workers needed to keep up = the ratio, rounded up
        "collate_ms_per_batch": round(collate_ms, 2),
        "collate_share_of_step": round(collate_ms / reports[ours_default.name]["step_ms"], 4),
        "tcmalloc": common.tcmalloc_preloaded(),
        "hint": common.allocator_hint(),
        "expected_loss_random_tokens": round(math.log(vocab_size) + math.log(2), 3),
    }


def run_sweep(batch_sizes: list[int], progress: Optional[Callable[[str], None]] = None, **kwargs: Any) -> dict[str, Any]:
    """`run` at each batch size (each its own models and batches): one result per batch size under "runs"."""
    if not batch_sizes or any(b < 1 for b in batch_sizes):
        raise BertbenchError(f"--batch-sizes {batch_sizes}: expected one or more batch sizes ≥ 1")
    runs = []
    for b in batch_sizes:
        if progress is not None:
            progress(f"batch size {b}")
        runs.append(run(batch_size=b, progress=progress, **kwargs))
    return {"benchmark": "pretrain", "machine": runs[0]["machine"], "config": {**runs[0]["config"], "batch_size": batch_sizes},
            "runs": runs}
