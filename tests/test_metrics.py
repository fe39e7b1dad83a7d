"""Metrics against their references (sklearn, scipy, seqeval) and against hand-worked examples."""
from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr
from seqeval.metrics import f1_score as seq_f1
from seqeval.metrics import precision_score as seq_precision
from seqeval.metrics import recall_score as seq_recall
from seqeval.scheme import IOB2
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from bertbench import metrics
from bertbench.errors import BertbenchError
from bertbench.metrics import (
    METRICS,
    compute,
    get_metric,
    normalize_answer,
    squad_v1_scores,
    squad_v2_scores,
)

# float sums in a different order differ in the last bits; anything looser would hide a real bug.
EXACT = 1e-9


# --- classification and regression against sklearn / scipy ---------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_classification_metrics_match_sklearn_on_random_labels(seed: int) -> None:
    rng = np.random.default_rng(seed)
    refs = rng.integers(0, 2, size=200).tolist()
    preds = rng.integers(0, 2, size=200).tolist()
    assert metrics.accuracy(preds, refs) == 100.0 * accuracy_score(refs, preds)
    assert metrics.f1(preds, refs) == 100.0 * f1_score(refs, preds)
    assert metrics.mcc(preds, refs) == 100.0 * matthews_corrcoef(refs, preds)


@pytest.mark.parametrize("seed", range(5))
def test_multiclass_accuracy_matches_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    refs, preds = rng.integers(0, 3, size=100), rng.integers(0, 3, size=100)
    assert metrics.accuracy(preds, refs) == 100.0 * accuracy_score(refs, preds)


@pytest.mark.parametrize("seed", range(5))
def test_correlations_match_scipy_on_random_scores(seed: int) -> None:
    rng = np.random.default_rng(seed)
    refs = rng.uniform(0, 5, size=100)
    preds = refs + rng.normal(0, 1.5, size=100)
    assert metrics.pearson(preds, refs) == 100.0 * pearsonr(preds, refs).statistic
    assert metrics.spearman(preds, refs) == 100.0 * spearmanr(preds, refs).statistic


def test_classification_by_hand() -> None:
    preds, refs = [1, 0, 1, 1], [1, 1, 1, 0]  # TP=2 FP=1 FN=1 TN=0
    assert metrics.accuracy(preds, refs) == 50.0
    assert metrics.f1(preds, refs) == pytest.approx(200.0 / 3, abs=EXACT)  # P = R = 2/3
    # MCC = (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (0 - 1) / sqrt(3*3*1*1)
    assert metrics.mcc(preds, refs) == pytest.approx(-100.0 / 3, abs=EXACT)


