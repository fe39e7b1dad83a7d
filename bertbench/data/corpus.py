"""Corpus reading: text sources → documents of sentences → word-piece ids, cached on disk.

Layouts, detected per `--corpus` entry (several may be mixed; order is kept):
- a folder (searched recursively) or a single file; within it, per file:
  `*.jsonl` / `*.json`  one document per line, its `text` field;
  a file starting with `<doc`  WikiExtractor output: each `<doc …>` … `</doc>` block is a document whose
                        first line is its title (dropped);
  `*.txt`               one document per file; with `doc_sentences` N > 0 (`--doc-sentences`), a file (a whole
                        book) is cut at blank lines into documents of at least N sentences each (the rest of
                        the file, fewer than N, joins its last document).
  Hidden files and other files (e.g. MANIFEST.tsv) are ignored and listed in the cache's meta.json.
- `hub:NAME[:CONFIG]`   a Hugging Face hub dataset with a `text` column, streamed (split "train").

Paragraphs: in .txt files blocks separated by blank lines (line wraps inside are soft); in WikiExtractor
blocks, jsonl and hub text every non-empty line. A paragraph always ends a sentence.

Reading and tokenisation run one file (or batch of hub rows) per task over `num_proc` worker processes, and
each task's ids are appended to three flat .npy arrays as it ends (docs/scale.md: data that lives on disk). So a
process holds a few files' worth of text at a time, whatever the corpus size (datasets' `map` was the earlier
path: its Arrow files are memory-mapped, so a worker's resident memory grew with the corpus it read, and the
whole table was concatenated in memory at the end). The arrays live in `<cache>/corpus-<key>/` (`cache_key`),
which a second run memory-maps.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from bertbench.data.sentences import SPLITTER_VERSION, document_sentences, split_paragraphs, split_sentences
from bertbench.errors import BertbenchError
from bertbench.runtime.files import build_once
from bertbench.runtime.hub import hub_unreachable

READER_VERSION = "1"
HUB_PREFIX = "hub:"
_DOC_BLOCK = re.compile(r"<doc\b[^>]*>(.*?)</doc>", re.DOTALL)
_SNIFF_BYTES = 4096


def default_cache_dir() -> Path:
    env, xdg = os.environ.get("BERTBENCH_CACHE_DIR"), os.environ.get("XDG_CACHE_HOME")
    return Path(env) if env else (Path(xdg) if xdg else Path.home() / ".cache") / "bertbench"


# ----------------------------------------------------------------------------------------------
# Sources and layout detection.


@dataclass
class Shard:
    """One unit of reading: a local file of one layout, or a hub dataset. `limit` caps its documents."""

    kind: str  # "txt" | "wiki" | "jsonl" | "hub"
    path: str  # the file, or "NAME" for the hub
    name: str  # stable name for the fingerprint: path relative to its --corpus entry, or hub:NAME[:CONFIG]
    entry: str = ""  # the --corpus entry it came from (named in errors)
    config: Optional[str] = None  # hub dataset config
    limit: Optional[int] = None
    doc_sentences: int = 0  # .txt only: cut the file into documents of at least this many sentences (0: one)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _sniff_kind(path: Path) -> Optional[str]:
    if path.suffix in (".jsonl", ".json"):
        return "jsonl"
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError as err:
        raise BertbenchError(f"{path}: cannot read ({err.strerror})") from None
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<doc"):
        return "wiki"
    if path.suffix == ".txt":
        return "txt"
    return None


def resolve_corpus(corpus: list[str]) -> tuple[list[Shard], list[str]]:
    """The shards of every `--corpus` entry, in order, and the ignored files. Errors name the entry."""
    if not corpus:
        raise BertbenchError("no corpus given: pass --corpus PATH (a folder of .txt files, WikiExtractor output, .jsonl) or hub:NAME")
    shards: list[Shard] = []
    ignored: list[str] = []
    for entry in corpus:
        if entry.startswith(HUB_PREFIX):
            name, _, config = entry[len(HUB_PREFIX):].partition(":")
            if not name:
                raise BertbenchError(f"{entry!r}: expected hub:NAME or hub:NAME:CONFIG")
            shards.append(Shard("hub", name, entry, entry, config or None))
            continue
        root = Path(entry)
        if not root.exists():
            raise BertbenchError(f"{entry}: corpus path does not exist")
        if root.is_file():
            kind = _sniff_kind(root)
            if kind is None:
                raise BertbenchError(f"{entry}: unknown corpus file type (expected .txt, .jsonl or WikiExtractor <doc> blocks)")
            shards.append(Shard(kind, str(root), root.name, entry))
            continue
        found = 0
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            rel = path.relative_to(root).as_posix()
            if any(part.startswith(".") for part in path.relative_to(root).parts):
                continue
            kind = _sniff_kind(path)
            if kind is None:
                ignored.append(str(path))
                continue
            shards.append(Shard(kind, str(path), f"{root.name}/{rel}", entry))
            found += 1
        if not found:
            raise BertbenchError(
                f"{entry}: no corpus files in this folder (expected .txt documents, WikiExtractor wiki_* files or .jsonl)"
            )
    return shards, ignored


# ----------------------------------------------------------------------------------------------
# Parsing one shard into documents (lists of sentences).


def _read_bytes(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise BertbenchError(f"{path}: cannot read ({err.strerror})") from None


def _decode(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise BertbenchError(f"{path}: not UTF-8 text (byte offset {err.start}, line {line})") from None


def _line_paragraphs(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def _iter_wiki(text: str) -> Iterator[list[str]]:
    for m in _DOC_BLOCK.finditer(text):
        yield _line_paragraphs(m.group(1))[1:]  # the first line of a WikiExtractor block is the article's title


def _iter_jsonl(path: str, text: str) -> Iterator[list[str]]:
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise BertbenchError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise BertbenchError(f"{path}:{lineno}: expected an object with a string 'text' field")
        yield _line_paragraphs(record["text"])


def _open_hub(name: str, config: Optional[str]):
    import datasets

    entry = HUB_PREFIX + name + (f":{config}" if config else "")
    if unreachable := hub_unreachable():  # a stream has no cache to fall back on: say so now
        raise BertbenchError(f"{entry}: could not load the dataset from the Hugging Face hub, out of reach "
                             f"({unreachable}); local corpus folders work without it: --corpus path/to/folder")
    try:
        ds = datasets.load_dataset(name, config, split="train", streaming=True)
        first = next(iter(ds))
    except BertbenchError:
        raise
    except Exception as err:  # noqa: BLE001 — any failure here is "the hub is not there for us"
        detail = " ".join(str(err).split())[:200]
        raise BertbenchError(
            f"{entry}: could not load the dataset from the Hugging Face hub ({type(err).__name__}: {detail}). "
            "The hub may be unreachable (offline?); local corpus folders work without it: --corpus path/to/folder"
        ) from None
    if "text" not in first:
        raise BertbenchError(f"{entry}: the dataset has no 'text' column (columns: {', '.join(first)})")
    return ds


def txt_documents(text: str, doc_sentences: int = 0) -> list[list[str]]:
    """The documents (lists of paragraphs) of a .txt file: the whole file, or with `doc_sentences` N > 0 runs of
    whole paragraphs (blank-line blocks) of at least N sentences each; a rest of fewer joins the last document."""
    paragraphs = split_paragraphs(text)
    if doc_sentences <= 0:
        return [paragraphs]
    docs: list[list[str]] = []
    current: list[str] = []
    count = 0
    for p in paragraphs:
        current.append(p)
        count += len(split_sentences(p))
        if count >= doc_sentences:
            docs.append(current)
            current, count = [], 0
    if current:
        if docs:
            docs[-1].extend(current)
        else:
            docs.append(current)
    return docs


def iter_shard_documents(shard: dict[str, Any]) -> Iterator[list[str]]:
    """Documents (each a list of sentences) of one shard; documents without text are skipped."""
    kind, path, limit = shard["kind"], shard["path"], shard["limit"]
    if kind == "hub":
        docs: Iterator[list[str]] = (_line_paragraphs(row["text"] or "") for row in _open_hub(path, shard["config"]))
    else:
        text = _decode(path, _read_bytes(path))
        if kind == "txt":
            docs = iter(txt_documents(text, shard.get("doc_sentences", 0)))
        elif kind == "wiki":
            docs = _iter_wiki(text)
        else:
            docs = _iter_jsonl(path, text)
    n = 0
    for paragraphs in docs:
        if limit is not None and n >= limit:
            return
        n += 1  # counted before dropping empties, as in `_count_documents`
        sentences = document_sentences(paragraphs)
        if sentences:
            yield sentences


def _count_documents(kind: str, data: bytes, text: str, doc_sentences: int) -> int:
    if kind == "txt":
        return len(txt_documents(text, doc_sentences)) if doc_sentences > 0 else 1
    if kind == "wiki":
        return data.count(b"<doc")
    return sum(1 for line in data.splitlines() if line.strip())


# ----------------------------------------------------------------------------------------------
# The cache key (cheap: file stats) and the content fingerprint (reads every file, cold builds only).


def _tokenizer_hash(tokenizer) -> str:
    return hashlib.sha256(tokenizer.text_backend.to_str().encode("utf-8")).hexdigest()


def shard_stats(shards: list[Shard]) -> list[list]:
    """What a cache key holds of each shard: a hub dataset by name, a file by path, size and modification time."""
    return [["hub", s.path, s.config] if s.kind == "hub" else
            [s.kind, os.path.abspath(s.path), (st := os.stat(s.path)).st_size, st.st_mtime_ns] for s in shards]


def json_sha256(obj: Any) -> str:
    """sha256 (hex) of `obj` as JSON with sorted keys: what every cache key and data fingerprint is."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode("utf-8")).hexdigest()


