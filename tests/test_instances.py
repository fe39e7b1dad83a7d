"""Pre-training instances (NSP pairs, No-NSP chunks, full sentences, causal blocks), held-out split,
static masking, `bertbench data inspect`, and one integration run on two Wikipedia shards."""
from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

import numpy as np
import pytest

from bertbench.config import DataConfig
from bertbench.data.instances import IS_NEXT, NOT_NEXT, build_pretraining_data
from bertbench.model.tokenizer import WordPieceTokenizer
from tests.instance_views import all_input_ids, lengths, ordered

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"


@pytest.fixture(scope="module")
def tok() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(CORPUS / "vocab.txt")


@pytest.fixture(scope="module")
def synthetic(tok, tmp_path_factory) -> Path:
    """60 documents × 80 sentences of 3–14 in-vocabulary words, in paragraphs of 5 sentences."""
    words = [w for w in tok.vocab() if w.isalpha() and len(w) > 2]
    rng = random.Random(0)
    root = tmp_path_factory.mktemp("synthetic")
    for d in range(60):
        sentences = [" ".join(rng.choices(words, k=rng.randint(3, 14))).capitalize() + "." for _ in range(80)]
        paragraphs = [" ".join(sentences[i:i + 5]) for i in range(0, 80, 5)]
        (root / f"doc{d:02d}.txt").write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def _doc_stream(data, d: int) -> np.ndarray:
    c = data.corpus
    return np.asarray(c.tokens[c.sent_offsets[c.doc_offsets[d]]:c.sent_offsets[c.doc_offsets[d + 1]]], dtype=np.int64)


def _is_slice(needle: np.ndarray, hay: np.ndarray) -> bool:
    if len(needle) == 0:
        return True
    windows = np.lib.stride_tricks.sliding_window_view(hay, len(needle))
    return bool((windows == needle).all(1).any())


def test_nsp_instances_have_the_papers_shape(tok, synthetic, cache):
    cfg = DataConfig(corpus=[str(synthetic)], max_seq_len=32, heldout_fraction=0.1)
    data = build_pretraining_data(cfg, tok, cache_dir=cache)
    assert len(data.train) > 1500
    doc_a, doc_b = ordered(data.train, "doc_a"), ordered(data.train, "doc_b")
    for i in range(len(data.train)):
        x = data.train[i]
        ids, types = x["input_ids"], x["token_type_ids"]
        assert len(ids) <= 32 and ids[0] == tok.cls_id and ids[-1] == tok.sep_id
        seps = np.flatnonzero(ids == tok.sep_id)
        assert len(seps) == 2 and seps[0] >= 2 and seps[1] - seps[0] >= 2  # A and B non-empty
        assert (types[: seps[0] + 1] == 0).all() and (types[seps[0] + 1:] == 1).all()
        assert x["nsp_label"] in (IS_NEXT, NOT_NEXT)
        a, b = ids[1:seps[0]], ids[seps[0] + 1:-1]
        da, db = int(doc_a[i]), int(doc_b[i])
        assert _is_slice(a, _doc_stream(data, da))
        if x["nsp_label"] == NOT_NEXT:
            assert db != da and _is_slice(b, _doc_stream(data, db))
        else:
            assert db == da and _is_slice(b, _doc_stream(data, da))
    assert abs(data.stats["isnext_share"] - 0.5) < 0.04
    full = build_pretraining_data(DataConfig(corpus=[str(synthetic)], max_seq_len=32, heldout_fraction=0.1, short_seq_prob=0.0), tok, cache_dir=cache)
    short_share, base_share = (lengths(data.train) < 32).mean(), (lengths(full.train) < 32).mean()
    print(short_share, base_share)
    assert base_share < 0.03 and 0.05 < short_share - base_share < 0.15  # short_seq_prob = 0.1 draws shorter targets


