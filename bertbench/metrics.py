"""Metrics exactly as the BERT paper reports them, on its 0-100 scale (84.6, not 0.846).

Classification and regression metrics wrap scikit-learn / scipy; token classification wraps seqeval;
SQuAD follows the official v1.1 and v2.0 evaluation scripts rule for rule (re-written here, not
imported). sklearn, scipy and seqeval are imported inside the functions because they take seconds
to import and `bertbench --help` must stay fast.
"""
from __future__ import annotations

import collections
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bertbench.errors import BertbenchError, did_you_mean

__all__ = ["METRICS", "MetricSpec", "accuracy", "compute", "entity_counts", "f1", "get_metric", "mcc",
           "NEAR_CONSTANT_SHARE", "near_constant", "normalize_answer", "pearson", "seqeval_f1", "seqeval_f1_strict",
           "seqeval_precision", "seqeval_recall", "spearman", "squad_em", "squad_f1", "squad_v1_per_question",
           "squad_v1_scores", "squad_v2_em", "squad_v2_f1", "squad_v2_scores"]


@dataclass(frozen=True)
class MetricSpec:
    """One registered metric: `fn(predictions, references) -> value on the 0-100 scale`."""

    name: str
    fn: Callable[[Any, Any], float]
    higher_is_better: bool = True
    description: str = ""


def _check_pair(predictions: Sequence[Any], references: Sequence[Any]) -> None:
    if len(predictions) != len(references):
        raise BertbenchError(f"Got {len(predictions)} predictions for {len(references)} references; they must pair up.")
    if len(references) == 0:
        raise BertbenchError("Cannot score an empty set of predictions.")


NEAR_CONSTANT_SHARE = 0.95  # a cell where this share of predictions is one label (one value) is flagged


def near_constant(predictions: Sequence[Any], share: float = NEAR_CONSTANT_SHARE) -> bool:
    """Whether at least `share` of the predictions are one label (one value): such a predictor is flagged like a
    degenerate one (one label for every example) and never counts as a reproduction."""
    counts = collections.Counter(predictions)
    return bool(counts) and max(counts.values()) >= share * sum(counts.values())


# --- classification and regression (GLUE) --------------------------------------------------------


def accuracy(predictions: Sequence[Any], references: Sequence[Any]) -> float:
    """Share of exact label matches (MNLI, QNLI, SST-2, RTE, ...)."""
    from sklearn.metrics import accuracy_score

    _check_pair(predictions, references)
    return 100.0 * float(accuracy_score(references, predictions))


def f1(predictions: Sequence[Any], references: Sequence[Any]) -> float:
    """Binary F1 of the positive class 1, as GLUE scores MRPC and QQP."""
    from sklearn.metrics import f1_score

    _check_pair(predictions, references)
    # zero_division=0.0: with no positive label anywhere sklearn would warn and return 0.0 anyway.
    return 100.0 * float(f1_score(references, predictions, pos_label=1, average="binary", zero_division=0.0))


def mcc(predictions: Sequence[Any], references: Sequence[Any]) -> float:
    """Matthews correlation (CoLA); sklearn already returns 0.0 for constant predictions."""
    from sklearn.metrics import matthews_corrcoef

    _check_pair(predictions, references)
    # One label on both sides makes MCC 0/0; sklearn returns 0.0 for it but (1.9 at least) also warns
    # about a 1x1 confusion matrix, so we answer it here.
    if len(set(predictions) | set(references)) == 1:
        return 0.0
    return 100.0 * float(matthews_corrcoef(references, predictions))


def _correlation(statistic: str, predictions: Sequence[float], references: Sequence[float]) -> float:
    import scipy.stats

    _check_pair(predictions, references)
    # A correlation with a constant series is 0/0: scipy warns and returns NaN. A model that
    # predicts one score for every pair has learnt nothing, so we report 0.0 (as sklearn's MCC
    # does); a NaN would also poison averages such as the GLUE score.
    if min(predictions) == max(predictions) or min(references) == max(references):
        return 0.0
    return 100.0 * float(getattr(scipy.stats, statistic)(predictions, references).statistic)


