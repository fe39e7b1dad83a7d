"""The fine-tuning protocol's selection: a slice held out of train, and one lr rule for every variant."""
from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.errors import BertbenchError
from bertbench.results import load_records
from bertbench.training.selection import (EPOCH_RULE, HELDOUT_MAX, heldout_size, select_lr, selection_record,
                                         split_heldout)

FIXTURE_DATA = Path(__file__).parent / "fixtures" / "tasks" / "data"
VOCAB = Path(__file__).parent / "fixtures" / "corpus" / "vocab.txt"

# Dev-slice scores per seed of three variants on one task, as a grid run would collect them.
GRID_SCORES = {
    "MLM+NSP": {5e-5: [60.1, 61.0, 59.5], 1e-4: [62.0, 61.2, 62.5], 3e-4: [58.0, 57.2, 59.9]},
    "LTR": {5e-5: [55.0, 56.0, 55.5], 1e-4: [54.0, 53.8, 55.1], 3e-4: [50.0, 59.0, 58.0]},
    "random init": {5e-5: [50.0, 50.0, 50.0], 1e-4: [50.0, 50.0, 50.0], 3e-4: [49.0, 51.0, 50.0]},
}


def test_the_rule_sees_scores_only_and_picks_the_best_mean_for_every_variant():
    # one rule for all: its only inputs are the scores and the metric's direction, never the model
    assert list(inspect.signature(select_lr).parameters) == ["scores", "higher_is_better", "near_constant"]
    chosen = {variant: select_lr(scores) for variant, scores in GRID_SCORES.items()}
    # LTR: 3e-4 wins on its mean (55.67 > 55.5 for 5e-5) despite holding the worst seed (50.0)
    assert chosen == {"MLM+NSP": 1e-4, "LTR": 3e-4, "random init": 5e-5}  # random init: a three-way tie
    assert select_lr({1e-4: [1.0, 2.0], 5e-5: [3.0, 0.0]}) == 5e-5  # equal means: the smaller lr


def test_a_near_constant_predictor_ranks_last_unless_nothing_else_is_left():
    # MRPC: predicting "paraphrase" for (nearly) every pair scores F1 81 and beats a model that learned something
    scores = {(1e-4, 1): [81.2, 81.2], (1e-4, 3): [79.0, 80.0], (3e-4, 2): [78.0, 78.5]}
    assert select_lr(scores) == (1e-4, 1)
    assert select_lr(scores, near_constant={(1e-4, 1)}) == (1e-4, 3)
    assert select_lr({1e-4: [81.2], 3e-4: [81.2]}, near_constant={1e-4, 3e-4}) == 1e-4  # all: the rule as before
    rec = selection_record("heldout", scores, (1e-4, 3), 40, near_constant=[(1e-4, 1)])
    assert rec["near_constant"] == ["0.0001@epoch1"] and ">= 95% of the examples on some seed ranks last" in rec["rule"]


def test_selection_ranks_last_what_the_report_flags_near_constant():
    """The same 95% share as the report's ≈ flag (metrics.near_constant): 95 of 100 one label ranks last, 94 not."""
    from bertbench.training.finetune_run import Scored, per_example_extra

    def scored(preds):
        return Scored({}, {}, len(set(preds)) == 1, per_example_extra("classification", preds, [0] * len(preds)))

    assert scored([1] * 95 + [0] * 5).near_constant and not scored([1] * 94 + [0] * 6).near_constant
    assert scored([1] * 100).near_constant  # one label for every example: degenerate, and ranked last too


def test_lower_is_better_metrics_flip_the_rule():
    assert select_lr({1e-4: [2.0], 5e-5: [3.0]}, higher_is_better=False) == 1e-4
    with pytest.raises(ValueError):
        select_lr({1e-4: []})


def test_heldout_slice_is_fixed_disjoint_and_capped():
    examples = list(range(300))
    train, held = split_heldout(examples)
    assert len(held) == heldout_size(300) == 30 and sorted(train + held) == examples
    assert split_heldout(examples) == (train, held)  # the same slice for every variant, seed and lr
    assert heldout_size(67_349) == HELDOUT_MAX
    with pytest.raises(BertbenchError, match="too few"):
        split_heldout([1])


def test_selection_record_says_where_and_what_won():
    rec = selection_record("heldout", GRID_SCORES["MLM+NSP"], 1e-4, 250)
    assert rec["on"] == "train-slice" and rec["selected_lr"] == 1e-4 and rec["heldout_size"] == 250
    assert rec["score"] == pytest.approx((62.0 + 61.2 + 62.5) / 3, abs=1e-4) and rec["grid"] == [5e-5, 1e-4, 3e-4]
    assert selection_record("paper", GRID_SCORES["LTR"], 3e-4, None)["on"] == "dev"


