"""Data that lives on disk: the corpus tokenised over worker processes into the same arrays, the instance
index built once beside it and memory-mapped (a pickled set carries no data), the builder's shuffle equal to
the one `random.sample` drew before, progress lines in bertbench's shapes, and the scale benchmark's parts."""
from __future__ import annotations

import pickle
import random
import re
from pathlib import Path

import numpy as np
import pytest

from bertbench.config import DataConfig
from bertbench.data import corpus as corpus_mod
from bertbench.data.corpus import NpyAppender
from bertbench.data.instance_store import FLUSH_INSTANCES, sample_order
from bertbench.data.instances import build_pretraining_data
from bertbench.model.tokenizer import WordPieceTokenizer
from tests.instance_views import all_input_ids, document

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"
MIXED = [str(CORPUS / "jsonl"), str(CORPUS / "txt"), str(CORPUS / "wiki")]


@pytest.fixture(scope="module")
def tok() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(CORPUS / "vocab.txt")


@pytest.mark.parametrize("n", [0, 1, 5, 6, 7, 100, 4097])
def test_the_shuffle_is_the_one_random_sample_draws(n):
    a, b = random.Random(f"train-{n}"), random.Random(f"train-{n}")
    assert sample_order(a, n).tolist() == b.sample(range(n), n)
    assert a.random() == b.random()  # and it leaves the generator where sample left it


def test_the_shuffle_leaves_in_chunks_with_its_offset(tmp_path):
    n = 2 * FLUSH_INSTANCES + 123  # three chunks, the last one partial
    a, b = random.Random("copy-2"), random.Random("copy-2")
    sink = NpyAppender(tmp_path / "order.npy", np.int64)
    sink.append([7, 8])  # an earlier copy's order
    assert sample_order(a, n, sink, offset=2) is None
    sink.close()
    assert np.load(tmp_path / "order.npy").tolist() == [7, 8, *(2 + k for k in b.sample(range(n), n))]


def test_npy_appender_writes_a_npy_file_in_pieces(tmp_path):
    out = NpyAppender(tmp_path / "x.npy", np.int32)
    out.append([1, 2, 3])
    out.append(np.arange(4, 1000))
    out.close()
    assert np.array_equal(np.load(tmp_path / "x.npy"), np.arange(1, 1000, dtype=np.int32))
    assert np.load(tmp_path / "x.npy", mmap_mode="r").dtype == np.int32


def test_worker_processes_tokenise_into_the_same_arrays(tok, tmp_path, monkeypatch):
    alone = corpus_mod.load_tokenized_corpus(MIXED, tok, num_proc=1, cache_dir=tmp_path / "a")
    monkeypatch.setattr(corpus_mod, "POOL_MIN_BYTES", 0)  # the fixture is small: use the pool anyway
    pooled = corpus_mod.load_tokenized_corpus(MIXED, tok, num_proc=2, cache_dir=tmp_path / "b")
    for k in ("tokens", "sent_offsets", "doc_offsets"):
        assert np.array_equal(getattr(alone, k), getattr(pooled, k)), k
    assert alone.fingerprint == pooled.fingerprint and alone.path.name == pooled.path.name


HUB_ROWS = [{"text": f"Row {i} opens here. It has a second sentence.\nA paragraph of row {i} follows."}
            if i % 7 else {"text": ""} for i in range(40)]  # every seventh row empty: skipped, still counted


def _tokenise_hub_rows_noting_the_pid(texts):
    import os

    from bertbench.data.corpus import _WORKER, _hub_documents, _tokenize_documents

    with open(os.environ["PIDS_FILE"], "a") as fh:
        fh.write(f"{os.getpid()}\n")
    return _tokenize_documents(_hub_documents(texts), _WORKER["backend"], _WORKER["dtype"])