def cache_key(shards: list[Shard], max_documents: Optional[int], tokenizer, doc_sentences: int = 0) -> str:
    return json_sha256(dict(files=shard_stats(shards), max_documents=max_documents,
                            tokenizer=_tokenizer_hash(tokenizer), reader=READER_VERSION, splitter=SPLITTER_VERSION,
                            **_doc_rule(doc_sentences)))


def _doc_rule(doc_sentences: int) -> dict[str, int]:
    """The document rule as keys and fingerprints hold it: absent for the default (one .txt file, one document),
    so that a corpus read before the rule existed keeps its cache and fingerprint."""
    return {"doc_sentences": doc_sentences} if doc_sentences > 0 else {}


def _scan(shards: list[Shard], max_documents: Optional[int],
          doc_sentences: int = 0) -> tuple[list[Shard], list[dict[str, Any]]]:
    """Validate (readable, UTF-8, some text) and hash the files; apply `max_documents` as per-shard limits."""
    selected: list[Shard] = []
    records: list[dict[str, Any]] = []
    remaining = max_documents
    text_seen: dict[str, bool] = {}
    for s in shards:
        if remaining is not None and remaining <= 0:
            break
        if s.kind == "hub":
            _open_hub(s.path, s.config)  # fail fast, with the offline hint, before any work
            selected.append(Shard(s.kind, s.path, s.name, s.entry, s.config, remaining))
            records.append(dict(name=s.name, limit=remaining))
            remaining = None if remaining is None else 0  # a streamed hub source is read up to the cap
            continue
        data = _read_bytes(s.path)
        text = _decode(s.path, data)
        limit = None
        if remaining is not None:  # counting a book's documents means splitting it: only when a cap needs it
            n_docs = _count_documents(s.kind, data, text, doc_sentences)
            limit = min(remaining, n_docs)
            remaining -= n_docs
        selected.append(Shard(s.kind, s.path, s.name, s.entry, s.config, limit, doc_sentences))
        records.append(dict(name=s.name, kind=s.kind, bytes=len(data), sha256=hashlib.sha256(data).hexdigest()))
        text_seen[s.entry] = text_seen.get(s.entry, False) or bool(text.strip())
    for entry, seen in text_seen.items():
        if not seen:
            raise BertbenchError(f"{entry}: the corpus holds no text (its files are empty)")
    return selected, records


