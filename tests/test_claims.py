"""The claims table: claims.yaml as data, the verdict rules, and fixture records covering the verdicts (contradicted
only before Holm: two checkpoints are not paired by seed number, issue 48; test_user_claims has one after)."""
from __future__ import annotations

from pathlib import Path

import json

import pytest
import yaml

from bertbench.reference.claims import CLAIMS_PATH
from bertbench.claims import THRESHOLD_SOURCES, load_claims
from bertbench.report.claims import (
    CONTRADICTED, INCONCLUSIVE, NOT_MEASURABLE, NOT_RUN, REPRODUCED, direction_and_p, evaluate,
)
from bertbench.report.tables.claims import claims_table
from bertbench.errors import BertbenchError
from bertbench.report.model import collect
from bertbench.results import load_records
from bertbench.report.multibootstrap import EXAMPLES, FINETUNE, Estimate, t_quantile

RECORDS = Path(__file__).resolve().parent / "fixtures" / "records" / "main"
THRESHOLDS = {"about_a_point": 1.0, "much_greater": 5.0}


def _est(low: float, high: float, df: float = 3) -> Estimate:
    half = (high - low) / 2
    return Estimate((low + high) / 2, half / t_quantile(0.975, df), df, low, high, (), (), (1, 1))


def verdict(test: str, est: Estimate) -> str:
    """A paper claim's verdict on its own (before Holm): p < 0.05 is exactly the 95% interval wholly on a side."""
    [claim] = [c for c in load_claims().claims if c.id == {"greater": "t5-mrpc-mlm-vs-ltr", "not_worse": "t5-qnli-nsp",
                                                            "much_greater": "pretraining-vs-random",
                                                            "equivalent": "t8-mnli-finetune-masking"}[test]]
    direction, p = direction_and_p(claim, est)
    return direction if p < 0.05 else INCONCLUSIVE


@pytest.mark.parametrize("test, low, high, expected", [
    ("greater", 0.1, 3.0, REPRODUCED), ("greater", -3.0, -0.1, CONTRADICTED), ("greater", -0.1, 3.0, INCONCLUSIVE),
    ("not_worse", -0.9, 2.0, REPRODUCED), ("not_worse", -3.0, -1.1, CONTRADICTED),
    ("not_worse", -1.5, 2.0, INCONCLUSIVE), ("not_worse", -2.0, -0.5, INCONCLUSIVE),
    ("much_greater", 5.1, 9.0, REPRODUCED), ("much_greater", 1.0, 4.9, CONTRADICTED),
    ("much_greater", 4.0, 9.0, INCONCLUSIVE),
    ("equivalent", -0.9, 0.9, REPRODUCED), ("equivalent", 1.1, 3.0, CONTRADICTED),
    ("equivalent", -3.0, -1.2, CONTRADICTED), ("equivalent", -0.5, 1.5, INCONCLUSIVE),
])
def test_verdict_rules(test, low, high, expected):
    """claims.yaml's test words, each one claim of the grammar, judged where the 95% interval lies."""
    assert verdict(test, _est(low, high)) == expected


def test_packaged_claims_cover_the_papers_directions():
    claims = load_claims()
    ids = {c.id for c in claims.claims}
    assert {"t5-mrpc-mlm-vs-ltr", "t5-squad-mlm-vs-ltr", "t5-qnli-nsp", "t5-squad-nsp", "t8-ner-finetune-masking",
            "t8-ner-feature-based-mask", "pretraining-vs-random", "c1-mlm-ahead-last"} <= ids
    assert claims.thresholds == THRESHOLDS


@pytest.fixture(scope="module")
def outcomes():
    data = collect(load_records([RECORDS]))
    return {o.claim.id: o for o in evaluate(data, load_claims())}, data


def test_fixture_records_cover_every_verdict(outcomes):
    by_id, _ = outcomes
    mrpc = by_id["t5-mrpc-mlm-vs-ltr"]  # MLM+NSP − LTR = 2.8, 3.4, 3.1 by seed number, but two checkpoints: the
    # seeds are not paired (issue 48), so each side's own spread counts: alone reproduced ...
    assert mrpc.diff.a.components[0].runs == ((None, 1), (None, 2), (None, 3)) and mrpc.diff.estimate.paired == ()
    assert mrpc.diff.estimate.estimate == pytest.approx(3.1) and mrpc.diff.estimate.low > 0
    assert mrpc.p < 0.05 <= mrpc.p_holm  # ... not after Holm, which multiplies the smallest p by the family's size
    assert mrpc.verdict == INCONCLUSIVE and "alone p = 0.012: reproduced" in mrpc.why
    qnli = by_id["t5-qnli-nsp"]  # No NSP three points ahead: "MLM+NSP ≥ No NSP" leans contradicted, undecided
    assert qnli.diff.estimate.high < 0 and qnli.verdict == INCONCLUSIVE and qnli.p_holm >= 0.05
    squad = by_id["t5-squad-mlm-vs-ltr"]  # 0.1 and 6.1: the interval straddles zero, and is far too wide
    assert squad.diff.estimate.low < 0 < squad.diff.estimate.high
    assert squad.verdict == NOT_MEASURABLE and squad.mde > squad.effect == pytest.approx(10.7)
    assert squad.diff.a.rows[0].task == "squad_v1_devsplit"  # the devsplit stands in for the paper's dev
    assert by_id["t5-squad-nsp"].verdict == NOT_RUN


