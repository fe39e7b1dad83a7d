"""Plots for `bertbench report` (matplotlib, Agg backend): per-task bars beside the paper's numbers,
and pre-training curves read from each variant's `run_dir/metrics.csv`.

A missing metrics.csv is skipped and said so in the report; a metrics.csv that is there but lacks the
columns (`tokens`, and `eval_mlm_loss` and/or `eval_clm_loss`) is an error naming the file.
"""
from __future__ import annotations

import csv
import os
import re
from pathlib import Path
from typing import Optional

from bertbench.errors import BertbenchError
from bertbench.report.build import Figures
from bertbench.report.model import ReportData, RowKey, Stats, Variant, paper_columns, paper_number_for, seed_stats

CURVE_COLUMNS = ("eval_mlm_loss", "eval_clm_loss")
CURVES_FILE = "pretraining_curves.png"


def row_name(row: RowKey) -> str:
    """A file-name-safe name for a row: 'rte.v1.dev.accuracy' (+ the approach when not fine-tuning)."""
    parts = [row.task, f"v{row.task_version}", row.eval_kind]
    if row.approach != "fine-tuning":
        parts.append(row.approach)
    parts.append(row.metric)
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", ".".join(parts))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, ax, path: Path, legend: bool = True) -> None:
    """Legend (the bars have none), layout, the PNG at `path` (its folder made), and the figure closed: how every
    plot here ends."""
    if legend:
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _stats(data: ReportData, variant: Variant, row: RowKey) -> Optional[Stats]:
    cell = data.cell(variant, row)
    return seed_stats(cell.records, row.metric) if cell else None


def _errors(stats: Stats) -> tuple[float, float]:
    """Below and above the mean, the ends of its 95% t-interval; one seed: no bar, never a fake one."""
    iv = stats.interval
    return (stats.mean - iv.low, iv.high - stats.mean) if iv else (0.0, 0.0)


