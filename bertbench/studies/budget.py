"""A study's pre-training steps from a time budget (a preset's `step_budget_minutes`), decided once
(docs/usage.md says how, and where the decision is kept). Unlike a wall-clock schedule (`budget_minutes`), whose
steps depend on how busy the host was that day, the steps are fixed before the first stage: rounded down to a
multiple of STEP_MULTIPLE (a recalibration's noise then rarely moves them), from each phase's step time as
calibrated on this host (training.step_times: CALIBRATION_STEPS eager steps after training.step.WARMUP_STEPS, on
the thread share a stage gets), weighted by the phase's share of the steps. The decision is kept in the study's
folder (BUDGET_FILE), where every later invocation takes it as it is. On Slurm the jobs run on other hosts: the
budget is not applied there.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from bertbench.config import PretrainConfig
from bertbench.studies.keys import read_json
from bertbench.training.step import BUDGET_FILE

STEP_MULTIPLE = 500
# The planned step is the calibrated one. A study's own step (its loop, real batches trimmed of padding,
# evaluations, checkpoints, a fine-tuning on the other core) measured 0.98x the calibration with AVX512-BF16 (bf16)
# and 0.90-1.06x under AVX2 emulation (fp32); a factor fitted to one host put the other at the demo's 15-minute
# line (docs/performance.md, "The demo's minutes").
CALIBRATION_STEPS = 20


def budget_steps(seconds: float, step_seconds: float, cap: int, multiple: int = STEP_MULTIPLE) -> int:
    """The steps of `step_seconds` that fit `seconds`, rounded down to `multiple` (one at least), at most `cap`."""
    return min(cap, max(multiple, int(seconds / step_seconds) // multiple * multiple))


def study_steps(minutes: float, cfg: PretrainConfig, tokenizer: str, out: Path, threads: int,
                echo: Callable[[str], None]) -> dict[str, Any]:
    """The study's step decision: the one kept in `out` for this budget and cap, else decided now and kept."""
    kept = out / BUDGET_FILE
    decision = read_json(kept)
    if not (isinstance(decision, dict) and decision.get("budget_minutes") == minutes
            and decision.get("max_steps") == cfg.max_steps and isinstance(decision.get("steps"), int)):
        from bertbench.runtime.files import atomic_write_json

        decision = decide(minutes, cfg, tokenizer, threads)
        atomic_write_json(kept, decision)
    echo(f"study: pre-training {decision['steps']:,} steps: {decision['reason']} ({kept})")
    return decision


def decide(minutes: float, cfg: PretrainConfig, tokenizer: str, threads: int) -> dict[str, Any]:
    """Convert `minutes` into steps from this host's calibrated step times (calibrated now where none is kept)."""
    import torch

    from bertbench.model.tokenizer import WordPieceTokenizer
    from bertbench.runtime.provenance import hardware, resolve_precision
    from bertbench.training import step_times

    device_type = "cuda" if cfg.accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available() else "cpu"
    precision, device = resolve_precision(cfg.precision, device_type), hardware()
    phases = [(p.batch_size or cfg.batch_size, p.max_seq_len, p.fraction) for p in cfg.phases] or [
        (cfg.batch_size, cfg.data.max_seq_len, 1.0)]
    vocab = WordPieceTokenizer.load(Path(tokenizer)).vocab_size
    measured = []
    for batch, seq, fraction in phases:
        shape = step_times.shape_key(batch, seq, precision)
        entry = step_times.calibration(device, cfg.model_size, shape, threads) or step_times.keep_calibration(
            device, cfg.model_size, shape, threads, calibrate(cfg, vocab, batch, seq, precision, threads, device_type))
        measured.append({"shape": shape, "fraction": fraction, **entry})
    step = sum(m["fraction"] * m["step_seconds"] for m in measured) / sum(m["fraction"] for m in measured)
    steps = budget_steps(minutes * 60, step, cfg.max_steps)
    why = (f"{minutes:g} min ÷ {step * 1000:.1f} ms a step (calibrated on {device}, {threads} thread(s)), "
           f"rounded down to {STEP_MULTIPLE}, at most max_steps {cfg.max_steps:,}")
    return {"budget_minutes": minutes, "max_steps": cfg.max_steps, "steps": steps, "device": device, "threads": threads,
            "phases": measured, "planned_minutes": round(steps * step / 60, 1), "reason": why}


def calibrate(cfg: PretrainConfig, vocab_size: int, batch: int, seq: int, precision: str, threads: int,
              device_type: str = "cpu", steps: int = CALIBRATION_STEPS) -> float:
    """The median seconds of a pre-training step of `cfg`'s model at this shape, on `threads` threads."""
    import statistics
    import time

    import torch

    from bertbench.benchmarks.pretrain import causal_batches, ours_forward, synthetic_batches, train_step
    from bertbench.config import trains_nsp
    from bertbench.model.bert import BertForPreTraining
    from bertbench.training.optim import make_adamw
    from bertbench.training.pretrain_run import model_config_for
    from bertbench.training.step import WARMUP_STEPS

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        model_cfg = model_config_for(cfg, vocab_size)
        nsp = trains_nsp(cfg.objective)
        model = BertForPreTraining(model_cfg, nsp=nsp).to(device_type).train()
        batches = [{k: v.to(device_type) for k, v in b.items()}
                   for b in (causal_batches if model_cfg.causal else synthetic_batches)(model_cfg, 4, batch, seq)]
        for b in batches:  # a model without the NSP head is given no NSP labels
            b["nsp_labels"] = b.get("nsp_labels") if nsp else None
        static = device_type == "cuda"
        run = train_step(model, make_adamw(model, cfg.optim, device_type), lambda m, b: ours_forward(m, b, static),
                         batches, bf16=precision == "bf16-mixed", device_type=device_type)
        seconds = []
        for i in range(WARMUP_STEPS + steps):
            t0 = time.perf_counter()
            run(i)
            seconds.append(time.perf_counter() - t0)
        return statistics.median(seconds[WARMUP_STEPS:])
    finally:
        torch.set_num_threads(before)
