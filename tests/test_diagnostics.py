"""bertbench.model.diagnostics.cross_segment_match against the model's own attention probabilities (captured
from its forward pass) summed by hand, token by token, and on an encoder built to copy across segments."""
from __future__ import annotations

import pytest
import torch

import bertbench.model.bert as bert_module
from bertbench.config import ModelConfig
from bertbench.model.bert import BertModel
from bertbench.model.diagnostics import cross_segment_match, cross_segment_match_sums

CLS, SEP, MASK, PAD = 2, 3, 4, 0
SPECIAL = {CLS, SEP, MASK, PAD}


def _batch():
    # [CLS] A [SEP] B [SEP] [PAD]...: token 7 and 9 occur in both segments; 9 twice in A; 8 only in A; the [SEP]s
    # and a [MASK] in both segments never count; the second row has padding
    ids = torch.tensor([[CLS, 7, 8, 9, 9, MASK, SEP, 9, 7, 11, MASK, SEP],
                        [CLS, 5, 6, SEP, 6, 12, SEP, PAD, PAD, PAD, PAD, PAD]])
    types = torch.tensor([[0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1],
                          [0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0]])
    mask = (ids != PAD).long()
    return ids, types, mask


def _model(seed: int = 0) -> BertModel:
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=16, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
                      max_position_embeddings=16, dropout=0.0, attention_dropout=0.0)
    return BertModel(cfg).eval()


def test_cross_segment_match_sums_the_models_own_attention_by_hand(monkeypatch):
    model = _model()
    ids, types, mask = _batch()
    captured = []
    original = bert_module.SelfAttention.explicit_attention

    def spy(self, q, k, v, m, is_causal):
        scores = (q * q.size(-1) ** -0.5) @ k.transpose(-2, -1)
        if m is not None:
            scores = scores.masked_fill(~m, float("-inf"))
        captured.append(torch.softmax(scores.float(), -1))  # (B, nh, T, T)
        return original(self, q, k, v, m, is_causal)

    monkeypatch.setattr(bert_module.SelfAttention, "explicit_attention", spy)
    monkeypatch.setattr(bert_module.Packing, "worth_it", staticmethod(lambda attention_mask: False))
    with torch.no_grad():
        model(ids, types, mask)
    # by hand: queries are B's 9 (twice in A) and 7 in row 0, and B's 6 in row 1 (12 and the specials have no twin)
    twins = {(0, 7): [3, 4], (0, 8): [1], (1, 4): [2]}
    expected = torch.zeros(2, 2)
    for layer, probs in enumerate(captured):
        for (b, i), js in twins.items():
            expected[layer] += probs[b, :, i, js].sum(-1)
    sums, n = cross_segment_match_sums(model, ids, types, mask, SPECIAL)
    assert n == 3 and torch.allclose(sums, expected, atol=1e-5)
    got = cross_segment_match(model, [{"input_ids": ids, "token_type_ids": types, "attention_mask": mask}], SPECIAL)
    assert got == pytest.approx(100 * float((expected / 3).max()), abs=1e-4)


def test_a_head_built_to_copy_across_segments_scores_high_and_one_segment_scores_none():
    model = _model()
    ids, types, mask = _batch()
    base = cross_segment_match(model, [{"input_ids": ids, "token_type_ids": types, "attention_mask": mask}], SPECIAL)
    # layer 0, head 0: queries and keys read the word embedding alone, scaled up, so a token attends its twins
    with torch.no_grad():
        H = model.cfg.hidden_size
        model.embeddings.position.weight.zero_()
        model.embeddings.token_type.weight.zero_()
        w = torch.zeros(3 * H, H)
        w[: H // 2, : H // 2] = 8 * torch.eye(H // 2)  # q, head 0
        w[H: H + H // 2, : H // 2] = 8 * torch.eye(H // 2)  # k, head 0
        model.layers[0].attn.qkv.weight.copy_(w)
        model.layers[0].attn.qkv.bias.zero_()
        model.embeddings.word.weight[:16].copy_(torch.nn.functional.normalize(torch.randn(16, H), dim=-1) * 4)  # (padded to 64 rows)
    batch = [{"input_ids": ids, "token_type_ids": types, "attention_mask": mask}]
    built = cross_segment_match(model, batch, SPECIAL)
    # at most ~56%: a query matches itself as well as its twins in A (9: 2 of 3 equal keys; 7 and 6: 1 of 2)
    assert built > 30 and built > 2 * base, (built, base)  # uniform attention over ~10 keys: ~15
    one_segment = [{"input_ids": ids, "token_type_ids": torch.zeros_like(types), "attention_mask": mask}]
    assert cross_segment_match(model, one_segment, SPECIAL) is None
