"""The paper's ablation tables beside ours: Table 5 (pre-training tasks), Table 6 (model size) and Table 8
(masking procedures)."""
from __future__ import annotations

import math
from typing import Optional

from bertbench.config import is_masked
from bertbench.claims import DEFAULT_APPROACH, masking_suffix
from bertbench.reference import PaperNumbers
from bertbench.report.model import (MISSING, ReportData, Table, Variant, fmt_count, fmt_shape, fmt_stats, fmt_value,
                                    marks, size_variants, stats_for)
from bertbench.results import mask_procedure


ABLATION_KINDS = ("dev", "devsplit", "test")  # the paper's ablations are on dev; others stand in, marked †


def _ours_cell(data: ReportData, variant: Variant, ptask: str, pmetric: str, approach: str,
               stand_ins: set[str]) -> str:
    stats, row = stats_for(data, variant, ptask, pmetric, approach, ABLATION_KINDS)
    if stats is None:
        return MISSING
    shown = fmt_stats(stats) + marks(data.cell(variant, row))  # the main table's marks travel with every copy
    if row.eval_kind != "dev":
        stand_ins.add(f"{row.task} ({row.eval_kind}) for {data.paper.tasks[ptask]}")
        return shown + " †"
    return shown


def _paper_rows(paper: PaperNumbers, source: str) -> list[str]:
    return list(dict.fromkeys(n.system for n in paper.find(source=source)))


def _paper_value(paper: PaperNumbers, source: str, system: str, ptask: str, pmetric: str,
                 approach: Optional[str] = None) -> str:
    for n in paper.find(source=source, system=system, task=ptask, metric=pmetric):
        if approach is None or n.config.get("approach", DEFAULT_APPROACH) == approach:
            return fmt_value(n.value, n.metric)
    return MISSING


def _with_data(rows: list[tuple[str, ...]], first_data_col: int) -> list[tuple[str, ...]]:
    """Our rows that have at least one number (a variant with no records for a table is left out)."""
    return [row for row in rows if any(c != MISSING for c in row[first_data_col:])]


def _stand_in_note(stand_ins: set[str]) -> list[str]:
    notes = ["Our rows: variants with records for at least one column; missing cells are –, never zero."]
    if stand_ins:
        notes.append("† stands in for the paper's dev set: " + "; ".join(sorted(stand_ins)) + ".")
    return notes


def table5(data: ReportData) -> Table:
    """Pre-training tasks: MLM+NSP / no NSP / LTR (and random init) beside the paper's Table 5."""
    paper, source = data.paper, "BERT paper Table 5"
    cols = (("mnli_m", "accuracy"), ("qnli", "accuracy"), ("mrpc", "accuracy"), ("sst2", "accuracy"),
            ("squad_v1", "f1"))
    header = ("Model", *(f"{paper.tasks[t]} ({paper.metrics[m]})" for t, m in cols))
    stand_ins: set[str] = set()
    rows = _with_data([(v.label, *(_ours_cell(data, v, t, m, DEFAULT_APPROACH, stand_ins) for t, m in cols))
                       for v in data.variants if not masking_suffix(v.pretraining) and v.external is None], 1)
    rows += [(f"paper: {system}", *(_paper_value(paper, source, system, t, m) for t, m in cols))
             for system in _paper_rows(paper, source)]
    notes = ["Paper rows: BERT-Base architecture, dev. 'LTR & No NSP' is a left-to-right model like ours; "
             "'+ BiLSTM' adds a randomly initialised BiLSTM at fine-tuning only.", *_stand_in_note(stand_ins)]
    return Table("table5", "Ablation: pre-training tasks (paper Table 5, dev)", header, tuple(rows), tuple(notes))


def _perplexity(variant: Variant) -> str:
    loss, _ = variant.pretraining_mean("heldout", "mlm_loss")
    return MISSING if loss is None else f"{math.exp(loss):.2f}" if loss < 700 else "inf"


