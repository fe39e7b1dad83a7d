"""The plan of a study: which stages a preset needs that are not finished yet, in the order they should run.

    tokenizer-<hash>/                   WordPiece trained once on the corpus, shared by every variant
    pretrain/<variant>[-seed<s>]-<key>/  a pre-training run directory per variant (and pre-training seed)
    results/<same name>/<task>/         result records + predictions files of the fine-tunings of that model

A stage is keyed on what determines its output (studies.keys); a finished one is skipped, an interrupted
pre-training resumes from its checkpoint. Fine-tuning stages wait for their model's pre-training; the
Figure 5 stages are follow-ups of a pre-training, known once its snapshots exist. A pre-training whose config
asks for several devices runs alone, as its own `bertbench pretrain` process (docs/scale-data.md says why).
"""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from bertbench.config import PretrainConfig, is_causal
from bertbench.runtime.files import atomic_write_json, atomic_write_text
from bertbench.studies import keys
from bertbench.studies.preset import (RunPreset, VariantSpec, pretrain_seeds, task_settings, variant_config,
                                      variant_tasks)
from bertbench.studies.scheduler import RERUN_HINT, WIND_DOWN_SECONDS, Stage, StopRequested, passing_signals_on
from bertbench.training.step import BUDGET_FILE, study_compile


@dataclass
class Model:
    """One model that fine-tunes: a variant's pre-training at one seed, or its random init."""

    variant: VariantSpec
    label: str  # stage names: "mlm_nsp", or "mlm_nsp seed2"
    source: str  # FinetuneRequest.model: a checkpoint folder, or random:<size>
    folder: str  # results/<folder>/
    key: str  # what the model is (studies.keys.finetune_key's model_key)
    pretraining: Optional[str] = None  # the name of its pre-training stage, when this invocation runs it


