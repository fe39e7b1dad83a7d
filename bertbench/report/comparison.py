"""Comparisons between two variants of a report, by one estimator: the multi-bootstrap (the comparison core,
beside `multibootstrap.py`; the tables that print comparisons are report.tables.paired and .claims).

A `Side` is one variant's runs on one paper task (or on several, as the GLUE-5 average: every task with
all of its own seeds, averaged with equal weight); `difference(a, b)` is a − b with its multi-bootstrap
interval (`bertbench.report.multibootstrap`): pre-training seeds, fine-tuning seeds and dev examples
resampled jointly, paired wherever the two sides share seeds and examples. The same comparison gives the
same number everywhere (a fixed RNG seed per comparison): the differences table, the claims table, and the
GLUE row's difference of averages. Pairing needs the same report row (task, task version, eval split): a
variant evaluated on another split or task version is never paired.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from bertbench.claims import DEFAULT_APPROACH
from bertbench.report.model import (Cell, ReportData, RowKey, Variant, component_for, is_degenerate,
                                    is_near_constant, metric_for, pretrain_seed)
from bertbench.report.multibootstrap import Component, Estimate, multi_bootstrap
from bertbench.report.multibootstrap import Side as Runs


@dataclass(frozen=True)
class Side:
    variant: Variant
    rows: tuple[RowKey, ...]  # the report rows the scores come from, one per score
    components: tuple[Component, ...]  # one per row, every seed it has
    degenerate: bool  # some seed of some row predicted one class for every example
    near_constant: bool = False  # some seed of some row predicted one label (value) for >= 95% of examples
    constant: bool = False  # every seed of every row predicted one class (one value) for every example
    # the most fine-tuning settings (protocols) a row's cell held: above 1, the cell is the best of them on dev (‡)
    best_of: int = 1

    @property
    def runs(self) -> Runs:
        return Runs(self.components, untrained=self.variant.random_init, checkpoints=checkpoints(self.variant))

    @property
    def n_runs(self) -> int:
        return sum(len(c.runs) for c in self.components)


@dataclass(frozen=True)
class Difference:
    a: Side
    b: Side
    estimate: Estimate  # a − b by the multi-bootstrap

    @property
    def degenerate(self) -> bool:
        return self.a.degenerate or self.b.degenerate

    @property
    def near_constant(self) -> bool:
        return self.a.near_constant or self.b.near_constant

    @property
    def best_of(self) -> int:
        """The most fine-tuning settings a side's cell chose its best from on dev (1: one protocol, no choice)."""
        return max(self.a.best_of, self.b.best_of)

    @property
    def unmeasured(self) -> Optional[str]:
        """Why no difference was measured although both sides ran, or None: two constant predictors (every seed
        of both sides degenerate; issue 40's RTE "+0.0 [+0.0, +0.0]"). Shown as – with its flag, never as a
        precise zero, and never judged."""
        return "⊘ both sides degenerate" if self.a.constant and self.b.constant else None

    @property
    def has_interval(self) -> bool:
        """Every task of both sides ran at least two seeds: a task with one run has no measured noise."""
        return _units(self.a) > 1 and _units(self.b) > 1

    @property
    def single_run_tasks(self) -> tuple[str, ...]:
        return tuple(sorted({c.task for s in (self.a, self.b) for c in s.components if len(c.runs) < 2}))


DEV_KINDS = ("dev", "devsplit")  # a comparison is made on dev (or a dev split we cut), never on test


def side(data: ReportData, variant: Variant, scores: Sequence[tuple[str, Optional[str]]],
         approach: str = DEFAULT_APPROACH, kinds: Sequence[str] = DEV_KINDS) -> Optional[Side]:
    """`variant`'s runs on each (task, metric) (`model.metric_for`), every seed of each; None if one is missing."""
    rows, comps, cells = [], [], []
    for ptask, pmetric in scores:
        metric, row = metric_for(data, variant, ptask, pmetric, approach, kinds)
        if metric is None:
            return None
        cell = data.cell(variant, row)
        comp = component_for(cell.records, metric, row.task)
        if comp is None:
            return None
        rows.append(row)
        comps.append(comp)
        cells.append(cell)
    return _flagged_side(variant, rows, comps, cells)


def row_side(data: ReportData, variant: Variant, row: RowKey) -> Optional[Side]:
    """`variant`'s runs on one report row, by the row's own metric."""
    cell = data.cell(variant, row)
    comp = component_for(cell.records, row.metric, row.task) if cell else None
    return None if comp is None else _flagged_side(variant, [row], [comp], [cell])


def _flagged_side(variant: Variant, rows: Sequence[RowKey], comps: Sequence[Component], cells: Sequence[Cell]) -> Side:
    """The side of `comps`, flagged as the cells they come from are."""
    return Side(variant, tuple(rows), tuple(comps), any(is_degenerate(c.records) for c in cells),
                any(is_near_constant(c.records) for c in cells), all(all_degenerate(c.records) for c in cells),
                max((c.n_settings for c in cells), default=1))


def gain_side(first: Side, last: Side) -> Optional[Side]:
    """Per run, the score at the last checkpoint minus the score at the first (how much it still gained): a
    run present at both; seeds only (a gain has no per-example statistics)."""
    comps = []
    for cf, cl in zip(first.components, last.components):
        at_first = dict(zip(cf.runs, cf.values))
        runs = tuple(r for r in cl.runs if r in at_first)
        if not runs:
            return None
        gains = tuple(v - at_first[r] for r, v in zip(cl.runs, cl.values) if r in at_first)
        comps.append(Component(cl.task, runs, gains))
    return Side(last.variant, last.rows, tuple(comps), first.degenerate or last.degenerate,
                first.near_constant or last.near_constant, first.constant and last.constant,
                max(first.best_of, last.best_of))


def checkpoints(variant: Variant) -> tuple[tuple[Optional[int], str], ...]:
    """(pre-training seed, the fingerprint of the model fine-tuned) of each of the variant's pre-training seeds: what
    the multi-bootstrap pairs two sides on (multibootstrap.Side.checkpoints)."""
    found = {(pretrain_seed(r.data), str(r.data["model"].get("fingerprint"))) for r in variant.records}
    return tuple(sorted(found, key=lambda x: (x[0] is not None, x[0] or 0, x[1])))


def all_degenerate(records) -> bool:
    """Every seed predicted one class (one value) for every example: a constant predictor, nothing to compare."""
    return bool(records) and all(bool((r.get("extra") or {}).get("degenerate")) for r in records)


def difference(a: Side, b: Side) -> Optional[Difference]:
    """a − b by the multi-bootstrap; None when the two sides come from different rows (nothing to pair)."""
    if [(r.task, r.task_version, r.eval_kind) for r in a.rows] != [(r.task, r.task_version, r.eval_kind) for r in b.rows]:
        return None
    return Difference(a, b, multi_bootstrap(a.runs, b.runs))


def _units(s: Side) -> int:
    return min(len(c.pretrain_seeds) if len(c.pretrain_seeds) > 1 else len(c.runs) for c in s.components)


__all__ = ["DEV_KINDS", "Difference", "Side", "all_degenerate", "checkpoints", "difference", "gain_side", "row_side",
           "side"]
