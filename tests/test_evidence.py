"""The evidence around the claims: `bertbench plan` on the committed studies (and on one pre-training seed a variant of
cpu-hour, copied), and the near-constant flag from predictions to verdicts."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.results import load_records
from bertbench.training.finetune_run import per_example_extra

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "leaderboards" / "records"
runner = CliRunner()


@pytest.fixture
def one_seed(tmp_path) -> Path:
    """cpu-hour's first pre-training seed of MLM+NSP, No NSP and random init: one pre-training seed a variant."""
    for run in ("mlm_nsp-seed1-*", "no_nsp-seed1-*", "random-*"):
        (found,) = (RECORDS / "cpu-hour" / "results").glob(run)
        shutil.copytree(found, tmp_path / "results" / found.name)
    return tmp_path


def test_plan_prints_the_seeds_and_cost_of_table5s_nsp_claim(one_seed):
    r = runner.invoke(app, ["plan", str(one_seed)])  # default claim: t5-qnli-nsp, the paper's +3.5 on QNLI
    assert r.exit_code == 0, r.output
    out = r.output
    assert "Plan for t5-qnli-nsp" in out and "Effect to detect: 3.5 (the paper's |a − b|, BERT paper Table 5)" in out
    designs = re.findall(r"(\d+) pre-training × (\d+) fine-tuning seeds a side \(MDE ([\d.]+)\), (\d+) CPU-minutes", out)
    assert len(designs) == 2  # no pre-training variance measured: two stated assumptions
    assert all(float(mde) <= 3.5 for *_, mde, _ in designs)
    assert int(designs[1][3]) >= int(designs[0][3])  # assuming pre-training noise costs more, never less
    assert "pre-training seeds not measured (one pre-training seed)" in out and "AMD EPYC, 2 cores" in out


def test_plan_sizes_a_claim_on_the_mean_of_five_tasks():
    """The masking study's GLUE-5 claim (Wettig et al.'s 40% over 15%): two pre-training seeds a side measure the
    pre-training variance of the mean, and one design (cheapest first) detects the effect asked for."""
    r = runner.invoke(app, ["plan", str(ROOT / "leaderboards" / "records" / "masking"), "--claim",
                            "wettig-mask40-vs-mask15", "--effect", "3", "--max-seeds", "20"])
    assert r.exit_code == 0, r.output
    out = r.output
    assert "on the mean of sst2 (accuracy) + cola (mcc) + stsb (spearman) + mrpc (f1) + rte (accuracy)." in out
    assert "Today: 2×3 / 2×3 seeds a task" in out and "not measured" not in out
    (design,) = re.findall(r"with the measured pre-training variance: (\d+) pre-training × (\d+) fine-tuning seeds "
                           r"a side \(MDE ([\d.]+)\)", out)
    assert float(design[2]) <= 3.0 and int(design[0]) > 2  # two pre-training seeds could not: the report's MDE is 21.7


def test_plan_of_a_much_greater_claim_detects_the_margin_above_its_bound():
    """MLM+NSP ≫ random init (GLUE-5) is reproduced only when the interval's low end clears 5.0: with ours +8.9,
    the plan sizes the seeds that detect the 3.9 above it, not the paper's number (there is none)."""
    r = runner.invoke(app, ["plan", str(RECORDS / "cpu-hour-wide"), "--claim", "pretraining-vs-random", "--max-seeds", "20"])
    assert r.exit_code == 0, r.output
    assert "Effect to detect: 3.9 (ours a − b, +8.9, less the ≫ bound 5 its interval must clear)" in r.output
    designs = re.findall(r"seeds a side \(MDE ([\d.]+)\)", r.output)
    assert designs and all(float(mde) <= 3.9 for mde in designs)


def test_plan_adds_no_pre_training_variance_to_random_init(one_seed):
    """Random init pre-trains nothing: its side's pre-training share is 0, not an unmeasured one that the plan's
    'as large as the fine-tuning seeds'' assumption would fill (which made its designs dearer than they are)."""
    from bertbench.report.model import collect
    from bertbench.report.plan import side_components
    from bertbench.report.tables.claims import claim_sides, load_claims

    data = collect(load_records([one_seed]))
    claims = load_claims(paper=data.paper)
    claim = next(c for c in claims.claims if c.id == "pretraining-vs-random")
    a, b, _ = claim_sides(data, claim, "tiny")
    assert b.variant.random_init and side_components(b).pretrain == 0.0
    assert side_components(a).pretrain is None  # MLM+NSP: one pre-training seed, not measured
    r = runner.invoke(app, ["plan", str(one_seed), "--claim", "pretraining-vs-random", "--max-seeds", "20", "--effect", "3"])
    assert "b: fine-tuning seeds" in r.output and "pre-training seeds none (random init)" in r.output


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


def test_plan_refuses_an_unknown_claim_in_one_line():
    r = runner.invoke(app, ["plan", str(RECORDS / "cpu-quick"), "--claim", "t5-qnli-nps"])
    assert r.exit_code != 0 and "error: plan: no claim 't5-qnli-nps'" in r.output


def test_fine_tuning_flags_a_near_constant_predictor():
    extra = per_example_extra("classification", [1] * 96 + [0] * 4, [1] * 60 + [0] * 40)
    assert extra["near_constant"] and extra["example_predictions"] == "1" * 96 + "0" * 4
    assert not per_example_extra("classification", [1] * 94 + [0] * 6, [1] * 100)["near_constant"]
    values = per_example_extra("regression", [2.501, 2.502] * 10, [1.0] * 20)  # one value at the scale's 0.01
    assert values["near_constant"] and values["example_predictions"].split()[:2] == ["2.501", "2.502"]