@dataclass
class Planner:
    preset: RunPreset
    data_dir: Path
    out: Path
    tokenizer: str  # the tokenizer every variant uses (a trained folder, or the recipe's vocab)
    echo: Callable[[str], None]
    devices: int = 1  # the study's devices (RunPreset.devices): with several, each pre-training has its own
    stamp: Optional[dict[str, str]] = None  # the pre-registration's, set by `plan` (preregistration_stamp)
    budget: Optional[dict[str, Any]] = None  # the study's step decision (studies.budget): every pre-training's steps

    def plan(self) -> list[Stage]:
        self.stamp = self.preregistration_stamp()
        stages: list[Stage] = []
        models: list[Model] = []
        for v in self.preset.variants:
            for seed in pretrain_seeds(self.preset, v):
                model, pretraining = self.model(v, seed)
                models.append(model)
                stages += [pretraining] if pretraining else []
        # the causal LM (the longest, and it runs alone) before the masked LMs pair up, so that fine-tuning
        # stages fill both workers at the end instead of waiting behind it; the sort is stable
        stages.sort(key=lambda s: not s.alone)
        ft = self.preset.finetune
        for m in models:
            tasks, features = variant_tasks(self.preset, m.variant)
            stages += self.finetune_stages(m, tasks, feature_based=False)
            if features:
                stages += self.finetune_stages(dataclasses.replace(m, folder=m.folder + "-features",
                                                                   label=m.label + " features"),
                                               features, feature_based=True)
        for m in (m for m in models if m.variant.name in ft.figure5_variants):
            pretraining = next((s for s in stages if s.name == m.pretraining), None)
            if pretraining is None:
                stages += self.figure5_stages(m)
            else:  # its snapshots exist only once it has run
                pretraining.then = lambda m=m: self.figure5_stages(m)
        return stages

    def preregistration_stamp(self) -> Optional[dict[str, str]]:
        """A pre-registered study's {sha256, registered_at} (written into results/ before the plan), which every
        record of its fine-tunings carries; None for a study without one."""
        if self.preset.preregistration is None:
            return None
        from bertbench.registration import PREREGISTRATION_FILE, read_stamp

        path = self.out / "results" / PREREGISTRATION_FILE
        return read_stamp(path) if path.is_file() else None

    def model(self, v: VariantSpec, seed: Optional[int]) -> tuple[Model, Optional[Stage]]:
        cfg = dataclasses.replace(variant_config(self.preset, v, self.data_dir), tokenizer=self.tokenizer)
        if v.random_init:
            key = keys.config_hash(["random", cfg.model_size, keys.tokenizer_fingerprint(self.tokenizer)])
            folder = keys.find_keyed_dir(self.out / "results", v.name, key)
            keys.write_key(folder / keys.STAGE_FILE, key)
            return Model(v, v.name, f"random:{cfg.model_size}", folder.name, key), None
        label = v.name if seed is None else f"{v.name}-seed{seed}"
        if seed is not None:
            cfg = dataclasses.replace(cfg, seed=seed)
        if self.budget is not None:
            cfg = dataclasses.replace(cfg, max_steps=self.budget["steps"])
        key = keys.pretrain_key(cfg, self.data_dir)
        run_dir = keys.find_keyed_dir(self.out / "pretrain", label, key)
        name = f"pretrain {label.replace('-seed', ' seed')}"
        model = Model(v, label.replace("-seed", " seed"), str(run_dir / "checkpoint"), run_dir.name, key)
        if (run_dir / "summary.json").is_file():
            self.echo(f"[{name}] done before: {run_dir}")
            return model, None
        model.pretraining = name
        if several_devices(cfg):
            return model, Stage(name, _pretrain_process_stage, (cfg, run_dir, key, name, self.budget), alone=True)
        return model, Stage(name, _pretrain_stage, (cfg, run_dir, key, self.budget),
                            alone=self.devices == 1 and runs_alone(cfg))

    def finetune_stages(self, m: Model, tasks: list[str], feature_based: bool,
                        seeds: Optional[list[int]] = None) -> list[Stage]:
        from bertbench.training.finetune_settings import FinetuneRequest

        stages = []
        for task in tasks:
            req = FinetuneRequest(
                model=m.source, tasks=task, out=self.out / "results" / m.folder, data_dir=self.data_dir,
                tokenizer=self.tokenizer if m.variant.random_init else None, feature_based=feature_based,
                precision=self.preset.pretrain.precision, **task_settings(self.preset.finetune, task, seeds),
            )
            marker = req.out / f"done-{task}.json"
            key = keys.finetune_key(req, task, m.key)
            name = f"finetune {m.label} {task}"
            if keys.finetune_done(marker, key):
                self.echo(f"[{name}] done before: {req.out}")
                continue
            stages.append(Stage(name, _finetune_stage, (req, marker, key, self.stamp),
                                after=m.pretraining, echo_here=True))
        return stages

    def figure5_stages(self, m: Model) -> list[Stage]:
        ft = self.preset.finetune
        snaps = sorted(Path(m.source).parent.glob("snapshots/step-*"), key=lambda p: int(p.name.split("-")[1]))
        return [s for snap in snaps
                for s in self.finetune_stages(
                    Model(m.variant, f"{m.label} {snap.name}", str(snap), f"{m.folder}-{snap.name}",
                          keys.config_hash([m.key, snap.name])),
                    ft.figure5_tasks, feature_based=False, seeds=ft.figure5_seeds or None)]


def runs_alone(cfg: PretrainConfig) -> bool:
    # The causal LM's logits (every position x the vocabulary: 4,096 x 8,192 a step in cpu-hour) are memory
    # traffic, not arithmetic: tiny at 2 threads alone made 36.6k tok/s (cpu-quick), at 1 thread beside a
    # masked LM 8.7k (the first cpu-hour attempt). It takes the whole machine; the masked LMs pair up.
    return is_causal(cfg.objective)


def several_devices(cfg: PretrainConfig) -> bool:
    """Whether a pre-training may run on several processes, so that Lightning launches ranks: more than one
    node, or devices other than one (a count, a list, -1 or auto, which may find several)."""
    d = cfg.devices.strip().strip("[]")
    one = d == "1" or ("," in d and len([x for x in d.split(",") if x.strip()]) == 1)
    return cfg.num_nodes > 1 or not one


