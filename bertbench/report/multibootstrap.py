"""The evidence behind a verdict: the multi-bootstrap, Holm's adjustment and the smallest detectable effect.

Pure: numpy and scipy.stats only (no torch, no records, no files), so every function here is tested on
numbers alone.

**The multi-bootstrap** (Sellam et al., "The MultiBERTs", ICLR 2022). A score depends on three draws of
chance: the pre-training seed (the checkpoint), the fine-tuning seed (classifier initialisation, batch
order) and the evaluation examples. One replicate draws all three at once:
1. the pre-training seeds of a side, with replacement (shared by every task of that side: one seed is one
   checkpoint);
2. the fine-tuning seeds: with one pre-training seed a side (or none: random init) they are the top level and are
   drawn with replacement, per task; with several, a drawn pre-training seed brings all of its fine-tuning runs,
   undrawn (Davison & Hinkley's strategy 2 for two-stage samples: drawing both stages would count the fine-tuning
   noise twice, since it is already in the spread of the pre-training seeds' means; `_seed_weights`);
3. the evaluation examples of each task, with replacement, as a count per example;
and recomputes the metric of every run on the drawn examples (from per-example sufficient statistics,
so F1, MCC and correlations are recomputed, not averaged), then the mean over the drawn seeds.
**Paired** wherever the two sides share what is drawn: the same example counts for both sides of a task
(same dev set), the same seed draws only where both fine-tuned the same checkpoints (`Side.checkpoints`).
A component without per-example statistics is resampled over seeds only, and says so (`covers`).

The interval is estimate ± t(df)·SE, SE the standard deviation of the replicates and df the
Satterthwaite degrees of freedom of the variance's parts: the seeds' share (the spread of the same seed
draws with every example once) with the top-level seed units, the examples' share (the rest) with the
examples. A percentile interval over three seeds has ten distinct values and covers far less than 95%. The p-value is the t-test of the same numbers,
so an interval and its p-value never disagree.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from bertbench.claims import CONFIDENCE, POWER, RESAMPLES, RNG_SEED

# What each resampled source of noise is called wherever a report says what an interval covers.
PRETRAIN, FINETUNE, EXAMPLES = "pre-training seeds", "fine-tuning seeds", "evaluation examples"


# --- metrics from per-example sufficient statistics ----------------------------------------------------


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros(np.broadcast(num, den).shape)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _accuracy(s: np.ndarray, n: np.ndarray) -> np.ndarray:
    return 100.0 * s[..., 0] / n


def _f1(s: np.ndarray, n: np.ndarray) -> np.ndarray:
    tp, fp, fn = s[..., 0], s[..., 1], s[..., 2]
    return 100.0 * _safe_div(2 * tp, 2 * tp + fp + fn)  # 0 with no positive anywhere, as sklearn


def _mcc(s: np.ndarray, n: np.ndarray) -> np.ndarray:
    tp, tn, fp, fn = s[..., 0], s[..., 1], s[..., 2], s[..., 3]
    den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return 100.0 * _safe_div(tp * tn - fp * fn, den)  # 0 for a constant predictor, as sklearn


def _correlation(s: np.ndarray, n: np.ndarray) -> np.ndarray:
    x, y, xx, yy, xy = (s[..., i] for i in range(5))
    cov = xy - x * y / n
    den = np.sqrt(np.clip(xx - x * x / n, 0, None) * np.clip(yy - y * y / n, 0, None))
    return 100.0 * _safe_div(cov, den)  # 0 for constant predictions, as bertbench.metrics


@dataclass(frozen=True)
class SuffMetric:
    """A metric as a function of sums of per-example statistics (so a bootstrap draw is a weighted sum)."""

    # (preds (R, E), gold (E,)) -> (R, E, K); None where a record stores the statistics themselves
    # (`extra.example_stats`: CoNLL's entity counts per sentence, SQuAD's scores per question)
    per_example: Optional[Callable[[np.ndarray, np.ndarray], np.ndarray]]
    from_sums: Callable[[np.ndarray, np.ndarray], np.ndarray]  # (sums (..., K), n (...)) -> metric (...)


def _confusion(preds: np.ndarray, gold: np.ndarray, cells: Sequence[tuple[int, int]]) -> np.ndarray:
    p, g = np.asarray(preds), np.broadcast_to(np.asarray(gold), np.shape(preds))
    return np.stack([((p == pv) & (g == gv)).astype(np.float64) for pv, gv in cells], axis=-1)


def _moments(preds: np.ndarray, gold: np.ndarray, rank: bool) -> np.ndarray:
    x = np.asarray(preds, dtype=np.float64)
    y = np.broadcast_to(np.asarray(gold, dtype=np.float64), x.shape)
    if rank:  # Spearman: the ranks of the whole evaluation set, weighted by the draw (ties: average ranks)
        from scipy.stats import rankdata

        x, y = rankdata(x, axis=-1), rankdata(y, axis=-1)
    return np.stack([x, y, x * x, y * y, x * y], axis=-1)


SUFF_METRICS: Mapping[str, SuffMetric] = {
    "accuracy": SuffMetric(lambda p, g: (np.asarray(p) == np.asarray(g)).astype(np.float64)[..., None], _accuracy),
    "f1": SuffMetric(lambda p, g: _confusion(p, g, [(1, 1), (1, 0), (0, 1)]), _f1),
    "mcc": SuffMetric(lambda p, g: _confusion(p, g, [(1, 1), (0, 0), (1, 0), (0, 1)]), _mcc),
    "pearson": SuffMetric(lambda p, g: _moments(p, g, rank=False), _correlation),
    "spearman": SuffMetric(lambda p, g: _moments(p, g, rank=True), _correlation),
    # entity F1 over sentences: (true positives, false positives, false negatives) per sentence, summed (micro F1)
    "seqeval_f1": SuffMetric(None, _f1),
    # SQuAD v1.1: each question's exact match or F1 in [0, 1] (the max over its gold answers), averaged
    "squad_em": SuffMetric(None, _accuracy),
    "squad_f1": SuffMetric(None, _accuracy),
}


# --- the data of one side of a comparison ------------------------------------------------------------------


@dataclass(frozen=True)
class Component:
    """One task's runs on one side: the (pre-training seed, fine-tuning seed) of each run, its metric on
    the whole evaluation set, and optionally its per-example sufficient statistics for `metric`.
    A pre-training seed of None is one unknown pre-training seed (or none at all: random init)."""

    task: str
    runs: tuple[tuple[Optional[int], int], ...]
    values: tuple[float, ...]
    stats: Optional[np.ndarray] = None  # (runs, examples, K) for SUFF_METRICS[metric]
    metric: Optional[str] = None

    def __post_init__(self) -> None:
        if len(self.runs) != len(self.values) or not self.runs:
            raise ValueError(f"{self.task}: {len(self.runs)} runs and {len(self.values)} values")
        if len(set(self.runs)) != len(self.runs):
            raise ValueError(f"{self.task}: a (pre-training seed, fine-tuning seed) run repeats")
        if self.stats is not None and (self.metric not in SUFF_METRICS or self.stats.shape[0] != len(self.runs)):
            raise ValueError(f"{self.task}: per-example statistics need a known metric and one row per run")

    @property
    def pretrain_seeds(self) -> tuple[Optional[int], ...]:
        return tuple(sorted({p for p, _ in self.runs}, key=_seed_order))

    @property
    def n_examples(self) -> Optional[int]:
        return None if self.stats is None else int(self.stats.shape[1])

    def by_pretrain(self) -> dict[Optional[int], list[float]]:
        """Each pre-training seed's values (its fine-tuning seeds' runs), in run order."""
        by_pre: dict[Optional[int], list[float]] = {}
        for (pre, _), v in zip(self.runs, self.values):
            by_pre.setdefault(pre, []).append(float(v))
        return by_pre

    def point(self) -> float:
        """The mean over pre-training seeds of the mean over their fine-tuning seeds (the plain mean over
        seeds when there is one pre-training seed): the number every table prints for these runs."""
        by_pre = self.by_pretrain()
        return math.fsum(math.fsum(vs) / len(vs) for vs in by_pre.values()) / len(by_pre)


def _seed_order(seed: Optional[int]) -> tuple:
    return (seed is not None, seed or 0)


@dataclass(frozen=True)
class Side:
    """One variant's components, averaged with equal weight (one component: a task; five: GLUE-5).

    untrained: the variant has no pre-training (random init), so it has no pre-training noise to resample and
    its one seed None does not keep the other side's pre-training seeds out of what the interval covers.

    checkpoints: (pre-training seed, the identity of the model its runs fine-tuned: a checkpoint's fingerprint, or
    random init's) for each of its pre-training seeds. Two sides are paired over seeds only where these are the same:
    they fine-tuned one checkpoint (or one initialisation), e.g. fine-tuning against feature-based, so seed k on
    each side is one draw. Two pre-trainings with seed k share nothing but their data order; pairing them by the
    seed's number would claim a correlation that is not there. None: unknown, never paired."""

    components: tuple[Component, ...]
    untrained: bool = False
    checkpoints: Optional[tuple[tuple[Optional[int], str], ...]] = None

    def point(self) -> float:
        return math.fsum(c.point() for c in self.components) / len(self.components)


# --- resampling ---------------------------------------------------------------------------------------------


def _seed_weights(rng: np.random.Generator, comp: Component, pre_counts: Mapping[Optional[int], np.ndarray],
                  resamples: int) -> np.ndarray:
    """(B, runs): each run's weight in the replicate's mean, the fine-tuning seeds drawn as the module docstring's
    step 2 says."""
    pres = comp.pretrain_seeds
    if len(pre_counts) == 1:
        n = len(comp.runs)
        return rng.multinomial(n, np.full(n, 1.0 / n), size=resamples) / n
    weights = np.zeros((resamples, len(comp.runs)))
    present = np.zeros(resamples)
    for pre in pres:
        idx = [i for i, (p, _) in enumerate(comp.runs) if p == pre]
        weights[:, idx] = pre_counts[pre][:, None] / len(idx)
        present += pre_counts[pre]
    # a drawn pre-training seed this task lacks: the task's other seeds carry its weight (none drawn: equal)
    missing = present == 0
    if missing.any():
        weights[missing] = 1.0 / len(comp.runs)
        present[missing] = 1.0
    return weights / present[:, None]


def _pretrain_counts(rng: np.random.Generator, seeds: Sequence[Optional[int]], resamples: int
                     ) -> dict[Optional[int], np.ndarray]:
    counts = rng.multinomial(len(seeds), np.full(len(seeds), 1.0 / len(seeds)), size=resamples)
    return {s: counts[:, i].astype(np.float64) for i, s in enumerate(seeds)}


CHUNK = 256  # example draws at a time: MNLI's 9,815 examples × 2,000 replicates would hold 157 MB at once


def _example_counts(rng: np.random.Generator, n: int, resamples: int):
    """(start, stop, counts (stop − start, n)): how often each example is drawn, a chunk of replicates at a time."""
    for start in range(0, resamples, CHUNK):
        stop = min(resamples, start + CHUNK)
        yield start, stop, rng.multinomial(n, np.full(n, 1.0 / n), size=stop - start).astype(np.float64)


def _per_run_on_draws(comp: Component, counts: np.ndarray) -> np.ndarray:
    """(B, runs): each run's metric recomputed on the drawn examples."""
    spec = SUFF_METRICS[comp.metric]
    # the drawn examples' sums, per run: one BLAS product (B, E) @ (E, runs·K), ~4x einsum's unoptimised loop; the
    # same sums (exact where the statistics are integers: accuracy, F1, MCC, ranks)
    runs, n, k = comp.stats.shape
    flat = np.ascontiguousarray(comp.stats.transpose(1, 0, 2)).reshape(n, runs * k)
    sums = (counts @ flat).reshape(counts.shape[0], runs, k)
    return spec.from_sums(sums, np.full(sums.shape[:-1], float(comp.n_examples)))


def _example_replicates(rng: np.random.Generator, comps: Sequence[Component], weights: Sequence[np.ndarray],
                        n: int, resamples: int) -> list[np.ndarray]:
    """(B,) per component: its score in each replicate, the same example draws for every component (paired)."""
    out = [np.empty(resamples) for _ in comps]
    for start, stop, counts in _example_counts(rng, n, resamples):
        for o, comp, w in zip(out, comps, weights):
            o[start:stop] = np.einsum("br,br->b", w[start:stop], _per_run_on_draws(comp, counts))
    return out


@dataclass(frozen=True)
class Estimate:
    """A score or a difference with its multi-bootstrap SE, interval and what the interval covers."""

    estimate: float
    se: float
    df: float
    low: float
    high: float
    covers: tuple[str, ...]  # the sources of noise resampled (PRETRAIN, FINETUNE, EXAMPLES)
    paired: tuple[str, ...]  # the sources drawn once for both sides
    pretrain_seeds: tuple[int, int]  # per side (b: 0 for a single score)
    confidence: float = CONFIDENCE
    examples_in: tuple[int, int] = (0, 0)  # (components whose examples were resampled, components)

    def p_greater(self, bound: float) -> float:
        """One-sided p of 'the true value is at most `bound`' (small: the value is above it)."""
        return _t_tail(self.estimate - bound, self.se, self.df)

    def p_less(self, bound: float) -> float:
        return _t_tail(bound - self.estimate, self.se, self.df)

    def mde(self, power: float = POWER) -> float:
        return minimum_detectable_effect(self.se, self.df, self.confidence, power)


def _t_tail(distance: float, se: float, df: float) -> float:
    from scipy import stats

    if se == 0:
        return 0.0 if distance > 0 else 1.0
    return float(stats.t.sf(distance / se, df))


def t_quantile(q: float, df: float) -> float:
    from scipy import stats

    return float(stats.norm.ppf(q)) if math.isinf(df) else float(stats.t.ppf(q, df))


def _units(comp: Component) -> int:
    """The top-level seed units of a component: its pre-training seeds, or its runs under one."""
    pres = comp.pretrain_seeds
    return len(pres) if len(pres) > 1 else len(comp.runs)


def _satterthwaite(parts: Sequence[tuple[float, int]], total: float) -> float:
    """Degrees of freedom of a sum of variance parts (variance, units) — Welch–Satterthwaite."""
    den = math.fsum(v * v / (n - 1) for v, n in parts if n > 1 and v > 0)
    return max(1.0, total * total / den) if den > 0 else math.inf


def multi_bootstrap(a: Side, b: Optional[Side] = None, *, resamples: int = RESAMPLES, seed: int = RNG_SEED,
                    confidence: float = CONFIDENCE) -> Estimate:
    """a − b (or a alone) with its multi-bootstrap interval; see the module docstring for the draws.

    Draw order from `numpy.random.default_rng(seed)`: per side (a, then b unless paired), the pre-training
    seed counts; then per component, in order: a's fine-tuning counts where a has one pre-training seed (with
    several, none are drawn: each drawn pre-training seed weighs its runs equally), b's likewise (unless paired),
    then the example counts (once per task, shared by both sides, CHUNK replicates at a time).
    """
    rng = np.random.default_rng(seed)
    sides = [a] + ([b] if b is not None else [])
    if b is not None and len(a.components) != len(b.components):
        raise ValueError("the two sides need the same components (tasks)")
    pre_seeds = [tuple(sorted({p for c in s.components for p in c.pretrain_seeds}, key=_seed_order)) for s in sides]
    # seed draws are shared only by sides that fine-tuned the same checkpoints (Side.checkpoints), never by number
    paired_pre = (b is not None and pre_seeds[0] == pre_seeds[1] and a.checkpoints is not None
                  and a.checkpoints == b.checkpoints)
    pre_counts = [_pretrain_counts(rng, pre_seeds[0], resamples)]
    if b is not None:
        pre_counts.append(pre_counts[0] if paired_pre else _pretrain_counts(rng, pre_seeds[1], resamples))
    total = np.zeros(resamples)
    parts: list[tuple[float, int]] = []  # (variance, units) of each share of the spread, for the df
    correction = 0.0  # what the seeds' shares gain from the small-sample scaling
    # pre-training noise is covered when every side that has some is resampled over several seeds
    pretrained = [seeds for side, seeds in zip(sides, pre_seeds) if not side.untrained]
    covers = {FINETUNE} | ({PRETRAIN} if pretrained and all(len(s) > 1 for s in pretrained) else set())
    paired: set[str] = {PRETRAIN} if paired_pre and len(pre_seeds[0]) > 1 else set()
    with_examples = 0
    for k, ca in enumerate(a.components):
        comps = [ca] + ([b.components[k]] if b is not None else [])
        same_runs = b is not None and ca.runs == comps[1].runs and paired_pre
        weights = [_seed_weights(rng, ca, pre_counts[0], resamples)]
        if b is not None:
            weights.append(weights[0] if same_runs else _seed_weights(rng, comps[1], pre_counts[1], resamples))
        sizes = {c.n_examples for c in comps}
        examples = None not in sizes and len(sizes) == 1
        # the seeds-only replicates (the same seed draws, every example once): the seeds' share of the spread
        by_seeds = [w @ np.asarray(c.values, dtype=np.float64) / len(a.components) for c, w in zip(comps, weights)]
        if examples:
            n_examples = sizes.pop()
            reps = [r / len(a.components) for r in _example_replicates(rng, comps, weights, n_examples, resamples)]
        else:
            reps = by_seeds
        part = reps[0] - reps[1] if b is not None else reps[0]
        total += part
        if same_runs:  # one draw for both: the difference's spread, with the units they share
            groups = [(part, by_seeds[0] - by_seeds[1], _units(ca))]
        else:  # independent draws: each side's spread with its own units
            groups = [(r, r_seeds, _units(c)) for r, r_seeds, c in zip(reps, by_seeds, comps)]
        for r, r_seeds, units in groups:
            v_all, v_seeds = float(np.var(r, ddof=1)), float(np.var(r_seeds, ddof=1))
            # the seeds' share: few units, few degrees of freedom; a bootstrap variance of a mean of n units is
            # (n − 1)/n of the unbiased one, so it is scaled back up
            v_seeds = min(v_all, v_seeds)
            parts.append((v_seeds * units / max(units - 1, 1), units))
            correction += v_seeds / max(units - 1, 1)
            if examples:  # the examples' share: as many units as examples
                parts.append((max(0.0, v_all - v_seeds), n_examples))
        if same_runs:
            paired.add(FINETUNE)
        if examples and b is not None:
            paired.add(EXAMPLES)
        with_examples += examples
    if with_examples:
        covers.add(EXAMPLES)  # for every component, or for `examples_in` of them
    estimate = a.point() - (b.point() if b is not None else 0.0)
    variance = float(np.var(total, ddof=1)) + correction
    se = math.sqrt(variance)
    df = _satterthwaite(parts, variance)
    half = t_quantile(0.5 + confidence / 2, df) * se
    order = [PRETRAIN, FINETUNE, EXAMPLES]
    return Estimate(estimate, se, df, estimate - half, estimate + half,
                    tuple(s for s in order if s in covers), tuple(s for s in order if s in paired),
                    (len(pre_seeds[0]), len(pre_seeds[1]) if b is not None else 0), confidence,
                    (with_examples, len(a.components)))


# --- multiplicity and power -------------------------------------------------------------------------------


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (step-down), in the input order: reject where adjusted p < α."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def minimum_detectable_effect(se: float, df: float = math.inf, confidence: float = CONFIDENCE,
                              power: float = POWER) -> float:
    """The smallest true difference a two-sided test at 1 − `confidence` detects with `power`:
    (t(1 − α/2) + t(power))·SE (the normal quantiles for df = ∞)."""
    return (t_quantile(0.5 + confidence / 2, df) + t_quantile(power, df)) * se