def pearson(predictions: Sequence[float], references: Sequence[float]) -> float:
    """Pearson correlation (STS-B)."""
    return _correlation("pearsonr", predictions, references)


def spearman(predictions: Sequence[float], references: Sequence[float]) -> float:
    """Spearman rank correlation (STS-B, the figure the paper's GLUE table shows)."""
    return _correlation("spearmanr", predictions, references)


# --- token classification (CoNLL-2003 NER) --------------------------------------------------------


def _check_sentences(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> None:
    _check_pair(predictions, references)
    for i, (pred, ref) in enumerate(zip(predictions, references)):
        if len(pred) != len(ref):
            raise BertbenchError(f"Sentence {i}: {len(pred)} predicted tags for {len(ref)} reference tags.")


def _seqeval(name: str, predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]],
             strict: bool = False) -> float:
    import seqeval.metrics
    from seqeval.scheme import IOB2

    _check_sentences(predictions, references)
    fn = getattr(seqeval.metrics, name)
    # seqeval takes lists (not tuples or arrays) and y_true first; zero_division=0 keeps a sentence
    # set without any entity at 0.0 instead of a warning.
    y_true = [list(s) for s in references]
    y_pred = [list(s) for s in predictions]
    mode = {"mode": "strict", "scheme": IOB2} if strict else {}
    return 100.0 * float(fn(y_true, y_pred, zero_division=0, **mode))


