"""Pre-training instances as an index into the corpus' memory-mapped token ids (Megatron-LM's indexed
datasets are the model): an instance is a short list of segments (start, length) into `corpus tokens +
[CLS, SEP]`, and its ids are gathered when it is read. The index lives on disk beside the tokenised
corpus and is memory-mapped, so a training process holds no copy of the text, whatever the corpus size.

Files of an index folder (1-D .npy arrays; `seg_*` back to back, the rest one entry per instance as built):
    seg_start.npy int64, seg_len.npy int32      the segments; start = n_tokens is [CLS], n_tokens + 1 [SEP]
    seg_offsets.npy int64 (n + 1)               instance r holds segments seg_offsets[r]:seg_offsets[r + 1]
    length.npy int32, type_start.npy int32      ids per instance; first position with token type 1
    nsp_labels.npy int8, doc_a.npy, doc_b.npy int32   NSP label (-1 none); documents of segments A and B
    order.npy int64 (n)                         the builder's shuffle: instance i is built instance order[i]
    meta.json                                   counts and statistics
`InstanceSet` reads a folder (or the same arrays held in memory, for small held-out sets built on the side).
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from bertbench.data.corpus import NpyAppender

PER_INSTANCE = {"length": np.int32, "type_start": np.int32, "nsp_labels": np.int8, "doc_a": np.int32, "doc_b": np.int32}
SEGMENTS = {"seg_start": np.int64, "seg_len": np.int32, "seg_offsets": np.int64}
FLUSH_INSTANCES = 1 << 15  # the writer's buffer: this many instances' segments, then to disk


def sample_order(rng: random.Random, n: int, sink=None, offset: int = 0) -> Optional[np.ndarray]:
    """`rng.sample(range(n), n)` as CPython draws it (its pool algorithm, which it uses whenever k = n), plus
    `offset`: appended to `sink` (an NpyAppender) in chunks, or returned as an int64 array when `sink` is None.
    The pool is int32 and the drawn order leaves in chunks, so building it holds 4 bytes per instance (16 when
    pool and order were whole int64 arrays: the largest per-instance cost of an index build)."""
    pool = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
    keep = _MemorySink(np.int64) if sink is None else sink
    chunk = np.empty(min(n, FLUSH_INSTANCES), dtype=np.int64)
    randbelow = rng._randbelow
    filled = 0
    for i in range(n):
        j = randbelow(n - i)
        chunk[filled] = pool[j]
        pool[j] = pool[n - i - 1]
        filled += 1
        if filled == len(chunk):
            keep.append(chunk + offset)
            filled = 0
    if filled:
        keep.append(chunk[:filled] + offset)
    return keep.array() if sink is None else None


class _MemorySink:
    """NpyAppender's interface, kept in memory (small sets built on the side)."""

    def __init__(self, dtype):
        self.dtype, self.parts, self.count = np.dtype(dtype), [], 0

    def append(self, values) -> None:
        arr = np.asarray(values, dtype=self.dtype)
        self.parts.append(arr)
        self.count += len(arr)

    def close(self) -> None:
        pass

    def array(self) -> np.ndarray:
        return np.concatenate(self.parts) if self.parts else np.zeros(0, self.dtype)


class IndexWriter:
    """Collects instances as segments into `corpus tokens + [CLS, SEP]` and writes them out in chunks."""

    def __init__(self, n_tokens: int, folder: Optional[Path] = None):
        self.CLS, self.SEP = n_tokens, n_tokens + 1  # positions of the two specials after the corpus' tokens
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        self.sinks = {k: (NpyAppender(folder / f"{k}.npy", t) if folder is not None else _MemorySink(t))
                      for k, t in {**SEGMENTS, **PER_INSTANCE}.items()}
        self.sinks["seg_offsets"].append([0])
        self.n_segments = 0
        self.length_sum, self.is_next = 0, 0  # running statistics for meta.json: no pass over the written arrays
        self._buf: dict[str, list[int]] = {k: [] for k in (*SEGMENTS, *PER_INSTANCE)}

    def add(self, segments: list[tuple[int, int]], type_start: Optional[int], label: int, doc_a: int, doc_b: int = -1) -> None:
        buf = self._buf
        total = 0
        for s, n in segments:
            buf["seg_start"].append(s)
            buf["seg_len"].append(n)
            total += n
        self.n_segments += len(segments)
        buf["seg_offsets"].append(self.n_segments)
        buf["length"].append(total)
        buf["type_start"].append(total if type_start is None else type_start)
        buf["nsp_labels"].append(label)
        buf["doc_a"].append(doc_a)
        buf["doc_b"].append(doc_b)
        if len(buf["length"]) >= FLUSH_INSTANCES:
            self.flush()

    @property
    def count(self) -> int:
        return self.sinks["length"].count + len(self._buf["length"])

    def flush(self) -> None:
        self.length_sum += sum(self._buf["length"])
        self.is_next += self._buf["nsp_labels"].count(0)  # instances.IS_NEXT (that module imports this one)
        for k, values in self._buf.items():
            if values:
                self.sinks[k].append(values)
            values.clear()

    def close(self) -> dict[str, np.ndarray]:
        """Flush and close; the arrays when kept in memory (else {})."""
        self.flush()
        for sink in self.sinks.values():
            sink.close()
        return {k: s.array() for k, s in self.sinks.items() if isinstance(s, _MemorySink)}


