"""The CPU fast paths of model.py against their torch references."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bertbench.config import ModelConfig
from bertbench.model.bert import SelfAttention, attention_mask_for_sdpa, dropout


def test_dropout_keeps_one_minus_p_and_scales():
    torch.manual_seed(0)
    x = torch.ones(1_000_000, requires_grad=True)
    y = dropout(x, 0.1, training=True)
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.9) < 0.002, kept
    assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / 0.9))
    y.sum().backward()
    assert torch.equal(x.grad, (y != 0).float() / 0.9)  # the same mask in backward
    assert dropout(x, 0.1, training=False) is x


def test_explicit_cpu_attention_equals_sdpa():
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=10, hidden_size=32, num_layers=1, num_heads=4, intermediate_size=64, attention_dropout=0.0)
    attn = SelfAttention(cfg)
    B, nh, T, hs = 2, 4, 9, 8
    q, k, v = (torch.randn(B, nh, T, hs) for _ in range(3))
    pad = torch.ones(B, T, dtype=torch.long)
    pad[1, 6:] = 0
    for causal in (False, True):
        mask, is_causal = attention_mask_for_sdpa(pad, T, causal, q.device)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
        got = attn.explicit_attention(q, k, v, mask, is_causal)
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
        mask, is_causal = attention_mask_for_sdpa(None, T, causal, q.device)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
        torch.testing.assert_close(attn.explicit_attention(q, k, v, mask, is_causal), ref, atol=1e-5, rtol=0)


def test_flops_per_token_counts_the_partial_last_layer():
    from bertbench.config import ModelConfig
    from bertbench.model.bert import flops_per_token

    cfg = ModelConfig(vocab_size=1000, hidden_size=64, num_layers=3, num_heads=4, intermediate_size=256)
    H, L, I, V, T = 64, 3, 256, 1024, 32  # the decoder projects onto the vocabulary padded to a multiple of 64
    full = 3 * (L * (2 * (4 * H * H + 2 * H * I) + 4 * T * H) + 2 * (H * H + H * V))
    assert flops_per_token(cfg, T) == full
    assert flops_per_token(cfg, T, vocab_padding=False) == full - 3 * 2 * H * 24  # the real 1,000 rows
    # the last layer at a quarter of the positions: keys/values everywhere, the rest at a quarter
    saved = 3 * 0.75 * (2 * (2 * H * H + 2 * H * I) + 4 * T * H)
    assert flops_per_token(cfg, T, 1.0, 0.25) == pytest.approx(full - saved)
    assert flops_per_token(cfg, T, 0.5) == pytest.approx(full - 3 * 0.5 * 2 * (H * H + H * V))


def test_a_grid_shape_builds_the_model_turc_et_al_released_under_that_name():
    from bertbench.config import MODEL_SIZES, model_shape

    # uncased_L-4_H-128_A-2 and uncased_L-2_H-256_A-4 are two of their 24 shapes; the named ones are on the grid too
    assert model_shape("L4-H128") == (4, 128, 2)
    assert model_shape("L2-H256") == (2, 256, 4)
    for name, shape in MODEL_SIZES.items():
        assert model_shape(f"L{shape[0]}-H{shape[1]}") == shape == model_shape(name)
    cfg = ModelConfig.from_size("L4-H128")
    assert (cfg.num_layers, cfg.hidden_size, cfg.num_heads, cfg.intermediate_size) == (4, 128, 2, 512)
    assert cfg.size_name() == "L4-H128"  # the name a record carries reads back as the same shape


@pytest.mark.parametrize("bad, needle", [("L0-H128", "expected L<layers"), ("L4-H100", "multiple of 64"),
                                         ("huge", "Unknown model size 'huge'"), ("L4H128", "such as L4-H128")])
def test_a_shape_off_the_grid_is_refused_with_what_was_expected(bad, needle):
    from bertbench.config import model_shape
    from bertbench.errors import BertbenchError

    with pytest.raises(BertbenchError, match=needle):
        model_shape(bad)


def test_the_report_orders_a_grid_shape_among_the_named_sizes_by_its_compute():
    import math

    from bertbench.config import MODEL_SIZES
    from bertbench.report.model import _size_rank

    ranks = [_size_rank(name) for name in MODEL_SIZES]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)  # the named sizes keep their listed order
    assert _size_rank("tiny") < _size_rank("L4-H128") < _size_rank("mini") and _size_rank("gpt") == math.inf