# --- variance components and planning ------------------------------------------------------------------------


@dataclass(frozen=True)
class VarianceComponents:
    """Of one side's score on one task: between pre-training seeds (None: not measured, one seed), between
    fine-tuning seeds under one pre-training seed, and the evaluation-example sampling variance of the mean
    (None: no per-example statistics)."""

    pretrain: Optional[float]
    finetune: float
    examples: Optional[float]
    # behind `pretrain`: its seeds' means' variance (df = seeds − 1) and their fine-tuning noise, for
    # `pretrain_upper_bound`; not compared (they restate `pretrain`)
    means_variance: Optional[float] = field(default=None, compare=False)
    means_df: int = field(default=0, compare=False)
    means_noise: float = field(default=0.0, compare=False)


def pretrain_upper_bound(vc: VarianceComponents, level: float) -> Optional[float]:
    """The one-sided `level` upper confidence bound of the pre-training variance: the seeds' means' variance s²
    (df = seeds − 1) has (df·s²/σ²) ~ χ²(df), so σ² ≤ df·s²/χ²_{1−level}(df); less the fine-tuning noise each mean
    carries, as the point estimate subtracts it. None where nothing was measured (one pre-training seed)."""
    from scipy import stats

    if vc.means_variance is None or vc.means_df < 1:
        return None
    upper = vc.means_variance * vc.means_df / float(stats.chi2.ppf(1.0 - level, vc.means_df))
    return max(0.0, upper - vc.means_noise)


