"""The tables that print comparisons between variants (the differences table, and the interval, covers and runs
cells the claims and masking tables share); the comparison itself is report.comparison's.
"""
from __future__ import annotations

from typing import Optional

from bertbench.report.comparison import Difference, Side, difference, row_side
from bertbench.report.model import MISSING, ReportData, Table
from bertbench.report.multibootstrap import EXAMPLES, FINETUNE, PRETRAIN, Estimate


COVERS_SHORT = {PRETRAIN: "P", FINETUNE: "F", EXAMPLES: "E"}
COVERS_NOTE = ("Covers: the sources of noise the interval resamples: P pre-training seeds, F fine-tuning seeds, "
               "E dev examples; a source shown in brackets is paired (one draw for both sides). A record without "
               "per-example statistics (F1 and MCC in records written before they were kept, STS-B's before its values "
               "were, SQuAD v2.0, and SQuAD v1.1 and CoNLL-2003 records written before they kept each question's "
               "scores and each sentence's entity counts) is resampled over seeds only. With one pre-training seed "
               "per variant (records without `pretrain_seed`), pre-training noise is not covered: a verdict is about these checkpoints, not "
               "about the procedure.")


def fmt_covers(est: Estimate) -> str:
    """'F·E' or '[F]·[E]' (paired); P appears only with several pre-training seeds on every pre-trained side
    (random init has none to resample); 'E 2/5 tasks' where only some tasks of a multi-task score hold them."""
    with_examples, components = est.examples_in
    shown = []
    for source in est.covers:
        text = f"[{COVERS_SHORT[source]}]" if source in est.paired else COVERS_SHORT[source]
        if source == EXAMPLES and with_examples < components:
            text += f" {with_examples}/{components} tasks"
        shown.append(text)
    return "·".join(shown)


def fmt_difference(diff: Optional[Difference], decimals: int = 1) -> tuple[str, str]:
    """('+2.3', '[+0.4, +4.2]'); ('+2.3', 'no interval (1 run)'); ('–', '–') with nothing compared; ('–',
    '– (⊘ both sides degenerate)') for a difference not measured (`Difference.unmeasured`)."""
    if diff is None:
        return MISSING, MISSING
    if diff.unmeasured:
        return MISSING, f"{MISSING} ({diff.unmeasured})"
    est = diff.estimate
    value = f"{est.estimate:+.{decimals}f}"
    if not diff.has_interval:
        return value, "no interval (1 run a side)"
    return value, f"[{est.low:+.{decimals}f}, {est.high:+.{decimals}f}]"


def fmt_runs(diff: Difference) -> str:
    """'3/3' runs a side ('3–5/3–5' over tasks with different seeds); with pre-training seeds: '2×3/2×3'."""
    def one(s: Side) -> str:
        pres = {p for c in s.components for p in c.pretrain_seeds}
        low, high = min(len(c.runs) for c in s.components), max(len(c.runs) for c in s.components)
        if len(pres) > 1:
            low, high = low // len(pres), high // len(pres)
        runs = str(low) if low == high else f"{low}–{high}"
        return f"{len(pres)}×{runs}" if len(pres) > 1 else runs
    return f"{one(diff.a)}/{one(diff.b)}"


# --- the table of differences against each size's MLM+NSP -------------------------------------------------

REFERENCE = "MLM+NSP"  # the paper's BERT: every other variant of the same size is set against it


def differences_table(data: ReportData) -> Table:
    """The same size's MLM+NSP minus every other variant, per row, by the multi-bootstrap (the claims' direction)."""
    header = ("Task", "Split", "Metric", "Difference", "Mean", "95% interval", "Covers", "Runs a/b")
    rows = []
    for row in data.rows:
        for ref in (v for v in data.variants if v.objective == REFERENCE):
            b = row_side(data, ref, row)
            if b is None:
                continue
            for other in data.variants:
                if other is ref or other.size != ref.size or other.external is not None:
                    continue  # an external model is no ablation of ours: a user claim compares it
                a = row_side(data, other, row)
                if a is None:
                    continue
                # MLM+NSP first, as every claim puts it: the same call, the same draws, the same number
                diff = difference(b, a)
                value, interval = fmt_difference(diff)
                flag = (" ⊘" if diff.degenerate else "") + (" ≈" if diff.near_constant else "")
                rows.append((row.shown_task + ("" if row.task_version == 1 else f" v{row.task_version}"), row.eval_kind,
                             row.metric, f"{ref.label} − {other.label}{flag}", value, interval,
                             fmt_covers(diff.estimate), fmt_runs(diff)))
    notes = ("The multi-bootstrap (Sellam et al., The MultiBERTs, 2021): pre-training seeds, fine-tuning seeds and "
             "dev examples are resampled jointly, paired where both sides share them; the interval is the estimate "
             "± t·SE (SE over the replicates, Satterthwaite degrees of freedom over the seed units). The mean uses "
             "every seed of each side. ⊘: a side has a degenerate seed (one class for every example); ≈: a side "
             "has a near-constant seed (≥ 95% one label or value).", COVERS_NOTE)
    return Table("differences", f"Differences: {REFERENCE} − each other variant", header, tuple(rows), notes)


__all__ = ["COVERS_NOTE", "REFERENCE", "differences_table", "fmt_covers", "fmt_difference", "fmt_runs"]
