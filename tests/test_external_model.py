"""External models (issue 40): a model bertbench did not pre-train is recorded and reported as what it is.

A random-weight Hugging Face folder (`BertForMaskedLM(BertConfig(...)).save_pretrained`) is fine-tuned for two
steps on the fixture RTE: its record carries the folder's own facts and no pre-training facts the folder does not
state (none of our defaults: objective, masking), its `source` is the folder as the user gave it, and the report
labels it by its name and shape, keeps it out of the rows of our variants (Tables 5, 6, 8, the differences, the
paper's claims) and gives it a section of its own in the terminal table.
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.errors import BertbenchError
from bertbench.report.labels import variant_label
from bertbench.results import LoadedRecord, load_records, validate_record

from record_factory import variant

runner = CliRunner()
TESTS = Path(__file__).resolve().parent
FIXTURE_DATA = TESTS / "fixtures" / "tasks" / "data"
VOCAB = TESTS / "fixtures" / "corpus" / "vocab.txt"
OUR_RECORDS = TESTS / "fixtures" / "records" / "main"
LABEL = "HF hfbert, L2-H128"
# what our own pre-training writes into a record, and an external one must never invent
PRETRAINING_FACTS = ("objective", "mask_ratio", "mask_procedure", "whole_word_mask", "tokens_seen", "mlm+nsp",
                     "data_fingerprint\": \"", "run_dir", "heldout")


def _invoke(*args):
    r = runner.invoke(app, list(map(str, args)))
    assert r.exit_code == 0, r.output + repr(r.exception)
    return r


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory):
    """(work folder, its results folder): `finetune --model hfbert` run from the folder holding hfbert/."""
    transformers = pytest.importorskip("transformers")
    work = tmp_path_factory.mktemp("external")
    cfg = transformers.BertConfig(vocab_size=sum(1 for _ in VOCAB.open()), hidden_size=128, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=256)
    torch.manual_seed(0)
    transformers.BertForMaskedLM(cfg).save_pretrained(work / "hfbert")
    transformers.BertTokenizerFast(vocab=str(VOCAB)).save_pretrained(work / "hfbert")
    with contextlib.chdir(work):  # the folder as a user names it: relative to where they stand
        _invoke("finetune", "--model", "hfbert", "--tasks", "rte", "--data-dir", FIXTURE_DATA, "--max-steps", "2",
                "--seeds", "1,2", "--out", "results", "--precision", "32")
    return work, work / "results"


def test_the_record_of_an_hf_folder_states_only_the_folders_facts(hf_run):
    work, results = hf_run
    records = load_records([results])
    assert len(records) == 2
    for rec in records:
        model = rec.data["model"]
        assert model["pretraining"] is None and "pretrain_seed" not in rec.data
        assert model["source"] == "hfbert"  # as the user gave it, not a cut-down machine path
        ext = model["external"]
        assert ext["format"] == "huggingface" and ext["name"] == "hfbert"
        assert ext["architectures"] == ["BertForMaskedLM"] and ext["transformers_version"]
        assert ext["shape"] == {"layers": 2, "hidden": 128, "heads": 2, "intermediate": 256,
                                "vocab": sum(1 for _ in VOCAB.open()), "max_position": 512}
        assert ext["name_or_path"] is None  # a config made in code states none
        assert ext["weights_file"] == "model.safetensors" and model["fingerprint"].startswith("sha256:")
        model_text = json.dumps(model)
        assert not [fact for fact in PRETRAINING_FACTS if fact in model_text], model_text
        assert variant_label(rec.data) == LABEL


def _beside_ours(hf_run) -> list:
    """Our tiny MLM+NSP, MLM (no NSP) and random init, and the external model, on the tasks of Tables 5, 6 and 8
    (MNLI, SST-2): the external's records are the factory's with the model block its fine-tuning wrote."""
    _, results = hf_run
    model = load_records([results])[0].data["model"]
    gold = "0101010101" * 3
    seeds = ["0111010101" * 3, "0101110101" * 3, "0101011101" * 3]
    ours = [r for task in ("mnli", "sst2") for objective in ("mlm+nsp", "mlm", None)
            for r in variant(task, objective, seeds, gold)]
    theirs = [LoadedRecord(Path(f"/external/{r.path.name}"), validate_record({**r.data, "model": model}))
              for task in ("mnli", "sst2") for r in variant(task, "mlm+nsp", seeds, gold)]
    return ours + theirs


def test_the_report_labels_it_by_name_and_keeps_it_out_of_our_variants_rows(hf_run):
    from bertbench.report.build import build_report
    from bertbench.report.model import collect
    from bertbench.report.tables.ablations import table5, table6, table8
    from bertbench.report.tables.provenance import provenance_table
    from bertbench.report.render.terminal import short_table
    from bertbench.report.tables.claims import claims_table
    from bertbench.report.tables.paired import differences_table

    data = collect(_beside_ours(hf_run))  # the same shape as our tiny MLM+NSP, on the same rows
    labels = [v.label for v in data.variants]
    assert labels == ["tiny MLM+NSP", "tiny MLM (no NSP)", "tiny random init", LABEL]  # its own column, after ours
    [external] = [v for v in data.variants if v.label == LABEL]
    assert not external.random_init and external.objective == "external" and external.size == "tiny"
    for table in (table5(data), table6(data), table8(data)):
        ours = [row[0] for row in table.rows if not row[0].startswith(("paper", "Turc"))]
        assert "tiny MLM+NSP" in ours and LABEL not in ours, (table.key, ours)
    differences = [row[3] for row in differences_table(data).rows]
    assert differences and not any(LABEL in label for label in differences), differences
    assert not any(LABEL in cell for row in claims_table(data).rows for cell in row)
    [prov] = [row for row in provenance_table(data).rows if row[0] == LABEL]
    assert prov[1] == "unknown (external)" and prov[2] == "–"
    assert any(note.startswith(LABEL + ": an external model") and "hfbert" in note
               for note in provenance_table(data).notes)
    main = build_report(data).tables[0]
    assert LABEL in main.header and any(note.startswith("External models (" + LABEL) for note in main.notes)
    short = short_table(data)
    assert short.labels[short.n_ours:short.n_ours + short.n_external] == (LABEL,)
    assert LABEL not in short.labels[:short.n_ours]


def test_the_report_cli_shows_the_external_model_by_its_name(hf_run, tmp_path):
    _, results = hf_run
    r = _invoke("report", results, "--out", tmp_path / "mine.md")
    assert LABEL in r.output and "MLM+NSP" not in r.output.split("Ours:")[0]
    text = (tmp_path / "mine.md").read_text()
    assert f"| {LABEL} |" in text or f"| {LABEL} " in text


def test_random_init_records_are_unchanged(tmp_path):
    """`random:<size>`: no external block, pretraining null, the random-init control column as before."""
    from bertbench.report.model import collect
    from bertbench.report.tables.main import main_table

    out = tmp_path / "out"
    _invoke("finetune", "--model", "random:tiny", "--tokenizer", VOCAB, "--tasks", "rte", "--data-dir", FIXTURE_DATA,
            "--max-steps", "1", "--seeds", "1", "--out", out, "--precision", "32")
    [rec] = load_records([out])
    model = rec.data["model"]
    assert model["pretraining"] is None and "external" not in model and model["source"] == "random:tiny"
    assert model["fingerprint"] == f"random:tiny:vocab{sum(1 for _ in VOCAB.open())}"
    data = collect([rec])
    assert data.variants[0].random_init and data.variants[0].label == "tiny random init"
    assert "tiny random init" in main_table(data).header


def _external_record(rec: dict, **external) -> dict:
    model = {**rec["model"], "pretraining": None, "external": {
        "format": "huggingface", "name": "hfbert", "name_or_path": None, "architectures": None,
        "transformers_version": None, "weights_file": "model.safetensors",
        "shape": {"layers": 2, "hidden": 128, "heads": 2, "intermediate": 512, "vocab": 600, "max_position": 512},
        **external}}
    return {**rec, "model": model}


def test_an_external_block_is_validated(tmp_path):
    rec = json.loads(next(OUR_RECORDS.rglob("*.record.json")).read_text())
    good = _external_record(rec)
    assert validate_record(good)["model"]["external"]["name"] == "hfbert"
    with pytest.raises(BertbenchError, match="model.pretraining must be null beside model.external"):
        validate_record({**good, "model": {**good["model"], "pretraining": rec["model"]["pretraining"]}})
    with pytest.raises(BertbenchError, match="model.external.shape.layers"):
        validate_record(_external_record(rec, shape={"hidden": 128}))
    with pytest.raises(BertbenchError, match="colour"):
        validate_record(_external_record(rec, colour="blue"))


@pytest.mark.parametrize("heads, label", [(2, "HF hfbert, L2-H128"), (4, "HF hfbert, L2-H128-A4")])
def test_the_label_says_the_heads_only_when_they_are_unusual(heads, label):
    rec = json.loads(next(OUR_RECORDS.rglob("*.record.json")).read_text())
    ext = _external_record(rec)
    ext["model"]["external"]["shape"]["heads"] = heads
    assert variant_label(ext) == label
    ext["model"]["external"]["format"] = "bertbench"
    assert variant_label(ext) == label.replace("HF ", "external ")


def test_a_folder_is_kept_as_given_and_never_as_a_machine_path(tmp_path, monkeypatch):
    from bertbench.paths import PROJECT_ROOT, portable_folder

    data = tmp_path / "data"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    assert portable_folder("models/hfbert", data) == "models/hfbert"  # relative: as given
    assert portable_folder(str(data / "models" / "hfbert"), data) == "{data_dir}/models/hfbert"
    assert portable_folder(str(PROJECT_ROOT / "models" / "hfbert"), data) == "models/hfbert"
    assert portable_folder(str(tmp_path / "cwd" / "work" / "hfbert"), data) == "work/hfbert"  # the working folder
    assert portable_folder(str(tmp_path / "home" / "m" / "hfbert"), data) == "~/m/hfbert"
    assert portable_folder(str(tmp_path / "elsewhere" / "hfbert"), data) == "hfbert"  # its name alone
    monkeypatch.chdir("/")  # standing at the root makes no path relative to it
    assert portable_folder(str(tmp_path / "elsewhere" / "hfbert"), data) == "hfbert"


def test_a_user_claim_may_name_the_external_model_by_its_label(hf_run):
    from bertbench.report.model import collect
    from bertbench.claims import Claims, parse_claim
    from bertbench.report.claims import evaluate

    def evaluate_user_claims(data, claims):
        return evaluate(data, Claims({}, ()), claims)

    data = collect(_beside_ours(hf_run))
    [outcome] = evaluate_user_claims(data, [parse_claim(f"{LABEL} − mlm+nsp on sst2 > 0")])
    assert (outcome.a.label, outcome.b.label) == (LABEL, "tiny MLM+NSP")  # our model of its size
    assert outcome.diff is not None and outcome.diff.estimate.estimate == 0.0  # the factory's same predictions
    # "mlm+nsp" names our variants only: the external model is no MLM+NSP of ours
    outcomes = evaluate_user_claims(data, [parse_claim("mlm+nsp − random on sst2 > 0")])
    assert [(o.a.label, o.b.label) for o in outcomes] == [("tiny MLM+NSP", "tiny random init")]


def test_an_import_and_a_named_hf_folder_state_where_they_came_from(hf_run, tmp_path, monkeypatch):
    """`convert --from-hf` makes a bertbench folder without a pre-training summary: external too, and it says what it
    imported; a config.json's own `_name_or_path` is kept, as portably as the folder itself."""
    from bertbench.config import ModelConfig
    from bertbench.model.external import external_facts

    work, _ = hf_run
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    _invoke("convert", "--from-hf", work / "hfbert", "--out", "imported")
    _invoke("finetune", "--model", "imported", "--tasks", "rte", "--data-dir", FIXTURE_DATA, "--max-steps", "1",
            "--seeds", "1", "--out", "results", "--precision", "32")
    [rec] = load_records([tmp_path / "results"])
    model = rec.data["model"]
    assert model["pretraining"] is None and model["source"] == "imported"
    assert model["external"]["format"] == "bertbench" and model["external"]["name_or_path"] == "hfbert"
    assert variant_label(rec.data) == "external imported, L2-H128"
    named = tmp_path / "named"
    named.mkdir()
    for f in (work / "hfbert").iterdir():
        (named / f.name).write_bytes(f.read_bytes())
    config = json.loads((named / "config.json").read_text())
    (named / "config.json").write_text(json.dumps({**config, "_name_or_path": str(tmp_path / "home" / "bert-x")}))
    monkeypatch.chdir(named)  # the working folder no longer holds the home folder
    facts = external_facts(named, str(named), ModelConfig(vocab_size=600, hidden_size=128, num_layers=2, num_heads=2,
                                                           intermediate_size=256), None, tmp_path / "data")
    assert facts["name_or_path"] == "~/bert-x" and facts["name"] == "named"
