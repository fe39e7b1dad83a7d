"""Result records: schema, validation errors that name the file, atomic writes, labels."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import absolute_paths

from bertbench.errors import BertbenchError
from bertbench.results import (
    FORMATS_COMMIT,
    RECORD_SUFFIX,
    SCHEMA_VERSION,
    load_records,
    mask_procedure,
    provenance,
    read_record,
    record_filename,
    validate_record,
    write_record,
)
from bertbench.claims import masking_suffix
from bertbench.report.labels import variant_label

RECORDS = Path(__file__).resolve().parent / "fixtures" / "records" / "main"
COMMITTED = Path(__file__).resolve().parent.parent / "leaderboards" / "records"


@pytest.fixture
def rec() -> dict:
    """A valid record as the fixtures hold it (mini MLM+NSP, cola, seed 1), to modify."""
    (path,) = (RECORDS / "mini-mlm-nsp").glob("cola.*" + RECORD_SUFFIX)
    return json.loads(path.read_text(encoding="utf-8"))


def _write_raw(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return path


def test_round_trip_is_exact_and_atomic(tmp_path, rec):
    path = write_record(tmp_path / "runs" / record_filename(rec), rec)
    assert read_record(path) == rec
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind
    assert SCHEMA_VERSION == 2 and rec["schema_version"] == SCHEMA_VERSION


def test_write_refuses_a_name_reports_would_not_find(tmp_path, rec):
    with pytest.raises(BertbenchError, match=r"\.record\.json"):
        write_record(tmp_path / "cola.json", rec)


def test_write_validates_before_writing(tmp_path, rec):
    del rec["metrics"]["mcc"]
    target = tmp_path / "x.record.json"
    with pytest.raises(BertbenchError, match="primary metric 'mcc' is missing"):
        write_record(target, rec)
    assert not target.exists()


def test_corrupt_json_names_the_file(tmp_path):
    path = _write_raw(tmp_path / "bad.record.json", '{"schema_version": 1, "task": ')
    with pytest.raises(BertbenchError) as err:
        read_record(path)
    assert str(path) in str(err.value) and "corrupt JSON" in str(err.value)


def test_nan_is_not_json(tmp_path, rec):
    text = json.dumps(rec).replace('"accuracy": 69.0', '"accuracy": NaN')
    path = _write_raw(tmp_path / "nan.record.json", text)
    with pytest.raises(BertbenchError, match="NaN is not valid JSON"):
        read_record(path)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r.pop("seed"), "missing required key 'seed'"),
        (lambda r: r["split"].pop("eval_kind"), "missing required key 'split.eval_kind'"),
        (lambda r: r["metrics"].pop("mcc"), "primary metric 'mcc' is missing from metrics"),
        (lambda r: r["metrics"].update(mcc=None), "primary metric 'mcc' is null"),
        (lambda r: r["metrics"].update(accuracy="high"), "metric 'accuracy' must be a finite number"),
        (lambda r: r.update(primary_metrc="mcc"), "Did you mean: primary_metric"),
        (lambda r: r["split"].update(eval_kind="validation"), "eval_kind 'validation' is not one of"),
        (lambda r: r.update(seed="1"), "seed must be an integer"),
        (lambda r: r.update(task_version=True), "task_version must be an integer"),
        (lambda r: r["model"]["pretraining"].update(objective="electra"), "objective 'electra'"),
        (lambda r: r["model"]["pretraining"].update(mask_ratio=None), "mask_ratio is null, but an mlm model needs it"),
        (lambda r: r["model"]["pretraining"].update(mask_ratio=15), "not a fraction"),
        (lambda r: r["model"]["pretraining"].update(mask_procedure=[80, 10, 5]), "does not add up to 100%"),
        (lambda r: r["model"]["pretraining"].update(nsp=True), "model.pretraining.nsp is not a version-2 key"),
        (lambda r: r["model"]["pretraining"].update(objective="mlm+ltr"), "objective 'mlm+ltr' is not one of mlm+nsp, mlm, clm"),
        (lambda r: r["finetune"].pop("lr"), "missing required key 'finetune.lr'"),
    ],
)
def test_invalid_records_name_the_file_and_the_problem(tmp_path, rec, mutate, message):
    mutate(rec)
    path = _write_raw(tmp_path / "sub" / "r.record.json", rec)
    with pytest.raises(BertbenchError) as err:
        read_record(path)
    assert str(path) in str(err.value)
    assert message in str(err.value)


def test_every_problem_is_reported_at_once(rec):
    rec.pop("seed")
    rec["metrics"].pop("mcc")
    with pytest.raises(BertbenchError) as err:
        validate_record(rec, "r.record.json")
    assert "'seed'" in str(err.value) and "'mcc'" in str(err.value)


@pytest.mark.parametrize("version, hint", [(3, "newer bertbench"), (0, FORMATS_COMMIT), ("1", "not a version")])
def test_unknown_schema_version(tmp_path, rec, version, hint):
    rec["schema_version"] = version
    path = _write_raw(tmp_path / "r.record.json", rec)
    with pytest.raises(BertbenchError, match="unknown record schema_version") as err:
        read_record(path)
    assert str(path) in str(err.value) and hint in str(err.value)


def test_task_versions_are_checked_against_the_registry(tmp_path, rec):
    path = _write_raw(tmp_path / "r.record.json", rec)
    assert read_record(path, {"cola": 1})["task"] == "cola"
    assert read_record(path, None)["task"] == "cola"  # no registry: no check
    with pytest.raises(BertbenchError, match="unknown task version: 'cola' version 1 in the record, but the task registry has version 2") as err:
        read_record(path, {"cola": 2})
    assert str(path) in str(err.value)
    with pytest.raises(BertbenchError, match="Unknown task 'cola'. Did you mean: cola2"):
        read_record(path, {"cola2": 1, "rte": 1})


def test_random_init_and_causal_models_need_no_masking(rec):
    rec["model"]["pretraining"] = None
    validate_record(copy.deepcopy(rec))
    rec["model"]["pretraining"] = {"objective": "clm", "mask_ratio": None, "mask_procedure": None,
                                   "whole_word_mask": None, "tokens_seen": 10, "wall_seconds": 1.0,
                                   "data_fingerprint": None, "code_version": None, "hardware": None,
                                   "run_dir": None, "heldout": None}
    validate_record(rec)


def test_load_records_walks_folders_sorted_and_skips_other_files(tmp_path, rec):
    for i, sub in enumerate(["b", "a/deeper", "a"]):
        rec["seed"] = i
        write_record(tmp_path / sub / record_filename(rec), rec)
    (tmp_path / "a" / "notes.json").write_text("{}")
    (tmp_path / "a" / "cola.predictions.tsv").write_text("x")
    loaded = load_records([tmp_path, tmp_path / "a"])  # the same file twice is read once
    assert [r.path.relative_to(tmp_path).parts[:-1] for r in loaded] == [("a",), ("a", "deeper"), ("b",)]
    assert [r.data["seed"] for r in loaded] == [2, 1, 0]
    assert load_records([loaded[0].path])[0].data == loaded[0].data


def test_load_records_names_every_bad_file(tmp_path, rec):
    write_record(tmp_path / "good.record.json", rec)
    bad1 = _write_raw(tmp_path / "x" / "corrupt.record.json", "{")
    broken = copy.deepcopy(rec)
    broken["metrics"] = {"accuracy": 1.0}
    bad2 = _write_raw(tmp_path / "y" / "nometric.record.json", broken)
    with pytest.raises(BertbenchError) as err:
        load_records([tmp_path])
    assert "2 bad result records" in str(err.value)
    assert str(bad1) in str(err.value) and str(bad2) in str(err.value)


def test_load_records_missing_path(tmp_path):
    with pytest.raises(BertbenchError, match="no such file or directory"):
        load_records([tmp_path / "absent"])
    (tmp_path / "plain.json").write_text("{}")
    with pytest.raises(BertbenchError, match="not a result record"):
        load_records([tmp_path / "plain.json"])


def _pre(**kw) -> dict:
    base = {"objective": "mlm+nsp", "mask_ratio": 0.15, "mask_procedure": [80, 10, 10], "whole_word_mask": False}
    return {**base, **kw}


@pytest.mark.parametrize(
    "pretraining, label",
    [
        (_pre(), "mini MLM+NSP"),
        (_pre(objective="mlm"), "mini MLM (no NSP)"),
        ({"objective": "clm"}, "mini LTR (causal)"),
        (None, "mini random init"),
        (_pre(mask_procedure=[100, 0, 0]), "mini MLM+NSP mask 100/0/0"),
        (_pre(mask_procedure=[80, 0, 20]), "mini MLM+NSP mask 80/0/20"),
        (_pre(mask_procedure={"mask": 80, "same": 20, "random": 0}), "mini MLM+NSP mask 80/20/0"),
        (_pre(mask_procedure=[0.8, 0.1, 0.1]), "mini MLM+NSP"),  # fractions are read as percentages
        (_pre(whole_word_mask=True), "mini MLM+NSP wwm"),
        (_pre(mask_ratio=0.4), "mini MLM+NSP 40%"),
        (_pre(objective="mlm", mask_ratio=0.125, whole_word_mask=True, mask_procedure=[0, 0, 100]),
         "mini MLM (no NSP) mask 0/0/100 wwm 12.5%"),
    ],
)
def test_variant_label(pretraining, label):
    assert variant_label({"model": {"size": "mini", "pretraining": pretraining}}) == label


# --- older formats: one line naming the tag that still reads them ------------------------------------------


def test_a_version_1_record_is_one_error_naming_the_commit(tmp_path, rec):
    """Version 1 (objective mlm|clm plus nsp, held-out `*_std` keys) is read by the commit FORMATS_COMMIT only (a tag does not travel with a clone)."""
    rec["schema_version"] = 1
    rec["model"]["pretraining"].update(objective="mlm", nsp=True)
    path = _write_raw(tmp_path / "r.record.json", rec)
    with pytest.raises(BertbenchError) as err:
        read_record(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: ") and f"git checkout {FORMATS_COMMIT}" in message
    assert FORMATS_COMMIT == "37ba1e8"
    with pytest.raises(BertbenchError, match=FORMATS_COMMIT):  # and so in a folder of them
        load_records([tmp_path])


@pytest.mark.parametrize("older", [{"objective": "mlm", "nsp": True}, {"objective": "mlm+nsp", "heldout": {"mlm_loss_std": 4.0}}])
def test_a_summary_in_an_older_form_is_one_error_naming_the_tag(tmp_path, older):
    from bertbench.results import read_summary

    path = _write_raw(tmp_path / "summary.json", {"steps": 10, **older})
    with pytest.raises(BertbenchError) as err:
        read_summary(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: ") and f"git checkout {FORMATS_COMMIT}" in message


def test_mask_procedure_order_is_table8s():
    assert mask_procedure({"mask_procedure": [80, 0, 20]}) == (80.0, 0.0, 20.0)  # MASK, SAME, RND
    assert mask_procedure({"mask_procedure": {"random": 20, "same": 0, "mask": 80}}) == (80.0, 0.0, 20.0)
    assert mask_procedure({"mask_procedure": None}) is None


def test_record_filename_is_unique_per_split_setting_and_seed(rec):
    names = {record_filename(rec)}
    for mutate in (lambda r: r.update(seed=2), lambda r: r["finetune"].update(lr=3e-5),
                   lambda r: r["split"].update(eval="test", eval_kind="test"), lambda r: r.update(task_version=2),
                   lambda r: r["model"].update(fingerprint="sha256:other")):
        other = copy.deepcopy(rec)
        mutate(other)
        names.add(record_filename(other))
    assert len(names) == 6
    assert all(n.startswith("cola.") and n.endswith(RECORD_SUFFIX) for n in names)


def test_provenance_has_the_record_keys():
    prov = provenance()
    assert set(prov) == {"code_version", "library_versions", "hardware", "date"}
    assert prov["library_versions"]["python"] and "T" in prov["date"]
    assert "scikit-learn" in prov["library_versions"]  # metric libraries count too


def test_fixture_records_are_valid_for_the_real_task_registry():
    """The fixtures use the registry's task names and versions (except the deliberate rte v2)."""
    from tests.reference import load_tasks

    known = {name: spec.version for name, spec in load_tasks().items()}
    loaded = load_records([RECORDS])
    for r in loaded:
        if not (r.data["task"] == "rte" and r.data["task_version"] == 2):
            validate_record(r.data, str(r.path), known)


