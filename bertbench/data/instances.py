"""Pre-training instances from a tokenised corpus, the way google-research/bert's
`create_pretraining_data.py` builds them, plus the "No NSP", RoBERTa full-sentence and causal layouts.

Layouts (all start with [CLS]; every instance ≤ max_seq_len tokens):
- NSP (objective "mlm+nsp"): `[CLS] A [SEP] B [SEP]`, token types 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`.
  As the original: a target length of max_seq_len − 3 (with probability `short_seq_prob` a random one in
  [2, max_seq_len − 3]); sentences are gathered until the target is reached; A is the run up to a random
  split point; B is the true continuation (IsNext, label 0) or, half of the time and always when the
  chunk is one sentence, a run of sentences from a random *other* document (NotNext, label 1), and then
  the chunk's unused sentences are put back. `truncate_seq_pair` trims the longer segment one token at a
  time from a random end. Three deliberate differences: a chunk is closed only once it holds ≥ 2
  sentences (or the document ends) — in the original a single sentence reaching the target forces a
  NotNext pair, which on books with long sentences pushed IsNext to 47.9% on our corpus (now 49–50%);
  the target length is drawn anew for every instance (the original draws it once per document, so one
  10% draw would shorten a whole book); the other document is drawn uniformly among the others (the
  original retries 10 times to avoid itself).
- No NSP (objective "mlm"), `full_sentences=False`: `[CLS] chunk [SEP]`, contiguous chunks of max_seq_len − 2 tokens of one
  document (the last one shorter), cut anywhere.
- No NSP, `full_sentences=True` (RoBERTa FULL-SENTENCES): whole sentences packed up to max_seq_len − 2,
  crossing document boundaries with a [SEP] between documents; a longer sentence is cut into pieces.
  `short_seq_prob` applies to every MLM layout, so the length distribution stays comparable.
- Causal (`objective="clm"`): the stream `doc [SEP] doc [SEP] …` cut into blocks of max_seq_len − 1
  tokens, each behind a [CLS]; no padding (the incomplete last block is dropped).

Held-out data is a slice of *documents* (never of sequences), chosen by `DataConfig.seed` alone so that
runs with different training seeds are evaluated on the same text. Instances are built once per
(corpus, split, seed, layout) into an index on disk beside the tokenised corpus (`instance_store`), streaming
over the documents with bounded memory; a training process maps it (docs/scale.md: data that lives on disk).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from bertbench.config import check_full_sentences, check_objective, is_causal, is_masked, keyed_data_fields, trains_nsp
from bertbench.data.instance_store import IndexWriter, InstanceSet
from bertbench.errors import BertbenchError
from bertbench.runtime.files import build_once

IS_NEXT, NOT_NEXT = 0, 1  # Hugging Face's convention for next_sentence_label
NO_LABEL = -1


# ----------------------------------------------------------------------------------------------
# Reading the corpus' offsets while building.


class _Window:
    """Sequential reads of a memory-mapped offsets array at close to list speed: a window of it held as a
    Python list, moved on when a read falls outside it (the layouts walk documents in order). Random reads
    (NSP's other document) go to the array itself, so they never move the window."""

    SIZE = 1 << 16

    def __init__(self, arr: np.ndarray):
        self.arr, self.lo, self.buf = arr, 0, []

    def __getitem__(self, i: int) -> int:
        j = i - self.lo
        if 0 <= j < len(self.buf):
            return self.buf[j]
        self.lo = max(0, i - 8)
        self.buf = self.arr[self.lo:self.lo + self.SIZE].tolist()
        return self.buf[i - self.lo]


class _FileReads:
    """A memory-mapped 1-D array read through its file (`pread`), not through the mapping. A page touched
    through a mapping stays in this process's resident memory until the mapping closes, so a build that
    walks the offsets through it grows with the corpus (8 bytes a sentence); a page read from the file is
    the kernel's page cache, which the kernel reclaims. An array in memory is read as it is."""

    def __init__(self, arr: np.ndarray):
        self.arr, self.n = arr, len(arr)
        self.file = open(arr.filename, "rb") if isinstance(arr, np.memmap) and arr.filename else None
        if self.file is not None:
            self.base, self.dtype = arr.offset, arr.dtype

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key):
        if self.file is None:
            return self.arr[key]
        if isinstance(key, slice):
            lo, hi, step = key.indices(self.n)
            assert step == 1, "only contiguous reads"
            count = max(0, hi - lo)
        else:
            lo, count = int(key) + (self.n if int(key) < 0 else 0), 1
            if not 0 <= lo < self.n:
                raise IndexError(key)
        size = self.dtype.itemsize
        values = np.frombuffer(os.pread(self.file.fileno(), count * size, self.base + lo * size), dtype=self.dtype)
        return values if isinstance(key, slice) else values[0]


