"""Degenerate runs said as what they are (issue 40): a difference between two constant predictors is "–" with its
flag, never a precise-looking zero such as RTE +0.0 [+0.0, +0.0]; a regression run that predicts one value says
"constant prediction", not "one class"."""
from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from bertbench.report.model import collect
from bertbench.claims import PAPER, Claim, Claims
from bertbench.report.claims import INCONCLUSIVE, evaluate
from bertbench.report.tables.claims import claims_table
from bertbench.report.tables.paired import differences_table, fmt_difference

from record_factory import variant

GOLD = "0101010101" * 3
ALL_ZERO, ALL_ONE = "0" * 30, "1" * 30
SOME = ["0111010101" * 3, "0101110101" * 3, "0101011101" * 3]  # three different, non-constant seeds
THRESHOLDS = {"about_a_point": 1.0, "much_greater": 5.0}


def _differences(records):
    table = differences_table(collect(records))
    return {row[3]: row for row in table.rows}


def test_two_constant_predictors_print_a_dash_with_the_flag():
    both = variant("rte", "mlm+nsp", [ALL_ZERO] * 3, GOLD) + variant("rte", "mlm", [ALL_ZERO] * 3, GOLD)
    row = _differences(both)["tiny MLM+NSP − tiny MLM (no NSP) ⊘ ≈"]
    assert row[4] == "–" and row[5] == "– (⊘ both sides degenerate)", row
    assert "+0.0" not in "".join(row)
    # constant on different classes: the interval is not zero-wide, but nothing is compared either
    apart = variant("rte", "mlm+nsp", [ALL_ZERO] * 3, GOLD) + variant("rte", "mlm", [ALL_ONE] * 3, GOLD)
    row = _differences(apart)["tiny MLM+NSP − tiny MLM (no NSP) ⊘ ≈"]
    assert row[4:6] == ("–", "– (⊘ both sides degenerate)")


def test_one_constant_side_is_still_compared_and_flagged():
    one = variant("rte", "mlm+nsp", SOME, GOLD) + variant("rte", "mlm", [ALL_ZERO] * 3, GOLD)
    row = _differences(one)["tiny MLM+NSP − tiny MLM (no NSP) ⊘ ≈"]
    assert row[4].startswith("+") and row[5].startswith("[") and row[5] != "[+0.0, +0.0]", row


def test_a_claim_on_two_constant_predictors_is_inconclusive_and_outside_holms_family():
    both = variant("rte", "mlm+nsp", [ALL_ZERO] * 3, GOLD) + variant("rte", "mlm", [ALL_ZERO] * 3, GOLD)
    claim = Claim("MLM+NSP", "MLM (no NSP)", (("rte", "accuracy"),), ">", 0.0, PAPER, "test", name="NSP helps on RTE",
                  id="nsp-rte")
    claims = Claims(THRESHOLDS, (claim,))
    data = collect(both)
    [outcome] = evaluate(data, claims)
    assert outcome.verdict == INCONCLUSIVE and "⊘ both sides degenerate" in outcome.why
    assert outcome.p is None and outcome.p_holm is None and outcome.mde is None and not outcome.compared
    [row] = claims_table(data, paper=claims).rows
    assert row[5:7] == ("–", "– (⊘ both sides degenerate)")
    assert fmt_difference(outcome.diff) == ("–", "– (⊘ both sides degenerate)")


def test_a_degenerate_regression_run_says_constant_prediction_not_one_class(monkeypatch, tmp_path):
    """Every run flagged degenerate (the scorer's verdict forced): each task's line names its own kind of constant."""
    import dataclasses

    from bertbench.cli import app
    from bertbench.training import finetune_run

    real_score = finetune_run.score
    monkeypatch.setattr(finetune_run, "score",
                        lambda *args, **kw: dataclasses.replace(real_score(*args, **kw), degenerate=True))
    tests = Path(__file__).resolve().parent
    r = CliRunner().invoke(app, ["finetune", "--model", "random:tiny", "--tokenizer",
                                 str(tests / "fixtures" / "corpus" / "vocab.txt"), "--tasks", "stsb,rte", "--data-dir",
                                 str(tests / "fixtures" / "tasks" / "data"), "--max-steps", "1", "--seeds", "1",
                                 "--out", str(tmp_path / "out"), "--precision", "32"])
    assert r.exit_code == 0, r.output
    lines = {line.split(" ")[0]: line for line in r.output.splitlines() if " seed 1 lr " in line}
    assert lines["stsb"].endswith("[degenerate: constant prediction: one value for every example]"), lines
    assert "one class" not in lines["stsb"]
    assert lines["rte"].endswith("[degenerate: one class for every example]"), lines
