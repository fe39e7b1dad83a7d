"""Where a model's special tokens go, read from its tokenizer rather than assumed: BERT's `[CLS] A [SEP] B [SEP]`,
RoBERTa's `<s> A </s></s> B </s>`, DeBERTa's `[CLS] A [SEP] B [SEP]`. The feature builders that assemble
sequences themselves (SQuAD windows, NER chunks) put the pieces between these.

The layout is the tokenizer's own post-processor applied to two short texts: whatever it adds before,
between and after them is the template, with the token types it gives each part. Segment ids go into a
feature only where the model has them (`has_segments`).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Template:
    """ids and token types of the special tokens: prefix A (middle B) suffix; `a_type`/`b_type` the texts' types."""

    prefix: tuple[int, ...]
    middle: tuple[int, ...]
    suffix: tuple[int, ...]
    prefix_types: tuple[int, ...]
    middle_types: tuple[int, ...]
    suffix_types: tuple[int, ...]
    a_type: int
    b_type: int

    @property
    def n_special(self) -> int:
        return len(self.prefix) + len(self.middle) + len(self.suffix)


def _parts(encoding) -> Template:
    seq = encoding.sequence_ids
    ids, types = list(encoding.ids), list(encoding.type_ids)
    a = [i for i, s in enumerate(seq) if s == 0]
    b = [i for i, s in enumerate(seq) if s == 1]
    a_end = a[-1] + 1
    b_start, b_end = (b[0], b[-1] + 1) if b else (a_end, a_end)
    return Template(tuple(ids[: a[0]]), tuple(ids[a_end:b_start]), tuple(ids[b_end:]), tuple(types[: a[0]]),
                    tuple(types[a_end:b_start]), tuple(types[b_end:]), types[a[0]], types[b[0]] if b else types[a[0]])


def template(tokenizer, pair: bool) -> Template:
    """The special-token layout of `tokenizer` (anything with a `tokenizers` `.backend`) for one text or a pair
    (for one text `middle` is empty)."""
    key = "_bertbench_pair_template" if pair else "_bertbench_single_template"
    cached = getattr(tokenizer, key, None)
    if cached is not None:
        return cached
    found = _parts(tokenizer.backend.encode("a", "b" if pair else None, add_special_tokens=True))
    try:
        setattr(tokenizer, key, found)
    except AttributeError:
        pass  # a tokenizer without attributes of its own: computed again next time (two tiny encodings)
    return found


def has_segments(tokenizer) -> bool:
    """Whether features carry token_type_ids: a model without token type embeddings (RoBERTa's single type,
    DistilBERT, DeBERTa-v2) gets none."""
    return bool(getattr(tokenizer, "segments", True))


__all__ = ["Template", "has_segments", "template"]
