"""Token classification (CoNLL-2003 NER): words → word pieces with aligned labels, and back.

The first word piece of each word carries the word's label; the other pieces, [CLS], [SEP] and any
context get -100 (no loss), as the BERT paper's NER set-up (§5.3). A sentence longer than
max_seq_len − 2 pieces is cut at word boundaries into several features, so every word is predicted
exactly once; the rest of the sentence fills any room left as unlabelled context. With
`doc_context=True` the room is filled from the neighbouring sentences of the same document instead
(the "document context" of the paper's CoNLL result), still unlabelled. Sentences without a
document id (the hub's copy has no document boundaries) get no document context.

Feature keys: input_ids, token_type_ids (all 0; none for a model without segments), example_index, word_index (the word a labelled
piece belongs to, -1 elsewhere), labels (label ids with -100; absent when the example has no tags).
"""
from __future__ import annotations

import itertools
from typing import Any, Optional, Sequence

from bertbench.data import IGNORE_INDEX
from bertbench.data.task_readers import TokenExample

Feature = dict[str, Any]


def _word_pieces(examples: list[TokenExample], tokenizer) -> list[list[list[int]]]:
    """Per example, per word: its piece ids. A word the normaliser erases entirely becomes [UNK], so
    that every word still has a first piece to carry (and later receive) its label."""
    # a byte-level BPE encodes pre-split words as following a space (hf_encoder.HFTokenizer.word_backend)
    backend = getattr(tokenizer, "word_backend", tokenizer.backend)
    encs = backend.encode_batch([ex.words for ex in examples], is_pretokenized=True, add_special_tokens=False)
    out = []
    for ex, enc in zip(examples, encs):
        pieces: list[list[int]] = [[] for _ in ex.words]
        for tok, w in zip(enc.ids, enc.word_ids):
            pieces[w].append(tok)
        out.append([p or [tokenizer.unk_id] for p in pieces])
    return out


def _chunks(pieces: list[list[int]], budget: int) -> list[tuple[int, int]]:
    """Consecutive word ranges [a, b) whose pieces fit `budget` (a longer single word is cut later)."""
    chunks, a, used = [], 0, 0
    for w, p in enumerate(pieces):
        if used and used + len(p) > budget:
            chunks.append((a, w))
            a, used = w, 0
        used += len(p)
    chunks.append((a, len(pieces)))
    return chunks


def token_features(examples: list[TokenExample], tokenizer, max_seq_len: int, labels: Sequence[str],
                   *, doc_context: bool = False) -> list[Feature]:
    """One feature per sentence (more for a sentence that does not fit), labels on first pieces."""
    from bertbench.data.special_tokens import has_segments, template

    t = template(tokenizer, pair=False)  # BERT's [CLS] … [SEP], RoBERTa's <s> … </s>
    segments = has_segments(tokenizer)
    budget = max_seq_len - t.n_special
    if budget < 1:
        raise ValueError(f"max_seq_len {max_seq_len} leaves no room between [CLS] and [SEP]")
    label_id = {lab: k for k, lab in enumerate(labels)}
    pieces = _word_pieces(examples, tokenizer)
    flat = [[t for p in ps for t in p] for ps in pieces]  # every piece of each sentence
    # neighbours in document order, for document context
    order: dict[str, list[int]] = {}
    for i, ex in enumerate(examples):
        order.setdefault(ex.doc_id, []).append(i)
    for idx in order.values():
        idx.sort(key=lambda i: examples[i].sentence_index)
    position = {i: (doc, k) for doc, idx in order.items() for k, i in enumerate(idx)}

    def left_context(i: int, before: list[int], want: int) -> list[int]:
        got = before[-want:] if want else []
        if doc_context and examples[i].doc_id:
            doc, k = position[i]
            while len(got) < want and k > 0:
                k -= 1
                got = flat[order[doc][k]][-(want - len(got)):] + got
        return got

    def right_context(i: int, after: list[int], want: int) -> list[int]:
        got = after[:want]
        if doc_context and examples[i].doc_id:
            doc, k = position[i]
            while len(got) < want and k + 1 < len(order[doc]):
                k += 1
                got = got + flat[order[doc][k]][: want - len(got)]
        return got

    out: list[Feature] = []
    for i, ex in enumerate(examples):
        ps = pieces[i]
        starts = [0, *itertools.accumulate(len(p) for p in ps)]
        for a, b in _chunks(ps, budget):
            ids: list[int] = []
            words: list[int] = []
            for w in range(a, b):
                p = ps[w][: budget - len(ids)] if b - a == 1 else ps[w]  # a lone over-long word is cut
                ids.extend(p)
                words.extend([w] + [-1] * (len(p) - 1))
            room = budget - len(ids)
            before, after = flat[i][: starts[a]], flat[i][starts[b]:]
            left = left_context(i, before, room // 2)
            right = right_context(i, after, room - len(left))
            left = left_context(i, before, room - len(right))  # give unused right-hand room to the left
            f: Feature = {
                "input_ids": [*t.prefix, *left, *ids, *right, *t.suffix],
                **({"token_type_ids": [*t.prefix_types, *[t.a_type] * (len(left) + len(ids) + len(right)),
                                       *t.suffix_types]} if segments else {}),
                "example_index": i,
                "word_index": [-1] * (len(left) + len(t.prefix)) + words + [-1] * (len(right) + len(t.suffix)),
            }
            if ex.tags is not None:
                f["labels"] = [label_id[ex.tags[w]] if w >= 0 else IGNORE_INDEX for w in f["word_index"]]
            out.append(f)
    return out


def decode_tokens(examples: list[TokenExample], features: list[Feature], predictions: Sequence[Sequence[int]],
                  labels: Sequence[str]) -> list[list[str]]:
    """Per-feature predicted label ids per position (rows may be padded) → one tag per word, per example."""
    if len(features) != len(predictions):
        raise ValueError(f"{len(features)} features but {len(predictions)} prediction rows")
    tags: list[list[Optional[str]]] = [[None] * len(ex.words) for ex in examples]
    for f, pred in zip(features, predictions):
        row = tags[f["example_index"]]
        for pos, w in enumerate(f["word_index"]):
            if w >= 0:
                row[w] = labels[int(pred[pos])]
    for ex, row in zip(examples, tags):
        if any(t is None for t in row):
            raise ValueError(f"example {ex.id!r}: words {[k for k, t in enumerate(row) if t is None]} got no prediction")
    return tags  # type: ignore[return-value]
