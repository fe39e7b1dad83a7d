"""The evidence around the claims (`bertbench plan` has its own tests: test_plan.py): the committed cpu-hour-v1
records (the first cpu-hour study: one pre-training seed a variant, most records written before they kept their
predictions), older records' predictions
joined from the dev files' gold labels, and the near-constant flag from predictions to verdicts."""
from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.report.model import example_predictions, near_constant_flags, per_example_stats
from bertbench.report.multibootstrap import metric_on_examples
from bertbench.results import LoadedRecord, load_records
from bertbench.training.finetune_run import per_example_extra

ROOT = Path(__file__).resolve().parents[1]
CPU_HOUR = ROOT / "leaderboards" / "records" / "cpu-hour-v1"
runner = CliRunner()


def test_a_claim_against_random_init_covers_the_pre_trained_sides_seeds():
    """The rebuilt cpu-hour: MLM+NSP's 3 pre-training seeds against random init, which has none. The interval
    resamples them, and its Covers label says P; random init's one seed None once kept P out of the label."""
    from bertbench.report.model import collect
    from bertbench.report.multibootstrap import PRETRAIN
    from bertbench.report.tables.claims import evaluate, load_claims
    from bertbench.report.tables.paired import fmt_covers

    data = collect(load_records([ROOT / "leaderboards" / "records" / "cpu-hour"]))
    outcome = next(o for o in evaluate(data, load_claims(paper=data.paper)) if o.claim.id == "pretraining-vs-random")
    assert outcome.diff.b.variant.random_init and outcome.diff.estimate.pretrain_seeds == (3, 1)
    assert PRETRAIN in outcome.diff.estimate.covers and fmt_covers(outcome.diff.estimate).startswith("P·F")


def _mrpc(variant: str) -> list[LoadedRecord]:
    return sorted((r for r in load_records([CPU_HOUR / "results"]) if r.data["task"] == "mrpc"
                   and r.path.parts[-3].startswith(variant)), key=lambda r: r.data["seed"])


def test_older_records_get_their_predictions_from_the_dev_files_gold(shared_data):
    from bertbench.report.gold import JOINED, join_gold

    records = _mrpc("mlm_nsp")
    assert all(example_predictions(r.data) is None for r in records)  # written before records kept them
    joined, n = join_gold(records, shared_data)
    assert n == len(records) == 5
    for rec in joined:
        assert rec.data["extra"]["example_predictions_from"] == JOINED
        preds, gold = example_predictions(rec.data)
        for metric in ("accuracy", "f1"):  # the join is exact: the record's own metrics come back
            assert float(metric_on_examples(metric, [preds], gold)[0]) == pytest.approx(rec.data["metrics"][metric])
        assert per_example_stats(rec.data, "f1") is not None
    # the audit's finding: MLM+NSP predicts "paraphrase" for >= 95% of MRPC dev on seeds 1-3
    assert near_constant_flags([r.data for r in joined]) == [True, True, True, False, False]
    # a record of another dev file (its fingerprint differs) is never joined
    other = copy.deepcopy(records[0].data)
    other["extra"]["data_fingerprint"]["eval"]["files"] = {"glue/MRPC/dev.tsv": "0" * 64}
    _, n = join_gold([LoadedRecord(records[0].path, other)], shared_data)
    assert n == 0


def test_fine_tuning_flags_a_near_constant_predictor():
    extra = per_example_extra("classification", [1] * 96 + [0] * 4, [1] * 60 + [0] * 40)
    assert extra["near_constant"] and extra["example_predictions"] == "1" * 96 + "0" * 4
    assert not per_example_extra("classification", [1] * 94 + [0] * 6, [1] * 100)["near_constant"]
    values = per_example_extra("regression", [2.501, 2.502] * 10, [1.0] * 20)  # one value at the scale's 0.01
    assert values["near_constant"] and values["example_predictions"].split()[:2] == ["2.501", "2.502"]
