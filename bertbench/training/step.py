"""The training step a pre-training takes: decided once before it starts (`step_choice`, like precision), compiled
when chosen, timed while it runs, and kept (summary.json's `step`; RUN/step.json for a resume).

The run builds one `TrainingStep` (`choose_step`) and hands it to whatever needs it: the Lightning module (which
forward to call, and with static shapes or not), the loader (static batches or not), the progress lines (the
ETA) and the summary (what was decided and measured). Nothing reads it back out of another object.

How `compile: auto` decides and what a step time is (a median after `WARMUP_STEPS`; none with fewer than
`MIN_TIMED_STEPS` after them): docs/performance-gpu.md, "torch.compile".
"""
from __future__ import annotations

import statistics
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from bertbench.config import PretrainConfig

# `compile: auto` compiles when the run's planned eager training time exceeds COMPILE_PAYBACK × the compile's
# time. Compiling saves a share of each step, not all of it (fusion of the elementwise ops around the GEMMs:
# MosaicBERT and NVIDIA's BERT report ~1.3×, a quarter of the step), so a compile of C seconds is paid back
# after ~4·C seconds of eager steps; a run shorter than that loses time to it.
COMPILE_PAYBACK = 4.0
# With no compile time measured yet for the device and model size, what a full-graph compile of forward and
# backward plausibly takes: from ~20 s (a tiny model) to ~10 min (BERT-Large, cold caches). A run too short to pay
# back the least compiles nothing; one long enough to pay back the most compiles (and so measures it).
PLAUSIBLE_COMPILE_SECONDS = (20.0, 600.0)
WARMUP_STEPS = 10  # steps of a session not timed: the first holds any compile, the next few the first calls' set-up
MIN_TIMED_STEPS = 10  # timed steps a median needs; fewer: nothing is recorded
TIMED_WINDOW = 4096  # the latest timed steps kept (a long run's median is over its recent steps, memory bounded)
STEP_FILE = "step.json"  # the run's step choice, kept so that a resumed run takes the step its first session took
STUDY_STEP_FILE = "step.json"  # in a study's folder: the `compile` its pre-trainings with `auto` all take
BUDGET_FILE = "budget.json"  # in a study's folder and its run folders: the steps a time budget bought (studies.budget)


@dataclass
class StepChoice:
    static: bool  # the static step: every shape fixed per phase, no host sync (a GPU's, and any compiled step's)
    compiled: bool  # the step under torch.compile
    reason: str  # why, in words, with the numbers that decided it
    planned_eager_seconds: Optional[float] = None  # planned steps × the measured eager step time (or the budget)
    compile_seconds: Optional[float] = None  # the compile time measured for this device and model size
    payback: float = COMPILE_PAYBACK


def step_choice(setting: str, device_type: str, planned_steps: int, budget_seconds: Optional[float] = None,
                measured: Optional[dict] = None) -> StepChoice:
    """`compile: on|off` as set; `auto` by measurements. measured: what earlier runs on this device measured
    (training.step_times): compile_seconds (this model size), eager_step_seconds and compiled_step_seconds (this
    model, batch, length and precision); any may be missing. A budget is the planned time itself. Why a CPU
    never compiles on a plan alone: docs/performance-gpu.md, "torch.compile"."""
    m = measured or {}
    eager, compiled_step, compile_s = m.get("eager_step_seconds"), m.get("compiled_step_seconds"), m.get("compile_seconds")
    planned = budget_seconds or (planned_steps * eager if eager else None)
    if setting != "auto":
        on, why = setting == "on", f"compile: {setting}"
    elif eager and compiled_step and compiled_step >= eager:
        on, why = False, f"the compiled step was measured no faster here ({compiled_step:.4g} s vs eager {eager:.4g} s)"
    elif device_type != "cuda" and not (eager and compiled_step):
        on, why = False, ("on CPU, auto compiles only where a compiled step was measured faster than the eager one of "
                          "this shape here: " + ("no compiled step" if eager else "no step") + " measured yet (a run "
                          f"of ≥ {WARMUP_STEPS + MIN_TIMED_STEPS} steps with --compile on measures it)")
    else:
        on, why = _payback(planned, compile_s)
    return StepChoice(device_type == "cuda" or on, on, why, None if planned is None else round(planned, 2),
                      None if compile_s is None else round(compile_s, 2))


