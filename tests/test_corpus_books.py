"""A researcher's own corpus: whole books as .txt files, cut into documents by `--doc-sentences`, and a
held-out split that `--min-heldout-docs 0 --heldout-fraction 0` turns off."""
from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.config import PretrainConfig, to_dict
from bertbench.data.corpus import iter_documents, txt_documents

runner = CliRunner()
WORDS = ("river stone light garden window music paper winter silver forest bridge candle "
         "harbor meadow lantern orchard valley thunder mirror ribbon").split()
TINY = ["--model-size", "tiny", "--vocab-size", "200", "--max-seq-len", "32", "--batch-size", "8", "--max-steps", "4",
        "--eval-every", "4", "--precision", "32", "--set", "eval_batches=2"]


def write_book(path: Path, chapters: int = 6, seed: int = 0) -> Path:
    """A book as Project Gutenberg gives it: a title, chapters of wrapped paragraphs, blank lines between."""
    rng = random.Random(seed)
    lines = [f"THE BOOK OF {path.stem.upper()}", ""]
    for c in range(1, chapters + 1):
        lines += [f"CHAPTER {c}.", ""]
        for _ in range(5):
            sents = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))).capitalize() + "."
                     for _ in range(rng.randint(2, 4))]
            text = " ".join(sents)
            lines += [text[i:i + 60] for i in range(0, len(text), 60)] + [""]  # hard wraps inside a paragraph
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.fixture
def books(tmp_path):
    return [write_book(tmp_path / "alpha.txt", seed=1), write_book(tmp_path / "beta.txt", seed=2)]


def test_doc_sentences_cuts_at_blank_lines_into_documents_of_at_least_n_sentences():
    paragraphs = ["One. Two. Three.", "Four.", "Five. Six.", "Seven.", "Eight."]
    text = "\n\n".join(p.replace(" ", "\n", 1) for p in paragraphs)  # wraps inside a paragraph stay soft
    assert txt_documents(text) == [paragraphs]  # the default: one .txt file, one document
    assert txt_documents(text, 2) == [["One. Two. Three."], ["Four.", "Five. Six."], ["Seven.", "Eight."]]
    # a rest of fewer than N sentences joins the last document; a file shorter than N is one document
    assert txt_documents(text, 3) == [["One. Two. Three."], ["Four.", "Five. Six.", "Seven.", "Eight."]]
    assert txt_documents(text, 4) == [["One. Two. Three.", "Four."], ["Five. Six.", "Seven.", "Eight."]]
    assert txt_documents(text, 100) == [paragraphs]


def test_a_whole_book_becomes_documents_and_keeps_every_sentence(books):
    whole = list(iter_documents([str(books[0])]))
    cut = list(iter_documents([str(books[0])], doc_sentences=10))
    assert len(whole) == 1 and len(cut) > 3
    assert [s for d in cut for s in d] == whole[0]  # the same sentences in the same order, only cut
    assert all(len(d) >= 10 for d in cut)
    # max_documents counts the cut documents
    assert list(iter_documents([str(books[0])], max_documents=2, doc_sentences=10)) == cut[:2]


def _pretrain(args, monkeypatch):
    monkeypatch.setenv("BERTBENCH_PROGRESS", "0")
    return runner.invoke(app, ["pretrain", *args])


def test_two_whole_books_pretrain_with_doc_sentences(tmp_path, books, monkeypatch):
    out = tmp_path / "run"
    corpus = [a for b in books for a in ("--corpus", str(b))]
    r = _pretrain([*corpus, *TINY, "--doc-sentences", "12", "--out", str(out)], monkeypatch)
    assert r.exit_code == 0, r.output + repr(r.exception)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 4
    data = summary["data"]
    assert data["train_documents"] >= 4 and data["heldout_documents"] >= 2, data
    assert summary["heldout"]["mlm_loss"] > 0


def test_two_whole_books_without_the_rule_say_exactly_what_to_do(tmp_path, books, monkeypatch):
    corpus = [a for b in books for a in ("--corpus", str(b))]
    r = _pretrain([*corpus, *TINY, "--out", str(tmp_path / "run")], monkeypatch)
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "--doc-sentences" in lines[0] and "--min-heldout-docs 0 --heldout-fraction 0" in lines[0]


def test_no_heldout_set_is_honoured(tmp_path, books, monkeypatch):
    """Two books, two documents: with both held-out settings 0 every document trains (NSP included)."""
    out = tmp_path / "run"
    corpus = [a for b in books for a in ("--corpus", str(b))]
    r = _pretrain([*corpus, *TINY, "--min-heldout-docs", "0", "--heldout-fraction", "0", "--out", str(out)], monkeypatch)
    assert r.exit_code == 0, r.output + repr(r.exception)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["data"]["train_documents"] == 2 and summary["data"]["heldout_documents"] == 0
    assert summary["steps"] == 4


