"""Our encoder is BERT: same weights as transformers.BertForPreTraining give the same numbers."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from bertbench.config import ModelConfig  # noqa: E402
from bertbench.model.hf_compat import config_from_hf, state_dict_from_hf, state_dict_to_hf  # noqa: E402
from bertbench.model.bert import BertForPreTraining, Packing  # noqa: E402


def hf_model(vocab_size=99, layers=2, hidden=32, heads=4, seed=0):
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(
        vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=4 * hidden, max_position_embeddings=64,
    )
    m = transformers.BertForPreTraining(cfg).eval()
    # Random init leaves biases and LayerNorms at 0/1; perturb every tensor so the test sees them all.
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return m


def ours_from(hf) -> BertForPreTraining:
    cfg = config_from_hf(hf.config.to_dict())
    sd, missing = state_dict_from_hf(hf.state_dict(), cfg)
    assert missing == []
    m = BertForPreTraining(cfg).eval()
    m.load_state_dict(sd, strict=True)
    return m


def batch(vocab_size, seed=1):
    g = torch.Generator().manual_seed(seed)
    B, T = 3, 17
    ids = torch.randint(5, vocab_size, (B, T), generator=g)
    types = torch.zeros(B, T, dtype=torch.long)
    types[:, 9:] = 1  # two segments
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 12:] = 0  # padding
    mask[2, 5:] = 0
    ids[mask == 0] = 0
    types[mask == 0] = 0
    return ids, types, mask


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("vocab_size", [99, 30522 // 100])
def test_forward_parity(vocab_size, packed, monkeypatch):
    """Padded: every position equals HF's, padded queries included. Packed (the default on batches with
    ≥ 10% padding): every real position equals HF's, and padded positions are zeros, not garbage."""
    monkeypatch.setattr(Packing, "MIN_PADDING", 0.1 if packed else 1.1)
    hf = hf_model(vocab_size)
    ours = ours_from(hf)
    assert not ours.cfg.causal
    ids, types, mask = batch(vocab_size)
    assert Packing.worth_it(mask) == packed  # the batch has 29% padding
    with torch.no_grad():
        ref = hf(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True)
        out = ours(input_ids=ids, token_type_ids=types, attention_mask=mask)
    valid = mask.bool() if packed else torch.ones_like(mask, dtype=torch.bool)
    torch.testing.assert_close(out.last_hidden_state[valid], ref.hidden_states[-1][valid], atol=1e-5, rtol=0)
    torch.testing.assert_close(out.lm_logits[valid], ref.prediction_logits[valid], atol=1e-5, rtol=0)
    torch.testing.assert_close(out.nsp_logits, ref.seq_relationship_logits, atol=1e-5, rtol=0)
    assert out["lm_logits"].shape == (3, 17, vocab_size)
    if packed:
        assert torch.equal(out.last_hidden_state[~mask.bool()], torch.zeros(int((mask == 0).sum()), hf.config.hidden_size))


def test_masked_positions_equal_full_logits():
    hf = hf_model()
    ours = ours_from(hf)
    ids, types, mask = batch(99)
    labels = torch.full_like(ids, -100)
    labels[0, 3] = 7
    labels[1, 10] = 42
    with torch.no_grad():
        full = ours(ids, types, mask).lm_logits
        sparse = ours(ids, types, mask, lm_labels=labels)
    assert sparse.lm_logits.shape == (2, 99)
    torch.testing.assert_close(sparse.lm_logits, full[labels != -100], atol=1e-5, rtol=0)
    expected = torch.nn.functional.cross_entropy(full[labels != -100], labels[labels != -100])
    torch.testing.assert_close(sparse.lm_loss, expected, atol=1e-5, rtol=0)


def test_round_trip_is_exact():
    hf = hf_model(vocab_size=123, seed=3)
    ours = ours_from(hf)
    back = state_dict_to_hf(ours.state_dict(), ours.cfg)
    for k, v in hf.state_dict().items():
        if k == "bert.embeddings.position_ids":
            continue
        assert torch.equal(back[k], v), k
    again, _ = state_dict_from_hf(back, ours.cfg)
    for k, v in ours.state_dict().items():
        assert torch.equal(again[k], v), k


def test_causal_matches_per_prefix():
    """Causal: the hidden state at t depends only on tokens ≤ t (checked by truncating the input)."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64, causal=True)
    m = BertForPreTraining(cfg).eval()
    ids = torch.randint(5, 50, (2, 12))
    with torch.no_grad():
        full = m.bert(ids).last_hidden_state
        prefix = m.bert(ids[:, :7]).last_hidden_state
        padded = m.bert(ids, attention_mask=torch.ones_like(ids).index_fill_(1, torch.arange(9, 12), 0)).last_hidden_state
    torch.testing.assert_close(full[:, :7], prefix, atol=1e-5, rtol=0)
    torch.testing.assert_close(full[:, :9], padded[:, :9], atol=1e-5, rtol=0)
    bidir = BertForPreTraining(ModelConfig(**{**cfg.__dict__, "causal": False})).eval()
    bidir.load_state_dict(m.state_dict())
    with torch.no_grad():
        assert not torch.allclose(bidir.bert(ids).last_hidden_state[:, :7], prefix, atol=1e-3)