# --- typed outputs: one writer, one reader ------------------------------------------------------------


def test_the_record_class_is_the_schema_the_validator_checks():
    import dataclasses
    import typing

    from bertbench.results import _FINETUNE, _TOP, _TOP_OPTIONAL, FinetuneInfo, ResultRecord

    assert {f.name for f in dataclasses.fields(ResultRecord)} == set(_TOP) | set(_TOP_OPTIONAL)
    assert set(_FINETUNE) <= set(typing.get_type_hints(FinetuneInfo))
    written = {key for path in COMMITTED.rglob("*" + RECORD_SUFFIX) for key in read_record(path)["finetune"]}
    assert written <= set(typing.get_type_hints(FinetuneInfo)), written - set(typing.get_type_hints(FinetuneInfo))


def test_a_result_record_is_written_by_its_one_writer_without_machine_paths(tmp_path, rec):
    from bertbench.results import GRID_SUFFIX, ResultRecord

    rec["model"]["source"] = "/home/someone/runs/study/pretrain/mlm_nsp-ab12/checkpoint"
    rec["model"]["pretraining"]["run_dir"] = "/home/someone/runs/study/pretrain/mlm_nsp-ab12"
    record = ResultRecord(**{k: v for k, v in rec.items() if k != "schema_version"})
    path = write_record(tmp_path / record_filename(rec), record)
    text = path.read_text(encoding="utf-8")
    assert absolute_paths(json.loads(text)) == [] and "/home/someone" not in text and "pretrain_seed" not in text
    back = read_record(path)
    assert back["model"]["source"] == "pretrain/mlm_nsp-ab12/checkpoint"
    assert back["model"]["pretraining"]["run_dir"] == "pretrain/mlm_nsp-ab12"
    grid = write_record(tmp_path / f"x{GRID_SUFFIX}", record)  # a grid point: the same writer, never reported
    assert json.loads(grid.read_text()) == json.loads(text) and load_records([tmp_path]) != []