@pytest.mark.parametrize("flag, value, needle", [
    ("--doc-sentences", "-1", "doc_sentences -1"),
    ("--heldout-fraction", "1.5", "heldout_fraction 1.5"),
    ("--min-heldout-docs", "-2", "min_heldout_docs -2"),
])
def test_bad_document_settings_are_one_line(tmp_path, books, monkeypatch, flag, value, needle):
    r = _pretrain(["--corpus", str(books[0]), *TINY, flag, value, "--out", str(tmp_path / "run")], monkeypatch)
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert [ln for ln in r.output.splitlines() if ln.startswith("error:")] == [next(
        ln for ln in r.output.splitlines() if needle in ln)]


def test_pretrain_help_says_what_a_document_is(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    text = " ".join(runner.invoke(app, ["pretrain", "--help"]).output.split())
    assert "--doc-sentences" in text and "one .txt file is one document" in text


def test_the_default_rule_keeps_every_key_and_fingerprint_of_runs_made_before_it(tmp_path):
    """doc_sentences came after committed studies: at 0 it is in no key or fingerprint (their keys stand); any other
    value is part of them."""
    from bertbench.studies import keys
    from bertbench.training.pretrain_run import procedure_fingerprint

    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    cfg = PretrainConfig(tokenizer=str(tmp_path / "vocab.txt"))
    cut = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, doc_sentences=50))
    from bertbench.config import keyed_data_fields

    assert "doc_sentences" not in keyed_data_fields(to_dict(cfg)["data"])  # at 0: as if the field did not exist
    assert keyed_data_fields(to_dict(cut)["data"])["doc_sentences"] == 50
    assert keys.pretrain_key(cut, tmp_path) != keys.pretrain_key(cfg, tmp_path)
    assert procedure_fingerprint(cut, {}) != procedure_fingerprint(cfg, {})


def test_the_corpus_cache_of_a_cut_book_is_its_own(tmp_path, books):
    from bertbench.data.corpus import load_tokenized_corpus
    from bertbench.model.tokenizer import WordPieceTokenizer

    tok = WordPieceTokenizer.from_vocab(Path(__file__).resolve().parent / "fixtures" / "corpus" / "vocab.txt")
    whole = load_tokenized_corpus([str(books[0])], tok, cache_dir=tmp_path)
    cut = load_tokenized_corpus([str(books[0])], tok, cache_dir=tmp_path, doc_sentences=10)
    assert whole.num_documents == 1 and cut.num_documents > 3 and cut.path != whole.path
    assert cut.fingerprint != whole.fingerprint and cut.num_sentences == whole.num_sentences


@pytest.mark.integration
@pytest.mark.slow
def test_two_real_gutenberg_books_pretrain(shared_data, tmp_path, monkeypatch):
    """Two whole books of the shared corpus, given as they are: cut by --doc-sentences, a few steps."""
    books = shared_data / "corpus" / "gutenberg"
    out = tmp_path / "run"
    r = _pretrain(["--corpus", str(books / "modest_proposal.txt"), "--corpus", str(books / "yellow_wallpaper.txt"),
                   "--doc-sentences", "20", "--tokenizer", str(shared_data / "vocab" / "bert-base-uncased-vocab.txt"),
                   "--model-size", "tiny", "--max-seq-len", "64", "--batch-size", "8", "--max-steps", "3",
                   "--eval-every", "3", "--precision", "32", "--out", str(out)], monkeypatch)
    assert r.exit_code == 0, r.output + repr(r.exception)
    data = json.loads((out / "summary.json").read_text())["data"]
    assert data["train_documents"] + data["heldout_documents"] == data["documents"] > 10 and data["heldout_documents"] >= 2


@pytest.mark.parametrize("objective", ["mlm+nsp", "mlm", "clm"])
def test_no_heldout_set_for_every_objective(tmp_path, books, objective):
    from bertbench.config import DataConfig
    from bertbench.data.instances import build_pretraining_data
    from bertbench.model.tokenizer import WordPieceTokenizer

    tok = WordPieceTokenizer.from_vocab(Path(__file__).resolve().parent / "fixtures" / "corpus" / "vocab.txt")
    cfg = DataConfig(corpus=[str(b) for b in books], max_seq_len=32, min_heldout_docs=0, heldout_fraction=0)
    data = build_pretraining_data(cfg, tok, objective, cache_dir=tmp_path)
    assert len(data.heldout) == 0 and len(data.heldout_docs) == 0 and list(data.train_docs) == [0, 1]
    assert len(data.train) > 0
