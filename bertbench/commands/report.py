"""`bertbench report`: result records -> tables beside the paper (terminal, markdown, CSV, JSON, plots)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from bertbench.cli_options import TasksDirOption


def report(
    results: Annotated[
        list[Path],
        typer.Argument(metavar="RESULTS_DIR",
                       help="Folders searched recursively for *.record.json result records, or record files."),
    ],
    out: Annotated[
        Optional[Path],
        typer.Option("--out", help="Write the markdown report here (e.g. reports/mine.md)."),
    ] = None,
    csv: Annotated[Optional[Path], typer.Option("--csv", help="Write the numbers in long form as CSV.")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write the numbers in long form as JSON.")] = None,
    plots: Annotated[
        Optional[Path], typer.Option("--plots", help="Folder for PNG plots: per-task bars and pre-training curves.")
    ] = None,
    embed: Annotated[
        Optional[Path],
        typer.Option("--embed", help="Also put the main table into this file (e.g. README.md) between "
                     "'<!-- bertbench report: begin NAME -->' and '<!-- bertbench report: end NAME -->', NAME = the --out stem."),
    ] = None,
    index: Annotated[bool, typer.Option("--index", help="Also regenerate README.md beside --out: the list of the "
                                        "generated reports in that folder (what `make leaderboard` keeps).")] = False,
    studies: Annotated[
        Optional[Path],
        typer.Option("--studies", help="With --embed: instead of a report, the table of studies: one row per page "
                     "STUDIES/NAME.md whose records are in RESULTS_DIR/NAME (make studies-table: docs/studies and "
                     "leaderboards/records), written between '<!-- bertbench report: begin studies -->' and its end."),
    ] = None,
    claim: Annotated[
        Optional[list[str]],
        typer.Option("--claim", metavar="CLAIM",
                     help="A claim of your own, judged like the paper's (multi-bootstrap, Holm, MDE): "
                     "\"A − B on TASK > T\" (or < T, or within T), e.g. \"mlm+nsp − mlm on stsb > 0\". Repeatable; "
                     "a claims.yaml in RESULTS_DIR is read too. See docs/claims.md."),
    ] = None,
    tasks_dir: TasksDirOption = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --out even if bertbench report did not write it.")] = False,
    wide: Annotated[
        bool,
        typer.Option("--wide", help="Print every table with every paper column, as the markdown has them (about 250 "
                     "columns), instead of the results beside the paper's model of our size."),
    ] = False,
) -> None:
    """Tabulate result records beside the BERT paper's numbers: per-task results, the GLUE score,
    the paper's ablation tables (5, 6, 8) and each variant's provenance."""
    from bertbench.errors import BertbenchError
    from bertbench.paths import task_folders
    from bertbench.report.run import make_report, make_studies_table

    task_folders(tasks_dir)  # a --tasks-dir that is not a folder fails here, not as a warning about versions

    if studies is not None:
        others = [flag for flag, value in (("--out", out), ("--csv", csv), ("--json", json_out), ("--plots", plots),
                                           ("--index", index), ("--wide", wide)) if value]
        if embed is None or len(results) != 1 or others:
            raise BertbenchError("--studies takes one RESULTS_DIR (a folder of studies' records) and --embed only"
                                 + (f", not {', '.join(others)}" if others else ""))
        make_studies_table(results[0], studies, embed, echo=typer.echo)
        return
    make_report(results, out=out, csv=csv, json_out=json_out, plots=plots, embed=embed, force=force, wide=wide, index=index,
                claims=claim or (), tasks_dir=tasks_dir,
                echo=typer.echo, warn=lambda message: typer.secho(message, fg="yellow", err=True))
