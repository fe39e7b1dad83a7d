"""The evidence around the claims (`bertbench plan` has its own tests, test_plan.py): the multi-bootstrap's
coverage of pre-training seeds against random init, and the near-constant flag from predictions to verdicts."""
from __future__ import annotations

from pathlib import Path

from bertbench.results import load_records
from bertbench.training.finetune_run import per_example_extra

ROOT = Path(__file__).resolve().parents[1]


def test_a_claim_against_random_init_covers_the_pre_trained_sides_seeds():
    """The rebuilt cpu-hour: MLM+NSP's 3 pre-training seeds against random init, which has none. The interval
    resamples them, and its Covers label says P; random init's one seed None once kept P out of the label."""
    from bertbench.report.model import collect
    from bertbench.report.multibootstrap import PRETRAIN
    from bertbench.claims import load_claims
    from bertbench.report.claims import evaluate
    from bertbench.report.tables.paired import fmt_covers

    data = collect(load_records([ROOT / "leaderboards" / "records" / "cpu-hour"]))
    outcome = next(o for o in evaluate(data, load_claims(paper=data.paper)) if o.claim.id == "pretraining-vs-random")
    assert outcome.diff.b.variant.random_init and outcome.diff.estimate.pretrain_seeds == (3, 1)
    assert PRETRAIN in outcome.diff.estimate.covers and fmt_covers(outcome.diff.estimate).startswith("P·F")


def test_fine_tuning_flags_a_near_constant_predictor():
    extra = per_example_extra("classification", [1] * 96 + [0] * 4, [1] * 60 + [0] * 40)
    assert extra["near_constant"] and extra["example_predictions"] == "1" * 96 + "0" * 4
    assert not per_example_extra("classification", [1] * 94 + [0] * 6, [1] * 100)["near_constant"]
    values = per_example_extra("regression", [2.501, 2.502] * 10, [1.0] * 20)  # one value at the scale's 0.01
    assert values["near_constant"] and values["example_predictions"].split()[:2] == ["2.501", "2.502"]