@pytest.mark.parametrize("seed, ok", [(3, True), (None, True), ("3", False), (2.5, False)])
def test_pretrain_seed_is_an_optional_integer_or_null(tmp_path, rec, seed, ok):
    rec = {**rec, "pretrain_seed": seed}
    if ok:
        assert read_record(write_record(tmp_path / record_filename(rec), rec))["pretrain_seed"] == seed
    else:
        with pytest.raises(BertbenchError, match="pretrain_seed must be an integer"):
            validate_record(rec)


def test_every_committed_record_still_reads():
    paths = sorted(COMMITTED.rglob("*" + RECORD_SUFFIX))
    assert len(paths) > 100 and all(read_record(p)["schema_version"] == SCHEMA_VERSION for p in paths)


def test_committed_summaries_are_in_todays_form_without_machine_paths():
    from bertbench.results import read_summary

    paths = sorted(COMMITTED.glob("*/pretrain/*/summary.json"))
    assert len(paths) == 49  # claims 14 (MLM+NSP and No NSP × 6 seeds, L2-H256 × 2), claims-3 12 (MLM+NSP and
    # mask 100/0/0 × 6 seeds), cpu-hour 7 (MLM+NSP × 3 seeds, No NSP and LTR × 2), cpu-hour-wide 3, cpu-quick 1,
    # masking 6 (3 ratios × 2 pre-training seeds), table6 6 (3 × 2)
    for path in paths:
        on_disk = json.loads(path.read_text(encoding="utf-8"))
        assert read_summary(path).to_json() == on_disk and absolute_paths(on_disk) == [], path


