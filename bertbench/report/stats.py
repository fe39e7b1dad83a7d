"""95% intervals for the report: a cell's mean over seeds, and paired differences between two variants.

Two intervals, each named wherever it is printed (`Interval.method`):
- **t over seeds** (`t_interval`, `paired_t_interval`): Student's t-interval of the mean over
  fine-tuning seeds, mean ± t(0.975, n-1)·s/√n. A paired difference is the t-interval of the
  per-seed differences a(seed) − b(seed) over the seeds both variants ran (same seed = same
  classifier initialisation and batch order, same dev examples). It measures fine-tuning noise on
  this dev set, not how the dev set was sampled.
- **paired bootstrap over seeds × examples** (`paired_bootstrap`): for per-example scores whose mean
  is the metric (accuracy: 0/1 per example), resample seeds and dev examples with replacement, the same
  draw for both variants, and take the percentile interval of the mean difference. It adds the
  sampling of dev examples to the seeds' noise.

With one value (n = 1) there is no interval: the functions return None, and the report says so
rather than printing a zero-width one.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

CONFIDENCE = 0.95
T_OVER_SEEDS = "t over seeds"
PAIRED_T_OVER_SEEDS = "paired t over seeds"
PAIRED_BOOTSTRAP = "paired bootstrap over seeds × examples"
BOOTSTRAP_RESAMPLES = 10_000


@dataclass(frozen=True)
class Interval:
    """An estimate (a mean, or a mean difference) with its two-sided interval."""

    estimate: float
    low: float
    high: float
    n: int  # seeds (t) or seed pairs (paired)
    method: str
    confidence: float = CONFIDENCE

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def _t_quantile(confidence: float, df: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, df))


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE,
               method: str = T_OVER_SEEDS) -> Optional[Interval]:
    """Student's t-interval of the mean of `values`; None for fewer than two values (no interval)."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        return None
    mean = math.fsum(xs) / n
    if n < 2:
        return None
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    # Computed here rather than with scipy's t.interval, which returns nan when every seed agrees (sd 0).
    half = _t_quantile(confidence, n - 1) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, method, confidence)


def paired_differences(a: Mapping[int, float], b: Mapping[int, float]) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """(seeds both have, a[seed] − b[seed] for each), in seed order. Unpaired seeds are left out."""
    seeds = tuple(sorted(set(a) & set(b)))
    return seeds, tuple(float(a[s]) - float(b[s]) for s in seeds)


def paired_t_interval(a: Mapping[int, float], b: Mapping[int, float],
                      confidence: float = CONFIDENCE) -> Optional[Interval]:
    """The t-interval of a − b over the seeds both ran; None when fewer than two seeds pair up."""
    _, diffs = paired_differences(a, b)
    return t_interval(diffs, confidence, PAIRED_T_OVER_SEEDS)


def paired_bootstrap(a: np.ndarray, b: np.ndarray, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                     confidence: float = CONFIDENCE) -> Optional[Interval]:
    """Percentile interval of mean(a) − mean(b) for per-example scores of shape (seeds, examples).

    Row i of `a` and of `b` is the same fine-tuning seed and column j the same dev example (paired).
    Each resample draws, from `numpy.random.default_rng(seed)`, first `seeds` row indices then
    `examples` column indices (both with replacement), and applies the same draw to a and b. The
    percentiles are numpy's default (linear) quantiles. None with one seed: seed noise cannot be
    resampled from a single run.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"paired scores must have the same (seeds, examples) shape, got {a.shape} and {b.shape}")
    n_seeds, n_examples = a.shape
    if n_seeds < 2 or n_examples < 1:
        return None
    d = a - b  # (S, E): the paired per-example differences
    rng = np.random.default_rng(seed)
    stats = np.empty(resamples)
    for r in range(resamples):
        rows = np.bincount(rng.integers(0, n_seeds, n_seeds), minlength=n_seeds)  # times each seed is drawn
        cols = np.bincount(rng.integers(0, n_examples, n_examples), minlength=n_examples)
        stats[r] = rows @ d @ cols / (n_seeds * n_examples)  # the mean of d over the drawn grid
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return Interval(float(d.mean()), float(low), float(high), n_seeds, PAIRED_BOOTSTRAP, confidence)


def fmt_interval(interval: Optional[Interval], decimals: int = 1, signed: bool = False) -> str:
    """'[83.1, 85.3]'; '[-0.4, +2.1]' when signed (a difference)."""
    if interval is None:
        return "no interval"
    spec = f"+.{decimals}f" if signed else f".{decimals}f"
    return f"[{interval.low:{spec}}, {interval.high:{spec}}]"


__all__ = [
    "BOOTSTRAP_RESAMPLES", "CONFIDENCE", "Interval", "PAIRED_BOOTSTRAP", "PAIRED_T_OVER_SEEDS", "T_OVER_SEEDS",
    "fmt_interval", "paired_bootstrap", "paired_differences", "paired_t_interval", "t_interval",
]
