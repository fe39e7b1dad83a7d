"""The whole report: every table of `report.tables`, in the order a reader meets them,
plus the plots made beside it (`Figures`). What the renderers (`report.render`) turn into text."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

from bertbench.report.model import ReportData, Table, size_variants
from bertbench.report.tables.ablations import table5, table6, table8
from bertbench.claims import load_claims
from bertbench.report.claims import evaluate_study
from bertbench.report.tables.claims import claims_table
from bertbench.report.tables.figure5 import figure5_table, series
from bertbench.report.tables.main import main_table
from bertbench.report.tables.masking import masking_ratio_table, ratio_series
from bertbench.report.tables.paired import differences_table
from bertbench.report.tables.protocol import protocol_table
from bertbench.report.tables.provenance import provenance_table
from bertbench.report.tables.seeds import pretraining_seeds_table


@dataclass(frozen=True)
class Figures:
    """Plots made beside the report, as paths relative to the markdown file."""

    task_plots: Mapping[str, str] = field(default_factory=dict)  # row label -> png
    curves_plot: Optional[str] = None
    curve_notes: Mapping[str, str] = field(default_factory=dict)  # variant label -> what happened
    figure5_plots: Mapping[str, str] = field(default_factory=dict)  # row name -> png (score against tokens)
    masking_plot: Optional[str] = None  # GLUE-5 against the masking ratio


@dataclass(frozen=True)
class Report:
    title: str
    summary: str
    tables: tuple[Table, ...]
    figures: Optional[Figures] = None
    questions: tuple[str, ...] = ()  # keys of the tables that answer the study's own question (shown beside its main table)
    outcomes: tuple = ()  # the claims' judged comparisons (report.claims.Outcome) the claims table prints


def build_report(data: ReportData, *, title: str = "bertbench report", figures: Optional[Figures] = None,
                 user_claims: Sequence = (), preregistration=None) -> Report:
    """The report; `user_claims` (report.claims.Claim: claims.yaml's beside the records, `--claim`'s) join the
    paper's in the claims table, and a `preregistration` (bertbench.registration) judges its claims as one
    family, the rest as exploratory."""
    tasks = sorted({r.task for r in data.rows})
    summary = (f"{data.n_records} result records: {len(data.variants)} variant(s) × {len(tasks)} task(s) "
               f"({', '.join(tasks) or 'none'}).")
    figure5 = (figure5_table(data),) if series(data) else ()
    masking = (masking_ratio_table(data),) if ratio_series(data) else ()
    seeds = pretraining_seeds_table(data)
    paper = load_claims(paper=data.paper)
    outcomes = tuple(evaluate_study(data, user_claims, preregistration, paper))
    tables = (main_table(data), differences_table(data), claims_table(data, outcomes, paper, preregistration),
              table5(data), table6(data),
              table8(data), *masking, *figure5, *((seeds,) if seeds else ()), protocol_table(data), provenance_table(data))
    # a study that sweeps the masking ratio, or pre-trains two or more sizes, asks that question
    questions = (("masking_ratio",) if masking else ()) + (("table6",) if len({v.size for v in size_variants(data)}) > 1 else ())
    return Report(title, summary, tables, figures, questions, outcomes)
