"""`--devices N` means what exists here (runtime.devices): N GPUs, N CPU processes said once, or one line."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from bertbench.cli import app
from bertbench.errors import BertbenchError
from bertbench.runtime import devices as dev


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(dev, "gpus_here", lambda: 0)


@pytest.mark.parametrize("accelerator, devices, note", [
    ("auto", "2", "note: --devices 2: no GPU here, so 2 CPU processes will be used"),
    ("cpu", 4, "note: --devices 4: accelerator cpu, so 4 CPU processes will be used"),
    ("auto", "1", None), ("auto", "auto", None), ("cpu", "-1", None),
])
def test_without_a_gpu_n_devices_are_n_cpu_processes_said_once(no_gpu, accelerator, devices, note):
    plan = dev.plan_devices(accelerator, devices)
    assert (plan.kind, plan.note) == ("cpu", note)


@pytest.mark.parametrize("accelerator, devices, message", [
    ("cuda", "2", r"^--devices 2: asks for 2 GPU\(s\), and this machine has 0; give --accelerator auto or cpu"),
    ("gpu", "[0, 1]", r"^--devices \[0, 1\]: asks for 2 GPU\(s\), and this machine has 0"),
    ("auto", "0,1", r"^--devices 0,1: names GPU ids, and this machine has no GPU; give a count"),
])
def test_gpus_that_are_not_here_are_refused_in_one_line(no_gpu, accelerator, devices, message):
    with pytest.raises(BertbenchError, match=message):
        dev.plan_devices(accelerator, devices)


def test_more_gpus_than_are_here_are_refused_and_those_here_are_gpus(monkeypatch):
    monkeypatch.setattr(dev, "gpus_here", lambda: 2)
    assert dev.plan_devices("auto", "2") == dev.DevicePlan(2, "cuda")
    with pytest.raises(BertbenchError, match=r"^--devices 4: asks for 4 GPU\(s\), and this machine has 2$"):
        dev.plan_devices("auto", "4")


def test_run_and_pretrain_refuse_gpus_that_are_not_here_before_any_work(no_gpu, tmp_path, monkeypatch):
    """Both commands: one line, exit 2, nothing written (the preset's or the recipe's accelerator asks for cuda)."""
    import yaml

    from bertbench.studies.preset import list_presets

    raw = yaml.safe_load(list_presets()["smoke"].read_text())
    raw["name"], raw["pretrain"]["accelerator"] = "on-gpus", "cuda"
    preset = tmp_path / "on-gpus.yaml"
    preset.write_text(yaml.safe_dump(raw))
    r = CliRunner().invoke(app, ["run", "--preset", str(preset), "--out", str(tmp_path / "study"), "--devices", "2"])
    assert r.exit_code == 2 and r.output.strip().splitlines()[-1] == (
        "error: --devices 2: asks for 2 GPU(s), and this machine has 0; give --accelerator auto or cpu to run on "
        "CPU processes"), r.output
    assert not (tmp_path / "study").exists()
    r = CliRunner().invoke(app, ["pretrain", "--recipe", "tiny-debug", "--accelerator", "cuda", "--devices", "2",
                                 "--out", str(tmp_path / "run")])
    assert r.exit_code == 2 and "error: --devices 2: asks for 2 GPU(s), and this machine has 0" in r.output, r.output
    assert not (tmp_path / "run").exists()
