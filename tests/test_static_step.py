"""The static training step and the padded vocabulary compute the same function as the dynamic path and
as transformers.BertForPreTraining: the same loss and the same gradients (fp32, 1e-5).

- static step: no packing, the mask always passed, the last layer at P fixed prediction slots per row
  (unused slots labelled IGNORE_INDEX), no host sync between the batch and the loss;
- padded vocabulary: VOCAB_MULTIPLE rows inside the model, zero, scored at -inf, never in a state dict.
The ragged batch (~40% padding) makes the dynamic path pack; the tiny vocabulary (97) is padded to 128.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

transformers = pytest.importorskip("transformers")

from bertbench.config import DataConfig  # noqa: E402
from bertbench.data import IGNORE_INDEX  # noqa: E402
from bertbench.data.masking import dense_labels, fixed_slots, prediction_slots, slot_count  # noqa: E402
from bertbench.errors import BertbenchError  # noqa: E402
from bertbench.model.bert import BertForPreTraining, count_parameters, flops_per_token, padded_vocab  # noqa: E402
from bertbench.model.hf_compat import state_dict_to_hf  # noqa: E402
from tests.test_packing import cfg, perturbed, ragged_batch  # noqa: E402

SLOTS = 8  # ≥ the most labels in a row of mlm_labels(): rows have 7, 1, 0, 2, 1 (a row without any)


def mlm_labels(ids, mask, seed=5):
    labels = torch.full_like(ids, IGNORE_INDEX)
    pick = mask.bool() & (torch.rand(ids.shape, generator=torch.Generator().manual_seed(seed)) < 0.2)
    labels[pick] = ids[pick]
    assert slot_count(labels, SLOTS) == SLOTS
    return labels


def no_dropout(causal=False):
    return dataclasses.replace(cfg(causal), dropout=0.0, attention_dropout=0.0)  # train mode, deterministic


def model_pair(causal=False, nsp=True):
    torch.manual_seed(0)
    a = perturbed(BertForPreTraining(no_dropout(causal), nsp=nsp)).train()
    b = BertForPreTraining(no_dropout(causal), nsp=nsp).train()
    b.load_state_dict(a.state_dict())
    return a, b


def grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def assert_same(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys() and expected
    for n in expected:
        torch.testing.assert_close(actual[n], expected[n], atol=1e-5, rtol=1e-4, msg=n)


@pytest.mark.parametrize("nsp", [True, False], ids=["mlm+nsp", "mlm"])
def test_fixed_slots_step_matches_the_dynamic_step(nsp):
    dynamic, static = model_pair(nsp=nsp)
    ids, types, mask = ragged_batch()
    labels = mlm_labels(ids, mask)
    nsp_labels = torch.tensor([0, 1, 1, 0, 1]) if nsp else None
    ref = dynamic(ids, types, mask, lm_labels=labels, nsp_labels=nsp_labels)
    ref.loss.backward()
    positions, slot_labels = fixed_slots(labels, SLOTS)
    out = static(ids, types, mask, lm_labels=slot_labels, nsp_labels=nsp_labels, lm_positions=positions, static=True)
    out.loss.backward()
    torch.testing.assert_close(out.loss, ref.loss, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.lm_loss, ref.lm_loss, atol=1e-5, rtol=0)
    assert out.lm_logits.shape == (5, SLOTS, 97) and out.lm_targets.shape == (5, SLOTS)
    real = out.lm_targets != IGNORE_INDEX
    torch.testing.assert_close(out.lm_logits[real], ref.lm_logits, atol=1e-5, rtol=1e-4)  # row-major both
    assert_same(grads(static), grads(dynamic))


def test_causal_static_step_matches_the_dynamic_step():
    dynamic, static = model_pair(causal=True, nsp=False)
    ids, types, mask = ragged_batch()
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[:, :-1] = torch.where(mask[:, 1:].bool(), ids[:, 1:], IGNORE_INDEX)
    ref = dynamic(ids, types, mask, lm_labels=labels)
    ref.loss.backward()
    out = static(ids, types, mask, lm_labels=labels, static=True)
    assert out.lm_targets.shape == ids.shape and ref.lm_targets.shape == (int((labels != IGNORE_INDEX).sum()),)
    out.loss.backward()
    torch.testing.assert_close(out.loss, ref.loss, atol=1e-5, rtol=0)
    assert_same(grads(static), grads(dynamic))


def test_fixed_slots_step_matches_transformers():
    """Loss and every gradient against transformers' BertForPreTraining on the same weights (the padded
    vocabulary's rows stripped by state_dict_to_hf, as the HF export strips them)."""
    ours, _ = model_pair()
    c = ours.cfg
    hf_cfg = transformers.BertConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads,
        intermediate_size=c.intermediate_size, max_position_embeddings=c.max_position_embeddings,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    hf = transformers.BertForPreTraining(hf_cfg).train()
    loaded = hf.load_state_dict(state_dict_to_hf(ours.state_dict(), c), strict=False)
    assert loaded.missing_keys == [] and set(loaded.unexpected_keys) <= {"bert.embeddings.position_ids"}
    ids, types, mask = ragged_batch()
    labels, nsp = mlm_labels(ids, mask), torch.tensor([0, 1, 1, 0, 1])
    positions, slot_labels = fixed_slots(labels, SLOTS)
    out = ours(ids, types, mask, lm_labels=slot_labels, nsp_labels=nsp, lm_positions=positions, static=True)
    out.loss.backward()
    ref = hf(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, next_sentence_label=nsp)
    ref.loss.backward()
    torch.testing.assert_close(out.loss, ref.loss, atol=1e-5, rtol=0)
    named = state_dict_to_hf({n: p.grad for n, p in ours.named_parameters()}, c)
    for name, p in hf.named_parameters():
        torch.testing.assert_close(named[name], p.grad, atol=1e-5, rtol=1e-4, msg=name)
    assert len(list(hf.parameters())) > 20


