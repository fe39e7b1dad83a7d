"""`bertbench data cache`: the folder of tokenised corpora, its size, and --clear (which removes only ours)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.data.corpus import load_tokenized_corpus
from bertbench.model.tokenizer import WordPieceTokenizer

runner = CliRunner()
CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"


def test_cache_shows_folder_size_and_clears_only_its_own(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(root))
    monkeypatch.setenv("BERTBENCH_PROGRESS", "0")
    tok = WordPieceTokenizer.from_vocab(CORPUS / "vocab.txt")
    tc = load_tokenized_corpus([str(CORPUS / "txt")], tok)
    assert tc.path.parent == root
    size = sum(p.stat().st_size for p in tc.path.rglob("*") if p.is_file())
    (root / "notes.txt").write_text("someone else's file in a shared cache folder\n")

    r = runner.invoke(app, ["data", "cache", "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["folder"] == str(root) and info["bytes"] == size
    assert [c["folder"] for c in info["corpora"]] == [str(tc.path)] and info["corpora"][0]["documents"] == 4

    r = runner.invoke(app, ["data", "cache"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and str(root) in r.output and "BERTBENCH_CACHE_DIR" in r.output
    assert f"{size / 1e6:,.1f} MB" in r.output and "bertbench data cache --clear" in r.output

    r = runner.invoke(app, ["data", "cache", "--clear"])
    assert r.exit_code == 0 and "cleared" in r.output
    assert not tc.path.exists() and (root / "notes.txt").is_file()
    assert json.loads(runner.invoke(app, ["data", "cache", "--json"]).output)["bytes"] == 0


def test_cache_folder_defaults_to_home_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("BERTBENCH_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    r = runner.invoke(app, ["data", "cache", "--json"])
    assert json.loads(r.output)["folder"] == os.path.join(str(tmp_path), ".cache", "bertbench")


def test_inspect_says_what_a_document_is_and_where_the_cache_is(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BERTBENCH_PROGRESS", "0")
    book = tmp_path / "book.txt"
    book.write_text("\n\n".join(f"Paragraph {i} starts. It goes on. It ends." for i in range(40)))
    args = ["data", "inspect", "--corpus", str(book), "--tokenizer", str(CORPUS / "vocab.txt"), "--max-seq-len", "32"]
    r = runner.invoke(app, [*args, "--doc-sentences", "6"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "≥ 6 sentences of a .txt file, cut at blank lines" in r.output and "bertbench data cache" in r.output
    r = runner.invoke(app, [*args, "--doc-sentences", "6", "--json"])
    assert json.loads(r.output)["stats"]["documents"] == 20  # 120 sentences in runs of 6