def test_degenerate_cell_never_counts_as_a_reproduction(outcomes, tmp_path):
    by_id, _ = outcomes
    ner = by_id["t8-ner-finetune-masking"]  # within 0.3 points on both seeds, but one seed is degenerate
    assert ner.diff.degenerate and ner.verdict != REPRODUCED and "degenerate" in ner.why
    # three seeds 5 points ahead, an interval wholly above 0, and one seed degenerate: inconclusive, and says why
    mlm = _sst2_records(tmp_path, "mini-mlm-nsp", {1: 65.0, 2: 65.5, 3: 64.5}, {s: "" for s in (1, 2, 3)})
    ltr = _sst2_records(tmp_path, "mini-ltr", {1: 60.0, 2: 60.0, 3: 60.5}, {s: "" for s in (1, 2, 3)})
    for rec in mlm + ltr:
        rec.data["extra"] = {"near_constant": False, "degenerate": False}
    mlm[1].data["extra"]["degenerate"] = True
    last = {o.claim.id: o for o in evaluate(collect(mlm + ltr), load_claims())}["c1-mlm-ahead-last"]
    est = last.diff.estimate
    assert last.diff.degenerate and verdict("greater", est) == REPRODUCED
    assert last.verdict == INCONCLUSIVE and "degenerate" in last.why


def test_one_seed_of_a_task_has_no_interval_and_no_verdict(outcomes):
    by_id, _ = outcomes
    glue = by_id["pretraining-vs-random"]  # CoLA has one seed: its noise is not measured
    assert not glue.diff.has_interval and glue.diff.single_run_tasks == ("cola",)
    assert glue.verdict == INCONCLUSIVE and "no interval" in glue.why and not glue.compared


def test_figure5_claims_use_the_checkpoint_series(outcomes):
    by_id, _ = outcomes
    early = by_id["c1-mlm-ahead-early"]  # LTR ahead at 1.1M tokens (-1.9): alone contradicted, not after Holm
    assert early.diff.estimate.estimate == pytest.approx(-1.9) and "alone p = 0.047: contradicted" in early.why
    assert by_id["c1-mlm-converges-slower"].diff.estimate.estimate == pytest.approx(6.0 - 1.0)  # gains 6.0 vs 1.0
    assert by_id["c1-mlm-converges-slower"].verdict == REPRODUCED  # each side's gains agree: no spread
    assert by_id["c1-mlm-ahead-last"].diff.estimate.estimate == pytest.approx(3.1)


def test_claims_table_states_scale_split_and_comparisons(outcomes):
    _, data = outcomes
    table = claims_table(data)
    assert len(table.rows) == len(load_claims().claims)
    assert any("made at mini scale on dev splits" in note for note in table.notes)
    assert any(note.startswith("Holm families: the paper's claims") and "the paper's claims: 7 member(s) (1 "
               "reproduced, 4 inconclusive, 2 not measurable at this budget)" in note
               for note in table.notes)
    mrpc = dict(zip(table.header, next(row for row in table.rows if "MRPC" in row[0])))
    assert mrpc["Paper a − b"] == "+9.2 (86.7 − 77.5, dev)"  # the paper's difference, from its table
    assert mrpc["Verdict"] == ("inconclusive (alone p = 0.012: reproduced); the paper's +9.2 excluded; 1 "
                               "pre-training seed: about these checkpoints")  # records without one
    # two checkpoints: fine-tuning seeds resampled on each side, not paired by number (F, not [F])
    assert (mrpc["p"], mrpc["p Holm"], mrpc["MDE (80%)"], mrpc["Covers"]) == ("0.012", "0.070", "2.6", "F")
    assert mrpc["Threshold from"] == THRESHOLD_SOURCES["greater"]
    assert THRESHOLD_SOURCES["much_greater"].startswith("ours")  # the +5 is ours, not the paper's