class _Offsets:
    """The corpus' sentence (`so`) and document (`do`) offsets: windows for the walk, arrays for random reads."""

    def __init__(self, corpus):
        self.so_all, self.do_all = _FileReads(corpus.sent_offsets), _FileReads(corpus.doc_offsets)
        self.so, self.do = _Window(self.so_all), _Window(self.do_all)


def _with_progress(docs: list[int], echo, what: str):
    """`docs`, with a progress line every so often (nothing when `echo` is None)."""
    from bertbench.runtime.progress import Ticker, every_seconds, fmt_seconds

    ticker = Ticker(every_seconds() if echo else None)
    t0, n = time.perf_counter(), len(docs)
    for k, d in enumerate(docs):
        if ticker.due():
            secs = time.perf_counter() - t0
            eta = f", ETA {fmt_seconds(secs * (n - k) / k)}" if k else ""
            echo(f"building {what} instances: {k:,}/{n:,} documents ({100 * k / n:.0f}%){eta}")
        yield d


# ----------------------------------------------------------------------------------------------
# The layouts. `docs` are document indices of the split; `so`/`do` the corpus' sentence/document offsets.


def _target(rng: random.Random, max_tokens: int, short_seq_prob: float) -> int:
    return rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens


def _truncate_pair(a: tuple[int, int], b: tuple[int, int], max_tokens: int, rng: random.Random):
    """The original `truncate_seq_pair` in closed form: the longer side (B on ties) loses one token at a
    time, each from the front or the back with probability ½ — so the front share is Binomial(n, ½)."""
    la, lb = a[1] - a[0], b[1] - b[0]
    excess = la + lb - max_tokens
    cut_a = cut_b = 0
    if excess > 0:
        if la > lb:
            cut_a = min(excess, la - lb)
        else:
            cut_b = min(excess, lb - la)
        rest = excess - cut_a - cut_b
        cut_b += (rest + 1) // 2  # then equal lengths: B, A, B, A, …
        cut_a += rest // 2

    def cut(seg, n):
        front = bin(rng.getrandbits(n)).count("1") if n else 0
        return seg[0] + front, seg[1] - (n - front)

    return cut(a, cut_a), cut(b, cut_b)


