"""The claims table: claims.yaml as data, the verdict rules, and fixture records covering every verdict."""
from __future__ import annotations

from pathlib import Path

import json

import pytest
import yaml

from bertbench.report.tables.claims import (
    CLAIMS_PATH,
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_RUN,
    REPRODUCED,
    claims_table,
    evaluate,
    load_claims,
    verdict,
)
from bertbench.errors import BertbenchError
from bertbench.report.model import collect
from bertbench.results import load_records
from bertbench.report.stats import Interval

RECORDS = Path(__file__).resolve().parent / "fixtures" / "records" / "main"
THRESHOLDS = {"about_a_point": 1.0, "much_greater": 5.0}


def _iv(low: float, high: float) -> Interval:
    return Interval((low + high) / 2, low, high, 3, "paired t over seeds")


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
    assert verdict(test, _iv(low, high), THRESHOLDS) == expected


def test_no_interval_is_inconclusive():
    assert verdict("greater", None, THRESHOLDS) == INCONCLUSIVE


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
    mrpc = by_id["t5-mrpc-mlm-vs-ltr"]  # MLM+NSP − LTR = 2.8, 3.4, 3.1
    assert mrpc.verdict == REPRODUCED and mrpc.diff.seeds == (1, 2, 3)
    assert mrpc.diff.estimate == pytest.approx(3.1) and mrpc.diff.interval.low > 0
    qnli = by_id["t5-qnli-nsp"]  # No NSP three points ahead: "MLM+NSP ≥ No NSP" is contradicted
    assert qnli.verdict == CONTRADICTED and qnli.diff.interval.high < -1.0
    squad = by_id["t5-squad-mlm-vs-ltr"]  # 0.1 and 6.1: the interval straddles zero
    assert squad.verdict == INCONCLUSIVE and squad.diff.interval.low < 0 < squad.diff.interval.high
    assert squad.diff.a.rows[0].task == "squad_v1_devsplit"  # the devsplit stands in for the paper's dev
    assert by_id["t5-squad-nsp"].verdict == NOT_RUN


def test_degenerate_cell_never_counts_as_a_reproduction(outcomes):
    by_id, _ = outcomes
    ner = by_id["t8-ner-finetune-masking"]  # within 0.3 points on both seeds, but one seed is degenerate
    assert ner.diff.degenerate and verdict("equivalent", ner.diff.interval, THRESHOLDS) == REPRODUCED
    assert ner.verdict == INCONCLUSIVE and "degenerate" in ner.why


def test_one_seed_pair_has_no_interval_and_no_verdict(outcomes):
    by_id, _ = outcomes
    glue = by_id["pretraining-vs-random"]  # CoLA has one seed: the GLUE-5 mean exists for seed 1 only
    assert glue.diff.seeds == (1,) and glue.diff.interval is None
    assert glue.verdict == INCONCLUSIVE and "no interval" in glue.why


def test_figure5_claims_use_the_checkpoint_series(outcomes):
    by_id, _ = outcomes
    assert by_id["c1-mlm-ahead-early"].verdict == CONTRADICTED  # LTR ahead at 1.1M tokens (-1.9)
    assert by_id["c1-mlm-ahead-early"].diff.estimate == pytest.approx(-1.9)
    assert by_id["c1-mlm-converges-slower"].diff.estimate == pytest.approx(6.0 - 1.0)  # gains 6.0 vs 1.0
    assert by_id["c1-mlm-ahead-last"].verdict == REPRODUCED


def test_claims_table_states_scale_split_and_comparisons(outcomes):
    _, data = outcomes
    table = claims_table(data)
    assert len(table.rows) == len(load_claims().claims)
    assert any("made at mini scale on dev splits" in note for note in table.notes)
    assert any(note.startswith("7 comparisons made (3 reproduced, 2 contradicted, 2 inconclusive)")
               for note in table.notes)
    mrpc = next(row for row in table.rows if "MRPC" in row[0])
    assert mrpc[4] == "+9.2 (86.7 − 77.5, dev)" and mrpc[-1] == REPRODUCED  # the paper's difference, from its table


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
        rec.update(seed=seed, metrics={"accuracy": acc}, extra={"example_correct": correct[seed]})
        out.append(LoadedRecord(tmp_path / f"{fixture_variant}.{seed}.record.json", json.loads(json.dumps(rec))))
    return out


def test_bootstrap_over_examples_can_overrule_a_confident_t_interval(tmp_path):
    """20 dev examples: MLM+NSP is ahead by exactly 5 points on each of three seeds (t-interval [5, 5]), but
    one example in 20 is too few to be sure: the bootstrap over seeds × examples straddles zero."""
    import numpy as np

    from bertbench.report.tables.paired import difference, side
    from bertbench.report.stats import paired_bootstrap

    base = "1" * 12 + "0" * 8  # 60%
    ahead = "1" * 13 + "0" * 7  # 65%
    mlm = _sst2_records(tmp_path, "mini-mlm-nsp", {1: 65.0, 2: 65.0, 3: 65.0}, {s: ahead for s in (1, 2, 3)})
    ltr = _sst2_records(tmp_path, "mini-ltr", {1: 60.0, 2: 60.0, 3: 60.0}, {s: base for s in (1, 2, 3)})
    data = collect(mlm + ltr)
    claims = load_claims()
    by_id = {o.claim.id: o for o in evaluate(data, claims)}
    last = by_id["c1-mlm-ahead-last"]
    assert last.diff.interval.low == pytest.approx(5.0) and verdict("greater", last.diff.interval, THRESHOLDS) == REPRODUCED
    assert last.diff.bootstrap.low <= 0 < last.diff.bootstrap.high  # resamples without the one example: 0
    assert last.verdict == INCONCLUSIVE and "bootstrap over dev examples says inconclusive" in last.why
    # the report's bootstrap is stats.paired_bootstrap on the 0/1 grids, scaled to 0-100
    grid = lambda s: 100.0 * np.array([[int(c) for c in s]] * 3)  # noqa: E731
    reference = paired_bootstrap(grid(ahead), grid(base))
    assert (last.diff.bootstrap.low, last.diff.bootstrap.high) == (reference.low, reference.high)
    # the t-interval only: what the verdict would be without per-example results
    va, vb = data.variants[0], data.variants[1]
    plain = difference(side(data, va, [("sst2", "accuracy")]), side(data, vb, [("sst2", "accuracy")]))
    assert plain.bootstrap is None


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
    assert by_id["c1-mlm-ahead-early"].verdict == CONTRADICTED  # as with equal token counts
    assert by_id["c1-mlm-ahead-early"].diff.estimate == pytest.approx(-1.9)
