"""`bench finetune`: sequence-classification training steps of `TaskModel` vs `transformers.BertForSequenceClassification`.

GLUE-like batches: example lengths drawn uniformly from min_len..max_len, sentence pairs, two labels.
- bertbench pads each batch to its longest example (`pad_collate`, rounded up to 8), and the model then runs
  packed (projections and FFN on real tokens only, attention in length buckets) with the last layer at
  [CLS] only (`pooled_only`): exactly `finetune_loop.train`'s path, AdamW fused as there. Batches are
  as `bertbench finetune` draws them (length-grouped by default, `group_by_length`), or random.
- transformers "max_length": padded to max_len, as the Trainer's GLUE example does by default
  (`pad_to_max_length=True`).
- transformers "dynamic": padded to the longest in the batch (`DataCollatorWithPadding`), to be fair.
Both transformers sides use SDPA attention and the Trainer's default optimizer (fused AdamW).
Throughput counts real (unpadded) tokens: padding is work that buys nothing.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Optional

from bertbench.benchmarks import common
from bertbench.benchmarks.pretrain import hf_adamw, hf_config, train_step
from bertbench.config import ModelConfig
from bertbench.errors import BertbenchError

LR = 2e-5  # FinetuneHParams' default


def synthetic_features(cfg: ModelConfig, n: int, min_len: int, max_len: int, seed: int = 0) -> list[dict]:
    """`n` GLUE-like features: a sentence pair of random tokens (lengths uniform in min_len..max_len), a 0/1 label."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    feats = []
    for _ in range(n):
        length = int(torch.randint(min_len, max_len + 1, (1,), generator=gen))
        ids = torch.randint(5, cfg.vocab_size, (length,), generator=gen).tolist()
        ids[0] = min(101, cfg.vocab_size - 1)  # [CLS]
        a = length // 2
        feats.append({"input_ids": ids, "token_type_ids": [0] * a + [1] * (length - a),
                      "labels": int(torch.randint(0, 2, (1,), generator=gen))})
    return feats


def batch_indices(n: int, batch_size: int, lengths: Optional[list[int]], seed: int = 0) -> list[list[int]]:
    """Random batches (the Trainer's default sampler), or length-grouped ones as `bertbench finetune` draws them
    (`finetune_loop.epoch_batches`)."""
    import numpy as np

    from bertbench.training.finetune_loop import epoch_batches

    if lengths is None:
        return [list(range(i, i + batch_size)) for i in range(0, n, batch_size)]  # the pool is already random
    return epoch_batches(n, batch_size, np.random.default_rng(seed), lengths)


def pad_to(features: list[dict], length: int) -> dict[str, Any]:
    """Pad every example to `length` (what `padding="max_length"` in the tokenizer produces)."""
    import torch

    def row(seq, pad=0):
        return list(seq) + [pad] * (length - len(seq))

    return {
        "input_ids": torch.tensor([row(f["input_ids"]) for f in features]),
        "token_type_ids": torch.tensor([row(f["token_type_ids"]) for f in features]),
        "attention_mask": torch.tensor([row([1] * len(f["input_ids"])) for f in features]),
        "labels": torch.tensor([f["labels"] for f in features]),
    }


def build_hf_classifier(cfg: ModelConfig, pretraining_state: dict, head_state: dict):
    """BertForSequenceClassification (SDPA) with our encoder's weights (from a BertForPreTraining state) and head's."""
    from transformers import BertForSequenceClassification

    from bertbench.model.hf_compat import state_dict_to_hf

    hf_cfg = hf_config(cfg)
    hf_cfg.num_labels = 2
    model = BertForSequenceClassification._from_config(hf_cfg, attn_implementation="sdpa")
    sd = {k: v for k, v in state_dict_to_hf(pretraining_state, cfg).items() if k.startswith("bert.")}
    sd["classifier.weight"], sd["classifier.bias"] = head_state["out.weight"], head_state["out.bias"]
    model.load_state_dict(sd, strict=True)
    return model.train()


def ours_forward(model, b: dict):
    return model(b)[1]


def hf_forward(model, b: dict):
    return model(
        input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"], labels=b["labels"]
    ).loss


