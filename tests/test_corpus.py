"""Corpus readers (each layout, mixing, caching, errors) and the sentence splitter, on tiny fixtures."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from bertbench.config import DataConfig
from bertbench.data.corpus import iter_documents, load_tokenized_corpus, resolve_corpus
from bertbench.data.sentences import split_paragraphs, split_sentences
from bertbench.errors import BertbenchError
from bertbench.model.tokenizer import WordPieceTokenizer
from tests.instance_views import document
from tests.reference import tokenize_ids_batch

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"


@pytest.fixture(scope="module")
def tok() -> WordPieceTokenizer:
    t = WordPieceTokenizer.from_vocab(CORPUS / "vocab.txt")
    assert t.vocab_size == 600
    return t


# -- sentence splitting -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Mr. Smith went home. He slept.", ["Mr. Smith went home.", "He slept."]),
        ("Dr. J. R. R. Tolkien wrote it. It sold.", ["Dr. J. R. R. Tolkien wrote it.", "It sold."]),
        ("Use a tool, e.g. A hammer. Or not.", ["Use a tool, e.g. A hammer.", "Or not."]),
        ("Born in the U.S. He moved. Then i.e. Nothing.", ["Born in the U.S. He moved.", "Then i.e. Nothing."]),
        ("It rose 2.5 metres. Then 3 more.", ["It rose 2.5 metres.", "Then 3 more."]),
        ("“Oh dear!” said the Rabbit. “I am late!” He ran.", ["“Oh dear!” said the Rabbit.", "“I am late!”", "He ran."]),
        ("Who are you? I am Alice... Really!", ["Who are you?", "I am Alice...", "Really!"]),
        ("He saw St. Paul and Mrs. Hart etc. and left.", ["He saw St. Paul and Mrs. Hart etc. and left."]),
        ("It ended (finally.) Then rain.", ["It ended (finally.)", "Then rain."]),
        ("   ", []),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_paragraphs_are_blank_line_blocks_and_wraps_are_soft():
    assert split_paragraphs("one\ntwo\n\n \t\nthree\n\n\n") == ["one two", "three"]


# -- layouts ----------------------------------------------------------------------------------


def test_txt_folder_one_document_per_file_manifest_ignored():
    shards, ignored = resolve_corpus([str(CORPUS / "txt")])
    assert [Path(s.path).name for s in shards] == ["harbour.txt", "lighthouse.txt", "market.txt", "orchard.txt"]
    assert {s.kind for s in shards} == {"txt"}
    assert [Path(p).name for p in ignored] == ["MANIFEST.tsv"]
    docs = list(iter_documents([str(CORPUS / "txt")]))
    assert len(docs) == 4
    harbour = docs[0]
    assert harbour[0] == "The Harbour at Dawn"  # a heading paragraph is its own sentence
    assert harbour[1] == "Mr. Pell walked down to the harbour before the sun was up."
    assert "At the end of the pier stood Dr. J. R. Moss, who had come from the city on the evening train." in harbour
    assert "The tide rose 2.5 metres that morning." in harbour


def test_wikiextractor_blocks_are_documents_titles_dropped():
    docs = list(iter_documents([str(CORPUS / "wiki")]))
    assert len(docs) == 5
    assert docs[0][0].startswith("The River Alder is a small river")
    assert "Geography." in docs[0]  # a heading line is a paragraph
    assert all(d[0] not in ("River Alder", "Kell", "Slate") for d in docs)
    single = list(iter_documents([str(CORPUS / "wiki" / "wiki_01")]))  # a single file works too
    assert [d[0][:15] for d in single] == ["The grey heron ", "Slate is a fine"]


def test_jsonl_text_field_lines_are_paragraphs():
    docs = list(iter_documents([str(CORPUS / "jsonl" / "notes.jsonl")]))
    assert docs == [
        ["The first note is about the weather.", "It rained all day.", "The second paragraph says the river rose."],
        ["A note on bread.", "Flour, water and salt are enough.", "Dr. Moss disagrees."],
        ["The last note is short."],
    ]


def test_mixed_sources_keep_order_and_tokenise(tok, tmp_path):
    corpus = [str(CORPUS / "jsonl"), str(CORPUS / "txt"), str(CORPUS / "wiki")]
    tc = load_tokenized_corpus(corpus, tok, cache_dir=tmp_path)
    docs = list(iter_documents(corpus))
    assert tc.num_documents == len(docs) == 3 + 4 + 5
    for d, sentences in enumerate(docs):
        got = [list(map(int, s)) for s in document(tc, d)]
        assert got == tokenize_ids_batch(tok, sentences)
    assert tc.num_sentences == sum(len(d) for d in docs)
    assert tc.tokens.dtype == np.uint16
    assert len(tc.fingerprint) == 64


def test_max_documents_reads_a_prefix(tok, tmp_path):
    tc = load_tokenized_corpus([str(CORPUS / "wiki"), str(CORPUS / "txt")], tok, max_documents=4, cache_dir=tmp_path)
    assert tc.num_documents == 4
    full = load_tokenized_corpus([str(CORPUS / "wiki")], tok, cache_dir=tmp_path)
    assert np.array_equal(tc.tokens, full.tokens[: len(tc.tokens)])


def test_cache_is_reused_and_invalidated_by_a_changed_file(tok, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(CORPUS / "txt", src)
    cache = tmp_path / "cache"
    first = load_tokenized_corpus([str(src)], tok, cache_dir=cache)
    t0 = time.perf_counter()
    again = load_tokenized_corpus([str(src)], tok, cache_dir=cache)
    assert time.perf_counter() - t0 < 0.5
    assert again.path == first.path and np.array_equal(again.tokens, first.tokens)
    # same content, new mtime: a new cache entry, the same content fingerprint
    os.utime(src / "market.txt", ns=(1, 1))
    touched = load_tokenized_corpus([str(src)], tok, cache_dir=cache)
    assert touched.path != first.path and touched.fingerprint == first.fingerprint
    (src / "market.txt").write_text("A different market. Nothing else.\n", encoding="utf-8")
    changed = load_tokenized_corpus([str(src)], tok, cache_dir=cache)
    assert changed.fingerprint != first.fingerprint
    assert len(list(cache.iterdir())) == 3  # no temporary folders left behind


# -- errors -----------------------------------------------------------------------------------


def test_missing_path_is_named(tok, tmp_path):
    with pytest.raises(BertbenchError, match="no/such/folder: corpus path does not exist"):
        load_tokenized_corpus(["no/such/folder"], tok, cache_dir=tmp_path)


def test_empty_corpus_is_named(tok, tmp_path):
    with pytest.raises(BertbenchError, match=r"empty: the corpus holds no text"):
        load_tokenized_corpus([str(CORPUS / "empty")], tok, cache_dir=tmp_path)


def test_folder_without_corpus_files(tmp_path, tok):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "MANIFEST.tsv").write_text("x\n")
    with pytest.raises(BertbenchError, match="data: no corpus files in this folder"):
        load_tokenized_corpus([str(tmp_path / "data")], tok, cache_dir=tmp_path)


def test_non_utf8_names_file_offset_and_line(tok, tmp_path):
    with pytest.raises(BertbenchError, match=r"latin1\.txt: not UTF-8 text \(byte offset 67, line 3\)"):
        load_tokenized_corpus([str(CORPUS / "txt"), str(CORPUS / "bad")], tok, cache_dir=tmp_path)


def test_bad_jsonl_line_is_named(tmp_path, tok):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine."}\n{"title": "no text"}\n', encoding="utf-8")
    with pytest.raises(BertbenchError, match=r"bad\.jsonl:2: expected an object with a string 'text' field"):
        list(iter_documents([str(bad)]))
    # raised inside datasets' generator: unwrapped, not a DatasetGenerationError traceback
    with pytest.raises(BertbenchError, match=r"bad\.jsonl:2: expected an object"):
        load_tokenized_corpus([str(bad)], tok, cache_dir=tmp_path / "cache")
    assert not any((tmp_path / "cache").iterdir())  # the failed build left nothing behind


def test_hub_unreachable_says_so_and_points_to_local_folders(tok, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(BertbenchError, match=r"hub:nobody/no-such-dataset: could not load .* hub.*local corpus folders work"):
        load_tokenized_corpus(["hub:nobody/no-such-dataset"], tok, cache_dir=tmp_path)
    assert time.perf_counter() - t0 < 10


def test_a_hub_corpus_without_network_fails_at_once_without_asking_the_hub(tok, tmp_path, monkeypatch):
    import socket

    import datasets

    def no_dns(host, *args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)  # (bertbench.runtime.hub asks it)
    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):  # none: the name is resolved here
        monkeypatch.delenv(proxy, raising=False)
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: pytest.fail("the hub was asked"))
    with pytest.raises(BertbenchError, match=r"hub:someone/corpus: could not load .* hub, out of reach \(huggingface.co "
                                             r"does not resolve: Name or service not known\); local corpus folders work"):
        load_tokenized_corpus(["hub:someone/corpus"], tok, cache_dir=tmp_path)
    from bertbench.runtime.hub import hub_unreachable

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")  # the proxy resolves the name, not this machine
    assert hub_unreachable() is None


def test_too_few_documents_for_the_heldout_slice(tok, tmp_path):
    from bertbench.data.instances import build_pretraining_data

    cfg = DataConfig(corpus=[str(CORPUS / "jsonl")], max_seq_len=32)  # 3 documents; NSP holds out 2
    with pytest.raises(BertbenchError, match=r"jsonl: 3 documents are too few: need at least 2 for training plus 2 held out"):
        build_pretraining_data(cfg, tok, cache_dir=tmp_path)


def test_one_document_without_a_heldout_set_is_named_singular_and_not_sent_to_the_settings_it_has():
    from bertbench.data.instances import split_documents

    cfg = DataConfig(corpus=["one.txt"], min_heldout_docs=0, heldout_fraction=0.0)
    with pytest.raises(BertbenchError) as e:
        split_documents(1, cfg, "mlm+nsp")
    assert "one.txt: 1 document is too few: need at least 2 for training plus 0 held out" in str(e.value)
    assert "--doc-sentences N" in str(e.value) and "--min-heldout-docs 0" not in str(e.value)
    with pytest.raises(BertbenchError, match=r"--min-heldout-docs 0 --heldout-fraction 0$"):  # a held-out set asked for
        split_documents(3, DataConfig(corpus=["three.txt"]), "mlm+nsp")
