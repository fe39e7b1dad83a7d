"""Reference implementations the tests check the package against, kept here because the package no longer uses
them: the textbook paired intervals the multi-bootstrap reduces to (a paired t over seeds; a paired bootstrap
over seeds × examples), a run's metric from per-example statistics, a task by name, and a text's word-piece ids."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Optional

import numpy as np

from bertbench.errors import BertbenchError, did_you_mean
from bertbench.claims import CONFIDENCE
from bertbench.report.stats import Interval, t_interval

PAIRED_T_OVER_SEEDS = "paired t over seeds"
PAIRED_BOOTSTRAP = "paired bootstrap over seeds × examples"
BOOTSTRAP_RESAMPLES = 10_000


def paired_differences(a: Mapping[int, float], b: Mapping[int, float]) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """(seeds both have, a[seed] − b[seed] for each), in seed order. Unpaired seeds are left out."""
    seeds = tuple(sorted(set(a) & set(b)))
    return seeds, tuple(float(a[s]) - float(b[s]) for s in seeds)


def paired_t_interval(a: Mapping[int, float], b: Mapping[int, float],
                      confidence: float = CONFIDENCE) -> Optional[Interval]:
    """The t-interval of a − b over the seeds both ran; None when fewer than two seeds pair up."""
    _, diffs = paired_differences(a, b)
    return t_interval(diffs, confidence, PAIRED_T_OVER_SEEDS)


def paired_bootstrap(a: np.ndarray, b: np.ndarray, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                     confidence: float = CONFIDENCE) -> Optional[Interval]:
    """Percentile interval of mean(a) − mean(b) for per-example scores of shape (seeds, examples).

    Row i of `a` and of `b` is the same fine-tuning seed and column j the same dev example (paired).
    Each resample draws, from `numpy.random.default_rng(seed)`, first `seeds` row indices then
    `examples` column indices (both with replacement), and applies the same draw to a and b. The
    percentiles are numpy's default (linear) quantiles. None with one seed: seed noise cannot be
    resampled from a single run.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"paired scores must have the same (seeds, examples) shape, got {a.shape} and {b.shape}")
    n_seeds, n_examples = a.shape
    if n_seeds < 2 or n_examples < 1:
        return None
    d = a - b  # (S, E): the paired per-example differences
    rng = np.random.default_rng(seed)
    stats = np.empty(resamples)
    for r in range(resamples):
        rows = np.bincount(rng.integers(0, n_seeds, n_seeds), minlength=n_seeds)  # times each seed is drawn
        cols = np.bincount(rng.integers(0, n_examples, n_examples), minlength=n_examples)
        stats[r] = rows @ d @ cols / (n_seeds * n_examples)  # the mean of d over the drawn grid
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return Interval(float(d.mean()), float(low), float(high), n_seeds, PAIRED_BOOTSTRAP, confidence)


def metric_on_examples(metric: str, preds: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Each run's metric on the whole evaluation set, from its sufficient statistics: (R,)."""
    from bertbench.report.multibootstrap import SUFF_METRICS

    spec = SUFF_METRICS[metric]
    stats = spec.per_example(np.asarray(preds), np.asarray(gold))
    return spec.from_sums(stats.sum(axis=-2), np.full(stats.shape[:-2], float(stats.shape[-2])))


def load_tasks(tasks_dir: Optional[Path] = None) -> dict:
    """All tasks by name (the project's tasks/, and `tasks_dir`'s beside them); one error listing every problem if any file
    is invalid (the package itself asks for tasks by name: `resolve_task_names`, `valid_tasks`)."""
    from bertbench.tasks import task_registry

    reg = task_registry(tasks_dir)
    if reg.broken:
        raise BertbenchError(f"{len(reg.broken)} problem(s) in {', '.join(map(str, reg.folders))}:\n" + "\n".join(reg.broken.values()))
    return reg.tasks


def get_task(name: str, tasks_dir: Optional[Path] = None):
    """The task `name` of the registry (the project's tasks/, and `tasks_dir`'s beside them)."""
    tasks = load_tasks(tasks_dir)
    if name not in tasks:
        raise BertbenchError(did_you_mean(name, tasks, "task"))
    return tasks[name]


def tokenize_ids(tok, text: str) -> list[int]:
    """Word-piece ids of `text` by a WordPieceTokenizer, without [CLS]/[SEP]."""
    return tok.backend.encode(text, add_special_tokens=False).ids


def tokenize_ids_batch(tok, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tok.backend.encode_batch(texts, add_special_tokens=False)]


def iter_texts_for_training(paths: Iterable[Path]) -> Iterator[str]:
    """Lines of text files, for vocabulary training (WikiExtractor <doc> markup lines skipped)."""
    for p in paths:
        with open(p, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line and not line.startswith("<doc") and line != "</doc>":
                    yield line
