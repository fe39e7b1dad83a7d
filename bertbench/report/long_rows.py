"""The report's long rows: one row per (variant, task row, metric) of ours and per paper number shown, the content
of `bertbench report --csv` and `--json`."""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, Optional

from bertbench.claims import DEFAULT_APPROACH
from bertbench.report.model import EXTERNAL, ReportData, _paper_candidates, is_degenerate, paper_columns, seed_stats


def _std(values: Sequence[float]) -> Optional[float]:
    return statistics.stdev(values) if len(values) > 1 else None


def long_rows(data: ReportData) -> list[dict[str, Any]]:
    """One row per (variant, row, metric) of ours and per paper number shown: the CSV/JSON content."""
    out: list[dict[str, Any]] = []
    for row in data.rows:
        for variant in data.variants:
            cell = data.cell(variant, row)
            if cell is None:
                continue
            for metric in sorted({m for r in cell.records for m in r["metrics"]}):
                stats = seed_stats(cell.records, metric)
                if stats is None:
                    continue
                out.append({
                    "kind": "ours" if variant.external is None else EXTERNAL,  # a model we did not pre-train
                    "column": variant.label, "task": row.task, "task_version": row.task_version,
                    "eval_kind": row.eval_kind, "approach": row.approach, "metric": metric,
                    "primary": metric == row.metric, "n": stats.n,
                    # pre-training seeds behind the cell: 0 for random init, 1 for one checkpoint (or records
                    # without pretrain_seed); with several, value, mean, std and ci95 are over their means (a
                    # P-cell), the runs_* columns over every run: two bases, each column named for its own
                    "P": 0 if variant.random_init else max(1, len(stats.pretrain_means)),
                    "value": stats.mean, "mean": stats.mean, "std": _std(stats.pretrain_means or stats.values),
                    "ci95_low": stats.interval.low if stats.interval else None,
                    "ci95_high": stats.interval.high if stats.interval else None,
                    "runs_median": stats.median, "runs_std": stats.std, "runs_min": stats.values[0],
                    "runs_max": stats.values[-1], "degenerate": is_degenerate(cell.records),
                    "seeds": " ".join(map(str, stats.seeds)), "settings": cell.n_settings, "setting": cell.setting,
                    "model_fingerprint": variant.fingerprint,
                    "data_fingerprint": (variant.pretraining or {}).get("data_fingerprint"),
                    "paper_split": None, "source": None,
                })
    shown = {n.task for n in data.paper.numbers}
    wanted = {data.paper.paper_task(r.task) for r in data.rows} & shown
    for name, systems, sources in paper_columns(data):
        for ptask in sorted(wanted, key=list(data.paper.tasks).index):
            for n in _paper_candidates(data.paper, systems, sources, ptask):
                out.append({
                    "kind": "paper", "column": name, "task": n.task, "task_version": None, "eval_kind": None,
                    "approach": DEFAULT_APPROACH, "metric": n.metric, "primary": None, "n": None, "P": None,
                    "value": n.value, "mean": None, "std": None, "ci95_low": None, "ci95_high": None,
                    "runs_median": None, "runs_std": None, "runs_min": None, "runs_max": None, "degenerate": None,
                    "seeds": None, "settings": None,
                    "setting": None, "model_fingerprint": None, "data_fingerprint": None,
                    "paper_split": n.split, "source": n.source,
                })
    return out


__all__ = ["long_rows"]
