"""What `compile: auto` decides from (training.step.step_choice): step and compile times measured by earlier runs here.

One small JSON file in the bertbench cache folder, `step_times.json`, readable and safe to delete (the next
run measures again). It is keyed first by the device (`provenance.hardware()`: the GPU's name, or the CPU's
model and cores), then by model size, since a compile's time depends on the graph and the machine, not on the
run; step times are kept per batch, length and precision under it:

    {"NVIDIA H100 80GB HBM3 ×1; host …": {"base": {"compile_seconds": 71.3,
        "steps": {"256x128 bf16-mixed": {"eager_step_seconds": 0.21, "compiled_step_seconds": 0.16}}}}}

Each finished run records what it measured (training.step.TrainingStep.record: a step time is a median over
the steps after warm-up, and a short run has none); the latest measurement replaces the one before.

A study whose pre-training steps come from a time budget (studies.budget) reads a calibrated step time instead,
under "calibrated" by shape and threads (`"32x128 bf16-mixed, 1 thread": {"step_seconds": 0.07, "measured_at":
…}`): measured once, when none is there, and never replaced by a run's, so that every study here converts its
budget from the same number (delete the file to measure again).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

FILE_NAME = "step_times.json"


def store_path() -> Path:
    from bertbench.data.corpus import default_cache_dir

    return default_cache_dir() / FILE_NAME


def shape_key(batch_size: int, seq_len: int, precision: str) -> str:
    return f"{batch_size}x{seq_len} {precision}"


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):  # none yet, or unreadable: measured again, never an error
        return {}
    return data if isinstance(data, dict) else {}


def measured(device: str, model_size: str, shape: str, path: Optional[Path] = None) -> dict[str, float]:
    """{compile_seconds, eager_step_seconds, compiled_step_seconds}: those measured for this device, model size
    and shape (batch, length, precision); absent keys were never measured."""
    size = _read(path or store_path()).get(device, {}).get(model_size, {})
    out = {"compile_seconds": size.get("compile_seconds"), **size.get("steps", {}).get(shape, {})}
    return {k: float(v) for k, v in out.items() if isinstance(v, (int, float)) and v > 0}


def record(device: str, model_size: str, shape: str, path: Optional[Path] = None, **seconds: Optional[float]) -> None:
    """Keep what a run measured (compile_seconds for the size; *_step_seconds for the shape); None: not measured."""
    from bertbench.runtime.files import atomic_write_text

    path = path or store_path()
    data = _read(path)
    size = data.setdefault(device, {}).setdefault(model_size, {})
    for key, value in seconds.items():
        if value is not None and value > 0:
            target = size if key == "compile_seconds" else size.setdefault("steps", {}).setdefault(shape, {})
            target[key] = round(value, 4)
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def _calibrated(data: dict, device: str, model_size: str) -> dict:
    return data.setdefault(device, {}).setdefault(model_size, {}).setdefault("calibrated", {})


def _calibration_key(shape: str, threads: int) -> str:
    return f"{shape}, {threads} thread(s)"


def calibration(device: str, model_size: str, shape: str, threads: int, path: Optional[Path] = None) -> Optional[dict]:
    """{step_seconds, measured_at} kept by `keep_calibration` for this device, size, shape and thread count; or None."""
    entry = _calibrated(_read(path or store_path()), device, model_size).get(_calibration_key(shape, threads))
    ok = isinstance(entry, dict) and isinstance(entry.get("step_seconds"), (int, float)) and entry["step_seconds"] > 0
    return entry if ok else None


def keep_calibration(device: str, model_size: str, shape: str, threads: int, seconds: float,
                     path: Optional[Path] = None) -> dict:
    from bertbench.runtime.files import atomic_write_text
    from bertbench.runtime.provenance import now_iso

    path = path or store_path()
    data = _read(path)
    entry = {"step_seconds": round(seconds, 5), "measured_at": now_iso()}
    _calibrated(data, device, model_size)[_calibration_key(shape, threads)] = entry
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return entry