def plot_task(data: ReportData, row: RowKey, path: Path) -> bool:
    """Bars for one row: our variants (mean; error bars the 95% t-interval over seeds), then the paper's numbers."""
    ours = [(v.label, stats) for v in data.variants if (stats := _stats(data, v, row)) is not None]
    if not ours:
        return False
    theirs = []
    for name, systems, sources in paper_columns(data):
        number, same_metric = paper_number_for(data.paper, systems, sources, row)
        if number is not None and same_metric:
            split = f"official {number.split}" if row.eval_kind == "devsplit" else number.split
            theirs.append((f"{name}\n({split})", number.value))
    labels = [label for label, _ in ours + theirs]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(labels) + 1.5), 4.0))
    xs = list(range(len(labels)))
    below, above = zip(*(_errors(s) for _, s in ours))
    ax.bar(xs[:len(ours)], [s.mean for _, s in ours], color="tab:blue", yerr=[below, above], capsize=3)
    if theirs:
        ax.bar(xs[len(ours):], [value for _, value in theirs], color="tab:gray", hatch="//")
    ax.set_xticks(xs, labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(row.metric)
    ax.set_title(f"{row.task} v{row.task_version} ({row.eval_kind})" +
                 (f", {row.approach}" if row.approach != "fine-tuning" else ""))
    _save(plt, fig, ax, path, legend=False)
    return True


def find_metrics_csv(variant: Variant) -> Optional[Path]:
    """`run_dir/metrics.csv` (a record keeps it relative, e.g. pretrain/NAME) against the current folder, then
    against each folder above the variant's record files (committed records keep the curves beside them).
    None when absent."""
    run_dir = (variant.pretraining or {}).get("run_dir")
    if not run_dir:
        return None
    roots = [Path.cwd()] + [parent for rec in variant.records for parent in rec.path.resolve().parents]
    return next((path for root in dict.fromkeys(roots) if (path := root / run_dir / "metrics.csv").is_file()), None)


def read_curve(path: Path) -> dict[str, list[tuple[float, float]]]:
    """{eval column: [(tokens, value), ...]} from a metrics.csv (rows without both values skipped)."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            fields = reader.fieldnames or []
            present = [c for c in CURVE_COLUMNS if c in fields]
            if "tokens" not in fields or not present:
                raise BertbenchError(f"{path}: a pre-training metrics.csv needs a 'tokens' column and "
                                     f"{' and/or '.join(CURVE_COLUMNS)}; it has {', '.join(fields) or 'no header'}")
            curves: dict[str, list[tuple[float, float]]] = {c: [] for c in present}
            for line, row in enumerate(reader, start=2):
                for column in present:
                    tokens, value = row.get("tokens") or "", row.get(column) or ""
                    if tokens.strip() and value.strip():
                        try:
                            curves[column].append((float(tokens), float(value)))
                        except ValueError:
                            raise BertbenchError(f"{path}:{line}: not a number in tokens/{column}") from None
    except OSError as err:
        raise BertbenchError(f"{path}: cannot read: {err.strerror}") from None
    return {c: sorted(points) for c, points in curves.items()}


def plot_curves(data: ReportData, path: Path) -> tuple[bool, dict[str, str]]:
    """One figure of held-out loss against tokens seen for every variant with a metrics.csv.

    Returns (whether a plot was written, a note per variant saying what was plotted or why not)."""
    notes: dict[str, str] = {}
    series = []
    for variant in data.variants:
        pre = variant.pretraining
        if pre is None:
            notes[variant.label] = ("external model, its pre-training unknown" if variant.external is not None
                                    else "random init, no pre-training")
            continue
        run_dir = pre.get("run_dir")
        if not run_dir:
            notes[variant.label] = "no curve: the records name no run_dir"
            continue
        found = find_metrics_csv(variant)
        if found is None:
            notes[variant.label] = f"no curve: {run_dir}/metrics.csv not found"
            continue
        curves = read_curve(found)
        counts = ", ".join(f"{len(points)} {column} points" for column, points in curves.items())
        notes[variant.label] = f"{run_dir}/metrics.csv ({counts})"
        series += [(variant.label, column, points) for column, points in curves.items() if points]
    if not series:
        return False, notes
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.5))
    for label, column, points in series:
        style = "-" if column == "eval_mlm_loss" else "--"
        ax.plot([t for t, _ in points], [v for _, v in points], style, marker=".",
                label=f"{label} ({column.removeprefix('eval_')})")
    ax.set_xlabel("tokens seen")
    ax.set_ylabel("held-out loss (nats)")
    ax.set_title("Pre-training curves")
    _save(plt, fig, ax, path)
    return True, notes


def plot_figure5(data: ReportData, row: RowKey, path: Path) -> bool:
    """Dev score (mean, 95% t-interval error bars) against pre-training tokens, one line per series."""
    from bertbench.report.tables.figure5 import series

    lines = []
    for label, checkpoints in series(data):
        points = [(v.tokens_seen, s.mean, *_errors(s)) for v in checkpoints if (s := _stats(data, v, row)) is not None]
        lines.append((label, points))
    return _error_lines(lines, path, "pre-training tokens of the fine-tuned checkpoint",
                        f"{row.task} {row.metric} ({row.eval_kind})", f"Figure 5 at our scale: {row.task}")


def plot_masking_ratio(data: ReportData, path: Path) -> bool:
    """GLUE-5 (mean, 95% multi-bootstrap interval) against the masking ratio, one line per size."""
    from bertbench.report.tables.masking import ratio_points

    lines = [(f"{size} MLM+NSP", [(100 * ratio, e.estimate, e.estimate - e.low, e.high - e.estimate)
                                  for ratio, _, e, _ in rows if e is not None]) for size, rows in ratio_points(data)]
    return _error_lines(lines, path, "masking ratio (% of tokens selected for prediction)", "GLUE-5 average (dev)",
                        "Masking ratio")


def _error_lines(lines: list, path: Path, xlabel: str, ylabel: str, title: str) -> bool:
    """The lines (label, [(x, y, below, above)]) of two points or more, with error bars; False when none has two."""
    lines = [(label, points) for label, points in lines if len(points) >= 2]
    if not lines:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for label, points in lines:
        xs, ys, below, above = zip(*points)
        ax.errorbar(xs, ys, yerr=[below, above], marker="o", capsize=3, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    _save(plt, fig, ax, path)
    return True


def make_figures(data: ReportData, plots_dir: Path, link_base: Path) -> Figures:
    """Write every plot into `plots_dir`; links in the returned `Figures` are relative to `link_base`
    (the markdown file's folder), always with forward slashes."""
    plots_dir = Path(plots_dir)

    def link(path: Path) -> str:
        return Path(os.path.relpath(path.resolve(), Path(link_base).resolve())).as_posix()

    task_plots = {}
    for row in data.rows:
        path = plots_dir / f"{row_name(row)}.png"
        if plot_task(data, row, path):
            task_plots[row_name(row)] = link(path)
    from bertbench.report.tables.figure5 import rows_with_points

    figure5 = {}
    for row in rows_with_points(data):
        path = plots_dir / f"figure5.{row_name(row)}.png"
        if plot_figure5(data, row, path):
            figure5[row_name(row)] = link(path)
    masking_path = plots_dir / "masking_ratio.png"
    masking = link(masking_path) if plot_masking_ratio(data, masking_path) else None
    curves_path = plots_dir / CURVES_FILE
    made, notes = plot_curves(data, curves_path)
    return Figures(task_plots, link(curves_path) if made else None, notes, figure5, masking)


__all__ = ["CURVE_COLUMNS", "find_metrics_csv", "make_figures", "plot_curves", "plot_figure5", "plot_masking_ratio", "plot_task", "read_curve",
           "row_name"]
