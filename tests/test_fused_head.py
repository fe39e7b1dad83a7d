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
from bertbench.model import fused_head
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


def assert_as_close(got: dict, ref: dict, truth: dict, dtype: torch.dtype) -> None:
    """fp32: got equals ref (1e-5 of each tensor's largest entry). bf16: got is about as close to the fp32 truth
    as the unfused bf16 path is (both round the logits and their gradient to bf16, in different places; each is
    ~0.5% off here, the fused one up to 2.3× the unfused one's error on some tensor): within three times its
    error, or 0.2% of the tensor's largest entry. A wrong gradient is off by its own size."""
    assert got.keys() == ref.keys() == truth.keys() and got
    for name, r in ref.items():
        assert got[name].dtype == r.dtype and got[name].shape == r.shape, name
        scale = truth[name].abs().max().clamp_min(1e-12)
        if dtype == torch.float32:
            torch.testing.assert_close(got[name] / scale, r / scale, atol=1e-5, rtol=1e-5, msg=name)
        else:
            err, ref_err = ((got[name] - truth[name]).abs().max() / scale), ((r - truth[name]).abs().max() / scale)
            assert err <= max(3 * ref_err, 2e-3), (name, float(err), float(ref_err))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("chunk", [2**20, 8 * V], ids=["one-chunk", "chunks-of-8-rows"])
def test_fused_head_matches_the_unfused_head(dtype, chunk):
    (h, weight, bias), targets = head_inputs()
    names = ("hidden", "weight", "bias")
    truth_loss, _ = unfused(h, weight, bias, targets)
    truth = dict(zip(names, torch.autograd.grad(truth_loss * 3.0, (h, weight, bias))))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        ref_loss, ref_argmax = unfused(h, weight, bias, targets)
        loss, argmax = linear_cross_entropy(h, weight, bias, targets, V, want_argmax=True, chunk_logits=chunk)
    ref = dict(zip(names, torch.autograd.grad(ref_loss * 3.0, (h, weight, bias))))  # an incoming gradient ≠ 1 is scaled
    got = dict(zip(names, torch.autograd.grad(loss * 3.0, (h, weight, bias))))
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, ref_loss, **TOL[dtype])
    assert torch.equal(argmax, ref_argmax)  # bf16: the same rounded logits, so the same argmax
    assert_as_close(got, ref, truth, dtype)
    assert not got["weight"][V:].any() and not got["bias"][V:].any()  # no gradient reaches the padding rows


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
def test_pretraining_loss_and_every_gradient_match_the_unfused_head(causal, static, dtype, monkeypatch):
    monkeypatch.setattr(fused_head, "pays_off", lambda h: True)  # fp32 on CPU too: the head itself is under test
    torch.manual_seed(0)
    model = perturbed(BertForPreTraining(no_dropout(causal), nsp=not causal)).train()
    batch = pretraining_batch(causal, static)
    results = []
    for logits, bf16 in ((True, False), (True, True), (False, True)) if dtype == torch.bfloat16 else ((True, False), (False, False)):
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(**batch, logits=logits, predictions=True)
        out.loss.backward()
        results.append((out, grads(model)))
    (_, truth), (ref, ref_grads), (fused, fused_grads) = results if len(results) == 3 else (results[0], *results)
    assert fused.lm_logits is None and ref.lm_logits is not None
    assert fused.lm_predictions.shape == fused.lm_targets.shape
    torch.testing.assert_close(fused.loss, ref.loss, **TOL[dtype])
    torch.testing.assert_close(fused.lm_loss, ref.lm_loss, **TOL[dtype])
    assert torch.equal(fused.lm_predictions, ref.lm_predictions)
    assert "mlm.bias" in ref_grads and "bert.embeddings.word.weight" in ref_grads
    assert_as_close(fused_grads, ref_grads, truth, dtype)


def test_an_fp32_cpu_step_keeps_the_unfused_head_and_a_bf16_one_takes_the_fused_head():
    torch.manual_seed(0)
    model = BertForPreTraining(no_dropout(False)).train()
    batch = pretraining_batch(False, False)
    assert model(**batch, logits=False).lm_logits is not None  # measured faster here (fused_head.pays_off)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model(**batch, logits=False).lm_logits is None


def test_evaluation_accuracy_matches_the_logits_argmax(monkeypatch):
    monkeypatch.setattr(fused_head, "pays_off", lambda h: True)
    torch.manual_seed(0)
    model = perturbed(BertForPreTraining(no_dropout(False))).eval()
    batch = pretraining_batch(False, False)
    with torch.no_grad():
        ref = model(**batch)
        fused = model(**batch, logits=False, predictions=True)
    torch.testing.assert_close(fused.lm_loss, ref.lm_loss, atol=1e-5, rtol=1e-5)
    assert torch.equal(fused.lm_predictions, ref.lm_logits.argmax(-1))
