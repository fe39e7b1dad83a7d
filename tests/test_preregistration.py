"""Pre-registration (issue 42): a study states its claims before it runs; the report judges exactly that family
under Holm, and every other comparison as exploratory, outside it. Headline tasks enter by outside evidence."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.errors import BertbenchError
from bertbench.report.model import collect
from bertbench.report.multibootstrap import holm
from bertbench.claims import load_claims, parse_claim
from bertbench.report.claims import EXPLORATORY, PRE_REGISTERED, evaluate
from bertbench.registration import (
    PREREGISTRATION_FILE,
    load_preregistration,
    parse_preregistration,
)
from bertbench.registration import write_preregistration
from bertbench.results import record_filename, write_record

from record_factory import FAIR, GOLD, GOOD, POOR, variant

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _records():
    """MLM+NSP against No NSP on QNLI (Table 5's NSP claim), RTE and SST-2: three seeds each, 100 dev examples."""
    return (variant("qnli_devsplit", "mlm+nsp", GOOD, GOLD) + variant("qnli_devsplit", "mlm", FAIR, GOLD)
            + variant("rte", "mlm+nsp", GOOD, GOLD) + variant("rte", "mlm", POOR, GOLD)
            + variant("sst2", "mlm+nsp", FAIR, GOLD) + variant("sst2", "mlm", POOR, GOLD))


PREREG = {"claims": ["t5-qnli-nsp", {"claim": "mlm+nsp − mlm on rte > 0", "name": "NSP helps RTE"}]}


def test_a_claim_not_declared_is_exploratory_and_outside_holms_family():
    """The paper's QNLI claim and a claim of the user's are pre-registered: Holm adjusts those two together. A
    `--claim` stated afterwards (SST-2) is exploratory: adjusted apart, so it never dilutes (or joins) the family."""
    data = collect(_records())
    claims = load_claims(paper=data.paper)
    prereg = parse_preregistration(PREREG, "test", claims)
    later = parse_claim("mlm+nsp − mlm on sst2 > 0")
    registered = [c for c in claims.claims if c.id in prereg.paper_claims] + list(prereg.user_claims)
    out = evaluate(data, claims, [*prereg.user_claims, later], registered)
    qnli = next(o for o in out if o.claim.id == "t5-qnli-nsp")
    rte = next(o for o in out if o.claim.text == "mlm+nsp − mlm on rte > 0")
    sst2 = next(o for o in out if o.claim is later)
    assert (qnli.family, rte.family, sst2.family) == (PRE_REGISTERED, PRE_REGISTERED, EXPLORATORY)
    assert [qnli.p_holm, rte.p_holm] == pytest.approx(holm([qnli.p, rte.p]))
    assert sst2.p_holm == pytest.approx(sst2.p)  # alone among the exploratory comparisons made
    others = [o for o in out if o.claim.id not in (None, "t5-qnli-nsp")]
    assert others and all(o.family == EXPLORATORY for o in others)


def test_the_report_says_which_claims_were_pre_registered(tmp_path):
    folder = tmp_path / "results"
    for rec in _records():
        write_record(folder / rec.path.parent.name / record_filename(rec.data), rec.data)
    write_preregistration(folder / PREREGISTRATION_FILE, parse_preregistration(PREREG, "test", load_claims(),
                                                                               preset="mine"))
    out = tmp_path / "report.md"
    page = tmp_path / "page.md"
    page.write_text("<!-- bertbench report: begin report -->\n<!-- bertbench report: end report -->\n")
    r = runner.invoke(app, ["report", str(folder), "--out", str(out), "--claim", "mlm+nsp − mlm on sst2 > 0",
                            "--embed", str(page)])
    assert r.exit_code == 0, r.output
    # A study's page shows its pre-registered claims of its own too, not only the paper's.
    assert [line for line in page.read_text().splitlines() if line.startswith("| NSP helps RTE |")]
    text = out.read_text(encoding="utf-8")
    assert "· pre-registered |" in text and "· exploratory |" in text
    assert "Holm families (pre-registration: the preset mine's preregistration.yaml" in text
    rows = [line for line in text.splitlines() if line.startswith("| NSP helps RTE |")]
    assert len(rows) == 1 and "pre-registered" in rows[0] and "preregistration.yaml" in rows[0]
    # The file is named from the folder given, so a committed leaderboard reads the same on every machine; the
    # claim is cited by the file that states it, never by an index into a list.
    assert "| pre-registration (results/preregistration.yaml) |" in rows[0] and str(tmp_path) not in text


def test_without_a_pre_registration_every_claim_is_in_one_family_as_before(tmp_path):
    folder = tmp_path / "results"
    for rec in _records():
        write_record(folder / rec.path.parent.name / record_filename(rec.data), rec.data)
    out = tmp_path / "report.md"
    r = runner.invoke(app, ["report", str(folder), "--out", str(out), "--claim", "mlm+nsp − mlm on sst2 > 0"])
    assert r.exit_code == 0, r.output
    text = out.read_text(encoding="utf-8")
    assert "pre-registered" not in text and "exploratory" not in text


@pytest.mark.parametrize("raw, message", [
    ({"claims": ["t5-qnli-nps"]}, "'t5-qnli-nps' is no claim id"),
    ({"claims": []}, "expected 'claims:'"),
    ({"claims": ["t5-qnli-nsp"], "sedes": 1}, "unknown key(s) ['sedes']"),
    ({"claims": ["t5-qnli-nsp", "t5-qnli-nsp"]}, "a claim is listed twice"),
    ({"claims": ["mlm+nsp − mlm on rte >"]}, "claims[1]"),
    ({"claims": ["t5-qnli-nsp"], "scores": [{"name": "GLUE-4", "rule": "r", "tasks": [
        {"task": "mrpc", "metric": "f1", "published": 81.1, "source": "Turc", "constant": 81.2,
         "constant_from": "dev"}]}]}, "mrpc is not admitted: 81.1 − 81.2 < 3 points"),
])
def test_a_malformed_pre_registration_is_one_error_naming_where(raw, message):
    with pytest.raises(BertbenchError, match="^prereg") as err:
        parse_preregistration(raw, "prereg", load_claims())
    assert message in str(err.value)


def test_a_pre_registration_cannot_change_once_written(tmp_path):
    path = tmp_path / "results" / PREREGISTRATION_FILE
    claims = load_claims()
    write_preregistration(path, parse_preregistration(PREREG, "test", claims, preset="mine"))
    write_preregistration(path, parse_preregistration(PREREG, "test", claims, preset="mine"))  # the same: fine
    changed = {"claims": ["t5-qnli-nsp"]}
    with pytest.raises(BertbenchError, match="cannot change once a study has started"):
        write_preregistration(path, parse_preregistration(changed, "test", claims, preset="mine"))
    assert load_preregistration([tmp_path], claims).paper_claims == ("t5-qnli-nsp",)


def test_the_claims_preset_pre_registers_its_family_and_records_its_seeds(tmp_path):
    """The seeds written into the pre-registration are the preset's own; a preset may not state them twice."""
    from bertbench.studies.preset import load_preset

    preset = load_preset("claims")
    prereg = preset.preregistration
    assert prereg.paper_claims == ("t5-qnli-nsp",) and len(prereg.user_claims) == 1
    assert prereg.seeds["pretrain"]["mlm_nsp"] == [1, 2, 3, 4, 5, 6] and prereg.seeds["finetune"] == [1, 2, 3]
    raw = yaml.safe_load((ROOT / "recipes" / "presets" / "claims.yaml").read_text(encoding="utf-8"))
    raw["preregistration"]["seeds"] = {"pretrain": [1]}
    path = tmp_path / "claims-with-seeds.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with pytest.raises(BertbenchError, match="no 'seeds' key"):
        load_preset(str(path))


def test_the_headline_tasks_are_admitted_by_the_published_numbers_they_cite():
    """Every admitted task's published number is Turc et al.'s BERT-Tiny number in paper_numbers.yaml, and MRPC
    (F1 81.1, against the constant predictor's 81.2 on dev) is not among them."""
    from bertbench.reference import load_paper_numbers
    from bertbench.studies.preset import load_preset

    paper = load_paper_numbers()
    (score,) = load_preset("claims").preregistration.scores
    assert {e.task for e in score.tasks} == {"sst2", "stsb", "qnli_devsplit", "rte"}
    for e in score.tasks:
        (published,) = paper.find(system="BERT-Tiny", task=e.task.removesuffix("_devsplit"), metric=e.metric)
        assert e.published == published.value and e.admitted and "Turc et al. 2019" in e.source


@pytest.mark.integration
def test_the_constant_predictor_scores_the_preset_cites_are_the_dev_sets(shared_data):
    """The constant predictor's score on each admitted task's evaluation set, computed from the data."""
    from collections import Counter

    from bertbench.data.task_readers import read_split
    from bertbench.studies.preset import load_preset
    from tests.reference import load_tasks

    tasks = load_tasks()
    (score,) = load_preset("claims").preregistration.scores
    for e in score.tasks:
        examples = read_split(tasks[e.task], "eval", shared_data)
        if tasks[e.task].type == "regression":
            assert e.constant == 0.0
            continue
        majority = Counter(ex.label for ex in examples).most_common(1)[0][1]
        assert e.constant == pytest.approx(100 * majority / len(examples), abs=0.005), e.task


@pytest.mark.integration
def test_a_variant_fine_tunes_only_its_own_tasks(shared_data, tmp_path):
    """The claims preset's NSP variants fine-tune QNLI alone (their claim's task); the wide ones every task."""
    from bertbench.studies.plan import Planner
    from bertbench.studies.preset import load_preset

    stages = [s.name for s in Planner(load_preset("claims"), shared_data, tmp_path, "tok", lambda _: None).plan()]
    tiny = [n for n in stages if n.startswith(("finetune mlm_nsp ", "finetune no_nsp "))]
    assert len(tiny) == 12 and all(n.endswith(" qnli_devsplit") for n in tiny)
    assert len([n for n in stages if n.startswith("finetune wide_mlm_nsp seed1 ")]) == 6
    assert sum(n.startswith("pretrain ") for n in stages) == 14


def test_a_variant_may_name_only_tasks_of_the_preset(tmp_path):
    from bertbench.studies.preset import load_preset

    raw = yaml.safe_load((ROOT / "recipes" / "presets" / "claims.yaml").read_text(encoding="utf-8"))
    raw["variants"][0]["tasks"] = ["squad_v1"]
    path = tmp_path / "claims-bad-tasks.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with pytest.raises(BertbenchError, match="variant 'mlm_nsp': tasks \\['squad_v1'\\]: expected some of"):
        load_preset(str(path))
