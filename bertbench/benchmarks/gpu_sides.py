"""The sides `bench gpu` times (docs/performance-gpu.md lists them), and how each one runs its steps under a
`Measurement`: every side from the same initial weights, on the same synthetic batches
(`pretrain.synthetic_batches`), at bf16 autocast with fused AdamW and clipping at 1.0.
"""
from __future__ import annotations

import copy
import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from bertbench.benchmarks import pretrain as bench_pretrain
from bertbench.benchmarks.gpu_measure import Measurement
from bertbench.config import ModelConfig, OptimConfig


@dataclass(frozen=True)
class SideSpec:
    name: str
    impl: str  # "bertbench" | "transformers"
    loop: str  # "bare" | "lightning"
    compiled: bool
    batch_size: int
    budget_s: float  # the most seconds it may take, model building and compiling included
    min_s: float  # the least worth starting it with: a later side keeps this much in reserve
    optional: bool = False  # run only with time to spare ("if time is left")


@dataclass(frozen=True)
class Shape:
    """What one run of the check measures: the model, the batches, the steps, how it compiles."""

    model_size: str
    vocab_size: int
    seq_len: int
    batch_size: int  # the headline batch
    link_batch: int  # the batch of the old GPU figure, for the last side
    warmup: int
    steps: int
    compile_options: tuple[tuple[str, str], ...] = ()  # torch.compile keyword arguments (the dry run: eager backend)


def sides(shape: Shape) -> list[SideSpec]:
    """Most important first: a timeout leaves the lines of every side before it."""
    B = shape.batch_size
    return [
        SideSpec("transformers_bf16", "transformers", "bare", False, B, 90, 20),
        SideSpec("bertbench_bf16", "bertbench", "bare", False, B, 60, 20),
        SideSpec("bertbench_bf16_compiled", "bertbench", "bare", True, B, 240, 90),
        SideSpec("bertbench_bf16_lightning", "bertbench", "lightning", False, B, 90, 30),
        SideSpec("transformers_bf16_compiled", "transformers", "bare", True, B, 240, 120, optional=True),
        SideSpec(f"bertbench_bf16_batch{shape.link_batch}", "bertbench", "bare", False, shape.link_batch, 45, 15),
    ]


class Inputs:
    """The weights every side starts from and the batches of each batch size (CPU copies; on the device once)."""

    def __init__(self, shape: Shape, device_type: str):
        from bertbench.model.bert import BertForPreTraining

        self.shape, self.device_type = shape, device_type
        self.cfg = ModelConfig.from_size(shape.model_size, vocab_size=shape.vocab_size)
        torch.manual_seed(0)
        self.initial = BertForPreTraining(self.cfg).train()  # on the CPU; each side copies it
        self._cpu: dict[int, list[dict]] = {}

    def cpu_batches(self, batch_size: int, n: int = 4) -> list[dict]:
        if batch_size not in self._cpu:
            self._cpu[batch_size] = bench_pretrain.synthetic_batches(self.cfg, n, batch_size, self.shape.seq_len)
        return self._cpu[batch_size]

    def device_batches(self, batch_size: int) -> list[dict]:
        return [{k: v.to(self.device_type) for k, v in b.items()} for b in self.cpu_batches(batch_size)]


def run_side(spec: SideSpec, inputs: Inputs, m: Measurement) -> None:
    """Run `spec`'s warm-up, timed and profiled steps under `m`."""
    (_run_lightning if spec.loop == "lightning" else _run_bare)(spec, inputs, m)


