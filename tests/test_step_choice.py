"""A step choice that cannot be misled (issue 54): step times are medians of steps after warm-up (a short run
records none), `compile: auto` on a CPU compiles only where a compiled step was measured faster than the eager
one, every pre-training of a study takes the study's step, and the ETA leaves a compile's first step out."""
from __future__ import annotations

import dataclasses
import json

import pytest

from bertbench.config import PretrainConfig
from bertbench.training.step import (MIN_TIMED_STEPS, WARMUP_STEPS, StepTimer, TrainingStep, choose_step,
                                     fixed_step, step_choice, study_compile)


def test_after_two_step_runs_fill_the_cache_an_8000_step_cpu_pretraining_takes_the_eager_step(tmp_path, monkeypatch):
    import torch

    from bertbench.config import ModelConfig
    from bertbench.model.bert import BertForPreTraining
    from bertbench.runtime.provenance import hardware
    from bertbench.training import step_times
    from tests.test_pretrain import TINY, pretrain, write_corpus

    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(torch, "compile", lambda fn, *a, **k: fn)  # the compiled step's path, without a C++ build
    corpus = write_corpus(tmp_path / "docs")
    for setting in ("off", "on"):  # what a quick start and the tests leave behind: 2-step runs, both steps
        pretrain(["--corpus", str(corpus), "--max-steps", "2", "--objective", "mlm", *TINY, "--compile", setting,
                  "--out", str(tmp_path / setting)], monkeypatch)
    shape = step_times.shape_key(8, 32, "32-true")
    measured = step_times.measured(hardware(), "tiny", shape)
    assert not any(k.endswith("_step_seconds") for k in measured), measured  # start-up is no step time
    cfg = PretrainConfig(model_size="tiny", batch_size=8, max_steps=8000, precision="32",
                         data=dataclasses.replace(PretrainConfig().data, max_seq_len=32))
    model = BertForPreTraining(ModelConfig.from_size("tiny", vocab_size=200))
    step = choose_step(cfg, model, "cpu", "32-true", tmp_path / "long" / "step.json", resuming=False)
    assert not step.choice.compiled and step.forward is None, step.choice.reason
    assert "measured faster" in step.choice.reason


def test_on_cpu_auto_compiles_only_where_the_compiled_step_was_measured_faster():
    eager_only = {"eager_step_seconds": 5.6, "compile_seconds": 30.0}  # issue 54's cache: 8,000 × 5.6 s planned
    assert not step_choice("auto", "cpu", 8000, measured=eager_only).compiled
    assert step_choice("auto", "cuda", 8000, measured=eager_only).compiled  # a GPU still weighs the plan
    faster = {**eager_only, "compiled_step_seconds": 4.0}
    slower = {**eager_only, "compiled_step_seconds": 7.0}
    assert step_choice("auto", "cpu", 8000, measured=faster).compiled
    assert not step_choice("auto", "cpu", 8000, measured=slower).compiled
    assert not step_choice("auto", "cpu", 2, measured=faster).compiled  # ... and the run pays the compile back
    assert step_choice("on", "cpu", 2).compiled and not step_choice("off", "cuda", 10**6, measured=faster).compiled


def test_a_step_time_is_the_median_after_warm_up_and_a_short_session_has_none():
    timer = StepTimer()
    timer.started(0.0)
    t = 0.0
    for i in range(WARMUP_STEPS + MIN_TIMED_STEPS - 1):
        t += 100.0 if i == 0 else (1.0 if i % 2 else 3.0)  # a compile in the first, noise after
        timer.step_ended(t)
    assert timer.median() is None and timer.first_step_seconds == 100.0  # one timed step short
    for _ in range(MIN_TIMED_STEPS):
        t += 2.0
        timer.step_ended(t)
    assert timer.median() == 2.0  # neither the compile nor the warm-up's steps, nor the run's mean (t / steps)


