"""Examples → model features, one function per task type; tokenizer-driven, no model code.

Every feature is a dict of python ints (or lists of them); nothing is padded — the trainer pads to the
longest sequence in its batch and derives the attention mask from the lengths. Keys by task type:

  classification / regression  input_ids, token_type_ids, example_index, labels (int | float; absent when unlabelled)
  multiple_choice              input_ids, token_type_ids (one list per choice), example_index, labels
  span_qa                      input_ids, token_type_ids, example_index, offsets, token_is_max_context,
                               start_positions, end_positions        (see features_qa)
  token_classification         input_ids, token_type_ids, example_index, word_index, labels (-100 = no loss)
                               (see features_token)

token_type_ids are left out for a model without segments (special_tokens.has_segments: RoBERTa,
DistilBERT, DeBERTa-v2). `build_features(task, examples, tokenizer)` picks the function from `task.type` and the lengths from
`task.hparams`; decoding lives beside the span-QA and token features (`decode_qa`, `decode_tokens`).
"""
from __future__ import annotations

from typing import Any, Optional

from bertbench.data.features_qa import QADecoding, decode_qa, qa_features
from bertbench.data import IGNORE_INDEX
from bertbench.data.special_tokens import has_segments
from bertbench.data.features_token import decode_tokens, token_features
from bertbench.data.task_readers import ChoiceExample, Example, TextExample
from bertbench.errors import BertbenchError
from bertbench.tasks import TaskSpec

__all__ = ["IGNORE_INDEX", "QADecoding", "build_features", "choice_features", "decode_qa", "decode_tokens",
           "pair_features", "qa_features", "token_features"]

Feature = dict[str, Any]


def pair_features(examples: list[TextExample], tokenizer, max_seq_len: int) -> list[Feature]:
    """[CLS] a [SEP] (b [SEP]), truncated longest-first to max_seq_len, as BERT's run_classifier.py (another
    model's own special tokens: its tokenizer's post-processor adds them)."""
    singles = [ex.text_b is None for ex in examples]
    if any(singles) and not all(singles):
        raise BertbenchError("pair_features: mixed single-text and pair examples in one call")
    texts = [ex.text_a for ex in examples]
    pairs = None if all(singles) else [ex.text_b for ex in examples]
    encs = tokenizer.encode_batch(texts, pairs, max_length=max_seq_len) if examples else []
    segments = has_segments(tokenizer)
    return [_feature(list(enc.input_ids), list(enc.token_type_ids), i, ex.label, segments)
            for i, (ex, enc) in enumerate(zip(examples, encs))]


def _feature(input_ids: list, token_type_ids: list, index: int, label: Any, segments: bool) -> Feature:
    """One example's feature: its ids, its index, its token types where the model has segments, its label."""
    f: Feature = {"input_ids": input_ids, "example_index": index}
    if segments:
        f["token_type_ids"] = token_type_ids
    if label is not None:
        f["labels"] = label
    return f


def choice_features(examples: list[ChoiceExample], tokenizer, max_seq_len: int) -> list[Feature]:
    """One feature per example holding every choice: [CLS] context [SEP] prefix + " " + ending [SEP]
    (SWAG: context = sent1, prefix = sent2), each truncated longest-first to max_seq_len."""
    firsts: list[str] = []
    seconds: list[str] = []
    for ex in examples:
        for ending in ex.endings:
            firsts.append(ex.context)
            seconds.append(f"{ex.prefix} {ending}" if ex.prefix else ending)
    encs = tokenizer.encode_batch(firsts, seconds, max_length=max_seq_len) if firsts else []
    segments = has_segments(tokenizer)
    out: list[Feature] = []
    k = 0
    for i, ex in enumerate(examples):  # input_ids and token_type_ids: (num_choices, len_c)
        chunk, k = encs[k:k + len(ex.endings)], k + len(ex.endings)
        out.append(_feature([list(e.input_ids) for e in chunk], [list(e.token_type_ids) for e in chunk], i, ex.label,
                            segments))
    return out


def build_features(task: TaskSpec, examples: list[Example], tokenizer, *, max_seq_len: Optional[int] = None,
                   doc_context: bool = False) -> list[Feature]:
    """Features for `examples` of `task`, with the task's lengths (max_seq_len may be overridden)."""
    h = task.hparams
    seq = max_seq_len or h.max_seq_len
    if task.type in ("classification", "regression"):
        return pair_features(examples, tokenizer, seq)  # type: ignore[arg-type]
    if task.type == "multiple_choice":
        return choice_features(examples, tokenizer, seq)  # type: ignore[arg-type]
    if task.type == "span_qa":
        return qa_features(examples, tokenizer, seq, h.doc_stride, h.max_query_len)  # type: ignore[arg-type]
    if task.type == "token_classification":
        return token_features(examples, tokenizer, seq, task.labels, doc_context=doc_context)  # type: ignore[arg-type]
    raise BertbenchError(f"no features for task type {task.type!r}")
