"""Extractive QA (SQuAD v1.1 / v2.0): document windows → features, and logits → answer text.

Follows google-research/bert run_squad.py: the question is cut to `max_query_len` word pieces; the
paragraph is cut into windows of the remaining length whose starts are `doc_stride` pieces apart
(HF's run_qa.py reads its doc_stride as the *overlap* instead); a window that does not hold the whole
answer, and an unanswerable question, point both positions at [CLS] (0). Decoding takes the n-best
starts and ends of each window, keeps spans inside the paragraph, at most `max_answer_len` pieces
long and starting at a token whose window gives it the most context, and reads the answer straight
out of the original paragraph through the tokenizer's character offsets (no detokenisation).

Feature keys: input_ids, token_type_ids (where the model has segments), example_index, start_positions, end_positions (both absent
for unlabelled data), offsets ([start, end) characters into the context for paragraph tokens,
[-1, -1] for [CLS], question and [SEP]), token_is_max_context (1/0 per token). The special tokens are the
model's own (special_tokens.template), so a RoBERTa or DeBERTa window is built the same way.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Sequence

from bertbench.data.task_readers import QAExample

Feature = dict[str, Any]
NO_OFFSET = [-1, -1]


def _doc_spans(n_tokens: int, max_doc: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) windows over the paragraph, as run_squad.py: starts `stride` apart."""
    spans: list[tuple[int, int]] = []
    start = 0
    while True:
        length = min(n_tokens - start, max_doc)
        spans.append((start, length))
        if start + length >= n_tokens:
            return spans
        start += min(length, stride)


def _best_span_per_token(spans: list[tuple[int, int]], n_tokens: int) -> list[int]:
    """For each paragraph token, the window giving it the most context, as run_squad.py's
    _check_is_max_context: the highest min(left, right) + 0.01 * window length (first on ties)."""
    if len(spans) == 1:
        return [0] * n_tokens
    best = [-1.0] * n_tokens
    best_i = [0] * n_tokens
    for i, (s, length) in enumerate(spans):
        for pos in range(s, s + length):
            score = min(pos - s, s + length - 1 - pos) + 0.01 * length
            if score > best[pos]:
                best[pos], best_i[pos] = score, i
    return best_i


def _answer_token_span(offsets: list[list[int]], char_start: int, char_end: int) -> tuple[int, int] | None:
    """First and last paragraph token overlapping [char_start, char_end), or None."""
    ends = [e for _, e in offsets]
    starts = [s for s, _ in offsets]
    first = bisect.bisect_right(ends, char_start)  # first token ending after the answer starts
    last = bisect.bisect_left(starts, char_end) - 1  # last token starting before the answer ends
    if first >= len(offsets) or last < first:
        return None
    return first, last


def qa_features(examples: list[QAExample], tokenizer, max_seq_len: int = 384, doc_stride: int = 128,
                max_query_len: int = 64) -> list[Feature]:
    """One feature per window: [CLS] question [SEP] window [SEP] for BERT (token types 0 … 0 1 … 1); the
    model's own special tokens and types in general (special_tokens.template: RoBERTa's <s> q </s></s> w </s>)."""
    from bertbench.data.special_tokens import has_segments, template

    backend = tokenizer.backend
    questions = backend.encode_batch([ex.question for ex in examples], add_special_tokens=False)
    contexts = list(dict.fromkeys(ex.context for ex in examples))  # each paragraph tokenised once
    ctx_enc = {c: (e.ids, [list(o) for o in e.offsets])
               for c, e in zip(contexts, backend.encode_batch(contexts, add_special_tokens=False))}
    t = template(tokenizer, pair=True)
    segments = has_segments(tokenizer)
    out: list[Feature] = []
    for i, ex in enumerate(examples):
        q = questions[i].ids[:max_query_len]
        doc_ids, doc_offsets = ctx_enc[ex.context]
        max_doc = max_seq_len - len(q) - t.n_special
        if max_doc < 1:
            raise ValueError(f"max_seq_len {max_seq_len} leaves no room for the paragraph after {len(q)} question tokens")
        gold = None
        if ex.answers and not ex.is_impossible:
            a = ex.answers[0]
            gold = _answer_token_span(doc_offsets, a.start, a.start + len(a.text))
        spans = _doc_spans(len(doc_ids), max_doc, doc_stride)
        best_span = _best_span_per_token(spans, len(doc_ids))
        head = len(t.prefix) + len(q) + len(t.middle)  # [CLS] q [SEP]
        head_types = [*t.prefix_types, *[t.a_type] * len(q), *t.middle_types]
        tail = len(t.suffix)
        for k, (s, length) in enumerate(spans):
            f: Feature = {
                "input_ids": [*t.prefix, *q, *t.middle, *doc_ids[s:s + length], *t.suffix],
                **({"token_type_ids": head_types + [t.b_type] * length + list(t.suffix_types)} if segments else {}),
                "example_index": i,
                "offsets": [NO_OFFSET] * head + doc_offsets[s:s + length] + [NO_OFFSET] * tail,  # lists shared, never mutated
                "token_is_max_context": [0] * head + [int(b == k) for b in best_span[s:s + length]] + [0] * tail,
            }
            if ex.answers or ex.is_impossible:
                if gold is not None and s <= gold[0] and gold[1] <= s + length - 1:
                    f["start_positions"], f["end_positions"] = gold[0] - s + head, gold[1] - s + head
                else:  # unanswerable, or the answer is not (wholly) in this window: the first token ([CLS], <s>)
                    f["start_positions"] = f["end_positions"] = 0
            out.append(f)
    return out