def variance_components(comp: Component, *, resamples: int = RESAMPLES, seed: int = RNG_SEED
                        ) -> VarianceComponents:
    """Method-of-moments (one-way ANOVA) components of `comp`'s runs, plus the bootstrap variance of one
    run's metric over evaluation examples (averaged over runs)."""
    by_pre = comp.by_pretrain()
    within = [np.var(vs, ddof=1) for vs in by_pre.values() if len(vs) > 1]
    finetune = float(np.mean(within)) if within else 0.0
    pretrain, means_var, noise = None, None, 0.0
    if len(by_pre) > 1:
        means = [np.mean(vs) for vs in by_pre.values()]
        n_per = np.mean([len(vs) for vs in by_pre.values()])
        means_var, noise = float(np.var(means, ddof=1)), float(finetune / n_per)
        pretrain = max(0.0, means_var - noise)
    examples = None
    if comp.stats is not None:
        rng = np.random.default_rng(seed)
        per_run = np.concatenate([_per_run_on_draws(comp, counts)
                                  for _, _, counts in _example_counts(rng, comp.n_examples, resamples)])
        examples = float(np.mean(np.var(per_run, axis=0, ddof=1)))
    return VarianceComponents(pretrain, finetune, examples, means_var, len(by_pre) - 1 if means_var is not None else 0,
                              noise)