def table6(data: ReportData) -> Table:
    """Model size: held-out MLM perplexity and dev accuracy by size, beside the paper's Table 6."""
    paper, source = data.paper, "BERT paper Table 6"
    cols = (("mnli_m", "accuracy"), ("mrpc", "accuracy"), ("sst2", "accuracy"))
    header = ("Model", "L/H/A", "Tokens seen", "LM (ppl)", *(f"{paper.tasks[t]} ({paper.metrics[m]})" for t, m in cols))
    stand_ins: set[str] = set()
    rows = _with_data([(v.label, fmt_shape(v.size), fmt_count(v.pretraining_mean("tokens_seen")[0]), _perplexity(v),
                        *(_ours_cell(data, v, t, m, DEFAULT_APPROACH, stand_ins) for t, m in cols))
                       for v in size_variants(data)], 3)
    for system in _paper_rows(paper, source):
        cfg = paper.find(source=source, system=system)[0].config
        rows.append((f"paper: {system}", f"{cfg['layers']}/{cfg['hidden']}/{cfg['heads']}", MISSING,
                     _paper_value(paper, source, system, "mlm_heldout", "perplexity"),
                     *(_paper_value(paper, source, system, t, m) for t, m in cols)))
    # Turc et al.'s small BERTs of the sizes we ran (their GLUE test scores; no LM perplexity published)
    ran = {v.size for v in data.variants if v.pretraining is not None}
    turc = [(size, system) for size, system in paper.turc_sizes.items() if size in ran]
    for size, system in turc:
        rows.append((f"Turc et al.: {system} (test)", fmt_shape(size), MISSING, MISSING,
                     *(_paper_value(paper, paper.turc_source, system, t, m) for t, m in cols)))
    notes = ["Tokens seen: our pre-training's, the mean over its seeds; at equal minutes a larger model sees fewer. "
             "LM (ppl): exp of the mean held-out masked-LM loss (averaged over the pre-training seeds). The paper's is on held-out BooksCorpus+Wikipedia "
             "with its 30k vocabulary; ours is on our own held-out data and vocabulary, so only our rows compare "
             "with each other.",
             "Paper cells are averages of 5 fine-tuning restarts."
             + (f" Turc et al. rows: {paper.turc_source}, the released small BERTs of our sizes, GLUE test scores "
                "(best of their fine-tuning grid), not dev." if turc else ""), *_stand_in_note(stand_ins)]
    return Table("table6", "Ablation: model size (paper Table 6, dev)", header, tuple(rows), tuple(notes))


def table8(data: ReportData) -> Table:
    """Masking procedures: MNLI and NER (fine-tuning, feature-based) beside the paper's Table 8."""
    paper, source = data.paper, "BERT paper Table 8"
    cols = (("mnli_m", "accuracy", DEFAULT_APPROACH), ("conll2003", "f1", DEFAULT_APPROACH),
            ("conll2003", "f1", "feature-based"))
    header = ("Model", "MASK", "SAME", "RND", "MNLI-m (Acc)", "NER fine-tune (F1)", "NER feature-based (F1)")
    stand_ins: set[str] = set()
    rows = []
    for v in data.variants:
        if v.pretraining is None or not is_masked(v.pretraining["objective"]):
            continue
        procedure = mask_procedure(v.pretraining)
        shown = [f"{x:.4g}%" for x in procedure] if procedure else [MISSING] * 3
        rows.append((v.label, *shown, *(_ours_cell(data, v, t, m, a, stand_ins) for t, m, a in cols)))
    rows = _with_data(rows, 4)
    for system in _paper_rows(paper, source):
        cfg = paper.find(source=source, system=system)[0].config
        rows.append((f"paper: {system}", f"{cfg['mask']}%", f"{cfg['same']}%", f"{cfg['random']}%",
                     *(_paper_value(paper, source, system, t, m, a) for t, m, a in cols)))
    notes = ["MASK / SAME / RND: the share of selected positions replaced by [MASK], kept, or replaced by a random "
             "token. Paper rows: BERT-Base, dev; its 80/10/10 MNLI-m is 84.2 here but 84.4 in Tables 5 and 6 "
             "(within-paper noise of ±0.2-0.3). The paper's feature-based NER concatenates the last 4 layers.",
             *_stand_in_note(stand_ins)]
    return Table("table8", "Ablation: masking procedure (paper Table 8, dev)", header, tuple(rows), tuple(notes))