def test_heldout_documents_are_disjoint_and_chosen_by_the_data_seed(tok, synthetic, cache):
    cfg = DataConfig(corpus=[str(synthetic)], max_seq_len=32, heldout_fraction=0.1)
    data = build_pretraining_data(cfg, tok, cache_dir=cache)
    assert len(data.heldout_docs) == 6 and len(data.train_docs) == 54
    assert not set(data.train_docs) & set(data.heldout_docs)
    assert set(ordered(data.train, "doc_a")) | set(ordered(data.train, "doc_b")) <= set(data.train_docs)
    assert set(ordered(data.heldout, "doc_a")) | set(ordered(data.heldout, "doc_b")) <= set(data.heldout_docs)
    other_seed = build_pretraining_data(cfg, tok, seed=7, cache_dir=cache)  # a training seed
    assert np.array_equal(other_seed.heldout_docs, data.heldout_docs)
    assert np.array_equal(all_input_ids(other_seed.heldout), all_input_ids(data.heldout))
    assert not np.array_equal(all_input_ids(other_seed.train)[:500], all_input_ids(data.train)[:500])
    again = build_pretraining_data(cfg, tok, cache_dir=cache)
    assert np.array_equal(all_input_ids(again.train), all_input_ids(data.train)) and again.fingerprint == data.fingerprint
    assert other_seed.fingerprint != data.fingerprint
    moved = build_pretraining_data(DataConfig(corpus=[str(synthetic)], max_seq_len=32, heldout_fraction=0.1, seed=3), tok, cache_dir=cache)
    assert not np.array_equal(moved.heldout_docs, data.heldout_docs)


def _content(inst, tok) -> np.ndarray:
    specials = np.array(sorted(tok.special_ids))
    ids = all_input_ids(inst)
    return ids[~np.isin(ids, specials)].astype(np.int64)


def test_no_nsp_chunks_are_contiguous_text_of_one_document(tok, synthetic, cache):
    cfg = DataConfig(corpus=[str(synthetic)], max_seq_len=32)
    data = build_pretraining_data(cfg, tok, objective="mlm", cache_dir=cache)
    assert data.stats["isnext_share"] is None
    doc_a = ordered(data.train, "doc_a")
    for i in range(len(data.train)):
        x = data.train[i]
        ids = x["input_ids"]
        assert len(ids) <= 32 and ids[0] == tok.cls_id and ids[-1] == tok.sep_id
        assert (ids == tok.sep_id).sum() == 1 and (x["token_type_ids"] == 0).all() and x["nsp_label"] == -1
        assert _is_slice(ids[1:-1], _doc_stream(data, int(doc_a[i])))
    # every training token is used exactly once
    assert len(_content(data.train, tok)) == sum(len(_doc_stream(data, d)) for d in data.train_docs)


def test_full_sentences_pack_across_documents(tok, synthetic, cache):
    cfg = DataConfig(corpus=[str(synthetic)], max_seq_len=48, full_sentences=True, short_seq_prob=0.0)
    data = build_pretraining_data(cfg, tok, objective="mlm", cache_dir=cache)
    inner_seps = 0
    for i in range(len(data.train)):
        ids = data.train[i]["input_ids"]
        assert len(ids) <= 48 and ids[0] == tok.cls_id and ids[-1] == tok.sep_id and ids[-2] != tok.sep_id
        inner_seps += int((ids[1:-1] == tok.sep_id).sum())
    assert inner_seps > 0  # some blocks hold the end of one document, [SEP], the start of the next
    stream = np.concatenate([_doc_stream(data, d) for d in data.train_docs])
    got = _content(data.train, tok)
    assert len(got) == len(stream)
    assert np.array_equal(np.sort(got), np.sort(stream))
    assert data.stats["mean_length"] > 40  # full sentences fill the blocks


def test_causal_blocks_are_the_packed_stream(tok, synthetic, cache):
    cfg = DataConfig(corpus=[str(synthetic)], max_seq_len=32)
    data = build_pretraining_data(cfg, tok, "clm", cache_dir=cache)
    assert (lengths(data.train) == 32).all() and data.stats["isnext_share"] is None
    stream = np.concatenate([np.append(_doc_stream(data, d), tok.sep_id) for d in data.train_docs])
    blocks = all_input_ids(data.train).reshape(-1, 32).astype(np.int64)
    assert (blocks[:, 0] == tok.cls_id).all()
    assert np.array_equal(blocks[:, 1:].reshape(-1), stream[: blocks.shape[0] * 31])
    assert len(stream) - blocks.shape[0] * 31 < 31  # only the incomplete last block is dropped