def average_components(comps: Sequence[Component], *, resamples: int = RESAMPLES, seed: int = RNG_SEED
                       ) -> VarianceComponents:
    """The components of the equal-weight mean of several tasks' scores (GLUE-5), per design unit: each task
    fine-tunes its own seeds on its own dev set, so those two variances add with weight 1/K²; one pre-training
    seed moves every task at once, so its component comes from the spread of the averaged score's per-seed
    means (method of moments: their variance less the fine-tuning noise they carry), never from a sum over
    tasks, which would drop the covariance. One component is `variance_components` itself."""
    if len(comps) == 1:
        return variance_components(comps[0], resamples=resamples, seed=seed)
    parts = [variance_components(c, resamples=resamples, seed=seed) for c in comps]
    k2 = len(comps) ** 2
    finetune = math.fsum(p.finetune for p in parts) / k2
    examples = None if any(p.examples is None for p in parts) else math.fsum(p.examples for p in parts) / k2
    shared = set.intersection(*(set(c.pretrain_seeds) for c in comps))
    if len(shared) < 2:
        return VarianceComponents(None, finetune, examples)
    means, noise = [], 0.0
    for comp, part in zip(comps, parts):
        by_pre = {pre: vs for pre, vs in comp.by_pretrain().items() if pre in shared}
        means.append([np.mean(by_pre[pre]) for pre in sorted(shared)])
        noise += part.finetune / np.mean([len(vs) for vs in by_pre.values()]) / k2
    averaged = np.mean(np.asarray(means), axis=0)  # (pre-training seeds,): the averaged score under each
    means_var = float(np.var(averaged, ddof=1))
    return VarianceComponents(max(0.0, means_var - noise), finetune, examples, means_var, len(shared) - 1, float(noise))


