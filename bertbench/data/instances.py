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
runs with different training seeds are evaluated on the same text. Instances are kept as one flat
token array + offsets (`InstanceSet`), cheap to index and to pickle.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from bertbench.config import check_full_sentences, check_objective, is_causal, is_masked, trains_nsp
from bertbench.errors import BertbenchError

IS_NEXT, NOT_NEXT = 0, 1  # Hugging Face's convention for next_sentence_label
NO_LABEL = -1


# ----------------------------------------------------------------------------------------------
# Storage.


@dataclass
class InstanceSet:
    """Instances as flat arrays. `self[i]` → {"input_ids", "token_type_ids", "nsp_label", "index"}
    (+ "lm_labels" when statically masked); arrays are int64 numpy, ready for the collator."""

    input_ids: np.ndarray  # (total,) all instances back to back
    offsets: np.ndarray  # (n + 1,) int64
    type_start: np.ndarray  # (n,) first position with token type 1 (= length when there is no segment B)
    nsp_labels: np.ndarray  # (n,) int8: 0 IsNext, 1 NotNext, -1 no NSP
    doc_a: np.ndarray  # (n,) int32 document of the first token after [CLS] (provenance, tests)
    doc_b: np.ndarray  # (n,) int32 document of segment B, -1 without one
    lm_labels: Optional[np.ndarray] = None  # (total,) static masking: original id at selected positions, -100 elsewhere

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __getitem__(self, i: int) -> dict[str, Any]:
        i = int(i)
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        ids = self.input_ids[lo:hi].astype(np.int64)
        types = np.zeros(hi - lo, dtype=np.int64)
        types[int(self.type_start[i]):] = 1
        item = {"input_ids": ids, "token_type_ids": types, "nsp_label": int(self.nsp_labels[i]), "index": i}
        if self.lm_labels is not None:
            item["lm_labels"] = self.lm_labels[lo:hi].astype(np.int64)
        return item

    def take(self, indices: np.ndarray) -> "InstanceSet":
        """A new set of the given instances, in that order (copies)."""
        indices = np.asarray(indices, dtype=np.int64)
        lens = self.lengths[indices]
        starts = self.offsets[:-1][indices]
        idx = _ranges(starts, lens)
        return InstanceSet(
            input_ids=self.input_ids[idx],
            offsets=np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
            type_start=self.type_start[indices],
            nsp_labels=self.nsp_labels[indices],
            doc_a=self.doc_a[indices],
            doc_b=self.doc_b[indices],
            lm_labels=None if self.lm_labels is None else self.lm_labels[idx],
        )

    @staticmethod
    def concat(sets: list["InstanceSet"]) -> "InstanceSet":
        lens = np.concatenate([s.lengths for s in sets])
        labels = [s.lm_labels for s in sets]
        return InstanceSet(
            input_ids=np.concatenate([s.input_ids for s in sets]),
            offsets=np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
            type_start=np.concatenate([s.type_start for s in sets]),
            nsp_labels=np.concatenate([s.nsp_labels for s in sets]),
            doc_a=np.concatenate([s.doc_a for s in sets]),
            doc_b=np.concatenate([s.doc_b for s in sets]),
            lm_labels=None if any(x is None for x in labels) else np.concatenate(labels),
        )


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s + n) for each (s, n), without a Python loop."""
    lengths = np.asarray(lengths, dtype=np.int64)
    out_start = np.cumsum(lengths) - lengths
    return np.repeat(np.asarray(starts, dtype=np.int64) - out_start, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)


class _Builder:
    """Collects instances as lists of segments (start, length) into `src` = corpus tokens + [CLS], [SEP]."""

    def __init__(self, tokens: np.ndarray, cls_id: int, sep_id: int):
        self.src = np.concatenate([np.asarray(tokens), np.array([cls_id, sep_id], dtype=tokens.dtype)])
        self.CLS, self.SEP = len(tokens), len(tokens) + 1  # positions of the two specials in src
        self.seg_start: list[int] = []
        self.seg_len: list[int] = []
        self.n_segs: list[int] = []
        self.type_start: list[int] = []
        self.labels: list[int] = []
        self.doc_a: list[int] = []
        self.doc_b: list[int] = []

    def add(self, segments: list[tuple[int, int]], type_start: Optional[int], label: int, doc_a: int, doc_b: int = -1) -> None:
        for s, n in segments:
            self.seg_start.append(s)
            self.seg_len.append(n)
        self.n_segs.append(len(segments))
        total = sum(n for _, n in segments)
        self.type_start.append(total if type_start is None else type_start)
        self.labels.append(label)
        self.doc_a.append(doc_a)
        self.doc_b.append(doc_b)

    def build(self, order: Optional[np.ndarray] = None) -> InstanceSet:
        seg_len = np.asarray(self.seg_len, dtype=np.int64)
        n_segs = np.asarray(self.n_segs, dtype=np.int64)
        flat = self.src[_ranges(np.asarray(self.seg_start, dtype=np.int64), seg_len)]
        first_seg = np.cumsum(n_segs) - n_segs
        inst_len = np.add.reduceat(seg_len, first_seg) if len(n_segs) else np.zeros(0, np.int64)
        out = InstanceSet(
            input_ids=flat,
            offsets=np.concatenate([[0], np.cumsum(inst_len)]).astype(np.int64),
            type_start=np.asarray(self.type_start, dtype=np.int32),
            nsp_labels=np.asarray(self.labels, dtype=np.int8),
            doc_a=np.asarray(self.doc_a, dtype=np.int32),
            doc_b=np.asarray(self.doc_b, dtype=np.int32),
        )
        return out if order is None else out.take(order)


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


def nsp_instances(so, do, docs: list[int], max_seq_len: int, short_seq_prob: float, rng: random.Random, b: _Builder) -> None:
    max_tokens = max_seq_len - 3
    n_docs = len(docs)
    if n_docs < 2:
        raise BertbenchError("next-sentence prediction needs at least 2 documents in each split")
    for pos, d in enumerate(docs):
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
                    o_begin, o_end = do[other], do[other + 1]
                    start = rng.randint(o_begin, o_end - 1)
                    want = target - (seg_a[1] - seg_a[0])
                    # sentences from `start` until `want` tokens are reached (at least one)
                    stop = bisect.bisect_left(so, so[start] + want, start + 1, o_end)
                    seg_b = (so[start], so[stop])
                    doc_b = other
                    i = a_end - 1  # put the unused sentences back
                else:
                    label = IS_NEXT
                    seg_b = (so[a_end], so[i + 1])
                    doc_b = d
                seg_a, seg_b = _truncate_pair(seg_a, seg_b, max_tokens, rng)
                la, lb = seg_a[1] - seg_a[0], seg_b[1] - seg_b[0]
                b.add(
                    [(b.CLS, 1), (seg_a[0], la), (b.SEP, 1), (seg_b[0], lb), (b.SEP, 1)],
                    type_start=la + 2, label=label, doc_a=d, doc_b=doc_b,
                )
                chunk_start, cur = i + 1, 0
                target = _target(rng, max_tokens, short_seq_prob)
            i += 1


def chunk_instances(so, do, docs: list[int], max_seq_len: int, short_seq_prob: float, rng: random.Random, b: _Builder) -> None:
    max_tokens = max_seq_len - 2
    for d in docs:
        t, t_end = so[do[d]], so[do[d + 1]]
        while t < t_end:
            n = min(_target(rng, max_tokens, short_seq_prob), t_end - t)
            b.add([(b.CLS, 1), (t, n), (b.SEP, 1)], None, NO_LABEL, d)
            t += n


def full_sentence_instances(so, do, docs: list[int], max_seq_len: int, short_seq_prob: float, rng: random.Random, b: _Builder) -> None:
    max_tokens = max_seq_len - 2
    segs: list[tuple[int, int]] = []
    used, first_doc = 0, -1
    target = _target(rng, max_tokens, short_seq_prob)

    def flush():
        nonlocal segs, used, first_doc, target
        if segs:
            b.add([(b.CLS, 1), *segs, (b.SEP, 1)], None, NO_LABEL, first_doc)
        segs, used, first_doc = [], 0, -1
        target = _target(rng, max_tokens, short_seq_prob)

    for d in docs:
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


def causal_blocks(so, do, docs: list[int], max_seq_len: int, b: _Builder) -> None:
    """Blocks of `[CLS]` + max_seq_len − 1 tokens of the stream `doc [SEP] doc [SEP] …`; no padding."""
    width = max_seq_len - 1
    pieces = []
    for d in docs:
        pieces.append((so[do[d]], so[do[d + 1]] - so[do[d]], d))
        pieces.append((b.SEP, 1, d))
    segs: list[tuple[int, int]] = []
    used, first_doc = 0, -1
    for start, n, d in pieces:
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


def split_documents(n_docs: int, data_cfg, objective: str) -> tuple[np.ndarray, np.ndarray]:
    """Held-out documents: max(min_heldout_docs, round(heldout_fraction × n)) — at least 2 with NSP, so a
    NotNext segment can come from another held-out document — chosen by `data_cfg.seed`."""
    n_held = max(data_cfg.min_heldout_docs, int(round(data_cfg.heldout_fraction * n_docs)), 2 if trains_nsp(objective) else 1)
    if n_docs - n_held < 2:
        raise BertbenchError(
            f"{', '.join(data_cfg.corpus)}: {n_docs} documents are too few: need at least 2 for training "
            f"plus {n_held} held out"
        )
    perm = np.random.default_rng(data_cfg.seed).permutation(n_docs)
    return np.sort(perm[n_held:]), np.sort(perm[:n_held])


def _config_fields(data_cfg) -> dict[str, Any]:
    from dataclasses import asdict

    d = asdict(data_cfg)
    for k in ("corpus", "num_proc"):  # the corpus enters through its content fingerprint
        d.pop(k, None)
    return d


def _fingerprint_objective(data_cfg, objective: str) -> dict[str, Any]:
    """The data settings and objective in the form they had before `objective` took in `data.nsp`, so that the
    same data keeps the same fingerprint across that change (old runs said nsp true for the causal LM too,
    its default, which the causal LM ignored)."""
    return dict(data={**_config_fields(data_cfg), "nsp": objective != "mlm"},
                objective="clm" if is_causal(objective) else "mlm")


def make_instances(corpus, docs: np.ndarray, data_cfg, objective: str, rng: random.Random, cls_id: int, sep_id: int) -> InstanceSet:
    so = corpus.sent_offsets.tolist()
    do = corpus.doc_offsets.tolist()
    docs_list = [int(d) for d in docs]
    b = _Builder(np.asarray(corpus.tokens), cls_id, sep_id)
    if is_causal(objective):
        causal_blocks(so, do, docs_list, data_cfg.max_seq_len, b)
        return b.build()
    if trains_nsp(objective):
        nsp_instances(so, do, docs_list, data_cfg.max_seq_len, data_cfg.short_seq_prob, rng, b)
    elif data_cfg.full_sentences:
        full_sentence_instances(so, do, docs_list, data_cfg.max_seq_len, data_cfg.short_seq_prob, rng, b)
    else:
        chunk_instances(so, do, docs_list, data_cfg.max_seq_len, data_cfg.short_seq_prob, rng, b)
    n = len(b.n_segs)
    order = np.array(rng.sample(range(n), n), dtype=np.int64) if n else None  # the original shuffles instances
    return b.build(order)


def build_pretraining_data(
    data_cfg,
    tokenizer,
    objective: str = "mlm+nsp",
    seed: Optional[int] = None,
    cache_dir=None,
    log=None,
) -> PretrainingData:
    """Tokenised corpus (cached) → held-out split → instances (→ static masks when `masking == "static"`).

    `seed` drives the training instances (sentence pairing, short targets, static masks); None means
    `data_cfg.seed`. The held-out split and held-out instances always use `data_cfg.seed`.
    """
    from bertbench.data.corpus import load_tokenized_corpus

    check_objective(objective)
    check_full_sentences(data_cfg, objective)
    seed = data_cfg.seed if seed is None else seed
    t0 = time.perf_counter()
    corpus = load_tokenized_corpus(
        data_cfg.corpus, tokenizer, data_cfg.max_documents, data_cfg.num_proc, cache_dir=cache_dir, log=log
    )
    t_corpus = time.perf_counter() - t0
    train_docs, heldout_docs = split_documents(corpus.num_documents, data_cfg, objective)
    cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id
    static = is_masked(objective) and data_cfg.masking == "static"
    copies = data_cfg.dupe_factor if static else 1
    rng = random.Random(f"train-{seed}")
    train = [make_instances(corpus, train_docs, data_cfg, objective, rng, cls_id, sep_id) for _ in range(copies)]
    train = train[0] if copies == 1 else InstanceSet.concat(train)
    heldout = make_instances(corpus, heldout_docs, data_cfg, objective, random.Random(f"heldout-{data_cfg.seed}"), cls_id, sep_id)
    if static:
        from bertbench.data.masking import TokenTables, mask_instance_set

        tables = TokenTables.from_tokenizer(tokenizer)
        train = mask_instance_set(train, tables, data_cfg, seed=seed)
        heldout = mask_instance_set(heldout, tables, data_cfg, seed=data_cfg.seed)
    fingerprint = hashlib.sha256(
        json.dumps(
            dict(corpus=corpus.fingerprint, tokenizer=corpus.meta["tokenizer_sha256"],
                 splitter=corpus.meta["splitter_version"], **_fingerprint_objective(data_cfg, objective), seed=seed),
            sort_keys=True,
        ).encode()
    ).hexdigest()
    stats = dict(
        documents=corpus.num_documents,
        train_documents=len(train_docs),
        heldout_documents=len(heldout_docs),
        sentences=corpus.num_sentences,
        tokens=corpus.num_tokens,
        train_instances=len(train),
        heldout_instances=len(heldout),
        mean_length=float(train.lengths.mean()) if len(train) else 0.0,
        isnext_share=float((train.nsp_labels == IS_NEXT).mean()) if trains_nsp(objective) and len(train) else None,
        corpus_seconds=round(t_corpus, 3),
        instance_seconds=round(time.perf_counter() - t0 - t_corpus, 3),
        cache=str(corpus.path),
    )
    return PretrainingData(train, heldout, train_docs, heldout_docs, stats, fingerprint, corpus)
