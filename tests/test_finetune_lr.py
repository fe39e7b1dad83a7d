"""The fine-tuning rate follows the model's width (tiny 3e-4, mini 1e-4; the paper's 5e-5 from BERT-Base's width
up, and one `--lr` away for any model): at the paper's rate a tiny model predicts one class on every seed."""
from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.config import MODEL_SIZES
from bertbench.results import load_records
from bertbench.training.finetune_settings import default_lrs

runner = CliRunner()
FIXTURE_DATA = Path(__file__).parent / "fixtures" / "tasks" / "data"
VOCAB = Path(__file__).parent / "fixtures" / "corpus" / "vocab.txt"
PAPER = [5.0e-5, 4.0e-5, 3.0e-5, 2.0e-5]


def test_default_lrs_by_width():
    width = {size: h for size, (_, h, _) in MODEL_SIZES.items()}
    assert default_lrs(width["tiny"], PAPER) == [3.0e-4, 1.0e-4]
    assert default_lrs(width["mini"], PAPER) == [1.0e-4, 5.0e-5]
    for size in ("small", "medium", "base", "large"):
        assert default_lrs(width[size], PAPER) == PAPER, size


def _recorded_lrs(tmp_path, model: str, *flags: str) -> list[float]:
    out = tmp_path / model.replace(":", "-")
    r = runner.invoke(app, ["finetune", "--model", model, "--tokenizer", str(VOCAB), "--tasks", "rte", "--data-dir",
                            str(FIXTURE_DATA), "--max-steps", "1", "--seeds", "1", "--precision", "32", "--out", str(out),
                            *flags])
    assert r.exit_code == 0, r.output + repr(r.exception)
    records = load_records([out])
    grid = {lr for rec in records for lr in rec.data["finetune"].get("selection", {}).get("grid", [])}
    return sorted(grid or {rec.data["finetune"]["lr"] for rec in records})  # the grid swept, else the one rate


@pytest.mark.parametrize("model, flags, expected", [
    ("random:tiny", (), [3.0e-4]),
    ("random:mini", (), [1.0e-4]),
    ("random:small", (), [5.0e-5]),  # wider than mini: the task's own rate, the paper's
    ("random:tiny", ("--lr", "5e-5"), [5.0e-5]),  # the paper's rate, one flag away
    ("random:tiny", ("--grid", "heldout"), [1.0e-4, 3.0e-4]),
])
def test_the_recorded_rate_is_the_size_default_unless_given(tmp_path, model, flags, expected):
    assert _recorded_lrs(tmp_path, model, *flags) == expected


@pytest.mark.integration
@pytest.mark.slow
def test_tiny_on_rte_with_default_settings_does_not_predict_one_class(shared_data, tmp_path):
    """The whole RTE training set, the task's epochs and batch, the default rate, seed 1 (at the paper's rate
    every seed predicted one class)."""
    out = tmp_path / "rte"
    r = runner.invoke(app, ["finetune", "--model", "random:tiny", "--tasks", "rte", "--seeds", "1",
                            "--data-dir", str(shared_data), "--out", str(out)])
    assert r.exit_code == 0, r.output + repr(r.exception)
    (record,) = load_records([out])
    assert record.data["finetune"]["lr"] == 3.0e-4
    assert not record.data["extra"]["degenerate"], r.output
