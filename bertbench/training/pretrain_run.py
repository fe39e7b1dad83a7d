"""`bertbench pretrain` end to end: tokenizer → data → Lightning fit → run directory.

Run directory:
    config.yaml        the resolved PretrainConfig
    tokenizer/         the vocabulary used
    checkpoints/last.ckpt   Lightning checkpoint (model, optimiser, scheduler, RNG, step) for --resume auto
    checkpoint/        the bertbench checkpoint (load_checkpoint / convert --to-hf / finetune --model)
    metrics.csv        step, tokens, lr, losses, held-out metrics, tokens/s
    summary.json       what the run was and what it reached (read by finetune records and the report)
    step.json          the training step chosen (static or not, compiled or not, and why), kept for a resume
    budget.json        in a study with a step budget: the steps it bought (studies.budget), also in the summary
"""
from __future__ import annotations

import itertools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Optional

from bertbench.config import (
    DATA_SPEED_ONLY, DataConfig, ModelConfig, PretrainConfig, is_causal, is_masked, keyed_data_fields, limits_text,
    save_config, trains_nsp,
)
from bertbench.errors import BertbenchError
from bertbench.runtime.devices import first_process
from bertbench.runtime.faults import fault_point
from bertbench.training.step import BUDGET_FILE


# ----------------------------------------------------------------------------------------------
# Pieces


def load_or_train_tokenizer(cfg: PretrainConfig, out_dir: Path, resuming: bool = False):
    """The run's tokenizer. The copy in RUN/tokenizer is reused only by a resumed run (its checkpoint was
    trained with it and its config was checked unchanged); a fresh run in a folder that a failed run left
    behind builds its own, so a stale tokenizer (other corpus, other size) is never silently reused."""
    from bertbench.model.tokenizer import WordPieceTokenizer

    saved = out_dir / "tokenizer"
    if resuming and (saved / "vocab.txt").is_file():
        return WordPieceTokenizer.load(saved)
    if cfg.tokenizer and cfg.tokenizer != "train":
        tok = WordPieceTokenizer.load(Path(cfg.tokenizer))
    elif (built := _prebuilt_vocab(cfg)) is not None:  # `data build` trained it on this corpus already
        from bertbench.runtime.progress import say

        tok, folder = built
        say(f"pretrain: tokenizer: the vocabulary `data build` trained on this corpus ({tok.vocab_size:,} pieces, {folder})")
    else:
        tok = _train_tokenizer(cfg)
    tok.save(saved)
    return tok


def _prebuilt_vocab(cfg: PretrainConfig):
    """(tokenizer, folder) of `data build --tokenizer train` for this corpus and vocabulary settings, else None."""
    from bertbench.model.vocab_cache import prebuilt_vocab

    try:
        return prebuilt_vocab(cfg)
    except (OSError, BertbenchError):
        return None  # a corpus that does not resolve is named by the training that follows


def _train_tokenizer(cfg: PretrainConfig):
    """WordPiece trained on the corpus, with a progress line every so often: reading and counting the words,
    then the trainer's merges (a minute on cpu-quick's corpus, silent otherwise)."""
    from bertbench.data.corpus import iter_documents
    from bertbench.model.tokenizer import WordPieceTokenizer
    from bertbench.runtime.progress import Heartbeat, every_seconds, say

    read = {"sentences": 0, "done": False}

    def sentences():
        for doc in iter_documents(cfg.data.corpus, cfg.data.max_documents, cfg.data.doc_sentences):
            for sentence in doc:
                read["sentences"] += 1
                yield sentence
        read["done"] = True

    def status() -> str:
        if read["done"]:
            return f"learning {cfg.tokenizer_vocab_size:,} pieces from {read['sentences']:,} sentences"
        return f"{read['sentences']:,} sentences read"

    with Heartbeat(every_seconds(), say, "pretrain: training the tokenizer", status):
        return WordPieceTokenizer.train(sentences(), vocab_size=cfg.tokenizer_vocab_size, lowercase=cfg.lowercase)