# ----------------------------------------------------------------------------------------------
# The tokenised corpus.


@dataclass
class TokenizedCorpus:
    """Documents → sentences → word-piece ids, as flat arrays (memory-mapped from the cache).

    Sentence j holds `tokens[sent_offsets[j]:sent_offsets[j + 1]]`; document d holds sentences
    `doc_offsets[d]:doc_offsets[d + 1]` — so a run of a document's sentences is one contiguous slice.
    """

    tokens: np.ndarray  # (n_tokens,) uint16 (vocab ≤ 65,535) or int32
    sent_offsets: np.ndarray  # (n_sentences + 1,) int64
    doc_offsets: np.ndarray  # (n_documents + 1,) int64
    meta: dict[str, Any] = field(default_factory=dict)
    path: Optional[Path] = None  # the cache folder

    @property
    def num_documents(self) -> int:
        return len(self.doc_offsets) - 1

    @property
    def num_sentences(self) -> int:
        return len(self.sent_offsets) - 1

    @property
    def num_tokens(self) -> int:
        return int(self.sent_offsets[-1])

    @property
    def fingerprint(self) -> str:
        return self.meta["fingerprint"]

    @classmethod
    def load(cls, folder: Path) -> "TokenizedCorpus":
        folder = Path(folder)
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        arrays = {k: np.load(folder / f"{k}.npy", mmap_mode="r") for k in ("tokens", "sent_offsets", "doc_offsets")}
        return cls(meta=meta, path=folder, **arrays)