def test_static_masking_with_dupe_factor(tok, synthetic, cache):
    from bertbench.config import DataConfig
    from bertbench.data.masking import MaskingCollator, TokenTables, dense_labels

    base = DataConfig(corpus=[str(synthetic)], max_seq_len=32)
    dynamic = build_pretraining_data(base, tok, cache_dir=cache)
    cfg = DataConfig(corpus=[str(synthetic)], max_seq_len=32, masking="static", dupe_factor=2)
    data = build_pretraining_data(cfg, tok, cache_dir=cache)
    assert abs(len(data.train) - 2 * len(dynamic.train)) < 0.05 * len(dynamic.train)
    x = data.train[0]
    selected = x["lm_labels"] != -100
    assert selected.any() and not selected[0] and not selected[-1]
    collator = MaskingCollator(TokenTables.from_tokenizer(tok), DataConfig(), seed=1)
    batch = collator([data.train[i] for i in range(8)])
    assert np.array_equal(dense_labels(batch)[0, : len(x["input_ids"])].numpy(), x["lm_labels"])
    assert np.array_equal(batch["input_ids"][0, : len(x["input_ids"])].numpy(), x["input_ids"])  # not re-masked


def test_instance_set_pickles(tok, synthetic, cache):
    data = build_pretraining_data(DataConfig(corpus=[str(synthetic)], max_seq_len=32), tok, cache_dir=cache)
    clone = pickle.loads(pickle.dumps(data.train))
    assert len(clone) == len(data.train)
    assert np.array_equal(clone[5]["input_ids"], data.train[5]["input_ids"])
    assert data.train[-1]["index"] == len(data.train) - 1


def test_inspect_json(tok, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from bertbench.cli import app

    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path))
    args = ["data", "inspect", "--tokenizer", str(CORPUS / "vocab.txt"), "--max-seq-len", "32", "--json"]
    for sub in ("txt", "wiki", "jsonl"):
        args += ["--corpus", str(CORPUS / sub)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    st, m = out["stats"], out["masking"]
    assert (st["documents"], st["train_documents"], st["heldout_documents"]) == (12, 10, 2)
    assert st["train_instances"] > 10 and 0 < st["isnext_share"] < 1
    assert m["selected"] >= 20_000 and m["selected_special"] == 0 and m["random_special"] == 0
    assert abs(m["selected_share"] - 0.15) < 0.02  # at ~29 candidates, round(29 × 0.15) = 4 → 13.8%
    assert abs(m["mask_share"] - 0.8) < 0.015 and abs(m["kept_share"] - 0.1) < 0.015 and abs(m["random_share"] - 0.1) < 0.015

    bad = CliRunner().invoke(app, ["data", "inspect", "--corpus", str(tmp_path / "nowhere"), "--tokenizer", str(CORPUS / "vocab.txt")])
    assert bad.exit_code == 2 and "nowhere: corpus path does not exist" in bad.output


@pytest.mark.integration
def test_inspect_two_wikipedia_shards(shared_data, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from bertbench.cli import app

    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path))
    wiki = shared_data / "corpus" / "wikipedia"
    args = ["data", "inspect", "--corpus", str(wiki / "wiki_00"), "--corpus", str(wiki / "wiki_01"),
            "--tokenizer", str(shared_data / "vocab" / "bert-base-uncased-vocab.txt"), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    st, m = out["stats"], out["masking"]
    assert st["train_instances"] > 3000 and st["mean_length"] <= 128
    assert abs(st["isnext_share"] - 0.5) <= 0.02
    assert m["selected"] >= 20_000 and m["selected_special"] == 0 and m["random_special"] == 0
    assert abs(m["selected_share"] - 0.15) <= 0.01
    assert abs(m["mask_share"] - 0.80) <= 0.015
    assert abs(m["kept_share"] - 0.10) <= 0.015
    assert abs(m["random_share"] - 0.10) <= 0.015