class InstanceSet:
    """Instances read through an index. `self[i]` → {"input_ids", "token_type_ids", "nsp_label", "index"}
    (+ "lm_labels" when statically masked); arrays are int64 numpy, ready for the collator. Reading an instance
    touches its few index entries and its tokens only."""

    def __init__(self, tokens: np.ndarray, cls_id: int, sep_id: int, arrays: dict[str, np.ndarray],
                 order: Optional[np.ndarray], folder: Optional[Path] = None,
                 static_mask: Optional[Callable[[int, np.ndarray], tuple[np.ndarray, np.ndarray]]] = None):
        self.tokens, self.cls_id, self.sep_id = tokens, cls_id, sep_id
        self.arrays, self.order, self.folder, self.static_mask = arrays, order, folder, static_mask
        self._n_built = len(arrays["length"])
        self.built_stats: Optional[dict[str, Any]] = None  # set by the builder: statistics kept while writing

    @classmethod
    def open(cls, folder: Path, tokens: np.ndarray, cls_id: int, sep_id: int, static_mask=None) -> "InstanceSet":
        arrays = {k: np.load(folder / f"{k}.npy", mmap_mode="r") for k in (*SEGMENTS, *PER_INSTANCE)}
        order = np.load(folder / "order.npy", mmap_mode="r") if (folder / "order.npy").is_file() else None
        return cls(tokens, cls_id, sep_id, arrays, order, folder, static_mask)

    def __getstate__(self) -> dict[str, Any]:
        # a memory-mapped array pickles as a full copy: send the folder (DataLoader workers reopen it)
        state = dict(self.__dict__)
        if self.folder is not None:
            state.update(arrays=None, order=None)
        if isinstance(self.tokens, np.memmap):
            state["tokens"] = (self.tokens.filename, self.tokens.dtype.str, self.tokens.shape, self.tokens.offset)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if isinstance(self.tokens, tuple):
            name, dtype, shape, offset = self.tokens
            self.tokens = np.memmap(name, dtype=np.dtype(dtype), mode="r", shape=shape, offset=offset)
        if self.arrays is None:
            fresh = InstanceSet.open(self.folder, self.tokens, self.cls_id, self.sep_id)
            self.arrays, self.order = fresh.arrays, fresh.order

    def __len__(self) -> int:
        return self._n_built

    def _built(self, i: int) -> int:
        return int(self.order[i]) if self.order is not None else i

    def ids(self, i: int) -> np.ndarray:
        """The ids of instance i (int64)."""
        a = self.arrays
        r = self._built(i)
        lo, hi = int(a["seg_offsets"][r]), int(a["seg_offsets"][r + 1])
        out = np.empty(int(a["length"][r]), dtype=np.int64)
        n_tokens, pos = len(self.tokens), 0
        for s, n in zip(a["seg_start"][lo:hi].tolist(), a["seg_len"][lo:hi].tolist()):
            if s < n_tokens:
                out[pos:pos + n] = self.tokens[s:s + n]
            else:
                out[pos:pos + n] = self.cls_id if s == n_tokens else self.sep_id
            pos += n
        return out

    def __getitem__(self, i: int) -> dict[str, Any]:
        i = int(i)
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        ids = self.ids(i)
        r = self._built(i)
        types = np.zeros(len(ids), dtype=np.int64)
        types[int(self.arrays["type_start"][r]):] = 1
        item = {"input_ids": ids, "token_type_ids": types, "nsp_label": int(self.arrays["nsp_labels"][r]), "index": i}
        if self.static_mask is not None:
            item["input_ids"], item["lm_labels"] = self.static_mask(i, ids)
        return item
