"""The masking ratio: the GLUE-5 average against the share of tokens masked, one size at a time.

The paper fixes 15%; Wettig et al. (2023, "Should You Mask 15% in Masked Language Modeling?") found 40% better
at BERT-Large size, and the best ratio lower for smaller models. A size takes part when its MLM+NSP variants,
with the paper's procedure (80/10/10, WordPiece masking), ran at two ratios or more. Each row: the ratio's
GLUE-5 average with its multi-bootstrap interval, and its difference from the paper's 15% (the same estimator
as every other comparison of the report, `report.tables.paired`).
"""
from __future__ import annotations

from typing import Optional

from bertbench.config import PAPER_MASK_RATIO
from bertbench.claims import masking_suffix, objective_label
from bertbench.report.model import MISSING, ReportData, Table, Variant, glue_rows
from bertbench.report.multibootstrap import multi_bootstrap
from bertbench.report.comparison import difference, side
from bertbench.report.tables.paired import COVERS_NOTE, fmt_covers, fmt_difference, fmt_runs

OBJECTIVE = "MLM+NSP"


def _ratio(v: Variant) -> Optional[float]:
    """The masking ratio of an MLM+NSP variant with the paper's procedure and WordPiece masking; else None."""
    pre = v.pretraining or {}
    # masking_suffix names every departure from the paper's masking: with the ratio set to 15%, none may be left
    if not pre or objective_label(pre) != OBJECTIVE or masking_suffix({**pre, "mask_ratio": PAPER_MASK_RATIO}):
        return None
    return float(pre.get("mask_ratio") or PAPER_MASK_RATIO)


def ratio_series(data: ReportData) -> list[tuple[str, list[tuple[float, Variant]]]]:
    """(size, [(ratio, variant), lowest ratio first]) for each size with two ratios or more."""
    by_size: dict[str, list[tuple[float, Variant]]] = {}
    for v in data.variants:
        ratio = _ratio(v)
        if ratio is not None:
            by_size.setdefault(v.size, []).append((ratio, v))
    return [(size, sorted(points, key=lambda p: p[0])) for size, points in by_size.items() if len(points) >= 2]


def glue5_scores(data: ReportData) -> tuple[tuple[str, str], ...]:
    """The (paper task, paper metric) pairs of the report's GLUE row with the most scores (GLUE-5 in our studies)."""
    rows = glue_rows(data)
    return tuple((task, metric) for task, metric, _ in rows[0].covered) if rows else ()


def ratio_points(data: ReportData):
    """For the table and the plot: (size, [(ratio, variant, score estimate or None)])."""
    scores = glue5_scores(data)
    out = []
    for size, points in ratio_series(data):
        sides = [(ratio, v, side(data, v, scores) if scores else None) for ratio, v in points]
        out.append((size, [(ratio, v, multi_bootstrap(s.runs) if s is not None else None, s) for ratio, v, s in sides]))
    return out


def heldout_mlm(v: Variant) -> str:
    """Held-out MLM accuracy scored with the paper's 15% masking (comparable across training ratios), the mean
    over the variant's pre-training seeds; '–' in records written before it was kept."""
    accuracy, seeds = v.pretraining_mean("heldout", "mlm_accuracy_paper_masking")
    return MISSING if accuracy is None else f"{accuracy:.1f}%" + (f" (mean of {seeds})" if seeds > 1 else "")


def masking_ratio_table(data: ReportData) -> Table:
    scores = glue5_scores(data)
    header = ("Size", "Masking ratio", "Held-out MLM (15% masking)", "GLUE-5 (dev)", "95% interval", "− 15%", "95% interval", "MDE (80%)",
              "Covers", "Runs")
    body = []
    for size, rows in ratio_points(data):
        paper = next((s for r, _, _, s in rows if abs(r - PAPER_MASK_RATIO) < 1e-9), None)
        for ratio, v, est, s in rows:
            if est is None:
                continue
            diff = difference(s, paper) if paper is not None and s is not paper else None
            value, interval = fmt_difference(diff)
            body.append((size, f"{100 * ratio:.4g}%", heldout_mlm(v), f"{est.estimate:.1f}", f"[{est.low:.1f}, {est.high:.1f}]",
                         value, interval, f"{diff.estimate.mde():.1f}" if diff else MISSING,
                         fmt_covers(est), fmt_runs(diff) if diff else str(s.n_runs)))
    what = ", ".join(f"{data.paper.tasks[t]} {data.paper.metrics[m]}" for t, m in scores) or MISSING
    notes = ("GLUE-5: the mean of " + what + ", every seed of every task, by the multi-bootstrap; − 15%: this "
             "ratio minus the paper's 15% at the same size, paired where both share seeds and examples. Only MLM+NSP "
             "variants with the paper's 80/10/10 procedure and WordPiece masking take part. Held-out MLM: accuracy "
             "on held-out text masked at the paper's 15% whatever the training ratio (a model trained at 40% is not "
             "scored on a harder test), the mean over pre-training seeds.",
             "Wettig et al. (2023) found 40% better than 15% at BERT-Large size (GLUE and SQuAD), and the best ratio "
             "lower for smaller models; the BERT paper fixes 15% and does not ablate it.", COVERS_NOTE)
    return Table("masking_ratio", "Masking ratio: GLUE-5 against the share of tokens masked", header, tuple(body), notes)


__all__ = ["glue5_scores", "heldout_mlm", "masking_ratio_table", "ratio_points", "ratio_series"]