def model_config_for(cfg: PretrainConfig, vocab_size: int) -> ModelConfig:
    longest = max([cfg.data.max_seq_len] + [p.max_seq_len for p in cfg.phases])
    overrides = dict(cfg.model)
    overrides.setdefault("max_position_embeddings", max(512, longest))
    return ModelConfig.from_size(cfg.model_size, vocab_size=vocab_size, causal=is_causal(cfg.objective), **overrides)


def phase_plan(cfg: PretrainConfig) -> list[tuple[Optional[int], DataConfig, int]]:
    """[(first step, data config, batch size)] — one entry unless a multi-phase schedule is set. Under a
    wall-clock budget the first step of a later phase is None: the clock decides it (PhasedBatches)."""
    if not cfg.phases:
        return [(0, cfg.data, cfg.batch_size)]
    total = sum(p.fraction for p in cfg.phases)
    if abs(total - 1.0) > 1e-6:
        raise BertbenchError(f"phases: fractions sum to {total}, expected 1.0")
    plan, start = [], 0
    for p in cfg.phases:
        dcfg = replace(cfg.data, max_seq_len=p.max_seq_len)
        if p.max_predictions_per_seq is not None:
            dcfg = replace(dcfg, max_predictions_per_seq=p.max_predictions_per_seq)
        plan.append((start if (start == 0 or not cfg.budget_minutes) else None, dcfg, p.batch_size or cfg.batch_size))
        start += round(p.fraction * cfg.max_steps)
    return plan


def phase_seconds(cfg: PretrainConfig) -> list[float]:
    """Under a budget: the training second at which each later phase begins (cumulative fractions)."""
    if not (cfg.budget_minutes and cfg.phases):
        return []
    return [acc * cfg.budget_minutes * 60 for acc in itertools.accumulate(p.fraction for p in cfg.phases[:-1])]


# ----------------------------------------------------------------------------------------------
# Callbacks


def _callbacks(cfg: PretrainConfig, out_dir: Path, stop_at_step: Optional[int], signals, precision: str, start_step: int):
    from bertbench.training.callbacks import FiniteGuard, PeriodicCheckpoint, RunLog

    guard = FiniteGuard(out_dir, precision, saved_step=start_step if start_step else None)
    # the step cap; a budget may end the run sooner, on the clock
    return guard, RunLog(cfg, out_dir, guard, cfg.max_steps), PeriodicCheckpoint(cfg, out_dir, guard, signals, stop_at_step)


def snapshot_steps(cfg: PretrainConfig) -> list[int]:
    """The steps that keep a model checkpoint for Figure 5: the inner boundaries of `snapshots` equal spans."""
    n = cfg.snapshots
    return sorted({round(k * cfg.max_steps / n) for k in range(1, n)} - {0, cfg.max_steps}) if n > 1 else []


# What does not make a pre-training another procedure, beside what a resume may change (RESUMABLE_CHANGES: no
# training step depends on it): its seed (one procedure is run with several), what it runs on, what it
# evaluates and keeps, and settings resolved elsewhere in the identity (the model's shape and vocabulary are its
# model_config; precision is the one it ran at). The corpus counts by its files' names, not their paths on this
# machine; the tokenizer likewise. The device and node counts are left out: batch_size is the global batch, and
# global row r of step k is the same instance with the same mask whoever collates it (training.batches), so batch 8
# on 1, 2 or 4 processes is one procedure (tests/test_pretrain_ddp.py, tests/test_batches.py).
_NOT_PROCEDURE = ("seed", "eval_batches", "snapshots", "devices", "accelerator", "strategy", "ddp", "num_nodes",
                  "precision", "model", "model_size", "tokenizer_vocab_size")


