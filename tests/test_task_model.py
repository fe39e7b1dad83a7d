"""Each task type's head and the shared fine-tuning loop, on synthetic data a tiny model can learn."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bertbench.config import ModelConfig
from bertbench.model.bert import BertModel
from bertbench.training.finetune_loop import FinetuneHParams, pad_collate, train
from bertbench.training.task_model import FeatureBasedConfig, TaskModel


def tiny(causal=False):
    torch.manual_seed(0)
    return BertModel(ModelConfig(vocab_size=40, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, causal=causal))


def test_pad_collate_pads_to_longest_in_batch():
    feats = [{"input_ids": [2, 5, 3], "token_type_ids": [0, 0, 0], "labels": 1},
             {"input_ids": [2, 5, 6, 7, 8, 9, 10, 11, 3], "token_type_ids": [0] * 9, "labels": 0}]
    b = pad_collate(feats)
    assert b["input_ids"].shape == (2, 16)  # longest 9 → rounded up to 16, not max_seq_len
    assert b["attention_mask"].sum().item() == 12
    assert b["labels"].tolist() == [1, 0]
    mc = [{"input_ids": [[2, 3], [2, 4, 3]], "labels": 1}]
    assert pad_collate(mc)["input_ids"].shape == (1, 2, 8)
    tok = [{"input_ids": [2, 5, 3], "labels": [-100, 4, -100]}]
    assert pad_collate(tok)["labels"][0, 3:].eq(-100).all()


def synthetic(task_type, n=48, seed=0):
    rng = np.random.default_rng(seed)
    feats = []
    for _ in range(n):
        L = int(rng.integers(4, 12))
        ids = [2] + rng.integers(5, 40, L).tolist() + [3]
        key = int(5 + rng.integers(0, 2))
        ids[1] = key  # the signal: the first word
        f = {"input_ids": ids, "token_type_ids": [0] * len(ids)}
        if task_type == "classification":
            f["labels"] = key - 5
        elif task_type == "regression":
            f["labels"] = float(key - 5) * 2.0
        elif task_type == "span_qa":
            f["start_positions"], f["end_positions"] = 1, 2
        elif task_type == "token_classification":
            f["labels"] = [-100] + [int(t % 3) for t in ids[1:-1]] + [-100]
        elif task_type == "multiple_choice":
            choices = [[2, 9, 3], [2, key, 3]] if key == 5 else [[2, key, 3], [2, 9, 3]]
            f = {"input_ids": choices, "token_type_ids": [[0] * 3] * 2, "labels": 1 if key == 5 else 0}
        feats.append(f)
    return feats


@pytest.mark.parametrize("task_type,num_labels", [
    ("classification", 2), ("regression", 1), ("span_qa", 2), ("token_classification", 3), ("multiple_choice", 2),
])
def test_every_type_learns_its_synthetic_task(task_type, num_labels):
    feats = synthetic(task_type)
    model = TaskModel(tiny(), task_type, num_labels)
    hp = FinetuneHParams(lr=3e-3, epochs=12, batch_size=8, warmup_fraction=0.1)
    res = train(model, feats, feats, hp, seed=1, device=torch.device("cpu"), bf16=False)
    first, last = res.history[0]["train_loss"], res.history[-1]["train_loss"]
    assert last < 0.5 * first, (first, last)
    assert len(res.eval_outputs) == len(feats)


def test_feature_based_ner_freezes_the_encoder():
    bert = tiny()
    before = {k: v.clone() for k, v in bert.state_dict().items()}
    model = TaskModel(bert, "token_classification", 3, FeatureBasedConfig(layers=[-1, -2], combine="concat"))
    feats = synthetic("token_classification")
    res = train(model, feats, feats, FinetuneHParams(lr=3e-3, epochs=6, batch_size=8), 1, torch.device("cpu"), False)
    assert res.history[-1]["train_loss"] < res.history[0]["train_loss"]
    for k, v in bert.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_causal_model_pools_from_last_real_token():
    bert = tiny(causal=True).eval()
    ids = torch.tensor([[2, 7, 8, 3, 0, 0], [2, 7, 8, 9, 10, 3]])
    mask = (ids != 0).long()
    with torch.no_grad():
        out = bert(ids, attention_mask=mask)
        alone = bert(ids[:1, :4])
    torch.testing.assert_close(out.pooled[0], alone.pooled[0], atol=1e-5, rtol=0)


def test_feature_based_takes_the_last_four_layers_a_shallow_encoder_has():
    bert = tiny()  # 2 layers: "the last four hidden" are its last two (hidden state 0 is the embedding output)
    model = TaskModel(bert, "token_classification", 3, FeatureBasedConfig())
    assert model.feature_based.layers == [-1, -2]
    logits, _ = model({"input_ids": torch.tensor([[2, 7, 8, 3]])})
    assert logits.shape == (1, 4, 3)
    assert FeatureBasedConfig().layers_for(12) == [-1, -2, -3, -4]
    with pytest.raises(ValueError, match="none of them is a layer"):
        FeatureBasedConfig(layers=[0, -3]).layers_for(2)
