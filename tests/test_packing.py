"""The fine-tuning fast paths compute the same function as the plain padded encoder, and as HF's task models.

- Packing: on batches with ≥ 10% padding, position-wise work runs on the real tokens only.
- pooled_only: sequence-level heads read one token, so the last layer computes only that token's output.
Both must give the same outputs *and* the same gradients, or fine-tuning would train a different model.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

transformers = pytest.importorskip("transformers")

from bertbench.config import ModelConfig  # noqa: E402
from bertbench.model.hf_compat import state_dict_to_hf  # noqa: E402
from bertbench.model.bert import BertForPreTraining, Packing  # noqa: E402
from bertbench.training.task_model import TaskModel  # noqa: E402


def cfg(causal=False):
    return ModelConfig(vocab_size=97, hidden_size=32, num_layers=3, num_heads=4, intermediate_size=64,
                       max_position_embeddings=40, causal=causal)


def ragged_batch(B=5, T=23, seed=0):
    """Right-padded sentence pairs of lengths 4..T, at least one full row: ~40% padding."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([T, 4, 11, 17, 7][:B])
    ids = torch.randint(5, 97, (B, T), generator=g)
    ids[:, 0] = 2  # a [CLS]-like token
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
    types = ((torch.arange(T)[None, :] >= (lengths // 2)[:, None]) & mask.bool()).long()
    ids[mask == 0] = 0
    return ids, types, mask


def perturbed(model, seed=1):
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # biases and LayerNorms away from 0/1, so all are exercised
    return model


@pytest.fixture(params=[4, 1], ids=["one-bucket", "four-buckets"])
def buckets(request, monkeypatch):
    """ragged_batch has 5 rows: 4 rows per bucket at least → one bucket; 1 → four (some without padding)."""
    monkeypatch.setattr(Packing, "MIN_BUCKET_ROWS", request.param)
    return request.param


def eval_encoder(causal: bool, packed: bool, monkeypatch) -> "torch.nn.Module":
    """A perturbed encoder in eval mode (no dropout), with packing forced on or off for the test."""
    monkeypatch.setattr(Packing, "MIN_PADDING", 0.1 if packed else 1.1)
    torch.manual_seed(0)
    return perturbed(BertForPreTraining(cfg(causal))).bert.eval()


def grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def assert_same_gradients(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys() and expected
    for n in expected:
        torch.testing.assert_close(actual[n], expected[n], atol=1e-5, rtol=1e-4, msg=n)


def test_packing_round_trip(buckets):
    ids, _, mask = ragged_batch()
    pk = Packing(mask)
    assert len(pk.buckets) == (1 if buckets == 4 else 4)
    assert sorted(torch.cat([b.rows for b in pk.buckets]).tolist()) == list(range(5))
    assert [b.T for b in pk.buckets] == ([23] if buckets == 4 else [23, 11, 7, 4])  # lengths 23 and 17 share one
    x = torch.randn(*ids.shape, 3)
    packed = pk.pack(x)
    assert packed.shape == (int(mask.sum()), 3)
    back = pk.pad(packed)
    assert torch.equal(back[mask.bool()], x[mask.bool()])
    assert torch.equal(back[~mask.bool()], torch.zeros(int((mask == 0).sum()), 3))
    flat = torch.tensor([0, 1 * 23 + 3, 4 * 23 + 6])  # real tokens: (0,0), (1,3), (4,6)
    assert torch.equal(packed[pk.rows_of(flat)], x.reshape(-1, 3)[flat])
    grids = [pk.grid(packed, b) for b in pk.buckets]
    for g, b in zip(grids, pk.buckets):  # each bucket's grid is its rows, cut to T_b, zeros at padding
        torch.testing.assert_close(g, x[b.rows, :b.T] * mask[b.rows, :b.T, None], atol=0, rtol=0)
    assert torch.equal(pk.merge(grids), packed)


def test_packing_threshold():
    full = torch.ones(4, 10, dtype=torch.long)
    assert not Packing.worth_it(None) and not Packing.worth_it(full)
    full[0, 9] = 0  # 2.5% padding: not worth the gathers
    assert not Packing.worth_it(full)
    full[:, 8:] = 0  # 20%
    assert Packing.worth_it(full)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_packed_matches_padded_outputs_and_gradients(causal, buckets, monkeypatch):
    torch.manual_seed(0)
    model = perturbed(BertForPreTraining(cfg(causal))).eval()  # eval: no dropout, so the two paths are comparable
    ids, types, mask = ragged_batch()
    labels = torch.full_like(ids, -100)
    labels[mask.bool() & (torch.arange(ids.size(1)) % 3 == 0)] = 7
    nsp = torch.tensor([0, 1, 0, 1, 1])
    runs = {}
    for name, threshold in (("padded", 1.1), ("packed", 0.1)):
        monkeypatch.setattr(Packing, "MIN_PADDING", threshold)
        model.zero_grad()
        out = model(ids, types, mask, lm_labels=labels, nsp_labels=nsp)
        out.loss.backward()
        with torch.no_grad():
            out.last_hidden_state = model.bert(ids, types, mask).last_hidden_state  # every position
        runs[name] = (out, grads(model))
    (a, ga), (b, gb) = runs["padded"], runs["packed"]
    valid = mask.bool()
    torch.testing.assert_close(b.last_hidden_state[valid], a.last_hidden_state[valid], atol=1e-5, rtol=0)
    torch.testing.assert_close(b.lm_logits, a.lm_logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(b.nsp_logits, a.nsp_logits, atol=1e-5, rtol=0)
    assert len(ga) == len(list(model.parameters()))
    assert_same_gradients(gb, ga)


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_pooled_only_matches_full_pool_outputs_and_gradients(causal, packed, buckets, monkeypatch):
    bert = eval_encoder(causal, packed, monkeypatch)
    ids, types, mask = ragged_batch()
    weight = torch.randn(32)
    results = []
    for pooled_only in (False, True):
        bert.zero_grad()
        out = bert(ids, types, mask, pooled_only=pooled_only)
        assert (out.last_hidden_state is None) == pooled_only
        (out.pooled @ weight).sum().backward()
        results.append((out.pooled, grads(bert)))
    (full, g_full), (only, g_only) = results
    torch.testing.assert_close(only, full, atol=1e-5, rtol=0)
    assert_same_gradients(g_only, g_full)


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_outputs_at_matches_the_full_last_layer(packed, buckets, monkeypatch):
    """The last layer at chosen positions (prediction slots) only: the same states there, the same pooled
    output, the same gradients; unused slots (on padding too) change nothing."""
    from bertbench.data.masking import fixed_slots

    bert = eval_encoder(False, packed, monkeypatch)
    ids, types, mask = ragged_batch()
    chosen = mask.bool() & (torch.rand(ids.shape, generator=torch.Generator().manual_seed(3)) < 0.3)
    chosen[2] = False  # a row with nothing chosen (only its pooled token is computed)
    chosen[1, 3] = True  # a row's last real token
    positions, slot_labels = fixed_slots(torch.where(chosen, ids, -100), 9)  # rows with fewer: slots on padding
    used = slot_labels != -100
    assert used.sum() == chosen.sum() and (~mask.bool()).gather(1, positions).any()
    w_sel, w_pool = torch.randn(32), torch.randn(32)
    results = []
    for partial in (False, True):
        bert.zero_grad()
        out = bert(ids, types, mask, outputs_at=positions if partial else None)
        sel = out.selected[used] if partial else out.last_hidden_state[chosen]  # row-major both
        assert sel.shape == (int(chosen.sum()), 32)
        ((sel @ w_sel).sum() + (out.pooled @ w_pool).sum()).backward()
        results.append((sel, out.pooled, grads(bert)))
    (sel_full, pool_full, g_full), (sel_part, pool_part, g_part) = results
    torch.testing.assert_close(sel_part, sel_full, atol=1e-5, rtol=0)
    torch.testing.assert_close(pool_part, pool_full, atol=1e-5, rtol=0)
    assert_same_gradients(g_part, g_full)
    with pytest.raises(ValueError, match="masked LM's"):
        eval_encoder(True, packed, monkeypatch)(ids, types, mask, outputs_at=positions)


def test_pretraining_loss_and_gradients_match_transformers(buckets):
    """BERT's pre-training step (MLM + NSP on a ragged batch): ours runs the last layer at the masked positions
    and [CLS] only (and packed); transformers.BertForPreTraining runs everything. Same loss, same gradients."""
    torch.manual_seed(0)
    c = dataclasses.replace(cfg(), dropout=0.0, attention_dropout=0.0)  # train mode, the same function on both sides
    ours = perturbed(BertForPreTraining(c)).train()
    hf_cfg = transformers.BertConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads,
        intermediate_size=c.intermediate_size, max_position_embeddings=c.max_position_embeddings,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    hf = transformers.BertForPreTraining(hf_cfg).train()
    loaded = hf.load_state_dict(state_dict_to_hf(ours.state_dict(), c), strict=False)
    assert loaded.missing_keys == [] and set(loaded.unexpected_keys) <= {"bert.embeddings.position_ids"}
    ids, types, mask = ragged_batch()
    labels = torch.full_like(ids, -100)
    pick = mask.bool() & (torch.rand(ids.shape, generator=torch.Generator().manual_seed(5)) < 0.2)
    labels[pick] = ids[pick]
    nsp = torch.tensor([0, 1, 1, 0, 1])
    out = ours(ids, types, mask, lm_labels=labels, nsp_labels=nsp)
    assert out.last_hidden_state is None  # the last layer ran at the chosen positions only
    out.loss.backward()
    ref = hf(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, next_sentence_label=nsp)
    ref.loss.backward()
    torch.testing.assert_close(out.loss, ref.loss, atol=1e-5, rtol=0)
    ours_grads = {n: p.grad for n, p in ours.named_parameters()}
    named = state_dict_to_hf(ours_grads, c)
    compared = 0
    for name, p in hf.named_parameters():
        torch.testing.assert_close(named[name], p.grad, atol=1e-5, rtol=1e-4, msg=name)
        compared += 1
    assert compared == len(list(hf.parameters())) > 20


def test_pooled_only_without_padding_and_causal_flag():
    """No attention mask at all: the causal model pools from the last position, which sees every key."""
    torch.manual_seed(0)
    bert = perturbed(BertForPreTraining(cfg(causal=True))).bert.eval()
    ids = torch.randint(5, 97, (3, 9))
    torch.testing.assert_close(bert(ids, pooled_only=True).pooled, bert(ids).pooled, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="pooled_only"):
        bert(ids, pooled_only=True, output_hidden_states=True)


def hf_pair(task_type: str, num_labels: int):
    """Our TaskModel and the matching transformers model with the same weights (eval mode)."""
    torch.manual_seed(0)
    c = cfg()
    pre = perturbed(BertForPreTraining(c))
    ours = TaskModel(pre.bert, task_type, num_labels).eval()
    hf_cfg = transformers.BertConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_layers,
        num_attention_heads=c.num_heads, intermediate_size=c.intermediate_size,
        max_position_embeddings=c.max_position_embeddings, num_labels=num_labels,
    )
    cls = {"classification": transformers.BertForSequenceClassification,
           "span_qa": transformers.BertForQuestionAnswering,
           "token_classification": transformers.BertForTokenClassification}[task_type]
    hf = cls(hf_cfg).eval()
    sd = {k: v for k, v in state_dict_to_hf(pre.state_dict(), c).items() if k.startswith("bert.")}
    head = ours.head.out
    key = "qa_outputs" if task_type == "span_qa" else "classifier"
    sd[f"{key}.weight"], sd[f"{key}.bias"] = head.weight.detach(), head.bias.detach()
    if task_type != "classification":
        sd = {k: v for k, v in sd.items() if not k.startswith("bert.pooler")}  # these HF models have no pooler
    hf.load_state_dict(sd, strict=True)
    return ours, hf


@pytest.mark.parametrize("task_type,num_labels", [("classification", 3), ("span_qa", 2), ("token_classification", 5)])
def test_task_models_match_transformers_on_ragged_batches(task_type, num_labels, buckets):
    """What fine-tuning runs (packed, pooled-only where it applies) against HF's padded task models."""
    ours, hf = hf_pair(task_type, num_labels)
    ids, types, mask = ragged_batch()
    assert Packing.worth_it(mask)
    with torch.no_grad():
        logits, _ = ours({"input_ids": ids, "token_type_ids": types, "attention_mask": mask})
        ref = hf(input_ids=ids, token_type_ids=types, attention_mask=mask)
    if task_type == "classification":
        torch.testing.assert_close(logits, ref.logits, atol=1e-5, rtol=0)
    elif task_type == "span_qa":
        valid = mask.bool()
        torch.testing.assert_close(logits[..., 0][valid], ref.start_logits[valid], atol=1e-5, rtol=0)
        torch.testing.assert_close(logits[..., 1][valid], ref.end_logits[valid], atol=1e-5, rtol=0)
    else:
        torch.testing.assert_close(logits[mask.bool()], ref.logits[mask.bool()], atol=1e-5, rtol=0)


def test_classification_gradients_match_transformers(buckets):
    """One fine-tuning step's gradients, ours (packed + pooled-only) vs BertForSequenceClassification (padded)."""
    ours, hf = hf_pair("classification", 2)
    ids, types, mask = ragged_batch()
    labels = torch.tensor([0, 1, 1, 0, 1])
    _, loss = ours({"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "labels": labels})
    loss.backward()
    ref = hf(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
    ref.loss.backward()
    torch.testing.assert_close(loss, ref.loss, atol=1e-6, rtol=0)
    # Our gradients under HF's names (fused qkv split back); the pre-training heads are absent here.
    ours_grads = {f"bert.{n}": p.grad for n, p in ours.bert.named_parameters()}
    pre_only = BertForPreTraining(ours.bert.cfg).state_dict()
    named = state_dict_to_hf({**{k: torch.zeros_like(v) for k, v in pre_only.items()}, **ours_grads}, ours.bert.cfg)
    hf_grads = {n: p.grad for n, p in hf.named_parameters()}
    compared = 0
    for name, g in hf_grads.items():
        if name.startswith("bert."):
            torch.testing.assert_close(named[name], g, atol=1e-5, rtol=1e-4, msg=name)
            compared += 1
    assert compared == len([n for n in hf_grads if n.startswith("bert.")]) > 20
    torch.testing.assert_close(ours.head.out.weight.grad, hf.classifier.weight.grad, atol=1e-5, rtol=1e-4)