@pytest.mark.parametrize(
    ("preds", "refs"),
    [
        ([1, 1, 1, 1], [0, 1, 0, 1]),  # constant predictions
        ([0, 0, 0, 0], [0, 1, 0, 1]),  # never predicts the positive class
        ([0, 0, 0], [0, 0, 0]),  # no positive class anywhere
        ([1, 0, 1], [1, 0, 1]),  # perfect
        ([0, 1, 0], [1, 0, 1]),  # perfectly wrong
        ([1], [1]),  # a single example
    ],
)
def test_classification_edge_cases_match_sklearn_without_warnings(preds: list[int], refs: list[int]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = (metrics.accuracy(preds, refs), metrics.f1(preds, refs), metrics.mcc(preds, refs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn itself warns on a single label; only the values count here
        expected = (
            accuracy_score(refs, preds),
            f1_score(refs, preds, zero_division=0.0),
            matthews_corrcoef(refs, preds),
        )
    assert ours == tuple(100.0 * v for v in expected)


def test_mcc_edges_by_hand() -> None:
    assert metrics.mcc([1, 1, 1, 1], [0, 1, 0, 1]) == 0.0
    assert metrics.mcc([1, 0, 1], [1, 0, 1]) == 100.0
    assert metrics.mcc([0, 1, 0], [1, 0, 1]) == -100.0
    assert metrics.f1([0, 0, 0], [0, 0, 0]) == 0.0


def test_correlations_by_hand() -> None:
    assert metrics.pearson([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]) == pytest.approx(100.0, abs=EXACT)
    assert metrics.pearson([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-100.0, abs=EXACT)
    # Spearman sees only ranks: a monotone but non-linear relation is still 100.
    monotone = ([1.0, 2.0, 3.0, 4.0], [1.0, 10.0, 100.0, 1000.0])
    assert metrics.spearman(*monotone) == pytest.approx(100.0, abs=EXACT)
    assert metrics.pearson(*monotone) < 95.0


@pytest.mark.parametrize("fn", [metrics.pearson, metrics.spearman])
@pytest.mark.parametrize(
    ("preds", "refs"),
    [([2.5, 2.5, 2.5], [1.0, 2.0, 3.0]), ([1.0, 2.0, 3.0], [4.0, 4.0, 4.0]), ([1.0], [2.0])],
)
def test_correlation_with_constant_input_is_zero_not_nan(fn, preds: list[float], refs: list[float]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ConstantInputWarning leaks out either
        assert fn(preds, refs) == 0.0


@pytest.mark.parametrize("name", ["accuracy", "f1", "mcc", "pearson", "spearman", "seqeval_f1"])
def test_mismatched_or_empty_inputs_are_user_errors(name: str) -> None:
    fn = get_metric(name).fn
    with pytest.raises(BertbenchError, match="2 predictions for 3 references"):
        fn([1, 0], [1, 0, 1]) if not name.startswith("seqeval") else fn([["O"], ["O"]], [["O"]] * 3)
    with pytest.raises(BertbenchError, match="empty"):
        fn([], [])


# --- seqeval ------------------------------------------------------------------------------------

NER_REFS = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "O"]]
# The ORG entity opens with I-: conlleval (seqeval's default) reads it as an entity, strict IOB2 drops it.
NER_PREDS = [["B-PER", "I-PER", "O", "O"], ["I-ORG", "I-ORG", "O"]]


def test_seqeval_default_mode_by_hand() -> None:
    # Gold: PER, LOC, ORG. Predicted: PER, ORG (both right). P = 2/2, R = 2/3, F1 = 0.8.
    assert metrics.seqeval_precision(NER_PREDS, NER_REFS) == 100.0
    assert metrics.seqeval_recall(NER_PREDS, NER_REFS) == pytest.approx(200.0 / 3, abs=EXACT)
    assert metrics.seqeval_f1(NER_PREDS, NER_REFS) == pytest.approx(80.0, abs=EXACT)


def test_seqeval_strict_mode_by_hand() -> None:
    # Strict IOB2 keeps only PER as predicted: P = 1/1, R = 1/3, F1 = 2 * (1/3) / (4/3) = 0.5.
    assert metrics.seqeval_f1_strict(NER_PREDS, NER_REFS) == pytest.approx(50.0, abs=EXACT)


def test_seqeval_type_must_match() -> None:
    # Right span, wrong type: no true positive at all.
    assert metrics.seqeval_f1([["B-LOC", "I-LOC"]], [["B-PER", "I-PER"]]) == 0.0


def _random_tags(rng: np.random.Generator, n_sent: int) -> list[list[str]]:
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]
    return [[tags[i] for i in rng.integers(0, len(tags), size=rng.integers(1, 15))] for _ in range(n_sent)]


@pytest.mark.parametrize("seed", range(5))
def test_seqeval_metrics_match_seqeval(seed: int) -> None:
    rng = np.random.default_rng(seed)
    refs = _random_tags(rng, 40)
    # Corrupt ~30% of the tags, keeping sentence lengths, so scores land strictly between 0 and 100.
    preds = [[t if rng.random() > 0.3 else str(rng.choice(["O", "B-PER", "I-LOC"])) for t in s] for s in refs]
    assert metrics.seqeval_f1(preds, refs) == 100.0 * seq_f1(refs, preds)
    assert metrics.seqeval_precision(preds, refs) == 100.0 * seq_precision(refs, preds)
    assert metrics.seqeval_recall(preds, refs) == 100.0 * seq_recall(refs, preds)
    assert metrics.seqeval_f1_strict(preds, refs) == 100.0 * seq_f1(refs, preds, mode="strict", scheme=IOB2)
    assert 0.0 < metrics.seqeval_f1(preds, refs) < 100.0
    # Random tags are full of I- openings, so the two modes must disagree here.
    assert metrics.seqeval_f1(preds, refs) != metrics.seqeval_f1_strict(preds, refs)


def test_seqeval_without_entities_is_zero_without_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert metrics.seqeval_f1([["O", "O"]], [["O", "O"]]) == 0.0
        assert metrics.seqeval_f1_strict([["O"]], [["O"]]) == 0.0


def test_seqeval_sentence_length_mismatch_is_a_user_error() -> None:
    with pytest.raises(BertbenchError, match="Sentence 1: 1 predicted tags for 2"):
        metrics.seqeval_f1([["O"], ["O"]], [["O"], ["O", "O"]])


# --- SQuAD ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The  Quick, Brown fox!", "quick brown fox"),
        ("an apple a day", "apple day"),
        ("Theatre anthem", "theatre anthem"),  # articles only as whole words
        ("U.S.A.", "usa"),
        ("the", ""),
        ("  Denver\tBroncos\n", "denver broncos"),
    ],
)
def test_normalize_answer(text: str, normalized: str) -> None:
    assert normalize_answer(text) == normalized