def test_the_eta_leaves_out_a_first_step_that_compiled():
    step = TrainingStep(step_choice("on", "cpu", 100), device="here", shape="8x32 32-true")
    step.compile_seconds = 59.5  # measured at the first call
    step.timer.started(0.0)
    for t in (60.0, 61.0, 62.0):  # a 60 s first step (the compile), then 1 s steps
        step.timer.step_ended(t)
    assert step.eta_pace(3, 62.0) == (2, 2.0)  # two steps in two seconds
    step.compile_seconds = None  # eager: every step counts
    assert step.eta_pace(3, 62.0) == (3, 62.0)
    assert fixed_step(static=True).static and fixed_step(static=True).forward is None


def test_every_pretraining_of_a_study_takes_the_step_its_first_one_decided(tmp_path, monkeypatch):
    from bertbench.runtime.provenance import hardware
    from bertbench.training import step_times

    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    cfg = PretrainConfig(model_size="tiny", batch_size=8, max_steps=8000, precision="32")
    first = study_compile(cfg, tmp_path)
    assert first.compile == "off" and json.loads((tmp_path / "step.json").read_text())["compile"] == "off"
    shape = step_times.shape_key(8, cfg.data.max_seq_len, "32-true")  # a later run measures a faster compiled step
    step_times.record(hardware(), "tiny", shape, compile_seconds=1.0, eager_step_seconds=1.0, compiled_step_seconds=0.5)
    assert step_choice("auto", "cpu", 8000, measured=step_times.measured(hardware(), "tiny", shape)).compiled
    later = study_compile(dataclasses.replace(cfg, objective="mlm"), tmp_path)
    assert later.compile == "off"  # the study's step, not the newer measurement's
    assert study_compile(dataclasses.replace(cfg, compile="on"), tmp_path).compile == "on"  # a preset's own setting


@pytest.mark.parametrize("steps", [2])
def test_a_short_run_records_its_compile_but_no_step_time(tmp_path, monkeypatch, steps):
    step = TrainingStep(step_choice("on", "cpu", steps), device="here", shape="8x32 32-true")
    step.compile_seconds = 3.0
    step.timer.started(0.0)
    for t in range(1, steps + 1):
        step.timer.step_ended(float(t))
    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path))
    step.record("tiny")
    from bertbench.training import step_times

    assert step_times.measured("here", "tiny", "8x32 32-true") == {"compile_seconds": 3.0}
    assert step.summary()["measured"]["compiled_step_seconds"] is None


def test_a_run_past_warm_up_records_the_median_of_its_later_steps(tmp_path, monkeypatch):
    from bertbench.runtime.provenance import hardware
    from bertbench.training import step_times
    from tests.test_pretrain import TINY, pretrain, write_corpus

    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    steps = WARMUP_STEPS + MIN_TIMED_STEPS + 1
    pretrain(["--corpus", str(write_corpus(tmp_path / "docs")), "--max-steps", str(steps), "--objective", "mlm", *TINY,
              "--compile", "off", "--set", "log_every=5", "--out", str(tmp_path / "run")], monkeypatch)
    measured = json.loads((tmp_path / "run" / "summary.json").read_text())["step"]["measured"]
    assert measured["timed_steps"] == steps - WARMUP_STEPS and measured["eager_step_seconds"] > 0
    cached = step_times.measured(hardware(), "tiny", step_times.shape_key(8, 32, "32-true"))
    assert cached == {"eager_step_seconds": measured["eager_step_seconds"]}


def test_a_studys_pretraining_stage_trains_with_the_studys_step(tmp_path, monkeypatch):
    from bertbench.studies import plan
    from bertbench.training import pretrain_run

    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    seen = []
    monkeypatch.setattr(pretrain_run, "pretrain", lambda cfg, run_dir, resume: seen.append(cfg.compile))
    study = tmp_path / "study"
    for name in ("mlm_nsp", "ltr"):
        run_dir = study / "pretrain" / f"{name}-0123"
        run_dir.mkdir(parents=True)
        plan._pretrain_stage(PretrainConfig(model_size="tiny", max_steps=8000), run_dir, "0123")
    assert seen == ["off", "off"] and json.loads((study / "step.json").read_text())["compile"] == "off"