def test_heldout_grid_end_to_end_on_fixtures(tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["finetune", "--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks", "rte",
                                 "--data-dir", str(FIXTURE_DATA), "--max-steps", "2", "--seeds", "1,2", "--grid", "heldout",
                                 "--out", str(out), "--precision", "32"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert "selected on train-slice" in r.output
    records = load_records([out])
    assert len(records) == 2  # the winner's two seeds only
    for rec in records:
        ft = rec.data["finetune"]
        sel = ft["selection"]
        assert sel["on"] == "train-slice" and ft["lr"] == sel["selected_lr"] and ft["grid"] == "heldout"
        scores = {float(k): [v] for k, v in sel["scores"].items()}
        ranked_last = {float(k) for k in sel.get("near_constant", [])}
        assert select_lr(scores, near_constant=ranked_last) == sel["selected_lr"]  # the recorded choice follows the rule
        assert rec.data["split"]["train_size"] + sel["heldout_size"] > rec.data["split"]["train_size"] > 0
        assert len(rec.data["extra"]["train_loss_by_epoch"]) >= 1
        extra = rec.data["extra"]  # per dev example, for the report's bootstrap
        correct = [p == g for p, g in zip(extra["example_predictions"], extra["example_gold"])]
        assert len(correct) == rec.data["split"]["eval_size"]
        assert rec.data["metrics"]["accuracy"] == pytest.approx(100 * sum(correct) / len(correct))
    losers = list((out / "grid").rglob("*.grid.json"))
    assert len(losers) == 2 * (len(records[0].data["finetune"]["selection"]["grid"]) - 1)


def test_paper_grid_still_selects_on_dev_and_says_so(tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["finetune", "--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks", "rte",
                                 "--data-dir", str(FIXTURE_DATA), "--max-steps", "1", "--seeds", "1", "--grid", "paper",
                                 "--out", str(out), "--precision", "32"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    (rec,) = load_records([out])
    sel = rec.data["finetune"]["selection"]
    assert sel["on"] == "dev" and sel["heldout_size"] is None and "selected on dev" in r.output
    assert sel["score"] == pytest.approx(rec.data["metrics"]["accuracy"], abs=1e-4)  # chosen on the reported split


def test_epoch_selection_picks_an_lr_epoch_pair_and_ties_go_early():
    scores = {(1e-4, 1): [50.0, 52.0], (1e-4, 2): [60.0, 61.0], (3e-4, 1): [55.0, 55.0], (3e-4, 2): [60.5, 60.5]}
    assert select_lr(scores) == (1e-4, 2)  # 60.5 both: the smaller lr
    assert select_lr({(1e-4, 3): [7.0], (1e-4, 2): [7.0], (3e-4, 1): [7.0]}) == (1e-4, 2)  # then the earlier epoch
    rec = selection_record("heldout", scores, (1e-4, 2), 40)
    assert rec["selected_lr"] == 1e-4 and rec["selected_epoch"] == 2 and rec["grid"] == [1e-4, 3e-4]
    assert rec["scores"]["0.0001@epoch2"] == pytest.approx(60.5) and rec["score"] == pytest.approx(60.5)
    assert rec["rule"] == EPOCH_RULE
    assert "selected_epoch" not in selection_record("heldout", {1e-4: [1.0]}, 1e-4, 40)  # an lr grid says no epoch


def test_epoch_selection_end_to_end_reports_dev_at_the_epoch_the_slice_chose(tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["finetune", "--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks", "rte",
                                 "--data-dir", str(FIXTURE_DATA), "--epochs", "4", "--seeds", "1,2", "--grid", "heldout",
                                 "--lrs", "1e-3,1e-2", "--select-epoch", "--out", str(out), "--precision", "32"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    records = load_records([out])
    losers = [json.loads(p.read_text()) for p in (out / "grid").rglob("*.grid.json")]
    assert len(records) == 2 and len(losers) == 2
    # the rule, recomputed from every run's per-epoch selection scores (winners' and losers' histories)
    pooled: dict = {}
    ranked_last = set()
    for data in [rec.data for rec in records] + losers:
        assert [e["epoch"] for e in data["extra"]["history"]] == [1, 2, 3, 4]  # every epoch scored
        for entry in data["extra"]["history"]:
            pooled.setdefault((data["finetune"]["lr"], entry["epoch"]), []).append(entry["selection_score"])
            if entry["selection_near_constant"]:
                ranked_last.add((data["finetune"]["lr"], entry["epoch"]))
    lr, epoch = select_lr(pooled, near_constant=ranked_last)
    for rec in records:
        ft = rec.data["finetune"]
        assert (ft["lr"], ft["selected_epoch"], ft["selection"]["selected_epoch"]) == (lr, epoch, epoch)
        entry = rec.data["extra"]["history"][epoch - 1]
        # the record reports dev as it was at that epoch, not after the last one
        assert rec.data["metrics"]["accuracy"] == pytest.approx(entry["eval_score"])
        assert ft["steps"] == entry["step"] and ft["steps_trained"] == rec.data["extra"]["history"][-1]["step"]
        assert ft["epochs"] == 4


def test_epoch_selection_needs_a_grid(tmp_path):
    r = CliRunner().invoke(app, ["finetune", "--model", "random:tiny", "--tokenizer", str(VOCAB), "--tasks", "rte",
                                 "--data-dir", str(FIXTURE_DATA), "--select-epoch", "--out", str(tmp_path / "o")])
    assert r.exit_code != 0 and "--select-epoch" in r.output and "--grid heldout or paper" in r.output
