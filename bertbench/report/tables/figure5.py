"""The paper's Figure 5 at our scale: fine-tuned dev score against the pre-training tokens of the checkpoint.

The points are the checkpoint series of `ReportData.checkpoints` (several checkpoints of one
pre-training run, each fine-tuned; their records carry `model.pretraining.tokens_seen`). The paper
prints no table for the figure, so the report describes its claim in words and shows no paper number.
"""
from __future__ import annotations

from bertbench.claims import DEFAULT_APPROACH
from bertbench.report.model import ReportData, RowKey, Table, Variant, fmt_stats, seed_stats

OBJECTIVES = ("MLM+NSP", "LTR (causal)")  # the figure's two curves
PAPER_CLAIM = (
    "The paper's Figure 5 (Appendix C.1) plots BERT-Base MNLI dev accuracy after fine-tuning against the number of "
    "pre-training steps, for MLM and for a left-to-right model. In words: the MLM model converges slightly slower "
    "than the LTR model (the paper's question: only 15% of the tokens of a batch are predicted), yet it begins to outperform the LTR model "
    "in absolute accuracy almost immediately; BERT-Base also gains almost 1.0% on MNLI from 500k to 1M steps. "
    "The paper gives the figure only, no table: no paper number is shown here."
)


def series(data: ReportData) -> list[tuple[str, tuple[Variant, ...]]]:
    """(label, checkpoints fewest tokens first) for the figure's objectives, in report column order."""
    order = {v.label: i for i, v in enumerate(data.variants)}
    return sorted(((label, vs) for label, vs in data.checkpoints.items() if vs[0].objective in OBJECTIVES),
                  key=lambda item: order.get(item[0], len(order)))


def rows_with_points(data: ReportData) -> list[RowKey]:
    """Dev rows (fine-tuning) where some series has at least two fine-tuned checkpoints."""
    return [row for row in data.rows if row.eval_kind in ("dev", "devsplit") and row.approach == DEFAULT_APPROACH
            and any(sum(data.cell(v, row) is not None for v in vs) >= 2 for _, vs in series(data))]


def figure5_table(data: ReportData) -> Table:
    rows = rows_with_points(data)
    header = ("Variant", "Pre-training tokens", *(f"{r.task} ({r.metric})" for r in rows))
    body = []
    for label, checkpoints in series(data):
        for v in checkpoints:
            cells = [(data.cell(v, row), row.metric) for row in rows]
            body.append((label, f"{v.tokens_seen:,}", *(fmt_stats(seed_stats(c.records, m)) if c else "–" for c, m in cells)))
    notes = (PAPER_CLAIM, "Ours: mean over fine-tuning seeds [95% t-interval over seeds] for each checkpoint of one "
             "pre-training run; the last checkpoint is the model in the tables above.")
    return Table("figure5", "Figure 5 at our scale: dev score against pre-training tokens", header,
                 tuple(body) if rows else (), notes)


__all__ = ["OBJECTIVES", "PAPER_CLAIM", "figure5_table", "rows_with_points", "series"]