@dataclass
class QADecoding:
    """predictions: the answer per question id ("" = no answer, SQuAD 2.0 only, when null_odds > τ);
    best_non_null: the best span whatever the null score; null_odds: score_null − best span score,
    the per-question no-answer odds for the official τ sweep (`no_answer_probs` of squad_v2_scores)."""

    predictions: dict[str, str] = field(default_factory=dict)
    best_non_null: dict[str, str] = field(default_factory=dict)
    null_odds: dict[str, float] = field(default_factory=dict)


def decode_qa(examples: list[QAExample], features: list[Feature], start_logits: Sequence[Sequence[float]],
              end_logits: Sequence[Sequence[float]], *, n_best: int = 20, max_answer_len: int = 30,
              version_2: bool = False, null_threshold: float = 0.0) -> QADecoding:
    """Per-feature start/end logits (rows may be padded beyond the feature's length) → answers.

    score_null of a question is start[0] + end[0] minimised over its windows (as run_squad.py); with
    version_2 the prediction is "" when score_null − best_non_null > null_threshold. A question with
    no valid span gets "" and null odds +inf.
    """
    import numpy as np

    if not (len(features) == len(start_logits) == len(end_logits)):
        raise ValueError(f"{len(features)} features but {len(start_logits)} start and {len(end_logits)} end logit rows")
    by_example: dict[int, list[int]] = {}
    for j, f in enumerate(features):
        by_example.setdefault(f["example_index"], []).append(j)
    out = QADecoding()
    for i, ex in enumerate(examples):
        best_score, best_text = -float("inf"), ""
        score_null = float("inf")
        for j in by_example.get(i, []):
            f = features[j]
            n = len(f["input_ids"])
            s_log = np.asarray(start_logits[j][:n], dtype=np.float64)
            e_log = np.asarray(end_logits[j][:n], dtype=np.float64)
            score_null = min(score_null, float(s_log[0] + e_log[0]))
            offsets, max_ctx = f["offsets"], f["token_is_max_context"]
            starts = np.argsort(-s_log, kind="stable")[:n_best]
            ends = np.argsort(-e_log, kind="stable")[:n_best]
            for s in starts:
                if offsets[s][0] < 0 or not max_ctx[s]:
                    continue
                for e in ends:
                    if offsets[e][0] < 0 or e < s or e - s + 1 > max_answer_len:
                        continue
                    score = float(s_log[s] + e_log[e])
                    if score > best_score:
                        best_score, best_text = score, ex.context[offsets[s][0]:offsets[e][1]]
        odds = score_null - best_score if best_score > -float("inf") else float("inf")
        out.best_non_null[ex.id] = best_text
        out.null_odds[ex.id] = odds
        out.predictions[ex.id] = "" if version_2 and odds > null_threshold else best_text
    return out
