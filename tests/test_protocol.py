"""The confirmatory protocol (issue 48): a pre-registered preset is refused, in one line, by `run --validate` (and so
by `run`) when it reuses a committed study's seed (any arm, random init included), pre-trains a side with fewer
than 3 seeds, or pre-registers a claim it cannot measure."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.errors import BertbenchError
from bertbench.studies.preset import load_preset
from bertbench.studies.protocol import check_protocol, committed_seeds

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _preset(tmp_path: Path, edit=lambda raw: None, name: str = "fresh") -> Path:
    """The claims preset with fresh seeds (3 a side), as a new study `name`, edited by `edit`."""
    raw = yaml.safe_load((ROOT / "recipes" / "presets" / "claims.yaml").read_text(encoding="utf-8"))
    raw.update(name=name, pretrain_seeds=[101, 102, 103], finetune={"seeds": [201, 202, 203]})
    raw["variants"][2]["pretrain_seeds"] = [101, 102, 103]
    edit(raw)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def _committed(root: Path, study: str, pretrain_seed, seed: int) -> None:
    folder = root / study / "results" / "x"
    folder.mkdir(parents=True, exist_ok=True)
    record = {"seed": seed, **({"pretrain_seed": pretrain_seed} if pretrain_seed is not None else {})}
    (folder / f"r{pretrain_seed}-{seed}.record.json").write_text(json.dumps(record), encoding="utf-8")


def test_a_pre_registration_reusing_a_committed_seed_is_refused_naming_the_seed_and_the_study(tmp_path):
    root = tmp_path / "records"
    spec = load_preset(str(_preset(tmp_path)))
    _committed(root, "fresh", 101, 201)  # the study's own committed records: its own seeds, not reused ones
    check_protocol(spec, root)
    _committed(root, "old", 102, 7)
    with pytest.raises(BertbenchError) as err:
        check_protocol(spec, root)
    assert str(err.value) == (f"{tmp_path / 'fresh.yaml'}: preregistration: pre-training seed 102 of variant 'mlm_nsp' "
                              f"was used by the committed study old ({root / 'old'}); a pre-registered study draws "
                              "seeds no committed study has used (its evidence would not be new)")
    (root / "old" / "results" / "x" / "r102-7.record.json").unlink()
    _committed(root, "older", None, 203)  # a random-init control's run: its initialisation is its fine-tuning seed
    with pytest.raises(BertbenchError, match=r"fine-tuning seed 203 \(every arm: mlm_nsp, no_nsp, wide_mlm_nsp, "
                                             r"wide_random\) was used by the committed study older"):
        check_protocol(spec, root)


def test_the_committed_studies_seeds_are_read_from_every_arm():
    """cpu-hour-wide's random init ran fine-tuning seeds 1-3 (the ones the claims study's control replayed)."""
    used = committed_seeds(ROOT / "leaderboards" / "records")
    assert {1, 2, 3} <= set(used.finetune) and {1, 2, 3, 4, 5, 6} <= set(used.pretrain)
    assert used.pretrain[1] == "claims" and committed_seeds(ROOT / "leaderboards" / "records", skip="claims").pretrain[1] == "cpu-hour"


def test_run_validate_refuses_a_reused_seed_two_pre_training_seeds_and_an_unmeasurable_claim(tmp_path):
    """Each in one line, from `run --validate`, against the committed records."""
    def qnli_gone(raw):  # the walk's case: Table 5's QNLI claim pre-registered, QNLI not among the preset's tasks
        raw["finetune"]["tasks"] = ["sst2", "stsb", "rte"]
        for v in raw["variants"]:
            v.pop("tasks", None)
        raw["preregistration"]["claims"] = ["t5-qnli-nsp"]
        raw["preregistration"].pop("scores")

    def wide_mlm(raw):  # a claim line naming a variant the preset lacks
        raw["preregistration"]["claims"][1]["claim"] = "L2-H256 mlm − L2-H256 random on sst2 > 5"

    cases = [
        (lambda raw: raw["variants"][2].update(pretrain_seeds=[101, 102]),
         "preregistration: variant 'wide_mlm_nsp' pre-trains with 2 seed(s): a confirmatory design needs at least 3"),
        (lambda raw: raw.update(pretrain_seeds=[5, 101, 102]),
         "pre-training seed 5 of variant 'mlm_nsp' was used by the committed study claims"),
        (qnli_gone, "pre-registered claim 't5-qnli-nsp': the preset cannot measure it (no task of it stands for the "
                    "paper's qnli)"),
        (wide_mlm, "pre-registered claim 'L2-H256 mlm − L2-H256 random on sst2 > 5': the preset cannot measure it "
                   "(no variant of it is 'L2-H256 mlm')"),
    ]
    for i, (edit, message) in enumerate(cases):
        r = runner.invoke(app, ["run", "--preset", str(_preset(tmp_path / str(i), edit) if (tmp_path / str(i)).mkdir()
                                                       is None else ""), "--validate"])
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert r.exit_code != 0 and len(lines) == 1 and message in lines[0], (message, r.output)


def test_each_record_of_a_pre_registered_run_carries_the_pre_registrations_hash_and_time(tmp_path, monkeypatch):
    """`run` writes the pre-registration with its time; the plan reads its stamp (sha256 of what was registered,
    the time) and hands it to each fine-tuning stage, whose records carry it; a re-run keeps the first time."""
    import hashlib

    from bertbench.registration import PREREGISTRATION_FILE
    from bertbench.registration import write_preregistration
    from bertbench.results import PREREGISTRATION_ENV, provenance, validate_record
    from bertbench.studies import plan as study_plan
    from record_factory import record

    spec = load_preset(str(_preset(tmp_path)))
    path = tmp_path / "out" / "results" / PREREGISTRATION_FILE
    written = write_preregistration(path, spec.preregistration)
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    when = raw.pop("registered_at")
    assert when == written.registered_at and when.startswith("20")
    digest = hashlib.sha256(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True).encode("utf-8")).hexdigest()
    assert write_preregistration(path, spec.preregistration).registered_at == when  # a re-run: the first time
    planner = study_plan.Planner(spec, tmp_path, tmp_path / "out", "tok", lambda _: None)
    stamp = planner.preregistration_stamp()
    assert stamp == {"sha256": digest, "registered_at": when}

    from bertbench.runtime import provenance as prov

    for name in ("library_versions", "hardware", "code_version"):  # what the stamp does not need (torch's import)
        monkeypatch.setattr(prov, name, lambda name=name: {} if name == "library_versions" else "x")
    seen = []
    fake = type(sys)("bertbench.training.finetune_run")  # the stage's fine-tuning, without torch's import
    fake.run_finetune = lambda req, echo: seen.append(provenance())
    monkeypatch.setitem(sys.modules, "bertbench.training.finetune_run", fake)
    monkeypatch.delenv(PREREGISTRATION_ENV, raising=False)
    req = type("Req", (), {"tasks": "rte"})()
    study_plan._finetune_stage(req, tmp_path / "done.json", "k", stamp)
    study_plan._finetune_stage(req, tmp_path / "done2.json", "k", None)
    assert seen[0]["preregistration"] == stamp and "preregistration" not in seen[1]
    assert PREREGISTRATION_ENV not in __import__("os").environ  # set for the stage only
    data = dict(record("rte", 1, "01", "01").data)
    assert validate_record({**data, "preregistration": stamp}, "r")["preregistration"] == stamp


def test_a_stopped_or_partial_run_is_logged_before_an_amendment_is_accepted_and_the_page_lists_it(tmp_path):
    """A run that stops, a run that starts over a part-way folder, and a changed registration (accepted only when it
    says which one it amends, after the log has the partial run) each leave an entry; the report's family note, on
    the study's page, lists them."""
    from bertbench.claims import load_claims
    from bertbench.registration import LOG_FILE, load_preregistration, log_note, read_log
    from bertbench.registration import log_stop
    from bertbench.studies.protocol import register

    out = tmp_path / "out"
    first = register(out, load_preset(str(_preset(tmp_path))))
    assert not (out / "results" / LOG_FILE).exists()  # a fresh study: nothing to log
    (out / "pretrain" / "mlm_nsp-seed101-k1").mkdir(parents=True)
    (out / "pretrain" / "mlm_nsp-seed101-k1" / "summary.json").write_text("{}")
    (out / "pretrain" / "mlm_nsp-seed102-k2").mkdir()  # started, not finished
    (out / "results" / "mlm_nsp-seed101-k1").mkdir(parents=True)
    (out / "results" / "mlm_nsp-seed101-k1" / "done-qnli_devsplit.json").write_text("{}")
    log_stop(out, "KeyboardInterrupt")
    changed = load_preset(str(_preset(tmp_path / "b", lambda raw: raw["preregistration"].update(extension="one more")
                                      if (tmp_path / "b").mkdir() is None else None)))
    with pytest.raises(BertbenchError, match=f"unless the new one says which it amends \\(amends: {first.sha256}\\)"):
        register(out, changed)
    amending = load_preset(str(_preset(tmp_path / "c", lambda raw: raw["preregistration"].update(
        extension="one more", amends=first.sha256) if (tmp_path / "c").mkdir() is None else None)))
    second = register(out, amending)
    log = read_log(out / "results" / LOG_FILE)
    assert [e["event"].split(" (")[0] for e in log] == ["stopped", "resumed after a partial run",
                                                        "resumed after a partial run", "amended"]
    assert log[1]["finished"] == {"pre-trainings": 1, "fine-tunings": 1} and log[1]["planned"] == {
        "pre-trainings": 9, "fine-tunings": 30} and log[1]["started, unfinished"] == ["mlm_nsp-seed102-k2"]
    assert log[3]["amends"] == first.sha256 and log[3]["sha256"] == second.sha256 != first.sha256
    prereg = load_preregistration([out / "results"], load_claims())
    assert prereg.sha256 == second.sha256 and prereg.amends == first.sha256  # the file holds the amendment now
    note = log_note(prereg)  # the claims table's family note ends with it, on the study's page
    assert f"Its log ({LOG_FILE}" in note and "stopped (KeyboardInterrupt); 1 pre-trainings, 1 fine-tunings" in note
    assert "resumed after a partial run; 1 of 9 pre-trainings, 1 of 30 fine-tunings finished" in note