def _run_bare(spec: SideSpec, inputs: Inputs, m: Measurement) -> None:
    from bertbench.model.bert import compile_step
    from bertbench.training.optim import make_adamw

    dev, options = inputs.device_type, dict(inputs.shape.compile_options)
    if spec.impl == "transformers":
        model = bench_pretrain.build_hf_pretraining(inputs.cfg, inputs.initial.state_dict()).to(dev)
        opt = bench_pretrain.hf_adamw(model, OptimConfig().lr, OptimConfig().weight_decay)
        forward = bench_pretrain.hf_forward
        if spec.compiled:
            model = torch.compile(model, **options)
    else:
        model = copy.deepcopy(inputs.initial).to(dev)
        opt = make_adamw(model, OptimConfig(), dev)
        forward = functools.partial(bench_pretrain.ours_forward, static=True)
        if spec.compiled:  # compiled once: the training step's own compiled forward (model.bert.compile_step)
            call = compile_step(model, **options)
            forward = lambda _, b: bench_pretrain.ours_forward(call, b, static=True)  # noqa: E731
    step = bench_pretrain.train_step(model, opt, forward, inputs.device_batches(spec.batch_size), bf16=True,
                                     device_type=dev, wait=False)
    for i in range(m.last + 1):
        m.before(i)
        loss = step(i)
        m.after(i, loss)


def _run_lightning(spec: SideSpec, inputs: Inputs, m: Measurement) -> None:
    """`bertbench pretrain`'s Lightning loop around our model: its module, callbacks and Trainer, timed by one
    more callback; the run's files (metrics.csv) go to a temporary folder."""
    from bertbench.training.stop_signals import StopSignals

    signals = StopSignals().install()
    try:
        with tempfile.TemporaryDirectory(prefix="bertbench-gpu-check-") as tmp:
            trainer, module, loader = _lightning_parts(spec, inputs, m, Path(tmp), signals)
            trainer.fit(module, train_dataloaders=loader)
    finally:
        signals.restore()


def _lightning_parts(spec: SideSpec, inputs: Inputs, m: Measurement, out_dir: Path, signals):
    """(Trainer, PretrainModule, DataLoader) as `training.pretrain_run` builds them for a run of this shape: the one
    place that follows that module's private helpers (the lead adapts it if they change)."""
    from bertbench.training.lightning_compat import lightning as L
    from torch.utils.data import DataLoader

    from bertbench.config import PretrainConfig
    from bertbench.training import pretrain_run
    from bertbench.training.pretrain_module import PretrainModule
    from bertbench.training.step import fixed_step

    cuda = inputs.device_type == "cuda"
    cfg = PretrainConfig(model_size=inputs.shape.model_size, batch_size=spec.batch_size, max_steps=m.last + 1,
                         precision="bf16-mixed", accelerator="gpu" if cuda else "cpu", devices="1", compile="off",
                         eval_every=0, checkpoint_every=0, num_workers=0)
    model = copy.deepcopy(inputs.initial)
    step = fixed_step(static=True)
    module = PretrainModule(model, cfg.optim, cfg.max_steps, fused_optimizer=True, dropout_seed=cfg.seed,
                            step=step, sync_every=cfg.log_every)
    own = pretrain_run._callbacks(cfg, out_dir, None, signals, cfg.precision, 0)

    class Timed(L.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            m.before(batch_idx)

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            m.after(batch_idx, outputs["loss"] if isinstance(outputs, dict) else outputs)

    callbacks, progress_bar = pretrain_run._all_callbacks(cfg, out_dir, None, lambda: {}, own, step, (Timed(),))
    trainer = pretrain_run._trainer(cfg, out_dir, cfg.precision, True, progress_bar, callbacks)
    batches = [bench_pretrain.static_batch(b) for b in inputs.cpu_batches(spec.batch_size)]
    step_batches = [batches[i % len(batches)] for i in range(cfg.max_steps)]  # the few batches in turn
    loader = DataLoader(step_batches, batch_size=None, shuffle=False, num_workers=0, pin_memory=cuda)
    return trainer, module, loader


def release(compiled: bool, device_type: str) -> None:
    """Between sides: the last side's graphs and cached device memory go."""
    import gc

    if compiled:
        torch._dynamo.reset()
    gc.collect()
    if device_type == "cuda":
        torch.cuda.empty_cache()


def flops(spec: SideSpec, inputs: Inputs) -> tuple[float, float]:
    return bench_pretrain.side_flops(inputs.cfg, inputs.shape.seq_len, spec.impl)

