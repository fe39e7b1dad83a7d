"""A registration that cannot restart in silence (issue 53): the project keeps each pre-registered study's registration
and log (leaderboards/registrations/<study>/, here a test's own folder); a run checks against that, not against a copy
in its output folder; the hash covers what decides a verdict; the report checks each record's stamp; a family
amended after results is judged as exploratory and says so; a study can be withdrawn, logged, before it runs."""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import bertbench.claims as statements_module
from bertbench.cli import app
from bertbench.errors import BertbenchError
from bertbench.claims import load_claims
from bertbench.report.claims import EXPLORATORY, evaluate_study
from bertbench.report.model import collect
from bertbench.report.tables.claims import claims_table
from bertbench.registration import (
    LOG_FILE,
    PREREGISTRATION_FILE,
    check_stamps,
    parse_preregistration,
    read_log,
)
from bertbench.studies.preset import load_preset
from bertbench.registration import registrations_dir, withdraw
from bertbench.studies.protocol import register

from record_factory import FAIR, GOLD, GOOD, variant
from test_protocol import _preset

runner = CliRunner()


def test_a_deleted_run_folder_and_a_changed_registration_is_refused_unless_it_amends_the_projects(tmp_path):
    first = load_preset(str(_preset(tmp_path)))
    register(tmp_path / "run", first)
    kept = registrations_dir() / "fresh" / PREREGISTRATION_FILE
    assert kept.is_file()  # the project's copy, beside the run folder's
    shutil.rmtree(tmp_path / "run")  # the run folder is gone: the project's registration still stands

    def other_seeds(raw):
        raw["pretrain_seeds"] = [104, 105, 106]
        raw["variants"][2]["pretrain_seeds"] = [104, 105, 106]

    changed = load_preset(str(_preset(tmp_path, other_seeds)))
    with pytest.raises(BertbenchError, match="cannot change once a study has started, unless the new one says which "
                                             "it amends"):
        register(tmp_path / "run", changed)
    # the same registration in a new folder goes on, and the log says the earlier run's files were not there
    register(tmp_path / "again", load_preset(str(_preset(tmp_path))))
    events = [e["event"] for e in read_log(registrations_dir() / "fresh" / LOG_FILE)]
    assert events == ["started in a folder without the earlier run's files"]
    # an amendment that names the project's registration is accepted, and logged in the project's log too
    old = first.preregistration.sha256
    amending = dataclasses.replace(changed.preregistration, amends=old)
    register(tmp_path / "third", dataclasses.replace(changed, preregistration=amending))
    events = [e["event"] for e in read_log(registrations_dir() / "fresh" / LOG_FILE)]
    assert events[-1] == f"amended (was {old[:12]}, now {amending.sha256[:12]})"


def test_a_changed_claim_threshold_or_alpha_changes_the_registrations_hash(tmp_path, monkeypatch):
    def ner_claim(raw):  # a family whose claim has a threshold: Table 8's "within about a point"
        raw["preregistration"]["claims"] = ["t5-qnli-nsp"]

    before = load_preset(str(_preset(tmp_path, ner_claim))).preregistration
    assert before.decides["claims"]["t5-qnli-nsp"]["threshold"] == -1.0
    text = statements_module.CLAIMS_PATH.read_text(encoding="utf-8").replace("about_a_point: 1.0", "about_a_point: 2.0")
    moved = tmp_path / "claims.yaml"
    moved.write_text(text, encoding="utf-8")
    monkeypatch.setattr(statements_module, "CLAIMS_PATH", moved)
    after = load_preset(str(_preset(tmp_path, ner_claim))).preregistration
    assert after.decides["claims"]["t5-qnli-nsp"]["threshold"] == -2.0 and after.sha256 != before.sha256
    monkeypatch.undo()
    monkeypatch.setattr(statements_module, "ALPHA", 0.01)  # the level the report judges by, hashed
    assert load_preset(str(_preset(tmp_path, ner_claim))).preregistration.sha256 != before.sha256
    assert "qnli_devsplit" in before.decides["tasks"] and before.decides["report"]["bootstrap"] == 2000


def _family():
    claims = load_claims()
    return parse_preregistration({"claims": ["t5-qnli-nsp"]}, "test", claims, preset="mine")


def _stamped(records, sha):
    for r in records:
        r.data["preregistration"] = {"sha256": sha, "registered_at": "2026-12-07T00:00:00+00:00"}
    return records


