"""The results table for the terminal: our variants beside the paper's model of our size, in 100 columns.

The markdown report holds every paper column, interval and note, and `bertbench report --wide` prints
those tables on the terminal (`render_rich`). This one is the glance at the end of a run: a row per variant (its label on
one line with its numbers), a row per paper model of the sizes we ran, a column per row of the main
table. Columns that do not fit the width continue in another table that repeats the row labels, so no
cell ever wraps.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from bertbench.report.build import Report
from bertbench.claims import DEFAULT_APPROACH
from bertbench.report.model import (
    MISSING, PaperColumnSpec, ReportData, RowKey, Stats, direction, fmt_value, glue_paper_number, glue_rows, marks,
    paper_number_for, pretrain_seed, seed_stats, turc_column,
)

TERMINAL_WIDTH = 100  # the width the table fits when the output is not a terminal (a log file, a pipe)


@dataclass(frozen=True)
class ShortTable:
    """Row labels (our variants, then the paper's models), and columns as (header, one cell per label)."""

    labels: tuple[str, ...]
    n_ours: int  # the first n_ours labels are our variants
    columns: tuple[tuple[str, tuple[str, ...]], ...]
    notes: tuple[str, ...]
    n_external: int = 0  # after ours, the models we did not pre-train (a section of their own), then the paper's


def closest_paper_columns(data: ReportData) -> list[PaperColumnSpec]:
    """For each size we ran, the paper model of that shape (the BERT paper's Base and Large, Turc et al.'s
    smaller ones); the paper's first column when none matches."""
    paper = data.paper
    out: list[PaperColumnSpec] = []
    for size in dict.fromkeys(v.size for v in data.variants):
        same = [(c.name, c.systems, paper.main_table_sources) for c in paper.columns if c.size == size]
        column = same[0] if same else turc_column(paper, size)
        if column is not None and column not in out:
            out.append(column)
    first = paper.columns[0]
    return out or [(first.name, first.systems, paper.main_table_sources)]


def fmt_short(stats: Optional[Stats]) -> str:
    """'84.2±1.1': the mean over seeds ± half its 95% t-interval; '84.2' for one seed; '–' for none."""
    if stats is None:
        return MISSING
    if stats.interval is None:
        return f"{stats.mean:.1f}"
    return f"{stats.mean:.1f}±{(stats.interval.high - stats.interval.low) / 2:.1f}"


def _header(data: ReportData, row: RowKey, several_versions: bool) -> str:
    """Task (with its version when several are shown), the approach unless fine-tuning, split and metric."""
    metric = data.paper.metrics.get(data.paper.paper_metric(row.metric), row.metric)
    lines = [f"{row.task} v{row.task_version}" if several_versions else row.task]
    if row.approach != DEFAULT_APPROACH:
        lines.append(row.approach)
    lines.append(f"{row.eval_kind} {metric} {direction(row.metric)}")
    return "\n".join(lines)


def _ours(data: ReportData, row: RowKey) -> tuple[str, ...]:
    cells = (data.cell(variant, row) for variant in data.variants)
    return tuple(fmt_short(seed_stats(cell.records, row.metric)) + marks(cell) if cell else MISSING for cell in cells)


def _paper(data: ReportData, column: PaperColumnSpec, row: RowKey) -> str:
    number, same_metric = paper_number_for(data.paper, column[1], column[2], row)
    if number is None:
        return MISSING
    text = f"{fmt_value(number.value, number.metric)} {number.split}"
    return text if same_metric else f"{text} {data.paper.metrics[number.metric]}"


def short_table(data: ReportData) -> ShortTable:
    paper_cols = closest_paper_columns(data)
    labels = (*(v.label for v in data.variants), *(name for name, _, _ in paper_cols))
    versions = Counter(task for task, _ in {(row.task, row.task_version) for row in data.rows})  # per task
    columns = [(_header(data, row, versions[row.task] > 1),
                (*_ours(data, row), *(_paper(data, col, row) for col in paper_cols))) for row in data.rows]
    for glue in glue_rows(data):
        ours = (f"{glue.ours[v.label]:.1f}{glue.marks.get(v.label, '')}" if v.label in glue.ours else MISSING
                for v in data.variants)
        theirs = []
        for _, systems, sources in paper_cols:
            number = glue_paper_number(data.paper, systems, sources, glue)
            theirs.append(MISSING if number is None else f"{number[0]:.1f} {number[1]}")
        header = "\n".join([*glue.label.replace(" (", "\n(").split("\n"), f"{'/'.join(glue.eval_kinds)} avg ↑"])
        columns.append((header, (*ours, *theirs)))
    p_variants = ", ".join(f"{v.label} P={n}" for v in data.variants
                           if (n := len({pretrain_seed(r.data) for r in v.records})) > 1)
    notes = (
        "Ours: mean ± half its 95% t-interval (one run: the mean alone): over fine-tuning seeds (fine-tuning noise, "
        "one checkpoint), or for a variant of several pre-training seeds"
        + (f" ({p_variants})" if p_variants else " (none here)")
        + " over their P means (pre-training and fine-tuning noise together); "
        "⊘ degenerate (one class, or a constant prediction, for every example), ‡ best of several settings on this "
        "split.",
        "Paper: the published number of the model of our size and its split; devsplit columns are ours, "
        "cut from the official data, so the paper's number beside them is not comparable. GLUE averages "
        "the paper's same scores (Table 1's Average when all are covered).",
    )
    n_external = sum(v.external is not None for v in data.variants)  # last among data.variants (collect's order)
    if n_external:
        notes += ("External models (not pre-trained by bertbench) are in the middle section, by their folder's name.",)
    return ShortTable(labels, len(data.variants) - n_external, tuple(columns), notes, n_external)


def render_short(table: ShortTable, width: int = TERMINAL_WIDTH) -> list:
    """The table as rich tables no wider than `width`: columns that do not fit go to the next table, which
    repeats the row labels."""
    from rich import box
    from rich.console import Console
    from rich.markup import escape  # a label is text: "tiny MLM+NSP [ab12cd34]" is no markup tag to drop
    from rich.table import Table as RichTable

    measure = Console(width=10 * width)

    def build(columns: list, title: str) -> RichTable:
        rich_table = RichTable(title=title, box=box.SIMPLE_HEAD, title_justify="left", show_edge=False,
                               collapse_padding=True)
        rich_table.add_column("Model", no_wrap=True)
        for header, _ in columns:
            rich_table.add_column(header, no_wrap=True, justify="right")
        for i, label in enumerate(table.labels):
            rich_table.add_row(escape(label), *(cells[i] for _, cells in columns),
                               end_section=i in (table.n_ours - 1, table.n_ours + table.n_external - 1))
        return rich_table

    out, chunk = [], []
    for column in table.columns:
        if chunk and measure.measure(build([*chunk, column], "")).maximum > width:
            out.append(chunk)
            chunk = []
        chunk.append(column)
    out.append(chunk)
    return [build(chunk, "Results" if i == 0 else "Results (continued)") for i, chunk in enumerate(out)]


def print_short(data: ReportData, report_file: Optional[Path] = None, console=None) -> None:
    """The short table and its notes on `console`; by default the terminal's width, or 100 columns in a log."""
    import os

    from rich.console import Console

    if console is None:
        console = Console()
        if not console.is_terminal and "COLUMNS" not in os.environ:  # a log or a pipe: rich would assume 80
            console = Console(width=TERMINAL_WIDTH)
    table = short_table(data)
    for rich_table in render_short(table, console.width):
        console.print(rich_table)
        console.print()
    for note in table.notes:
        console.print(note, highlight=False)
    where = f"{report_file} or " if report_file is not None else ""
    console.print(f"Every paper column, the intervals' ends and the ablation tables: {where}bertbench report --wide",
                  highlight=False)


__all__ = ["TERMINAL_WIDTH", "ShortTable", "closest_paper_columns", "fmt_short", "print_short", "render_short", "short_table"]


def render_rich(report: Report) -> list:
    """The tables as `rich.table.Table`s, for the terminal."""
    from rich.markup import escape  # cells are text: a "[ab12cd34]" fingerprint is no markup tag to drop
    from rich.table import Table as RichTable

    out = []
    for table in report.tables:
        if not table.rows:
            continue
        rich_table = RichTable(title=table.title, show_lines=False)
        for name in table.header:
            rich_table.add_column(name, overflow="fold")
        for row in table.rows:
            rich_table.add_row(*(escape(cell) if isinstance(cell, str) else cell for cell in row))
        out.append(rich_table)
    return out