def test_the_summary_reader_keeps_no_machine_path_and_no_unknown_key(tmp_path):
    from bertbench.results import PretrainSummary, read_summary, write_summary

    written = {"objective": "mlm+nsp", "steps": 10, "tokens_seen": 1234, "run_dir": "/tmp/exp/x/pretrain/a-1",
               "heldout": {"mlm_loss_paper_masking": 4.0, "mlm_loss": 4.1},
               "data": {"cache": "/tmp/exp/cache/corpus-abc", "tokens": 5}, "an_unknown_key": 1}
    path = _write_raw(tmp_path / "summary.json", written)
    summary = read_summary(path)
    assert summary.objective == "mlm+nsp" and summary.heldout == {"mlm_loss_paper_masking": 4.0, "mlm_loss": 4.1}
    out = summary.to_json()
    assert absolute_paths(out) == [] and out["data"]["cache"] == "corpus-abc" and out["run_dir"] == "pretrain/a-1"
    assert "nsp" not in out and "an_unknown_key" not in out and "snapshot" not in out
    snap = PretrainSummary(objective="clm", steps=4, snapshot=True, data={"tokens": 1}, batch_size=8)
    assert snap.to_json()["snapshot"] is True and "data" not in snap.to_json() and "batch_size" not in snap.to_json()
    assert read_summary(write_summary(tmp_path / "s.json", snap)).to_json() == snap.to_json()
    for bad, message in (("{", "corrupt JSON"), ('{"steps": 1}', "no objective"), ('{"objective": "mlm_nsp"}', "is not one of")):
        with pytest.raises(BertbenchError, match=message):
            read_summary(_write_raw(tmp_path / "bad.json", bad))


