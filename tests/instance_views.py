"""Whole-array views the tests read, kept here because the package reads instances and documents one at a time:
an InstanceSet's per-instance arrays in reading order, every instance's ids back to back, and a tokenised corpus'
document as its sentences."""
from __future__ import annotations

import numpy as np


def ordered(instances, key: str) -> np.ndarray:
    """One entry per instance, in reading order: "length", "nsp_labels", "doc_a" or "doc_b"."""
    arr = np.asarray(instances.arrays[key])
    return arr if instances.order is None else arr[np.asarray(instances.order)]


def lengths(instances) -> np.ndarray:
    return ordered(instances, "length").astype(np.int64)


def all_input_ids(instances) -> np.ndarray:
    """Every instance's ids (as read, masked when static) back to back."""
    parts = [instances[i]["input_ids"] for i in range(len(instances))]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def document(corpus, d: int) -> list[np.ndarray]:
    """Document `d` of a TokenizedCorpus as a list of sentences (arrays of ids)."""
    so = corpus.sent_offsets
    return [corpus.tokens[so[j]:so[j + 1]] for j in range(corpus.doc_offsets[d], corpus.doc_offsets[d + 1])]