def procedure_fingerprint(cfg: PretrainConfig, model_config: dict[str, Any]) -> str:
    """A short hash of every setting that makes this pre-training what it is (optimiser, schedule, phases,
    global batches, masking, data preparation, the model's shape), and of nothing that differs between its seeds
    or machines: two pre-trainings share it exactly when they are seeds of one procedure
    (results.pretraining_procedure)."""
    import hashlib

    skip = {*_NOT_PROCEDURE, *RESUMABLE_CHANGES}
    settings = {k: v for k, v in asdict(cfg).items() if k not in skip}
    data = {k: v for k, v in keyed_data_fields(settings.pop("data")).items() if f"data.{k}" not in skip}
    data["corpus"] = [Path(c).name for c in data["corpus"]]
    # Accumulation changes how a device's share is cut, not the step (each micro-batch's loss is weighted by
    # its share of the step's loss tokens): counted as 1, the value every run without it has always had.
    settings["grad_accum"] = 1
    settings["tokenizer"] = Path(settings["tokenizer"]).name
    identity = json.dumps({**settings, "data": data, "model_config": model_config}, sort_keys=True)
    return "sha256:" + hashlib.sha256(identity.encode()).hexdigest()[:16]


def run_identity(cfg: PretrainConfig, model, data, precision: str, out_dir: Path) -> dict[str, Any]:
    """What a model of this run is, whatever step it was saved at: the summary's fields that a fine-tuning
    record copies as its provenance (with steps and tokens_seen, which the caller adds)."""
    from bertbench.model.bert import count_parameters
    from bertbench.runtime.provenance import code_version, hardware

    mlm = is_masked(cfg.objective)
    shape = asdict(model.cfg)
    return {
        "objective": cfg.objective,
        "full_sentences": cfg.data.full_sentences,
        "mask_ratio": cfg.data.mask_ratio if mlm else None,
        "mask_procedure": cfg.data.mask_procedure if mlm else None,
        "whole_word_mask": cfg.data.whole_word_mask if mlm else None,
        "masking": cfg.data.masking,
        "model_size": cfg.model_size,
        "model_config": shape,
        "procedure_fingerprint": procedure_fingerprint(cfg, shape),
        "parameters": count_parameters(model),  # the real vocabulary's, not its padding
        "max_seq_len": cfg.data.max_seq_len,
        "data_fingerprint": data.fingerprint,
        "precision": precision,
        "code_version": code_version(),
        "hardware": hardware(),
        "run_dir": str(out_dir.resolve()),
    }


def write_lr_trace(path: Path, trace: list[tuple[int, float, float]]) -> None:
    """Every optimiser step's lr: step, training seconds before it, lr (the schedule as it really ran)."""
    from bertbench.runtime.files import atomic_write_text

    lines = ["step,training_seconds,lr"] + [f"{s},{t:.4f},{lr:.6g}" for s, t, lr in trace]
    atomic_write_text(path, "\n".join(lines) + "\n")


def read_checkpoint_step(path: Path) -> int:
    """The step of a Lightning checkpoint, or one line saying it cannot be resumed from (truncated, corrupt)."""
    import torch

    try:
        return int(torch.load(path, map_location="cpu", weights_only=False)["global_step"])
    except Exception as err:  # torch raises RuntimeError, pickle/zip errors, KeyError … for a damaged file
        first = str(err).splitlines()[0][:120] if str(err) else ""
        raise BertbenchError(f"{path}: not a readable Lightning checkpoint ({type(err).__name__}: {first}); it cannot be "
                             "resumed from: delete the folder's checkpoints/ to start over, or choose another --out") from None


# ----------------------------------------------------------------------------------------------
# The run


