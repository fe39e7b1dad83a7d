"""One procedure however many processes: global row r of step k is the same data on 1, 2 or 4 processes.

Tested at the batch level, where it is decided: `StepBatchDataset` is a pure function of (rank, world size,
grad_accum, micro-step), so every rank of a 1-, 2- and 4-process run can be collated here, in one process,
and its rows compared with the single process's rows of the same global batch (unpadded: a rank pads to
its own longest row). The real multi-process runs are in test_pretrain_ddp.py and test_pretrain_multinode.py.
"""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from bertbench.config import DataConfig
from bertbench.data.instances import build_pretraining_data
from bertbench.data.masking import dense_labels, make_collator
from bertbench.errors import BertbenchError
from bertbench.model.tokenizer import WordPieceTokenizer
from bertbench.training.batches import (LOSS_TOKENS, STEP_LOSS_TOKENS, STEP_TOKENS, StepBatchDataset, device_batch,
                                       loss_tokens, real_tokens)

from test_pretrain import write_corpus

GLOBAL, STEPS, SEED = 8, 4, 3
VARIANTS = {  # every objective and masking variant the issue names
    "mlm+nsp": ("mlm+nsp", {}),
    "mlm": ("mlm", {}),
    "clm": ("clm", {}),
    "mlm-wwm-40%-100/0/0": ("mlm", dict(whole_word_mask=True, mask_ratio=0.4, mask_procedure=[100, 0, 0])),
    "mlm-full-sentences": ("mlm", dict(full_sentences=True)),
    "mlm+nsp-static": ("mlm+nsp", dict(masking="static")),
}


@pytest.fixture(scope="module")
def corpus_and_tokenizer(tmp_path_factory):
    folder = write_corpus(tmp_path_factory.mktemp("batches") / "docs")
    tok = WordPieceTokenizer.train((p.read_text() for p in sorted(folder.glob("*.txt"))), vocab_size=200)
    return folder, tok


def _data(corpus_and_tokenizer, variant):
    folder, tok = corpus_and_tokenizer
    objective, fields = VARIANTS[variant]
    dcfg = dataclasses.replace(DataConfig(corpus=[str(folder)], max_seq_len=32, num_proc=1), **fields)
    data = build_pretraining_data(dcfg, tok, objective=objective, seed=SEED)
    return data.train, lambda: make_collator(dcfg, tok, objective, seed=SEED)


def _rows(batch: dict[str, torch.Tensor]) -> list[dict[str, list[int]]]:
    """Each row without its padding: a rank pads to its own longest row, the data is the unpadded row."""
    out = []
    for i in range(batch["input_ids"].size(0)):
        n = int(batch["attention_mask"][i].sum())
        row = {k: batch[k][i, :n].tolist() for k in ("input_ids", "token_type_ids")}
        row["lm_labels"] = dense_labels(batch)[i, :n].tolist()  # a masked LM's from its slots
        if "nsp_labels" in batch:
            row["nsp_labels"] = int(batch["nsp_labels"][i])
        out.append(row)
    return out


def _run_rows(train, collator, world: int, accum: int = 1) -> tuple[list[list[dict]], set[int]]:
    """Every global batch of STEPS steps as the ranks of a `world`-process run collate it, rows in global
    order; and the padded widths the ranks' batches came out at."""
    ranks = [StepBatchDataset(train, collator(), GLOBAL, SEED, rank, world, accum) for rank in range(world)]
    steps, widths = [], set()
    for step in range(STEPS):
        rows: dict[int, dict] = {}
        for rank, ds in enumerate(ranks):
            for micro in range(accum):
                batch = ds[step * accum + micro]
                widths.add(batch["input_ids"].size(1))
                _, global_rows = ds.rows(step * accum + micro, rank)
                assert len(global_rows) == batch["input_ids"].size(0) == GLOBAL // (world * accum)
                rows.update(zip(global_rows, _rows(batch)))
        assert sorted(rows) == list(range(GLOBAL))  # the ranks' rows are the whole global batch, each once
        steps.append([rows[r] for r in range(GLOBAL)])
    return steps, widths


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_one_two_and_four_processes_see_the_same_global_rows(corpus_and_tokenizer, variant):
    train, collator = _data(corpus_and_tokenizer, variant)
    one, one_widths = _run_rows(train, collator, 1)
    masked = VARIANTS[variant][0] != "clm"
    for world, accum in ((2, 1), (4, 1), (1, 2), (2, 2)):
        many, widths = _run_rows(train, collator, world, accum)
        assert many == one, (variant, world, accum)
        if variant == "mlm+nsp" and world == 4:  # rows really were collated in batches of other widths
            assert widths != one_widths, (widths, one_widths)
    labels = [r["lm_labels"] for step in one for r in step]
    assert all(any(t != -100 for t in lab) for lab in labels)  # every row has a loss: a real comparison
    if masked:  # masks are drawn, not fixed: another step of the same instance gets another mask
        assert len({tuple(lab) for lab in labels}) > len(labels) // 2


