"""CoNLL-2003 and SQuAD v1.1 records keep per-example statistics, and the multi-bootstrap resamples dev examples on
them: entity counts per sentence (tp, predicted, gold) and each question's exact match and F1.

Parity: a resampled set of sentences (questions) scored by seqeval (the official SQuAD rules) equals the metric
the multi-bootstrap computes from the same draw's weighted sums."""
from __future__ import annotations

import random

import numpy as np
import pytest

from bertbench import metrics as M
from bertbench.report.model import component_for, per_example_stats
from bertbench.report.multibootstrap import EXAMPLES, SUFF_METRICS, Component, Side, multi_bootstrap

TAGS = ["O", "O", "O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def _sentences(rng: random.Random, n: int) -> list[list[str]]:
    # I- without a B- before it too: conlleval's default mode opens an entity there, and so must the counts
    return [[rng.choice(TAGS) for _ in range(rng.randint(1, 12))] for _ in range(n)]


def _noisy(rng: random.Random, gold: list[list[str]], p: float) -> list[list[str]]:
    return [[rng.choice(TAGS) if rng.random() < p else t for t in s] for s in gold]


def _ner_record(pred, gold, pretrain_seed: int, seed: int = 1) -> dict:
    counts = " ".join(f"{tp},{p},{g}" for tp, p, g in M.entity_counts(pred, gold))
    return {"task_type": "token_classification", "seed": seed, "pretrain_seed": pretrain_seed,
            "metrics": {"seqeval_f1": M.seqeval_f1(pred, gold)}, "extra": {"example_stats": {"seqeval_f1": counts}}}


def test_entity_counts_reproduce_seqeval_on_every_resampled_set_of_sentences():
    rng = random.Random(0)
    gold = _sentences(rng, 60)
    pred = _noisy(rng, gold, 0.3)
    stats = per_example_stats(_ner_record(pred, gold, 1), "seqeval_f1")
    assert stats is not None and stats.shape == (60, 3)
    spec = SUFF_METRICS["seqeval_f1"]
    assert float(spec.from_sums(stats.sum(0), np.float64(60))) == pytest.approx(M.seqeval_f1(pred, gold), abs=1e-9)
    draws = np.random.default_rng(1).integers(0, 60, size=(20, 60))
    for idx in draws:  # a bootstrap draw: sentences with replacement
        counts = np.bincount(idx, minlength=60).astype(np.float64)
        ours = float(spec.from_sums(counts @ stats, np.float64(60)))
        theirs = M.seqeval_f1([pred[i] for i in idx], [gold[i] for i in idx])
        assert ours == pytest.approx(theirs, abs=1e-9)


def test_squad_scores_per_question_reproduce_the_official_rules_on_resampled_questions():
    golds = {f"q{i}": [f"the answer number {i}", f"answer {i}"] for i in range(40)}
    rng = random.Random(2)
    preds = {q: rng.choice([g[0], g[1], f"number {q[1:]} and more", "nothing", ""]) for q, g in golds.items()}
    per_q = M.squad_v1_per_question(preds, golds)
    from bertbench.training.finetune_run import squad_example_stats

    stored = squad_example_stats(per_q)
    official = M.squad_v1_scores(preds, golds)
    record = {"task_type": "span_qa", "seed": 1, "metrics": {"squad_f1": official["f1"],
                                                             "squad_em": official["exact_match"]},
              "extra": {"example_stats": stored}}
    qids = list(golds)
    for metric, key in (("squad_f1", "f1"), ("squad_em", "exact_match")):
        stats = per_example_stats(record, metric)
        assert stats is not None and stats.shape == (40, 1)
        for idx in np.random.default_rng(3).integers(0, 40, size=(10, 40)):
            counts = np.bincount(idx, minlength=40).astype(np.float64)
            ours = float(SUFF_METRICS[metric].from_sums(counts @ stats, np.float64(40)))
            drawn = {f"d{j}": qids[i] for j, i in enumerate(idx)}  # duplicates become questions of their own
            theirs = M.squad_v1_scores({d: preds[q] for d, q in drawn.items()}, {d: golds[q] for d, q in drawn.items()})
            assert ours == pytest.approx(theirs[key], abs=1e-4)  # per-question scores kept to six digits


def test_stats_that_do_not_reproduce_the_records_metric_are_not_used():
    rng = random.Random(4)
    gold = _sentences(rng, 20)
    rec = _ner_record(_noisy(rng, gold, 0.3), gold, 1)
    rec["metrics"]["seqeval_f1"] += 5.0  # the counts are not what was scored
    assert per_example_stats(rec, "seqeval_f1") is None


def test_the_interval_on_conll_widens_when_dev_sentences_are_resampled():
    rng = random.Random(5)
    gold = _sentences(rng, 200)
    side_records = []
    # a better and a worse arm, three pre-training seeds each that differ by their draws alone: the seeds agree
    # more than 200 sentences can tell, so what the seeds-only interval leaves out is most of the noise
    for noise in (0.2, 0.3):
        side_records.append([_ner_record(_noisy(rng, gold, noise), gold, pretrain_seed=k) for k in (1, 2, 3)])
    with_examples = [component_for(recs, "seqeval_f1", "conll2003") for recs in side_records]
    assert all(c is not None and c.stats is not None for c in with_examples)
    seeds_only = [Component(c.task, c.runs, c.values) for c in with_examples]
    full = multi_bootstrap(Side((with_examples[0],)), Side((with_examples[1],)))
    bare = multi_bootstrap(Side((seeds_only[0],)), Side((seeds_only[1],)))
    assert EXAMPLES in full.covers and EXAMPLES not in bare.covers
    assert full.estimate == pytest.approx(bare.estimate)
    assert full.se > bare.se * 1.2 and (full.high - full.low) > (bare.high - bare.low)