def test_squad_v1_by_hand() -> None:
    refs = {
        "q1": ["Eiffel Tower"],
        "q2": ["the Eiffel Tower"],
        "q3": ["Paris", "in Paris France"],
        "q4": ["y y z"],
    }
    preds = {
        "q1": "the Eiffel Tower.",  # exact after normalisation
        "q2": "Eiffel Tower in Paris",  # P = 2/4, R = 2/2 -> F1 = 2/3
        "q3": "Paris France",  # vs "paris": 2/3; vs "in paris france": P = 1, R = 2/3 -> 0.8 (max)
        "q4": "x y y y",  # Counter overlap y:2 -> P = 2/4, R = 2/3 -> F1 = 4/7
        "extra": "ignored",  # predictions without a reference are ignored, as officially
    }
    scores = squad_v1_scores(preds, refs)
    assert scores["exact_match"] == 25.0
    assert scores["f1"] == pytest.approx(100.0 * (1 + 2 / 3 + 0.8 + 4 / 7) / 4, abs=EXACT)
    assert compute(["squad_em", "squad_f1"], preds, refs) == {
        "squad_em": scores["exact_match"],
        "squad_f1": scores["f1"],
    }


def test_squad_v1_empty_answers_follow_v1_rules() -> None:
    # "the" and "a" both normalise to "": exact match says equal, but v1.1 F1 scores an empty side 0.
    assert squad_v1_scores({"q": "the"}, {"q": ["a"]}) == {"exact_match": 100.0, "f1": 0.0}
    assert squad_v1_scores({"q": ""}, {"q": ["Denver"]}) == {"exact_match": 0.0, "f1": 0.0}


def test_squad_missing_prediction_is_a_user_error() -> None:
    with pytest.raises(BertbenchError, match="1 SQuAD question.*no prediction: q2"):
        squad_v1_scores({"q1": "x"}, {"q1": ["x"], "q2": ["y"]})
    with pytest.raises(BertbenchError, match="no prediction"):
        squad_v2_scores({"q1": "x"}, {"q1": ["x"], "q2": [""]})


V2_REFS = {
    "a": ["Denver Broncos"],
    "b": ["Carolina Panthers"],
    "c": [""],  # unanswerable
    "d": [],  # unanswerable, the other spelling
}
V2_PREDS = {"a": "Denver Broncos", "b": "the Panthers", "c": "", "d": "Levi's Stadium"}
# raw: a exact 1 / f1 1; b exact 0 / f1 2/3 (P = 1, R = 1/2); c 1 / 1; d 0 / 0.
V2_NA_PROBS = {"a": 0.1, "b": 0.6, "c": 0.9, "d": 0.8}


def test_squad_v2_without_probs_by_hand() -> None:
    scores = squad_v2_scores(V2_PREDS, V2_REFS)
    assert scores == pytest.approx(
        {
            "exact": 50.0,
            "f1": 100.0 * (1 + 2 / 3 + 1 + 0) / 4,
            "total": 4,
            "HasAns_exact": 50.0,
            "HasAns_f1": 100.0 * (1 + 2 / 3) / 2,
            "HasAns_total": 2,
            "NoAns_exact": 50.0,
            "NoAns_f1": 50.0,
            "NoAns_total": 2,
        },
        abs=EXACT,
    )
    assert "best_f1" not in scores  # the official script only reports them with a na-prob file
    assert compute(["squad_v2_em", "squad_v2_f1"], V2_PREDS, V2_REFS) == {
        "squad_v2_em": scores["exact"],
        "squad_v2_f1": scores["f1"],
    }


def test_squad_v2_threshold_and_best_threshold_by_hand() -> None:
    # threshold 0.5: b, c, d are predicted unanswerable -> b 0, c 1, d 1; a keeps its 1.
    scores = squad_v2_scores(V2_PREDS, V2_REFS, V2_NA_PROBS, threshold=0.5)
    assert scores["exact"] == 75.0 and scores["f1"] == 75.0
    assert scores["HasAns_exact"] == 50.0 and scores["NoAns_exact"] == 100.0
    # "exceeds" is strict: at threshold 0.6, b (prob 0.6) keeps its answer and its F1 of 2/3.
    at_b = squad_v2_scores(V2_PREDS, V2_REFS, V2_NA_PROBS, threshold=0.6)
    assert at_b["exact"] == 75.0
    assert at_b["f1"] == pytest.approx(100.0 * (1 + 2 / 3 + 1 + 1) / 4, abs=EXACT)
    # Sweep from "all unanswerable" (score 2 = the NoAns count), opening a(0.1), b(0.6), d(0.8), c(0.9):
    #   exact: 2 -> a +1 = 3 (best, 0.1) -> b +0 = 3 (tie, not better) -> d -1 = 2 -> c 0 = 2
    #   f1:    2 -> a +1 = 3 (0.1) -> b +2/3 = 11/3 (best, 0.6) -> d -1 -> c 0
    assert scores["best_exact"] == 75.0
    assert scores["best_exact_thresh"] == 0.1
    assert scores["best_f1"] == pytest.approx(100.0 * (11 / 3) / 4, abs=EXACT)
    assert scores["best_f1_thresh"] == 0.6
    # The best threshold does not depend on the threshold applied to exact/f1.
    default = squad_v2_scores(V2_PREDS, V2_REFS, V2_NA_PROBS)
    assert default["exact"] == 50.0
    assert {k: default[k] for k in default if k.startswith("best")} == {
        k: scores[k] for k in scores if k.startswith("best")
    }