def _pretrain_process_stage(cfg: PretrainConfig, run_dir: Path, key: str, name: str,
                            budget: Optional[dict] = None) -> None:
    """A pre-training on several devices as its own `bertbench pretrain --recipe <its config> --resume auto`
    process, with this process's view of the devices: Lightning starts the other ranks by running the command line
    again, which must be the pre-training's, not `bertbench run`'s (whose ranks would each run the study). Its lines
    pass through; its `error:` line becomes this stage's error."""
    import sys
    import threading

    import yaml

    from bertbench.config import to_dict
    from bertbench.errors import BertbenchError
    from bertbench.paths import PROJECT_ROOT

    _start_run_dir(run_dir, key, budget)
    cfg = study_compile(cfg, run_dir.parent.parent)  # the study's step (its folder's step.json), not the key's
    recipe = run_dir / "stage-config.yaml"  # the whole config, so the process trains exactly this stage's
    atomic_write_text(recipe, yaml.safe_dump(to_dict(cfg), sort_keys=False))
    code_root = str(PROJECT_ROOT)  # the folder this bertbench is imported from: the process runs the same code
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([code_root, *filter(None, [os.environ.get("PYTHONPATH")])]))
    argv = [sys.executable, "-m", "bertbench.cli", "pretrain", "--recipe", str(recipe), "--out", str(run_dir),
            "--resume", "auto"]
    # a session of its own (its ranks with it): a terminal's Ctrl-C reaches the study, which passes it on once
    # (studies.scheduler: a second signal would stop the pre-training without its checkpoint)
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True, bufsize=1, start_new_session=True)
    errors: list[str] = []

    def relay() -> None:  # progress goes to stderr: pass it on as it comes, keep the error line back
        for line in proc.stderr:
            if line.startswith("error: "):
                errors.append(line[len("error: "):].rstrip("\n"))
            else:
                sys.stderr.write(line)

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    try:
        code = proc.wait()
    except StopRequested as stop:  # Ctrl-C or SIGTERM: every rank checkpoints at its step and stops
        _stop_process_group(proc, stop.signum)
        reader.join(timeout=10)
        from bertbench.training.pretrain_run import read_checkpoint_step
        from bertbench.training.stop_signals import Interrupted

        last = run_dir / "checkpoints" / "last.ckpt"
        step = read_checkpoint_step(last) if proc.returncode == 128 + stop.signum and last.is_file() else None
        raise Interrupted(stop.signum, step, checkpointed=step is not None) from None
    finally:
        if proc.poll() is None:  # this process is stopping on an error: the pre-training checkpoints and stops
            _stop_process_group(proc, signal.SIGTERM)
    reader.join(timeout=10)
    if code != 0:
        why = errors[-1] if errors else f"exit code {code}" if code > 0 else f"killed ({signal_name(-code)})"
        raise BertbenchError(f"{name} (its own `bertbench pretrain` process, on {cfg.devices} devices): {why}; "
                             f"{RERUN_HINT}")


def _stop_process_group(proc: Any, signum: int) -> None:
    """Send `signum` to the pre-training's process group (it and its ranks), once, and wait for it to end; a
    further signal meanwhile is passed on (it stops the ranks at once); SIGKILL after WIND_DOWN_SECONDS."""
    def send(s: int) -> None:
        with suppress(ProcessLookupError):  # it has just ended
            os.killpg(proc.pid, s)

    with passing_signals_on(send):
        send(signum)
        try:
            proc.wait(timeout=WIND_DOWN_SECONDS)
        except subprocess.TimeoutExpired:
            send(signal.SIGKILL)
            proc.wait()


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _start_run_dir(run_dir: Path, key: str, budget: Optional[dict]) -> None:
    """The stage's key first (the folder is this stage's, finished or not), and the study's step decision, which
    the pre-training's summary copies (studies.budget)."""
    keys.write_key(run_dir / keys.STAGE_FILE, key)
    if budget is not None:
        atomic_write_json(run_dir / BUDGET_FILE, budget)


def _pretrain_stage(cfg: PretrainConfig, run_dir: Path, key: str, budget: Optional[dict] = None) -> None:
    from bertbench.training.pretrain_run import pretrain

    _start_run_dir(run_dir, key, budget)
    pretrain(study_compile(cfg, run_dir.parent.parent), run_dir, resume="auto")  # the study's step, said once


def _finetune_stage(req, marker: Path, key: str, stamp: Optional[dict[str, str]] = None,
                    echo: Optional[Callable[[str], None]] = None) -> None:
    import json

    from bertbench.results import PREREGISTRATION_ENV
    from bertbench.training.finetune_run import run_finetune
    from bertbench.runtime.faults import fault_point
    from bertbench.runtime.progress import say

    fault_point("finetune", req.tasks)  # for the fault tests: BERTBENCH_FAULT=finetune:rte kills this process

    # the records this stage writes carry the study's pre-registration (results.provenance reads it); set for the
    # stage only, so that nothing else this process writes claims a pre-registration it was not run under
    before = os.environ.pop(PREREGISTRATION_ENV, None)
    if stamp:
        os.environ[PREREGISTRATION_ENV] = json.dumps(stamp, sort_keys=True)
    try:
        run_finetune(req, echo=echo or say)
    finally:
        os.environ.pop(PREREGISTRATION_ENV, None)
        if before is not None:
            os.environ[PREREGISTRATION_ENV] = before
    keys.write_key(marker, key)
