"""The vocabulary head fused with its loss (bertbench.model.fused_head) computes the unfused head's numbers:
F.linear onto the padded vocabulary (-inf padding columns), fp32 cross-entropy with IGNORE_INDEX.

Loss, argmax and the gradients of the hidden states, the decoder weight (the word embeddings, padding rows
included) and the bias, fp32 within 1e-5 and bf16 autocast within bf16's rounding; over several chunks with a
ragged last one; for the masked LM (dynamic and static steps, ragged batch, unused slots) and the causal LM.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bertbench.data import IGNORE_INDEX
from bertbench.model.bert import BertForPreTraining, padded_vocab
from bertbench.model.fused_head import linear_cross_entropy
from tests.test_packing import perturbed, ragged_batch
from tests.test_static_step import SLOTS, grads, mlm_labels, no_dropout

V = 97  # padded to 128 inside the model
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.bfloat16: dict(atol=2e-3, rtol=2e-2)}


def head_inputs(n=29, hidden=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, hidden, generator=g)
    weight = torch.randn(padded_vocab(V), hidden, generator=g) * 0.5  # padding rows non-zero: never scored anyway
    bias = torch.randn(padded_vocab(V), generator=g) * 0.1
    targets = torch.randint(0, V, (n,), generator=g)
    targets[::4] = IGNORE_INDEX
    targets[-1] = V - 1  # the last real column
    return [t.requires_grad_() for t in (h, weight, bias)], targets


def unfused(h, weight, bias, targets):
    """The model's unfused head: -inf bias on the padding columns, logits to fp32, cross-entropy."""
    b = torch.cat([bias[:V], bias.new_full((bias.numel() - V,), float("-inf"))])
    logits = F.linear(h, weight, b)
    return F.cross_entropy(logits.float(), targets, ignore_index=IGNORE_INDEX), logits[:, :V].argmax(-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("chunk", [2**20, 8 * V], ids=["one-chunk", "chunks-of-8-rows"])
def test_fused_head_matches_the_unfused_head(dtype, chunk):
    (h, weight, bias), targets = head_inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        ref_loss, ref_argmax = unfused(h, weight, bias, targets)
        loss, argmax = linear_cross_entropy(h, weight, bias, targets, V, want_argmax=True, chunk_logits=chunk)
    ref_grads = torch.autograd.grad(ref_loss * 3.0, (h, weight, bias))  # an incoming gradient ≠ 1 is scaled
    got_grads = torch.autograd.grad(loss * 3.0, (h, weight, bias))
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, ref_loss, **TOL[dtype])
    assert torch.equal(argmax, ref_argmax)  # bf16: the same rounded logits, so the same argmax
    for name, got, ref in zip(("hidden", "weight", "bias"), got_grads, ref_grads):
        assert got.dtype == ref.dtype and got.shape == ref.shape
        scale = ref.abs().max()
        torch.testing.assert_close(got / scale, ref / scale, **TOL[dtype], msg=name)
    assert not got_grads[1][V:].any() and not got_grads[2][V:].any()  # no gradient reaches the padding rows


def test_fused_head_without_gradients_gives_loss_and_argmax():
    (h, weight, bias), targets = head_inputs(n=40, seed=3)
    with torch.no_grad():
        ref_loss, ref_argmax = unfused(h, weight, bias, targets)
        loss, argmax = linear_cross_entropy(h, weight, bias, targets, V, want_argmax=True, chunk_logits=7 * V)
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    assert torch.equal(argmax, ref_argmax) and not loss.requires_grad


def test_fused_head_without_a_labelled_row_is_nan_as_cross_entropy():
    (h, weight, bias), targets = head_inputs(n=5)
    loss, _ = linear_cross_entropy(h, weight, bias, torch.full_like(targets, IGNORE_INDEX), V)
    assert torch.isnan(loss) and torch.isnan(unfused(h, weight, bias, torch.full_like(targets, IGNORE_INDEX))[0])


def pretraining_batch(causal: bool, static: bool):
    ids, types, mask = ragged_batch()
    if causal:
        labels = ids.roll(-1, 1).masked_fill(~mask.roll(-1, 1).bool(), IGNORE_INDEX)
        labels[:, -1] = IGNORE_INDEX
        return dict(input_ids=ids, token_type_ids=types, attention_mask=mask, lm_labels=labels, static=static)
    from bertbench.data.masking import fixed_slots

    positions, labels = fixed_slots(mlm_labels(ids, mask), SLOTS)  # unused slots: IGNORE_INDEX
    return dict(input_ids=ids, token_type_ids=types, attention_mask=mask, lm_labels=labels, lm_positions=positions,
                nsp_labels=torch.tensor([0, 1, 1, 0, 1]), static=static)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("causal,static", [(False, False), (False, True), (True, False), (True, True)],
                         ids=["mlm-dynamic", "mlm-static", "clm-dynamic", "clm-static"])
def test_pretraining_loss_and_every_gradient_match_the_unfused_head(causal, static, dtype):
    torch.manual_seed(0)
    model = perturbed(BertForPreTraining(no_dropout(causal), nsp=not causal)).train()
    batch = pretraining_batch(causal, static)
    results = []
    for logits in (True, False):
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            out = model(**batch, logits=logits, predictions=True)
        out.loss.backward()
        results.append((out, grads(model)))
    (ref, ref_grads), (fused, fused_grads) = results
    assert fused.lm_logits is None and ref.lm_logits is not None
    assert fused.lm_predictions.shape == fused.lm_targets.shape
    torch.testing.assert_close(fused.loss, ref.loss, **TOL[dtype])
    torch.testing.assert_close(fused.lm_loss, ref.lm_loss, **TOL[dtype])
    assert torch.equal(fused.lm_predictions, ref.lm_predictions)
    assert fused_grads.keys() == ref_grads.keys() and "mlm.bias" in ref_grads
    for name, ref_grad in ref_grads.items():
        scale = ref_grad.abs().max().clamp_min(1e-12)
        torch.testing.assert_close(fused_grads[name] / scale, ref_grad / scale, **TOL[dtype], msg=name)


def test_evaluation_accuracy_matches_the_logits_argmax():
    torch.manual_seed(0)
    model = perturbed(BertForPreTraining(no_dropout(False))).eval()
    batch = pretraining_batch(False, False)
    with torch.no_grad():
        ref = model(**batch)
        fused = model(**batch, logits=False, predictions=True)
    torch.testing.assert_close(fused.lm_loss, ref.lm_loss, atol=1e-5, rtol=1e-5)
    assert torch.equal(fused.lm_predictions, ref.lm_logits.argmax(-1))