@pytest.mark.parametrize("max_documents", [None, 25])
def test_a_hub_dataset_is_tokenised_on_every_core_into_the_same_arrays(tok, tmp_path, monkeypatch, max_documents):
    """A streamed hub dataset's rows go to the worker processes in batches (before: one process tokenised it),
    into the arrays one process makes, documents and row cap as `iter_documents` reads them."""
    import os

    monkeypatch.setattr(corpus_mod, "_open_hub", lambda name, config: iter(HUB_ROWS))
    monkeypatch.setattr(corpus_mod, "HUB_BATCH_DOCUMENTS", 6)  # several tasks from 40 rows
    monkeypatch.setattr(corpus_mod, "_tokenize_hub_rows", _tokenise_hub_rows_noting_the_pid)
    monkeypatch.setenv("PIDS_FILE", str(tmp_path / "pids"))
    corpus = ["hub:someone/books", str(CORPUS / "txt")]
    alone = corpus_mod.load_tokenized_corpus(corpus, tok, max_documents, num_proc=1, cache_dir=tmp_path / "a")
    (tmp_path / "pids").unlink()
    pooled = corpus_mod.load_tokenized_corpus(corpus, tok, max_documents, num_proc=2, cache_dir=tmp_path / "b")
    for k in ("tokens", "sent_offsets", "doc_offsets"):
        assert np.array_equal(getattr(alone, k), getattr(pooled, k)), k
    expected = list(corpus_mod.iter_documents(corpus, max_documents))
    assert pooled.num_documents == len(expected)
    assert [tok.backend.encode(s, add_special_tokens=False).ids for s in expected[0]] == [
        a.tolist() for a in document(pooled, 0)]
    pids = set((tmp_path / "pids").read_text().split())
    assert pids and str(os.getpid()) not in pids  # the rows were split and tokenised in the worker processes
    assert (alone.meta["tokenise_processes"], pooled.meta["tokenise_processes"]) == (1, 2)
    text = sum(len(r["text"].encode()) for r in HUB_ROWS[:max_documents or len(HUB_ROWS)])
    assert pooled.meta["text_bytes"] == alone.meta["text_bytes"] >= text


def test_worker_processes_end_quietly_under_the_commands_stop_handlers(tok, tmp_path, monkeypatch, capfd):
    """`pretrain` installs its SIGINT/SIGTERM handlers before it tokenises; the pool's workers must not inherit
    them: its terminate() at the end (SIGTERM) printed each worker's traceback, 'interrupted by SIGTERM; rerun'."""
    from bertbench.training.stop_signals import StopSignals

    monkeypatch.setattr(corpus_mod, "POOL_MIN_BYTES", 0)
    signals = StopSignals().install()
    try:
        corpus_mod.load_tokenized_corpus(MIXED, tok, num_proc=2, cache_dir=tmp_path)
    finally:
        signals.restore()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "interrupted" not in err, err


def test_the_index_is_built_once_and_a_pickled_set_carries_no_data(tok, tmp_path, monkeypatch):
    from bertbench.data import instances

    cfg = DataConfig(corpus=MIXED, max_seq_len=32)
    first = build_pretraining_data(cfg, tok, cache_dir=tmp_path)
    folders = sorted(p.name for p in (first.corpus.path / "instances").iterdir())
    assert [f.split("-")[0] for f in folders] == ["heldout", "train"]

    def no_build(*args, **kwargs):
        raise AssertionError("rebuilt an index that is on disk")

    monkeypatch.setattr(instances, "make_instances", no_build)
    again = build_pretraining_data(cfg, tok, cache_dir=tmp_path)
    assert np.array_equal(all_input_ids(again.train), all_input_ids(first.train))
    assert isinstance(again.train.arrays["seg_start"], np.memmap) and isinstance(again.train.tokens, np.memmap)
    blob = pickle.dumps(again.train)  # what a DataLoader worker receives: paths, not arrays
    assert len(blob) < 4000, len(blob)
    clone = pickle.loads(blob)
    for i in (0, 7, len(clone) - 1):
        assert np.array_equal(clone[i]["input_ids"], again.train[i]["input_ids"])


def test_progress_lines_have_bertbench_shapes(tok, tmp_path, monkeypatch, capsys):
    from test_quiet import foreign_lines

    monkeypatch.setenv("BERTBENCH_PROGRESS_SECONDS", "0")  # a line at every file and every document
    monkeypatch.delenv("BERTBENCH_PROGRESS", raising=False)
    build_pretraining_data(DataConfig(corpus=MIXED, max_seq_len=32), tok, cache_dir=tmp_path)
    out = capsys.readouterr().err  # stderr: stdout may carry a command's JSON
    assert re.search(r"^tokenising the corpus: 3 files, [\d,]+ of [\d,]+ MB \(\d+%\)", out, re.M), out
    assert re.search(r"^building train instances: [\d,]+/10 documents \(\d+%\)", out, re.M), out
    assert not foreign_lines(out)  # the quiet-terminal tests allow exactly these shapes