def test_seeds_of_a_run_on_the_clock_are_one_procedure_whatever_steps_they_reached():
    """table6 pre-trains each size for 10 minutes: its two seeds stopped at different steps (tiny 8,768 and 8,142),
    which are an outcome there, not the procedure: the budget that ended them (`budget_seconds`) is."""
    from bertbench.results import pretraining_procedure

    records = load_records([COMMITTED / "table6"])
    assert {r.data["model"]["pretraining"]["budget_seconds"] for r in records} == {600.0}
    tiny = {r.data["pretrain_seed"]: r.data for r in records if r.data["model"]["size"] == "tiny"}
    assert tiny[1]["model"]["pretraining"]["steps"] != tiny[2]["model"]["pretraining"]["steps"]
    assert pretraining_procedure(tiny[1]) == pretraining_procedure(tiny[2])
    # a run that a step count ended keeps its steps in the procedure (masking: 2,000 steps, no budget)
    masking = [r.data for r in load_records([COMMITTED / "masking"]) if r.data["model"]["pretraining"]]
    assert masking and {r["model"]["pretraining"]["budget_seconds"] for r in masking} == {None}
    changed = copy.deepcopy(masking[0])
    changed["model"]["pretraining"]["steps"] += 1
    assert pretraining_procedure(changed) != pretraining_procedure(masking[0])
    other = copy.deepcopy(tiny[2])
    other["model"]["pretraining"]["budget_seconds"] = 900.0
    assert pretraining_procedure(other) != pretraining_procedure(tiny[2])  # another budget: another procedure