def test_the_claims_2_preset_passes_the_protocol_and_the_claims_preset_no_longer_does():
    """claims-2 (pre-registered, not run): fresh seeds, 3 pre-training seeds a side, a claim it can measure. The
    committed claims study, run before the protocol, is refused: its wide side pre-trains 2 seeds."""
    r = runner.invoke(app, ["run", "--preset", "claims-2", "--validate"])
    assert r.exit_code == 0 and "preset claims-2: 2 variants (mlm_nsp, ltr), tasks squad_v1_devsplit: valid" in r.output
    spec = load_preset("claims-2")
    assert spec.preregistration.paper_claims == ("t5-squad-mlm-vs-ltr",)
    old = runner.invoke(app, ["run", "--preset", "claims", "--validate"])
    assert old.exit_code != 0 and "variant 'wide_mlm_nsp' pre-trains with 2 seed(s)" in old.output


def _fail(message: str) -> None:
    raise BertbenchError(message)


def test_a_pre_registered_studys_stopped_invocation_is_logged_by_the_run(tmp_path):
    """run_stages_keeping_times, the path every stopped `run` takes, logs the stop where a pre-registration exists."""
    from bertbench.registration import LOG_FILE, read_log
    from bertbench.studies.protocol import register
    from bertbench.studies.run import run_stages_keeping_times
    from bertbench.studies.scheduler import Stage

    out = tmp_path / "out"
    register(out, load_preset(str(_preset(tmp_path))))
    with pytest.raises(BertbenchError, match="mrpc: no training file"):
        run_stages_keeping_times(out, [Stage("finetune x mrpc", _fail, ("mrpc: no training file",))], 1,
                                 lambda message: None, {}, 0.0, {}, False)
    (entry,) = read_log(out / "results" / LOG_FILE)
    assert entry["event"] == "stopped" and entry["why"] == "mrpc: no training file"