def entity_counts(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> list[tuple[int, int, int]]:
    """Per sentence, in order: (true positives, predicted entities, gold entities), entities as seqeval's default
    (conlleval-compatible) mode reads them. Summed over sentences they give `seqeval_f1` exactly (micro F1 =
    2·tp / (predicted + gold)), so the report can resample sentences (report.multibootstrap)."""
    from seqeval.metrics.sequence_labeling import get_entities

    _check_sentences(predictions, references)
    entities = ((set(get_entities(list(p))), set(get_entities(list(g)))) for p, g in zip(predictions, references))
    return [(len(p & g), len(p), len(g)) for p, g in entities]


def seqeval_f1(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> float:
    """Entity-level micro F1 in seqeval's default (conlleval-compatible) mode: the CoNLL number."""
    return _seqeval("f1_score", predictions, references)


def seqeval_f1_strict(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> float:
    """Entity-level F1 with strict IOB2 decoding: an entity must open with B-."""
    return _seqeval("f1_score", predictions, references, strict=True)


def seqeval_precision(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> float:
    """Entity-level micro precision, default (conlleval-compatible) mode."""
    return _seqeval("precision_score", predictions, references)


def seqeval_recall(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> float:
    """Entity-level micro recall, default (conlleval-compatible) mode."""
    return _seqeval("recall_score", predictions, references)


# --- SQuAD (official evaluate-v1.1.py / evaluate-v2.0.py rules) -----------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation, drop articles a/an/the, collapse whitespace (in that order)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _exact(prediction: str, gold: str) -> int:
    return int(normalize_answer(prediction) == normalize_answer(gold))


def _token_f1(prediction: str, gold: str, *, v2: bool) -> float:
    pred_toks = normalize_answer(prediction).split()
    gold_toks = normalize_answer(gold).split()
    # v2.0 added this rule so that "" against the no-answer gold [""] scores 1; v1.1 has no
    # unanswerable questions and scores any empty side 0.
    if v2 and (not pred_toks or not gold_toks):
        return float(pred_toks == gold_toks)
    num_same = sum((collections.Counter(pred_toks) & collections.Counter(gold_toks)).values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_toks)
    recall = num_same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def _check_qids(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> None:
    if not references:
        raise BertbenchError("Cannot score an empty set of SQuAD references.")
    missing = [qid for qid in references if qid not in predictions]
    # The official v1.1 script scores a missing prediction 0; v2.0 leaves it out of the total and
    # then fails on it in the HasAns/NoAns breakdown. A partial prediction file is a bug upstream,
    # and a number computed from it would pass for a full score, so we refuse it in both versions.
    if missing:
        shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise BertbenchError(f"{len(missing)} SQuAD question(s) have no prediction: {shown}")


def squad_v1_scores(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Official SQuAD v1.1 scores: {"exact_match", "f1"}, each the max over gold answers, averaged.

    Predictions for question ids that are not in `references` are ignored, as the official script does.
    """
    per_question = squad_v1_per_question(predictions, references)
    n = len(per_question)
    return {"exact_match": 100.0 * sum(em for em, _ in per_question.values()) / n,
            "f1": 100.0 * sum(f1 for _, f1 in per_question.values()) / n}


def squad_v1_per_question(
    predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]
) -> dict[str, tuple[float, float]]:
    """{question id: (exact match, F1)}, each in [0, 1] and the max over the gold answers, in the references'
    order: what `squad_v1_scores` averages, and what the report resamples questions from."""
    _check_qids(predictions, references)
    out = {}
    for qid, golds in references.items():
        if not golds:
            raise BertbenchError(
                f"SQuAD v1.1 question {qid!r} has no gold answer (v1.1 has no unanswerable questions)."
            )
        pred = predictions[qid]
        out[qid] = (float(max(_exact(pred, g) for g in golds)), max(_token_f1(pred, g, v2=False) for g in golds))
    return out


def _find_best_thresh(predictions: Mapping[str, str], scores: Mapping[str, float], na_probs: Mapping[str, float],
                      has_ans: Mapping[str, bool]) -> tuple[float, float]:
    """The official `find_best_thresh`, quirks kept so numbers match the leaderboard's.

    Start from "every question predicted no-answer" (score = number of NoAns questions), then open
    questions one by one in order of rising no-answer probability and keep the best running score.
    Quirks: ties in probability are not grouped (a best score can fall inside a tie), the starting
    threshold is 0.0 whatever the probabilities, and "answered" means a non-empty raw prediction.
    """
    cur = best = float(sum(1 for v in has_ans.values() if not v))
    best_thresh = 0.0
    # Sorted over the na_probs dict so ties keep its order, as in the official script.
    for qid in sorted((q for q in na_probs if q in scores), key=lambda q: na_probs[q]):
        if has_ans[qid]:
            cur += scores[qid]
        elif predictions[qid]:
            cur -= 1
        if cur > best:
            best = cur
            best_thresh = na_probs[qid]
    return 100.0 * best / len(scores), best_thresh


def squad_v2_scores(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]],
                    no_answer_probs: Mapping[str, float] | None = None, threshold: float = 1.0) -> dict[str, float]:
    """Official SQuAD v2.0 scores.

    An unanswerable question has gold [""] (or []); the prediction "" scores 1 on it. A question is
    predicted unanswerable when its no-answer probability exceeds `threshold` (1.0 by default, as the
    official script, so by default predictions are taken as they are). Returns exact, f1, total;
    HasAns_{exact,f1,total} and NoAns_{exact,f1,total} when such questions exist; and, only when
    `no_answer_probs` is given, best_exact, best_exact_thresh, best_f1, best_f1_thresh. Exactly the
    keys the official script writes.
    """
    _check_qids(predictions, references)
    if no_answer_probs is not None:
        lacking = [qid for qid in references if qid not in no_answer_probs]
        if lacking:
            raise BertbenchError(f"{len(lacking)} SQuAD question(s) have no no-answer probability: {lacking[:5]}")
    # has_ans mirrors the official `bool(qa["answers"])` on the raw gold strings.
    has_ans = {qid: any(golds) for qid, golds in references.items()}
    usable = {qid: [g for g in golds if normalize_answer(g)] or [""] for qid, golds in references.items()}
    exact_raw = {qid: max(_exact(predictions[qid], g) for g in golds) for qid, golds in usable.items()}
    f1_raw = {qid: max(_token_f1(predictions[qid], g, v2=True) for g in golds) for qid, golds in usable.items()}

    probs = no_answer_probs if no_answer_probs is not None else {qid: 0.0 for qid in references}

    def thresholded(raw: dict[str, float]) -> dict[str, float]:
        # A question whose no-answer probability exceeds the threshold is answered "": right
        # (1.0) exactly when it has no answer, whatever the span prediction was.
        return {q: float(not has_ans[q]) if probs[q] > threshold else s for q, s in raw.items()}

    exact, f1s = thresholded(exact_raw), thresholded(f1_raw)

    def summary(qids: list[str], prefix: str = "") -> dict[str, float]:
        n = len(qids)
        return {
            f"{prefix}exact": 100.0 * sum(exact[q] for q in qids) / n,
            f"{prefix}f1": 100.0 * sum(f1s[q] for q in qids) / n,
            f"{prefix}total": n,
        }

    out = summary(list(references))
    for prefix, want in (("HasAns_", True), ("NoAns_", False)):
        qids = [q for q in references if has_ans[q] is want]
        if qids:  # the official script omits a group with no questions (it would divide by zero)
            out.update(summary(qids, prefix))
    if no_answer_probs is not None:
        for key, raw in (("exact", exact_raw), ("f1", f1_raw)):
            out[f"best_{key}"], out[f"best_{key}_thresh"] = _find_best_thresh(
                predictions, raw, no_answer_probs, has_ans
            )
    return out


def squad_em(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> float:
    """SQuAD v1.1 exact match."""
    return squad_v1_scores(predictions, references)["exact_match"]


def squad_f1(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> float:
    """SQuAD v1.1 token F1."""
    return squad_v1_scores(predictions, references)["f1"]


def squad_v2_em(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> float:
    """SQuAD v2.0 exact match of the predictions as given (no threshold)."""
    return squad_v2_scores(predictions, references)["exact"]


def squad_v2_f1(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> float:
    """SQuAD v2.0 F1 of the predictions as given (no threshold)."""
    return squad_v2_scores(predictions, references)["f1"]


# --- registry -------------------------------------------------------------------------------------

METRICS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        MetricSpec("accuracy", accuracy, description="Accuracy (MNLI, QNLI, SST-2, RTE, WNLI, SWAG)"),
        MetricSpec("f1", f1, description="Binary F1 of class 1 (MRPC, QQP)"),
        MetricSpec("mcc", mcc, description="Matthews correlation x100 (CoLA)"),
        MetricSpec("pearson", pearson, description="Pearson correlation x100 (STS-B)"),
        MetricSpec("spearman", spearman, description="Spearman correlation x100 (STS-B)"),
        MetricSpec("seqeval_f1", seqeval_f1, description="Entity F1, conlleval-compatible (CoNLL-2003)"),
        MetricSpec("seqeval_f1_strict", seqeval_f1_strict, description="Entity F1, strict IOB2"),
        MetricSpec("seqeval_precision", seqeval_precision, description="Entity precision, conlleval"),
        MetricSpec("seqeval_recall", seqeval_recall, description="Entity recall, conlleval"),
        MetricSpec("squad_em", squad_em, description="SQuAD v1.1 exact match"),
        MetricSpec("squad_f1", squad_f1, description="SQuAD v1.1 token F1"),
        MetricSpec("squad_v2_em", squad_v2_em, description="SQuAD v2.0 exact match"),
        MetricSpec("squad_v2_f1", squad_v2_f1, description="SQuAD v2.0 token F1"),
    )
}


def get_metric(name: str) -> MetricSpec:
    try:
        return METRICS[name]
    except KeyError:
        raise BertbenchError(did_you_mean(name, METRICS, "metric")) from None


def compute(names: Sequence[str], predictions: Any, references: Any) -> dict[str, float]:
    """Score one set of predictions with several metrics: {name: value}, in the order given."""
    if isinstance(names, str):  # a bare string would be iterated letter by letter
        raise TypeError(f"compute() takes a sequence of metric names, not the string {names!r}")
    specs = [get_metric(name) for name in names]  # fail on a bad name before any scoring
    return {spec.name: spec.fn(predictions, references) for spec in specs}
