"""Paired differences between two variants of a report: same task row, same seeds, same dev examples.

A `Side` is one variant's per-seed score on one paper task (or the per-seed mean over several, as
the GLUE-5 average); `difference(a, b)` pairs two sides by seed and gives the mean of a − b with
its paired 95% t-interval over seeds (`bertbench.report.stats`). Pairing needs the same report row (task,
task version, eval split): a variant evaluated on another split or task version is never paired.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from bertbench.report.model import (
    DEFAULT_APPROACH,
    MISSING,
    ReportData,
    RowKey,
    Table,
    Variant,
    stats_for,
    is_degenerate,
    seed_stats,
)
from bertbench.report.stats import Interval, fmt_interval, paired_bootstrap, paired_differences, paired_t_interval


@dataclass(frozen=True)
class Side:
    variant: Variant
    rows: tuple[RowKey, ...]  # the report rows the scores come from, one per score
    by_seed: dict[int, float]  # the score (or the mean of the scores) per seed that has all of them
    degenerate: bool  # some seed of some row predicted one class for every example
    examples: Optional[dict[int, str]] = None  # accuracy only: seed -> "0"/"1" per dev example (extra.example_correct)


@dataclass(frozen=True)
class Difference:
    a: Side
    b: Side
    seeds: tuple[int, ...]  # the seeds both ran
    estimate: Optional[float]  # mean of a − b over those seeds; None when none pair up
    interval: Optional[Interval]  # None with fewer than two pairs
    bootstrap: Optional[Interval] = None  # over seeds × dev examples, when both sides hold per-example scores

    @property
    def degenerate(self) -> bool:
        return self.a.degenerate or self.b.degenerate


DEV_KINDS = ("dev", "devsplit")  # a comparison is made on dev (or a dev split we cut), never on test


def side(data: ReportData, variant: Variant, scores: Sequence[tuple[str, str]],
         approach: str = DEFAULT_APPROACH, kinds: Sequence[str] = DEV_KINDS) -> Optional[Side]:
    """`variant`'s per-seed score on each (paper task, paper metric), averaged per seed; None if one is missing."""
    rows, per_score, degenerate, examples = [], [], False, None
    for ptask, pmetric in scores:
        stats, row = stats_for(data, variant, ptask, pmetric, approach, kinds)
        if stats is None:
            return None
        rows.append(row)
        per_score.append(stats.by_seed())
        records = data.cell(variant, row).records
        degenerate = degenerate or is_degenerate(records)
        if len(scores) == 1 and pmetric == "accuracy":
            found = {r["seed"]: (r.get("extra") or {}).get("example_correct") for r in records}
            examples = found if all(isinstance(v, str) for v in found.values()) else None
    seeds = sorted(set.intersection(*(set(s) for s in per_score)))
    by_seed = {seed: math.fsum(s[seed] for s in per_score) / len(per_score) for seed in seeds}
    return Side(variant, tuple(rows), by_seed, degenerate, examples)


def gain_side(first: Side, last: Side) -> Side:
    """Per seed, the score at the last checkpoint minus the score at the first (how much it still gained)."""
    seeds, gains = paired_differences(last.by_seed, first.by_seed)
    return Side(last.variant, last.rows, dict(zip(seeds, gains)), first.degenerate or last.degenerate)


def difference(a: Side, b: Side, bootstrap: bool = False) -> Optional[Difference]:
    """a − b paired by seed; None when the two sides come from different rows (nothing to pair). With
    `bootstrap`, also the paired bootstrap over seeds × dev examples where both sides hold per-example scores."""
    if [(r.task, r.task_version, r.eval_kind) for r in a.rows] != [(r.task, r.task_version, r.eval_kind) for r in b.rows]:
        return None
    seeds, diffs = paired_differences(a.by_seed, b.by_seed)
    estimate = math.fsum(diffs) / len(diffs) if diffs else None
    boot = _bootstrap(a, b, seeds) if bootstrap else None
    return Difference(a, b, seeds, estimate, paired_t_interval(a.by_seed, b.by_seed), boot)


def _bootstrap(a: Side, b: Side, seeds: Sequence[int]) -> Optional[Interval]:
    if a.examples is None or b.examples is None or len(seeds) < 2:
        return None
    rows_a, rows_b = [a.examples[s] for s in seeds], [b.examples[s] for s in seeds]
    if len({len(r) for r in rows_a + rows_b}) != 1:  # not the same dev examples: nothing to pair
        return None
    import numpy as np

    def grid(rows: list[str]) -> "np.ndarray":  # (seeds, examples), on the metric's 0-100 scale
        return 100.0 * (np.frombuffer("".join(rows).encode(), dtype=np.uint8) - ord("0")).reshape(len(rows), -1)

    return paired_bootstrap(grid(rows_a), grid(rows_b))


def fmt_difference(diff: Optional[Difference], decimals: int = 1) -> tuple[str, str]:
    """('+2.3', '[+0.4, +4.2]'); ('+2.3', 'no interval (1 seed pair)'); ('–', '–') with nothing paired."""
    if diff is None or diff.estimate is None:
        return MISSING, MISSING
    value = f"{diff.estimate:+.{decimals}f}"
    if diff.interval is None:
        return value, f"no interval ({len(diff.seeds)} seed pair)"
    return value, fmt_interval(diff.interval, decimals, signed=True)


# --- the table of differences against each size's MLM+NSP -------------------------------------------------

REFERENCE = "MLM+NSP"  # the paper's BERT: every other variant of the same size is set against it


def differences_table(data: ReportData) -> Table:
    """Every variant minus the same size's MLM+NSP, per row, paired by seed."""
    header = ("Task", "Split", "Metric", "Difference", "Mean", "95% interval", "Seed pairs")
    rows = []
    for row in data.rows:
        for ref in (v for v in data.variants if v.objective == REFERENCE):
            ref_cell = data.cell(ref, row)
            if ref_cell is None:
                continue
            ref_stats = seed_stats(ref_cell.records, row.metric)
            for other in data.variants:
                cell = data.cell(other, row)
                if other is ref or other.size != ref.size or cell is None:
                    continue
                stats = seed_stats(cell.records, row.metric)
                a = Side(other, (row,), stats.by_seed(), is_degenerate(cell.records))
                b = Side(ref, (row,), ref_stats.by_seed(), is_degenerate(ref_cell.records))
                diff = difference(a, b)
                value, interval = fmt_difference(diff)
                flag = " ⊘" if diff.degenerate else ""
                task = row.task if row.approach == DEFAULT_APPROACH else f"{row.task} ({row.approach})"
                rows.append((task + ("" if row.task_version == 1 else f" v{row.task_version}"), row.eval_kind,
                             row.metric, f"{other.label} − {ref.label}{flag}", value, interval,
                             str(len(diff.seeds))))
    notes = ("Paired: the difference is taken per fine-tuning seed (same seed, same evaluation examples), then "
             "averaged; the interval is the 95% t-interval over those per-seed differences. One pair has no "
             "interval. ⊘: a side has a degenerate seed (one class for every example).",)
    return Table("differences", f"Paired differences against {REFERENCE}", header, tuple(rows), notes)


__all__ = ["DEV_KINDS", "Difference", "REFERENCE", "Side", "difference", "differences_table", "fmt_difference", "gain_side", "side"]
