"""A study's time budget becomes its pre-trainings' steps once (studies.budget): from the host's kept calibration,
the same steps on a rerun (in the same folder whatever was measured since; in a fresh one from the same store),
and what decided them is in the study's folder, the run folder, its summary and every record's pre-training."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bertbench.studies import budget as study_budget
from bertbench.studies.budget import budget_steps, study_steps

FIXTURE_VOCAB = Path(__file__).parent / "fixtures" / "corpus" / "vocab.txt"


def test_the_steps_that_fit_are_rounded_down_to_the_multiple_and_capped():
    assert budget_steps(540, 0.08, 8000) == 6500  # 6,750 fit
    assert budget_steps(540, 0.05, 8000) == 8000  # 10,800 fit: the cap
    assert budget_steps(60, 1.0, 8000) == 500  # 60 fit: one multiple at least
    assert budget_steps(60, 1.0, 100) == 100


def _quick(minutes: float = 9.0):
    """cpu-quick's pre-training config (two phases: 128 × 32, then 32 × 128) in fp32, and its preset with a budget."""
    from bertbench.studies.preset import VariantSpec, load_preset, variant_config

    preset = dataclasses.replace(load_preset("cpu-quick"), step_budget_minutes=minutes)
    return preset, dataclasses.replace(variant_config(preset, VariantSpec("base"), Path("data")), precision="32")


def _store(seconds: tuple[float, float]) -> None:
    from bertbench.runtime.provenance import hardware
    from bertbench.training import step_times

    for shape, s in zip(("128x32 32-true", "32x128 32-true"), seconds):
        step_times.keep_calibration(hardware(), "tiny", shape, 1, s)


def test_a_budget_is_converted_once_from_the_kept_calibration_and_a_rerun_takes_the_same_steps(tmp_path, monkeypatch):
    from bertbench.studies.plan import Planner
    from bertbench.training.step import BUDGET_FILE

    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(study_budget, "calibrate", lambda *a, **k: pytest.fail("calibrated with a calibration kept"))
    preset, cfg = _quick()
    _store((0.10, 0.20))  # this host's calibration: 0.6 × 100 ms + 0.4 × 200 ms = 140 ms a step
    first = study_steps(9.0, cfg, str(FIXTURE_VOCAB), tmp_path / "a", 1, lambda line: None)
    assert first["steps"] == budget_steps(540, 0.14, 8000) == 3500
    assert [p["step_seconds"] for p in first["phases"]] == [0.1, 0.2] and first["threads"] == 1
    assert all(p["measured_at"] for p in first["phases"]) and json.loads((tmp_path / "a" / BUDGET_FILE).read_text()) == first
    # a fresh folder on the same host: the same store, the same decision
    assert study_steps(9.0, cfg, str(FIXTURE_VOCAB), tmp_path / "b", 1, lambda line: None) == first
    # a later calibration (here: one twice as slow) does not move a study that has decided ...
    _store((0.20, 0.40))
    assert study_steps(9.0, cfg, str(FIXTURE_VOCAB), tmp_path / "a", 1, lambda line: None) == first
    # ... and another budget is decided anew
    assert study_steps(6.0, cfg, str(FIXTURE_VOCAB), tmp_path / "a", 1, lambda line: None)["steps"] == 1000  # 360 s ÷ 280 ms
    # every pre-training of the plan trains the decided steps, keyed on them, and its stage carries the decision
    (tmp_path / "a" / BUDGET_FILE).unlink()
    _store((0.10, 0.20))
    decided = study_steps(9.0, cfg, str(FIXTURE_VOCAB), tmp_path / "a", 1, lambda line: None)
    planned = [s for s in Planner(preset, tmp_path / "data", tmp_path / "a", str(FIXTURE_VOCAB), lambda line: None,
                                  budget=decided).plan() if s.name.startswith("pretrain ")]
    assert [(s.args[0].max_steps, s.args[3]) for s in planned] == [(3500, decided)]
    plain = [s for s in Planner(preset, tmp_path / "data", tmp_path / "a", str(FIXTURE_VOCAB),
                                lambda line: None).plan() if s.name.startswith("pretrain ")]
    assert plain[0].args[0].max_steps == 8000 and plain[0].args[1] != planned[0].args[1]  # another key


def test_a_host_with_no_calibration_measures_once_and_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    calls = []
    monkeypatch.setattr(study_budget, "calibrate", lambda *a, **k: calls.append(a[2:4]) or 0.14)
    _, cfg = _quick()
    first = study_steps(9.0, cfg, str(FIXTURE_VOCAB), tmp_path / "a", 1, lambda line: None)
    assert calls == [(128, 32), (32, 128)] and first["steps"] == 3500
    assert study_steps(9.0, cfg, str(FIXTURE_VOCAB), tmp_path / "b", 1, lambda line: None) == first
    assert len(calls) == 2  # kept: never measured again here


def test_a_calibration_times_the_pretraining_step_on_the_stages_threads(monkeypatch):
    import torch

    from bertbench.config import PretrainConfig

    before = torch.get_num_threads()
    cfg = PretrainConfig(model_size="tiny", precision="32")
    assert 0 < study_budget.calibrate(cfg, 200, 4, 16, "32-true", 1, steps=2) < 5
    assert 0 < study_budget.calibrate(dataclasses.replace(cfg, objective="mlm"), 200, 4, 16, "32-true", 1, steps=2)
    assert torch.get_num_threads() == before


def test_the_decision_is_in_the_run_folder_its_summary_and_the_records_pretraining(tmp_path, monkeypatch):
    from bertbench.config import PretrainConfig
    from bertbench.results import read_summary
    from bertbench.studies.plan import _pretrain_stage
    from bertbench.training.step import BUDGET_FILE
    from tests.test_pretrain import write_corpus

    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BERTBENCH_PROGRESS", "0")
    base = PretrainConfig()
    cfg = PretrainConfig(model_size="tiny", tokenizer_vocab_size=200, batch_size=8, max_steps=2, precision="32",
                         compile="off", eval_every=0, eval_batches=2, checkpoint_every=0, log_every=1,
                         data=dataclasses.replace(base.data, corpus=[str(write_corpus(tmp_path / "docs"))], max_seq_len=32))
    decision = {"budget_minutes": 9.0, "max_steps": 8000, "steps": 2, "phases": [{"step_seconds": 0.07}]}
    run_dir = tmp_path / "study" / "pretrain" / "mlm_nsp-0123"
    _pretrain_stage(cfg, run_dir, "0123", decision)
    assert json.loads((run_dir / BUDGET_FILE).read_text()) == decision
    summary = read_summary(run_dir / "summary.json")
    assert summary.schedule["steps_budget"] == decision and summary.steps == 2
    assert summary.pretraining_info()["steps_budget"] == decision  # what a fine-tuning record copies
    assert read_summary(run_dir / "checkpoint" / "summary.json").steps_budget == decision


def test_auto_precision_under_an_avx2_cap_is_fp32_as_on_an_avx2_host():
    """ATEN_CPU_CAPABILITY=avx2 (how docs/performance.md emulates an AVX2-only host) leaves no native bf16."""
    code = "from bertbench.runtime.provenance import resolve_precision; print(resolve_precision('auto', 'cpu'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"ATEN_CPU_CAPABILITY": "avx2", "PATH": "/usr/bin:/bin"}).stdout.strip()
    assert out == "32-true"
