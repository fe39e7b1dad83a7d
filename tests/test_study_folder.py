"""A study folder is the study's own: `finetune --out` refuses another model's folder (unless `--append`), the
report never shows two variants under one label, the CSV calls an external model `external`, and "Epochs" says
what ran when --max-steps cut it short."""
from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.report.long_rows import long_rows
from bertbench.report.model import collect
from bertbench.report.render.terminal import print_short
from bertbench.report.tables.protocol import protocol_table
from bertbench.results import LoadedRecord, load_records, validate_record
from bertbench.training.finetune_run import _check_one_model, resolve_model_source

from tests.record_factory import record

runner = CliRunner()
FIXTURE_DATA = Path(__file__).parent / "fixtures" / "tasks" / "data"
VOCAB = Path(__file__).parent / "fixtures" / "corpus" / "vocab.txt"


def finetune(model: str, out: Path, *args: str, tokenizer: Path = VOCAB):
    return runner.invoke(app, ["finetune", "--model", model, "--tokenizer", str(tokenizer), "--max-steps", "1",
                               "--seeds", "1", "--precision", "32", "--batch-size", "1", "--data-dir", str(FIXTURE_DATA), "--tasks", "rte", "--out", str(out), *args])


def test_finetune_refuses_a_folder_of_another_models_records_unless_append(tmp_path):
    out = tmp_path / "study" / "results"
    assert finetune("random:tiny", out / "tiny").exit_code == 0
    _check_one_model(out, resolve_model_source("random:tiny", str(VOCAB), FIXTURE_DATA))  # the same model: its own
    other_vocab = tmp_path / "vocab.txt"  # random:tiny over another vocabulary: another model of the same name
    other_vocab.write_text(VOCAB.read_text() + "[extra]\n")
    r = finetune("random:tiny", out, tokenizer=other_vocab)  # an existing study's results/
    assert r.exit_code == 2
    [line] = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    n = len(VOCAB.read_text().splitlines())
    assert line == (f"error: --out {out}: holds records of another model, random:tiny (random:tiny:vocab{n}) "
                    f"({next(out.rglob('*.record.json'))}); this one is random:tiny (random:tiny:vocab{n + 1}): choose "
                    "another --out, or pass --append to mix them")
    assert len(load_records([out])) == 1  # nothing was added
    r = finetune("random:tiny", out, "--append", tokenizer=other_vocab)
    assert r.exit_code == 0, r.output
    assert len({rec.data["model"]["fingerprint"] for rec in load_records([out])}) == 2
    cut = load_records([out / "rte"])[0].data["finetune"]
    assert (cut["epochs_trained"], cut["epochs"]) == (0.5, 3)  # 1 step of an epoch's 2 (2 examples, 1 a batch)


def _as(rec: LoadedRecord, path: str, **changes) -> LoadedRecord:
    data = copy.deepcopy(rec.data)
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for key in parents:
            node = node[key]
        node[last] = value
    return dataclasses.replace(rec, path=Path(path), data=validate_record(data))


def test_two_models_under_one_label_are_told_apart_in_the_terminal():
    """Two checkpoints that both read "tiny MLM+NSP" get their fingerprint in the label; the terminal printed
    "[ab12cd34]" as a rich markup tag, i.e. nothing, and showed two identical rows."""
    base = record("rte", 1, "0101", "0110")
    recs = [_as(base, "/a/rte.record.json", model__fingerprint="sha256:ab12cd34ef"),
            _as(base, "/b/rte.record.json", model__fingerprint="sha256:cd34ef56ab")]
    data = collect(recs)
    assert [v.label for v in data.variants] == ["tiny MLM+NSP [sha256:ab12cd34]", "tiny MLM+NSP [sha256:cd34ef56]"]
    console = Console(width=200, record=True)
    print_short(data, console=console)
    text = console.export_text()
    assert "tiny MLM+NSP [sha256:ab12cd34]" in text and "tiny MLM+NSP [sha256:cd34ef56]" in text


def test_csv_kind_says_external_for_a_model_bertbench_did_not_pretrain():
    base = record("rte", 1, "0101", "0110")
    external = {"format": "huggingface", "name": "hfbert", "name_or_path": None, "architectures": None,
                "transformers_version": None, "weights_file": None,
                "shape": {"layers": 2, "hidden": 128, "heads": 2, "intermediate": 512, "vocab": 100, "max_position": 64}}
    recs = [base, _as(base, "/hf/rte.record.json", model__fingerprint="sha256:ff", model__pretraining=None,
                      model__external=external)]
    kinds = {row["column"]: row["kind"] for row in long_rows(collect(recs)) if row["kind"] != "paper"}
    assert kinds == {"tiny MLM+NSP": "ours", "HF hfbert, L2-H128": "external"}


def test_epochs_says_what_ran_when_max_steps_cut_it():
    base = record("rte", 1, "0101", "0110")
    full = _as(base, "/a/rte.record.json", finetune__epochs_trained=3.0)
    cut = _as(base, "/b/rte.record.json", model__fingerprint="sha256:b0", finetune__max_steps=10,
              finetune__epochs_trained=0.8)
    rows = {row[0]: row[3] for row in protocol_table(collect([full, cut])).rows}
    assert rows == {"tiny MLM+NSP [sha256:a0]": "3", "tiny MLM+NSP [sha256:b0]": "0.8 of 3 (max steps 10)"}