def test_a_record_of_another_registration_is_refused_in_one_line():
    prereg = _family()
    records = _stamped(variant("qnli_devsplit", "mlm+nsp", GOOD, GOLD), prereg.sha256)
    assert check_stamps(records, prereg) is prereg
    stranger = _stamped(variant("qnli_devsplit", "mlm", FAIR, GOLD), "f" * 64)
    with pytest.raises(BertbenchError) as err:
        check_stamps(records + stranger, prereg)
    assert "a record of the pre-registration ffffffffffff, not of this study's" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_family_amended_after_results_is_judged_as_exploratory_and_labelled():
    prereg = _family()
    records = (_stamped(variant("qnli_devsplit", "mlm+nsp", GOOD, GOLD), prereg.sha256)
               + _stamped(variant("qnli_devsplit", "mlm", FAIR, GOLD), prereg.sha256))
    # amended after a fine-tuning had finished: its log says so
    log = ({"event": "amended (was aaaaaaaaaaaa, now bbbbbbbbbbbb)", "at": "t", "amends": "a" * 64,
            "finished": {"pre-trainings": 6, "fine-tunings": 1}},)
    amended = check_stamps(records, dataclasses.replace(prereg, log=log))
    assert amended.after_results
    data = collect(records)
    outcomes = evaluate_study(data, preregistration=amended)
    assert outcomes and all(o.family == EXPLORATORY for o in outcomes)
    table = claims_table(data, outcomes, preregistration=amended)
    qnli = [row for row in table.rows if row[0].startswith("Removing NSP does not help on QNLI")]
    assert qnli and qnli[0][-1].endswith("· exploratory, amended after results")
    assert any("Amended after results" in note for note in table.notes)
    # amended before any fine-tuning finished: still the pre-registered family
    early = ({**log[0], "finished": {"pre-trainings": 0, "fine-tunings": 0}},)
    assert not check_stamps(records, dataclasses.replace(prereg, log=early)).after_results
    # a record stamped with the registration it amended: results came before the amendment
    old = _stamped(variant("qnli_devsplit", "mlm", FAIR, GOLD), "a" * 64)
    assert check_stamps(records[:3] + old, dataclasses.replace(prereg, log=early)).after_results


def test_a_study_withdrawn_before_it_runs_is_logged_and_refused(tmp_path):
    path = _preset(tmp_path)
    register(tmp_path / "run", load_preset(str(path)))
    r = runner.invoke(app, ["run", "--preset", str(path), "--withdraw", "it cannot decide its claim"])
    assert r.exit_code == 0, r.output
    [entry] = read_log(registrations_dir() / "fresh" / LOG_FILE)
    assert entry["event"] == "withdrawn" and entry["why"] == "it cannot decide its claim"
    with pytest.raises(BertbenchError, match="the study fresh was withdrawn at .* a withdrawn pre-registration does "
                                             "not run"):
        register(tmp_path / "elsewhere", load_preset(str(path)))


def test_a_claim_judged_on_best_of_several_settings_cells_says_so():
    """Fine-tuning settings changed and rerun into the same folder: each cell is the best of two protocols on dev
    (‡), and a verdict on such cells carries the mark; on one protocol's records it does not."""
    import copy

    from bertbench.results import LoadedRecord

    def other_lr(recs):
        out = []
        for r in recs:
            data = copy.deepcopy(r.data)
            data["finetune"]["lr"] = 1e-4
            out.append(LoadedRecord(r.path.with_name("lr1e-4." + r.path.name), data))
        return out

    one = variant("qnli_devsplit", "mlm+nsp", GOOD, GOLD) + variant("qnli_devsplit", "mlm", FAIR, GOLD)
    two = one + other_lr(variant("qnli_devsplit", "mlm+nsp", FAIR, GOLD) + variant("qnli_devsplit", "mlm", GOOD, GOLD))

    def verdict(records):
        data = collect(records)
        table = claims_table(data, evaluate_study(data))
        [row] = [row for row in table.rows if row[0].startswith("Removing NSP does not help on QNLI")]
        return row[-1]

    assert "‡" not in verdict(one)
    assert "‡ judged on each cell's best of 2 fine-tuning settings on dev (optimistic)" in verdict(two)


def test_stages_json_lists_every_earlier_run_of_a_study_that_spans_several(tmp_path):
    """A study stopped and resumed: each stopped run's times stay in stages.interrupted-<n>.json, and the run that
    finishes names them all in stages.json's `runs`, in the order they ran, with how each ended."""
    import json
    import os

    from bertbench.studies.run import NOT_STAGES, RUNS_KEY, earlier_runs

    for n, (name, wall) in enumerate([("stages.interrupted-1.json", "wall (interrupted: SIGTERM)"),
                                      ("stages.interrupted-2.json", "wall (interrupted: a time limit)")]):
        path = tmp_path / name
        path.write_text(json.dumps({"pretrain mlm_nsp seed301": 100.0, wall: 1000.0 + n}))
        os.utime(path, (1_000_000 + n, 1_000_000 + n))
    runs = earlier_runs(tmp_path)
    assert runs == [{"file": "stages.interrupted-1.json", "wall (interrupted: SIGTERM)": 1000.0},
                    {"file": "stages.interrupted-2.json", "wall (interrupted: a time limit)": 1001.0}]
    assert RUNS_KEY in NOT_STAGES  # listed, never costed as a stage