def nsp_instances(v: _Offsets, docs: list[int], max_seq_len: int, short_seq_prob: float, rng: random.Random, b: IndexWriter,
                  walk=iter) -> None:
    max_tokens = max_seq_len - 3
    so, do, so_all, do_all = v.so, v.do, v.so_all, v.do_all
    n_docs = len(docs)
    if n_docs == 0:  # no held-out set (--min-heldout-docs 0 --heldout-fraction 0): no instances
        return
    if n_docs < 2:
        raise BertbenchError("next-sentence prediction needs at least 2 documents in each split")
    for pos, d in enumerate(walk(docs)):
        s_end = do[d + 1]
        chunk_start = i = do[d]
        cur = 0
        target = _target(rng, max_tokens, short_seq_prob)
        while i < s_end:
            cur += so[i + 1] - so[i]
            if i == s_end - 1 or (cur >= target and i > chunk_start):  # ≥ 2 sentences: see the module doc
                n_chunk = i + 1 - chunk_start
                a_end = chunk_start + (rng.randint(1, n_chunk - 1) if n_chunk >= 2 else 1)
                seg_a = (so[chunk_start], so[a_end])
                if n_chunk == 1 or rng.random() < 0.5:
                    label = NOT_NEXT
                    k = rng.randrange(n_docs - 1)
                    other = docs[k + 1 if k >= pos else k]
                    o_begin, o_end = int(do_all[other]), int(do_all[other + 1])
                    start = rng.randint(o_begin, o_end - 1)
                    want = target - (seg_a[1] - seg_a[0])
                    # sentences from `start` until `want` tokens are reached (at least one): bisect_left over
                    # so[start + 1:o_end], read from the array (a random document: the window stays put)
                    b_begin = int(so_all[start])
                    stop = start + 1 + int(np.searchsorted(so_all[start + 1:o_end], b_begin + want, "left"))
                    seg_b = (b_begin, int(so_all[stop]))
                    doc_b = other
                    i = a_end - 1  # put the unused sentences back
                else:
                    label = IS_NEXT
                    seg_b = (so[a_end], so[i + 1])
                    doc_b = d
                seg_a, seg_b = _truncate_pair(seg_a, seg_b, max_tokens, rng)
                la, lb = seg_a[1] - seg_a[0], seg_b[1] - seg_b[0]
                b.add([(b.CLS, 1), (seg_a[0], la), (b.SEP, 1), (seg_b[0], lb), (b.SEP, 1)],
                      type_start=la + 2, label=label, doc_a=d, doc_b=doc_b)
                chunk_start, cur = i + 1, 0
                target = _target(rng, max_tokens, short_seq_prob)
            i += 1


def chunk_instances(v: _Offsets, docs: list[int], max_seq_len: int, short_seq_prob: float, rng: random.Random, b: IndexWriter,
                    walk=iter) -> None:
    max_tokens = max_seq_len - 2
    so, do = v.so, v.do
    for d in walk(docs):
        t, t_end = so[do[d]], so[do[d + 1]]
        while t < t_end:
            n = min(_target(rng, max_tokens, short_seq_prob), t_end - t)
            b.add([(b.CLS, 1), (t, n), (b.SEP, 1)], None, NO_LABEL, d)
            t += n


def full_sentence_instances(v: _Offsets, docs: list[int], max_seq_len: int, short_seq_prob: float, rng: random.Random,
                            b: IndexWriter, walk=iter) -> None:
    max_tokens = max_seq_len - 2
    so, do = v.so, v.do
    segs: list[tuple[int, int]] = []
    used, first_doc = 0, -1
    target = _target(rng, max_tokens, short_seq_prob)

    def flush():
        nonlocal segs, used, first_doc, target
        if segs:
            b.add([(b.CLS, 1), *segs, (b.SEP, 1)], None, NO_LABEL, first_doc)
        segs, used, first_doc = [], 0, -1
        target = _target(rng, max_tokens, short_seq_prob)

    for d in walk(docs):
        first = True
        for j in range(do[d], do[d + 1]):
            t, t_end = so[j], so[j + 1]
            sep = 1 if first and used else 0  # a [SEP] between documents inside a block
            first = False
            if used + sep + (t_end - t) > target:
                flush()
                sep = 0
            if sep:
                segs.append((b.SEP, 1))
                used += 1
            while t < t_end:  # a sentence longer than the target is cut into pieces
                n = min(t_end - t, target - used)
                if first_doc < 0:
                    first_doc = d
                segs.append((t, n))
                used += n
                t += n
                if used >= target:
                    flush()
    flush()