def _payback(planned: Optional[float], compile_s: Optional[float]) -> tuple[bool, str]:
    """(compile?, why) from the planned eager time against the compile's (measured, or its plausible range)."""
    lo, hi = PLAUSIBLE_COMPILE_SECONDS
    if planned is None:
        return False, "no eager step time measured yet for this device, model, batch and length: eager (this run measures it)"
    if compile_s is None:
        on = planned > COMPILE_PAYBACK * hi
        return on, (f"no compile time measured yet for this device and model size; planned eager time {planned:.0f} s "
                    + (f"> {COMPILE_PAYBACK:g} × {hi:.0f} s, the slowest plausible compile: compiled (this run measures it)" if on else
                       f"≤ {COMPILE_PAYBACK:g} × {lo:.0f} s: too short to pay back any plausible compile" if planned <= COMPILE_PAYBACK * lo else
                       f"≤ {COMPILE_PAYBACK:g} × {hi:.0f} s: eager (`--compile on` once measures the compile)"))
    on = planned > COMPILE_PAYBACK * compile_s
    return on, f"planned eager time {planned:.4g} s {'>' if on else '≤'} {COMPILE_PAYBACK:g} × compile time {compile_s:.4g} s"


class StepTimer:
    """One session's step times: the interval between consecutive step ends on the training clock. The first
    step's is kept apart (it holds any compile: the ETA leaves it out); the median is over the steps after
    WARMUP_STEPS, and None until MIN_TIMED_STEPS of them ran."""

    def __init__(self) -> None:
        self.steps = 0
        self.last_end: Optional[float] = None
        self.first_step_seconds: Optional[float] = None
        self.timed: deque[float] = deque(maxlen=TIMED_WINDOW)

    def started(self, seconds: float) -> None:
        """The session's training clock when its first step begins."""
        self.last_end, self.steps = seconds, 0

    def step_ended(self, seconds: float) -> None:
        self.steps += 1
        if self.last_end is not None:
            took = seconds - self.last_end
            if self.steps == 1:
                self.first_step_seconds = took
            elif self.steps > WARMUP_STEPS:
                self.timed.append(took)
        self.last_end = seconds

    def median(self) -> Optional[float]:
        return statistics.median(self.timed) if len(self.timed) >= MIN_TIMED_STEPS else None


class TrainingStep:
    """The step a run takes (its StepChoice), its compiled forward if any, and the times it measures."""

    def __init__(self, choice: StepChoice, device: str, shape: Optional[str], forward: Optional[Callable] = None):
        self.choice, self.device, self.forward = choice, device, forward
        self.shape = shape  # the one shape its times are of (batch × length, precision); None: several (phases)
        self.compile_seconds: Optional[float] = None  # measured at the compiled step's first call
        self.timer = StepTimer()

    @property
    def static(self) -> bool:
        return self.choice.static

    def eta_pace(self, step: int, training_seconds: float) -> tuple[int, float]:
        """(steps, seconds) to take the pace from: without the first step when it held a compile."""
        first = self.timer.first_step_seconds
        if self.compile_seconds is not None and first is not None and step > 1:
            return step - 1, training_seconds - first
        return step, training_seconds

    def summary(self) -> dict[str, Any]:
        """summary.json's `step`: what was decided and why, and what this run measured."""
        median = self.timer.median()
        kind = "compiled_step_seconds" if self.choice.compiled else "eager_step_seconds"
        return {"shapes": "static" if self.choice.static else "dynamic", **asdict(self.choice),
                "measured": {"device": self.device, "shape": self.shape,
                             "compile_seconds": None if self.compile_seconds is None else round(self.compile_seconds, 4),
                             kind: None if median is None else round(median, 4),
                             "timed_steps": len(self.timer.timed)}}

    def record(self, model_size: str) -> None:
        """Keep what this run measured for the next run's choice (training.step_times): the compile time, and the
        median step time where the run trained one shape long enough to measure it."""
        from bertbench.training import step_times

        measured = self.summary()["measured"]
        seconds = {k: v for k, v in measured.items() if k.endswith("_seconds")}
        if self.shape is None:
            seconds = {"compile_seconds": seconds["compile_seconds"]}
        step_times.record(self.device, model_size, self.shape or "", **seconds)


def fixed_step(static: bool) -> TrainingStep:
    """An eager step decided by the caller, not by measurements (a benchmark's side, a module built alone)."""
    return TrainingStep(StepChoice(static, False, "set by the caller"), device="", shape=None)


def cuda_step_floor(model_cfg, batch_size: int, seq_len: int, mask_ratio: float, precision: str,
                    peak: Optional[dict]) -> Optional[float]:
    """The least time one eager training step can take on this GPU: the FLOPs it executes ÷ the datasheet's dense
    peak (bf16 under bf16 autocast, else fp32), as if at 100% MFU. `compile: auto` decides from it where nothing
    has been measured on this device yet (choose_step): without it a first long run on a GPU stayed eager
    for its whole life. A floor, so it can only understate the eager time, never talk a short run into a compile.
    None where the GPU's peak is not known (runtime.devices.gpu_peak)."""
    if not peak:
        return None
    from bertbench.model.bert import flops_per_token

    # the masked positions go through the vocabulary and the last layer (the static step's masked-only head)
    flops = flops_per_token(model_cfg, seq_len, predicted_share=mask_ratio, last_layer_share=mask_ratio)
    gflops = peak["bf16"] if "bf16" in precision else peak["fp32"]
    return flops * batch_size * seq_len / (gflops * 1e9)


