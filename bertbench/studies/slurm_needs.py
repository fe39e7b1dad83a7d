"""What a study's Slurm job asks for: CPUs per task and memory per node, from the stages it runs (`run --launcher
slurm`; `--cpus-per-task` and `--mem` override them). Slurm's defaults are a cluster's own (often one CPU, and
memory per CPU or the whole node): a job that names neither gets what the site decided, not what it needs.

The estimates are generous bounds, not measurements: a pre-training's host memory is its instances and loader
processes, plus (on a CPU, where the weights, gradients and Adam's two moments live in host memory) 16 bytes a
parameter, twice over for the peaks of a step; a fine-tuning holds a smaller model and its task's examples.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bertbench.config import loader_workers, model_shape

# GB of host memory a process needs before any model: Python, torch, Lightning and the data path's buffers
BASE_GB = 4
LOADER_GB = 2  # each data-loader process (a copy of the collating state)
REPORT_GB = 2
BYTES_PER_PARAMETER = 16  # fp32 weights, gradients, Adam's two moments
CPU_THREADS = 4  # CPUs per task for a CPU training job where none are asked for (torch's threads)


@dataclass(frozen=True)
class Needs:
    cpus_per_task: int
    mem_gb: int  # per node (Slurm's --mem)


def parameters(model_size: str, vocab_size: int) -> int:
    """BERT's parameter count, near enough: 12·L·H² in the layers, V·H in the embeddings."""
    layers, hidden, _ = model_shape(model_size)
    return 12 * layers * hidden * hidden + vocab_size * hidden


def pretrain_needs(cfg: Any, tasks_per_node: int, on_gpu: bool) -> Needs:
    """One task per GPU (or one task on a CPU); its loader processes each take a CPU beside the task's own."""
    workers = loader_workers(cfg, "cuda" if on_gpu else "cpu")
    model_gb = 0 if on_gpu else 2 * BYTES_PER_PARAMETER * parameters(cfg.model_size, cfg.tokenizer_vocab_size) / 1e9
    per_task = BASE_GB + LOADER_GB * workers + model_gb
    cpus = 1 + workers if on_gpu else max(CPU_THREADS, 1 + workers)
    return Needs(cpus, math.ceil(per_task * tasks_per_node))


def finetune_needs(on_gpu: bool) -> Needs:
    return Needs(2 if on_gpu else CPU_THREADS, BASE_GB + (0 if on_gpu else 2))


def light_needs() -> Needs:
    """The report, the corpus's tokenising: CPU work in one process."""
    return Needs(1, REPORT_GB)


def corpus_needs(cfg: Any) -> Needs:
    """Tokenising the corpus into its cache: `data.num_proc` processes (0, every core: CPU_THREADS of them)."""
    procs = cfg.data.num_proc or CPU_THREADS
    return Needs(procs, BASE_GB + procs)  # a GB for each process's share of the text and its token arrays