class NpyAppender:
    """A 1-D .npy file written in pieces: a fixed-size header (its shape rewritten on `close`), then the
    arrays as they come — so a corpus of any size is written without holding it in memory."""

    HEADER_BYTES = 128  # magic, version, length, then the header dict padded with spaces (a multiple of 64)

    def __init__(self, path: Path, dtype):
        self.path, self.dtype, self.count = Path(path), np.dtype(dtype), 0
        self._fh = open(self.path, "wb")
        self._fh.write(self._header())

    def _header(self) -> bytes:
        text = "{'descr': %r, 'fortran_order': False, 'shape': (%d,), }" % (self.dtype.str, self.count)
        pad = self.HEADER_BYTES - 10 - len(text) - 1
        return b"\x93NUMPY\x01\x00" + (self.HEADER_BYTES - 10).to_bytes(2, "little") + (text + " " * pad + "\n").encode("latin1")

    def append(self, values) -> None:
        arr = np.ascontiguousarray(values, dtype=self.dtype)
        self._fh.write(arr.tobytes())
        self.count += len(arr)

    def close(self) -> None:
        self._fh.seek(0)
        self._fh.write(self._header())
        self._fh.close()


def _tokenize_documents(documents: list[list[str]], backend, dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(token ids, sentence lengths, document lengths in sentences) of `documents`; a sentence of only
    control characters tokenises to nothing and is dropped, and so is a document left without sentences."""
    flat = [s for doc in documents for s in doc]
    encode = getattr(backend, "encode_batch_fast", backend.encode_batch)  # _fast: no offsets, same ids, ~10% faster
    encoded = [e.ids for e in encode(flat, add_special_tokens=False)] if flat else []
    sent_lens, doc_lens, pieces, k = [], [], [], 0
    for doc in documents:
        kept = [ids for ids in encoded[k:k + len(doc)] if ids]
        k += len(doc)
        if kept:
            doc_lens.append(len(kept))
            sent_lens.extend(len(ids) for ids in kept)
            pieces.extend(kept)
    tokens = np.fromiter(itertools.chain.from_iterable(pieces), dtype=dtype, count=sum(sent_lens))
    return tokens, np.asarray(sent_lens, dtype=np.int64), np.asarray(doc_lens, dtype=np.int64)


_WORKER: dict[str, Any] = {}


def _init_worker(tokenizer_json: str, dtype: str) -> None:
    import signal

    from tokenizers import Tokenizer  # threads off (TOKENIZERS_PARALLELISM): one process per core already

    # A forked worker inherits the command's stop handlers (training.stop_signals), which raise `Interrupted`:
    # the pool's own terminate() (SIGTERM, at the end of every tokenisation) then printed a traceback per worker
    # saying the run was interrupted. The parent owns stopping: Ctrl-C reaches it and it ends the pool.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    _WORKER.update(backend=Tokenizer.from_str(tokenizer_json), dtype=np.dtype(dtype))


def _tokenize_shard(shard: dict[str, Any]):
    """One file in a worker process: its arrays (a file is a few MB of text: bounded memory)."""
    return _tokenize_documents(list(iter_shard_documents(shard)), _WORKER["backend"], _WORKER["dtype"])


def _hub_documents(texts: list[str]) -> list[list[str]]:
    """A batch of a hub dataset's rows as documents of sentences (rows without text dropped), as
    `iter_shard_documents` reads them."""
    return [d for d in (document_sentences(_line_paragraphs(t)) for t in texts) if d]


def _tokenize_hub_rows(texts: list[str]):
    """A batch of a hub dataset's rows in a worker process: split into sentences and tokenised there."""
    return _tokenize_documents(_hub_documents(texts), _WORKER["backend"], _WORKER["dtype"])


def _hub_batches(shard: Shard) -> Iterator[list[str]]:
    """A streamed hub dataset's `text` values in batches of HUB_BATCH_DOCUMENTS rows, up to its `limit` rows
    (counted before empty rows are dropped, as `iter_shard_documents` counts them). Always at least one batch."""
    rows = _open_hub(shard.path, shard.config)
    if shard.limit is not None:
        rows = itertools.islice(rows, shard.limit)
    batch: list[str] = []
    for row in rows:
        batch.append(row["text"] or "")
        if len(batch) == HUB_BATCH_DOCUMENTS:
            yield batch
            batch = []
    yield batch


HUB_BATCH_DOCUMENTS = 1000  # a streamed hub dataset is tokenised in batches of this many documents
POOL_MIN_BYTES = 4_000_000  # below this the corpus is tokenised in-process: starting workers costs more


def default_num_proc() -> int:
    """Every core this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _fork_pool(processes: int, tokenizer_json: str, dtype: str):
    """Worker processes, forked (spawn would re-import the caller's main script, which a script without a
    `__main__` guard cannot survive). TOKENIZERS_PARALLELISM is set while they fork: the tokenizers library
    otherwise prints a warning in each child of a process that used its threads (ours, training the vocabulary)."""
    import multiprocessing

    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        return multiprocessing.get_context("fork").Pool(processes, initializer=_init_worker, initargs=(tokenizer_json, dtype))
    finally:
        if before is None:
            del os.environ["TOKENIZERS_PARALLELISM"]
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


def pool_size(selected: list[Shard], num_proc: int) -> int:
    """The worker processes that tokenise `selected` (1: this process alone): every core asked for when a hub
    dataset is among them (a stream of any size) or the local files are large enough to repay starting them."""
    local = [s for s in selected if s.kind != "hub"]
    if num_proc <= 1:
        return 1
    if any(s.kind == "hub" for s in selected):
        return num_proc
    if len(local) > 1 and sum(os.path.getsize(s.path) for s in local) >= POOL_MIN_BYTES:
        return min(num_proc, len(local))
    return 1


def _tasks(selected: list[Shard]) -> Iterator[tuple[Shard, Any, Any]]:
    """(shard, worker function, its argument) in corpus order: a local file is one task, a hub dataset one task
    per batch of rows, read lazily from its stream."""
    for s in selected:
        if s.kind == "hub":
            for texts in _hub_batches(s):
                yield s, _tokenize_hub_rows, texts
        else:
            yield s, _tokenize_shard, s.as_dict()


def _shard_arrays(selected: list[Shard], backend, dtype, num_proc: int) -> Iterator[tuple[Shard, tuple, int]]:
    """(shard, the arrays of one task of it, the text bytes it read) in corpus order, over `num_proc` worker
    processes (`pool_size`): at most 2 tasks a process in flight, so a hub stream is read only as fast as it is
    tokenised, and memory stays bounded."""
    from collections import deque

    processes = pool_size(selected, num_proc)
    if processes == 1:
        _WORKER.update(backend=backend, dtype=np.dtype(dtype))  # the worker functions, run here
        for s, fn, arg in _tasks(selected):
            yield s, fn(arg), _task_bytes(s, arg)
        return
    pool = _fork_pool(processes, backend.to_str(), np.dtype(dtype).str)
    try:
        pending: deque = deque()
        for s, fn, arg in _tasks(selected):
            pending.append((s, pool.apply_async(fn, (arg,)), _task_bytes(s, arg)))
            if len(pending) >= 2 * processes:
                s0, result, size = pending.popleft()
                yield s0, result.get(), size
        while pending:
            s0, result, size = pending.popleft()
            yield s0, result.get(), size
    finally:
        pool.terminate()
        pool.join()


def _task_bytes(shard: Shard, arg: Any) -> int:
    """The text a task reads, in bytes (UTF-8): a file's size, or a hub batch's rows."""
    return sum(len(t.encode("utf-8")) for t in arg) if shard.kind == "hub" else os.path.getsize(shard.path)


def _write_arrays(selected: list[Shard], tokenizer, dtype, num_proc: int, folder: Path, echo) -> dict[str, int]:
    """Tokenise every shard into folder/{tokens,sent_offsets,doc_offsets}.npy, written as they come.
    Returns the counts: documents, sentences, tokens, text_bytes (read), processes (that tokenised)."""
    from bertbench.runtime.progress import Ticker, every_seconds, fmt_seconds

    folder.mkdir(parents=True, exist_ok=True)
    tok_out = NpyAppender(folder / "tokens.npy", dtype)
    sent_out = NpyAppender(folder / "sent_offsets.npy", np.int64)
    doc_out = NpyAppender(folder / "doc_offsets.npy", np.int64)
    sent_out.append([0])
    doc_out.append([0])
    n_tokens = n_sents = 0
    total_mb = sum(os.path.getsize(s.path) for s in selected if s.kind != "hub") / 1e6
    hub = any(s.kind == "hub" for s in selected)
    done_mb, files, t0 = 0.0, 0, time.perf_counter()
    ticker = Ticker(every_seconds() if echo else None)
    processes = pool_size(selected, num_proc)
    try:
        for shard, (tokens, sent_lens, doc_lens), size in _shard_arrays(selected, tokenizer.text_backend, dtype, num_proc):
            tok_out.append(tokens)
            sent_out.append(n_tokens + np.cumsum(sent_lens))
            doc_out.append(n_sents + np.cumsum(doc_lens))
            n_tokens += int(sent_lens.sum())
            n_sents += len(sent_lens)
            files += shard.kind != "hub"
            done_mb += size / 1e6
            if ticker.due():
                secs = time.perf_counter() - t0
                share = min(1.0, done_mb / total_mb) if total_mb else 0.0  # a hub stream's size is not known
                eta = f", ETA {fmt_seconds(secs * (1 - share) / share)}" if 0 < share < 1 and not hub else ""
                done = f"{done_mb:,.0f} MB so far" if hub else f"{done_mb:,.0f} of {total_mb:,.0f} MB ({100 * share:.0f}%)"
                echo(f"tokenising the corpus: {files} files{' and hub rows' if hub else ''}, {done}, "
                     f"{done_mb / max(secs, 1e-9):.1f} MB/s{eta}")
    finally:
        for out in (tok_out, sent_out, doc_out):
            out.close()
    return dict(documents=doc_out.count - 1, sentences=n_sents, tokens=n_tokens, text_bytes=round(done_mb * 1e6),
                processes=processes)


def progress_echo(log=None):
    """Where progress lines go: `log` if given, else stderr (stdout may carry a command's JSON); None when
    progress is off or in a second rank."""
    import sys

    from bertbench.runtime.devices import first_process
    from bertbench.runtime.progress import every_seconds

    # a second rank builds the same cache and stays silent
    if every_seconds() is None or not first_process():
        return None
    return log or (lambda line: print(line, file=sys.stderr, flush=True))


def _corpus_folder(key: str, cache_dir: Optional[Path]) -> Path:
    return (Path(cache_dir) if cache_dir else default_cache_dir()) / f"corpus-{key[:20]}"


def tokenized_corpus_folder(corpus: list[str], tokenizer, max_documents: Optional[int] = None,
                            cache_dir: Optional[Path] = None, doc_sentences: int = 0) -> Path:
    """Where `load_tokenized_corpus` keeps `corpus` (built there or not: its meta.json is written last)."""
    shards, _ = resolve_corpus(corpus)
    return _corpus_folder(cache_key(shards, max_documents, tokenizer, doc_sentences), cache_dir)


def load_tokenized_corpus(corpus: list[str], tokenizer, max_documents: Optional[int] = None, num_proc: int = 0,
                          cache_dir: Optional[Path] = None, log=None, doc_sentences: int = 0) -> TokenizedCorpus:
    """Read, sentence-split and tokenise `corpus` (a list of --corpus entries), or load it from the cache.
    `num_proc` worker processes tokenise the files (0: every core); memory stays bounded by a file's size.
    `doc_sentences` > 0 cuts each .txt file into documents of at least that many sentences (`txt_documents`)."""
    shards, ignored = resolve_corpus(corpus)
    key = cache_key(shards, max_documents, tokenizer, doc_sentences)
    final = _corpus_folder(key, cache_dir)
    echo = progress_echo(log)  # one process tokenises; another that wants the same cache waits for it, then reads it
    build_once(final, lambda: _tokenize_into_cache(corpus, shards, ignored, tokenizer, max_documents, num_proc, key,
                                                   final, echo, doc_sentences), echo)
    return TokenizedCorpus.load(final)


@contextlib.contextmanager
def staged(final: Path) -> Iterator[Path]:
    """A temporary folder beside the cache folder `final` to build it in, renamed into place when the block ends
    without an error (when another process finished the same build first, one without the lock, theirs is kept),
    and removed whatever happens."""
    work = final.parent / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        yield work
        final.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            os.replace(work, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_meta(folder: Path, meta: dict[str, Any]) -> None:
    (folder / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _tokenize_into_cache(corpus: list[str], shards, ignored, tokenizer, max_documents: Optional[int], num_proc: int,
                         key: str, final: Path, echo, doc_sentences: int = 0) -> None:
    """The corpus tokenised into a temporary folder beside `final`, then renamed into place."""
    t0 = time.perf_counter()
    if echo:
        echo(f"tokenising the corpus (first run; cached in {final})")
    selected, records = _scan(shards, max_documents, doc_sentences)
    with staged(final) as work:
        dtype = np.uint16 if tokenizer.vocab_size <= np.iinfo(np.uint16).max else np.int32
        t_tokenise = time.perf_counter()
        counts = _write_arrays(selected, tokenizer, dtype, num_proc or default_num_proc(), work, echo)
        t_tokenise = time.perf_counter() - t_tokenise
        n_docs, n_sents, n_tokens = counts["documents"], counts["sentences"], counts["tokens"]
        if n_docs < 1:
            raise BertbenchError(f"{', '.join(corpus)}: the corpus holds no text")
        fingerprint = json_sha256(dict(sources=records, max_documents=max_documents, **_doc_rule(doc_sentences)))
        meta = dict(
            key=key,
            fingerprint=fingerprint,
            corpus=list(corpus),
            sources=records,
            ignored=ignored,
            max_documents=max_documents,
            doc_sentences=doc_sentences,
            tokenizer_sha256=_tokenizer_hash(tokenizer),
            splitter_version=SPLITTER_VERSION,
            reader_version=READER_VERSION,
            documents=n_docs,
            sentences=n_sents,
            tokens=n_tokens,
            build_seconds=round(time.perf_counter() - t0, 2),
            # what the tokenisation itself read and took (the validating scan before it is in build_seconds)
            text_bytes=counts["text_bytes"], tokenise_seconds=round(t_tokenise, 3),
            tokenise_processes=counts["processes"],
        )
        write_meta(work, meta)


def iter_documents(corpus: list[str], max_documents: Optional[int] = None,
                   doc_sentences: int = 0) -> Iterator[list[str]]:
    """Documents of `corpus` as lists of sentence strings, read directly (no cache, no tokenizer)."""
    shards, _ = resolve_corpus(corpus)
    selected, _ = _scan(shards, max_documents, doc_sentences)
    for shard in selected:
        yield from iter_shard_documents(shard.as_dict())