FLOOR_REASON = "its FLOPs ÷ this GPU's datasheet peak: nothing measured here yet"


def with_step_floor(measured: Optional[dict], device_type: str, model_cfg, cfg, precision: str
                    ) -> tuple[Optional[dict], Optional[float]]:
    """`measured` (training.step_times) with cuda_step_floor as the eager step time where a GPU has none yet, and
    the floor (None where it was not used)."""
    if device_type != "cuda" or (measured or {}).get("eager_step_seconds"):
        return measured, None
    from bertbench.runtime.devices import gpu_peak

    floor = cuda_step_floor(model_cfg, cfg.batch_size, cfg.data.max_seq_len, cfg.data.mask_ratio, precision,
                            gpu_peak(device_type))
    return (measured, None) if floor is None else ({**(measured or {}), "eager_step_seconds": floor}, floor)


def choose_step(cfg: PretrainConfig, model, device_type: str, precision: str, kept: Path, resuming: bool) -> TrainingStep:
    """Decide the training step once (step_choice) from what earlier runs measured on this device
    (training.step_times), and keep it in `kept`: a resumed run with the same `compile` setting reads it back
    rather than deciding again (newer measurements must not change the step halfway, or resume would not be
    exact); a `compile` changed on resume (RESUMABLE_CHANGES) decides anew. Compile the step when chosen (at
    its first call, which measures the compile)."""
    import json

    from bertbench.model.bert import compile_step
    from bertbench.runtime.devices import first_process
    from bertbench.runtime.files import atomic_write_text
    from bertbench.runtime.progress import say
    from bertbench.runtime.provenance import hardware
    from bertbench.training import step_times

    device, shape = hardware(), step_times.shape_key(cfg.batch_size, cfg.data.max_seq_len, precision)
    measured = step_times.measured(device, cfg.model_size, shape)
    budget = cfg.budget_minutes * 60 if cfg.budget_minutes else None
    measured, floor = with_step_floor(measured, device_type, model.cfg, cfg, precision)  # a GPU, nothing measured
    saved = json.loads(kept.read_text()) if resuming and kept.is_file() else {}
    if saved.pop("setting", None) == cfg.compile:
        choice = StepChoice(**saved)
    else:
        choice = step_choice(cfg.compile, device_type, cfg.max_steps, budget, measured)
        if floor is not None and cfg.compile == "auto":
            choice.reason = f"eager step ≥ {floor:.4g} s ({FLOOR_REASON}); {choice.reason}"
        atomic_write_text(kept, json.dumps({"setting": cfg.compile, **asdict(choice)}, indent=1) + "\n")
    step = TrainingStep(choice, device, None if cfg.phases else shape)
    if step.choice.compiled:
        def compiled(seconds: float) -> None:
            step.compile_seconds = seconds
            if first_process():  # every rank compiles its own step; rank 0 says so
                say(f"pretrain: compiled the training step in {seconds:.1f} s (its first call)")

        step.forward = compile_step(model, compiled)
    return step


def study_compile(cfg: PretrainConfig, study_dir: Path) -> PretrainConfig:
    """`cfg` with the `compile` every pre-training of a study takes: a setting of `auto` is resolved once per study
    (by its first pre-training to start, from the measurements then) and kept in STUDY_STEP_FILE, so that arms of
    one study never train with different steps because runs between them changed the measurements. An explicit
    on or off is the preset's and stays. Said once, when decided; the study's file says which."""
    import dataclasses
    import json
    import os
    import tempfile

    from bertbench.runtime.progress import say
    from bertbench.runtime.provenance import hardware, resolve_precision
    from bertbench.training import step_times

    if cfg.compile != "auto":
        return cfg
    kept = study_dir / STUDY_STEP_FILE
    if not kept.is_file():
        import torch

        device_type = "cuda" if cfg.accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available() else "cpu"
        precision = resolve_precision(cfg.precision, device_type)
        shape = step_times.shape_key(cfg.batch_size, cfg.data.max_seq_len, precision)
        budget = cfg.budget_minutes * 60 if cfg.budget_minutes else None
        choice = step_choice("auto", device_type, cfg.max_steps, budget, step_times.measured(hardware(), cfg.model_size, shape))
        text = json.dumps({"compile": "on" if choice.compiled else "off", "reason": choice.reason}, indent=1) + "\n"
        fd, tmp = tempfile.mkstemp(dir=study_dir, prefix=".step-")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        try:
            os.link(tmp, kept)  # the first pre-training to decide wins; one deciding at once reads its decision
            say(f"study: every pre-training with compile auto takes the {'compiled' if choice.compiled else 'eager'} "
                f"step ({choice.reason}; {kept})")
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    return dataclasses.replace(cfg, compile=json.loads(kept.read_text())["compile"])
