"""What each optimisation of the fine-tuning step contributes: one switched off at a time.

    bertbench bench finetune-ablations --model-size mini [--precision bf16] [--steps 8]

The step is `bench finetune`'s bertbench side (sequence classification, GLUE-like batches of mixed
lengths padded to the longest, `finetune_loop`'s optimizer). Every variant starts from the same weights
and runs the same batches in alternating rounds (`common.run_rounds`); each reports its median real
tokens/s and the median per-round ratio against `default`.
"""
from __future__ import annotations

import contextlib
import copy
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

from bertbench.benchmarks import common, finetune as ft
from bertbench.benchmarks.pretrain import train_step
from bertbench.config import ModelConfig
from bertbench.model.bert import Packing


@contextlib.contextmanager
def packing_settings(**values: Any) -> Iterator[None]:
    """Packing's class-level knobs, set for one step and restored after it."""
    before = {k: getattr(Packing, k) for k in values}
    for k, v in values.items():
        setattr(Packing, k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            setattr(Packing, k, v)


def without_pooled_only(model) -> None:
    """The last layer computes every position, as a padded encoder does."""
    def encode(self, input_ids, token_type_ids, attention_mask):
        return self.bert(input_ids, token_type_ids, attention_mask)

    model._encode = types.MethodType(encode, model)


# name → how the variant differs from the default path
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "no_packing": {"packing": {"MIN_PADDING": 1.1}},  # padded (B, T) all the way, as transformers runs
    "packing_one_bucket": {"packing": {"BUCKETS": 1}},  # packed, but attention on the batch's full grid
    "packing_two_buckets": {"packing": {"BUCKETS": 2}},
    "packing_eight_buckets": {"packing": {"BUCKETS": 8}},
    "no_pooled_only": {"pooled_only": False},
    "neither_packing_nor_pooled_only": {"packing": {"MIN_PADDING": 1.1}, "pooled_only": False},
    "adamw_foreach": {"fused": False},
}


def build(base, batches: list[dict], tokens: list[int], name: str, spec: dict[str, Any], bf16: bool) -> common.Side:
    from bertbench.training.finetune_loop import FinetuneHParams, make_optimizer

    model = copy.deepcopy(base)
    if spec.get("pooled_only", True) is False:
        without_pooled_only(model)
    opt = make_optimizer(model, FinetuneHParams(lr=ft.LR), "cpu", fused=spec.get("fused", True))
    step = train_step(model, opt, ft.ours_forward, batches, bf16=bf16)
    if "packing" in spec:
        inner = step

        def step(i: int, inner: Callable = inner, settings: dict = spec["packing"]):
            with packing_settings(**settings):
                return inner(i)

    return common.Side(name, "bertbench", "bf16-mixed" if bf16 else "32-true", step, tokens)


def run_variants(model_size: str, batch_size: int, min_len: int, max_len: int, precision: str, steps: int, warmup: int,
                 only: list[str]) -> dict[str, Any]:
    from bertbench.model.bert import BertForPreTraining
    from bertbench.training.finetune_loop import pad_collate
    from bertbench.training.task_model import TaskModel

    names = common.variant_names(only, VARIANTS)
    cfg = ModelConfig.from_size(model_size)
    feats = ft.synthetic_features(cfg, (warmup + steps) * batch_size, min_len, max_len)
    idx = ft.batch_indices(len(feats), batch_size, None)
    batches = [pad_collate([feats[i] for i in ix]) for ix in idx]
    tokens = [sum(len(feats[i]["input_ids"]) for i in ix) for ix in idx]  # real tokens, as bench finetune counts
    torch.manual_seed(0)
    base = TaskModel(BertForPreTraining(cfg).bert, "classification", 2).train()
    bf16 = common.parse_precision(precision) == "bf16-mixed"
    sides = [build(base, batches, tokens, n, VARIANTS[n], bf16) for n in names]
    common.run_rounds(sides, warmup, steps, common.progress_to_stderr(False))
    return {"variants": common.variant_summary(sides)}
