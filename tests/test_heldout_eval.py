"""Held-out evaluation (training.heldout.make_eval_fn) gives the same numbers whichever step the run trains with,
and counts a batch by its labels: a padded batch's padding (and a masked LM's unused prediction slots) are no
predictions. Small: a tiny model and eight held-out sequences of ragged lengths, no Lightning."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertbench.config import DataConfig, ModelConfig, PretrainConfig, is_causal, trains_nsp
from bertbench.data import IGNORE_INDEX
from bertbench.data.masking import dense_labels, make_collator
from bertbench.model.bert import BertForPreTraining
from bertbench.model.tokenizer import WordPieceTokenizer
from bertbench.training.batches import step_seed
from bertbench.training.heldout import make_eval_fn

VOCAB = Path(__file__).resolve().parent / "fixtures" / "corpus" / "vocab.txt"
LENGTHS = [32, 9, 21, 14, 32, 30, 29, 31]  # two batches of 4, padded to their longest rows, one raggeder


def heldout(tok) -> list[dict]:
    rng = np.random.default_rng(0)
    out = []
    for i, n in enumerate(LENGTHS):
        ids = rng.integers(len(tok.special_ids) + 100, tok.vocab_size, n)
        ids[0], ids[n // 2], ids[-1] = tok.cls_id, tok.sep_id, tok.sep_id
        types = (np.arange(n) > n // 2).astype(np.int64)
        out.append({"input_ids": ids.astype(np.int64), "token_type_ids": types, "nsp_label": i % 2, "index": i})
    return out


def by_hand(model, batches) -> tuple[float, float]:
    """(mean loss, accuracy %) over the labelled positions, from the full (B, T, V) logits of the model."""
    loss = correct = count = 0.0
    for b in batches:
        labels = dense_labels(b)
        logits = model(b["input_ids"], b["token_type_ids"], b["attention_mask"]).lm_logits
        real = labels != IGNORE_INDEX
        loss += float(F.cross_entropy(logits[real].float(), labels[real], reduction="sum"))
        correct += float((logits[real].argmax(-1) == labels[real]).sum())
        count += int(real.sum())
    return loss / count, 100.0 * correct / count


@pytest.mark.parametrize("objective", ["mlm+nsp", "clm"])
def test_heldout_metrics_are_counted_by_labels_and_the_same_whichever_step_trains(objective):
    tok = WordPieceTokenizer.from_vocab(VOCAB)
    torch.manual_seed(0)
    model = BertForPreTraining(ModelConfig(vocab_size=tok.vocab_size, hidden_size=32, num_layers=2, num_heads=2,
                                           intermediate_size=64, causal=is_causal(objective)),
                               nsp=trains_nsp(objective)).eval()
    data = SimpleNamespace(heldout=heldout(tok))
    cfg = PretrainConfig(objective=objective, batch_size=4, eval_batches=2, data=DataConfig(max_seq_len=32))
    results = {}
    for compile_ in ("off", "on"):  # the steps a run may train with: evaluation is told neither
        results[compile_] = make_eval_fn(dataclasses.replace(cfg, compile=compile_), data, tok, "32-true")(model)
    assert results["off"] == results["on"]
    collate = make_collator(cfg.data, tok, objective, seed=step_seed(cfg.seed, 0, stream=1))
    batches = []
    for i in range(2):
        collate.set_epoch(i)
        batches.append(collate(data.heldout[4 * i: 4 * i + 4]))
    assert all((b["attention_mask"] == 0).any() for b in batches)  # padded batches, the case that was miscounted
    with torch.no_grad():
        loss, accuracy = by_hand(model, batches)
    name = "clm" if objective == "clm" else "mlm"
    assert results["off"][f"{name}_loss"] == pytest.approx(loss, rel=1e-5)
    assert results["off"][f"{name}_accuracy"] == pytest.approx(accuracy, rel=1e-6)
    # the static step's own numbers on the same batches, counted by labels, are these too
    static = make_collator(cfg.data, tok, objective, seed=step_seed(cfg.seed, 0, stream=1), static=True)
    loss_sum = count = 0.0
    for i in range(2):
        static.set_epoch(i)
        b = static(data.heldout[4 * i: 4 * i + 4])
        with torch.no_grad():
            out = model(b["input_ids"], b["token_type_ids"], b["attention_mask"], b["lm_labels"],
                        lm_positions=b.get("lm_positions"), static=True)
        n = int((out.lm_targets != IGNORE_INDEX).sum())
        assert n < out.lm_targets.numel()  # there are ignored places to miscount
        loss_sum, count = loss_sum + float(out.lm_loss) * n, count + n
    assert loss_sum / count == pytest.approx(loss, rel=1e-5)


def test_the_run_and_bench_quality_score_one_checkpoint_on_the_same_batches_alike(tmp_path, monkeypatch):
    """One held-out evaluator (training.heldout): the final metrics a pre-training writes in its summary are what
    `bench quality`'s probe reports for the checkpoint it saved, on the run's own held-out batches."""
    from bertbench.benchmarks import quality
    from bertbench.config_files import load_config
    from bertbench.data.instances import build_pretraining_data
    from bertbench.model.checkpoint import load_checkpoint
    from bertbench.training.heldout import fixed_batches
    from tests.test_pretrain import TINY, pretrain, write_corpus

    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    run = tmp_path / "run"
    pretrain(["--corpus", str(write_corpus(tmp_path / "docs")), "--max-steps", "3", "--objective", "mlm", *TINY,
              "--compile", "off", "--out", str(run)], monkeypatch)
    cfg = load_config(PretrainConfig, run / "config.yaml")
    ckpt = load_checkpoint(run)
    data = build_pretraining_data(cfg.data, ckpt.tokenizer, objective=cfg.objective, seed=cfg.seed)
    batches = fixed_batches(cfg, data.heldout, ckpt.tokenizer)(cfg.data)
    held = quality.HeldOut(batches=batches, positions=0, unigram_accuracy=0.0, unigram_loss=0.0, fingerprint="")
    probe = quality.score(ckpt.model, held, hf=False)
    run_eval = ckpt.summary.heldout
    assert probe == {"mlm_accuracy": round(run_eval["mlm_accuracy"], 3), "mlm_loss": round(run_eval["mlm_loss"], 4)}