def build_sides(
    cfg: ModelConfig, feats: list[dict], batch_size: int, max_len: int, default_precision: str, group_by_length: bool,
    seed: int = 0,
):
    """bertbench and transformers-dynamic train on the same batches (length-grouped when asked);
    transformers-max_length on random batches of the same pool."""
    import torch

    from bertbench.model.bert import BertForPreTraining
    from bertbench.training.finetune_loop import FinetuneHParams, make_optimizer, pad_collate
    from bertbench.training.task_model import TaskModel

    torch.manual_seed(seed)
    pre = BertForPreTraining(cfg)  # BERT's initialisation; its encoder is what TaskModel fine-tunes
    pre_state = {k: v.clone() for k, v in pre.state_dict().items()}
    base = TaskModel(pre.bert, "classification", 2).train()
    head_state = {k: v.clone() for k, v in base.head.state_dict().items()}
    lengths = [len(f["input_ids"]) for f in feats]
    ours_idx = batch_indices(len(feats), batch_size, lengths if group_by_length else None, seed)
    random_idx = batch_indices(len(feats), batch_size, None)
    dynamic = [pad_collate([feats[i] for i in idx]) for idx in ours_idx]
    fixed = [pad_to([feats[i] for i in idx], max_len) for idx in random_idx]
    ours_tokens = [sum(lengths[i] for i in idx) for idx in ours_idx]  # real tokens per batch
    random_tokens = [sum(lengths[i] for i in idx) for idx in random_idx]
    padded = lambda bs: round(sum(b["input_ids"].numel() for b in bs) / sum(lengths), 3)  # noqa: E731
    batching = "length-grouped (group_by_length)" if group_by_length else "random"
    sides = []
    for p in dict.fromkeys([default_precision, "32-true", "bf16-mixed"]):
        model = copy.deepcopy(base)
        opt = make_optimizer(model, FinetuneHParams(lr=LR), "cpu")  # finetune_loop.train's optimizer on CPU
        step = train_step(model, opt, ours_forward, dynamic, bf16=p == "bf16-mixed")
        sides.append(common.Side(f"bertbench_{common.PRECISION_LABEL[p]}", "bertbench", p, step, ours_tokens,
                                 {"padding": "longest in batch (pad_collate), then packed", "batches": batching,
                                  "padded_tokens_per_real": padded(dynamic), "optimizer": "AdamW fused (finetune_loop)"}))
    hf = (
        ("max_length", fixed, random_tokens, f"max_length {max_len} (Trainer GLUE example)", "random"),
        ("dynamic", dynamic, ours_tokens, "longest in batch (DataCollatorWithPadding)", batching),
    )
    for padding, batches, tokens, what, how in hf:
        for p in ("32-true", "bf16-mixed"):
            model = build_hf_classifier(cfg, pre_state, head_state)
            step = train_step(model, hf_adamw(model, LR), hf_forward, batches, bf16=p == "bf16-mixed")
            sides.append(common.Side(f"transformers_{padding}_{common.PRECISION_LABEL[p]}", "transformers", p, step, tokens,
                                     {"padding": what, "batches": how, "padded_tokens_per_real": padded(batches),
                                      "optimizer": "AdamW fused (Trainer default)"}))
    return sides


def run(
    model_size: str,
    batch_size: int = 32,
    min_len: int = 20,
    max_len: int = 128,
    precision: str = "auto",
    steps: int = 16,
    warmup: int = 2,
    threads: Optional[int] = None,
    progress: Optional[Callable[[str], None]] = None,
    vocab_size: int = 30522,
    group_by_length: Optional[bool] = None,
) -> dict[str, Any]:
    """group_by_length: length-grouped batches for our side and transformers-dynamic; None: as `bertbench
    finetune` draws them (FinetuneHParams' default)."""
    default = common.parse_precision(precision)
    cfg = ModelConfig.from_size(model_size, vocab_size=vocab_size)
    if not 4 <= min_len <= max_len <= cfg.max_position_embeddings:
        raise BertbenchError(f"--min-len {min_len} / --max-len {max_len}: expected 4 ≤ min ≤ max ≤ {cfg.max_position_embeddings}")
    if batch_size < 1:
        raise BertbenchError("--batch-size must be ≥ 1")
    if group_by_length is None:
        from bertbench.training.finetune_loop import FinetuneHParams

        group_by_length = FinetuneHParams().group_by_length
    common.set_threads(threads)
    feats = synthetic_features(cfg, (warmup + steps) * batch_size, min_len, max_len)
    sides = build_sides(cfg, feats, batch_size, max_len, default, group_by_length)
    common.run_rounds(sides, warmup, steps, progress)

    reports = {}
    for s in sides:
        reports[s.name] = {
            "impl": s.impl,
            "precision": s.precision,
            "tokens_per_s": round(common.median(s.rates), 1),  # real (unpadded) tokens
            "tokens_per_s_best": round(max(s.rates), 1),
            "examples_per_s": round(common.median([batch_size / t for t in s.seconds]), 2),
            "step_ms": round(1000 * common.median(s.seconds), 2),
            "loss_first": round(s.losses[0], 4),
            "loss_last": round(s.losses[-1], 4),
            **s.extra,
        }
    by = {s.name: s for s in sides}
    ours_default = by[f"bertbench_{common.PRECISION_LABEL[default]}"]
    comparisons = {
        "headline_default_vs_transformers_max_length_fp32": common.compare(ours_default, by["transformers_max_length_fp32"]),
    }
    for padding in ("max_length", "dynamic"):
        for label in ("fp32", "bf16"):
            comparisons[f"matched_{label}_vs_{padding}"] = common.compare(by[f"bertbench_{label}"], by[f"transformers_{padding}_{label}"])
    return {
        "benchmark": "finetune",
        "machine": common.machine(),
        "config": {
            "model_size": model_size,
            "num_layers": cfg.num_layers,
            "hidden_size": cfg.hidden_size,
            "vocab_size": vocab_size,
            "task": "classification, 2 labels",
            "batch_size": batch_size,
            "lengths": f"uniform {min_len}..{max_len}",
            "group_by_length": group_by_length,
            "steps": steps,
            "warmup": warmup,
            "lr": LR,
            "grad_clip": 1.0,
        },
        "default_precision": default,
        "sides": reports,
        "comparisons": comparisons,
        "tcmalloc": common.tcmalloc_preloaded(),
        "hint": common.allocator_hint(),
    }