def _write(tmp_path, mutate) -> Path:
    data = yaml.safe_load(CLAIMS_PATH.read_text(encoding="utf-8"))
    mutate(data)
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["claims"][0].update(test="bigger"), "test 'bigger' is not one of"),
    (lambda d: d["claims"][0].update(task="mrcp"), "'mrcp' / 'accuracy' is not a task and metric"),
    (lambda d: d["claims"][0].update(paper=["BERT-Base", "GPT-9"]), "no number of system 'GPT-9'"),
    (lambda d: d["claims"][1].update(id=d["claims"][0]["id"]), "repeats"),
    (lambda d: d["claims"][0].update(tasks=[["rte", "accuracy"]]), "either task and metric, or tasks"),
    (lambda d: d["thresholds"].pop("much_greater"), "thresholds"),
    (lambda d: d["claims"][0].update(colour="red"), "unknown key(s) colour"),
])
def test_bad_claims_file_is_one_clear_error(tmp_path, mutate, message):
    with pytest.raises(BertbenchError, match="problem") as err:
        load_claims(_write(tmp_path, mutate))
    assert message in str(err.value)


def _sst2_records(tmp_path, fixture_variant: str, accuracies: dict, correct: dict) -> list:
    import copy
    import json

    from bertbench.results import LoadedRecord

    (template,) = [r.data for r in load_records([RECORDS / fixture_variant])
                   if r.data["task"] == "sst2" and r.data["seed"] == 1]
    out = []
    for seed, acc in accuracies.items():
        rec = copy.deepcopy(template)
        rec.update(seed=seed, metrics={"accuracy": acc}, extra={"example_predictions": correct[seed],
                                                                 "example_gold": "1" * len(correct[seed])})
        out.append(LoadedRecord(tmp_path / f"{fixture_variant}.{seed}.record.json", json.loads(json.dumps(rec))))
    return out


def test_dev_examples_are_resampled_where_records_keep_them(tmp_path):
    """20 dev examples: MLM+NSP is ahead by exactly 5 points on each of three seeds (no spread over seeds), but
    one example in 20 is too few to be sure: the multi-bootstrap resamples the examples too and straddles zero."""
    base = "1" * 12 + "0" * 8  # 60%
    ahead = "1" * 13 + "0" * 7  # 65%
    mlm = _sst2_records(tmp_path, "mini-mlm-nsp", {1: 65.0, 2: 65.0, 3: 65.0}, {s: ahead for s in (1, 2, 3)})
    ltr = _sst2_records(tmp_path, "mini-ltr", {1: 60.0, 2: 60.0, 3: 60.0}, {s: base for s in (1, 2, 3)})
    by_id = {o.claim.id: o for o in evaluate(collect(mlm + ltr), load_claims())}
    last = by_id["c1-mlm-ahead-last"]
    assert last.diff.estimate.covers == (FINETUNE, EXAMPLES) and last.diff.estimate.paired == (EXAMPLES,)
    assert last.diff.estimate.low <= 0 < last.diff.estimate.high
    assert last.verdict in (INCONCLUSIVE, NOT_MEASURABLE)
    # the same records without per-example results: seeds only, which agree exactly
    for rec in mlm + ltr:
        rec.data["extra"] = {}
    seeds_only = {o.claim.id: o for o in evaluate(collect(mlm + ltr), load_claims())}["c1-mlm-ahead-last"]
    assert seeds_only.diff.estimate.covers == (FINETUNE,) and seeds_only.verdict == REPRODUCED


def test_figure5_claims_pair_checkpoints_by_pre_training_step(tmp_path):
    """Two runs of the same steps hold slightly different token counts (a masked LM's short sentence pairs,
    a causal LM's packed text): their checkpoints still pair up, by step, as on Figure 5's x-axis."""
    import shutil

    shutil.copytree(RECORDS, tmp_path / "records")
    for path in (tmp_path / "records").rglob("*.record.json"):
        record = json.loads(path.read_text())
        pre = record["model"].get("pretraining")
        if pre and pre.get("tokens_seen"):
            pre["steps"] = pre["tokens_seen"] // 1000  # the same step for the same tokens ...
            if pre.get("objective") == "clm":
                pre["tokens_seen"] += 4096  # ... but a few more tokens for the causal LM
            path.write_text(json.dumps(record))
    data = collect(load_records([tmp_path / "records"]))
    by_id = {o.claim.id: o for o in evaluate(data, load_claims())}
    early = by_id["c1-mlm-ahead-early"]  # as with equal token counts
    assert early.diff.estimate.estimate == pytest.approx(-1.9) and "alone p = 0.047: contradicted" in early.why