def pretrain(cfg: PretrainConfig, out_dir: Path, resume: str = "never", stop_at_step: Optional[int] = None,
             extra_callbacks: tuple = ()) -> dict:
    """Run (or resume) pre-training; returns the summary. `resume`: 'never' | 'auto'. `extra_callbacks`:
    Lightning callbacks added to the run's own (`bench quality` probes the model with one).

    One process per run folder (a lock); SIGINT/SIGTERM checkpoint at the next step boundary and raise
    `Interrupted` (see stop_signals)."""
    from bertbench.runtime.devices import first_process, plan_devices
    from bertbench.runtime.run_dir import lock_run_dir, prepare_run_dir
    from bertbench.training.stop_signals import StopSignals

    devices = plan_devices(cfg.accelerator, cfg.devices)  # before any file: devices not here are one line
    if devices.note and first_process():  # said once: the other ranks re-run this command
        print(devices.note, file=sys.stderr, flush=True)
    out_dir = Path(out_dir)
    before = sorted(p.name for p in out_dir.iterdir()) if out_dir.is_dir() else None
    prepare_run_dir(out_dir)
    signals = StopSignals().install()
    try:
        with lock_run_dir(out_dir):
            try:
                return _pretrain_locked(cfg, out_dir, resume, stop_at_step, signals, tuple(extra_callbacks))
            except BaseException:
                _remove_half_made(out_dir, before)
                raise
    finally:
        signals.restore()


def _remove_half_made(out_dir: Path, before: Optional[list[str]]) -> None:
    """After a failed run with nothing to resume (no checkpoints/last.ckpt): remove what it made in `out_dir`,
    the whole folder if it made that (config.yaml, .lock, a trained tokenizer, logs), so the folder is as it was
    and a rerun starts clean. With a checkpoint everything stays: it is the run's to resume (--resume auto).
    Only the process that holds the folder's lock gets here (the other ranks of a DDP run never take it)."""
    import shutil

    from bertbench.runtime.run_dir import is_spawned_rank

    if is_spawned_rank() or (out_dir / "checkpoints" / "last.ckpt").is_file():
        return
    made = [out_dir] if before is None else [p for p in out_dir.iterdir() if p.name not in before]
    for path in made:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def check_resume_config(saved_file: Path, cfg: PretrainConfig) -> None:
    """Refuse to resume a run under a different config, naming the keys; RESUMABLE_CHANGES may differ."""
    import yaml

    from bertbench.config import to_dict
    from bertbench.config_files import _yaml_loader, load_yaml

    if not saved_file.is_file():
        return
    saved = load_yaml(saved_file)
    now = yaml.load(yaml.safe_dump(to_dict(cfg), sort_keys=False), Loader=_yaml_loader())  # noqa: S506 (SafeLoader)
    differ = [k for k in _diff_keys(saved, now) if k not in RESUMABLE_CHANGES + DEVICE_CHANGES]
    if "tokenizer" in differ and _same_tokenizer(saved.get("tokenizer"), now.get("tokenizer"), saved_file.parent):
        differ.remove("tokenizer")  # the same vocabulary at another path: a study folder copied or moved
    if differ:
        shown = "; ".join(f"{k}: {_get(saved, k)!r} → {_get(now, k)!r}" for k in differ[:6])
        raise BertbenchError(
            f"{saved_file.parent}: --resume auto with a different config ({shown}); only "
            f"{', '.join(RESUMABLE_CHANGES + DEVICE_CHANGES)} may change on resume. Rerun with the original settings or choose another --out"
        )


# What may change when a run is resumed: how often it evaluates, logs and checkpoints, loader workers and
# the processes that tokenise the corpus (the same arrays whatever their number; its default became
# "every core"). None of them changes a training step, so the resumed run stays bit-identical.
RESUMABLE_CHANGES = ("eval_every", "log_every", "checkpoint_every", "num_workers", "compile",
                     *(f"data.{f}" for f in DATA_SPEED_ONLY))
# ... and the processes it runs on: the global batches stay the same (batch_size is global and each row's data is
# keyed by its place in it; a count that does not divide it is refused at start, training.batches.device_batch).
# The resumed run is the same procedure on the same data, equal to the uninterrupted one up to the order of
# floating-point sums and its dropout draws, which are keyed by rank (tests/test_pretrain_ddp.py).
DEVICE_CHANGES = ("devices", "num_nodes", "strategy")