def test_two_pretrainings_are_one_procedure_exactly_when_only_their_seed_and_machine_differ():
    """A variant re-run with another lr, phase split or model shape into the same study folder must not pool
    with the first as its pre-training seeds: those settings are in procedure_fingerprint, which the record
    carries and pretraining_procedure keys on. A seed, a data-dir path, a device count or a report cadence is not."""
    import dataclasses

    from bertbench.config import OptimConfig, PhaseConfig, PretrainConfig
    from bertbench.results import pretraining_procedure
    from bertbench.training.pretrain_run import procedure_fingerprint

    shape = {"hidden_size": 128, "num_layers": 2, "initializer_range": 0.02}
    base = PretrainConfig(model_size="tiny", data=dataclasses.replace(PretrainConfig().data, corpus=["/a/data/wiki"]))
    same = [dataclasses.replace(base, seed=7, eval_every=5, log_every=1, devices="4", num_workers=2),
            dataclasses.replace(base, data=dataclasses.replace(base.data, corpus=["/elsewhere/wiki"], num_proc=3))]
    other = [dataclasses.replace(base, optim=OptimConfig(lr=2e-3)),
             dataclasses.replace(base, phases=[PhaseConfig(0.6, 32, 128), PhaseConfig(0.4, 128)]),
             dataclasses.replace(base, batch_size=64),
             dataclasses.replace(base, data=dataclasses.replace(base.data, mask_ratio=0.4)),
             dataclasses.replace(base, data=dataclasses.replace(base.data, corpus=["/a/data/books"]))]
    first = procedure_fingerprint(base, shape)
    assert all(procedure_fingerprint(cfg, shape) == first for cfg in same)
    assert len({first, *(procedure_fingerprint(cfg, shape) for cfg in other)}) == 1 + len(other)
    assert procedure_fingerprint(base, {**shape, "initializer_range": 0.05}) != first
    # batch_size is the global batch: the processes and nodes that share it do not make another procedure
    # (tests/test_pretrain_ddp.py runs 1 and 2), the global batch does
    phased = dataclasses.replace(base, batch_size=16, phases=[PhaseConfig(0.6, 32, 128), PhaseConfig(0.4, 128)])
    spread = dataclasses.replace(phased, devices="2", num_nodes=2, strategy="ddp")
    halves = dataclasses.replace(phased, batch_size=8, phases=[PhaseConfig(0.6, 32, 64), PhaseConfig(0.4, 128)])
    assert procedure_fingerprint(spread, shape) == procedure_fingerprint(phased, shape)
    assert procedure_fingerprint(halves, shape) != procedure_fingerprint(phased, shape)
    # accumulation cuts a device's share, not the step (tests/test_batches.py trains both)
    assert procedure_fingerprint(dataclasses.replace(phased, grad_accum=4), shape) == procedure_fingerprint(phased, shape)
    # a one-process run keeps the fingerprint its committed records carry: these are the values the code gave
    # before the batch became global (37ba1e8, procedure_fingerprint(cfg, shape, world_size=1))
    assert (first, procedure_fingerprint(phased, shape)) == ("sha256:453c734dfb769a74", "sha256:e3364d9b7b98ff42")

    records = load_records([COMMITTED / "cpu-hour"])
    seed1, seed2 = ([r.data for r in records if r.data.get("pretrain_seed") == s
                     and (r.data["model"]["pretraining"] or {}).get("objective") == "mlm+nsp"][0] for s in (1, 2))
    assert pretraining_procedure(seed1) == pretraining_procedure(seed2)  # older records, no fingerprint: as before
    for rec in (seed1, seed2):
        rec["model"]["pretraining"]["procedure_fingerprint"] = first
    assert pretraining_procedure(seed1) == pretraining_procedure(seed2)
    seed2["model"]["pretraining"]["procedure_fingerprint"] = procedure_fingerprint(other[0], shape)
    assert pretraining_procedure(seed1) != pretraining_procedure(seed2)