def test_the_design_is_registered_a_changed_one_needs_an_amendment_and_the_prose_is_not_design(tmp_path):
    """The registration fixes the design, not only claims and seeds: more pre-training steps, another fine-tuning
    length or another recipe in the same folder is refused (only `amends` takes it, logged); a new title is not
    a change of design. A preset cannot write the fingerprint itself."""
    from bertbench.studies.protocol import register

    out = tmp_path / "out"
    first = register(out, load_preset(str(_preset(tmp_path))))
    assert first.design.startswith("sha256:")
    retitled = load_preset(str(_preset(tmp_path / "t", lambda raw: raw.update(title="another title")
                                       if (tmp_path / "t").mkdir() is None else None)))
    assert register(out, retitled).sha256 == first.sha256
    for i, edit in enumerate([lambda raw: raw["pretrain"].update(max_steps=raw["pretrain"]["max_steps"] + 1),
                              lambda raw: raw["finetune"].update(max_seq_len=64),
                              lambda raw: raw.update(recipe="tiny-debug")]):
        folder = tmp_path / f"d{i}"
        folder.mkdir()
        changed = load_preset(str(_preset(folder, edit)))
        assert changed.preregistration.design != first.design
        with pytest.raises(BertbenchError, match=f"design; .*amends: {first.sha256}"):
            register(out, changed)
    bad = _preset(tmp_path / "x", lambda raw: raw["preregistration"].update(design="sha256:0")
                  if (tmp_path / "x").mkdir() is None else None)
    with pytest.raises(BertbenchError, match="no 'design' key"):
        load_preset(str(bad))