def test_squad_v2_best_threshold_keeps_official_tie_quirk() -> None:
    # Two questions at the same probability. The official sweep does not group ties, so the answer
    # depends on their order: "x first" reports 100 at 0.5 though no threshold reaches it.
    refs = {"x": ["yes"], "y": [""]}
    preds = {"x": "yes", "y": "wrong"}
    first_x = squad_v2_scores(preds, refs, {"x": 0.5, "y": 0.5})
    assert (first_x["best_exact"], first_x["best_exact_thresh"]) == (100.0, 0.5)
    first_y = squad_v2_scores(preds, refs, {"y": 0.5, "x": 0.5})
    assert (first_y["best_exact"], first_y["best_exact_thresh"]) == (50.0, 0.0)


def test_squad_v2_best_threshold_reads_raw_prediction_as_official() -> None:
    # "the" normalises to "", so it scores 1 on an unanswerable question, yet the official sweep
    # counts any non-empty raw string as an answer (-1). Start 1 -> n -1 = 0 -> h +1 = 1 (not > 1).
    refs = {"n": [""], "h": ["yes"]}
    preds = {"n": "the", "h": "yes"}
    scores = squad_v2_scores(preds, refs, {"n": 0.3, "h": 0.6})
    assert scores["exact"] == 100.0
    assert (scores["best_exact"], scores["best_exact_thresh"]) == (50.0, 0.0)


def test_squad_v2_empty_prediction_on_no_answer_scores_one_unlike_v1() -> None:
    assert squad_v2_scores({"q": ""}, {"q": [""]})["f1"] == 100.0
    assert squad_v1_scores({"q": ""}, {"q": [""]})["f1"] == 0.0
    # Golds that normalise to "" are dropped (officially), so "" cannot match the gold "the".
    assert squad_v2_scores({"q": ""}, {"q": ["the", "Denver"]})["exact"] == 0.0
    # A question with only answerable golds is omitted from NoAns_*, as the official script does.
    only_has = squad_v2_scores({"q": "x"}, {"q": ["x"]})
    assert "NoAns_total" not in only_has and only_has["HasAns_total"] == 1


def test_squad_v2_probabilities_must_cover_every_question() -> None:
    with pytest.raises(BertbenchError, match="no-answer probability"):
        squad_v2_scores(V2_PREDS, V2_REFS, {"a": 0.1})


# --- registry -------------------------------------------------------------------------------------


def test_registry_names_and_specs() -> None:
    assert {"accuracy", "f1", "mcc", "pearson", "spearman", "seqeval_f1", "seqeval_f1_strict",
            "seqeval_precision", "seqeval_recall", "squad_em", "squad_f1"} <= set(METRICS)
    for name, spec in METRICS.items():
        assert spec.name == name and spec.higher_is_better and spec.description
    with pytest.raises(AttributeError):
        METRICS["f1"].name = "other"  # type: ignore[misc]


def test_unknown_metric_suggests_close_names() -> None:
    with pytest.raises(BertbenchError, match=r"Unknown metric 'acuracy'\. Did you mean: accuracy\?"):
        get_metric("acuracy")
    with pytest.raises(BertbenchError, match="Unknown metric"):
        compute(["accuracy", "nope"], [1], [1])


def test_compute_several_metrics() -> None:
    got = compute(["mcc", "accuracy", "f1"], [1, 0, 1, 1], [1, 1, 1, 0])
    assert list(got) == ["mcc", "accuracy", "f1"]
    assert got["accuracy"] == 50.0
    assert got["mcc"] == pytest.approx(-100.0 / 3, abs=EXACT)
    with pytest.raises(TypeError):
        compute("accuracy", [1], [1])  # type: ignore[arg-type]


def test_import_stays_light() -> None:
    code = (
        "import sys, bertbench.metrics; "
        "heavy = [m for m in ('sklearn', 'scipy', 'seqeval', 'numpy') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
