"""What turns on where: the training step (static on CUDA, or wherever it is compiled), torch.compile
(`compile: auto` by measurements: training.step.step_choice), loader workers (2 on a GPU unless set)."""
from __future__ import annotations

import dataclasses
import json

import pytest

from bertbench.config import GPU_LOADER_WORKERS, PhaseConfig, PretrainConfig, loader_workers
from bertbench.training.step import COMPILE_PAYBACK, PLAUSIBLE_COMPILE_SECONDS, step_choice
from bertbench.errors import BertbenchError


def test_compile_on_and_off_are_as_set_and_the_static_step_runs_on_a_gpu_or_compiled():
    on, off = step_choice("on", "cpu", 10), step_choice("off", "cuda", 10**6, measured={"compile_seconds": 1.0})
    assert (on.compiled, on.static, on.reason) == (True, True, "compile: on")
    assert (off.compiled, off.static) == (False, True)  # a GPU takes the static step, compiled or not
    assert not step_choice("auto", "cpu", 10).static
    with pytest.raises(BertbenchError, match="compile 'yes': expected one of auto, on, off"):
        PretrainConfig(compile="yes")


def test_compile_auto_compiles_when_the_run_pays_the_compile_back():
    """planned steps × eager step time against COMPILE_PAYBACK × the measured compile time, both ways."""
    measured = {"compile_seconds": 30.0, "eager_step_seconds": 0.1}
    edge = COMPILE_PAYBACK * 30.0 / 0.1  # the steps whose eager time equals k × the compile time
    short, long = step_choice("auto", "cuda", int(edge), measured=measured), step_choice("auto", "cuda", int(edge) + 10, measured=measured)
    assert not short.compiled and short.static and long.compiled
    assert (long.planned_eager_seconds, long.compile_seconds, long.payback) == (round((int(edge) + 10) * 0.1, 2), 30.0, COMPILE_PAYBACK)
    assert long.reason == f"planned eager time 121 s > {COMPILE_PAYBACK:g} × compile time 30 s"
    assert "≤" in short.reason
    budget = step_choice("auto", "cuda", 1, budget_seconds=200.0, measured={"compile_seconds": 30.0})  # the budget is the time
    assert budget.compiled and budget.planned_eager_seconds == 200.0
    slower = step_choice("auto", "cpu", 10**6, measured={**measured, "compiled_step_seconds": 0.12})
    assert not slower.compiled and "no faster" in slower.reason


def test_compile_auto_without_measurements_says_what_it_did():
    lo, hi = PLAUSIBLE_COMPILE_SECONDS
    nothing = step_choice("auto", "cuda", 10**9)
    assert not nothing.compiled and "no eager step time measured yet" in nothing.reason
    eager = {"eager_step_seconds": 1.0}
    tiny = step_choice("auto", "cuda", int(COMPILE_PAYBACK * lo), measured=eager)
    middling = step_choice("auto", "cuda", int(COMPILE_PAYBACK * hi), measured=eager)
    huge = step_choice("auto", "cuda", int(COMPILE_PAYBACK * hi) + 1, measured=eager)
    assert not tiny.compiled and "too short to pay back any plausible compile" in tiny.reason
    assert not middling.compiled and "--compile on" in middling.reason
    assert huge.compiled and "this run measures it" in huge.reason and huge.compile_seconds is None


def test_the_choice_reads_earlier_measurements_and_a_resumed_run_keeps_its_own(tmp_path, monkeypatch):
    from bertbench.config import ModelConfig
    from bertbench.model.bert import BertForPreTraining
    from bertbench.runtime.provenance import hardware
    from bertbench.training import step_times
    from bertbench.training.step import choose_step

    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("torch.compile", lambda fn, **options: fn)  # what is chosen, not the compile (test_static_compile)
    model = BertForPreTraining(ModelConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32))
    cfg = PretrainConfig(max_steps=1000, precision="32")
    shape = step_times.shape_key(cfg.batch_size, cfg.data.max_seq_len, "32-true")
    kept = tmp_path / "run" / "step.json"
    first = choose_step(cfg, model, "cpu", "32-true", kept, resuming=False)
    assert not first.choice.compiled and first.forward is None and json.loads(kept.read_text())["compiled"] is False
    step_times.record(hardware(), cfg.model_size, shape, compile_seconds=1.0, eager_step_seconds=0.5,
                      compiled_step_seconds=0.25)
    assert step_times.measured(hardware(), cfg.model_size, shape) == {
        "compile_seconds": 1.0, "eager_step_seconds": 0.5, "compiled_step_seconds": 0.25}
    resumed = choose_step(cfg, model, "cpu", "32-true", kept, resuming=True)
    assert resumed.choice == first.choice  # decided once: newer measurements do not change a run halfway
    changed = choose_step(dataclasses.replace(cfg, compile="on"), model, "cpu", "32-true", kept, resuming=True)
    assert changed.choice.compiled  # ... but a compile setting changed on resume (RESUMABLE_CHANGES) is followed
    fresh = choose_step(cfg, model, "cpu", "32-true", tmp_path / "other" / "step.json", resuming=False)
    assert fresh.choice.compiled and fresh.choice.static and fresh.forward is not None  # 500 s > 4 × 1 s
    summary = fresh.summary()
    assert summary["shapes"] == "static" and summary["measured"]["compiled_step_seconds"] is None  # no step timed


def test_loader_workers_default_to_some_on_a_gpu_and_none_on_cpu():
    cfg = PretrainConfig()
    assert cfg.num_workers is None
    assert loader_workers(cfg, "cuda") == GPU_LOADER_WORKERS > 0 and loader_workers(cfg, "cpu") == 0
    assert loader_workers(dataclasses.replace(cfg, num_workers=3), "cpu") == 3
    assert loader_workers(dataclasses.replace(cfg, num_workers=0), "cuda") == 0
    clocked = PretrainConfig(budget_minutes=1.0, phases=[PhaseConfig(0.5, 32), PhaseConfig(0.5, 64)])
    assert loader_workers(clocked, "cuda") == 0  # a clock-switched phase happens in the main process