def _finetunings_planned_and_made(preset, out: Path) -> tuple[int, int]:
    from bertbench.studies.plan import Planner
    from bertbench.studies.protocol import planned

    stages = Planner(preset, out / "data", out / "study", "vocab.txt", lambda _: None).plan()
    return planned(preset)["fine-tunings"], sum(s.name.startswith("finetune ") for s in stages)


def test_a_variants_own_tasks_bound_its_feature_based_ones_in_the_plan_and_in_the_registrations_count(tmp_path):
    """The plan ran every feature-based task for a variant whose own `tasks` left it out, while the protocol
    (what the registration counts and the claims judge) did not: one rule now (studies.preset.variant_tasks)."""
    from bertbench.studies.preset import variant_tasks

    raw = yaml.safe_load((ROOT / "recipes" / "presets" / "claims-3.yaml").read_text(encoding="utf-8"))
    raw["finetune"]["tasks"] = ["rte", "conll2003"]
    raw["variants"][1]["tasks"] = ["rte"]  # mask100: fine-tuned on RTE only, so no feature-based CoNLL either
    path = tmp_path / "bounded.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True, sort_keys=False), encoding="utf-8")
    preset = load_preset(str(path))
    assert [variant_tasks(preset, v) for v in preset.variants] == [(["rte", "conll2003"], ["conll2003"]), (["rte"], [])]
    assert _finetunings_planned_and_made(preset, tmp_path) == (6 * 3 + 6 * 1,) * 2
    for name in ("cpu-quick", "claims-3", "smoke", "table6"):  # the committed designs: the count is what runs
        planned, made = _finetunings_planned_and_made(load_preset(name), tmp_path / name)
        assert planned == made > 0, name
