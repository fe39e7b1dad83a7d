"""Fine-tuning a Hugging Face BERT folder end to end (issue 25, item 1): a `convert --to-hf` export and a
folder written by transformers' `save_pretrained`. Neither carries a pre-training summary, so the record has no
pre-training block (`model.pretraining: null`) and the folder's own facts (`model.external`), and `report` reads
it, labelled by the folder's name."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.results import load_records

runner = CliRunner()
FIXTURE_DATA = Path(__file__).parent / "fixtures" / "tasks" / "data"
VOCAB = Path(__file__).parent / "fixtures" / "corpus" / "vocab.txt"


def _invoke(*args):
    r = runner.invoke(app, list(map(str, args)))
    assert r.exit_code == 0, r.output + repr(r.exception)
    return r


def _export_of_our_checkpoint(tmp_path: Path) -> Path:
    from bertbench.model.checkpoint import save_checkpoint
    from bertbench.config import ModelConfig
    from bertbench.model.bert import BertForPreTraining
    from bertbench.model.tokenizer import WordPieceTokenizer

    tok = WordPieceTokenizer.from_vocab(VOCAB)
    torch.manual_seed(0)
    model = BertForPreTraining(ModelConfig(vocab_size=tok.vocab_size, hidden_size=32, num_layers=2, num_heads=2,
                                           intermediate_size=64))
    save_checkpoint(tmp_path / "ckpt", model, tok, run_config={})
    _invoke("convert", "--to-hf", tmp_path / "ckpt", "--out", tmp_path / "hf-export")
    return tmp_path / "hf-export"


def _save_pretrained_folder(tmp_path: Path, transformers, model_class: str) -> Path:
    cfg = transformers.BertConfig(vocab_size=sum(1 for _ in VOCAB.open()), hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=64)
    folder = tmp_path / f"hf-{model_class}"
    torch.manual_seed(0)
    getattr(transformers, model_class)(cfg).save_pretrained(folder)
    transformers.BertTokenizerFast(vocab=str(VOCAB)).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("kind", ["convert-to-hf", "BertForPreTraining", "BertModel"])
def test_finetune_an_hf_folder_writes_a_record_that_report_reads(tmp_path, kind):
    transformers = pytest.importorskip("transformers")
    folder = (_export_of_our_checkpoint(tmp_path) if kind == "convert-to-hf"
              else _save_pretrained_folder(tmp_path, transformers, kind))
    assert not (folder / "summary.json").exists()  # what makes it "an HF folder": no pre-training summary
    out = tmp_path / "results"
    _invoke("finetune", "--model", folder, "--tasks", "rte", "--data-dir", FIXTURE_DATA, "--max-steps", "2",
            "--seeds", "1", "--out", out, "--precision", "32")
    [record] = load_records([out])
    # nothing is known of how the folder was trained (issue 40): no pre-training block, the folder's own facts
    model = record.data["model"]
    assert model["pretraining"] is None and model["external"]["name"] == folder.name
    assert model["external"]["shape"]["layers"] == 2 and model["external"]["shape"]["hidden"] == 32
    report = _invoke("report", out, "--out", tmp_path / "board" / "mine.md")
    label = f"HF {folder.name}, L2-H32-A2"
    assert "rte" in report.output and label in report.output and "MLM+NSP" not in report.output.split("Ours:")[0]
    assert "rte" in (tmp_path / "board" / "mine.md").read_text()