def causal_blocks(v: _Offsets, docs: list[int], max_seq_len: int, b: IndexWriter, walk=iter) -> None:
    """Blocks of `[CLS]` + max_seq_len − 1 tokens of the stream `doc [SEP] doc [SEP] …`; no padding."""
    width = max_seq_len - 1
    so, do = v.so, v.do

    def pieces():
        for d in walk(docs):
            yield so[do[d]], so[do[d + 1]] - so[do[d]], d
            yield b.SEP, 1, d

    segs: list[tuple[int, int]] = []
    used, first_doc = 0, -1
    for start, n, d in pieces():
        while n:
            if first_doc < 0:
                first_doc = d
            k = min(n, width - used)
            segs.append((start, k))
            used += k
            if start != b.SEP:
                start += k
            n -= k
            if used == width:
                b.add([(b.CLS, 1), *segs], None, NO_LABEL, first_doc)
                segs, used, first_doc = [], 0, -1


# ----------------------------------------------------------------------------------------------
# The entry point.


@dataclass
class PretrainingData:
    """What the trainer needs: instance sets (index → dict), provenance (`fingerprint`) and `stats`."""

    train: InstanceSet
    heldout: InstanceSet
    train_docs: np.ndarray  # document indices (into the tokenised corpus) of each split
    heldout_docs: np.ndarray
    stats: dict[str, Any]
    fingerprint: str
    corpus: Any = field(repr=False, default=None)  # the TokenizedCorpus


def heldout_count(n_docs: int, data_cfg, objective: str) -> int:
    """Held-out documents: max(min_heldout_docs, round(heldout_fraction × n)); at least 2 with NSP when any are
    kept, so a NotNext segment can come from another held-out document. 0 (both settings 0): no held-out set."""
    n_held = max(data_cfg.min_heldout_docs, int(round(data_cfg.heldout_fraction * n_docs)))
    return max(n_held, 2) if n_held and trains_nsp(objective) else n_held


def split_documents(n_docs: int, data_cfg, objective: str) -> tuple[np.ndarray, np.ndarray]:
    """(training, held-out) document indices, the held-out ones (`heldout_count`) chosen by `data_cfg.seed`."""
    n_held = heldout_count(n_docs, data_cfg, objective)
    if n_docs - n_held < 2:
        without_heldout = (", or train without a held-out set with --min-heldout-docs 0 --heldout-fraction 0"
                           if n_held else "")
        raise BertbenchError(
            f"{', '.join(data_cfg.corpus)}: {n_docs} document{'s are' if n_docs != 1 else ' is'} too few: need at "
            f"least 2 for training plus {n_held} held out. A .txt file is one document: cut whole books into "
            f"documents with --doc-sentences N (at blank lines, at least N sentences each; e.g. 100){without_heldout}"
        )
    perm = np.random.default_rng(data_cfg.seed).permutation(n_docs)
    return np.sort(perm[n_held:]), np.sort(perm[:n_held])


def _config_fields(data_cfg) -> dict[str, Any]:
    from dataclasses import asdict

    d = keyed_data_fields(asdict(data_cfg))  # doc_sentences enters through the corpus fingerprint as well
    for k in ("corpus", "num_proc"):  # the corpus enters through its content fingerprint
        d.pop(k, None)
    return d


def _fingerprint_objective(data_cfg, objective: str) -> dict[str, Any]:
    """The data settings and objective in the form they had before `objective` took in `data.nsp`, so that the
    same data keeps the same fingerprint across that change (old runs said nsp true for the causal LM too,
    its default, which the causal LM ignored)."""
    return dict(data={**_config_fields(data_cfg), "nsp": objective != "mlm"},
                objective="clm" if is_causal(objective) else "mlm")


INDEX_VERSION = "1"  # bump when a layout's output can change: it is part of every index's cache key


def _layout(data_cfg, objective: str) -> dict[str, Any]:
    """What decides the instances' layout (not the masking, which is drawn later)."""
    if is_causal(objective):
        return dict(layout="causal", max_seq_len=data_cfg.max_seq_len)
    kind = "nsp" if trains_nsp(objective) else "full_sentences" if data_cfg.full_sentences else "chunks"
    return dict(layout=kind, max_seq_len=data_cfg.max_seq_len, short_seq_prob=data_cfg.short_seq_prob)


