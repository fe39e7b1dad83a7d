"""Claims of the user's own (issue 40): `bertbench report RESULTS --claim "A − B on TASK > T"`, or claims.yaml beside
the records, judged by the paper claims' machinery (multi-bootstrap, Holm, MDE) and labelled as the user's."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.errors import BertbenchError
from bertbench.report.model import collect
from bertbench.report.multibootstrap import holm
from bertbench.claims import Claims, load_claims, load_claims_file, parse_claim
from bertbench.report.claims import CONTRADICTED, INCONCLUSIVE, NOT_MEASURABLE, NOT_RUN, SUPPORTED, evaluate
from bertbench.report.tables.claims import claims_table
from bertbench.results import record_filename, write_record

from record_factory import variant

runner = CliRunner()
GOLD = "01" * 50  # 100 dev examples, two balanced labels


def _wrong_at(positions) -> str:
    """Predictions right everywhere but at `positions` (so never near-constant)."""
    return "".join(str(1 - int(g)) if i in positions else g for i, g in enumerate(GOLD))


GOOD = [_wrong_at({seed, seed + 40, seed + 80}) for seed in (1, 2, 3)]  # 97% right
POOR = [_wrong_at(set(range(seed, 100, 3))) for seed in (0, 1, 2)]  # about 66% right
CLOSE = [_wrong_at({seed, seed + 30, seed + 60, seed + 90}) for seed in (4, 5, 6)]  # 96% right


def _records():
    return (variant("rte", "mlm+nsp", GOOD, GOLD) + variant("rte", "mlm", POOR, GOLD)
            + variant("sst2", "mlm+nsp", GOOD, GOLD) + variant("sst2", "mlm", CLOSE, GOLD))


NO_PAPER = Claims({}, ())  # the user's claims alone, without the paper's


def evaluate_user_claims(data, claims):
    return evaluate(data, NO_PAPER, claims)


def _write(folder, records):
    for rec in records:
        write_record(folder / rec.path.parent.name / record_filename(rec.data), rec.data)
    return folder


# --- the grammar ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["mlm+nsp - mlm on stsb > 0", "mlm+nsp − mlm on stsb > 0",
                                  "mlm+nsp – mlm on stsb>0", "  mlm+nsp  -  mlm  on stsb  >  0  "])
def test_either_minus_sign_states_the_same_claim(text):
    claim = parse_claim(text)
    assert (claim.a, claim.b, claim.scores, claim.comparator, claim.threshold) == (
        "mlm+nsp", "mlm", (("stsb", None),), ">", 0.0)


def test_the_grammar_takes_tasks_metrics_comparators_and_labels():
    claim = parse_claim("HF hfbert, L2-H128 − tiny mlm+nsp on rte,stsb:pearson within 1.5")
    assert claim.a == "HF hfbert, L2-H128" and claim.b == "tiny mlm+nsp"  # L2-H128's dash is no minus
    assert claim.scores == (("rte", None), ("stsb", "pearson")) and claim.comparator == "within"
    assert claim.test_text == "|a − b| < 1.5"
    below = parse_claim("clm − mlm on rte < −1")
    assert below.comparator == "<" and below.threshold == -1.0 and below.test_text == "a − b < −1"


@pytest.mark.parametrize("text, message", [
    ("mlm+nsp mlm on rte > 0", "expected two variants 'A − B'"),
    ("mlm+nsp-mlm on rte > 0", "expected two variants 'A − B'"),
    ("mlm+nsp - mlm - clm on rte > 0", "expected two variants 'A − B'"),
    ("mlm+nsp - mlm rte > 0", "no ' on TASK'"),
    ("mlm+nsp - mlm on rte = 0", "expected 'TASK > T', 'TASK < T' or 'TASK within T'"),
    ("mlm+nsp - mlm on rte > big", "threshold 'big' is not a number"),
    ("mlm+nsp - mlm on rte within 0", "'within T' needs a positive T"),
    ("", "empty"),
])
def test_a_malformed_claim_is_one_error_naming_where(text, message):
    with pytest.raises(BertbenchError) as err:
        parse_claim(text, "--claim")
    assert str(err.value).startswith("--claim: claim") and message in str(err.value)
    assert "expected 'A − B on TASK > T'" in str(err.value) and "\n" not in str(err.value)


# --- verdicts ------------------------------------------------------------------------------------------------


def test_a_user_claim_gets_a_verdict_with_its_interval_p_holm_p_and_mde():
    data = collect(_records())
    claims = [parse_claim("mlm+nsp − mlm on rte > 0"), parse_claim("mlm+nsp − mlm on rte < 0"),
              parse_claim("mlm+nsp − mlm on sst2 within 50")]
    outcomes = evaluate_user_claims(data, claims)
    above, below, within = outcomes
    assert above.a.label == "tiny MLM+NSP" and above.b.label == "tiny MLM (no NSP)"
    est = above.diff.estimate
    assert est.estimate == pytest.approx(sum(g.count("1") - p.count("1") for g, p in zip(
        [r.data["extra"]["example_correct"] for r in variant("rte", "mlm+nsp", GOOD, GOLD)],
        [r.data["extra"]["example_correct"] for r in variant("rte", "mlm", POOR, GOLD)])) / 100 / 3 * 100)
    assert est.low > 0 and above.verdict == SUPPORTED and above.p < 0.05
    assert below.verdict == CONTRADICTED and below.p == pytest.approx(above.p)  # the same test, the other side
    assert within.verdict == SUPPORTED  # a small difference, well within 50 points
    # Holm over the family of the user's three comparisons, as the paper claims' table does over its own
    assert [o.p_holm for o in outcomes] == pytest.approx(holm([o.p for o in outcomes]))
    assert above.p_holm > above.p and above.mde is not None and above.mde > 0
    table = claims_table(data, outcomes, load_claims(paper=data.paper))
    row = dict(zip(table.header, table.rows[0]))
    assert row["Claim"] == "mlm+nsp − mlm on rte > 0" and row["Stated in"] == "yours (--claim)"
    assert row["95% interval"].startswith("[+") and row["p"] != "–" and row["p Holm"] != "–"
    assert float(row["MDE (80%)"]) == pytest.approx(above.mde, abs=0.05)
    # records without `pretrain_seed`: one checkpoint a side, and the verdict says so, as a paper claim's does
    assert row["Verdict"] == f"{SUPPORTED}; 1 pre-training seed: about these checkpoints"
    assert row["Test"] == "a − b > 0" and row["Score"] == "rte accuracy"
    assert table.title == "Claims, judged on our records" and row["Paper a − b"] == "–"


def test_a_wide_mde_makes_a_claim_not_measurable_and_a_constant_side_inconclusive():
    data = collect(_records())
    [far] = evaluate_user_claims(data, [parse_claim("mlm+nsp − mlm on sst2 > 0.1")])
    assert far.verdict == NOT_MEASURABLE and far.mde > 0.1 and "MDE" in far.why
    constant = variant("mrpc", "mlm+nsp", GOOD, GOLD) + variant("mrpc", "mlm", ["0" * 100] * 3, GOLD)
    [flagged] = evaluate_user_claims(collect(constant), [parse_claim("mlm+nsp − mlm on mrpc > 0")])
    assert flagged.verdict == INCONCLUSIVE and "⊘ degenerate" in flagged.why and flagged.p < 0.05


def test_an_objective_is_judged_per_size_and_a_missing_side_is_not_run():
    data = collect(_records() + variant("rte", "clm", GOOD, GOLD)[:1])
    [one_run] = evaluate_user_claims(data, [parse_claim("mlm+nsp − clm on rte > 0")])
    assert one_run.verdict == INCONCLUSIVE and "no interval" in one_run.why
    data = collect(variant("rte", "mlm+nsp", GOOD, GOLD) + variant("sst2", "mlm", GOOD, GOLD))
    [missing] = evaluate_user_claims(data, [parse_claim("mlm+nsp − mlm on rte > 0")])
    assert missing.verdict == NOT_RUN and "tiny MLM (no NSP)" in missing.why


@pytest.mark.parametrize("text, message", [
    ("mlm+nsp − electra on rte > 0", "no variant 'electra' in these records (their variants: tiny MLM+NSP; "),
    ("mini mlm+nsp − mlm on rte > 0", "no variant 'mini mlm+nsp'"),
    ("mlm+nsp − mlm on cola > 0", "no records of task 'cola' (tasks in these records: rte, sst2)"),
    ("mlm+nsp − mlm on rte:pearson > 0", "task 'rte' has no metric 'pearson'"),
])
def test_an_unknown_variant_task_or_metric_is_an_error(text, message):
    with pytest.raises(BertbenchError, match="^--claim: claim") as err:
        evaluate_user_claims(collect(_records()), [parse_claim(text)])
    assert message in str(err.value)


# --- the command line and claims.yaml ------------------------------------------------------------------------


def test_report_claim_on_the_command_line_prints_the_verdict(tmp_path):
    results = _write(tmp_path / "results", _records())
    r = runner.invoke(app, ["report", str(results), "--claim", "mlm+nsp - mlm on rte > 0", "--out",
                            str(tmp_path / "mine.md")])
    assert r.exit_code == 0, r.output
    [line] = [line for line in r.output.splitlines() if line.startswith("  mlm+nsp - mlm on rte > 0")]
    assert "tiny MLM+NSP − tiny MLM (no NSP) on rte accuracy = +" in line and line.endswith(": supported; 1 pre-training seed: about these checkpoints")
    assert "p Holm" in line and "MDE" in line
    text = (tmp_path / "mine.md").read_text()
    assert "## Claims, judged on our records" in text and "| yours (--claim) |" in text


def test_claims_yaml_beside_the_records_is_read_and_named_by_line(tmp_path):
    results = _write(tmp_path / "results", _records())
    (results / "claims.yaml").write_text('claims:\n  - "mlm+nsp − mlm on rte > 0"\n'
                                         '  - claim: "mlm+nsp − mlm on sst2 within 50"\n'
                                         '    name: NSP barely matters on SST-2\n')
    r = runner.invoke(app, ["report", str(results)])
    assert r.exit_code == 0, r.output
    assert "  NSP barely matters on SST-2: tiny MLM+NSP − tiny MLM (no NSP) on sst2 accuracy" in r.output
    claims = load_claims_file(results / "claims.yaml")
    assert [c.where for c in claims] == [f"{results / 'claims.yaml'}:2", f"{results / 'claims.yaml'}:3"]
    (results / "claims.yaml").write_text('claims:\n  - "mlm+nsp − mlm on rte > 0"\n  - "mlm+nsp mlm on rte > 0"\n')
    bad = runner.invoke(app, ["report", str(results)])
    assert bad.exit_code == 2 and f"error: {results / 'claims.yaml'}:3: claim 'mlm+nsp mlm on rte > 0'" in bad.output
    (results / "claims.yaml").write_text("claim: nothing\n")
    bad = runner.invoke(app, ["report", str(results)])
    assert bad.exit_code == 2 and "expected 'claims:' and a list of claims" in bad.output
    (results / "claims.yaml").write_text('claims:\n  - "mlm+nsp − mlm on rte > 0"\n  bad: [\n')  # a YAML slip: one line
    bad = runner.invoke(app, ["report", str(results)])
    assert bad.exit_code == 2 and bad.output.splitlines() == [
        f"error: {results / 'claims.yaml'}:3:3: not valid YAML: expected <block end>, but found '?' (while parsing a "
        "block collection)"]


@pytest.mark.parametrize("claim, message", [
    ("mlm+nsp - mlm on rte >", "expected 'TASK > T'"),
    ("mlm+nsp - bert2 on rte > 0", "no variant 'bert2'"),
    ("mlm+nsp - mlm on qnli > 0", "no records of task 'qnli'"),
])
def test_report_claim_errors_are_one_line(tmp_path, claim, message):
    results = _write(tmp_path / "results", _records())
    r = runner.invoke(app, ["report", str(results), "--claim", claim])
    assert r.exit_code == 2, r.output
    errors = [line for line in r.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in r.output


def test_the_claims_in_docs_parse():
    """Every `--claim "..."` and claims.yaml line shown in docs/claims.md is a claim the parser takes."""
    import re
    from pathlib import Path

    import yaml

    doc = (Path(__file__).resolve().parent.parent / "docs" / "claims.md").read_text(encoding="utf-8")
    shown = re.findall(r'--claim "([^"]+)"', doc)
    [block] = re.findall(r"```yaml\n(claims:.*?)```", doc, re.S)
    shown += [c if isinstance(c, str) else c["claim"] for c in yaml.safe_load(block)["claims"]]
    assert len(shown) >= 6
    for text in shown:
        parse_claim(text, "docs/claims.md")
