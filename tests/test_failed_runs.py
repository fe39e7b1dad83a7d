"""A failed run leaves nothing half-made in --out: a pre-training that fails before its first checkpoint
removes what it made (config.yaml, .lock, a tokenizer; the folder itself if it made it), and a fine-tuning
that ran no task leaves no empty folder."""
from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from bertbench.cli import app

runner = CliRunner()
CORPUS = Path(__file__).parent / "fixtures" / "corpus"
FIXTURE_DATA = Path(__file__).parent / "fixtures" / "tasks" / "data"


def pretrain(out: Path):
    """A corpus that fails once the run has begun (config.yaml written, the folder locked): not UTF-8."""
    return runner.invoke(app, ["pretrain", "--corpus", str(CORPUS / "bad"), "--model-size", "tiny", "--tokenizer",
                               str(CORPUS / "vocab.txt"), "--max-steps", "1", "--out", str(out)])


def test_a_failed_pretraining_removes_the_folder_it_made(tmp_path):
    out = tmp_path / "runs" / "books"
    r = pretrain(out)
    assert r.exit_code == 2 and "not UTF-8" in r.output
    assert not out.exists()


def test_a_failed_pretraining_leaves_a_folder_it_did_not_make_as_it_was(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert pretrain(out).exit_code == 2
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_a_finetuning_that_ran_no_task_leaves_no_empty_folder(tmp_path):
    out = tmp_path / "results"
    r = runner.invoke(app, ["finetune", "--model", "random:tiny", "--tokenizer", str(CORPUS / "vocab.txt"),
                            "--tasks", "squad_v1", "--data-dir", str(FIXTURE_DATA / "glue"), "--source", "local",
                            "--out", str(out)])
    assert r.exit_code == 2 and "no task ran" in r.output
    assert not out.exists()