def test_scale_benchmark_links_the_corpus_and_fits_a_line(tmp_path):
    from bertbench.benchmarks.data_scale import PAPER_CORPUS_MB, extrapolate, repeated_corpus

    folder = repeated_corpus(CORPUS / "txt", 3, tmp_path / "x3")
    files = [p for p in folder.rglob("*") if not p.is_dir()]
    originals = [p for p in (CORPUS / "txt").rglob("*") if p.is_file()]
    assert len(files) == 3 * len(originals) and all(p.is_symlink() for p in files)  # links: no text copied

    def point(mb, rss):
        return {"corpus_mb": mb, "cache_mb": mb / 2, "build": {"corpus_seconds": mb, "instance_seconds": mb / 10, "peak_rss_mb": 100},
                "first_batch": {"peak_rss_mb": 300}, "train_start": {"peak_rss_mb": rss}}

    ex = extrapolate([point(100, 1000), point(200, 1010), point(400, 1030)], cores_used=2)
    assert ex["train_start_peak_rss_mb"] == round(990 + 0.1 * PAPER_CORPUS_MB)  # 1000 MB at 100 MB, +0.1 MB per MB
    assert ex["cache_gb"] == PAPER_CORPUS_MB / 2 / 1000 and ex["build_peak_rss_mb"] == 100
    assert ex["tokenise_hours"] == round(PAPER_CORPUS_MB * 2 / 32 / 3600, 2)  # 1 s/MB on 2 cores, 32 cores there
    assert ex["instance_index_hours"] == round(PAPER_CORPUS_MB / 10 / 3600, 2)  # one process: no speed-up
    falling = extrapolate([point(100, 1080), point(200, 1010), point(400, 1040)], cores_used=2)
    assert falling["train_start_peak_rss_mb"] == round((1080 + 1010 + 1040) / 3)  # noise read as flat, not as shrinking


def test_scale_markdown_reads_16x_off_the_lines_only_when_it_was_not_measured():
    from bertbench.benchmarks.data_scale import derive, markdown

    def point(k, rss):
        return {"scale": k, "corpus_mb": 100.0 * k, "cache_mb": 50.0 * k, "growth": {k2: 0.0 for k2 in (
                    "build_peak_rss", "train_start_peak_rss", "first_batch_peak_rss")},
                "build": {"wall_seconds": k, "corpus_seconds": k, "instance_seconds": k, "peak_rss_mb": 100.0},
                "first_batch": {"first_batch_seconds": 1.0, "peak_rss_mb": 300.0}, "train_start": {"peak_rss_mb": rss}}

    def result(*scales):
        return derive({"machine": {"hardware": "test", "code": "test"}, "config": {"num_proc": 2},
                       "points": [point(k, 1000.0) for k in scales]})

    assert "16× (1,600 MB; not measured)" in markdown(result(1, 2, 4), "cmd")
    shown = markdown(result(1, 16), "cmd")
    assert "not measured" not in shown and "| 16× (1,600 MB) |" in shown


def test_scale_benchmark_measures_the_data_build_per_core(tmp_path):
    """The data build probe on a tiny corpus: `bertbench data build` of the paper recipe's two phases in a fresh
    process and cache, its rates per core taken from what it reports."""
    from bertbench.benchmarks.data_scale import measure_data_build, repeated_corpus

    source = repeated_corpus(CORPUS / "txt", 4, tmp_path / "x4")
    built = measure_data_build(source, CORPUS / "vocab.txt", tmp_path / "cache", tmp_path)
    assert built["phases"] == 2 and built["indices"] == 4  # seq 128 and 512, each train and held-out
    assert built["tokenise_mb"] > 0 and built["index_mb"] > 0 and built["peak_rss_mb"] > 0
    assert built["tokenise_mb_per_core_s"] == pytest.approx(built["tokenise_mb"] / built["tokenise_core_seconds"], rel=0.05)
    assert built["index_mb_per_core_s"] == pytest.approx(built["index_mb"] / built["index_core_seconds"], rel=0.05)
    assert len(list((tmp_path / "cache").glob("corpus-*/instances/*/meta.json"))) == 4
    with pytest.raises(Exception, match="already built"):  # a warm cache would measure nothing
        measure_data_build(source, CORPUS / "vocab.txt", tmp_path / "cache", tmp_path)


