"""Model selection for fine-tuning: the held-out slice of train and the learning-rate rule.

The same rule for every variant (it sees scores, never which model made them): the learning rate
with the best mean primary metric over the seeds; a tie goes to the smaller learning rate (the more
conservative step). With `grid: heldout` the scores come from a slice held out of the training set
(the same slice for every variant and seed, cut with a fixed shuffle), and dev is only reported on;
with `grid: paper` they come from dev itself, as the paper chose its learning rate (optimistic).
"""
from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Optional, TypeVar

import numpy as np

from bertbench.errors import BertbenchError
from bertbench.metrics import NEAR_CONSTANT_SHARE

T = TypeVar("T")
K = TypeVar("K", float, tuple)  # an lr, or an (lr, epoch) pair

HELDOUT_FRACTION = 0.1  # of the training set ...
HELDOUT_MAX = 2000  # ... but never more than this: selection needs a stable score, not a second dev set
HELDOUT_SEED = 0  # the slice is fixed: the same examples for every variant, seed and learning rate
_LAST = f"one label (one value) for >= {NEAR_CONSTANT_SHARE:.0%} of the examples on some seed ranks last"
RULE = f"best mean primary metric over seeds; ties to the smaller lr; {_LAST}"
EPOCH_RULE = f"best mean primary metric over seeds of an (lr, epoch) pair; ties to the smaller lr, then the earlier epoch; {_LAST}"
SELECTED_ON = {"heldout": "train-slice", "paper": "dev"}
GRIDS = ("none", *SELECTED_ON)  # none: one learning rate, nothing to select


def heldout_size(n_train: int) -> int:
    return min(HELDOUT_MAX, max(1, round(HELDOUT_FRACTION * n_train)))


def split_heldout(examples: Sequence[T], seed: int = HELDOUT_SEED) -> tuple[list[T], list[T]]:
    """(train without the slice, the slice), both in their original order."""
    n = len(examples)
    if n < 2:
        raise BertbenchError(f"{n} training example(s): too few to hold a selection slice out of train")
    held = set(np.random.default_rng(seed).permutation(n)[: heldout_size(n)].tolist())
    return [e for i, e in enumerate(examples) if i not in held], [e for i, e in enumerate(examples) if i in held]


def select_lr(scores: Mapping[K, Sequence[float]], higher_is_better: bool = True,
              near_constant: Collection[K] = ()) -> K:
    """The learning rate (or (lr, epoch) pair) whose seeds score best on average; a tie goes to the smallest
    key: the smaller lr, then the earlier epoch. A key in `near_constant` (some seed predicted one label, or one
    value, for >= NEAR_CONSTANT_SHARE of the selection examples: `metrics.near_constant`) ranks after every other: such a
    predictor has learned little, however well F1 rewards the majority class (MRPC: predicting "paraphrase"
    everywhere scores F1 81), and early stopping would otherwise pick it. The report never counts a
    near-constant cell as a reproduction; selection that preferred one would make the claim unanswerable."""
    if not scores or any(not values for values in scores.values()):
        raise ValueError("select_lr needs at least one score per learning rate")
    sign = 1.0 if higher_is_better else -1.0
    return min(scores, key=lambda k: (k in near_constant, -sign * math.fsum(scores[k]) / len(scores[k]), k))


def _label(key) -> str:
    return f"{key[0]:g}@epoch{key[1]}" if isinstance(key, tuple) else f"{key:g}"


def selection_record(grid: str, scores: Mapping[K, Sequence[float]], selected: K, heldout: Optional[int],
                     near_constant: Collection[K] = ()) -> dict:
    """What a result record says about how its learning rate (and epoch) was chosen."""
    means = {_label(key): round(math.fsum(v) / len(v), 4) for key, v in sorted(scores.items())}
    by_epoch = isinstance(selected, tuple)
    record = {"on": SELECTED_ON[grid], "rule": EPOCH_RULE if by_epoch else RULE,
              "grid": sorted({key[0] if by_epoch else key for key in scores}), "scores": means,
              "selected_lr": selected[0] if by_epoch else selected, "score": means[_label(selected)],
              "heldout_size": heldout}
    if by_epoch:
        record["selected_epoch"] = selected[1]
    if near_constant:  # ranked last by the rule
        record["near_constant"] = sorted(_label(key) for key in near_constant)
    return record


__all__ = ["EPOCH_RULE", "GRIDS", "HELDOUT_FRACTION", "HELDOUT_MAX", "HELDOUT_SEED", "RULE", "heldout_size", "select_lr",
           "selection_record", "split_heldout"]