def test_vocabulary_is_padded_inside_the_model_only():
    torch.manual_seed(0)
    model = BertForPreTraining(cfg())
    word, bias = model.bert.embeddings.word.weight, model.mlm.bias
    assert padded_vocab(97) == 128 and padded_vocab(128) == 128 and padded_vocab(30522) == 30528
    assert word.shape == (128, 32) and bias.shape == (128,)
    assert not word[97:].any()  # zero rows, not random ones
    sd = model.state_dict()
    assert sd["bert.embeddings.word.weight"].shape == (97, 32) and sd["mlm.bias"].shape == (97,)
    assert count_parameters(model) == sum(v.numel() for v in sd.values())
    fresh = BertForPreTraining(cfg())
    fresh.load_state_dict(sd)  # a real-vocabulary state dict (a checkpoint, an HF import) loads, padded
    assert torch.equal(fresh.bert.embeddings.word.weight, word)
    # padded logits are -inf (never scored); the returned logits are the real vocabulary's
    out = model.eval()(*ragged_batch())
    assert out.lm_logits.shape[-1] == 97
    full = model.mlm(torch.randn(3, 32), word)
    assert full.shape == (3, 128) and torch.isinf(full[:, 97:]).all() and torch.isfinite(full[:, :97]).all()


def test_padding_rows_stay_zero_through_training_steps():
    """No gradient reaches the padding rows, so AdamW (with weight decay) leaves them zero."""
    from bertbench.config import OptimConfig
    from bertbench.training.optim import make_adamw

    torch.manual_seed(0)
    model = BertForPreTraining(no_dropout()).train()  # (model_pair's perturbation reaches the padding rows too)
    opt = make_adamw(model, OptimConfig(lr=1e-2), "cpu")
    ids, types, mask = ragged_batch()
    positions, slot_labels = fixed_slots(mlm_labels(ids, mask), SLOTS)
    for _ in range(2):
        model(ids, types, mask, lm_labels=slot_labels, nsp_labels=torch.tensor([0, 1, 1, 0, 1]), lm_positions=positions,
              static=True).loss.backward()
        assert not model.bert.embeddings.word.weight.grad[97:].any()
        opt.step()
        opt.zero_grad()
    assert not model.bert.embeddings.word.weight[97:].any() and not model.mlm.bias[97:].any()


def test_flops_count_the_padded_vocabulary():
    c = dataclasses.replace(cfg(), vocab_size=97)
    head = lambda V: 3.0 * 2 * c.hidden_size * V  # noqa: E731  the decoder's share per predicted token
    assert flops_per_token(c, 16) - flops_per_token(c, 16, vocab_padding=False) == pytest.approx(head(128) - head(97))


def test_fixed_slots_keep_every_label_in_order():
    labels = torch.full((3, 10), IGNORE_INDEX)
    labels[0, [1, 4, 8]] = torch.tensor([11, 12, 13])
    labels[2, [0]] = 7
    positions, slot_labels = fixed_slots(labels, 4)
    assert positions.shape == slot_labels.shape == (3, 4)
    assert positions[0, :3].tolist() == [1, 4, 8] and slot_labels[0].tolist() == [11, 12, 13, IGNORE_INDEX]
    assert (slot_labels[1] == IGNORE_INDEX).all() and slot_labels[2].tolist() == [7] + [IGNORE_INDEX] * 3
    # every label lands in a slot at its own position: scattering the slots back gives the (B, T) labels
    back = torch.full_like(labels, IGNORE_INDEX).scatter_(1, positions, slot_labels)
    assert torch.equal(back, labels)
    wide_positions, wide = fixed_slots(labels, 12)  # more slots than positions
    assert wide.shape == (3, 12) and (wide[:, 10:] == IGNORE_INDEX).all()
    assert slot_count(labels) == 3 and slot_count(labels, 5) == 5  # the batch's own most; the static cap
    assert slot_count(torch.full((2, 4), IGNORE_INDEX)) == 1  # a batch without labels keeps one slot
    with pytest.raises(BertbenchError, match="3 labelled positions, more than the 2 prediction slots"):
        slot_count(labels, 2)