def paired_average_example_variance(a: Sequence[Component], b: Sequence[Component], *, resamples: int = RESAMPLES,
                                    seed: int = RNG_SEED) -> Optional[float]:
    """`paired_example_variance` of the equal-weight mean of several tasks (independent dev sets: 1/K² each)."""
    parts = [paired_example_variance(x, y, resamples=resamples, seed=seed) for x, y in zip(a, b)]
    return None if any(p is None for p in parts) else math.fsum(parts) / len(parts) ** 2


def paired_example_variance(a: Component, b: Component, *, resamples: int = RESAMPLES, seed: int = RNG_SEED
                            ) -> Optional[float]:
    """The dev examples' variance of a − b (each side's mean over its runs), the same example draws for both
    sides (what they share cancels); None without per-example statistics on the same examples."""
    if a.stats is None or b.stats is None or a.n_examples != b.n_examples:
        return None
    rng = np.random.default_rng(seed)
    diffs = [(_per_run_on_draws(a, counts).mean(axis=1) - _per_run_on_draws(b, counts).mean(axis=1))
             for _, _, counts in _example_counts(rng, a.n_examples, resamples)]
    return float(np.var(np.concatenate(diffs), ddof=1))


def difference_variance(a: VarianceComponents, b: VarianceComponents, pretrain_seeds: int, finetune_seeds: int,
                        pretrain_default: float = 0.0, examples: Optional[float] = None) -> float:
    """Var(â − b̂) for a design of P pre-training × F fine-tuning seeds per side, the two sides independent
    in seeds and on the same evaluation examples: `examples` is the paired examples' variance of the
    difference (`paired_example_variance`); without it, each side's (conservative: pairing only removes
    what the sides share). An unmeasured pre-training component is `pretrain_default`."""
    total = examples if examples is not None else (a.examples or 0.0) + (b.examples or 0.0)
    for vc in (a, b):
        pre = vc.pretrain if vc.pretrain is not None else pretrain_default
        total += pre / pretrain_seeds + vc.finetune / (pretrain_seeds * finetune_seeds)
    return total


