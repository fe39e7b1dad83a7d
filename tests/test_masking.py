"""The masking procedure against its definition (≥ 20k selected positions per check) and the collators."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bertbench.config import DataConfig, parse_mask_procedure
from bertbench.data.masking import (
    IGNORE_INDEX,
    CausalCollator,
    MaskingCollator,
    TokenTables,
    dense_labels,
    make_collator,
    mask_tokens,
    masking_counts,
    select_positions,
)
from bertbench.errors import BertbenchError
from bertbench.model.tokenizer import WordPieceTokenizer
from tests.reference import tokenize_ids

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"
T = 128


@pytest.fixture(scope="module")
def tok() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(CORPUS / "vocab.txt")


@pytest.fixture(scope="module")
def tables(tok) -> TokenTables:
    return TokenTables.from_tokenizer(tok)


def _samples(tok, tables, n: int, seed: int = 0) -> list[dict]:
    """NSP-shaped samples of random length: [CLS] A [SEP] B [SEP] over non-special ids (some [UNK])."""
    rng = np.random.default_rng(seed)
    pool = tables.random_ids.numpy()
    out = []
    for i in range(n):
        length = int(rng.integers(16, T + 1))
        ids = rng.choice(pool, size=length)
        ids[rng.random(length) < 0.01] = tok.unk_id
        cut = int(rng.integers(2, length - 2))
        ids[0], ids[cut], ids[-1] = tok.cls_id, tok.sep_id, tok.sep_id
        types = np.zeros(length, dtype=np.int64)
        types[cut + 1:] = 1
        out.append({"input_ids": ids.astype(np.int64), "token_type_ids": types, "nsp_label": i % 2, "index": i})
    return out


def _stats(tok, tables, params: DataConfig, min_selected: int = 20_000) -> dict[str, float]:
    collator = MaskingCollator(tables, params, seed=3)
    counts: dict[str, int] = {}
    epoch = 0
    samples = _samples(tok, tables, 512)
    while counts.get("selected", 0) < min_selected:
        collator.set_epoch(epoch)
        epoch += 1
        for lo in range(0, len(samples), 128):
            chunk = samples[lo:lo + 128]
            batch = collator(chunk)
            original = torch.full_like(batch["input_ids"], tok.pad_id)
            for i, s in enumerate(chunk):
                original[i, : len(s["input_ids"])] = torch.from_numpy(s["input_ids"])
            for k, v in masking_counts(original, batch["input_ids"], dense_labels(batch), tables).items():
                counts[k] = counts.get(k, 0) + v
    assert counts["selected_special"] == 0 and counts["random_special"] == 0
    sel = counts["selected"]
    return {
        "selected_share": sel / counts["candidates"],
        "mask": counts["mask"] / sel,
        "kept": counts["kept"] / sel,
        "random": counts["random"] / sel,
    }


@pytest.mark.parametrize(
    "ratio, procedure",
    [(0.15, (80, 10, 10)), (0.15, (100, 0, 0)), (0.15, (0, 0, 100)), (0.4, (80, 10, 10))],
)
def test_shares_match_the_definition(tok, tables, ratio, procedure):
    s = _stats(tok, tables, DataConfig(mask_ratio=ratio, mask_procedure=procedure))
    assert abs(s["selected_share"] - ratio) <= 0.01
    # a random draw equal to the original counts as kept: 1 in ~600 here
    for got, want in zip((s["mask"], s["kept"], s["random"]), procedure):
        assert abs(got - want / 100) <= 0.015, (got, want)


def test_whole_word_shares_match_too(tok, tables):
    s = _stats(tok, tables, DataConfig(whole_word_mask=True))
    assert abs(s["selected_share"] - 0.15) <= 0.01
    assert abs(s["mask"] - 0.8) <= 0.015 and abs(s["random"] - 0.1) <= 0.015


def test_number_selected_per_row_is_the_originals(tok, tables):
    samples = _samples(tok, tables, 256, seed=1)
    ids = torch.full((256, T), tok.pad_id)
    for i, s in enumerate(samples):
        ids[i, : len(s["input_ids"])] = torch.from_numpy(s["input_ids"])
    n_cand = (~tables.is_special[ids]).sum(1)
    for params, cap in [(DataConfig(), None), (DataConfig(max_predictions_per_seq=7), 7)]:
        selected = select_positions(ids, tables, params, torch.Generator().manual_seed(0))
        want = [min(cap or 10**9, max(1, round(int(n) * 0.15))) for n in n_cand]
        assert selected.sum(1).tolist() == want
        assert not (selected & tables.is_special[ids]).any()  # never [CLS] [SEP] [PAD] [UNK]


def test_whole_word_masking_selects_whole_words(tok, tables):
    texts = ["The lighthouse keeper counted forty herring boats and the orchard blossom fell like snow."] * 64
    rows = [[tok.cls_id, *tokenize_ids(tok, t), tok.sep_id] for t in texts]
    ids = torch.tensor(rows)
    cont = tables.is_continuation[ids]
    assert cont.any()  # the fixture vocabulary splits some words into pieces
    params = DataConfig(mask_ratio=0.3, whole_word_mask=True)
    selected = select_positions(ids, tables, params, torch.Generator().manual_seed(0))
    # a "##" piece is selected exactly when the piece before it is
    assert torch.equal(selected[:, 1:][cont[:, 1:]], selected[:, :-1][cont[:, 1:]])
    n_cand = int((~tables.is_special[ids[0]]).sum())
    budget = round(n_cand * 0.3)
    assert (selected.sum(1) <= budget).all() and selected.sum(1).float().mean() > budget - 1
    # without whole-word masking pieces are picked independently
    loose = select_positions(ids, tables, DataConfig(mask_ratio=0.3), torch.Generator().manual_seed(0))
    assert not torch.equal(loose[:, 1:][cont[:, 1:]], loose[:, :-1][cont[:, 1:]])


def test_random_replacements_are_never_special(tok, tables):
    ids = torch.tensor([s["input_ids"][:16].tolist() for s in _samples(tok, tables, 2000)])
    out, labels = mask_tokens(ids, tables, DataConfig(mask_procedure=(0, 0, 100)), torch.Generator().manual_seed(0))
    replaced = out[labels != IGNORE_INDEX]
    assert len(replaced) > 2000
    assert not tables.is_special[replaced].any()
    vocab = tok.vocab()
    bracketed = {i for t, i in vocab.items() if t.startswith("[") and t.endswith("]")}
    assert not set(replaced.tolist()) & bracketed


def test_collator_batch_and_determinism(tok, tables):
    samples = _samples(tok, tables, 32)
    collator = MaskingCollator(tables, DataConfig(), seed=11)
    batch = collator(samples)
    longest = max(len(s["input_ids"]) for s in samples)
    B, width = batch["input_ids"].shape
    assert B == 32 and width % 8 == 0 and longest <= width < longest + 8
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "lm_positions", "lm_labels", "nsp_labels"}
    assert all(v.dtype == torch.long for v in batch.values())
    assert batch["attention_mask"].sum().item() == sum(len(s["input_ids"]) for s in samples)
    labels = dense_labels(batch)  # the slots hold every label at its own position (tests/test_static_step.py)
    assert (labels[batch["attention_mask"] == 0] == IGNORE_INDEX).all()
    assert batch["lm_labels"].shape == (B, int((labels != IGNORE_INDEX).sum(1).max()))  # P: the batch's own most
    assert batch["nsp_labels"].tolist() == [s["nsp_label"] for s in samples]
    # the same instances in the same epoch draw the same masks (a resumed run), in any collator copy
    again = MaskingCollator(tables, DataConfig(), seed=11)(samples)
    assert torch.equal(again["input_ids"], batch["input_ids"]) and torch.equal(dense_labels(again), labels)
    collator.set_epoch(1)
    assert not torch.equal(dense_labels(collator(samples)), labels)
    other_seed = MaskingCollator(tables, DataConfig(), seed=12)(samples)
    assert not torch.equal(dense_labels(other_seed), labels)


def test_causal_collator_labels_the_next_token(tok, tables):
    samples = _samples(tok, tables, 4)
    samples = [dict(s, token_type_ids=np.zeros_like(s["token_type_ids"])) for s in samples]
    batch = CausalCollator(tok.pad_id)(samples)
    assert "nsp_labels" not in batch
    for i, s in enumerate(samples):
        n = len(s["input_ids"])
        labels = batch["lm_labels"][i]
        assert labels[: n - 1].tolist() == s["input_ids"][1:].tolist()
        assert (labels[n - 1:] == IGNORE_INDEX).all()


def test_make_collator_follows_the_config(tok):
    cfg = DataConfig(mask_ratio=0.2, mask_procedure=[80, 0, 20], whole_word_mask=True, max_predictions_per_seq=20)
    c = make_collator(cfg, tok, "mlm", seed=5)
    assert isinstance(c, MaskingCollator) and c.seed == 5 and not c.nsp
    assert make_collator(cfg, tok, "mlm+nsp").nsp  # NSP labels only for the objective that trains NSP
    assert c.params is cfg  # the data config itself: no copy of its masking fields to drift
    assert isinstance(make_collator(cfg, tok, "clm"), CausalCollator)


# The six masking procedures of the paper's Table 8 (% [MASK] / same / random).
TABLE8_PROCEDURES = [(80, 10, 10), (100, 0, 0), (80, 0, 20), (80, 20, 0), (0, 20, 80), (0, 0, 100)]


def test_mask_procedures_of_table_8_parse():
    for proc in TABLE8_PROCEDURES:
        assert parse_mask_procedure("/".join(map(str, proc))) == list(proc)
        DataConfig(mask_procedure=proc)
    for bad in ("80/10", "80/10/20", "a/b/c", "-10/60/50"):
        with pytest.raises(BertbenchError, match="MASK/SAME/RND"):
            parse_mask_procedure(bad)