def test_prediction_slots_bound_every_row_the_masking_draws():
    from bertbench.data.masking import MaskingCollator, TokenTables

    V = 97
    tables = TokenTables(torch.arange(V) < 5, torch.zeros(V, dtype=torch.bool), torch.arange(5, V), 0, 4)
    for params, expected in [(DataConfig(max_seq_len=32), 5), (DataConfig(max_seq_len=32, max_predictions_per_seq=3), 3)]:
        assert prediction_slots(params) == expected
        samples = [{"input_ids": [2] + list(range(5, 5 + n)) + [3], "token_type_ids": [0] * (n + 2), "index": i}
                   for i, n in enumerate([20, 12, 3])]  # the longest row is 22 tokens: padded to 24 (dynamic), 32 (static)
        dynamic = MaskingCollator(tables, params, seed=1, nsp=False)(samples)
        static = MaskingCollator(tables, params, seed=1, nsp=False, static=True)(samples)
        assert static["input_ids"].shape == (3, 32) and static["lm_positions"].shape == (3, expected)
        T = dynamic["input_ids"].size(1)
        assert torch.equal(static["input_ids"][:, :T], dynamic["input_ids"])  # the same masks, padded further
        back, dense = dense_labels(static), dense_labels(dynamic)
        assert torch.equal(back[:, :T], dense) and (back[:, T:] == IGNORE_INDEX).all()
        # the dynamic batch's slots: its own most labels per row, no more (the CPU's work per step)
        assert dynamic["lm_positions"].shape == dynamic["lm_labels"].shape == (3, int((dense != IGNORE_INDEX).sum(1).max()))


def test_causal_static_batches_have_the_phase_length():
    from bertbench.data.masking import CausalCollator

    samples = [{"input_ids": [2, 7, 8, 9, 3], "token_type_ids": [0] * 5}, {"input_ids": [2, 7, 3], "token_type_ids": [0] * 3}]
    dynamic, static = CausalCollator(0, max_len=32)(samples), CausalCollator(0, max_len=32, static=True)(samples)
    assert dynamic["input_ids"].shape == (2, 8) and static["input_ids"].shape == static["lm_labels"].shape == (2, 32)
    assert torch.equal(static["lm_labels"][:, :8], dynamic["lm_labels"]) and (static["lm_labels"][:, 8:] == IGNORE_INDEX).all()


def test_an_optimizer_state_saved_before_the_padding_resumes():
    """last.ckpt of an older run: AdamW moments of the real vocabulary's rows only. They are padded on load, so
    the optimiser steps on, the real rows' moments unchanged."""
    from bertbench.config import OptimConfig
    from bertbench.training.optim import make_adamw
    from bertbench.training.pretrain_module import pad_vocab_optimizer_state

    model, _ = model_pair()
    opt = make_adamw(model, OptimConfig(), "cpu")
    ids, types, mask = ragged_batch()
    model(ids, types, mask, lm_labels=mlm_labels(ids, mask), nsp_labels=torch.tensor([0, 1, 1, 0, 1])).loss.backward()
    opt.step()
    saved = opt.state_dict()
    old = {i: {k: (v[:97].clone() if torch.is_tensor(v) and v.dim() and v.size(0) == 128 else v) for k, v in st.items()}
           for i, st in saved["state"].items()}  # what the unpadded model's optimiser held
    checkpoint = {"optimizer_states": [{**saved, "state": old}]}
    pad_vocab_optimizer_state(checkpoint, model)
    restored = make_adamw(model, OptimConfig(), "cpu")
    restored.load_state_dict(checkpoint["optimizer_states"][0])
    for i, st in restored.state_dict()["state"].items():
        for k, v in st.items():
            torch.testing.assert_close(v[:97] if v.dim() and v.size(0) == 128 else v,
                                       old[i][k] if not (v.dim() and v.size(0) == 128) else old[i][k][:97])
    model(ids, types, mask, lm_labels=mlm_labels(ids, mask), nsp_labels=torch.tensor([0, 1, 1, 0, 1])).loss.backward()
    restored.step()  # shapes agree: the step runs
