"""The report's main table: every task row, our variants beside the paper's columns, the GLUE-score rows
and the notes that say how a cell is made."""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence

from bertbench.reference import PaperNumbers
from bertbench.report.model import (MISSING, Cell, GlueRow, ReportData, Table, direction, fmt_stats, glue_paper_number,
                                    glue_rows, is_degenerate, marks, near_constant_flags, paper_cell, paper_columns,
                                    seed_stats, turc_columns)
from bertbench.report.external import external_main_notes


BESIDE_METRICS = {"f1": "accuracy"}  # MRPC's F1 rewards a constant "paraphrase"; its accuracy is shown beside it


def main_table(data: ReportData) -> Table:
    paper = data.paper
    columns = paper_columns(data)
    header = ("Task", "Version", "Metric", "↑↓", "Split", *(v.label for v in data.variants),
              *(c[0] for c in columns))
    rows: list[tuple[str, ...]] = []
    for row in data.rows:
        for metric in (row.metric, BESIDE_METRICS.get(row.metric)):
            cells = [data.cell(variant, row) for variant in data.variants]
            if metric is None or not any(c and seed_stats(c.records, metric) for c in cells):
                continue
            shown = [fmt_stats(seed_stats(c.records, metric)) + marks(c) if c else MISSING for c in cells]
            at = row if metric == row.metric else dataclasses.replace(row, metric=metric)
            rows.append((row.shown_task, f"v{row.task_version}", metric, direction(metric), row.eval_kind, *shown,
                         *(paper_cell(paper, systems, sources, at) for _, systems, sources in columns)))
    glue_rows, glue_notes = _glue_rows(data, columns)
    rows.extend(glue_rows)
    return Table("main", "Results", header, tuple(rows), tuple(_main_notes(data) + glue_notes))


def _main_notes(data: ReportData) -> list[str]:
    paper = data.paper
    cells = [c for c in (data.cell(v, r) for v in data.variants for r in data.rows) if c is not None]
    notes = [
        "Our cells: mean [95% t-interval] (n = runs); one run has no interval. A cell of one pre-training seed "
        "(no P): the mean over its fine-tuning seeds, the interval over them: fine-tuning noise (initialisation, "
        "batch order) on this evaluation set, about that one checkpoint. A P-cell (P = its pre-training seeds, "
        "several): the mean of each pre-training seed's mean over its fine-tuning seeds, the t-interval over those "
        "P means (P − 1 degrees of freedom): pre-training and fine-tuning noise together, about the procedure. "
        "Paper cells: the published number and the split it was measured on. Comparisons between variants "
        "(differences, claims) use the multi-bootstrap instead, which says what it covers.",
        f"Paper columns: {', '.join(paper.main_table_sources)} (GLUE numbers are test-server scores; ours are not).",
    ]
    if turc_columns(data):
        notes.append(f"Turc et al. columns: {paper.turc_source}, GLUE test; shown for the sizes we ran.")
    devsplits = sorted({r.task for r in data.rows if r.eval_kind == "devsplit"})
    if devsplits:
        notes.append(f"devsplit rows ({', '.join(devsplits)}) are trained and evaluated on a split we cut from "
                     "the official data; the paper's number beside them is on the official split and not comparable.")
    versions: dict[str, set[int]] = defaultdict(set)
    for row in data.rows:
        versions[row.task].add(row.task_version)
    notes += [f"{task}: records of task versions {', '.join(map(str, sorted(vs)))} are separate rows, never averaged."
              for task, vs in sorted(versions.items()) if len(vs) > 1]
    if any(is_degenerate(c.records) for c in cells):
        notes.append("⊘ degenerate: at least one seed predicted one class (or one value) for every example; "
                     "such a cell never counts as a reproduction.")
    notes.append(_near_constant_note(cells))
    notes.extend(external_main_notes(data.variants))
    if any(c.n_settings > 1 for c in cells):
        notes.append("‡ best of several fine-tuning settings by mean, chosen on this evaluation split "
                     "(as the paper chose the learning rate on dev): optimistic.")
    return notes


def _near_constant_note(cells: Sequence[Cell]) -> str:
    flags = [f for c in cells for f in near_constant_flags(c.records)]
    unknown = sum(f is None for f in flags)
    text = (f"≈ near-constant: at least one seed predicted one label (one value) for ≥ 95% of the examples; flagged "
            f"like ⊘, such a cell never counts as a reproduction ({sum(f is True for f in flags)} of {len(flags)} "
            "records).")
    if unknown:
        text += (f" {unknown} records (written before records kept per-example predictions, or span and token "
                 "tasks) cannot be checked: their cells carry no ≈ either way.")
    return text


def _glue_rows(data: ReportData, columns: Sequence[tuple]) -> tuple[list[tuple[str, ...]], list[str]]:
    """The main table's GLUE-score rows, paper columns over the same set of scores, and their notes."""
    paper = data.paper
    rows, notes = [], []
    for glue in glue_rows(data):
        ours = [f"{glue.ours[v.label]:.1f}{glue.marks.get(v.label, '')}" if v.label in glue.ours else MISSING
                for v in data.variants]
        rows.append((glue.label, MISSING, glue.metric, "↑", "/".join(glue.eval_kinds), *ours,
                     *(_glue_paper_cell(paper, systems, sources, glue) for _, systems, sources in columns)))
    if rows:
        notes.append("GLUE score as Table 1's Average: the mean of MNLI-m, MNLI-mm, QQP F1, QNLI, SST-2, CoLA MCC, "
                     "STS-B Spearman, MRPC F1 and RTE (9 scores of 8 tasks, no WNLI), over our per-task means. "
                     "A partial row averages only the tasks we have, and the paper cells beside it average the same "
                     "scores of the paper's rows (marked 'same k'); devsplit tasks are not counted.")
        shown = "; ".join(f"{n.system} {n.value:.1f}" for n in paper.find(task="glue", metric="leaderboard_score")
                          if n.source != paper.turc_source)
        notes.append(f"Not Table 1's average: the official GLUE leaderboard scores quoted in the paper ({shown}) "
                     "include WNLI; Turc et al.'s README 'Score' is a leaderboard score too.")
    return rows, notes


def _glue_paper_cell(paper: PaperNumbers, systems: Sequence[str], sources: Sequence[str], glue: GlueRow) -> str:
    number = glue_paper_number(paper, systems, sources, glue)
    if number is None:
        return MISSING
    value, split, how = number
    return f"{value:.1f} ({split}{'' if how is None else f', {how}'})"