def test_a_row_keeps_its_mask_whatever_batch_it_is_collated_in(corpus_and_tokenizer):
    """The mask is a function of (seed, step, global row, instance) only: not of the batch's other rows or
    its padded width (the ranks of a multi-process run pad to their own longest row)."""
    train, collator = _data(corpus_and_tokenizer, "mlm+nsp")
    collate = collator()
    by_length = sorted(range(len(train)), key=lambda i: len(train[i]["input_ids"]))
    short, long_ = by_length[0], by_length[-1]
    assert len(train[short]["input_ids"]) < len(train[long_]["input_ids"])
    collate.set_epoch(5)
    alone = _rows(collate([train[short]], rows=[3]))[0]
    beside_a_long_row = _rows(collate([train[long_], train[short]], rows=[0, 3]))[1]
    assert alone == beside_a_long_row
    other_row = _rows(collate([train[short]], rows=[4]))[0]
    collate.set_epoch(6)
    other_step = _rows(collate([train[short]], rows=[3]))[0]
    assert alone["lm_labels"] != other_row["lm_labels"] or alone["input_ids"] != other_row["input_ids"]
    assert alone["lm_labels"] != other_step["lm_labels"] or alone["input_ids"] != other_step["input_ids"]


def test_a_rank_holds_its_own_rows_and_the_steps_global_counts(corpus_and_tokenizer):
    """A rank's micro-batch is its own rows, and carries, as host integers, its loss tokens and the whole step's
    tokens and loss tokens over every rank and micro-batch: the LM loss's weight and the run log's counts, with
    no collective (the rank collates the other ranks' rows of the step to count them, once per step)."""
    train, collator = _data(corpus_and_tokenizer, "mlm+nsp")
    one = StepBatchDataset(train, collator(), 16, SEED)
    for world, accum in ((4, 1), (2, 2)):
        ranks = [StepBatchDataset(train, collator(), 16, SEED, rank=r, world_size=world, grad_accum=accum)
                 for r in range(world)]
        for step in (0, 1):
            whole = one[step]
            parts = [ds[step * accum + m] for ds in ranks for m in range(accum)]
            assert [p["input_ids"].shape[0] for p in parts] == [16 // (world * accum)] * (world * accum)
            assert all(isinstance(p[k], int) for p in parts for k in (LOSS_TOKENS, STEP_TOKENS, STEP_LOSS_TOKENS))
            assert {p[STEP_TOKENS] for p in parts} == {whole[STEP_TOKENS]} == {sum(map(real_tokens, parts))}
            assert {p[STEP_LOSS_TOKENS] for p in parts} == {whole[STEP_LOSS_TOKENS]} == {sum(p[LOSS_TOKENS] for p in parts)}
            assert whole[LOSS_TOKENS] == whole[STEP_LOSS_TOKENS] == loss_tokens(whole) > 0


def test_a_global_batch_that_does_not_split_is_refused_with_what_to_do():
    assert device_batch(32, 4, 2) == 4
    with pytest.raises(BertbenchError) as e:
        device_batch(8, 3, 1)
    assert "batch_size 8" in str(e.value) and "3 process" in str(e.value) and "divisible by 3" in str(e.value)


@pytest.fixture(scope="module")
def module():
    from bertbench.config import ModelConfig, OptimConfig
    from bertbench.model.bert import BertForPreTraining
    from bertbench.training.pretrain_module import PretrainModule

    return PretrainModule(BertForPreTraining(ModelConfig.from_size("tiny", vocab_size=50)), OptimConfig(), 10,
                          dropout_seed=SEED)


def _dropout_mask(module, rank: int, step: int, micro: int = 0, accum: int = 1) -> torch.Tensor:
    """The dropout mask the pre-training module's batch-start hook leaves rank `rank` drawing at `step`."""
    from bertbench.model.bert import dropout

    opt = SimpleNamespace(param_groups=[{"lr": 1e-3}])
    module._trainer = SimpleNamespace(global_rank=rank, global_step=step, accumulate_grad_batches=accum, optimizers=[opt])
    torch.manual_seed(0)  # whatever state the process is in: the hook decides the draws
    module.on_train_batch_start({}, step * accum + micro)
    return dropout(torch.ones(4096), 0.1, True) == 0


def test_dropout_differs_across_ranks_and_repeats_for_a_rank_and_step(module):
    r0, r1 = _dropout_mask(module, 0, 7), _dropout_mask(module, 1, 7)
    assert r0.any() and r1.any()
    assert not torch.equal(r0, r1)  # each rank drops its own units
    assert torch.equal(r0, _dropout_mask(module, 0, 7))  # a resumed run draws what the uninterrupted one drew
    assert not torch.equal(r0, _dropout_mask(module, 0, 8))
    assert not torch.equal(_dropout_mask(module, 0, 7, 0, 2), _dropout_mask(module, 0, 7, 1, 2))  # micro-batches too


def test_without_nsp_the_pooler_is_frozen_for_pretraining_only():
    """DDP registers only parameters that need a gradient: a trainable pooler that feeds no loss fails every
    DDP step. Pre-training without NSP freezes it; a model for fine-tuning keeps it trainable."""
    from bertbench.config import ModelConfig, OptimConfig
    from bertbench.model.bert import BertForPreTraining
    from bertbench.training.optim import param_group_names
    from bertbench.training.pretrain_module import PretrainModule

    cfg = ModelConfig.from_size("tiny", vocab_size=50)
    for nsp in (True, False):
        module = PretrainModule(BertForPreTraining(cfg, nsp=nsp), OptimConfig(), 10)
        model = module.model
        ids = torch.randint(5, 50, (2, 12))
        labels = torch.where(torch.rand(2, 12) < 0.3, ids, torch.full_like(ids, -100))
        labels[:, 1] = ids[:, 1]
        out = model(ids, lm_labels=labels, nsp_labels=torch.tensor([0, 1]) if nsp else None)
        out.loss.backward()
        unread = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
        assert unread == [], unread  # what DDP would wait for in vain
        names = [n for group in param_group_names(model) for n in group]
        assert ("bert.pooler.weight" in names) == nsp
    assert BertForPreTraining(cfg, nsp=False).bert.pooler.weight.requires_grad  # fine-tuning's model


def test_accumulation_trains_the_step_one_batch_trains(tmp_path, corpus_and_tokenizer, monkeypatch):
    """--grad-accum 2 (and 4) cuts the global batch of 8 into micro-batches: each micro-batch's LM loss weighted
    by its share of the step's loss tokens, the step is the one batch 8 takes without accumulation. So the
    device count can pick the accumulation (a 1-GPU run of an 8-GPU recipe) and stay the same procedure: the
    same fingerprint, the same tokens, the loss curve and weights equal up to the order of float sums
    (measured: losses within 1e-5, the last decimal of metrics.csv; weights within 5e-7 relative; the
    tolerances, 1e-4 and 3e-5, allow 10x and 60x that)."""
    import csv
    import json

    from test_pretrain import TINY, pretrain

    folder, tok = corpus_and_tokenizer
    tok.save(tmp_path / "vocab")
    common = ["--corpus", str(folder), "--tokenizer", str(tmp_path / "vocab"), *TINY, "--max-steps", "6", "--lr", "3e-3",
              "--warmup-steps", "2",
              "--objective", "mlm", "--set", "model.dropout=0.0", "--set", "model.attention_dropout=0.0"]
    runs = {}
    for accum in (1, 2, 4):
        out = tmp_path / f"accum{accum}"
        pretrain([*common, "--grad-accum", str(accum), "--out", str(out)], monkeypatch)
        metrics = list(csv.DictReader(open(out / "metrics.csv")))
        weights = torch.load(out / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
        runs[accum] = json.loads((out / "summary.json").read_text()), metrics, weights
    (a, ma, wa) = runs[1]
    loss_a = torch.tensor([float(r["train_loss"]) for r in ma])
    assert loss_a[-1] < loss_a[0] - 0.3  # it learns: a curve worth comparing
    for accum in (2, 4):
        b, mb, wb = runs[accum]
        assert (b["batch_size"], b["procedure_fingerprint"]) == (a["batch_size"], a["procedure_fingerprint"])
        assert [(r["tokens"], r["loss_tokens"]) for r in ma] == [(r["tokens"], r["loss_tokens"]) for r in mb]
        loss_b = torch.tensor([float(r["train_loss"]) for r in mb])
        rel = max(((w - wb[k]).norm() / w.norm().clamp_min(1e-12)).item() for k, w in wa.items())
        print(f"grad_accum {accum}: losses within {(loss_a - loss_b).abs().max():.2e}, weights within {rel:.2e}")
        assert (loss_a - loss_b).abs().max() < 1e-4, (accum, loss_a, loss_b)
        assert rel < 3e-5, (accum, rel)
