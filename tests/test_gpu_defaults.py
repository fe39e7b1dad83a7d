"""What turns on where: the static step (on CUDA, or wherever it is compiled), torch.compile (`compile: auto`
only where COMPILE_WINS lists the device), loader workers (2 on a GPU unless set)."""
from __future__ import annotations

import dataclasses

import pytest

from bertbench.config import (COMPILE_WINS, GPU_LOADER_WORKERS, PhaseConfig, PretrainConfig, loader_workers,
                              resolve_compile)
from bertbench.errors import BertbenchError


def test_compile_is_on_where_asked_or_measured_faster():
    assert resolve_compile("on", "cpu") and not resolve_compile("off", "cuda")
    for device in ("cpu", "cuda"):
        assert resolve_compile("auto", device) == (device in COMPILE_WINS)
    with pytest.raises(BertbenchError, match="compile 'yes': expected one of auto, on, off"):
        PretrainConfig(compile="yes")


def test_loader_workers_default_to_some_on_a_gpu_and_none_on_cpu():
    cfg = PretrainConfig()
    assert cfg.num_workers is None
    assert loader_workers(cfg, "cuda") == GPU_LOADER_WORKERS > 0 and loader_workers(cfg, "cpu") == 0
    assert loader_workers(dataclasses.replace(cfg, num_workers=3), "cpu") == 3
    assert loader_workers(dataclasses.replace(cfg, num_workers=0), "cuda") == 0
    clocked = PretrainConfig(budget_minutes=1.0, phases=[PhaseConfig(0.5, 32), PhaseConfig(0.5, 64)])
    assert loader_workers(clocked, "cuda") == 0  # a clock-switched phase happens in the main process


@pytest.mark.parametrize("device,compile,static,compiled", [
    ("cpu", "auto", False, False), ("cuda", "off", True, False), ("cpu", "on", True, True)])
def test_the_static_step_trains_on_a_gpu_and_wherever_it_is_compiled(device, compile, static, compiled):
    from bertbench.config import ModelConfig
    from bertbench.model.bert import BertForPreTraining
    from bertbench.training.pretrain_run import _static_step

    model = BertForPreTraining(ModelConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32))
    _static_step(PretrainConfig(compile=compile), model, device)
    assert model.static_shapes == static and (model.compiled_step is not None) == compiled
