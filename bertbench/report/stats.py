"""95% intervals for the report's cells (`t_interval`): Student's t-interval of the mean over seeds, mean ±
t(0.975, n-1)·s/√n, named wherever it is printed (`Interval.method`); what it measures is docs/statistics.md's
"A cell". Comparisons between variants use `bertbench.report.multibootstrap` (tests/reference.py keeps the
textbook paired intervals it reduces to). With one value (n = 1) there is no interval: the functions return None,
and the report says so rather than printing a zero-width one.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from bertbench.claims import CONFIDENCE
from bertbench.report.multibootstrap import t_quantile
T_OVER_SEEDS = "t over seeds"


@dataclass(frozen=True)
class Interval:
    """An estimate (a mean, or a mean difference) with its two-sided interval."""

    estimate: float
    low: float
    high: float
    n: int  # seeds (t) or seed pairs (paired)
    method: str
    confidence: float = CONFIDENCE


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE,
               method: str = T_OVER_SEEDS) -> Optional[Interval]:
    """Student's t-interval of the mean of `values`; None for fewer than two values (no interval)."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n < 2:
        return None
    mean = math.fsum(xs) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    # Computed here rather than with scipy's t.interval, which returns nan when every seed agrees (sd 0).
    half = t_quantile(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, method, confidence)


def fmt_interval(interval: Optional[Interval], decimals: int = 1, signed: bool = False) -> str:
    """'[83.1, 85.3]'; '[-0.4, +2.1]' when signed (a difference)."""
    if interval is None:
        return "no interval"
    spec = f"+.{decimals}f" if signed else f".{decimals}f"
    return f"[{interval.low:{spec}}, {interval.high:{spec}}]"


__all__ = ["Interval", "T_OVER_SEEDS", "fmt_interval", "t_interval"]