def _same_tokenizer(saved: Any, now: Any, run_dir: Path) -> bool:
    """Whether a tokenizer given by another path is the run's own: the same fingerprint as the saved path where
    that still exists, else the same vocabulary as the copy the run keeps (RUN/tokenizer/vocab.txt)."""
    from bertbench.model.tokenizer import tokenizer_fingerprint

    if not (isinstance(saved, str) and isinstance(now, str)) or "train" in (saved, now) or not Path(now).exists():
        return False
    if Path(saved).exists():
        return tokenizer_fingerprint(saved) == tokenizer_fingerprint(now)
    kept, vocab = run_dir / "tokenizer" / "vocab.txt", Path(now) if Path(now).is_file() else Path(now) / "vocab.txt"
    return kept.is_file() and vocab.is_file() and kept.read_bytes() == vocab.read_bytes()


def _diff_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str) for d in _diff_keys(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [prefix.rstrip(".")]


def _get(d: dict, dotted: str) -> Any:
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def _pretrain_locked(cfg: PretrainConfig, out_dir: Path, resume: str, stop_at_step: Optional[int], signals,
                     extra_callbacks: tuple = ()) -> dict:
    import warnings

    from bertbench.training.lightning_compat import lightning as L
    from bertbench.training.stop_signals import Interrupted

    last_ckpt = out_dir / "checkpoints" / "last.ckpt"
    finished, resuming, start_step = _start_or_resume(cfg, out_dir, resume, last_ckpt)
    if finished is not None:
        return finished
    device_type, precision = _device_and_precision(cfg)
    # Our loader resumes by construction (batch k is a function of k; StepSampler starts at the restored step).
    # lightning workaround: mid-epoch-resume-warning
    warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch ended")
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    t_start = time.perf_counter()
    tokenizer = load_or_train_tokenizer(cfg, out_dir, resuming=resuming)
    plan = phase_plan(cfg)
    datas = _build_data(cfg, plan, tokenizer)
    prep_seconds = time.perf_counter() - t_start

    model, module, eval_fn, fused, step = _build_module(cfg, tokenizer, datas[-1], device_type, precision, out_dir,
                                                        resuming)
    guard, run_log, periodic = _callbacks(cfg, out_dir, stop_at_step, signals, precision, start_step)
    identity = lambda: run_identity(cfg, model, datas[-1], precision, out_dir)  # noqa: E731
    callbacks, progress_bar = _all_callbacks(cfg, out_dir, tokenizer, identity, (guard, run_log, periodic), step,
                                             extra_callbacks)
    trainer = _trainer(cfg, out_dir, precision, fused, progress_bar, callbacks)
    loader = _loader(cfg, plan, datas, tokenizer, trainer, module, step, start_step, device_type)
    # weights_only=False: our own checkpoint holds the optimiser and RNG state (said here, so Lightning needn't)
    trainer.fit(module, train_dataloaders=loader, ckpt_path=str(last_ckpt) if last_ckpt.is_file() else None, weights_only=False)
    signals.immediate()  # from here (final eval, checkpoint/, summary) a signal stops at once: last.ckpt is intact
    if periodic.signal_step is not None:
        raise Interrupted(signals.received or 15, periodic.signal_step, checkpointed=True)
    if trainer.interrupted:
        raise KeyboardInterrupt
    if stop_at_step is not None and trainer.global_step == stop_at_step < cfg.max_steps:
        return {"stopped_at_step": trainer.global_step}

    guard.check()
    if not trainer.is_global_zero:  # the other processes of a multi-process run: rank 0 evaluates and writes
        return {"worker_rank": trainer.global_rank}
    summary = _final_summary(cfg, trainer, module, step, eval_fn, run_log, identity, prep_seconds, datas[-1])
    if (budget := out_dir / BUDGET_FILE).is_file():  # the steps a study's time budget bought (studies.budget)
        summary.schedule["steps_budget"] = json.loads(budget.read_text())
    _write_outputs(cfg, out_dir, module, tokenizer, summary)
    return summary.to_json()


def _start_or_resume(cfg: PretrainConfig, out_dir: Path, resume: str, last_ckpt: Path) -> tuple[Optional[dict], bool, int]:
    """(the summary of a run already finished, or None; resuming?; the step it resumes from). Writes config.yaml."""
    if (out_dir / "summary.json").is_file():
        if resume == "auto":  # nothing left to do, if it is the same run
            check_resume_config(out_dir / "config.yaml", cfg)
            from bertbench.results import read_summary

            return read_summary(out_dir / "summary.json").to_json(), False, 0
        raise BertbenchError(f"{out_dir}: holds a finished run (summary.json); choose another --out")
    from bertbench.runtime.progress import every_seconds, say

    resuming, start_step = last_ckpt.is_file(), 0
    if resuming:
        if resume != "auto":
            raise BertbenchError(f"{out_dir}: holds an interrupted run; continue it with --resume auto, or choose "
                                 "another --out")
        check_resume_config(out_dir / "config.yaml", cfg)
        start_step = read_checkpoint_step(last_ckpt)  # early: a damaged file fails before any work
        say(f"resuming {out_dir} from its checkpoint of step {start_step}")
    if every_seconds() is not None and first_process():  # a progress line, once per run
        say(f"pretrain: {cfg.model_size} {cfg.objective} → {out_dir}; ends {limits_text(cfg)}")
    save_config(cfg, out_dir / "config.yaml")
    return None, resuming, start_step


def _device_and_precision(cfg: PretrainConfig) -> tuple[str, str]:
    import torch

    from bertbench.runtime.provenance import resolve_precision

    accelerator = cfg.accelerator
    device_type = "cuda" if (accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()) else "cpu"
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise BertbenchError(f"--accelerator {accelerator}: no CUDA GPU is available here; use auto or cpu")
    precision = resolve_precision(cfg.precision, device_type)
    # lightning workaround: no-fp16-on-cpu (Lightning would run bf16 and we would record 16-mixed)
    if precision == "16-mixed" and device_type == "cpu":
        raise BertbenchError(f"--precision {cfg.precision}: fp16 mixed precision needs a GPU; on CPU use bf16-mixed, 32 or auto")
    return device_type, precision


def _build_data(cfg: PretrainConfig, plan, tokenizer) -> list:
    """One pre-training data set per phase of the plan."""
    from bertbench.data.instances import build_pretraining_data
    from bertbench.runtime.progress import Heartbeat, every_seconds, say

    with Heartbeat(every_seconds(), say, "pretrain: preparing the data (corpus tokenisation, instances)"):
        return [build_pretraining_data(dcfg, tokenizer, objective=cfg.objective, seed=cfg.seed) for _, dcfg, _ in plan]


def _build_module(cfg: PretrainConfig, tokenizer, data, device_type: str, precision: str, out_dir: Path,
                  resuming: bool = False):
    """(model, its Lightning module, the held-out eval function, fused AdamW?, the training step)."""
    from bertbench.model.bert import BertForPreTraining
    from bertbench.training.heldout import make_eval_fn
    from bertbench.training.pretrain_module import PretrainModule
    from bertbench.training.step import STEP_FILE, choose_step

    model = BertForPreTraining(model_config_for(cfg, tokenizer.vocab_size), nsp=trains_nsp(cfg.objective))
    step = choose_step(cfg, model, device_type, precision, out_dir / STEP_FILE, resuming)
    eval_fn = make_eval_fn(cfg, data, tokenizer, precision)
    # Fused AdamW clips inside the module; with fp16's grad scaler or FSDP's sharded gradients the Trainer must
    # clip (it unscales and gathers first), so those keep foreach AdamW.
    fused = precision != "16-mixed" and "fsdp" not in str(cfg.strategy).lower()
    module = PretrainModule(model, cfg.optim, cfg.max_steps,
                            budget_seconds=cfg.budget_minutes * 60 if cfg.budget_minutes else None,
                            eval_fn=eval_fn, eval_every=cfg.eval_every, fused_optimizer=fused, dropout_seed=cfg.seed,
                            step=step, sync_every=cfg.log_every)
    return model, module, eval_fn, fused, step


def _all_callbacks(cfg: PretrainConfig, out_dir: Path, tokenizer, identity: Callable[[], dict], own: tuple, step,
                   extra_callbacks: tuple) -> tuple[list, bool]:
    """(the run's callbacks in their order, whether Lightning shows a progress bar)."""
    from bertbench.runtime.progress import every_seconds, say
    from bertbench.training.callbacks import Snapshots  # snapshots/step-N for Figure 5
    from bertbench.training.progress_lines import ProgressLines, StepProgressBar

    guard, run_log, periodic = own
    snapshots = [Snapshots(cfg, out_dir, tokenizer, identity, run_log, snapshot_steps(cfg))] if snapshot_steps(cfg) else []
    # in this order: the guard's note comes before the row, the snapshot and the checkpoint
    callbacks = [guard, run_log, *snapshots, periodic, *extra_callbacks]
    every = every_seconds()
    progress_bar = every is not None and sys.stdout.isatty()  # in a log, a bar shows nothing until the end
    if progress_bar:
        callbacks.append(StepProgressBar(leave=True, run_log=run_log))
    elif every is not None:
        callbacks.append(ProgressLines(every, None if cfg.budget_minutes else cfg.max_steps, say, run_log, step))
    return callbacks, progress_bar


def _trainer(cfg: PretrainConfig, out_dir: Path, precision: str, fused: bool, progress_bar: bool, callbacks: list):
    from bertbench.training.lightning_compat import lightning as L

    devices: Any = int(cfg.devices) if cfg.devices.isdigit() else cfg.devices
    try:  # max_steps always caps the run; with a wall-clock budget the clock may end it first (PretrainModule)
        return L.Trainer(
            accelerator=cfg.accelerator, devices=devices, strategy=_strategy(cfg), num_nodes=cfg.num_nodes,
            precision=precision, max_steps=cfg.max_steps, max_epochs=-1 if cfg.budget_minutes else None,
            accumulate_grad_batches=cfg.grad_accum,
            gradient_clip_val=None if fused else (cfg.optim.grad_clip or None), logger=False, enable_checkpointing=False,
            enable_model_summary=False, enable_progress_bar=progress_bar, callbacks=callbacks,
            use_distributed_sampler=False,  # our batches are already sharded per rank and keyed by step
            num_sanity_val_steps=0, limit_val_batches=0, default_root_dir=str(out_dir),
        )
    except (ValueError, TypeError, ImportError) as err:  # lightning workaround: trainer-errors-one-line
        detail = " ".join(str(err).split())[:300]
        raise BertbenchError(f"--accelerator {cfg.accelerator} --devices {cfg.devices} --strategy {cfg.strategy}: "
                             f"Lightning cannot run this ({detail})") from None


def _strategy(cfg: PretrainConfig):
    """cfg.strategy for Lightning; "ddp" as a DDPStrategy with the recipe's bucket settings and comm hook
    (cfg.ddp: DdpConfig)."""
    if cfg.strategy != "ddp":
        return cfg.strategy
    from lightning.pytorch.strategies import DDPStrategy

    hook = None
    if cfg.ddp.comm_hook == "bf16":
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import bf16_compress_hook as hook
    return DDPStrategy(ddp_comm_hook=hook, bucket_cap_mb=cfg.ddp.bucket_cap_mb,
                       gradient_as_bucket_view=cfg.ddp.gradient_as_bucket_view)


def _loader(cfg: PretrainConfig, plan, datas: list, tokenizer, trainer, module, step, start_step: int,
            device_type: str):
    """This rank's batches, keyed by step across the phases (the module learns where each phase starts)."""
    import torch
    from torch.utils.data import DataLoader

    from bertbench.config import loader_workers
    from bertbench.data.masking import make_collator
    from bertbench.training.batches import PhasedBatches, StepBatchDataset, StepSampler

    rank, world = trainer.global_rank, trainer.world_size
    # bs: the phase's global batch; this rank collates its rows
    step_sets = [StepBatchDataset(d.train, make_collator(dcfg, tokenizer, cfg.objective, seed=cfg.seed, static=step.static),
                                  bs, cfg.seed, rank, world, cfg.grad_accum) for d, (_, dcfg, bs) in zip(datas, plan)]
    batches = PhasedBatches([s for s, _, _ in plan], step_sets, cfg.grad_accum)
    module.attach_phases(batches, phase_seconds(cfg))
    workers = loader_workers(cfg, device_type)
    return DataLoader(
        batches, batch_size=None,
        sampler=StepSampler(start_step * cfg.grad_accum, (len(batches) if cfg.budget_minutes else cfg.max_steps * cfg.grad_accum)),
        num_workers=workers, persistent_workers=workers > 0,
        pin_memory=device_type == "cuda",
        # its own generator: creating a loader iterator draws a seed, and from the global RNG that
        # draw would shift the dropout stream of a resumed run against an uninterrupted one
        generator=torch.Generator().manual_seed(cfg.seed),
    )


def _final_summary(cfg: PretrainConfig, trainer, module, step, eval_fn, run_log, identity: Callable[[], dict],
                   prep_seconds: float, data):
    """The last held-out evaluation and what the run was and reached (summary.json, a results.PretrainSummary)."""
    from bertbench.results import PretrainSummary
    from bertbench.runtime.provenance import library_versions, now_iso
    from bertbench.training.pretrain_module import perplexity

    fault_point("final_eval")
    final_eval = eval_fn(module.model) if eval_fn else {}
    step.record(cfg.model_size)  # for the next run's choice: a median after warm-up, or nothing
    if "mlm_loss_paper_masking" in final_eval:
        final_eval["mlm_ppl_paper_masking"] = perplexity(final_eval["mlm_loss_paper_masking"])
    if "clm_loss" in final_eval:
        final_eval["clm_ppl"] = perplexity(final_eval["clm_loss"])
    # batch_size: the global batch, whatever the processes and micro-batches
    return PretrainSummary(**identity(), steps=trainer.global_step, batch_size=cfg.batch_size, tokens_seen=run_log.tokens,
                           loss_tokens=run_log.loss_tokens, wall_seconds=round(module.elapsed(), 2),
                           schedule=module.schedule_summary(), preprocessing_seconds=round(prep_seconds, 2),
                           tokens_per_second=round(run_log.tokens / max(1e-9, module.elapsed()), 1),
                           final_train_loss=run_log.last_train_loss, heldout=final_eval, data=data.stats,
                           library_versions=library_versions(), step=step.summary(), date=now_iso())


def _write_outputs(cfg: PretrainConfig, out_dir: Path, module, tokenizer, summary) -> None:
    """checkpoint/, lr_schedule.csv, then summary.json last: its presence means "finished"."""
    from bertbench.config import to_dict
    from bertbench.model.checkpoint import save_checkpoint
    from bertbench.results import write_summary

    save_checkpoint(out_dir / "checkpoint", module.model.cpu(), tokenizer, run_config=to_dict(cfg), summary=summary)
    write_lr_trace(out_dir / "lr_schedule.csv", module.lr_trace)
    fault_point("before_summary")
    write_summary(out_dir / "summary.json", summary)  # last: its presence means "finished"