def test_scale_extrapolates_the_data_build_to_the_paper_corpus_and_renders_it():
    from bertbench.benchmarks.data_scale import PAPER_CORPUS_MB, derive, markdown

    def point(k, with_build=True):
        p = {"scale": k, "corpus_mb": 100.0 * k, "cache_mb": 50.0 * k, "growth": {k2: 0.0 for k2 in (
                 "build_peak_rss", "train_start_peak_rss", "first_batch_peak_rss")},
             "build": {"wall_seconds": k, "corpus_seconds": k, "instance_seconds": k, "peak_rss_mb": 100.0},
             "first_batch": {"first_batch_seconds": 1.0, "peak_rss_mb": 300.0}, "train_start": {"peak_rss_mb": 900.0}}
        if with_build:  # 100 MB a core-second... : 1 core-second per MB tokenising, 2 per MB of the indices
            p["data_build"] = {"wall_seconds": 3.0 * k, "peak_rss_mb": 200.0, "tokenise_mb": 100.0 * k,
                               "tokenise_seconds": 50.0 * k, "tokenise_processes": 2, "tokenise_core_seconds": 100.0 * k,
                               "tokenise_mb_per_core_s": 1.0, "indices": 4, "phases": 2, "index_mb": 100.0 * k,
                               "index_seconds": 100.0 * k, "index_processes": 2, "index_core_seconds": 200.0 * k,
                               "index_mb_per_core_s": 0.5}
        return p

    result = derive({"machine": {"hardware": "test", "code": "test"}, "config": {"num_proc": 2},
                     "points": [point(1), point(16)]})
    x = result["data_build_extrapolation"]
    assert x["tokenise_hours"] == round(PAPER_CORPUS_MB * 1.0 / 32 / 3600, 2)  # spread over 32 cores
    assert x["index_hours"] == round(PAPER_CORPUS_MB * 2.0 / 2 / 3600, 2)  # two phases side by side
    assert x["static_index_hours"] == round(PAPER_CORPUS_MB * 2.0 / 2 / 3600 * 10, 2)
    shown = markdown(result, "cmd")
    assert "| 16× (1,600 MB) | 48 s | 800 s on 2 | 1.00 MB/s | 4 in 1600 s on 2 | 0.50 MB/s | 200 MB |" in shown
    assert f"data build {x['build_hours']:.1f} h (tokenising {x['tokenise_hours']:.1f} h over 32 processes" in shown
    # a result saved before the data build was measured renders as it did
    old = derive({"machine": {"hardware": "test", "code": "test"}, "config": {"num_proc": 2},
                  "points": [point(1, False), point(16, False)]})
    assert "data_build_extrapolation" not in old and "data build" not in markdown(old, "cmd")


def test_offsets_read_through_the_file_equal_the_mapped_array(tmp_path):
    from bertbench.data.instances import _FileReads

    np.save(tmp_path / "so.npy", np.arange(0, 3000, 3, dtype=np.int64))
    mapped = np.load(tmp_path / "so.npy", mmap_mode="r")
    reads = _FileReads(mapped)
    assert reads.file is not None  # read through the file, not the mapping
    assert len(reads) == 1000 and reads[0] == 0 and reads[999] == 2997 and reads[-1] == 2997
    assert reads[10:20].tolist() == mapped[10:20].tolist() and reads[995:2000].tolist() == mapped[995:].tolist()
    assert reads[5:5].tolist() == []
    with pytest.raises(IndexError):
        reads[1000]
    in_memory = _FileReads(np.asarray(mapped))
    assert in_memory.file is None and in_memory[10:12].tolist() == [30, 33]


def _build_in_child(cfg, tok, cache_dir):
    build_pretraining_data(cfg, tok, cache_dir=cache_dir)


def test_processes_that_want_one_cache_at_once_build_it_once(tok, tmp_path, monkeypatch):
    """Every rank of a multi-process pre-training (and a study's parallel stages) asks for the same corpus cache
    and instance indexes at the same moment: one builds, the others wait and read what it built."""
    import multiprocessing
    import time

    from bertbench.data import instances

    log = tmp_path / "builds.log"

    def logged(what, real):
        def build(*args, **kwargs):
            with open(log, "a") as fh:
                fh.write(f"{what}\n")
            time.sleep(0.5)  # long enough that the other process arrives while this one builds
            return real(*args, **kwargs)
        return build

    monkeypatch.setattr(corpus_mod, "_write_arrays", logged("corpus", corpus_mod._write_arrays))
    monkeypatch.setattr(instances, "make_instances", logged("instances", instances.make_instances))
    cfg, cache = DataConfig(corpus=MIXED, max_seq_len=32), tmp_path / "cache"
    ctx = multiprocessing.get_context("fork")  # the children inherit the logging builders
    children = [ctx.Process(target=_build_in_child, args=(cfg, tok, cache)) for _ in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    assert sorted(log.read_text().split()) == ["corpus", "instances", "instances"]  # train and held-out, once each
    leftovers = [p.name for p in cache.rglob(".*")]  # no lock file, no temporary folder
    assert leftovers == [], leftovers
    built = build_pretraining_data(cfg, tok, cache_dir=cache)
    assert len(built.train) > 0 and len(built.heldout) > 0