def make_instances(corpus, docs: np.ndarray, data_cfg, objective: str, rng: random.Random, cls_id: int, sep_id: int,
                   folder=None, copies: int = 1, echo=None, what: str = "") -> InstanceSet:
    """Build the instances of `docs` (`copies` times over, each copy paired and shuffled anew, as the
    original's dupe_factor) into an index: in `folder` on disk, or in memory when None (small sets)."""
    from bertbench.data.corpus import NpyAppender
    from bertbench.data.instance_store import _MemorySink, sample_order

    v = _Offsets(corpus)
    docs_list = [int(d) for d in docs]
    b = IndexWriter(corpus.num_tokens, folder)
    walk = (lambda ds: _with_progress(ds, echo, what)) if echo else iter
    causal = is_causal(objective)
    orders = None if causal else NpyAppender(folder / "order.npy", np.int64) if folder is not None else _MemorySink(np.int64)
    for _ in range(copies):
        first = b.count
        if causal:
            causal_blocks(v, docs_list, data_cfg.max_seq_len, b, walk)
            continue
        layout = nsp_instances if trains_nsp(objective) else full_sentence_instances if data_cfg.full_sentences else chunk_instances
        layout(v, docs_list, data_cfg.max_seq_len, data_cfg.short_seq_prob, rng, b, walk)
        b.flush()  # the order is drawn over every instance of this copy
        sample_order(rng, b.count - first, orders, offset=first)  # the original shuffles its instances
    arrays = b.close()
    if orders is not None:
        orders.close()
    built = (InstanceSet.open(folder, corpus.tokens, cls_id, sep_id) if folder is not None else
             InstanceSet(corpus.tokens, cls_id, sep_id, arrays, None if orders is None else orders.array()))
    built.built_stats = dict(mean_length=b.length_sum / len(built) if len(built) else 0.0,
                             isnext_share=b.is_next / len(built) if len(built) else None)
    return built


@dataclass
class IndexSpec:
    """One instance index a pre-training reads: the documents it is built from, its seed label, its copies."""

    what: str  # "train" | "heldout"
    docs: np.ndarray
    rng_label: str
    copies: int


def index_specs(corpus, data_cfg, objective: str, seed: Optional[int] = None) -> list[IndexSpec]:
    """The indices of one phase's data, train then held-out: what `build_pretraining_data` reads, and what
    `bertbench data build` builds ahead of it (bertbench.data.build)."""
    check_objective(objective)
    check_full_sentences(data_cfg, objective)
    seed = data_cfg.seed if seed is None else seed
    train_docs, heldout_docs = split_documents(corpus.num_documents, data_cfg, objective)
    static = is_masked(objective) and data_cfg.masking == "static"
    return [IndexSpec("train", train_docs, f"train-{seed}", data_cfg.dupe_factor if static else 1),
            IndexSpec("heldout", heldout_docs, f"heldout-{data_cfg.seed}", 1)]


def index_folder(corpus, spec: IndexSpec, data_cfg, objective: str) -> Path:
    """Where an index lives, beside the tokenised corpus: keyed on everything that decides its content."""
    from bertbench.data.corpus import json_sha256

    key = json_sha256(dict(
        corpus=corpus.meta["key"], docs=hashlib.sha256(np.ascontiguousarray(spec.docs, dtype=np.int64).tobytes()).hexdigest(),
        rng=spec.rng_label, copies=spec.copies, version=INDEX_VERSION, **_layout(data_cfg, objective),
    ))
    return Path(corpus.path) / "instances" / f"{spec.what}-{key[:20]}"


def cached_instances(corpus, spec: IndexSpec, data_cfg, objective: str, cls_id: int, sep_id: int,
                     echo=None) -> InstanceSet:
    """The instances of `spec`, from their index beside the tokenised corpus, built there on first use (by one
    process: another that wants the same index meanwhile waits for it, `build_once`)."""
    final = index_folder(corpus, spec, data_cfg, objective)
    build_once(final, lambda: _build_instances(corpus, spec, data_cfg, objective, cls_id, sep_id, echo, final), echo)
    return InstanceSet.open(final, corpus.tokens, cls_id, sep_id)