def test_near_constant_cell_never_counts_as_a_reproduction(tmp_path):
    """Three seeds 5 points ahead (seeds only: no per-example results), reproduced; the same with one seed flagged
    near-constant (>= 95% of its predictions one label) is inconclusive, and says why."""
    mlm = _sst2_records(tmp_path, "mini-mlm-nsp", {1: 65.0, 2: 65.5, 3: 64.5}, {s: "" for s in (1, 2, 3)})
    ltr = _sst2_records(tmp_path, "mini-ltr", {1: 60.0, 2: 60.0, 3: 60.5}, {s: "" for s in (1, 2, 3)})
    for rec in mlm + ltr:
        rec.data["extra"] = {"near_constant": False}
    clean = {o.claim.id: o for o in evaluate(collect(mlm + ltr), load_claims())}["c1-mlm-ahead-last"]
    assert clean.verdict == REPRODUCED
    mlm[1].data["extra"]["near_constant"] = True
    flagged = {o.claim.id: o for o in evaluate(collect(mlm + ltr), load_claims())}["c1-mlm-ahead-last"]
    assert flagged.diff.near_constant and flagged.verdict == INCONCLUSIVE
    assert "≈ near-constant cell; the test alone says reproduced" in flagged.why


def test_pretraining_seeds_are_read_and_resampled(tmp_path):
    """Records with a top-level pretrain_seed (2 pre-training × 3 fine-tuning seeds a side): the interval covers
    pre-training seeds, and the verdict no longer says it is about one checkpoint. Absent: one unknown seed."""
    import copy

    from bertbench.report.multibootstrap import PRETRAIN

    def with_pretraining(variant, base):
        recs = _sst2_records(tmp_path, variant, {s: base + s / 10 for s in (1, 2, 3)}, {s: "" for s in (1, 2, 3)})
        out = []
        for pre in (1, 2):
            for rec in recs:
                data = copy.deepcopy(rec.data)
                data.update(pretrain_seed=pre, extra={})
                data["metrics"]["accuracy"] += pre / 2
                out.append(type(rec)(tmp_path / f"{variant}.{pre}.{data['seed']}.record.json", data))
        return out

    data = collect(with_pretraining("mini-mlm-nsp", 65.0) + with_pretraining("mini-ltr", 60.0))
    last = {o.claim.id: o for o in evaluate(data, load_claims())}["c1-mlm-ahead-last"]
    assert PRETRAIN in last.diff.estimate.covers and last.diff.estimate.pretrain_seeds == (2, 2)
    assert not last.one_pretrain_seed and "1 pre-training seed" not in claims_table(data).rows[-1][-1]


def test_one_comparison_has_one_number_everywhere(outcomes):
    """The claims table, the differences table and the GLUE row give a comparison the same number."""
    from bertbench.report.model import glue_rows
    from bertbench.report.tables.paired import differences_table

    _, data = outcomes
    claims = {row[0]: dict(zip(claims_table(data).header, row)) for row in claims_table(data).rows}
    diffs = differences_table(data)
    qnli_claim = claims["Removing NSP does not help on QNLI (MLM+NSP ≥ No NSP)"]
    qnli_row = next(r for r in diffs.rows if r[0] == "qnli_devsplit" and r[3] == "mini MLM+NSP − mini MLM (no NSP)")
    assert (qnli_claim["Ours a − b"], qnli_claim["95% interval"]) == (qnli_row[4], qnli_row[5])
    # GLUE-5 over every seed of every task: the claim's estimate is the GLUE row's difference of averages
    glue = next(o for o in outcomes[0].values() if o.claim.id == "pretraining-vs-random")
    (row,) = [g for g in glue_rows(data) if len(g.covered) == 5]
    assert glue.diff.estimate.estimate == pytest.approx(row.ours["mini MLM+NSP"] - row.ours["mini random init"])


def test_a_claim_that_cannot_be_decided_still_says_when_its_interval_excludes_the_papers_effect():
    """cpu-hour's MRPC claim (MLM+NSP beats LTR): the LTR side has a near-constant seed, so no verdict; its interval
    [−2.4, +5.3] still rules out the paper's +9.2, and the table says so (issue 42)."""
    from pathlib import Path

    from bertbench.report.model import collect
    from bertbench.report.tables.claims import claims_table
    from bertbench.results import load_records

    root = Path(__file__).resolve().parents[1]
    table = claims_table(collect(load_records([root / "leaderboards" / "records" / "cpu-hour"])))
    verdict = table.header.index("Verdict")
    (mrpc,) = [r for r in table.rows if r[0] == "MLM+NSP beats a left-to-right LM on MRPC"]
    assert mrpc[verdict].startswith("inconclusive (≈ near-constant cell") and "the paper's +9.2 excluded" in mrpc[verdict]
    qnli = [r for r in table.rows if "QNLI" in r[0]]
    assert qnli and all("excluded" not in r[verdict] for r in qnli)  # its interval holds the paper's +3.5
