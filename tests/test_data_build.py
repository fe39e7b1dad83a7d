"""`bertbench data build`: the tokenised corpus and every phase's instance indices built once, before any rank
starts, on several processes, with a throughput line; a pre-training with the same options then reuses all of it."""
from __future__ import annotations

import json
import os
import re

import pytest
import yaml
from typer.testing import CliRunner

from bertbench.cli import app
from test_pretrain import write_corpus

runner = CliRunner()


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """A corpus, a tokenizer, a two-phase recipe with static masking (two copies), and an empty cache."""
    from bertbench.model.tokenizer import WordPieceTokenizer

    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BERTBENCH_PROGRESS", "0")
    corpus = write_corpus(tmp_path / "docs", n_docs=16)
    vocab = tmp_path / "tokenizer"
    WordPieceTokenizer.train((p.read_text() for p in sorted(corpus.glob("*.txt"))), vocab_size=200).save(vocab)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({
        "model_size": "tiny", "tokenizer": str(vocab), "objective": "mlm+nsp", "batch_size": 4, "max_steps": 4,
        "precision": "32", "eval_every": 4, "checkpoint_every": 4, "eval_batches": 1, "log_every": 1,
        "data": {"corpus": [str(corpus)], "max_seq_len": 32, "masking": "static", "dupe_factor": 2},
        "phases": [{"fraction": 0.5, "max_seq_len": 32}, {"fraction": 0.5, "max_seq_len": 64}],
    }))
    return tmp_path, recipe


def _built(cache):
    """Every finished cache folder (corpus and index) with its meta.json's modification time."""
    return {str(p.parent.relative_to(cache)): p.stat().st_mtime_ns for p in cache.rglob("meta.json")}


def test_data_build_makes_every_phases_indices_in_parallel_and_pretrain_only_maps_them(setup):
    tmp_path, recipe = setup
    cache = tmp_path / "cache"
    r = runner.invoke(app, ["data", "build", "--recipe", str(recipe), "--num-proc", "2", "--json"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    summary = json.loads(r.output)
    index = summary["index"]
    # two phases (seq 32 and 64), each a train index (2 static copies) and a held-out one
    assert index["count"] == 4 and index["processes"] == 2
    assert len(summary["indices"]) == 4 and len(summary["corpora"]) == 1
    assert str(os.getpid()) not in map(str, index["pids"])  # built in the worker processes, not here
    assert summary["tokenise"]["mb"] > 0 and summary["tokenise"]["processes"] >= 1
    built = _built(cache)
    assert len(built) == 5  # the corpus and the four indices
    # ... and the pre-training with the same recipe finds all of it: nothing is tokenised or indexed again
    r = runner.invoke(app, ["pretrain", "--recipe", str(recipe), "--out", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert _built(cache) == built
    used = json.loads((tmp_path / "run" / "summary.json").read_text())["data"]["cache"]
    assert used == os.path.basename(summary["corpora"][0])  # the summary names the cache folder
    # a second build has nothing to do, and says so
    r = runner.invoke(app, ["data", "build", "--recipe", str(recipe)])
    assert r.exit_code == 0, r.output
    assert r.output.strip().splitlines()[-1] == "data build: everything was built before; nothing to do"


def test_data_build_prints_what_it_built_and_a_throughput_line(setup):
    tmp_path, recipe = setup
    r = runner.invoke(app, ["data", "build", "--recipe", str(recipe), "--num-proc", "2"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    lines = r.output.strip().splitlines()
    assert any(re.fullmatch(r"index of phase 2 train: [\d,]+ instances in [\d.]+ s: \S+", line) for line in lines), r.output
    assert re.fullmatch(r"data build: tokenised [\d.,]+ MB in [\d.]+ s on \d+ core\(s\): [\d.,]+ MB/s \([\d.,]+ MB/s per "
                        r"core\); 4 instance indices over [\d.,]+ MB of text in [\d.]+ s on 2 core\(s\): [\d.,]+ MB/s "
                        r"\([\d.,]+ MB/s per core\)", lines[-1]), lines[-1]


def test_data_build_trains_the_vocabulary_and_the_pretraining_on_that_corpus_uses_it_and_says_so(setup):
    """The README's own-books path (issue 57): `--tokenizer train` trains the vocabulary on the corpus once, in the
    cache beside the tokenised corpus; a pre-training with the same corpus and vocabulary settings loads it (and
    says so) instead of training its own, and finds the corpus tokenised with it."""
    tmp_path, recipe = setup
    cache = tmp_path / "cache"
    own = ["--tokenizer", "train", "--vocab-size", "150"]  # the small corpus gives 124 pieces
    r = runner.invoke(app, ["data", "build", "--recipe", str(recipe), *own])
    assert r.exit_code == 0, r.output + repr(r.exception)
    [vocab] = list(cache.glob("vocab-*"))
    assert f"data build: vocabulary of 124 pieces trained on the corpus: {vocab}" in r.output
    built = _built(cache)
    r = runner.invoke(app, ["pretrain", "--recipe", str(recipe), *own, "--out", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert f"pretrain: tokenizer: the vocabulary `data build` trained on this corpus (124 pieces, {vocab})" in r.output
    assert (tmp_path / "run" / "tokenizer" / "vocab.txt").read_text() == (vocab / "vocab.txt").read_text()
    assert _built(cache) == built  # nothing tokenised or indexed again: the build was made with this vocabulary
    r = runner.invoke(app, ["data", "build", "--recipe", str(recipe), *own])  # a second build trains nothing
    assert r.exit_code == 0 and "already trained on the corpus" in r.output, r.output