def _build_instances(corpus, spec: IndexSpec, data_cfg, objective: str, cls_id: int, sep_id: int, echo,
                     final: Path) -> None:
    from bertbench.data.corpus import staged, write_meta

    t0 = time.perf_counter()
    with staged(final) as work:
        built = make_instances(corpus, spec.docs, data_cfg, objective, random.Random(spec.rng_label), cls_id, sep_id,
                               folder=work, copies=spec.copies, echo=echo, what=spec.what)
        # the writer's running statistics: reading the memory-mapped arrays back would make them resident
        write_meta(work, dict(instances=len(built), documents=len(spec.docs), copies=spec.copies, rng=spec.rng_label,
                              **built.built_stats,
                              build_seconds=round(time.perf_counter() - t0, 2), **_layout(data_cfg, objective)))
        del built


def build_pretraining_data(data_cfg, tokenizer, objective: str = "mlm+nsp", seed: Optional[int] = None, cache_dir=None,
                           log=None) -> PretrainingData:
    """Tokenised corpus (cached) → held-out split → instances (→ static masks when `masking == "static"`).

    `seed` drives the training instances (sentence pairing, short targets, static masks); None means
    `data_cfg.seed`. The held-out split and held-out instances always use `data_cfg.seed`.
    """
    from bertbench.data.corpus import json_sha256, load_tokenized_corpus, progress_echo

    check_objective(objective)
    check_full_sentences(data_cfg, objective)
    seed = data_cfg.seed if seed is None else seed
    t0 = time.perf_counter()
    corpus = load_tokenized_corpus(
        data_cfg.corpus, tokenizer, data_cfg.max_documents, data_cfg.num_proc, cache_dir=cache_dir, log=log,
        doc_sentences=data_cfg.doc_sentences,
    )
    t_corpus = time.perf_counter() - t0
    cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id
    static = is_masked(objective) and data_cfg.masking == "static"
    echo = progress_echo(log)
    specs = index_specs(corpus, data_cfg, objective, seed)
    train, heldout = (cached_instances(corpus, spec, data_cfg, objective, cls_id, sep_id, echo) for spec in specs)
    train_docs, heldout_docs = (spec.docs for spec in specs)
    if static:  # each instance keeps one mask, drawn from (seed, its index) whenever it is read
        from bertbench.data.masking import StaticMasks, TokenTables

        tables = TokenTables.from_tokenizer(tokenizer)
        train.static_mask = StaticMasks(tables, data_cfg, seed)
        heldout.static_mask = StaticMasks(tables, data_cfg, data_cfg.seed)
    fingerprint = json_sha256(dict(
        corpus=corpus.fingerprint, tokenizer=corpus.meta["tokenizer_sha256"], splitter=corpus.meta["splitter_version"],
        **_fingerprint_objective(data_cfg, objective), seed=seed,
        # static masks are drawn per instance now (StaticMasks), not in one pass as before: other data
        **({"static_masks": "per-instance"} if static else {})))
    stats = dict(documents=corpus.num_documents, train_documents=len(train_docs), heldout_documents=len(heldout_docs),
                 sentences=corpus.num_sentences, tokens=corpus.num_tokens, train_instances=len(train),
                 heldout_instances=len(heldout), mean_length=_index_meta(train)["mean_length"],
                 isnext_share=_index_meta(train)["isnext_share"] if trains_nsp(objective) else None,
                 corpus_seconds=round(t_corpus, 3), instance_seconds=round(time.perf_counter() - t0 - t_corpus, 3),
                 cache=str(corpus.path))
    return PretrainingData(train, heldout, train_docs, heldout_docs, stats, fingerprint, corpus)


def _index_meta(instances: InstanceSet) -> dict[str, Any]:
    return json.loads((instances.folder / "meta.json").read_text(encoding="utf-8"))