def design_df(a: VarianceComponents, b: VarianceComponents, pretrain_seeds: int, finetune_seeds: int,
              pretrain_default: float = 0.0, examples: Optional[float] = None) -> float:
    """The Welch–Satterthwaite degrees of freedom the multi-bootstrap would give a design of P pre-training × F
    fine-tuning seeds a side: each side's seed share (pre/P + ft/(P·F)) has the units `_units` counts (P
    pre-training seeds, or the F runs under one), the dev examples' share as many units as examples (∞ here)."""
    units = pretrain_seeds if pretrain_seeds > 1 else finetune_seeds
    parts = []
    for vc in (a, b):
        pre = vc.pretrain if vc.pretrain is not None else pretrain_default
        parts.append((pre / pretrain_seeds + vc.finetune / (pretrain_seeds * finetune_seeds), units))
    total = difference_variance(a, b, pretrain_seeds, finetune_seeds, pretrain_default, examples)
    return _satterthwaite(parts, total)


@dataclass(frozen=True)
class Design:
    pretrain_seeds: int
    finetune_seeds: int
    mde: float
    cost_seconds: float


def plan_designs(a: VarianceComponents, b: VarianceComponents, effect: float, *, cost_pretrain: tuple[float, float],
                 cost_finetune: tuple[float, float], max_seeds: int = 10, pretrain_default: float = 0.0,
                 examples: Optional[float] = None, power: float = POWER, confidence: float = CONFIDENCE,
                 min_pretrain_seeds: int = 1) -> list[Design]:
    """Every design P × F (min_pretrain_seeds..max_seeds × 1..max_seeds) whose MDE is at most `effect`, cheapest
    first. A caller comparing pre-trained models passes min_pretrain_seeds=2: with one pre-training seed a side the
    verdict is about those two checkpoints, not about the procedures that made them (MultiBERTs).

    cost_pretrain: seconds of one pre-training run per side (0 for random init); cost_finetune: seconds of
    one fine-tuning run (all of its grid) per side. The MDE takes t quantiles at the design's degrees of
    freedom (`design_df`), as the report's verdicts do: two pre-training seeds measure their variance with one
    degree of freedom, and a plan at normal quantiles would promise an interval the report will not print."""
    out = []
    for p in range(max(1, min_pretrain_seeds), max_seeds + 1):
        for f in range(1, max_seeds + 1):
            if p == f == 1:
                continue  # one run a side: the report prints no interval, and no verdict but inconclusive
            se = math.sqrt(difference_variance(a, b, p, f, pretrain_default, examples))
            df = design_df(a, b, p, f, pretrain_default, examples)
            mde = minimum_detectable_effect(se, df, confidence, power)
            if mde <= abs(effect):
                cost = p * sum(cost_pretrain) + p * f * sum(cost_finetune)
                out.append(Design(p, f, mde, cost))
    return sorted(out, key=lambda d: (d.cost_seconds, d.pretrain_seeds, d.finetune_seeds))


def mde_floor(a: VarianceComponents, b: VarianceComponents, power: float = POWER,
              confidence: float = CONFIDENCE, examples: Optional[float] = None) -> float:
    """The MDE with infinitely many seeds: the evaluation examples' share alone (this dev set's size)."""
    se = math.sqrt(examples if examples is not None else (a.examples or 0.0) + (b.examples or 0.0))
    return minimum_detectable_effect(se, math.inf, confidence, power)


__all__ = ["Component", "Design", "EXAMPLES", "Estimate", "FINETUNE",
           "PRETRAIN", "SUFF_METRICS", "Side", "VarianceComponents", "average_components",
           "design_df", "difference_variance", "holm", "mde_floor", "paired_average_example_variance",
           "paired_example_variance", "minimum_detectable_effect", "multi_bootstrap", "plan_designs",
           "pretrain_upper_bound", "t_quantile", "variance_components"]
